/* Separable bilinear resampling with antialiasing, the filter Pillow and
 * torchvision (antialias=True) use: a triangle of radius 1 output pixel,
 * widened to radius `scale` source pixels when shrinking, so every source
 * pixel under an output pixel counts. Rows are filtered horizontally as the
 * decoder produces them, then vertically into 8-bit output rows. */
#ifndef PINLOAD_RESAMPLE_H
#define PINLOAD_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* The filter along one axis: a source interval of in_n pixels is scaled to
 * rs_n pixels, and outputs [off, off + out_n) of those are wanted. */
typedef struct resample_axis {
    int out_n;
    int taps;   /* weights stored per output */
    int *first; /* [out_n] first source pixel (from the interval start) */
    int *count; /* [out_n] taps used, <= taps */
    float *w;   /* [out_n * taps] weights, each output's summing to 1 */
    int lo, hi; /* source pixels any output reads: [lo, hi) */
    size_t cap_out, cap_w; /* allocation sizes (grow only) */
} resample_axis;

/* Plan a's weights. Needs 1 <= in_n, 1 <= rs_n, 0 <= off,
 * off + out_n <= rs_n. Returns 0 or PL_ENOMEM. */
int resample_axis_plan(resample_axis *a, int in_n, int rs_n, int off,
                       int out_n);
void resample_axis_free(resample_axis *a);

/* Filter one RGB row horizontally: src points at the interval's first
 * pixel; writes h->out_n * 3 floats to dst. */
void resample_row_h(const resample_axis *h, const uint8_t *src, float *dst);

/* Filter vertically: rows[k] is the horizontally filtered source row
 * v->lo + k (width * 3 floats each, `width` = h->out_n). Writes output row
 * oy (0 <= oy < v->out_n) as width * 3 bytes, rounded and clamped. */
void resample_col_v(const resample_axis *v, const float *rows, int width,
                    int oy, uint8_t *dst);

#endif
