/* Augmentation plans (workers/augment.c): torchvision's RandomResizedCrop
 * with a p = 0.5 flip, Resize + CenterCrop for evaluation, plain resize;
 * whole samples through sample_produce against djpeg plus an independent
 * double-precision resize; the DCT scale. The row writers (u8, f32, f16)
 * are test_augment_writer.c's. */
#include <fcntl.h>
#include <math.h>

#include "../workers/augment.h"
#include "../workers/sample.h"
#include "testaugment.h"
#include "testutil.h"

static int plans_equal(const augment_plan *a, const augment_plan *b)
{
    return a->src_x == b->src_x && a->src_y == b->src_y &&
           a->src_w == b->src_w && a->src_h == b->src_h && a->rs_w == b->rs_w &&
           a->rs_h == b->rs_h && a->out_x == b->out_x && a->out_y == b->out_y &&
           a->flip == b->flip;
}

/* ---- train: RandomResizedCrop -------------------------------------------- */

Test(augment, train_crops_lie_inside_the_image_within_the_scale_and_ratio)
{
    const int W = 500, H = 375;
    const double area = (double)W * H;
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 224, 224, 1234);
    double min_frac = 2.0, max_frac = 0.0, min_ratio = 9.0, max_ratio = 0.0;
    int fallback = 0, n = 0;
    for (int64_t epoch = 0; epoch < 4; epoch++)
        for (int64_t index = 0; index < 500; index++, n++) {
            augment_plan pl;
            augment_plan_make(&p, epoch, index, W, H, &pl);
            const int w = pl.src_w, h = pl.src_h;
            cr_assert(1 <= w && w <= W && 1 <= h && h <= H,
                      "(%lld, %lld): %dx%d", (long long)epoch, (long long)index,
                      w, h);
            cr_assert(pl.src_x >= 0 && pl.src_y >= 0 && pl.src_x + w <= W &&
                          pl.src_y + h <= H,
                      "(%lld, %lld): %dx%d at (%d, %d) leaves the image",
                      (long long)epoch, (long long)index, w, h, pl.src_x,
                      pl.src_y);
            cr_assert(pl.rs_w == 224 && pl.rs_h == 224);
            cr_assert(pl.out_x == 0 && pl.out_y == 0);
            cr_assert(pl.flip == 0 || pl.flip == 1);
            if (w == W && h == H) {
                /* Maybe the centre fallback: 500x375 is 4:3 already, so the
                 * fallback is the whole image, itself in range. */
                fallback++;
            }
            /* w and h are rounded from sqrt(target * ratio) and
             * sqrt(target / ratio), so each is within 0.5 of the real
             * value: widen the ranges by that. */
            cr_assert((w + 0.5) * (h + 0.5) >= 0.08 * area,
                      "(%lld, %lld): %dx%d is under 8%% of the area",
                      (long long)epoch, (long long)index, w, h);
            cr_assert((w - 0.5) / (h + 0.5) <= 4.0 / 3.0 &&
                          (w + 0.5) / (h - 0.5) >= 3.0 / 4.0,
                      "(%lld, %lld): %dx%d is outside ratio [3/4, 4/3]",
                      (long long)epoch, (long long)index, w, h);
            const double frac = (double)w * h / area, ratio = (double)w / h;
            min_frac = fmin(min_frac, frac);
            max_frac = fmax(max_frac, frac);
            min_ratio = fmin(min_ratio, ratio);
            max_ratio = fmax(max_ratio, ratio);
        }
    cr_assert_eq(n, 2000);
    /* The draws cover the ranges, not one corner of them. */
    cr_assert_lt(min_frac, 0.10, "smallest crop %.3f of the area", min_frac);
    cr_assert_gt(max_frac, 0.90, "largest crop %.3f of the area", max_frac);
    cr_assert_lt(min_ratio, 0.78, "narrowest crop ratio %.3f", min_ratio);
    cr_assert_gt(max_ratio, 1.28, "widest crop ratio %.3f", max_ratio);
    cr_assert_lt(fallback, 40, "%d of 2000 whole-image crops", fallback);
}

