/* auto_augment: torchvision.transforms.v2.AutoAugment(policy,
 * interpolation, fill): one of the policy's 25 sub-policies drawn
 * uniformly, and each of its two transforms applied with its own
 * probability (torch.rand(()) <= p) at its own magnitude bin of 10, a
 * signed one negated half the time (policy.h). The policies are the
 * paper's, as torchvision lists them: imagenet (the default), cifar10 and
 * svhn; the magnitudes are RandAugment's ranges, with Invert besides. */
#include <stdio.h>

#include "affine.h"
#include "policy.h"

enum { POLICY, INTERP, FILL, NPARAMS };

static const char *const policy_words[] = {"imagenet", "cifar10", "svhn", NULL};

static const op_param params[NPARAMS] = {
    [POLICY] = {"policy", OP_WORD, "imagenet", 0, 2, 0, policy_words,
                "imagenet, cifar10 or svhn: AutoAugmentPolicy's"},
    [INTERP] = POLICY_INTERP_PARAM,
    [FILL] = POLICY_FILL_PARAM,
};

/* AutoAugment's space, by transform: its bins (10 of them) and sign. */
static const policy_entry space[POLICY_NOPS] = {
    [POLICY_SHEAR_X] = {POLICY_SHEAR_X, POLICY_BINS_LINEAR, 1, 0.3},
    [POLICY_SHEAR_Y] = {POLICY_SHEAR_Y, POLICY_BINS_LINEAR, 1, 0.3},
    [POLICY_TRANSLATE_X] = {POLICY_TRANSLATE_X, POLICY_BINS_WIDTH, 1,
                            150.0 / 331.0},
    [POLICY_TRANSLATE_Y] = {POLICY_TRANSLATE_Y, POLICY_BINS_HEIGHT, 1,
                            150.0 / 331.0},
    [POLICY_ROTATE] = {POLICY_ROTATE, POLICY_BINS_LINEAR, 1, 30.0},
    [POLICY_BRIGHTNESS] = {POLICY_BRIGHTNESS, POLICY_BINS_LINEAR, 1, 0.9},
    [POLICY_COLOR] = {POLICY_COLOR, POLICY_BINS_LINEAR, 1, 0.9},
    [POLICY_CONTRAST] = {POLICY_CONTRAST, POLICY_BINS_LINEAR, 1, 0.9},
    [POLICY_SHARPNESS] = {POLICY_SHARPNESS, POLICY_BINS_LINEAR, 1, 0.9},
    [POLICY_POSTERIZE] = {POLICY_POSTERIZE, POLICY_BINS_POSTERIZE, 0, 4.0},
    [POLICY_SOLARIZE] = {POLICY_SOLARIZE, POLICY_BINS_SOLARIZE, 0, 0},
    [POLICY_AUTOCONTRAST] = {POLICY_AUTOCONTRAST, POLICY_BINS_NONE, 0, 0},
    [POLICY_EQUALIZE] = {POLICY_EQUALIZE, POLICY_BINS_NONE, 0, 0},
    [POLICY_INVERT] = {POLICY_INVERT, POLICY_BINS_NONE, 0, 0},
};

/* One transform of a sub-policy: which, its probability, its bin (0 for
 * those without magnitudes). */
typedef struct step {
    uint8_t op;
    float p;
    uint8_t bin;
} step;

#define S(name, p, bin)                                                        \
    {                                                                          \
        POLICY_##name, p, bin                                                  \
    }
