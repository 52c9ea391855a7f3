/* pinload-bench's CUDA pieces where there is no CUDA toolkit at build
 * time: no stream, no kernel, no ceilings, so --compute-ms runs on the
 * host (tools/bench.c) and no H2D figure is printed. The CUDA build links
 * bench_cuda.cu, the simulated runtime's build bench_cuda_sim.c. */
#include <stddef.h>

#include "bench_cuda.h"

bench_cuda *bench_cuda_open(void)
{
    return NULL;
}
void bench_cuda_close(bench_cuda *c)
{
    (void)c;
}
struct CUstream_st *bench_cuda_stream(bench_cuda *c)
{
    (void)c;
    return NULL;
}
void bench_cuda_step(bench_cuda *c, const void *d, size_t n, double ms,
                     long index)
{
    (void)c;
    (void)d;
    (void)n;
    (void)ms;
    (void)index;
}
long bench_cuda_times(bench_cuda *c, unsigned long long *ns, long n)
{
    (void)c;
    (void)ns;
    (void)n;
    return 0;
}
void bench_cuda_sync(bench_cuda *c)
{
    (void)c;
}
double bench_cuda_memcpy_gbs(size_t bytes, int pinned)
{
    (void)bytes;
    (void)pinned;
    return 0.0;
}
