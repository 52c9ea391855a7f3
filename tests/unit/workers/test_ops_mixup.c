/* The batch op mixup (workers/ops/mixup.c, timm's Mixup in mode
 * "batch"): its parameters as the spec parses and writes them, the errors
 * (u8, no alpha, a second batch op, an op after it); applying forced
 * draws to tiny batches against the arithmetic written out here (each
 * product and the sum rounded to the format; the box swapped between
 * sample i and count - 1 - i; the soft labels of mixup_target); and the
 * draws: lambda's Beta moments, the switch and prob coins, cutmix's box
 * inside the image with lambda its complement, per batch and per rank.
 * The comparison with timm's own code is
 * python/tests/test_transforms_mixup_ref.py's. */
#include <math.h>

#include "../common/float16.h"
#include "../workers/ops/ops.h"
#include "pinload.h"
#include "testops.h"
#include "testutil.h"

static const op_setup f32_8x6 = {
    8, 6, PL_FORMAT_F32_NCHW, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};

static ops_pipeline pl; /* large: not on the stack */

static void parse_ok(const char *spec, const op_setup *s)
{
    char why[512];
    cr_assert_eq(ops_parse(&pl, spec, s, why, sizeof why), 0, "%s: %s", spec,
                 why);
}

static void refused(const char *spec, const op_setup *s, const char *want)
{
    tops_refused(&pl, s, spec, want);
}

#define RESIZE "resize(size=8x6,interpolation=bilinear,antialias=true);"
#define NORM "normalize(mean=0.5:0.5:0.5,std=0.25:0.25:0.25);"

Test(ops_mixup, parses_with_timms_defaults_and_names_its_errors)
{
    char got[1024];
    parse_ok("resize;normalize;mixup", &f32_8x6);
    ops_format(&pl, got, sizeof got);
    cr_assert_str_eq(got, RESIZE NORM
                     "mixup(mixup_alpha=1,cutmix_alpha=0,prob=1,"
                     "switch_prob=0.5,label_smoothing=0.1,correct_lam=true)");
    cr_assert_eq(pl.nbatch, 1);
    /* A minmax box is cutmix's, alpha 1, as timm sets it. */
    parse_ok("resize;mixup(0.8,cutmix_minmax=0.2:0.8,num_classes=10)",
             &f32_8x6);
    ops_format(&pl, got, sizeof got);
    cr_assert_str_eq(got, RESIZE "mixup(mixup_alpha=0.8,cutmix_alpha=1,"
                                 "cutmix_minmax=0.2:0.8,prob=1,"
                                 "switch_prob=0.5,label_smoothing=0.1,"
                                 "correct_lam=true,num_classes=10)");
    const op_setup u8 = {8, 6, PL_FORMAT_U8_NHWC, {0}, {1, 1, 1}};
    refused("resize;mixup", &u8,
            "mixup: mixes the normalised floats (as timm does on the "
            "batch), and config.format is u8: use f32, f16 or bf16");
    refused("resize;mixup(0,0)", &f32_8x6,
            "mixup: mixup_alpha=0 and cutmix_alpha=0: one of them (or "
            "cutmix_minmax) must be set, as timm asserts");
    refused("resize;mixup;mixup", &f32_8x6,
            "mixup: a second batch op (after mixup): one mixes a batch");
    refused("resize;mixup;erase", &f32_8x6,
            "erase: a after-normalize op after mixup (a batch op): the order "
            "is geometric ops (fused into the decode), pixel ops, normalize, "
            "after-normalize ops, a batch op");
    refused("resize;mixup(num_classes=2.5)", &f32_8x6,
            "mixup: num_classes=2.5: not a whole number");
}

/* ---- applying forced draws ---- */

typedef struct drawn {
    double lam;
    int32_t cutmix;
    int32_t yl, yh, xl, xh;
    double beta;
    int32_t cy, cx;
} drawn; /* mixup.c's, as its describe prints it */

enum { W = 8, H = 6, PLANE = W * H, NVAL = 3 * PLANE, MAXN = 5, K = 4 };

static float value(int i, int k)
{
    return (float)((i * 131 + k * 17) % 97) / 7.0f - 6.0f;
}

static void apply(op_batch *b, const drawn *d)
{
    const op_instance *op = &pl.op[pl.n - 1];
    op->kind->apply_batch(op, d, b);
}

