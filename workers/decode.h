/* Image decoding, one decoder per worker: the format comes from the bytes'
 * signature (not the file's name), JPEG through libjpeg-turbo's libjpeg
 * API here, PNG and WebP through decode_png.c and decode_webp.c. Rows are
 * pulled in order and always RGB (grayscale replicated, CMYK and YCCK
 * converted, palettes expanded, alpha dropped as Pillow's convert("RGB")
 * drops it), with limits checked from the header before any pixel buffer
 * is allocated. Functions return 0 or a negative PL_E* code and then write
 * a reason ("Corrupt JPEG data: premature end of data segment") to the
 * caller's buffer of DECODE_REASON_MAX bytes. */
#ifndef PINLOAD_DECODE_H
#define PINLOAD_DECODE_H

#include <stddef.h>
#include <stdint.h>

#define DECODE_REASON_MAX 256
#define DECODE_CHUNK_ROWS 16 /* rows one decoder_read may return */

typedef struct decode_limits {
    int max_width, max_height;
    int64_t max_pixels;
    int max_scans;         /* progressive scans; bounds time on hostile files */
    int64_t max_decode_ms; /* one image's decode, header to last row;
                              0: no limit */
    int64_t max_memory;    /* bytes one image's decode may hold (see
                              decode_info.memory) */
    int strict;            /* 1: a libjpeg warning makes the image bad */
} decode_limits;

/* The limits pl_config_default() implies. */
void decode_limits_default(decode_limits *lim);

typedef enum decode_format {
    DECODE_JPEG,
    DECODE_PNG,
    DECODE_WEBP,
} decode_format;

typedef struct decode_info {
    decode_format format;
    int width, height; /* full scale */
    int components;    /* in the file: 1 to 4 (PNG: grey and alpha is 2) */
    int progressive;   /* JPEG: several scans; PNG: interlaced */
    /* What decoding it may hold at most, whatever the crop, as checked
     * against max_memory: JPEG, libjpeg's whole-image coefficients (a file
     * of several scans; 0 for one scan, which needs a few rows); PNG and
     * WebP, which are decoded at full size, every pixel handed out (width
     * x height x 3) and the decoder's buffers beside them. */
    int64_t memory;
} decode_info;

/* Writes the reason of an image over the decode memory budget, "<what>
 * needs N MiB<detail>, over the decode memory budget of M MiB
 * (config.max_decode_memory)", and returns PL_ELIMIT. */
int decode_over_budget(char *reason, const char *what, int64_t need,
                       const char *detail, int64_t budget);

/* One decoder per worker: libjpeg's decompressor, its error manager and
 * the row buffers, opaque here so that libjpeg's headers stay inside
 * workers/decode.c. Each image is decoded from a new decompressor, so
 * nothing (tables above all) carries over from the image before. */
typedef struct decoder decoder;

/* [out] *out, ready for images. PL_ENOMEM. */
int decoder_create(decoder **out, const decode_limits *lim);
/* NULL is a no-op. */
void decoder_destroy(decoder *d);

/* Read the header of the image in buf[0, len) (which must stay valid until
 * decoder_close) and check it against the limits. [out] *info. */
int decoder_open(decoder *d, const uint8_t *buf, size_t len, decode_info *info,
                 char *reason);

/* Whether the open image can be decoded at 1/2, 1/4 or 1/8 (JPEG's DCT
 * scaling); PNG and WebP are decoded at full size only (denom 1). */
int decoder_can_scale(const decoder *d);

/* The size of the image decoded at 1/denom (1, 2, 4 or 8). */
void decoder_scaled_size(const decoder *d, int denom, int *width, int *height);

/* Start decompressing at 1/denom scale (1, 2, 4 or 8), rows from the top,
 * each holding at least columns [x0, x0 + w) of the scaled image: libjpeg
 * widens the range to whole iMCUs, and decoder_xoff and decoder_width say
 * what rows hold. Whole rows: x0 = 0, w = the scaled width. */
int decoder_start(decoder *d, int denom, int x0, int w, char *reason);

/* Discard output rows until the next one returned is row y (y must not be
 * behind the current row). */
int decoder_skip_to(decoder *d, int y, char *reason);

/* Decode the next rows: [out] *rows points at *n >= 1 consecutive RGB rows
 * of decoder_width(d) * 3 bytes each, valid until the next decoder call. */
int decoder_read(decoder *d, const uint8_t **rows, int *n, char *reason);

/* Decode the next n rows (at least n must remain) into dst, RGB, rows
 * `stride` bytes apart, each decoder_width(d) pixels. */
int decoder_read_into(decoder *d, uint8_t *dst, size_t stride, int n,
                      char *reason);

/* The next row decoder_read would return. */
int decoder_row(const decoder *d);

/* Since decoder_start: the first column of the rows handed out and their
 * width, in pixels of the scaled image, and how many rows it has. */
int decoder_xoff(const decoder *d);
int decoder_width(const decoder *d);
int decoder_height(const decoder *d);

/* The limits the decoder checks; they may be changed between images. */
const decode_limits *decoder_limits(const decoder *d);
void decoder_set_limits(decoder *d, const decode_limits *lim);

/* libjpeg's warnings in the current (or last) image: how many, and the
 * first one's text in *first (when not NULL). */
int decoder_warnings(const decoder *d, const char **first);

/* Whether a header was read and the image not closed, whether it was
 * started, and whether any row buffer was ever allocated. */
int decoder_is_open(const decoder *d);
int decoder_is_started(const decoder *d);
int decoder_has_row_buffers(const decoder *d);

/* End the current image, finished or not; the decoder is ready for the
 * next one. Safe to call when no image is open. */
void decoder_close(decoder *d);

#endif
