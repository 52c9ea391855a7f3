/* The simulated CUDA runtime itself (tests/cudasim), how it orders work:
 * streams run in order on threads of their own and late; copies through
 * pageable memory block; events, stream waits, the legacy default stream
 * and each thread's per-thread stream order work; host functions run
 * elsewhere and may not call CUDA. Its memory, faults and devices are
 * test_cudasim.c's. Each test runs in a process of its own, so the
 * simulator starts fresh in each. Built only by `make CUDA=sim`. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "cudasim.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 10
#define N 4096

/* ---- streams ------------------------------------------------------------- */

Test(cudasim, streams_run_their_operations_in_fifo_order_on_their_own_threads,
     .timeout = TIMEOUT)
{
    sim_timing(500, 0);
    enum { PER = 24 };
    cudaStream_t s[2];
    CUDA_OK(cudaStreamCreate(&s[0]));
    CUDA_OK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    oplog log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    step steps[2 * PER];
    for (int i = 0; i < PER; i++)
        for (int k = 0; k < 2; k++) {
            steps[2 * i + k] = (step){&log, k * 1000 + i};
            CUDA_OK(cudasim_launch(s[k], log_step, &steps[2 * i + k], NULL, 0));
        }
    CUDA_OK(cudaStreamSynchronize(s[0]));
    CUDA_OK(cudaStreamSynchronize(s[1]));
    cr_assert_eq(log.n, 2 * PER);

    int next[2] = {0, 0};
    pthread_t thread[2];
    for (int i = 0; i < log.n; i++) {
        const int k = log.tag[i] / 1000, idx = log.tag[i] % 1000;
        cr_assert_eq(idx, next[k], "stream %d ran operation %d before %d", k,
                     idx, next[k]);
        if (next[k] == 0)
            thread[k] = log.thread[i];
        cr_assert(pthread_equal(log.thread[i], thread[k]),
                  "stream %d's operation %d ran on another thread", k, idx);
        cr_assert(!pthread_equal(log.thread[i], pthread_self()),
                  "stream %d's operation %d ran on the caller's thread", k,
                  idx);
        next[k]++;
    }
    cr_assert_eq(next[0], PER);
    cr_assert_eq(next[1], PER);
    cr_assert(!pthread_equal(thread[0], thread[1]),
              "both streams ran on one thread");
    CUDA_OK(cudaStreamDestroy(s[0]));
    CUDA_OK(cudaStreamDestroy(s[1]));
}

Test(cudasim, async_copy_reads_pinned_memory_when_it_executes_not_when_issued,
     .timeout = TIMEOUT)
{
    /* Up to 20 ms of random delay, and 4096 bytes at 0.0004 GB/s add
     * 10 ms more: every copy runs at least 10 ms after it is issued. */
    sim_timing(20000, 0.0004);
    unsigned char *host = NULL, *dev = NULL;
    cudaStream_t s;
    CUDA_OK(cudaHostAlloc((void **)&host, N, cudaHostAllocDefault));
    CUDA_OK(cudaMalloc((void **)&dev, N));
    CUDA_OK(cudaStreamCreate(&s));

    /* Forgetting to wait: the change made after the call is what lands. */
    memset(host, 0x11, N);
    CUDA_OK(cudaMemcpyAsync(dev, host, N, cudaMemcpyHostToDevice, s));
    memset(host, 0x22, N);
    CUDA_OK(cudaStreamSynchronize(s));
    assert_all(view(dev), 0x22, N, "H2D, source changed before the sync");

    /* Waiting first: the bytes at the time of the call. */
    memset(host, 0x33, N);
    CUDA_OK(cudaMemcpyAsync(dev, host, N, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamSynchronize(s));
    memset(host, 0x44, N);
    assert_all(view(dev), 0x33, N, "H2D, source changed after the sync");

    /* The other way: right after the call the pinned destination still
     * holds its old bytes. */
    CUDA_OK(cudaMemcpyAsync(host, dev, N, cudaMemcpyDeviceToHost, s));
    assert_all(host, 0x44, N, "D2H destination before the sync");
    CUDA_OK(cudaStreamSynchronize(s));
    assert_all(host, 0x33, N, "D2H destination after the sync");

    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(host));
}

typedef struct copy_job {
    void *dst;
    const void *src;
    size_t n;
    cudaStream_t stream;
    cudaError_t rc;
    atomic_int returned;
} copy_job;

