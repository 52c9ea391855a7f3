/* PNG decoding with libspng, for decode.c: rows pulled in order from the
 * top, each the RGB of Pillow's convert("RGB") (alpha and tRNS dropped,
 * palette and grey expanded, 16-bit samples reduced as Pillow reduces
 * them), the limits checked from the IHDR chunk before any pixel is
 * decoded. Rows below the last one asked for are never inflated. Functions
 * return 0 or a negative PL_E* code and write a reason to the caller's
 * DECODE_REASON_MAX bytes. */
#ifndef PINLOAD_DECODE_PNG_H
#define PINLOAD_DECODE_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"

typedef struct png_dec png_dec;

/* [out] *out. PL_ENOMEM. */
int png_dec_create(png_dec **out);
/* NULL is a no-op. */
void png_dec_destroy(png_dec *p);

/* Whether buf[0, len) starts with PNG's signature. */
int png_dec_sniff(const uint8_t *buf, size_t len);

/* Read the header of the PNG in buf[0, len) (valid until png_dec_close)
 * and check it against lim; decoding stops with PL_ELIMIT once the clock
 * passes deadline_ns (0: never). [out] *info. */
int png_dec_open(png_dec *p, const uint8_t *buf, size_t len,
                 const decode_limits *lim, uint64_t deadline_ns,
                 decode_info *info, char *reason);

/* Start decoding; the rows handed out hold columns [x0, x0 + w). */
int png_dec_start(png_dec *p, int x0, int w, char *reason);

/* Decode the next n rows (at least n must remain) into dst, RGB, rows
 * `stride` bytes apart; dst NULL: decode and discard them. */
int png_dec_read(png_dec *p, uint8_t *dst, size_t stride, int n, char *reason);

/* The next row png_dec_read returns. */
int png_dec_row(const png_dec *p);

/* End the image, finished or not. */
void png_dec_close(png_dec *p);

#endif
