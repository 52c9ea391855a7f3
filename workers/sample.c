#include "sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/grow.h"
#include "pinload.h"

/* Columns decoded beyond those the filter reads: libjpeg's fancy upsampling
 * treats the edges of a partial-width decode as image edges, so the pixels
 * next to them may differ from a full decode; these never reach the
 * output. */
#define CROP_MARGIN 8

int sample_init(sample_ctx *c, const decode_limits *lim)
{
    memset(c, 0, sizeof *c);
    return decoder_create(&c->dec, lim);
}

void sample_fini(sample_ctx *c)
{
    decoder_destroy(c->dec);
    fileio_buf_free(&c->file);
    resample_axis_free(&c->h);
    resample_axis_free(&c->v);
    free(c->src);
    free(c->vrow);
    free(c->row);
    free(c->img);
    free(c->scratch.buf);
    free(c->full);
    memset(c, 0, sizeof *c);
}

static int oom(char *reason, const char *what)
{
    snprintf(reason, SAMPLE_REASON_MAX, "out of memory for %s", what);
    return PL_ENOMEM;
}

/* The filters in the coordinates of an image of sw x sh pixels, decoded
 * at 1/denom: the plan's source rectangle scales by 1/denom
 * (fractionally), its taps stay inside it, and where it reaches past the
 * image (a padded crop, at denom 1) the taps there read zeros. */
static int plan_filters(sample_ctx *c, const augment_params *p,
                        const augment_plan *plan, int sw, int sh, char *reason)
{
    const double d = plan->denom;
    const double x0 = plan->src_x / d, x1 = (plan->src_x + plan->src_w) / d;
    const double y0 = plan->src_y / d, y1 = (plan->src_y + plan->src_h) / d;
    /* Past the scaled size by its rounding only, unless padded. */
    const int pad_x =
        plan->denom == 1 && (plan->src_x < 0 || plan->src_x + plan->src_w > sw);
    const int pad_y =
        plan->denom == 1 && (plan->src_y < 0 || plan->src_y + plan->src_h > sh);
    const int bx1 = (int)ceil(x1) < sw || pad_x ? (int)ceil(x1) : sw;
    const int by1 = (int)ceil(y1) < sh || pad_y ? (int)ceil(y1) : sh;
    const resample_filter f = {plan->interp, plan->antialias};
    if (resample_axis_plan_with(&c->h, &f, x0, x1, (int)floor(x0), bx1, 0, sw,
                                plan->rs_w, plan->out_x, p->out_w) < 0 ||
        resample_axis_plan_with(&c->v, &f, y0, y1, (int)floor(y0), by1, 0, sh,
                                plan->rs_h, plan->out_y, p->out_h) < 0)
        return oom(reason, "the resize weights");
    return 0;
}

/* The buffers the passes use for rows of `stride` bytes: the decoded rows
 * (rows of them) and one vertically filtered row. */
static int grow_rows(sample_ctx *c, size_t stride, int rows, char *reason)
{
    if (grow_scratch(&c->src, &c->src_cap, stride * (size_t)rows, 1, 0) < 0 ||
        grow(&c->vrow, &c->vrow_cap,
             (stride + (size_t)resample_pad(&c->h)) * sizeof *c->vrow, 1,
             0) < 0)
        return oom(reason, "the decoded rows");
    return 0;
}

/* Decode the rows and columns the filters read (and a margin of columns)
 * into c->src; from here on the horizontal filter counts columns from the
 * first decoded one. */
static int decode_region(sample_ctx *c, const augment_plan *plan, char *reason)
{
    int sw, sh;
    decoder_scaled_size(c->dec, plan->denom, &sw, &sh);
    const int cx0 = c->h.lo - CROP_MARGIN > 0 ? c->h.lo - CROP_MARGIN : 0;
    const int cx1 = c->h.hi + CROP_MARGIN < sw ? c->h.hi + CROP_MARGIN : sw;
    int rc = decoder_start(c->dec, plan->denom, cx0, cx1 - cx0, reason);
    if (rc < 0)
        return rc;
    resample_axis_shift(&c->h, decoder_xoff(c->dec));
    const size_t stride = (size_t)decoder_width(c->dec) * 3;
    const int rows = c->v.hi - c->v.lo;
    if ((rc = grow_rows(c, stride, rows, reason)) < 0) {
        decoder_close(c->dec);
        return rc;
    }
    rc = decoder_skip_to(c->dec, c->v.lo, reason);
    if (rc == 0)
        rc = decoder_read_into(c->dec, c->src, stride, rows, reason);
    return rc;
}

