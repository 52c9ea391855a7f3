#include "process.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinload.h"

uint64_t process_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int process_init(process_ctx *c, const decode_limits *lim)
{
    memset(c, 0, sizeof *c);
    return decoder_init(&c->dec, lim);
}

void process_fini(process_ctx *c)
{
    decoder_fini(&c->dec);
    fileio_buf_free(&c->file);
    resample_axis_free(&c->h);
    resample_axis_free(&c->v);
    free(c->tmp);
    free(c->row);
    memset(c, 0, sizeof *c);
}

static int reserve(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    void *n = realloc(*p, need);
    if (!n)
        return PL_ENOMEM;
    *p = n;
    *cap = need;
    return 0;
}

/* Decode and drop the rows after the crop (strict mode). */
static int decode_rest(process_ctx *c, process_times *t, char *reason)
{
    const uint64_t t0 = process_now_ns();
    int rc = 0;
    while (rc == 0 && decoder_row(&c->dec) < (int)c->dec.cinfo.output_height) {
        const uint8_t *rows;
        int n;
        rc = decoder_read(&c->dec, &rows, &n, reason);
    }
    t->ns_decode += process_now_ns() - t0;
    return rc;
}

/* Decode the rows the vertical filter reads and filter each horizontally
 * into c->tmp as it arrives, so the full-size image never exists. */
static int decode_filtered_rows(process_ctx *c, const augment_plan *plan,
                                process_times *t, char *reason)
{
    const int out_w = c->h.out_n;
    const int y_end = plan->src_y + c->v.hi;
    const size_t tmp_row = (size_t)out_w * 3;
    int rc = decoder_start(&c->dec, reason);
    if (rc == 0)
        rc = decoder_skip_to(&c->dec, plan->src_y + c->v.lo, reason);
    int y = plan->src_y + c->v.lo;
    while (rc == 0 && y < y_end) {
        const uint64_t t0 = process_now_ns();
        const uint8_t *rows;
        int n;
        rc = decoder_read(&c->dec, &rows, &n, reason);
        const uint64_t t1 = process_now_ns();
        t->ns_decode += t1 - t0;
        if (rc < 0)
            break;
        const size_t stride = (size_t)c->dec.width * 3;
        for (int i = 0; i < n && y < y_end; i++, y++)
            resample_row_h(
                &c->h, rows + (size_t)i * stride + (size_t)plan->src_x * 3,
                c->tmp + (size_t)(y - plan->src_y - c->v.lo) * tmp_row);
        t->ns_augment += process_now_ns() - t1;
    }
    /* Strict mode judges the whole file, not just the rows this crop
     * needs, so a file is bad or good whatever the sample's crop. */
    if (rc == 0 && c->dec.limits.strict)
        rc = decode_rest(c, t, reason);
    decoder_close(&c->dec);
    return rc;
}

static int plan_filters(process_ctx *c, const augment_params *p,
                        const augment_plan *plan, char *reason)
{
    if (resample_axis_plan(&c->h, plan->src_w, plan->rs_w, plan->out_x,
                           p->out_w) < 0 ||
        resample_axis_plan(&c->v, plan->src_h, plan->rs_h, plan->out_y,
                           p->out_h) < 0)
        goto oom;
    const size_t rows = (size_t)(c->v.hi - c->v.lo);
    if (reserve((void **)&c->tmp, &c->tmp_cap,
                rows * (size_t)p->out_w * 3 * sizeof(float)) < 0 ||
        reserve((void **)&c->row, &c->row_cap, (size_t)p->out_w * 3) < 0)
        goto oom;
    return 0;
oom:
    snprintf(reason, PROCESS_REASON_MAX, "out of memory planning the resize");
    return PL_ENOMEM;
}

int process_sample(process_ctx *c, const augment_params *p, int dirfd,
                   const char *path, int64_t max_file_bytes, int64_t epoch,
                   int64_t index, void *dst, process_times *t,
                   char reason[PROCESS_REASON_MAX])
{
    const uint64_t t0 = process_now_ns();
    int rc = fileio_read(dirfd, path, max_file_bytes, &c->file, reason,
                         PROCESS_REASON_MAX);
    const uint64_t t1 = process_now_ns();
    t->ns_read += t1 - t0;
    if (rc < 0)
        goto fail;
    t->bytes_read += c->file.len;

    decode_info info;
    rc = decoder_open(&c->dec, c->file.data, c->file.len, &info, reason);
    t->ns_decode += process_now_ns() - t1;
    if (rc < 0)
        goto fail;
    augment_plan plan;
    augment_plan_make(p, epoch, index, info.width, info.height, &plan);
    rc = plan_filters(c, p, &plan, reason);
    if (rc == 0)
        rc = decode_filtered_rows(c, &plan, t, reason);
    if (rc < 0)
        goto fail;

    const uint64_t t2 = process_now_ns();
    for (int y = 0; y < p->out_h; y++) {
        resample_col_v(&c->v, c->tmp, p->out_w, y, c->row);
        augment_write_row(p, &plan, c->row, y, dst);
    }
    t->ns_augment += process_now_ns() - t2;
    return 0;
fail:
    decoder_close(&c->dec);
    memset(dst, 0, augment_sample_bytes(p));
    return rc;
}

int process_decode_full(process_ctx *c, int dirfd, const char *path,
                        int64_t max_file_bytes, uint8_t **rgb, int *width,
                        int *height, char reason[PROCESS_REASON_MAX])
{
    uint8_t *out = NULL;
    decode_info info;
    int rc = fileio_read(dirfd, path, max_file_bytes, &c->file, reason,
                         PROCESS_REASON_MAX);
    if (rc == 0)
        rc = decoder_open(&c->dec, c->file.data, c->file.len, &info, reason);
    if (rc == 0)
        rc = decoder_start(&c->dec, reason);
    if (rc < 0)
        goto fail;
    const size_t stride = (size_t)info.width * 3;
    out = malloc(stride * (size_t)info.height);
    if (!out) {
        snprintf(reason, PROCESS_REASON_MAX, "out of memory for %dx%d",
                 info.width, info.height);
        rc = PL_ENOMEM;
        goto fail;
    }
    for (int y = 0; y < info.height;) {
        const uint8_t *rows;
        int n;
        rc = decoder_read(&c->dec, &rows, &n, reason);
        if (rc < 0)
            goto fail;
        memcpy(out + (size_t)y * stride, rows, (size_t)n * stride);
        y += n;
    }
    decoder_close(&c->dec);
    *rgb = out;
    *width = info.width;
    *height = info.height;
    return 0;
fail:
    decoder_close(&c->dec);
    free(out);
    return rc;
}
