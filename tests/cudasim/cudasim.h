/* cudasim: a simulated CUDA runtime for the tests.
 *
 * libcudasim exports the cuda* functions pinload, its tools, samples and
 * tests call (the real signatures, from the toolkit's cuda_runtime_api.h),
 * and `make CUDA=sim` links it in place of libcudart, so that
 * device/backend_cuda.c is compiled and run unchanged on a machine without a
 * GPU. It behaves like the real runtime where pinload relies on it:
 *
 * - Every stream is a FIFO executed by its own thread; each operation first
 *   waits a random 0..delay_us microseconds (and bytes / copy_gbs for a
 *   copy), so host code that forgets to wait reads stale data or sees an
 *   event that has not completed.
 * - Events complete when the work recorded before them has; a stream that
 *   waits on an event (cudaStreamWaitEvent) runs nothing further until then;
 *   the legacy default stream (NULL) synchronises with blocking streams.
 * - Page-locked host memory has its pages at once, faulted in by the
 *   allocating call on the calling thread, whose memory policy so places
 *   them (cudasim_host_policy says what it was).
 * - Host functions (cudaLaunchHostFunc) run in stream order on one callback
 *   thread; any cuda* call from them fails with cudaErrorNotPermitted. They
 *   are not called once the device has a sticky error, as in CUDA.
 * - Device memory is not addressable by the host: cudaMalloc returns a view
 *   of a memfd mapped PROT_NONE, so a host dereference crashes; the engine
 *   copies through a second, read-write mapping of the same pages. Fresh
 *   device memory holds garbage (0xCD), not zeros.
 * - A copy from or to pageable (or managed) host memory returns only once
 *   it has executed, in stream order, as CUDA's large pageable copies do;
 *   from page-locked memory it is asynchronous.
 * - Freeing memory (cudaFree, cudaFreeHost) that a queued operation still
 *   reads or writes is a violation: reported on stderr, then abort() (or
 *   counted, with CUDASIM_VIOLATION=count, the memory kept until the
 *   operation is done).
 * - Any call can fail on request (cudasim_inject): the N-th matching call,
 *   or each with a probability, with the error CUDA would give, or a sticky
 *   error that breaks the device as a faulting kernel would.
 * - Several devices (default 2), each with its own streams, events and
 *   memory, and a primary context per process: created by cudaSetDevice
 *   (CUDA 12's rule) or by the first call that needs one on a thread with
 *   none current (on the device cudaSetDevice chose, 0 by default), costing
 *   context_bytes of the device's memory, and refused
 *   (cudaErrorDevicesUnavailable) on a device in exclusive-process mode
 *   that another process holds (exclusive_busy). Each host thread has a
 *   stack of current contexts, which the driver's cuCtxPushCurrent /
 *   cuCtxPopCurrent / cuCtxGetCurrent / cuDevicePrimaryCtxRetain change,
 *   reached through cudaGetDriverEntryPointByVersion as without libcuda.
 * - NULL (cudaStreamLegacy) and cudaStreamPerThread name streams of the
 *   calling thread's current device; the per-thread default stream is one
 *   per host thread and device, a blocking stream (ordered with the legacy
 *   stream, not with any other).
 * - A failed call's error is pending for cudaGetLastError on the calling
 *   thread only; a sticky error (a faulting operation) is the device's and
 *   every thread sees it.
 * - A HostToDevice copy from managed memory prefetched to the device is a
 *   violation (the direction does not match: undefined behaviour).
 *
 * - Stream capture (cudaStreamBeginCapture ... cudaStreamEndCapture) in
 *   the three modes, with cudaThreadExchangeStreamCaptureMode's rules: a
 *   "potentially unsafe" call (allocating or freeing memory, querying or
 *   synchronising a stream, an event or the device, a copy that returns only
 *   once done) from a thread its mode prohibits fails with
 *   cudaErrorStreamCaptureUnsupported and invalidates the captures that
 *   prohibit it, so cudaStreamEndCapture then says
 *   cudaErrorStreamCaptureInvalidated; querying or synchronising a capturing
 *   stream fails in every mode, and an event last recorded inside a capture
 *   cannot be queried or waited for outside it (cudaErrorCapturedEvent).
 *   Captured work runs only when its graph is launched (cudaGraphInstantiate,
 *   cudaGraphLaunch). Like the real cudaThreadExchangeStreamCaptureMode, the
 *   sim's needs a context and makes one on a thread with none.
 *
 * What it does not do: run kernels (nvcc-built code cannot link against it;
 * cudasim_launch stands in for a kernel), peer access, cross-stream capture
 * (a capturing stream may wait only for events recorded in its own
 * capture), graphs built other than by capture, IPC, texture memory. Settings
 * come from the environment at the first call (CUDASIM_DEVICES,
 * CUDASIM_DELAY_US, CUDASIM_COPY_GBS, CUDASIM_SEED, CUDASIM_DEVICE_MB,
 * CUDASIM_VIOLATION=abort|count, CUDASIM_FAULTS, CUDASIM_CONCURRENT_MANAGED,
 * CUDASIM_CONTEXT_MB, CUDASIM_EXCLUSIVE_BUSY, CUDASIM_PCI_BUS_IDS: the devices'
 * bus ids, comma-separated) and can be changed by the functions below.
 * Everything here is thread-safe. */
