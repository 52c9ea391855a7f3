/* Decoding by format: the signature picks JPEG (here), PNG (decode_png.c)
 * or WebP (decode_webp.c); each decoder_* call forks on the open image's
 * format, JPEG's branch first.
 *
 * JPEG decoding: libjpeg's API wrapped so that an error in any file comes
 * back as a status and a reason, never as exit() or a crash. libjpeg reports
 * fatal errors by calling error_exit, which here longjmps back into the
 * decoder function that called libjpeg; each such function sets its own
 * jump point, so no libjpeg frame outlives an error. */
#include "decode.h"

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "../common/clock.h"
#include "../common/defaults.h"
#include "../common/grow.h"
#include "decode_png.h"
#include "decode_webp.h"
#include "pinload.h"

/* libjpeg reports errors and warnings here. */
typedef struct decode_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int max_scans;
    uint64_t deadline_ns; /* clock_now_ns() past which the decode stops;
                             0: none */
    int64_t max_decode_ms;
    unsigned progress_calls;
    int warnings;
    char first_warning[JMSG_LENGTH_MAX];
    char own_reason[DECODE_REASON_MAX]; /* set when we abort, not libjpeg */
    int own_code;
} decode_jerr;

struct decoder {
    struct jpeg_decompress_struct cinfo;
    decode_jerr jerr;
    struct jpeg_progress_mgr progress;
    decode_limits limits;
    int open;      /* a header was read and the image not closed */
    int started;   /* jpeg_start_decompress done */
    int cmyk;      /* libjpeg gives CMYK; converted to RGB here */
    int xoff;      /* first column of the rows handed out (scaled image) */
    int width;     /* width of the rows handed out */
    uint8_t *rows; /* DECODE_CHUNK_ROWS rows of width * 3 bytes */
    size_t rows_cap;
    uint8_t *cmyk_rows; /* the same rows as CMYK, when converting */
    size_t cmyk_cap;
    decode_format format; /* of the open image */
    int other_width;      /* a PNG or WebP image's size */
    int other_height;
    png_dec *png;   /* made at the first PNG, kept */
    webp_dec *webp; /* made at the first WebP, kept */
};

void decode_limits_default(decode_limits *lim)
{
    lim->max_width = DEFAULT_MAX_WIDTH;
    lim->max_height = DEFAULT_MAX_HEIGHT;
    lim->max_pixels = DEFAULT_MAX_PIXELS;
    lim->max_scans = DEFAULT_MAX_SCANS;
    lim->max_decode_ms = DEFAULT_MAX_DECODE_MS;
    lim->max_memory = DEFAULT_MAX_DECODE_MEMORY;
    lim->strict = 0;
}

static void on_error_exit(j_common_ptr cinfo)
{
    decode_jerr *e = (decode_jerr *)cinfo->err;
    longjmp(e->jump, 1);
}

static void on_emit_message(j_common_ptr cinfo, int level)
{
    decode_jerr *e = (decode_jerr *)cinfo->err;
    if (level >= 0)
        return; /* trace output */
    if (e->warnings++ == 0)
        cinfo->err->format_message(cinfo, e->first_warning);
}

/* libjpeg calls this for every row group it absorbs or outputs, in every
 * pass and scan; a hostile file can hold thousands of tiny scans, each
 * costing a pass over the whole coefficient buffer, or make one pass run
 * long: both the scan count and the decode's time are bounded here. */
static void on_progress(j_common_ptr cinfo)
{
    j_decompress_ptr dinfo = (j_decompress_ptr)cinfo;
    decode_jerr *e = (decode_jerr *)cinfo->err;
    if (dinfo->input_scan_number > e->max_scans) {
        e->own_code = PL_ELIMIT;
        snprintf(e->own_reason, sizeof e->own_reason,
                 "more than %d progressive scans", e->max_scans);
        longjmp(e->jump, 1);
    }
    /* The clock every 8th call: a row group is far less than a millisecond. */
    if (e->deadline_ns && (++e->progress_calls & 7) == 0 &&
        clock_now_ns() > e->deadline_ns) {
        e->own_code = PL_ELIMIT;
        snprintf(e->own_reason, sizeof e->own_reason,
                 "decoding took longer than the limit of %lld ms",
                 (long long)e->max_decode_ms);
        longjmp(e->jump, 1);
    }
}

