/* The CUDA-path suite (test_gpu.c): the loader's device and context, not
 * the caller's (issue 29). */
#include <cuda.h> /* the driver's types: libcuda is not linked */
#include <cudaTypedefs.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_test.h"

/* ---- the driver's context calls, reached through the runtime as pinload
 * reaches them (libcuda is not linked) ---- */

typedef struct driver {
    PFN_cuDevicePrimaryCtxGetState_v7000 primary_state;
    PFN_cuDevicePrimaryCtxRetain_v7000 primary_retain;
    PFN_cuDevicePrimaryCtxRelease_v11000 primary_release;
    PFN_cuCtxDestroy_v4000 ctx_destroy;
    PFN_cuCtxGetCurrent_v4000 ctx_get_current;
    PFN_cuCtxPushCurrent_v4000 ctx_push;
    PFN_cuCtxPopCurrent_v4000 ctx_pop;
} driver;

/* The driver function `name` with its ABI as of CUDA `version`, or NULL. */
static void *driver_fn(const char *name, unsigned version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion(
        name, &fn, version, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return fn;
}

static int driver_load(driver *d)
{
    d->primary_state = (PFN_cuDevicePrimaryCtxGetState_v7000)driver_fn(
        "cuDevicePrimaryCtxGetState", 12000);
    d->primary_retain = (PFN_cuDevicePrimaryCtxRetain_v7000)driver_fn(
        "cuDevicePrimaryCtxRetain", 12000);
    d->primary_release = (PFN_cuDevicePrimaryCtxRelease_v11000)driver_fn(
        "cuDevicePrimaryCtxRelease", 12000);
    d->ctx_destroy = (PFN_cuCtxDestroy_v4000)driver_fn("cuCtxDestroy", 12000);
    d->ctx_get_current =
        (PFN_cuCtxGetCurrent_v4000)driver_fn("cuCtxGetCurrent", 12000);
    d->ctx_push =
        (PFN_cuCtxPushCurrent_v4000)driver_fn("cuCtxPushCurrent", 12000);
    d->ctx_pop = (PFN_cuCtxPopCurrent_v4000)driver_fn("cuCtxPopCurrent", 12000);
    return d->primary_state && d->primary_retain && d->primary_release &&
                   d->ctx_destroy && d->ctx_get_current && d->ctx_push &&
                   d->ctx_pop
               ? 0
               : -1;
}

/* The calling thread's current context ("If no context is bound to the
 * calling CPU thread then *pctx is set to NULL", cuCtxGetCurrent); a
 * pointer no context has if the call fails. */
static CUcontext current_context(const driver *d)
{
    CUcontext c = NULL;
    if (d->ctx_get_current(&c) != CUDA_SUCCESS)
        return (CUcontext)(uintptr_t)-1;
    return c;
}

/* Whether device dev's primary context is active in this process: 1, 0,
 * or -1 if the driver cannot say. */
static int primary_active(const driver *d, int dev)
{
    unsigned flags = 0;
    int active = -1;
    if (d->primary_state(dev, &flags, &active) != CUDA_SUCCESS)
        return -1;
    return active;
}

/* A context of our own on device 0, made current ("Creates a new CUDA
 * context and associates it with the calling thread", cuCtxCreate):
 * CUDA 12.5's form with no creation parameters, as CUDA's own samples call
 * it; the older form where a driver refuses that. */
static CUresult context_create(CUcontext *ctx)
{
    CUresult r = CUDA_ERROR_NOT_FOUND;
    PFN_cuCtxCreate_v12050 v4 =
        (PFN_cuCtxCreate_v12050)driver_fn("cuCtxCreate", 12050);
    if (v4)
        r = v4(ctx, NULL, 0, 0);
    if (r != CUDA_SUCCESS) {
        PFN_cuCtxCreate_v3020 v2 =
            (PFN_cuCtxCreate_v3020)driver_fn("cuCtxCreate", 3020);
        if (v4)
            printf("  cuCtxCreate (12.5's form): driver error %d", (int)r);
        else
            printf("  cuCtxCreate (12.5's form): not found");
        printf("; %s\n", v2 ? "trying the CUDA 3.2 form" : "no older form");
        if (v2)
            r = v2(ctx, 0, 0);
    }
    return r;
}

/* ---- the loader's device and context, not the caller's (issue 29) ---- */

/* A loader on device 1 from a thread on device 0: pl_batch_wait(b, NULL)
 * must order device 1's legacy stream, on which a copy then reads every
 * batch; the bytes equal the host backend's, the caller's thread stays on
 * device 0 and no error is left pending. Needs two GPUs. */
outcome second_device_wait_on_null(const char *data, const void *arg)
{
    (void)arg;
    const int n = device_count();
    if (n < 2)
        SKIP("needs two CUDA devices, %d present", n);
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    uint8_t *back = NULL;
    pl_config cfg = base_config(data);
    cfg.width = 160; /* bigger copies: a missed wait shows */
    cfg.height = 160;
    if (!host_reference(cfg, 1, &ref))
        goto done;
    CUDA_OK(cudaSetDevice(0));
    cfg.device = 1;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    back = malloc(ref.batch_bytes);
    CHECK(back, "out of memory");
    int k = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n, "more batches than the host gave");
        int dev = -1;
        CUDA_OK(cudaGetDevice(&dev));
        CHECK(dev == 0, "the caller's thread was moved to device %d", dev);
        CHECK(pl_batch_wait(b, NULL) == 0, "%s", pl_last_error());
        CUDA_OK(cudaSetDevice(1));
        uint8_t *copy = NULL;
        CUDA_OK(cudaMallocAsync((void **)&copy, b->bytes, NULL));
        CUDA_OK(cudaMemcpyAsync(copy, b->data, b->bytes,
                                cudaMemcpyDeviceToDevice, NULL));
        const cudaError_t e =
            cudaMemcpy(back, copy, b->bytes, cudaMemcpyDeviceToHost);
        CUDA_OK(cudaFreeAsync(copy, NULL));
        CUDA_OK(e);
        CUDA_OK(cudaSetDevice(0));
        CHECK(memcmp(back, ref_bytes(&ref, k), b->bytes) == 0,
              "batch %d: device 1's legacy stream read it before its copy (%zu "
              "bytes differ)",
              k, bytes_differing(back, ref_bytes(&ref, k), b->bytes));
        CHECK(pl_loader_release(l, b, NULL) == 0, "%s", pl_last_error());
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.n, "rc %d, %d batches", rc, k);
    const cudaError_t pending = cudaGetLastError();
    CHECK(pending == cudaSuccess, "an error left pending: %s",
          cudaGetErrorName(pending));
    result = PASSED;
