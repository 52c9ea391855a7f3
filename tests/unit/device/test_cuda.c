/* The CUDA backend on the simulated runtime (tests/cudasim): what a GPU run
 * depends on, checked on every commit without a GPU. Streams run on their
 * own threads with random delays, device memory cannot be touched by the
 * host, copies from pageable memory block, and any call can fail, so these
 * tests see ordering mistakes (a buffer reused before the caller's kernel
 * has read it, a ring slot refilled under a copy), error paths that hang or
 * leak, and locks held across a blocking copy. The host backend is the
 * reference for every byte. Built only by `make CUDA=sim`. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 120
#define MAXB 48

/* ---- what a loader delivered ---- */

typedef struct batch_rec {
    int count;
    int64_t epoch, index;
    size_t bytes;
    uint8_t *pixels;
    int64_t indices[64];
    int32_t labels[64], status[64];
} batch_rec;

typedef struct record {
    int nb;
    batch_rec b[MAXB];
} record;

static void record_free(record *r)
{
    for (int i = 0; i < r->nb; i++)
        free(r->b[i].pixels);
    r->nb = 0;
}

/* Keeps b (its pixels read back the way a program must) as r's next. */
static void keep(record *r, const pl_batch *b)
{
    cr_assert_lt(r->nb, MAXB);
    cr_assert_leq(b->count, 64);
    batch_rec *k = &r->b[r->nb++];
    k->count = b->count;
    k->epoch = b->epoch;
    k->index = b->index;
    k->bytes = b->bytes;
    k->pixels = malloc(b->bytes);
    tu_batch_pixels(b, k->pixels);
    memcpy(k->indices, b->indices, sizeof(int64_t) * (size_t)b->count);
    memcpy(k->labels, b->labels, sizeof(int32_t) * (size_t)b->count);
    memcpy(k->status, b->status, sizeof(int32_t) * (size_t)b->count);
}

/* Every batch of `epochs` epochs, released at once on the legacy stream. */
static void record_run(const pl_config *c, int epochs, record *r)
{
    memset(r, 0, sizeof *r);
    pl_loader *l = create(c);
    for (int e = 0; e < epochs; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            keep(r, b);
            cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s",
                         pl_last_error());
        }
        cr_assert_eq(rc, PL_EPOCH_END, "%s (%s)", pl_err_name(rc),
                     pl_last_error());
    }
    pl_loader_destroy(l);
}

static void assert_same_batch(const batch_rec *a, const batch_rec *b,
                              const char *what, int k)
{
    cr_assert_eq(a->count, b->count, "%s: batch %d count", what, k);
    cr_assert_eq(a->epoch, b->epoch, "%s: batch %d epoch", what, k);
    cr_assert_eq(a->index, b->index, "%s: batch %d index", what, k);
    cr_assert_eq(a->bytes, b->bytes, "%s: batch %d bytes", what, k);
    for (int i = 0; i < a->count; i++) {
        cr_assert_eq(a->indices[i], b->indices[i], "%s: batch %d", what, k);
        cr_assert_eq(a->labels[i], b->labels[i], "%s: batch %d", what, k);
        cr_assert_eq(a->status[i], b->status[i], "%s: batch %d", what, k);
    }
    cr_assert_eq(memcmp(a->pixels, b->pixels, a->bytes), 0,
                 "%s: batch %d: pixels differ", what, k);
}

static void assert_same_record(const record *a, const record *b,
                               const char *what)
{
    cr_assert_eq(a->nb, b->nb, "%s: %d vs %d batches", what, a->nb, b->nb);
    for (int k = 0; k < a->nb; k++)
        assert_same_batch(&a->b[k], &b->b[k], what, k);
}

/* The host backend's record of c: the reference. */
static void host_reference(pl_config c, int epochs, record *r)
{
    c.device = PL_DEVICE_HOST;
    c.memory = PL_MEMORY_PAGEABLE;
    record_run(&c, epochs, r);
}

/* ---- the bytes ---- */

/* Every format, memory mode and keep_host setting, with the worker count,
 * ring slots and device buffers varied across them: two epochs on CUDA
 * equal the host backend's, batch for batch and byte for byte. */
