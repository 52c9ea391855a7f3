/* The GPU decoder's crop, resize, flip and format kernels (gpu_resize.h):
 * the vertical pass, one thread per value of a Q6 row, then the horizontal
 * pass and the store, one thread per output pixel. The arithmetic is
 * gpu_resize.h's, the workers' resampler's, so the bytes equal the CPU
 * path's for the same decoded pixels. Reached only through nvjpeg.c. */
#include <cuda_runtime_api.h>

#include <stdint.h>

#include "gpu_resize.h"

__global__ void gr_vertical_kernel(gpu_resize_args a)
{
    const size_t row = (size_t)a.span * 3;
    const size_t n = row * (size_t)a.out_h;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        a.tmp[i] = gr_vertical(&a, (int)(i / row), (int)(i % row));
}

__global__ void gr_horizontal_kernel(gpu_resize_args a)
{
    const size_t n = (size_t)a.out_w * (size_t)a.out_h;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const int oy = (int)(i / (size_t)a.out_w);
        const int p = (int)(i % (size_t)a.out_w);
        for (int c = 0; c < 3; c++)
            gr_store(&a, oy, p, c, gr_horizontal(&a, oy, p, c));
    }
}

static unsigned blocks_for(size_t n, int threads)
{
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b > 4096 ? 4096 : b < 1 ? 1 : b);
}

/* As gpu_normalize_load: the module loaded at create, not mid-training. */
extern "C" int gpu_resize_load(void)
{
    struct cudaFuncAttributes f;
    cudaError_t e = cudaFuncGetAttributes(&f, gr_vertical_kernel);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&f, gr_horizontal_kernel);
    return (int)e;
}

extern "C" int gpu_resize(struct CUstream_st *stream, const gpu_resize_args *a)
{
    const int threads = 256;
    /* The launch's own error: what is pending on this worker's thread was
     * handled already (see gpu_normalize). */
    (void)cudaGetLastError();
    gr_vertical_kernel<<<blocks_for((size_t)a->span * 3 * a->out_h, threads),
                         threads, 0, stream>>>(*a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return (int)e;
    gr_horizontal_kernel<<<blocks_for((size_t)a->out_w * a->out_h, threads),
                           threads, 0, stream>>>(*a);
    return (int)cudaGetLastError();
}
