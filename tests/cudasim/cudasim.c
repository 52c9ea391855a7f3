/* cudasim: the simulated CUDA runtime (see cudasim.h for what it models).
 *
 * One mutex (G.mu) guards every piece of state; it is released only while
 * a thread sleeps, copies bytes, runs a host function or a simulated
 * kernel, or waits on a condition. Every completion broadcasts G.done, on
 * which every waiter re-checks its own condition. A stream's thread waits on
 * the stream's own `cv` for work; the one callback thread on G.cb_cv. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h> /* the driver's types, for its entry points below */

#include "cudasim.h"

/* ---- the calls it exports, counted and open to faults ---- */

#define SIM_CALLS(X)                                                           \
    X(cudaGetDeviceCount)                                                      \
    X(cudaSetDevice)                                                           \
    X(cudaGetDevice)                                                           \
    X(cudaGetDeviceProperties)                                                 \
    X(cudaDeviceGetAttribute)                                                  \
    X(cudaDeviceGetPCIBusId)                                                   \
    X(cudaDeviceSynchronize)                                                   \
    X(cudaDriverGetVersion)                                                    \
    X(cudaRuntimeGetVersion)                                                   \
    X(cudaMemGetInfo)                                                          \
    X(cudaMalloc)                                                              \
    X(cudaFree)                                                                \
    X(cudaMallocHost)                                                          \
    X(cudaHostAlloc)                                                           \
    X(cudaFreeHost)                                                            \
    X(cudaMallocManaged)                                                       \
    X(cudaPointerGetAttributes)                                                \
    X(cudaMemcpy)                                                              \
    X(cudaMemcpyAsync)                                                         \
    X(cudaMemset)                                                              \
    X(cudaMemsetAsync)                                                         \
    X(cudaMemPrefetchAsync)                                                    \
    X(cudaStreamCreate)                                                        \
    X(cudaStreamCreateWithFlags)                                               \
    X(cudaStreamDestroy)                                                       \
    X(cudaStreamGetFlags)                                                      \
    X(cudaStreamQuery)                                                         \
    X(cudaStreamSynchronize)                                                   \
    X(cudaStreamWaitEvent)                                                     \
    X(cudaLaunchHostFunc)                                                      \
    X(cudaEventCreate)                                                         \
    X(cudaEventCreateWithFlags)                                                \
    X(cudaEventDestroy)                                                        \
    X(cudaEventRecord)                                                         \
    X(cudaEventQuery)                                                          \
    X(cudaEventSynchronize)                                                    \
    X(cudaEventElapsedTime)                                                    \
    X(cudaGetDriverEntryPointByVersion)                                        \
    X(cudaStreamBeginCapture)                                                  \
    X(cudaStreamEndCapture)                                                    \
    X(cudaStreamIsCapturing)                                                   \
    X(cudaThreadExchangeStreamCaptureMode)                                     \
    X(cudaGraphInstantiate)                                                    \
    X(cudaGraphLaunch)                                                         \
    X(cudaGraphExecDestroy)                                                    \
    X(cudaGraphDestroy)                                                        \
    X(cudasim_launch)                                                          \
    SIM_NVJPEG_CALLS(X)

/* The fake nvJPEG's calls (nvjpegsim.c), counted and open to faults through
 * cudasim_call. */
#define SIM_NVJPEG_CALLS(X)                                                    \
    X(nvjpegCreateExV2)                                                        \
    X(nvjpegDecoderCreate)                                                     \
    X(nvjpegDecoderStateCreate)                                                \
    X(nvjpegBufferPinnedCreateV2)                                              \
    X(nvjpegBufferDeviceCreateV2)                                              \
    X(nvjpegJpegStreamParse)                                                   \
    X(nvjpegDecodeJpegHost)                                                    \
    X(nvjpegDecodeJpegTransferToDevice)                                        \
    X(nvjpegDecodeJpegDevice)

enum {
#define X(n) F_##n,
    SIM_CALLS(X)
#undef X
        F_COUNT
};

static const char *const call_name[F_COUNT] = {
#define X(n) #n,
    SIM_CALLS(X)
#undef X
};

/* ---- objects ---- */

typedef enum mem_kind { MEM_DEVICE, MEM_PINNED, MEM_MANAGED } mem_kind;

typedef struct alloc {
    struct alloc *next;
    mem_kind kind;
    char *base;    /* what the program got */
    char *view;    /* the engine's read-write address of base */
    size_t size;   /* asked for */
    size_t mapped; /* page-rounded */
    int device;
    int on_device; /* managed: last prefetched to a device, not the CPU */
    /* page-locked: the allocating thread's memory policy during the call,
     * which decided where its pages went (get_mempolicy), or -1 */
    int policy_mode, policy_node;
    int inflight;  /* queued operations that use it */
    int freed;     /* freed while in use (CUDASIM_VIOLATION=count) */
} alloc;

typedef enum op_kind {
    OP_COPY,
    OP_MEMSET,
    OP_RECORD,
    OP_WAIT_EVENT,
    OP_WAIT_STREAM,
    OP_HOSTFN,
    OP_KERNEL,
    OP_PREFETCH,
} op_kind;

#define OP_USES 6

typedef struct op {
    struct op *next, *cb_next;
    op_kind kind;
    char *dst;
    const char *src;
    size_t n;
    int value;
    alloc *use[OP_USES];  /* memory it reads or writes */
    void (*drop)(void *); /* a kernel's: frees arg when it is not run */
    struct CUevent_st *ev;
    struct CUstream_st *other;
    uint64_t gen; /* RECORD, WAIT_EVENT: the event's record; WAIT_STREAM: a
                     submission count */
    void (*fn)(void *);
    void *arg;
    cudaError_t fail; /* an asynchronous fault: the device takes it */
    int waited;       /* a host thread waits for it and frees it */
    int done, cb_done;
    cudaError_t result;
} op;

#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455845u

/* A stream's capture (cudaStreamBeginCapture): work queued on it is kept
 * in the capture's list instead of running, until cudaStreamEndCapture
 * makes a graph of it, or says the capture was invalidated. */
typedef enum capture_state { CAP_NONE, CAP_ACTIVE, CAP_INVALIDATED } capture_state;

struct CUstream_st {
    uint32_t magic;
    int id, device, legacy;
    int per_thread; /* a thread's cudaStreamPerThread */
    unsigned flags;
    op *head, *tail;
    uint64_t submitted, completed;
    int destroyed, thread_done, refs;
    pthread_cond_t cv;
    uint64_t rng;
    capture_state cap;
    enum cudaStreamCaptureMode cap_mode; /* the mode it was begun in */
    pthread_t cap_thread;                /* the thread that began it */
    op *cap_head, *cap_tail;             /* what it captured, in order */
    struct CUstream_st *next;
};

struct CUevent_st {
    uint32_t magic;
    int device;
    unsigned flags;
    uint64_t recorded, completed; /* record generations */
    uint64_t t_ns;                /* when `completed` was reached */
    int refs, destroyed;
    /* Last recorded inside this stream's capture, not since outside one. */
    struct CUstream_st *captured;
    struct CUevent_st *next;
};

/* A captured graph, and an instantiated one: the operations in stream
 * order (one stream's capture; cross-stream capture is not modelled). */
struct CUgraph_st {
    uint32_t magic;
    op *head;
    struct CUgraph_st *next;
};
struct CUgraphExec_st {
    uint32_t magic;
    op *head;
    struct CUgraphExec_st *next;
};

typedef struct sim_device {
    cudaError_t sticky;
    struct CUstream_st *legacy;
    size_t used;
    int has_ctx;    /* the primary context exists (process-wide) */
    int ctx_retain; /* cuDevicePrimaryCtxRetain's count */
} sim_device;

/* What a CUcontext handle points to: a device's primary context. */
struct CUctx_st {
    int device;
};

typedef struct rule {
    int used, fid; /* fid -1: any call */
    unsigned long nth, seen, times, delivered;
    double p;
    cudaError_t error;
    int on_stream;
    cudaStream_t stream;
    int thread_only;
    pthread_t thread;
    int async;
} rule;

#define MAX_RULES 32

static struct {
    pthread_mutex_t mu;
    pthread_cond_t done;  /* an operation completed, a device broke */
    pthread_cond_t cb_cv; /* the callback thread has work */
    int inited;
    cudasim_config cfg;
    int paused, blocked;
    alloc *allocs;
    struct CUstream_st *streams;
    struct CUevent_st *events;
    struct CUgraph_st *graphs;
    struct CUgraphExec_st *execs;
    sim_device dev[CUDASIM_MAX_DEVICES];
    struct CUctx_st ctxs[CUDASIM_MAX_DEVICES];
    int next_stream_id;
    op *cb_head, *cb_tail;
    int cb_started;
    rule rules[MAX_RULES];
    unsigned long delivered, violations;
    unsigned long calls[F_COUNT];
    uint64_t rng;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER,
       .cb_cv = PTHREAD_COND_INITIALIZER};

/* The calling thread's CUDA state. CUDA keeps a stack of current contexts
 * per host thread ("Pushes the given context ctx onto the CPU thread's
 * stack of current contexts", cuCtxPushCurrent); the runtime works in the
 * one on top, and "If no CUcontext is current to the calling thread when a
 * CUDA Runtime API call which requires an active context is made, then the
 * primary context for a device will be selected, made current to the
 * calling thread, and initialized" (Runtime API, Interactions with the
 * CUDA Driver API): the device cudaSetDevice chose last on this thread, 0
 * if none. t_device is that choice; t_stack the contexts' devices. */
#define CTX_STACK 8
static _Thread_local int t_device;
static _Thread_local int t_stack[CTX_STACK];
static _Thread_local int t_depth;
static _Thread_local int t_in_callback;
/* "Returns the last error that has been produced by any of the runtime
 * calls in the same instance of the CUDA Runtime library in the host
 * thread and resets it to cudaSuccess" (cudaGetLastError): one pending
 * non-sticky error per host thread. Sticky errors belong to the context
 * (sim_device.sticky). */
static _Thread_local cudaError_t t_last;
/* The thread's stream capture interaction mode
 * (cudaThreadExchangeStreamCaptureMode); 0 is cudaStreamCaptureModeGlobal,
 * the default. */
static _Thread_local enum cudaStreamCaptureMode t_capmode;
/* The per-thread default stream of each device, once this thread used it. */
static _Thread_local struct CUstream_st *t_ptds[CUDASIM_MAX_DEVICES];

/* The device whose context the runtime uses now, without creating one. */
static int cur(void)
{
    return t_depth ? t_stack[t_depth - 1] : t_device;
}

/* ---- small things ---- */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15u;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static size_t page_round(size_t n)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* G.mu held. */
static void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cudasim: violation: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    G.violations++;
    if (G.cfg.abort_on_violation)
        abort();
}