Test(augment, train_plan_is_a_pure_function_of_its_inputs)
{
    augment_params p, q;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 224, 224, 7);
    params(&q, PL_AUGMENT_TRAIN, PL_FORMAT_F32_NCHW, 224, 224, 7);
    augment_plan first[200];
    for (int i = 0; i < 200; i++)
        augment_plan_make(&p, 3, i, 640, 480, &first[i]);
    /* Again, backwards, interleaved with other images and another
     * params object with the same seed: the same plans. */
    for (int i = 199; i >= 0; i--) {
        augment_plan other, again;
        augment_plan_make(&p, 9, i + 1000, 17, 33, &other);
        augment_plan_make(&p, 3, i, 640, 480, &again);
        cr_assert(plans_equal(&again, &first[i]), "index %d", i);
        augment_plan_make(&q, 3, i, 640, 480, &again);
        cr_assert(plans_equal(&again, &first[i]), "index %d (f32)", i);
    }
}

Test(augment, train_plan_changes_with_seed_epoch_index_and_size)
{
    augment_params p, other_seed;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 224, 224, 7);
    params(&other_seed, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 224, 224, 8);
    int d_seed = 0, d_epoch = 0, d_index = 0, d_high = 0, d_size = 0;
    for (int i = 0; i < 200; i++) {
        augment_plan a, b;
        augment_plan_make(&p, 3, i, 640, 480, &a);
        augment_plan_make(&other_seed, 3, i, 640, 480, &b);
        d_seed += !plans_equal(&a, &b);
        augment_plan_make(&p, 4, i, 640, 480, &b);
        d_epoch += !plans_equal(&a, &b);
        augment_plan_make(&p, 3, i + 200, 640, 480, &b);
        d_index += !plans_equal(&a, &b);
        /* The high 32 bits of the index count too. */
        augment_plan_make(&p, 3, i + ((int64_t)1 << 32), 640, 480, &b);
        d_high += !plans_equal(&a, &b);
        augment_plan_make(&p, 3, i, 641, 480, &b);
        d_size += !plans_equal(&a, &b);
    }
    cr_assert_gt(d_seed, 190, "seed: %d of 200 plans differ", d_seed);
    cr_assert_gt(d_epoch, 190, "epoch: %d of 200 plans differ", d_epoch);
    cr_assert_gt(d_index, 190, "index: %d of 200 plans differ", d_index);
    cr_assert_gt(d_high, 190, "index + 2^32: %d of 200 differ", d_high);
    /* One more column moves the crop for most samples (the same draws,
     * different rounding and offsets). */
    cr_assert_gt(d_size, 100, "size: %d of 200 plans differ", d_size);
}

Test(augment, train_flips_about_half_of_the_samples)
{
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 224, 224, 99);
    int flips = 0;
    for (int i = 0; i < 10000; i++) {
        augment_plan pl;
        augment_plan_make(&p, 0, i, 500, 375, &pl);
        flips += pl.flip;
    }
    const double f = flips / 10000.0;
    cr_assert(f >= 0.47 && f <= 0.53, "%.4f of samples flipped", f);
}

Test(augment, train_falls_back_to_the_centre_crop_for_extreme_ratios)
{
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 224, 224, 5);
    int flips = 0;
    for (int i = 0; i < 50; i++) {
        augment_plan pl;
        /* 1000x10: no crop of 8% of the area (800 px) with a ratio in
         * [3/4, 4/3] fits in 10 rows, so all ten tries fail. torchvision:
         * in_ratio 100 > 4/3, so h = 10, w = round(10 * 4/3) = 13,
         * x = (1000 - 13) // 2 = 493, y = (10 - 10) // 2 = 0. */
        augment_plan_make(&p, 0, i, 1000, 10, &pl);
        cr_assert(pl.src_x == 493 && pl.src_y == 0 && pl.src_w == 13 &&
                      pl.src_h == 10,
                  "1000x10, index %d: %dx%d at (%d, %d)", i, pl.src_w, pl.src_h,
                  pl.src_x, pl.src_y);
        cr_assert(pl.rs_w == 224 && pl.rs_h == 224 && pl.out_x == 0 &&
                  pl.out_y == 0);
        flips += pl.flip;
        /* 10x1000: in_ratio 0.01 < 3/4, so w = 10,
         * h = round(10 / (3/4)) = round(13.33) = 13, x = 0,
         * y = (1000 - 13) // 2 = 493. */
        augment_plan_make(&p, 0, i, 10, 1000, &pl);
        cr_assert(pl.src_x == 0 && pl.src_y == 493 && pl.src_w == 10 &&
                      pl.src_h == 13,
                  "10x1000, index %d: %dx%d at (%d, %d)", i, pl.src_w, pl.src_h,
                  pl.src_x, pl.src_y);
        /* 700x3 (ratio 233) falls back to round(3 * 4/3) = 4 wide:
         * x = (700 - 4) // 2 = 348. */
        augment_plan_make(&p, 0, i, 700, 3, &pl);
        cr_assert(pl.src_x == 348 && pl.src_y == 0 && pl.src_w == 4 &&
                      pl.src_h == 3,
                  "700x3, index %d: %dx%d at (%d, %d)", i, pl.src_w, pl.src_h,
                  pl.src_x, pl.src_y);
    }
    /* The flip is still drawn after the fallback. */
    cr_assert(flips > 5 && flips < 45, "%d of 50 fallback crops flipped",
              flips);
}

