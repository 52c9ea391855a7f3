/* pinload-bench's CUDA side: the simulated training step, a kernel. (The
 * copy-bandwidth probe is in bench_h2d.c, shared with the simulated
 * runtime's build.) */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "bench_cuda.h"

struct bench_cuda {
    cudaStream_t stream;
    unsigned long long *sink;  /* keeps the reads from being optimised out */
    unsigned long long *times; /* [2 * BENCH_STEPS_MAX]: each step's span */
};

/* The GPU's nanosecond timer: wall time, whatever the SM clock runs at
 * (clock64() counts cycles, and the clock moves with load and power). */
__device__ static unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Every thread reads its share of the batch, then thread 0 of each block
 * spins until `ns` have passed since the block started: a step that
 * touches the data and lasts a known time. */
__global__ void step_kernel(const uint8_t *data, size_t n,
                            unsigned long long ns, unsigned long long *sink,
                            unsigned long long *span)
{
    const unsigned long long start = now_ns();
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        acc += data[i];
    if (threadIdx.x == 0)
        while (now_ns() - start < ns) {
        }
    if (acc == 0xFFFFFFFFFFFFFFFFull)
        *sink = acc;
    if (span && blockIdx.x == 0 && threadIdx.x == 0) { /* block 0's span */
        span[0] = start;
        span[1] = now_ns();
    }
}

extern "C" bench_cuda *bench_cuda_open(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return nullptr;
    }
    bench_cuda *c = (bench_cuda *)calloc(1, sizeof *c);
    if (!c ||
        cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) !=
            cudaSuccess ||
        cudaMalloc(&c->sink, sizeof *c->sink) != cudaSuccess ||
        cudaMalloc(&c->times, 2 * sizeof *c->times * BENCH_STEPS_MAX) !=
            cudaSuccess) {
        if (c && c->stream)
            cudaStreamDestroy(c->stream);
        if (c && c->sink)
            cudaFree(c->sink);
        free(c);
        cudaGetLastError();
        return nullptr;
    }
    return c;
}

extern "C" void bench_cuda_close(bench_cuda *c)
{
    if (!c)
        return;
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
    cudaFree(c->sink);
    cudaFree(c->times);
    free(c);
}

extern "C" struct CUstream_st *bench_cuda_stream(bench_cuda *c)
{
    return c->stream;
}

extern "C" void bench_cuda_step(bench_cuda *c, const void *data, size_t n,
                                double ms, long index)
{
    const unsigned long long ns = (unsigned long long)(ms * 1e6);
    unsigned long long *span = index >= 0 && index < BENCH_STEPS_MAX
                                   ? c->times + 2 * index
                                   : nullptr;
    step_kernel<<<132, 256, 0, c->stream>>>((const uint8_t *)data, n, ns,
                                            c->sink, span);
}

extern "C" long bench_cuda_times(bench_cuda *c, unsigned long long *ns, long n)
{
    if (n > BENCH_STEPS_MAX)
        n = BENCH_STEPS_MAX;
    if (n <= 0 || cudaMemcpy(ns, c->times, 2 * sizeof *ns * (size_t)n,
                             cudaMemcpyDeviceToHost) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" void bench_cuda_sync(bench_cuda *c)
{
    cudaStreamSynchronize(c->stream);
}
