#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "pinload.h"

/* The hot loops have SSSE3/AVX2 versions chosen at run time with
 * __builtin_cpu_supports (x86), beside portable ones the compiler
 * vectorises as it can; all give the same bits. */

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static int reserve(resample_axis *a, int out_n, int taps)
{
    const size_t need_w = (size_t)out_n * (size_t)taps;
    const size_t need_pair = (size_t)out_n * (size_t)((taps + 1) / 2);
    /* first and count share cap_out: each grows from it, then it moves. */
    size_t cap_first = a->cap_out, cap_count = a->cap_out;
    const size_t need_quad =
        (size_t)(out_n + 1) / 2 * (size_t)((taps + 1) / 2) * 8;
    if (grow(&a->wpair, &a->cap_pair, need_pair, sizeof *a->wpair, 0) < 0 ||
        grow(&a->wquad, &a->cap_quad, need_quad, sizeof *a->wquad, 0) < 0 ||
        grow(&a->first, &cap_first, (size_t)out_n, sizeof *a->first, 0) < 0 ||
        grow(&a->count, &cap_count, (size_t)out_n, sizeof *a->count, 0) < 0)
        return PL_ENOMEM;
    a->cap_out = cap_count;
    if (grow(&a->w, &a->cap_w, need_w, sizeof *a->w, 0) < 0 ||
        grow(&a->scratch, &a->cap_scratch, (size_t)taps * 2, sizeof *a->scratch,
             0) < 0 ||
        grow(&a->order, &a->cap_order, (size_t)taps, sizeof *a->order, 0) < 0)
        return PL_ENOMEM;
    return 0;
}