Test(augment, train_crop_of_a_single_pixel_image_is_that_pixel)
{
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 32, 16, 5);
    for (int i = 0; i < 100; i++) {
        augment_plan pl;
        augment_plan_make(&p, 1, i, 1, 1, &pl);
        cr_assert(pl.src_x == 0 && pl.src_y == 0 && pl.src_w == 1 &&
                  pl.src_h == 1);
        cr_assert(pl.rs_w == 32 && pl.rs_h == 16);
    }
}

/* ---- eval: Resize + CenterCrop, and none ---- */

Test(augment, eval_resizes_the_short_side_and_crops_the_centre)
{
    static const struct {
        int out_w, out_h, w, h;
        int rs_w, rs_h, out_x, out_y;
    } cases[] = {
        /* s = 224 * 256 / 224 = 256. 500x375: rs_w = int(256 * 500 / 375)
         * = int(341.33) = 341; out_x = round(117 / 2) = round(58.5) = 58
         * (half to even), out_y = round(32 / 2) = 16. */
        {224, 224, 500, 375, 341, 256, 58, 16},
        {224, 224, 375, 500, 256, 341, 16, 58},
        {224, 224, 224, 224, 256, 256, 16, 16},
        /* 640x480 is 4:3 too: the same as 500x375. */
        {224, 224, 640, 480, 341, 256, 58, 16},
        /* 1280x720: int(256 * 1280 / 720) = int(455.11) = 455;
         * round(231 / 2) = round(115.5) = 116 (even). */
        {224, 224, 1280, 720, 455, 256, 116, 16},
        {224, 224, 720, 1280, 256, 455, 16, 116},
        /* 333x500: rs_h = int(256 * 500 / 333) = int(384.38) = 384;
         * out_y = round(160 / 2) = 80. */
        {224, 224, 333, 500, 256, 384, 16, 80},
        /* 257x256: rs_w = 257, round(33 / 2) = round(16.5) = 16 (even);
         * 259x256: rs_w = 259, round(17.5) = 18 (even). */
        {224, 224, 257, 256, 257, 256, 16, 16},
        {224, 224, 259, 256, 259, 256, 18, 16},
        /* A small image is enlarged: 100x50 -> 512x256, round(288 / 2). */
        {224, 224, 100, 50, 512, 256, 144, 16},
        /* Output 320x240: s = floor(320 * 256 / 224) = floor(365.71) = 365;
         * 500x375 -> rs_w = int(365 * 500 / 375) = int(486.67) = 486;
         * out_x = round(166 / 2) = 83, out_y = round(125 / 2) =
         * round(62.5) = 62 (even). */
        {320, 240, 500, 375, 486, 365, 83, 62},
        /* Output 64x96: s = floor(96 * 256 / 224) = floor(109.71) = 109;
         * 640x480 -> rs_h = 109, rs_w = int(109 * 640 / 480) =
         * int(145.33) = 145; out_x = round(81 / 2) = round(40.5) = 40,
         * out_y = round(13 / 2) = round(6.5) = 6. */
        {64, 96, 640, 480, 145, 109, 40, 6},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        augment_params p;
        params(&p, PL_AUGMENT_EVAL, PL_FORMAT_U8_NHWC, cases[i].out_w,
               cases[i].out_h, 3);
        for (int64_t index = 0; index < 3; index++) {
            augment_plan pl;
            augment_plan_make(&p, index, index * 7, cases[i].w, cases[i].h,
                              &pl);
            cr_assert(pl.src_x == 0 && pl.src_y == 0 &&
                          pl.src_w == cases[i].w && pl.src_h == cases[i].h,
                      "case %zu: the whole image is the source", i);
            cr_assert(pl.rs_w == cases[i].rs_w && pl.rs_h == cases[i].rs_h,
                      "case %zu (%dx%d): resized to %dx%d, expected %dx%d", i,
                      cases[i].w, cases[i].h, pl.rs_w, pl.rs_h, cases[i].rs_w,
                      cases[i].rs_h);
            cr_assert(pl.out_x == cases[i].out_x && pl.out_y == cases[i].out_y,
                      "case %zu (%dx%d): window at (%d, %d), expected "
                      "(%d, %d)",
                      i, cases[i].w, cases[i].h, pl.out_x, pl.out_y,
                      cases[i].out_x, cases[i].out_y);
            cr_assert(pl.out_x + cases[i].out_w <= pl.rs_w &&
                      pl.out_y + cases[i].out_h <= pl.rs_h);
            cr_assert_eq(pl.flip, 0, "eval never flips");
        }
    }
}

