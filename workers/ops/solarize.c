/* solarize: torchvision.transforms.v2.RandomSolarize(threshold, p): with
 * probability p, every value at or above the threshold inverted
 * (F.solarize: torch.where(image >= threshold, 255 - image, image), the
 * threshold compared as float32, as PyTorch promotes a uint8 tensor
 * against a Python float). */
#include <stdio.h>

#include "functional.h"

enum { THRESHOLD, P, NPARAMS };

static const op_param params[NPARAMS] = {
    [THRESHOLD] = {"threshold", OP_NUMBER, NULL, 0, 255, 0, NULL,
                   "values at or above it are inverted; required, as "
                   "RandomSolarize's"},
    [P] = {"p", OP_NUMBER, "0.5", 0, 1, 0, NULL, "the probability"},
};

void fn_solarize(op_image *img, double threshold)
{
    const float t = (float)threshold;
    uint8_t lut[256];
    for (int x = 0; x < 256; x++)
        lut[x] = (float)x >= t ? (uint8_t)(255 - x) : (uint8_t)x;
    fn_table(img, lut);
}

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    if (op->arg[THRESHOLD].n)
        return 0;
    snprintf(why, cap, "threshold: required (0 to 255), as RandomSolarize's");
    return PL_EINVAL;
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    if (((const op_coin *)in)->apply)
        fn_solarize(img, op->arg[THRESHOLD].v[0]);
    return 0;
}

const op_kind op_solarize = {
    .name = "solarize",
    .alias = "random_solarize",
    .stage = OP_STAGE_PIXELS,
    .doc = "values at or above threshold inverted, with probability p: "
           "RandomSolarize(threshold, p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(op_coin),
    .setup = setup,
    .draw = op_coin_draw,
    .apply = apply,
    .describe = op_coin_describe,
};
