/* The geometric pixel ops and random erasing (workers/ops/affine.c,
 * rotate.c, random_erasing.c), pixel by pixel: rotations by 90 and 180
 * degrees with nearest are exactly a transpose and flips, by the fast path
 * and through the sampling grid alike; the identity affine leaves the image
 * as it was; a shift moves it by whole pixels and fills what it uncovers;
 * a fill of fill=None is zeros; random erasing writes its value in its box
 * and nothing outside, in every float format and both layouts. The
 * comparison with torchvision itself is
 * python/tests/test_transforms_geo_ref.py's. */
#include <math.h>

#include "../common/float16.h"
#include "../workers/ops/affine.h"
#include "../workers/ops/ops.h"
#include "testutil.h"

static op_scratch scratch;

/* A w x h image whose every pixel differs: (x, y, x ^ y) + a seed. */
static uint8_t *pattern(int w, int h, int seed)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 7 + seed);
            p[1] = (uint8_t)(y * 11 + seed);
            p[2] = (uint8_t)((x ^ y) * 5 + 3 * seed);
        }
    return px;
}

static const uint8_t *at(const uint8_t *px, int w, int x, int y)
{
    return px + ((size_t)y * w + x) * 3;
}

static op_image image_of(uint8_t *px, int w, int h)
{
    return (op_image){px, w, h, (size_t)w * 3, &scratch};
}

static void assert_pixel(const uint8_t *got, const uint8_t *want, int x, int y,
                         const char *what)
{
    cr_assert(memcmp(got, want, 3) == 0,
              "%s: (%d, %d): %d %d %d, want %d %d %d", what, x, y, got[0],
              got[1], got[2], want[0], want[1], want[2]);
}

Test(ops_geo, quarter_and_half_turns_are_transposes_and_flips)
{
    /* torchvision's rotate is counter-clockwise: out[y][x] is, for 90
     * degrees, in[x][n-1-y]; for 270, in[n-1-x][y]; for 180 (any shape),
     * in[h-1-y][w-1-x]. Through the grid (a centre given: the image's own)
     * as well as by the fast path, with nearest. */
    const int n = 6, w = 7, h = 5;
    uint8_t *src = pattern(n, n, 1), *img = malloc((size_t)n * n * 3);
    const double mid[2] = {n / 2.0, n / 2.0};
    for (int path = 0; path < 2; path++)
        for (int k = 1; k <= 3; k += 2) {
            memcpy(img, src, (size_t)n * n * 3);
            op_image im = image_of(img, n, n);
            cr_assert_eq(op_rotate_image(&im, 90.0 * k, OP_INTERP_NEAREST, NULL,
                                         path ? mid : NULL),
                         0);
            for (int y = 0; y < n; y++)
                for (int x = 0; x < n; x++)
                    assert_pixel(at(img, n, x, y),
                                 k == 1 ? at(src, n, n - 1 - y, x)
                                        : at(src, n, y, n - 1 - x),
                                 x, y, path ? "grid" : "fast path");
        }
    free(src);
    free(img);
    src = pattern(w, h, 2);
    img = malloc((size_t)w * h * 3);
    const double mid2[2] = {w / 2.0, h / 2.0};
    for (int path = 0; path < 2; path++)
        for (int turns = -1; turns <= 1; turns += 2) {
            memcpy(img, src, (size_t)w * h * 3);
            op_image im = image_of(img, w, h);
            cr_assert_eq(op_rotate_image(&im, 180.0 * turns, OP_INTERP_NEAREST,
                                         NULL, path ? mid2 : NULL),
                         0);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    assert_pixel(at(img, w, x, y),
                                 at(src, w, w - 1 - x, h - 1 - y), x, y,
                                 "180 degrees");
        }
    /* 0 and 360 degrees: untouched. */
    memcpy(img, src, (size_t)w * h * 3);
    op_image im = image_of(img, w, h);
    cr_assert_eq(op_rotate_image(&im, 360.0, OP_INTERP_BILINEAR, NULL, NULL),
                 0);
    cr_assert_eq(memcmp(img, src, (size_t)w * h * 3), 0);
    free(src);
    free(img);
}

Test(ops_geo, a_quarter_turn_of_a_rectangle_fills_what_it_uncovers)
{
    /* 90 degrees of a 7 x 3 image about its centre (the grid: not
     * square): the middle 3 columns hold the turned image, the rest is
     * the fill. */
    const int w = 7, h = 3;
    uint8_t *src = pattern(w, h, 3), *img = malloc((size_t)w * h * 3);
    memcpy(img, src, (size_t)w * h * 3);
    op_image im = image_of(img, w, h);
    const float fill[3] = {200, 100, 50};
    cr_assert_eq(op_rotate_image(&im, 90.0, OP_INTERP_NEAREST, fill, NULL), 0);
    const uint8_t want_fill[3] = {200, 100, 50};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            /* As torch.rot90: out (x, y), from the centre (3, 1),
             * samples in at (3 - (y - 1), 1 + (x - 3)). */
            const int sx = 3 - (y - 1), sy = 1 + (x - 3);
            if (sy >= 0 && sy < h)
                assert_pixel(at(img, w, x, y), at(src, w, sx, sy), x, y,
                             "inside");
            else
                assert_pixel(at(img, w, x, y), want_fill, x, y, "fill");
        }
    free(src);
    free(img);
}