Test(augment, none_resizes_the_whole_image_to_the_output)
{
    augment_params p;
    params(&p, PL_AUGMENT_NONE, PL_FORMAT_F32_NCHW, 320, 240, 11);
    static const int sizes[][2] = {{500, 375}, {1, 1}, {1000, 10}, {64, 96}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int index = 0; index < 20; index++) {
            augment_plan pl;
            augment_plan_make(&p, 2, index, sizes[i][0], sizes[i][1], &pl);
            const augment_plan want = {
                0, 0, sizes[i][0], sizes[i][1], 320, 240, 0, 0, 0};
            cr_assert(plans_equal(&pl, &want),
                      "%dx%d: %dx%d at (%d, %d) -> %dx%d flip %d", sizes[i][0],
                      sizes[i][1], pl.src_w, pl.src_h, pl.src_x, pl.src_y,
                      pl.rs_w, pl.rs_h, pl.flip);
        }
}

/* ---- whole samples through sample_produce -------------------------------- */

/* An independent double-precision reference of the antialiased bilinear
 * resize (Pillow's filter: centre (i + 0.5) * in / out, triangle widened by
 * the downscale factor, normalised weights), each output pixel a direct
 * weighted sum over the source rectangle, rounded half up. */
typedef struct ref_axis {
    double *w; /* [out_n][in_n] */
    int *lo, *hi;
} ref_axis;

static void ref_axis_make(ref_axis *a, int in_n, int rs_n, int off, int out_n)
{
    a->w = calloc((size_t)out_n * in_n, sizeof *a->w);
    a->lo = malloc((size_t)out_n * sizeof *a->lo);
    a->hi = malloc((size_t)out_n * sizeof *a->hi);
    cr_assert(a->w && a->lo && a->hi);
    const double scale = (double)in_n / rs_n, fs = scale > 1.0 ? scale : 1.0;
    for (int o = 0; o < out_n; o++) {
        const double centre = (off + o + 0.5) * scale;
        double *w = a->w + (size_t)o * in_n, sum = 0.0;
        a->lo[o] = in_n;
        a->hi[o] = 0;
        for (int j = 0; j < in_n; j++) {
            const double t = fabs(j + 0.5 - centre) / fs;
            w[j] = t < 1.0 ? 1.0 - t : 0.0;
            sum += w[j];
            if (w[j] > 0.0) {
                a->lo[o] = j < a->lo[o] ? j : a->lo[o];
                a->hi[o] = j + 1;
            }
        }
        for (int j = 0; j < in_n; j++)
            w[j] /= sum;
    }
}

static void ref_axis_free(ref_axis *a)
{
    free(a->w);
    free(a->lo);
    free(a->hi);
}

/* The sw x sh rectangle at (sx, sy) of src (src_w wide) scaled to
 * rs_w x rs_h, the out_w x out_h window at (ox, oy) kept, mirrored when
 * flip is set. */
