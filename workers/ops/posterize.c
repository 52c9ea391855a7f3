/* posterize: torchvision.transforms.v2.RandomPosterize(bits, p): with
 * probability p, each value keeps its top `bits` bits (F.posterize:
 * image & mask; 8 bits keep the image). */
#include <stdio.h>

#include "functional.h"

enum { BITS, P, NPARAMS };

static const op_param params[NPARAMS] = {
    [BITS] = {"bits", OP_NUMBER, NULL, 0, 8, 0, NULL,
              "the bits kept, a whole number; required, as "
              "RandomPosterize's"},
    [P] = {"p", OP_NUMBER, "0.5", 0, 1, 0, NULL, "the probability"},
};

void fn_posterize(op_image *img, int bits)
{
    if (bits >= 8)
        return;
    const uint8_t mask = (uint8_t)(0xff00u >> (bits < 0 ? 0 : bits));
    uint8_t lut[256];
    for (int x = 0; x < 256; x++)
        lut[x] = (uint8_t)(x & mask);
    fn_table(img, lut);
}

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    const op_value *b = &op->arg[BITS];
    if (!b->n) {
        snprintf(why, cap, "bits: required (0 to 8), as RandomPosterize's");
        return PL_EINVAL;
    }
    if (b->v[0] != (int)b->v[0]) {
        snprintf(why, cap, "bits=%g: not a whole number", b->v[0]);
        return PL_EINVAL;
    }
    return 0;
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    if (((const op_coin *)in)->apply)
        fn_posterize(img, (int)op->arg[BITS].v[0]);
    return 0;
}

const op_kind op_posterize = {
    .name = "posterize",
    .alias = "random_posterize",
    .stage = OP_STAGE_PIXELS,
    .doc = "each value's top bits kept, with probability p: "
           "RandomPosterize(bits, p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(op_coin),
    .setup = setup,
    .draw = op_coin_draw,
    .apply = apply,
    .describe = op_coin_describe,
};
