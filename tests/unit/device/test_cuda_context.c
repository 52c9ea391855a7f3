/* The CUDA backend on the simulated runtime (tests/cudasim): what a
 * caller's thread gets from pinload's calls, under the rules a real GPU
 * enforces. pl_batch_wait and pl_loader_release on NULL and on
 * cudaStreamPerThread act on the loader's device, whatever device the
 * calling thread has current; no call creates a context on a device the
 * caller never used (CUDA 12's cudaSetDevice creates one, hundreds of MB,
 * and an exclusive-process GPU refuses it); an error pinload handles is
 * not left pending for the caller's cudaGetLastError. Built only by
 * `make CUDA=sim`. */
#include <pthread.h>
#include <stdatomic.h>

#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 120

/* ---- waits and releases on the loader's device ---- */

/* A simulated kernel that copies what it finds in a device buffer. */
typedef struct snapshot {
    const unsigned char *src; /* the engine's view */
    unsigned char *dst;
    size_t n;
} snapshot;

static void take_snapshot(void *arg)
{
    const snapshot *s = arg;
    memcpy(s->dst, s->src, s->n);
}

/* With copies slow enough that a batch is handed out while its copy is in
 * flight, `wait_on` (NULL or cudaStreamPerThread) is made to wait for the
 * batch on a thread whose current device is 0, for a loader on device 1;
 * then the thread moves to device 1 and a kernel on that same handle reads
 * the batch. It must see the whole batch: the handle names device 1's
 * stream for pinload as it does for the kernel. Returns the batches seen. */
static int kernels_read_whole_batches(cudaStream_t wait_on)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.device = 1;
    c.num_workers = 1;
    pl_loader *l = create(&c);
    /* 3,840 bytes a batch at 20 kB/s: each copy takes 192 ms. */
    sim_timing(0, 0.00002);
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CUDA_OK(cudaSetDevice(0));
        cr_assert_eq(pl_batch_wait(b, wait_on), 0, "%s", pl_last_error());
        CUDA_OK(cudaSetDevice(1));
        unsigned char *seen = malloc(b->bytes), *want = malloc(b->bytes);
        snapshot s = {view(b->data), seen, b->bytes};
        CUDA_OK(cudasim_launch(wait_on, take_snapshot, &s, b->data, b->bytes));
        CUDA_OK(cudaStreamSynchronize(wait_on));
        tu_batch_pixels(b, want);
        cr_assert_arr_eq(seen, want, b->bytes,
                         "batch %lld: the kernel on device 1 read it before "
                         "its copy was done",
                         (long long)b->index);
        free(seen);
        free(want);
        cr_assert_eq(pl_loader_release(l, b, wait_on), 0, "%s",
                     pl_last_error());
        n++;
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    sim_timing(0, 0);
    pl_loader_destroy(l);
    tu_rm_rf(root);
    return n;
}

Test(cuda_context, batch_wait_on_null_orders_the_loaders_device,
     .timeout = TIMEOUT)
{
    cr_assert_eq(kernels_read_whole_batches(NULL), 3);
}

Test(cuda_context,
     batch_wait_on_the_per_thread_stream_orders_the_loaders_device,
     .timeout = TIMEOUT)
{
    cr_assert_eq(kernels_read_whole_batches(cudaStreamPerThread), 3);
}

/* A release on cudaStreamPerThread names the calling thread's per-thread
 * stream of the loader's device, where the release event can be recorded:
 * no fallback, no error, and the next copy into the buffer waits for the
 * kernel queued there before the release. */
Test(cuda_context, release_on_the_per_thread_stream_orders_reuse,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 20, 2);
    c.device = 1;
    c.device_buffers = 1;
    pl_loader *l = create(&c);
    CUDA_OK(cudaSetDevice(0));
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    const void *data = b->data;
    /* A kernel on device 1's per-thread stream of this thread writes the
     * buffer until the gate opens; the release is ordered after it. */
    CUDA_OK(cudaSetDevice(1));
    cr_assert_eq(pl_batch_wait(b, cudaStreamPerThread), 0, "%s",
                 pl_last_error());
    gate g = GATE_INIT;
    g.fill = view(data);
    g.n = b->bytes;
    g.value = 0x5A;
    CUDA_OK(
        cudasim_launch(cudaStreamPerThread, gate_kernel, &g, data, b->bytes));
    CUDA_OK(cudaSetDevice(0));
    cr_assert_eq(pl_loader_release(l, b, cudaStreamPerThread), 0, "%s",
                 pl_last_error());
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    gate_wait_entered(&g);
    sleep_ms(50); /* a copy that did not wait would land now */
    gate_open(&g);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->data, data, "one device buffer");
    unsigned char *px = malloc(b->bytes);
    tu_batch_pixels(b, px);
    int zapped = 1;
    for (size_t i = 0; i < b->bytes; i++)
        zapped &= px[i] == 0x5A;
    cr_assert(!zapped, "the second batch's copy ran before the kernel");
    free(px);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* ---- contexts ---- */

