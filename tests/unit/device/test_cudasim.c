/* The simulated CUDA runtime itself (tests/cudasim): every behaviour the
 * CUDA-path suites rely on to catch a mistake. Streams run in order on
 * threads of their own and late; copies through pageable memory block;
 * events, stream waits and the legacy default stream order work; host
 * functions run elsewhere and may not call CUDA; device memory cannot be
 * touched by the host; freeing memory still in use is caught; faults come
 * exactly when asked for; devices are separate. Each test runs in a process
 * of its own, so the simulator starts fresh in each. Built only by
 * `make CUDA=sim`. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include "cudasim.h"
#include "testutil.h"

#define TIMEOUT 10
#define N 4096

/* ---- helpers ------------------------------------------------------------- */

/* Asserts that `call` returns `want`, naming both errors. */
#define ASSERT_CUDA(call, want)                                                \
    do {                                                                       \
        const cudaError_t got_ = (call);                                       \
        const cudaError_t want_ = (want);                                      \
        cr_assert_eq(got_, want_, "%s: %s, want %s", #call,                    \
                     cudaGetErrorName(got_), cudaGetErrorName(want_));         \
    } while (0)
#define CUDA_OK(call) ASSERT_CUDA(call, cudaSuccess)

/* The simulator's timing, for the operations queued from now on: each
 * waits up to delay_us first, and copies run at gbs GB/s (0: memcpy
 * speed). */
static void sim_timing(unsigned delay_us, double gbs)
{
    cudasim_config c;
    cudasim_get_config(&c);
    c.delay_us = delay_us;
    c.copy_gbs = gbs;
    cr_assert_eq(cudasim_set_config(&c), 0);
}

