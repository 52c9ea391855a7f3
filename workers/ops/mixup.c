/* mixup: timm's Mixup (timm.data.mixup.Mixup, mode "batch") on a delivered
 * batch: with probability prob, one lambda for the batch from
 * Beta(alpha, alpha), mixup (each sample blended with the batch's reversed
 * order, x * lam + x.flip(0) * (1 - lam)) or, with switch_prob when both
 * alphas are set, cutmix (a box of the reversed batch pasted in, lambda
 * then the share of the image left, correct_lam); and the soft labels
 * timm's mixup_target makes, one-hot rows smoothed by label_smoothing and
 * blended by the same lambda, [batch][classes] float32. Sample i pairs
 * with count - 1 - i (the middle one of an odd count with itself; timm
 * asserts an even batch, pinload mixes the odd last batch of an epoch
 * too). As timm 1.0's code: the box's halves floor and ceil of half its
 * side about the centre; a minmax box anywhere it fits.
 *
 * Arithmetic as PyTorch's on the batch tensor: lambda a double, each
 * product x * (float)lam and x' * (float)(1 - lam) rounded to the
 * format (float32, or a half's bits for f16 and bf16, computed in float
 * as PyTorch computes a half tensor's ops), then their sum rounded; the
 * soft labels in float32 alike. The draws come from the batch's own
 * stream (ops.h: seed, epoch, the batch's number, the rank), in timm's
 * order: the coin against prob, the switch, the beta, the box. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op.h"

enum {
    MIXUP_ALPHA,
    CUTMIX_ALPHA,
    CUTMIX_MINMAX,
    PROB,
    SWITCH_PROB,
    LABEL_SMOOTHING,
    CORRECT_LAM,
    NUM_CLASSES,
    NPARAMS
};

static const op_param params[NPARAMS] = {
    [MIXUP_ALPHA] = {"mixup_alpha", OP_NUMBER, "1", 0, 1000, 0, NULL,
                     "mixup's Beta(alpha, alpha); 0: no mixup"},
    [CUTMIX_ALPHA] = {"cutmix_alpha", OP_NUMBER, "0", 0, 1000, 0, NULL,
                      "cutmix's Beta(alpha, alpha); 0: no cutmix"},
    [CUTMIX_MINMAX] = {"cutmix_minmax", OP_RANGE, NULL, 0, 1, 1, NULL,
                       "the box's sides as fractions of the image's, drawn "
                       "in this range instead of from lambda (cutmix_alpha "
                       "is then 1, as timm sets it)"},
    [PROB] = {"prob", OP_NUMBER, "1", 0, 1, 0, NULL,
              "the probability that a batch is mixed at all"},
    [SWITCH_PROB] = {"switch_prob", OP_NUMBER, "0.5", 0, 1, 0, NULL,
                     "with both alphas, the probability of cutmix"},
    [LABEL_SMOOTHING] = {"label_smoothing", OP_NUMBER, "0.1", 0, 1, 0, NULL,
                         "off = s / classes, on = 1 - s + off"},
    [CORRECT_LAM] = {"correct_lam", OP_BOOL, "true", 0, 1, 0, NULL,
                     "cutmix's lambda from its clipped box"},
    [NUM_CLASSES] = {"num_classes", OP_NUMBER, NULL, 1, 1e9, 0, NULL,
                     "the soft labels' width; default the dataset's "
                     "classes"},
};

typedef struct drawn {
    double lam;     /* 1: the batch is not mixed */
    int32_t cutmix; /* the box replaces, rather than a blend */
    int32_t yl, yh, xl, xh;
    /* What cutmix drew before the box was made: the beta (lam before its
     * correction), and the centre (-1 with cutmix_minmax): described, so
     * that a test can hand timm the same draws. */
    double beta;
    int32_t cy, cx;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    if (s->format == PL_FORMAT_U8_NHWC)
        return snprintf(why, cap,
                        "mixes the normalised floats (as timm does on the "
                        "batch), and config.format is u8: use f32, f16 or "
                        "bf16"),
               PL_EINVAL;
    const op_value *n = &op->arg[NUM_CLASSES];
    if (n->n && n->v[0] != (int)n->v[0])
        return snprintf(why, cap, "num_classes=%g: not a whole number",
                        n->v[0]),
               PL_EINVAL;
    /* timm: a minmax box is cutmix's, alpha 1. */
    if (op->arg[CUTMIX_MINMAX].n)
        op->arg[CUTMIX_ALPHA].v[0] = 1.0;
    if (op->arg[MIXUP_ALPHA].v[0] <= 0 && op->arg[CUTMIX_ALPHA].v[0] <= 0)
        return snprintf(why, cap,
                        "mixup_alpha=0 and cutmix_alpha=0: one of them (or "
                        "cutmix_minmax) must be set, as timm asserts"),
               PL_EINVAL;
    return 0;
}