/* Larger remainder first; of equal ones, the lower tap. */
static int by_remainder(const void *a, const void *b, void *arg)
{
    const double *frac = arg;
    const int i = *(const int *)a, j = *(const int *)b;
    if (frac[i] != frac[j])
        return frac[i] > frac[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* Quantise n weights (summing to `sum` > 0) to Q14 integers summing to
 * exactly 1 << 14, each within one unit of its exact value: every weight is
 * rounded down, and the units left over go to the weights that lost the
 * most (largest remainders, the lower tap first among equals). Up to n
 * units are left over: a few are found by scanning, more by sorting
 * (order[n] scratch), so a filter thousands of taps wide (a 1 x 32768
 * image to a small output) costs n log n, not n^2. */
static void quantise(const double *ws, double *frac, int *order, int n,
                     double sum, int16_t *w)
{
    const int one = 1 << RESAMPLE_WBITS;
    int total = 0;
    for (int k = 0; k < n; k++) {
        const double exact = ws[k] / sum * one;
        w[k] = (int16_t)floor(exact);
        frac[k] = exact - w[k];
        total += w[k];
    }
    const int left = one - total;
    if (left <= 16) {
        for (int u = 0; u < left; u++) {
            int best = 0;
            for (int k = 1; k < n; k++)
                if (frac[k] > frac[best])
                    best = k;
            w[best]++;
            frac[best] = -1.0;
        }
        return;
    }
    for (int k = 0; k < n; k++)
        order[k] = k;
    qsort_r(order, (size_t)n, sizeof *order, by_remainder, frac);
    for (int u = 0; u < left; u++)
        w[order[u]]++;
}

/* Weights k and k + 1 side by side in one int32 (pmaddwd's operand), the
 * pairs past the n real taps zero. */
static void pair_up(const int16_t *w, int n, int npairs, int32_t *out)
{
    for (int j = 0; j < npairs; j++) {
        const int k = 2 * j;
        const uint16_t a = k < n ? (uint16_t)w[k] : 0;
        const uint16_t b = k + 1 < n ? (uint16_t)w[k + 1] : 0;
        out[j] = (int32_t)((uint32_t)a | (uint32_t)b << 16);
    }
}

/* Pillow's bicubic kernel, a = -0.5 (what torchvision's antialiased
 * bicubic matches), and PyTorch's plain bicubic, a = -0.75. */
static double cubic(double x, double a)
{
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* One output's taps before quantising: the first source pixel and n
 * weights in ws (their sum in *sum). */
typedef struct taps_of {
    int xmin, n;
    double sum;
} taps_of;

/* Pillow's convolution: output pixel `pos` of the scaled interval is
 * centred on source coordinate in0 + (pos + 0.5) * scale and reads the
 * source pixels whose centres lie within `support` of it. */
/* PyTorch's plain bicubic (a = -0.75, not widened) at the edges: the taps
 * past the bounds read the edge pixel (its indices clamped), so their
 * weights go to the edge's tap rather than being dropped and the rest
 * renormalised, as Pillow and the antialiased filters do. */
static void cubic_replicate(double center, int taps, int pos, int bound_lo,
                            int bound_hi, double *ws, taps_of *t)
{
    (void)pos;
    const int x0 = (int)floor(center - 2.0 + 0.5);
    int lo = x0 < bound_lo ? bound_lo : x0;
    int hi = x0 + 4 > bound_hi ? bound_hi : x0 + 4;
    if (lo >= hi) /* all four past one edge: that edge's pixel */
        lo = hi = x0 < bound_lo ? bound_lo : bound_hi - 1, hi++;
    const int n = hi - lo < taps ? hi - lo : taps;
    for (int k = 0; k < n; k++)
        ws[k] = 0.0;
    for (int k = 0; k < 4; k++) {
        int x = x0 + k;
        x = x < lo ? lo : x >= lo + n ? lo + n - 1 : x;
        ws[x - lo] += cubic(x0 + k - center + 0.5, -0.75);
    }
    t->xmin = lo;
    t->n = n;
    t->sum = 0.0;
    for (int k = 0; k < n; k++)
        t->sum += ws[k];
}

static void conv_taps(const resample_filter *f, double in0, double scale,
                      double filterscale, double support, int taps, int pos,
                      int bound_lo, int bound_hi, double *ws, taps_of *t)
{
    const double center = in0 + (pos + 0.5) * scale;
    if (f->interp == OP_INTERP_BICUBIC && !f->antialias) {
        cubic_replicate(center, taps, pos, bound_lo, bound_hi, ws, t);
        return;
    }
    int xmin = (int)floor(center - support + 0.5);
    int xmax = (int)floor(center + support + 0.5);
    xmin = xmin < bound_lo ? bound_lo : xmin;
    xmax = xmax > bound_hi ? bound_hi : xmax;
    int n = xmax - xmin;
    n = n > taps ? taps : n;
    double sum = 0.0;
    if (f->interp == OP_INTERP_BICUBIC)
        for (int k = 0; k < n; k++)
            sum += ws[k] = cubic((k + xmin - center + 0.5) / filterscale, -0.5);
    else
        for (int k = 0; k < n; k++)
            sum += ws[k] = triangle((k + xmin - center + 0.5) / filterscale);
    if (sum <= 0.0) { /* a sliver beyond the bounds: nearest pixel */
        xmin = (int)floor(center);
        xmin = xmin < bound_lo    ? bound_lo
               : xmin >= bound_hi ? bound_hi - 1
                                  : xmin;
        n = 1;
        ws[0] = sum = 1.0;
    }
    t->xmin = xmin;
    t->n = n;
    t->sum = sum;
}

/* PyTorch's nearest and nearest_exact source index, in float32 as
 * UpSample.h computes it, for an interval of whole pixels; a fractional one
 * (a DCT-scaled decode) in double. */
static int nearest_index(int exact, double in0, double in1, int rs_n, int pos)
{
    if (in0 == floor(in0) && in1 == floor(in1)) {
        const int n = (int)(in1 - in0);
        int i;
        const float sc = (float)n / (float)rs_n;
        if (!exact && rs_n == n)
            i = pos;
        else if (!exact && rs_n == 2 * n)
            i = pos >> 1;
        else if (!exact)
            i = (int)floorf((float)pos * sc);
        else
            i = (int)floorf((float)((pos + 0.5) * (double)sc));
        return (int)in0 + (i < n - 1 ? i : n - 1);
    }
    const double scale = (in1 - in0) / rs_n;
    return (int)floor(in0 + (pos + (exact ? 0.5 : 0.0)) * scale);
}

/* PyTorch's area (adaptive average pooling): the pixels from
 * floor(pos * n / rs_n) to ceil((pos + 1) * n / rs_n), equally weighted. */
static void area_taps(double in0, double in1, int rs_n, int pos, double *ws,
                      taps_of *t)
{
    int start, end;
    if (in0 == floor(in0) && in1 == floor(in1)) {
        const int64_t n = (int64_t)(in1 - in0);
        start = (int)in0 + (int)((int64_t)pos * n / rs_n);
        end = (int)in0 + (int)(((int64_t)pos + 1) * n + rs_n - 1) / rs_n;
    } else {
        start = (int)floor(in0 + (double)pos * (in1 - in0) / rs_n);
        end = (int)ceil(in0 + (double)(pos + 1) * (in1 - in0) / rs_n);
    }
    t->xmin = start;
    t->n = end > start ? end - start : 1;
    for (int k = 0; k < t->n; k++)
        ws[k] = 1.0;
    t->sum = t->n;
}

/* Keep taps [xmin, xmin + n) within [lo, hi) (after quantising: the
 * dropped ones read zeros); their weights move down with them. */
static void trim(int16_t *w, taps_of *t, int lo, int hi)
{
    int drop = lo > t->xmin ? lo - t->xmin : 0;
    drop = drop < t->n ? drop : t->n;
    if (drop) {
        memmove(w, w + drop, (size_t)(t->n - drop) * sizeof *w);
        t->xmin += drop;
        t->n -= drop;
    }
    if (t->xmin + t->n > hi)
        t->n = hi > t->xmin ? hi - t->xmin : 0;
}

int resample_axis_plan(resample_axis *a, double in0, double in1, int bound_lo,
                       int bound_hi, int rs_n, int off, int out_n)
{
    const resample_filter bilinear = {OP_INTERP_BILINEAR, 1};
    return resample_axis_plan_with(a, &bilinear, in0, in1, bound_lo, bound_hi,
                                   bound_lo, bound_hi, rs_n, off, out_n);
}

/* The most taps one output of filter f may need. */
static int max_taps(const resample_filter *f, double scale, double *filterscale,
                    double *support)
{
    *filterscale = f->antialias && scale > 1.0 ? scale : 1.0;
    switch (f->interp) {
    case OP_INTERP_NEAREST:
    case OP_INTERP_NEAREST_EXACT:
        return 1;
    case OP_INTERP_AREA:
        return (int)ceil(scale) + 2;
    case OP_INTERP_BICUBIC:
        *support = 2.0 * *filterscale;
        break;
    default: /* bilinear: a triangle of radius 1, widened */
        *support = *filterscale;
        break;
    }
    return (int)ceil(*support) * 2 + 1;
}

/* Output i's taps into a (first, count, weights). */
static void plan_one(resample_axis *a, const resample_filter *f, double in0,
                     double in1, int bound_lo, int bound_hi, int data_lo,
                     int data_hi, int rs_n, int pos, double filterscale,
                     double support, int i)
{
    const int taps = a->taps;
    double *ws = a->scratch; /* [taps] weights, then [taps] remainders */
    int16_t *w = a->w + (size_t)i * taps;
    taps_of t = {0, 0, 0.0};
    if (pos < 0 || pos >= rs_n) { /* past the resized image: zeros */
        a->first[i] = 0;
        a->count[i] = 0;
        return;
    }
    if (f->interp == OP_INTERP_NEAREST ||
        f->interp == OP_INTERP_NEAREST_EXACT) {
        int x = nearest_index(f->interp == OP_INTERP_NEAREST_EXACT, in0, in1,
                              rs_n, pos);
        x = x < bound_lo ? bound_lo : x >= bound_hi ? bound_hi - 1 : x;
        t = (taps_of){x, 1, 1.0};
        ws[0] = 1.0;
    } else if (f->interp == OP_INTERP_AREA) {
        area_taps(in0, in1, rs_n, pos, ws, &t);
        /* Within the bounds (which a fractional interval's rounding may
         * pass) and the taps planned for. */
        int lo = t.xmin > bound_lo ? t.xmin : bound_lo;
        int hi = t.xmin + t.n < bound_hi ? t.xmin + t.n : bound_hi;
        if (hi <= lo) {
            lo = lo < bound_hi ? lo : bound_hi - 1;
            hi = lo + 1;
        }
        t.xmin = lo;
        t.n = hi - lo < taps ? hi - lo : taps;
        t.sum = t.n;
    } else {
        conv_taps(f, in0, (in1 - in0) / rs_n, filterscale, support, taps, pos,
                  bound_lo, bound_hi, ws, &t);
    }
    quantise(ws, ws + taps, a->order, t.n, t.sum, w);
    if (t.xmin < data_lo || t.xmin + t.n > data_hi)
        trim(w, &t, data_lo, data_hi);
    a->first[i] = t.xmin;
    a->count[i] = t.n;
}

/* a->wquad from a->wpair (resample.h). */
static void quad_up(resample_axis *a)
{
    const int np = a->npairs, n = a->out_n;
    for (int q = 0; q < (n + 1) / 2; q++)
        for (int j = 0; j < np; j++) {
            int32_t *d = a->wquad + ((size_t)q * np + j) * 8;
            const int32_t w0 = a->wpair[(size_t)2 * q * np + j];
            const int32_t w1 =
                2 * q + 1 < n ? a->wpair[(size_t)(2 * q + 1) * np + j] : 0;
            for (int k = 0; k < 4; k++) {
                d[k] = w0;
                d[4 + k] = w1;
            }
        }
}

int resample_axis_plan_with(resample_axis *a, const resample_filter *f,
                            double in0, double in1, int bound_lo, int bound_hi,
                            int data_lo, int data_hi, int rs_n, int off,
                            int out_n)
{
    const double scale = (in1 - in0) / rs_n;
    double filterscale = 1.0, support = 1.0;
    const int taps = max_taps(f, scale, &filterscale, &support);
    if (reserve(a, out_n, taps) < 0)
        return PL_ENOMEM;
    a->out_n = out_n;
    a->taps = taps;
    for (int i = 0; i < out_n; i++)
        plan_one(a, f, in0, in1, bound_lo, bound_hi, data_lo, data_hi, rs_n,
                 off + i, filterscale, support, i);
    /* What the outputs read, and as many pairs as the widest needs
     * (usually fewer than the bound `taps` allows). An output without
     * taps points at the first pixel read, reading nothing. */
    int widest = 1;
    a->lo = data_hi > bound_hi ? bound_hi : data_hi;
    a->hi = data_lo < bound_lo ? bound_lo : data_lo;
    for (int i = 0; i < out_n; i++) {
        if (!a->count[i])
            continue;
        a->lo = a->first[i] < a->lo ? a->first[i] : a->lo;
        a->hi = a->first[i] + a->count[i] > a->hi ? a->first[i] + a->count[i]
                                                  : a->hi;
        widest = a->count[i] > widest ? a->count[i] : widest;
    }
    if (a->lo > a->hi) /* nothing read at all */
        a->lo = a->hi;
    for (int i = 0; i < out_n; i++)
        if (!a->count[i])
            a->first[i] = a->lo;
    a->npairs = (widest + 1) / 2;
    for (int i = 0; i < out_n; i++)
        pair_up(a->w + (size_t)i * taps, a->count[i], a->npairs,
                a->wpair + (size_t)i * a->npairs);
    quad_up(a);
    return 0;
}

void resample_axis_free(resample_axis *a)
{
    free(a->first);
    free(a->count);
    free(a->w);
    free(a->wpair);
    free(a->wquad);
    free(a->scratch);
    free(a->order);
    memset(a, 0, sizeof *a);
}

void resample_axis_shift(resample_axis *a, int origin)
{
    for (int i = 0; i < a->out_n; i++)
        a->first[i] -= origin;
    a->lo -= origin;
    a->hi -= origin;
}

void resample_v_generic(const resample_axis *v, const uint8_t *rows,
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

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* Values x, x + 16 of one tap pair: rows a and b interleaved byte by
 * byte, widened, multiply-added with the pair's weights. */
__attribute__((target("avx2"), always_inline)) static inline void
v_step_avx2(const uint8_t *a, const uint8_t *b, __m256i ww, __m256i *lo,
            __m256i *hi)
{
    const __m128i ra = _mm_loadu_si128((const __m128i *)a);
    const __m128i rb = _mm_loadu_si128((const __m128i *)b);
    *lo = _mm256_add_epi32(
        *lo,
        _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(ra, rb)), ww));
    *hi = _mm256_add_epi32(
        *hi,
        _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(ra, rb)), ww));
}