static const step policies[3][25][2] = {
    {/* imagenet */
     {S(POSTERIZE, 0.4f, 8), S(ROTATE, 0.6f, 9)},
     {S(SOLARIZE, 0.6f, 5), S(AUTOCONTRAST, 0.6f, 0)},
     {S(EQUALIZE, 0.8f, 0), S(EQUALIZE, 0.6f, 0)},
     {S(POSTERIZE, 0.6f, 7), S(POSTERIZE, 0.6f, 6)},
     {S(EQUALIZE, 0.4f, 0), S(SOLARIZE, 0.2f, 4)},
     {S(EQUALIZE, 0.4f, 0), S(ROTATE, 0.8f, 8)},
     {S(SOLARIZE, 0.6f, 3), S(EQUALIZE, 0.6f, 0)},
     {S(POSTERIZE, 0.8f, 5), S(EQUALIZE, 1.0f, 0)},
     {S(ROTATE, 0.2f, 3), S(SOLARIZE, 0.6f, 8)},
     {S(EQUALIZE, 0.6f, 0), S(POSTERIZE, 0.4f, 6)},
     {S(ROTATE, 0.8f, 8), S(COLOR, 0.4f, 0)},
     {S(ROTATE, 0.4f, 9), S(EQUALIZE, 0.6f, 0)},
     {S(EQUALIZE, 0.0f, 0), S(EQUALIZE, 0.8f, 0)},
     {S(INVERT, 0.6f, 0), S(EQUALIZE, 1.0f, 0)},
     {S(COLOR, 0.6f, 4), S(CONTRAST, 1.0f, 8)},
     {S(ROTATE, 0.8f, 8), S(COLOR, 1.0f, 2)},
     {S(COLOR, 0.8f, 8), S(SOLARIZE, 0.8f, 7)},
     {S(SHARPNESS, 0.4f, 7), S(INVERT, 0.6f, 0)},
     {S(SHEAR_X, 0.6f, 5), S(EQUALIZE, 1.0f, 0)},
     {S(COLOR, 0.4f, 0), S(EQUALIZE, 0.6f, 0)},
     {S(EQUALIZE, 0.4f, 0), S(SOLARIZE, 0.2f, 4)},
     {S(SOLARIZE, 0.6f, 5), S(AUTOCONTRAST, 0.6f, 0)},
     {S(INVERT, 0.6f, 0), S(EQUALIZE, 1.0f, 0)},
     {S(COLOR, 0.6f, 4), S(CONTRAST, 1.0f, 8)},
     {S(EQUALIZE, 0.8f, 0), S(EQUALIZE, 0.6f, 0)}},
    {/* cifar10 */
     {S(INVERT, 0.1f, 0), S(CONTRAST, 0.2f, 6)},
     {S(ROTATE, 0.7f, 2), S(TRANSLATE_X, 0.3f, 9)},
     {S(SHARPNESS, 0.8f, 1), S(SHARPNESS, 0.9f, 3)},
     {S(SHEAR_Y, 0.5f, 8), S(TRANSLATE_Y, 0.7f, 9)},
     {S(AUTOCONTRAST, 0.5f, 0), S(EQUALIZE, 0.9f, 0)},
     {S(SHEAR_Y, 0.2f, 7), S(POSTERIZE, 0.3f, 7)},
     {S(COLOR, 0.4f, 3), S(BRIGHTNESS, 0.6f, 7)},
     {S(SHARPNESS, 0.3f, 9), S(BRIGHTNESS, 0.7f, 9)},
     {S(EQUALIZE, 0.6f, 0), S(EQUALIZE, 0.5f, 0)},
     {S(CONTRAST, 0.6f, 7), S(SHARPNESS, 0.6f, 5)},
     {S(COLOR, 0.7f, 7), S(TRANSLATE_X, 0.5f, 8)},
     {S(EQUALIZE, 0.3f, 0), S(AUTOCONTRAST, 0.4f, 0)},
     {S(TRANSLATE_Y, 0.4f, 3), S(SHARPNESS, 0.2f, 6)},
     {S(BRIGHTNESS, 0.9f, 6), S(COLOR, 0.2f, 8)},
     {S(SOLARIZE, 0.5f, 2), S(INVERT, 0.0f, 0)},
     {S(EQUALIZE, 0.2f, 0), S(AUTOCONTRAST, 0.6f, 0)},
     {S(EQUALIZE, 0.2f, 0), S(EQUALIZE, 0.6f, 0)},
     {S(COLOR, 0.9f, 9), S(EQUALIZE, 0.6f, 0)},
     {S(AUTOCONTRAST, 0.8f, 0), S(SOLARIZE, 0.2f, 8)},
     {S(BRIGHTNESS, 0.1f, 3), S(COLOR, 0.7f, 0)},
     {S(SOLARIZE, 0.4f, 5), S(AUTOCONTRAST, 0.9f, 0)},
     {S(TRANSLATE_Y, 0.9f, 9), S(TRANSLATE_Y, 0.7f, 9)},
     {S(AUTOCONTRAST, 0.9f, 0), S(SOLARIZE, 0.8f, 3)},
     {S(EQUALIZE, 0.8f, 0), S(INVERT, 0.1f, 0)},
     {S(TRANSLATE_Y, 0.7f, 9), S(AUTOCONTRAST, 0.9f, 0)}},
    {/* svhn */
     {S(SHEAR_X, 0.9f, 4), S(INVERT, 0.2f, 0)},
     {S(SHEAR_Y, 0.9f, 8), S(INVERT, 0.7f, 0)},
     {S(EQUALIZE, 0.6f, 0), S(SOLARIZE, 0.6f, 6)},
     {S(INVERT, 0.9f, 0), S(EQUALIZE, 0.6f, 0)},
     {S(EQUALIZE, 0.6f, 0), S(ROTATE, 0.9f, 3)},
     {S(SHEAR_X, 0.9f, 4), S(AUTOCONTRAST, 0.8f, 0)},
     {S(SHEAR_Y, 0.9f, 8), S(INVERT, 0.4f, 0)},
     {S(SHEAR_Y, 0.9f, 5), S(SOLARIZE, 0.2f, 6)},
     {S(INVERT, 0.9f, 0), S(AUTOCONTRAST, 0.8f, 0)},
     {S(EQUALIZE, 0.6f, 0), S(ROTATE, 0.9f, 3)},
     {S(SHEAR_X, 0.9f, 4), S(SOLARIZE, 0.3f, 3)},
     {S(SHEAR_Y, 0.8f, 8), S(INVERT, 0.7f, 0)},
     {S(EQUALIZE, 0.9f, 0), S(TRANSLATE_Y, 0.6f, 6)},
     {S(INVERT, 0.9f, 0), S(EQUALIZE, 0.6f, 0)},
     {S(CONTRAST, 0.3f, 3), S(ROTATE, 0.8f, 4)},
     {S(INVERT, 0.8f, 0), S(TRANSLATE_Y, 0.0f, 2)},
     {S(SHEAR_Y, 0.7f, 6), S(SOLARIZE, 0.4f, 8)},
     {S(INVERT, 0.6f, 0), S(ROTATE, 0.8f, 4)},
     {S(SHEAR_Y, 0.3f, 7), S(TRANSLATE_X, 0.9f, 3)},
     {S(SHEAR_X, 0.1f, 6), S(INVERT, 0.6f, 0)},
     {S(SOLARIZE, 0.7f, 2), S(TRANSLATE_Y, 0.6f, 7)},
     {S(SHEAR_Y, 0.8f, 4), S(INVERT, 0.8f, 0)},
     {S(SHEAR_X, 0.7f, 9), S(TRANSLATE_Y, 0.8f, 3)},
     {S(SHEAR_Y, 0.8f, 5), S(AUTOCONTRAST, 0.7f, 0)},
     {S(SHEAR_X, 0.7f, 2), S(INVERT, 0.1f, 0)}},
};
#undef S

