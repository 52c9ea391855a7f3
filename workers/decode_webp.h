/* WebP decoding with libwebp, for decode.c: a still image (lossy, lossless,
 * with or without alpha) as RGB rows from the top, alpha dropped as
 * Pillow's convert("RGB") drops it, the limits checked from the header
 * before any pixel is decoded. libwebp decodes only the rectangle asked
 * for (and the rows above it, which prediction needs), so the rows are
 * decoded in one piece when the first of them is read. Functions return 0
 * or a negative PL_E* code and write a reason to the caller's
 * DECODE_REASON_MAX bytes. */
#ifndef PINLOAD_DECODE_WEBP_H
#define PINLOAD_DECODE_WEBP_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"

typedef struct webp_dec webp_dec;

/* [out] *out. PL_ENOMEM. */
int webp_dec_create(webp_dec **out);
/* NULL is a no-op. */
void webp_dec_destroy(webp_dec *w);

/* Whether buf[0, len) starts as a WebP file (RIFF....WEBP). */
int webp_dec_sniff(const uint8_t *buf, size_t len);

/* Read the header of the WebP in buf[0, len) (valid until webp_dec_close)
 * and check it against lim; decoding stops with PL_ELIMIT once the clock
 * passes deadline_ns (0: never). [out] *info. */
int webp_dec_open(webp_dec *w, const uint8_t *buf, size_t len,
                  const decode_limits *lim, uint64_t deadline_ns,
                  decode_info *info, char *reason);

/* Start decoding; the rows handed out hold columns [x0, x0 + width). */
int webp_dec_start(webp_dec *w, int x0, int width, char *reason);

/* Skip to row y (not behind the current one), decoding nothing. */
void webp_dec_skip_to(webp_dec *w, int y);

/* Copy the next n rows (at least n must remain) into dst, RGB, rows
 * `stride` bytes apart. When they are not decoded yet, rows up to `until`
 * (> the last of them) are decoded in the same pass. */
int webp_dec_read(webp_dec *w, uint8_t *dst, size_t stride, int n, int until,
                  char *reason);

/* The next row webp_dec_read returns. */
int webp_dec_row(const webp_dec *w);

/* End the image. */
void webp_dec_close(webp_dec *w);

#endif
