/* random_erasing (erase): torchvision.transforms.v2.RandomErasing(p, scale,
 * ratio, value) on the normalised sample, after normalize, where timm's
 * RandomErasing runs: with probability p, ten tries at a box whose area
 * is drawn uniformly from scale times the image's and whose aspect ratio
 * (height over width) log-uniformly from ratio, kept when it is smaller
 * than the image both ways, at a uniform place (RandomErasing.make_params;
 * none of the ten fitting: nothing erased, as there). The box is written
 * with value (R:G:B, in the normalised units: 0 is the mean), or with
 * standard normal values: one per pixel and channel (value=random:
 * torchvision's value="random", timm's mode="pixel") or one per channel
 * (value=random_channel: timm's mode="rand"). The normal values come from a
 * stream keyed by a draw of the op's own, in channel, row, column order
 * whatever the layout. A stage-TENSOR op: float formats only (f32, f16, bf16;
 * NCHW or channels_last), each value rounded to the format as the normalised
 * pixels are. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../common/float16.h"
#include "op.h"

enum { P, SCALE, RATIO, VALUE, NPARAMS };
/* value's words: op_value.word */
enum { VALUE_NUMBERS, VALUE_RANDOM, VALUE_RANDOM_CHANNEL };

static const char *const value_words[] = {"random", "random_channel", NULL};

static const op_param params[NPARAMS] = {
    [P] = {"p", OP_NUMBER, "0.5", 0, 1, 0, NULL,
           "the probability of erasing a box"},
    [SCALE] = {"scale", OP_RANGE, "0.02:0.33", 0, 1, 0, NULL,
               "the box's area over the image's, drawn uniformly"},
    [RATIO] = {"ratio", OP_RANGE, "0.3:3.3", 0, 100, 1, NULL,
               "the box's height over its width, drawn log-uniformly"},
    [VALUE] = {"value", OP_TRIPLE, "0", -65504, 65504, 0, value_words,
               "R:G:B in normalised units (0: the mean), random (a normal "
               "value per pixel and channel) or random_channel (one per "
               "channel)"},
};

typedef struct drawn {
    int32_t apply, top, left, height, width;
    uint32_t pad;
    uint64_t noise; /* the key of the normal values' stream */
} drawn;

enum { LOG_LO, LOG_HI }; /* aux */

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    if (s->format == PL_FORMAT_U8_NHWC)
        return snprintf(why, cap,
                        "erases the normalised sample (after normalize, as "
                        "timm does), and config.format is u8: use f32, f16 "
                        "or bf16"),
               PL_EINVAL;
    op->aux[LOG_LO] = log(op->arg[RATIO].v[0]);
    op->aux[LOG_HI] = log(op->arg[RATIO].v[1]);
    return 0;
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    drawn *d = out;
    if (!(philox_next_double(rng) < op->arg[P].v[0]))
        return;
    const double area = (double)w * h;
    const double lo = op->arg[SCALE].v[0], hi = op->arg[SCALE].v[1];
    const double log_lo = op->aux[LOG_LO], log_hi = op->aux[LOG_HI];
    for (int attempt = 0; attempt < 10; attempt++) {
        const double target = area * (lo + (hi - lo) * philox_next_double(rng));
        const double aspect =
            exp(log_lo + (log_hi - log_lo) * philox_next_double(rng));
        const int eh = op_round(sqrt(target * aspect));
        const int ew = op_round(sqrt(target / aspect));
        if (!(eh < h && ew < w))
            continue;
        d->top = (int)philox_next_below(rng, (uint32_t)(h - eh + 1));
        d->left = (int)philox_next_below(rng, (uint32_t)(w - ew + 1));
        d->height = eh;
        d->width = ew;
        d->noise = (uint64_t)philox_next_u32(rng) << 32 | philox_next_u32(rng);
        d->apply = 1;
        return;
    }
    /* make_params' answer when no try fits: the whole image, not erased. */
    d->height = h;
    d->width = w;
}

/* Standard normal values, Box-Muller on 24-bit uniforms, two a time. */
typedef struct normals {
    philox_stream rng;
    float spare;
    int has_spare;
} normals;

static float normal_next(normals *n)
{
    if (n->has_spare) {
        n->has_spare = 0;
        return n->spare;
    }
    const float u1 = (float)((philox_next_u32(&n->rng) >> 8) + 1) * 0x1p-24f;
    const float u2 = (float)(philox_next_u32(&n->rng) >> 8) * 0x1p-24f;
    const float r = sqrtf(-2.0f * logf(u1)); /* u1 in (0, 1] */
    const float t = 6.28318530717958648f * u2;
    n->spare = r * sinf(t);
    n->has_spare = 1;
    return r * cosf(t);
}

/* Value v into element i of the sample, rounded to its format. */
static void put(const op_tensor *t, size_t i, float v)
{
    if (t->format == PL_FORMAT_F32_NCHW)
        ((float *)t->data)[i] = v;
    else if (t->format == PL_FORMAT_BF16_NCHW)
        ((uint16_t *)t->data)[i] = bfloat16_from_float(v);
    else
        ((uint16_t *)t->data)[i] = float16_from_float(v);
}

static int apply_tensor(const op_instance *op, const void *in, op_tensor *t)
{
    const drawn *d = in;
    if (!d->apply)
        return 0;
    const int mode = op->arg[VALUE].word;
    normals n = {.has_spare = 0};
    philox_stream_init(&n.rng, d->noise, PHILOX_DOMAIN_AUGMENT, 0, 0);
    float value[3];
    for (int c = 0; c < 3; c++)
        value[c] = mode == VALUE_RANDOM_CHANNEL ? normal_next(&n)
                   : mode == VALUE_NUMBERS      ? (float)op->arg[VALUE].v[c]
                                                : 0.0f;
    const size_t w = (size_t)t->w, plane = w * (size_t)t->h;
    for (int c = 0; c < 3; c++)
        for (int y = d->top; y < d->top + d->height; y++)
            for (int x = d->left; x < d->left + d->width; x++) {
                const size_t i =
                    t->channels_last
                        ? ((size_t)y * w + (size_t)x) * 3 + c
                        : (size_t)c * plane + (size_t)y * w + (size_t)x;
                put(t, i, mode == VALUE_RANDOM ? normal_next(&n) : value[c]);
            }
    return 0;
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    return snprintf(buf, cap, "apply=%d,top=%d,left=%d,height=%d,width=%d",
                    d->apply, d->top, d->left, d->height, d->width);
}

const op_kind op_random_erasing = {
    .name = "random_erasing",
    .alias = "erase",
    .stage = OP_STAGE_TENSOR,
    .doc = "erase a random box of the normalised sample: RandomErasing(p, "
           "scale, ratio, value), after normalising as timm runs it",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply_tensor = apply_tensor,
    .describe = describe,
};