Test(ops_mixup, mixup_blends_each_sample_with_its_mirror_in_float32)
{
    parse_ok("resize;mixup(label_smoothing=0.1)", &f32_8x6);
    for (int count = 1; count <= MAXN; count++) {
        static float x[MAXN][NVAL], orig[MAXN][NVAL];
        for (int i = 0; i < count; i++)
            for (int k = 0; k < NVAL; k++)
                orig[i][k] = x[i][k] = value(i, k);
        const int32_t labels[MAXN] = {3, 1, 3, 0, 2};
        float soft[MAXN * K];
        op_batch b = {x, PL_FORMAT_F32_NCHW, count,  W,    H,
                      0, sizeof x[0],        labels, soft, K};
        const drawn d = {0.3125, 0, 0, 0, 0, 0, 0, 0, 0};
        apply(&b, &d);
        const float lam = 0.3125f, rest = 0.6875f;
        for (int i = 0; i < count; i++) {
            const int j = count - 1 - i;
            for (int k = 0; k < NVAL; k++) {
                const float a = orig[i][k] * lam, c = orig[j][k] * rest;
                cr_assert_eq(x[i][k], a + c, "count %d, sample %d, value %d",
                             count, i, k);
            }
            /* mixup_target: off 0.025, on 0.925 as float32. */
            const float off = (float)(0.1 / K), on = (float)(1 - 0.1 + 0.1 / K);
            for (int c = 0; c < K; c++) {
                const float y1 = c == labels[i] ? on : off;
                const float y2 = c == labels[j] ? on : off;
                cr_assert_eq(soft[i * K + c], y1 * lam + y2 * rest,
                             "count %d, row %d, class %d", count, i, c);
            }
        }
    }
}

Test(ops_mixup, cutmix_swaps_the_box_with_the_mirror_in_either_layout)
{
    parse_ok("resize;mixup(0,1,label_smoothing=0)", &f32_8x6);
    for (int cl = 0; cl < 2; cl++) {
        static float x[4][NVAL], orig[4][NVAL];
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < NVAL; k++)
                orig[i][k] = x[i][k] = value(i, k);
        const int32_t labels[4] = {0, 1, 2, 3};
        float soft[4 * K];
        op_batch b = {x,  PL_FORMAT_F32_NCHW, 4,      W,    H,
                      cl, sizeof x[0],        labels, soft, K};
        /* rows 1..3, columns 2..6: 15 of 48 pixels; lam = 33/48 */
        const drawn d = {1.0 - 15.0 / 48.0, 1, 1, 4, 2, 7, 0.5, 2, 4};
        apply(&b, &d);
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < NVAL; k++) {
                const int c = cl ? k % 3 : k / PLANE;
                const int p = cl ? k / 3 : k % PLANE;
                const int y = p / W, xx = p % W;
                (void)c;
                const int in = y >= 1 && y < 4 && xx >= 2 && xx < 7;
                cr_assert_eq(x[i][k], orig[in ? 3 - i : i][k],
                             "layout %d, sample %d, value %d", cl, i, k);
            }
        const float lam = (float)(33.0 / 48.0), rest = (float)(15.0 / 48.0);
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < K; c++)
                cr_assert_eq(soft[i * K + c],
                             (c == i ? 1.0f : 0.0f) * lam +
                                 (c == 3 - i ? 1.0f : 0.0f) * rest);
    }
}

Test(ops_mixup, half_formats_round_each_step_to_the_format)
{
    parse_ok("resize;mixup", &(op_setup){8,
                                         6,
                                         PL_FORMAT_F16_NCHW,
                                         {0.5f, 0.5f, 0.5f},
                                         {0.25f, 0.25f, 0.25f}});
    for (int bf = 0; bf < 2; bf++) {
        const pl_format f = bf ? PL_FORMAT_BF16_NCHW : PL_FORMAT_F16_NCHW;
        static uint16_t x[2][NVAL], orig[2][NVAL];
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < NVAL; k++)
                orig[i][k] = x[i][k] = bf ? bfloat16_from_float(value(i, k))
                                          : float16_from_float(value(i, k));
        const int32_t labels[2] = {0, 1};
        float soft[2 * K];
        op_batch b = {x, f, 2, W, H, 0, sizeof x[0], labels, soft, K};
        const drawn d = {0.7, 0, 0, 0, 0, 0, 0, 0, 0};
        apply(&b, &d);
        const float lam = 0.7f, rest = (float)(1.0 - 0.7);
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < NVAL; k++) {
                float (*to)(uint16_t) =
                    bf ? bfloat16_to_float : float16_to_float;
                uint16_t (*from)(float) =
                    bf ? bfloat16_from_float : float16_from_float;
                const float a = to(from(to(orig[i][k]) * lam));
                const float c = to(from(to(orig[1 - i][k]) * rest));
                cr_assert_eq(x[i][k], from(a + c), "bf16 %d, %d/%d", bf, i, k);
            }
    }
}

Test(ops_mixup, lambda_one_leaves_the_batch_and_smooths_the_labels)
{
    parse_ok("resize;mixup(label_smoothing=0.2)", &f32_8x6);
    static float x[3][NVAL], orig[3][NVAL];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < NVAL; k++)
            orig[i][k] = x[i][k] = value(i, k);
    const int32_t labels[3] = {2, 0, 1};
    float soft[3 * K];
    op_batch b = {x, PL_FORMAT_F32_NCHW, 3,      W,    H,
                  0, sizeof x[0],        labels, soft, K};
    const drawn d = {1.0, 0, 0, 0, 0, 0, 0, 0, 0};
    apply(&b, &d);
    cr_assert_eq(memcmp(x, orig, sizeof x), 0);
    for (int i = 0; i < 3; i++)
        for (int c = 0; c < K; c++)
            cr_assert_eq(soft[i * K + c], c == labels[i]
                                              ? (float)(1 - 0.2 + 0.2 / K)
                                              : (float)(0.2 / K));
}

