/* The simulated CUDA runtime itself (tests/cudasim): device memory cannot
 * be touched by the host; freeing memory still in use is caught; faults
 * come exactly when asked for; devices are separate; everything made is
 * counted until released; contexts come and cost as CUDA 12's do, and a
 * copy's direction must match managed memory's place. How it orders work
 * (streams, events, host functions, the legacy default stream) is
 * test_cudasim_order.c's. Each test runs in a process of its own, so the
 * simulator starts fresh in each. Built only by `make CUDA=sim`. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include <cuda.h> /* the driver's types, for its entry points */

#include "cudasim.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 10
#define N 4096

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
    cr_assert_eq(setenv("CUDASIM_CONTEXT_MB", "8", 1), 0);
    cudasim_config c;
    cudasim_get_config(&c);
    cr_assert_eq(c.devices, 3);
    cr_assert_eq(c.delay_us, 7);
    cr_assert_float_eq(c.copy_gbs, 2.5, 1e-12);
    cr_assert_eq(c.seed, 99);
    cr_assert_eq(c.device_bytes, (size_t)64 << 20);
    cr_assert_eq(c.abort_on_violation, 0);
    cr_assert_eq(c.context_bytes, (size_t)8 << 20);

    int n = 0;
    CUDA_OK(cudaGetDeviceCount(&n));
    cr_assert_eq(n, 3);
    size_t free_bytes = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
    cr_assert_eq(total, (size_t)64 << 20);
    cr_assert_eq(free_bytes, (size_t)56 << 20, "the context's 8 MiB taken");
    void *p = NULL;
    ASSERT_CUDA(cudaMalloc(&p, ((size_t)56 << 20) + 1),
                cudaErrorMemoryAllocation);
    CUDA_OK(cudaMalloc(&p, (size_t)48 << 20));
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
    cr_assert_eq(free_bytes, (size_t)8 << 20);
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
    /* The primary context of device 0 stays for the process's life. */
    cr_assert_eq(live.contexts, 1);
    cr_assert_eq(live.context_mask, 1u);
    cr_assert_eq(live.context_bytes, (size_t)300 << 20);
    zero.contexts = 1;
    zero.context_mask = 1u;
    zero.context_bytes = (size_t)300 << 20;
    cr_assert_arr_eq(&live, &zero, sizeof live, "something is still live");
}

/* ---- contexts (CUDA 12's rules) ------------------------------------------ */

typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*push_fn)(CUcontext);
typedef CUresult (*pop_fn)(CUcontext *);
typedef CUresult (*current_fn)(CUcontext *);

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    CUDA_OK(cudaGetDriverEntryPointByVersion(name, &fn, 12000,
                                             cudaEnableDefault, &q));
    cr_assert_eq(q, cudaDriverEntryPointSuccess, "%s", name);
    cr_assert_not_null(fn, "%s", name);
    return fn;
}

static unsigned context_mask(void)
{
    cudasim_live lv;
    cudasim_get_live(&lv);
    return lv.context_mask;
}

/* cudaSetDevice creates the device's context at once, with its memory;
 * queries create none; the first call that needs one on a thread with
 * none creates the chosen device's (0 unless chosen). */
Test(cudasim, contexts_come_from_set_device_and_first_use_and_cost_memory,
     .timeout = TIMEOUT)
{
    int n = 0, d = -1;
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceCount(&n));
    CUDA_OK(cudaGetDevice(&d));
    CUDA_OK(cudaGetDeviceProperties(&prop, 1));
    cr_assert_eq(context_mask(), 0, "queries created a context");
    CUDA_OK(cudaSetDevice(1));
    cr_assert_eq(context_mask(), 1u << 1);
    size_t free_bytes, total;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
    cr_assert_eq(total - free_bytes, (size_t)300 << 20, "the context's memory");
    int on_other = -1;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, get_device_thread, &on_other), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(context_mask(), 1u << 1, "cudaGetDevice created one");
    malloc_job j = {0};
    cr_assert_eq(pthread_create(&t, NULL, malloc_thread, &j), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ASSERT_CUDA(j.rc, cudaSuccess);
    cr_assert_eq(context_mask(), 3u, "a first cudaMalloc makes device 0's");
}

/* An exclusive-process GPU another process holds refuses this one's
 * context, whichever call would create it. */
