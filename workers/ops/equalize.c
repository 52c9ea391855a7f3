/* equalize: torchvision.transforms.v2.RandomEqualize(p): with probability
 * p, each channel's histogram equalised as F.equalize computes it on
 * uint8 (Pillow's ImageOps.equalize): step = (the pixels not of the
 * channel's highest value) / 255, floored; a channel with step 0 is kept;
 * else value v maps to (cum[v - 1] + step / 2) / step (integers, floored,
 * at most 255), cum the cumulative histogram, and 0 to 0. Integers
 * throughout: torchvision's bytes exactly. */
#include <stdio.h>
#include <string.h>

#include "functional.h"

enum { P, NPARAMS };

static const op_param params[NPARAMS] = {
    [P] = {"p", OP_NUMBER, "0.5", 0, 1, 0, NULL, "the probability"},
};

/* Channel c's table into lut; 0 when the channel is kept as it is (lut
 * then the identity). */
static int channel_table(const op_image *img, int c, uint8_t lut[256])
{
    uint32_t hist[256];
    memset(hist, 0, sizeof hist);
    for (int y = 0; y < img->h; y++) {
        const uint8_t *px = img->px + (size_t)y * img->stride + c;
        for (int x = 0; x < img->w; x++, px += 3)
            hist[*px]++;
    }
    int top = 255; /* the highest value present */
    while (top > 0 && hist[top] == 0)
        top--;
    const uint64_t n = (uint64_t)img->w * (uint64_t)img->h;
    const uint64_t step = (n - hist[top]) / 255;
    if (step == 0) {
        for (int v = 0; v < 256; v++)
            lut[v] = (uint8_t)v;
        return 0;
    }
    uint64_t cum = 0;
    lut[0] = 0;
    for (int v = 1; v < 256; v++) {
        cum += hist[v - 1];
        const uint64_t e = (cum + step / 2) / step;
        lut[v] = (uint8_t)(e > 255 ? 255 : e);
    }
    return 1;
}

void fn_equalize(op_image *img)
{
    uint8_t lut[3][256];
    int on[3];
    for (int c = 0; c < 3; c++)
        on[c] = channel_table(img, c, lut[c]);
    if (on[0] || on[1] || on[2])
        fn_tables(img, (const uint8_t(*)[256])lut);
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    (void)op;
    if (((const op_coin *)in)->apply)
        fn_equalize(img);
    return 0;
}

const op_kind op_equalize = {
    .name = "equalize",
    .alias = "random_equalize",
    .stage = OP_STAGE_PIXELS,
    .doc = "each channel's histogram equalised, with probability p: "
           "RandomEqualize(p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(op_coin),
    .draw = op_coin_draw,
    .apply = apply,
    .describe = op_coin_describe,
};
