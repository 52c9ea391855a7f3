/* The GPU half of float output on the CUDA backend: the batch crosses the
 * bus as uint8 NHWC (a quarter of float32's bytes) and this kernel, queued
 * on the copy stream after the copy, turns it into normalised float32 or
 * float16 NCHW in the device buffer. It reads the very lookup table the
 * host path uses (augment_params.lut / lut16), so every output byte equals
 * what the host backend produces. Reached only through backend_cuda.c. */
#include <cuda_runtime_api.h>

#include <stdint.h>

#include "normalize.h"

/* One thread per pixel: three bytes in, one value into each plane.
 * Consecutive threads write consecutive values of a plane. */
template <typename T>
__global__ void
normalize_kernel(T *__restrict__ dst, const uint8_t *__restrict__ src,
                 const T *__restrict__ lut, size_t plane, size_t pixels,
                 int channels_last)
{
    __shared__ T table[3 * 256];
    for (int i = threadIdx.x; i < 3 * 256; i += blockDim.x)
        table[i] = lut[i];
    __syncthreads();
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < pixels;
         p += (size_t)gridDim.x * blockDim.x) {
        const uint8_t *px = src + p * 3;
        if (channels_last) { /* interleaved, as the uint8 input */
            T *out = dst + p * 3;
            out[0] = table[px[0]];
            out[1] = table[256 + px[1]];
            out[2] = table[512 + px[2]];
            continue;
        }
        const size_t sample = p / plane, at = p % plane;
        T *out = dst + sample * 3 * plane + at;
        out[0] = table[px[0]];
        out[plane] = table[256 + px[1]];
        out[2 * plane] = table[512 + px[2]];
    }
}

/* "Lazy Loading delays loading of CUDA modules and kernels from program
 * initalization closer to kernels execution" (Programming Guide, Lazy
 * Loading; on by default on Linux since CUDA 12.2): without this the
 * first batch of a training run would load the module, which takes the
 * context's lock and can wait behind other work (NCCL's kernels)
 * mid-training. cudaFuncGetAttributes loads the function now, at create. */
extern "C" int gpu_normalize_load(void)
{
    struct cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, normalize_kernel<float>);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&a, normalize_kernel<uint16_t>);
    return (int)e;
}

extern "C" int gpu_normalize(struct CUstream_st *stream, void *dst,
                             const void *src, const int32_t *status, int count,
                             int width, int height, int half,
                             int channels_last, const void *lut)
{
    const size_t plane = (size_t)width * (size_t)height;
    const size_t pixels = plane * (size_t)count;
    const int threads = 256;
    size_t blocks = (pixels + threads - 1) / threads;
    blocks = blocks > 4096 ? 4096 : blocks;
    /* The launch's own error, not an earlier one: this runs on the
     * prefetcher's thread, whose failed calls pinload has handled (and
     * cleared) already, so whatever is pending here is stale. A sticky
     * error stays, and the launch reports it, as it should. */
    (void)cudaGetLastError();
    if (half)
        normalize_kernel<uint16_t><<<(unsigned)blocks, threads, 0, stream>>>(
            (uint16_t *)dst, (const uint8_t *)src, (const uint16_t *)lut, plane,
            pixels, channels_last);
    else
        normalize_kernel<float><<<(unsigned)blocks, threads, 0, stream>>>(
            (float *)dst, (const uint8_t *)src, (const float *)lut, plane,
            pixels, channels_last);
    cudaError_t e = cudaGetLastError();
    /* A substituted sample is all zeros in every format, as on the host;
     * the LUT would have made its zero bytes -mean/std. */
    const size_t out_bytes = plane * 3 * (half ? 2 : 4);
    for (int i = 0; i < count && e == cudaSuccess; i++)
        if (status[i] != 0)
            e = cudaMemsetAsync((char *)dst + (size_t)i * out_bytes, 0,
                                out_bytes, stream);
    return (int)e;
}