Test(cudasim, a_busy_exclusive_device_refuses_a_context, .timeout = TIMEOUT)
{
    cudasim_config c;
    cudasim_get_config(&c);
    c.exclusive_busy = 1u << 0;
    cr_assert_eq(cudasim_set_config(&c), 0);
    void *p = NULL;
    ASSERT_CUDA(cudaMalloc(&p, 64), cudaErrorDevicesUnavailable);
    ASSERT_CUDA(cudaSetDevice(0), cudaErrorDevicesUnavailable);
    retain_fn retain = (retain_fn)entry("cuDevicePrimaryCtxRetain");
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_ERROR_DEVICE_UNAVAILABLE);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMalloc(&p, 64));
    CUDA_OK(cudaFree(p));
    cr_assert_eq(context_mask(), 1u << 1);
}

/* The driver's stack of current contexts, reached through the runtime: a
 * pushed context is the runtime's device until popped, and the thread is
 * back where it was (no context at all, here). */
Test(cudasim, pushed_contexts_are_the_runtimes_until_popped, .timeout = TIMEOUT)
{
    retain_fn retain = (retain_fn)entry("cuDevicePrimaryCtxRetain");
    push_fn push = (push_fn)entry("cuCtxPushCurrent");
    pop_fn pop = (pop_fn)entry("cuCtxPopCurrent");
    current_fn current = (current_fn)entry("cuCtxGetCurrent");
    void *fn = (void *)1;
    enum cudaDriverEntryPointQueryResult q;
    CUDA_OK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000,
                                             cudaEnableDefault, &q));
    cr_assert_eq(q, cudaDriverEntryPointSymbolNotFound);
    cr_assert_null(fn);

    CUcontext c1, got;
    cr_assert_eq(retain(&c1, 1), CUDA_SUCCESS);
    cr_assert_eq(current(&got), CUDA_SUCCESS);
    cr_assert_null(got, "retaining made a context current");
    cr_assert_eq(push(c1), CUDA_SUCCESS);
    int d = -1;
    CUDA_OK(cudaGetDevice(&d));
    cr_assert_eq(d, 1);
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, 64));
    struct cudaPointerAttributes at;
    CUDA_OK(cudaPointerGetAttributes(&at, p));
    cr_assert_eq(at.device, 1);
    cr_assert_eq(pop(&got), CUDA_SUCCESS);
    cr_assert_eq(got, c1);
    cr_assert_eq(current(&got), CUDA_SUCCESS);
    cr_assert_null(got);
    CUDA_OK(cudaGetDevice(&d));
    cr_assert_eq(d, 0);
    cr_assert_eq(pop(&got), CUDA_ERROR_INVALID_CONTEXT);
    cr_assert_eq(context_mask(), 1u << 1, "only device 1's context");
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaFree(p));
}

/* A HostToDevice copy from managed memory prefetched to the device does not
 * match the direction: a violation; cudaMemcpyDefault is fine. */
Test(cudasim, managed_memory_on_the_device_is_not_a_host_source,
     .timeout = TIMEOUT)
{
    cudasim_config c;
    cudasim_get_config(&c);
    c.abort_on_violation = 0;
    cr_assert_eq(cudasim_set_config(&c), 0);
    void *m = NULL, *dev = NULL;
    cudaStream_t s;
    CUDA_OK(cudaMallocManaged(&m, N, cudaMemAttachGlobal));
    CUDA_OK(cudaMalloc(&dev, N));
    CUDA_OK(cudaStreamCreate(&s));
    CUDA_OK(cudaMemcpyAsync(dev, m, N, cudaMemcpyHostToDevice, s));
    cr_assert_eq(cudasim_violations(), 0, "on the host it is a host source");
#if CUDART_VERSION >= 13000
    struct cudaMemLocation to_dev = {.type = cudaMemLocationTypeDevice,
                                     .id = 0};
    CUDA_OK(cudaMemPrefetchAsync(m, N, to_dev, 0, s));
#else
    CUDA_OK(cudaMemPrefetchAsync(m, N, 0, s));
#endif
    CUDA_OK(cudaMemcpyAsync(dev, m, N, cudaMemcpyDefault, s));
    cr_assert_eq(cudasim_violations(), 0);
    CUDA_OK(cudaMemcpyAsync(dev, m, N, cudaMemcpyHostToDevice, s));
    cr_assert_eq(cudasim_violations(), 1);
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFree(m));
}