/* ---- errors ---- */

static const struct {
    cudaError_t e;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError",
     "initialization error"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {cudaErrorNoDevice, "cudaErrorNoDevice",
     "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice",
     "invalid device ordinal"},
    {cudaErrorECCUncorrectable, "cudaErrorECCUncorrectable",
     "uncorrectable ECC error encountered"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout",
     "the launch timed out and was terminated"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorHardwareStackError, "cudaErrorHardwareStackError",
     "hardware stack error"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction",
     "an illegal instruction was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress",
     "misaligned address"},
    {cudaErrorInvalidAddressSpace, "cudaErrorInvalidAddressSpace",
     "operation not supported on global/shared address space"},
    {cudaErrorInvalidPc, "cudaErrorInvalidPc", "invalid program counter"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure",
     "unspecified launch failure"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking "
     "stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing "
     "stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another "
     "thread"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

#define NERRORS (sizeof errors / sizeof errors[0])

const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < NERRORS; i++)
        if (errors[i].e == e)
            return errors[i].name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < NERRORS; i++)
        if (errors[i].e == e)
            return errors[i].text;
    return "unrecognized error code";
}

/* Errors after which the context is unusable, as after a faulting kernel:
 * "This leaves the process in an inconsistent state and any further CUDA
 * work will return the same error" (cudaErrorIllegalAddress and its kind,
 * driver_types.h). They belong to the device, for every thread; any other
 * error is pending for the failing thread's cudaGetLastError alone. */
static int is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
        return 1;
    default:
        return 0;
    }
}

static cudaError_t usual_error(int fid)
{
    switch (fid) {
    case F_cudaMalloc:
    case F_cudaMallocHost:
    case F_cudaHostAlloc:
    case F_cudaMallocManaged:
    case F_cudaStreamCreate:
    case F_cudaStreamCreateWithFlags:
    case F_cudaEventCreate:
    case F_cudaEventCreateWithFlags:
    case F_nvjpegCreateExV2:
    case F_nvjpegDecoderCreate:
    case F_nvjpegDecoderStateCreate:
    case F_nvjpegBufferPinnedCreateV2:
    case F_nvjpegBufferDeviceCreateV2:
        return cudaErrorMemoryAllocation;
    case F_cudaSetDevice:
        return cudaErrorInvalidDevice;
    case F_cudaGetDeviceCount:
        return cudaErrorNoDevice;
    default:
        return cudaErrorInvalidValue;
    }
}

/* ---- configuration ---- */

static unsigned long env_ulong(const char *name, unsigned long def)
{
    const char *v = getenv(name);
    return v && *v ? strtoul(v, NULL, 0) : def;
}

static int parse_error(const char *s, cudaError_t *e)
{
    for (size_t i = 0; i < NERRORS; i++)
        if (!strcmp(errors[i].name, s)) {
            *e = errors[i].e;
            return 0;
        }
    return -1;
}

static int add_rule(const cudasim_fault *f);

/* CUDASIM_FAULTS: comma-separated "call@N[:error][:async]" (the N-th call)
 * or "call@pP[:error][:async]" (each with probability P). */
static void parse_faults(const char *spec)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        cudasim_fault f = {0};
        char *at = strchr(item, '@');
        if (!at) {
            fprintf(stderr, "cudasim: CUDASIM_FAULTS: '%s': no '@'\n", item);
            continue;
        }
        *at = '\0';
        f.call = item;
        char *save2 = NULL;
        const char *when = strtok_r(at + 1, ":", &save2);
        if (!when)
            continue;
        if (when[0] == 'p')
            f.probability = strtod(when + 1, NULL);
        else
            f.nth = strtoul(when, NULL, 10);
        for (const char *t = strtok_r(NULL, ":", &save2); t;
             t = strtok_r(NULL, ":", &save2)) {
            if (!strcmp(t, "async"))
                f.asynchronous = 1;
            else if (parse_error(t, &f.error) < 0)
                fprintf(stderr, "cudasim: CUDASIM_FAULTS: unknown '%s'\n", t);
        }
        if (add_rule(&f) < 0)
            fprintf(stderr, "cudasim: CUDASIM_FAULTS: '%s' not added\n", item);
    }
}

/* The devices' PCI addresses: CUDASIM_PCI_BUS_IDS's comma-separated ids
 * for the first devices, then the buses of a typical eight-GPU server,
 * in capitals as CUDA writes them. */
static void set_bus_ids(const char *spec)
{
    static const unsigned bus[CUDASIM_MAX_DEVICES] = {0x0D, 0x1B, 0x3B, 0x5E,
                                                      0x8A, 0x9C, 0xB7, 0xDB};
    for (int d = 0; d < CUDASIM_MAX_DEVICES; d++)
        snprintf(G.cfg.pci_bus_id[d], sizeof G.cfg.pci_bus_id[d],
                 "0000:%02X:00.0", bus[d]);
    for (int d = 0; spec && *spec && d < CUDASIM_MAX_DEVICES; d++) {
        const size_t n = strcspn(spec, ",");
        snprintf(G.cfg.pci_bus_id[d], sizeof G.cfg.pci_bus_id[d], "%.*s",
                 (int)n, spec);
        spec += n + (spec[n] == ',');
    }
}

/* G.mu held. */
static void init_locked(void)
{
    if (G.inited)
        return;
    G.inited = 1;
    G.cfg.devices = (int)env_ulong("CUDASIM_DEVICES", 2);
    if (G.cfg.devices < 0 || G.cfg.devices > CUDASIM_MAX_DEVICES)
        G.cfg.devices = 2;
    G.cfg.delay_us = (unsigned)env_ulong("CUDASIM_DELAY_US", 100);
    const char *gbs = getenv("CUDASIM_COPY_GBS");
    G.cfg.copy_gbs = gbs && *gbs ? strtod(gbs, NULL) : 0.0;
    G.cfg.seed = env_ulong("CUDASIM_SEED", 1);
    G.cfg.device_bytes = (size_t)env_ulong("CUDASIM_DEVICE_MB", 16384) << 20;
    const char *v = getenv("CUDASIM_VIOLATION");
    G.cfg.abort_on_violation = !(v && !strcmp(v, "count"));
    G.cfg.concurrent_managed = env_ulong("CUDASIM_CONCURRENT_MANAGED", 1) != 0;
    G.cfg.context_bytes = (size_t)env_ulong("CUDASIM_CONTEXT_MB", 300) << 20;
    G.cfg.exclusive_busy = (unsigned)env_ulong("CUDASIM_EXCLUSIVE_BUSY", 0);
    set_bus_ids(getenv("CUDASIM_PCI_BUS_IDS"));
    G.rng = G.cfg.seed;
    const char *faults = getenv("CUDASIM_FAULTS");
    if (faults && *faults)
        parse_faults(faults);
}

/* ---- the entry of every call ---- */

static int find_fid(const char *name)
{
    if (!name || !strcmp(name, "*"))
        return -1;
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(call_name[i], name))
            return i;
    return -2;
}

static int is_legacy(cudaStream_t s)
{
    return s == NULL || s == cudaStreamLegacy;
}

/* Whether rule r fires for this call; G.mu held. */
static int rule_fires(rule *r, int fid, int has_stream, cudaStream_t stream)
{
    if (!r->used || (r->fid >= 0 && r->fid != fid))
        return 0;
    if (r->on_stream &&
        (!has_stream ||
         (is_legacy(r->stream) ? !is_legacy(stream) : r->stream != stream)))
        return 0;
    if (r->thread_only &&
        !!pthread_equal(r->thread, pthread_self()) != (r->thread_only > 0))
        return 0;
    r->seen++;
    int fire;
    if (r->nth)
        fire = r->seen >= r->nth && r->seen < r->nth + r->times;
    else
        fire = (double)(xorshift(&G.rng) >> 11) / 9007199254740992.0 < r->p;
    if (!fire)
        return 0;
    r->delivered++;
    G.delivered++;
    if (r->times && r->delivered >= r->times)
        r->used = 0;
    return 1;
}

static void break_device(int d, cudaError_t e);

/* Creates device d's primary context if it is not yet; G.mu held. Since
 * CUDA 12, cudaSetDevice "will also immediately initialize the runtime
 * state on the primary context, and the context will be current on device
 * immediately. This function will return an error if the device is in
 * cudaComputeModeExclusiveProcess and is occupied by another process"
 * (cudaSetDevice, Runtime API). So choosing a device costs it a context:
 * device memory for its state (a few hundred MB on a real GPU:
 * CUDASIM_CONTEXT_MB, 300 by default), and cudaErrorDevicesUnavailable on
 * an exclusive-process GPU another process holds (CUDASIM_EXCLUSIVE_BUSY,
 * the mask of such devices). */
static cudaError_t make_primary(int d)
{
    if (d < 0 || d >= G.cfg.devices)
        return G.cfg.devices ? cudaErrorInvalidDevice : cudaErrorNoDevice;
    sim_device *v = &G.dev[d];
    if (v->has_ctx)
        return cudaSuccess;
    if (G.cfg.exclusive_busy & (1u << d))
        return cudaErrorDevicesUnavailable;
    if (v->used + G.cfg.context_bytes > G.cfg.device_bytes)
        return cudaErrorMemoryAllocation;
    v->has_ctx = 1;
    v->used += G.cfg.context_bytes;
    G.ctxs[d].device = d;
    return cudaSuccess;
}

/* The runtime's lazy initialisation: a call that needs a context, on a
 * thread with none current, creates (or takes) the primary context of
 * t_device and makes it current. G.mu held. */
static cudaError_t bind_ctx(void)
{
    if (t_depth)
        return cudaSuccess;
    if (G.cfg.devices == 0)
        return cudaSuccess; /* the call itself says cudaErrorNoDevice */
    const cudaError_t e = make_primary(t_device);
    if (e == cudaSuccess)
        t_stack[t_depth++] = t_device;
    return e;
}

/* The calls that need no active context (device queries, versions, the
 * entry points: none of them is documented to create one, and cudaGetDevice
 * only reports the choice); every other call is "a CUDA Runtime API call
 * which requires an active context" (see t_device) and initialises one. */
static int needs_ctx(int fid)
{
    switch (fid) {
    case F_cudaGetDeviceCount:
    case F_cudaSetDevice:
    case F_cudaGetDevice:
    case F_cudaGetDeviceProperties:
    case F_cudaDeviceGetAttribute:
    case F_cudaDeviceGetPCIBusId:
    case F_cudaDriverGetVersion:
    case F_cudaRuntimeGetVersion:
    case F_cudaPointerGetAttributes:
    case F_cudaGetDriverEntryPointByVersion:
#define NO_CTX_(n) case F_##n:
        SIM_NVJPEG_CALLS(NO_CTX_)
#undef NO_CTX_
        return 0;
    default:
        return 1;
    }
}

