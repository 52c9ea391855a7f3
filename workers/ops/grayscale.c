/* grayscale: torchvision.transforms.v2.RandomGrayscale(p) (p = 1, the
 * default: Grayscale(num_output_channels=3)) on a uint8 image, as
 * F.rgb_to_grayscale computes it on a tensor: in float32,
 * l = r * 0.2989 + g * 0.587 + b * 0.114 (each add fused with its
 * multiply, as PyTorch's vectorised add(alpha=) is: fn_gray_level,
 * functional.h), truncated to uint8, into all three channels. The model
 * of a pixel op: a parameter, a draw from its own stream (here the shared
 * coin of an op applied with probability p, op_coin_draw), an apply on
 * the image in place. */
#include <stdio.h>

#include "functional.h"

enum { P, NPARAMS };

static const op_param params[NPARAMS] = {
    [P] = {"p", OP_NUMBER, "1", 0, 1, 0, NULL,
           "the probability of making the image gray"},
};

static int apply(const op_instance *op, const void *in, op_image *img)
{
    (void)op;
    if (!((const op_coin *)in)->apply)
        return 0;
    for (int y = 0; y < img->h; y++) {
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3) {
            /* to(uint8) truncates; the level never exceeds 255 (the
             * weights sum to 0.9999). */
            px[0] = px[1] = px[2] = (uint8_t)fn_gray_level(px);
        }
    }
    return 0;
}

const op_kind op_grayscale = {
    .name = "grayscale",
    .alias = "random_grayscale",
    .stage = OP_STAGE_PIXELS,
    .doc = "gray with probability p, in all three channels: "
           "RandomGrayscale(p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(op_coin),
    .draw = op_coin_draw,
    .apply = apply,
    .describe = op_coin_describe,
};