/* A whole use of a loader on device 1 from the calling thread, which never
 * chose a device: create, next, wait, release on NULL and on a stream of
 * device 1 (made by a helper thread), stats, destroy. */
typedef struct stream_job {
    cudaStream_t s;
} stream_job;

static void *make_stream_on_1(void *arg)
{
    stream_job *j = arg;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&j->s, cudaStreamNonBlocking),
                 cudaSuccess);
    return NULL;
}

static void *destroy_stream(void *arg)
{
    stream_job *j = arg;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaStreamDestroy(j->s), cudaSuccess);
    return NULL;
}

static void on_helper(void *(*fn)(void *), stream_job *j)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fn, j), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
}

static void use_a_loader_on_device_1(void)
{
    stream_job j;
    on_helper(make_stream_on_1, &j);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.device = 1;
    pl_loader *l = create(&c);
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        cudaStream_t s = n % 2 ? j.s : NULL;
        cr_assert_eq(pl_batch_wait(b, s), 0, "%s", pl_last_error());
        cr_assert_eq(pl_loader_release(l, b, s), 0, "%s", pl_last_error());
        pl_stats st;
        cr_assert_eq(pl_loader_stats(l, &st), 0, "%s", pl_last_error());
        n++;
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(n, 3);
    pl_loader_destroy(l);
    on_helper(destroy_stream, &j);
    tu_rm_rf(root);
}

/* Since CUDA 12, cudaSetDevice creates the device's primary context; the
 * runtime's first call on a thread with no context creates device 0's.
 * A thread that never chose a device and runs a loader on device 1 must
 * cost GPU 0 nothing. */
Test(cuda_context, no_call_creates_a_context_on_a_device_the_caller_never_used,
     .timeout = TIMEOUT)
{
    use_a_loader_on_device_1();
    cudasim_live lv;
    cudasim_get_live(&lv);
    cr_assert_eq(lv.context_mask, 1u << 1,
                 "contexts on devices 0x%x; want device 1's alone",
                 lv.context_mask);
    cr_assert_eq(lv.context_bytes, (size_t)300 << 20);
}

/* GPU 0 in exclusive-process mode, held by another process (a job's rank
 * 0, say): this process cannot have a context there, and a loader on
 * device 1 runs all the same. */
Test(cuda_context, a_loader_runs_beside_a_busy_exclusive_process_gpu,
     .timeout = TIMEOUT)
{
    cudasim_config sc;
    cudasim_get_config(&sc);
    sc.exclusive_busy = 1u << 0;
    cr_assert_eq(cudasim_set_config(&sc), 0);
    use_a_loader_on_device_1();
    ASSERT_CUDA(cudaGetLastError(), cudaSuccess);
    int d = -1;
    CUDA_OK(cudaGetDevice(&d));
    cr_assert_eq(d, 0, "the thread was left on device %d", d);
    ASSERT_CUDA(cudaSetDevice(0), cudaErrorDevicesUnavailable);
    cr_assert_eq(cudaGetLastError(), cudaErrorDevicesUnavailable,
                 "the sim keeps this test's own error pending");
}

/* The loader's device is busy: create fails naming it. */
Test(cuda_context, a_busy_device_is_an_error_naming_it, .timeout = TIMEOUT)
{
    cudasim_config sc;
    cudasim_get_config(&sc);
    sc.exclusive_busy = 1u << 1;
    cr_assert_eq(cudasim_set_config(&sc), 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.device = 1;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECUDA);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "CUDA device 1"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "exclusive-process"), "%s",
                       pl_last_error());
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    tu_rm_rf(root);
}

/* ---- errors left to the caller ---- */

static char notices[1024];

static void keep_notices(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    if (level == PL_LOG_NOTICE && strstr(msg, "pl_loader_release"))
        snprintf(notices, sizeof notices, "%s", msg);
}

