/* The antialiased bilinear resampler (workers/resample.c) against an
 * independent double-precision reference written from Pillow's description
 * of precompute_coeffs: output pixel i of an interval of in_n pixels scaled
 * to rs_n is centred on source coordinate (i + 0.5) * in_n / rs_n; every
 * source pixel j weighs triangle((j + 0.5 - centre) / fs), fs being the
 * downscale factor (at least 1); the weights are normalised to sum to 1.
 * The reference sums over all source pixels (no window arithmetic) and
 * filters both axes at once in double precision, so it shares nothing with
 * the library's fixed-point, two-pass code but the definition. Source
 * intervals may start and end between pixels (decoding at a DCT scale
 * divides the crop's coordinates), taps staying inside [lo, hi) bounds. */
#include <math.h>
#include <time.h>

#include "../workers/resample.h"
#include "testutil.h"

/* ---- the reference ------------------------------------------------------- */

/* Weights of one axis: for each output o of [off, off + out_n) of the
 * scaled interval, the weights of all in_n source pixels. */
typedef struct ref_axis {
    int in_n, out_n;
    double *w;    /* [out_n][in_n] */
    int *lo, *hi; /* [out_n] the nonzero weights lie in [lo, hi) */
} ref_axis;

static double tri(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* The interval [in0, in1) of source pixels [0, in_n), taps bounded to
 * [blo, bhi). */
static void ref_axis_make_frac(ref_axis *a, int in_n, double in0, double in1,
                               int blo, int bhi, int rs_n, int off, int out_n)
{
    a->in_n = in_n;
    a->out_n = out_n;
    a->w = calloc((size_t)out_n * in_n, sizeof *a->w);
    a->lo = malloc((size_t)out_n * sizeof *a->lo);
    a->hi = malloc((size_t)out_n * sizeof *a->hi);
    cr_assert(a->w && a->lo && a->hi);
    const double scale = (in1 - in0) / rs_n;
    const double fs = scale > 1.0 ? scale : 1.0;
    for (int o = 0; o < out_n; o++) {
        const double centre = in0 + (off + o + 0.5) * scale;
        double *w = a->w + (size_t)o * in_n;
        double sum = 0.0;
        a->lo[o] = in_n;
        a->hi[o] = 0;
        for (int j = blo; j < bhi; j++) {
            w[j] = tri((j + 0.5 - centre) / fs);
            sum += w[j];
            if (w[j] > 0.0) {
                if (j < a->lo[o])
                    a->lo[o] = j;
                a->hi[o] = j + 1;
            }
        }
        cr_assert_gt(sum, 0.0, "output %d reads no source pixel", o);
        for (int j = 0; j < in_n; j++)
            w[j] /= sum;
    }
}

static void ref_axis_make(ref_axis *a, int in_n, int rs_n, int off, int out_n)
{
    ref_axis_make_frac(a, in_n, 0.0, in_n, 0, in_n, rs_n, off, out_n);
}

static void ref_axis_free(ref_axis *a)
{
    free(a->w);
    free(a->lo);
    free(a->hi);
}

static uint8_t round_clamp(double v)
{
    v = floor(v + 0.5); /* half up */
    return (uint8_t)(v < 0.0 ? 0.0 : v > 255.0 ? 255.0 : v);
}

/* The reference resize: the sw x sh rectangle at (sx, sy) of src (stride
 * src_w pixels) scaled to rs_w x rs_h, and the out_w x out_h window at
 * (ox, oy) of that, each output pixel a direct double-precision weighted
 * sum over the source. */
static uint8_t *ref_resize(const uint8_t *src, int src_w, int sx, int sy,
                           int sw, int sh, int rs_w, int rs_h, int ox, int oy,
                           int out_w, int out_h)
{
    ref_axis h, v;
    ref_axis_make(&h, sw, rs_w, ox, out_w);
    ref_axis_make(&v, sh, rs_h, oy, out_h);
    uint8_t *out = malloc((size_t)out_w * out_h * 3);
    cr_assert_not_null(out);
    for (int y = 0; y < out_h; y++)
        for (int x = 0; x < out_w; x++)
            for (int c = 0; c < 3; c++) {
                double acc = 0.0;
                for (int j = v.lo[y]; j < v.hi[y]; j++) {
                    const double wy = v.w[(size_t)y * sh + j];
                    const uint8_t *row =
                        src + ((size_t)(sy + j) * src_w + sx) * 3 + c;
                    for (int i = h.lo[x]; i < h.hi[x]; i++)
                        acc +=
                            wy * h.w[(size_t)x * sw + i] * row[(size_t)i * 3];
                }
                out[((size_t)y * out_w + x) * 3 + c] = round_clamp(acc);
            }
    ref_axis_free(&h);
    ref_axis_free(&v);
    return out;
}

/* ---- the library's pipeline, as workers/sample.c drives it -------------- */

/* An axis over a whole interval of in_n pixels, as the tests use it. */
static int plan(resample_axis *a, int in_n, int rs_n, int off, int out_n)
{
    return resample_axis_plan(a, 0.0, in_n, 0, in_n, rs_n, off, out_n);
}

/* The library's two passes over the sw x sh rectangle at (sx, sy). */
static uint8_t *lib_resize(const uint8_t *src, int src_w, int sx, int sy,
                           int sw, int sh, int rs_w, int rs_h, int ox, int oy,
                           int out_w, int out_h)
{
    resample_axis h = {0}, v = {0};
    cr_assert_eq(plan(&h, sw, rs_w, ox, out_w), 0);
    cr_assert_eq(plan(&v, sh, rs_h, oy, out_h), 0);
    cr_assert_eq(h.out_n, out_w);
    cr_assert_eq(v.out_n, out_h);
    const size_t stride = (size_t)src_w * 3;
    const uint8_t *rows = src + (size_t)(sy + v.lo) * stride + (size_t)sx * 3;
    int16_t *vrow =
        calloc((size_t)sw * 3 + (size_t)resample_pad(&h), sizeof *vrow);
    uint8_t *out = malloc((size_t)out_w * out_h * 3);
    cr_assert(vrow && out);
    for (int y = 0; y < out_h; y++) {
        resample_v(&v, rows, stride, y, h.lo * 3, h.hi * 3, vrow);
        resample_h(&h, vrow, 0, out + (size_t)y * out_w * 3);
    }
    free(vrow);
    resample_axis_free(&h);
    resample_axis_free(&v);
    return out;
}

/* ---- source images ------------------------------------------------------- */

/* Smooth gradients with texture (testutil's), or full-range noise, which
 * shows any misplaced or misweighted tap. */
static uint8_t *make_image(int w, int h, int noise, unsigned seed)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    cr_assert_not_null(p);
    if (!noise) {
        tu_pattern(p, w, h, seed);
        return p;
    }
    uint32_t s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (uint8_t)(s >> 24);
    }
    return p;
}