static int decoder_init(decoder *d, const decode_limits *lim)
{
    d->limits = *lim;
    d->cinfo.err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = on_error_exit;
    d->jerr.pub.emit_message = on_emit_message;
    d->jerr.max_scans = lim->max_scans;
    d->jerr.max_decode_ms = lim->max_decode_ms;
    if (setjmp(d->jerr.jump))
        return PL_ENOMEM; /* jpeg_create_decompress fails only so */
    jpeg_create_decompress(&d->cinfo);
    d->progress.progress_monitor = on_progress;
    d->cinfo.progress = &d->progress;
    /* Progressive and multi-scan files keep every coefficient in memory:
     * decoder_open refuses those whose buffer would not fit the budget,
     * and libjpeg fails cleanly (JERR_NO_BACKING_STORE) rather than
     * allocate past it. */
    d->cinfo.mem->max_memory_to_use = (long)lim->max_memory;
    return 0;
}

int decoder_create(decoder **out, const decode_limits *lim)
{
    decoder *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d)
        return PL_ENOMEM;
    const int rc = decoder_init(d, lim);
    if (rc < 0) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void decoder_destroy(decoder *d)
{
    if (!d)
        return;
    decoder_close(d);
    jpeg_destroy_decompress(&d->cinfo);
    png_dec_destroy(d->png);
    webp_dec_destroy(d->webp);
    free(d->rows);
    free(d->cmyk_rows);
    free(d);
}

int decoder_xoff(const decoder *d)
{
    return d->xoff;
}

int decoder_width(const decoder *d)
{
    return d->width;
}

int decoder_height(const decoder *d)
{
    if (d->format != DECODE_JPEG)
        return d->other_height;
    return (int)d->cinfo.output_height;
}

int decoder_can_scale(const decoder *d)
{
    return d->format == DECODE_JPEG;
}

const decode_limits *decoder_limits(const decoder *d)
{
    return &d->limits;
}

void decoder_set_limits(decoder *d, const decode_limits *lim)
{
    d->limits = *lim;
    d->jerr.max_scans = lim->max_scans;
    d->jerr.max_decode_ms = lim->max_decode_ms;
    if (d->cinfo.mem) /* NULL after a renew that ran out of memory */
        d->cinfo.mem->max_memory_to_use = (long)lim->max_memory;
}

int decoder_warnings(const decoder *d, const char **first)
{
    if (first)
        *first = d->jerr.first_warning;
    return d->jerr.warnings;
}

int decoder_is_open(const decoder *d)
{
    return d->open;
}

int decoder_is_started(const decoder *d)
{
    return d->started;
}

int decoder_has_row_buffers(const decoder *d)
{
    return d->rows != NULL || d->cmyk_rows != NULL;
}

/* Names what a file of no format pinload reads seems to be instead. */
static void describe_not_jpeg(const uint8_t *b, size_t len, char *reason)
{
    static const struct {
        const char *magic;
        size_t n;
        const char *what;
    } kinds[] = {
        {"GIF8", 4, "GIF"},   {"BM", 2, "BMP"},    {"II*\0", 4, "TIFF"},
        {"MM\0*", 4, "TIFF"}, {"RIFF", 4, "RIFF"}, {"P1", 2, "PBM"},
        {"P4", 2, "PBM"},     {"P2", 2, "PGM"},    {"P5", 2, "PGM"},
        {"P3", 2, "PPM"},     {"P6", 2, "PPM"},
    };
    if (len == 0) {
        snprintf(reason, DECODE_REASON_MAX,
                 "not an image pinload reads (empty)");
        return;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (len >= kinds[i].n && memcmp(b, kinds[i].magic, kinds[i].n) == 0) {
            snprintf(reason, DECODE_REASON_MAX,
                     "not an image pinload reads (%s data)", kinds[i].what);
            return;
        }
    }
    char hex[16] = "";
    size_t o = 0;
    for (size_t i = 0; i < len && i < 4; i++)
        o += (size_t)snprintf(hex + o, sizeof hex - o, i ? " %02x" : "%02x",
                              b[i]);
    snprintf(reason, DECODE_REASON_MAX,
             "not an image pinload reads (starts with %s)", hex);
}

/* Whether buf[0, len) starts as a PNG whose 8-byte signature is cut short
 * or damaged: then it is a bad PNG, not something pinload does not read. The
 * signature's CR LF, LF and ^Z are there to catch text-mode copies, which
 * change exactly those bytes. */