/* ---- draws ---- */

static double uniform_open(philox_stream *rng) /* (0, 1] */
{
    return 1.0 - philox_next_double(rng);
}

static double normal(philox_stream *rng) /* Box-Muller, one of the pair */
{
    const double u = uniform_open(rng), v = philox_next_double(rng);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Gamma(a, 1), Marsaglia and Tsang's method (a below 1 boosted). */
static double gamma_draw(philox_stream *rng, double a)
{
    if (a < 1.0)
        return gamma_draw(rng, a + 1.0) * pow(uniform_open(rng), 1.0 / a);
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = normal(rng);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        const double u = uniform_open(rng);
        if (u < 1.0 - 0.0331 * x * x * x * x ||
            log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

/* Beta(a, a): X / (X + Y) of two gammas. */
static double beta_draw(philox_stream *rng, double a)
{
    const double x = gamma_draw(rng, a), y = gamma_draw(rng, a);
    return x + y > 0.0 ? x / (x + y) : 0.5;
}

/* numpy's randint(lo, hi): uniform in [lo, hi), lo where the range is
 * empty. */
static int randint(philox_stream *rng, int lo, int hi)
{
    return hi > lo ? lo + (int)philox_next_below(rng, (uint32_t)(hi - lo)) : lo;
}

static int clip(int v, int hi)
{
    return v < 0 ? 0 : v > hi ? hi : v;
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    drawn *d = out;
    d->lam = 1.0;
    const double ma = op->arg[MIXUP_ALPHA].v[0];
    const double ca = op->arg[CUTMIX_ALPHA].v[0];
    /* timm's _params_per_batch. */
    if (!(philox_next_double(rng) < op->arg[PROB].v[0]))
        return;
    if (ma > 0 && ca > 0) {
        d->cutmix = philox_next_double(rng) < op->arg[SWITCH_PROB].v[0];
        d->lam = beta_draw(rng, d->cutmix ? ca : ma);
    } else if (ma > 0) {
        d->lam = beta_draw(rng, ma);
    } else {
        d->cutmix = 1;
        d->lam = beta_draw(rng, ca);
    }
    if (!d->cutmix || d->lam == 1.0) {
        d->cutmix = d->lam == 1.0 ? 0 : d->cutmix;
        return;
    }
    /* cutmix_bbox_and_lam: rand_bbox_minmax, or rand_bbox from lambda. */
    const op_value *mm = &op->arg[CUTMIX_MINMAX];
    d->beta = d->lam;
    d->cy = d->cx = -1;
    if (mm->n) {
        const int cut_h =
            randint(rng, (int)(h * mm->v[0]), (int)(h * mm->v[1]));
        const int cut_w =
            randint(rng, (int)(w * mm->v[0]), (int)(w * mm->v[1]));
        d->yl = randint(rng, 0, h - cut_h + 1);
        d->xl = randint(rng, 0, w - cut_w + 1);
        d->yh = d->yl + cut_h;
        d->xh = d->xl + cut_w;
    } else {
        /* rand_bbox: the box's halves floor(cut / 2) and ceil(cut / 2)
         * about the centre, clipped to the image. */
        const double ratio = sqrt(1.0 - d->lam);
        const int cut_h = (int)(h * ratio), cut_w = (int)(w * ratio);
        d->cy = randint(rng, 0, h);
        d->cx = randint(rng, 0, w);
        d->yl = clip(d->cy - cut_h / 2, h);
        d->yh = clip(d->cy + (cut_h + 1) / 2, h);
        d->xl = clip(d->cx - cut_w / 2, w);
        d->xh = clip(d->cx + (cut_w + 1) / 2, w);
    }
    if (op->arg[CORRECT_LAM].v[0] != 0 || mm->n)
        d->lam =
            1.0 - (double)((d->yh - d->yl) * (d->xh - d->xl)) / (double)(h * w);
}

/* ---- applying ---- */

static int blend_format(pl_format f)
{
    return f == PL_FORMAT_F32_NCHW    ? BLEND_F32
           : f == PL_FORMAT_BF16_NCHW ? BLEND_BF16
                                      : BLEND_F16;
}

/* The batch's pixels mixed as m says (common/blend.h's arithmetic, value
 * by value; a cutmix visits its box alone). */
static void mix_pixels(const blend_batch *m)
{
    const size_t n = blend_values(m), plane = (size_t)m->w * (size_t)m->h;
    for (int i = 0; i < blend_pairs(m); i++) {
        if (!m->cutmix) {
            for (size_t k = 0; k < n; k++)
                blend_pair_value(m, i, k);
            continue;
        }
        for (int c = 0; c < 3; c++)
            for (int y = m->yl; y < m->yh; y++)
                for (int x = m->xl; x < m->xh; x++) {
                    const size_t p = (size_t)y * (size_t)m->w + (size_t)x;
                    blend_pair_value(m, i,
                                     m->channels_last ? p * 3 + (size_t)c
                                                      : (size_t)c * plane + p);
                }
    }
}

static void apply_batch(const op_instance *op, const void *in, op_batch *b)
{
    const drawn *d = in;
    const float lam = (float)d->lam, rest = (float)(1.0 - d->lam);
    b->mix = (blend_batch){
        .data = b->data,
        .sample_bytes = b->sample_bytes,
        .count = b->count,
        .w = b->w,
        .h = b->h,
        .channels_last = b->channels_last,
        .format = blend_format(b->format),
        .lam = lam,
        .rest = rest,
        .cutmix = d->cutmix,
        .yl = d->yl,
        .yh = d->yh,
        .xl = d->xl,
        .xh = d->xh,
    };
    b->mixed = d->lam != 1.0;
    if (b->mixed && !b->pixels_elsewhere)
        mix_pixels(&b->mix);
    /* mixup_target: one_hot(y) * lam + one_hot(y.flip(0)) * (1 - lam),
     * off = s / classes and on = 1 - s + off as float32 (PyTorch's full
     * and scatter_ of Python floats). */
    const double s = op->arg[LABEL_SMOOTHING].v[0];
    const double off_d = s / b->num_classes;
    const float off = (float)off_d, on = (float)(1.0 - s + off_d);
    const float both = off * lam + off * rest;
    for (int i = 0; i < b->count; i++) {
        float *row = b->soft + (size_t)i * (size_t)b->num_classes;
        const int32_t yi = b->labels[i], yj = b->labels[b->count - 1 - i];
        for (int k = 0; k < b->num_classes; k++)
            row[k] = both;
        if (yi >= 0 && yi < b->num_classes)
            row[yi] = on * lam + (yi == yj ? on : off) * rest;
        if (yj >= 0 && yj < b->num_classes && yj != yi)
            row[yj] = off * lam + on * rest;
    }
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    if (!d->cutmix)
        return snprintf(buf, cap, "lam=%.17g,cutmix=0", d->lam);
    return snprintf(buf, cap,
                    "lam=%.17g,cutmix=1,top=%d,left=%d,height=%d,width=%d,"
                    "beta=%.17g,cy=%d,cx=%d",
                    d->lam, (int)d->yl, (int)d->xl, (int)(d->yh - d->yl),
                    (int)(d->xh - d->xl), d->beta, (int)d->cy, (int)d->cx);
}

const op_kind op_mixup = {
    .name = "mixup",
    .alias = NULL,
    .stage = OP_STAGE_BATCH,
    .doc = "mixup or cutmix of each delivered batch, with soft labels: "
           "timm's Mixup(mixup_alpha, cutmix_alpha, cutmix_minmax, prob, "
           "switch_prob, mode='batch', correct_lam, label_smoothing, "
           "num_classes)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply_batch = apply_batch,
    .describe = describe,
};
