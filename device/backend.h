/* The one door to the CUDA runtime. Two implementations sit behind it:
 * backend_cuda.c (cudaHostAlloc, cudaMemcpyAsync on per-buffer streams,
 * events, host callbacks) and backend_host.c (aligned memory, mlock,
 * memcpy, callbacks run at once). backend_open picks one; no other file
 * knows whether a GPU exists. */
#ifndef PINLOAD_BACKEND_H
#define PINLOAD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "../common/blend.h"
#include "../common/log.h"
#include "pinload.h"

typedef struct backend backend;
typedef struct be_stream be_stream; /* a copy stream and its two events */
struct gpu_decoder;
struct gpu_decoder_config;

/* What host_alloc gave. */
typedef enum hostmem {
    HOSTMEM_PAGEABLE,
    HOSTMEM_PINNED,  /* page-locked: cudaHostAlloc, or mlock on host */
    HOSTMEM_MANAGED, /* cudaMallocManaged */
} hostmem;

typedef struct backend_ops {
    /* Host memory for the ring or a mirror, of the kind asked for; [out]
     * *kind says what it is, *node the NUMA node it was placed on (the
     * device's, b->numa_node) or -1 where it was not (no node known,
     * managed memory, or the kernel refused: a notice, once per backend,
     * says why). Pinned memory that cannot be had is an error
     * (pl_last_error says why): the caller may then ask for pageable. */
    int (*host_alloc)(backend *b, size_t n, pl_memory want, void **p,
                      hostmem *kind, int *node);
    void (*host_free)(backend *b, void *p, size_t n, hostmem kind);
    int (*dev_alloc)(backend *b, size_t n, void **p);
    void (*dev_free)(backend *b, void *p);
    int (*stream_create)(backend *b, be_stream **s);
    void (*stream_destroy)(backend *b, be_stream *s);
    /* The calling thread, one of the loader's own, will issue copies
     * (CUDA: select the device for good, and take the relaxed stream
     * capture mode, so that nothing it does can invalidate or be refused
     * by a CUDA graph capture of the caller's). */
    int (*bind_thread)(backend *b);
    /* Make the backend's device current on a caller's thread for the
     * duration of a call (create, destroy); [out] *saved is what leave()
     * restores, so no call leaves the caller on another device, and none
     * creates a context on a device the caller did not use (CUDA: the
     * loader's primary context pushed, then popped; the thread's stream
     * capture mode relaxed meanwhile, then restored). */
    int (*enter)(backend *b, int *saved);
    void (*leave)(backend *b, int saved);
    /* Queue a host-to-device copy of n bytes on s, from host memory of
     * kind `from`: managed memory is migrated to the device first
     * (cudaMemPrefetchAsync), and the copy's timing (copy_time) covers the
     * migration too. A copy from pageable memory returns once done (the
     * runtime's staging; a ring of pinned chunks of pinload's own measured
     * no better on an H200: docs/gpu-results.md). */
    int (*copy)(backend *b, be_stream *s, void *dst, const void *src, size_t n,
                hostmem from);
    /* Add to *ns and *bytes the GPU time and size of s's copies that have
     * completed since the last call; thread-safe. */
    void (*copy_time)(backend *b, be_stream *s, uint64_t *ns, uint64_t *bytes);
    /* Call fn(arg) once the work queued on s so far is done; fn must not
     * call the backend. The host backend calls it before returning. */
    int (*after)(backend *b, be_stream *s, void (*fn)(void *), void *arg);
    /* Record s's ready event after the work queued so far. */
    int (*record_ready)(backend *b, be_stream *s);
    /* Block until the last recorded ready event has completed. */
    int (*sync_ready)(backend *b, be_stream *s);
    /* The ready event, as the public pl_batch shows it; NULL on host. */
    struct CUevent_st *(*ready_event)(be_stream *s);
    /* Record s's release event number `slot` (0 .. PL_RELEASE_STREAMS_MAX
     * - 1) on the caller's stream `user` (pl_loader_release: NULL and
     * cudaStreamPerThread name the backend's device's); slot 0 starts a
     * new release, forgetting the last one's events. Any thread. */
    int (*record_release)(backend *b, be_stream *s, int slot,
                          struct CUstream_st *user);
    /* Make work queued on s from now on wait for the release events. */
    int (*wait_released)(backend *b, be_stream *s);
    /* Block until the release events have completed: the caller's work
     * queued before the release, which may still read the batch's host
     * mirror, is done. */
    int (*sync_released)(backend *b, be_stream *s);
    /* Whether the caller's stream `user` is capturing a CUDA graph: 1 if
     * so (nothing may be recorded on or waited for from it), 0 if not or on
     * the host backend; never invalidates a capture. */
    int (*capturing)(backend *b, struct CUstream_st *user);
    /* Block until everything queued on s, callbacks included, is done. */
    int (*sync)(backend *b, be_stream *s);
    /* sync for at most `ms` milliseconds (< 0: no limit): 0 once s is
     * done, PL_ECUDA if its device failed (nothing queued will run), 1 if
     * work queued on it still runs (the caller's kernels it waits for). */
    int (*drain)(backend *b, be_stream *s, int ms);
    /* Block until the caller's stream `user` has done its work so far: what
     * pl_loader_release falls back on when the release event cannot be
     * recorded. */
    int (*sync_user)(backend *b, struct CUstream_st *user);
    /* Whether s can still make progress: 0 (done or running), or the error
     * that broke the device (a copy that failed on it, say), after which
     * its callbacks will never run. Never blocks. */
    int (*query)(backend *b, be_stream *s);
    /* Queue on s the uint8 NHWC -> normalised float NCHW (or, with
     * channels_last, NHWC) conversion of a
     * batch in device memory, samples with a non-zero status[] (host
     * memory) left all zeros (see normalize.h); NULL where the library was
     * built without nvcc, and on the host backend. */
    int (*normalize)(backend *b, be_stream *s, void *dst, const void *src,
                     const int32_t *status, int count, int width, int height,
                     int half, int channels_last, const void *lut);
    /* Queue on s the batch op's mixing of a batch in device memory
     * (m->data; gpu_mix.h), after the work queued on s; NULL where the
     * library has no kernel for it (built without nvcc), and on the host
     * backend, where the copier mixes the batch itself. */
    int (*mix)(backend *b, be_stream *s, const blend_batch *m);
    /* Queue on s a copy of n bytes between two places in the device's
     * memory (the GPU decoder's samples into a batch); not timed (copy_time
     * counts the host's copies). */
    int (*copy_device)(backend *b, be_stream *s, void *dst, const void *src,
                       size_t n);
    /* Make work queued on s from now on wait for `ev`, an event of the
     * backend's device (a GPU decoder's). */
    int (*wait_event)(backend *b, be_stream *s, struct CUevent_st *ev);
    /* Open the GPU decoder (gpu_decode.h) on the caller's thread, the
     * device current: 0 with *out; PL_EUNSUPPORTED with `why` where this
     * build or machine has none (no nvJPEG, no kernels), PL_ENOMEM /
     * PL_ECUDA where its memory cannot be had. NULL on the host backend. */
    int (*gpu_decoder_open)(backend *b, const struct gpu_decoder_config *cfg,
                            struct gpu_decoder **out, char *why, size_t cap);
    /* Free the backend itself (streams and memory are freed before). */
    void (*close)(backend *b);
} backend_ops;

