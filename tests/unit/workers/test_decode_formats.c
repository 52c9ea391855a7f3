/* PNG and WebP through the decoder (workers/decode.c over codecs/png.c
 * and codecs/webp.c) and the sample path (sample.c): pixels against Pillow's
 * Image.open(f).convert("RGB") for every PNG colour type and bit depth,
 * tRNS and Adam7, and WebP lossy, lossless and with alpha; the format taken
 * from the signature, never the name; bombs refused from the header within
 * the limits, the decode memory budget holding for every pixel, row and
 * ancillary chunk (measured in a child process of its own); crops and
 * skips equal to the whole decode; errors that name the reason.
 *
 * The reference: tests/fixtures/formats/NAME.rgb, written by
 * make_fixtures.py with Pillow 13.0 (libwebp 1.6.0) beside NAME.png or
 * NAME.webp. PNG pixels are a function of the inflated bytes (zlib is
 * exact), so every PNG must match to the byte; WebP is decoded by libwebp on
 * both sides (Debian's 1.2.4 here), whose lossy decoding is specified to
 * the bit, so those match to the byte too. */
#include <malloc.h>
#include <sys/resource.h>
#include <webp/encode.h>
#include <zlib.h>

#include "../common/clock.h"
#include "../workers/decode.h"
#include "../workers/sample.h"
#include "testbombs.h"
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

/* Whole decodes through the row protocol and through sample_decode_buffer
 * (pl_image_load's path), each equal to Pillow's bytes. */
static void check_whole(const char *name, const char *ext, const codec *fmt)
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
    cr_assert_eq(info.codec, fmt, "%s: %s", name,
                 info.codec ? info.codec->name : "none");
    cr_assert_eq((size_t)info.width * info.height * 3, ref_len, "%s", name);
    cr_assert_eq(decoder_can_scale(d), 0);
    uint8_t *rgb;
    int w, h;
    cr_assert_eq(decode_all(d, buf, len, &rgb, &w, &h, reason), 0, "%s: %s",
                 name, reason);
    assert_same(name, rgb, ref, w, h);
    free(rgb);
    sample_ctx c;
    decode_limits lim;
    decode_limits_default(&lim);
    cr_assert_eq(sample_init(&c, &lim), 0);
    char preason[SAMPLE_REASON_MAX] = "";
    cr_assert_eq(sample_decode_buffer(&c, buf, len, &rgb, &w, &h, preason), 0,
                 "%s: %s", name, preason);
    assert_same(name, rgb, ref, w, h);
    free(rgb);
    sample_fini(&c);
    decoder_destroy(d);
    free(buf);
    free(ref);
}

Test(decode_formats, every_png_colour_type_and_depth_equals_pillow)
{
    for (size_t i = 0; i < sizeof png_cases / sizeof *png_cases; i++)
        check_whole(png_cases[i], "png", &codec_png);
}

