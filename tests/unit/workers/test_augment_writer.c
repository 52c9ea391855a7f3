/* The augment row writers (workers/augment.c): sample bytes, the
 * normalisation LUT, u8 rows, f32 rows into their channel planes, and the
 * float16 conversion and rows, rounded to nearest even exactly. */
#include <math.h>

#include "../common/float16.h"
#include "../workers/augment.h"
#include "testaugment.h"
#include "testutil.h"

/* ---- the row writer ------------------------------------------------------ */

Test(augment, sample_bytes_count_every_channel_of_every_pixel)
{
    augment_params p;
    params(&p, PL_AUGMENT_EVAL, PL_FORMAT_U8_NHWC, 224, 224, 0);
    cr_assert_eq(augment_sample_bytes(&p), (size_t)224 * 224 * 3);
    params(&p, PL_AUGMENT_EVAL, PL_FORMAT_F32_NCHW, 224, 224, 0);
    cr_assert_eq(augment_sample_bytes(&p), (size_t)224 * 224 * 3 * 4);
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 320, 7, 0);
    cr_assert_eq(augment_sample_bytes(&p), (size_t)320 * 7 * 3);
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_F32_NCHW, 320, 7, 0);
    cr_assert_eq(augment_sample_bytes(&p), (size_t)320 * 7 * 3 * 4);
}

Test(augment, lut_holds_the_normalised_value_of_every_byte)
{
    augment_params p;
    params(&p, PL_AUGMENT_EVAL, PL_FORMAT_F32_NCHW, 8, 8, 0);
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            const double want =
                ((double)v / 255.0 - imagenet_mean[c]) / imagenet_std[c];
            cr_assert(fabs(p.lut[c][v] - want) <= 1e-6,
                      "lut[%d][%d] = %.8f, expected %.8f", c, v,
                      (double)p.lut[c][v], want);
        }
    const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    augment_params_init(&p, PL_AUGMENT_EVAL, PL_FORMAT_F32_NCHW, 8, 8, 0, zero,
                        one);
    for (int v = 0; v < 256; v++)
        cr_assert(fabs(p.lut[1][v] - v / 255.0) <= 1e-7);
}

enum { RW = 37, RH = 5 }; /* an odd width shows an off-by-one mirror */

static void fill_row(uint8_t *rgb, unsigned seed)
{
    for (int i = 0; i < RW * 3; i++)
        rgb[i] = (uint8_t)(i * 29 + seed * 7 + (i % 3) * 85);
}

/* (The u8 row, flipped or not, is written by resample_h itself; its
 * mirror is tested in test_resample.) */

Test(augment, f32_rows_are_normalised_into_their_channel_planes)
{
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_F32_NCHW, RW, RH, 0);
    uint8_t rgb[RW * 3];
    fill_row(rgb, 2);
    rgb[0] = 0;
    rgb[4] = 255; /* both ends of the range */
    float out[3 * RH * RW];
    memset(out, 0xFF, sizeof out); /* NaN everywhere */
    augment_store_f32(&p, rgb, 3, out);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < RH; y++)
            for (int x = 0; x < RW; x++) {
                const float got = out[((size_t)c * RH + y) * RW + x];
                if (y != 3) {
                    cr_assert(isnan(got), "plane %d (%d, %d) was written", c, x,
                              y);
                    continue;
                }
                const int v = rgb[x * 3 + c];
                /* Exactly the LUT's float, so every path agrees. */
                cr_assert(got == p.lut[c][v],
                          "plane %d (%d, %d) = %.8f, lut %.8f", c, x, y,
                          (double)got, (double)p.lut[c][v]);
                const double want =
                    ((double)v / 255.0 - imagenet_mean[c]) / imagenet_std[c];
                cr_assert(fabs(got - want) <= 1e-6,
                          "plane %d value %d: %.8f vs %.8f", c, v, (double)got,
                          want);
            }
}

/* ---- float16 ---- */

static uint16_t ref_half(float f)
{
    const _Float16 h = (_Float16)f; /* the compiler's round-to-nearest-even */
    uint16_t bits;
    memcpy(&bits, &h, sizeof bits);
    return bits;
}

/* float16_from_float rounds exactly as the compiler (and CUDA's
 * __float2half_rn) do: every normal, subnormal, overflow and tie case of 2^22
 * floats spread over all exponents, plus the edges. */
