/* pinload-bench's own CUDA pieces: a stream for the simulated training
 * step and a kernel that reads the batch for about X ms. Built from
 * bench_cuda.cu when the CUDA toolkit is present; otherwise bench.c uses
 * the stubs below and --compute-ms runs on the host. */
#ifndef PINLOAD_BENCH_CUDA_H
#define PINLOAD_BENCH_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
typedef struct bench_cuda bench_cuda;

/* Open a stream on the current device; NULL if CUDA is unusable. */
bench_cuda *bench_cuda_open(void);
void bench_cuda_close(bench_cuda *c);
struct CUstream_st *bench_cuda_stream(bench_cuda *c);
/* The steps whose GPU start and end times are kept (bench_cuda_times). */
#define BENCH_STEPS_MAX 65536
/* Queue a kernel that reads all n bytes at data and runs for about ms
 * milliseconds in total; its start and end on the device's clock are kept
 * as step `index` (below BENCH_STEPS_MAX; others are not kept). */
void bench_cuda_step(bench_cuda *c, const void *data, size_t n, double ms,
                     long index);
/* After bench_cuda_sync: the kept start and end times of steps 0 .. n - 1
 * (ns[2i], ns[2i + 1], nanoseconds of the device's clock, which only
 * differences mean); returns n, or 0 if they cannot be had. */
long bench_cuda_times(bench_cuda *c, unsigned long long *ns, long n);
/* Wait for everything queued on the stream. */
void bench_cuda_sync(bench_cuda *c);
/* The bandwidth cudaMemcpyAsync reaches from pinned (cudaHostAlloc) or
 * pageable (malloc) host memory to the device for `bytes`-byte copies, in
 * GB/s: the ceilings the ring's copies are measured against; 0 on
 * failure. */
double bench_cuda_memcpy_gbs(size_t bytes, int pinned);

#ifdef __cplusplus
}
#endif

#endif
