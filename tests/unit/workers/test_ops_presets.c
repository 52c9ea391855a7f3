/* The presets through the ops pipeline draw and plan exactly as pinload
 * did before pipelines: augment_plan_make against a frozen copy of the
 * planner it replaced (below, as it stood), field by field, for every
 * preset, output shape, image shape, DCT scaling and thousands of
 * samples; and the whole samples (sample_produce) of the presets against
 * the same plans run through the old filters (resample_axis_plan, the
 * bilinear planner every earlier version used). So the default path's
 * bytes are what they were. */
#include <math.h>

#include "../common/philox.h"
#include "../workers/augment.h"
#include "../workers/sample.h"
#include "testaugment.h"
#include "testutil.h"

/* ---- the planner before pipelines, frozen ---- */

typedef struct old_plan {
    int src_x, src_y, src_w, src_h;
    int rs_w, rs_h;
    int out_x, out_y;
    int flip;
    int denom;
} old_plan;

static int py_round(double x)
{
    return (int)rint(x);
}

/* torchvision.transforms.RandomResizedCrop.get_params with scale (0.08, 1)
 * and ratio (3/4, 4/3): ten tries at a random area and aspect ratio, then a
 * centre crop clamped to the ratio range. */
static void random_resized_crop(philox_stream *rng, int width, int height,
                                old_plan *plan)
{
    const double area = (double)width * height;
    const double log_lo = log(3.0 / 4.0), log_hi = log(4.0 / 3.0);
    for (int attempt = 0; attempt < 10; attempt++) {
        const double target =
            area * (0.08 + (1.0 - 0.08) * philox_next_double(rng));
        const double aspect =
            exp(log_lo + (log_hi - log_lo) * philox_next_double(rng));
        const int w = py_round(sqrt(target * aspect));
        const int h = py_round(sqrt(target / aspect));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            plan->src_y =
                (int)philox_next_below(rng, (uint32_t)(height - h + 1));
            plan->src_x =
                (int)philox_next_below(rng, (uint32_t)(width - w + 1));
            plan->src_w = w;
            plan->src_h = h;
            return;
        }
    }
    const double in_ratio = (double)width / height;
    int w = width, h = height;
    if (in_ratio < 3.0 / 4.0)
        h = py_round(w / (3.0 / 4.0));
    else if (in_ratio > 4.0 / 3.0)
        w = py_round(h * (4.0 / 3.0));
    plan->src_w = w;
    plan->src_h = h;
    plan->src_x = (width - w) / 2;
    plan->src_y = (height - h) / 2;
}

/* torchvision's Resize(s) (shorter side to s, the longer truncated as
 * int(s * long / short)) followed by CenterCrop(out_h, out_w). */
static void resize_center_crop(const augment_params *p, int width, int height,
                               old_plan *plan)
{
    const int big = p->out_w > p->out_h ? p->out_w : p->out_h;
    const int s = big * 256 / 224;
    plan->src_x = plan->src_y = 0;
    plan->src_w = width;
    plan->src_h = height;
    if (width <= height) {
        plan->rs_w = s;
        plan->rs_h = (int)((double)s * height / width);
    } else {
        plan->rs_h = s;
        plan->rs_w = (int)((double)s * width / height);
    }
    plan->out_x = py_round((plan->rs_w - p->out_w) / 2.0);
    plan->out_y = py_round((plan->rs_h - p->out_h) / 2.0);
}

static void old_plan_make(const augment_params *p, int64_t epoch, int64_t index,
                          int width, int height, old_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->rs_w = p->out_w;
    plan->rs_h = p->out_h;
    switch (p->mode) {
    case PL_AUGMENT_TRAIN: {
        philox_stream rng;
        philox_stream_init(&rng, p->seed, PHILOX_DOMAIN_AUGMENT,
                           (uint64_t)epoch, (uint64_t)index);
        random_resized_crop(&rng, width, height, plan);
        plan->flip = philox_next_double(&rng) < 0.5;
        break;
    }
    case PL_AUGMENT_EVAL:
        resize_center_crop(p, width, height, plan);
        break;
    case PL_AUGMENT_NONE:
    default:
        plan->src_w = width;
        plan->src_h = height;
        break;
    }
    /* The largest DCT scale-down that still leaves at least one decoded
     * pixel per resized pixel, as Pillow's draft mode picks it. */
    plan->denom = 1;
    for (int d = 8; p->dct_scaling && d > 1; d /= 2) {
        if (plan->src_w >= d * plan->rs_w && plan->src_h >= d * plan->rs_h) {
            plan->denom = d;
            break;
        }
    }
}

