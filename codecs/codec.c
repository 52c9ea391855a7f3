/* The table of formats and what its rows share: lookups by signature and
 * by extension, the words that name them, the checks every decoder makes
 * the same way. */
#include "codec.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../common/defaults.h"
#include "pinload.h"

#define CODEC_ROW_(name) &codec_##name,
const codec *const codecs[CODEC_COUNT] = {CODEC_LIST(CODEC_ROW_)};
#undef CODEC_ROW_

const char *const codec_unread[CODEC_UNREAD_COUNT] = {"bmp", "pgm", "ppm",
                                                      "tif", "tiff"};

void decode_limits_default(decode_limits *lim)
{
    lim->max_width = DEFAULT_MAX_WIDTH;
    lim->max_height = DEFAULT_MAX_HEIGHT;
    lim->max_pixels = DEFAULT_MAX_PIXELS;
    lim->max_scans = DEFAULT_MAX_SCANS;
    lim->max_decode_ms = DEFAULT_MAX_DECODE_MS;
    lim->max_memory = DEFAULT_MAX_DECODE_MEMORY;
    lim->strict = 0;
}

const codec *codec_for_bytes(const uint8_t *buf, size_t len)
{
    for (int i = 0; i < CODEC_COUNT; i++)
        if (codecs[i]->sniff(buf, len))
            return codecs[i];
    return NULL;
}

/* Names what bytes that no row takes seem to be instead. */
static void describe_other(const uint8_t *b, size_t len, char *reason)
{
    static const struct {
        const char *magic;
        size_t n;
        const char *what;
    } kinds[] = {
        {"GIF8", 4, "GIF"},   {"BM", 2, "BMP"},    {"II*\0", 4, "TIFF"},
        {"MM\0*", 4, "TIFF"}, {"RIFF", 4, "RIFF"}, {"P1", 2, "PBM"},
        {"P4", 2, "PBM"},     {"P2", 2, "PGM"},    {"P5", 2, "PGM"},
        {"P3", 2, "PPM"},     {"P6", 2, "PPM"},
    };
    if (len == 0) {
        snprintf(reason, DECODE_REASON_MAX,
                 "not an image pinload reads (empty)");
        return;
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (len >= kinds[i].n && memcmp(b, kinds[i].magic, kinds[i].n) == 0) {
            snprintf(reason, DECODE_REASON_MAX,
                     "not an image pinload reads (%s data)", kinds[i].what);
            return;
        }
    }
    char hex[16] = "";
    size_t o = 0;
    for (size_t i = 0; i < len && i < 4; i++)
        o += (size_t)snprintf(hex + o, sizeof hex - o, i ? " %02x" : "%02x",
                              b[i]);
    snprintf(reason, DECODE_REASON_MAX,
             "not an image pinload reads (starts with %s)", hex);
}

int codec_refuse(const uint8_t *buf, size_t len, char *reason)
{
    for (int i = 0; i < CODEC_COUNT; i++)
        if (codecs[i]->damaged && codecs[i]->damaged(buf, len, reason))
            return PL_ECORRUPT;
    describe_other(buf, len, reason);
    return PL_ENOTIMAGE;
}

const codec *codec_for_extension(const char *ext)
{
    for (int i = 0; i < CODEC_COUNT; i++)
        for (const char *const *e = codecs[i]->extensions; *e; e++)
            if (strcasecmp(ext, *e) == 0)
                return codecs[i];
    return NULL;
}

int codec_is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && codec_for_extension(dot + 1) != NULL;
}

int codec_unread_index(const char *ext)
{
    for (int k = 0; k < CODEC_UNREAD_COUNT; k++)
        if (strcasecmp(ext, codec_unread[k]) == 0)
            return k;
    return -1;
}

int codec_extension_kind(const char *ext)
{
    if (codec_for_extension(ext))
        return 1;
    return codec_unread_index(ext) >= 0 ? -1 : 0;
}

/* Word k of `what`, or NULL past the last. */
static const char *word(int k, codec_words_of what)
{
    if (what == CODEC_UNREAD)
        return k < CODEC_UNREAD_COUNT ? codec_unread[k] : NULL;
    for (int i = 0; i < CODEC_COUNT; i++) {
        if (what == CODEC_NAMES && k-- == 0)
            return codecs[i]->name;
        for (const char *const *e = codecs[i]->extensions;
             what == CODEC_EXTENSIONS && *e; e++)
            if (k-- == 0)
                return *e;
    }
    return NULL;
}

size_t codec_words(char *buf, size_t cap, codec_words_of what, const char *last)
{
    int n = 0;
    while (word(n, what))
        n++;
    size_t o = 0;
    if (cap)
        buf[0] = '\0';
    for (int k = 0; k < n; k++) {
        const char *sep = k == 0 ? "" : k == n - 1 ? last : ", ";
        o += (size_t)snprintf(o < cap ? buf + o : NULL, o < cap ? cap - o : 0,
                              "%s%s", sep, word(k, what));
    }
    return o;
}

int codec_check_size(int64_t width, int64_t height, const decode_limits *lim,
                     char *reason)
{
    if (width <= lim->max_width && height <= lim->max_height &&
        width * height <= lim->max_pixels)
        return 0;
    snprintf(reason, DECODE_REASON_MAX,
             "%lldx%lld exceeds the limits (max %dx%d, %lld pixels)",
             (long long)width, (long long)height, lim->max_width,
             lim->max_height, (long long)lim->max_pixels);
    return PL_ELIMIT;
}

int decode_over_budget(char *reason, const char *what, int64_t need,
                       const char *detail, int64_t budget)
{
    snprintf(reason, DECODE_REASON_MAX,
             "%s needs %lld MiB%s, over the decode memory budget of %lld MiB "
             "(config.max_decode_memory)",
             what, (long long)((need + (1 << 20) - 1) >> 20), detail,
             (long long)(budget >> 20));
    return PL_ELIMIT;
}

int codec_over_time(char *reason, int64_t max_decode_ms)
{
    snprintf(reason, DECODE_REASON_MAX,
             "decoding took longer than the limit of %lld ms",
             (long long)max_decode_ms);
    return PL_ELIMIT;
}

int codec_check_full_size(int denom, int x0, int w, int width, int height,
                          char *reason)
{
    if (denom == 1 && x0 >= 0 && w >= 1 && x0 + w <= width)
        return 0;
    snprintf(reason, DECODE_REASON_MAX,
             "cannot decode columns %d..%d at 1/%d of a %dx%d image", x0,
             x0 + w, denom, width, height);
    return PL_EINVAL;
}
