/* The library's kernels on the simulated runtime, the GPU decoder's and
 * the batch op's: gpu_resize (the launcher device/gpu_resize.cu defines
 * for real builds; gpu_mix likewise, below) queues an
 * operation that runs the very per-element functions of
 * device/gpu_resize.h, on the engine's views of the device memory, in
 * stream order, with every buffer it reads or writes held as a queued use
 * (freeing one before it ran is a violation). libcudasim carries it, so a
 * CUDA=sim build of the library has the kernels without nvcc. */
#include <stdlib.h>

#include "cudasim.h"
#include "../../device/gpu_mix.h"
#include "../../device/gpu_resize.h"

static void run(void *arg)
{
    gpu_resize_args *a = arg;
    const int row = a->span * 3;
    for (int oy = 0; oy < a->out_h; oy++)
        for (int x = 0; x < row; x++)
            a->tmp[(size_t)oy * row + x] = gr_vertical(a, oy, x);
    for (int oy = 0; oy < a->out_h; oy++)
        for (int p = 0; p < a->out_w; p++)
            for (int c = 0; c < 3; c++)
                gr_store(a, oy, p, c, gr_horizontal(a, oy, p, c));
    free(a);
}

/* Every device pointer as the engine sees it, or 0 for one that is not the
 * sim's. */
static int views(gpu_resize_args *v)
{
    v->img = cudasim_device_view(v->img);
    v->coef = cudasim_device_view(v->coef);
    v->tmp = cudasim_device_view(v->tmp);
    v->dst = cudasim_device_view(v->dst);
    if (v->lut)
        v->lut = cudasim_device_view(v->lut);
    return v->img && v->coef && v->tmp && v->dst &&
           (v->format == GR_U8 || v->lut);
}

int gpu_resize(struct CUstream_st *stream, const gpu_resize_args *a)
{
    gpu_resize_args *v = malloc(sizeof *v);
    if (!v)
        return (int)cudaErrorMemoryAllocation;
    *v = *a;
    if (!views(v)) {
        free(v);
        return (int)cudaErrorInvalidValue;
    }
    const size_t out = (size_t)a->out_w * a->out_h * 3 *
                       (a->format == GR_F32   ? 4
                        : a->format == GR_F16 ? 2
                                              : 1);
    const void *mem[5] = {a->img, a->coef, a->tmp, a->dst, a->lut};
    const size_t n[5] = {
        1, gr_block_ints(a->out_w, a->out_h, a->vtaps, a->htaps) * 4,
        (size_t)a->span * 3 * a->out_h * 2, out, a->lut ? 3 * 256 * 2 : 0};
    const cudaError_t e =
        cudasim_launch_n(stream, run, v, free, mem, n, a->lut ? 5 : 4);
    if (e != cudaSuccess)
        free(v);
    return (int)e;
}

int gpu_resize_load(void)
{
    return 0;
}

/* The batch op's kernel (device/gpu_mix.h): common/blend.h's per-value
 * function over every value of every pair, in stream order, on the
 * engine's view of the batch. */
static void run_mix(void *arg)
{
    blend_batch *b = arg;
    const size_t values = blend_values(b);
    for (int i = 0; i < blend_pairs(b); i++)
        for (size_t k = 0; k < values; k++)
            blend_pair_value(b, i, k);
    free(b);
}

int gpu_mix(struct CUstream_st *stream, const blend_batch *b)
{
    blend_batch *v = malloc(sizeof *v);
    if (!v)
        return (int)cudaErrorMemoryAllocation;
    *v = *b;
    v->data = cudasim_device_view(b->data);
    if (!v->data) {
        free(v);
        return (int)cudaErrorInvalidValue;
    }
    const void *mem[1] = {b->data};
    const size_t n[1] = {b->sample_bytes * (size_t)b->count};
    const cudaError_t e = cudasim_launch_n(stream, run_mix, v, free, mem, n, 1);
    if (e != cudaSuccess)
        free(v);
    return (int)e;
}

int gpu_mix_load(void)
{
    return 0;
}
