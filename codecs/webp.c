/* WebP through libwebp's advanced decoding API: cropped to the rows and
 * columns asked for (plus a margin, so that the pixels handed out equal
 * those of a whole decode: lossy WebP's chroma upsampling treats a crop's
 * edges as the image's), in RGB, fed to libwebp's incremental decoder a
 * slice at a time so that the decode's time limit is checked as it goes.
 * A still image (lossy, lossless, with or without alpha), alpha dropped as
 * Pillow's convert("RGB") drops it; libwebp decodes only the rectangle
 * asked for (and the rows above it, which prediction needs), so the rows
 * are decoded in one piece when the first of them is read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>

#include "../common/clock.h"
#include "../common/grow.h"
#include "codec.h"
#include "pinload.h"

#define WEBP_MARGIN 8 /* pixels around the rows and columns read */
#define WEBP_SLICE ((size_t)64 << 10) /* input bytes per incremental step */

typedef struct webp_dec {
    const uint8_t *buf;
    size_t len;
    int open;
    int width, height;
    uint64_t deadline_ns;
    int64_t max_decode_ms;
    int x0, w; /* the columns handed out */
    int y;     /* the next row handed out */
    /* The rectangle decoded into pix: columns [px0, px0 + pw), rows
     * [py0, py1). */
    int px0, pw, py0, py1;
    uint8_t *pix;
    size_t pix_cap;
} webp_dec;

static int webp_dec_sniff(const uint8_t *buf, size_t len)
{
    return len >= 12 && memcmp(buf, "RIFF", 4) == 0 &&
           memcmp(buf + 8, "WEBP", 4) == 0;
}

static int webp_dec_create(void **out)
{
    *out = calloc(1, sizeof(webp_dec));
    return *out ? 0 : PL_ENOMEM;
}

static void webp_dec_destroy(void *st)
{
    webp_dec *w = st;
    if (!w)
        return;
    free(w->pix);
    free(w);
}

static void webp_dec_close(void *st)
{
    webp_dec *w = st;
    w->open = 0;
    w->buf = NULL;
}

static int status_code(VP8StatusCode st)
{
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY:
        return PL_ENOMEM;
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return PL_EUNSUPPORTED;
    default:
        return PL_ECORRUPT;
    }
}

static const char *status_text(VP8StatusCode st)
{
    switch (st) {
    case VP8_STATUS_OUT_OF_MEMORY:
        return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
        return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
        return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
    case VP8_STATUS_NOT_ENOUGH_DATA:
        return "truncated data";
    default:
        return "decoding failed";
    }
}

static int fail(webp_dec *w, VP8StatusCode st, char *reason)
{
    snprintf(reason, DECODE_REASON_MAX, "WebP: %s", status_text(st));
    webp_dec_close(w);
    return status_code(st);
}

/* What decoding holds at most, whatever the crop: every pixel handed out
 * (RGB), the rectangle libwebp decodes them into first (RGB, the whole
 * image at most), and libwebp's own buffers: a lossless image whole as
 * 32-bit ARGB, its cache rows, and the subsampled images of its predictor
 * and colour transforms (a sixteenth of the ARGB each, at most); a lossy
 * one a few macroblock rows (measured: 151 bytes a column) and, with
 * alpha, its plane whole and the lossless decoder of that plane (5 bytes a
 * pixel at most); a MiB for the rest (Huffman tables, bit readers). */
static int64_t decode_bytes(const WebPBitstreamFeatures *f)
{
    const int64_t px = (int64_t)f->width * f->height;
    int64_t need = px * 3 * 2 + (int64_t)f->width * 256 + ((int64_t)1 << 20);
    if (f->format == 2)
        need += px * 4 + px / 2;
    else if (f->has_alpha)
        need += px * 5;
    return need;
}

static int check_header(const WebPBitstreamFeatures *f,
                        const decode_limits *lim, int64_t need, char *reason)
{
    const int rc = codec_check_size(f->width, f->height, lim, reason);
    if (rc < 0)
        return rc;
    if (need > lim->max_memory) {
        char what[64];
        snprintf(what, sizeof what, "%dx%d %s WebP", f->width, f->height,
                 f->format == 2 ? "lossless" : "lossy");
        return decode_over_budget(
            reason, what, need,
            f->format == 2 ? " to decode (its pixels twice, and libwebp's ARGB)"
            : f->has_alpha ? " to decode (its pixels twice, and its alpha)"
                           : " to decode (its pixels twice)",
            lim->max_memory);
    }
    if (f->has_animation) {
        snprintf(reason, DECODE_REASON_MAX,
                 "animated WebP is not supported (a still image is)");
        return PL_EUNSUPPORTED;
    }
    return 0;
}

static int webp_dec_open(void *state, const uint8_t *buf, size_t len,
                         const decode_limits *lim, uint64_t deadline_ns,
                         decode_info *info, char *reason)
{
    webp_dec *w = state;
    webp_dec_close(w);
    WebPBitstreamFeatures f;
    const VP8StatusCode st = WebPGetFeatures(buf, len, &f);
    if (st != VP8_STATUS_OK)
        return fail(w, st, reason);
    info->memory = decode_bytes(&f);
    const int rc = check_header(&f, lim, info->memory, reason);
    if (rc < 0)
        return rc;
    *w = (webp_dec){.buf = buf,
                    .len = len,
                    .open = 1,
                    .width = f.width,
                    .height = f.height,
                    .deadline_ns = deadline_ns,
                    .max_decode_ms = lim->max_decode_ms,
                    .pix = w->pix,
                    .pix_cap = w->pix_cap};
    info->width = f.width;
    info->height = f.height;
    info->components = f.has_alpha ? 4 : 3;
    info->progressive = 0;
    return 0;
}

