#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"

/* The hot loops get an AVX2 copy chosen at load time where the compiler
 * and the loader support it (GNU ifunc); elsewhere the portable one. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&         \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static int reserve(resample_axis *a, int out_n, int taps)
{
    const size_t need_w = (size_t)out_n * (size_t)taps;
    if ((size_t)out_n > a->cap_out) {
        int *f = realloc(a->first, (size_t)out_n * sizeof *f);
        if (!f)
            return PL_ENOMEM;
        a->first = f;
        int *c = realloc(a->count, (size_t)out_n * sizeof *c);
        if (!c)
            return PL_ENOMEM;
        a->count = c;
        a->cap_out = (size_t)out_n;
    }
    if (need_w > a->cap_w) {
        int16_t *w = realloc(a->w, need_w * sizeof *w);
        if (!w)
            return PL_ENOMEM;
        a->w = w;
        a->cap_w = need_w;
    }
    return 0;
}

/* Quantise n weights (summing to `sum` > 0) to Q14 integers summing to
 * exactly 1 << 14, each within one unit of its exact value: every weight is
 * rounded down, and the units left over go to the weights that lost the
 * most (largest remainders). */
static void quantise(const double *ws, double *frac, int n, double sum,
                     int16_t *w)
{
    const int one = 1 << RESAMPLE_WBITS;
    int total = 0;
    for (int k = 0; k < n; k++) {
        const double exact = ws[k] / sum * one;
        w[k] = (int16_t)floor(exact);
        frac[k] = exact - w[k];
        total += w[k];
    }
    for (int left = one - total; left > 0; left--) {
        int best = 0;
        for (int k = 1; k < n; k++)
            if (frac[k] > frac[best])
                best = k;
        w[best]++;
        frac[best] = -1.0;
    }
}

/* Pillow's coefficients: output pixel x of the scaled interval is centred
 * on source coordinate in0 + (x + 0.5) * scale and reads the source pixels
 * whose centres lie within `support` of it. */
int resample_axis_plan(resample_axis *a, double in0, double in1, int bound_lo,
                       int bound_hi, int rs_n, int off, int out_n)
{
    const double scale = (in1 - in0) / rs_n;
    const double filterscale = scale > 1.0 ? scale : 1.0;
    const double support = filterscale; /* triangle radius 1, widened */
    const int taps = (int)ceil(support) * 2 + 1;
    double *ws = malloc((size_t)taps * 2 * sizeof *ws); /* weights, frac */
    if (!ws || reserve(a, out_n, taps) < 0) {
        free(ws);
        return PL_ENOMEM;
    }
    a->out_n = out_n;
    a->taps = taps;
    a->lo = bound_hi;
    a->hi = bound_lo;
    for (int i = 0; i < out_n; i++) {
        const double center = in0 + (off + i + 0.5) * scale;
        int xmin = (int)floor(center - support + 0.5);
        int xmax = (int)floor(center + support + 0.5);
        xmin = xmin < bound_lo ? bound_lo : xmin;
        xmax = xmax > bound_hi ? bound_hi : xmax;
        int n = xmax - xmin;
        n = n > taps ? taps : n;
        double sum = 0.0;
        for (int k = 0; k < n; k++)
            sum += ws[k] = triangle((k + xmin - center + 0.5) / filterscale);
        if (sum <= 0.0) { /* a sliver beyond the bounds: nearest pixel */
            xmin = (int)floor(center);
            xmin = xmin < bound_lo ? bound_lo : xmin >= bound_hi ? bound_hi - 1
                                                                  : xmin;
            n = 1;
            ws[0] = sum = 1.0;
        }
        quantise(ws, ws + taps, n, sum, a->w + (size_t)i * taps);
        a->first[i] = xmin;
        a->count[i] = n;
        a->lo = xmin < a->lo ? xmin : a->lo;
        a->hi = xmin + n > a->hi ? xmin + n : a->hi;
    }
    free(ws);
    return 0;
}

void resample_axis_free(resample_axis *a)
{
    free(a->first);
    free(a->count);
    free(a->w);
    memset(a, 0, sizeof *a);
}

void resample_axis_shift(resample_axis *a, int origin)
{
    for (int i = 0; i < a->out_n; i++)
        a->first[i] -= origin;
    a->lo -= origin;
    a->hi -= origin;
}

HOT void resample_v(const resample_axis *v, const uint8_t *rows,
                    size_t stride, int oy, int x0, int x1, int16_t *dst)
{
    const int16_t *w = v->w + (size_t)oy * v->taps;
    const uint8_t *src = rows + (size_t)(v->first[oy] - v->lo) * stride;
    const int n = v->count[oy];
    enum { ROUND = 1 << (RESAMPLE_WBITS - RESAMPLE_QBITS - 1) };
    /* Blocks of 64 values keep the accumulators in registers or L1. */
    for (int b = x0; b < x1; b += 64) {
        const int e = b + 64 < x1 ? b + 64 : x1;
        int32_t acc[64];
        for (int x = b; x < e; x++)
            acc[x - b] = ROUND;
        for (int k = 0; k < n; k++) {
            const uint8_t *restrict s = src + (size_t)k * stride;
            const int32_t wk = w[k];
            for (int x = b; x < e; x++)
                acc[x - b] += wk * s[x];
        }
        for (int x = b; x < e; x++)
            dst[x] = (int16_t)(acc[x - b] >> (RESAMPLE_WBITS - RESAMPLE_QBITS));
    }
}

typedef int32_t v4i __attribute__((vector_size(16)));
typedef int16_t v4s __attribute__((vector_size(8)));

/* One output pixel: its three channels (and a fourth, ignored) filtered
 * together in one 4-lane vector per tap. */
static inline v4i pixel_h(const int16_t *s, const int16_t *w, int n)
{
    v4i acc = {0, 0, 0, 0};
    for (int k = 0; k < n; k++, s += 3) {
        v4s px;
        memcpy(&px, s, sizeof px);
        acc += __builtin_convertvector(px, v4i) * w[k];
    }
    return acc;
}

static inline uint8_t clamp_u8(int32_t v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

HOT void resample_h(const resample_axis *h, const int16_t *src, int flip,
                    uint8_t *out)
{
    enum {
        SHIFT = RESAMPLE_WBITS + RESAMPLE_QBITS,
        ROUND = 1 << (RESAMPLE_WBITS + RESAMPLE_QBITS - 1),
    };
    const int n = h->out_n;
    for (int i = 0; i < n; i++) {
        const v4i acc = pixel_h(src + (size_t)h->first[i] * 3,
                                h->w + (size_t)i * h->taps, h->count[i]);
        uint8_t *o = out + (size_t)(flip ? n - 1 - i : i) * 3;
        o[0] = clamp_u8((acc[0] + ROUND) >> SHIFT);
        o[1] = clamp_u8((acc[1] + ROUND) >> SHIFT);
        o[2] = clamp_u8((acc[2] + ROUND) >> SHIFT);
    }
}