static void sleep_ms(int ms)
{
    struct timespec t = {.tv_sec = ms / 1000,
                         .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Waits up to `seconds` for *flag to become nonzero; returns it. */
static int wait_flag(atomic_int *flag, double seconds)
{
    const double end = tu_seconds() + seconds;
    while (!atomic_load(flag) && tu_seconds() < end)
        sleep_ms(1);
    return atomic_load(flag);
}

/* Waits up to `seconds` for exactly `n` host threads to block in the sim. */
static int wait_blocked(int n, double seconds)
{
    const double end = tu_seconds() + seconds;
    while (cudasim_blocked_threads() != n && tu_seconds() < end)
        sleep_ms(1);
    return cudasim_blocked_threads();
}

/* The engine's view of device pointer d, which must exist. */
static unsigned char *view(const void *d)
{
    unsigned char *v = cudasim_device_view(d);
    cr_assert_not_null(v, "cudasim_device_view(%p) is NULL", d);
    return v;
}

/* Asserts that p[0, n) all hold `value`, naming the first that does not. */
static void assert_all(const unsigned char *p, int value, size_t n,
                       const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(p[i], (unsigned char)value,
                     "%s: byte %zu is 0x%02x, want 0x%02x", what, i, p[i],
                     (unsigned)(unsigned char)value);
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7u + seed);
}

/* Forks a child that runs fn(arg) with core dumps off, for 5 s at most
 * (and stderr closed when quiet), and returns its wait status. The child
 * never returns into the test runner. */
static int run_in_child(int (*fn)(void *), void *arg, int quiet)
{
    fflush(NULL);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        const struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        alarm(5); /* a child that hangs must not outlive the test */
        if (quiet && !freopen("/dev/null", "w", stderr))
            _exit(99);
        _exit(fn(arg));
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* A simulated kernel that blocks its stream until the test opens it, then
 * fills `fill` (a device view, or NULL) with `value`. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open, done;
    unsigned char *fill;
    size_t n;
    int value;
} gate;

#define GATE_INIT                                                              \
    {                                                                          \
        .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER        \
    }

static void gate_kernel(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    if (g->fill)
        memset(g->fill, g->value, g->n);
    g->done = 1;
    pthread_mutex_unlock(&g->mu);
}

/* Waits until the stream has started the gate kernel. */
static void gate_wait_entered(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static int gate_done(gate *g)
{
    pthread_mutex_lock(&g->mu);
    const int d = g->done;
    pthread_mutex_unlock(&g->mu);
    return d;
}

/* A kernel or host function that notes when it ran whether a gate kernel
 * had finished by then. */
typedef struct observer {
    gate *g;
    atomic_int ran, saw_done;
} observer;

static void observe(void *arg)
{
    observer *o = arg;
    atomic_store(&o->saw_done, gate_done(o->g));
    atomic_store(&o->ran, 1);
}

/* A kernel or host function that sleeps, then raises a flag. */
typedef struct slow {
    int ms;
    atomic_int done;
} slow;

static void slow_step(void *arg)
{
    slow *s = arg;
    sleep_ms(s->ms);
    atomic_store(&s->done, 1);
}

static void raise_flag(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

/* The order operations ran in, and on which threads. */
#define LOG_MAX 64

typedef struct oplog {
    pthread_mutex_t mu;
    int n;
    int tag[LOG_MAX];
    pthread_t thread[LOG_MAX];
} oplog;

typedef struct step {
    oplog *log;
    int tag;
} step;

static void log_step(void *arg)
{
    const step *s = arg;
    pthread_mutex_lock(&s->log->mu);
    if (s->log->n < LOG_MAX) {
        s->log->tag[s->log->n] = s->tag;
        s->log->thread[s->log->n] = pthread_self();
        s->log->n++;
    }
    pthread_mutex_unlock(&s->log->mu);
}

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

/* ---- memory -------------------------------------------------------------- */

static int touch_device(void *arg)
{
    signal(SIGSEGV, SIG_DFL); /* not a sanitizer's report: the signal */
    const volatile unsigned char *p = arg;
    return p[0] == 0xCD ? 0 : 1;
}

Test(cudasim, device_memory_crashes_the_host_but_is_visible_to_the_engine,
     .timeout = TIMEOUT)
{
    unsigned char *dev = NULL;
    CUDA_OK(cudaMalloc((void **)&dev, N));
    const unsigned char *v = view(dev);
    cr_assert_neq((const void *)v, (const void *)dev,
                  "the view is the program's pointer");
    assert_all(v, 0xCD, N, "fresh device memory through the view");
    struct cudaPointerAttributes at;
    CUDA_OK(cudaPointerGetAttributes(&at, dev));
    cr_assert_eq(at.type, cudaMemoryTypeDevice);
    cr_assert_eq(at.device, 0);

    const int status = run_in_child(touch_device, dev, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
              "reading device memory on the host: %s %d, want SIGSEGV",
              WIFSIGNALED(status) ? "signal" : "exit",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CUDA_OK(cudaFree(dev));
}

Test(cudasim, device_memory_starts_as_garbage_and_keeps_what_is_copied_in,
     .timeout = TIMEOUT)
{
    enum { M = 3 * N + 17 };
    unsigned char *src = malloc(M), *dst = malloc(M), *want = malloc(M);
    cr_assert(src && dst && want);
    unsigned char *dev = NULL;
    cudaStream_t s;
    CUDA_OK(cudaMalloc((void **)&dev, M));
    CUDA_OK(cudaStreamCreate(&s));

    memset(dst, 0, M);
    CUDA_OK(cudaMemcpy(dst, dev, M, cudaMemcpyDeviceToHost));
    assert_all(dst, 0xCD, M, "fresh device memory, copied back");

    fill_pattern(src, M, 3);
    CUDA_OK(cudaMemcpy(dev, src, M, cudaMemcpyHostToDevice));
    memset(dst, 0, M);
    CUDA_OK(cudaMemcpy(dst, dev, M, cudaMemcpyDeviceToHost));
    cr_assert_arr_eq(dst, src, M, "D2H differs from what H2D put there");

    /* Memsets in stream order, the last one winning where they overlap. */
    CUDA_OK(cudaMemsetAsync(dev + 100, 0x5A, 1000, s));
    CUDA_OK(cudaMemsetAsync(dev + 600, 0xA5, 1000, s));
    CUDA_OK(cudaMemcpyAsync(dst, dev, M, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    memcpy(want, src, M);
    memset(want + 100, 0x5A, 1000);
    memset(want + 600, 0xA5, 1000);
    cr_assert_arr_eq(dst, want, M, "after two memsets");

    CUDA_OK(cudaMemset(dev, 0, M));
    assert_all(view(dev), 0, M, "after cudaMemset");
    ASSERT_CUDA(cudaMemsetAsync(dst, 0, M, s), cudaErrorInvalidValue);

    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(dev));
    free(src);
    free(dst);
    free(want);
}

Test(cudasim, freeing_memory_a_queued_operation_uses_is_counted_in_count_mode,
     .timeout = TIMEOUT)
{
    cudasim_config c;
    cudasim_get_config(&c);
    c.abort_on_violation = 0;
    cr_assert_eq(cudasim_set_config(&c), 0);
    unsigned char *src = NULL, *idle = NULL, *dev = NULL;
    cudaStream_t s;
    CUDA_OK(cudaHostAlloc((void **)&src, N, cudaHostAllocDefault));
    CUDA_OK(cudaHostAlloc((void **)&idle, N, cudaHostAllocDefault));
    CUDA_OK(cudaMalloc((void **)&dev, N));
    CUDA_OK(cudaStreamCreate(&s));
    memset(src, 0x3C, N);

    cudasim_pause(1);
    CUDA_OK(cudaMemcpyAsync(dev, src, N, cudaMemcpyHostToDevice, s));
    sleep_ms(20);
    assert_all(view(dev), 0xCD, N, "the copy's destination while paused");
    CUDA_OK(cudaFreeHost(idle)); /* nothing uses it */
    cr_assert_eq(cudasim_violations(), 0);
    CUDA_OK(cudaFreeHost(src));
    cr_assert_eq(cudasim_violations(), 1,
                 "cudaFreeHost under a queued copy was not a violation");
    cudasim_live live;
    cudasim_get_live(&live);
    cr_assert_eq(live.pinned_allocs, 0, "the freed buffer is still live");

    /* The memory is kept until the copy has read it. */
    cudasim_pause(0);
    CUDA_OK(cudaStreamSynchronize(s));
    assert_all(view(dev), 0x3C, N, "the copy from the freed buffer");

    /* Device memory too. */
    cudasim_pause(1);
    CUDA_OK(cudaMemsetAsync(dev, 0, N, s));
    CUDA_OK(cudaFree(dev));
    cr_assert_eq(cudasim_violations(), 2,
                 "cudaFree under a queued memset was not a violation");
    cudasim_pause(0);
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(cudasim_violations(), 2);
    CUDA_OK(cudaStreamDestroy(s));
    cudasim_get_live(&live);
    cr_assert_eq(live.device_allocs + live.pinned_allocs, 0);
}

/* In a child: free a pinned buffer a paused copy reads. Exit statuses name
 * the step that failed; abort() is the one wanted. */
static int free_under_copy(void *arg)
{
    (void)arg;
    unsigned char *src = NULL, *dev = NULL;
    cudaStream_t s;
    if (cudaHostAlloc((void **)&src, N, cudaHostAllocDefault) != cudaSuccess ||
        cudaMalloc((void **)&dev, N) != cudaSuccess ||
        cudaStreamCreate(&s) != cudaSuccess)
        return 10;
    cudasim_pause(1);
    if (cudaMemcpyAsync(dev, src, N, cudaMemcpyHostToDevice, s) != cudaSuccess)
        return 11;
    cudaFreeHost(src);
    return 12;
}

Test(cudasim, freeing_memory_a_queued_operation_uses_aborts_by_default,
     .timeout = TIMEOUT)
{
    cudasim_config c;
    cudasim_get_config(&c);
    cr_assert_eq(c.abort_on_violation, 1);
    const int status = run_in_child(free_under_copy, NULL, 1);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "cudaFreeHost under a queued copy: %s %d, want SIGABRT",
              WIFSIGNALED(status) ? "signal" : "exit",
              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* ---- faults -------------------------------------------------------------- */

Test(cudasim, nth_fault_fails_exactly_that_matching_call, .timeout = TIMEOUT)
{
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){.call = "cudaMalloc", .nth = 3}), 0);
    for (int i = 1; i <= 5; i++) {
        void *p = NULL;
        const cudaError_t e = cudaMalloc(&p, 256);
        if (i == 3) {
            ASSERT_CUDA(e, cudaErrorMemoryAllocation);
            cr_assert_null(p);
        } else {
            ASSERT_CUDA(e, cudaSuccess);
            CUDA_OK(cudaFree(p));
        }
    }
    cr_assert_eq(cudasim_faults_delivered(), 1);

    /* An explicit error, two calls from the second on. */
    cudaStream_t s;
    cudaEvent_t ev;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&ev));
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){.call = "cudaEventRecord",
                                        .nth = 2,
                                        .times = 2,
                                        .error = cudaErrorDevicesUnavailable}),
        0);
    const cudaError_t want[] = {cudaSuccess, cudaErrorDevicesUnavailable,
                                cudaErrorDevicesUnavailable, cudaSuccess,
                                cudaSuccess};
    for (int i = 0; i < 5; i++)
        ASSERT_CUDA(cudaEventRecord(ev, s), want[i]);
    cr_assert_eq(cudasim_faults_delivered(), 3);
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
}

