/* JPEG files that lean on what a libjpeg decompressor keeps from one image
 * to the next: a stream without DHT (Motion-JPEG's habit: alone it decodes
 * with the standard tables), without DQT (alone it is corrupt), a
 * tables-only stream, restart intervals, arithmetic conditioning, Adobe and
 * JFIF markers, each next to a file that sets what the other leaves out.
 * The decoder must give every one of them the result it gives the file
 * alone, whatever came before (tests/unit/workers/test_decode_state.c, the
 * loader's bytes suite, the fuzz replay). Plain C, header-only, no test
 * framework. */
#ifndef PINLOAD_JPEGQUIRKS_H
#define PINLOAD_JPEGQUIRKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/jpegenc.h"

#define JQ_DHT 0xC4
#define JQ_DAC 0xCC
#define JQ_DQT 0xDB
#define JQ_SOS 0xDA
#define JQ_APP0 0xE0  /* JFIF */
#define JQ_APP14 0xEE /* Adobe */

/* Where the entropy-coded data that starts at b[i] ends: the first marker
 * that is neither a stuffed 0xFF00 nor a restart marker. */
static inline size_t jq_skip_scan(const uint8_t *b, size_t len, size_t i)
{
    while (i + 1 < len) {
        if (b[i] == 0xFF && b[i + 1] != 0x00 &&
            !(b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7))
            return i;
        i++;
    }
    return len;
}

/* Copies b[0, len) without the segments whose marker is in drop[0, ndrop)
 * (keep == 0), or with only SOI, those segments and EOI (keep == 1: a
 * tables-only stream when drop names DQT and DHT). [out] *out_len; the
 * result is malloc'd. Segments between progressive scans are walked too. */
static inline uint8_t *jq_filter(const uint8_t *b, size_t len, const int *drop,
                                 int ndrop, int keep, size_t *out_len)
{
    uint8_t *o = (uint8_t *)malloc(len + 2);
    size_t n = 0, i = 2;
    o[n++] = 0xFF;
    o[n++] = 0xD8;
    while (i + 4 <= len && b[i] == 0xFF) {
        const int m = b[i + 1];
        if (m == 0xD9)
            break;
        const size_t seg = 2 + ((size_t)b[i + 2] << 8 | b[i + 3]);
        size_t end = i + seg > len ? len : i + seg;
        if (m == JQ_SOS)
            end = jq_skip_scan(b, len, end);
        int listed = 0;
        for (int k = 0; k < ndrop; k++)
            listed |= drop[k] == m;
        if (listed == keep) {
            memcpy(o + n, b + i, end - i);
            n += end - i;
        }
        i = end;
    }
    o[n++] = 0xFF;
    o[n++] = 0xD9;
    *out_len = n;
    return o;
}

/* The kinds of file, each with what it leans on. */
typedef enum jq_kind {
    JQ_OPTIMISED,     /* optimised Huffman tables, quality 95 */
    JQ_NO_DHT,        /* standard tables, DHT removed (Motion-JPEG) */
    JQ_NO_DQT,        /* DQT removed: corrupt alone */
    JQ_ABBREVIATED,   /* DQT and DHT removed: an abbreviated image */
    JQ_TABLES_ONLY,   /* SOI, DQT, DHT, EOI of a quality-20 file */
    JQ_RESTARTS,      /* a restart marker after every MCU */
    JQ_ARITH_K2,      /* arithmetic coding, AC conditioning Kx = 2 */
    JQ_ARITH_NO_DAC,  /* arithmetic coding, DAC removed: defaults */
    JQ_CMYK_ADOBE,    /* inverted CMYK with Adobe's marker */
    JQ_CMYK_NO_ADOBE, /* the same bytes without it: plain CMYK */
    JQ_RGB_ADOBE,     /* RGB components, Adobe transform 0 */
    JQ_YCC_NO_JFIF,   /* YCbCr without a JFIF marker */
    JQ_PROGRESSIVE,   /* progressive 4:2:0 */
    JQ_GRAY,          /* one component */
    JQ_TRUNCATED,     /* the first two thirds of a baseline file */
    JQ_NOT_JPEG,      /* text */
    JQ_KINDS
} jq_kind;

static inline const char *jq_name(jq_kind k)
{
    static const char *const names[JQ_KINDS] = {
        "optimised",   "no-dht",        "no-dqt",    "abbreviated",
        "tables-only", "restarts",      "arith-k2",  "arith-no-dac",
        "cmyk-adobe",  "cmyk-no-adobe", "rgb-adobe", "ycc-no-jfif",
        "progressive", "gray",          "truncated", "not-jpeg",
    };
    return names[k];
}

/* The bytes of kind k for a w x h picture of `rgb`; malloc'd, [out] *len. */
static inline uint8_t *jq_make(jq_kind k, const uint8_t *rgb, int w, int h,
                               size_t *len)
{
    static const char text[] = "plain text, not a JPEG\n";
    jpegenc_opts o;
    memset(&o, 0, sizeof o);
    o.quality = 90;
    int drop[2] = {0, 0}, ndrop = 0, keep = 0;
    switch (k) {
    case JQ_OPTIMISED:
        o.quality = 95;
        o.optimize = 1;
        break;
    case JQ_NO_DHT:
        drop[ndrop++] = JQ_DHT;
        break;
    case JQ_NO_DQT:
        drop[ndrop++] = JQ_DQT;
        break;
    case JQ_ABBREVIATED:
        drop[ndrop++] = JQ_DQT;
        drop[ndrop++] = JQ_DHT;
        break;
    case JQ_TABLES_ONLY:
        o.quality = 20;
        drop[ndrop++] = JQ_DQT;
        drop[ndrop++] = JQ_DHT;
        keep = 1;
        break;
    case JQ_RESTARTS:
        o.restart_mcus = 1;
        break;
    case JQ_ARITH_K2:
        o.arith = 1;
        o.arith_ac_k = 2;
        break;
    case JQ_ARITH_NO_DAC:
        o.arith = 1;
        drop[ndrop++] = JQ_DAC;
        break;
    case JQ_CMYK_ADOBE:
        o.store = JPEGENC_CMYK;
        break;
    case JQ_CMYK_NO_ADOBE:
        o.store = JPEGENC_CMYK;
        drop[ndrop++] = JQ_APP14;
        break;
    case JQ_RGB_ADOBE:
        o.store = JPEGENC_RGB;
        break;
    case JQ_YCC_NO_JFIF:
        drop[ndrop++] = JQ_APP0;
        break;
    case JQ_PROGRESSIVE:
        o.progressive = 1;
        break;
    case JQ_GRAY:
        o.gray = 1;
        break;
    case JQ_TRUNCATED:
    case JQ_KINDS:
        break;
    case JQ_NOT_JPEG: {
        uint8_t *t = (uint8_t *)malloc(sizeof text);
        memcpy(t, text, sizeof text - 1);
        *len = sizeof text - 1;
        return t;
    }
    }
    unsigned char *enc = NULL;
    unsigned long n = 0;
    jpegenc(rgb, w, h, &o, NULL, &enc, &n);
    uint8_t *out;
    if (ndrop) {
        out = jq_filter(enc, n, drop, ndrop, keep, len);
        free(enc);
        return out;
    }
    out = (uint8_t *)malloc(n);
    memcpy(out, enc, n);
    *len = k == JQ_TRUNCATED ? n * 2 / 3 : n;
    free(enc);
    return out;
}

#endif
