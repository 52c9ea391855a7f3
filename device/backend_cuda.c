/* The CUDA backend. Each device buffer has its own non-blocking stream, so
 * a copy into one buffer never waits behind another buffer's release;
 * ready events let the caller's stream wait for a copy, release events let
 * the copy stream wait for the caller's kernels, and neither blocks the
 * host. cudaLaunchHostFunc turns "copy done" into a host callback that
 * hands the ring slot back to the workers. Every copy is bracketed by a
 * pair of timing events, so the stats can report the copies' own GPU time
 * and bandwidth, apart from any time the stream spent waiting. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h> /* the driver's types only: libcuda is not linked */
#include <cuda_runtime_api.h>

#include "backend.h"
#include "gpu_decode.h"
#include "../common/error.h"
#include "../common/machine.h"
#ifdef PL_HAVE_NVCC
#include "normalize.h"
#endif
#ifdef PL_HAVE_GPU_MIX
#include "gpu_mix.h"
#endif

/* Which thread calls the runtime, with which context current (see
 * docs/ARCHITECTURE.md, Threads): the loader's own threads (the
 * prefetcher) chose the loader's device with cudaSetDevice (bind_thread)
 * and keep it; a caller's thread is never moved: every call made on it runs
 * between enter() and leave(), which push the loader's primary context
 * onto the thread's stack of current contexts and pop it again. Since CUDA
 * 12 cudaSetDevice "will also immediately initialize the runtime state on
 * the primary context" of the device it selects, so restoring a caller's
 * device with it would create a context (hundreds of MB) on a device the
 * caller never used, GPU 0 for a thread that never chose one, and fail on
 * an exclusive-process GPU another process holds; pushing and popping
 * touches the loader's device alone. The driver's context calls are
 * reached through the runtime (cudaGetDriverEntryPointByVersion), so
 * libcuda is not linked. */
typedef CUresult(CUDAAPI *pfn_retain)(CUcontext *, CUdevice);
typedef CUresult(CUDAAPI *pfn_release)(CUdevice);
typedef CUresult(CUDAAPI *pfn_push)(CUcontext);
typedef CUresult(CUDAAPI *pfn_pop)(CUcontext *);

typedef struct cuda_backend {
    backend pub;   /* first: the backend * the loader holds is this */
    CUcontext ctx; /* the loader's device's primary context, retained */
    pfn_retain retain;
    pfn_release release;
    pfn_push push;
    pfn_pop pop;
    /* A placement on the device's NUMA node was refused or fell elsewhere,
     * and a notice said so: one per loader, whichever thread allocates
     * (create, or the prefetcher adding a buffer). */
    atomic_int placement_noticed;
} cuda_backend;

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
    backend *be; /* the device the stream and its events belong to */
    cudaStream_t stream;
    cudaEvent_t ready;
    /* One per stream the caller released the batch on (a batch read on
     * several, by DLPack consumers say, is released after all of them);
     * bit i of release_recorded: release[i] holds the last release's. */
    cudaEvent_t release[PL_RELEASE_STREAMS_MAX];
    unsigned release_recorded;
    /* The timing pairs: the prefetcher reserves one, a stats query
     * harvests the completed ones. Held only for that bookkeeping, never
     * across a CUDA call that may block (a copy from pageable or managed
     * memory returns only once it is done). */
    pthread_mutex_t mu;
    timed_copy timed[TIMED_COPIES];
    int next_timed;
    uint64_t ns_done, bytes_done; /* harvested, not yet reported */
};

/* A failed runtime call leaves its error pending on the calling thread
 * ("Returns the last error that has been produced by any of the runtime
 * calls in the same instance of the CUDA Runtime library in the host
 * thread", cudaGetLastError). pinload reports what it handles through its
 * own status, so it takes the error back: otherwise the caller's next
 * launch check (PyTorch's C10_CUDA_KERNEL_LAUNCH_CHECK, say) would fail on
 * code that did nothing wrong. A sticky error stays: CUDA keeps it for
 * every call in the context. */