static void *copy_thread(void *arg)
{
    copy_job *j = arg;
    j->rc = cudaMemcpyAsync(j->dst, j->src, j->n, cudaMemcpyHostToDevice,
                            j->stream);
    atomic_store(&j->returned, 1);
    return NULL;
}

Test(cudasim, pageable_copy_returns_after_it_has_run_and_pinned_before,
     .timeout = TIMEOUT)
{
    sim_timing(20000, 0);
    unsigned char *pinned = NULL, *dev = NULL;
    unsigned char *pageable = malloc(N);
    cr_assert_not_null(pageable);
    cudaStream_t s;
    CUDA_OK(cudaMallocHost((void **)&pinned, N));
    CUDA_OK(cudaMalloc((void **)&dev, 2 * N));
    CUDA_OK(cudaStreamCreate(&s));

    /* Unpaused, with up to 20 ms of delay: the pageable copy is complete
     * when the call returns. */
    memset(pageable, 0x5A, N);
    CUDA_OK(cudaMemcpyAsync(dev, pageable, N, cudaMemcpyHostToDevice, s));
    assert_all(view(dev), 0x5A, N, "pageable copy as its call returns");

    /* Paused, with no delay: the pinned copy returns and waits its turn. */
    sim_timing(0, 0);
    cudasim_pause(1);
    memset(pinned, 0x61, N);
    memset(pageable, 0x62, N);
    CUDA_OK(cudaMemcpyAsync(dev, pinned, N, cudaMemcpyHostToDevice, s));
    sleep_ms(20);
    ASSERT_CUDA(cudaStreamQuery(s), cudaErrorNotReady);
    assert_all(view(dev), 0x5A, N, "pinned copy while paused");

    /* The pageable copy, from another thread, blocks until the streams go
     * on. */
    copy_job job = {.dst = dev + N, .src = pageable, .n = N, .stream = s};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, copy_thread, &job), 0);
    cr_assert_eq(wait_blocked(1, 5.0), 1,
                 "the pageable copy's thread is not blocked in the sim");
    sleep_ms(30);
    cr_assert_eq(atomic_load(&job.returned), 0,
                 "a pageable copy returned while the streams were paused");
    assert_all(view(dev) + N, 0xCD, N, "pageable copy's target while paused");

    cudasim_pause(0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(job.rc, cudaSuccess);
    cr_assert_eq(cudasim_blocked_threads(), 0);
    assert_all(view(dev) + N, 0x62, N, "pageable copy once it returned");
    CUDA_OK(cudaStreamSynchronize(s));
    assert_all(view(dev), 0x61, N, "pinned copy after the sync");

    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(pinned));
    free(pageable);
}

/* ---- events -------------------------------------------------------------- */

Test(cudasim, event_query_is_not_ready_until_the_work_before_it_has_finished,
     .timeout = TIMEOUT)
{
    cudaStream_t s;
    cudaEvent_t ev;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&ev));
    CUDA_OK(cudaEventQuery(ev));       /* never recorded */
    CUDA_OK(cudaEventSynchronize(ev)); /* nothing to wait for */

    gate g = GATE_INIT;
    CUDA_OK(cudasim_launch(s, gate_kernel, &g, NULL, 0));
    CUDA_OK(cudaEventRecord(ev, s));
    gate_wait_entered(&g);
    ASSERT_CUDA(cudaEventQuery(ev), cudaErrorNotReady);
    sleep_ms(20);
    ASSERT_CUDA(cudaEventQuery(ev), cudaErrorNotReady);

    gate_open(&g);
    CUDA_OK(cudaEventSynchronize(ev));
    cr_assert(gate_done(&g), "the event completed before the kernel");
    CUDA_OK(cudaEventQuery(ev));

    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
}

typedef struct event_sync_job {
    cudaEvent_t ev;
    cudaError_t rc;
    atomic_int returned;
} event_sync_job;

static void *event_sync_thread(void *arg)
{
    event_sync_job *j = arg;
    j->rc = cudaEventSynchronize(j->ev);
    atomic_store(&j->returned, 1);
    return NULL;
}

