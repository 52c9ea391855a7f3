/* CUDA graph capture beside a running loader, on the simulated runtime
 * (tests/cudasim models the capture modes of
 * cudaThreadExchangeStreamCaptureMode). On an H200 (2026-11-27) a graph
 * captured in global mode, torch.cuda.graph's default, while a loader ran
 * was invalidated at its first launch, and with keep_host the loader then
 * failed for good: its threads made "potentially unsafe" calls (an event
 * query, a synchronisation) while the caller captured. The first tests
 * check the model itself; then a capture on the caller's stream must
 * succeed while the loader delivers, in every mode and with every memory
 * option, a wait or release on a capturing stream is refused without
 * breaking the capture, and keep_host's mirror outlives the caller's work
 * queued before its release. Built only by `make CUDA=sim`. */
#include <pthread.h>
#include <stdatomic.h>

#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 120

/* ---- the model ---- */

typedef struct query_job {
    cudaEvent_t ev;
    enum cudaStreamCaptureMode mode;
    cudaError_t got;
} query_job;

/* An event query from another thread, in the given mode. */
static void *query_from_thread(void *arg)
{
    query_job *j = arg;
    enum cudaStreamCaptureMode m = j->mode;
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
        j->got = cudaErrorUnknown;
        return NULL;
    }
    j->got = cudaEventQuery(j->ev);
    (void)cudaGetLastError();
    return NULL;
}

/* Begins a capture on a fresh stream in mode `cap`, has another thread in
 * mode `other` query an event meanwhile, and ends the capture: *query is
 * what the query returned, the result what cudaStreamEndCapture did. */
static cudaError_t capture_beside_a_query(enum cudaStreamCaptureMode cap,
                                          enum cudaStreamCaptureMode other,
                                          cudaError_t *query)
{
    cudaStream_t s;
    cudaEvent_t ev;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&ev));
    CUDA_OK(cudaStreamBeginCapture(s, cap));
    query_job j = {.ev = ev, .mode = other};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, query_from_thread, &j), 0);
    pthread_join(t, NULL);
    cudaGraph_t g = NULL;
    const cudaError_t e = cudaStreamEndCapture(s, &g);
    (void)cudaGetLastError();
    if (g)
        CUDA_OK(cudaGraphDestroy(g));
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
    *query = j.got;
    return e;
}

Test(cudasim_capture, a_global_capture_forbids_other_global_threads_unsafe_calls)
{
    cudaError_t q;
    ASSERT_CUDA(capture_beside_a_query(cudaStreamCaptureModeGlobal,
                                       cudaStreamCaptureModeGlobal, &q),
                cudaErrorStreamCaptureInvalidated);
    ASSERT_CUDA(q, cudaErrorStreamCaptureUnsupported);
}

Test(cudasim_capture, a_relaxed_thread_may_call_beside_a_global_capture)
{
    cudaError_t q;
    CUDA_OK(capture_beside_a_query(cudaStreamCaptureModeGlobal,
                                   cudaStreamCaptureModeRelaxed, &q));
    CUDA_OK(q);
}

Test(cudasim_capture, a_thread_local_capture_ignores_other_threads)
{
    cudaError_t q;
    CUDA_OK(capture_beside_a_query(cudaStreamCaptureModeThreadLocal,
                                   cudaStreamCaptureModeGlobal, &q));
    CUDA_OK(q);
}

Test(cudasim_capture, the_capturing_thread_itself_is_forbidden_unless_relaxed)
{
    cudaStream_t s;
    cudaEvent_t ev;
    cudaGraph_t g = NULL;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&ev));
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    ASSERT_CUDA(cudaEventQuery(ev), cudaErrorStreamCaptureUnsupported);
    ASSERT_CUDA(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    cr_assert_null(g);
    /* Relaxed on the capturing thread: allowed. */
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudaThreadExchangeStreamCaptureMode(&m));
    cr_assert_eq(m, cudaStreamCaptureModeGlobal, "the old mode comes back");
    CUDA_OK(cudaEventQuery(ev));
    CUDA_OK(cudaThreadExchangeStreamCaptureMode(&m));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphDestroy(g));
    (void)cudaGetLastError();
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
}