static uint8_t *ref_resize(const uint8_t *src, int src_w, int sx, int sy,
                           int sw, int sh, int rs_w, int rs_h, int ox, int oy,
                           int out_w, int out_h, int flip)
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
                    const uint8_t *row =
                        src + ((size_t)(sy + j) * src_w + sx) * 3 + c;
                    double racc = 0.0;
                    for (int i = h.lo[x]; i < h.hi[x]; i++)
                        racc += h.w[(size_t)x * sw + i] * row[(size_t)i * 3];
                    acc += v.w[(size_t)y * sh + j] * racc;
                }
                acc = floor(acc + 0.5);
                const int dx = flip ? out_w - 1 - x : x;
                out[((size_t)y * out_w + dx) * 3 + c] =
                    (uint8_t)(acc < 0     ? 0
                              : acc > 255 ? 255
                                          : acc);
            }
    ref_axis_free(&h);
    ref_axis_free(&v);
    return out;
}

typedef struct e2e {
    char dir[64], path[256];
    uint8_t *ref; /* djpeg's decode */
    int w, h;
    sample_ctx ctx;
    size_t file_len;
} e2e;

static void e2e_setup(e2e *e, int w, int h, const tu_jpeg_opts *o)
{
    tu_tmpdir(e->dir);
    snprintf(e->path, sizeof e->path, "%s/img.jpg", e->dir);
    tu_write_jpeg(e->path, w, h, 21, o);
    e->ref = tu_djpeg(e->path, &e->w, &e->h);
    cr_assert_not_null(e->ref, "djpeg %s", e->path);
    cr_assert(e->w == w && e->h == h);
    struct stat st;
    cr_assert_eq(stat(e->path, &st), 0);
    e->file_len = (size_t)st.st_size;
    decode_limits lim;
    decode_limits_default(&lim);
    cr_assert_eq(sample_init(&e->ctx, &lim), 0);
}

/* Strict mode on or off for the context's next samples. */
static void set_strict(decoder *d, int strict)
{
    decode_limits lim = *decoder_limits(d);
    lim.strict = strict;
    decoder_set_limits(d, &lim);
}

static void e2e_teardown(e2e *e)
{
    sample_fini(&e->ctx);
    free(e->ref);
    tu_rm_rf(e->dir);
}

/* Runs one sample and compares it with the reference of its plan. */
static void check_sample(e2e *e, const augment_params *p, int64_t epoch,
                         int64_t index, augment_plan *plan_out)
{
    augment_plan pl;
    augment_plan_make(p, epoch, index, e->w, e->h, &pl);
    const size_t n = augment_sample_bytes(p);
    uint8_t *dst = malloc(n);
    memset(dst, 0xCD, n);
    sample_times t = {0};
    char reason[SAMPLE_REASON_MAX] = "";
    const int rc =
        sample_produce(&e->ctx, p, &(location){.fd = AT_FDCWD, .path = e->path},
                       (int64_t)256 << 20, epoch, index, dst, &t, reason);
    cr_assert_eq(rc, 0, "%s (%s)", pl_err_name(rc), reason);
    cr_assert_eq(t.bytes_read, e->file_len);
    uint8_t *want = ref_resize(e->ref, e->w, pl.src_x, pl.src_y, pl.src_w,
                               pl.src_h, pl.rs_w, pl.rs_h, pl.out_x, pl.out_y,
                               p->out_w, p->out_h, pl.flip);
    const int d = tu_max_diff(dst, want, (size_t)p->out_w * p->out_h * 3);
    cr_assert_leq(d, 1,
                  "mode %d, index %lld (%dx%d at (%d, %d) -> %dx%d, window "
                  "(%d, %d), flip %d): max diff %d from the reference",
                  p->mode, (long long)index, pl.src_w, pl.src_h, pl.src_x,
                  pl.src_y, pl.rs_w, pl.rs_h, pl.out_x, pl.out_y, pl.flip, d);
    free(want);
    free(dst);
    if (plan_out)
        *plan_out = pl;
}

Test(augment, none_sample_equals_the_reference_resize_of_the_djpeg_decode)
{
    e2e e;
    e2e_setup(&e, 640, 480, NULL);
    augment_params p;
    params(&p, PL_AUGMENT_NONE, PL_FORMAT_U8_NHWC, 320, 240, 0);
    check_sample(&e, &p, 0, 0, NULL);
    e2e_teardown(&e);
}