__attribute__((target("avx2"), always_inline)) static inline void
v_store_avx2(__m256i lo, __m256i hi, int16_t *dst)
{
    lo = _mm256_srai_epi32(lo, RESAMPLE_WBITS - RESAMPLE_QBITS);
    hi = _mm256_srai_epi32(hi, RESAMPLE_WBITS - RESAMPLE_QBITS);
    /* packs works within 128-bit lanes; put the quarters back in order. */
    _mm256_storeu_si256((__m256i *)dst, _mm256_permute4x64_epi64(
                                            _mm256_packs_epi32(lo, hi), 0xD8));
}

/* AVX2: two source rows per multiply-add. Their bytes are interleaved
 * (a0 b0 a1 b1 ...), widened to int16 and pmaddwd'ed with the weight pair
 * (wk wk+1, v->wpair's): 16 values of two taps in four instructions, 32
 * values a step. The pairs' weights are broadcast once per row (up to 32
 * taps; wider filters, rare, take the portable pass). An odd last tap
 * pairs with the same row, its pair's second weight being zero. */
__attribute__((target("avx2"))) void
resample_v_avx2(const resample_axis *v, const uint8_t *rows, size_t stride,
                int oy, int x0, int x1, int16_t *dst)
{
    enum { MAX_PAIRS = 16 };
    const int32_t *wp = v->wpair + (size_t)oy * v->npairs;
    const uint8_t *src = rows + (size_t)(v->first[oy] - v->lo) * stride;
    const int n = v->count[oy], np = (n + 1) / 2;
    if (np > MAX_PAIRS) {
        resample_v_generic(v, rows, stride, oy, x0, x1, dst);
        return;
    }
    __m256i ww[MAX_PAIRS];
    const uint8_t *ra[MAX_PAIRS], *rb[MAX_PAIRS];
    for (int j = 0; j < np; j++) {
        ww[j] = _mm256_set1_epi32(wp[j]);
        ra[j] = src + (size_t)2 * j * stride;
        rb[j] = 2 * j + 1 < n ? ra[j] + stride : ra[j];
    }
    const __m256i round =
        _mm256_set1_epi32(1 << (RESAMPLE_WBITS - RESAMPLE_QBITS - 1));
    int x = x0;
    for (; x + 32 <= x1; x += 32) {
        __m256i lo0 = round, hi0 = round, lo1 = round, hi1 = round;
        for (int j = 0; j < np; j++) {
            v_step_avx2(ra[j] + x, rb[j] + x, ww[j], &lo0, &hi0);
            v_step_avx2(ra[j] + x + 16, rb[j] + x + 16, ww[j], &lo1, &hi1);
        }
        v_store_avx2(lo0, hi0, dst + x);
        v_store_avx2(lo1, hi1, dst + x + 16);
    }
    /* Steps of 16 for what is left, the last ending at x1 (remaking some
     * values, the same again) when at least 16 were asked for. */
    while (x < x1 && x1 - x0 >= 16) {
        const int at = x + 16 <= x1 ? x : x1 - 16;
        __m256i lo = round, hi = round;
        for (int j = 0; j < np; j++)
            v_step_avx2(ra[j] + at, rb[j] + at, ww[j], &lo, &hi);
        v_store_avx2(lo, hi, dst + at);
        x = at + 16;
    }
    if (x < x1)
        resample_v_generic(v, rows, stride, oy, x, x1, dst);
}
#endif