/* The "potentially unsafe API calls" of stream capture
 * (cudaThreadExchangeStreamCaptureMode: "some actions, such as a call to
 * cudaMalloc, may be unsafe"): in this model, the calls that allocate or
 * free memory, and those that wait for or ask about the device's progress
 * from the host (a copy that returns only once done counts too: see
 * copy_call). A call on a capturing stream itself is judged apart
 * (capture_op). */
static int unsafe_call(int fid)
{
    switch (fid) {
    case F_cudaMalloc:
    case F_cudaMallocHost:
    case F_cudaHostAlloc:
    case F_cudaMallocManaged:
    case F_cudaFree:
    case F_cudaFreeHost:
    case F_cudaMemcpy:
    case F_cudaMemset:
    case F_cudaStreamQuery:
    case F_cudaStreamSynchronize:
    case F_cudaDeviceSynchronize:
    case F_cudaEventQuery:
    case F_cudaEventSynchronize:
        return 1;
    default:
        return 0;
    }
}

/* Whether the calling thread may make a potentially unsafe call now, by
 * its mode: "cudaStreamCaptureModeGlobal: ... If the local thread has an
 * ongoing capture sequence that was not initiated with
 * cudaStreamCaptureModeRelaxed ..., or if any other thread has a concurrent
 * capture sequence initiated with cudaStreamCaptureModeGlobal, this thread
 * is prohibited from potentially unsafe API calls";
 * "cudaStreamCaptureModeThreadLocal: If the local thread has an ongoing
 * capture sequence not initiated with cudaStreamCaptureModeRelaxed, it is
 * prohibited"; "cudaStreamCaptureModeRelaxed: The local thread is not
 * prohibited" (ibid.). A prohibited call fails and invalidates the
 * captures that forbade it, as a real one does: the graph that capture
 * would have made could not be right. G.mu held. */
static cudaError_t capture_forbids(void)
{
    if (t_capmode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    const pthread_t self = pthread_self();
    int forbidden = 0;
    for (struct CUstream_st *s = G.streams; s; s = s->next) {
        if (s->cap == CAP_NONE)
            continue;
        const int mine = pthread_equal(s->cap_thread, self);
        if ((mine && s->cap_mode != cudaStreamCaptureModeRelaxed) ||
            (!mine && t_capmode == cudaStreamCaptureModeGlobal &&
             s->cap_mode == cudaStreamCaptureModeGlobal)) {
            s->cap = CAP_INVALIDATED;
            forbidden = 1;
        }
    }
    return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

/* Every exported call starts here: G.mu is taken (end() gives it back).
 * Returns the error to fail with: a call from a host function, or an
 * injected fault. *async gets an asynchronous fault's error, for the
 * operation the call queues. */
static cudaError_t begin(int fid, int has_stream, cudaStream_t stream,
                         cudaError_t *async)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    G.calls[fid]++;
    if (async)
        *async = cudaSuccess;
    if (t_in_callback)
        return cudaErrorNotPermitted;
    for (int i = 0; i < MAX_RULES; i++) {
        rule *r = &G.rules[i];
        const int async_rule = r->async;
        cudaError_t e = r->error;
        if (!rule_fires(r, fid, has_stream, stream))
            continue;
        if (async_rule && async) {
            *async = e ? e : cudaErrorIllegalAddress;
            return cudaSuccess;
        }
        if (async_rule && !e)
            e = cudaErrorIllegalAddress;
        if (!e)
            e = usual_error(fid);
        if (is_sticky(e) && cur() < G.cfg.devices)
            break_device(cur(), e);
        return e;
    }
    if (unsafe_call(fid)) {
        const cudaError_t c = capture_forbids();
        if (c != cudaSuccess)
            return c;
    }
    return needs_ctx(fid) ? bind_ctx() : cudaSuccess;
}

static cudaError_t end(cudaError_t e)
{
    pthread_mutex_unlock(&G.mu);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        t_last = e;
    return e;
}

/* The device's sticky error, if it has one; G.mu held. */
static cudaError_t ctx(int d)
{
    return G.dev[d].sticky;
}

cudaError_t cudaGetLastError(void)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    const cudaError_t sticky =
        cur() < G.cfg.devices ? G.dev[cur()].sticky : cudaSuccess;
    pthread_mutex_unlock(&G.mu);
    const cudaError_t e = sticky ? sticky : t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    const cudaError_t sticky =
        cur() < G.cfg.devices ? G.dev[cur()].sticky : cudaSuccess;
    pthread_mutex_unlock(&G.mu);
    return sticky ? sticky : t_last;
}

/* ---- memory registry ---- */

/* The allocation holding [p, p + n), or NULL for memory the sim did not
 * hand out (pageable); *bad when p is inside one but p + n is not. */
static alloc *find_alloc(const void *p, size_t n, int *bad)
{
    const char *c = p;
    *bad = 0;
    for (alloc *a = G.allocs; a; a = a->next)
        if (c >= a->base && c < a->base + (a->size ? a->size : 1)) {
            *bad = n > (size_t)(a->base + a->size - c);
            return a;
        }
    return NULL;
}

static void unmap(alloc *a)
{
    if (a->kind == MEM_DEVICE) {
        munmap(a->view, a->mapped);
        G.dev[a->device].used -= a->mapped;
    }
    munmap(a->base, a->mapped);
    free(a);
}

static void unuse(alloc *a)
{
    if (a && --a->inflight == 0 && a->freed)
        unmap(a);
}

static cudaError_t map_device(alloc *a)
{
    const int fd = memfd_create("cudasim-device", MFD_CLOEXEC);
    if (fd < 0)
        return cudaErrorMemoryAllocation;
    void *base = MAP_FAILED, *view = MAP_FAILED;
    if (ftruncate(fd, (off_t)a->mapped) == 0) {
        base = mmap(NULL, a->mapped, PROT_NONE, MAP_SHARED, fd, 0);
        view = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (base == MAP_FAILED || view == MAP_FAILED) {
        if (base != MAP_FAILED)
            munmap(base, a->mapped);
        if (view != MAP_FAILED)
            munmap(view, a->mapped);
        return cudaErrorMemoryAllocation;
    }
    memset(view, 0xCD, a->mapped); /* cudaMalloc does not clear */
    a->base = base;
    a->view = view;
    return cudaSuccess;
}

/* Page-locked memory is allocated and pinned within the call, as CUDA's
 * is (its pages faulted in: MAP_POPULATE), so the calling thread's memory
 * policy decides where they lie, as it does for cudaHostAlloc; that policy
 * is kept for cudasim_host_policy. Managed memory is faulted in as it is
 * touched. */
static cudaError_t map_host(alloc *a)
{
    a->policy_mode = a->policy_node = -1;
    if (a->kind == MEM_PINNED) {
        enum { BITS = 8 * sizeof(unsigned long) };
        unsigned long mask[1024 / BITS] = {0};
        int mode = -1;
        if (syscall(SYS_get_mempolicy, &mode, mask, 1024ul, NULL, 0ul) == 0) {
            a->policy_mode = mode;
            for (int i = 0; i < 1024 && a->policy_node < 0; i++)
                if ((mask[i / BITS] >> (i % BITS)) & 1)
                    a->policy_node = i;
        }
    }
    void *p = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS |
                       (a->kind == MEM_PINNED ? MAP_POPULATE : 0),
                   -1, 0);
    if (p == MAP_FAILED)
        return cudaErrorMemoryAllocation;
    a->base = a->view = p;
    return cudaSuccess;
}

static cudaError_t new_alloc(void **out, size_t n, mem_kind kind)
{
    if (!out)
        return cudaErrorInvalidValue;
    *out = NULL;
    if (n == 0)
        return cudaSuccess;
    const int d = cur();
    if (kind == MEM_DEVICE &&
        G.dev[d].used + page_round(n) > G.cfg.device_bytes)
        return cudaErrorMemoryAllocation;
    alloc *a = calloc(1, sizeof *a);
    if (!a)
        return cudaErrorMemoryAllocation;
    a->kind = kind;
    a->size = n;
    a->mapped = page_round(n);
    a->device = d;
    const cudaError_t e = kind == MEM_DEVICE ? map_device(a) : map_host(a);
    if (e != cudaSuccess) {
        free(a);
        return e;
    }
    if (kind == MEM_DEVICE)
        G.dev[d].used += a->mapped;
    a->next = G.allocs;
    G.allocs = a;
    *out = a->base;
    return cudaSuccess;
}

static cudaError_t free_alloc(void *p, int host, const char *call)
{
    if (!p)
        return cudaSuccess;
    alloc **pp = &G.allocs;
    while (*pp && (*pp)->base != (char *)p)
        pp = &(*pp)->next;
    alloc *a = *pp;
    if (!a || (host ? a->kind != MEM_PINNED : a->kind == MEM_PINNED))
        return cudaErrorInvalidValue;
    *pp = a->next;
    if (a->inflight) {
        violation("%s(%p): %d queued operation(s) still use this memory", call,
                  p, a->inflight);
        a->freed = 1; /* unmapped when they are done */
        return cudaSuccess;
    }
    unmap(a);
    return cudaSuccess;
}

/* ---- streams and their threads ---- */

static void maybe_free_stream(struct CUstream_st *s)
{
    if (!s->thread_done || s->refs)
        return;
    struct CUstream_st **pp = &G.streams;
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    pthread_cond_destroy(&s->cv);
    s->magic = 0;
    free(s);
}

static void event_unref(struct CUevent_st *v)
{
    if (v && --v->refs == 0) {
        v->magic = 0;
        free(v);
    }
}

static void stream_unref(struct CUstream_st *s)
{
    if (s) {
        s->refs--;
        maybe_free_stream(s);
    }
}

/* o is done (run, or dropped on a broken device): off the queue, its
 * references given back, its waiters told. G.mu held. */
static void finish(struct CUstream_st *s, op *o, cudaError_t result)
{
    s->head = o->next;
    if (!s->head)
        s->tail = NULL;
    s->completed++;
    for (int i = 0; i < OP_USES; i++)
        unuse(o->use[i]);
    if (o->kind == OP_RECORD && result == cudaSuccess &&
        o->gen > o->ev->completed) {
        o->ev->completed = o->gen;
        o->ev->t_ns = now_ns();
    }
    event_unref(o->ev);
    stream_unref(o->other);
    o->result = result;
    if (o->waited)
        o->done = 1;
    else
        free(o);
    pthread_cond_broadcast(&G.done);
}

static void break_device(int d, cudaError_t e)
{
    if (G.dev[d].sticky)
        return;
    G.dev[d].sticky = e;
    for (struct CUstream_st *s = G.streams; s; s = s->next)
        if (s->device == d)
            pthread_cond_signal(&s->cv);
    pthread_cond_broadcast(&G.done);
}

