/* Decompression bombs made in memory, for the decode budget's tests
 * (test_decode_formats): small files that claim, or inflate to, far more
 * than they hold. Nothing is encoded pixel by pixel, so even the largest
 * takes milliseconds to make:
 *
 * - a zlib stream of n equal bytes is one piece, deflated after a full
 *   flush (which empties deflate's window, so every such piece of the same
 *   input deflates to the same bytes), written n / piece times, then the
 *   rest and the Adler-32 of the whole;
 * - a PNG is its chunks, each with its CRC (zlib's crc32): IHDR, what the
 *   caller adds (zTXt, iCCP), IDAT of zero rows, IEND;
 * - a lossy WebP (VP8) whose two partitions are all zero bytes: a boolean
 *   decoder reading zeros decodes every bit as 0, whatever its
 *   probability, which here spells a valid key frame (no segments, no loop
 *   filter, quantiser 0, default token probabilities) whose macroblocks
 *   are all 4x4-predicted from DC with no coefficients: a grey image of
 *   any size up to 13376 x 13376, about 1.2 bytes a macroblock. */
#ifndef PINLOAD_TESTBOMBS_H
#define PINLOAD_TESTBOMBS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "testutil.h"

/* A growing byte buffer. */
typedef struct tb_buf {
    uint8_t *p;
    size_t len, cap;
} tb_buf;

static inline void tb_put(tb_buf *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static inline void tb_put32be(tb_buf *b, uint32_t v)
{
    const uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16),
                          (uint8_t)(v >> 8), (uint8_t)v};
    tb_put(b, x, 4);
}

static inline void tb_put32le(tb_buf *b, uint32_t v)
{
    const uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                          (uint8_t)(v >> 24)};
    tb_put(b, x, 4);
}

/* Deflates `in` (n bytes) with `flush`, appending what comes out to b. */
static inline void tb_deflate(z_stream *z, const uint8_t *in, size_t n,
                              int flush, tb_buf *b)
{
    uint8_t out[1 << 16];
    z->next_in = (Bytef *)in;
    z->avail_in = (uInt)n;
    do {
        z->next_out = out;
        z->avail_out = sizeof out;
        const int rc = deflate(z, flush);
        cr_assert(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR);
        tb_put(b, out, sizeof out - z->avail_out);
    } while (z->avail_out == 0 || z->avail_in > 0);
}

/* Appends to b a zlib stream (level 9) of n bytes all equal to `byte`. */
static inline void tb_zlib_of(tb_buf *b, uint8_t byte, size_t n)
{
    enum { PIECE = 1 << 20 };
    uint8_t *in = malloc(PIECE);
    cr_assert_not_null(in);
    memset(in, byte, PIECE);
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert_eq(deflateInit(&z, 9), Z_OK);
    tb_buf first = {0}, piece = {0}, again = {0};
    const size_t pieces = n / PIECE;
    /* The first piece carries the zlib header; the second is the piece
     * every later one repeats (checked once on the third). */
    if (pieces >= 1)
        tb_deflate(&z, in, PIECE, Z_FULL_FLUSH, &first);
    if (pieces >= 2)
        tb_deflate(&z, in, PIECE, Z_FULL_FLUSH, &piece);
    if (pieces >= 3) {
        tb_deflate(&z, in, PIECE, Z_FULL_FLUSH, &again);
        cr_assert(again.len == piece.len &&
                  memcmp(again.p, piece.p, piece.len) == 0);
    }
    tb_put(b, first.p, first.len);
    for (size_t i = 1; i < pieces; i++)
        tb_put(b, piece.p, piece.len);
    tb_buf last = {0};
    tb_deflate(&z, in, n % PIECE, Z_FINISH, &last);
    cr_assert_eq(deflateEnd(&z), Z_OK);
    /* deflate's Adler-32 counted only the pieces it saw: the whole
     * stream's, from the piece's, replaces it. */
    const uLong one = adler32(adler32(0, NULL, 0), in, PIECE);
    uLong sum = adler32(0, NULL, 0);
    for (size_t i = 0; i < pieces; i++)
        sum = adler32_combine(sum, one, PIECE);
    sum = adler32_combine(sum, adler32(adler32(0, NULL, 0), in, n % PIECE),
                          (z_off_t)(n % PIECE));
    cr_assert_gt(last.len, 4u);
    last.len -= 4;
    tb_put(b, last.p, last.len);
    tb_put32be(b, (uint32_t)sum);
    free(first.p);
    free(piece.p);
    free(again.p);
    free(last.p);
    free(in);
}