/* ---- the draws ---- */

static int draw_batch(int64_t epoch, int64_t batch, drawn *d)
{
    char buf[256];
    ops_describe(&pl, 11, epoch, batch, W, H, buf, sizeof buf);
    const char *m = strstr(buf, "mixup(");
    cr_assert_not_null(m, "%s", buf);
    memset(d, 0, sizeof *d);
    int top = 0, left = 0, hh = 0, ww = 0;
    int cy = 0, cx = 0;
    const int n =
        sscanf(m,
               "mixup(lam=%lf,cutmix=%d,top=%d,left=%d,height=%d,"
               "width=%d,beta=%lf,cy=%d,cx=%d)",
               &d->lam, &d->cutmix, &top, &left, &hh, &ww, &d->beta, &cy, &cx);
    cr_assert(n == 2 || n == 9, "%s", m);
    d->cy = cy;
    d->cx = cx;
    d->yl = top;
    d->xl = left;
    d->yh = top + hh;
    d->xh = left + ww;
    return n;
}

Test(ops_mixup, lambda_is_beta_and_the_coins_are_timms)
{
    /* Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)). */
    const double alphas[3] = {0.2, 0.8, 4.0};
    for (int t = 0; t < 3; t++) {
        char spec[64];
        snprintf(spec, sizeof spec, "resize;mixup(%g)", alphas[t]);
        parse_ok(spec, &f32_8x6);
        const int N = 20000;
        double s = 0, s2 = 0;
        for (int i = 0; i < N; i++) {
            drawn d;
            draw_batch(3, i, &d);
            cr_assert(d.lam >= 0 && d.lam <= 1 && !d.cutmix, "%g", d.lam);
            s += d.lam;
            s2 += d.lam * d.lam;
        }
        const double mean = s / N, var = s2 / N - mean * mean;
        const double want = 1.0 / (4.0 * (2.0 * alphas[t] + 1.0));
        /* 5 standard errors of each (the variance's from the fourth
         * moment, bounded by the variance itself). */
        cr_assert(fabs(mean - 0.5) < 5 * sqrt(want / N), "alpha %g: mean %g",
                  alphas[t], mean);
        cr_assert(fabs(var - want) < 5 * sqrt(2 * want / N) + 0.002,
                  "alpha %g: variance %g, want %g", alphas[t], var, want);
    }
    /* prob 0.3: 70% of batches unmixed; switch_prob 0.25: a quarter of
     * the mixed ones cutmix, each box in the image, lambda its share. */
    parse_ok("resize;mixup(0.8,1,prob=0.3,switch_prob=0.25)", &f32_8x6);
    int mixed = 0, cut = 0;
    const int N = 10000;
    for (int i = 0; i < N; i++) {
        drawn d;
        draw_batch(0, i, &d);
        if (d.lam == 1.0)
            continue;
        mixed++;
        if (!d.cutmix)
            continue;
        cut++;
        cr_assert(d.yl >= 0 && d.yl <= d.yh && d.yh <= H && d.xl >= 0 &&
                  d.xl <= d.xh && d.xh <= W);
        cr_assert_eq(d.lam, 1.0 - (double)((d.yh - d.yl) * (d.xh - d.xl)) /
                                      (double)(W * H));
        /* timm's rand_bbox about the centre drawn, from the beta. */
        const int ch = (int)(H * sqrt(1.0 - d.beta));
        const int cw = (int)(W * sqrt(1.0 - d.beta));
#define CLIP_(v, hi) ((v) < 0 ? 0 : (v) > (hi) ? (hi) : (v))
        cr_assert(d.cy >= 0 && d.cy < H && d.cx >= 0 && d.cx < W);
        cr_assert_eq(d.yl, CLIP_(d.cy - ch / 2, H));
        cr_assert_eq(d.yh, CLIP_(d.cy + (ch + 1) / 2, H));
        cr_assert_eq(d.xl, CLIP_(d.cx - cw / 2, W));
        cr_assert_eq(d.xh, CLIP_(d.cx + (cw + 1) / 2, W));
#undef CLIP_
    }
    cr_assert(abs(mixed - 3000) < 5 * sqrt(N * 0.21), "%d mixed", mixed);
    cr_assert(fabs((double)cut / mixed - 0.25) < 5 * sqrt(0.1875 / mixed),
              "%d of %d cutmix", cut, mixed);
}

Test(ops_mixup, each_batch_and_rank_draws_its_own)
{
    parse_ok("resize;mixup", &f32_8x6);
    drawn a, b, c;
    int same = 0;
    for (int i = 0; i < 200; i++) {
        draw_batch(1, i, &a);
        pl.rank = 1;
        draw_batch(1, i, &b);
        pl.rank = 0;
        draw_batch(2, i, &c);
        same += a.lam == b.lam || a.lam == c.lam;
        drawn again;
        draw_batch(1, i, &again);
        cr_assert_eq(again.lam, a.lam, "the same batch draws the same");
    }
    cr_assert_eq(same, 0);
}