Test(cudasim, event_synchronize_waits_for_the_recorded_work, .timeout = TIMEOUT)
{
    cudaStream_t s;
    cudaEvent_t ev;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventBlockingSync));
    gate g = GATE_INIT;
    CUDA_OK(cudasim_launch(s, gate_kernel, &g, NULL, 0));
    CUDA_OK(cudaEventRecord(ev, s));

    event_sync_job job = {.ev = ev};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, event_sync_thread, &job), 0);
    cr_assert_eq(wait_blocked(1, 5.0), 1,
                 "cudaEventSynchronize's thread is not blocked in the sim");
    sleep_ms(30);
    cr_assert_eq(atomic_load(&job.returned), 0,
                 "cudaEventSynchronize returned before the kernel ran");

    gate_open(&g);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(job.rc, cudaSuccess);
    cr_assert(gate_done(&g));

    /* And from the calling thread: a slow kernel is done on return. */
    slow k = {.ms = 40};
    CUDA_OK(cudasim_launch(s, slow_step, &k, NULL, 0));
    CUDA_OK(cudaEventRecord(ev, s));
    CUDA_OK(cudaEventSynchronize(ev));
    cr_assert_eq(atomic_load(&k.done), 1,
                 "cudaEventSynchronize returned before the slow kernel ended");

    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
}

Test(cudasim, stream_wait_event_orders_work_across_streams, .timeout = TIMEOUT)
{
    cudaStream_t a, b;
    cudaEvent_t ev;
    unsigned char *dev = NULL, *before = NULL, *after = NULL;
    CUDA_OK(cudaStreamCreate(&a));
    CUDA_OK(cudaStreamCreate(&b));
    CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_OK(cudaMalloc((void **)&dev, N));
    CUDA_OK(cudaMallocHost((void **)&before, N));
    CUDA_OK(cudaMallocHost((void **)&after, N));

    /* Stream a's slow work writes 0x77 into dev once the gate opens. */
    gate g = GATE_INIT;
    g.fill = view(dev);
    g.n = N;
    g.value = 0x77;
    CUDA_OK(cudasim_launch(a, gate_kernel, &g, dev, N));
    CUDA_OK(cudaEventRecord(ev, a));
    gate_wait_entered(&g);

    /* Without the wait, b's copy runs at once and sees the old bytes. */
    CUDA_OK(cudaMemcpyAsync(before, dev, N, cudaMemcpyDeviceToHost, b));
    CUDA_OK(cudaStreamSynchronize(b));
    assert_all(before, 0xCD, N, "b's copy without the wait");

    /* With it, b runs nothing until a's work is done. */
    CUDA_OK(cudaStreamWaitEvent(b, ev, 0));
    CUDA_OK(cudaMemcpyAsync(after, dev, N, cudaMemcpyDeviceToHost, b));
    sleep_ms(20);
    ASSERT_CUDA(cudaStreamQuery(b), cudaErrorNotReady);
    gate_open(&g);
    CUDA_OK(cudaStreamSynchronize(b));
    assert_all(after, 0x77, N, "b's copy after waiting on a's event");

    CUDA_OK(cudaStreamSynchronize(a));
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(a));
    CUDA_OK(cudaStreamDestroy(b));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(before));
    CUDA_OK(cudaFreeHost(after));
}

Test(cudasim, event_elapsed_time_needs_timed_recorded_completed_events,
     .timeout = TIMEOUT)
{
    cudaStream_t s;
    cudaEvent_t start, stop, untimed, never;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    CUDA_OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreate(&never));
    float ms = -1.0f;
    ASSERT_CUDA(cudaEventElapsedTime(&ms, start, stop),
                cudaErrorInvalidResourceHandle);

    gate g = GATE_INIT;
    CUDA_OK(cudaEventRecord(start, s));
    CUDA_OK(cudasim_launch(s, gate_kernel, &g, NULL, 0));
    CUDA_OK(cudaEventRecord(stop, s));
    CUDA_OK(cudaEventSynchronize(start));
    ASSERT_CUDA(cudaEventElapsedTime(&ms, start, never),
                cudaErrorInvalidResourceHandle);
    ASSERT_CUDA(cudaEventElapsedTime(&ms, never, start),
                cudaErrorInvalidResourceHandle);
    ASSERT_CUDA(cudaEventElapsedTime(&ms, start, stop), cudaErrorNotReady);

    /* start completed before this sleep, stop after it. */
    sleep_ms(30);
    gate_open(&g);
    CUDA_OK(cudaEventSynchronize(stop));
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    cr_assert_geq(ms, 29.0f, "elapsed %.3f ms across a 30 ms wait", ms);
    cr_assert_lt(ms, 10000.0f, "elapsed %.3f ms", ms);

    CUDA_OK(cudaEventRecord(untimed, s));
    CUDA_OK(cudaEventSynchronize(untimed));
    ASSERT_CUDA(cudaEventElapsedTime(&ms, start, untimed),
                cudaErrorInvalidResourceHandle);
    ASSERT_CUDA(cudaEventElapsedTime(&ms, untimed, stop),
                cudaErrorInvalidResourceHandle);

    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(stop));
    CUDA_OK(cudaEventDestroy(untimed));
    CUDA_OK(cudaEventDestroy(never));
    CUDA_OK(cudaStreamDestroy(s));
}