Test(cudasim, probability_fault_fails_its_times_then_stops, .timeout = TIMEOUT)
{
    cr_assert_geq(cudasim_inject(&(cudasim_fault){.call = "cudaEventCreate",
                                                  .probability = 1.0,
                                                  .times = 3}),
                  0);
    for (int i = 0; i < 6; i++) {
        cudaEvent_t ev = NULL;
        const cudaError_t e = cudaEventCreate(&ev);
        if (i < 3) {
            ASSERT_CUDA(e, cudaErrorMemoryAllocation);
        } else {
            ASSERT_CUDA(e, cudaSuccess);
            CUDA_OK(cudaEventDestroy(ev));
        }
    }
    cr_assert_eq(cudasim_faults_delivered(), 3);
    cr_assert_eq(cudasim_calls("cudaEventCreate"), 6);
}

Test(cudasim, stream_fault_matches_only_calls_on_its_stream, .timeout = TIMEOUT)
{
    unsigned char *dev = NULL; /* a region per stream: they run at once */
    cudaStream_t a, b;
    CUDA_OK(cudaMalloc((void **)&dev, 3 * N));
    CUDA_OK(cudaStreamCreate(&a));
    CUDA_OK(cudaStreamCreate(&b));

    /* Every cudaMemsetAsync on b, and no other. */
    cr_assert_geq(cudasim_inject(&(cudasim_fault){
                      .call = "cudaMemsetAsync", .on_stream = 1, .stream = b}),
                  0);
    CUDA_OK(cudaMemsetAsync(dev, 1, N, a));
    CUDA_OK(cudaMemsetAsync(dev + 2 * N, 1, N, NULL));
    ASSERT_CUDA(cudaMemsetAsync(dev + N, 1, N, b), cudaErrorInvalidValue);
    CUDA_OK(cudaMemsetAsync(dev, 1, N, a));
    ASSERT_CUDA(cudaMemsetAsync(dev + N, 1, N, b), cudaErrorInvalidValue);
    cr_assert_eq(cudasim_faults_delivered(), 2);
    cudasim_clear_faults();

    /* NULL names the legacy default stream. */
    cr_assert_geq(cudasim_inject(&(cudasim_fault){.call = "cudaMemsetAsync",
                                                  .on_stream = 1,
                                                  .stream = NULL}),
                  0);
    CUDA_OK(cudaMemsetAsync(dev, 2, N, a));
    CUDA_OK(cudaMemsetAsync(dev + N, 2, N, b));
    ASSERT_CUDA(cudaMemsetAsync(dev + 2 * N, 2, N, NULL),
                cudaErrorInvalidValue);
    cudasim_clear_faults();
    CUDA_OK(cudaDeviceSynchronize());

    /* Any call on b: calls without a stream do not match. */
    cr_assert_geq(cudasim_inject(&(cudasim_fault){
                      .call = "*", .on_stream = 1, .stream = b}),
                  0);
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
    CUDA_OK(cudaStreamQuery(a));
    ASSERT_CUDA(cudaStreamQuery(b), cudaErrorInvalidValue);
    ASSERT_CUDA(cudaStreamSynchronize(b), cudaErrorInvalidValue);
    cudasim_clear_faults();

    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaStreamDestroy(a));
    CUDA_OK(cudaStreamDestroy(b));
    CUDA_OK(cudaFree(dev));
}

