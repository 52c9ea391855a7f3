/* The normalisation kernel's launcher (loader/normalize.cu, built with nvcc
 * where it is found); called by backend_cuda.c alone. */
#ifndef PINLOAD_NORMALIZE_H
#define PINLOAD_NORMALIZE_H

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Queue, on stream: dst (count samples of 3 x height x width float32, or
 * float16 bits when half) = lut[c][src] for src count samples of
 * height x width x 3 uint8; lut is 3 x 256 values in device memory.
 * 0, or -1 if the launch failed (cudaGetLastError says why). */
int gpu_normalize(struct CUstream_st *stream, void *dst, const void *src,
                  int count, int width, int height, int half, const void *lut);

#ifdef __cplusplus
}
#endif

#endif