Test(decode_formats, webp_lossy_lossless_and_alpha_equal_pillow)
{
    for (size_t i = 0; i < sizeof webp_cases / sizeof *webp_cases; i++)
        check_whole(webp_cases[i], "webp", &codec_webp);
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
    /* Adam7 10000 x 10000 at 16 bits: its pixels (286 MiB) and the image
     * decoded whole (572 MiB) */
    b = png_header_only(10000, 10000, 16, 1, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "10000x10000 interlaced PNG needs 860 MiB to "
                             "decode (its pixels, and the image whole for "
                             "the passes), over the decode memory budget of "
                             "512 MiB (config.max_decode_memory)");
    free(b);
    /* the same, not interlaced: its pixels and a few rows, 288 MiB,
     * accepted from the header */
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
    /* WebP 12000 x 12000 lossless: 144 Mpx allowed, its pixels twice (824
     * MiB) and libwebp's ARGB (549 MiB) not */
    b = webp_header_only(12000, 12000, &len);
    cr_assert_eq(open_with(b, len, &lim, reason, &ms), PL_ELIMIT);
    cr_assert_str_eq(reason, "12000x12000 lossless WebP needs 1446 MiB to "
                             "decode (its pixels twice, and libwebp's ARGB), "
                             "over the decode memory budget of 512 MiB "
                             "(config.max_decode_memory)");
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

/* ---- the decode memory budget (issue 34) --------------------------------- */

#define MIB ((int64_t)1 << 20)

/* How one decode went, in a child process of its own: its status and
 * reason, the growth of its peak resident memory (VmHWM, reset first
 * through /proc/self/clear_refs) and its time. In plain builds the child's
 * address space is also capped at what it had plus `room` bytes
 * (RLIMIT_AS), so that an allocation past that fails outright instead of
 * going unseen; the sanitizers reserve terabytes of shadow and run
 * without the cap. */
typedef struct measured {
    int rc;
    char reason[DECODE_REASON_MAX];
    int64_t peak; /* bytes */
    double secs;
} measured;

/* How the image is decoded: whole (pl_image_decode's way) or as a 224 x 224
 * sample (the loader's: sample_produce_buffer) without augmentation,
 * evaluation's resize and centre crop, or a training crop. */
typedef enum how { WHOLE, SAMPLE_NONE, SAMPLE_EVAL, SAMPLE_TRAIN } how;

static int64_t status_bytes(const char *key)
{
    return (int64_t)tu_status_kib(key) * 1024;
}

static int decode_as(sample_ctx *c, how h, const uint8_t *buf, size_t len,
                     char *reason)
{
    if (h == WHOLE) {
        uint8_t *rgb = NULL;
        int w, ht;
        const int rc = sample_decode_buffer(c, buf, len, &rgb, &w, &ht, reason);
        free(rgb);
        return rc;
    }
    static const pl_augment mode[] = {
        [SAMPLE_NONE] = PL_AUGMENT_NONE,
        [SAMPLE_EVAL] = PL_AUGMENT_EVAL,
        [SAMPLE_TRAIN] = PL_AUGMENT_TRAIN,
    };
    const float mean[3] = {0.5f, 0.5f, 0.5f}, sd[3] = {0.25f, 0.25f, 0.25f};
    augment_params p;
    augment_params_init(&p, mode[h], PL_FORMAT_U8_NHWC, 224, 224, 7, mean, sd);
    uint8_t *dst = malloc(augment_sample_bytes(&p));
    sample_times t = {0};
    const int rc =
        sample_produce_buffer(c, &p, buf, len, 0, 3, dst, &t, reason);
    free(dst);
    return rc;
}

static measured measure(how h, const uint8_t *buf, size_t len,
                        const decode_limits *lim, int64_t room)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        measured m = {0};
        sample_ctx c;
        if (sample_init(&c, lim) < 0)
            _exit(1);
        /* A fixed mmap threshold: glibc's sliding one could serve a large
         * block from the heap, whose top the cap would then count twice. */
        mallopt(M_MMAP_THRESHOLD, 128 << 10);
        /* The parent's freed blocks stay resident in the child's heap: given
         * back, a decode that reuses them shows in its peak as well. */
        malloc_trim(0);
        if (!TU_SANITIZED) {
            const int64_t as = status_bytes("VmSize") + room;
            const struct rlimit r = {(rlim_t)as, (rlim_t)as};
            if (setrlimit(RLIMIT_AS, &r) < 0)
                _exit(1);
        }
        FILE *f = fopen("/proc/self/clear_refs", "w");
        if (f) {
            fputs("5", f); /* VmHWM = VmRSS */
            fclose(f);
        }
        const int64_t hwm = status_bytes("VmHWM");
        const double t0 = tu_seconds();
        m.rc = decode_as(&c, h, buf, len, m.reason);
        m.secs = tu_seconds() - t0;
        m.peak = status_bytes("VmHWM") - hwm;
        sample_fini(&c);
        const ssize_t n = write(fds[1], &m, sizeof m);
        _exit(n == (ssize_t)sizeof m ? 0 : 1);
    }
    close(fds[1]);
    measured m;
    const ssize_t n = read(fds[0], &m, sizeof m);
    close(fds[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(n == (ssize_t)sizeof m && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the measuring child failed (status %d)", st);
    return m;
}

/* The report's bombs: a 0.43 MB PNG of 12000 x 12000 and a 1.2 MB lossy
 * WebP of 13000 x 13000 (the report's was 0.45 MB; this one spells its
 * macroblocks with more bits), under a 64 MiB budget, decoded whole and as
 * every kind of sample. Before, the PNG held 412 MiB (whole) and 207 to 412
 * MiB (samples) and took about a second; the WebP 968 and 488 to 969 MiB.
 * Now each is refused from its header, naming the budget and the need,
 * holding nothing, in no time. */
Test(decode_formats, png_and_webp_bombs_stay_within_the_memory_budget,
     .timeout = 60)
{
    tb_buf png = {0};
    tb_png_begin(&png, 12000, 12000, 8, 2);
    tb_png_end_black(&png, 12000, 12000, 3);
    cr_assert_lt(png.len, 500000u);
    size_t webp_len;
    uint8_t *webp = tb_webp_grey(13000, 13000, &webp_len);
    cr_assert_lt(webp_len, 1300000u);
    const struct {
        const uint8_t *buf;
        size_t len;
        const char *reason;
    } bombs[] = {
        {png.p, png.len,
         "12000x12000 PNG needs 414 MiB to decode (its pixels and rows), over "
         "the decode memory budget of 64 MiB (config.max_decode_memory)"},
        {webp, webp_len,
         "13000x13000 lossy WebP needs 972 MiB to decode (its pixels twice), "
         "over the decode memory budget of 64 MiB "
         "(config.max_decode_memory)"},
    };
    decode_limits lim;
    decode_limits_default(&lim);
    lim.max_memory = 64 * MIB;
    for (size_t i = 0; i < sizeof bombs / sizeof *bombs; i++)
        for (how h = WHOLE; h <= SAMPLE_TRAIN; h++) {
            const measured m =
                measure(h, bombs[i].buf, bombs[i].len, &lim, lim.max_memory);
            cr_assert_eq(m.rc, PL_ELIMIT, "bomb %zu, way %d: %d %s", i, h, m.rc,
                         m.reason);
            cr_assert_str_eq(m.reason, bombs[i].reason);
            cr_assert_lt(m.peak, lim.max_memory, "bomb %zu, way %d: %lld MiB",
                         i, h, (long long)(m.peak / MIB));
            cr_assert_lt(m.peak, 4 * MIB, "refused before anything is held");
            cr_assert_lt(m.secs, 0.25, "bomb %zu, way %d: %.3f s", i, h,
                         m.secs);
        }
    free(png.p);
    free(webp);
}

/* A 64 x 48 PNG whose text or ICC profile inflates past Pillow's limits:
 * refused once a chunk passes 1 MiB, or all of them 64 MiB, naming the
 * limits, in milliseconds; with a small budget, the limit is what the
 * budget leaves. Before, a 400 MiB iCCP (0.41 MB of file) held 400 MiB
 * for a second and was delivered; a 400 MiB zTXt held 256 MiB for 0.7 s
 * and failed as "reached chunk/cache limits"; 70 text chunks of 1000 KiB
 * were delivered. */
Test(decode_formats, png_text_and_icc_bombs_stop_at_the_chunk_limits,
     .timeout = 60)
{
    tb_buf ztxt = {0}, iccp = {0}, many = {0}, one = {0};
    tb_png_begin(&ztxt, 64, 48, 8, 2);
    tb_png_compressed(&ztxt, "zTXt", "Comment", 'A', (size_t)400 << 20);
    tb_png_end_black(&ztxt, 64, 48, 3);
    tb_png_begin(&iccp, 64, 48, 8, 2);
    tb_png_compressed(&iccp, "iCCP", "ICC profile", 0, (size_t)400 << 20);
    tb_png_end_black(&iccp, 64, 48, 3);
    cr_assert_lt(ztxt.len, 450000u);
    cr_assert_lt(iccp.len, 450000u);
    /* 70 text chunks of 1000 KiB each: each within its limit, together
     * past 64 MiB. */
    tb_png_compressed(&one, "zTXt", "Comment", 'B', 1000 << 10);
    tb_png_begin(&many, 64, 48, 8, 2);
    for (int i = 0; i < 70; i++)
        tb_put(&many, one.p, one.len);
    tb_png_end_black(&many, 64, 48, 3);
    static const char pillows[] =
        "PNG: ancillary chunks (text, ICC profile) over the limits of 1 MiB "
        "each inflated, 64 MiB and 1000 chunks in all";
    const tb_buf *files[] = {&ztxt, &iccp, &many};
    decode_limits lim;
    decode_limits_default(&lim);
    for (int i = 0; i < 3; i++)
        for (how h = WHOLE; h <= SAMPLE_EVAL; h++) {
            const measured m =
                measure(h, files[i]->p, files[i]->len, &lim, 512 * MIB);
            cr_assert_eq(m.rc, PL_ELIMIT, "file %d, way %d: %d %s", i, h, m.rc,
                         m.reason);
            cr_assert_str_eq(m.reason, pillows);
            /* The many chunks hold their 64 MiB, and libspng's buffers grow
             * by doubling: AddressSanitizer's quarantine keeps every block
             * given back on the way (up to 256 MiB). */
            if (i < 2 || !TU_SANITIZED)
                cr_assert_lt(m.peak, (i == 2 ? 72 : 8) * MIB,
                             "file %d, way %d: %lld MiB", i, h,
                             (long long)(m.peak / MIB));
            /* One MiB inflated, or 64 MiB and checked (sanitizers: up to
             * 5 times slower); before, 0.7 to 1.1 s for the first two. */
            const double most = i < 2 ? 0.25 : TU_SANITIZED ? 5.0 : 1.0;
            cr_assert_lt(m.secs, most, "file %d: %.3f s", i, m.secs);
        }
    /* Under 8 MiB the chunks get what the image leaves of it. */
    lim.max_memory = 8 * MIB;
    const measured m = measure(WHOLE, many.p, many.len, &lim, lim.max_memory);
    cr_assert_eq(m.rc, PL_ELIMIT, "%s", m.reason);
    cr_assert_str_eq(m.reason,
                     "PNG: ancillary chunks (text, ICC profile) over the "
                     "limits of 1 MiB each inflated, 7.7 MiB and 1000 chunks "
                     "in all (what config.max_decode_memory leaves)");
    if (!TU_SANITIZED) /* the quarantine, as above */
        cr_assert_lt(m.peak, lim.max_memory, "%lld MiB",
                     (long long)(m.peak / MIB));
    free(ztxt.p);
    free(iccp.p);
    free(many.p);
    free(one.p);
}

/* rgb8.png with chunks inserted after its IHDR. */
static tb_buf with_chunks(const uint8_t *png, size_t len, const tb_buf *chunks)
{
    tb_buf b = {0};
    tb_put(&b, png, 33); /* the signature and IHDR */
    tb_put(&b, chunks->p, chunks->len);
    tb_put(&b, png + 33, len - 33);
    return b;
}

/* Text and an ICC profile within the limits change nothing: the pixels
 * are Pillow's, under the default budget and under 1 TiB (the largest
 * config.max_decode_memory; from 2 GiB up every PNG failed as "PNG:
 * invalid argument", libspng refusing chunk limits past 2^31 - 1). */
Test(decode_formats, pngs_within_the_limits_decode_under_any_budget)
{
    size_t len, ref_len;
    uint8_t *ref;
    uint8_t *png = fixture("rgb8", "png", &len, &ref, &ref_len);
    tb_buf chunks = {0};
    tb_png_compressed(&chunks, "iCCP", "ICC profile", 7, 900 << 10);
    tb_chunk(&chunks, "tEXt", "Title\0a rgb8 fixture", 20);
    tb_png_compressed(&chunks, "zTXt", "Comment", 'C', 1 << 20);
    tb_buf big = with_chunks(png, len, &chunks);
    static const int64_t budgets[] = {512 * MIB, 4096 * MIB, 1024 * 1024 * MIB};
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < 2; k++) {
            decode_limits lim;
            decode_limits_default(&lim);
            lim.max_memory = budgets[b];
            decoder *d;
            cr_assert_eq(decoder_create(&d, &lim), 0);
            char reason[DECODE_REASON_MAX] = "";
            uint8_t *rgb;
            int w, h;
            const int rc =
                k ? decode_all(d, big.p, big.len, &rgb, &w, &h, reason)
                  : decode_all(d, png, len, &rgb, &w, &h, reason);
            cr_assert_eq(rc, 0, "budget %lld MiB, %s: %s",
                         (long long)(budgets[b] / MIB),
                         k ? "with chunks" : "as is", reason);
            assert_same("rgb8", rgb, ref, w, h);
            free(rgb);
            decoder_destroy(d);
        }
    free(chunks.p);
    free(big.p);
    free(png);
    free(ref);
}

/* A pattern the encoders cannot flatten: with alpha when channels is 4. */
static uint8_t *pattern(int w, int h, int channels)
{
    uint8_t *p = malloc((size_t)w * h * channels);
    uint32_t s = 1;
    for (size_t i = 0; i < (size_t)w * h * channels; i++) {
        s = s * 1103515245u + 12345u;
        const size_t px = i / channels;
        p[i] = (uint8_t)(px % w * 7 + px / w * 3 + (s >> 27));
    }
    return p;
}

/* What decode_info.memory says from the header is what decoding holds at
 * most: each image decodes whole with the budget at exactly that (its
 * address space capped there too, in plain builds) and its peak within it,
 * and one byte less refuses it. */
Test(decode_formats, the_need_from_the_header_bounds_what_decoding_holds,
     .timeout = 120)
{
    tb_buf rgb8 = {0}, rgba16 = {0};
    tb_png_begin(&rgb8, 1500, 1000, 8, 2);
    tb_png_end_black(&rgb8, 1500, 1000, 3);
    tb_png_begin(&rgba16, 2400, 500, 16, 6);
    tb_png_end_black(&rgba16, 2400, 500, 8);
    size_t grey_len, lossless_len, alpha_len;
    uint8_t *grey = tb_webp_grey(2000, 1500, &grey_len);
    uint8_t *px3 = pattern(1200, 900, 3), *px4 = pattern(1200, 900, 4);
    uint8_t *lossless, *alpha;
    lossless_len = WebPEncodeLosslessRGB(px3, 1200, 900, 1200 * 3, &lossless);
    alpha_len = WebPEncodeRGBA(px4, 1200, 900, 1200 * 4, 80, &alpha);
    cr_assert(lossless_len > 0 && alpha_len > 0);
    const struct {
        const char *what;
        const uint8_t *buf;
        size_t len;
    } images[] = {
        {"PNG 8-bit RGB", rgb8.p, rgb8.len},
        {"PNG 16-bit RGBA", rgba16.p, rgba16.len},
        {"WebP lossy", grey, grey_len},
        {"WebP lossless", lossless, lossless_len},
        {"WebP lossy with alpha", alpha, alpha_len},
    };
    for (size_t i = 0; i < sizeof images / sizeof *images; i++) {
        decoder *d;
        default_decoder(&d);
        char reason[DECODE_REASON_MAX];
        decode_info info;
        cr_assert_eq(
            decoder_open(d, images[i].buf, images[i].len, &info, reason), 0,
            "%s: %s", images[i].what, reason);
        decoder_destroy(d);
        decode_limits lim;
        decode_limits_default(&lim);
        lim.max_memory = info.memory;
        /* Room for what the child allocates beside the decode: stdio,
         * the heap's own growth. */
        measured m = measure(WHOLE, images[i].buf, images[i].len, &lim,
                             info.memory + 8 * MIB);
        cr_assert_eq(m.rc, 0, "%s: %d %s", images[i].what, m.rc, m.reason);
        /* AddressSanitizer's shadow adds an eighth of what is touched;
         * ThreadSanitizer's several times it: no bound holds there. */
        const int64_t bound = TU_SANITIZED
                                  ? info.memory + info.memory / 8 + 8 * MIB
                                  : info.memory;
        if (!TU_THREAD_SANITIZED)
            cr_assert_leq(m.peak, bound, "%s: held %lld KiB, said %lld KiB",
                          images[i].what, (long long)(m.peak >> 10),
                          (long long)(info.memory >> 10));
        lim.max_memory = info.memory - 1;
        m = measure(WHOLE, images[i].buf, images[i].len, &lim, 8 * MIB);
        cr_assert_eq(m.rc, PL_ELIMIT, "%s: %d", images[i].what, m.rc);
        cr_assert_not_null(strstr(m.reason, "(config.max_decode_memory)"), "%s",
                           m.reason);
    }
    free(rgb8.p);
    free(rgba16.p);
    free(grey);
    WebPFree(lossless);
    WebPFree(alpha);
    free(px3);
    free(px4);
}

/* A PNG whose signature a text-mode copy damaged (CR LF made LF), or that
 * ends inside it, is a bad PNG, whatever it is named: never "not an image
 * pinload reads". And a PNG named .jpg decodes as the PNG it is. */
Test(decode_formats, a_png_is_a_png_whatever_its_name_or_damage)
{
    size_t len, ref_len;
    uint8_t *ref;
    uint8_t *png = fixture("rgb8", "png", &len, &ref, &ref_len);
    char dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/photo.jpg", dir);
    tu_write_file(path, png, len);
    pl_image img;
    cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
    assert_same("rgb8.png named photo.jpg", img.pixels, ref, img.width,
                img.height);
    pl_image_free(&img);
    /* The CR of the signature's CR LF dropped, as a text-mode copy drops
     * it. */
    memmove(png + 4, png + 5, len - 5);
    tu_write_file(path, png, len - 1);
    cr_assert_eq(pl_image_load(path, &img), PL_ECORRUPT, "%s", pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(),
                              "PNG: damaged signature (89 50 4e 47 0a 1a 0a "
                              "00 where 89 50 4e 47 0d 0a 1a 0a belongs: a "
                              "text-mode copy?)"),
                       "%s", pl_last_error());
    cr_assert_null(strstr(pl_last_error(), "JPEG"), "%s", pl_last_error());
    decoder *d;
    default_decoder(&d);
    char reason[DECODE_REASON_MAX];
    decode_info info;
    cr_assert_eq(decoder_open(d, png, 6, &info, reason), PL_ECORRUPT);
    cr_assert_str_eq(reason, "PNG: truncated in its signature (6 bytes)");
    decoder_destroy(d);
    tu_rm_rf(dir);
    free(png);
    free(ref);
}
