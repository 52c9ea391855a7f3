/* Separable resampling. The default, and the presets' filter: bilinear
 * with antialiasing, the filter Pillow and torchvision (antialias=True)
 * use: a triangle of radius 1 output pixel, widened to radius `scale`
 * source pixels when shrinking, so every source pixel under an output
 * pixel counts. The others (resample_axis_plan_with; ops/op.h names them):
 * Pillow's bicubic (a = -0.5, radius 2, widened likewise; without
 * antialias PyTorch's a = -0.75, not widened), bilinear not widened,
 * nearest and nearest_exact (PyTorch's source index, in float32 as it
 * computes it) and area (PyTorch's adaptive average pooling).
 *
 * Fixed point: weights are Q14 integers summing to exactly 1 << 14, so a
 * constant image stays constant. The vertical pass runs first, over whole
 * rows (contiguous, vectorised), into Q6 int16 rows; the horizontal pass
 * then makes each output pixel, its three channels at once. Against an
 * exact double-precision filter the result is off by at most 1. */
#ifndef PINLOAD_RESAMPLE_H
#define PINLOAD_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "ops/op.h"

#define RESAMPLE_WBITS 14 /* weight precision */
#define RESAMPLE_QBITS 6  /* fraction bits of the intermediate rows */

/* The filter along one axis. Source coordinates are absolute pixels of the
 * decoded image: the continuous interval [in0, in1) is scaled to rs_n
 * pixels, outputs [off, off + out_n) of those are wanted, and taps are kept
 * inside [bound_lo, bound_hi) (the crop, as torchvision crops before it
 * resizes). */
typedef struct resample_axis {
    int out_n;
    int taps;   /* weights stored per output */
    int *first; /* [out_n] first source pixel */
    int *count; /* [out_n] taps used, <= taps (0: the output is 0) */
    int16_t *w; /* [out_n * taps] Q14 weights, each output's summing to
                   1 << RESAMPLE_WBITS */
    /* The same weights as int16 pairs in int32s, zero-padded to npairs per
     * output, for the horizontal pass's pairwise multiply-add. */
    int32_t *wpair; /* [out_n * npairs] */
    int npairs;
    size_t cap_pair;
    /* The same again for the AVX2 horizontal pass, outputs taken two by
     * two (2q, 2q + 1): for pair q and tap pair j, 8 int32, four copies of
     * output 2q's pair then four of output 2q + 1's (zero past out_n), so
     * that one load gives the multiply-add both outputs' weights. */
    int32_t *wquad; /* [(out_n + 1) / 2 * npairs * 8] */
    size_t cap_quad;
    int lo, hi;      /* source pixels any output reads: [lo, hi) */
    double *scratch; /* [2 * taps] for planning */
    int *order;      /* [taps] for planning wide filters */
    size_t cap_out, cap_w, cap_scratch, cap_order; /* allocation sizes */
} resample_axis;

/* Plan a's weights. Needs in0 < in1, bound_lo < bound_hi, 1 <= rs_n,
 * 0 <= off, off + out_n <= rs_n. Returns 0 or PL_ENOMEM. */
int resample_axis_plan(resample_axis *a, double in0, double in1, int bound_lo,
                       int bound_hi, int rs_n, int off, int out_n);
void resample_axis_free(resample_axis *a);

/* A filter: an op_interp (ops/op.h), and for bilinear and bicubic whether
 * it widens when shrinking (antialias). */
typedef struct resample_filter {
    int interp;
    int antialias;
} resample_filter;

/* resample_axis_plan with filter f, and where the source has pixels:
 * taps outside [data_lo, data_hi) but inside the bounds (a crop reaching
 * past the image, which torchvision pads with zeros) are dropped after the
 * weights are made, so those pixels count as zeros; and outputs outside
 * [0, rs_n) (a window reaching past the resized image) have no taps: 0.
 * Needs bound_lo < bound_hi, out_n >= 1; off may be negative. With the
 * bilinear antialiased filter and the data covering the bounds, the
 * weights are resample_axis_plan's, bit for bit. */
int resample_axis_plan_with(resample_axis *a, const resample_filter *f,
                            double in0, double in1, int bound_lo, int bound_hi,
                            int data_lo, int data_hi, int rs_n, int off,
                            int out_n);

/* Renumber the source pixels: pixel p becomes p - origin (when the rows
 * handed to the passes start at `origin`). */
void resample_axis_shift(resample_axis *a, int origin);

/* Vertical pass for output row oy: rows[r] (r = 0, 1, ...) is source row
 * v->lo + r, `stride` bytes apart; channel values x0 .. x1-1 of the rows
 * (3 per pixel) are filtered into dst[x0 .. x1-1] as Q6 int16. */
void resample_v(const resample_axis *v, const uint8_t *rows, size_t stride,
                int oy, int x0, int x1, int16_t *dst);

/* Horizontal pass: the Q6 RGB row `src` (pixel p at src[3 p]) becomes
 * h->out_n RGB pixels, rounded and clamped, written to out (reversed when
 * flip is set). resample_pad(h) int16 after the last pixel read (h->hi)
 * must be readable; their values do not matter (zero weights). */
static inline int resample_pad(const resample_axis *h)
{
    return h->npairs * 6 + 2;
}
void resample_h(const resample_axis *h, const int16_t *src, int flip,
                uint8_t *out);

/* The versions resample_h chooses from by CPU: the same output bit for bit
 * (tests compare them). The x86 ones need SSSE3 / AVX2 at run time. */
void resample_h_generic(const resample_axis *h, const int16_t *src, int flip,
                        uint8_t *out);
void resample_v_generic(const resample_axis *v, const uint8_t *rows,
                        size_t stride, int oy, int x0, int x1, int16_t *dst);
#if defined(__x86_64__) || defined(__i386__)
void resample_v_avx2(const resample_axis *v, const uint8_t *rows, size_t stride,
                     int oy, int x0, int x1, int16_t *dst);
void resample_h_ssse3(const resample_axis *h, const int16_t *src, int flip,
                      uint8_t *out);
void resample_h_avx2(const resample_axis *h, const int16_t *src, int flip,
                     uint8_t *out);
#endif

#endif