typedef struct resize_case {
    int src_w, src_h;         /* the decoded image */
    int sx, sy, sw, sh;       /* the source rectangle */
    int rs_w, rs_h;           /* it is scaled to */
    int ox, oy, out_w, out_h; /* the window kept */
    const char *what;
} resize_case;

#define WHOLE(w, h, ow, oh, what)                                              \
    {                                                                          \
        (w), (h), 0, 0, (w), (h), (ow), (oh), 0, 0, (ow), (oh), (what)         \
    }

static const resize_case cases[] = {
    WHOLE(64, 48, 32, 24, "shrink 2x"),
    WHOLE(370, 185, 100, 50, "shrink 3.7x"),
    WHOLE(200, 150, 20, 15, "shrink 10x"),
    WHOLE(40, 30, 60, 45, "enlarge 1.5x"),
    WHOLE(16, 12, 64, 48, "enlarge 4x"),
    WHOLE(17, 5, 5, 17, "17->5 across, 5->17 down"),
    WHOLE(5, 17, 17, 5, "5->17 across, 17->5 down"),
    WHOLE(1, 7, 7, 1, "1->7 across, 7->1 down"),
    WHOLE(7, 1, 1, 7, "7->1 across, 1->7 down"),
    WHOLE(1, 1, 3, 2, "a single pixel enlarged"),
    WHOLE(13, 11, 1, 1, "everything to one pixel"),
    WHOLE(640, 20, 9, 3, "shrink 71x, wider than 64 taps"),
    WHOLE(99, 101, 98, 102, "almost identity"),
    /* A centre crop: 500x375 scaled to 341x256, 224x224 kept at (58, 16). */
    {500, 375, 0, 0, 500, 375, 341, 256, 58, 16, 224, 224, "eval crop"},
    /* A random-resized crop: a rectangle of the image, then an enlarge
     * with a window at an odd offset. */
    {120, 90, 17, 9, 61, 47, 80, 60, 7, 3, 50, 41, "crop, enlarge, window"},
    {120, 90, 31, 0, 89, 90, 23, 29, 5, 11, 17, 13, "crop, shrink, window"},
};