typedef struct malloc_job {
    int inject; /* inject a this-thread cudaMalloc fault first */
    cudaError_t rc;
} malloc_job;

static void *malloc_thread(void *arg)
{
    malloc_job *j = arg;
    if (j->inject)
        cudasim_inject(
            &(cudasim_fault){.call = "cudaMalloc", .this_thread = 1});
    void *p = NULL;
    j->rc = cudaMalloc(&p, 64);
    cudaFree(p);
    return NULL;
}

Test(cudasim, thread_fault_matches_only_the_injecting_thread,
     .timeout = TIMEOUT)
{
    cr_assert_geq(cudasim_inject(
                      &(cudasim_fault){.call = "cudaMalloc", .this_thread = 1}),
                  0);
    malloc_job other = {0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, malloc_thread, &other), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(other.rc, cudaSuccess);
    void *p = NULL;
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorMemoryAllocation);
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorMemoryAllocation);
    cudasim_clear_faults();

    /* Injected by another thread: that thread fails, this one does not. */
    malloc_job injector = {.inject = 1};
    cr_assert_eq(pthread_create(&t, NULL, malloc_thread, &injector), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(injector.rc, cudaErrorMemoryAllocation);
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
    cudasim_clear_faults();

    /* other_threads: the reverse, every thread but the injecting one. */
    cr_assert_geq(cudasim_inject(&(cudasim_fault){.call = "cudaMalloc",
                                                  .other_threads = 1}),
                  0);
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
    other = (malloc_job){0};
    cr_assert_eq(pthread_create(&t, NULL, malloc_thread, &other), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(other.rc, cudaErrorMemoryAllocation);
}

Test(cudasim, calls_are_counted_failed_ones_included, .timeout = TIMEOUT)
{
    cr_assert_eq(cudasim_calls(NULL), 0);
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){.call = "cudaMalloc", .nth = 2}), 0);
    void *p = NULL, *q = NULL;
    int n = 0;
    CUDA_OK(cudaMalloc(&p, 64));
    ASSERT_CUDA(cudaMalloc(&q, 64), cudaErrorMemoryAllocation);
    CUDA_OK(cudaFree(p));
    CUDA_OK(cudaGetDeviceCount(&n));
    ASSERT_CUDA(cudaSetDevice(n), cudaErrorInvalidDevice);
    cr_assert_eq(cudasim_calls("cudaMalloc"), 2);
    cr_assert_eq(cudasim_calls("cudaFree"), 1);
    cr_assert_eq(cudasim_calls("cudaGetDeviceCount"), 1);
    cr_assert_eq(cudasim_calls("cudaSetDevice"), 1);
    cr_assert_eq(cudasim_calls("cudaMemcpy"), 0);
    cr_assert_eq(cudasim_calls(NULL), 5);
    cr_assert_eq(cudasim_calls("*"), 5);
    cr_assert_eq(cudasim_calls("cudaNoSuchCall"), 0);
}

