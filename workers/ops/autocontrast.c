/* autocontrast: torchvision.transforms.v2.RandomAutocontrast(p): with
 * probability p, each channel stretched from its [min, max] to [0, 255]
 * as F.autocontrast computes it on uint8, in float32: scale = (max - min)
 * * float(1/255), then (v - min) / scale, clamped and truncated; a channel
 * of one value is kept. A table per channel: torchvision's bytes. */
#include <stdio.h>

#include "functional.h"

enum { P, NPARAMS };

static const op_param params[NPARAMS] = {
    [P] = {"p", OP_NUMBER, "0.5", 0, 1, 0, NULL, "the probability"},
};

void fn_autocontrast(op_image *img)
{
    uint8_t lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
    for (int y = 0; y < img->h; y++) {
        const uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3)
            for (int c = 0; c < 3; c++) {
                lo[c] = px[c] < lo[c] ? px[c] : lo[c];
                hi[c] = px[c] > hi[c] ? px[c] : hi[c];
            }
    }
    uint8_t lut[3][256];
    for (int c = 0; c < 3; c++) {
        /* An equal min and max: min 0, scale 1, so v / 1: kept. */
        const float min = lo[c] == hi[c] ? 0.0f : (float)lo[c];
        const float scale =
            lo[c] == hi[c] ? 1.0f : (float)(hi[c] - lo[c]) * (float)(1.0 / 255);
        for (int v = 0; v < 256; v++) {
            const float e = ((float)v - min) / scale;
            lut[c][v] = e <= 0.0f ? 0 : e >= 255.0f ? 255 : (uint8_t)e;
        }
    }
    fn_tables(img, (const uint8_t(*)[256])lut);
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    (void)op;
    if (((const op_coin *)in)->apply)
        fn_autocontrast(img);
    return 0;
}

const op_kind op_autocontrast = {
    .name = "autocontrast",
    .alias = "random_autocontrast",
    .stage = OP_STAGE_PIXELS,
    .doc = "each channel stretched to [0, 255], with probability p: "
           "RandomAutocontrast(p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(op_coin),
    .draw = op_coin_draw,
    .apply = apply,
    .describe = op_coin_describe,
};
