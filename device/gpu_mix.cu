/* The batch op's kernel (gpu_mix.h): one thread per value of a pair of
 * samples, common/blend.h's blend_pair_value. */
#include <cuda_runtime_api.h>

#include "gpu_mix.h"

__global__ void mix_kernel(blend_batch b, size_t values, size_t total)
{
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total;
         t += (size_t)gridDim.x * blockDim.x)
        blend_pair_value(&b, (int)(t / values), t % values);
}

extern "C" int gpu_mix_load(void)
{
    struct cudaFuncAttributes a;
    return (int)cudaFuncGetAttributes(&a, mix_kernel);
}

extern "C" int gpu_mix(struct CUstream_st *stream, const blend_batch *b)
{
    const size_t values = blend_values(b);
    const size_t total = values * (size_t)blend_pairs(b);
    if (total == 0)
        return 0;
    const int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    blocks = blocks > 4096 ? 4096 : blocks;
    (void)cudaGetLastError(); /* stale: see normalize.cu */
    mix_kernel<<<(unsigned)blocks, threads, 0, stream>>>(*b, values, total);
    return (int)cudaGetLastError();
}