/* Appends a PNG chunk: length, type, data, CRC of type and data. */
static inline void tb_chunk(tb_buf *b, const char type[4], const void *data,
                            size_t n)
{
    tb_put32be(b, (uint32_t)n);
    const size_t at = b->len;
    tb_put(b, type, 4);
    if (n)
        tb_put(b, data, n);
    tb_put32be(b, (uint32_t)crc32(0, b->p + at, (uInt)(n + 4)));
}

/* PNG's signature and IHDR: w x h, `depth` bits a sample, colour type
 * `color` (2: RGB, 6: RGBA), not interlaced. */
static inline void tb_png_begin(tb_buf *b, uint32_t w, uint32_t h, int depth,
                                int color)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    tb_put(b, sig, 8);
    uint8_t ihdr[13] = {0};
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (uint8_t)(w >> (24 - 8 * i));
        ihdr[4 + i] = (uint8_t)(h >> (24 - 8 * i));
    }
    ihdr[8] = (uint8_t)depth;
    ihdr[9] = (uint8_t)color;
    tb_chunk(b, "IHDR", ihdr, sizeof ihdr);
}

/* A compressed ancillary chunk (zTXt or iCCP: both are a keyword, its
 * NUL, compression method 0, then a zlib stream) of n bytes equal to
 * `byte`. */
static inline void tb_png_compressed(tb_buf *b, const char type[4],
                                     const char *keyword, uint8_t byte,
                                     size_t n)
{
    tb_buf d = {0};
    tb_put(&d, keyword, strlen(keyword) + 1);
    tb_put(&d, "", 1); /* method 0: deflate */
    tb_zlib_of(&d, byte, n);
    tb_chunk(b, type, d.p, d.len);
    free(d.p);
}

/* The image data of a w x h PNG of `bpp` bytes a pixel, every row filter
 * 0 and every sample 0 (black), then IEND. */
static inline void tb_png_end_black(tb_buf *b, uint32_t w, uint32_t h, int bpp)
{
    tb_buf z = {0};
    tb_zlib_of(&z, 0, ((size_t)w * (size_t)bpp + 1) * h);
    tb_chunk(b, "IDAT", z.p, z.len);
    tb_chunk(b, "IEND", NULL, 0);
    free(z.p);
}

/* A grey lossy WebP of w x h (up to 13376 x 13376): RIFF, a VP8 chunk, a
 * key frame whose two partitions are zero bytes, enough of them for the
 * bits every macroblock reads (found by bisection at 2000 x 2000: 0.51 and
 * 0.71 bytes a macroblock; about 1.4 times that here). The first
 * partition's size is a 19-bit field: hence the largest size. */
static inline uint8_t *tb_webp_grey(uint32_t w, uint32_t h, size_t *len)
{
    const size_t mbs = (size_t)((w + 15) / 16) * ((h + 15) / 16);
    size_t part0 = mbs * 3 / 4 + 64, tokens = mbs + 64;
    cr_assert_lt(part0, (size_t)1 << 19, "%ux%u: too large", w, h);
    tokens += (10 + part0 + tokens) & 1; /* an even chunk: no padding */
    const size_t vp8 = 10 + part0 + tokens;
    tb_buf b = {0};
    tb_put(&b, "RIFF", 4);
    tb_put32le(&b, (uint32_t)(4 + 8 + vp8));
    tb_put(&b, "WEBPVP8 ", 8);
    tb_put32le(&b, (uint32_t)vp8);
    /* The frame tag: a key frame (bit 0 clear), version 0, shown (bit 4),
     * then the first partition's size. */
    const uint32_t tag = 1u << 4 | (uint32_t)part0 << 5;
    const uint8_t head[10] = {(uint8_t)tag,
                              (uint8_t)(tag >> 8),
                              (uint8_t)(tag >> 16),
                              0x9d,
                              0x01,
                              0x2a,
                              (uint8_t)w,
                              (uint8_t)(w >> 8 & 0x3f),
                              (uint8_t)h,
                              (uint8_t)(h >> 8 & 0x3f)};
    tb_put(&b, head, sizeof head);
    const size_t at = b.len;
    uint8_t *zero = calloc(1, part0 + tokens);
    cr_assert_not_null(zero);
    tb_put(&b, zero, part0 + tokens);
    free(zero);
    cr_assert_eq(b.len, at + part0 + tokens);
    *len = b.len;
    return b.p;
}

#endif
