/* The resampler's filters for the ops (resample_axis_plan_with): nearest and
 * nearest_exact pick PyTorch's source pixels and copy them exactly, area
 * averages PyTorch's pooling windows, bicubic weighs as Pillow (and as
 * PyTorch without antialias), every filter keeps a flat image flat; a crop
 * reaching past the image reads zeros there, a window past the resized
 * image is zeros; and whole samples from pixels (sample_transform_pixels):
 * flips mirror exactly, grayscale is torchvision's uint8 formula. The
 * comparison with torchvision itself, pixel by pixel, is
 * python/tests/test_transforms_ref.py's. */
#include <math.h>

#include "../workers/augment.h"
#include "../workers/resample.h"
#include "../workers/sample.h"
#include "testaugment.h"
#include "testutil.h"

static resample_axis ax; /* reused: planning grows it */

static void plan(int interp, int antialias, double in0, double in1, int blo,
                 int bhi, int dlo, int dhi, int rs, int off, int out)
{
    const resample_filter f = {interp, antialias};
    cr_assert_eq(resample_axis_plan_with(&ax, &f, in0, in1, blo, bhi, dlo, dhi,
                                         rs, off, out),
                 0);
}

static int weight_sum(int i)
{
    int s = 0;
    for (int k = 0; k < ax.count[i]; k++)
        s += ax.w[(size_t)i * ax.taps + k];
    return s;
}