static void count_kernel(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

Test(cudasim_capture, captured_work_runs_at_each_launch_and_only_then)
{
    cudaStream_t s;
    atomic_int runs = 0;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CUDA_OK(cudasim_launch(s, count_kernel, &runs, NULL, 0));
    enum cudaStreamCaptureStatus st;
    CUDA_OK(cudaStreamIsCapturing(s, &st));
    cr_assert_eq(st, cudaStreamCaptureStatusActive);
    cudaGraph_t g = NULL;
    CUDA_OK(cudaStreamEndCapture(s, &g));
    sleep_ms(20);
    cr_assert_eq(atomic_load(&runs), 0, "captured, not run");
    cudaGraphExec_t x;
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaGraphLaunch(x, s));
    CUDA_OK(cudaGraphLaunch(x, s));
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(atomic_load(&runs), 2);
    CUDA_OK(cudaGraphExecDestroy(x));
    CUDA_OK(cudaGraphDestroy(g));
    /* Asking a capturing stream whether it is done breaks the capture, even
     * in relaxed mode. */
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    ASSERT_CUDA(cudaStreamQuery(s), cudaErrorStreamCaptureUnsupported);
    ASSERT_CUDA(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    (void)cudaGetLastError();
    CUDA_OK(cudaStreamDestroy(s));
}

static void *exchange_on_fresh_thread(void *arg)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    *(cudaError_t *)arg = cudaThreadExchangeStreamCaptureMode(&m);
    return NULL;
}

/* As on the H200: the call makes the thread's device's primary context,
 * so pinload makes it only with its own context current. */
Test(cudasim_capture, exchanging_the_mode_needs_a_context)
{
    cudasim_live lv;
    cudasim_get_live(&lv);
    cr_assert_eq(lv.context_mask, 0u);
    cudaError_t e = cudaErrorUnknown;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, exchange_on_fresh_thread, &e), 0);
    pthread_join(t, NULL);
    CUDA_OK(e);
    cudasim_get_live(&lv);
    cr_assert_eq(lv.context_mask, 1u, "device 0's primary context made");
}

/* ---- a loader beside a capture ---- */

#define MAXB 64

/* What a simulated kernel on the consumer's stream read of each batch. */
typedef struct seen {
    const void *data;
    size_t bytes;
    uint8_t *pixels;
} seen;

static void read_batch(void *arg)
{
    seen *k = arg;
    memcpy(k->pixels, cudasim_device_view(k->data), k->bytes);
}

/* The caller's consumer: takes every batch of `epochs` epochs, making its
 * own stream wait for each, reading it there with a kernel and releasing
 * it there; only pinload's calls and kernel launches, none of them
 * "unsafe", as a well-behaved thread beside a global capture must. */
typedef struct consumer {
    pl_loader *l;
    int epochs;
    cudaStream_t s;
    seen k[MAXB];
    int64_t indices[MAXB][8];
    atomic_int n;
    int rc;
    char err[512];
} consumer;

static void *consume(void *arg)
{
    consumer *c = arg;
    for (int e = 0; e < c->epochs; e++) {
        const pl_batch *b;
        while ((c->rc = pl_loader_next(c->l, &b)) == 0) {
            const int i = atomic_load(&c->n);
            if (i >= MAXB || b->count > 8)
                break;
            seen *k = &c->k[i];
            k->data = b->data;
            k->bytes = b->bytes;
            k->pixels = malloc(b->bytes);
            memcpy(c->indices[i], b->indices, sizeof(int64_t) * b->count);
            if (pl_batch_wait(b, c->s) != 0 ||
                cudasim_launch(c->s, read_batch, k, b->data, b->bytes) !=
                    cudaSuccess ||
                pl_loader_release(c->l, b, c->s) != 0) {
                c->rc = PL_ECUDA;
                break;
            }
            atomic_store(&c->n, i + 1);
        }
        if (c->rc != PL_EPOCH_END)
            break;
    }
    snprintf(c->err, sizeof c->err, "%s", pl_last_error());
    return NULL;
}

/* The host backend's pixels of every batch of `epochs` epochs. */
static int host_pixels(pl_config c, int epochs, uint8_t *out[MAXB],
                       size_t bytes[MAXB])
{
    c.device = PL_DEVICE_HOST;
    c.memory = PL_MEMORY_PAGEABLE;
    c.keep_host = 0;
    c.decode = PL_DECODE_CPU;
    pl_loader *l = create(&c);
    int n = 0;
    for (int e = 0; e < epochs; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            cr_assert_lt(n, MAXB);
            out[n] = malloc(b->bytes);
            memcpy(out[n], b->data, b->bytes);
            bytes[n++] = b->bytes;
            cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        }
        cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    }
    pl_loader_destroy(l);
    return n;
}