typedef struct drawn {
    float m[2];
    uint8_t op[2]; /* POLICY_IDENTITY where the step's coin said no */
    int32_t sub;
} drawn;

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    drawn *d = out;
    const int policy = (int)op->arg[POLICY].v[0];
    d->sub = (int32_t)philox_next_below(rng, 25);
    for (int k = 0; k < 2; k++) {
        const step *s = &policies[policy][d->sub][k];
        /* torch.rand(()) is a float32: p compared as one. */
        if (!((float)philox_next_double(rng) <= s->p)) {
            d->op[k] = POLICY_IDENTITY;
            d->m[k] = 0.0f;
            continue;
        }
        d->op[k] = s->op;
        d->m[k] = policy_draw_magnitude(&space[s->op], 10, s->bin, w, h, rng);
    }
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    const drawn *d = in;
    return policy_apply_all(op, img, d->op, d->m, 2);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    const int n = snprintf(buf, cap, "sub=%d,", (int)d->sub);
    const size_t at = (size_t)n < cap ? (size_t)n : cap;
    return n + policy_describe(buf + at, cap - at, d->op, d->m, 2);
}

const op_kind op_auto_augment = {
    .name = "auto_augment",
    .alias = "autoaugment",
    .stage = OP_STAGE_PIXELS,
    .doc = "one of the policy's 25 sub-policies, each of its two "
           "transforms with its probability: AutoAugment(policy, "
           "interpolation, fill)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