done:
    pl_loader_destroy(l);
    cudaSetDevice(0);
    free(back);
    ref_free(&ref);
    return result;
}

/* The one-GPU form of the above: the caller's thread has a context of its
 * own on device 0 current (cuCtxCreate), not the primary one the loader
 * retains. pl_batch_wait(b, NULL) must order the legacy stream of the
 * loader's context, on which the test then reads every batch (with that
 * context pushed), and pl_loader_release(l, b, NULL) its release; every
 * call leaves the caller's context current and no error pending. */
outcome
foreign_context_wait_and_release_order_the_loaders_context(const char *data,
                                                           const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    driver drv;
    CUcontext mine = NULL, primary = NULL, cur = NULL;
    int retained = 0;
    pl_loader *l = NULL;
    uint8_t *back = NULL;
    cudaError_t e;
    pl_config cfg = base_config(data);
    cfg.width = 160; /* bigger copies: a missed wait shows */
    cfg.height = 160;
    if (!host_reference(cfg, 1, &ref))
        goto done;
    CHECK(driver_load(&drv) == 0,
          "the driver's context calls are not available through the runtime");
    const CUresult cr = context_create(&mine);
    CHECK(cr == CUDA_SUCCESS && mine,
          "cuCtxCreate on device 0: driver error %d", (int)cr);
    CHECK(drv.primary_retain(&primary, 0) == CUDA_SUCCESS,
          "cuDevicePrimaryCtxRetain(0) failed");
    retained = 1;
    CHECK(primary != mine, "cuCtxCreate gave the primary context");
    cur = current_context(&drv);
    CHECK(cur == mine, "current %p, the created context %p", (void *)cur,
          (void *)mine);
    back = malloc(ref.batch_bytes);
    CHECK(back, "out of memory");
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    cur = current_context(&drv);
    CHECK(cur == mine, "after create: current %p, the caller's %p", (void *)cur,
          (void *)mine);
    printf("  caller's context %p, device 0's primary %p\n", (void *)mine,
           (void *)primary);
    int k = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n, "more batches than the host gave");
        CHECK(pl_batch_wait(b, NULL) == 0, "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == mine,
              "batch %d: after pl_batch_wait the current context is %p, the "
              "caller's was %p",
              k, (void *)cur, (void *)mine);
        e = cudaGetLastError();
        CHECK(e == cudaSuccess, "batch %d: pl_batch_wait left %s pending", k,
              cudaGetErrorName(e));
        /* Read on the loader's context's legacy stream: after the wait. */
        CUcontext popped = NULL;
        CHECK(drv.ctx_push(primary) == CUDA_SUCCESS, "cuCtxPushCurrent");
        e = cudaMemcpy(back, b->data, b->bytes, cudaMemcpyDeviceToHost);
        const CUresult pr = drv.ctx_pop(&popped);
        CHECK(pr == CUDA_SUCCESS && popped == primary,
              "cuCtxPopCurrent: %d, popped %p", (int)pr, (void *)popped);
        CUDA_OK(e);
        CHECK(memcmp(back, ref_bytes(&ref, k), b->bytes) == 0,
              "batch %d: the loader's legacy stream read it before its copy "
              "(%zu bytes differ)",
              k, bytes_differing(back, ref_bytes(&ref, k), b->bytes));
        CHECK(pl_loader_release(l, b, NULL) == 0, "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == mine,
              "batch %d: after pl_loader_release the current context is %p, "
              "the caller's was %p",
              k, (void *)cur, (void *)mine);
        e = cudaGetLastError();
        CHECK(e == cudaSuccess, "batch %d: pl_loader_release left %s pending",
              k, cudaGetErrorName(e));
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.n, "rc %d (%s), %d batches of %d", rc,
          pl_last_error(), k, ref.n);
    pl_loader_destroy(l);
    l = NULL;
    cur = current_context(&drv);
    CHECK(cur == mine, "after destroy: current %p, the caller's %p",
          (void *)cur, (void *)mine);
    result = PASSED;
