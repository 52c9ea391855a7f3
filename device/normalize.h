/* The normalisation kernel's launcher (device/normalize.cu, built with nvcc
 * where it is found); called by backend_cuda.c alone. */
#ifndef PINLOAD_NORMALIZE_H
#define PINLOAD_NORMALIZE_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

struct CUstream_st;

/* Queue, on stream: dst (count samples of 3 x height x width float32, or
 * 16-bit float patterns when half; height x width x 3 when channels_last)
 * = lut[c][src] for src count samples of height x width x 3 uint8; lut is
 * 3 x 256 values in device memory. A
 * sample whose status[i] (host memory) is not 0 is left all zeros instead.
 * 0 (cudaSuccess), or the cudaError_t of the failed launch. */
int gpu_normalize(struct CUstream_st *stream, void *dst, const void *src,
                  const int32_t *status, int count, int width, int height,
                  int half, int channels_last, const void *lut);

/* Load the kernels into the current context now rather than at their
 * first launch (lazy loading). 0, or the cudaError_t. */
int gpu_normalize_load(void);

#ifdef __cplusplus
}
#endif

#endif
