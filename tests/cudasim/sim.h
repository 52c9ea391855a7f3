/* What the files of the simulated CUDA runtime share (see cudasim.h, the
 * test API, for what it models): core.c (the state and its lock, errors,
 * faults, the entry of every call, the control interface), contexts.c
 * (devices, primary contexts, the driver's entry points), memory.c,
 * streams.c (streams and their threads, host functions, kernels),
 * events.c and capture.c (stream capture and graphs); kernels_sim.c runs
 * the GPU decoder's kernels on the host. nvjpegsim.c, the fake nvJPEG, is
 * no part of it: a shared library of its own that calls the test API.
 *
 * One mutex (G.mu) guards every piece of state; it is released only while
 * a thread sleeps, copies bytes, runs a host function or a simulated
 * kernel, or waits on a condition. Every completion broadcasts G.done, on
 * which every waiter re-checks its own condition. A stream's thread waits on
 * the stream's own `cv` for work; the one callback thread on G.cb_cv.
 *
 * What one file gives the others is named sim_*, as it links into every
 * program of a CUDA=sim build. */
#ifndef CUDASIM_SIM_H
#define CUDASIM_SIM_H

#include <pthread.h>
#include <stdint.h>

#include <cuda.h> /* the driver's types, for its entry points */

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
    int inflight; /* queued operations that use it */
    int freed;    /* freed while in use (CUDASIM_VIOLATION=count) */
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
typedef enum capture_state {
    CAP_NONE,
    CAP_ACTIVE,
    CAP_INVALIDATED
} capture_state;

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

/* The one state, G for short (core.c). */
struct sim_state {
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
};
extern struct sim_state sim_g;
#define G sim_g

/* The calling thread's CUDA state. CUDA keeps a stack of current contexts
 * per host thread ("Pushes the given context ctx onto the CPU thread's
 * stack of current contexts", cuCtxPushCurrent); the runtime works in the
 * one on top, and "If no CUcontext is current to the calling thread when a
 * CUDA Runtime API call which requires an active context is made, then the
 * primary context for a device will be selected, made current to the
 * calling thread, and initialized" (Runtime API, Interactions with the
 * CUDA Driver API): the device cudaSetDevice chose last on this thread, 0
 * if none. sim_t_device is that choice; sim_t_stack the contexts' devices. */
#define CTX_STACK 8
extern _Thread_local int sim_t_device; /* contexts.c */
extern _Thread_local int sim_t_stack[CTX_STACK];
extern _Thread_local int sim_t_depth;
/* A host function or a simulated kernel runs on this thread (streams.c):
 * it may call nothing. */
extern _Thread_local int sim_t_in_callback;

/* ---- core.c ---- */

uint64_t sim_xorshift(uint64_t *s);
/* G.mu held. */
void sim_init_locked(void);
int sim_is_legacy(cudaStream_t s);
/* The start of every exported call, which takes G.mu, and its end, which
 * gives it back. */
cudaError_t sim_begin(int fid, int has_stream, cudaStream_t stream,
                      cudaError_t *async);
cudaError_t sim_end(cudaError_t e);
/* The device's sticky error, if it has one; G.mu held. */
cudaError_t sim_ctx(int d);

/* ---- contexts.c ---- */

/* The device whose context the runtime uses now, without creating one. */
int sim_cur(void);
/* The runtime's lazy initialisation of a context; G.mu held. */
cudaError_t sim_bind_ctx(void);
cudaError_t sim_check_device(int device);

/* ---- memory.c ---- */

void sim_unuse(alloc *a);
/* The checks every allocating call makes; G.mu held. */
cudaError_t sim_can_allocate(void);

/* One end of a copy. */
typedef struct endpoint {
    alloc *a;
    char *engine; /* where the engine reads or writes it */
    int device;   /* device memory (not host-addressable) */
    int pageable; /* host memory CUDA cannot DMA from directly */
} endpoint;

cudaError_t sim_resolve(const void *p, size_t n, endpoint *e);

/* ---- streams.c ---- */

void sim_event_unref(struct CUevent_st *v);
void sim_break_device(int d, cudaError_t e);
/* The stream a handle names: the device's legacy stream for NULL. */
cudaError_t sim_get_stream(cudaStream_t h, struct CUstream_st **out);
op *sim_new_op(op_kind kind);
cudaError_t sim_enqueue(struct CUstream_st *s, op *o);
/* Waits, G.mu held, until `done` says so or the device breaks. */
cudaError_t sim_wait_until(int (*done)(const void *), const void *arg,
                           int device);
/* Queues o on s; with `sync`, returns once it has run. o is freed on
 * failure. */
cudaError_t sim_submit(struct CUstream_st *s, op *o, int sync);

/* ---- capture.c ---- */

/* Whether the calling thread may make a potentially unsafe call now. */
cudaError_t sim_capture_forbids(void);
/* o, queued on a capturing stream, joins the capture instead of running. */
cudaError_t sim_capture_op(struct CUstream_st *s, op *o);
/* A query of or a wait for a capturing stream: refused, the capture
 * invalidated. */
cudaError_t sim_capture_conflict(struct CUstream_st *s);

#endif