Test(cuda, batches_equal_the_host_backends_for_every_configuration,
     .timeout = TIMEOUT)
{
    sim_timing(300, 0);
    char root[64];
    tu_make_tree(root, 23, 3);
    static const pl_format fmts[] = {PL_FORMAT_U8_NHWC, PL_FORMAT_F32_NCHW,
                                     PL_FORMAT_F16_NCHW};
    static const pl_memory mems[] = {PL_MEMORY_PINNED, PL_MEMORY_PAGEABLE,
                                     PL_MEMORY_MANAGED};
    int k = 0;
    for (int f = 0; f < 3; f++) {
        pl_config c;
        base_cfg(&c, root);
        c.format = fmts[f];
        c.augment = f == 1 ? PL_AUGMENT_EVAL : PL_AUGMENT_TRAIN;
        record ref;
        host_reference(c, 2, &ref);
        for (int m = 0; m < 3; m++)
            for (int kh = 0; kh < 2; kh++, k++) {
                c.memory = mems[m];
                c.keep_host = kh;
                c.num_workers = 1 + k % 4;
                c.prefetch = 1 + k % 3;
                c.device_buffers = 1 + (k / 3) % 3;
                pl_loader *l = create(&c);
                pl_info in;
                pl_loader_info(l, &in);
                cr_assert_eq(in.backend, PL_BACKEND_CUDA);
                cr_assert_eq(in.pinned, mems[m] == PL_MEMORY_PINNED);
                cr_assert_eq(in.gpu_normalize, 0, "no kernels on the sim");
                cr_assert_not_null(strstr(in.backend_name, "(simulated)"), "%s",
                                   in.backend_name);
                pl_stats st;
                cr_assert_eq(pl_loader_stats(l, &st), 0);
                const int locked = (mems[m] == PL_MEMORY_PINNED) * c.prefetch +
                                   kh * c.device_buffers;
                cr_assert_eq(st.pinned_bytes, (uint64_t)locked * in.batch_bytes,
                             "page-locked: the ring if pinned, the mirrors");
                pl_loader_destroy(l);
                record got;
                record_run(&c, 2, &got);
                char what[160];
                snprintf(what, sizeof what,
                         "format %d, memory %d, keep_host %d, %d workers, "
                         "prefetch %d, %d buffers",
                         c.format, c.memory, kh, c.num_workers, c.prefetch,
                         c.device_buffers);
                assert_same_record(&ref, &got, what);
                record_free(&got);
            }
        record_free(&ref);
    }
    assert_nothing_live("after every loader");
    tu_rm_rf(root);
}

/* keep_host: b->host is page-locked host memory holding the batch's bytes
 * as they are on the device. */
