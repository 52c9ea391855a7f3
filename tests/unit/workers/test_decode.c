/* The decoder (workers/decode.c) and sample_decode_full on generated
 * files: every entry point against djpeg, the header, the limits, skipping
 * rows, reuse after each kind of failure, strict mode, cropped rows. The
 * shared photos and hard files are test_decode_files.c's; pl_image_load
 * (loader/image.c) is tests/unit/loader/test_image.c's. The reference for
 * pixels is djpeg from libjpeg-turbo-progs: both sides are the same
 * libjpeg-turbo with the ISLOW IDCT and fancy upsampling, so every comparison
 * here has tolerance 0 (bit-exact) unless a comment says otherwise. */
#include <fcntl.h>
#include <strings.h>

#include "../common/grow.h"
#include "../workers/decode.h"
#include "../workers/sample.h"
#include "testdecode.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------- */

/* ---- generated files ----------------------------------------------------- */

/* The subsamplings and shapes the encoder can make, bit-exact with djpeg
 * through every entry point: decoder_*, sample_decode_full and
 * pl_image_load. */
Test(decode, generated_jpegs_match_djpeg_through_every_entry_point)
{
    static const struct {
        int w, h;
        tu_jpeg_opts o;
    } cases[] = {
        {96, 64, {0}},                         /* 4:2:0 */
        {97, 61, {.h_samp = 1, .v_samp = 1}},  /* 4:4:4, odd size */
        {101, 33, {.h_samp = 2, .v_samp = 1}}, /* 4:2:2 */
        {33, 101, {.h_samp = 1, .v_samp = 2}}, /* 4:4:0 */
        {75, 50, {.progressive = 1}},
        {63, 47, {.gray = 1}},
        {64, 48, {.gray = 1, .progressive = 1}},
        {1, 1, {0}},
        {17, 5, {.quality = 40}},
    };
    char dir[64];
    tu_tmpdir(dir);
    decoder *d;
    default_decoder(&d);
    decode_limits lim;
    decode_limits_default(&lim);
    sample_ctx ctx;
    cr_assert_eq(sample_init(&ctx, &lim), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], name[32], reason[DECODE_REASON_MAX] = "";
        snprintf(name, sizeof name, "g%zu.jpg", i);
        size_t len;
        uint8_t *buf =
            make_jpeg(dir, name, cases[i].w, cases[i].h, (unsigned)i + 1,
                      &cases[i].o, &len, path, sizeof path);
        uint8_t *rgb;
        int w, h;
        int rc = decode_all(d, buf, len, &rgb, &w, &h, reason);
        cr_assert_eq(rc, 0, "case %zu: %s (%s)", i, pl_err_name(rc), reason);
        cr_assert(w == cases[i].w && h == cases[i].h);
        assert_matches_djpeg(path, rgb, w, h);
        free(rgb);

        rc = sample_decode_full(&ctx, AT_FDCWD, path, MAX_FILE_BYTES, &rgb, &w,
                                &h, reason);
        cr_assert_eq(rc, 0, "case %zu: %s (%s)", i, pl_err_name(rc), reason);
        assert_matches_djpeg(path, rgb, w, h);
        free(rgb);

        pl_image img;
        rc = pl_image_load(path, &img);
        cr_assert_eq(rc, 0, "case %zu: %s", i, pl_last_error());
        assert_matches_djpeg(path, img.pixels, img.width, img.height);
        pl_image_free(&img);
        free(buf);
    }
    sample_fini(&ctx);
    decoder_destroy(d);
    tu_rm_rf(dir);
}

Test(decode, header_reports_size_components_and_progressive)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    decoder *d;
    default_decoder(&d);
    const struct {
        tu_jpeg_opts o;
        int comps, prog;
    } cases[] = {
        {{0}, 3, 0},
        {{.progressive = 1}, 3, 1},
        {{.gray = 1}, 1, 0},
    };
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        uint8_t *buf = make_jpeg(dir, "h.jpg", 123, 45, 3, &cases[i].o, &len,
                                 path, sizeof path);
        decode_info info = {0};
        char reason[DECODE_REASON_MAX];
        cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0, "%s", reason);
        cr_assert_eq(info.width, 123);
        cr_assert_eq(info.height, 45);
        cr_assert_eq(info.components, cases[i].comps);
        cr_assert_eq(info.progressive, cases[i].prog);
        decoder_close(d);
        free(buf);
    }
    decoder_destroy(d);
    tu_rm_rf(dir);
}