void resample_v(const resample_axis *v, const uint8_t *rows, size_t stride,
                int oy, int x0, int x1, int16_t *dst)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx2")) {
        resample_v_avx2(v, rows, stride, oy, x0, x1, dst);
        return;
    }
#endif
    resample_v_generic(v, rows, stride, oy, x0, x1, dst);
}

typedef int32_t v4i __attribute__((vector_size(16)));
typedef int16_t v4s __attribute__((vector_size(8)));

enum {
    H_SHIFT = RESAMPLE_WBITS + RESAMPLE_QBITS,
    H_ROUND = 1 << (RESAMPLE_WBITS + RESAMPLE_QBITS - 1),
};

static inline uint8_t clamp_u8(int32_t v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Portable: one output pixel's three channels (and a fourth, ignored)
 * filtered together in one 4-lane vector per tap. */
void resample_h_generic(const resample_axis *h, const int16_t *src, int flip,
                        uint8_t *out)
{
    const int n = h->out_n;
    for (int i = 0; i < n; i++) {
        const int16_t *s = src + (size_t)h->first[i] * 3;
        const int16_t *w = h->w + (size_t)i * h->taps;
        v4i acc = {H_ROUND, H_ROUND, H_ROUND, H_ROUND};
        for (int k = 0; k < h->count[i]; k++, s += 3) {
            v4s px;
            memcpy(&px, s, sizeof px);
            acc += __builtin_convertvector(px, v4i) * w[k];
        }
        uint8_t *o = out + (size_t)(flip ? n - 1 - i : i) * 3;
        o[0] = clamp_u8(acc[0] >> H_SHIFT);
        o[1] = clamp_u8(acc[1] >> H_SHIFT);
        o[2] = clamp_u8(acc[2] >> H_SHIFT);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* x86: two taps per multiply-add. The 8 int16 from pixel k on, R G B of k
 * and of k + 1 then two spares, are shuffled into channel pairs
 * (Rk Rk+1 Gk Gk+1 Bk Bk+1 . .) so that pmaddwd with the (wk wk+1) pair
 * gives each channel's two products summed in one 32-bit lane. Every output
 * runs the same npairs steps (the padding weights are zero), so the loop
 * has no data-dependent branch. */
__attribute__((target("ssse3"))) static inline uint32_t
pixel_ssse3(const int16_t *s, const int32_t *wp, int npairs)
{
    const __m128i pairs =
        _mm_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15);
    __m128i acc = _mm_set1_epi32(H_ROUND);
    for (int j = 0; j < npairs; j++, s += 6) {
        const __m128i px =
            _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)s), pairs);
        acc = _mm_add_epi32(acc, _mm_madd_epi16(px, _mm_set1_epi32(wp[j])));
    }
    acc = _mm_srai_epi32(acc, H_SHIFT);
    const __m128i p16 = _mm_packs_epi32(acc, acc);
    return (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(p16, p16));
}

