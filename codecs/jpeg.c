/* JPEG through libjpeg-turbo's libjpeg API, wrapped so that an error in
 * any file comes back as a status and a reason, never as exit() or a
 * crash. libjpeg reports fatal errors by calling error_exit, which here
 * longjmps back into the function of this file that called libjpeg; each
 * such function sets its own jump point, so no libjpeg frame outlives an
 * error. Decoded at 1/1, 1/2, 1/4 or 1/8 (DCT scaling), the columns of a
 * crop alone (jpeg_crop_scanline), rows above it skipped without the IDCT
 * (jpeg_skip_scanlines); each image from a new decompressor, so nothing
 * (tables above all) carries over from the image before. */
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "../common/clock.h"
#include "../common/grow.h"
#include "codec.h"
#include "pinload.h"

#define JPEG_CHUNK_ROWS 16 /* rows one libjpeg call is asked for */

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

typedef struct jpeg_dec {
    struct jpeg_decompress_struct cinfo;
    decode_jerr jerr;
    struct jpeg_progress_mgr progress;
    decode_limits limits; /* the open image's */
    int open;             /* a header was read and the image not closed */
    int cmyk;             /* libjpeg gives CMYK; converted to RGB here */
    int width;            /* width of the rows handed out */
    uint8_t *cmyk_rows;   /* JPEG_CHUNK_ROWS rows as CMYK, when converting */
    size_t cmyk_cap;
} jpeg_dec;

static int jpeg_dec_sniff(const uint8_t *buf, size_t len)
{
    return len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8;
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
        e->own_code = codec_over_time(e->own_reason, e->max_decode_ms);
        longjmp(e->jump, 1);
    }
}

/* A new decompressor under j->limits. */
static int decompressor_init(jpeg_dec *j)
{
    const decode_limits *lim = &j->limits;
    j->cinfo.err = jpeg_std_error(&j->jerr.pub);
    j->jerr.pub.error_exit = on_error_exit;
    j->jerr.pub.emit_message = on_emit_message;
    j->jerr.max_scans = lim->max_scans;
    j->jerr.max_decode_ms = lim->max_decode_ms;
    if (setjmp(j->jerr.jump))
        return PL_ENOMEM; /* jpeg_create_decompress fails only so */
    jpeg_create_decompress(&j->cinfo);
    j->progress.progress_monitor = on_progress;
    j->cinfo.progress = &j->progress;
    /* Progressive and multi-scan files keep every coefficient in memory:
     * jpeg_dec_open refuses those whose buffer would not fit the budget,
     * and libjpeg fails cleanly (JERR_NO_BACKING_STORE) rather than
     * allocate past it. */
    j->cinfo.mem->max_memory_to_use = (long)lim->max_memory;
    return 0;
}

static int jpeg_dec_create(void **out)
{
    *out = calloc(1, sizeof(jpeg_dec));
    return *out ? 0 : PL_ENOMEM;
}

static void jpeg_dec_close(void *st)
{
    jpeg_dec *j = st;
    if (j->open)
        jpeg_abort_decompress(&j->cinfo);
    j->open = 0;
}

/* jpeg_destroy_decompress of one never made, or whose making ran out of
 * memory (cinfo.mem NULL), does nothing. */
static void jpeg_dec_destroy(void *st)
{
    jpeg_dec *j = st;
    if (!j)
        return;
    jpeg_dec_close(j);
    jpeg_destroy_decompress(&j->cinfo);
    free(j->cmyk_rows);
    free(j);
}

/* Turns the error libjpeg (or on_progress) just raised into a code and a
 * reason, and ends the image. */
static int fail(jpeg_dec *j, char *reason)
{
    decode_jerr *e = &j->jerr;
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
        e->pub.format_message((j_common_ptr)&j->cinfo, msg);
        snprintf(reason, DECODE_REASON_MAX, "%s", msg);
    }
    jpeg_dec_close(j);
    return code;
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

/* A file of several scans keeps every coefficient; one scan needs a few
 * rows of blocks, whatever the size. */
static int check_memory(const jpeg_dec *j, decode_info *info, char *reason)
{
    info->memory = info->progressive ? coefficient_bytes(&j->cinfo) : 0;
    if (info->memory <= j->limits.max_memory)
        return 0;
    char what[96];
    snprintf(what, sizeof what, "%dx%d with %d components and several scans",
             info->width, info->height, info->components);
    return decode_over_budget(reason, what, info->memory, " of coefficients",
                              j->limits.max_memory);
}