#ifndef PINLOAD_CUDASIM_H
#define PINLOAD_CUDASIM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDASIM_MAX_DEVICES 8

typedef struct cudasim_config {
    int devices;             /* 0 .. CUDASIM_MAX_DEVICES; default 2 */
    unsigned delay_us;       /* random delay before each operation, at most;
                                default 100 */
    double copy_gbs;         /* copy bandwidth in GB/s; 0: as fast as memcpy
                                (default) */
    uint64_t seed;           /* of the delays and fault probabilities */
    size_t device_bytes;     /* memory per device; default 16 GiB */
    int abort_on_violation;  /* 1 (default): abort(); 0: count and go on */
    int concurrent_managed;  /* cudaDevAttrConcurrentManagedAccess: 1
                                (default, Linux on Pascal and later); 0 as on
                                Windows and WSL, where the host may not touch
                                managed memory while the device works */
    size_t context_bytes;    /* a primary context's device memory; default
                                300 MiB */
    unsigned exclusive_busy; /* devices (bit d: device d) in exclusive-process
                                mode held by another process: no context can
                                be created on them; default 0 */
    /* What cudaDeviceGetPCIBusId gives for each device, "0000:0D:00.0"
     * (capitals, as CUDA writes it); default an eight-GPU server's buses
     * 0D, 1B, 3B, 5E, 8A, 9C, B7, DB. */
    char pci_bus_id[CUDASIM_MAX_DEVICES][16];
} cudasim_config;

/* The settings in force. */
void cudasim_get_config(cudasim_config *c);
/* Change them. The device count and memory size only while no stream,
 * event or allocation is live (returns -1 otherwise); delays, bandwidth and
 * the violation policy at any time, for the operations queued after. */
int cudasim_set_config(const cudasim_config *c);

/* One fault to deliver. Zero fields mean "any" or the default. */
typedef struct cudasim_fault {
    const char *call; /* "cudaEventRecord"; NULL or "*": any cuda* call */
    /* Fail the nth matching call from now (1: the next one); 0: every
     * matching call with `probability` (0 taken as 1). */
    unsigned long nth;
    double probability;
    unsigned long times; /* at most this many failures; 0: one if nth, else
                            unlimited */
    cudaError_t error;   /* cudaSuccess: the error this call usually gives
                            (cudaErrorMemoryAllocation for allocations and
                            creations, cudaErrorInvalidValue otherwise) */
    int on_stream;       /* 1: only calls naming `stream` */
    cudaStream_t stream; /* NULL: the legacy default stream */
    int this_thread;     /* 1: only calls from the thread that injects */
    int other_threads;   /* 1: only calls from other threads than that */
    /* 1: the call succeeds, and the operation it queued fails when the
     * device executes it: the device takes `error` (default
     * cudaErrorIllegalAddress) as a sticky error. */
    int asynchronous;
} cudasim_fault;

