/* The batch op's arithmetic (mixup and cutmix, workers/ops/mixup.c), one
 * element at a time, for every place that mixes a batch: the host (the
 * copier, on a batch in host memory), the GPU's kernel (device/gpu_mix.cu)
 * and the simulated runtime's (tests/cudasim/kernels_sim.c), so that each
 * makes the same bytes. A delivered float sample holds float32, or the
 * bit patterns of binary16 or bfloat16; each product and the sum are
 * rounded to the format, as PyTorch computes a half tensor's ops in float
 * and rounds each result (timm's x * lam + x.flip(0) * (1 - lam)). No
 * fused multiply-add: the host files are built with -ffp-contract=off,
 * and the device uses the _rn intrinsics. Pure functions: any thread. */
#ifndef PINLOAD_BLEND_H
#define PINLOAD_BLEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "float16.h" /* the host's rounding (the device has its own) */
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define BLEND_FN static __host__ __device__ __forceinline__
#else
#define BLEND_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What a sample's values are. */
enum { BLEND_F32 = 0, BLEND_F16 = 1, BLEND_BF16 = 2 };

/* A batch to mix: count samples of sample_bytes at data, each 3 x h x w
 * values (NCHW planes, or interleaved [h][w][3] with channels_last);
 * sample i is mixed with sample count - 1 - i. lam != 1: with cutmix the
 * box [yl, yh) x [xl, xh) is swapped between the two; else each value
 * becomes x * lam + x' * rest. */
typedef struct blend_batch {
    void *data;
    size_t sample_bytes;
    int count, w, h, channels_last, format;
    float lam, rest;
    int cutmix, yl, yh, xl, xh;
} blend_batch;

BLEND_FN float blend_load(int format, const void *s, size_t i)
{
    if (format == BLEND_F32)
        return ((const float *)s)[i];
    const uint16_t v = ((const uint16_t *)s)[i];
#ifdef __CUDA_ARCH__
    if (format == BLEND_BF16) {
        __nv_bfloat16_raw r;
        r.x = v;
        return __bfloat162float(__nv_bfloat16(r));
    }
    __half_raw r;
    r.x = v;
    return __half2float(__half(r));
#else
    return format == BLEND_BF16 ? bfloat16_to_float(v) : float16_to_float(v);
#endif
}

/* v as the format holds it, as bits (16-bit formats) */
BLEND_FN uint16_t blend_bits(int format, float v)
{
#ifdef __CUDA_ARCH__
    if (format == BLEND_BF16)
        return __nv_bfloat16_raw(__float2bfloat16_rn(v)).x;
    return __half_raw(__float2half_rn(v)).x;
#else
    return format == BLEND_BF16 ? bfloat16_from_float(v)
                                : float16_from_float(v);
#endif
}

/* v rounded to the format (a float again). */
BLEND_FN float blend_round(int format, float v)
{
    if (format == BLEND_F32)
        return v;
    const uint16_t b = blend_bits(format, v);
    return blend_load(format, &b, 0);
}

BLEND_FN void blend_store(int format, void *s, size_t i, float v)
{
    if (format == BLEND_F32)
        ((float *)s)[i] = v;
    else
        ((uint16_t *)s)[i] = blend_bits(format, v);
}

/* x * lam + y * rest, each product and the sum rounded to the format. */
BLEND_FN float blend_mix(int format, float x, float y, float lam, float rest)
{
#ifdef __CUDA_ARCH__
    const float a = blend_round(format, __fmul_rn(x, lam));
    const float b = blend_round(format, __fmul_rn(y, rest));
    return blend_round(format, __fadd_rn(a, b));
#else
    const float a = blend_round(format, x * lam);
    const float b = blend_round(format, y * rest);
    return blend_round(format, a + b);
#endif
}

/* Values in one sample. */
BLEND_FN size_t blend_values(const blend_batch *b)
{
    return (size_t)b->w * (size_t)b->h * 3;
}

/* Whether value k of a sample lies in the cutmix box. */
BLEND_FN int blend_in_box(const blend_batch *b, size_t k)
{
    const size_t plane = (size_t)b->w * (size_t)b->h;
    const size_t pixel = b->channels_last ? k / 3 : k % plane;
    const int y = (int)(pixel / (size_t)b->w), x = (int)(pixel % (size_t)b->w);
    return y >= b->yl && y < b->yh && x >= b->xl && x < b->xh;
}

/* Value k of the pair (i, count - 1 - i), i <= count - 1 - i: mixed, or
 * swapped where the box is. */
BLEND_FN void blend_pair_value(const blend_batch *b, int i, size_t k)
{
    const int j = b->count - 1 - i;
    uint8_t *si = (uint8_t *)b->data + (size_t)i * b->sample_bytes;
    uint8_t *sj = (uint8_t *)b->data + (size_t)j * b->sample_bytes;
    if (b->cutmix) {
        if (i == j || !blend_in_box(b, k))
            return;
        if (b->format == BLEND_F32) {
            const float t = ((float *)si)[k];
            ((float *)si)[k] = ((float *)sj)[k];
            ((float *)sj)[k] = t;
        } else {
            const uint16_t t = ((uint16_t *)si)[k];
            ((uint16_t *)si)[k] = ((uint16_t *)sj)[k];
            ((uint16_t *)sj)[k] = t;
        }
        return;
    }
    const float x = blend_load(b->format, si, k);
    const float y = blend_load(b->format, sj, k);
    blend_store(b->format, si, k, blend_mix(b->format, x, y, b->lam, b->rest));
    if (j != i)
        blend_store(b->format, sj, k,
                    blend_mix(b->format, y, x, b->lam, b->rest));
}

/* Pairs in a batch of count: (count + 1) / 2, the middle one alone. */
BLEND_FN int blend_pairs(const blend_batch *b)
{
    return (b->count + 1) / 2;
}

#ifdef __cplusplus
}
#endif

#endif