Test(cudasim, sticky_error_fails_every_later_call_and_drops_host_functions,
     .timeout = TIMEOUT)
{
    sim_timing(0, 0);
    cudaStream_t s;
    cudaEvent_t ev;
    void *p = NULL;
    atomic_int called = 0;
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaEventCreate(&ev));

    cudasim_pause(1);
    CUDA_OK(cudaLaunchHostFunc(s, raise_flag, &called));
    sleep_ms(20);
    cr_assert_eq(atomic_load(&called), 0, "a host function ran while paused");
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){
            .call = "cudaMalloc", .nth = 1, .error = cudaErrorIllegalAddress}),
        0);
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaEventCreate(&ev), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaEventRecord(ev, s), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaLaunchHostFunc(s, raise_flag, &called),
                cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaStreamQuery(s), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaGetLastError(), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaGetLastError(), cudaErrorIllegalAddress);
    cr_assert_eq(cudasim_faults_delivered(), 1);

    /* Resumed, the stream drops what it had queued. */
    cudasim_pause(0);
    sleep_ms(200);
    cr_assert_eq(atomic_load(&called), 0,
                 "a host function ran on a device with a sticky error");

    /* The other device is not broken. */
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
    CUDA_OK(cudaSetDevice(0));
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorIllegalAddress);

    cudasim_clear_faults();
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
    CUDA_OK(cudaStreamSynchronize(s));
    cr_assert_eq(atomic_load(&called), 0);
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
}

