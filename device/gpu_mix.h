/* The batch op on the GPU: a delivered float batch mixed in device memory
 * on the copy stream, after its copies (and the GPU's normalising), with
 * common/blend.h's arithmetic, so that its bytes are the host's. The
 * launcher is device/gpu_mix.cu's, built by nvcc; on the simulated
 * runtime, tests/cudasim/kernels_sim.c runs the same per-value function
 * in stream order instead. Called by backend_cuda.c alone. */
#ifndef PINLOAD_GPU_MIX_H
#define PINLOAD_GPU_MIX_H

#include "../common/blend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Queue on stream the mixing b says (b->data: device memory). 0
 * (cudaSuccess), or the cudaError_t of the failed launch. */
int gpu_mix(struct CUstream_st *stream, const blend_batch *b);

/* Load the kernel into the current context now rather than at its first
 * launch (lazy loading). 0, or the cudaError_t. */
int gpu_mix_load(void);

#ifdef __cplusplus
}
#endif

#endif
