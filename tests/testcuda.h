/* What lets a loader suite run on either backend: the device the tests ask
 * for, and a batch's pixels read into host memory whatever the backend;
 * with the helpers every loader suite uses (a quiet log, a kept log, a
 * create that must succeed).
 * `make test CUDA=sim` sets PINLOAD_TEST_DEVICE=cuda, so the loader suites
 * (test_loader_*) run every loader on (simulated) CUDA device 0; otherwise
 * the host backend. */
#ifndef PINLOAD_TESTCUDA_H
#define PINLOAD_TESTCUDA_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"
#include "testutil.h"

#ifdef PL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* A log callback that drops every message. */
static inline void quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

/* Every message of a loader, a line each, kept for a test to look into;
 * any of the loader's threads may log. A tu_log starts zeroed, its mutex
 * initialised (PTHREAD_MUTEX_INITIALIZER). */
typedef struct tu_log {
    pthread_mutex_t mu;
    char text[16384];
} tu_log;

/* The log callback that keeps them: ctx is the tu_log. */
static inline void tu_keep_log(void *ctx, pl_log_level level, const char *msg)
{
    tu_log *a = ctx;
    (void)level;
    pthread_mutex_lock(&a->mu);
    const size_t n = strlen(a->text);
    snprintf(a->text + n, sizeof a->text - n, "%s\n", msg);
    pthread_mutex_unlock(&a->mu);
}

/* pl_loader_create that must succeed, naming the error if not. */
static inline pl_loader *create(const pl_config *c)
{
    pl_loader *l = NULL;
    const int rc = pl_loader_create(c, &l);
    cr_assert_eq(rc, 0, "pl_loader_create: %s (%s)", pl_err_name(rc),
                 pl_last_error());
    cr_assert_not_null(l);
    return l;
}

/* 1 when the suite runs its loaders on CUDA. */
static inline int tu_on_cuda(void)
{
    const char *d = getenv("PINLOAD_TEST_DEVICE");
    return d && !strcmp(d, "cuda");
}

/* The pl_config.device the suite's loaders use. */
static inline int tu_device(void)
{
    return tu_on_cuda() ? 0 : PL_DEVICE_HOST;
}

/* Copies b's b->bytes of pixels to dst. On CUDA the way a program must:
 * the legacy default stream of the loader's device waits for the batch
 * (pl_batch_wait), then a device-to-host copy. The copy runs on the
 * calling thread's current device's legacy stream, which may be another
 * device's (the suites move the caller's thread on purpose), so the host
 * waits for the batch's event first. */
static inline void tu_batch_pixels(const pl_batch *b, void *dst)
{
    cr_assert_eq(pl_batch_wait(b, NULL), 0, "%s", pl_last_error());
    if (!b->ready) {
        memcpy(dst, b->data, b->bytes);
        return;
    }
#ifdef PL_HAVE_CUDA
    cudaError_t e = cudaEventSynchronize(b->ready);
    cr_assert_eq(e, cudaSuccess, "cudaEventSynchronize: %s",
                 cudaGetErrorString(e));
    e = cudaMemcpy(dst, b->data, b->bytes, cudaMemcpyDeviceToHost);
    cr_assert_eq(e, cudaSuccess, "cudaMemcpy: %s", cudaGetErrorString(e));
#else
    cr_assert(0, "a CUDA batch in a build without CUDA");
#endif
}

#endif
