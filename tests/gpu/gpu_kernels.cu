/* The GPU suite's kernels and their C launchers (gpu_kernels.h). Built by
 * nvcc with the library's host flags (no exceptions, RTTI or thread-safe
 * statics) and written as C: the object needs nothing of the C++ runtime,
 * and the suite links with the C compiler as every pinload program does. */
#include <cuda_runtime.h>

#include "gpu_kernels.h"

#define THREADS 256

static __global__ void sample_sums(const uint8_t *data, size_t sample_bytes,
                                   unsigned long long *sums)
{
    const uint8_t *s = data + blockIdx.x * sample_bytes;
    unsigned long long acc = 0;
    for (size_t i = threadIdx.x; i < sample_bytes; i += blockDim.x)
        acc += s[i];
    atomicAdd(&sums[blockIdx.x], acc);
}

static __global__ void slow_copy(const uint8_t *src, uint8_t *dst, size_t n,
                                 long long cycles)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const long long start = clock64();
        while (clock64() - start < cycles) {
        }
    }
    __syncthreads();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static __global__ void iota(uint32_t *out, uint32_t n, uint32_t base)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = base + i;
}

static __global__ void scale_add(uint32_t *out, uint32_t n, uint32_t mul,
                                 uint32_t add)
{
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = out[i] * mul + add;
}

static unsigned blocks_for(uint32_t n)
{
    return n == 0 ? 1 : (n + THREADS - 1) / THREADS;
}

extern "C" cudaError_t gk_sample_sums(cudaStream_t stream, const void *data,
                                      int count, size_t sample_bytes,
                                      unsigned long long *sums)
{
    sample_sums<<<count, THREADS, 0, stream>>>((const uint8_t *)data,
                                               sample_bytes, sums);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_slow_copy(cudaStream_t stream, const void *src,
                                    void *dst, size_t n, long long cycles)
{
    slow_copy<<<n ? 64 : 1, THREADS, 0, stream>>>((const uint8_t *)src,
                                                  (uint8_t *)dst, n, cycles);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_iota(cudaStream_t stream, uint32_t *out, uint32_t n,
                               uint32_t base)
{
    iota<<<blocks_for(n), THREADS, 0, stream>>>(out, n, base);
    return cudaGetLastError();
}

extern "C" cudaError_t gk_scale_add(cudaStream_t stream, uint32_t *out,
                                    uint32_t n, uint32_t mul, uint32_t add)
{
    scale_add<<<blocks_for(n), THREADS, 0, stream>>>(out, n, mul, add);
    return cudaGetLastError();
}
