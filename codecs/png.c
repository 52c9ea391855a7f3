/* PNG through libspng (the choice is argued in docs/ARCHITECTURE.md):
 * progressive row decoding, so a crop's rows below its bottom are never
 * inflated, and no setjmp, unlike libpng. 8-bit and smaller images come out
 * of libspng as RGB8 directly; 16-bit ones in their own layout, reduced here
 * the way Pillow's convert("RGB") reduces them. An interlaced (Adam7) image
 * needs every pass before any row is whole, so it is decoded whole. What
 * decoding holds (every pixel handed out, the rows, an interlaced image
 * whole, the ancillary chunks) is checked against the decode memory budget
 * from the IHDR chunk, before anything else is read. Each row handed out
 * is the RGB of Pillow's convert("RGB"): alpha and tRNS dropped, palette
 * and grey expanded. */
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/grow.h"
#include "codec.h"
#include "pinload.h"

/* Ancillary chunks libspng 0.7 reads before the image data and keeps,
 * inflated (text, an ICC profile, Exif; it has no setting to skip them, and
 * pinload uses none): at most Pillow's limits (PngImagePlugin's
 * MAX_TEXT_CHUNK and MAX_TEXT_MEMORY, past which Pillow refuses the file
 * too, "Decompressed Data Too Large"), and never more than the decode
 * memory budget leaves. Past them libspng stops inflating and fails the
 * decode (SPNG_ECHUNK_LIMITS): a 64x48 image with 400 KB of zTXt or iCCP
 * inflating to 400 MiB costs a millisecond, not 400 MiB and a second. */
#define PNG_CHUNK_MAX ((int64_t)1 << 20)   /* one chunk, inflated */
#define PNG_CHUNKS_MAX ((int64_t)64 << 20) /* all of them */
/* Ancillary chunks kept: libspng's own limit, for the reason to say (0.7.3's
 * spng_set_option refuses any other value until that many are read). */
#define PNG_CHUNK_COUNT 1000

typedef struct png_dec {
    spng_ctx *ctx;
    struct spng_ihdr ihdr;
    uint64_t deadline_ns;
    int64_t max_decode_ms;
    int fmt;          /* SPNG_FMT_RGB8, or SPNG_FMT_PNG for 16-bit samples */
    int channels;     /* in the file's own layout */
    size_t row_bytes; /* one decoded row in fmt */
    int x0, w;        /* the columns handed out */
    int y;            /* the next row handed out */
    uint8_t *row;     /* one decoded row (progressive) */
    size_t row_cap;
    uint8_t *image; /* the whole decoded image (interlaced) */
    size_t image_cap;
    int64_t chunk_max, chunks_max; /* the ancillary chunk limits set */
} png_dec;

static const uint8_t signature[8] = {0x89, 'P',  'N',  'G',
                                     '\r', '\n', 0x1A, '\n'};

static int png_dec_sniff(const uint8_t *buf, size_t len)
{
    return len >= sizeof signature &&
           memcmp(buf, signature, sizeof signature) == 0;
}

/* Whether buf[0, len) starts as a PNG whose 8-byte signature is cut short
 * or damaged: then it is a bad PNG, not something pinload does not read.
 * The signature's CR LF, LF and ^Z are there to catch text-mode copies,
 * which change exactly those bytes. */