/* libjpeg keeps the quantisation and Huffman tables an image defined for
 * the next one (a JPEG stream may lean on tables an earlier one set) and
 * offers no call to forget them: a reused decompressor would decode a file
 * without DHT (Motion-JPEG's habit) with the previous file's tables, and
 * one without DQT at all. So every image starts from a new decompressor,
 * which carries nothing from the last; it costs a few small allocations
 * against the hundreds of microseconds of a decode (docs/BENCHMARKS.md).
 * The row buffer and the error manager are the state's and stay. */
static int renew(jpeg_dec *j, char *reason)
{
    jpeg_destroy_decompress(&j->cinfo);
    const int rc = decompressor_init(j);
    if (rc < 0)
        snprintf(reason, DECODE_REASON_MAX,
                 "out of memory for libjpeg's decompressor");
    return rc;
}

/* The JPEGs other decoders (nvJPEG) read as libjpeg does: 8-bit Huffman
 * DCT, one grey component or three YCbCr ones. */
static int common_kind(const struct jpeg_decompress_struct *ci)
{
    const J_COLOR_SPACE cs = ci->jpeg_color_space;
    return !ci->arith_code && ci->data_precision == 8 &&
           ((cs == JCS_GRAYSCALE && ci->num_components == 1) ||
            (cs == JCS_YCbCr && ci->num_components == 3));
}

static int jpeg_dec_open(void *st, const uint8_t *buf, size_t len,
                         const decode_limits *lim, uint64_t deadline_ns,
                         decode_info *info, char *reason)
{
    jpeg_dec *j = st;
    jpeg_dec_close(j);
    j->limits = *lim;
    j->jerr.warnings = 0;
    j->jerr.own_code = 0;
    j->jerr.deadline_ns = deadline_ns;
    int rc = renew(j, reason);
    if (rc < 0)
        return rc;
    j->open = 1;
    if (setjmp(j->jerr.jump))
        return fail(j, reason);
    jpeg_mem_src(&j->cinfo, buf, (unsigned long)len);
    jpeg_read_header(&j->cinfo, TRUE);

    info->width = (int)j->cinfo.image_width;
    info->height = (int)j->cinfo.image_height;
    info->components = j->cinfo.num_components;
    info->progressive = jpeg_has_multiple_scans(&j->cinfo) ? 1 : 0;
    rc = codec_check_size(info->width, info->height, lim, reason);
    if (rc == 0)
        rc = check_memory(j, info, reason);
    if (rc < 0) {
        jpeg_dec_close(j);
        return rc;
    }
    const J_COLOR_SPACE cs = j->cinfo.jpeg_color_space;
    info->common_jpeg = common_kind(&j->cinfo);
    j->cmyk = (cs == JCS_CMYK || cs == JCS_YCCK);
    j->cinfo.out_color_space = j->cmyk ? JCS_CMYK : JCS_RGB;
    j->cinfo.dct_method = JDCT_ISLOW;
    return 0;
}

static void jpeg_dec_scaled_size(const void *st, int denom, int *width,
                                 int *height)
{
    const jpeg_dec *j = st;
    /* libjpeg rounds scaled sizes up (jdiv_round_up). */
    *width = (int)((j->cinfo.image_width + (unsigned)denom - 1) / denom);
    *height = (int)((j->cinfo.image_height + (unsigned)denom - 1) / denom);
}

/* The libjpeg calls of jpeg_dec_start, after its setjmp. */
static void start(jpeg_dec *j, int denom, int x0, int w, codec_region *r)
{
    j->cinfo.scale_num = 1;
    j->cinfo.scale_denom = (unsigned)denom;
    jpeg_start_decompress(&j->cinfo);
    JDIMENSION xoff = (JDIMENSION)x0, width = (JDIMENSION)w;
    /* jpeg_crop_scanline of libjpeg-turbo 2.1 leaves columns of the crop
     * uninitialised where a sampling factor is above 2 (4:1:1, 4:1:0, 2x4:
     * its plain, not fancy, upsampling): the output then depended on what
     * the heap held, and so on the worker count. Those files are decoded
     * at full width (their crops cost the columns beside them, nothing
     * else). */
    const int croppable = j->cinfo.max_h_samp_factor <= 2 &&
                          j->cinfo.max_v_samp_factor <= 2;
    if (croppable && (xoff > 0 || width < j->cinfo.output_width))
        jpeg_crop_scanline(&j->cinfo, &xoff, &width);
    else
        xoff = 0;
    j->width = (int)j->cinfo.output_width; /* the cropped width */
    r->xoff = (int)xoff;
    r->width = j->width;
    r->height = (int)j->cinfo.output_height;
}