Test(cudasim, asynchronous_fault_fails_when_the_operation_executes,
     .timeout = TIMEOUT)
{
    unsigned char *src = NULL, *dev = NULL;
    cudaStream_t s;
    CUDA_OK(cudaMallocHost((void **)&src, N));
    CUDA_OK(cudaMalloc((void **)&dev, N));
    CUDA_OK(cudaStreamCreate(&s));
    memset(src, 0x21, N);

    cr_assert_geq(cudasim_inject(&(cudasim_fault){
                      .call = "cudaMemcpyAsync", .nth = 1, .asynchronous = 1}),
                  0);
    CUDA_OK(cudaMemcpyAsync(dev, src, N, cudaMemcpyHostToDevice, s));
    ASSERT_CUDA(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
    assert_all(view(dev), 0xCD, N, "the failed copy's destination");
    void *p = NULL;
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorIllegalAddress);
    ASSERT_CUDA(cudaGetLastError(), cudaErrorIllegalAddress);
    cudasim_clear_faults();

    /* With an explicit error, on a kernel, which then never runs. */
    atomic_int ran = 0;
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){.call = "cudasim_launch",
                                        .nth = 1,
                                        .error = cudaErrorLaunchFailure,
                                        .asynchronous = 1}),
        0);
    CUDA_OK(cudasim_launch(s, raise_flag, &ran, NULL, 0));
    ASSERT_CUDA(cudaStreamSynchronize(s), cudaErrorLaunchFailure);
    cr_assert_eq(atomic_load(&ran), 0, "the failing kernel ran");
    ASSERT_CUDA(cudaMemcpyAsync(dev, src, N, cudaMemcpyHostToDevice, s),
                cudaErrorLaunchFailure);
    cudasim_clear_faults();

    CUDA_OK(cudaMemcpyAsync(dev, src, N, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamSynchronize(s));
    assert_all(view(dev), 0x21, N, "a copy once the faults are cleared");
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(src));
}

static void *last_error_thread(void *arg)
{
    *(cudaError_t *)arg = cudaGetLastError();
    return NULL;
}

Test(cudasim, get_last_error_returns_and_clears_a_non_sticky_error,
     .timeout = TIMEOUT)
{
    CUDA_OK(cudaGetLastError());
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){.call = "cudaMalloc", .nth = 1}), 0);
    void *p = NULL;
    int n = 0;
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorMemoryAllocation);
    CUDA_OK(cudaGetDeviceCount(&n)); /* success does not clear it */
    ASSERT_CUDA(cudaPeekAtLastError(), cudaErrorMemoryAllocation);

    /* It is the failing thread's alone. */
    cudaError_t other = cudaErrorUnknown;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, last_error_thread, &other), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(other, cudaSuccess);

    ASSERT_CUDA(cudaGetLastError(), cudaErrorMemoryAllocation);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaPeekAtLastError());
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
}

Test(cudasim, faults_come_from_the_environment_at_the_first_call,
     .timeout = TIMEOUT)
{
    /* Before anything reads the settings in this process. */
    cr_assert_eq(setenv("CUDASIM_FAULTS",
                        "cudaMalloc@2,cudaEventCreate@1:cudaErrorNotSupported,"
                        "cudaMemsetAsync@1:async",
                        1),
                 0);
    void *p[3] = {NULL, NULL, NULL};
    CUDA_OK(cudaMalloc(&p[0], 64));
    ASSERT_CUDA(cudaMalloc(&p[1], 64), cudaErrorMemoryAllocation);
    CUDA_OK(cudaMalloc(&p[2], 64));
    cudaEvent_t ev;
    ASSERT_CUDA(cudaEventCreate(&ev), cudaErrorNotSupported);
    CUDA_OK(cudaEventCreate(&ev));
    CUDA_OK(cudaEventDestroy(ev));
    cr_assert_eq(cudasim_faults_delivered(), 2);

    CUDA_OK(cudaMemsetAsync(p[0], 0, 64, NULL));
    ASSERT_CUDA(cudaStreamSynchronize(NULL), cudaErrorIllegalAddress);
    cr_assert_eq(cudasim_faults_delivered(), 3);
}

