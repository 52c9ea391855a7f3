/* The GPU decoder's second half: a decoded image in device memory cropped,
 * resized, flipped and written in the output format, in the same fixed-point
 * arithmetic as the workers' resampler (workers/resample.c, Pillow's
 * antialiased bilinear filter): the same weights, computed on the host by
 * the same code, the vertical pass into Q6 int16 values, then the
 * horizontal one, rounded and clamped, through the same lookup table for
 * float formats. From the same decoded pixels it gives the CPU path's
 * bytes exactly.
 *
 * The launcher is device/gpu_resize.cu's, built by nvcc; on the simulated
 * runtime, tests/cudasim/kernels_sim.c runs the very same per-element
 * functions (below) in stream order instead. Called by nvjpeg.c alone. */
#ifndef PINLOAD_GPU_RESIZE_H
#define PINLOAD_GPU_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

#ifdef __CUDACC__
#define GR_FN static __host__ __device__ __forceinline__
#else
#define GR_FN static inline
#endif

#define GR_WBITS 14 /* weights: Q14, as RESAMPLE_WBITS */
#define GR_QBITS 6  /* the vertical pass's fraction bits, as RESAMPLE_QBITS */

enum { GR_U8 = 0, GR_F32 = 1, GR_F16 = 2 }; /* what the output holds */

/* Everything the kernels read, device pointers all. The filters lie in
 * one block of int32 (coef): the vertical axis's first[out_h],
 * count[out_h], weights[out_h * vtaps], then the horizontal axis's
 * first[out_w], count[out_w], weights[out_w * htaps]; source rows and
 * columns are the image's own. */
typedef struct gpu_resize_args {
    const uint8_t *img; /* RGB, rows `pitch` bytes apart */
    size_t pitch;
    const int32_t *coef;
    int out_w, out_h, vtaps, htaps;
    int x0, span; /* the columns any output reads: [x0, x0 + span) */
    int16_t *tmp; /* the vertical pass: [out_h][span * 3] */
    void *dst;    /* the sample */
    int format;   /* GR_U8, GR_F32 or GR_F16 */
    int channels_last;
    int flip;
    const void *lut; /* float formats: [3][256] floats or 16-bit patterns */
} gpu_resize_args;

/* int32s in the filters' block. */
GR_FN size_t gr_block_ints(int out_w, int out_h, int vtaps, int htaps)
{
    return (size_t)out_h * (size_t)(2 + vtaps) +
           (size_t)out_w * (size_t)(2 + htaps);
}

/* Value x (0 .. span * 3 - 1: column x0 + x / 3, channel x % 3) of the
 * vertical pass's row oy, as resample_v makes it. */
GR_FN int16_t gr_vertical(const gpu_resize_args *a, int oy, int x)
{
    const int32_t *first = a->coef, *count = first + a->out_h;
    const int32_t *w = count + a->out_h + (size_t)oy * (size_t)a->vtaps;
    const uint8_t *src =
        a->img + (size_t)first[oy] * a->pitch + (size_t)a->x0 * 3 + (size_t)x;
    int32_t acc = 1 << (GR_WBITS - GR_QBITS - 1);
    for (int k = 0; k < count[oy]; k++)
        acc += w[k] * (int32_t)src[(size_t)k * a->pitch];
    return (int16_t)(acc >> (GR_WBITS - GR_QBITS));
}

/* Channel c of output pixel p (flipped already) of row oy, as resample_h
 * makes it. */
GR_FN uint8_t gr_horizontal(const gpu_resize_args *a, int oy, int p, int c)
{
    const int32_t *first = a->coef + (size_t)a->out_h * (size_t)(2 + a->vtaps);
    const int32_t *count = first + a->out_w;
    const int i = a->flip ? a->out_w - 1 - p : p;
    const int32_t *w = count + a->out_w + (size_t)i * (size_t)a->htaps;
    const int16_t *row = a->tmp + (size_t)oy * (size_t)a->span * 3 +
                         (size_t)(first[i] - a->x0) * 3 + (size_t)c;
    int32_t acc = 1 << (GR_WBITS + GR_QBITS - 1);
    for (int k = 0; k < count[i]; k++)
        acc += w[k] * (int32_t)row[(size_t)k * 3];
    acc >>= GR_WBITS + GR_QBITS;
    return (uint8_t)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
}

/* Write channel c of output pixel p of row oy, as the workers' writers
 * (augment_store_*) do. */
GR_FN void gr_store(const gpu_resize_args *a, int oy, int p, int c, uint8_t v)
{
    const size_t nhwc = ((size_t)oy * (size_t)a->out_w + (size_t)p) * 3 + c;
    const size_t at = a->format == GR_U8 || a->channels_last
                          ? nhwc
                          : (size_t)c * (size_t)a->out_w * (size_t)a->out_h +
                                (size_t)oy * (size_t)a->out_w + (size_t)p;
    if (a->format == GR_F32)
        ((float *)a->dst)[at] = ((const float *)a->lut)[c * 256 + v];
    else if (a->format == GR_F16)
        ((uint16_t *)a->dst)[at] = ((const uint16_t *)a->lut)[c * 256 + v];
    else
        ((uint8_t *)a->dst)[at] = v;
}

/* Queue both passes on stream. 0 (cudaSuccess), or the cudaError_t of the
 * failed launch. */
int gpu_resize(struct CUstream_st *stream, const gpu_resize_args *a);

/* Load the kernels into the current context now rather than at their first
 * launch (as gpu_normalize_load). 0, or the cudaError_t. */
int gpu_resize_load(void);

#ifdef __cplusplus
}
#endif

#endif