/* AVX2: two output pixels at once, one per 128-bit lane, as above. */
__attribute__((target("avx2"))) static inline __m128i
pixels_avx2(const int16_t *s0, const int16_t *s1, const int32_t *w0,
            const int32_t *w1, int npairs)
{
    const __m256i pairs =
        _mm256_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15,
                         0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15);
    __m256i acc = _mm256_set1_epi32(H_ROUND);
    for (int j = 0; j < npairs; j++, s0 += 6, s1 += 6) {
        const __m256i px = _mm256_shuffle_epi8(
            _mm256_loadu2_m128i((const __m128i *)s1, (const __m128i *)s0),
            pairs);
        const __m256i ww = _mm256_set_epi32(w1[j], w1[j], w1[j], w1[j], w0[j],
                                            w0[j], w0[j], w0[j]);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(px, ww));
    }
    acc = _mm256_srai_epi32(acc, H_SHIFT);
    /* Lane 0: pixel 0's R G B x; lane 1: pixel 1's. Pack both to bytes. */
    const __m128i lo = _mm256_castsi256_si128(acc);
    const __m128i hi = _mm256_extracti128_si256(acc, 1);
    const __m128i p16 = _mm_packs_epi32(lo, hi);
    return _mm_packus_epi16(p16, p16); /* bytes 0-3 pixel 0, 4-7 pixel 1 */
}