static int damaged_png(const uint8_t *b, size_t len, char *reason)
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

/* Turns the error libjpeg (or on_progress) just raised into a code and a
 * reason, and makes the decoder ready for another image. */
static int fail(decoder *d, char *reason)
{
    decode_jerr *e = &d->jerr;
    int code;
    if (e->own_code) {
        code = e->own_code;
        snprintf(reason, DECODE_REASON_MAX, "%s", e->own_reason);
    } else {
        switch (e->pub.msg_code) {
        case JERR_NO_SOI:
            code = PL_ENOTIMAGE;
            break;
        case JERR_BAD_PRECISION:
        case JERR_SOF_UNSUPPORTED:
        case JERR_NOT_COMPILED:
        case JERR_NOTIMPL:
        case JERR_ARITH_NOTIMPL:
        case JERR_CONVERSION_NOTIMPL:
            code = PL_EUNSUPPORTED;
            break;
        case JERR_OUT_OF_MEMORY:
            code = PL_ENOMEM;
            break;
        case JERR_NO_BACKING_STORE: /* over max_memory_to_use */
            code = PL_ELIMIT;
            break;
        default:
            code = PL_ECORRUPT;
        }
        char msg[JMSG_LENGTH_MAX];
        e->pub.format_message((j_common_ptr)&d->cinfo, msg);
        snprintf(reason, DECODE_REASON_MAX, "%s", msg);
    }
    decoder_close(d);
    return code;
}

static int check_limits(const decoder *d, const decode_info *info, char *reason)
{
    const decode_limits *lim = &d->limits;
    const int64_t pixels = (int64_t)info->width * info->height;
    if (info->width > lim->max_width || info->height > lim->max_height ||
        pixels > lim->max_pixels) {
        snprintf(reason, DECODE_REASON_MAX,
                 "%dx%d exceeds the limits (max %dx%d, %lld pixels)",
                 info->width, info->height, lim->max_width, lim->max_height,
                 (long long)lim->max_pixels);
        return PL_ELIMIT;
    }
    return 0;
}

/* The whole-image coefficient buffer libjpeg allocates for a file with
 * several scans (jdcoefct.c): per component, its blocks rounded up to
 * whole sampling factors, 64 coefficients of 2 bytes each. */
static int64_t coefficient_bytes(const struct jpeg_decompress_struct *ci)
{
    int64_t total = 0;
    for (int i = 0; i < ci->num_components; i++) {
        const jpeg_component_info *c = &ci->comp_info[i];
        const int64_t h = c->h_samp_factor, v = c->v_samp_factor;
        const int64_t w = ((int64_t)c->width_in_blocks + h - 1) / h * h;
        const int64_t r = ((int64_t)c->height_in_blocks + v - 1) / v * v;
        total += w * r * DCTSIZE2 * (int64_t)sizeof(JCOEF);
    }
    return total;
}

int decode_over_budget(char *reason, const char *what, int64_t need,
                       const char *detail, int64_t budget)
{
    snprintf(reason, DECODE_REASON_MAX,
             "%s needs %lld MiB%s, over the decode memory budget of %lld MiB "
             "(config.max_decode_memory)",
             what, (long long)((need + (1 << 20) - 1) >> 20), detail,
             (long long)(budget >> 20));
    return PL_ELIMIT;
}

/* A file of several scans keeps every coefficient; one scan needs a few
 * rows of blocks, whatever the size. */
static int check_memory(const decoder *d, decode_info *info, char *reason)
{
    info->memory = info->progressive ? coefficient_bytes(&d->cinfo) : 0;
    if (info->memory <= d->limits.max_memory)
        return 0;
    char what[96];
    snprintf(what, sizeof what, "%dx%d with %d components and several scans",
             info->width, info->height, info->components);
    return decode_over_budget(reason, what, info->memory, " of coefficients",
                              d->limits.max_memory);
}

/* libjpeg keeps the quantisation and Huffman tables an image defined for
 * the next one (a JPEG stream may lean on tables an earlier one set) and
 * offers no call to forget them: a reused decompressor would decode a file
 * without DHT (Motion-JPEG's habit) with the previous file's tables, and
 * one without DQT at all. So every image starts from a new decompressor,
 * which carries nothing from the last; it costs a few small allocations
 * against the hundreds of microseconds of a decode (docs/BENCHMARKS.md).
 * The row buffers, the limits and the error manager are the decoder's and
 * stay. */