Test(decode, images_over_the_limits_fail_before_decoding_naming_the_size)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    size_t len;
    uint8_t *buf =
        make_jpeg(dir, "big.jpg", 300, 200, 5, NULL, &len, path, sizeof path);
    static const struct {
        int max_w, max_h;
        int64_t max_px;
        int ok;
    } cases[] = {
        {299, 32768, 178956970, 0},
        {32768, 199, 178956970, 0},
        {32768, 32768, 59999, 0},
        {300, 200, 60000, 1}, /* at the limit */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        decode_limits lim;
        decode_limits_default(&lim);
        lim.max_width = cases[i].max_w;
        lim.max_height = cases[i].max_h;
        lim.max_pixels = cases[i].max_px;
        decoder *d;
        cr_assert_eq(decoder_create(&d, &lim), 0);
        decode_info info = {0};
        char reason[DECODE_REASON_MAX] = "";
        const int rc = decoder_open(d, buf, len, &info, reason);
        if (cases[i].ok) {
            cr_assert_eq(rc, 0, "case %zu: %s", i, reason);
            cr_assert_eq(decoder_is_open(d), 1);
        } else {
            cr_assert_eq(rc, PL_ELIMIT, "case %zu: %s", i, pl_err_name(rc));
            cr_assert_not_null(strstr(reason, "300x200"), "case %zu: %s", i,
                               reason);
            cr_assert_not_null(strstr(reason, "exceeds the limits"), "%s",
                               reason);
            /* Refused from the header: nothing started, nothing left open. */
            cr_assert_eq(decoder_is_open(d), 0);
            cr_assert_eq(decoder_is_started(d), 0);
            cr_assert(!decoder_has_row_buffers(d),
                      "no row buffer was allocated");
        }
        decoder_destroy(d);
    }
    free(buf);
    tu_rm_rf(dir);
}

/* A progressive w x h image decoded under `tight` fails with PL_ELIMIT and
 * `want`, leaving the decoder closed; under `after` a small baseline file
 * then decodes to djpeg's pixels: the limits are per image. */
static void assert_limit_then_next_decodes(int w0, int h0,
                                           const decode_limits *tight,
                                           const decode_limits *after,
                                           const char *want)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    size_t len;
    tu_jpeg_opts o = {.progressive = 1}; /* jpeg_simple_progression: 10 */
    uint8_t *buf =
        make_jpeg(dir, "p.jpg", w0, h0, 2, &o, &len, path, sizeof path);
    decoder *d;
    cr_assert_eq(decoder_create(&d, tight), 0);
    uint8_t *rgb;
    int w, h;
    char reason[DECODE_REASON_MAX] = "";
    int rc = decode_all(d, buf, len, &rgb, &w, &h, reason);
    cr_assert_eq(rc, PL_ELIMIT, "%s (%s)", pl_err_name(rc), reason);
    cr_assert_str_eq(reason, want);
    cr_assert_eq(decoder_is_open(d), 0);
    decoder_set_limits(d, after);
    size_t len2;
    uint8_t *buf2 =
        make_jpeg(dir, "b.jpg", 40, 30, 4, NULL, &len2, path, sizeof path);
    rc = decode_all(d, buf2, len2, &rgb, &w, &h, reason);
    cr_assert_eq(rc, 0, "%s", reason);
    assert_matches_djpeg(path, rgb, w, h);
    free(rgb);
    free(buf2);
    free(buf);
    decoder_destroy(d);
    tu_rm_rf(dir);
}

Test(decode, progressive_files_with_too_many_scans_hit_the_scan_limit)
{
    decode_limits lim;
    decode_limits_default(&lim);
    lim.max_scans = 3;
    assert_limit_then_next_decodes(64, 64, &lim, &lim,
                                   "more than 3 progressive scans");
}