/* Natural output pair q (outputs 2q and 2q + 1, one per 128-bit lane) as
 * 32-bit R G B x sums, shifted: the weights of both in one load
 * (h->wquad). Output 2q + 1 past the end reads output 2q's pixels with
 * zero weights. */
__attribute__((target("avx2"), always_inline)) static inline __m256i
pair_avx2(const resample_axis *h, const int16_t *src, int q, int np)
{
    const __m256i pairs =
        _mm256_setr_epi8(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15,
                         0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11, 12, 13, 14, 15);
    const int i = 2 * q;
    const int16_t *s0 = src + (size_t)h->first[i] * 3;
    const int16_t *s1 =
        i + 1 < h->out_n ? src + (size_t)h->first[i + 1] * 3 : s0;
    const __m256i *w = (const __m256i *)(h->wquad + (size_t)q * np * 8);
    __m256i acc = _mm256_set1_epi32(H_ROUND);
    for (int j = 0; j < np; j++, s0 += 6, s1 += 6) {
        const __m256i px = _mm256_shuffle_epi8(
            _mm256_loadu2_m128i((const __m128i *)s1, (const __m128i *)s0),
            pairs);
        acc = _mm256_add_epi32(
            acc, _mm256_madd_epi16(px, _mm256_loadu_si256(w + j)));
    }
    return _mm256_srai_epi32(acc, H_SHIFT);
}

