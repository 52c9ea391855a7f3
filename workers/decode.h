/* Image decoding, one decoder per worker, over the table of formats
 * (codecs/codec.h): the format comes from the bytes' signature (not the
 * file's name), and each call goes to that format's row. Rows are pulled
 * in order and always RGB (grayscale replicated, CMYK and YCCK converted,
 * palettes expanded, alpha dropped as Pillow's convert("RGB") drops it),
 * with limits checked from the header before any pixel buffer is
 * allocated. Functions return 0 or a negative PL_E* code and then write a
 * reason ("Corrupt JPEG data: premature end of data segment") to the
 * caller's buffer of DECODE_REASON_MAX bytes. */
#ifndef PINLOAD_DECODE_H
#define PINLOAD_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "../codecs/codec.h"

#define DECODE_CHUNK_ROWS 16 /* rows one decoder_read may return */

/* One decoder per worker: a state per format, made at its first image
 * and kept (libjpeg's decompressor and error manager among them, opaque
 * so that each library's headers stay inside its codecs/ file), and the
 * rows decoder_read hands out. */
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
 * scaling); the other formats are decoded at full size only (denom 1). */
int decoder_can_scale(const decoder *d);

/* The size of the image decoded at 1/denom (1, 2, 4 or 8). */
void decoder_scaled_size(const decoder *d, int denom, int *width, int *height);

/* Start decompressing at 1/denom scale (1, 2, 4 or 8), rows from the top,
 * each holding at least columns [x0, x0 + w) of the scaled image: a format
 * may widen the range (libjpeg to whole iMCUs), and decoder_xoff and
 * decoder_width say what rows hold. Whole rows: x0 = 0, w = the scaled
 * width. */
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

/* The warnings (libjpeg's) in the current (or last) image: how many, and
 * the first one's text in *first (when not NULL; "" when none). */
int decoder_warnings(const decoder *d, const char **first);

/* Whether a header was read and the image not closed, whether it was
 * started, and whether decoder_read's row buffer was ever allocated (at
 * the first start). */
int decoder_is_open(const decoder *d);
int decoder_is_started(const decoder *d);
int decoder_has_row_buffers(const decoder *d);

/* End the current image, finished or not; the decoder is ready for the
 * next one. Safe to call when no image is open. */
void decoder_close(decoder *d);

#endif