static void *callback_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&G.mu);
    for (;;) {
        while (!G.cb_head)
            pthread_cond_wait(&G.cb_cv, &G.mu);
        op *o = G.cb_head;
        G.cb_head = o->cb_next;
        if (!G.cb_head)
            G.cb_tail = NULL;
        pthread_mutex_unlock(&G.mu);
        t_in_callback = 1;
        o->fn(o->arg);
        t_in_callback = 0;
        pthread_mutex_lock(&G.mu);
        o->cb_done = 1;
        pthread_cond_broadcast(&G.done);
    }
    return NULL;
}

/* Whether what o waits for has happened (or can never happen). */
static int deps_met(const struct CUstream_st *s, const op *o)
{
    if (ctx(s->device))
        return 1;
    if (o->kind == OP_WAIT_EVENT)
        return o->ev->completed >= o->gen || ctx(o->ev->device);
    if (o->kind == OP_WAIT_STREAM)
        return o->other->completed >= o->gen || ctx(o->other->device);
    return 1;
}

static uint64_t op_delay(struct CUstream_st *s, const op *o)
{
    uint64_t ns = G.cfg.delay_us ? xorshift(&s->rng) %
                                       ((uint64_t)G.cfg.delay_us + 1) * 1000u
                                 : 0;
    if (o->kind == OP_COPY && G.cfg.copy_gbs > 0)
        ns += (uint64_t)((double)o->n / G.cfg.copy_gbs);
    return ns;
}

/* Runs o's effect; G.mu held on entry and exit, released while it works. */
static void execute(op *o)
{
    switch (o->kind) {
    case OP_COPY:
        pthread_mutex_unlock(&G.mu);
        memcpy(o->dst, o->src, o->n);
        pthread_mutex_lock(&G.mu);
        break;
    case OP_MEMSET:
        pthread_mutex_unlock(&G.mu);
        memset(o->dst, o->value, o->n);
        pthread_mutex_lock(&G.mu);
        break;
    case OP_KERNEL:
        pthread_mutex_unlock(&G.mu);
        t_in_callback = 1;
        o->fn(o->arg);
        t_in_callback = 0;
        pthread_mutex_lock(&G.mu);
        break;
    case OP_HOSTFN:
        if (!G.cb_started) {
            pthread_t t;
            if (pthread_create(&t, NULL, callback_main, NULL) != 0) {
                fputs("cudasim: cannot start the callback thread\n", stderr);
                abort();
            }
            pthread_detach(t);
            G.cb_started = 1;
        }
        o->cb_next = NULL;
        if (G.cb_tail)
            G.cb_tail->cb_next = o;
        else
            G.cb_head = o;
        G.cb_tail = o;
        pthread_cond_signal(&G.cb_cv);
        while (!o->cb_done)
            pthread_cond_wait(&G.done, &G.mu);
        break;
    default: /* events, waits and prefetches act in finish() or not at all */
        break;
    }
}

static void *stream_main(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&G.mu);
    for (;;) {
        if (!s->head) {
            if (s->destroyed)
                break;
            pthread_cond_wait(&s->cv, &G.mu);
            continue;
        }
        if (G.paused && !ctx(s->device)) {
            pthread_cond_wait(&s->cv, &G.mu);
            continue;
        }
        op *o = s->head;
        if (!ctx(s->device)) {
            const uint64_t ns = op_delay(s, o);
            if (ns) {
                pthread_mutex_unlock(&G.mu);
                sleep_ns(ns);
                pthread_mutex_lock(&G.mu);
            }
        }
        while (!deps_met(s, o))
            pthread_cond_wait(&G.done, &G.mu);
        if (o->fail && !ctx(s->device))
            break_device(s->device, o->fail);
        if (ctx(s->device)) { /* dropped: host functions are not called */
            if (o->drop)
                o->drop(o->arg);
            finish(s, o, ctx(s->device));
            continue;
        }
        execute(o);
        finish(s, o, cudaSuccess);
    }
    s->thread_done = 1;
    maybe_free_stream(s);
    pthread_mutex_unlock(&G.mu);
    return NULL;
}

static cudaError_t new_stream(int device, unsigned flags, int legacy,
                              struct CUstream_st **out)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return cudaErrorMemoryAllocation;
    s->magic = STREAM_MAGIC;
    s->id = G.next_stream_id++;
    s->device = device;
    s->legacy = legacy;
    s->flags = flags;
    s->rng = G.cfg.seed * 0x9E3779B97F4A7C15u + (uint64_t)s->id + 1;
    pthread_cond_init(&s->cv, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, stream_main, s) != 0) {
        pthread_cond_destroy(&s->cv);
        free(s);
        return cudaErrorMemoryAllocation;
    }
    pthread_detach(t);
    s->next = G.streams;
    G.streams = s;
    *out = s;
    return cudaSuccess;
}

/* The stream a handle names: the device's legacy stream for NULL. */
static cudaError_t get_stream(cudaStream_t h, struct CUstream_st **out)
{
    const int dv = cur();
    if ((h == cudaStreamPerThread || is_legacy(h)) && dv >= G.cfg.devices)
        return cudaErrorNoDevice;
    /* "The per-thread default stream is not a non-blocking stream and will
     * synchronize with the legacy default stream if both are used in a
     * program"; it "does not synchronize with other streams, just like
     * explicitly created streams" (Stream synchronization behavior, CUDA
     * Runtime and Driver API): a blocking stream of the current device, one
     * per host thread, which the handle names only on that thread. */
    if (h == cudaStreamPerThread) {
        if (!t_ptds[dv]) {
            const cudaError_t e =
                new_stream(dv, cudaStreamDefault, 0, &t_ptds[dv]);
            if (e != cudaSuccess)
                return e;
            t_ptds[dv]->per_thread = 1;
            t_ptds[dv]->refs++; /* the thread's, never given back */
        }
        *out = t_ptds[dv];
        return cudaSuccess;
    }
    /* NULL and cudaStreamLegacy name "an implicit stream which synchronizes
     * with all other streams in the same CUcontext except for non-blocking
     * streams" (Stream synchronization behavior): the legacy stream of the
     * context current to the calling thread, whatever device that is. */
    if (is_legacy(h)) {
        sim_device *d = &G.dev[dv];
        if (!d->legacy) {
            const cudaError_t e =
                new_stream(dv, cudaStreamDefault, 1, &d->legacy);
            if (e != cudaSuccess)
                return e;
        }
        *out = d->legacy;
        return cudaSuccess;
    }
    for (struct CUstream_st *s = G.streams; s; s = s->next)
        if (s == h && !s->destroyed && !s->legacy && !s->per_thread) {
            *out = s;
            return cudaSuccess;
        }
    return cudaErrorInvalidResourceHandle;
}

static op *new_op(op_kind kind)
{
    op *o = calloc(1, sizeof *o);
    if (o)
        o->kind = kind;
    return o;
}

static void push(struct CUstream_st *s, op *o)
{
    o->next = NULL;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->submitted++;
    pthread_cond_signal(&s->cv);
}

/* The legacy default stream waits for the work already queued on every
 * blocking stream of its device, and a blocking stream for the work already
 * queued on the legacy stream. */
static cudaError_t implicit_sync(struct CUstream_st *s)
{
    if (s->flags & cudaStreamNonBlocking)
        return cudaSuccess;
    for (struct CUstream_st *t = G.streams; t; t = t->next) {
        const int other = s->legacy ? !t->legacy && t->device == s->device &&
                                          !(t->flags & cudaStreamNonBlocking)
                                    : t == G.dev[s->device].legacy;
        if (!other || t == s || t->completed >= t->submitted)
            continue;
        op *w = new_op(OP_WAIT_STREAM);
        if (!w)
            return cudaErrorMemoryAllocation;
        w->other = t;
        w->gen = t->submitted;
        t->refs++;
        push(s, w);
    }
    return cudaSuccess;
}

/* o, queued on a capturing stream, joins the capture instead of running.
 * What cannot be captured fails and invalidates the capture: a call that
 * would wait on the host for its own operation, and a wait for an event
 * not recorded in this capture (a cross-stream or external dependency,
 * which this model does not capture). G.mu held; o is the caller's to free
 * on failure. */
static cudaError_t capture_op(struct CUstream_st *s, op *o)
{
    if (s->cap == CAP_INVALIDATED)
        return cudaErrorStreamCaptureInvalidated;
    if (o->waited) {
        s->cap = CAP_INVALIDATED;
        return cudaErrorStreamCaptureUnsupported;
    }
    if (o->kind == OP_WAIT_EVENT && o->ev->captured != s) {
        s->cap = CAP_INVALIDATED;
        return cudaErrorStreamCaptureIsolation;
    }
    o->next = NULL;
    if (s->cap_tail)
        s->cap_tail->next = o;
    else
        s->cap_head = o;
    s->cap_tail = o;
    return cudaSuccess;
}

static cudaError_t enqueue(struct CUstream_st *s, op *o)
{
    if (s->cap != CAP_NONE)
        return capture_op(s, o);
    const cudaError_t e = implicit_sync(s);
    if (e != cudaSuccess)
        return e;
    for (int i = 0; i < OP_USES; i++)
        if (o->use[i])
            o->use[i]->inflight++;
    push(s, o);
    return cudaSuccess;
}

/* Waits, G.mu held, until `done` says so or the device breaks. A broken
 * device's error wins even when `done` holds: its streams complete what
 * they drop, so being done does not mean the work ran. */
static cudaError_t wait_until(int (*done)(const void *), const void *arg,
                              int device)
{
    G.blocked++;
    while (!done(arg) && !ctx(device))
        pthread_cond_wait(&G.done, &G.mu);
    G.blocked--;
    return ctx(device);
}

/* Queues o on s and returns once it has run, for a synchronous call. */
static cudaError_t run_sync(struct CUstream_st *s, op *o)
{
    o->waited = 1;
    cudaError_t e = enqueue(s, o);
    if (e != cudaSuccess) {
        free(o);
        return e;
    }
    G.blocked++;
    while (!o->done)
        pthread_cond_wait(&G.done, &G.mu);
    G.blocked--;
    e = o->result;
    free(o);
    return e;
}

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = begin(F_cudaGetDeviceCount, 0, NULL, NULL);
    if (e == cudaSuccess && !count)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        *count = G.cfg.devices;
        if (G.cfg.devices == 0)
            e = cudaErrorNoDevice;
    } else if (count) {
        *count = 0;
    }
    return end(e);
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = begin(F_cudaSetDevice, 0, NULL, NULL);
    if (e == cudaSuccess && G.cfg.devices == 0)
        e = cudaErrorNoDevice;
    else if (e == cudaSuccess && (device < 0 || device >= G.cfg.devices))
        e = cudaErrorInvalidDevice;
    /* CUDA 12: the device's primary context is created and made current
     * at once (see make_primary), replacing the thread's current one. */
    if (e == cudaSuccess)
        e = make_primary(device);
    if (e == cudaSuccess) {
        t_device = device;
        if (t_depth)
            t_stack[t_depth - 1] = device;
        else
            t_stack[t_depth++] = device;
    }
    return end(e);
}