/* AVX2: four output pixels a step, from two natural pairs, their 12 bytes
 * stored at once (16 written, the last 4 rewritten by the next step).
 * Flipped, position p + 1 is natural pair output n - 2 - p's partner: with
 * an even out_n the pairs are the same, their lanes swapped; an odd one
 * flipped takes each pixel's weights on its own (pixels_avx2). */
__attribute__((target("avx2"), always_inline)) static inline int
quads_avx2(const resample_axis *h, const int16_t *src, int flip, uint8_t *out,
           int np)
{
    const int n = h->out_n;
    int p = 0;
    const __m128i rgb =
        _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    for (; p + 6 <= n; p += 4) {
        const int qa = flip ? (n - 2 - p) / 2 : p / 2;
        const int qb = flip ? qa - 1 : qa + 1;
        const __m256i a = pair_avx2(h, src, qa, np);
        const __m256i b = pair_avx2(h, src, qb, np);
        /* Lane 0: a's first output then b's; lane 1: their second. */
        const __m256i p16 = _mm256_packs_epi32(a, b);
        const __m256i p8 = _mm256_packus_epi16(p16, p16);
        const __m128i l0 = _mm256_castsi256_si128(p8);
        const __m128i l1 = _mm256_extracti128_si256(p8, 1);
        /* In position order: a0 a1 b0 b1, or flipped a1 a0 b1 b0. */
        const __m128i four =
            flip ? _mm_unpacklo_epi32(l1, l0) : _mm_unpacklo_epi32(l0, l1);
        _mm_storeu_si128((__m128i *)(out + (size_t)p * 3),
                         _mm_shuffle_epi8(four, rgb));
    }
    return p;
}

