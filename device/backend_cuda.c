/* The CUDA backend. Each device buffer has its own non-blocking stream, so
 * a copy into one buffer never waits behind another buffer's release;
 * ready events let the caller's stream wait for a copy, release events let
 * the copy stream wait for the caller's kernels, and neither blocks the
 * host. cudaLaunchHostFunc turns "copy done" into a host callback that
 * hands the ring slot back to the workers. Every copy is bracketed by a
 * pair of timing events, so the stats can report the copies' own GPU time
 * and bandwidth, apart from any time the stream spent waiting. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "../common/error.h"
#ifdef PL_HAVE_NVCC
#include "normalize.h"
#endif

#define TIMED_COPIES 8 /* copies in flight per stream before one is waited */

typedef enum timed_state {
    TIMED_FREE,
    TIMED_ISSUING, /* the prefetcher is recording it, without the lock */
    TIMED_PENDING, /* recorded; harvested once its end event completes */
} timed_state;

typedef struct timed_copy {
    cudaEvent_t start, end;
    size_t bytes;
    timed_state state;
} timed_copy;

struct be_stream {
    cudaStream_t stream;
    cudaEvent_t ready;
    cudaEvent_t release;
    int release_recorded;
    /* The timing pairs: the prefetcher reserves one, a stats query
     * harvests the completed ones. Held only for that bookkeeping, never
     * across a CUDA call that may block (a copy from pageable or managed
     * memory returns only once it is done). */
    pthread_mutex_t mu;
    timed_copy timed[TIMED_COPIES];
    int next_timed;
    uint64_t ns_done, bytes_done; /* harvested, not yet reported */
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

static int host_alloc(backend *b, size_t n, pl_memory want, void **p,
                      hostmem *kind)
{
    switch (want) {
    case PL_MEMORY_PINNED:
        CK(cudaHostAlloc(p, n, cudaHostAllocDefault));
        *kind = HOSTMEM_PINNED;
        return 0;
    case PL_MEMORY_MANAGED: {
        /* The workers write the ring while copies and the caller's kernels
         * run: without concurrent managed access (Windows, WSL, some
         * virtual machines) a host write then faults. */
        int concurrent = 0;
        CK(cudaDeviceGetAttribute(
            &concurrent, cudaDevAttrConcurrentManagedAccess, b->device));
        if (!concurrent)
            return err_set(PL_EINVAL,
                           "config.memory: managed memory needs concurrent "
                           "managed access, which CUDA device %d lacks (the "
                           "host may not write managed memory while the "
                           "device works); use pinned or pageable memory",
                           b->device);
        CK(cudaMallocManaged(p, n, cudaMemAttachGlobal));
        *kind = HOSTMEM_MANAGED;
        return 0;
    }
    default:
        *kind = HOSTMEM_PAGEABLE;
        *p = aligned_alloc(4096, (n + 4095) / 4096 * 4096);
        return *p ? 0 : err_set(PL_ENOMEM, "out of memory for %zu bytes", n);
    }
}

static void host_free(backend *b, void *p, size_t n, hostmem kind)
{
    (void)b;
    (void)n;
    if (!p)
        return;
    if (kind == HOSTMEM_PINNED)
        cudaFreeHost(p);
    else if (kind == HOSTMEM_MANAGED)
        cudaFree(p);
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
    for (int i = 0; i < TIMED_COPIES; i++) {
        if (s->timed[i].start)
            cudaEventDestroy(s->timed[i].start);
        if (s->timed[i].end)
            cudaEventDestroy(s->timed[i].end);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int stream_create(backend *b, be_stream **out)
{
    be_stream *s = calloc(1, sizeof *s);
    if (!s)
        return PL_ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    cudaError_t e =
        cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->release, cudaEventDisableTiming);
    for (int i = 0; i < TIMED_COPIES && e == cudaSuccess; i++) {
        e = cudaEventCreate(&s->timed[i].start);
        if (e == cudaSuccess)
            e = cudaEventCreate(&s->timed[i].end);
    }
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

static int enter(backend *b, int *saved)
{
    CK(cudaGetDevice(saved));
    if (*saved != b->device)
        CK(cudaSetDevice(b->device));
    return 0;
}

static void leave(backend *b, int saved)
{
    if (saved != b->device)
        cudaSetDevice(saved);
}

/* Moves a completed copy's time to the harvested totals; s->mu held. A
 * copy still in flight stays pending. Neither call blocks. */
static void harvest(be_stream *s, timed_copy *t)
{
    if (t->state != TIMED_PENDING || cudaEventQuery(t->end) != cudaSuccess)
        return;
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, t->start, t->end) == cudaSuccess) {
        s->ns_done += (uint64_t)((double)ms * 1e6);
        s->bytes_done += t->bytes;
    }
    t->state = TIMED_FREE;
}

/* The timing pair for the next copy, reserved, or NULL: if the pair eight
 * copies back is still in flight (the stream waits on a release), this copy
 * goes untimed rather than the host waiting; ns_h2d and bytes_h2d both
 * leave it out. */
static timed_copy *reserve_timing(be_stream *s)
{
    pthread_mutex_lock(&s->mu);
    timed_copy *t = &s->timed[s->next_timed];
    harvest(s, t); /* eight copies back: long done, as a rule */
    if (t->state == TIMED_FREE) {
        t->state = TIMED_ISSUING;
        s->next_timed = (s->next_timed + 1) % TIMED_COPIES;
    } else {
        t = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    return t;
}

static int copy(backend *b, be_stream *s, void *dst, const void *src, size_t n)
{
    (void)b;
    timed_copy *t = reserve_timing(s);
    cudaError_t e = cudaSuccess;
    const char *what = "cudaEventRecord (copy start)";
    if (t)
        e = cudaEventRecord(t->start, s->stream);
    if (e == cudaSuccess) {
        what = "cudaMemcpyAsync";
        e = cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s->stream);
    }
    if (t && e == cudaSuccess) {
        what = "cudaEventRecord (copy end)";
        e = cudaEventRecord(t->end, s->stream);
    }
    if (t) {
        pthread_mutex_lock(&s->mu);
        t->bytes = n;
        t->state = e == cudaSuccess ? TIMED_PENDING : TIMED_FREE;
        pthread_mutex_unlock(&s->mu);
    }
    return e == cudaSuccess ? 0 : cuda_fail(e, what);
}

static void copy_time(backend *b, be_stream *s, uint64_t *ns, uint64_t *bytes)
{
    (void)b;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < TIMED_COPIES; i++)
        harvest(s, &s->timed[i]);
    *ns += s->ns_done;
    *bytes += s->bytes_done;
    s->ns_done = s->bytes_done = 0;
    pthread_mutex_unlock(&s->mu);
}