Test(ops_geo, the_identity_affine_leaves_the_image_and_shifts_are_whole)
{
    const int w = 9, h = 8;
    uint8_t *src = pattern(w, h, 4), *img = malloc((size_t)w * h * 3);
    const float fill[3] = {1, 2, 3};
    for (int interp = 0; interp < 2; interp++) {
        const int mode = interp ? OP_INTERP_BILINEAR : OP_INTERP_NEAREST;
        /* angle 0, no shift, scale 1, no shear, any centre. */
        for (int centred = 0; centred < 2; centred++) {
            memcpy(img, src, (size_t)w * h * 3);
            op_image im = image_of(img, w, h);
            const op_affine_params id = {0, 0, 0, 1, 0, 0, centred, 2.5, 1};
            cr_assert_eq(op_affine_image(&im, &id, mode, fill), 0);
            cr_assert_eq(memcmp(img, src, (size_t)w * h * 3), 0, "identity, %s",
                         interp ? "bilinear" : "nearest");
        }
        /* A shift of (2, -3): out (x, y) is in (x - 2, y + 3), else the
         * fill; exact with either filter (whole pixels). */
        memcpy(img, src, (size_t)w * h * 3);
        op_image im = image_of(img, w, h);
        const op_affine_params shift = {0, 2, -3, 1, 0, 0, 0, 0, 0};
        cr_assert_eq(op_affine_image(&im, &shift, mode, fill), 0);
        const uint8_t want_fill[3] = {1, 2, 3};
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const int sx = x - 2, sy = y + 3;
                if (sx >= 0 && sy < h)
                    assert_pixel(at(img, w, x, y), at(src, w, sx, sy), x, y,
                                 "shifted");
                else
                    assert_pixel(at(img, w, x, y), want_fill, x, y, "fill");
            }
        /* fill=None: zeros where the source is outside. */
        memcpy(img, src, (size_t)w * h * 3);
        im = image_of(img, w, h);
        cr_assert_eq(op_affine_image(&im, &shift, mode, NULL), 0);
        const uint8_t zero[3] = {0, 0, 0};
        assert_pixel(at(img, w, 0, 0), zero, 0, 0, "fill=None");
        assert_pixel(at(img, w, 8, 7), zero, 8, 7, "fill=None");
        assert_pixel(at(img, w, 2, 0), at(src, w, 0, 3), 2, 0, "fill=None");
    }
    free(src);
    free(img);
}

Test(ops_geo, the_inverse_matrix_is_torchvisions)
{
    /* _get_inverse_affine_matrix([0, 0], 30, [5, -2], 1.25, [10, 0]), as
     * torchvision computes it (Python doubles). */
    const op_affine_params a = {30, 5, -2, 1.25, 10, 0, 0, 0, 0};
    double m[6];
    op_affine_matrix(&a, 64, 48, m);
    const double want[6] = {0.62228953074417,  0.52216291573291,
                            -2.06712182225500, -0.40000000000000,
                            0.69282032302755,  3.38564064605510};
    for (int i = 0; i < 6; i++)
        cr_assert(fabs(m[i] - want[i]) < 1e-12, "m[%d] = %.15g, want %.15g", i,
                  m[i], want[i]);
}

/* ---- random erasing ---- */

static ops_pipeline pl;

static void parse(const char *spec, pl_format format)
{
    const op_setup s = {
        16, 12, format, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};
    char why[256];
    cr_assert_eq(ops_parse(&pl, spec, &s, why, sizeof why), 0, "%s: %s", spec,
                 why);
}

/* The box random_erasing drew for sample `index`, from its description. */
static void box_of(int64_t index, int *apply, int *top, int *left, int *height,
                   int *width)
{
    char buf[256];
    ops_describe(&pl, 7, 0, index, 16, 12, buf, sizeof buf);
    const char *p = strstr(buf, "random_erasing(");
    cr_assert_not_null(p, "%s", buf);
    cr_assert_eq(sscanf(p,
                        "random_erasing(apply=%d,top=%d,left=%d,height=%d,"
                        "width=%d)",
                        apply, top, left, height, width),
                 5, "%s", buf);
}