/* A release on a stream of another device cannot record its event there:
 * pinload waits on the host instead, releases the batch (a success) and
 * says so in a notice, and the runtime's error is not left pending for the
 * caller's next launch check. */
Test(cuda_context, a_handled_failure_leaves_no_error_pending,
     .timeout = TIMEOUT)
{
    stream_job j;
    on_helper(make_stream_on_1, &j);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.log = keep_notices;
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(pl_loader_release(l, b, j.s), 0, "%s", pl_last_error());
    cr_assert_not_null(strstr(notices, "the host waited for the caller's "
                                       "stream"),
                       "%s", notices);
    cr_assert_eq(pl_loader_release(l, b, NULL), PL_EINVAL,
                 "the batch was released");
    ASSERT_CUDA(cudaGetLastError(), cudaSuccess);
    /* And a wait on it, which CUDA allows across devices, succeeds. */
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(pl_batch_wait(b, j.s), 0, "%s", pl_last_error());
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    ASSERT_CUDA(cudaGetLastError(), cudaSuccess);
    pl_loader_destroy(l);
    on_helper(destroy_stream, &j);
    tu_rm_rf(root);
}

/* ---- a batch read on several streams (DLPack's consumers) ---- */

/* Two kernels read (here: overwrite, until their gates open) the one
 * device buffer on two streams; the batch is released after both. The
 * later copy into the buffer must land after the kernel that finishes
 * last, even when that is the first stream named. */
Test(cuda_context, release_streams_orders_reuse_after_every_stream,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 20, 2);
    c.device_buffers = 1;
    pl_loader *l = create(&c);
    cudaStream_t s[2];
    for (int i = 0; i < 2; i++)
        CUDA_OK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    const void *data = b->data;
    /* Each kernel fills its half of the buffer (0x11, 0x22). */
    const size_t half = b->bytes / 2;
    gate g[2] = {GATE_INIT, GATE_INIT};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pl_batch_wait(b, s[i]), 0, "%s", pl_last_error());
        g[i].fill = view(data) + i * half;
        g[i].n = half;
        g[i].value = 0x11 * (i + 1);
        CUDA_OK(cudasim_launch(s[i], gate_kernel, &g[i], data, b->bytes));
    }
    cr_assert_eq(pl_loader_release_streams(l, b, s, 2), 0, "%s",
                 pl_last_error());
    gate_wait_entered(&g[0]);
    gate_wait_entered(&g[1]);
    gate_open(&g[1]);
    sleep_ms(50); /* a copy that waited for s[1] alone would land now */
    gate_open(&g[0]);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->data, data, "one device buffer");
    unsigned char *px = malloc(b->bytes);
    tu_batch_pixels(b, px);
    int zapped = 1;
    for (size_t i = 0; i < half; i++)
        zapped &= px[i] == 0x11;
    cr_assert(!zapped, "the copy ran before the first stream's kernel");
    zapped = 1;
    for (size_t i = half; i < 2 * half; i++)
        zapped &= px[i] == 0x22;
    cr_assert(!zapped, "the copy ran before the second stream's kernel");
    free(px);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    for (int i = 0; i < 2; i++)
        CUDA_OK(cudaStreamDestroy(s[i]));
    tu_rm_rf(root);
}