Test(cudasim, settings_come_from_the_environment_at_the_first_call,
     .timeout = TIMEOUT)
{
    cr_assert_eq(setenv("CUDASIM_DEVICES", "3", 1), 0);
    cr_assert_eq(setenv("CUDASIM_DELAY_US", "7", 1), 0);
    cr_assert_eq(setenv("CUDASIM_COPY_GBS", "2.5", 1), 0);
    cr_assert_eq(setenv("CUDASIM_SEED", "99", 1), 0);
    cr_assert_eq(setenv("CUDASIM_DEVICE_MB", "64", 1), 0);
    cr_assert_eq(setenv("CUDASIM_VIOLATION", "count", 1), 0);
    cudasim_config c;
    cudasim_get_config(&c);
    cr_assert_eq(c.devices, 3);
    cr_assert_eq(c.delay_us, 7);
    cr_assert_float_eq(c.copy_gbs, 2.5, 1e-12);
    cr_assert_eq(c.seed, 99);
    cr_assert_eq(c.device_bytes, (size_t)64 << 20);
    cr_assert_eq(c.abort_on_violation, 0);

    int n = 0;
    CUDA_OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 3);
    size_t free_bytes = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
    cr_assert_eq(total, (size_t)64 << 20);
    cr_assert_eq(free_bytes, (size_t)64 << 20);
    void *p = NULL;
    ASSERT_CUDA(cudaMalloc(&p, ((size_t)64 << 20) + 1),
                cudaErrorMemoryAllocation);
    CUDA_OK(cudaMalloc(&p, (size_t)48 << 20));
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
    cr_assert_eq(free_bytes, (size_t)16 << 20);
    CUDA_OK(cudaFree(p));
}

/* ---- devices ------------------------------------------------------------- */

Test(cudasim, device_count_is_the_configured_one, .timeout = TIMEOUT)
{
    int n = 0;
    CUDA_OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 2, "default device count");

    cudasim_config c;
    cudasim_get_config(&c);
    c.devices = 3;
    cr_assert_eq(cudasim_set_config(&c), 0);
    CUDA_OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 3);

    /* Not while anything is live. */
    void *p = NULL;
    CUDA_OK(cudaSetDevice(2));
    CUDA_OK(cudaMalloc(&p, 64));
    c.devices = 1;
    cr_assert_eq(cudasim_set_config(&c), -1);
    CUDA_OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 3);
    CUDA_OK(cudaFree(p));
    cr_assert_eq(cudasim_set_config(&c), 0);
    CUDA_OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 1);
}

Test(cudasim, no_devices_is_no_device_error, .timeout = TIMEOUT)
{
    cudasim_config c;
    cudasim_get_config(&c);
    c.devices = 0;
    cr_assert_eq(cudasim_set_config(&c), 0);
    int n = -1;
    ASSERT_CUDA(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    cr_assert_eq(n, 0);
    ASSERT_CUDA(cudaSetDevice(0), cudaErrorNoDevice);
    void *p = NULL;
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorNoDevice);
    cudaStream_t s;
    ASSERT_CUDA(cudaStreamCreate(&s), cudaErrorNoDevice);
}

static void *get_device_thread(void *arg)
{
    int *d = arg;
    if (cudaGetDevice(d) != cudaSuccess)
        *d = -1;
    return NULL;
}

Test(cudasim, current_device_is_per_thread, .timeout = TIMEOUT)
{
    int d = -1;
    CUDA_OK(cudaGetDevice(&d));
    cr_assert_eq(d, 0);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaGetDevice(&d));
    cr_assert_eq(d, 1);

    int other = -2;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, get_device_thread, &other), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(other, 0, "another thread's current device");

    /* Memory comes from this thread's device. */
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 64));
    struct cudaPointerAttributes at;
    CUDA_OK(cudaPointerGetAttributes(&at, p));
    cr_assert_eq(at.device, 1);
    CUDA_OK(cudaFree(p));

    ASSERT_CUDA(cudaSetDevice(2), cudaErrorInvalidDevice);
    ASSERT_CUDA(cudaSetDevice(-1), cudaErrorInvalidDevice);
    CUDA_OK(cudaGetDevice(&d));
    cr_assert_eq(d, 1, "a failed cudaSetDevice changed the device");
}