/* While the consumer takes batches, the caller captures a graph on its
 * own stream in `mode`, stays in capture for 300 ms at least (the
 * prefetcher, idle once the workers are done, asks its streams whether
 * they can still progress every 100 ms) and until the loader has delivered
 * ten more batches or all of them, then ends it, launches the graph, and
 * checks that the loader delivered every batch, byte for byte, and goes
 * on. */
/* config.decode of the loaders capture_while_loading makes: gpu decodes
 * JPEGs on the workers' own streams, with nvJPEG's calls (the fake's, which
 * allocate and wait on those threads) beside the capture. */
static int capture_decode = PL_DECODE_CPU;

static void capture_while_loading(pl_memory memory, int keep_host,
                                  enum cudaStreamCaptureMode mode)
{
    sim_timing(200, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 60, 2);
    c.memory = memory;
    c.keep_host = keep_host;
    c.decode = capture_decode;
    c.dct_scaling = capture_decode == PL_DECODE_CPU; /* the GPU's is exact */
    uint8_t *ref[MAXB];
    size_t ref_bytes[MAXB];
    const int epochs = 2;
    const int want = host_pixels(c, epochs, ref, ref_bytes);
    consumer co = {.epochs = epochs};
    co.l = create(&c);
    pl_info in;
    cr_assert_eq(pl_loader_info(co.l, &in), 0);
    cr_assert_eq(in.decode,
                 capture_decode == PL_DECODE_CPU ? PL_DECODE_CPU
                                                 : PL_DECODE_GPU,
                 "%s", in.decoder_name);
    CUDA_OK(cudaStreamCreateWithFlags(&co.s, cudaStreamNonBlocking));
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, consume, &co), 0);
    while (atomic_load(&co.n) < 1)
        sleep_ms(1);
    cudaStream_t mine;
    atomic_int runs = 0;
    CUDA_OK(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(mine, mode));
    CUDA_OK(cudasim_launch(mine, count_kernel, &runs, NULL, 0));
    const int at = atomic_load(&co.n);
    for (int ms = 0; ms < 5000 && (ms < 300 || (atomic_load(&co.n) < at + 10 &&
                                               atomic_load(&co.n) < want));
         ms++)
        sleep_ms(1);
    const int during = atomic_load(&co.n) - at;
    cudaGraph_t g = NULL;
    const cudaError_t end = cudaStreamEndCapture(mine, &g);
    cr_assert_eq(end, cudaSuccess,
                 "the capture (mode %d, memory %d, keep_host %d) was broken "
                 "while the loader ran: %s",
                 (int)mode, (int)memory, keep_host, cudaGetErrorName(end));
    cr_assert_geq(during, 1, "no batch arrived during the capture");
    cudaGraphExec_t x;
    CUDA_OK(cudaGraphInstantiate(&x, g, 0));
    CUDA_OK(cudaGraphLaunch(x, mine));
    CUDA_OK(cudaStreamSynchronize(mine));
    cr_assert_eq(atomic_load(&runs), 1, "the graph ran its kernel");
    pthread_join(t, NULL);
    cr_assert_eq(co.rc, PL_EPOCH_END, "the loader failed: %s (%s)",
                 pl_err_name(co.rc), co.err);
    CUDA_OK(cudaStreamSynchronize(co.s));
    cr_assert_eq(atomic_load(&co.n), want);
    for (int i = 0; i < want; i++) {
        cr_assert_eq(co.k[i].bytes, ref_bytes[i]);
        cr_assert_eq(memcmp(co.k[i].pixels, ref[i], ref_bytes[i]), 0,
                     "batch %d differs from the host backend's", i);
        free(co.k[i].pixels);
        free(ref[i]);
    }
    CUDA_OK(cudaGraphExecDestroy(x));
    CUDA_OK(cudaGraphDestroy(g));
    pl_loader_destroy(co.l);
    CUDA_OK(cudaStreamDestroy(mine));
    CUDA_OK(cudaStreamDestroy(co.s));
    tu_rm_rf(root);
}

Test(cuda_capture, a_global_capture_beside_a_pinned_loader_succeeds,
     .timeout = TIMEOUT)
{
    capture_while_loading(PL_MEMORY_PINNED, 0, cudaStreamCaptureModeGlobal);
}

Test(cuda_capture, a_global_capture_beside_a_pageable_loader_succeeds,
     .timeout = TIMEOUT)
{
    capture_while_loading(PL_MEMORY_PAGEABLE, 0, cudaStreamCaptureModeGlobal);
}

Test(cuda_capture, a_global_capture_beside_a_managed_loader_succeeds,
     .timeout = TIMEOUT)
{
    capture_while_loading(PL_MEMORY_MANAGED, 0, cudaStreamCaptureModeGlobal);
}