/* Full size only: the rows handed out hold columns [x0, x0 + width);
 * nothing is decoded before the first of them is read. */
static int webp_dec_start(void *st, int denom, int x0, int width,
                          codec_region *r, char *reason)
{
    webp_dec *w = st;
    const int rc =
        codec_check_full_size(denom, x0, width, w->width, w->height, reason);
    if (rc < 0)
        return rc;
    *r = (codec_region){.xoff = x0, .width = width, .height = w->height};
    w->x0 = x0;
    w->w = width;
    w->y = 0;
    w->py0 = w->py1 = 0;
    return 0;
}

static int webp_dec_row(const void *st)
{
    const webp_dec *w = st;
    return w->y;
}

/* Rows above y are never decoded, unless prediction needs them. */
static int webp_dec_skip_to(void *st, int y, char *reason)
{
    webp_dec *w = st;
    (void)reason;
    if (y > w->y)
        w->y = y;
    return 0;
}

/* Feeds libwebp the input a slice at a time, checking the clock between
 * slices. */
static VP8StatusCode decode_slices(webp_dec *w, WebPDecoderConfig *cfg,
                                   int *late)
{
    WebPIDecoder *idec = WebPIDecode(NULL, 0, cfg);
    if (!idec)
        return VP8_STATUS_OUT_OF_MEMORY;
    VP8StatusCode st = VP8_STATUS_SUSPENDED;
    for (size_t fed = 0; st == VP8_STATUS_SUSPENDED && fed < w->len;) {
        fed = w->len - fed > WEBP_SLICE ? fed + WEBP_SLICE : w->len;
        st = WebPIUpdate(idec, w->buf, fed);
        if (st == VP8_STATUS_SUSPENDED && w->deadline_ns &&
            clock_now_ns() > w->deadline_ns) {
            *late = 1;
            break;
        }
    }
    WebPIDelete(idec);
    if (!*late && w->deadline_ns && clock_now_ns() > w->deadline_ns)
        *late = 1;
    return st;
}

/* Decode rows [y0, y1) of the columns handed out, with the margin, into
 * w->pix. */
static int decode_rect(webp_dec *w, int y0, int y1, char *reason)
{
    const int cx0 = (w->x0 - WEBP_MARGIN > 0 ? w->x0 - WEBP_MARGIN : 0) & ~1;
    const int cx1 = w->x0 + w->w + WEBP_MARGIN < w->width
                        ? w->x0 + w->w + WEBP_MARGIN
                        : w->width;
    const int cy0 = (y0 - WEBP_MARGIN > 0 ? y0 - WEBP_MARGIN : 0) & ~1;
    const int cy1 = y1 + WEBP_MARGIN < w->height ? y1 + WEBP_MARGIN : w->height;
    const size_t stride = (size_t)(cx1 - cx0) * 3;
    if (grow_scratch(&w->pix, &w->pix_cap, stride * (size_t)(cy1 - cy0), 1, 0) <
        0) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for %dx%d pixels",
                 cx1 - cx0, cy1 - cy0);
        webp_dec_close(w);
        return PL_ENOMEM;
    }
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return fail(w, VP8_STATUS_INVALID_PARAM, reason);
    cfg.options.use_cropping = 1;
    cfg.options.crop_left = cx0;
    cfg.options.crop_top = cy0;
    cfg.options.crop_width = cx1 - cx0;
    cfg.options.crop_height = cy1 - cy0;
    cfg.output.colorspace = MODE_RGB;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = w->pix;
    cfg.output.u.RGBA.stride = (int)stride;
    cfg.output.u.RGBA.size = stride * (size_t)(cy1 - cy0);
    int late = 0;
    const VP8StatusCode st = decode_slices(w, &cfg, &late);
    WebPFreeDecBuffer(&cfg.output);
    if (late) {
        webp_dec_close(w);
        return codec_over_time(reason, w->max_decode_ms);
    }
    if (st != VP8_STATUS_OK)
        return fail(w, st, reason);
    w->px0 = cx0;
    w->pw = cx1 - cx0;
    w->py0 = cy0;
    w->py1 = cy1;
    return 0;
}

static int webp_dec_read_into(void *st, uint8_t *dst, size_t stride, int n,
                              int until, char *reason)
{
    webp_dec *w = st;
    if (!w->open) {
        snprintf(reason, DECODE_REASON_MAX, "WebP: no image open");
        return PL_EINVAL;
    }
    if (w->y < w->py0 || w->y + n > w->py1) {
        const int rc =
            decode_rect(w, w->y, until > w->y + n ? until : w->y + n, reason);
        if (rc < 0)
            return rc;
    }
    const size_t src_stride = (size_t)w->pw * 3;
    const uint8_t *src = w->pix + (size_t)(w->y - w->py0) * src_stride +
                         (size_t)(w->x0 - w->px0) * 3;
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * stride, src + (size_t)i * src_stride,
               (size_t)w->w * 3);
    w->y += n;
    return 0;
}

static const char *const extensions[] = {"webp", NULL};

const codec codec_webp = {
    .name = "WebP",
    .extensions = extensions,
    .sniff = webp_dec_sniff,
    .create = webp_dec_create,
    .destroy = webp_dec_destroy,
    .open = webp_dec_open,
    .start = webp_dec_start,
    .skip_to = webp_dec_skip_to,
    .read_into = webp_dec_read_into,
    .row = webp_dec_row,
    .close = webp_dec_close,
};