Test(ops_filters, nearest_picks_pytorchs_source_pixels_whole)
{
    /* 10 -> 4: scale 2.5; nearest floor(i * 2.5), nearest_exact
     * floor((i + 0.5) * 2.5); 10 -> 20: i >> 1; a crop from 3. */
    static const struct {
        int interp, in, rs;
        int want[8];
    } cases[] = {
        {OP_INTERP_NEAREST, 10, 4, {0, 2, 5, 7}},
        {OP_INTERP_NEAREST_EXACT, 10, 4, {1, 3, 6, 8}},
        {OP_INTERP_NEAREST, 4, 8, {0, 0, 1, 1, 2, 2, 3, 3}},
        {OP_INTERP_NEAREST_EXACT, 4, 8, {0, 0, 1, 1, 2, 2, 3, 3}},
        {OP_INTERP_NEAREST, 3, 7, {0, 0, 0, 1, 1, 2, 2}},
        {OP_INTERP_NEAREST_EXACT, 3, 7, {0, 0, 1, 1, 1, 2, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        plan(cases[c].interp, 1, 3, 3 + cases[c].in, 3, 3 + cases[c].in, 0, 100,
             cases[c].rs, 0, cases[c].rs);
        for (int i = 0; i < cases[c].rs; i++) {
            cr_assert_eq(ax.count[i], 1, "case %zu out %d", c, i);
            cr_assert_eq(ax.first[i], 3 + cases[c].want[i], "case %zu out %d",
                         c, i);
            cr_assert_eq(weight_sum(i), 1 << RESAMPLE_WBITS);
        }
    }
}

Test(ops_filters, area_averages_pytorchs_pooling_windows)
{
    /* 10 -> 4: [0, 3) [2, 5) [5, 8) [7, 10); 5 -> 3: [0, 2) [1, 4) [3, 5) */
    static const struct {
        int in, rs;
        int first[4], count[4];
    } cases[] = {
        {10, 4, {0, 2, 5, 7}, {3, 3, 3, 3}},
        {5, 3, {0, 1, 3}, {2, 3, 2}},
        {3, 4, {0, 0, 1, 2}, {1, 2, 2, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        plan(OP_INTERP_AREA, 1, 0, cases[c].in, 0, cases[c].in, 0, 100,
             cases[c].rs, 0, cases[c].rs);
        for (int i = 0; i < cases[c].rs; i++) {
            cr_assert_eq(ax.first[i], cases[c].first[i], "case %zu %d", c, i);
            cr_assert_eq(ax.count[i], cases[c].count[i], "case %zu %d", c, i);
            cr_assert_eq(weight_sum(i), 1 << RESAMPLE_WBITS);
            for (int k = 0; k < ax.count[i]; k++) {
                const double exact =
                    (double)(1 << RESAMPLE_WBITS) / ax.count[i];
                cr_assert_leq(fabs(ax.w[(size_t)i * ax.taps + k] - exact), 1.0);
            }
        }
    }
}

static double cubic(double x, double a)
{
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

Test(ops_filters, bicubic_weighs_as_pillow_and_pytorch)
{
    /* Shrinking 100 -> 30 (antialias: the kernel widens by 100/30, and
     * at the edges the taps inside are renormalised, as Pillow does),
     * enlarging 20 -> 70 (negative lobes); without antialias PyTorch's:
     * a = -0.75 at the kernel's own width, the edge pixel read for taps
     * past it (its index clamped). */
    static const struct {
        int in, rs, antialias;
    } cases[] = {{100, 30, 1}, {20, 70, 1}, {100, 30, 0}, {20, 70, 0}};
    int negative = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int in = cases[c].in, rs = cases[c].rs;
        plan(OP_INTERP_BICUBIC, cases[c].antialias, 0, in, 0, in, 0, in, rs, 0,
             rs);
        const double scale = (double)in / rs;
        const double fs = cases[c].antialias && scale > 1 ? scale : 1.0;
        const double a = cases[c].antialias ? -0.5 : -0.75;
        for (int i = 0; i < rs; i++) {
            const double center = (i + 0.5) * scale;
            double ws[64] = {0}, sum = 0;
            if (cases[c].antialias) {
                for (int k = 0; k < ax.count[i]; k++)
                    sum += ws[k] =
                        cubic((ax.first[i] + k + 0.5 - center) / fs, a);
            } else {
                const int x0 = (int)floor(center - 1.5);
                for (int k = 0; k < 4; k++) {
                    int x = x0 + k < 0 ? 0 : x0 + k >= in ? in - 1 : x0 + k;
                    cr_assert(x >= ax.first[i] && x < ax.first[i] + ax.count[i],
                              "case %zu out %d: tap %d", c, i, x);
                    const double wk = cubic(x0 + k + 0.5 - center, a);
                    ws[x - ax.first[i]] += wk;
                    sum += wk;
                }
            }
            cr_assert_eq(weight_sum(i), 1 << RESAMPLE_WBITS, "case %zu", c);
            for (int k = 0; k < ax.count[i]; k++) {
                const double want = ws[k] / sum * (1 << RESAMPLE_WBITS);
                const int16_t got = ax.w[(size_t)i * ax.taps + k];
                cr_assert_leq(fabs(got - want), 1.0, "case %zu out %d tap %d",
                              c, i, k);
                negative += got < 0;
            }
            /* Every tap the kernel reaches inside the image is there. */
            const int lo = (int)floor(center - 2 * fs + 0.5);
            cr_assert_eq(ax.first[i], lo < 0 ? 0 : lo, "case %zu out %d", c, i);
        }
    }
    cr_assert_gt(negative, 0, "bicubic has negative lobes");
}

Test(ops_filters, taps_past_the_image_read_zeros_and_windows_past_it_are_zero)
{
    /* A crop [-5, 15) of a 10-pixel row, resized to 10: each output keeps
     * the taps inside [0, 10) with the weights they had in the crop, so
     * near the padding the weights sum to less than one. */
    plan(OP_INTERP_BILINEAR, 1, -5, 15, -5, 15, 0, 10, 10, 0, 10);
    cr_assert_eq(ax.lo, 0);
    cr_assert_eq(ax.hi, 10);
    for (int i = 0; i < 10; i++) {
        cr_assert_geq(ax.first[i], 0);
        cr_assert_leq(ax.first[i] + ax.count[i], 10);
    }
    cr_assert_eq(ax.count[0], 0, "output 0 lies over the padding alone");
    cr_assert_lt(weight_sum(2), 1 << RESAMPLE_WBITS, "it blends zeros in");
    cr_assert_eq(weight_sum(5), 1 << RESAMPLE_WBITS, "the middle does not");
    /* A window [-3, 7) of a 4-pixel resize: outputs 0-2 and 7-9 have no
     * taps (zeros), 3-6 are the resize's. */
    plan(OP_INTERP_BILINEAR, 1, 0, 8, 0, 8, 0, 8, 4, -3, 10);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(ax.count[i] > 0, i >= 3 && i < 7, "output %d", i);
}

/* ---- whole samples from pixels ---- */

static augment_params ap;
static sample_ctx ctx;

/* The u8 sample of `spec` (out_w x out_h) from img (w x h). */
static uint8_t *sample_of(const char *spec, const uint8_t *img, int w, int h,
                          int out_w, int out_h)
{
    params(&ap, PL_AUGMENT_NONE, PL_FORMAT_U8_NHWC, out_w, out_h, 5);
    ops_pipeline *ops = malloc(sizeof *ops);
    char why[512], reason[SAMPLE_REASON_MAX];
    op_setup s = {out_w,
                  out_h,
                  PL_FORMAT_U8_NHWC,
                  {0.5f, 0.5f, 0.5f},
                  {0.5f, 0.5f, 0.5f}};
    cr_assert_eq(ops_parse(ops, spec, &s, why, sizeof why), 0, "%s", why);
    augment_params_set_ops(&ap, ops, PL_FORMAT_U8_NHWC);
    free(ops);
    uint8_t *out = malloc((size_t)out_w * out_h * 3);
    cr_assert_eq(
        sample_transform_pixels(&ctx, &ap, img, w, h, 0, 1, out, reason), 0,
        "%s: %s", spec, reason);
    return out;
}

Test(ops_filters, a_flat_image_stays_flat_under_every_filter)
{
    static const char *const specs[] = {
        "resize(37x23,interpolation=bilinear)",
        "resize(37x23,interpolation=bilinear,antialias=false)",
        "resize(37x23,interpolation=bicubic)",
        "resize(37x23,interpolation=bicubic,antialias=false)",
        "resize(37x23,interpolation=nearest)",
        "resize(37x23,interpolation=nearest_exact)",
        "resize(37x23,interpolation=area)",
        "rrc(37x23,interpolation=bicubic);hflip;vflip",
    };
    const int w = 90, h = 61;
    uint8_t *img = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        img[3 * i] = 200, img[3 * i + 1] = 100, img[3 * i + 2] = 7;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        uint8_t *out = sample_of(specs[s], img, w, h, 37, 23);
        for (int i = 0; i < 37 * 23; i++)
            cr_assert(out[3 * i] == 200 && out[3 * i + 1] == 100 &&
                          out[3 * i + 2] == 7,
                      "%s: pixel %d is %d %d %d", specs[s], i, out[3 * i],
                      out[3 * i + 1], out[3 * i + 2]);
        free(out);
    }
    /* Padded: zeros around the image, the image itself where it is. */
    uint8_t *out = sample_of("center_crop(100x71)", img, w, h, 100, 71);
    for (int y = 0; y < 71; y++)
        for (int x = 0; x < 100; x++) {
            const int inside = x >= 5 && x < 95 && y >= 5 && y < 66;
            cr_assert_eq(out[(y * 100 + x) * 3], inside ? 200 : 0, "(%d, %d)",
                         x, y);
        }
    free(out);
    free(img);
}

Test(ops_filters, flips_mirror_the_sample_exactly)
{
    const int w = 77, h = 51, ow = 40, oh = 30;
    uint8_t *img = malloc((size_t)w * h * 3);
    tu_pattern(img, w, h, 3);
    uint8_t *plain =
        sample_of("resize(40x30,interpolation=bicubic)", img, w, h, ow, oh);
    uint8_t *hf = sample_of("resize(40x30,interpolation=bicubic);hflip(1)", img,
                            w, h, ow, oh);
    uint8_t *vf = sample_of("vflip(1);resize(40x30,interpolation=bicubic)", img,
                            w, h, ow, oh);
    int off = 0;
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++)
            for (int c = 0; c < 3; c++) {
                const int p = plain[(y * ow + x) * 3 + c];
                const int hd = abs(hf[(y * ow + (ow - 1 - x)) * 3 + c] - p);
                const int vd = abs(vf[((oh - 1 - y) * ow + x) * 3 + c] - p);
                /* Mirrored weights may quantise one unit apart. */
                cr_assert_leq(hd, 1);
                cr_assert_leq(vd, 1);
                off += hd + vd;
            }
    cr_assert_lt(off, ow * oh / 4, "%d levels off in all", off);
    free(plain);
    free(hf);
    free(vf);
    free(img);
}

Test(ops_filters, grayscale_is_torchvisions_uint8_formula)
{
    /* trunc(r * 0.2989 + g * 0.587 + b * 0.114) in float32: a gray pixel
     * loses one level (the weights sum to 0.9999), as in torchvision. */
    static const uint8_t px[][4] = {
        {0, 0, 0, 0},        {255, 255, 255, 254}, {10, 20, 30, 18},
        {255, 0, 0, 76},     {0, 255, 0, 149},     {0, 0, 255, 29},
        {100, 100, 100, 99}, {1, 1, 1, 0},
    };
    const int n = sizeof px / sizeof px[0];
    uint8_t img[8 * 3];
    for (int i = 0; i < n; i++)
        memcpy(img + 3 * i, px[i], 3);
    uint8_t *out = sample_of("resize(8x1);grayscale", img, n, 1, n, 1);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            cr_assert_eq(out[3 * i + c], px[i][3], "pixel %d (%d %d %d)", i,
                         px[i][0], px[i][1], px[i][2]);
    free(out);
    out = sample_of("resize(8x1);grayscale(0)", img, n, 1, n, 1);
    cr_assert_eq(memcmp(out, img, sizeof img), 0, "p = 0: untouched");
    free(out);
    sample_fini(&ctx);
    resample_axis_free(&ax);
}