Test(cuda_capture, a_global_capture_beside_keep_host_succeeds,
     .timeout = TIMEOUT)
{
    capture_while_loading(PL_MEMORY_PINNED, 1, cudaStreamCaptureModeGlobal);
}

Test(cuda_capture, thread_local_and_relaxed_captures_succeed_too,
     .timeout = TIMEOUT)
{
    capture_while_loading(PL_MEMORY_PINNED, 1,
                          cudaStreamCaptureModeThreadLocal);
    capture_while_loading(PL_MEMORY_PAGEABLE, 0, cudaStreamCaptureModeRelaxed);
}

Test(cuda_capture, a_global_capture_beside_gpu_decoding_succeeds,
     .timeout = TIMEOUT)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libnvjpegsim.so", tu_build_dir());
    cr_assert_eq(setenv("PINLOAD_NVJPEG", path, 1), 0);
    capture_decode = PL_DECODE_GPU;
    capture_while_loading(PL_MEMORY_PINNED, 0, cudaStreamCaptureModeGlobal);
}

/* pl_batch_wait and pl_loader_release on a stream that is capturing are
 * refused (a graph's replays cannot wait for or release one batch), the
 * capture is left intact, and the batch is still the caller's to release
 * on another stream. */
Test(cuda_capture, a_wait_or_release_on_a_capturing_stream_is_refused,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cr_assert_eq(pl_batch_wait(b, s), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "capturing a CUDA graph"), "%s",
                       pl_last_error());
    cr_assert_eq(pl_loader_release(l, b, s), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "still held"), "%s",
                       pl_last_error());
    cudaGraph_t g = NULL;
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphDestroy(g));
    CUDA_OK(cudaGetLastError());
    cr_assert_eq(pl_batch_wait(b, s), 0, "%s", pl_last_error());
    cr_assert_eq(pl_loader_release(l, b, s), 0, "%s", pl_last_error());
    int rc, n = 1;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        n++;
        cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(n, 3, "12 samples in batches of 5");
    pl_loader_destroy(l);
    CUDA_OK(cudaStreamDestroy(s));
    tu_rm_rf(root);
}

/* ---- keep_host: the mirror outlives the caller's work ---- */

typedef struct mirror_read {
    gate g;
    const uint8_t *host;
    size_t bytes;
    uint8_t *got;
} mirror_read;

/* Blocks the stream until the gate opens, then reads the host mirror, as
 * a caller's upload of b->host queued before the release would. */
static void read_mirror(void *arg)
{
    mirror_read *m = arg;
    gate_kernel(&m->g);
    memcpy(m->got, m->host, m->bytes);
}

static void *open_later(void *arg)
{
    sleep_ms(300);
    gate_open(arg);
    return NULL;
}

/* Batch 0 is released on a stream whose work still reads b->host (behind
 * a gate); two more batches are taken at once, the second into batch 0's
 * buffer. Its mirror must not be overwritten before that work ran: the
 * bytes read equal batch 0's. */
Test(cuda_capture, keep_host_mirror_outlives_work_queued_before_release,
     .timeout = TIMEOUT)
{
    sim_timing(100, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 30, 2);
    c.keep_host = 1;
    c.device_buffers = 2;
    uint8_t *ref[MAXB];
    size_t ref_bytes[MAXB];
    const int nref = host_pixels(c, 1, ref, ref_bytes);
    cr_assert_geq(nref, 3);
    pl_loader *l = create(&c);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_not_null(b->host);
    mirror_read m = {.g = GATE_INIT, .host = b->host, .bytes = b->bytes};
    m.got = malloc(b->bytes);
    CUDA_OK(cudasim_launch(s, read_mirror, &m, NULL, 0));
    gate_wait_entered(&m.g);
    cr_assert_eq(pl_loader_release(l, b, s), 0, "%s", pl_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, open_later, &m.g), 0);
    for (int i = 1; i <= 2; i++) {
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        cr_assert_eq(memcmp(b->host, ref[i], ref_bytes[i]), 0,
                     "batch %d's mirror", i);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    }
    pthread_join(t, NULL);
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(memcmp(m.got, ref[0], ref_bytes[0]), 0,
                 "b->host was overwritten before the work queued before its "
                 "release had read it");
    free(m.got);
    for (int i = 0; i < nref; i++)
        free(ref[i]);
    pl_loader_destroy(l);
    CUDA_OK(cudaStreamDestroy(s));
    tu_rm_rf(root);
}