Test(augment, eval_sample_equals_the_reference_resize_and_crop)
{
    e2e e;
    e2e_setup(&e, 640, 480, NULL);
    augment_params p;
    params(&p, PL_AUGMENT_EVAL, PL_FORMAT_U8_NHWC, 224, 224, 0);
    augment_plan pl;
    check_sample(&e, &p, 0, 5, &pl);
    /* 640x480 -> 341x256, the 224x224 centre at (58, 16). */
    cr_assert(pl.rs_w == 341 && pl.rs_h == 256 && pl.out_x == 58 &&
              pl.out_y == 16);
    e2e_teardown(&e);
}

Test(augment, train_samples_equal_the_reference_crop_resize_and_flip)
{
    e2e e;
    e2e_setup(&e, 640, 480, NULL);
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 160, 128, 77);
    int flips = 0, runs = 0;
    for (int64_t index = 0; index < 40 && runs < 4; index++) {
        augment_plan pl;
        augment_plan_make(&p, 1, index, e.w, e.h, &pl);
        /* Two flipped and two unflipped samples. */
        if ((pl.flip && flips == 2) || (!pl.flip && runs - flips == 2))
            continue;
        check_sample(&e, &p, 1, index, NULL);
        flips += pl.flip;
        runs++;
    }
    cr_assert_eq(runs, 4);
    e2e_teardown(&e);
}

Test(augment, train_samples_from_a_progressive_file_equal_the_reference)
{
    const tu_jpeg_opts o = {.progressive = 1};
    e2e e;
    e2e_setup(&e, 300, 220, &o);
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 96, 96, 5);
    for (int64_t index = 0; index < 3; index++)
        check_sample(&e, &p, 0, index, NULL);
    e2e_teardown(&e);
}

Test(augment, f32_sample_is_the_lut_of_the_u8_sample_in_planes)
{
    e2e e;
    e2e_setup(&e, 200, 150, NULL);
    augment_params pu, pf;
    params(&pu, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 64, 48, 3);
    params(&pf, PL_AUGMENT_TRAIN, PL_FORMAT_F32_NCHW, 64, 48, 3);
    uint8_t *u8 = malloc(augment_sample_bytes(&pu));
    float *f32 = malloc(augment_sample_bytes(&pf));
    for (int64_t index = 0; index < 4; index++) {
        sample_times t = {0};
        char reason[SAMPLE_REASON_MAX];
        cr_assert_eq(sample_produce(&e.ctx, &pu,
                                    &(location){.fd = AT_FDCWD, .path = e.path},
                                    1 << 20, 0, index, u8, &t, reason),
                     0, "%s", reason);
        cr_assert_eq(sample_produce(&e.ctx, &pf,
                                    &(location){.fd = AT_FDCWD, .path = e.path},
                                    1 << 20, 0, index, f32, &t, reason),
                     0, "%s", reason);
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < 64 * 48; i++)
                cr_assert(f32[c * 64 * 48 + i] == pf.lut[c][u8[i * 3 + c]],
                          "index %lld plane %d pixel %d", (long long)index, c,
                          i);
    }
    free(u8);
    free(f32);
    e2e_teardown(&e);
}

/* A failing sample leaves an all-zero destination (0.0f in F32) and its
 * code; the reason does not repeat the path; the context still works. */
