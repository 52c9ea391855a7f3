/* rand_augment: torchvision.transforms.v2.RandAugment(num_ops, magnitude,
 * num_magnitude_bins, interpolation, fill): num_ops transforms, each drawn
 * uniformly from its 14 (Identity, ShearX, ShearY, TranslateX, TranslateY,
 * Rotate, Brightness, Color, Contrast, Sharpness, Posterize, Solarize,
 * AutoContrast, Equalize), all at the one magnitude bin, a signed one
 * negated half the time, applied in turn (policy.h). The magnitudes are
 * RandAugment's: shears to 0.3, translations to 150/331 of the image,
 * rotations to 30 degrees, the colour factors 1 +- 0.9, posterize 8 to 4
 * bits, solarize from 255 down. */
#include <stdio.h>

#include "affine.h"
#include "policy.h"

enum { NUM_OPS, MAGNITUDE, BINS, INTERP, FILL, NPARAMS };
enum { MOST_OPS = 16 };

static const op_param params[NPARAMS] = {
    [NUM_OPS] = {"num_ops", OP_NUMBER, "2", 0, MOST_OPS, 0, NULL,
                 "transforms applied in turn, a whole number (at most 16)"},
    [MAGNITUDE] = {"magnitude", OP_NUMBER, "9", 0, 1000, 0, NULL,
                   "the bin of every transform's magnitude, below "
                   "num_magnitude_bins"},
    [BINS] = {"num_magnitude_bins", OP_NUMBER, "31", 2, 1001, 0, NULL,
              "the bins each transform's range is cut into"},
    [INTERP] = POLICY_INTERP_PARAM,
    [FILL] = POLICY_FILL_PARAM,
};

/* RandAugment's space (_AUGMENTATION_SPACE), in torchvision's order. */
static const policy_entry space[] = {
    {POLICY_IDENTITY, POLICY_BINS_NONE, 0, 0},
    {POLICY_SHEAR_X, POLICY_BINS_LINEAR, 1, 0.3},
    {POLICY_SHEAR_Y, POLICY_BINS_LINEAR, 1, 0.3},
    {POLICY_TRANSLATE_X, POLICY_BINS_WIDTH, 1, 150.0 / 331.0},
    {POLICY_TRANSLATE_Y, POLICY_BINS_HEIGHT, 1, 150.0 / 331.0},
    {POLICY_ROTATE, POLICY_BINS_LINEAR, 1, 30.0},
    {POLICY_BRIGHTNESS, POLICY_BINS_LINEAR, 1, 0.9},
    {POLICY_COLOR, POLICY_BINS_LINEAR, 1, 0.9},
    {POLICY_CONTRAST, POLICY_BINS_LINEAR, 1, 0.9},
    {POLICY_SHARPNESS, POLICY_BINS_LINEAR, 1, 0.9},
    {POLICY_POSTERIZE, POLICY_BINS_POSTERIZE, 0, 4.0},
    {POLICY_SOLARIZE, POLICY_BINS_SOLARIZE, 0, 0},
    {POLICY_AUTOCONTRAST, POLICY_BINS_NONE, 0, 0},
    {POLICY_EQUALIZE, POLICY_BINS_NONE, 0, 0},
};
enum { NSPACE = sizeof space / sizeof space[0] };

typedef struct drawn {
    float m[MOST_OPS];
    uint8_t op[MOST_OPS];
    int32_t n;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    for (int k = NUM_OPS; k <= BINS; k++)
        if (op->arg[k].v[0] != (int)op->arg[k].v[0])
            return snprintf(why, cap, "%s=%g: not a whole number",
                            params[k].name, op->arg[k].v[0]),
                   PL_EINVAL;
    const int m = (int)op->arg[MAGNITUDE].v[0], n = (int)op->arg[BINS].v[0];
    if (m >= n)
        return snprintf(why, cap,
                        "magnitude=%d: past the last bin of "
                        "num_magnitude_bins=%d (0 to %d)",
                        m, n, n - 1),
               PL_EINVAL;
    return 0;
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    drawn *d = out;
    d->n = (int32_t)op->arg[NUM_OPS].v[0];
    const int m = (int)op->arg[MAGNITUDE].v[0], n = (int)op->arg[BINS].v[0];
    for (int k = 0; k < d->n; k++) {
        const policy_entry *e = &space[philox_next_below(rng, NSPACE)];
        d->op[k] = e->op;
        d->m[k] = policy_draw_magnitude(e, n, m, w, h, rng);
    }
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    const drawn *d = in;
    return policy_apply_all(op, img, d->op, d->m, d->n);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    return policy_describe(buf, cap, d->op, d->m, d->n);
}

const op_kind op_rand_augment = {
    .name = "rand_augment",
    .alias = "randaugment",
    .stage = OP_STAGE_PIXELS,
    .doc = "num_ops transforms drawn from RandAugment's 14 at one "
           "magnitude: RandAugment(num_ops, magnitude, num_magnitude_bins, "
           "interpolation, fill)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
