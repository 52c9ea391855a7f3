/* pinload-bench's training step where no kernel can run: on the simulated
 * CUDA runtime (make CUDA=sim), the step reads the batch with a
 * device-to-host copy on the bench's stream into page-locked memory, then
 * a host function holds the stream for the rest of the step's time. The
 * host never waits for it, as with the kernel; only the CUDA runtime API is
 * used. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "bench_cuda.h"

struct bench_cuda {
    cudaStream_t stream;
    void *sink; /* page-locked: the read-back does not block the host */
    size_t sink_bytes;
};

bench_cuda *bench_cuda_open(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return NULL;
    }
    bench_cuda *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) !=
        cudaSuccess) {
        free(c);
        return NULL;
    }
    return c;
}

void bench_cuda_close(bench_cuda *c)
{
    if (!c)
        return;
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
    cudaFreeHost(c->sink);
    free(c);
}

struct CUstream_st *bench_cuda_stream(bench_cuda *c)
{
    return c->stream;
}

/* The rest of the step: the stream is busy for arg microseconds. */
static void hold(void *arg)
{
    const uintptr_t us = (uintptr_t)arg;
    struct timespec t = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
}

void bench_cuda_step(bench_cuda *c, const void *data, size_t n, double ms)
{
    if (n > c->sink_bytes) {
        cudaStreamSynchronize(c->stream); /* the old sink may be in use */
        cudaFreeHost(c->sink);
        c->sink = NULL;
        c->sink_bytes = 0;
        if (cudaHostAlloc(&c->sink, n, cudaHostAllocDefault) != cudaSuccess)
            return;
        c->sink_bytes = n;
    }
    cudaMemcpyAsync(c->sink, data, n, cudaMemcpyDeviceToHost, c->stream);
    cudaLaunchHostFunc(c->stream, hold, (void *)(uintptr_t)(ms * 1000.0));
}

void bench_cuda_sync(bench_cuda *c)
{
    cudaStreamSynchronize(c->stream);
}