static int png_dec_damaged(const uint8_t *b, size_t len, char *reason)
{
    if (len < 4 || memcmp(b, "\x89PNG", 4) != 0)
        return 0;
    if (len < 8) {
        snprintf(reason, DECODE_REASON_MAX,
                 "PNG: truncated in its signature (%zu bytes)", len);
        return 1;
    }
    snprintf(reason, DECODE_REASON_MAX,
             "PNG: damaged signature (%02x %02x %02x %02x %02x %02x %02x %02x "
             "where 89 50 4e 47 0d 0a 1a 0a belongs: a text-mode copy?)",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    return 1;
}

static int png_dec_create(void **out)
{
    *out = calloc(1, sizeof(png_dec));
    return *out ? 0 : PL_ENOMEM;
}

static void png_dec_close(void *st)
{
    png_dec *p = st;
    spng_ctx_free(p->ctx);
    p->ctx = NULL;
}

static void png_dec_destroy(void *st)
{
    png_dec *p = st;
    if (!p)
        return;
    png_dec_close(p);
    free(p->row);
    free(p->image);
    free(p);
}

/* A size in the words of the limits: MiB, whole where they are. */
static void size_words(int64_t bytes, char *buf, size_t cap)
{
    if (bytes % (1 << 20) == 0)
        snprintf(buf, cap, "%lld MiB", (long long)(bytes >> 20));
    else
        snprintf(buf, cap, "%.1f MiB", (double)bytes / (1 << 20));
}

/* Ancillary chunks past the limits: which limits, and where the smaller
 * one came from. */
static void chunk_limits_reason(const png_dec *p, char *reason)
{
    char each[32], all[32];
    size_words(p->chunk_max, each, sizeof each);
    size_words(p->chunks_max, all, sizeof all);
    snprintf(reason, DECODE_REASON_MAX,
             "PNG: ancillary chunks (text, ICC profile) over the limits of %s "
             "each inflated, %s and %d chunks in all%s",
             each, all, PNG_CHUNK_COUNT,
             p->chunks_max < PNG_CHUNKS_MAX
                 ? " (what config.max_decode_memory leaves)"
                 : "");
}

/* A libspng error as a status and "PNG: <libspng's words>". */
static int spng_fail(png_dec *p, int err, char *reason)
{
    int code = PL_ECORRUPT;
    if (err == SPNG_EMEM)
        code = PL_ENOMEM;
    else if (err == SPNG_ECHUNK_LIMITS)
        code = PL_ELIMIT;
    else if (err == SPNG_EFMT || err == SPNG_EFLAGS)
        code = PL_EUNSUPPORTED;
    if (err == SPNG_ECHUNK_LIMITS)
        chunk_limits_reason(p, reason);
    else
        snprintf(reason, DECODE_REASON_MAX, "PNG: %s", spng_strerror(err));
    png_dec_close(p);
    return code;
}

/* What decoding holds at most, whatever the crop: every pixel handed out
 * (RGB), libspng's rows and ours with zlib's state (measured: 60 to 85
 * bytes a column and 40 KiB), and an interlaced image whole in the layout
 * it is decoded in. The ancillary chunks get what is left. A header's
 * sides reach 2^31 - 1 each, whose product times 3 is past int64_t: the
 * sum is taken in double (exact far beyond any budget) and saturates;
 * check_header refuses such an image by its size first anyway. */
static int64_t image_bytes(const struct spng_ihdr *h, int fmt, int channels)
{
    const double px = (double)h->width * (double)h->height;
    double need = px * 3.0 + (double)h->width * 128.0 + 262144.0;
    if (h->interlace_method != SPNG_INTERLACE_NONE)
        need += fmt == SPNG_FMT_RGB8 ? px * 3.0 : px * channels * 2.0;
    return need >= 9.0e18 ? INT64_MAX : (int64_t)need;
}

static int check_header(const png_dec *p, const decode_limits *lim,
                        int64_t need, char *reason)
{
    const struct spng_ihdr *h = &p->ihdr;
    const int rc = codec_check_size(h->width, h->height, lim, reason);
    if (rc < 0)
        return rc;
    if (need <= lim->max_memory)
        return 0;
    const int interlaced = h->interlace_method != SPNG_INTERLACE_NONE;
    char what[64];
    snprintf(what, sizeof what, "%ux%u %sPNG", h->width, h->height,
             interlaced ? "interlaced " : "");
    return decode_over_budget(reason, what, need,
                              interlaced ? " to decode (its pixels, and the "
                                           "image whole for the passes)"
                                         : " to decode (its pixels and rows)",
                              lim->max_memory);
}

/* The ancillary chunks' limits: Pillow's, or what the budget leaves beside
 * the image (need <= the budget). libspng counts a text's closing NUL in
 * the chunk limit and grows its buffer by doubling up to it, so one byte
 * more lets a chunk inflate to exactly 1 MiB, as Pillow lets it. */
static int set_chunk_limits(png_dec *p, const decode_limits *lim, int64_t need)
{
    const int64_t left = lim->max_memory - need;
    p->chunks_max = left < PNG_CHUNKS_MAX ? left : PNG_CHUNKS_MAX;
    p->chunk_max =
        p->chunks_max < PNG_CHUNK_MAX ? p->chunks_max : PNG_CHUNK_MAX;
    const int64_t chunk =
        p->chunk_max < p->chunks_max ? p->chunk_max + 1 : p->chunk_max;
    return spng_set_chunk_limits(p->ctx, (size_t)chunk, (size_t)p->chunks_max);
}

static int png_dec_open(void *st, const uint8_t *buf, size_t len,
                        const decode_limits *lim, uint64_t deadline_ns,
                        decode_info *info, char *reason)
{
    png_dec *p = st;
    png_dec_close(p);
    p->deadline_ns = deadline_ns;
    p->max_decode_ms = lim->max_decode_ms;
    p->ctx = spng_ctx_new(0);
    if (!p->ctx) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for libspng");
        return PL_ENOMEM;
    }
    /* spng_get_ihdr reads the IHDR chunk alone: the chunk limits, which
     * depend on the image's size, are set before any other is read. */
    int err = spng_set_png_buffer(p->ctx, buf, len);
    if (!err)
        err = spng_get_ihdr(p->ctx, &p->ihdr);
    if (err)
        return spng_fail(p, err, reason);
    static const int channels[7] = {1, 0, 3, 1, 2, 0, 4};
    p->channels = channels[p->ihdr.color_type];
    p->fmt = p->ihdr.bit_depth == 16 ? SPNG_FMT_PNG : SPNG_FMT_RGB8;
    info->width = (int)p->ihdr.width;
    info->height = (int)p->ihdr.height;
    info->components = p->channels;
    info->progressive = p->ihdr.interlace_method != SPNG_INTERLACE_NONE;
    info->memory = image_bytes(&p->ihdr, p->fmt, p->channels);
    const int rc = check_header(p, lim, info->memory, reason);
    if (rc < 0) {
        png_dec_close(p);
        return rc;
    }
    err = set_chunk_limits(p, lim, info->memory);
    return err ? spng_fail(p, err, reason) : 0;
}