static int migrate(backend *b, be_stream *s, const void *p, size_t n)
{
#if CUDART_VERSION >= 13000
    struct cudaMemLocation loc = {.type = cudaMemLocationTypeDevice,
                                  .id = b->device};
    CK(cudaMemPrefetchAsync(p, n, loc, 0, s->stream));
#else
    CK(cudaMemPrefetchAsync(p, n, b->device, s->stream));
#endif
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

static int enter(backend *b, int *saved);
static void leave(backend *b, int saved);

/* NULL is the legacy default stream of the loader's device (CUDA would take
 * the calling thread's, where the event, of the loader's device, cannot be
 * recorded). */
static int record_release(backend *b, be_stream *s, struct CUstream_st *user)
{
    int saved = b->device;
    if (!user && enter(b, &saved) < 0)
        return PL_ECUDA;
    const cudaError_t e = cudaEventRecord(s->release, user);
    if (!user)
        leave(b, saved);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaEventRecord (release)");
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

static int stream_sync(backend *b, be_stream *s)
{
    (void)b;
    CK(cudaStreamSynchronize(s->stream));
    return 0;
}

static int sync_user(backend *b, struct CUstream_st *user)
{
    (void)b;
    CK(cudaStreamSynchronize(user));
    return 0;
}

static int query(backend *b, be_stream *s)
{
    (void)b;
    const cudaError_t e = cudaStreamQuery(s->stream);
    return e == cudaSuccess || e == cudaErrorNotReady
               ? 0
               : cuda_fail(e, "cudaStreamQuery");
}

#ifdef PL_HAVE_NVCC
static int normalize(backend *b, be_stream *s, void *dst, const void *src,
                     const int32_t *status, int count, int width, int height,
                     int half, int channels_last, const void *lut)
{
    (void)b;
    const int e = gpu_normalize(s->stream, dst, src, status, count, width,
                                height, half, channels_last, lut);
    if (e != 0)
        return cuda_fail((cudaError_t)e, "normalize kernel launch");
    return 0;
}
#endif

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
    .enter = enter,
    .leave = leave,
    .copy = copy,
    .migrate = migrate,
    .copy_time = copy_time,
    .after = after,
    .record_ready = record_ready,
    .sync_ready = sync_ready,
    .ready_event = ready_event,
    .record_release = record_release,
    .wait_released = wait_released,
    .sync = stream_sync,
    .sync_user = sync_user,
    .query = query,
#ifdef PL_HAVE_NVCC
    .normalize = normalize,
#endif
    .close = cuda_close,
};

/* Returns 0 with *out set; PL_ECUDA with `why` saying why the host backend
 * should be used, for AUTO; an error naming the ordinal otherwise. */
int backend_cuda_open(backend **out, int device, logger *lg, char *why,
                      size_t why_cap)
{
    int count = 0, ordinal = device;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count == 0)
        e = cudaErrorNoDevice;
    if (e == cudaSuccess && device == PL_DEVICE_AUTO)
        e = cudaGetDevice(&ordinal); /* the caller's, as CUDA users expect */
    int driver = -1;
    if (e != cudaSuccess && cudaDriverGetVersion(&driver) == cudaSuccess &&
        driver == 0) /* not an old driver: none at all */
        snprintf(why, why_cap, "no NVIDIA driver found");
    else if (e != cudaSuccess)
        snprintf(why, why_cap, "no usable CUDA device: %s",
                 cudaGetErrorString(e));
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error state */
        if (device == PL_DEVICE_AUTO)
            return PL_ECUDA;
        return err_set(PL_ECUDA,
                       "pl_loader_create: config.device: CUDA device %d "
                       "requested, but %s (%s)",
                       device,
                       driver == 0 ? "no NVIDIA driver was found"
                                   : cudaGetErrorString(e),
                       cudaGetErrorName(e));
    }
    if (ordinal >= count)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.device: CUDA device %d "
                       "requested, %d present",
                       ordinal, count);
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, why_cap, "CUDA device %d unusable: %s", ordinal,
                 cudaGetErrorString(e));
        return device == PL_DEVICE_AUTO
                   ? PL_ECUDA
                   : err_set(PL_ECUDA,
                             "pl_loader_create: config.device: CUDA "
                             "device %d is unusable: %s",
                             ordinal, cudaGetErrorString(e));
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