/* ---- tests --------------------------------------------------------------- */

Test(resample, matches_the_double_precision_reference_within_one)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resize_case *k = &cases[i];
        for (int noise = 0; noise < 2; noise++) {
            uint8_t *src =
                make_image(k->src_w, k->src_h, noise, (unsigned)i + 1);
            uint8_t *ref =
                ref_resize(src, k->src_w, k->sx, k->sy, k->sw, k->sh, k->rs_w,
                           k->rs_h, k->ox, k->oy, k->out_w, k->out_h);
            uint8_t *got =
                lib_resize(src, k->src_w, k->sx, k->sy, k->sw, k->sh, k->rs_w,
                           k->rs_h, k->ox, k->oy, k->out_w, k->out_h);
            const size_t n = (size_t)k->out_w * k->out_h * 3;
            const int d = tu_max_diff(ref, got, n);
            cr_assert_leq(d, 1, "%s (%s image): max diff %d", k->what,
                          noise ? "noise" : "pattern", d);
            free(src);
            free(ref);
            free(got);
        }
    }
}

Test(resample, weights_of_every_output_sum_to_one)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resize_case *k = &cases[i];
        const int dims[2][4] = {{k->sw, k->rs_w, k->ox, k->out_w},
                                {k->sh, k->rs_h, k->oy, k->out_h}};
        for (int ax = 0; ax < 2; ax++) {
            resample_axis a = {0};
            cr_assert_eq(
                plan(&a, dims[ax][0], dims[ax][1], dims[ax][2], dims[ax][3]),
                0);
            /* Exactly one in Q14, so a constant stays constant. */
            for (int o = 0; o < a.out_n; o++) {
                int sum = 0;
                for (int t = 0; t < a.count[o]; t++)
                    sum += a.w[(size_t)o * a.taps + t];
                cr_assert_eq(sum, 1 << RESAMPLE_WBITS,
                             "%s axis %d output %d: weights sum to %d", k->what,
                             ax, o, sum);
            }
            resample_axis_free(&a);
        }
    }
}

Test(resample, weights_match_the_reference_weights)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resize_case *k = &cases[i];
        const int dims[2][4] = {{k->sw, k->rs_w, k->ox, k->out_w},
                                {k->sh, k->rs_h, k->oy, k->out_h}};
        for (int ax = 0; ax < 2; ax++) {
            const int in_n = dims[ax][0];
            resample_axis a = {0};
            cr_assert_eq(plan(&a, in_n, dims[ax][1], dims[ax][2], dims[ax][3]),
                         0);
            ref_axis r;
            ref_axis_make(&r, in_n, dims[ax][1], dims[ax][2], dims[ax][3]);
            for (int o = 0; o < a.out_n; o++)
                for (int j = 0; j < in_n; j++) {
                    /* Q14: each weight within one unit of exact. */
                    const int t = j - a.first[o];
                    const double lw = t >= 0 && t < a.count[o]
                                          ? a.w[(size_t)o * a.taps + t]
                                          : 0.0;
                    const double rw =
                        r.w[(size_t)o * in_n + j] * (1 << RESAMPLE_WBITS);
                    cr_assert(fabs(lw - rw) < 1.0,
                              "%s axis %d output %d source %d: weight %.3f, "
                              "reference %.3f (Q14)",
                              k->what, ax, o, j, lw, rw);
                }
            ref_axis_free(&r);
            resample_axis_free(&a);
        }
    }
}

/* A 1 x 32768 strip to 1, 2 and 16 outputs: filters up to 65537 taps wide,
 * thousands of Q14 units left over after rounding down. Planning stays
 * fast (it was quadratic in the width: seconds per sample), each output's
 * weights still sum to exactly one and stay within one unit of exact. */