static int over_time(png_dec *p, char *reason)
{
    if (!p->deadline_ns || clock_now_ns() <= p->deadline_ns)
        return 0;
    png_dec_close(p);
    return codec_over_time(reason, p->max_decode_ms);
}

/* Full size only: the rows handed out hold columns [x0, x0 + w). */
static int png_dec_start(void *st, int denom, int x0, int w, codec_region *r,
                         char *reason)
{
    png_dec *p = st;
    const int interlaced = p->ihdr.interlace_method != SPNG_INTERLACE_NONE;
    const int rc = codec_check_full_size(denom, x0, w, (int)p->ihdr.width,
                                         (int)p->ihdr.height, reason);
    if (rc < 0)
        return rc;
    *r = (codec_region){.xoff = x0, .width = w, .height = (int)p->ihdr.height};
    size_t size;
    int err = spng_decoded_image_size(p->ctx, p->fmt, &size);
    if (err)
        return spng_fail(p, err, reason);
    p->row_bytes = size / p->ihdr.height;
    p->x0 = x0;
    p->w = w;
    p->y = 0;
    if (interlaced ? grow_scratch(&p->image, &p->image_cap, size, 1, 0)
                   : grow(&p->row, &p->row_cap, p->row_bytes, 1, 0)) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for the PNG's %s",
                 interlaced ? "image" : "rows");
        png_dec_close(p);
        return PL_ENOMEM;
    }
    /* tRNS and gAMA are not applied: Pillow's convert("RGB") ignores
     * both. */
    err = interlaced ? spng_decode_image(p->ctx, p->image, size, p->fmt, 0)
                     : spng_decode_image(p->ctx, NULL, 0, p->fmt,
                                         SPNG_DECODE_PROGRESSIVE);
    if (err)
        return spng_fail(p, err, reason);
    return interlaced ? over_time(p, reason) : 0;
}