done:
    pl_loader_destroy(l);
    free(back);
    if (retained)
        drv.primary_release(0);
    if (mine) /* popped too: the thread's previous context is current */
        drv.ctx_destroy(mine);
    ref_free(&ref);
    return result;
}

typedef struct stats_probe {
    pl_loader *l;
    const driver *drv;
    int rc;
    CUcontext after; /* the stats thread's current context afterwards */
} stats_probe;

static void *stats_thread(void *arg)
{
    stats_probe *p = arg;
    pl_stats st;
    p->rc = pl_loader_stats(p->l, &st);
    p->after = current_context(p->drv);
    return NULL;
}

/* Run in a fresh process (main's --fresh-thread): a thread that never
 * chose a device runs a loader on `device` through every call (next, wait
 * and release on NULL and the per-thread stream, stats from another
 * thread, destroy). Neither thread has a current context after any call:
 * pinload pushes its own and pops it. The loader's primary context is
 * active while it lives (it retains it); for a loader on device 1, GPU 0's
 * primary context must never be active (since CUDA 12, cudaSetDevice(0)
 * would have made it). */
outcome fresh_thread_child(const char *data, int device)
{
    outcome result = FAILED;
    driver drv;
    pl_loader *l = NULL;
    CUcontext cur;
    CHECK(driver_load(&drv) == 0,
          "the driver's context calls are not available through the runtime");
    cur = current_context(&drv);
    CHECK(cur == NULL, "a fresh thread has context %p before any call",
          (void *)cur);
    pl_config cfg = base_config(data);
    cfg.device = device;
    CHECK(pl_loader_create(&cfg, &l) == 0, "create: %s", pl_last_error());
    cur = current_context(&drv);
    CHECK(cur == NULL, "after create: current context %p", (void *)cur);
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(pl_batch_wait(b, NULL) == 0, "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == NULL, "batch %d: after pl_batch_wait: current %p", n,
              (void *)cur);
        CHECK(pl_loader_release(l, b, n % 2 ? NULL : cudaStreamPerThread) == 0,
              "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == NULL, "batch %d: after pl_loader_release: current %p", n,
              (void *)cur);
        stats_probe probe = {l, &drv, -1, (CUcontext)(uintptr_t)-1};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, stats_thread, &probe) == 0,
              "pthread_create");
        pthread_join(t, NULL);
        CHECK(probe.rc == 0, "pl_loader_stats from another thread: %d",
              probe.rc);
        CHECK(probe.after == NULL,
              "the stats thread has context %p after pl_loader_stats",
              (void *)probe.after);
        n++;
    }
    CHECK(rc == PL_EPOCH_END && n > 0, "rc %d (%s) after %d batches", rc,
          pl_last_error(), n);
    const int live = primary_active(&drv, device);
    pl_loader_destroy(l);
    l = NULL;
    cur = current_context(&drv);
    const int after = primary_active(&drv, device);
    const int gpu0 = device != 0 ? primary_active(&drv, 0) : -2;
    printf("  device %d's primary context active: %d while the loader ran, %d "
           "after destroy (either may be); current context after destroy %p",
           device, live, after, (void *)cur);
    if (device != 0)
        printf("; GPU 0's primary context active: %d", gpu0);
    printf("\n");
    CHECK(live == 1, "the loader's retained primary context not active: %d",
          live);
    CHECK(cur == NULL, "after destroy: current context %p", (void *)cur);
    CHECK(device == 0 || gpu0 == 0,
          "a loader on device %d made GPU 0's primary context active (%d)",
          device, gpu0);
    const cudaError_t e = cudaGetLastError();
    CHECK(e == cudaSuccess, "an error left pending: %s", cudaGetErrorName(e));
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* Runs fresh_thread_child in a new process: fork, then exec at once (CUDA
 * is not fork-safe). */
static outcome run_fresh_child(const char *data, int device)
{
    outcome result = FAILED;
    char dev[16];
    snprintf(dev, sizeof dev, "%d", device);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_cuda", "--fresh-thread", dev, data,
              (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0, "fork failed");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child (a loader on device %d from a thread that never chose "
          "one) failed: %s %d",
          device, WIFEXITED(status) ? "exit status" : "wait status",
          WIFEXITED(status) ? WEXITSTATUS(status) : status);
    result = PASSED;
done:
    return result;
}

outcome no_context_on_gpu0_for_a_loader_on_device_1(const char *data,
                                                    const void *arg)
{
    (void)arg;
    const int n = device_count();
    if (n < 2)
        SKIP("needs two CUDA devices, %d present", n);
    return run_fresh_child(data, 1);
}

/* The one-GPU form: a loader on device 0 leaves a thread that never chose
 * a device with no current context. */
outcome no_context_left_on_a_thread_that_never_chose_a_device(const char *data,
                                                              const void *arg)
{
    (void)arg;
    return run_fresh_child(data, 0);
}