/* A decode that runs past its time limit stops, from within libjpeg, as
 * that image's PL_ELIMIT; the next image gets a fresh limit. (Here a large
 * progressive image against 1 ms; a hostile file meets the default.) */
Test(decode, a_decode_past_its_time_limit_is_elimit_and_the_next_decodes)
{
    decode_limits tight, after;
    decode_limits_default(&tight);
    after = tight;
    tight.max_decode_ms = 1;
    assert_limit_then_next_decodes(
        3000, 2000, &tight, &after,
        "decoding took longer than the limit of 1 ms");
}

/* Reads the rest of the image from the decoder's current row into
 * out + row * stride, returning the rows read. */
static int read_rest(decoder *d, uint8_t *out, int height, char *reason)
{
    const size_t stride = (size_t)decoder_width(d) * 3;
    int y = decoder_row(d), got = 0;
    while (y < height) {
        const uint8_t *rows;
        int n = 0;
        const int rc = decoder_read(d, &rows, &n, reason);
        cr_assert_eq(rc, 0, "row %d: %s", y, reason);
        cr_assert(n >= 1 && y + n <= height);
        memcpy(out + (size_t)y * stride, rows, (size_t)n * stride);
        y += n;
        got += n;
    }
    return got;
}

static void check_skip_matches_full_decode(const tu_jpeg_opts *o, int w, int h)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    size_t len;
    uint8_t *buf = make_jpeg(dir, "s.jpg", w, h, 7, o, &len, path, sizeof path);
    decoder *d;
    default_decoder(&d);
    uint8_t *full;
    int fw, fh;
    char reason[DECODE_REASON_MAX] = "";
    cr_assert_eq(decode_all(d, buf, len, &full, &fw, &fh, reason), 0, "%s",
                 reason);
    assert_matches_djpeg(path, full, fw, fh);

    const size_t stride = (size_t)w * 3;
    uint8_t *part = malloc(stride * (size_t)h);
    static const int ys[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 99};
    for (size_t i = 0; i < sizeof ys / sizeof ys[0] + 1; i++) {
        const int y = i < sizeof ys / sizeof ys[0] ? ys[i] : h - 1;
        cr_assert(y < h);
        decode_info info;
        cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0);
        cr_assert_eq(decoder_start(d, 1, 0, info.width, reason), 0);
        cr_assert_eq(decoder_skip_to(d, y, reason), 0, "skip to %d: %s", y,
                     reason);
        cr_assert_eq(decoder_row(d), y, "after skipping to %d", y);
        /* Skipping to the row it is on already is a no-op. */
        cr_assert_eq(decoder_skip_to(d, y, reason), 0);
        cr_assert_eq(decoder_row(d), y);
        memset(part, 0, stride * (size_t)h);
        cr_assert_eq(read_rest(d, part, h, reason), h - y);
        decoder_close(d);
        const size_t off = (size_t)y * stride, n = (size_t)(h - y) * stride;
        const size_t at = first_diff(part + off, full + off, n);
        cr_assert(at == n,
                  "skip to %d: row %zu differs from a decode from the top "
                  "(max diff %d)",
                  y, (size_t)y + at / stride,
                  tu_max_diff(part + off, full + off, n));
    }
    free(part);
    free(full);
    free(buf);
    decoder_destroy(d);
    tu_rm_rf(dir);
}

Test(decode, skip_to_gives_the_same_rows_as_reading_from_the_top_420)
{
    check_skip_matches_full_decode(NULL, 123, 157);
}

Test(decode, skip_to_gives_the_same_rows_as_reading_from_the_top_progressive)
{
    const tu_jpeg_opts o = {.progressive = 1};
    check_skip_matches_full_decode(&o, 131, 141);
}

Test(decode, skip_to_gives_the_same_rows_as_reading_from_the_top_422_and_gray)
{
    const tu_jpeg_opts o422 = {.h_samp = 2, .v_samp = 1};
    check_skip_matches_full_decode(&o422, 77, 119);
    const tu_jpeg_opts gray = {.gray = 1};
    check_skip_matches_full_decode(&gray, 50, 100);
}