Test(cuda, keep_host_mirrors_the_device_batch_in_pinned_memory,
     .timeout = TIMEOUT)
{
    sim_timing(300, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.keep_host = 1;
    pl_loader *l = create(&c);
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        struct cudaPointerAttributes at;
        cr_assert_eq(cudaPointerGetAttributes(&at, b->host), cudaSuccess);
        cr_assert_eq(at.type, cudaMemoryTypeHost, "pinned host memory");
        cr_assert_eq(cudaPointerGetAttributes(&at, b->data), cudaSuccess);
        cr_assert_eq(at.type, cudaMemoryTypeDevice);
        uint8_t *dev = malloc(b->bytes);
        tu_batch_pixels(b, dev);
        cr_assert_eq(memcmp(dev, b->host, b->bytes), 0, "batch %d", n);
        free(dev);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        n++;
    }
    cr_assert_eq(rc, PL_EPOCH_END);
    cr_assert_eq(n, 3);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    pl_info in;
    pl_loader_info(l, &in);
    cr_assert_eq(st.pinned_bytes,
                 (uint64_t)(c.prefetch + c.device_buffers) * in.batch_bytes,
                 "the ring and one mirror per device buffer");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* Device 1 of the simulator's two works like device 0. */
Test(cuda, a_loader_on_the_second_device_delivers_the_same_bytes,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    record ref, got;
    host_reference(c, 1, &ref);
    c.device = 1;
    /* The consumer works on the loader's device, as a training loop does:
     * its NULL stream is then device 1's, which can carry the release. */
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    pl_loader *l = create(&c);
    pl_info in;
    pl_loader_info(l, &in);
    cr_assert_eq(in.device, 1);
    cr_assert_str_eq(in.backend_name, "cuda device 1 (simulated)");
    pl_loader_destroy(l);
    record_run(&c, 1, &got);
    assert_same_record(&ref, &got, "device 1");
    record_free(&ref);
    record_free(&got);
    tu_rm_rf(root);
}

/* ---- ordering ---- */

/* A simulated kernel that reads a whole batch at its start, runs a while,
 * and reads it again at its end. */
typedef struct reader {
    const void *batch;
    size_t bytes;
    uint8_t *first, *last;
    unsigned us;
} reader;

static void slow_read(void *arg)
{
    reader *k = arg;
    const uint8_t *v = cudasim_device_view(k->batch);
    memcpy(k->first, v, k->bytes);
    usleep(k->us);
    memcpy(k->last, v, k->bytes);
}

/* Queues a slow reader of b on s, after making s wait for b. */
static void read_on(cudaStream_t s, const pl_batch *b, reader *k, unsigned us)
{
    k->batch = b->data;
    k->bytes = b->bytes;
    k->first = malloc(b->bytes);
    k->last = malloc(b->bytes);
    k->us = us;
    cr_assert_eq(pl_batch_wait(b, s), 0, "%s", pl_last_error());
    cr_assert_eq(cudasim_launch(s, slow_read, k, b->data, b->bytes),
                 cudaSuccess);
}

static void assert_reads(reader *k, int n, const record *ref)
{
    cr_assert_eq(n, ref->nb);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(k[i].bytes, ref->b[i].bytes);
        cr_assert_eq(memcmp(k[i].first, ref->b[i].pixels, k[i].bytes), 0,
                     "batch %d: the kernel saw another batch's bytes at its "
                     "start",
                     i);
        cr_assert_eq(memcmp(k[i].last, ref->b[i].pixels, k[i].bytes), 0,
                     "batch %d: the buffer was overwritten while the "
                     "caller's kernel read it",
                     i);
        free(k[i].first);
        free(k[i].last);
    }
}

/* One device buffer, so every copy goes into the buffer the caller's
 * kernel is reading: released at once (before the kernel has run), the
 * buffer must not be refilled until the kernel is done, and the host never
 * waits for that. */
Test(cuda, release_holds_the_buffer_until_the_callers_kernel_is_done,
     .timeout = TIMEOUT)
{
    sim_timing(200, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 40, 4);
    c.device_buffers = 1;
    c.prefetch = 3;
    record ref;
    host_reference(c, 1, &ref);
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                 cudaSuccess);
    pl_loader *l = create(&c);
    reader k[MAXB];
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        read_on(s, b, &k[n++], 3000);
        cr_assert_eq(pl_loader_release(l, b, s), 0, "%s", pl_last_error());
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    assert_reads(k, n, &ref);
    pl_loader_destroy(l);
    cudaStreamDestroy(s);
    record_free(&ref);
    assert_nothing_live("after destroy");
    tu_rm_rf(root);
}

/* The same with the caller on the legacy default stream (NULL), as in the
 * README's loop when the program never made a stream. */
Test(cuda, release_on_the_legacy_stream_orders_reuse_too, .timeout = TIMEOUT)
{
    sim_timing(200, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 20, 2);
    c.device_buffers = 1;
    record ref;
    host_reference(c, 1, &ref);
    pl_loader *l = create(&c);
    reader k[MAXB];
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        read_on(NULL, b, &k[n++], 2000);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(cudaStreamSynchronize(NULL), cudaSuccess);
    assert_reads(k, n, &ref);
    pl_loader_destroy(l);
    record_free(&ref);
    tu_rm_rf(root);
}

/* The next batch, whichever epoch it is in. */
static void next_batch(pl_loader *l, const pl_batch **b)
{
    int rc;
    while ((rc = pl_loader_next(l, b)) == PL_EPOCH_END) {
    }
    cr_assert_eq(rc, 0, "%s (%s)", pl_err_name(rc), pl_last_error());
}

/* Destroy at any moment: after k batches (each read by a slow kernel on
 * the caller's stream and released before the kernel ran), with 0, 1 or 2
 * batches held, copies in flight. Memory a queued copy or kernel still uses
 * is never freed (the simulator aborts if it is), and nothing is left
 * behind: no allocation, stream or event. */
