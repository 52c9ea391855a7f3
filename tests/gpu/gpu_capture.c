/* The CUDA-path suite (test_gpu.c): CUDA graph capture beside a running
 * loader, in each capture mode, and waits and releases on a capturing
 * stream refused. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

/* ---- CUDA graph capture beside a running loader ---- */

/* The loaders a capture runs beside, one row each. */
typedef struct loader_option {
    const char *name;
    int32_t memory, keep_host, format;
} loader_option;

static const loader_option loader_options[] = {
    {"pinned", PL_MEMORY_PINNED, 0, PL_FORMAT_U8_NHWC},
    {"pageable", PL_MEMORY_PAGEABLE, 0, PL_FORMAT_U8_NHWC},
    {"keep_host", PL_MEMORY_PINNED, 1, PL_FORMAT_U8_NHWC},
    {"gpu_f32", PL_MEMORY_PINNED, 0, PL_FORMAT_F32_NCHW},
};

typedef struct capture_mode {
    const char *name;
    enum cudaStreamCaptureMode mode;
} capture_mode;

static const capture_mode capture_modes[] = {
    {"global", cudaStreamCaptureModeGlobal},
    {"thread_local", cudaStreamCaptureModeThreadLocal},
    {"relaxed", cudaStreamCaptureModeRelaxed},
};

typedef struct capture_case {
    const loader_option *opt;
    const capture_mode *mode;
} capture_case;

#define GRAPH_N 4096u /* the captured kernels' elements */

/* What the captured sequence leaves in out[i]: iota(5), then *3 + 1, then
 * *1 + 7. */
static uint32_t graph_value(uint32_t i)
{
    return (5u + i) * 3u + 1u + 7u;
}

static cudaError_t queue_graph_work(cudaStream_t s, uint32_t *out)
{
    cudaError_t e = gk_iota(s, out, GRAPH_N, 5);
    if (e == cudaSuccess)
        e = gk_scale_add(s, out, GRAPH_N, 3, 1);
    if (e == cudaSuccess)
        e = gk_scale_add(s, out, GRAPH_N, 1, 7);
    return e;
}

/* Instantiates and launches the captured graph on s, then checks what
 * its kernels wrote to out (got: GRAPH_N host words). [out] *exec. */