/* A file whose header is cut short fails inside libjpeg (a longjmp out of
 * jpeg_read_header); a strict-mode warning fails mid-image; a limit fails
 * from the header; a non-JPEG never reaches libjpeg. After each, the same
 * decoder still decodes a good file exactly. */
Test(decode, decoder_is_reusable_after_each_kind_of_failure)
{
    char dir[64], path[256], good_path[256];
    tu_tmpdir(dir);
    size_t good_len, bad_len;
    uint8_t *good = make_jpeg(dir, "good.jpg", 90, 70, 11, NULL, &good_len,
                              good_path, sizeof good_path);
    uint8_t *bad = make_jpeg(dir, "bad.jpg", 200, 160, 12, NULL, &bad_len, path,
                             sizeof path);
    decode_limits lim;
    decode_limits_default(&lim);
    lim.strict = 1;
    decoder *d;
    cr_assert_eq(decoder_create(&d, &lim), 0);

    for (int kind = 0; kind < 5; kind++) {
        char reason[DECODE_REASON_MAX] = "";
        uint8_t *rgb = NULL;
        int w, h, rc, want;
        switch (kind) {
        case 0: /* header cut short: "JPEG datastream contains no image" */
            rc = decode_all(d, bad, 100, &rgb, &w, &h, reason);
            want = PL_ECORRUPT;
            break;
        case 1: /* strict: premature end in the middle of the scan */
            rc = decode_all(d, bad, bad_len * 6 / 10, &rgb, &w, &h, reason);
            want = PL_ECORRUPT;
            break;
        case 2: /* not a JPEG */
            rc = decode_all(d, (const uint8_t *)"GIF89a\1\0\1\0", 10, &rgb, &w,
                            &h, reason);
            want = PL_ENOTIMAGE;
            break;
        case 3: /* over the limit */
        {
            decode_limits small = lim;
            small.max_width = 100;
            decoder_set_limits(d, &small);
        }
            rc = decode_all(d, bad, bad_len, &rgb, &w, &h, reason);
            decoder_set_limits(d, &lim);
            want = PL_ELIMIT;
            break;
        default: /* abandoned half way, without an error */
        {
            decode_info info;
            cr_assert_eq(decoder_open(d, bad, bad_len, &info, reason), 0);
            cr_assert_eq(decoder_start(d, 1, 0, info.width, reason), 0);
            const uint8_t *rows;
            int n;
            cr_assert_eq(decoder_read(d, &rows, &n, reason), 0);
            rc = want = 0;
            break;
        }
        }
        cr_assert_eq(rc, want, "kind %d: %s, expected %s (%s)", kind,
                     pl_err_name(rc), pl_err_name(want), reason);
        cr_assert_null(rgb);
        if (rc < 0)
            cr_assert_neq(reason[0], '\0', "kind %d gives a reason", kind);
        rc = decode_all(d, good, good_len, &rgb, &w, &h, reason);
        cr_assert_eq(rc, 0, "good file after kind %d: %s", kind, reason);
        assert_matches_djpeg(good_path, rgb, w, h);
        cr_assert_eq(decoder_warnings(d, NULL), 0, "warnings are per image");
        free(rgb);
    }
    decoder_destroy(d);
    decoder_destroy(NULL); /* destroying nothing is a no-op */
    free(good);
    free(bad);
    tu_rm_rf(dir);
}

Test(decode, sample_decode_full_is_reusable_after_a_bad_file)
{
    char dir[64], good[256], bad[256];
    tu_tmpdir(dir);
    snprintf(good, sizeof good, "%s/good.jpg", dir);
    snprintf(bad, sizeof bad, "%s/bad.jpg", dir);
    tu_write_jpeg(good, 80, 60, 3, NULL);
    tu_write_file(bad, "BM not really", 13);
    decode_limits lim;
    decode_limits_default(&lim);
    sample_ctx ctx;
    cr_assert_eq(sample_init(&ctx, &lim), 0);
    char reason[SAMPLE_REASON_MAX] = "";
    uint8_t *rgb = NULL;
    int w = -1, h = -1;
    int rc = sample_decode_full(&ctx, AT_FDCWD, bad, MAX_FILE_BYTES, &rgb, &w,
                                &h, reason);
    cr_assert_eq(rc, PL_ENOTIMAGE);
    cr_assert_str_eq(reason, "not an image pinload reads (BMP data)");
    cr_assert_null(rgb);
    cr_assert(w == -1 && h == -1, "outputs untouched on failure");
    rc = sample_decode_full(&ctx, AT_FDCWD, good, MAX_FILE_BYTES, &rgb, &w, &h,
                            reason);
    cr_assert_eq(rc, 0, "%s", reason);
    assert_matches_djpeg(good, rgb, w, h);
    free(rgb);
    /* A file over max_file_bytes is refused before it is read. */
    rc = sample_decode_full(&ctx, AT_FDCWD, good, 10, &rgb, &w, &h, reason);
    cr_assert_eq(rc, PL_ELIMIT, "%s", pl_err_name(rc));
    sample_fini(&ctx);
    tu_rm_rf(dir);
}