cudaError_t cudaGetDevice(int *device)
{
    cudaError_t e = begin(F_cudaGetDevice, 0, NULL, NULL);
    if (e == cudaSuccess && !device)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess && G.cfg.devices == 0)
        e = cudaErrorNoDevice;
    if (e == cudaSuccess)
        *device = cur(); /* creates nothing */
    return end(e);
}

static cudaError_t check_device(int device)
{
    if (G.cfg.devices == 0)
        return cudaErrorNoDevice;
    return device < 0 || device >= G.cfg.devices ? cudaErrorInvalidDevice
                                                 : cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    cudaError_t e = begin(F_cudaGetDeviceProperties, 0, NULL, NULL);
    if (e == cudaSuccess && !prop)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = check_device(device);
    if (e == cudaSuccess) {
        memset(prop, 0, sizeof *prop);
        snprintf(prop->name, sizeof prop->name, "simulated");
        prop->totalGlobalMem = G.cfg.device_bytes;
        prop->warpSize = 32;
        prop->maxThreadsPerBlock = 1024;
        prop->major = 9;
        prop->minor = 0;
        prop->multiProcessorCount = 132;
        prop->asyncEngineCount = 2;
        prop->unifiedAddressing = 1;
        prop->managedMemory = 1;
        prop->concurrentManagedAccess = G.cfg.concurrent_managed;
        prop->pciDeviceID = device;
    }
    return end(e);
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                   int device)
{
    cudaError_t e = begin(F_cudaDeviceGetAttribute, 0, NULL, NULL);
    if (e == cudaSuccess && !value)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = check_device(device);
    if (e != cudaSuccess)
        return end(e);
    switch (attr) {
    case cudaDevAttrClockRate:
        *value = 1980000; /* kHz */
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = 132;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = 9;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = 0;
        break;
    case cudaDevAttrWarpSize:
        *value = 32;
        break;
    case cudaDevAttrMaxThreadsPerBlock:
        *value = 1024;
        break;
    case cudaDevAttrAsyncEngineCount:
        *value = 2;
        break;
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrManagedMemory:
        *value = 1;
        break;
    case cudaDevAttrConcurrentManagedAccess:
        *value = G.cfg.concurrent_managed;
        break;
    default:
        fprintf(stderr,
                "cudasim: cudaDeviceGetAttribute(%d) is not "
                "simulated\n",
                (int)attr);
        e = cudaErrorNotSupported;
    }
    return end(e);
}

/* "Returns an ASCII string identifying the device dev in the
 * NULL-terminated string pointed to by pciBusId. len specifies the maximum
 * length of the string that may be returned", "[domain]:[bus]:[device].
 * [function] where domain, bus, device, and function are all hexadecimal
 * values" (cudaDeviceGetPCIBusId); the device's own, from the settings. */
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    cudaError_t e = begin(F_cudaDeviceGetPCIBusId, 0, NULL, NULL);
    if (e == cudaSuccess && (!pciBusId || len <= 0))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = check_device(device);
    if (e == cudaSuccess)
        snprintf(pciBusId, (size_t)len, "%s", G.cfg.pci_bus_id[device]);
    return end(e);
}

cudaError_t cudaDriverGetVersion(int *v)
{
    cudaError_t e = begin(F_cudaDriverGetVersion, 0, NULL, NULL);
    if (e == cudaSuccess && !v)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        *v = CUDART_VERSION;
    return end(e);
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    cudaError_t e = begin(F_cudaRuntimeGetVersion, 0, NULL, NULL);
    if (e == cudaSuccess && !v)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        *v = CUDART_VERSION;
    return end(e);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    cudaError_t e = begin(F_cudaMemGetInfo, 0, NULL, NULL);
    if (e == cudaSuccess && (!free_bytes || !total))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = check_device(cur());
    if (e == cudaSuccess)
        e = ctx(cur());
    if (e == cudaSuccess) {
        *total = G.cfg.device_bytes;
        *free_bytes = G.cfg.device_bytes - G.dev[cur()].used;
    }
    return end(e);
}

/* ---- memory ---- */

/* The checks every allocating call makes; G.mu held. */
static cudaError_t can_allocate(void)
{
    const cudaError_t e = check_device(cur());
    return e != cudaSuccess ? e : ctx(cur());
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    cudaError_t e = begin(F_cudaMalloc, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_DEVICE);
    return end(e);
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
    cudaError_t e = begin(F_cudaMallocHost, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_PINNED);
    return end(e);
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    cudaError_t e = begin(F_cudaHostAlloc, 0, NULL, NULL);
    if (e == cudaSuccess && (flags & ~0xFu))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_PINNED);
    return end(e);
}

cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
    cudaError_t e = begin(F_cudaMallocManaged, 0, NULL, NULL);
    if (e == cudaSuccess && flags != cudaMemAttachGlobal &&
        flags != cudaMemAttachHost)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_MANAGED);
    return end(e);
}

