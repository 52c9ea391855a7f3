/* pinload-bench: the bandwidth cudaMemcpyAsync itself reaches from
 * page-locked or pageable host memory to the device, the ceilings the
 * ring's copies are measured against. The CUDA runtime API alone, so that
 * the real runtime and the simulated one (make CUDA=sim) both build it. */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "bench_cuda.h"

double bench_cuda_memcpy_gbs(size_t bytes, int pinned)
{
    void *host = NULL, *dev = NULL;
    cudaEvent_t a = NULL, b = NULL;
    double gbs = 0.0;
    if (pinned) {
        if (cudaHostAlloc(&host, bytes, cudaHostAllocDefault) != cudaSuccess)
            return 0.0;
    } else {
        if (!(host = malloc(bytes)))
            return 0.0;
        memset(host, 1, bytes); /* pages present, as a filled ring's are */
    }
    if (cudaMalloc(&dev, bytes) == cudaSuccess &&
        cudaEventCreate(&a) == cudaSuccess &&
        cudaEventCreate(&b) == cudaSuccess) {
        cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice); /* warm */
        const int reps = 20;
        cudaEventRecord(a, NULL);
        for (int i = 0; i < reps; i++)
            cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, NULL);
        cudaEventRecord(b, NULL);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        gbs = ms > 0 ? (double)bytes * reps / (ms * 1e6) : 0.0;
    }
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    cudaFree(dev);
    if (pinned)
        cudaFreeHost(host);
    else
        free(host);
    cudaGetLastError(); /* a failure here only means no ceiling is shown */
    return gbs;
}
