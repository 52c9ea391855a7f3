/* trivial_augment_wide: torchvision.transforms.v2.TrivialAugmentWide(
 * num_magnitude_bins, interpolation, fill): one transform drawn uniformly
 * from its 14 (RandAugment's), at a magnitude bin drawn uniformly, a
 * signed one negated half the time (policy.h). The wide ranges: shears to
 * 0.99, translations to 32 pixels, rotations to 135 degrees, the colour
 * factors 1 +- 0.99, posterize 8 to 2 bits, solarize from 255 down. */
#include <stdio.h>

#include "affine.h"
#include "policy.h"

enum { BINS, INTERP, FILL, NPARAMS };

static const op_param params[NPARAMS] = {
    [BINS] = {"num_magnitude_bins", OP_NUMBER, "31", 2, 1001, 0, NULL,
              "the bins each transform's range is cut into, one drawn"},
    [INTERP] = POLICY_INTERP_PARAM,
    [FILL] = POLICY_FILL_PARAM,
};

/* TrivialAugmentWide's space, in torchvision's order. */
static const policy_entry space[] = {
    {POLICY_IDENTITY, POLICY_BINS_NONE, 0, 0},
    {POLICY_SHEAR_X, POLICY_BINS_LINEAR, 1, 0.99},
    {POLICY_SHEAR_Y, POLICY_BINS_LINEAR, 1, 0.99},
    {POLICY_TRANSLATE_X, POLICY_BINS_LINEAR, 1, 32.0},
    {POLICY_TRANSLATE_Y, POLICY_BINS_LINEAR, 1, 32.0},
    {POLICY_ROTATE, POLICY_BINS_LINEAR, 1, 135.0},
    {POLICY_BRIGHTNESS, POLICY_BINS_LINEAR, 1, 0.99},
    {POLICY_COLOR, POLICY_BINS_LINEAR, 1, 0.99},
    {POLICY_CONTRAST, POLICY_BINS_LINEAR, 1, 0.99},
    {POLICY_SHARPNESS, POLICY_BINS_LINEAR, 1, 0.99},
    {POLICY_POSTERIZE, POLICY_BINS_POSTERIZE, 0, 6.0},
    {POLICY_SOLARIZE, POLICY_BINS_SOLARIZE, 0, 0},
    {POLICY_AUTOCONTRAST, POLICY_BINS_NONE, 0, 0},
    {POLICY_EQUALIZE, POLICY_BINS_NONE, 0, 0},
};
enum { NSPACE = sizeof space / sizeof space[0] };

typedef struct drawn {
    float m;
    uint8_t op;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    if (op->arg[BINS].v[0] != (int)op->arg[BINS].v[0])
        return snprintf(why, cap, "num_magnitude_bins=%g: not a whole number",
                        op->arg[BINS].v[0]),
               PL_EINVAL;
    return 0;
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    drawn *d = out;
    const int n = (int)op->arg[BINS].v[0];
    const policy_entry *e = &space[philox_next_below(rng, NSPACE)];
    d->op = e->op;
    /* torchvision draws the bin only for a transform with magnitudes. */
    const int bin = e->bins == POLICY_BINS_NONE
                        ? 0
                        : (int)philox_next_below(rng, (uint32_t)n);
    d->m = policy_draw_magnitude(e, n, bin, w, h, rng);
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    const drawn *d = in;
    return policy_apply_all(op, img, &d->op, &d->m, 1);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    return policy_describe(buf, cap, &d->op, &d->m, 1);
}

const op_kind op_trivial_augment_wide = {
    .name = "trivial_augment_wide",
    .alias = "trivial_augment",
    .stage = OP_STAGE_PIXELS,
    .doc = "one transform and one magnitude drawn from TrivialAugment's "
           "wide ranges: TrivialAugmentWide(num_magnitude_bins, "
           "interpolation, fill)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