cudaError_t cudaFree(void *p)
{
    cudaError_t e = begin(F_cudaFree, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = free_alloc(p, 0, "cudaFree");
    return end(e);
}

cudaError_t cudaFreeHost(void *p)
{
    cudaError_t e = begin(F_cudaFreeHost, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = free_alloc(p, 1, "cudaFreeHost");
    return end(e);
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *at,
                                     const void *p)
{
    cudaError_t e = begin(F_cudaPointerGetAttributes, 0, NULL, NULL);
    if (e == cudaSuccess && !at)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        int bad;
        const alloc *a = find_alloc(p, 0, &bad);
        memset(at, 0, sizeof *at);
        at->device = a ? a->device : -2;
        if (!a) {
            at->type = cudaMemoryTypeUnregistered;
        } else if (a->kind == MEM_DEVICE) {
            at->type = cudaMemoryTypeDevice;
            at->devicePointer = (void *)p;
        } else {
            at->type = a->kind == MEM_PINNED ? cudaMemoryTypeHost
                                             : cudaMemoryTypeManaged;
            at->devicePointer = at->hostPointer = (void *)p;
        }
    }
    return end(e);
}

/* One end of a copy. */
typedef struct endpoint {
    alloc *a;
    char *engine; /* where the engine reads or writes it */
    int device;   /* device memory (not host-addressable) */
    int pageable; /* host memory CUDA cannot DMA from directly */
} endpoint;

static cudaError_t resolve(const void *p, size_t n, endpoint *e)
{
    if (!p)
        return cudaErrorInvalidValue;
    int bad;
    e->a = find_alloc(p, n, &bad);
    if (bad)
        return cudaErrorInvalidValue;
    e->engine = e->a ? e->a->view + ((const char *)p - e->a->base) : (char *)p;
    e->device = e->a && e->a->kind == MEM_DEVICE;
    e->pageable = !e->a || e->a->kind == MEM_MANAGED;
    return cudaSuccess;
}

/* Builds the copy op; [out] *sync: the host must wait for it. */
static cudaError_t make_copy(void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind kind, op **out, int *sync)
{
    endpoint d, s;
    cudaError_t e = resolve(dst, n, &d);
    if (e == cudaSuccess)
        e = resolve(src, n, &s);
    if (e != cudaSuccess)
        return e;
    const int d_dev = d.device || (d.a && d.a->kind == MEM_MANAGED);
    const int s_dev = s.device || (s.a && s.a->kind == MEM_MANAGED);
    /* "Calling cudaMemcpy() with dst and src pointers that do not match the
     * direction of the copy results in an undefined behavior" (cudaMemcpy,
     * Runtime API). Managed memory last prefetched to a device is device
     * memory for that rule; "Passing cudaMemcpyDefault is recommended, in
     * which case the type of transfer is inferred from the pointer values"
     * (ibid.). */
    if (kind == cudaMemcpyHostToDevice && s.a && s.a->kind == MEM_MANAGED &&
        s.a->on_device)
        violation("cudaMemcpy*(HostToDevice) from managed memory at %p "
                  "prefetched to device %d: the direction does not match "
                  "(undefined behaviour; use cudaMemcpyDefault)",
                  src, s.a->device);
    switch (kind) {
    case cudaMemcpyHostToDevice:
        e = d_dev && !s.device ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyDeviceToHost:
        e = s_dev && !d.device ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyDeviceToDevice:
        e = d_dev && s_dev ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyHostToHost:
        e = !d.device && !s.device ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyDefault:
        break;
    default:
        e = cudaErrorInvalidMemcpyDirection;
    }
    if (e != cudaSuccess)
        return e;
    op *o = new_op(OP_COPY);
    if (!o)
        return cudaErrorMemoryAllocation;
    o->dst = d.engine;
    o->src = s.engine;
    o->n = n;
    o->use[0] = d.a;
    o->use[1] = s.a;
    /* Host-to-host, or through pageable or managed host memory: the call
     * returns once the copy is done. */
    *sync = (!d.device && !s.device) || (!d.device && d.pageable) ||
            (!s.device && s.pageable);
    *out = o;
    return cudaSuccess;
}

static cudaError_t submit(struct CUstream_st *s, op *o, int sync)
{
    if (sync)
        return run_sync(s, o);
    const cudaError_t e = enqueue(s, o);
    if (e != cudaSuccess)
        free(o);
    return e;
}

static cudaError_t copy_call(int fid, void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind kind, cudaStream_t stream,
                             int force_sync)
{
    cudaError_t async;
    cudaError_t e = begin(fid, 1, stream, &async);
    struct CUstream_st *s = NULL;
    op *o = NULL;
    int sync = 0;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    if (e == cudaSuccess && n == 0)
        return end(cudaSuccess);
    if (e == cudaSuccess)
        e = make_copy(dst, src, n, kind, &o, &sync);
    /* An asynchronous call that returns only once its copy is done (from
     * pageable memory) waits on the host, as the unsafe calls do. */
    if (e == cudaSuccess && sync && !force_sync && s->cap == CAP_NONE &&
        (e = capture_forbids()) != cudaSuccess)
        free(o);
    if (e == cudaSuccess) {
        o->fail = async;
        e = submit(s, o, sync || force_sync);
    }
    return end(e);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                            enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_call(F_cudaMemcpyAsync, dst, src, n, kind, stream, 0);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                       enum cudaMemcpyKind kind)
{
    return copy_call(F_cudaMemcpy, dst, src, n, kind, NULL, 1);
}

static cudaError_t memset_call(int fid, void *p, int value, size_t n,
                               cudaStream_t stream, int sync)
{
    cudaError_t async;
    cudaError_t e = begin(fid, 1, stream, &async);
    struct CUstream_st *s = NULL;
    endpoint d;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    if (e == cudaSuccess && n == 0)
        return end(cudaSuccess);
    if (e == cudaSuccess)
        e = resolve(p, n, &d);
    if (e == cudaSuccess && !d.a)
        e = cudaErrorInvalidValue; /* not device memory */
    op *o = NULL;
    if (e == cudaSuccess && !(o = new_op(OP_MEMSET)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->dst = d.engine;
        o->value = value;
        o->n = n;
        o->use[0] = d.a;
        o->fail = async;
        e = submit(s, o, sync);
    }
    return end(e);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t stream)
{
    return memset_call(F_cudaMemsetAsync, p, value, n, stream, 0);
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return memset_call(F_cudaMemset, p, value, n, NULL, 1);
}

#if CUDART_VERSION >= 13000
cudaError_t cudaMemPrefetchAsync(const void *p, size_t n,
                                 struct cudaMemLocation loc, unsigned int flags,
                                 cudaStream_t stream)
{
    const int to_device = loc.type == cudaMemLocationTypeDevice;
    const int target = loc.id;
#else
cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, int target,
                                 cudaStream_t stream)
{
    const unsigned flags = 0;
    const int to_device = target != cudaCpuDeviceId;
#endif
    cudaError_t async;
    cudaError_t e = begin(F_cudaMemPrefetchAsync, 1, stream, &async);
    struct CUstream_st *s = NULL;
    int bad = 0;
    alloc *a = NULL;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    if (e == cudaSuccess) {
        a = find_alloc(p, n, &bad);
        if (!a || a->kind != MEM_MANAGED || bad || flags != 0)
            e = cudaErrorInvalidValue;
        else if (to_device && check_device(target) != cudaSuccess)
            e = cudaErrorInvalidDevice;
    }
    op *o = NULL;
    if (e == cudaSuccess && !(o = new_op(OP_PREFETCH)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->use[0] = a;
        o->fail = async;
        e = submit(s, o, 0);
    }
    if (e == cudaSuccess) /* later calls see it where stream order puts it */
        a->on_device = to_device;
    return end(e);
}

/* ---- streams ---- */

static cudaError_t create_stream(int fid, cudaStream_t *out, unsigned flags)
{
    cudaError_t e = begin(fid, 0, NULL, NULL);
    if (e == cudaSuccess && (!out || (flags & ~1u)))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = can_allocate();
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = new_stream(cur(), flags, 0, &s);
    if (e == cudaSuccess)
        *out = s;
    return end(e);
}

cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    return create_stream(F_cudaStreamCreate, out, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    return create_stream(F_cudaStreamCreateWithFlags, out, flags);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    cudaError_t e = begin(F_cudaStreamDestroy, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess &&
        (is_legacy(stream) || stream == cudaStreamPerThread))
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess) {
        /* Queued work still runs; the thread ends after it. */
        s->destroyed = 1;
        pthread_cond_signal(&s->cv);
        e = ctx(s->device);
    }
    return end(e);
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags)
{
    cudaError_t e = begin(F_cudaStreamGetFlags, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess && !flags)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        *flags = s->flags;
    return end(e);
}

typedef struct stream_target {
    const struct CUstream_st *s;
    uint64_t upto;
} stream_target;

static int stream_reached(const void *arg)
{
    const stream_target *t = arg;
    return t->s->completed >= t->upto;
}

/* The streams a synchronisation of s must wait for, s first: for the
 * legacy stream, every blocking stream of its device too; for a device
 * synchronisation (s NULL), every stream of `device`. Each holds a
 * reference until unref_targets. */
static int collect_targets(struct CUstream_st *s, int device,
                           stream_target **out)
{
    int n = 0;
    for (struct CUstream_st *t = G.streams; t; t = t->next)
        n++;
    stream_target *v = calloc((size_t)n + 1, sizeof *v);
    if (!v)
        return -1;
    int k = 0;
    for (struct CUstream_st *t = G.streams; t; t = t->next) {
        const int want = s ? t == s || (s->legacy && t->device == s->device &&
                                        !(t->flags & cudaStreamNonBlocking))
                           : t->device == device;
        if (want) {
            t->refs++;
            v[k++] = (stream_target){t, t->submitted};
        }
    }
    *out = v;
    return k;
}

static void unref_targets(stream_target *v, int n)
{
    for (int i = 0; i < n; i++)
        stream_unref((struct CUstream_st *)v[i].s);
    free(v);
}

/* Asking whether a capturing stream is done, or waiting for it, conflicts
 * with its capture in every mode ("It is invalid to synchronize or query
 * the execution status of a stream which is being captured"): it fails,
 * and the capture is invalidated. G.mu held. */
static cudaError_t capture_conflict(struct CUstream_st *s)
{
    if (s->cap == CAP_NONE)
        return cudaSuccess;
    s->cap = CAP_INVALIDATED;
    return cudaErrorStreamCaptureUnsupported;
}

static cudaError_t wait_streams(struct CUstream_st *s, int device)
{
    stream_target *v;
    const int n = collect_targets(s, device, &v);
    if (n < 0)
        return cudaErrorMemoryAllocation;
    cudaError_t e = ctx(device); /* with no stream to wait for too */
    for (int i = 0; i < n && e == cudaSuccess; i++)
        e = wait_until(stream_reached, &v[i], v[i].s->device);
    unref_targets(v, n);
    return e;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    cudaError_t e = begin(F_cudaStreamSynchronize, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = capture_conflict(s);
    if (e == cudaSuccess)
        e = wait_streams(s, s->device);
    return end(e);
}

cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = begin(F_cudaDeviceSynchronize, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = check_device(cur());
    for (struct CUstream_st *t = G.streams; t && e == cudaSuccess; t = t->next)
        if (t->device == cur())
            e = capture_conflict(t);
    if (e == cudaSuccess)
        e = wait_streams(NULL, cur());
    return end(e);
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    cudaError_t e = begin(F_cudaStreamQuery, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = capture_conflict(s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    if (e == cudaSuccess && s->completed < s->submitted)
        e = cudaErrorNotReady;
    return end(e);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *arg)
{
    cudaError_t async;
    cudaError_t e = begin(F_cudaLaunchHostFunc, 1, stream, &async);
    struct CUstream_st *s = NULL;
    op *o = NULL;
    if (e == cudaSuccess && !fn)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    if (e == cudaSuccess && !(o = new_op(OP_HOSTFN)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->fn = fn;
        o->arg = arg;
        o->fail = async;
        e = submit(s, o, 0);
    }
    return end(e);
}

cudaError_t cudasim_launch(cudaStream_t stream, void (*fn)(void *), void *arg,
                           const void *reads, size_t n)
{
    const void *mem[1] = {reads};
    const size_t bytes[1] = {n};
    return cudasim_launch_n(stream, fn, arg, NULL, mem, bytes,
                            reads && n ? 1 : 0);
}

cudaError_t cudasim_launch_n(cudaStream_t stream, void (*fn)(void *), void *arg,
                             void (*drop)(void *), const void *const *mem,
                             const size_t *n, int count)
{
    cudaError_t async;
    cudaError_t e = begin(F_cudasim_launch, 1, stream, &async);
    struct CUstream_st *s = NULL;
    endpoint r[OP_USES];
    memset(r, 0, sizeof r);
    op *o = NULL;
    if (e == cudaSuccess && (!fn || count < 0 || count > OP_USES))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    /* An argument the operation owns cannot be replayed by a graph. */
    if (e == cudaSuccess && drop && s->cap != CAP_NONE)
        e = cudaErrorStreamCaptureUnsupported;
    for (int i = 0; i < count && e == cudaSuccess; i++)
        if (mem[i] && n[i])
            e = resolve(mem[i], n[i], &r[i]);
    if (e == cudaSuccess && !(o = new_op(OP_KERNEL)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->fn = fn;
        o->arg = arg;
        o->drop = drop;
        for (int i = 0; i < count; i++)
            o->use[i] = r[i].a;
        o->fail = async;
        e = submit(s, o, 0);
    }
    return end(e);
}

cudaError_t cudasim_call(const char *name)
{
    const int fid = find_fid(name);
    if (fid < 0)
        return cudaErrorInvalidValue;
    /* begin() counts it and delivers a rule's fault; the error is the
     * caller's to report in its own terms, not a runtime error left
     * pending on the thread. */
    const cudaError_t e = begin(fid, 0, NULL, NULL);
    pthread_mutex_unlock(&G.mu);
    return e;
}

int cudasim_inflight(const void *p)
{
    pthread_mutex_lock(&G.mu);
    int bad;
    const alloc *a = find_alloc(p, 0, &bad);
    const int n = a ? a->inflight : 0;
    pthread_mutex_unlock(&G.mu);
    return n;
}

void cudasim_violation(const char *what)
{
    pthread_mutex_lock(&G.mu);
    violation("%s", what);
    pthread_mutex_unlock(&G.mu);
}

/* ---- events ---- */

static cudaError_t get_event(cudaEvent_t h, struct CUevent_st **out)
{
    for (struct CUevent_st *v = G.events; v; v = v->next)
        if (v == h) {
            *out = v;
            return cudaSuccess;
        }
    return cudaErrorInvalidResourceHandle;
}

static cudaError_t create_event(int fid, cudaEvent_t *out, unsigned flags)
{
    cudaError_t e = begin(fid, 0, NULL, NULL);
    const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming;
    if (e == cudaSuccess && (!out || (flags & ~known)))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = can_allocate();
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess && !(v = calloc(1, sizeof *v)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        v->magic = EVENT_MAGIC;
        v->device = cur();
        v->flags = flags;
        v->refs = 1;
        v->next = G.events;
        G.events = v;
        *out = v;
    }
    return end(e);
}

cudaError_t cudaEventCreate(cudaEvent_t *out)
{
    return create_event(F_cudaEventCreate, out, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
    return create_event(F_cudaEventCreateWithFlags, out, flags);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    cudaError_t e = begin(F_cudaEventDestroy, 0, NULL, NULL);
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess) {
        struct CUevent_st **pp = &G.events;
        while (*pp != v)
            pp = &(*pp)->next;
        *pp = v->next;
        v->destroyed = 1;
        event_unref(v); /* pending records and waits keep it */
        e = ctx(cur() < G.cfg.devices ? cur() : 0);
    }
    return end(e);
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream)
{
    cudaError_t async;
    cudaError_t e = begin(F_cudaEventRecord, 1, stream, &async);
    struct CUstream_st *s = NULL;
    struct CUevent_st *v = NULL;
    op *o = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    /* "event and stream must be on the same CUDA context" (cudaEventRecord,
     * Runtime API): a record is judged on the device of the stream it
     * names, which for NULL and cudaStreamPerThread is the calling thread's
     * current one. */
    if (e == cudaSuccess && v->device != s->device)
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess && !(o = new_op(OP_RECORD)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess && s->cap != CAP_NONE) {
        /* Into the capture: the event is recorded when a launch of the
         * graph reaches it, not now. */
        o->ev = v;
        v->refs++;
        e = capture_op(s, o);
        if (e == cudaSuccess)
            v->captured = s;
        else {
            event_unref(v);
            free(o);
        }
    } else if (e == cudaSuccess) {
        o->ev = v;
        o->gen = ++v->recorded;
        v->captured = NULL;
        v->refs++;
        o->fail = async;
        e = enqueue(s, o);
        if (e != cudaSuccess) {
            v->recorded--;
            event_unref(v);
            free(o);
        }
    }
    return end(e);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t ev,
                                unsigned int flags)
{
    cudaError_t async;
    cudaError_t e = begin(F_cudaStreamWaitEvent, 1, stream, &async);
    struct CUstream_st *s = NULL;
    struct CUevent_st *v = NULL;
    op *o = NULL;
    if (e == cudaSuccess && flags != 0)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    /* A stream outside capture waiting for an event recorded inside one
     * would join that capture in CUDA; not modelled. */
    if (e == cudaSuccess && s->cap == CAP_NONE && v->captured)
        e = cudaErrorCapturedEvent;
    if (e == cudaSuccess && v->recorded == 0 && v->captured != s)
        return end(cudaSuccess); /* never recorded: nothing to wait for */
    /* "event may be from a different device than stream"
     * (cudaStreamWaitEvent, Runtime API): a wait on another device's event
     * succeeds, and orders only the stream it names, which for NULL and
     * cudaStreamPerThread is of the calling thread's current device. */
    if (e == cudaSuccess && !(o = new_op(OP_WAIT_EVENT)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->ev = v;
        o->gen = v->recorded;
        v->refs++;
        o->fail = async;
        e = enqueue(s, o);
        if (e != cudaSuccess) {
            event_unref(v);
            free(o);
        }
    }
    return end(e);
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    cudaError_t e = begin(F_cudaEventQuery, 0, NULL, NULL);
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess)
        e = ctx(v->device);
    if (e == cudaSuccess && v->captured)
        e = cudaErrorCapturedEvent; /* "last recorded inside a capture" */
    if (e == cudaSuccess && v->completed < v->recorded)
        e = cudaErrorNotReady;
    return end(e);
}

typedef struct event_target {
    const struct CUevent_st *v;
    uint64_t gen;
} event_target;

static int event_reached(const void *arg)
{
    const event_target *t = arg;
    return t->v->completed >= t->gen;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    cudaError_t e = begin(F_cudaEventSynchronize, 0, NULL, NULL);
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess && v->captured)
        e = cudaErrorCapturedEvent;
    if (e == cudaSuccess) {
        const event_target t = {v, v->recorded};
        v->refs++;
        e = wait_until(event_reached, &t, v->device);
        event_unref(v);
    }
    return end(e);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t e = begin(F_cudaEventElapsedTime, 0, NULL, NULL);
    struct CUevent_st *x = NULL, *y = NULL;
    if (e == cudaSuccess && !ms)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_event(a, &x);
    if (e == cudaSuccess)
        e = get_event(b, &y);
    if (e == cudaSuccess)
        e = ctx(x->device);
    if (e == cudaSuccess && (!x->recorded || !y->recorded ||
                             ((x->flags | y->flags) & cudaEventDisableTiming)))
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess &&
        (x->completed < x->recorded || y->completed < y->recorded))
        e = cudaErrorNotReady;
    if (e == cudaSuccess)
        *ms = (float)(((double)y->t_ns - (double)x->t_ns) / 1e6);
    return end(e);
}

/* ---- stream capture and graphs ----
 *
 * One stream's capture, in the modes CUDA has, with the rules of
 * cudaThreadExchangeStreamCaptureMode (capture_forbids) and of the calls
 * that conflict with a capture in any mode (capture_conflict,
 * capture_op). A graph is the captured operations in order; a launch
 * queues a copy of each on the stream it names. */

static void free_ops(op *o)
{
    while (o) {
        op *next = o->next;
        event_unref(o->ev);
        free(o);
        o = next;
    }
}

/* A copy of captured operation g, to keep in an executable graph or to
 * queue; NULL when out of memory. */
static op *clone_op(const op *g)
{
    op *o = new_op(g->kind);
    if (!o)
        return NULL;
    o->dst = g->dst;
    o->src = g->src;
    o->n = g->n;
    o->value = g->value;
    for (int i = 0; i < OP_USES; i++)
        o->use[i] = g->use[i];
    o->fn = g->fn;
    o->arg = g->arg;
    o->ev = g->ev;
    if (o->ev)
        o->ev->refs++;
    return o;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   enum cudaStreamCaptureMode mode)
{
    cudaError_t e = begin(F_cudaStreamBeginCapture, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    /* "Capture may not be initiated if stream is cudaStreamLegacy" */
    if (e == cudaSuccess && is_legacy(stream))
        e = cudaErrorStreamCaptureUnsupported;
    if (e == cudaSuccess && (unsigned)mode > cudaStreamCaptureModeRelaxed)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    /* "it may only be initiated if the stream is not already in capture
     * mode" */
    if (e == cudaSuccess && s->cap != CAP_NONE)
        e = cudaErrorIllegalState;
    if (e == cudaSuccess) {
        s->cap = CAP_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_head = s->cap_tail = NULL;
    }
    return end(e);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    cudaError_t e = begin(F_cudaStreamEndCapture, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess && !graph)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess && s->cap == CAP_NONE)
        e = cudaErrorIllegalState;
    /* "If mode is not cudaStreamCaptureModeRelaxed, cudaStreamEndCapture
     * must be called on this stream from the same thread." */
    if (e == cudaSuccess && s->cap_mode != cudaStreamCaptureModeRelaxed &&
        !pthread_equal(s->cap_thread, pthread_self()))
        e = cudaErrorStreamCaptureWrongThread;
    if (e != cudaSuccess)
        return end(e);
    op *ops = s->cap_head;
    const capture_state was = s->cap;
    s->cap = CAP_NONE;
    s->cap_head = s->cap_tail = NULL;
    for (struct CUevent_st *v = G.events; v; v = v->next)
        if (v->captured == s)
            v->captured = NULL;
    *graph = NULL;
    struct CUgraph_st *g = NULL;
    if (was == CAP_INVALIDATED)
        e = cudaErrorStreamCaptureInvalidated;
    else if (!(g = calloc(1, sizeof *g)))
        e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        free_ops(ops);
        return end(e);
    }
    g->magic = GRAPH_MAGIC;
    g->head = ops;
    g->next = G.graphs;
    G.graphs = g;
    *graph = g;
    return end(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *status)
{
    cudaError_t e = begin(F_cudaStreamIsCapturing, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess && !status)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        *status = s->cap == CAP_ACTIVE        ? cudaStreamCaptureStatusActive
                  : s->cap == CAP_INVALIDATED ? cudaStreamCaptureStatusInvalidated
                                              : cudaStreamCaptureStatusNone;
    return end(e);
}

/* As the real one, it needs a context: called on a thread with none, it
 * makes the primary context of the thread's device current (seen on an
 * H200, 2026-11-27: device 0's, for a thread that never chose one). */
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    cudaError_t e = begin(F_cudaThreadExchangeStreamCaptureMode, 0, NULL, NULL);
    if (e == cudaSuccess &&
        (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        const enum cudaStreamCaptureMode old = t_capmode;
        t_capmode = *mode;
        *mode = old;
    }
    return end(e);
}

static cudaError_t get_graph(cudaGraph_t h, struct CUgraph_st **out)
{
    for (struct CUgraph_st *g = G.graphs; g; g = g->next)
        if (g == h) {
            *out = g;
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}

static cudaError_t get_exec(cudaGraphExec_t h, struct CUgraphExec_st **out)
{
    for (struct CUgraphExec_st *x = G.execs; x; x = x->next)
        if (x == h) {
            *out = x;
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    cudaError_t e = begin(F_cudaGraphInstantiate, 0, NULL, NULL);
    struct CUgraph_st *g = NULL;
    struct CUgraphExec_st *x = NULL;
    if (e == cudaSuccess && (!exec || flags != 0))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_graph(graph, &g);
    if (e == cudaSuccess && !(x = calloc(1, sizeof *x)))
        e = cudaErrorMemoryAllocation;
    op **tail = x ? &x->head : NULL;
    for (const op *o = g ? g->head : NULL; o && e == cudaSuccess; o = o->next) {
        if (!(*tail = clone_op(o)))
            e = cudaErrorMemoryAllocation;
        else
            tail = &(*tail)->next;
    }
    if (e != cudaSuccess) {
        if (x)
            free_ops(x->head);
        free(x);
        return end(e);
    }
    x->magic = EXEC_MAGIC;
    x->next = G.execs;
    G.execs = x;
    *exec = x;
    return end(cudaSuccess);
}

/* Queues a copy of each operation of the graph on `stream`, in order; an
 * event recorded in it is recorded anew by each launch. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    cudaError_t e = begin(F_cudaGraphLaunch, 1, stream, NULL);
    struct CUgraphExec_st *x = NULL;
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = get_exec(exec, &x);
    if (e == cudaSuccess)
        e = get_stream(stream, &s);
    if (e == cudaSuccess)
        e = ctx(s->device);
    if (e == cudaSuccess && s->cap != CAP_NONE)
        e = cudaErrorStreamCaptureUnsupported; /* not modelled */
    for (const op *g = x ? x->head : NULL; g && e == cudaSuccess; g = g->next) {
        op *o = clone_op(g);
        if (!o) {
            e = cudaErrorMemoryAllocation;
            break;
        }
        if (o->kind == OP_RECORD) {
            o->gen = ++o->ev->recorded;
            o->ev->captured = NULL;
        } else if (o->kind == OP_WAIT_EVENT) {
            o->gen = o->ev->recorded;
        }
        e = enqueue(s, o);
        if (e != cudaSuccess) {
            if (o->kind == OP_RECORD)
                o->ev->recorded--;
            event_unref(o->ev);
            free(o);
        }
    }
    return end(e);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    cudaError_t e = begin(F_cudaGraphExecDestroy, 0, NULL, NULL);
    struct CUgraphExec_st *x = NULL;
    if (e == cudaSuccess)
        e = get_exec(exec, &x);
    if (e == cudaSuccess) {
        struct CUgraphExec_st **pp = &G.execs;
        while (*pp != x)
            pp = &(*pp)->next;
        *pp = x->next;
        free_ops(x->head); /* launches queued copies of their own */
        free(x);
    }
    return end(e);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    cudaError_t e = begin(F_cudaGraphDestroy, 0, NULL, NULL);
    struct CUgraph_st *g = NULL;
    if (e == cudaSuccess)
        e = get_graph(graph, &g);
    if (e == cudaSuccess) {
        struct CUgraph_st **pp = &G.graphs;
        while (*pp != g)
            pp = &(*pp)->next;
        *pp = g->next;
        free_ops(g->head);
        free(g);
    }
    return end(e);
}

/* ---- the driver's context calls, through the runtime's entry points ----
 *
 * "cudaGetDriverEntryPointByVersion ... returns the address of the driver
 * API function for the requested CUDA version" (Runtime API, Driver Entry
 * Point Access), so a program can push and pop contexts without linking
 * libcuda. The few context calls pinload needs are simulated; any other
 * symbol is cudaDriverEntryPointSymbolNotFound. */

static CUresult drv_begin(void)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    return t_in_callback ? CUDA_ERROR_NOT_PERMITTED : CUDA_SUCCESS;
}

static CUresult drv_end(CUresult r)
{
    pthread_mutex_unlock(&G.mu);
    return r;
}

static CUresult drv_error(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return CUDA_SUCCESS;
    case cudaErrorDevicesUnavailable:
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    case cudaErrorMemoryAllocation:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorNoDevice:
        return CUDA_ERROR_NO_DEVICE;
    default:
        return CUDA_ERROR_INVALID_DEVICE;
    }
}

/* "Retains the primary context on the device. Once the user successfully
 * retains the primary context, the primary context will be active"
 * (cuDevicePrimaryCtxRetain): created if it was not. */
static CUresult CUDAAPI sim_cuDevicePrimaryCtxRetain(CUcontext *pctx,
                                                     CUdevice dev)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = drv_error(make_primary(dev));
    if (r == CUDA_SUCCESS) {
        G.dev[dev].ctx_retain++;
        *pctx = &G.ctxs[dev];
    }
    return drv_end(r);
}

/* The context stays for the runtime's own use; only the count drops. */
static CUresult CUDAAPI sim_cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS &&
        (dev < 0 || dev >= G.cfg.devices || G.dev[dev].ctx_retain == 0))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        G.dev[dev].ctx_retain--;
    return drv_end(r);
}

static int is_ctx(CUcontext c)
{
    return c >= &G.ctxs[0] && c < &G.ctxs[G.cfg.devices] &&
           G.dev[c - G.ctxs].has_ctx;
}

/* "Pushes the given context ctx onto the CPU thread's stack of current
 * contexts. The specified context becomes the CPU thread's current
 * context" (cuCtxPushCurrent). */
static CUresult CUDAAPI sim_cuCtxPushCurrent(CUcontext ctx)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && !is_ctx(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && t_depth == CTX_STACK)
        r = CUDA_ERROR_INVALID_VALUE; /* the sim's limit, not CUDA's */
    if (r == CUDA_SUCCESS)
        t_stack[t_depth++] = (int)(ctx - G.ctxs);
    return drv_end(r);
}