Test(cuda, destroy_at_any_moment_frees_nothing_still_in_use, .timeout = TIMEOUT)
{
    sim_timing(500, 0);
    char root[64];
    tu_make_tree(root, 30, 3);
    for (int k = 0; k <= 5; k++)
        for (int held = 0; held <= 2; held++) {
            pl_config c;
            base_cfg(&c, root);
            c.memory = (k + held) % 3 == 0   ? PL_MEMORY_PINNED
                       : (k + held) % 3 == 1 ? PL_MEMORY_PAGEABLE
                                             : PL_MEMORY_MANAGED;
            c.keep_host = k % 2;
            cudaStream_t s;
            cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                         cudaSuccess);
            pl_loader *l = create(&c);
            reader r[8];
            const pl_batch *b;
            for (int i = 0; i < k; i++) {
                next_batch(l, &b);
                read_on(s, b, &r[i], 1000);
                cr_assert_eq(pl_loader_release(l, b, s), 0);
            }
            for (int i = 0; i < held; i++)
                next_batch(l, &b);
            pl_loader_destroy(l);
            cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
            cudaStreamDestroy(s);
            for (int i = 0; i < k; i++) {
                free(r[i].first);
                free(r[i].last);
            }
            char when[64];
            snprintf(when, sizeof when, "destroy after %d, holding %d", k,
                     held);
            assert_nothing_live(when);
        }
    cr_assert_eq(cudasim_violations(), 0);
    tu_rm_rf(root);
}

/* ---- locks ---- */

typedef struct stats_call {
    pl_loader *l;
    atomic_int done;
} stats_call;

static void *call_stats(void *arg)
{
    stats_call *sc = arg;
    pl_stats st;
    pl_loader_stats(sc->l, &st);
    atomic_store(&sc->done, 1);
    return NULL;
}

static int wait_for(int (*cond)(void *), void *arg, double seconds)
{
    for (double t = 0; t < seconds; t += 0.001) {
        if (cond(arg))
            return 1;
        usleep(1000);
    }
    return cond(arg);
}

static int sync_copy_blocked(void *arg)
{
    (void)arg;
    return cudasim_blocked_threads() > 0;
}

static int stats_done(void *arg)
{
    return atomic_load(&((stats_call *)arg)->done);
}

/* A copy from a pageable ring returns only once done; pl_loader_stats must
 * not wait for it. With the streams paused, the prefetcher is blocked in
 * its copy for as long as the test likes: stats must return meanwhile. */
Test(cuda, stats_never_wait_for_a_synchronous_copy, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 10, 2);
    c.memory = PL_MEMORY_PAGEABLE;
    pl_loader *l = create(&c);
    cudasim_pause(1);
    cr_assert(wait_for(sync_copy_blocked, NULL, 30),
              "the prefetcher never blocked in a copy");
    stats_call sc = {.l = l};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, call_stats, &sc), 0);
    const int returned = wait_for(stats_done, &sc, 10);
    cudasim_pause(0);
    pthread_join(t, NULL);
    cr_assert(returned, "pl_loader_stats waited for a blocked copy");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* ---- failures ---- */

/* Reads batches until an error (or `epochs` epochs end); every batch
 * delivered must equal the reference's, in order. Returns the code that
 * ended it (PL_EPOCH_END after the last epoch). */
static int run_until_error(pl_loader *l, int epochs, const record *ref,
                           int *delivered)
{
    int e = 0, n = 0, rc;
    const pl_batch *b;
    for (;;) {
        rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END && ++e < epochs)
            continue;
        if (rc != 0)
            break;
        record one = {0};
        keep(&one, b);
        cr_assert_lt(n, ref->nb);
        assert_same_batch(&ref->b[n], &one.b[0], "before the error", n);
        record_free(&one);
        pl_loader_release(l, b, NULL);
        n++;
    }
    *delivered = n;
    return rc;
}

/* cudaLaunchHostFunc hands a ring slot back once its copies are done. If
 * it fails, the copies already queued still read the slot: it must not be
 * refilled under them. One slow copy per slot and one ring slot make the
 * workers refill at once if allowed. */