static int png_dec_row(const void *st)
{
    const png_dec *p = st;
    return p->y;
}

/* Columns [x0, x0 + w) of a decoded row as RGB8. Pillow reads 16-bit grey
 * as a 16-bit integer image, whose conversion to RGB clamps at 255; the
 * other 16-bit layouts are read as 8-bit by their high bytes. */
static void to_rgb(const png_dec *p, const uint8_t *row, uint8_t *dst)
{
    if (p->fmt == SPNG_FMT_RGB8) {
        memcpy(dst, row + (size_t)p->x0 * 3, (size_t)p->w * 3);
        return;
    }
    const int ch = p->channels;
    const uint16_t *s =
        (const uint16_t *)(const void *)row + (size_t)p->x0 * ch;
    for (int x = 0; x < p->w; x++, s += ch, dst += 3) {
        if (ch <= 2) {
            const unsigned v = ch == 1 ? (s[0] > 255 ? 255 : s[0]) : s[0] >> 8;
            dst[0] = dst[1] = dst[2] = (uint8_t)v;
        } else {
            dst[0] = (uint8_t)(s[0] >> 8);
            dst[1] = (uint8_t)(s[1] >> 8);
            dst[2] = (uint8_t)(s[2] >> 8);
        }
    }
}

/* The next n rows into dst, rows `stride` bytes apart; dst NULL: decode
 * and discard them. */
static int png_dec_read(png_dec *p, uint8_t *dst, size_t stride, int n,
                        char *reason)
{
    if (!p->ctx) {
        snprintf(reason, DECODE_REASON_MAX, "PNG: no image open");
        return PL_EINVAL;
    }
    const int whole = p->ihdr.interlace_method != SPNG_INTERLACE_NONE;
    for (int i = 0; i < n; i++, p->y++) {
        const uint8_t *row =
            whole ? p->image + (size_t)p->y * p->row_bytes : p->row;
        if (!whole) {
            /* libspng says SPNG_EOI once the last row is decoded. */
            const int err = spng_decode_row(p->ctx, p->row, p->row_bytes);
            if (err && err != SPNG_EOI)
                return spng_fail(p, err, reason);
            if ((p->y & 15) == 15 && over_time(p, reason) < 0)
                return PL_ELIMIT;
        }
        if (dst)
            to_rgb(p, row, dst + (size_t)i * stride);
    }
    return 0;
}

static int png_dec_read_into(void *st, uint8_t *dst, size_t stride, int n,
                             int until, char *reason)
{
    (void)until; /* libspng inflates row by row */
    return png_dec_read(st, dst, stride, n, reason);
}

/* Rows above y are inflated all the same (each row is filtered against
 * the one above it), and discarded. */
static int png_dec_skip_to(void *st, int y, char *reason)
{
    png_dec *p = st;
    return y > p->y ? png_dec_read(p, NULL, 0, y - p->y, reason) : 0;
}

static const char *const extensions[] = {"png", NULL};

const codec codec_png = {
    .name = "PNG",
    .extensions = extensions,
    .sniff = png_dec_sniff,
    .damaged = png_dec_damaged,
    .create = png_dec_create,
    .destroy = png_dec_destroy,
    .open = png_dec_open,
    .start = png_dec_start,
    .skip_to = png_dec_skip_to,
    .read_into = png_dec_read_into,
    .row = png_dec_row,
    .close = png_dec_close,
};
