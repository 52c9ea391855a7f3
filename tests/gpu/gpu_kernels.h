/* The GPU suite's kernels (gpu_kernels.cu), each behind a plain C
 * launcher, so that the suite itself (test_gpu.c, gpu_*.c) is C built by
 * the C compiler and only the kernels are nvcc's. Each launcher queues its
 * kernel on `stream` and returns the launch's status, taken back with
 * cudaGetLastError so that no error is left pending on the thread. */
#ifndef PINLOAD_GPU_KERNELS_H
#define PINLOAD_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sums[i] += the sum of sample i's bytes, for each of the count samples of
 * sample_bytes bytes each at data (one block per sample). */
cudaError_t gk_sample_sums(cudaStream_t stream, const void *data, int count,
                           size_t sample_bytes, unsigned long long *sums);

/* Spin for about `cycles` clock cycles, then copy n bytes from src to dst
 * (n may be 0: a spin alone). A slow reader of src. */
cudaError_t gk_slow_copy(cudaStream_t stream, const void *src, void *dst,
                         size_t n, long long cycles);

/* out[i] = base + i, for i < n. */
cudaError_t gk_iota(cudaStream_t stream, uint32_t *out, uint32_t n,
                    uint32_t base);

/* out[i] = out[i] * mul + add, for i < n. */
cudaError_t gk_scale_add(cudaStream_t stream, uint32_t *out, uint32_t n,
                         uint32_t mul, uint32_t add);

#ifdef __cplusplus
}
#endif

#endif
