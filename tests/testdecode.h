/* What the decoder's suites share (tests/unit/workers/test_decode*.c and
 * tests/unit/loader/test_image.c): pixels compared with djpeg's bit for
 * bit, a whole decode checking the row protocol, a decoder with the
 * default limits, its first warning, and a generated JPEG written and read
 * back. */
#ifndef PINLOAD_TESTDECODE_H
#define PINLOAD_TESTDECODE_H

#include "../workers/decode.h"
#include "testutil.h"

#define MAX_FILE_BYTES ((int64_t)256 << 20) /* pl_config_default's */

/* The first pixel where a and b differ, for failure messages. */
static inline size_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* Asserts that rgb (w x h) is exactly djpeg's decode of path. */
static inline void assert_matches_djpeg(const char *path, const uint8_t *rgb,
                                        int w, int h)
{
    int rw = 0, rh = 0;
    uint8_t *ref = tu_djpeg(path, &rw, &rh);
    cr_assert_not_null(ref, "%s: djpeg failed on a file we decoded", path);
    cr_assert(rw == w && rh == h, "%s: %dx%d, djpeg %dx%d", path, w, h, rw, rh);
    const size_t n = (size_t)w * h * 3;
    const size_t at = first_diff(rgb, ref, n);
    /* Tolerance 0: same library, same IDCT, same upsampling. */
    cr_assert(at == n,
              "%s: differs from djpeg at pixel (%zu, %zu) channel %zu: "
              "%d vs %d; max diff %d",
              path, at / 3 % (size_t)w, at / 3 / (size_t)w, at % 3,
              at < n ? rgb[at] : 0, at < n ? ref[at] : 0,
              tu_max_diff(rgb, ref, n));
    free(ref);
}

/* Decodes buf whole with d, checking the row protocol on the way (rows come
 * in order, 1..DECODE_CHUNK_ROWS at a time, decoder_row follows). Returns
 * the status; on success *rgb is malloc'd w x h RGB. */
static inline int decode_all(decoder *d, const uint8_t *buf, size_t len,
                             uint8_t **rgb, int *w, int *h, char *reason)
{
    decode_info info;
    *rgb = NULL;
    int rc = decoder_open(d, buf, len, &info, reason);
    if (rc < 0)
        return rc;
    rc = decoder_start(d, 1, 0, info.width, reason);
    if (rc < 0)
        return rc;
    cr_assert_eq(decoder_width(d), info.width);
    const size_t stride = (size_t)info.width * 3;
    uint8_t *out = malloc(stride * (size_t)info.height);
    cr_assert_not_null(out);
    for (int y = 0; y < info.height;) {
        cr_assert_eq(decoder_row(d), y);
        const uint8_t *rows = NULL;
        int n = 0;
        rc = decoder_read(d, &rows, &n, reason);
        if (rc < 0) {
            free(out);
            return rc;
        }
        cr_assert(n >= 1 && n <= DECODE_CHUNK_ROWS && y + n <= info.height,
                  "decoder_read gave %d rows at row %d of %d", n, y,
                  info.height);
        memcpy(out + (size_t)y * stride, rows, (size_t)n * stride);
        y += n;
    }
    decoder_close(d);
    *rgb = out;
    *w = info.width;
    *h = info.height;
    return 0;
}

static inline void default_decoder(decoder **d)
{
    decode_limits lim;
    decode_limits_default(&lim);
    cr_assert_eq(decoder_create(d, &lim), 0);
}

static inline const char *first_warning(const decoder *d)
{
    const char *w;
    decoder_warnings(d, &w);
    return w;
}

/* Writes a pattern JPEG into dir/name and returns its bytes. */
static inline uint8_t *make_jpeg(const char *dir, const char *name, int w,
                                 int h, unsigned seed, const tu_jpeg_opts *o,
                                 size_t *len, char *path, size_t path_cap)
{
    snprintf(path, path_cap, "%s/%s", dir, name);
    tu_write_jpeg(path, w, h, seed, o);
    return tu_read_file(path, len);
}

#endif
