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
    "g1",      "g2",      "g4",         "g8",        "g16",      "ga8",
    "ga16",    "rgb8",    "rgb16",      "rgba8",     "rgba16",   "p1",
    "p2",      "p4",      "p8",         "g8_trns",   "g16_trns", "rgb8_trns",
    "p4_trns", "p8_trns", "rgb8_adam7", "g16_adam7", "p2_adam7", "rgba16_adam7",
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
    static const int rects[][4] = {{0, 0, 1, 1},    {5, 3, 9, 7},
                                   {17, 11, 20, 2}, {1, 0, 30, 25},
                                   {0, 20, 37, 9},  {36, 28, 1, 1}};
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
            const size_t at =
                first_diff(out + (size_t)y * cw * 3, want, (size_t)cw * 3);
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

/* ---- bombs, limits and bad files ---------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A PNG whose IHDR says w x h (8-bit RGB, interlaced or not) followed by
 * a few bytes of IDAT: all a bomb needs. [out] *len. */
static uint8_t *png_header_only(uint32_t w, uint32_t h, int depth,
                                int interlace, size_t *len)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    uint8_t *b = calloc(1, 64);
    memcpy(b, sig, 8);
    put32(b + 8, 13);
    memcpy(b + 12, "IHDR", 4);
    put32(b + 16, w);
    put32(b + 20, h);
    b[24] = (uint8_t)depth;
    b[25] = 2; /* RGB */
    b[28] = (uint8_t)interlace;
    put32(b + 29, (uint32_t)crc32(0, b + 12, 17));
    put32(b + 33, 2);
    memcpy(b + 37, "IDAT", 4);
    b[41] = 0x78;
    b[42] = 0x9C;
    put32(b + 43, (uint32_t)crc32(0, b + 37, 6));
    *len = 47;
    return b;
}

/* A lossless WebP whose VP8L header says w x h (1..16384). */
static uint8_t *webp_header_only(uint32_t w, uint32_t h, size_t *len)
{
    uint8_t *b = calloc(1, 64);
    memcpy(b, "RIFF", 4);
    const uint32_t riff = 4 + 8 + 6;
    memcpy(b + 4, (uint8_t[4]){riff, riff >> 8, 0, 0}, 4);
    memcpy(b + 8, "WEBPVP8L", 8);
    b[16] = 6; /* chunk size, little-endian */
    b[20] = 0x2F;
    const uint32_t bits = (w - 1) | (h - 1) << 14;
    for (int i = 0; i < 4; i++)
        b[21 + i] = (uint8_t)(bits >> (8 * i));
    *len = 26;
    return b;
}

static int open_with(const uint8_t *buf, size_t len, const decode_limits *lim,
                     char *reason, double *ms)
{
    decoder *d;
    cr_assert_eq(decoder_create(&d, lim), 0);
    decode_info info;
    const double t0 = tu_seconds();
    const int rc = decoder_open(d, buf, len, &info, reason);
    *ms = (tu_seconds() - t0) * 1e3;
    decoder_destroy(d);
    return rc;
}

Test(decode_formats, bombs_are_refused_from_the_header)
{
    decode_limits lim;
    decode_limits_default(&lim);
    char reason[DECODE_REASON_MAX];
    double ms;
    size_t len;
    /* 100000 x 100000: past max_width/max_height and max_pixels */
    uint8_t *b = png_header_only(100000, 100000, 8, 0, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "100000x100000 exceeds the limits (max "
                             "32768x32768, 178956970 pixels)");
    cr_assert_lt(ms, 50.0);
    free(b);
    /* 20000 x 10000: within the sides, past Pillow's pixel limit */
    b = png_header_only(20000, 10000, 8, 0, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "20000x10000 exceeds the limits (max "
                             "32768x32768, 178956970 pixels)");
    free(b);
    /* Adam7 10000 x 10000 at 16 bits: decoded whole, 572 MiB */
    b = png_header_only(10000, 10000, 16, 1, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "10000x10000 interlaced PNG needs 573 MiB to "
                             "decode whole, over the decode memory budget "
                             "of 512 MiB");
    free(b);
    /* the same, not interlaced: a few rows, accepted from the header */
    b = png_header_only(10000, 10000, 16, 0, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), 0, "%s", reason);
    free(b);
    /* WebP 16384 x 16384: past max_pixels */
    b = webp_header_only(16384, 16384, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "16384x16384 exceeds the limits (max "
                             "32768x32768, 178956970 pixels)");
    cr_assert_lt(ms, 50.0);
    free(b);
    /* WebP 12000 x 12000 lossless: 144 Mpx allowed, 550 MiB of ARGB not */
    b = webp_header_only(12000, 12000, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "12000x12000 lossless WebP needs 550 MiB to "
                             "decode, over the decode memory budget of 512 "
                             "MiB");
    free(b);
    /* and the side limits the caller set */
    lim.max_width = 100;
    b = webp_header_only(101, 5, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "101x5 exceeds the limits (max 100x32768, "
                             "178956970 pixels)");
    free(b);
}

/* A big, cheap PNG (constant rows, zlib level 1) decoded under a 1 ms
 * budget stops with PL_ELIMIT, and the decoder is fine afterwards. */