Test(resample, planning_a_very_wide_filter_is_fast_and_exact, .timeout = 60)
{
    enum { IN = 32768 };
    const int outs[] = {1, 2, 16};
    for (int c = 0; c < 3; c++) {
        resample_axis a = {0};
        const double t0 = tu_seconds();
        cr_assert_eq(plan(&a, IN, outs[c], 0, outs[c]), 0);
        const double took = tu_seconds() - t0;
        /* About 2 ms here; the quadratic planner took 0.25 s, a hundred
         * times that: the bound sits between, with room for a loaded
         * machine, and for the sanitizers' slowdown (ThreadSanitizer's
         * took 60 ms under a loaded make test). */
        const double most = TU_SANITIZED ? 0.2 : 0.05;
        cr_assert_lt(took, most, "%d outputs: %.3f s", outs[c], took);
        ref_axis r;
        ref_axis_make(&r, IN, outs[c], 0, outs[c]);
        for (int o = 0; o < a.out_n; o++) {
            int sum = 0;
            for (int t = 0; t < a.count[o]; t++) {
                const int j = a.first[o] + t;
                const double lw = a.w[(size_t)o * a.taps + t];
                const double rw =
                    r.w[(size_t)o * IN + j] * (1 << RESAMPLE_WBITS);
                cr_assert(fabs(lw - rw) < 1.0,
                          "output %d source %d: %.3f, reference %.3f", o, j, lw,
                          rw);
                sum += a.w[(size_t)o * a.taps + t];
            }
            cr_assert_eq(sum, 1 << RESAMPLE_WBITS, "output %d", o);
        }
        ref_axis_free(&r);
        resample_axis_free(&a);
    }
}

Test(resample, taps_stay_inside_the_source_and_the_lo_hi_range)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resize_case *k = &cases[i];
        const int dims[2][4] = {{k->sw, k->rs_w, k->ox, k->out_w},
                                {k->sh, k->rs_h, k->oy, k->out_h}};
        for (int ax = 0; ax < 2; ax++) {
            const int in_n = dims[ax][0];
            resample_axis a = {0};
            cr_assert_eq(plan(&a, in_n, dims[ax][1], dims[ax][2], dims[ax][3]),
                         0);
            cr_assert(0 <= a.lo && a.lo < a.hi && a.hi <= in_n,
                      "%s axis %d: [lo, hi) = [%d, %d) of %d", k->what, ax,
                      a.lo, a.hi, in_n);
            int min_first = in_n, max_end = 0;
            for (int o = 0; o < a.out_n; o++) {
                const int f = a.first[o], c = a.count[o];
                cr_assert(c >= 1 && c <= a.taps,
                          "%s axis %d output %d: %d taps of %d", k->what, ax, o,
                          c, a.taps);
                cr_assert(f >= 0 && f + c <= in_n,
                          "%s axis %d output %d: taps [%d, %d) outside "
                          "[0, %d)",
                          k->what, ax, o, f, f + c, in_n);
                cr_assert(f >= a.lo && f + c <= a.hi,
                          "%s axis %d output %d: taps [%d, %d) outside "
                          "[lo, hi) = [%d, %d)",
                          k->what, ax, o, f, f + c, a.lo, a.hi);
                if (f < min_first)
                    min_first = f;
                if (f + c > max_end)
                    max_end = f + c;
            }
            /* lo and hi are tight: no row is decoded for nothing. */
            cr_assert_eq(a.lo, min_first, "%s axis %d", k->what, ax);
            cr_assert_eq(a.hi, max_end, "%s axis %d", k->what, ax);
            resample_axis_free(&a);
        }
    }
}

Test(resample, identity_size_reproduces_the_input_exactly)
{
    static const int sizes[][2] = {{1, 1}, {7, 3}, {64, 48}, {123, 77}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int w = sizes[i][0], h = sizes[i][1];
        for (int noise = 0; noise < 2; noise++) {
            uint8_t *src = make_image(w, h, noise, 9);
            uint8_t *got = lib_resize(src, w, 0, 0, w, h, w, h, 0, 0, w, h);
            cr_assert_arr_eq(got, src, (size_t)w * h * 3, "%dx%d", w, h);
            free(src);
            free(got);
        }
    }
}