__attribute__((target("avx2"))) void resample_h_avx2(const resample_axis *h,
                                                     const int16_t *src,
                                                     int flip, uint8_t *out)
{
    const int n = h->out_n, np = h->npairs;
    int p = 0;
    /* The usual tap counts unrolled (1 to 3 pairs: up to 6 taps, shrinking
     * by up to 2.5). */
    if (!flip || n % 2 == 0) {
        switch (np) {
        case 1:
            p = quads_avx2(h, src, flip, out, 1);
            break;
        case 2:
            p = quads_avx2(h, src, flip, out, 2);
            break;
        case 3:
            p = quads_avx2(h, src, flip, out, 3);
            break;
        default:
            p = quads_avx2(h, src, flip, out, np);
        }
    }
    /* Pairs of positions while a third follows (each pixel's fourth byte
     * is overwritten by the next one). */
    for (; p + 2 < n; p += 2) {
        const int i0 = flip ? n - 1 - p : p, i1 = flip ? i0 - 1 : i0 + 1;
        const __m128i px = pixels_avx2(
            src + (size_t)h->first[i0] * 3, src + (size_t)h->first[i1] * 3,
            h->wpair + (size_t)i0 * np, h->wpair + (size_t)i1 * np, np);
        uint8_t *o = out + (size_t)p * 3;
        const uint32_t a = (uint32_t)_mm_cvtsi128_si32(px);
        const uint32_t b = (uint32_t)_mm_extract_epi32(px, 1);
        memcpy(o, &a, 4);
        memcpy(o + 3, &b, 4);
    }
    for (; p < n; p++) {
        const int i = flip ? n - 1 - p : p;
        const uint32_t rgbx = pixel_ssse3(src + (size_t)h->first[i] * 3,
                                          h->wpair + (size_t)i * np, np);
        uint8_t *o = out + (size_t)p * 3;
        o[0] = (uint8_t)rgbx;
        o[1] = (uint8_t)(rgbx >> 8);
        o[2] = (uint8_t)(rgbx >> 16);
    }
}

__attribute__((target("ssse3"))) void resample_h_ssse3(const resample_axis *h,
                                                       const int16_t *src,
                                                       int flip, uint8_t *out)
{
    const int n = h->out_n, np = h->npairs;
    /* Four bytes are stored per pixel, the fourth overwritten by the next
     * pixel's; so pixels go out in increasing position, the last one
     * stored byte by byte. */
    for (int p = 0; p < n; p++) {
        const int i = flip ? n - 1 - p : p;
        const uint32_t rgbx = pixel_ssse3(src + (size_t)h->first[i] * 3,
                                          h->wpair + (size_t)i * np, np);
        uint8_t *o = out + (size_t)p * 3;
        if (p + 1 < n) {
            memcpy(o, &rgbx, 4);
        } else {
            o[0] = (uint8_t)rgbx;
            o[1] = (uint8_t)(rgbx >> 8);
            o[2] = (uint8_t)(rgbx >> 16);
        }
    }
}
#endif

void resample_h(const resample_axis *h, const int16_t *src, int flip,
                uint8_t *out)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx2")) {
        resample_h_avx2(h, src, flip, out);
        return;
    }
    if (__builtin_cpu_supports("ssse3")) {
        resample_h_ssse3(h, src, flip, out);
        return;
    }
#endif
    resample_h_generic(h, src, flip, out);
}
