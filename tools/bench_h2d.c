/* pinload-bench: the bandwidth cudaMemcpyAsync itself reaches from
 * page-locked host memory to the device, the ceiling the ring's copies are
 * measured against. The CUDA runtime API alone, so that the real runtime
 * and the simulated one (make CUDA=sim) both build it. */
#include <cuda_runtime_api.h>

#include "bench_cuda.h"

double bench_cuda_pinned_gbs(size_t bytes)
{
    void *host = NULL, *dev = NULL;
    cudaEvent_t a = NULL, b = NULL;
    double gbs = 0.0;
    if (cudaHostAlloc(&host, bytes, cudaHostAllocDefault) != cudaSuccess)
        return 0.0;
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
    cudaFreeHost(host);
    cudaGetLastError(); /* a failure here only means no ceiling is shown */
    return gbs;
}