/* ---- host functions ------------------------------------------------------ */

Test(cudasim, host_functions_run_in_stream_order_on_another_thread,
     .timeout = TIMEOUT)
{
    sim_timing(2000, 0);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    oplog log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    step steps[6];
    for (int i = 0; i < 6; i++) {
        steps[i] = (step){&log, i};
        if (i % 2 == 0)
            CUDA_OK(cudaLaunchHostFunc(s, log_step, &steps[i]));
        else
            CUDA_OK(cudasim_launch(s, log_step, &steps[i], NULL, 0));
    }
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(log.n, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(log.tag[i], i, "operation %d ran %dth", log.tag[i], i);
        cr_assert(!pthread_equal(log.thread[i], pthread_self()),
                  "operation %d ran on the caller's thread", i);
    }
    /* Host functions have their own thread, not the stream's. */
    cr_assert(pthread_equal(log.thread[0], log.thread[2]));
    cr_assert(pthread_equal(log.thread[1], log.thread[3]));
    cr_assert(!pthread_equal(log.thread[0], log.thread[1]),
              "a host function ran on the stream's thread");

    /* cudaStreamSynchronize waits for a slow one. */
    slow fn = {.ms = 50};
    CUDA_OK(cudaLaunchHostFunc(s, slow_step, &fn));
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(atomic_load(&fn.done), 1,
                 "cudaStreamSynchronize returned before the host function "
                 "ended");
    CUDA_OK(cudaStreamDestroy(s));
}

typedef struct inside {
    cudaStream_t s;
    cudaEvent_t ev;
    cudaError_t count, query, alloc, record, launch;
    atomic_int ran;
} inside;

static void call_cuda_inside(void *arg)
{
    inside *in = arg;
    int n = -1;
    void *p = NULL;
    in->count = cudaGetDeviceCount(&n);
    in->query = cudaStreamQuery(in->s);
    in->alloc = cudaMalloc(&p, 64);
    in->record = cudaEventRecord(in->ev, in->s);
    in->launch = cudaLaunchHostFunc(in->s, raise_flag, &in->ran);
    atomic_store(&in->ran, 1);
}

static void assert_not_permitted(const inside *in, const char *where)
{
    const cudaError_t got[] = {in->count, in->query, in->alloc, in->record,
                               in->launch};
    const char *name[] = {"cudaGetDeviceCount", "cudaStreamQuery", "cudaMalloc",
                          "cudaEventRecord", "cudaLaunchHostFunc"};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(got[i], cudaErrorNotPermitted, "%s in %s: %s", name[i],
                     where, cudaGetErrorName(got[i]));
}

Test(cudasim, cuda_calls_inside_host_functions_and_kernels_are_not_permitted,
     .timeout = TIMEOUT)
{
    cudaStream_t s;
    cudaEvent_t ev;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&ev));
    inside fn = {.s = s, .ev = ev}, kernel = {.s = s, .ev = ev};
    CUDA_OK(cudaLaunchHostFunc(s, call_cuda_inside, &fn));
    CUDA_OK(cudasim_launch(s, call_cuda_inside, &kernel, NULL, 0));
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(atomic_load(&fn.ran), 1);
    cr_assert_eq(atomic_load(&kernel.ran), 1);
    assert_not_permitted(&fn, "a host function");
    assert_not_permitted(&kernel, "a simulated kernel");

    /* The same calls from the program's thread are fine. */
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaEventRecord(ev, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaFree(p));
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
}

/* ---- the legacy default stream ------------------------------------------ */

