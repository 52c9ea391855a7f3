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

/* The host function's share of one step, made for it and freed by it: how
 * long, and where its span goes, if the step is kept (the host's monotonic
 * clock stands for the device's). */
typedef struct held {
    unsigned long long us;
    unsigned long long *span; /* [2], or NULL */
} held;

struct bench_cuda {
    cudaStream_t stream;
    void *sink; /* page-locked: the read-back does not block the host */
    size_t sink_bytes;
    unsigned long long (*spans)[2]; /* [BENCH_STEPS_MAX] */
};

static unsigned long long mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull +
           (unsigned long long)t.tv_nsec;
}

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
    c->spans = calloc(BENCH_STEPS_MAX, sizeof *c->spans);
    if (!c->spans || cudaStreamCreateWithFlags(&c->stream,
                                               cudaStreamNonBlocking) !=
                         cudaSuccess) {
        free(c->spans);
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
    free(c->spans);
    free(c);
}

struct CUstream_st *bench_cuda_stream(bench_cuda *c)
{
    return c->stream;
}

/* The rest of the step: the stream is busy for h->us microseconds. */
static void hold(void *arg)
{
    held *h = arg;
    const unsigned long long t0 = mono_ns();
    struct timespec t = {(time_t)(h->us / 1000000u),
                         (long)(h->us % 1000000u) * 1000};
    while (nanosleep(&t, &t) != 0) {
    }
    if (h->span) {
        h->span[0] = t0;
        h->span[1] = mono_ns();
    }
    free(h);
}

void bench_cuda_step(bench_cuda *c, const void *data, size_t n, double ms,
                     long index)
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
    held *h = malloc(sizeof *h);
    if (!h)
        return;
    h->us = (unsigned long long)(ms * 1000.0);
    h->span = index >= 0 && index < BENCH_STEPS_MAX ? c->spans[index] : NULL;
    if (cudaLaunchHostFunc(c->stream, hold, h) != cudaSuccess)
        free(h);
}

long bench_cuda_times(bench_cuda *c, unsigned long long *ns, long n)
{
    if (n > BENCH_STEPS_MAX)
        n = BENCH_STEPS_MAX;
    for (long i = 0; i < n; i++) {
        ns[2 * i] = c->spans[i][0];
        ns[2 * i + 1] = c->spans[i][1];
    }
    return n > 0 ? n : 0;
}

void bench_cuda_sync(bench_cuda *c)
{
    cudaStreamSynchronize(c->stream);
}
