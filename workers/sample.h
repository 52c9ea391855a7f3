/* One sample, start to finish: read the file, decode the rows the plan
 * needs, resize them and write the output sample where it belongs (a ring
 * slot). Each worker owns one sample_ctx; nothing in it is shared, and
 * after the first few samples nothing is allocated. */
#ifndef PINLOAD_SAMPLE_H
#define PINLOAD_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "decode.h"
#include "fileio.h"
#include "resample.h"

#define SAMPLE_REASON_MAX 256

typedef struct sample_ctx {
    decoder *dec;
    fileio_buf file;
    resample_axis h, v;
    uint8_t *src; /* the decoded rows the vertical filter reads */
    size_t src_cap;
    int16_t *vrow; /* one vertically filtered row, Q6 */
    size_t vrow_cap;
    uint8_t *row; /* one resized output row (float output) */
    size_t row_cap;
    uint8_t *img; /* the resized image, for pixel ops (float output) */
    size_t img_cap;
    op_scratch scratch; /* the ops' */
    uint8_t *full; /* the image decoded whole (config.views) */
    size_t full_cap;
    /* libjpeg's warnings (corrupt data accepted) in the last sample. */
    int warnings;
    char first_warning[SAMPLE_REASON_MAX];
} sample_ctx;

/* Time and bytes spent on one sample, added to by sample_produce. */
typedef struct sample_times {
    uint64_t ns_read, ns_decode, ns_augment;
    uint64_t bytes_read;
} sample_times;

int sample_init(sample_ctx *c, const decode_limits *lim);
void sample_fini(sample_ctx *c);

/* Produce dataset sample `index` of `epoch` from the bytes at *loc (a file,
 * or a tar member's range of its shard) into dst (augment_sample_bytes(p)
 * bytes). On failure dst is all zeros, the code is returned and reason
 * says why (without the path). */
int sample_produce(sample_ctx *c, const augment_params *p, const location *loc,
                   int64_t max_file_bytes, int64_t epoch, int64_t index,
                   void *dst, sample_times *t, char reason[SAMPLE_REASON_MAX]);

/* The same, from the JPEG already in buf[0, len). */
int sample_produce_buffer(sample_ctx *c, const augment_params *p,
                          const uint8_t *buf, size_t len, int64_t epoch,
                          int64_t index, void *dst, sample_times *t,
                          char reason[SAMPLE_REASON_MAX]);

/* config.views: the image in buf[0, len) decoded once, whole, and each of
 * the nviews views made from it into dst[v] (as sample_transform_pixels
 * makes it with views[v]). On failure every view is zeros. */
int sample_produce_views(sample_ctx *c, const augment_params *views,
                         int nviews, const uint8_t *buf, size_t len,
                         int64_t epoch, int64_t index, void *const *dst,
                         sample_times *t, char reason[SAMPLE_REASON_MAX]);

/* The sample from an RGB image already decoded (rgb: height rows of
 * width pixels), as sample_produce_buffer makes it from a file decoded at
 * full size: pl_transform_image's. */
int sample_transform_pixels(sample_ctx *c, const augment_params *p,
                            const uint8_t *rgb, int width, int height,
                            int64_t epoch, int64_t index, void *dst,
                            char reason[SAMPLE_REASON_MAX]);

/* Decode the file at `path` whole, at its own size: [out] *rgb (malloc'd,
 * width * height * 3), *width, *height. */
int sample_decode_full(sample_ctx *c, int dirfd, const char *path,
                       int64_t max_file_bytes, uint8_t **rgb, int *width,
                       int *height, char reason[SAMPLE_REASON_MAX]);

/* The same for the JPEG in buf[0, len). */
int sample_decode_buffer(sample_ctx *c, const uint8_t *buf, size_t len,
                         uint8_t **rgb, int *width, int *height,
                         char reason[SAMPLE_REASON_MAX]);

#endif