/* Add a fault; returns its id (>= 0) or -1 when the table (32) is full. */
int cudasim_inject(const cudasim_fault *f);
/* Remove every fault not yet delivered; clear every sticky device error. */
void cudasim_clear_faults(void);
/* Failures delivered so far, over all faults. */
unsigned long cudasim_faults_delivered(void);

/* Calls of `call` so far ("cudaMemcpyAsync"), failed ones included; NULL:
 * every cuda* call. */
unsigned long cudasim_calls(const char *call);

/* 1: streams start no new operation (those running finish); 0: go on. A
 * synchronous copy issued while paused blocks until the streams resume. */
void cudasim_pause(int on);
/* Host threads blocked right now in a synchronous copy or a cuda*Synchronize
 * call. */
int cudasim_blocked_threads(void);

/* A simulated kernel: fn(arg) runs on `stream`'s thread in stream order, as
 * a kernel would, and may read or write device memory through
 * cudasim_device_view(). [reads, reads + n) is memory it uses (NULL, 0:
 * none), which must not be freed before it has run. fn may not call cuda*
 * functions. */
cudaError_t cudasim_launch(cudaStream_t stream, void (*fn)(void *), void *arg,
                           const void *reads, size_t n);
/* cudasim_launch for a kernel that uses several ranges of memory:
 * [mem[i], mem[i] + n[i]) for i < count (at most 6) must not be freed
 * before it has run. drop, when not NULL, is called with arg instead of fn
 * when the operation is dropped unrun (the device broke), so that an arg
 * fn would free is freed either way; such a kernel cannot be captured
 * (cudaErrorStreamCaptureUnsupported). */
cudaError_t cudasim_launch_n(cudaStream_t stream, void (*fn)(void *), void *arg,
                             void (*drop)(void *), const void *const *mem,
                             const size_t *n, int count);

/* For a library simulated beside the runtime (the fake nvJPEG,
 * nvjpegsim.c): its call `name` (one the sim lists: "nvjpegDecodeJpegHost"),
 * counted (cudasim_calls) and open to faults (cudasim_inject) as the
 * runtime's are: the error a rule gives it, else cudaSuccess. Nothing is
 * left pending for cudaGetLastError. */
cudaError_t cudasim_call(const char *name);

/* Queued operations that still use the sim's memory at p (0 for memory
 * not the sim's): a host write there now would race them. */
int cudasim_inflight(const void *p);

/* Report a misuse found outside the runtime (the fake nvJPEG's) as the
 * sim's own violations are: on stderr, then abort() or counted. */
void cudasim_violation(const char *what);

/* The engine's read-write address of device pointer p (p itself for
 * managed or page-locked memory); NULL if p is not the sim's. Meant for
 * simulated kernels and for tests that inspect device memory directly. */
void *cudasim_device_view(const void *p);

/* What is alive now: allocations, user streams and events. */
typedef struct cudasim_live {
    int device_allocs, pinned_allocs, managed_allocs;
    size_t device_bytes, pinned_bytes, managed_bytes;
    int streams, events;
    int contexts;          /* primary contexts created, process-wide */
    unsigned context_mask; /* bit d: device d has one */
    size_t context_bytes;  /* the device memory they cost */
} cudasim_live;
void cudasim_get_live(cudasim_live *out);

/* Page-locked memory (cudaHostAlloc, cudaMallocHost) is allocated and
 * pinned within the call, as CUDA's is, so the calling thread's memory
 * policy places its pages: [out] the policy's mode (MPOL_*, with its
 * flags) and first node (-1: none) as get_mempolicy said during the call
 * that allocated p. 0, or -1 if p is not page-locked memory of the sim's. */
int cudasim_host_policy(const void *p, int *mode, int *node);

/* Violations seen so far (with CUDASIM_VIOLATION=count). */
unsigned long cudasim_violations(void);

#ifdef __cplusplus
}
#endif

#endif