static int renew(decoder *d, char *reason)
{
    jpeg_destroy_decompress(&d->cinfo);
    const int rc = decoder_init(d, &d->limits);
    if (rc < 0)
        snprintf(reason, DECODE_REASON_MAX,
                 "out of memory for libjpeg's decompressor");
    return rc;
}

/* A PNG or WebP image's header, through its own decoder (made the first
 * time). */
static int open_other(decoder *d, decode_format format, const uint8_t *buf,
                      size_t len, decode_info *info, char *reason)
{
    int rc = 0;
    if (format == DECODE_PNG && !d->png)
        rc = png_dec_create(&d->png);
    else if (format == DECODE_WEBP && !d->webp)
        rc = webp_dec_create(&d->webp);
    if (rc < 0) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for a decoder");
        return rc;
    }
    rc = format == DECODE_PNG
             ? png_dec_open(d->png, buf, len, &d->limits, d->jerr.deadline_ns,
                            info, reason)
             : webp_dec_open(d->webp, buf, len, &d->limits, d->jerr.deadline_ns,
                             info, reason);
    if (rc < 0)
        return rc;
    d->format = format;
    d->other_width = info->width;
    d->other_height = info->height;
    info->format = format;
    d->open = 1;
    return 0;
}

int decoder_open(decoder *d, const uint8_t *buf, size_t len, decode_info *info,
                 char *reason)
{
    decoder_close(d);
    info->memory = 0;
    d->format = DECODE_JPEG;
    d->jerr.warnings = 0;
    d->jerr.own_code = 0;
    d->jerr.deadline_ns =
        d->jerr.max_decode_ms > 0
            ? clock_now_ns() + (uint64_t)d->jerr.max_decode_ms * 1000000u
            : 0;
    if (len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8) {
        /* JPEG: below */
    } else if (png_dec_sniff(buf, len)) {
        return open_other(d, DECODE_PNG, buf, len, info, reason);
    } else if (webp_dec_sniff(buf, len)) {
        return open_other(d, DECODE_WEBP, buf, len, info, reason);
    }
    int rc = renew(d, reason);
    if (rc < 0)
        return rc;
    if (len < 2 || buf[0] != 0xFF || buf[1] != 0xD8) {
        if (damaged_png(buf, len, reason))
            return PL_ECORRUPT;
        describe_not_jpeg(buf, len, reason);
        return PL_ENOTIMAGE;
    }
    d->open = 1;
    if (setjmp(d->jerr.jump))
        return fail(d, reason);
    jpeg_mem_src(&d->cinfo, buf, (unsigned long)len);
    jpeg_read_header(&d->cinfo, TRUE);

    info->format = DECODE_JPEG;
    info->width = (int)d->cinfo.image_width;
    info->height = (int)d->cinfo.image_height;
    info->components = d->cinfo.num_components;
    info->progressive = jpeg_has_multiple_scans(&d->cinfo) ? 1 : 0;
    rc = check_limits(d, info, reason);
    if (rc == 0)
        rc = check_memory(d, info, reason);
    if (rc < 0) {
        decoder_close(d);
        return rc;
    }
    const J_COLOR_SPACE cs = d->cinfo.jpeg_color_space;
    d->cmyk = (cs == JCS_CMYK || cs == JCS_YCCK);
    d->cinfo.out_color_space = d->cmyk ? JCS_CMYK : JCS_RGB;
    d->cinfo.dct_method = JDCT_ISLOW;
    return 0;
}

void decoder_scaled_size(const decoder *d, int denom, int *width, int *height)
{
    if (d->format != DECODE_JPEG) { /* full size only */
        *width = d->other_width;
        *height = d->other_height;
        return;
    }
    /* libjpeg rounds scaled sizes up (jdiv_round_up). */
    *width = (int)((d->cinfo.image_width + (unsigned)denom - 1) / denom);
    *height = (int)((d->cinfo.image_height + (unsigned)denom - 1) / denom);
}

