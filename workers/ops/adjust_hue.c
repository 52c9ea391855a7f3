/* Hue (functional.h): torchvision.transforms.v2.functional.adjust_hue on a
 * uint8 tensor, step for step in float32: to float as to_dtype makes it
 * (x * float(1/255)), to HSV as _rgb_to_hsv computes it (Pillow's
 * formulas), the hue turned and wrapped (remainder 1), back to RGB as
 * _hsv_to_rgb picks v, p, q, t by sector, and to uint8 as to_dtype makes
 * it (x * 255.999, truncated). Each step rounds to float32 where PyTorch's
 * does (the Makefile's -ffp-contract=off keeps the compiler from fusing a
 * multiply and an add into one rounding), so the round trip's own
 * rounding, the classic source of one-level differences, is the same
 * one: the bytes are torchvision's. */
#include <math.h>

#include "functional.h"

/* PyTorch's remainder for a float and b = 1: fmod's sign made b's. */
static inline float remainder1(float a)
{
    float mod = fmodf(a, 1.0f);
    if (mod != 0.0f && mod < 0.0f)
        mod += 1.0f;
    return mod;
}

static inline float clamp01(float v)
{
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* One pixel's r, g, b in [0, 1], turned by `factor`, in place. */
static inline void turn(float rgb[3], float factor)
{
    static const float sixth = (float)(1.0 / 6.0);
    const float r = rgb[0], g = rgb[1], b = rgb[2];
    /* _rgb_to_hsv */
    const float maxc = fmaxf(r, fmaxf(g, b));
    const float minc = fminf(r, fminf(g, b));
    const int eqc = maxc == minc;
    const float range = maxc - minc;
    const float s = range / (eqc ? 1.0f : maxc);
    const float div = eqc ? 1.0f : range;
    const float rc = (maxc - r) / div, gc = (maxc - g) / div,
                bc = (maxc - b) / div;
    float h;
    if (maxc == r) /* hr; the others are multiplied by a zero mask */
        h = bc - gc;
    else if (maxc == g) /* hg */
        h = (rc + 2.0f) - bc;
    else /* hb */
        h = (gc + 4.0f) - rc;
    h = h * sixth;
    h = h + 1.0f;
    h = fmodf(h, 1.0f);
    /* adjust_hue_image: h.add_(hue_factor).remainder_(1.0) */
    h = remainder1(h + factor);
    /* _hsv_to_rgb */
    const float v = maxc;
    const float h6 = h * 6.0f;
    const float fi = floorf(h6);
    const float f = h6 - fi;
    int i = (int)fi % 6;
    i = i < 0 ? i + 6 : i;
    const float sxf = s * f;
    const float one_minus_s = 1.0f - s;
    const float q = clamp01((1.0f - sxf) * v);
    const float t = clamp01((sxf + one_minus_s) * v);
    const float p = clamp01(one_minus_s * v);
    /* The select table: vpqt indices per sector, for r, g and b. */
    const float vpqt[4] = {v, p, q, t};
    static const unsigned char sel[3][6] = {
        {0, 2, 1, 1, 3, 0}, {3, 0, 0, 2, 1, 1}, {1, 1, 3, 0, 0, 2}};
    for (int c = 0; c < 3; c++)
        rgb[c] = vpqt[sel[c][i]];
}

void fn_adjust_hue(op_image *img, float factor)
{
    const float to_float = (float)(1.0 / 255.0);
    const float to_u8 = (float)(255.0 + 1.0 - 1e-3);
    for (int y = 0; y < img->h; y++) {
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = 0; x < img->w; x++, px += 3) {
            float rgb[3];
            for (int c = 0; c < 3; c++)
                rgb[c] = (float)px[c] * to_float;
            turn(rgb, factor);
            /* v is maxc (at most 1: 255 * float(1/255) rounds to 1), p,
             * q, t are clamped: the product stays below 256. */
            for (int c = 0; c < 3; c++)
                px[c] = (uint8_t)(rgb[c] * to_u8);
        }
    }
}