Test(resample, identity_scale_with_a_window_is_an_exact_crop)
{
    const int w = 50, h = 40;
    uint8_t *src = make_image(w, h, 1, 3);
    /* Scaled to its own size, the window at (7, 5) is a plain crop. */
    uint8_t *got = lib_resize(src, w, 0, 0, w, h, w, h, 7, 5, 30, 20);
    for (int y = 0; y < 20; y++)
        cr_assert_arr_eq(got + (size_t)y * 30 * 3,
                         src + ((size_t)(y + 5) * w + 7) * 3, 30 * 3, "row %d",
                         y);
    free(src);
    free(got);
}

Test(resample, a_constant_image_stays_exactly_constant)
{
    static const uint8_t values[] = {0, 1, 127, 128, 200, 254, 255};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const resize_case *k = &cases[i];
        const size_t src_n = (size_t)k->src_w * k->src_h * 3;
        const size_t out_n = (size_t)k->out_w * k->out_h * 3;
        uint8_t *src = malloc(src_n);
        for (size_t v = 0; v < sizeof values; v++) {
            /* Different values per channel, so a channel mix-up shows. */
            for (size_t p = 0; p < src_n; p += 3) {
                src[p] = values[v];
                src[p + 1] = (uint8_t)(255 - values[v]);
                src[p + 2] = values[(v + 3) % sizeof values];
            }
            uint8_t *got =
                lib_resize(src, k->src_w, k->sx, k->sy, k->sw, k->sh, k->rs_w,
                           k->rs_h, k->ox, k->oy, k->out_w, k->out_h);
            for (size_t p = 0; p < out_n; p += 3)
                cr_assert(got[p] == src[0] && got[p + 1] == src[1] &&
                              got[p + 2] == src[2],
                          "%s, value %d: pixel %zu is %d %d %d", k->what,
                          values[v], p / 3, got[p], got[p + 1], got[p + 2]);
            free(got);
        }
        free(src);
    }
}

Test(resample, rows_are_rounded_half_up_and_clamped)
{
    /* A 2-pixel row shrunk to 1 averages the two: 10 and 11 give 10.5,
     * which rounds up to 11; 0 and 1 give 0.5 -> 1; 254 and 255 -> 255. */
    static const uint8_t pairs[][2] = {{10, 11}, {0, 1},     {254, 255},
                                       {0, 0},   {255, 255}, {100, 103}};
    static const uint8_t want[] = {11, 1, 255, 0, 255, 102};
    for (size_t i = 0; i < sizeof want; i++) {
        uint8_t src[6];
        for (int c = 0; c < 3; c++) {
            src[c] = pairs[i][0];
            src[3 + c] = pairs[i][1];
        }
        uint8_t *got = lib_resize(src, 2, 0, 0, 2, 1, 1, 1, 0, 0, 1, 1);
        for (int c = 0; c < 3; c++)
            cr_assert_eq(got[c], want[i], "%d,%d -> %d, expected %d",
                         pairs[i][0], pairs[i][1], got[c], want[i]);
        free(got);
    }
}

Test(resample, replanning_an_axis_reuses_and_grows_its_buffers)
{
    /* One axis planned small, large, then small again gives the same
     * weights as a fresh plan each time. */
    static const int plans[][4] = {
        {10, 5, 0, 5}, {1000, 7, 1, 5}, {30, 90, 20, 40}, {10, 5, 0, 5}};
    resample_axis a = {0};
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        const int *p = plans[i];
        cr_assert_eq(plan(&a, p[0], p[1], p[2], p[3]), 0);
        resample_axis fresh = {0};
        cr_assert_eq(plan(&fresh, p[0], p[1], p[2], p[3]), 0);
        cr_assert_eq(a.out_n, fresh.out_n);
        cr_assert_eq(a.taps, fresh.taps);
        cr_assert_eq(a.lo, fresh.lo);
        cr_assert_eq(a.hi, fresh.hi);
        cr_assert_arr_eq(a.first, fresh.first, (size_t)a.out_n * sizeof(int));
        cr_assert_arr_eq(a.count, fresh.count, (size_t)a.out_n * sizeof(int));
        for (int o = 0; o < a.out_n; o++)
            cr_assert_arr_eq(a.w + (size_t)o * a.taps,
                             fresh.w + (size_t)o * a.taps,
                             (size_t)a.count[o] * sizeof(int16_t));
        resample_axis_free(&fresh);
    }
    resample_axis_free(&a);
    cr_assert_null(a.w, "free zeroes the axis");
    cr_assert_eq(a.cap_w, 0);
}

