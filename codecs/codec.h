/* The image formats pinload reads, one row each of one table: how a file
 * of the format is recognised (its signature, its extensions) and decoded
 * (its header checked against the limits, then the rows and columns of a
 * region at a scale, always RGB: grayscale replicated, CMYK converted,
 * palettes expanded, alpha dropped as Pillow's convert("RGB") drops it).
 * A format is one file here (jpeg.c, png.c, webp.c), the only one to
 * include its library, and one line of CODEC_LIST; workers/decode.c
 * dispatches over the table, and the readers ask it which names are
 * images. Functions return 0 or a negative PL_E* code and then write a
 * reason ("Corrupt JPEG data: premature end of data segment") to the
 * caller's buffer of DECODE_REASON_MAX bytes. */
#ifndef PINLOAD_CODEC_H
#define PINLOAD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define DECODE_REASON_MAX 256

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

struct codec;

typedef struct decode_info {
    const struct codec *codec; /* the image's format */
    int width, height;         /* full scale */
    int components;  /* in the file: 1 to 4 (PNG: grey and alpha is 2) */
    int progressive; /* JPEG: several scans; PNG: interlaced */
    /* JPEG: of the kind every JPEG decoder reads, GPU ones included: 8-bit
     * Huffman-coded DCT (baseline, extended or progressive), grey or
     * YCbCr; not arithmetic-coded, CMYK/YCCK, RGB-coded or 12-bit. 0 for
     * the other formats. */
    int common_jpeg;
    /* What decoding it may hold at most, whatever the crop, as checked
     * against max_memory: JPEG, libjpeg's whole-image coefficients (a file
     * of several scans; 0 for one scan, which needs a few rows); PNG and
     * WebP, which are decoded at full size, every pixel handed out (width
     * x height x 3) and the decoder's buffers beside them. */
    int64_t memory;
} decode_info;

/* What the rows of a started image hold: their first column and width,
 * in pixels of the image at the scale asked for, and that image's
 * height. */
typedef struct codec_region {
    int xoff, width, height;
} codec_region;

/* One format. `st` is the row's per-worker state (create); one image is
 * open in it at a time, from open to close, its bytes valid until close.
 * An operation that fails may leave the image half done: the caller then
 * calls close, which every row makes safe at any point. */
typedef struct codec {
    const char *name; /* "JPEG", as reasons and messages name it */
    /* Lower case, without the dot, NULL-terminated; the first is the one
     * pinload-pack names a member of this format by. */
    const char *const *extensions;
    /* Whether buf[0, len) starts with the format's signature. */
    int (*sniff)(const uint8_t *buf, size_t len);
    /* Whether buf[0, len) starts as this format's signature cut short or
     * damaged (no row's sniff took it): 1 with the reason written, and the
     * file is this format's bad file (PL_ECORRUPT), not another format's.
     * NULL: the format has no such case. */
    int (*damaged)(const uint8_t *buf, size_t len, char *reason);
    /* [out] *st, ready for images. PL_ENOMEM. */
    int (*create)(void **st);
    /* NULL is a no-op. */
    void (*destroy)(void *st);
    /* Read the header of the image in buf[0, len) and check it against
     * lim; decoding stops with PL_ELIMIT once the clock passes deadline_ns
     * (0: never). [out] *info (all but info->codec). */
    int (*open)(void *st, const uint8_t *buf, size_t len,
                const decode_limits *lim, uint64_t deadline_ns,
                decode_info *info, char *reason);
    /* The size of the open image decoded at 1/denom (1, 2, 4 or 8). NULL:
     * the format is decoded at full size only (denom 1). */
    void (*scaled_size)(const void *st, int denom, int *width, int *height);
    /* Start decoding at 1/denom, rows from the top, each holding at least
     * columns [x0, x0 + w) of the scaled image (a format may widen the
     * range: JPEG to whole iMCUs). [out] *r. */
    int (*start)(void *st, int denom, int x0, int w, codec_region *r,
                 char *reason);
    /* Go on to row y (not behind the current row), handing out nothing
     * above it. */
    int (*skip_to)(void *st, int y, char *reason);
    /* Decode the next n rows (at least n must remain) into dst, RGB, rows
     * `stride` bytes apart, each r.width pixels. Rows below them, up to
     * `until`, are the ones to be read next: a format that decodes a
     * rectangle in one pass (WebP) decodes them in the same pass. */
    int (*read_into)(void *st, uint8_t *dst, size_t stride, int n, int until,
                     char *reason);
    /* The next row read_into decodes. */
    int (*row)(const void *st);
    /* The warnings of the current (or last) image: how many, and the first
     * one's text in *first (when not NULL). NULL: the format warns of
     * nothing. */
    int (*warnings)(const void *st, const char **first);
    /* End the image, finished or not; safe when none is open. */
    void (*close)(void *st);
} codec;