Test(cuda, a_failed_host_callback_never_frees_a_slot_under_its_copy,
     .timeout = TIMEOUT)
{
    sim_timing(0, 0.0005); /* 0.5 MB/s: about 8 ms per batch */
    char root[64];
    pl_config c;
    sim_tree(root, &c, 30, 3);
    c.prefetch = 1;
    record ref;
    host_reference(c, 1, &ref);
    for (unsigned long nth = 1; nth <= 3; nth++) {
        cudasim_clear_faults();
        cudasim_inject(
            &(cudasim_fault){.call = "cudaLaunchHostFunc", .nth = nth});
        pl_loader *l = create(&c);
        int n;
        const int rc = run_until_error(l, 1, &ref, &n);
        cr_assert_eq(rc, PL_ECUDA, "fault %lu: %s (%s)", nth, pl_err_name(rc),
                     pl_last_error());
        cr_assert_not_null(strstr(pl_last_error(), "cudaLaunchHostFunc"), "%s",
                           pl_last_error());
        cr_assert_geq(n, (int)nth - 1, "the batches before the failure");
        pl_loader_destroy(l);
        cudasim_clear_faults();
        assert_nothing_live("after the failure");
    }
    record_free(&ref);
    tu_rm_rf(root);
}

static _Atomic int host_release_notices;

static void count_host_releases(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    if (level == PL_LOG_NOTICE && strstr(msg, "the host waited for the "
                                              "caller's stream"))
        atomic_fetch_add(&host_release_notices, 1);
}

/* The release event is recorded on the caller's stream. If that fails,
 * the buffer may be reused only once the caller's work on it is done: the
 * host waits for the stream instead, and the batch is released all the
 * same: a success, with a notice the first time. */
Test(cuda, a_failed_release_record_still_protects_the_callers_kernel,
     .timeout = TIMEOUT)
{
    sim_timing(200, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 30, 3);
    c.device_buffers = 1;
    record ref;
    host_reference(c, 1, &ref);
    c.log = count_host_releases;
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                 cudaSuccess);
    cudasim_inject(&(cudasim_fault){.call = "cudaEventRecord",
                                    .nth = 2,
                                    .times = 2,
                                    .on_stream = 1,
                                    .stream = s,
                                    .error = cudaErrorInvalidResourceHandle});
    pl_loader *l = create(&c);
    reader k[MAXB];
    const pl_batch *b;
    int rc, n = 0, failed = 0, again = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        read_on(s, b, &k[n++], 3000);
        failed += pl_loader_release(l, b, s) != 0;
        again += pl_loader_release(l, b, s) == PL_EINVAL;
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    assert_reads(k, n, &ref);
    cr_assert_eq(cudasim_faults_delivered(), 2, "both records failed");
    cr_assert_eq(failed, 0, "a release the host waited for is a success");
    cr_assert_eq(again, n, "every batch was released");
    cr_assert_eq(atomic_load(&host_release_notices), 1,
                 "the fallback said so, once");
    pl_loader_destroy(l);
    cudaStreamDestroy(s);
    record_free(&ref);
    tu_rm_rf(root);
}

/* A copy that fails on the device (an Xid, a user kernel's illegal access
 * on the same context) breaks the context: the ring slot's callback is then
 * never called. The caller must get the error, not wait forever. */
Test(cuda, a_copy_failing_on_the_device_ends_in_an_error_not_a_hang,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 40, 4);
    c.prefetch = 1;
    c.device_buffers = 1;
    record ref;
    host_reference(c, 2, &ref);
    for (unsigned long nth = 1; nth <= 4; nth += 3) {
        cudasim_clear_faults();
        cudasim_inject(&(cudasim_fault){
            .call = "cudaMemcpyAsync", .nth = nth, .asynchronous = 1});
        pl_loader *l = create(&c);
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0 || rc == PL_EPOCH_END)
            if (rc == 0)
                pl_loader_release(l, b, NULL);
        cr_assert_eq(rc, PL_ECUDA, "%s (%s)", pl_err_name(rc), pl_last_error());
        cr_assert_not_null(strstr(pl_last_error(), "illegal memory access"),
                           "%s", pl_last_error());
        cr_assert_eq(pl_loader_next(l, &b), PL_ECUDA, "the error stays");
        pl_loader_destroy(l);
    }
    cudasim_clear_faults();
    assert_nothing_live("after the broken device");
    record_free(&ref);
    tu_rm_rf(root);
}