Test(augment, failing_samples_are_all_zero_with_their_status)
{
    e2e e;
    e2e_setup(&e, 120, 80, NULL);
    char png[300], missing[300], cut[300];
    snprintf(png, sizeof png, "%s/fake.jpg", e.dir);
    snprintf(missing, sizeof missing, "%s/missing.jpg", e.dir);
    snprintf(cut, sizeof cut, "%s/cut.jpg", e.dir);
    tu_write_file(png, "GIF89a\1\0\1\0\0\0\0", 13);
    size_t len;
    uint8_t *bytes = tu_read_file(e.path, &len);
    tu_write_file(cut, bytes, len / 2);
    free(bytes);

    static const struct {
        int which, strict, code;
        const char *reason;
    } cases[] = {
        {0, 0, PL_ENOTIMAGE, "not an image pinload reads (GIF data)"},
        {1, 0, PL_EIO, "No such file"},
        {2, 1, PL_ECORRUPT, "(strict)"},
    };
    const char *paths[] = {png, missing, cut};
    for (int f = 0; f < 2; f++) {
        augment_params p;
        params(&p, PL_AUGMENT_EVAL, f ? PL_FORMAT_F32_NCHW : PL_FORMAT_U8_NHWC,
               64, 64, 0);
        const size_t n = augment_sample_bytes(&p);
        uint8_t *dst = malloc(n), *zero = calloc(1, n);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            set_strict(e.ctx.dec, cases[i].strict);
            memset(dst, 0xAB, n);
            sample_times t = {0};
            char reason[SAMPLE_REASON_MAX] = "";
            const char *path = paths[cases[i].which];
            const int rc = sample_produce(
                &e.ctx, &p, &(location){.fd = AT_FDCWD, .path = path}, 1 << 20,
                0, 0, dst, &t, reason);
            cr_assert_eq(rc, cases[i].code, "%s: %s, expected %s (%s)", path,
                         pl_err_name(rc), pl_err_name(cases[i].code), reason);
            cr_assert_not_null(strstr(reason, cases[i].reason), "%s: %s", path,
                               reason);
            cr_assert_null(strstr(reason, e.dir),
                           "reason without the path: "
                           "%s",
                           reason);
            cr_assert_arr_eq(dst, zero, n, "%s: destination not all zero",
                             path);
        }
        set_strict(e.ctx.dec, 0);
        free(dst);
        free(zero);
    }
    /* The same context still makes the right pixels. */
    augment_params p;
    params(&p, PL_AUGMENT_NONE, PL_FORMAT_U8_NHWC, 50, 30, 0);
    check_sample(&e, &p, 0, 0, NULL);
    e2e_teardown(&e);
}

/* Strict mode judges the whole file: a file truncated near its end fails
 * for every crop, also for crops that lie entirely in the intact top part
 * (which decode fine in normal mode). Counts both kinds of crop so the
 * test cannot pass vacuously. */
Test(augment, strict_mode_fails_every_crop_of_a_damaged_file)
{
    e2e e;
    e2e_setup(&e, 160, 400, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(e.path, &len);
    tu_write_file(e.path, bytes, len * 3 / 4); /* the bottom quarter is lost */
    free(bytes);
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 32, 32, 5);
    const size_t n = augment_sample_bytes(&p);
    uint8_t *dst = malloc(n);
    int top_crops = 0;
    for (int64_t index = 0; index < 40; index++) {
        augment_plan pl;
        augment_plan_make(&p, 0, index, 160, 400, &pl);
        const int in_top_half = pl.src_y + pl.src_h <= 200;
        top_crops += in_top_half;
        sample_times t = {0};
        char reason[SAMPLE_REASON_MAX] = "";
        set_strict(e.ctx.dec, 0);
        int rc = sample_produce(&e.ctx, &p,
                                &(location){.fd = AT_FDCWD, .path = e.path},
                                1 << 20, 0, index, dst, &t, reason);
        if (in_top_half)
            cr_assert_eq(rc, 0, "lenient, crop in the intact part: %s (%s)",
                         pl_err_name(rc), reason);
        set_strict(e.ctx.dec, 1);
        rc = sample_produce(&e.ctx, &p,
                            &(location){.fd = AT_FDCWD, .path = e.path},
                            1 << 20, 0, index, dst, &t, reason);
        cr_assert_eq(rc, PL_ECORRUPT, "strict, index %lld (crop y %d..%d): %s",
                     (long long)index, pl.src_y, pl.src_y + pl.src_h,
                     pl_err_name(rc));
    }
    cr_assert_geq(top_crops, 3, "only %d crops in the intact half", top_crops);
    free(dst);
    e2e_teardown(&e);
}

/* ---- decoding at a DCT scale ---- */

/* The largest 1/d (8, 4, 2) that leaves at least one decoded pixel per
 * resized pixel on both axes, only when asked. */