/* Decoding at 1/d divides the crop's coordinates by d: the interval starts
 * and ends between pixels. Weights and pixels still follow the reference. */
Test(resample, fractional_intervals_match_the_reference)
{
    static const struct {
        double in0, in1;
        int blo, bhi, rs, off, out;
    } k[] = {
        {8.5, 120.25, 8, 121, 50, 0, 50}, /* a train crop at 1/2 */
        {3.125, 61.75, 3, 62, 40, 5, 30}, /* at 1/8, with a window */
        {0.0, 160.5, 0, 161, 96, 16, 64}, /* eval at 1/2, odd width */
        {10.25, 11.5, 10, 12, 7, 0, 7},   /* a sliver enlarged */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const int in_n = k[i].bhi + 3, rows = 9;
        uint8_t *src = make_image(in_n, rows, 1, (unsigned)i + 40);
        resample_axis h = {0}, v = {0};
        cr_assert_eq(resample_axis_plan(&h, k[i].in0, k[i].in1, k[i].blo,
                                        k[i].bhi, k[i].rs, k[i].off, k[i].out),
                     0);
        /* Vertically the identity, so the rows show the horizontal pass. */
        cr_assert_eq(plan(&v, rows, rows, 0, rows), 0);
        ref_axis r;
        ref_axis_make_frac(&r, in_n, k[i].in0, k[i].in1, k[i].blo, k[i].bhi,
                           k[i].rs, k[i].off, k[i].out);
        cr_assert(h.lo >= k[i].blo && h.hi <= k[i].bhi, "case %zu", i);
        int16_t *vrow =
            calloc((size_t)in_n * 3 + (size_t)resample_pad(&h), sizeof *vrow);
        uint8_t *out = malloc((size_t)k[i].out * 3);
        for (int y = 0; y < rows; y++) {
            resample_v(&v, src, (size_t)in_n * 3, y, h.lo * 3, h.hi * 3, vrow);
            resample_h(&h, vrow, 0, out);
            for (int o = 0; o < k[i].out; o++)
                for (int c = 0; c < 3; c++) {
                    double want = 0.0;
                    for (int j = r.lo[o]; j < r.hi[o]; j++)
                        want += r.w[(size_t)o * in_n + j] *
                                src[((size_t)y * in_n + j) * 3 + c];
                    const int d =
                        abs((int)out[o * 3 + c] - (int)round_clamp(want));
                    cr_assert_leq(d, 1,
                                  "case %zu row %d output %d: %d vs "
                                  "%.3f",
                                  i, y, o, out[o * 3 + c], want);
                }
        }
        free(vrow);
        free(out);
        free(src);
        ref_axis_free(&r);
        resample_axis_free(&h);
        resample_axis_free(&v);
    }
}

/* The horizontal pass mirrors the row when asked, pixel by pixel. */
Test(resample, flip_mirrors_each_output_row_exactly)
{
    const int w = 37, out_w = 23;
    uint8_t *src = make_image(w, 1, 1, 77);
    resample_axis h = {0}, v = {0};
    cr_assert_eq(plan(&h, w, out_w, 0, out_w), 0);
    cr_assert_eq(plan(&v, 1, 1, 0, 1), 0);
    int16_t *vrow =
        calloc((size_t)w * 3 + (size_t)resample_pad(&h), sizeof *vrow);
    uint8_t a[23 * 3], b[23 * 3];
    resample_v(&v, src, (size_t)w * 3, 0, h.lo * 3, h.hi * 3, vrow);
    resample_h(&h, vrow, 0, a);
    resample_h(&h, vrow, 1, b);
    for (int x = 0; x < out_w; x++)
        cr_assert_arr_eq(b + x * 3, a + (out_w - 1 - x) * 3, 3, "pixel %d", x);
    free(vrow);
    free(src);
    resample_axis_free(&h);
    resample_axis_free(&v);
}

/* Every horizontal-pass version this CPU can run agrees with the portable
 * one bit for bit, on tap counts from 1 to 9, odd and even output widths,
 * with and without the flip. */