Test(cudasim, event_and_stream_must_share_a_device, .timeout = TIMEOUT)
{
    cudaEvent_t ev0;
    cudaStream_t s0, s1;
    CUDA_OK(cudaEventCreate(&ev0));
    CUDA_OK(cudaStreamCreate(&s0));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaStreamCreate(&s1));
    ASSERT_CUDA(cudaEventRecord(ev0, s1), cudaErrorInvalidResourceHandle);
    ASSERT_CUDA(cudaEventRecord(ev0, NULL), cudaErrorInvalidResourceHandle);
    CUDA_OK(cudaEventRecord(ev0, s0));
    CUDA_OK(cudaEventSynchronize(ev0));
    CUDA_OK(cudaStreamDestroy(s1));
    CUDA_OK(cudaStreamDestroy(s0));
    CUDA_OK(cudaEventDestroy(ev0));
}

Test(cudasim, device_properties_describe_the_simulated_device,
     .timeout = TIMEOUT)
{
    struct cudaDeviceProp prop;
    for (int d = 0; d < 2; d++) {
        memset(&prop, 0, sizeof prop);
        CUDA_OK(cudaGetDeviceProperties(&prop, d));
        cr_assert_str_eq(prop.name, "simulated");
        cr_assert_eq(prop.totalGlobalMem, (size_t)16 << 30);
        cr_assert_eq(prop.major, 9);
        cr_assert_eq(prop.pciDeviceID, d);
    }
    ASSERT_CUDA(cudaGetDeviceProperties(&prop, 2), cudaErrorInvalidDevice);
    int v = 0;
    CUDA_OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 1));
    cr_assert_eq(v, 132);
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

/* ---- what is live -------------------------------------------------------- */

Test(cudasim, live_counts_return_to_zero_once_everything_is_released,
     .timeout = TIMEOUT)
{
    cudasim_live live;
    cudasim_get_live(&live);
    cr_assert_eq(live.device_allocs + live.pinned_allocs + live.managed_allocs +
                     live.streams + live.events,
                 0);

    void *dev = NULL, *pin1 = NULL, *pin2 = NULL, *man = NULL;
    cudaStream_t s1, s2;
    cudaEvent_t ev[3];
    CUDA_OK(cudaMalloc(&dev, 1000));
    CUDA_OK(cudaMallocHost(&pin1, 3000));
    CUDA_OK(cudaHostAlloc(&pin2, 5, cudaHostAllocPortable));
    CUDA_OK(cudaMallocManaged(&man, 77, cudaMemAttachGlobal));
    CUDA_OK(cudaStreamCreate(&s1));
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++)
        CUDA_OK(cudaEventCreate(&ev[i]));
    CUDA_OK(cudaStreamSynchronize(NULL)); /* the legacy stream is not one */

    cudasim_get_live(&live);
    cr_assert_eq(live.device_allocs, 1);
    cr_assert_eq(live.device_bytes, 1000);
    cr_assert_eq(live.pinned_allocs, 2);
    cr_assert_eq(live.pinned_bytes, 3005);
    cr_assert_eq(live.managed_allocs, 1);
    cr_assert_eq(live.managed_bytes, 77);
    cr_assert_eq(live.streams, 2);
    cr_assert_eq(live.events, 3);

    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(pin1));
    CUDA_OK(cudaStreamDestroy(s1));
    CUDA_OK(cudaEventDestroy(ev[0]));
    cudasim_get_live(&live);
    cr_assert_eq(live.device_allocs, 0);
    cr_assert_eq(live.pinned_allocs, 1);
    cr_assert_eq(live.pinned_bytes, 5);
    cr_assert_eq(live.streams, 1);
    cr_assert_eq(live.events, 2);

    CUDA_OK(cudaFreeHost(pin2));
    CUDA_OK(cudaFree(man));
    CUDA_OK(cudaStreamDestroy(s2));
    CUDA_OK(cudaEventDestroy(ev[1]));
    CUDA_OK(cudaEventDestroy(ev[2]));
    cudasim_live zero;
    memset(&zero, 0, sizeof zero); /* the padding too, as get_live does */
    cudasim_get_live(&live);
    cr_assert_arr_eq(&live, &zero, sizeof live, "something is still live");
}