/* "Pops the current CUDA context from the CPU thread ... If a context was
 * current to the CPU thread before cuCtxCreate() or cuCtxPushCurrent() was
 * called, this function makes that context current to the CPU thread
 * again" (cuCtxPopCurrent). */
static CUresult CUDAAPI sim_cuCtxPopCurrent(CUcontext *pctx)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && t_depth == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        const int d = t_stack[--t_depth];
        if (pctx)
            *pctx = &G.ctxs[d];
    }
    return drv_end(r);
}

/* "If no context is bound to the calling CPU thread then *pctx is set to
 * NULL and CUDA_SUCCESS is returned" (cuCtxGetCurrent). */
static CUresult CUDAAPI sim_cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *pctx = t_depth ? &G.ctxs[t_stack[t_depth - 1]] : NULL;
    return drv_end(r);
}

static const struct {
    const char *name;
    void *fn;
} entry_points[] = {
    {"cuDevicePrimaryCtxRetain", (void *)sim_cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", (void *)sim_cuDevicePrimaryCtxRelease},
    {"cuCtxPushCurrent", (void *)sim_cuCtxPushCurrent},
    {"cuCtxPopCurrent", (void *)sim_cuCtxPopCurrent},
    {"cuCtxGetCurrent", (void *)sim_cuCtxGetCurrent},
};

cudaError_t
cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                 unsigned int version, unsigned long long flags,
                                 enum cudaDriverEntryPointQueryResult *status)
{
    (void)flags;
    cudaError_t e = begin(F_cudaGetDriverEntryPointByVersion, 0, NULL, NULL);
    if (e == cudaSuccess && (!symbol || !fn))
        e = cudaErrorInvalidValue;
    enum cudaDriverEntryPointQueryResult found =
        cudaDriverEntryPointSymbolNotFound;
    if (e == cudaSuccess) {
        *fn = NULL;
        for (size_t i = 0; i < sizeof entry_points / sizeof *entry_points; i++)
            if (!strcmp(entry_points[i].name, symbol)) {
                found = version > CUDART_VERSION
                            ? cudaDriverEntryPointVersionNotSufficent
                            : cudaDriverEntryPointSuccess;
                if (found == cudaDriverEntryPointSuccess)
                    *fn = entry_points[i].fn;
            }
    }
    if (e == cudaSuccess && status)
        *status = found;
    return end(e);
}

