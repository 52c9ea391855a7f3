/* grayscale: torchvision.transforms.v2.RandomGrayscale(p) (p = 1, the
 * default: Grayscale(num_output_channels=3)) on a uint8 image, as
 * F.rgb_to_grayscale computes it on a tensor: in float32,
 * l = r * 0.2989 + g * 0.587 + b * 0.114 (each add fused with its
 * multiply, as PyTorch's vectorised add(alpha=) is), truncated to uint8,
 * into all three channels. The model of a pixel op: a parameter, a draw
 * from its own stream, an apply on the image in place. */
#include <stdio.h>

#include "op.h"

enum { P, NPARAMS };

static const op_param params[NPARAMS] = {
    [P] = {"p", OP_NUMBER, "1", 0, 1, 0, NULL,
           "the probability of making the image gray"},
};

typedef struct drawn {
    int32_t apply;
} drawn;

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)w;
    (void)h;
    ((drawn *)out)->apply = philox_next_double(rng) < op->arg[P].v[0];
}

/* fmaf(a, b, c) for an 8-bit integer a and a float b: a * b is exact in a
 * double (8 + 24 bits) and so is its sum with c (both multiples of 2^-24
 * below 2^9), so the one rounding to float is the fused one, without
 * libm's fmaf (slow where the CPU has no FMA instruction for it). */
static inline float fma_u8(int a, float b, float c)
{
    return (float)((double)a * b + (double)c);
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    (void)op;
    if (!((const drawn *)in)->apply)
        return 0;
    for (int y = 0; y < img->h; y++) {
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3) {
            float l = (float)px[0] * 0.2989f;
            l = fma_u8(px[1], 0.587f, l);
            l = fma_u8(px[2], 0.114f, l);
            /* to(uint8) truncates; l never exceeds 255 (the weights sum
             * to 0.9999). */
            px[0] = px[1] = px[2] = (uint8_t)l;
        }
    }
    return 0;
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    return snprintf(buf, cap, "apply=%d", (int)((const drawn *)in)->apply);
}

const op_kind op_grayscale = {
    .name = "grayscale",
    .alias = "random_grayscale",
    .stage = OP_STAGE_PIXELS,
    .doc = "gray with probability p, in all three channels: "
           "RandomGrayscale(p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