/* The formats, in the order their signatures are tried: one line each,
 * its row defined as codec_<name> in codecs/<name>.c. */
#define CODEC_LIST(X) X(jpeg) X(png) X(webp)

#define CODEC_DECLARE_(name) extern const codec codec_##name;
CODEC_LIST(CODEC_DECLARE_)
#undef CODEC_DECLARE_

#define CODEC_ONE_(name) +1
enum { CODEC_COUNT = 0 CODEC_LIST(CODEC_ONE_) };
#undef CODEC_ONE_

/* The table: CODEC_LIST's rows in its order. */
extern const codec *const codecs[CODEC_COUNT];

/* The row whose signature buf[0, len) starts with, or NULL. */
const codec *codec_for_bytes(const uint8_t *buf, size_t len);

/* Why no row takes buf[0, len): PL_ECORRUPT when it starts as a format's
 * damaged signature ("PNG: damaged signature (...)"), else PL_ENOTIMAGE
 * with what it seems to be ("not an image pinload reads (GIF data)"). */
int codec_refuse(const uint8_t *buf, size_t len, char *reason);

/* The row that has `ext` (no dot, any case) among its extensions, or
 * NULL. */
const codec *codec_for_extension(const char *ext);

/* Whether a file named `name` is one the readers take as an image: its
 * extension (after the last dot) is a row's. */
int codec_is_image_name(const char *name);

/* The image extensions torchvision's ImageFolder reads that no row does,
 * without the dot ("bmp", "pgm", "ppm", "tif", "tiff"): what the readers
 * count and name when they leave such files out. */
#define CODEC_UNREAD_COUNT 5
extern const char *const codec_unread[CODEC_UNREAD_COUNT];

/* The place of `ext` (no dot, any case) in codec_unread, or -1. */
int codec_unread_index(const char *ext);

/* An extension's kind: a row's (1), one in codec_unread (-1), or any
 * other (0). */
int codec_extension_kind(const char *ext);

/* What codec_words lists: the rows' names ("JPEG", "PNG", "WebP"), their
 * extensions ("jpg", "jpeg", "png", "webp"), or codec_unread. */
typedef enum codec_words_of {
    CODEC_NAMES,
    CODEC_EXTENSIONS,
    CODEC_UNREAD,
} codec_words_of;

/* The words of `what` into buf[0, cap), joined by ", " but the last two,
 * by `last` (" and ", " or "): "JPEG, PNG and WebP". The length it would
 * have, as snprintf says. */
size_t codec_words(char *buf, size_t cap, codec_words_of what,
                   const char *last);

/* What the rows share. */

/* Whether width x height is within lim's size limits; else PL_ELIMIT
 * with "WxH exceeds the limits (max MWxMH, P pixels)". */
int codec_check_size(int64_t width, int64_t height, const decode_limits *lim,
                     char *reason);

/* Writes the reason of an image over the decode memory budget, "<what>
 * needs N MiB<detail>, over the decode memory budget of M MiB
 * (config.max_decode_memory)", and returns PL_ELIMIT. */
int decode_over_budget(char *reason, const char *what, int64_t need,
                       const char *detail, int64_t budget);

/* Writes "decoding took longer than the limit of N ms" and returns
 * PL_ELIMIT. */
int codec_over_time(char *reason, int64_t max_decode_ms);

/* For a row that decodes at full size only: whether columns [x0, x0 + w)
 * at 1/denom can be had from a width x height image; else PL_EINVAL with
 * the reason. */
int codec_check_full_size(int denom, int x0, int w, int width, int height,
                          char *reason);

#endif