/* The libjpeg calls of decoder_start, after its setjmp. */
static void start(decoder *d, int denom, int x0, int w)
{
    d->cinfo.scale_num = 1;
    d->cinfo.scale_denom = (unsigned)denom;
    jpeg_start_decompress(&d->cinfo);
    d->started = 1;
    JDIMENSION xoff = (JDIMENSION)x0, width = (JDIMENSION)w;
    if (xoff > 0 || width < d->cinfo.output_width)
        jpeg_crop_scanline(&d->cinfo, &xoff, &width);
    d->xoff = (int)xoff;
    d->width = (int)d->cinfo.output_width; /* the cropped width */
}

/* A PNG or WebP decoder's failure ends the image here too. */
static int other_rc(decoder *d, int rc)
{
    if (rc < 0) {
        d->open = 0;
        d->started = 0;
    }
    return rc;
}

static int start_other(decoder *d, int denom, int x0, int w, char *reason)
{
    if (denom != 1 || x0 < 0 || w < 1 || x0 + w > d->other_width) {
        snprintf(reason, DECODE_REASON_MAX,
                 "cannot decode columns %d..%d at 1/%d of a %dx%d image", x0,
                 x0 + w, denom, d->other_width, d->other_height);
        decoder_close(d);
        return PL_EINVAL;
    }
    if (grow(&d->rows, &d->rows_cap, (size_t)w * 3 * DECODE_CHUNK_ROWS, 1, 0) <
        0) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for %d-px rows", w);
        decoder_close(d);
        return PL_ENOMEM;
    }
    const int rc = d->format == DECODE_PNG
                       ? png_dec_start(d->png, x0, w, reason)
                       : webp_dec_start(d->webp, x0, w, reason);
    if (rc < 0)
        return other_rc(d, rc);
    d->xoff = x0;
    d->width = w;
    d->started = 1;
    return 0;
}

int decoder_start(decoder *d, int denom, int x0, int w, char *reason)
{
    if (d->format != DECODE_JPEG)
        return start_other(d, denom, x0, w, reason);
    if (setjmp(d->jerr.jump))
        return fail(d, reason);
    start(d, denom, x0, w);
    const size_t row = (size_t)d->width * 3;
    if (grow(&d->rows, &d->rows_cap, row * DECODE_CHUNK_ROWS, 1, 0) < 0 ||
        (d->cmyk && grow(&d->cmyk_rows, &d->cmyk_cap,
                         (size_t)d->width * 4 * DECODE_CHUNK_ROWS, 1, 0) < 0)) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for %d-px rows",
                 d->width);
        decoder_close(d);
        return PL_ENOMEM;
    }
    return 0;
}

int decoder_row(const decoder *d)
{
    if (d->format == DECODE_PNG)
        return png_dec_row(d->png);
    if (d->format == DECODE_WEBP)
        return webp_dec_row(d->webp);
    return (int)d->cinfo.output_scanline;
}

int decoder_skip_to(decoder *d, int y, char *reason)
{
    if (d->format == DECODE_PNG) {
        const int at = png_dec_row(d->png);
        return other_rc(
            d, y > at ? png_dec_read(d->png, NULL, 0, y - at, reason) : 0);
    }
    if (d->format == DECODE_WEBP) {
        webp_dec_skip_to(d->webp, y);
        return 0;
    }
    if (setjmp(d->jerr.jump))
        return fail(d, reason);
    const JDIMENSION at = d->cinfo.output_scanline;
    if ((JDIMENSION)y > at)
        jpeg_skip_scanlines(&d->cinfo, (JDIMENSION)y - at);
    return 0;
}

/* Adobe applications write CMYK inverted (0 = full ink) and mark the file
 * with an Adobe APP14 segment; other writers store plain CMYK. The product
 * is rounded as djpeg rounds it. */
static void cmyk_to_rgb(const uint8_t *src, uint8_t *dst, size_t pixels,
                        int inverted)
{
    const unsigned flip = inverted ? 0 : 255;
    for (size_t i = 0; i < pixels; i++, src += 4, dst += 3) {
        const unsigned k = src[3] ^ flip;
        dst[0] = (uint8_t)(((src[0] ^ flip) * k * 2 + 255) / 510);
        dst[1] = (uint8_t)(((src[1] ^ flip) * k * 2 + 255) / 510);
        dst[2] = (uint8_t)(((src[2] ^ flip) * k * 2 + 255) / 510);
    }
}

/* Reads `want` rows into ptrs[]; called only in frames that set the
 * jump point, so that no local of theirs changes across a longjmp. */