Test(cudasim, legacy_stream_waits_for_blocking_streams_only, .timeout = TIMEOUT)
{
    cudaStream_t blocking, nonblocking;
    CUDA_OK(cudaStreamCreate(&blocking));
    CUDA_OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));

    /* A non-blocking stream's work does not hold the legacy stream. */
    gate gn = GATE_INIT;
    observer on = {.g = &gn};
    CUDA_OK(cudasim_launch(nonblocking, gate_kernel, &gn, NULL, 0));
    gate_wait_entered(&gn);
    CUDA_OK(cudasim_launch(NULL, observe, &on, NULL, 0));
    cr_assert(wait_flag(&on.ran, 5.0),
              "the legacy stream waited for a non-blocking stream");
    cr_assert_eq(atomic_load(&on.saw_done), 0);
    CUDA_OK(cudaStreamSynchronize(NULL));
    gate_open(&gn);
    CUDA_OK(cudaStreamSynchronize(nonblocking));

    /* A blocking stream's does. */
    gate gb = GATE_INIT;
    observer ob = {.g = &gb};
    CUDA_OK(cudasim_launch(blocking, gate_kernel, &gb, NULL, 0));
    gate_wait_entered(&gb);
    CUDA_OK(cudasim_launch(NULL, observe, &ob, NULL, 0));
    sleep_ms(30);
    ASSERT_CUDA(cudaStreamQuery(NULL), cudaErrorNotReady);
    cr_assert_eq(atomic_load(&ob.ran), 0,
                 "the legacy stream ran before a blocking stream's work");
    gate_open(&gb);
    CUDA_OK(cudaStreamSynchronize(NULL));
    cr_assert_eq(atomic_load(&ob.ran), 1);
    cr_assert_eq(atomic_load(&ob.saw_done), 1);

    CUDA_OK(cudaStreamDestroy(blocking));
    CUDA_OK(cudaStreamDestroy(nonblocking));
}

Test(cudasim, blocking_streams_wait_for_the_legacy_stream, .timeout = TIMEOUT)
{
    cudaStream_t blocking, nonblocking;
    CUDA_OK(cudaStreamCreate(&blocking));
    CUDA_OK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    gate g = GATE_INIT;
    observer ob = {.g = &g}, on = {.g = &g};
    CUDA_OK(cudasim_launch(NULL, gate_kernel, &g, NULL, 0));
    gate_wait_entered(&g);
    CUDA_OK(cudasim_launch(blocking, observe, &ob, NULL, 0));
    CUDA_OK(cudasim_launch(nonblocking, observe, &on, NULL, 0));

    cr_assert(wait_flag(&on.ran, 5.0),
              "a non-blocking stream waited for the legacy stream");
    cr_assert_eq(atomic_load(&on.saw_done), 0);
    sleep_ms(30);
    ASSERT_CUDA(cudaStreamQuery(blocking), cudaErrorNotReady);
    cr_assert_eq(atomic_load(&ob.ran), 0,
                 "a blocking stream ran before the legacy stream's work");
    gate_open(&g);
    CUDA_OK(cudaStreamSynchronize(blocking));
    cr_assert_eq(atomic_load(&ob.saw_done), 1);

    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaStreamDestroy(blocking));
    CUDA_OK(cudaStreamDestroy(nonblocking));
}

/* cudaStreamPerThread: each host thread's own blocking stream, unordered
 * with another thread's, ordered with the legacy stream. */
typedef struct ptds_job {
    gate *g;
    cudaError_t rc;
} ptds_job;

static void *launch_on_own_per_thread_stream(void *arg)
{
    ptds_job *j = arg;
    j->rc = cudasim_launch(cudaStreamPerThread, gate_kernel, j->g, NULL, 0);
    return NULL;
}

Test(cudasim, per_thread_streams_are_per_thread_and_wait_for_legacy_only,
     .timeout = TIMEOUT)
{
    gate g = GATE_INIT;
    ptds_job j = {.g = &g};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, launch_on_own_per_thread_stream, &j),
                 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    CUDA_OK(j.rc);
    gate_wait_entered(&g);

    /* This thread's per-thread stream does not wait for the other's. */
    observer mine = {.g = &g};
    CUDA_OK(cudasim_launch(cudaStreamPerThread, observe, &mine, NULL, 0));
    cr_assert(wait_flag(&mine.ran, 5.0),
              "a per-thread stream waited for another thread's");
    cr_assert_eq(atomic_load(&mine.saw_done), 0);

    /* The legacy stream does. */
    observer legacy = {.g = &g};
    CUDA_OK(cudasim_launch(NULL, observe, &legacy, NULL, 0));
    sleep_ms(30);
    cr_assert_eq(atomic_load(&legacy.ran), 0,
                 "the legacy stream ran before a per-thread stream's work");
    gate_open(&g);
    CUDA_OK(cudaStreamSynchronize(NULL));
    cr_assert_eq(atomic_load(&legacy.saw_done), 1);

    ASSERT_CUDA(cudaStreamDestroy(cudaStreamPerThread),
                cudaErrorInvalidResourceHandle);
    cudasim_live lv;
    cudasim_get_live(&lv);
    cr_assert_eq(lv.streams, 0, "per-thread streams are not the program's");
}