static float value_at(const void *data, pl_format f, size_t i)
{
    if (f == PL_FORMAT_F32_NCHW)
        return ((const float *)data)[i];
    const uint16_t b = ((const uint16_t *)data)[i];
    if (f == PL_FORMAT_BF16_NCHW) {
        const uint32_t x = (uint32_t)b << 16;
        float v;
        memcpy(&v, &x, sizeof v);
        return v;
    }
    /* binary16 to float: the normal and subnormal halves these tests
     * write. */
    const int e = (b >> 10) & 0x1F, m = b & 0x3FF;
    const float mag =
        e ? ldexpf(1.0f + m / 1024.0f, e - 15) : ldexpf(m / 1024.0f, -14);
    return (b & 0x8000) ? -mag : mag;
}

Test(ops_geo, erasing_writes_its_value_in_its_box_and_nowhere_else)
{
    static const pl_format formats[] = {PL_FORMAT_F32_NCHW, PL_FORMAT_F16_NCHW,
                                        PL_FORMAT_BF16_NCHW};
    const int w = 16, h = 12;
    const size_t n = (size_t)w * h * 3;
    int erased = 0;
    for (int f = 0; f < 3; f++)
        for (int last = 0; last < 2; last++) {
            parse("resize;erase(p=1,scale=0.1:0.4,value=0.5:-1.25:3)",
                  formats[f]);
            const size_t es = formats[f] == PL_FORMAT_F32_NCHW ? 4 : 2;
            unsigned char *t0 = malloc(n * es), *t1 = malloc(n * es);
            for (size_t i = 0; i < n * es; i++)
                t0[i] = (unsigned char)(i * 31 + 7) & 0x3F; /* small values */
            for (int64_t index = 0; index < 8; index++) {
                int apply, top, left, bh, bw;
                box_of(index, &apply, &top, &left, &bh, &bw);
                memcpy(t1, t0, n * es);
                op_tensor t = {t1, formats[f], w, h, last, NULL, &scratch};
                cr_assert_eq(ops_tensor(&pl, 7, 0, index, &t), 0);
                if (!apply) {
                    cr_assert_eq(memcmp(t0, t1, n * es), 0);
                    continue;
                }
                erased++;
                cr_assert(top >= 0 && left >= 0 && bh > 0 && bw > 0 &&
                          top + bh < h + 1 && left + bw < w + 1 && bh < h &&
                          bw < w);
                const double area = (double)bh * bw / (w * h);
                cr_assert(area >= 0.1 * 0.5 && area <= 0.4 * 1.6, "%g",
                          area); /* rounding's margin on 16 x 12 */
                const float value[3] = {0.5f, -1.25f, 3.0f};
                for (int c = 0; c < 3; c++)
                    for (int y = 0; y < h; y++)
                        for (int x = 0; x < w; x++) {
                            const size_t i =
                                last ? ((size_t)y * w + x) * 3 + c
                                     : (size_t)c * w * h + (size_t)y * w + x;
                            const int in = y >= top && y < top + bh &&
                                           x >= left && x < left + bw;
                            if (in)
                                cr_assert(
                                    value_at(t1, formats[f], i) == value[c],
                                    "format %d c %d (%d, %d): %g", f, c, x, y,
                                    (double)value_at(t1, formats[f], i));
                            else
                                cr_assert(
                                    memcmp(t1 + i * es, t0 + i * es, es) == 0,
                                    "outside the box: (%d, %d)", x, y);
                        }
            }
            free(t0);
            free(t1);
        }
    cr_assert_gt(erased, 30, "p=1: nearly every sample's box fits");
}

Test(ops_geo, erasing_p0_and_the_words_of_value)
{
    parse("resize;erase(p=0)", PL_FORMAT_F32_NCHW);
    int apply, top, left, bh, bw;
    for (int64_t index = 0; index < 20; index++) {
        box_of(index, &apply, &top, &left, &bh, &bw);
        cr_assert_eq(apply, 0);
    }
    /* value=random: a normal value per pixel and channel, so the box
     * holds no two equal values in a row; random_channel: one per
     * channel. */
    static const char *const specs[] = {"resize;erase(1,value=random)",
                                        "resize;erase(1,value=random_channel)"};
    for (int s = 0; s < 2; s++) {
        parse(specs[s], PL_FORMAT_F32_NCHW);
        float t[16 * 12 * 3] = {0};
        op_tensor ten = {t, PL_FORMAT_F32_NCHW, 16, 12, 0, NULL, &scratch};
        int64_t index = 0;
        do
            box_of(index, &apply, &top, &left, &bh, &bw);
        while (!apply && ++index < 50);
        cr_assert(apply && bw > 1);
        cr_assert_eq(ops_tensor(&pl, 7, 0, index, &ten), 0);
        const float a = t[top * 16 + left], b = t[top * 16 + left + 1];
        cr_assert(a != 0.0f && isfinite(a), "%g", (double)a);
        cr_assert(s == 0 ? a != b : a == b, "%s: %g %g", specs[s], (double)a,
                  (double)b);
        cr_assert(t[16 * 12 + top * 16 + left] != a, "channels differ");
    }
}