/* Strict mode judges the whole file, not just the rows this crop needs,
 * so a file is bad or good whatever the sample's crop. Skipping entropy-
 * decodes the rows (where the damage and its warnings are) without the
 * IDCT and colour conversion; the last row is read, as skipping to the very
 * end decodes nothing. */
static int decode_rest(sample_ctx *c, char *reason)
{
    const int last = decoder_height(c->dec) - 1;
    int rc = 0;
    if (decoder_row(c->dec) < last)
        rc = decoder_skip_to(c->dec, last, reason);
    while (rc == 0 && decoder_row(c->dec) <= last) {
        const uint8_t *rows;
        int n;
        rc = decoder_read(c->dec, &rows, &n, reason);
    }
    return rc;
}

/* Both passes over the rows (source row v.lo at `rows`, `stride` bytes
 * apart), each output row written straight into the sample: the default
 * path, without pixel or tensor ops. */
static int resize_rows(sample_ctx *c, const augment_params *p,
                       const augment_plan *plan, const uint8_t *rows,
                       size_t stride, void *dst, char *reason)
{
    const int x0 = c->h.lo * 3, x1 = c->h.hi * 3;
    if (p->format != PL_FORMAT_U8_NHWC &&
        grow(&c->row, &c->row_cap, (size_t)p->out_w * 3, 1, 0) < 0)
        return oom(reason, "an output row");
    /* The spare lanes read after the last pixel are ignored; zero them so
     * nothing uninitialised is ever read. */
    memset(c->vrow + x1, 0, (size_t)resample_pad(&c->h) * sizeof *c->vrow);
    for (int y = 0; y < p->out_h; y++) {
        const int oy = plan->vflip ? p->out_h - 1 - y : y;
        resample_v(&c->v, rows, stride, y, x0, x1, c->vrow);
        if (p->format == PL_FORMAT_F32_NCHW) {
            resample_h(&c->h, c->vrow, plan->flip, c->row);
            augment_store_f32(p, c->row, oy, dst);
        } else if (p->format == PL_FORMAT_F16_NCHW ||
                   p->format == PL_FORMAT_BF16_NCHW) {
            resample_h(&c->h, c->vrow, plan->flip, c->row);
            augment_store_f16(p, c->row, oy, dst);
        } else {
            resample_h(&c->h, c->vrow, plan->flip,
                       (uint8_t *)dst + (size_t)oy * p->out_w * 3);
        }
    }
    return 0;
}

/* config.sample_fn on the out_w x out_h image at img (packed rows), with
 * the sample's key from its own stream. 0, or the sample's failure: the
 * hook's PL_E* code (PL_EINVAL for any other nonzero value) and its
 * reason. */
static int call_hook(const augment_params *p, uint8_t *img, int64_t epoch,
                     int64_t index, char *reason)
{
    philox_stream s;
    philox_stream_op(&s, p->seed, (uint64_t)epoch, (uint64_t)index,
                     OPS_HOOK_STREAM);
    const uint64_t lo = philox_next_u32(&s);
    const uint64_t key = lo | (uint64_t)philox_next_u32(&s) << 32;
    pl_image view = {p->out_w, p->out_h, img};
    const int rc = p->sample_fn(p->sample_ctx, &view, index, epoch, key);
    if (rc == 0)
        return 0;
    /* A status this version names (PL_EPOCH_END is no failure). */
    const int code =
        rc < 0 && strcmp(pl_err_name(rc), "PL_UNKNOWN") != 0 ? rc : PL_EINVAL;
    snprintf(reason, SAMPLE_REASON_MAX, "config.sample_fn returned %d (%s)", rc,
             code == rc ? pl_err_name(rc) : "not a PL_E* code");
    return code;
}

/* With pixel or tensor ops (or a hook): the resized uint8 image whole (in
 * the sample itself for u8, else in c->img), the pixel ops on it, the
 * hook, the float sample written from it, then the tensor ops on that. */