Test(augment, half_conversion_rounds_to_nearest_even_exactly)
{
    static const float edges[] = {
        0.0f,        -0.0f,       1.0f,        65504.0f,    65519.99f,
        65520.0f,    1e-8f,       5.96046e-8f, 2.98023e-8f, 6.1035e-5f,
        -6.1035e-5f, 1.0f / 3.0f, -2.1179f,    2.64f,       1e30f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        cr_assert_eq(float16_from_float(edges[i]), ref_half(edges[i]), "%g",
                     (double)edges[i]);
    uint32_t s = 12345u;
    for (int i = 0; i < 1 << 22; i++) {
        s = s * 1664525u + 1013904223u;
        uint32_t bits = s;
        if ((bits & 0x7F800000u) == 0x7F800000u)
            continue; /* inf and NaN are checked below */
        float f;
        memcpy(&f, &bits, sizeof f);
        cr_assert_eq(float16_from_float(f), ref_half(f), "bits %08x (%g)", bits,
                     (double)f);
    }
    cr_assert_eq(float16_from_float(1.0f / 0.0f), 0x7C00);
    cr_assert_eq(float16_from_float(-1.0f / 0.0f), 0xFC00);
    const uint16_t nan = float16_from_float(0.0f / 0.0f);
    cr_assert((nan & 0x7C00) == 0x7C00 && (nan & 0x3FF) != 0, "%04x", nan);
}

Test(augment, f16_rows_are_the_halves_of_the_f32_values)
{
    augment_params p32, p16;
    params(&p32, PL_AUGMENT_TRAIN, PL_FORMAT_F32_NCHW, RW, RH, 0);
    params(&p16, PL_AUGMENT_TRAIN, PL_FORMAT_F16_NCHW, RW, RH, 0);
    cr_assert_eq(augment_sample_bytes(&p16), (size_t)RW * RH * 3 * 2);
    uint8_t rgb[RW * 3];
    fill_row(rgb, 5);
    float f[3 * RH * RW];
    uint16_t h[3 * RH * RW];
    augment_store_f32(&p32, rgb, 1, f);
    augment_store_f16(&p16, rgb, 1, h);
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < RW; x++) {
            const size_t at = ((size_t)c * RH + 1) * RW + x;
            cr_assert_eq(h[at], ref_half(f[at]), "plane %d x %d", c, x);
        }
}

/* bfloat16 rounding: nearest, ties to the even pattern; infinities kept,
 * NaN kept a NaN, the largest float rounds up to infinity. And a BF16
 * parameter set's lut16 holds those patterns. */
Test(augment, bfloat16_rounds_to_nearest_even)
{
    static const struct {
        float f;
        uint16_t bits;
    } cases[] = {
        {1.0f, 0x3F80},          {-2.5f, 0xC020},
        {1.00390625f, 0x3F80}, /* 1 + 2^-8: a tie, to even (down) */
        {1.01171875f, 0x3F82}, /* 1 + 3 * 2^-8: a tie, to even (up) */
        {0.0f, 0x0000},          {-0.0f, 0x8000},
        {3.4028235e38f, 0x7F80}, /* FLT_MAX rounds to infinity */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(bfloat16_from_float(cases[i].f), cases[i].bits,
                     "%.9g: %04x, want %04x", (double)cases[i].f,
                     bfloat16_from_float(cases[i].f), cases[i].bits);
    /* Just above the tie: up. */
    cr_assert_eq(bfloat16_from_float(nextafterf(1.00390625f, 2.0f)), 0x3F81);
    cr_assert_eq(bfloat16_from_float(INFINITY), 0x7F80);
    cr_assert_eq(bfloat16_from_float(-INFINITY), 0xFF80);
    const uint16_t nan = bfloat16_from_float(NAN);
    cr_assert((nan & 0x7F80) == 0x7F80 && (nan & 0x7F) != 0, "%04x", nan);

    augment_params p;
    const float mean[3] = {0.485f, 0.456f, 0.406f};
    const float std[3] = {0.229f, 0.224f, 0.225f};
    augment_params_init(&p, PL_AUGMENT_NONE, PL_FORMAT_BF16_NCHW, 4, 4, 0, mean,
                        std);
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            cr_assert_eq(p.lut16[c][v], bfloat16_from_float(p.lut[c][v]));
    cr_assert_eq(augment_format_bytes(PL_FORMAT_BF16_NCHW, 4, 4),
                 4 * 4 * 3 * 2);
}