/* ---- strict mode --------------------------------------------------------- */

static void check_truncated(const tu_jpeg_opts *o)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    size_t len;
    uint8_t *buf =
        make_jpeg(dir, "t.jpg", 256, 192, 9, o, &len, path, sizeof path);
    const size_t cut = len * 6 / 10;

    /* Normal mode: libjpeg pads the missing data, warns, and the image
     * decodes at its full size. */
    decoder *d;
    default_decoder(&d);
    uint8_t *rgb = NULL;
    int w, h;
    char reason[DECODE_REASON_MAX] = "";
    int rc = decode_all(d, buf, cut, &rgb, &w, &h, reason);
    cr_assert_eq(rc, 0, "%s (%s)", pl_err_name(rc), reason);
    cr_assert(w == 256 && h == 192);
    cr_assert_geq(decoder_warnings(d, NULL), 1);
    cr_assert_not_null(strstr(first_warning(d), "Premature end"), "%s",
                       first_warning(d));
    free(rgb);
    decoder_destroy(d);

    /* Strict mode: the same warning makes the image bad. */
    decode_limits lim;
    decode_limits_default(&lim);
    lim.strict = 1;
    cr_assert_eq(decoder_create(&d, &lim), 0);
    rc = decode_all(d, buf, cut, &rgb, &w, &h, reason);
    cr_assert_eq(rc, PL_ECORRUPT, "%s", pl_err_name(rc));
    cr_assert_null(rgb);
    cr_assert_not_null(strstr(reason, "Premature end"), "%s", reason);
    cr_assert_not_null(strstr(reason, "(strict)"), "%s", reason);
    cr_assert_eq(decoder_is_open(d), 0);
    /* The whole file is fine in strict mode. */
    rc = decode_all(d, buf, len, &rgb, &w, &h, reason);
    cr_assert_eq(rc, 0, "%s", reason);
    assert_matches_djpeg(path, rgb, w, h);
    free(rgb);
    decoder_destroy(d);
    free(buf);
    tu_rm_rf(dir);
}

Test(decode, truncated_baseline_decodes_with_a_warning_but_fails_in_strict_mode)
{
    check_truncated(NULL);
}

Test(decode,
     truncated_progressive_decodes_with_a_warning_but_fails_in_strict_mode)
{
    const tu_jpeg_opts o = {.progressive = 1};
    check_truncated(&o);
}

/* One warning and nothing else: three stray bytes before the second scan of
 * a progressive file, which libjpeg skips ("Corrupt JPEG data: 3 extraneous
 * bytes before marker"). The pixels are those of the clean file. */