static int read_rows(decoder *d, JSAMPROW *ptrs, int want)
{
    int got = 0;
    while (got < want)
        got += (int)jpeg_read_scanlines(&d->cinfo, ptrs + got,
                                        (JDIMENSION)(want - got));
    return got;
}

static int strict_check(decoder *d, char *reason)
{
    if (!d->limits.strict || d->jerr.warnings == 0)
        return 0;
    snprintf(reason, DECODE_REASON_MAX, "%.200s (strict)",
             d->jerr.first_warning);
    decoder_close(d);
    return PL_ECORRUPT;
}

/* The next chunk of rows into d->rows (CMYK converted). */
static int read_chunk(decoder *d)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    const size_t stride = (size_t)d->width * (d->cmyk ? 4 : 3);
    uint8_t *base = d->cmyk ? d->cmyk_rows : d->rows;
    JSAMPROW ptrs[DECODE_CHUNK_ROWS];
    int want = (int)(ci->output_height - ci->output_scanline);
    want = want > DECODE_CHUNK_ROWS ? DECODE_CHUNK_ROWS : want;
    for (int i = 0; i < want; i++)
        ptrs[i] = base + (size_t)i * stride;
    const int got = read_rows(d, ptrs, want);
    if (d->cmyk)
        cmyk_to_rgb(d->cmyk_rows, d->rows, (size_t)d->width * (size_t)got,
                    ci->saw_Adobe_marker);
    return got;
}

/* The next n rows of a PNG or WebP image into dst; rows below them that a
 * WebP decode may as well produce in the same pass end at `until`. */
static int read_other(decoder *d, uint8_t *dst, size_t stride, int n, int until,
                      char *reason)
{
    if (d->format == DECODE_PNG)
        return other_rc(d, png_dec_read(d->png, dst, stride, n, reason));
    return other_rc(d, webp_dec_read(d->webp, dst, stride, n, until, reason));
}

int decoder_read(decoder *d, const uint8_t **rows, int *n, char *reason)
{
    if (d->format != DECODE_JPEG) {
        const int left = d->other_height - decoder_row(d);
        const int want = left < DECODE_CHUNK_ROWS ? left : DECODE_CHUNK_ROWS;
        const int rc = read_other(d, d->rows, (size_t)d->width * 3, want,
                                  d->other_height, reason);
        *rows = d->rows;
        *n = want;
        return rc;
    }
    if (setjmp(d->jerr.jump))
        return fail(d, reason);
    const int got = read_chunk(d);
    const int rc = strict_check(d, reason);
    if (rc < 0)
        return rc;
    *rows = d->rows;
    *n = got;
    return 0;
}

/* decoder_read_into's work, after its setjmp. RGB rows land in dst
 * directly; CMYK rows pass through d->cmyk_rows. */
static void read_into(decoder *d, uint8_t *dst, size_t stride, int n)
{
    const size_t cmyk_stride = (size_t)d->width * 4;
    for (int done = 0; done < n;) {
        const int want =
            n - done < DECODE_CHUNK_ROWS ? n - done : DECODE_CHUNK_ROWS;
        JSAMPROW ptrs[DECODE_CHUNK_ROWS];
        for (int i = 0; i < want; i++)
            ptrs[i] = d->cmyk ? d->cmyk_rows + (size_t)i * cmyk_stride
                              : dst + (size_t)(done + i) * stride;
        const int got = read_rows(d, ptrs, want);
        for (int i = 0; d->cmyk && i < got; i++)
            cmyk_to_rgb(d->cmyk_rows + (size_t)i * cmyk_stride,
                        dst + (size_t)(done + i) * stride, (size_t)d->width,
                        d->cinfo.saw_Adobe_marker);
        done += got;
    }
}

int decoder_read_into(decoder *d, uint8_t *dst, size_t stride, int n,
                      char *reason)
{
    if (d->format != DECODE_JPEG)
        return read_other(d, dst, stride, n, decoder_row(d) + n, reason);
    if (setjmp(d->jerr.jump))
        return fail(d, reason);
    read_into(d, dst, stride, n);
    return strict_check(d, reason);
}

void decoder_close(decoder *d)
{
    if (d->open && d->format == DECODE_PNG)
        png_dec_close(d->png);
    else if (d->open && d->format == DECODE_WEBP)
        webp_dec_close(d->webp);
    else if (d->open)
        jpeg_abort_decompress(&d->cinfo);
    d->open = 0;
    d->started = 0;
}