static int resize_ops(sample_ctx *c, const augment_params *p,
                      const augment_plan *plan, const uint8_t *rows,
                      size_t stride, int64_t epoch, int64_t index, void *dst,
                      char *reason)
{
    const size_t row_bytes = (size_t)p->out_w * 3;
    uint8_t *img = dst;
    if (p->format != PL_FORMAT_U8_NHWC) {
        if (grow(&c->img, &c->img_cap, row_bytes * (size_t)p->out_h, 1, 0) < 0)
            return oom(reason, "the resized image");
        img = c->img;
    }
    const int x0 = c->h.lo * 3, x1 = c->h.hi * 3;
    memset(c->vrow + x1, 0, (size_t)resample_pad(&c->h) * sizeof *c->vrow);
    for (int y = 0; y < p->out_h; y++) {
        const int oy = plan->vflip ? p->out_h - 1 - y : y;
        resample_v(&c->v, rows, stride, y, x0, x1, c->vrow);
        resample_h(&c->h, c->vrow, plan->flip, img + (size_t)oy * row_bytes);
    }
    op_image im = {img, p->out_w, p->out_h, row_bytes, &c->scratch};
    if (ops_pixels(&p->ops, p->seed, epoch, index, &im) < 0)
        return oom(reason, "an op's scratch memory");
    if (p->sample_fn) {
        const int rc = call_hook(p, img, epoch, index, reason);
        if (rc < 0)
            return rc;
    }
    if (p->format == PL_FORMAT_U8_NHWC)
        return 0;
    for (int y = 0; y < p->out_h; y++) {
        if (p->format == PL_FORMAT_F32_NCHW)
            augment_store_f32(p, img + (size_t)y * row_bytes, y, dst);
        else
            augment_store_f16(p, img + (size_t)y * row_bytes, y, dst);
    }
    op_tensor t = {dst,        p->format,        p->out_w,
                   p->out_h,   p->channels_last, (const float(*)[256])p->lut,
                   &c->scratch};
    if (ops_tensor(&p->ops, p->seed, epoch, index, &t) < 0)
        return oom(reason, "an op's scratch memory");
    return 0;
}

static int resize_into(sample_ctx *c, const augment_params *p,
                       const augment_plan *plan, const uint8_t *rows,
                       size_t stride, int64_t epoch, int64_t index, void *dst,
                       char *reason)
{
    if (p->ops.npixels == 0 && p->ops.ntensor == 0 && !p->sample_fn)
        return resize_rows(c, p, plan, rows, stride, dst, reason);
    return resize_ops(c, p, plan, rows, stride, epoch, index, dst, reason);
}

/* After a read that took since t0 and returned rc: the sample from the
 * bytes read, or zeros. */
static int from_read(sample_ctx *c, const augment_params *p, int rc,
                     uint64_t t0, int64_t epoch, int64_t index, void *dst,
                     sample_times *t, char reason[SAMPLE_REASON_MAX])
{
    t->ns_read += clock_now_ns() - t0;
    if (rc < 0) {
        memset(dst, 0, augment_sample_bytes(p));
        return rc;
    }
    t->bytes_read += c->file.len;
    return sample_produce_buffer(c, p, c->file.data, c->file.len, epoch, index,
                                 dst, t, reason);
}

int sample_produce(sample_ctx *c, const augment_params *p, const location *loc,
                   int64_t max_file_bytes, int64_t epoch, int64_t index,
                   void *dst, sample_times *t, char reason[SAMPLE_REASON_MAX])
{
    const uint64_t t0 = clock_now_ns();
    c->warnings = 0;
    const int rc = fileio_read_loc(loc, max_file_bytes, &c->file, reason,
                                   SAMPLE_REASON_MAX);
    return from_read(c, p, rc, t0, epoch, index, dst, t, reason);
}

int sample_produce_buffer(sample_ctx *c, const augment_params *p,
                          const uint8_t *buf, size_t len, int64_t epoch,
                          int64_t index, void *dst, sample_times *t,
                          char reason[SAMPLE_REASON_MAX])
{
    const uint64_t t1 = clock_now_ns();
    decode_info info;
    augment_plan plan;
    c->warnings = 0;
    int rc = decoder_open(c->dec, buf, len, &info, reason);
    const uint64_t t_header = clock_now_ns();
    t->ns_decode += t_header - t1; /* the header is decoding too */
    if (rc == 0) {
        augment_plan_make(p, epoch, index, info.width, info.height, &plan);
        if (!decoder_can_scale(c->dec))
            plan.denom = 1;
        int sw, sh;
        decoder_scaled_size(c->dec, plan.denom, &sw, &sh);
        rc = plan_filters(c, p, &plan, sw, sh, reason);
    }
    const uint64_t t2 = clock_now_ns();
    t->ns_augment += t2 - t_header;
    if (rc == 0)
        rc = decode_region(c, &plan, reason);
    if (rc == 0 && decoder_limits(c->dec)->strict)
        rc = decode_rest(c, reason);
    const char *first;
    c->warnings = decoder_warnings(c->dec, &first);
    if (c->warnings)
        snprintf(c->first_warning, sizeof c->first_warning, "%s", first);
    decoder_close(c->dec);
    const uint64_t t3 = clock_now_ns();
    t->ns_decode += t3 - t2;
    if (rc == 0)
        rc = resize_into(c, p, &plan, c->src, (size_t)decoder_width(c->dec) * 3,
                         epoch, index, dst, reason);
    t->ns_augment += clock_now_ns() - t3;
    if (rc < 0)
        goto fail;
    return 0;
fail:
    decoder_close(c->dec);
    memset(dst, 0, augment_sample_bytes(p));
    return rc;
}

