/* Brightness, contrast and saturation (functional.h) as torchvision's v2
 * kernels compute them on a uint8 tensor: in float32, the product
 * x * factor rounded, then (contrast, saturation) its blend
 * `_blend(image, gray, factor)`: x * factor + gray * (1 - factor), the
 * add fused with its multiply (PyTorch's add(alpha=)), clamped to
 * [0, 255] and truncated to uint8. Brightness and contrast depend on the
 * value alone: a table of 256. Sharpness blends with the image smoothed
 * (a 3 x 3 kernel in float32, rounded), invert is 255 - x: the
 * policies' own (policy.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "functional.h"

/* A float in [0, 255] as uint8, as PyTorch's clamp_(0, 255).to(uint8)
 * makes it: clamped, then truncated. */
static inline uint8_t to_u8(float v)
{
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

void fn_table(op_image *img, const uint8_t lut[256])
{
    for (int y = 0; y < img->h; y++) {
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int i = 0; i < img->w * 3; i++)
            px[i] = lut[px[i]];
    }
}

void fn_tables(op_image *img, const uint8_t luts[3][256])
{
    for (int y = 0; y < img->h; y++) {
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3)
            for (int c = 0; c < 3; c++)
                px[c] = luts[c][px[c]];
    }
}

void fn_adjust_brightness(op_image *img, double factor)
{
    const float f = (float)factor;
    uint8_t lut[256];
    for (int x = 0; x < 256; x++)
        lut[x] = to_u8((float)x * f);
    fn_table(img, lut);
}

/* The mean of the image's floored gray levels, as torch.mean computes it
 * in float32: the sum (exact while below 2^24, which a 256 x 256 image
 * stays under), divided by the count. */
static float gray_mean(const op_image *img)
{
    uint64_t sum = 0;
    for (int y = 0; y < img->h; y++) {
        const uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3)
            sum += (uint64_t)fn_gray_level(px); /* floor: it is >= 0 */
    }
    const uint64_t n = (uint64_t)img->w * (uint64_t)img->h;
    return n ? (float)sum / (float)n : 0.0f;
}

void fn_adjust_contrast(op_image *img, double factor)
{
    const float mean = gray_mean(img);
    /* _blend: ratio as float32, 1 - ratio in double (Python), then as
     * float32; the add fused (fmaf: 256 calls, exact with or without an
     * FMA instruction). */
    const float f = (float)factor;
    const float alpha = (float)(1.0 - factor);
    uint8_t lut[256];
    for (int x = 0; x < 256; x++)
        lut[x] = to_u8(fmaf(mean, alpha, (float)x * f));
    fn_table(img, lut);
}

void fn_adjust_saturation(op_image *img, double factor)
{
    /* Per pixel, fl(fl(x * factor) + gray * alpha) with one rounding: gray
     * is an integer below 256, so gray * alpha is exact in a double, and
     * so is its sum with x * factor (their bits lie within 53 places of
     * each other) for a factor of 0 or of 2^-21 and above; below that a
     * double rounding could part them by one level. A table of each makes
     * it an add. */
    const float f = (float)factor;
    const float alpha = (float)(1.0 - factor);
    float scaled[256];
    double blend[256];
    for (int v = 0; v < 256; v++) {
        scaled[v] = (float)v * f;
        blend[v] = (double)v * alpha;
    }
    for (int y = 0; y < img->h; y++) {
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3) {
            const double g = blend[(int)fn_gray_level(px)];
            for (int c = 0; c < 3; c++)
                px[c] = to_u8((float)((double)scaled[px[c]] + g));
        }
    }
}

/* The smoothing of F.adjust_sharpness at one value: the 3 x 3 kernel's
 * products summed in float32 as PyTorch's convolution sums them (row by
 * row, each product fused into the running sum: exact in a double, so one
 * rounding to float each), then rounded to a whole level (round_, halves
 * to even). `p` is the value's place in a packed copy, `row` its row's
 * bytes. */
static inline float smoothed(const uint8_t *p, size_t row, float edge,
                             float middle)
{
    float acc = 0.0f;
    for (int dy = -1; dy <= 1; dy++) {
        const uint8_t *r = p + (ptrdiff_t)dy * (ptrdiff_t)row;
        acc = (float)((double)r[-3] * edge + (double)acc);
        acc = (float)((double)r[0] * (dy ? edge : middle) + (double)acc);
        acc = (float)((double)r[3] * edge + (double)acc);
    }
    return rintf(acc);
}

int fn_adjust_sharpness(op_image *img, double factor)
{
    const int w = img->w, h = img->h;
    if (w <= 2 || h <= 2)
        return 0;
    const size_t row = (size_t)w * 3;
    const uint8_t *src = op_image_copy(img);
    if (!src)
        return PL_ENOMEM;
    /* torchvision's kernel: 1/13 and 5/13 as float32; the blend
     * view.add_(blurred - view, alpha=1 - factor): the difference exact,
     * the add fused with its multiply (PyTorch's add(alpha=)), then
     * clamped and truncated. */
    const float edge = (float)(1.0 / 13.0), middle = (float)(5.0 / 13.0);
    const double alpha = (double)(float)(1.0 - factor);
    for (int y = 1; y < h - 1; y++) {
        const uint8_t *in = src + (size_t)y * row;
        uint8_t *out = img->px + (size_t)y * img->stride;
        for (size_t i = 3; i < row - 3; i++) {
            const float v = (float)in[i];
            const float d = smoothed(in + i, row, edge, middle) - v;
            out[i] = to_u8((float)(alpha * (double)d + (double)v));
        }
    }
    return 0;
}

void fn_invert(op_image *img)
{
    uint8_t lut[256];
    for (int x = 0; x < 256; x++)
        lut[x] = (uint8_t)(255 - x);
    fn_table(img, lut);
}