Test(decode, a_single_warning_is_ignored_normally_and_fatal_in_strict_mode)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    size_t len;
    const tu_jpeg_opts o = {.progressive = 1};
    uint8_t *clean =
        make_jpeg(dir, "c.jpg", 80, 64, 6, &o, &len, path, sizeof path);
    /* The second SOS marker (entropy data stuffs 0xFF as FF 00, so FF DA is
     * always a marker). */
    size_t sos = 0;
    int seen = 0;
    for (size_t i = 0; i + 1 < len && seen < 2; i++)
        if (clean[i] == 0xFF && clean[i + 1] == 0xDA && ++seen == 2)
            sos = i;
    cr_assert_eq(seen, 2, "no second scan");
    uint8_t *dirty = malloc(len + 3);
    memcpy(dirty, clean, sos);
    memcpy(dirty + sos, "\x12\x34\x56", 3);
    memcpy(dirty + sos + 3, clean + sos, len - sos);

    decoder *d;
    default_decoder(&d);
    uint8_t *rgb;
    int w, h;
    char reason[DECODE_REASON_MAX] = "";
    cr_assert_eq(decode_all(d, dirty, len + 3, &rgb, &w, &h, reason), 0, "%s",
                 reason);
    cr_assert_eq(decoder_warnings(d, NULL), 1);
    cr_assert_not_null(strstr(first_warning(d), "extraneous bytes"), "%s",
                       first_warning(d));
    assert_matches_djpeg(path, rgb, w, h);
    free(rgb);
    decoder_destroy(d);

    decode_limits lim;
    decode_limits_default(&lim);
    lim.strict = 1;
    cr_assert_eq(decoder_create(&d, &lim), 0);
    const int rc = decode_all(d, dirty, len + 3, &rgb, &w, &h, reason);
    cr_assert_eq(rc, PL_ECORRUPT, "%s", pl_err_name(rc));
    cr_assert_not_null(strstr(reason, "3 extraneous bytes"), "%s", reason);
    cr_assert_not_null(strstr(reason, "(strict)"), "%s", reason);
    decoder_destroy(d);
    free(dirty);
    free(clean);
    tu_rm_rf(dir);
}

Test(decode, default_limits_are_the_documented_ones)
{
    decode_limits lim;
    memset(&lim, 0xff, sizeof lim);
    decode_limits_default(&lim);
    cr_assert_eq(lim.max_width, 32768);
    cr_assert_eq(lim.max_height, 32768);
    cr_assert_eq(lim.max_pixels, 178956970);
    cr_assert_eq(lim.max_scans, 256);
    cr_assert_eq(lim.max_decode_ms, 5000);
    cr_assert_eq(lim.strict, 0);
}

Test(decode, closing_or_finishing_an_idle_decoder_is_safe)
{
    decoder *d;
    default_decoder(&d);
    decoder_close(d);
    decoder_close(d);
    decoder_destroy(d);
    decoder_destroy(NULL); /* never created: no-op */
}

/* A partial-width decode (jpeg_crop_scanline) at any DCT scale gives the
 * pixels of a full decode at that scale, except within a few columns of a
 * cropped edge, where fancy upsampling treats the edge as the image's:
 * sample.c decodes 8 columns beyond what it reads, so that is checked. */