Test(resample, simd_and_portable_horizontal_passes_agree_exactly)
{
    /* Tap pairs 1 to 3 (the unrolled AVX2 steps) and more, even and odd
     * output counts (flipped, an odd one takes the pixel-pair path). */
    static const int widths[][2] = {{40, 40},  {40, 23}, {100, 17}, {9, 30},
                                    {300, 37}, {64, 64}, {7, 2},    {5, 1},
                                    {150, 64}, {20, 64}, {600, 9},  {80, 63}};
    int versions = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        const int in_n = widths[i][0], out_n = widths[i][1];
        resample_axis h = {0};
        cr_assert_eq(plan(&h, in_n, out_n, 0, out_n), 0);
        int16_t *row =
            calloc((size_t)in_n * 3 + (size_t)resample_pad(&h), sizeof *row);
        uint32_t s = (uint32_t)i * 2654435761u + 7u;
        for (int x = 0; x < in_n * 3; x++) {
            s = s * 1664525u + 1013904223u;
            row[x] = (int16_t)((s >> 16) % (255 << RESAMPLE_QBITS));
        }
        uint8_t want[64 * 3], got[64 * 3];
        for (int flip = 0; flip < 2; flip++) {
            resample_h_generic(&h, row, flip, want);
            resample_h(&h, row, flip, got);
            cr_assert_arr_eq(got, want, (size_t)out_n * 3, "dispatched");
            versions = 1;
#if defined(__x86_64__) || defined(__i386__)
            if (__builtin_cpu_supports("ssse3")) {
                resample_h_ssse3(&h, row, flip, got);
                cr_assert_arr_eq(got, want, (size_t)out_n * 3,
                                 "ssse3 %d->%d flip %d", in_n, out_n, flip);
                versions = 2;
            }
            if (__builtin_cpu_supports("avx2")) {
                resample_h_avx2(&h, row, flip, got);
                cr_assert_arr_eq(got, want, (size_t)out_n * 3,
                                 "avx2 %d->%d flip %d", in_n, out_n, flip);
                versions = 3;
            }
#endif
        }
        free(row);
        resample_axis_free(&h);
    }
    cr_log_info("horizontal-pass versions compared: %d", versions);
}

/* The AVX2 vertical pass (where the CPU has it) equals the portable one,
 * for tap counts 1 to 17 and 135 (odd counts pair with zeros), widths that
 * leave tails shorter than a vector, and sub-ranges starting mid-row. */
Test(resample, simd_and_portable_vertical_passes_agree_exactly)
{
#if defined(__x86_64__) || defined(__i386__)
    if (!__builtin_cpu_supports("avx2"))
        cr_skip_test("no AVX2 on this CPU: only the portable pass runs");
    /* 600 -> 9: 135 taps, past what the AVX2 pass broadcasts (32). */
    static const int sizes[][2] = {{40, 40},  {40, 23}, {100, 17}, {9, 30},
                                   {300, 37}, {7, 2},   {600, 9}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const int in_h = sizes[i][0], out_h = sizes[i][1], width = 101;
        uint8_t *src = make_image(width, in_h, 1, (unsigned)i + 90);
        resample_axis v = {0};
        cr_assert_eq(plan(&v, in_h, out_h, 0, out_h), 0);
        int16_t want[303], got[303];
        const int ranges[][2] = {{0, 303}, {3, 300}, {17, 34}, {5, 6}};
        for (int y = 0; y < out_h; y++)
            for (int r = 0; r < 4; r++) {
                const int x0 = ranges[r][0], x1 = ranges[r][1];
                const uint8_t *rows = src + (size_t)v.lo * width * 3;
                resample_v_generic(&v, rows, (size_t)width * 3, y, x0, x1,
                                   want);
                resample_v_avx2(&v, rows, (size_t)width * 3, y, x0, x1, got);
                cr_assert_arr_eq(
                    got + x0, want + x0, (size_t)(x1 - x0) * sizeof *got,
                    "%d->%d row %d range [%d, %d)", in_h, out_h, y, x0, x1);
            }
        free(src);
        resample_axis_free(&v);
    }
#else
    cr_skip_test("not x86: only the portable pass exists");
#endif
}