struct backend {
    const backend_ops *ops;
    pl_backend kind;
    int device; /* CUDA ordinal; -1 on host */
    /* The NUMA node of the device's PCI slot, where its host memory is
     * placed; -1 on host, and where it is not known (one node). */
    int numa_node;
    /* Device memory is host memory (the host backend): a batch's pixels
     * need no host mirror, and pl_batch.host is its data. */
    int host_visible;
    logger *log;
    char name[160]; /* "cuda device 0 (NVIDIA H100 80GB HBM3)" */
};

/* Open the backend for config.device: PL_DEVICE_HOST, PL_DEVICE_AUTO (the
 * calling thread's current CUDA device), PL_DEVICE_LOCAL_RANK (the ordinal
 * local_rank, or 0 with a notice where the process sees one device alone,
 * as when each rank is given its GPU through CUDA_VISIBLE_DEVICES) or an
 * ordinal. AUTO falls back to host, with the reason in
 * b->name, when no CUDA driver or device is usable; an ordinal that cannot
 * be had is an error naming it (PL_EINVAL beyond the devices present,
 * PL_ECUDA when none is usable). The calling thread's current device is
 * left as it was. */
int backend_open(backend **out, int device, int local_rank, logger *lg);
void backend_close(backend *b);

/* pl_batch_wait's work: make `stream` (NULL, cudaStreamLegacy and
 * cudaStreamPerThread: of s's device) wait for s's ready event; any
 * thread, whatever device it has current, which it keeps. */
int backend_stream_wait(be_stream *s, struct CUstream_st *stream);

/* The implementations, for backend_open alone. */
int backend_host_open(backend **out, logger *lg, const char *why);
int backend_cuda_open(backend **out, int device, int local_rank, logger *lg,
                      char *why, size_t why_cap);
int backend_cuda_stream_wait(be_stream *s, struct CUstream_st *stream);

#endif