Test(decode, cropped_rows_equal_the_full_decode_inside_the_margin)
{
    char dir[64], path[128];
    tu_tmpdir(dir);
    static const tu_jpeg_opts kinds[] = {
        {.quality = 92},
        {.quality = 85, .progressive = 1},
        {.quality = 90, .h_samp = 2, .v_samp = 1}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        snprintf(path, sizeof path, "%s/%zu.jpg", dir, k);
        tu_write_jpeg(path, 333, 117, (unsigned)k + 5, &kinds[k]);
        size_t len;
        uint8_t *buf = tu_read_file(path, &len);
        decoder *d;
        decode_limits lim;
        decode_limits_default(&lim);
        cr_assert_eq(decoder_create(&d, &lim), 0);
        char reason[DECODE_REASON_MAX];
        for (int denom = 1; denom <= 8; denom *= 2) {
            decode_info info;
            cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0);
            int sw, sh;
            decoder_scaled_size(d, denom, &sw, &sh);
            cr_assert_eq(decoder_start(d, denom, 0, sw, reason), 0);
            cr_assert(decoder_xoff(d) == 0 && decoder_width(d) == sw &&
                          decoder_height(d) == sh,
                      "1/%d: %dx%d, want %dx%d", denom, decoder_width(d),
                      decoder_height(d), sw, sh);
            uint8_t *full = malloc((size_t)sw * sh * 3);
            cr_assert_eq(decoder_read_into(d, full, (size_t)sw * 3, sh, reason),
                         0);
            decoder_close(d);
            const int crops[][2] = {
                {sw / 3, sw / 3}, {1, sw / 2}, {sw / 2, sw - sw / 2}, {17, 9}};
            long compared = 0; /* columns checked, over the crops */
            for (size_t c = 0; c < 4; c++) {
                const int x0 = crops[c][0], w = crops[c][1];
                if (w < 1 || x0 + w > sw)
                    continue;
                cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0);
                cr_assert_eq(decoder_start(d, denom, x0, w, reason), 0);
                cr_assert(decoder_xoff(d) <= x0 &&
                              decoder_xoff(d) + decoder_width(d) >= x0 + w,
                          "1/%d crop [%d, %d): got [%d, %d)", denom, x0, x0 + w,
                          decoder_xoff(d), decoder_xoff(d) + decoder_width(d));
                uint8_t *part = malloc((size_t)decoder_width(d) * sh * 3);
                cr_assert_eq(decoder_read_into(d, part,
                                               (size_t)decoder_width(d) * 3, sh,
                                               reason),
                             0);
                /* Columns at least 8 away from a cropped edge. */
                const int lo = decoder_xoff(d) > 0 ? decoder_xoff(d) + 8 : 0;
                const int hi = decoder_xoff(d) + decoder_width(d) < sw
                                   ? decoder_xoff(d) + decoder_width(d) - 8
                                   : sw;
                compared += hi > lo ? hi - lo : 0;
                for (int y = 0; y < sh && lo < hi; y++)
                    cr_assert_arr_eq(part + ((size_t)y * decoder_width(d) +
                                             (lo - decoder_xoff(d))) *
                                                3,
                                     full + ((size_t)y * sw + lo) * 3,
                                     (size_t)(hi - lo) * 3,
                                     "kind %zu 1/%d crop [%d, %d) row %d", k,
                                     denom, x0, x0 + w, y);
                decoder_close(d);
                free(part);
            }
            cr_assert_gt(compared, 0, "kind %zu 1/%d: no column compared", k,
                         denom);
            free(full);
        }
        decoder_destroy(d);
        free(buf);
    }
    tu_rm_rf(dir);
}

/* The decoded rows a worker keeps for the resampler: one very large image
 * (a 4200 x 3000 region at full scale, 37.8 MB) must not leave the worker
 * holding that much for the rest of the run; the next ordinary sample gives
 * it back (it used to stay at its largest until destroy, up to ~0.5 GB at
 * max_pixels without DCT scaling). */
Test(decode, a_huge_samples_decoded_rows_are_not_kept_for_the_next)
{
    char dir[64], big[128], small[128];
    tu_tmpdir(dir);
    snprintf(big, sizeof big, "%s/big.jpg", dir);
    snprintf(small, sizeof small, "%s/small.jpg", dir);
    tu_write_jpeg(big, 4200, 3000, 3, NULL);
    tu_write_jpeg(small, 320, 240, 4, NULL);
    decode_limits lim;
    decode_limits_default(&lim);
    sample_ctx ctx;
    cr_assert_eq(sample_init(&ctx, &lim), 0);
    augment_params p;
    static const float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    augment_params_init(&p, PL_AUGMENT_NONE, PL_FORMAT_U8_NHWC, 16, 16, 1, mean,
                        std);
    p.dct_scaling = 0; /* the whole frame at full scale */
    uint8_t out[16 * 16 * 3];
    sample_times t = {0};
    char reason[SAMPLE_REASON_MAX] = "";
    cr_assert_eq(sample_produce(&ctx, &p,
                                &(location){.fd = AT_FDCWD, .path = big},
                                MAX_FILE_BYTES, 0, 0, out, &t, reason),
                 0, "%s", reason);
    cr_assert_geq(ctx.src_cap, (size_t)4200 * 3000 * 3);
    cr_assert_eq(sample_produce(&ctx, &p,
                                &(location){.fd = AT_FDCWD, .path = small},
                                MAX_FILE_BYTES, 0, 1, out, &t, reason),
                 0, "%s", reason);
    cr_assert_leq(ctx.src_cap, GROW_KEEP_BYTES, "kept %zu bytes", ctx.src_cap);
    cr_assert_geq(ctx.src_cap, (size_t)320 * 240 * 3);
    sample_fini(&ctx);
    tu_rm_rf(dir);
}