int sample_decode_full(sample_ctx *c, int dirfd, const char *path,
                       int64_t max_file_bytes, uint8_t **rgb, int *width,
                       int *height, char reason[SAMPLE_REASON_MAX])
{
    const int rc = fileio_read(dirfd, path, max_file_bytes, &c->file, reason,
                               SAMPLE_REASON_MAX);
    if (rc < 0)
        return rc;
    return sample_decode_buffer(c, c->file.data, c->file.len, rgb, width,
                                height, reason);
}

int sample_decode_buffer(sample_ctx *c, const uint8_t *buf, size_t len,
                         uint8_t **rgb, int *width, int *height,
                         char reason[SAMPLE_REASON_MAX])
{
    uint8_t *out = NULL;
    decode_info info;
    int rc = decoder_open(c->dec, buf, len, &info, reason);
    if (rc == 0)
        rc = decoder_start(c->dec, 1, 0, info.width, reason);
    if (rc < 0)
        goto fail;
    const size_t stride = (size_t)info.width * 3;
    out = malloc(stride * (size_t)info.height);
    if (!out) {
        rc = oom(reason, "the image");
        goto fail;
    }
    rc = decoder_read_into(c->dec, out, stride, info.height, reason);
    if (rc < 0)
        goto fail;
    decoder_close(c->dec);
    *rgb = out;
    *width = info.width;
    *height = info.height;
    return 0;
fail:
    decoder_close(c->dec);
    free(out);
    return rc;
}

int sample_transform_pixels(sample_ctx *c, const augment_params *p,
                            const uint8_t *rgb, int width, int height,
                            int64_t epoch, int64_t index, void *dst,
                            char reason[SAMPLE_REASON_MAX])
{
    augment_plan plan;
    augment_plan_make(p, epoch, index, width, height, &plan);
    plan.denom = 1; /* the pixels are decoded already */
    const size_t stride = (size_t)width * 3;
    int rc = plan_filters(c, p, &plan, width, height, reason);
    /* The vertical pass reads rows from v.lo on, in place. */
    if (rc == 0)
        rc = grow_rows(c, stride, 0, reason);
    if (rc == 0)
        rc = resize_into(c, p, &plan, rgb + (size_t)c->v.lo * stride, stride,
                         epoch, index, dst, reason);
    if (rc < 0)
        memset(dst, 0, augment_sample_bytes(p));
    return rc;
}

int sample_produce_views(sample_ctx *c, const augment_params *views,
                         int nviews, const uint8_t *buf, size_t len,
                         int64_t epoch, int64_t index, void *const *dst,
                         sample_times *t, char reason[SAMPLE_REASON_MAX])
{
    const uint64_t t0 = clock_now_ns();
    decode_info info;
    c->warnings = 0;
    int rc = decoder_open(c->dec, buf, len, &info, reason);
    if (rc == 0)
        rc = decoder_start(c->dec, 1, 0, info.width, reason);
    const size_t stride = (size_t)info.width * 3;
    if (rc == 0 && grow_scratch(&c->full, &c->full_cap,
                                stride * (size_t)info.height, 1, 0) < 0)
        rc = oom(reason, "the decoded image");
    if (rc == 0)
        rc = decoder_read_into(c->dec, c->full, stride, info.height, reason);
    const char *first;
    c->warnings = decoder_warnings(c->dec, &first);
    if (c->warnings)
        snprintf(c->first_warning, sizeof c->first_warning, "%s", first);
    decoder_close(c->dec);
    const uint64_t t1 = clock_now_ns();
    t->ns_decode += t1 - t0;
    for (int v = 0; v < nviews && rc == 0; v++)
        rc = sample_transform_pixels(c, &views[v], c->full, info.width,
                                     info.height, epoch, index, dst[v],
                                     reason);
    t->ns_augment += clock_now_ns() - t1;
    if (rc < 0)
        for (int v = 0; v < nviews; v++)
            memset(dst[v], 0, augment_sample_bytes(&views[v]));
    return rc;
}