Test(augment, dct_scale_is_the_largest_that_keeps_the_resize_a_shrink)
{
    static const struct {
        pl_augment mode;
        int w, h, out, want;
    } k[] = {
        {PL_AUGMENT_NONE, 1280, 960, 224, 4},  /* 1280/4 = 320, 960/4 = 240 */
        {PL_AUGMENT_NONE, 1024, 768, 224, 2},  /* 768/4 = 192 < 224 */
        {PL_AUGMENT_NONE, 3584, 1792, 224, 8}, /* 1792/8 = 224 exactly */
        {PL_AUGMENT_NONE, 300, 300, 224, 1},
        {PL_AUGMENT_EVAL, 1280, 853, 224, 2}, /* resized to 384x256 */
        {PL_AUGMENT_EVAL, 500, 375, 224, 1},  /* resized to 341x256 */
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        augment_params p;
        params(&p, k[i].mode, PL_FORMAT_U8_NHWC, k[i].out, k[i].out, 0);
        augment_plan pl;
        augment_plan_make(&p, 0, 0, k[i].w, k[i].h, &pl);
        cr_assert_eq(pl.denom, 1, "case %zu: exact unless asked", i);
        p.dct_scaling = 1;
        augment_plan_make(&p, 0, 0, k[i].w, k[i].h, &pl);
        cr_assert_eq(pl.denom, k[i].want, "case %zu: 1/%d, want 1/%d", i,
                     pl.denom, k[i].want);
    }
    /* Train crops: always a shrink after scaling, and the largest such. */
    augment_params p;
    params(&p, PL_AUGMENT_TRAIN, PL_FORMAT_U8_NHWC, 64, 64, 3);
    p.dct_scaling = 1;
    int scaled = 0;
    for (int64_t index = 0; index < 500; index++) {
        augment_plan pl;
        augment_plan_make(&p, 0, index, 1000, 750, &pl);
        cr_assert(pl.src_w >= pl.denom * 64 && pl.src_h >= pl.denom * 64,
                  "index %lld: %dx%d at 1/%d", (long long)index, pl.src_w,
                  pl.src_h, pl.denom);
        if (pl.denom < 8)
            cr_assert(pl.src_w < 2 * pl.denom * 64 ||
                          pl.src_h < 2 * pl.denom * 64,
                      "index %lld: 1/%d is not the largest", (long long)index,
                      pl.denom);
        scaled += pl.denom > 1;
    }
    cr_assert_gt(scaled, 400, "most crops of a 1000x750 image to 64 scale");
}

/* Samples decoded at a DCT scale stay close to the exact resize of the full
 * decode: the scaled IDCT is a good low-pass filter of its own. */
Test(augment, dct_scaled_samples_stay_close_to_the_exact_resize)
{
    e2e e;
    e2e_setup(&e, 1024, 768, NULL);
    static const pl_augment modes[] = {PL_AUGMENT_NONE, PL_AUGMENT_EVAL,
                                       PL_AUGMENT_TRAIN};
    int checked = 0;
    for (int m = 0; m < 3; m++) {
        for (int64_t index = 0; index < 8; index++) {
            augment_params p;
            params(&p, modes[m], PL_FORMAT_U8_NHWC, 112, 112, 0);
            p.dct_scaling = 1;
            augment_plan pl;
            augment_plan_make(&p, 0, index, e.w, e.h, &pl);
            if (pl.denom == 1)
                continue;
            const size_t n = augment_sample_bytes(&p);
            uint8_t *got = malloc(n);
            sample_times t = {0};
            char reason[SAMPLE_REASON_MAX] = "";
            cr_assert_eq(
                sample_produce(&e.ctx, &p,
                               &(location){.fd = AT_FDCWD, .path = e.path},
                               1 << 24, 0, index, got, &t, reason),
                0, "%s", reason);
            uint8_t *want = ref_resize(e.ref, e.w, pl.src_x, pl.src_y, pl.src_w,
                                       pl.src_h, pl.rs_w, pl.rs_h, pl.out_x,
                                       pl.out_y, 112, 112, pl.flip);
            double se = 0.0;
            for (size_t i = 0; i < n; i++)
                se += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
            const double psnr = 10.0 * log10(255.0 * 255.0 / (se / n + 1e-12));
            cr_assert_geq(psnr, 35.0, "mode %d index %lld at 1/%d: PSNR %.1f",
                          modes[m], (long long)index, pl.denom, psnr);
            free(got);
            free(want);
            checked++;
        }
    }
    cr_assert_geq(checked, 9, "only %d samples were decoded scaled", checked);
    e2e_teardown(&e);
}