static void clear_error(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        (void)cudaGetLastError();
}

static int cuda_fail(cudaError_t e, const char *what)
{
    clear_error(e);
    return err_set(PL_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

/* A call whose failure changes nothing for pinload (a free at teardown):
 * its error is not left to the caller either. */
static void quiet(cudaError_t e)
{
    clear_error(e);
}

#define CK(call)                                                               \
    do {                                                                       \
        const cudaError_t e_ = (call);                                         \
        if (e_ != cudaSuccess)                                                 \
            return cuda_fail(e_, #call);                                       \
    } while (0)

/* Host memory near the device: on the NUMA node of its PCI slot, so that
 * the copies read memory beside the GPU's PCIe root port rather than
 * across the link between sockets (docs/ARCHITECTURE.md, Where the ring
 * lives). Pinned memory: cudaHostAlloc allocates and locks
 * every page within the call, on the calling thread, so the thread's own
 * memory policy decides where the pages lie; the thread prefers the
 * device's node for that one call and gets its policy back after. That
 * was chosen over mmap + mbind + cudaHostRegister, which would place the
 * pages as surely, because the memory stays CUDA's own from allocation to
 * cudaFreeHost (no registration to undo, no second kind of page-locked
 * memory to free), and nothing else runs on the thread between the two
 * policy calls. Preferred, never bound: a full node gives pages of another
 * rather than a failure. Pageable memory is faulted in later by the
 * workers, on their threads, so its range itself prefers the node (mbind)
 * before anything touches it. Managed memory moves between the host and
 * the device as it is used: it is not placed. */
static void not_placed(backend *b, const char *why, int err)
{
    cuda_backend *cb = (cuda_backend *)b;
    if (atomic_exchange(&cb->placement_noticed, 1))
        return;
    log_msg(b->log, PL_LOG_NOTICE,
            "host memory for CUDA device %d is not placed on its NUMA node "
            "%d: %s: %s%s",
            b->device, b->numa_node, why, strerror(err),
            err == EINVAL ? " (is the node online?)" : "");
}

/* Where pinned memory allocated while the thread preferred the node went:
 * the node of its first page, or the node asked for where the kernel
 * cannot tell (memory the driver maps itself). */
static int pinned_node(backend *b, const void *p)
{
    const int at = machine_page_node(p);
    if (at < 0 || at == b->numa_node)
        return b->numa_node;
    cuda_backend *cb = (cuda_backend *)b;
    if (!atomic_exchange(&cb->placement_noticed, 1))
        log_msg(b->log, PL_LOG_NOTICE,
                "pinned memory for CUDA device %d went to NUMA node %d, not "
                "its own node %d (full?)",
                b->device, at, b->numa_node);
    return at;
}

static int alloc_pinned(backend *b, size_t n, void **p, int *node)
{
    machine_policy saved;
    int placed = 0;
    if (b->numa_node >= 0) {
        const int rc = machine_prefer(b->numa_node, &saved);
        if (rc < 0)
            not_placed(b, "set_mempolicy", -rc);
        placed = rc == 0;
    }
    const cudaError_t e = cudaHostAlloc(p, n, cudaHostAllocDefault);
    if (placed)
        machine_restore(&saved);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaHostAlloc(p, n, cudaHostAllocDefault)");
    *node = placed ? pinned_node(b, *p) : -1;
    return 0;
}

static size_t page_rounded(size_t n)
{
    return (n + 4095) / 4096 * 4096;
}

static int alloc_pageable(backend *b, size_t n, void **p, int *node)
{
    *p = aligned_alloc(4096, page_rounded(n));
    if (!*p)
        return err_set(PL_ENOMEM, "out of memory for %zu bytes", n);
    if (b->numa_node >= 0) {
        const int rc = machine_prefer_range(*p, page_rounded(n), b->numa_node);
        if (rc < 0)
            not_placed(b, "mbind", -rc);
        else
            *node = b->numa_node;
    }
    return 0;
}

static int host_alloc(backend *b, size_t n, pl_memory want, void **p,
                      hostmem *kind, int *node)
{
    *node = -1;
    switch (want) {
    case PL_MEMORY_PINNED:
        *kind = HOSTMEM_PINNED;
        return alloc_pinned(b, n, p, node);
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
        return alloc_pageable(b, n, p, node);
    }
}

static void host_free(backend *b, void *p, size_t n, hostmem kind)
{
    if (!p)
        return;
    if (kind == HOSTMEM_PINNED) {
        quiet(cudaFreeHost(p));
    } else if (kind == HOSTMEM_MANAGED) {
        quiet(cudaFree(p));
    } else {
        if (b->numa_node >= 0) /* the heap may reuse the range */
            machine_forget_range(p, page_rounded(n));
        free(p);
    }
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
        quiet(cudaFree(p));
}

static void stream_destroy(backend *b, be_stream *s)
{
    (void)b;
    if (!s)
        return;
    if (s->stream)
        quiet(cudaStreamDestroy(s->stream));
    if (s->ready)
        quiet(cudaEventDestroy(s->ready));
    for (int i = 0; i < PL_RELEASE_STREAMS_MAX; i++)
        if (s->release[i])
            quiet(cudaEventDestroy(s->release[i]));
    for (int i = 0; i < TIMED_COPIES; i++) {
        if (s->timed[i].start)
            quiet(cudaEventDestroy(s->timed[i].start));
        if (s->timed[i].end)
            quiet(cudaEventDestroy(s->timed[i].end));
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int stream_create(backend *b, be_stream **out)
{
    be_stream *s = calloc(1, sizeof *s);
    if (!s)
        return PL_ENOMEM;
    s->be = b;
    pthread_mutex_init(&s->mu, NULL);
    cudaError_t e =
        cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
    for (int i = 0; i < PL_RELEASE_STREAMS_MAX && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&s->release[i], cudaEventDisableTiming);
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

/* The loader's own threads never take part in a caller's CUDA graph
 * capture, and must not break one: in the default global mode, while any
 * thread captures in global mode (torch.cuda.graph's default), "this
 * thread is prohibited from potentially unsafe API calls" (an event query,
 * a synchronisation, an allocation: cudaThreadExchangeStreamCaptureMode),
 * and such a call both fails and invalidates the capture (seen on an H200,
 * 2026-11-27). Relaxed: "The local thread is not prohibited". The mode is
 * set after the device, as the call needs a context. */
static cudaError_t relax_capture(enum cudaStreamCaptureMode *was)
{
    *was = cudaStreamCaptureModeRelaxed;
    return cudaThreadExchangeStreamCaptureMode(was);
}

static int bind_thread(backend *b)
{
    CK(cudaSetDevice(b->device));
    enum cudaStreamCaptureMode was;
    CK(relax_capture(&was));
    return 0;
}

/* "Pushes the given context ctx onto the CPU thread's stack of current
 * contexts" (cuCtxPushCurrent): the runtime then works on the loader's
 * device, whatever the thread had current, and creates nothing anywhere
 * else. The stack keeps the context leave() restores; *saved keeps the
 * thread's stream capture mode, relaxed meanwhile (see relax_capture: a
 * caller may capture a graph on this thread or another while it calls
 * pinload). */
static int enter(backend *b, int *saved)
{
    const cuda_backend *cb = (const cuda_backend *)b;
    *saved = 0;
    const CUresult r = cb->push(cb->ctx);
    if (r != CUDA_SUCCESS)
        return err_set(PL_ECUDA,
                       "cuCtxPushCurrent (the primary context of CUDA "
                       "device %d): driver error %d",
                       b->device, (int)r);
    enum cudaStreamCaptureMode was;
    const cudaError_t e = relax_capture(&was);
    if (e != cudaSuccess) {
        CUcontext popped;
        (void)cb->pop(&popped);
        return cuda_fail(e, "cudaThreadExchangeStreamCaptureMode");
    }
    *saved = (int)was;
    return 0;
}

/* "If a context was current to the CPU thread before cuCtxCreate() or
 * cuCtxPushCurrent() was called, this function makes that context current
 * to the CPU thread again" (cuCtxPopCurrent): none, if there was none. */
static void leave(backend *b, int saved)
{
    const cuda_backend *cb = (const cuda_backend *)b;
    enum cudaStreamCaptureMode mode = (enum cudaStreamCaptureMode)saved;
    quiet(cudaThreadExchangeStreamCaptureMode(&mode));
    CUcontext was;
    (void)cb->pop(&was);
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

static cudaError_t prefetch_managed(const backend *b, be_stream *s,
                                    const void *p, size_t n)
{
#if CUDART_VERSION >= 13000
    struct cudaMemLocation loc = {.type = cudaMemLocationTypeDevice,
                                  .id = b->device};
    return cudaMemPrefetchAsync(p, n, loc, 0, s->stream);
#else
    return cudaMemPrefetchAsync(p, n, b->device, s->stream);
#endif
}

static int copy(backend *b, be_stream *s, void *dst, const void *src, size_t n,
                hostmem from)
{
    timed_copy *t = reserve_timing(s);
    cudaError_t e = cudaSuccess;
    const char *what = "cudaEventRecord (copy start)";
    if (t)
        e = cudaEventRecord(t->start, s->stream);
    if (e == cudaSuccess && from == HOSTMEM_MANAGED) {
        /* Timed with the copy: what the managed ring costs is the
         * migration, after which the copy is device to device. */
        what = "cudaMemPrefetchAsync";
        e = prefetch_managed(b, s, src, n);
    }
    if (e == cudaSuccess) {
        /* cudaMemcpyDefault, not HostToDevice: a managed ring was just
         * prefetched to the device, and "Calling cudaMemcpy() with dst and
         * src pointers that do not match the direction of the copy results
         * in an undefined behavior"; "Passing cudaMemcpyDefault is
         * recommended, in which case the type of transfer is inferred from
         * the pointer values. However, cudaMemcpyDefault is only allowed on
         * systems that support unified virtual addressing" (cudaMemcpyAsync,
         * Runtime API; checked at open). */
        what = "cudaMemcpyAsync";
        e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s->stream);
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

/* Called by pl_loader_stats, on any thread: the event queries run with the
 * loader's context pushed (without it the runtime would initialise a
 * context on the thread's device, GPU 0 for a monitoring thread). */
static void copy_time(backend *b, be_stream *s, uint64_t *ns, uint64_t *bytes)
{
    int saved;
    const int entered = enter(b, &saved) == 0;
    pthread_mutex_lock(&s->mu);
    if (entered)
        for (int i = 0; i < TIMED_COPIES; i++)
            harvest(s, &s->timed[i]);
    *ns += s->ns_done;
    *bytes += s->bytes_done;
    s->ns_done = s->bytes_done = 0;
    pthread_mutex_unlock(&s->mu);
    if (entered)
        leave(b, saved);
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

/* On the caller's thread (pl_loader_release, a DLPack deleter), with the
 * loader's context pushed: NULL, cudaStreamLegacy and cudaStreamPerThread
 * then name the streams of the loader's device ("the legacy default
 * stream ... associated with the current device"), which the event, of
 * that device, can be recorded on; an explicit stream of another device is
 * refused by CUDA ("event and stream must be on the same CUDA context")
 * and the caller falls back on sync_user. */
static int record_release(backend *b, be_stream *s, int slot,
                          struct CUstream_st *user)
{
    if (slot == 0)
        s->release_recorded = 0; /* a new release: the last one's are done
                                    with once the next copy waited */
    int saved;
    if (enter(b, &saved) < 0)
        return PL_ECUDA;
    const cudaError_t e = cudaEventRecord(s->release[slot], user);
    if (e != cudaSuccess) {
        const int rc = cuda_fail(e, "cudaEventRecord (release)");
        leave(b, saved);
        return rc;
    }
    leave(b, saved);
    s->release_recorded |= 1u << slot;
    return 0;
}

static int wait_released(backend *b, be_stream *s)
{
    (void)b;
    for (int i = 0; i < PL_RELEASE_STREAMS_MAX; i++)
        if (s->release_recorded & (1u << i))
            CK(cudaStreamWaitEvent(s->stream, s->release[i], 0));
    return 0;
}

static int sync_released(backend *b, be_stream *s)
{
    (void)b;
    for (int i = 0; i < PL_RELEASE_STREAMS_MAX; i++)
        if (s->release_recorded & (1u << i))
            CK(cudaEventSynchronize(s->release[i]));
    return 0;
}

/* cudaStreamIsCapturing asks without disturbing a capture. On the legacy
 * stream while a blocking stream captures, it "returns
 * cudaErrorStreamCaptureImplicit": the legacy stream cannot be used then
 * either, so that counts as capturing. Any other error (a stream of another
 * context, say) is left to the call that follows. */
static int is_capturing(struct CUstream_st *user)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    const cudaError_t e = cudaStreamIsCapturing(user, &st);
    clear_error(e);
    return e == cudaErrorStreamCaptureImplicit ||
           (e == cudaSuccess && st != cudaStreamCaptureStatusNone);
}

static int capturing(backend *b, struct CUstream_st *user)
{
    int saved;
    if (enter(b, &saved) < 0)
        return 0;
    const int c = is_capturing(user);
    leave(b, saved);
    return c;
}

static int stream_sync(backend *b, be_stream *s)
{
    (void)b;
    CK(cudaStreamSynchronize(s->stream));
    return 0;
}

/* Polls, so the wait has a bound: a stream waiting for a caller's kernel
 * that never ends (a collective whose peer died) must not hang destroy.
 * On the calling thread, with the loader's context current (destroy). */
static int drain(backend *b, be_stream *s, int ms)
{
    (void)b;
    if (ms < 0) {
        CK(cudaStreamSynchronize(s->stream));
        return 0;
    }
    const struct timespec tick = {0, 1000000}; /* 1 ms */
    for (int waited = 0;; waited++) {
        const cudaError_t e = cudaStreamQuery(s->stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return cuda_fail(e, "cudaStreamQuery");
        if (waited >= ms)
            return 1;
        nanosleep(&tick, NULL);
    }
}

static int sync_user(backend *b, struct CUstream_st *user)
{
    int saved;
    if (enter(b, &saved) < 0)
        return PL_ECUDA;
    const cudaError_t e = cudaStreamSynchronize(user);
    const int rc = e == cudaSuccess ? 0 : cuda_fail(e, "cudaStreamSynchronize");
    leave(b, saved);
    return rc;
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

#ifdef PL_HAVE_GPU_MIX
static int mix(backend *b, be_stream *s, const blend_batch *m)
{
    (void)b;
    const int e = gpu_mix(s->stream, m);
    if (e != 0)
        return cuda_fail((cudaError_t)e, "mixup kernel launch");
    return 0;
}
#endif

static int copy_device(backend *b, be_stream *s, void *dst, const void *src,
                       size_t n)
{
    (void)b;
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s->stream));
    return 0;
}

static int wait_event(backend *b, be_stream *s, struct CUevent_st *ev)
{
    (void)b;
    CK(cudaStreamWaitEvent(s->stream, ev, 0));
    return 0;
}

/* The GPU decoder needs nvJPEG's declarations (nvjpeg.h, PL_HAVE_NVJPEG)
 * and the resize kernels (nvcc's, or the simulated runtime's:
 * PL_HAVE_GPU_RESIZE); a build without either says so. */
static int gpu_decoder_open(backend *b, const gpu_decoder_config *cfg,
                            gpu_decoder **out, char *why, size_t cap)
{
#if defined(PL_HAVE_NVJPEG) && defined(PL_HAVE_GPU_RESIZE)
    return nvjpeg_decoder_open(b, cfg, out, why, cap);
#else
    (void)b;
    (void)cfg;
    *out = NULL;
    snprintf(why, cap, "this build of pinload has no GPU decoder (%s)",
#ifndef PL_HAVE_NVJPEG
             "built without nvJPEG's header, nvjpeg.h"
#else
             "built without nvcc, for its kernels"
#endif
    );
    return PL_EUNSUPPORTED;
#endif
}

static void cuda_close(backend *b)
{
    cuda_backend *cb = (cuda_backend *)b;
    if (cb->ctx)
        (void)cb->release(b->device);
    free(cb);
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
    .copy_time = copy_time,
    .after = after,
    .record_ready = record_ready,
    .sync_ready = sync_ready,
    .ready_event = ready_event,
    .record_release = record_release,
    .wait_released = wait_released,
    .sync_released = sync_released,
    .capturing = capturing,
    .sync = stream_sync,
    .drain = drain,
    .sync_user = sync_user,
    .query = query,
#ifdef PL_HAVE_NVCC
    .normalize = normalize,
#endif
#ifdef PL_HAVE_GPU_MIX
    .mix = mix,
#endif
    .copy_device = copy_device,
    .wait_event = wait_event,
    .gpu_decoder_open = gpu_decoder_open,
    .close = cuda_close,
};

/* The driver function `name`, through the runtime, or NULL. */
static void *driver_fn(const char *name)
{
    void *fn = NULL;
#if CUDART_VERSION >= 12000
    enum cudaDriverEntryPointQueryResult found =
        cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion(
        name, &fn, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t e =
        cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
    const int ok = found == cudaDriverEntryPointSuccess;
#else /* CUDA 11.3 to 11.8: no status; fn stays NULL when not found */
    const cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault);
    const int ok = 1;
#endif
    clear_error(e);
    return e == cudaSuccess && ok ? fn : NULL;
}

/* The context calls, and the device's primary context retained for the
 * loader's life ("Once the user successfully retains the primary context,
 * the primary context will be active and available to the user until the
 * user releases it", cuDevicePrimaryCtxRetain): the one context pinload
 * ever creates, on the loader's own device. */
static int context_open(cuda_backend *cb, int ordinal)
{
    cb->retain = (pfn_retain)driver_fn("cuDevicePrimaryCtxRetain");
    cb->release = (pfn_release)driver_fn("cuDevicePrimaryCtxRelease");
    cb->push = (pfn_push)driver_fn("cuCtxPushCurrent");
    cb->pop = (pfn_pop)driver_fn("cuCtxPopCurrent");
    if (!cb->retain || !cb->release || !cb->push || !cb->pop)
        return err_set(PL_ECUDA,
                       "pl_loader_create: the CUDA driver's context calls "
                       "(cuDevicePrimaryCtxRetain, cuCtxPushCurrent...) are "
                       "not available through cudaGetDriverEntryPoint; a "
                       "driver for CUDA 12 or later is needed");
    const CUresult r = cb->retain(&cb->ctx, ordinal);
    if (r != CUDA_SUCCESS) {
        cb->ctx = NULL;
        return err_set(PL_ECUDA,
                       "pl_loader_create: config.device: CUDA device %d: "
                       "its primary context cannot be had (driver error "
                       "%d%s)",
                       ordinal, (int)r,
                       r == CUDA_ERROR_DEVICE_UNAVAILABLE
                           ? ": busy, or in exclusive-process mode and used "
                             "by another process"
                           : "");
    }
    return 0;
}

/* The NUMA node of the device's PCI slot (sysfs, from the bus id CUDA
 * gives), or -1: unknown, as on a machine of one node. A bus id the
 * runtime will not give is a notice, not an error: the memory is then
 * wherever the kernel puts it, as before pinload placed it. */
static int device_node(backend *b)
{
    char bus[32] = "";
    const cudaError_t e =
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, b->device);
    if (e != cudaSuccess) {
        clear_error(e);
        log_msg(b->log, PL_LOG_NOTICE,
                "CUDA device %d: cudaDeviceGetPCIBusId: %s: its NUMA node is "
                "not known, and host memory is not placed near it",
                b->device, cudaGetErrorString(e));
        return -1;
    }
    return machine_pci_node(bus);
}

/* Returns 0 with *out set; PL_ECUDA with `why` saying why the host backend
 * should be used, for AUTO; an error naming the ordinal otherwise. */
int backend_cuda_open(backend **out, int device, int local_rank, logger *lg,
                      char *why, size_t why_cap)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count == 0)
        e = cudaErrorNoDevice;
    if (device == PL_DEVICE_LOCAL_RANK) {
        /* A launcher that gives each rank its own GPU through
         * CUDA_VISIBLE_DEVICES leaves each process one device, ordinal 0,
         * whatever its local rank ("CUDA applications will only see those
         * devices whose index ... is in the sequence", CUDA_VISIBLE_DEVICES,
         * Programming Guide, CUDA Environment Variables). */
        device = local_rank;
        if (e == cudaSuccess && count == 1 && local_rank > 0) {
            const char *vis = getenv("CUDA_VISIBLE_DEVICES");
            log_msg(lg, PL_LOG_NOTICE,
                    "config.device: local rank %d, but this process sees "
                    "one CUDA device (CUDA_VISIBLE_DEVICES=%.40s): using "
                    "it, device 0",
                    local_rank, vis ? vis : "unset");
            device = 0;
        }
    }
    int ordinal = device;
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
    if (!prop.unifiedAddressing)
        return err_set(PL_ECUDA,
                       "pl_loader_create: CUDA device %d lacks unified "
                       "addressing, which pinload's copies need",
                       ordinal);
    cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    int rc = context_open(cb, ordinal);
    backend *b = &cb->pub;
    b->device = ordinal;
#ifdef PL_HAVE_NVCC
    int saved;
    if (rc == 0 && (rc = enter(b, &saved)) == 0) {
        cudaError_t le = (cudaError_t)gpu_normalize_load();
#ifdef PL_HAVE_GPU_MIX
        if (le == cudaSuccess)
            le = (cudaError_t)gpu_mix_load();
#endif
        if (le != cudaSuccess)
            rc = cuda_fail(le, "pl_loader_create: loading the normalize "
                               "and mixup kernels");
        leave(b, saved);
    }
#endif
    if (rc < 0) {
        cuda_close(b);
        return rc;
    }
    b->ops = &cuda_ops;
    b->kind = PL_BACKEND_CUDA;
    b->device = ordinal;
    b->log = lg;
    b->numa_node = device_node(b);
    snprintf(b->name, sizeof b->name, "cuda device %d (%.100s)", ordinal,
             prop.name);
    *out = b;
    return 0;
}

/* pl_batch_wait, on the caller's thread with the loader's context pushed:
 * NULL, cudaStreamLegacy and cudaStreamPerThread then name the loader's
 * device's streams, the ones its kernels reading the batch run on. Without
 * it a thread whose current device is another would order that device's
 * default stream ("event may be from a different device than
 * stream", cudaStreamWaitEvent) and the kernels could read a half-copied
 * batch. */
int backend_cuda_stream_wait(be_stream *s, struct CUstream_st *stream)
{
    int saved;
    if (enter(s->be, &saved) < 0)
        return PL_ECUDA;
    if (is_capturing(stream)) {
        leave(s->be, saved);
        return err_set(PL_EINVAL, "pl_batch_wait: the stream is capturing a "
                                  "CUDA graph, whose replays cannot wait "
                                  "for this one batch: wait on a stream "
                                  "outside the capture (and copy the batch "
                                  "into the graph's own input buffers)");
    }
    const cudaError_t e = cudaStreamWaitEvent(stream, s->ready, 0);
    int rc = 0;
    if (e != cudaSuccess) {
        clear_error(e);
        rc = err_set(PL_ECUDA, "pl_batch_wait: cudaStreamWaitEvent: %s",
                     cudaGetErrorString(e));
    }
    leave(s->be, saved);
    return rc;
}