/* Each call the pipeline makes per batch, failing at its 1st .. 12th use:
 * every batch delivered before the failure is right, then PL_ECUDA naming
 * the call stays; nothing hangs, nothing is freed under a copy, nothing
 * leaks. */
Test(cuda, every_call_of_an_epoch_can_fail_cleanly, .timeout = TIMEOUT)
{
    sim_timing(100, 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 25, 3);
    c.keep_host = 0;
    record ref;
    host_reference(c, 2, &ref);
    static const char *const calls[] = {"cudaMemcpyAsync", "cudaEventRecord",
                                        "cudaStreamWaitEvent",
                                        "cudaLaunchHostFunc", "cudaSetDevice"};
    for (int i = 0; i < 5; i++)
        for (unsigned long nth = 1; nth <= 12; nth++) {
            c.memory = nth % 2 ? PL_MEMORY_PINNED : PL_MEMORY_PAGEABLE;
            cudasim_clear_faults();
            /* The loader's own threads' calls, not the test's reads. */
            cudasim_inject(&(cudasim_fault){
                .call = calls[i], .nth = nth, .other_threads = 1});
            pl_loader *l = create(&c);
            int n;
            const int rc = run_until_error(l, 2, &ref, &n);
            if (cudasim_faults_delivered() == 0) {
                cr_assert_eq(rc, PL_EPOCH_END, "%s: %s", calls[i],
                             pl_last_error());
                cr_assert_eq(n, ref.nb);
            } else if (rc != PL_EPOCH_END) {
                cr_assert_eq(rc, PL_ECUDA, "%s #%lu: %s (%s)", calls[i], nth,
                             pl_err_name(rc), pl_last_error());
                cr_assert_not_null(strstr(pl_last_error(), calls[i]),
                                   "%s #%lu: %s", calls[i], nth,
                                   pl_last_error());
            }
            pl_loader_destroy(l);
            cudasim_clear_faults();
            char when[96];
            snprintf(when, sizeof when, "%s failing at use %lu", calls[i], nth);
            assert_nothing_live(when);
        }
    record_free(&ref);
    tu_rm_rf(root);
}

/* Every CUDA call that pl_loader_create makes on the caller's thread,
 * failing in turn: create fails with a clear error, or succeeds (pinned
 * memory falls back to pageable) and then delivers right bytes or a clear
 * error; either way nothing is left allocated. (Its threads' calls are
 * every_call_of_an_epoch_can_fail_cleanly's.) */
Test(cuda, every_call_of_create_can_fail_without_a_leak, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.keep_host = 1;
    record ref;
    host_reference(c, 1, &ref);
    const unsigned long before = cudasim_calls(NULL);
    pl_loader *l = create(&c);
    const unsigned long calls = cudasim_calls(NULL) - before;
    pl_loader_destroy(l);
    cr_assert_gt(calls, 20, "create made %lu CUDA calls", calls);
    int failed = 0;
    for (unsigned long nth = 1; nth <= calls; nth++) {
        cudasim_clear_faults();
        cudasim_inject(
            &(cudasim_fault){.call = "*", .nth = nth, .this_thread = 1});
        l = NULL;
        const int rc = pl_loader_create(&c, &l);
        cudasim_clear_faults(); /* not the test's own calls below */
        if (rc < 0) {
            failed++;
            cr_assert_null(l);
            cr_assert(rc == PL_ECUDA || rc == PL_ENOMEM, "call %lu: %s (%s)",
                      nth, pl_err_name(rc), pl_last_error());
            cr_assert_gt(strlen(pl_last_error()), 20, "%s", pl_last_error());
        } else {
            int n;
            const int r = run_until_error(l, 1, &ref, &n);
            cr_assert(r == PL_EPOCH_END || r == PL_ECUDA, "call %lu: %s (%s)",
                      nth, pl_err_name(r), pl_last_error());
            pl_loader_destroy(l);
        }
        cudasim_clear_faults();
        char when[64];
        snprintf(when, sizeof when, "call %lu of create failing", nth);
        assert_nothing_live(when);
    }
    cr_assert_gt(failed, 5, "most failures fail create");
    record_free(&ref);
    tu_rm_rf(root);
}