Test(cuda_context, release_streams_takes_one_to_eight_streams,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cudaStream_t s[PL_RELEASE_STREAMS_MAX + 1] = {0};
    cr_assert_eq(pl_loader_release_streams(l, b, s, 0), PL_EINVAL);
    cr_assert_eq(pl_loader_release_streams(l, b, s, 9), PL_EINVAL);
    cr_assert_str_eq(pl_last_error(),
                     "pl_loader_release_streams: n is 9, not 1 to 8");
    cr_assert_eq(pl_loader_release_streams(l, b, s, 8), 0, "%s",
                 pl_last_error());
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* A consumer thread reads the batch on its per-thread default stream; the
 * batch is released from another thread (a DLPack deleter run by the
 * garbage collector), which cannot name that stream. On NULL, the legacy
 * stream of the loader's device, the release still waits for it: the
 * legacy stream synchronises with every thread's per-thread stream. This
 * is what the Python binding does for DLPack's stream=2. */
typedef struct consumer {
    const pl_batch *b;
    const void *data;
    size_t n;
    gate g;
} consumer;

static void *consume_on_per_thread_stream(void *arg)
{
    consumer *k = arg;
    cr_assert_eq(pl_batch_wait(k->b, cudaStreamPerThread), 0, "%s",
                 pl_last_error());
    k->g.fill = view(k->data);
    k->g.n = k->n;
    k->g.value = 0x33;
    cr_assert_eq(
        cudasim_launch(cudaStreamPerThread, gate_kernel, &k->g, k->data, k->n),
        cudaSuccess);
    return NULL;
}

Test(cuda_context, release_on_null_orders_another_threads_per_thread_stream,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 20, 2);
    c.device_buffers = 1;
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    const void *data = b->data;
    consumer k = {.b = b, .data = data, .n = b->bytes, .g = GATE_INIT};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, consume_on_per_thread_stream, &k), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    gate_wait_entered(&k.g);
    sleep_ms(50);
    gate_open(&k.g);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    unsigned char *px = malloc(b->bytes);
    tu_batch_pixels(b, px);
    int zapped = 1;
    for (size_t i = 0; i < b->bytes; i++)
        zapped &= px[i] == 0x33;
    cr_assert(!zapped, "the copy ran before the consumer thread's kernel");
    free(px);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* ---- destroy's wait for the caller's kernels ---- */

static char warnings[2048];

static void keep_warnings(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    if (level == PL_LOG_WARNING)
        snprintf(warnings, sizeof warnings, "%s", msg);
}

static void *destroy_in_thread(void *arg)
{
    void **a = arg;
    pl_loader_destroy(a[0]);
    atomic_store((atomic_int *)a[1], 1);
    return NULL;
}

/* A kernel on the stream a batch was released on never ends (a collective
 * whose peer died): destroy waits for it within the time limit that bounds
 * the rest of destroy (max_decode_ms), then leaves that buffer, and the
 * ring its copies read, allocated rather than hang or free them under the
 * kernel (which the simulator would report). In a child process: what is
 * left allocated is leaked by design, which LeakSanitizer would report at
 * the test's exit. The child's exit code names the check that failed. */
static int destroy_with_a_kernel_that_never_ends(void *arg)
{
    const char *root = arg;
    pl_config c;
    base_cfg(&c, root);
    c.max_decode_ms = 300;
    c.log = keep_warnings;
    pl_loader *l = NULL;
    cudaStream_t s;
    const pl_batch *b;
    if (pl_loader_create(&c, &l) != 0 ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        pl_loader_next(l, &b) != 0 || pl_batch_wait(b, s) != 0)
        return 10;
    gate g = GATE_INIT;
    if (cudasim_launch(s, gate_kernel, &g, b->data, b->bytes) != cudaSuccess ||
        pl_loader_release(l, b, s) != 0)
        return 11;
    gate_wait_entered(&g);
    atomic_int done = 0;
    void *args[2] = {l, &done};
    pthread_t t;
    const double t0 = tu_seconds();
    if (pthread_create(&t, NULL, destroy_in_thread, args) != 0)
        return 12;
    const int returned = wait_flag(&done, 3.0);
    const double took = tu_seconds() - t0;
    gate_open(&g); /* let a destroy that waits for ever go on, and the sim */
    pthread_join(t, NULL);
    if (!returned)
        return 13; /* destroy waited for the kernel past 3 s */
    if (took < 0.29)
        return 14;
    if (strcmp(warnings,
               "pl_loader_destroy: work on 1 released batch still ran "
               "after 300 ms (the caller's kernels on the streams given to "
               "pl_loader_release): its device memory, streams and host "
               "ring are left allocated rather than freed under it") != 0) {
        fprintf(stderr, "warning: %s\n", warnings);
        return 15;
    }
    if (cudaStreamSynchronize(s) != cudaSuccess ||
        cudaStreamDestroy(s) != cudaSuccess)
        return 16;
    return cudasim_violations() == 0 ? 0 : 17;
}

Test(cuda_context, destroy_waits_for_the_callers_kernels_within_a_bound,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 12, 2);
    const int status =
        run_in_child(destroy_with_a_kernel_that_never_ends, root, 0);
    cr_assert(WIFEXITED(status), "the child died: status %d", status);
    cr_assert_eq(WEXITSTATUS(status), 0,
                 "check %d failed (13: destroy hung past 3 s)",
                 WEXITSTATUS(status));
    tu_rm_rf(root);
}