/* ---- the control interface ---- */

void cudasim_get_config(cudasim_config *c)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    *c = G.cfg;
    pthread_mutex_unlock(&G.mu);
}

int cudasim_host_policy(const void *p, int *mode, int *node)
{
    pthread_mutex_lock(&G.mu);
    int bad;
    const alloc *a = find_alloc(p, 0, &bad);
    const int ok = a && a->kind == MEM_PINNED;
    if (ok) {
        *mode = a->policy_mode;
        *node = a->policy_node;
    }
    pthread_mutex_unlock(&G.mu);
    return ok ? 0 : -1;
}

static int anything_live(void)
{
    for (const struct CUstream_st *s = G.streams; s; s = s->next)
        if (!s->legacy && !s->per_thread)
            return 1;
    return G.allocs || G.events;
}

int cudasim_set_config(const cudasim_config *c)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    int rc = 0;
    if (c->devices != G.cfg.devices || c->device_bytes != G.cfg.device_bytes) {
        if (anything_live() || c->devices < 0 ||
            c->devices > CUDASIM_MAX_DEVICES)
            rc = -1;
    }
    if (rc == 0) {
        G.cfg = *c;
        G.rng = c->seed;
        if (t_device >= G.cfg.devices)
            t_device = 0;
        for (int i = 0; i < t_depth; i++)
            if (t_stack[i] >= G.cfg.devices)
                t_stack[i] = 0;
    }
    pthread_mutex_unlock(&G.mu);
    return rc;
}

static int add_rule(const cudasim_fault *f)
{
    const int fid = find_fid(f->call);
    if (fid == -2)
        return -1;
    for (int i = 0; i < MAX_RULES; i++) {
        rule *r = &G.rules[i];
        if (r->used)
            continue;
        *r = (rule){.used = 1,
                    .fid = fid,
                    .nth = f->nth,
                    .times = f->times ? f->times
                             : f->nth ? 1
                                      : 0,
                    .p = f->probability > 0 ? f->probability : 1.0,
                    .error = f->error,
                    .on_stream = f->on_stream,
                    .stream = f->stream,
                    .thread_only = f->this_thread     ? 1
                                   : f->other_threads ? -1
                                                      : 0,
                    .thread = pthread_self(),
                    .async = f->asynchronous};
        return i;
    }
    return -1;
}

int cudasim_inject(const cudasim_fault *f)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    const int rc = f ? add_rule(f) : -1;
    pthread_mutex_unlock(&G.mu);
    return rc;
}

void cudasim_clear_faults(void)
{
    pthread_mutex_lock(&G.mu);
    init_locked();
    memset(G.rules, 0, sizeof G.rules);
    for (int d = 0; d < CUDASIM_MAX_DEVICES; d++)
        G.dev[d].sticky = cudaSuccess;
    pthread_mutex_unlock(&G.mu);
}

unsigned long cudasim_faults_delivered(void)
{
    pthread_mutex_lock(&G.mu);
    const unsigned long n = G.delivered;
    pthread_mutex_unlock(&G.mu);
    return n;
}

unsigned long cudasim_calls(const char *call)
{
    pthread_mutex_lock(&G.mu);
    unsigned long n = 0;
    const int fid = find_fid(call);
    for (int i = 0; i < F_COUNT; i++)
        if (fid == -1 || fid == i)
            n += G.calls[i];
    pthread_mutex_unlock(&G.mu);
    return n;
}

void cudasim_pause(int on)
{
    pthread_mutex_lock(&G.mu);
    G.paused = on;
    if (!on)
        for (struct CUstream_st *s = G.streams; s; s = s->next)
            pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&G.mu);
}

int cudasim_blocked_threads(void)
{
    pthread_mutex_lock(&G.mu);
    const int n = G.blocked;
    pthread_mutex_unlock(&G.mu);
    return n;
}

void *cudasim_device_view(const void *p)
{
    pthread_mutex_lock(&G.mu);
    int bad;
    const alloc *a = find_alloc(p, 0, &bad);
    void *v = a ? a->view + ((const char *)p - a->base) : NULL;
    pthread_mutex_unlock(&G.mu);
    return v;
}

void cudasim_get_live(cudasim_live *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&G.mu);
    for (const alloc *a = G.allocs; a; a = a->next) {
        if (a->kind == MEM_DEVICE) {
            out->device_allocs++;
            out->device_bytes += a->size;
        } else if (a->kind == MEM_PINNED) {
            out->pinned_allocs++;
            out->pinned_bytes += a->size;
        } else {
            out->managed_allocs++;
            out->managed_bytes += a->size;
        }
    }
    for (const struct CUstream_st *s = G.streams; s; s = s->next)
        out->streams += !s->legacy && !s->per_thread && !s->destroyed;
    for (int d = 0; d < CUDASIM_MAX_DEVICES; d++)
        if (G.dev[d].has_ctx) {
            out->contexts++;
            out->context_mask |= 1u << d;
            out->context_bytes += G.cfg.context_bytes;
        }
    for (const struct CUevent_st *v = G.events; v; v = v->next)
        out->events++;
    pthread_mutex_unlock(&G.mu);
}

unsigned long cudasim_violations(void)
{
    pthread_mutex_lock(&G.mu);
    const unsigned long n = G.violations;
    pthread_mutex_unlock(&G.mu);
    return n;
}
