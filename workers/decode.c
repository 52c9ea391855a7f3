/* The decoder: the table of formats (codecs/codec.h) behind one
 * interface. decoder_open picks the row whose signature the bytes start
 * with; every later call goes to that row, on the state the decoder keeps
 * for it (made at the format's first image). What is the same for every
 * format stays here: the limits, the deadline, the open and started
 * flags, the rows of the started image, and the buffer decoder_read hands
 * them out from. */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>

#include "../common/clock.h"
#include "../common/grow.h"
#include "pinload.h"

struct decoder {
    decode_limits limits;
    const codec *codec;        /* the open (or last) image's row; NULL: none */
    void *state;               /* that row's, in states[] */
    void *states[CODEC_COUNT]; /* each row's, from its first image */
    int open;                  /* a header was read and the image not closed */
    int started;               /* decoding started */
    int width, height;         /* the open image's, at full scale */
    codec_region region;       /* since decoder_start */
    uint8_t *rows; /* DECODE_CHUNK_ROWS rows of region.width * 3 bytes */
    size_t rows_cap;
};

int decoder_create(decoder **out, const decode_limits *lim)
{
    decoder *d = calloc(1, sizeof *d);
    *out = d;
    if (!d)
        return PL_ENOMEM;
    d->limits = *lim;
    return 0;
}

void decoder_destroy(decoder *d)
{
    if (!d)
        return;
    decoder_close(d);
    for (int i = 0; i < CODEC_COUNT; i++)
        codecs[i]->destroy(d->states[i]);
    free(d->rows);
    free(d);
}

int decoder_xoff(const decoder *d)
{
    return d->region.xoff;
}

int decoder_width(const decoder *d)
{
    return d->region.width;
}

int decoder_height(const decoder *d)
{
    return d->region.height;
}

int decoder_can_scale(const decoder *d)
{
    return d->codec && d->codec->scaled_size;
}

const decode_limits *decoder_limits(const decoder *d)
{
    return &d->limits;
}

void decoder_set_limits(decoder *d, const decode_limits *lim)
{
    d->limits = *lim;
}

int decoder_warnings(const decoder *d, const char **first)
{
    if (d->codec && d->codec->warnings)
        return d->codec->warnings(d->state, first);
    if (first)
        *first = "";
    return 0;
}

int decoder_is_open(const decoder *d)
{
    return d->open;
}

int decoder_is_started(const decoder *d)
{
    return d->started;
}

int decoder_has_row_buffers(const decoder *d)
{
    return d->rows != NULL;
}

/* A row's failure ends the image; rc, for the caller to return. */
static int failed(decoder *d, int rc)
{
    if (rc < 0)
        decoder_close(d);
    return rc;
}

/* Whether the decoder is where a call needs it: an image open, and
 * started or not as `started` says; else PL_EINVAL, the image left as it
 * is (a caller's mistake, not the file's). */
static int in_state(const decoder *d, int started, char *reason)
{
    if (d->open && d->started == started)
        return 0;
    snprintf(reason, DECODE_REASON_MAX, "%s",
             !d->open  ? "no image open"
             : started ? "the image is not started"
                       : "the image is started already");
    return PL_EINVAL;
}

/* The row's state, made the first time the format is met. */
static int state_of(decoder *d, const codec *c, void **st, char *reason)
{
    int i = 0;
    while (codecs[i] != c)
        i++;
    if (!d->states[i] && c->create(&d->states[i]) < 0) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for a decoder");
        return PL_ENOMEM;
    }
    *st = d->states[i];
    return 0;
}

int decoder_open(decoder *d, const uint8_t *buf, size_t len, decode_info *info,
                 char *reason)
{
    decoder_close(d);
    d->codec = NULL;
    d->state = NULL;
    info->codec = NULL;
    info->memory = 0;
    info->common_jpeg = 0;
    const uint64_t deadline =
        d->limits.max_decode_ms > 0
            ? clock_now_ns() + (uint64_t)d->limits.max_decode_ms * 1000000u
            : 0;
    const codec *c = codec_for_bytes(buf, len);
    if (!c)
        return codec_refuse(buf, len, reason);
    void *st;
    int rc = state_of(d, c, &st, reason);
    if (rc < 0)
        return rc;
    d->codec = c;
    d->state = st;
    rc = c->open(st, buf, len, &d->limits, deadline, info, reason);
    if (rc < 0) {
        c->close(st);
        return rc;
    }
    info->codec = c;
    d->width = info->width;
    d->height = info->height;
    d->open = 1;
    return 0;
}

void decoder_scaled_size(const decoder *d, int denom, int *width, int *height)
{
    if (d->codec && d->codec->scaled_size) {
        d->codec->scaled_size(d->state, denom, width, height);
        return;
    }
    *width = d->width; /* full size only */
    *height = d->height;
}

int decoder_start(decoder *d, int denom, int x0, int w, char *reason)
{
    codec_region r;
    int rc = in_state(d, 0, reason);
    if (rc < 0)
        return rc;
    rc = d->codec->start(d->state, denom, x0, w, &r, reason);
    if (rc < 0)
        return failed(d, rc);
    d->started = 1;
    d->region = r;
    if (grow(&d->rows, &d->rows_cap, (size_t)r.width * 3 * DECODE_CHUNK_ROWS, 1,
             0) < 0) {
        snprintf(reason, DECODE_REASON_MAX, "out of memory for %d-px rows",
                 r.width);
        return failed(d, PL_ENOMEM);
    }
    return 0;
}

int decoder_row(const decoder *d)
{
    return d->codec ? d->codec->row(d->state) : 0;
}

int decoder_skip_to(decoder *d, int y, char *reason)
{
    const int rc = in_state(d, 1, reason);
    return rc < 0 ? rc : failed(d, d->codec->skip_to(d->state, y, reason));
}

int decoder_read(decoder *d, const uint8_t **rows, int *n, char *reason)
{
    if (in_state(d, 1, reason) < 0)
        return PL_EINVAL;
    const int left = d->region.height - decoder_row(d);
    const int want = left < DECODE_CHUNK_ROWS ? left : DECODE_CHUNK_ROWS;
    const int rc =
        d->codec->read_into(d->state, d->rows, (size_t)d->region.width * 3,
                            want, d->region.height, reason);
    *rows = d->rows;
    *n = want;
    return failed(d, rc);
}

int decoder_read_into(decoder *d, uint8_t *dst, size_t stride, int n,
                      char *reason)
{
    if (in_state(d, 1, reason) < 0)
        return PL_EINVAL;
    return failed(d, d->codec->read_into(d->state, dst, stride, n,
                                         decoder_row(d) + n, reason));
}

void decoder_close(decoder *d)
{
    if (d->open)
        d->codec->close(d->state);
    d->open = 0;
    d->started = 0;
}