static int jpeg_dec_start(void *st, int denom, int x0, int w, codec_region *r,
                          char *reason)
{
    jpeg_dec *j = st;
    if (setjmp(j->jerr.jump))
        return fail(j, reason);
    start(j, denom, x0, w, r);
    if (j->cmyk && grow(&j->cmyk_rows, &j->cmyk_cap,
                        (size_t)j->width * 4 * JPEG_CHUNK_ROWS, 1, 0) < 0) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for %d-px rows",
                 j->width);
        jpeg_dec_close(j);
        return PL_ENOMEM;
    }
    return 0;
}

static int jpeg_dec_row(const void *st)
{
    const jpeg_dec *j = st;
    return (int)j->cinfo.output_scanline;
}

static int jpeg_dec_skip_to(void *st, int y, char *reason)
{
    jpeg_dec *j = st;
    if (setjmp(j->jerr.jump))
        return fail(j, reason);
    const JDIMENSION at = j->cinfo.output_scanline;
    if ((JDIMENSION)y > at)
        jpeg_skip_scanlines(&j->cinfo, (JDIMENSION)y - at);
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
static int read_rows(jpeg_dec *j, JSAMPROW *ptrs, int want)
{
    int got = 0;
    while (got < want)
        got += (int)jpeg_read_scanlines(&j->cinfo, ptrs + got,
                                        (JDIMENSION)(want - got));
    return got;
}

static int strict_check(jpeg_dec *j, char *reason)
{
    if (!j->limits.strict || j->jerr.warnings == 0)
        return 0;
    snprintf(reason, DECODE_REASON_MAX, "%.200s (strict)",
             j->jerr.first_warning);
    jpeg_dec_close(j);
    return PL_ECORRUPT;
}

/* jpeg_dec_read_into's work, after its setjmp. RGB rows land in dst
 * directly; CMYK rows pass through j->cmyk_rows. */
static void read_into(jpeg_dec *j, uint8_t *dst, size_t stride, int n)
{
    const size_t cmyk_stride = (size_t)j->width * 4;
    for (int done = 0; done < n;) {
        const int want =
            n - done < JPEG_CHUNK_ROWS ? n - done : JPEG_CHUNK_ROWS;
        JSAMPROW ptrs[JPEG_CHUNK_ROWS];
        for (int i = 0; i < want; i++)
            ptrs[i] = j->cmyk ? j->cmyk_rows + (size_t)i * cmyk_stride
                              : dst + (size_t)(done + i) * stride;
        const int got = read_rows(j, ptrs, want);
        for (int i = 0; j->cmyk && i < got; i++)
            cmyk_to_rgb(j->cmyk_rows + (size_t)i * cmyk_stride,
                        dst + (size_t)(done + i) * stride, (size_t)j->width,
                        j->cinfo.saw_Adobe_marker);
        done += got;
    }
}

static int jpeg_dec_read_into(void *st, uint8_t *dst, size_t stride, int n,
                              int until, char *reason)
{
    jpeg_dec *j = st;
    (void)until; /* libjpeg decodes row by row */
    if (setjmp(j->jerr.jump))
        return fail(j, reason);
    read_into(j, dst, stride, n);
    return strict_check(j, reason);
}

static int jpeg_dec_warnings(const void *st, const char **first)
{
    const jpeg_dec *j = st;
    if (first)
        *first = j->jerr.first_warning;
    return j->jerr.warnings;
}

static const char *const extensions[] = {"jpg", "jpeg", NULL};

const codec codec_jpeg = {
    .name = "JPEG",
    .extensions = extensions,
    .sniff = jpeg_dec_sniff,
    .create = jpeg_dec_create,
    .destroy = jpeg_dec_destroy,
    .open = jpeg_dec_open,
    .scaled_size = jpeg_dec_scaled_size,
    .start = jpeg_dec_start,
    .skip_to = jpeg_dec_skip_to,
    .read_into = jpeg_dec_read_into,
    .row = jpeg_dec_row,
    .warnings = jpeg_dec_warnings,
    .close = jpeg_dec_close,
};
