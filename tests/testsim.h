/* What the suites on the simulated CUDA runtime (tests/unit/device) share:
 * CUDA status assertions, the
 * simulator's timing, waits, the engine's view of device memory, a child
 * process for what must crash, and simulated kernels that block (gate),
 * observe, sleep or log the order they ran in; and, for the CUDA
 * backend's suites, a small loader's config on device 0 and the check
 * that nothing is left live. Built only by `make CUDA=sim`. */
#ifndef PINLOAD_TESTSIM_H
#define PINLOAD_TESTSIM_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testutil.h"

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
static inline void sim_timing(unsigned delay_us, double gbs)
{
    cudasim_config c;
    cudasim_get_config(&c);
    c.delay_us = delay_us;
    c.copy_gbs = gbs;
    cr_assert_eq(cudasim_set_config(&c), 0);
}

static inline void sleep_ms(int ms)
{
    struct timespec t = {.tv_sec = ms / 1000,
                         .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Waits up to `seconds` for *flag to become nonzero; returns it. */
static inline int wait_flag(atomic_int *flag, double seconds)
{
    const double end = tu_seconds() + seconds;
    while (!atomic_load(flag) && tu_seconds() < end)
        sleep_ms(1);
    return atomic_load(flag);
}

/* Waits up to `seconds` for exactly `n` host threads to block in the sim. */
static inline int wait_blocked(int n, double seconds)
{
    const double end = tu_seconds() + seconds;
    while (cudasim_blocked_threads() != n && tu_seconds() < end)
        sleep_ms(1);
    return cudasim_blocked_threads();
}

/* The engine's view of device pointer d, which must exist. */
static inline unsigned char *view(const void *d)
{
    unsigned char *v = cudasim_device_view(d);
    cr_assert_not_null(v, "cudasim_device_view(%p) is NULL", d);
    return v;
}

/* Asserts that p[0, n) all hold `value`, naming the first that does not. */
static inline void assert_all(const unsigned char *p, int value, size_t n,
                              const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(p[i], (unsigned char)value,
                     "%s: byte %zu is 0x%02x, want 0x%02x", what, i, p[i],
                     (unsigned)(unsigned char)value);
}

static inline void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7u + seed);
}

/* Forks a child that runs fn(arg) with core dumps off, for 5 s at most
 * (and stderr closed when quiet), and returns its wait status. The child
 * never returns into the test runner. */
static inline int run_in_child(int (*fn)(void *), void *arg, int quiet)
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

static inline void gate_kernel(void *arg)
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
static inline void gate_wait_entered(gate *g)
{
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static inline void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline int gate_done(gate *g)
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

static inline void observe(void *arg)
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

static inline void slow_step(void *arg)
{
    slow *s = arg;
    sleep_ms(s->ms);
    atomic_store(&s->done, 1);
}

static inline void raise_flag(void *arg)
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

static inline void log_step(void *arg)
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

/* ---- loaders on the simulated device ------------------------------------ */

/* A small loader on simulated device 0, with explicit rank and world. */
static inline void base_cfg(pl_config *c, const char *data)
{
    pl_config_default(c);
    c->data = data;
    c->device = 0;
    c->log = quiet;
    c->batch_size = 5;
    c->width = 16;
    c->height = 16;
    c->num_workers = 2;
    c->prefetch = 2;
    c->device_buffers = 2;
    c->seed = 11;
    c->rank = 0;
    c->world_size = 1;
}

/* A tree of n JPEGs in `classes` class folders under a fresh root, and
 * base_cfg for it (as testloader.h's fx_tree does for the loader suites). */
static inline void sim_tree(char root[64], pl_config *c, int n, int classes)
{
    tu_make_tree(root, n, classes);
    base_cfg(c, root);
}

static inline void assert_nothing_live(const char *when)
{
    cudasim_live lv;
    cudasim_get_live(&lv);
    cr_assert_eq(lv.device_allocs + lv.pinned_allocs + lv.managed_allocs, 0,
                 "%s: %d device, %d pinned, %d managed allocations live", when,
                 lv.device_allocs, lv.pinned_allocs, lv.managed_allocs);
    cr_assert_eq(lv.streams, 0, "%s: %d streams live", when, lv.streams);
    cr_assert_eq(lv.events, 0, "%s: %d events live", when, lv.events);
}

#endif
