/* The CUDA backend. Each device buffer has its own non-blocking stream, so
 * a copy into one buffer never waits behind another buffer's release;
 * ready events let the caller's stream wait for a copy, release events let
 * the copy stream wait for the caller's kernels, and neither blocks the
 * host. cudaLaunchHostFunc turns "copy done" into a host callback that
 * hands the ring slot back to the workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "error.h"

struct be_stream {
    cudaStream_t stream;
    cudaEvent_t ready;
    cudaEvent_t release;
    int release_recorded;
};

static int cuda_fail(cudaError_t e, const char *what)
{
    return err_set(PL_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

#define CK(call)                                                               \
    do {                                                                       \
        const cudaError_t e_ = (call);                                         \
        if (e_ != cudaSuccess)                                                 \
            return cuda_fail(e_, #call);                                       \
    } while (0)

static int host_alloc(backend *b, size_t n, int pinned, void **p, int *locked)
{
    (void)b;
    *locked = 0;
    if (!pinned) {
        *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
        return *p ? 0 : PL_ENOMEM;
    }
    CK(cudaHostAlloc(p, n, cudaHostAllocDefault));
    *locked = 1;
    return 0;
}

static void host_free(backend *b, void *p, size_t n, int locked)
{
    (void)b;
    (void)n;
    if (!p)
        return;
    if (locked)
        cudaFreeHost(p);
    else
        free(p);
}

static int dev_alloc(backend *b, size_t n, void **p)
{
    (void)b;
    CK(cudaMalloc(p, n));
    return 0;
}

static void dev_free(backend *b, void *p)
{
    (void)b;
    if (p)
        cudaFree(p);
}

static void stream_destroy(backend *b, be_stream *s)
{
    (void)b;
    if (!s)
        return;
    if (s->stream)
        cudaStreamDestroy(s->stream);
    if (s->ready)
        cudaEventDestroy(s->ready);
    if (s->release)
        cudaEventDestroy(s->release);
    free(s);
}

static int stream_create(backend *b, be_stream **out)
{
    be_stream *s = calloc(1, sizeof *s);
    if (!s)
        return PL_ENOMEM;
    cudaError_t e = cudaStreamCreateWithFlags(&s->stream,
                                              cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->release, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        stream_destroy(b, s);
        return cuda_fail(e, "creating a copy stream");
    }
    *out = s;
    return 0;
}

static int bind_thread(backend *b)
{
    CK(cudaSetDevice(b->device));
    return 0;
}

static int copy(backend *b, be_stream *s, void *dst, const void *src, size_t n)
{
    (void)b;
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s->stream));
    return 0;
}

/* cudaHostFn_t is void (CUDART_CB *)(void *), and CUDART_CB is empty on
 * the platforms pinload builds for, so fn can be passed as it is. */
static int after(backend *b, be_stream *s, void (*fn)(void *), void *arg)
{
    (void)b;
    CK(cudaLaunchHostFunc(s->stream, fn, arg));
    return 0;
}

static int record_ready(backend *b, be_stream *s)
{
    (void)b;
    CK(cudaEventRecord(s->ready, s->stream));
    return 0;
}

static int sync_ready(backend *b, be_stream *s)
{
    (void)b;
    CK(cudaEventSynchronize(s->ready));
    return 0;
}

static struct CUevent_st *ready_event(be_stream *s)
{
    return s->ready;
}

static int record_release(backend *b, be_stream *s, struct CUstream_st *user)
{
    (void)b;
    CK(cudaEventRecord(s->release, user));
    s->release_recorded = 1;
    return 0;
}

static int wait_released(backend *b, be_stream *s)
{
    (void)b;
    if (s->release_recorded)
        CK(cudaStreamWaitEvent(s->stream, s->release, 0));
    return 0;
}

static int sync(backend *b, be_stream *s)
{
    (void)b;
    CK(cudaStreamSynchronize(s->stream));
    return 0;
}

static void cuda_close(backend *b)
{
    free(b);
}

static const backend_ops cuda_ops = {
    .host_alloc = host_alloc,
    .host_free = host_free,
    .dev_alloc = dev_alloc,
    .dev_free = dev_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .bind_thread = bind_thread,
    .copy = copy,
    .after = after,
    .record_ready = record_ready,
    .sync_ready = sync_ready,
    .ready_event = ready_event,
    .record_release = record_release,
    .wait_released = wait_released,
    .sync = sync,
    .close = cuda_close,
};

/* Returns 0 with *out set, PL_EINVAL for an ordinal beyond the devices, or
 * PL_ECUDA with `why` saying why the host backend should be used. */
int backend_cuda_open(backend **out, int device, logger *lg, char *why,
                      size_t why_cap)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(why, why_cap, "no usable CUDA device: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        cudaGetLastError(); /* clear the sticky-free error state */
        return PL_ECUDA;
    }
    const int ordinal = device == PL_DEVICE_AUTO ? 0 : device;
    if (ordinal >= count)
        return err_set(PL_EINVAL, "pl_loader_create: config.device: CUDA "
                       "device %d requested, %d present", device, count);
    struct cudaDeviceProp prop;
    e = cudaSetDevice(ordinal);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess) {
        snprintf(why, why_cap, "CUDA device %d unusable: %s", ordinal,
                 cudaGetErrorString(e));
        cudaGetLastError();
        return PL_ECUDA;
    }
    backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    b->ops = &cuda_ops;
    b->kind = PL_BACKEND_CUDA;
    b->device = ordinal;
    b->log = lg;
    snprintf(b->name, sizeof b->name, "cuda device %d (%.100s)", ordinal,
             prop.name);
    *out = b;
    return 0;
}

int backend_cuda_stream_wait(struct CUstream_st *stream, struct CUevent_st *ev)
{
    const cudaError_t e = cudaStreamWaitEvent(stream, ev, 0);
    if (e != cudaSuccess)
        return err_set(PL_ECUDA, "pl_batch_wait: cudaStreamWaitEvent: %s",
                       cudaGetErrorString(e));
    return 0;
}