static int graph_runs(cudaGraph_t graph, cudaGraphExec_t *exec, cudaStream_t s,
                      const uint32_t *out, uint32_t *got)
{
    int ok = 0;
    CUDA_OK(cudaGraphInstantiate(exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(*exec, s));
    CUDA_OK(cudaMemcpyAsync(got, out, GRAPH_N * sizeof *out,
                            cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (uint32_t i = 0; i < GRAPH_N; i++)
        CHECK(got[i] == graph_value(i), "the graph wrote %u at %u, want %u",
              got[i], i, graph_value(i));
    ok = 1;
done:
    return ok;
}

/* A thread of the test taking every batch on its own stream, checking its
 * bytes (and b->host's) against the reference, until told to stop or a
 * check fails. */
typedef struct consumer {
    pl_loader *l;
    const ref_batches *ref; /* one epoch; every epoch is alike */
    cudaStream_t stream;
    uint8_t *back; /* [ref->batch_bytes] */
    atomic_int stop, done, failed;
    atomic_long delivered;
    char why[300]; /* written before failed is set */
} consumer;

/* Records why the consumer stopped (read by the main thread once `failed`
 * is set); returns -1. */
__attribute__((format(printf, 2, 3))) static int
consumer_fail(consumer *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    atomic_store(&c->failed, 1);
    return -1;
}

static int consume_one(consumer *c, const pl_batch *b)
{
    const long n = atomic_load(&c->delivered);
    const ref_batches *r = c->ref;
    const int k = (int)b->index;
    if (pl_batch_wait(b, c->stream) != 0)
        return consumer_fail(c, "batch %ld: pl_batch_wait: %s", n,
                             pl_last_error());
    /* The test's own check (a copy back and a stream synchronisation) is
     * among the "potentially unsafe API calls" a thread in the default
     * global mode may not make while another thread captures in global
     * mode: it would spoil the capture itself. Relaxed for that check
     * alone, pushed and popped as cudaThreadExchangeStreamCaptureMode
     * advises, so that pinload's calls on this thread run in the mode a
     * user's data thread has. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t e = cudaThreadExchangeStreamCaptureMode(&mode);
    if (e == cudaSuccess) {
        e = cudaMemcpyAsync(c->back, b->data, b->bytes, cudaMemcpyDeviceToHost,
                            c->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(c->stream);
        const cudaError_t back = cudaThreadExchangeStreamCaptureMode(&mode);
        if (e == cudaSuccess)
            e = back;
    }
    if (e != cudaSuccess)
        return consumer_fail(c, "batch %ld: reading it back: %s", n,
                             cudaGetErrorName(e));
    if (k < 0 || k >= r->n || b->bytes != r->size[k] || b->count != r->count[k])
        return consumer_fail(c,
                             "batch %ld: index %d of %d, %zu bytes, %d "
                             "samples: unlike the host backend's",
                             n, k, r->n, b->bytes, (int)b->count);
    if (memcmp(c->back, ref_bytes(r, k), b->bytes) != 0)
        return consumer_fail(
            c, "batch %ld (index %d): %zu bytes differ from the host backend's",
            n, k, bytes_differing(c->back, ref_bytes(r, k), b->bytes));
    if (b->host && memcmp(b->host, ref_bytes(r, k), b->bytes) != 0)
        return consumer_fail(c,
                             "batch %ld (index %d): b->host differs from the "
                             "host backend's bytes",
                             n, k);
    if (memcmp(b->indices, r->indices + (size_t)k * r->batch_size,
               (size_t)b->count * sizeof *b->indices) != 0)
        return consumer_fail(
            c,
            "batch %ld (index %d): its samples differ from the host backend's",
            n, k);
    return 0;
}

/* Takes batches in the thread's default capture mode (global): pinload's
 * calls on a caller's thread (next, wait, release) must be safe beside
 * another thread's capture, as a user's data thread needs. */
static void *consume(void *arg)
{
    consumer *c = arg;
    while (!atomic_load(&c->failed) && !atomic_load(&c->stop)) {
        const pl_batch *b;
        const int rc = pl_loader_next(c->l, &b);
        if (rc == PL_EPOCH_END)
            continue;
        if (rc != 0) {
            consumer_fail(c, "batch %ld: pl_loader_next: %s",
                          atomic_load(&c->delivered), pl_last_error());
            break;
        }
        const int bad = consume_one(c, b);
        if (pl_loader_release(c->l, b, c->stream) != 0 && !bad)
            consumer_fail(c, "batch %ld: pl_loader_release: %s",
                          atomic_load(&c->delivered), pl_last_error());
        if (!atomic_load(&c->failed))
            atomic_fetch_add(&c->delivered, 1);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

/* The consumer's count once it reaches `want`, stops, or ms pass. */
static long wait_delivered(consumer *c, long want, int ms)
{
    for (int i = 0;
         i < ms && !atomic_load(&c->done) && atomic_load(&c->delivered) < want;
         i++)
        sleep_ms(1);
    return atomic_load(&c->delivered);
}

/* Stops and joins the consumer. One stuck in pl_loader_next for 10 s is
 * woken by destroying the loader (it returns PL_ECLOSED): *l is then
 * NULL. */
static void consumer_stop(consumer *c, pthread_t t, pl_loader **l)
{
    atomic_store(&c->stop, 1);
    for (int i = 0; i < 10000 && !atomic_load(&c->done); i++)
        sleep_ms(1);
    if (!atomic_load(&c->done)) {
        printf("  the consumer is stuck: destroying the loader\n");
        pl_loader_destroy(*l);
        *l = NULL;
    }
    pthread_join(t, NULL);
}

/* While a loader delivers batches to another thread of the test, the main
 * thread captures a few kernels on a stream of its own into a graph, in
 * the given mode, and sleeps inside the capture so that the loader's
 * prefetcher copies meanwhile. The capture must end with a graph (nothing
 * the loader's threads did invalidated it), the graph must run and write
 * what the kernels write, and the loader must deliver the host backend's
 * bytes throughout and after. */
static outcome capture_beside_a_loader(const char *data, const void *arg)
{
    const capture_case *cc = arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    consumer c;
    pthread_t thread;
    int started = 0, capturing = 0;
    cudaStream_t s = NULL;
    uint32_t *out = NULL, *got = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    memset(&c, 0, sizeof c);
    pl_config cfg = base_config(data);
    cfg.num_workers = 2;
    cfg.shuffle = 0; /* every epoch alike: checked by index, forever */
    cfg.augment = PL_AUGMENT_EVAL;
    cfg.memory = cc->opt->memory;
    cfg.keep_host = cc->opt->keep_host;
    cfg.format = cc->opt->format;
    if (!host_reference_repeating(cfg, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    CHECK(info.memory == cc->opt->memory, "ring memory %d, asked %d",
          (int)info.memory, (int)cc->opt->memory);
    CHECK(cfg.format == PL_FORMAT_U8_NHWC || info.gpu_normalize == 1,
          "float output not normalised on the GPU (built without nvcc?)");
    CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&out, GRAPH_N * sizeof *out));
    got = malloc(GRAPH_N * sizeof *got);
    c.back = malloc(ref.batch_bytes);
    CHECK(got && c.back, "out of memory");
    /* The kernels once outside the capture: loaded before it (lazy
     * loading would load them at their first launch, inside it). */
    CUDA_OK(queue_graph_work(s, out));
    CUDA_OK(cudaMemsetAsync(out, 0, GRAPH_N * sizeof *out, s));
    CUDA_OK(cudaStreamSynchronize(s));
    c.l = l;
    c.ref = &ref;
    CHECK(pthread_create(&thread, NULL, consume, &c) == 0, "pthread_create");
    started = 1;
    CHECK(wait_delivered(&c, 1, 10000) >= 1, "no batch within 10 s: %s", c.why);

    const long before = atomic_load(&c.delivered);
    CUDA_OK(cudaStreamBeginCapture(s, cc->mode->mode));
    capturing = 1;
    CUDA_OK(queue_graph_work(s, out));
    sleep_ms(80);
    const long during = wait_delivered(&c, before + 3, 3000) - before;
    capturing = 0;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    printf("  %s capture beside a %s loader: %ld batches delivered during it; "
           "cudaStreamEndCapture: %s\n",
           cc->mode->name, cc->opt->name, during, cudaGetErrorName(end));
    CHECK(!atomic_load(&c.failed), "the consumer: %s", c.why);
    CHECK(end == cudaSuccess && graph != NULL,
          "the capture was spoilt: %s (%s)", cudaGetErrorName(end),
          cudaGetErrorString(end));
    CHECK(during >= 3,
          "the loader delivered %ld batches in the capture's 80 ms and 3 s "
          "after, not 3",
          during);
    if (!graph_runs(graph, &exec, s, out, got))
        goto done;

    /* And the loader goes on: two more epochs of the host's bytes. */
    const long at_end = atomic_load(&c.delivered);
    const long want = at_end + 2L * ref.n;
    const long reached = wait_delivered(&c, want, 10000);
    CHECK(!atomic_load(&c.failed), "after the capture, the consumer: %s",
          c.why);
    CHECK(reached >= want, "after the capture: %ld batches, want %ld", reached,
          want);
    consumer_stop(&c, thread, &l);
    started = 0;
    CHECK(!atomic_load(&c.failed), "the consumer: %s", c.why);
    const cudaError_t pending = cudaGetLastError();
    CHECK(pending == cudaSuccess, "an error left pending: %s",
          cudaGetErrorName(pending));
    result = PASSED;
done:
    if (capturing) {
        cudaGraph_t g = NULL;
        (void)cudaStreamEndCapture(s, &g);
        if (g)
            cudaGraphDestroy(g);
    }
    if (started)
        consumer_stop(&c, thread, &l);
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    pl_loader_destroy(l);
    cudaFree(out);
    if (s)
        cudaStreamDestroy(s);
    if (c.stream)
        cudaStreamDestroy(c.stream);
    free(got);
    free(c.back);
    ref_free(&ref);
    (void)cudaGetLastError();
    return result;
}

/* Whether pl_last_error() mentions a capture. */
static int detail_names_capture(void)
{
    return strcasestr(pl_last_error(), "captur") != NULL;
}

/* The first batch of an epoch, b, still held, then the rest of the epoch:
 * each waited for on s, read back (into back) and compared with the
 * reference, and released on s. */
static int finish_epoch(pl_loader *l, const pl_batch *b, cudaStream_t s,
                        const ref_batches *ref, uint8_t *back)
{
    int ok = 0, k = 0, rc = 0;
    do {
        CHECK(k < ref->n, "more batches than the host gave");
        CHECK(pl_batch_wait(b, s) == 0, "batch %d: %s", k, pl_last_error());
        CUDA_OK(cudaMemcpyAsync(back, b->data, b->bytes, cudaMemcpyDeviceToHost,
                                s));
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(b->bytes == ref->size[k] &&
                  memcmp(back, ref_bytes(ref, k), b->bytes) == 0,
              "batch %d differs from the host backend's", k);
        CHECK(pl_loader_release(l, b, s) == 0, "batch %d: %s", k,
              pl_last_error());
        k++;
    } while ((rc = pl_loader_next(l, &b)) == 0);
    CHECK(rc == PL_EPOCH_END && k == ref->n, "rc %d (%s), %d batches of %d", rc,
          pl_last_error(), k, ref->n);
    ok = 1;
done:
    return ok;
}

/* pl_batch_wait and pl_loader_release on a stream that is capturing
 * cannot do what they promise (a wait or an event recorded into the
 * graph, not now), and must not spoil the capture: they return PL_EINVAL
 * naming the capture, the capture ends with a graph that runs, and the
 * batch, still held, is waited for and released on the stream once it
 * captures no more, with the host backend's bytes; the rest of the epoch
 * follows as usual. */
static outcome capturing_stream_is_refused(const char *data, const void *arg)
{
    const capture_mode *cm = arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    int capturing = 0;
    cudaStream_t s = NULL;
    uint32_t *out = NULL, *got = NULL;
    uint8_t *back = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    const pl_batch *b = NULL;
    cudaError_t e;
    pl_config cfg = base_config(data);
    if (!host_reference(cfg, 1, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&out, GRAPH_N * sizeof *out));
    got = malloc(GRAPH_N * sizeof *got);
    back = malloc(ref.batch_bytes);
    CHECK(got && back, "out of memory");
    CUDA_OK(queue_graph_work(s, out)); /* loaded before the capture */
    CUDA_OK(cudaMemsetAsync(out, 0, GRAPH_N * sizeof *out, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());

    CUDA_OK(cudaStreamBeginCapture(s, cm->mode));
    capturing = 1;
    CUDA_OK(gk_iota(s, out, GRAPH_N, 5));
    const int wait_rc = pl_batch_wait(b, s);
    const int wait_named = detail_names_capture();
    printf("  pl_batch_wait on a capturing stream (%s): %d (%s): %s\n",
           cm->name, wait_rc, pl_err_name(wait_rc), pl_last_error());
    e = cudaGetLastError();
    CHECK(e == cudaSuccess, "pl_batch_wait left %s pending",
          cudaGetErrorName(e));
    CUDA_OK(gk_scale_add(s, out, GRAPH_N, 3, 1));
    const int release_rc = pl_loader_release(l, b, s);
    const int release_named = detail_names_capture();
    printf("  pl_loader_release on it: %d (%s): %s\n", release_rc,
           pl_err_name(release_rc), pl_last_error());
    e = cudaGetLastError();
    CHECK(e == cudaSuccess, "pl_loader_release left %s pending",
          cudaGetErrorName(e));
    CUDA_OK(gk_scale_add(s, out, GRAPH_N, 1, 7));
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_OK(cudaStreamIsCapturing(s, &status));
    capturing = 0;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    printf("  capture status before its end: %d (1: active); "
           "cudaStreamEndCapture: %s\n",
           (int)status, cudaGetErrorName(end));
    CHECK(wait_rc == PL_EINVAL && wait_named,
          "pl_batch_wait on a capturing stream: %d, want PL_EINVAL naming the "
          "capture",
          wait_rc);
    CHECK(release_rc == PL_EINVAL && release_named,
          "pl_loader_release on a capturing stream: %d, want PL_EINVAL naming "
          "the capture",
          release_rc);
    CHECK(status == cudaStreamCaptureStatusActive,
          "the capture was invalidated (status %d)", (int)status);
    CHECK(end == cudaSuccess && graph != NULL, "cudaStreamEndCapture: %s",
          cudaGetErrorName(end));
    if (!graph_runs(graph, &exec, s, out, got))
        goto done;
    /* The batch is still held: waited for and released on s, which
     * captures no more, then the rest of the epoch. */
    if (finish_epoch(l, b, s, &ref, back))
        result = PASSED;
done:
    if (capturing) {
        cudaGraph_t g = NULL;
        (void)cudaStreamEndCapture(s, &g);
        if (g)
            cudaGraphDestroy(g);
    }
    if (s)
        cudaStreamSynchronize(s);
    pl_loader_destroy(l); /* a batch still held is given back with it */
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaFree(out);
    if (s)
        cudaStreamDestroy(s);
    free(got);
    free(back);
    ref_free(&ref);
    (void)cudaGetLastError();
    return result;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Every capture test: a row per mode and loader, then the refusals. */
void run_capture_tests(const char *data)
{
    capture_case cases[COUNT(capture_modes) * COUNT(loader_options)];
    for (size_t m = 0; m < COUNT(capture_modes); m++)
        for (size_t o = 0; o < COUNT(loader_options); o++) {
            capture_case *cc = &cases[m * COUNT(loader_options) + o];
            cc->mode = &capture_modes[m];
            cc->opt = &loader_options[o];
            char name[128];
            snprintf(name, sizeof name, "graph_capture_%s_beside_a_%s_loader",
                     cc->mode->name, cc->opt->name);
            run(name, capture_beside_a_loader, data, cc);
        }
    for (size_t m = 0; m < COUNT(capture_modes); m++) {
        char name[128];
        snprintf(name, sizeof name,
                 "wait_and_release_on_a_%s_capturing_stream_are_refused",
                 capture_modes[m].name);
        run(name, capturing_stream_is_refused, data, &capture_modes[m]);
    }
}