/* ---- the bilinear weights before pipelines, frozen ---- */

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Larger remainder first; of equal ones, the lower tap. */
static int by_remainder(const void *a, const void *b, void *arg)
{
    const double *frac = arg;
    const int i = *(const int *)a, j = *(const int *)b;
    if (frac[i] != frac[j])
        return frac[i] > frac[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* Quantise n weights (summing to `sum` > 0) to Q14 integers summing to
 * exactly 1 << 14, each within one unit of its exact value: every weight is
 * rounded down, and the units left over go to the weights that lost the
 * most (largest remainders, the lower tap first among equals). Up to n
 * units are left over: a few are found by scanning, more by sorting
 * (order[n] scratch), so a filter thousands of taps wide (a 1 x 32768
 * image to a small output) costs n log n, not n^2. */
static void quantise(const double *ws, double *frac, int *order, int n,
                     double sum, int16_t *w)
{
    const int one = 1 << RESAMPLE_WBITS;
    int total = 0;
    for (int k = 0; k < n; k++) {
        const double exact = ws[k] / sum * one;
        w[k] = (int16_t)floor(exact);
        frac[k] = exact - w[k];
        total += w[k];
    }
    const int left = one - total;
    if (left <= 16) {
        for (int u = 0; u < left; u++) {
            int best = 0;
            for (int k = 1; k < n; k++)
                if (frac[k] > frac[best])
                    best = k;
            w[best]++;
            frac[best] = -1.0;
        }
        return;
    }
    for (int k = 0; k < n; k++)
        order[k] = k;
    qsort_r(order, (size_t)n, sizeof *order, by_remainder, frac);
    for (int u = 0; u < left; u++)
        w[order[u]]++;
}

/* resample_axis_plan's weights as they were made: output i reads
 * first[i] .. first[i] + count[i] - 1 with weights w[i * taps ...]. */
typedef struct old_axis {
    int taps, lo, hi;
    int first[512], count[512];
    int16_t w[512 * 64];
} old_axis;

static void old_axis_plan(old_axis *a, double in0, double in1, int bound_lo,
                          int bound_hi, int rs_n, int off, int out_n)
{
    const double scale = (in1 - in0) / rs_n;
    const double filterscale = scale > 1.0 ? scale : 1.0;
    const double support = filterscale;
    const int taps = (int)ceil(support) * 2 + 1;
    cr_assert_leq(taps, 64);
    cr_assert_leq(out_n, 512);
    double ws[128];
    int order[64];
    a->taps = taps;
    a->lo = bound_hi;
    a->hi = bound_lo;
    for (int i = 0; i < out_n; i++) {
        const double center = in0 + (off + i + 0.5) * scale;
        int xmin = (int)floor(center - support + 0.5);
        int xmax = (int)floor(center + support + 0.5);
        xmin = xmin < bound_lo ? bound_lo : xmin;
        xmax = xmax > bound_hi ? bound_hi : xmax;
        int n = xmax - xmin;
        n = n > taps ? taps : n;
        double sum = 0.0;
        for (int k = 0; k < n; k++)
            sum += ws[k] = triangle((k + xmin - center + 0.5) / filterscale);
        if (sum <= 0.0) {
            xmin = (int)floor(center);
            xmin = xmin < bound_lo    ? bound_lo
                   : xmin >= bound_hi ? bound_hi - 1
                                      : xmin;
            n = 1;
            ws[0] = sum = 1.0;
        }
        quantise(ws, ws + taps, order, n, sum, a->w + (size_t)i * taps);
        a->first[i] = xmin;
        a->count[i] = n;
        a->lo = xmin < a->lo ? xmin : a->lo;
        a->hi = xmin + n > a->hi ? xmin + n : a->hi;
    }
}

/* ---- the tests ---- */

static const pl_augment modes[] = {PL_AUGMENT_NONE, PL_AUGMENT_EVAL,
                                   PL_AUGMENT_TRAIN};

Test(ops_presets, each_preset_plans_every_sample_as_before)
{
    static const int outs[][2] = {
        {224, 224}, {16, 16}, {300, 100}, {97, 131}, {1, 1}};
    static const int images[][2] = {{640, 480},   {480, 640}, {1000, 10},
                                    {10, 1000},   {1, 1},     {33, 17},
                                    {4000, 3000}, {225, 224}};
    static augment_params p;
    long compared = 0;
    for (int m = 0; m < 3; m++)
        for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++)
            for (int dct = 0; dct < 2; dct++) {
                params(&p, modes[m], PL_FORMAT_U8_NHWC, outs[o][0], outs[o][1],
                       1000u * m + o);
                p.dct_scaling = dct;
                for (size_t s = 0; s < sizeof images / sizeof images[0]; s++)
                    for (int64_t i = 0; i < 150; i++) {
                        const int64_t epoch = i % 3, index = i * 7919;
                        const int w = images[s][0], h = images[s][1];
                        old_plan want;
                        augment_plan got;
                        old_plan_make(&p, epoch, index, w, h, &want);
                        augment_plan_make(&p, epoch, index, w, h, &got);
                        cr_assert(want.src_x == got.src_x &&
                                      want.src_y == got.src_y &&
                                      want.src_w == got.src_w &&
                                      want.src_h == got.src_h &&
                                      want.rs_w == got.rs_w &&
                                      want.rs_h == got.rs_h &&
                                      want.out_x == got.out_x &&
                                      want.out_y == got.out_y &&
                                      want.flip == got.flip &&
                                      want.denom == got.denom,
                                  "mode %d, %dx%d from %dx%d, dct %d, "
                                  "sample %lld of epoch %lld",
                                  modes[m], outs[o][0], outs[o][1], w, h, dct,
                                  (long long)index, (long long)epoch);
                        cr_assert(!got.vflip &&
                                  got.interp == OP_INTERP_BILINEAR &&
                                  got.antialias);
                        compared++;
                    }
            }
    cr_log_info("plans compared: %ld", compared);
}

/* resample_axis_plan_with(bilinear, antialias, data = bounds), which every
 * preset's sample goes through, makes the old planner's weights bit for
 * bit: shrinking, enlarging, DCT-scaled (fractional) intervals, windows. */
Test(ops_presets, the_bilinear_filter_weighs_as_before)
{
    static old_axis want;
    resample_axis got = {0};
    unsigned r = 12345;
    int compared = 0;
    for (int t = 0; t < 3000; t++) {
        r = r * 1103515245u + 12345u;
        const int img = 1 + (int)(r >> 8) % 900;
        r = r * 1103515245u + 12345u;
        const int lo = (int)(r >> 8) % img;
        r = r * 1103515245u + 12345u;
        const int len = 1 + (int)(r >> 8) % (img - lo);
        r = r * 1103515245u + 12345u;
        const int rs = 1 + (int)(r >> 8) % 400;
        r = r * 1103515245u + 12345u;
        const int out = 1 + (int)(r >> 8) % rs;
        const int off = (rs - out) / 2;
        const double d = (double)(1 << ((r >> 20) % 4)); /* a DCT scale */
        const double in0 = lo / d, in1 = (lo + len) / d;
        const int sw = (int)ceil(img / d);
        const int bhi = (int)ceil(in1) < sw ? (int)ceil(in1) : sw;
        if ((int)floor(in0) >= bhi || (int)ceil((in1 - in0) / rs) * 2 + 1 > 64)
            continue; /* an empty interval; more taps than old_axis holds */
        compared++;
        old_axis_plan(&want, in0, in1, (int)floor(in0), bhi, rs, off, out);
        const resample_filter bl = {OP_INTERP_BILINEAR, 1};
        cr_assert_eq(resample_axis_plan_with(&got, &bl, in0, in1,
                                             (int)floor(in0), bhi, 0, sw, rs,
                                             off, out),
                     0);
        cr_assert_eq(got.taps, want.taps);
        cr_assert_eq(got.lo, want.lo, "case %d", t);
        cr_assert_eq(got.hi, want.hi, "case %d", t);
        for (int i = 0; i < out; i++) {
            cr_assert_eq(got.first[i], want.first[i], "case %d out %d", t, i);
            cr_assert_eq(got.count[i], want.count[i], "case %d out %d", t, i);
            cr_assert_eq(memcmp(got.w + (size_t)i * got.taps,
                                want.w + (size_t)i * want.taps,
                                (size_t)want.count[i] * sizeof(int16_t)),
                         0, "case %d out %d", t, i);
        }
    }
    resample_axis_free(&got);
    cr_assert_gt(compared, 2500, "%d cases compared", compared);
}