Test(decode_formats, png_decode_time_is_bounded)
{
    const uint32_t w = 3000, h = 3000;
    const size_t raw_len = (size_t)(w * 3 + 1) * h;
    uint8_t *raw = calloc(1, raw_len);
    uLongf zlen = compressBound(raw_len);
    uint8_t *z = malloc(zlen);
    cr_assert_eq(compress2(z, &zlen, raw, raw_len, 1), Z_OK);
    size_t hlen;
    uint8_t *head = png_header_only(w, h, 8, 0, &hlen);
    const size_t len = 33 + 12 + zlen + 12;
    uint8_t *png = malloc(len);
    memcpy(png, head, 33);
    put32(png + 33, (uint32_t)zlen);
    memcpy(png + 37, "IDAT", 4);
    memcpy(png + 41, z, zlen);
    put32(png + 41 + zlen, (uint32_t)crc32(0, png + 37, (uInt)zlen + 4));
    memcpy(png + 45 + zlen, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
    decode_limits lim;
    decode_limits_default(&lim);
    decoder *d;
    cr_assert_eq(decoder_create(&d, &lim), 0);
    char reason[DECODE_REASON_MAX];
    uint8_t *rgb;
    int ow, oh;
    cr_assert_eq(decode_all(d, png, len, &rgb, &ow, &oh, reason), 0, "%s",
                 reason);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        cr_assert_eq(rgb[i], 0);
    free(rgb);
    lim.max_decode_ms = 1;
    decoder_set_limits(d, &lim);
    /* the clock starts at decoder_open: let the budget pass first */
    decode_info info;
    cr_assert_eq(decoder_open(d, png, len, &info, reason), 0);
    cr_assert_eq(decoder_start(d, 1, 0, (int)w, reason), 0);
    const uint64_t t0 = clock_now_ns();
    while (clock_now_ns() - t0 < 2000000)
        ;
    cr_assert_eq(decoder_skip_to(d, (int)h - 1, reason), PL_ELIMIT);
    cr_assert_str_eq(reason, "decoding took longer than the limit of 1 ms");
    cr_assert_eq(decoder_is_open(d), 0);
    free(head);
    free(z);
    free(raw);
    free(png);
    decoder_destroy(d);
}

/* Damaged files: an error naming the format and libspng's or libwebp's
 * reason, the sample zeros, and the next image decodes as if alone. */
Test(decode_formats, damaged_files_fail_with_a_reason_and_leave_no_trace)
{
    size_t len, ref_len;
    uint8_t *ref;
    uint8_t *png = fixture("rgb8", "png", &len, &ref, &ref_len);
    decoder *d;
    default_decoder(&d);
    char reason[DECODE_REASON_MAX];
    uint8_t *rgb;
    int w, h;
    /* cut in the middle of the image data */
    cr_assert_eq(decode_all(d, png, len / 2, &rgb, &w, &h, reason),
                 PL_ECORRUPT);
    cr_assert_eq(strncmp(reason, "PNG: ", 5), 0, "%s", reason);
    /* a flipped bit in the image data: its chunk's CRC fails */
    png[len / 2] ^= 1;
    int rc = decode_all(d, png, len, &rgb, &w, &h, reason);
    cr_assert_eq(rc, PL_ECORRUPT, "%d %s", rc, reason);
    cr_assert_str_eq(reason, "PNG: invalid chunk checksum");
    png[len / 2] ^= 1;
    cr_assert_eq(decode_all(d, png, len, &rgb, &w, &h, reason), 0, "%s",
                 reason);
    assert_same("rgb8 after failures", rgb, ref, w, h);
    free(rgb);
    free(ref);
    size_t wlen;
    uint8_t *webp = fixture("lossy", "webp", &wlen, &ref, &ref_len);
    cr_assert_eq(decode_all(d, webp, wlen * 2 / 3, &rgb, &w, &h, reason),
                 PL_ECORRUPT);
    cr_assert_str_eq(reason, "WebP: truncated data");
    cr_assert_eq(decode_all(d, webp, wlen, &rgb, &w, &h, reason), 0, "%s",
                 reason);
    assert_same("lossy after failures", rgb, ref, w, h);
    free(rgb);
    free(ref);
    /* a signature and nothing else */
    cr_assert_eq(decode_all(d, png, 8, &rgb, &w, &h, reason), PL_ECORRUPT);
    cr_assert_eq(decode_all(d, webp, 12, &rgb, &w, &h, reason), PL_ECORRUPT);
    cr_assert_str_eq(reason, "WebP: truncated data");
    decoder_destroy(d);
    free(png);
    free(webp);
}

/* WebP's time limit: checked between slices of input and once decoded;
 * past it, PL_ELIMIT, and the decoder is fine afterwards. */
Test(decode_formats, webp_decode_time_is_bounded)
{
    size_t len, ref_len;
    uint8_t *ref;
    uint8_t *buf = fixture("lossless", "webp", &len, &ref, &ref_len);
    decode_limits lim;
    decode_limits_default(&lim);
    lim.max_decode_ms = 1;
    decoder *d;
    cr_assert_eq(decoder_create(&d, &lim), 0);
    char reason[DECODE_REASON_MAX];
    decode_info info;
    cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0);
    cr_assert_eq(decoder_start(d, 1, 0, info.width, reason), 0);
    const uint64_t t0 = clock_now_ns();
    while (clock_now_ns() - t0 < 2000000)
        ;
    uint8_t *rgb = malloc(ref_len);
    cr_assert_eq(
        decoder_read_into(d, rgb, (size_t)info.width * 3, info.height, reason),
        PL_ELIMIT);
    cr_assert_str_eq(reason, "decoding took longer than the limit of 1 ms");
    cr_assert_eq(decoder_is_open(d), 0);
    lim.max_decode_ms = 5000;
    decoder_set_limits(d, &lim);
    int w, h;
    free(rgb);
    cr_assert_eq(decode_all(d, buf, len, &rgb, &w, &h, reason), 0, "%s",
                 reason);
    assert_same("lossless after a timeout", rgb, ref, w, h);
    free(rgb);
    free(ref);
    free(buf);
    decoder_destroy(d);
}
