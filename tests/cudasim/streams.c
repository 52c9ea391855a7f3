/* cudasim's streams (see sim.h for its files): a thread per stream that
 * runs its queue, the legacy and per-thread default streams, host
 * functions (on the one callback thread) and simulated kernels. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

_Thread_local int sim_t_in_callback;

/* The per-thread default stream of each device, once this thread used it. */
static _Thread_local struct CUstream_st *t_ptds[CUDASIM_MAX_DEVICES];

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* ---- streams and their threads ---- */

static void maybe_free_stream(struct CUstream_st *s)
{
    if (!s->thread_done || s->refs)
        return;
    struct CUstream_st **pp = &G.streams;
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    pthread_cond_destroy(&s->cv);
    s->magic = 0;
    free(s);
}

void sim_event_unref(struct CUevent_st *v)
{
    if (v && --v->refs == 0) {
        v->magic = 0;
        free(v);
    }
}

static void stream_unref(struct CUstream_st *s)
{
    if (s) {
        s->refs--;
        maybe_free_stream(s);
    }
}

/* o is done (run, or dropped on a broken device): off the queue, its
 * references given back, its waiters told. G.mu held. */
static void finish(struct CUstream_st *s, op *o, cudaError_t result)
{
    s->head = o->next;
    if (!s->head)
        s->tail = NULL;
    s->completed++;
    for (int i = 0; i < OP_USES; i++)
        sim_unuse(o->use[i]);
    if (o->kind == OP_RECORD && result == cudaSuccess &&
        o->gen > o->ev->completed) {
        o->ev->completed = o->gen;
        o->ev->t_ns = now_ns();
    }
    sim_event_unref(o->ev);
    stream_unref(o->other);
    o->result = result;
    if (o->waited)
        o->done = 1;
    else
        free(o);
    pthread_cond_broadcast(&G.done);
}

void sim_break_device(int d, cudaError_t e)
{
    if (G.dev[d].sticky)
        return;
    G.dev[d].sticky = e;
    for (struct CUstream_st *s = G.streams; s; s = s->next)
        if (s->device == d)
            pthread_cond_signal(&s->cv);
    pthread_cond_broadcast(&G.done);
}

static void *callback_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&G.mu);
    for (;;) {
        while (!G.cb_head)
            pthread_cond_wait(&G.cb_cv, &G.mu);
        op *o = G.cb_head;
        G.cb_head = o->cb_next;
        if (!G.cb_head)
            G.cb_tail = NULL;
        pthread_mutex_unlock(&G.mu);
        sim_t_in_callback = 1;
        o->fn(o->arg);
        sim_t_in_callback = 0;
        pthread_mutex_lock(&G.mu);
        o->cb_done = 1;
        pthread_cond_broadcast(&G.done);
    }
    return NULL;
}

/* Whether what o waits for has happened (or can never happen). */
static int deps_met(const struct CUstream_st *s, const op *o)
{
    if (sim_ctx(s->device))
        return 1;
    if (o->kind == OP_WAIT_EVENT)
        return o->ev->completed >= o->gen || sim_ctx(o->ev->device);
    if (o->kind == OP_WAIT_STREAM)
        return o->other->completed >= o->gen || sim_ctx(o->other->device);
    return 1;
}

static uint64_t op_delay(struct CUstream_st *s, const op *o)
{
    uint64_t ns = G.cfg.delay_us ? sim_xorshift(&s->rng) %
                                       ((uint64_t)G.cfg.delay_us + 1) * 1000u
                                 : 0;
    if (o->kind == OP_COPY && G.cfg.copy_gbs > 0)
        ns += (uint64_t)((double)o->n / G.cfg.copy_gbs);
    return ns;
}

/* Runs o's effect; G.mu held on entry and exit, released while it works. */
static void execute(op *o)
{
    switch (o->kind) {
    case OP_COPY:
        pthread_mutex_unlock(&G.mu);
        memcpy(o->dst, o->src, o->n);
        pthread_mutex_lock(&G.mu);
        break;
    case OP_MEMSET:
        pthread_mutex_unlock(&G.mu);
        memset(o->dst, o->value, o->n);
        pthread_mutex_lock(&G.mu);
        break;
    case OP_KERNEL:
        pthread_mutex_unlock(&G.mu);
        sim_t_in_callback = 1;
        o->fn(o->arg);
        sim_t_in_callback = 0;
        pthread_mutex_lock(&G.mu);
        break;
    case OP_HOSTFN:
        if (!G.cb_started) {
            pthread_t t;
            if (pthread_create(&t, NULL, callback_main, NULL) != 0) {
                fputs("cudasim: cannot start the callback thread\n", stderr);
                abort();
            }
            pthread_detach(t);
            G.cb_started = 1;
        }
        o->cb_next = NULL;
        if (G.cb_tail)
            G.cb_tail->cb_next = o;
        else
            G.cb_head = o;
        G.cb_tail = o;
        pthread_cond_signal(&G.cb_cv);
        while (!o->cb_done)
            pthread_cond_wait(&G.done, &G.mu);
        break;
    default: /* events, waits and prefetches act in finish() or not at all */
        break;
    }
}

static void *stream_main(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&G.mu);
    for (;;) {
        if (!s->head) {
            if (s->destroyed)
                break;
            pthread_cond_wait(&s->cv, &G.mu);
            continue;
        }
        if (G.paused && !sim_ctx(s->device)) {
            pthread_cond_wait(&s->cv, &G.mu);
            continue;
        }
        op *o = s->head;
        if (!sim_ctx(s->device)) {
            const uint64_t ns = op_delay(s, o);
            if (ns) {
                pthread_mutex_unlock(&G.mu);
                sleep_ns(ns);
                pthread_mutex_lock(&G.mu);
            }
        }
        while (!deps_met(s, o))
            pthread_cond_wait(&G.done, &G.mu);
        if (o->fail && !sim_ctx(s->device))
            sim_break_device(s->device, o->fail);
        if (sim_ctx(s->device)) { /* dropped: host functions are not called */
            if (o->drop)
                o->drop(o->arg);
            finish(s, o, sim_ctx(s->device));
            continue;
        }
        execute(o);
        finish(s, o, cudaSuccess);
    }
    s->thread_done = 1;
    maybe_free_stream(s);
    pthread_mutex_unlock(&G.mu);
    return NULL;
}

static cudaError_t new_stream(int device, unsigned flags, int legacy,
                              struct CUstream_st **out)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return cudaErrorMemoryAllocation;
    s->magic = STREAM_MAGIC;
    s->id = G.next_stream_id++;
    s->device = device;
    s->legacy = legacy;
    s->flags = flags;
    s->rng = G.cfg.seed * 0x9E3779B97F4A7C15u + (uint64_t)s->id + 1;
    pthread_cond_init(&s->cv, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, stream_main, s) != 0) {
        pthread_cond_destroy(&s->cv);
        free(s);
        return cudaErrorMemoryAllocation;
    }
    pthread_detach(t);
    s->next = G.streams;
    G.streams = s;
    *out = s;
    return cudaSuccess;
}

/* The stream a handle names: the device's legacy stream for NULL. */
cudaError_t sim_get_stream(cudaStream_t h, struct CUstream_st **out)
{
    const int dv = sim_cur();
    if ((h == cudaStreamPerThread || sim_is_legacy(h)) && dv >= G.cfg.devices)
        return cudaErrorNoDevice;
    /* "The per-thread default stream is not a non-blocking stream and will
     * synchronize with the legacy default stream if both are used in a
     * program"; it "does not synchronize with other streams, just like
     * explicitly created streams" (Stream synchronization behavior, CUDA
     * Runtime and Driver API): a blocking stream of the current device, one
     * per host thread, which the handle names only on that thread. */
    if (h == cudaStreamPerThread) {
        if (!t_ptds[dv]) {
            const cudaError_t e =
                new_stream(dv, cudaStreamDefault, 0, &t_ptds[dv]);
            if (e != cudaSuccess)
                return e;
            t_ptds[dv]->per_thread = 1;
            t_ptds[dv]->refs++; /* the thread's, never given back */
        }
        *out = t_ptds[dv];
        return cudaSuccess;
    }
    /* NULL and cudaStreamLegacy name "an implicit stream which synchronizes
     * with all other streams in the same CUcontext except for non-blocking
     * streams" (Stream synchronization behavior): the legacy stream of the
     * context current to the calling thread, whatever device that is. */
    if (sim_is_legacy(h)) {
        sim_device *d = &G.dev[dv];
        if (!d->legacy) {
            const cudaError_t e =
                new_stream(dv, cudaStreamDefault, 1, &d->legacy);
            if (e != cudaSuccess)
                return e;
        }
        *out = d->legacy;
        return cudaSuccess;
    }
    for (struct CUstream_st *s = G.streams; s; s = s->next)
        if (s == h && !s->destroyed && !s->legacy && !s->per_thread) {
            *out = s;
            return cudaSuccess;
        }
    return cudaErrorInvalidResourceHandle;
}

op *sim_new_op(op_kind kind)
{
    op *o = calloc(1, sizeof *o);
    if (o)
        o->kind = kind;
    return o;
}

static void push(struct CUstream_st *s, op *o)
{
    o->next = NULL;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->submitted++;
    pthread_cond_signal(&s->cv);
}

/* The legacy default stream waits for the work already queued on every
 * blocking stream of its device, and a blocking stream for the work already
 * queued on the legacy stream. */
static cudaError_t implicit_sync(struct CUstream_st *s)
{
    if (s->flags & cudaStreamNonBlocking)
        return cudaSuccess;
    for (struct CUstream_st *t = G.streams; t; t = t->next) {
        const int other = s->legacy ? !t->legacy && t->device == s->device &&
                                          !(t->flags & cudaStreamNonBlocking)
                                    : t == G.dev[s->device].legacy;
        if (!other || t == s || t->completed >= t->submitted)
            continue;
        op *w = sim_new_op(OP_WAIT_STREAM);
        if (!w)
            return cudaErrorMemoryAllocation;
        w->other = t;
        w->gen = t->submitted;
        t->refs++;
        push(s, w);
    }
    return cudaSuccess;
}

cudaError_t sim_enqueue(struct CUstream_st *s, op *o)
{
    if (s->cap != CAP_NONE)
        return sim_capture_op(s, o);
    const cudaError_t e = implicit_sync(s);
    if (e != cudaSuccess)
        return e;
    for (int i = 0; i < OP_USES; i++)
        if (o->use[i])
            o->use[i]->inflight++;
    push(s, o);
    return cudaSuccess;
}

/* Waits, G.mu held, until `done` says so or the device breaks. A broken
 * device's error wins even when `done` holds: its streams complete what
 * they drop, so being done does not mean the work ran. */
cudaError_t sim_wait_until(int (*done)(const void *), const void *arg,
                           int device)
{
    G.blocked++;
    while (!done(arg) && !sim_ctx(device))
        pthread_cond_wait(&G.done, &G.mu);
    G.blocked--;
    return sim_ctx(device);
}

/* Queues o on s and returns once it has run, for a synchronous call. */
static cudaError_t run_sync(struct CUstream_st *s, op *o)
{
    o->waited = 1;
    cudaError_t e = sim_enqueue(s, o);
    if (e != cudaSuccess) {
        free(o);
        return e;
    }
    G.blocked++;
    while (!o->done)
        pthread_cond_wait(&G.done, &G.mu);
    G.blocked--;
    e = o->result;
    free(o);
    return e;
}

cudaError_t sim_submit(struct CUstream_st *s, op *o, int sync)
{
    if (sync)
        return run_sync(s, o);
    const cudaError_t e = sim_enqueue(s, o);
    if (e != cudaSuccess)
        free(o);
    return e;
}

/* ---- streams ---- */

static cudaError_t create_stream(int fid, cudaStream_t *out, unsigned flags)
{
    cudaError_t e = sim_begin(fid, 0, NULL, NULL);
    if (e == cudaSuccess && (!out || (flags & ~1u)))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_can_allocate();
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = new_stream(sim_cur(), flags, 0, &s);
    if (e == cudaSuccess)
        *out = s;
    return sim_end(e);
}

cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    return create_stream(F_cudaStreamCreate, out, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    return create_stream(F_cudaStreamCreateWithFlags, out, flags);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    cudaError_t e = sim_begin(F_cudaStreamDestroy, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess &&
        (sim_is_legacy(stream) || stream == cudaStreamPerThread))
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess) {
        /* Queued work still runs; the thread ends after it. */
        s->destroyed = 1;
        pthread_cond_signal(&s->cv);
        e = sim_ctx(s->device);
    }
    return sim_end(e);
}

cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int *flags)
{
    cudaError_t e = sim_begin(F_cudaStreamGetFlags, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess && !flags)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        *flags = s->flags;
    return sim_end(e);
}

typedef struct stream_target {
    const struct CUstream_st *s;
    uint64_t upto;
} stream_target;

static int stream_reached(const void *arg)
{
    const stream_target *t = arg;
    return t->s->completed >= t->upto;
}

/* The streams a synchronisation of s must wait for, s first: for the
 * legacy stream, every blocking stream of its device too; for a device
 * synchronisation (s NULL), every stream of `device`. Each holds a
 * reference until unref_targets. */
static int collect_targets(struct CUstream_st *s, int device,
                           stream_target **out)
{
    int n = 0;
    for (struct CUstream_st *t = G.streams; t; t = t->next)
        n++;
    stream_target *v = calloc((size_t)n + 1, sizeof *v);
    if (!v)
        return -1;
    int k = 0;
    for (struct CUstream_st *t = G.streams; t; t = t->next) {
        const int want = s ? t == s || (s->legacy && t->device == s->device &&
                                        !(t->flags & cudaStreamNonBlocking))
                           : t->device == device;
        if (want) {
            t->refs++;
            v[k++] = (stream_target){t, t->submitted};
        }
    }
    *out = v;
    return k;
}

static void unref_targets(stream_target *v, int n)
{
    for (int i = 0; i < n; i++)
        stream_unref((struct CUstream_st *)v[i].s);
    free(v);
}

static cudaError_t wait_streams(struct CUstream_st *s, int device)
{
    stream_target *v;
    const int n = collect_targets(s, device, &v);
    if (n < 0)
        return cudaErrorMemoryAllocation;
    cudaError_t e = sim_ctx(device); /* with no stream to wait for too */
    for (int i = 0; i < n && e == cudaSuccess; i++)
        e = sim_wait_until(stream_reached, &v[i], v[i].s->device);
    unref_targets(v, n);
    return e;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    cudaError_t e = sim_begin(F_cudaStreamSynchronize, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_capture_conflict(s);
    if (e == cudaSuccess)
        e = wait_streams(s, s->device);
    return sim_end(e);
}

cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = sim_begin(F_cudaDeviceSynchronize, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = sim_check_device(sim_cur());
    for (struct CUstream_st *t = G.streams; t && e == cudaSuccess; t = t->next)
        if (t->device == sim_cur())
            e = sim_capture_conflict(t);
    if (e == cudaSuccess)
        e = wait_streams(NULL, sim_cur());
    return sim_end(e);
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    cudaError_t e = sim_begin(F_cudaStreamQuery, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_capture_conflict(s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    if (e == cudaSuccess && s->completed < s->submitted)
        e = cudaErrorNotReady;
    return sim_end(e);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *arg)
{
    cudaError_t async;
    cudaError_t e = sim_begin(F_cudaLaunchHostFunc, 1, stream, &async);
    struct CUstream_st *s = NULL;
    op *o = NULL;
    if (e == cudaSuccess && !fn)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    if (e == cudaSuccess && !(o = sim_new_op(OP_HOSTFN)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->fn = fn;
        o->arg = arg;
        o->fail = async;
        e = sim_submit(s, o, 0);
    }
    return sim_end(e);
}

cudaError_t cudasim_launch(cudaStream_t stream, void (*fn)(void *), void *arg,
                           const void *reads, size_t n)
{
    const void *mem[1] = {reads};
    const size_t bytes[1] = {n};
    return cudasim_launch_n(stream, fn, arg, NULL, mem, bytes,
                            reads && n ? 1 : 0);
}

cudaError_t cudasim_launch_n(cudaStream_t stream, void (*fn)(void *), void *arg,
                             void (*drop)(void *), const void *const *mem,
                             const size_t *n, int count)
{
    cudaError_t async;
    cudaError_t e = sim_begin(F_cudasim_launch, 1, stream, &async);
    struct CUstream_st *s = NULL;
    endpoint r[OP_USES];
    memset(r, 0, sizeof r);
    op *o = NULL;
    if (e == cudaSuccess && (!fn || count < 0 || count > OP_USES))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    /* An argument the operation owns cannot be replayed by a graph. */
    if (e == cudaSuccess && drop && s->cap != CAP_NONE)
        e = cudaErrorStreamCaptureUnsupported;
    for (int i = 0; i < count && e == cudaSuccess; i++)
        if (mem[i] && n[i])
            e = sim_resolve(mem[i], n[i], &r[i]);
    if (e == cudaSuccess && !(o = sim_new_op(OP_KERNEL)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->fn = fn;
        o->arg = arg;
        o->drop = drop;
        for (int i = 0; i < count; i++)
            o->use[i] = r[i].a;
        o->fail = async;
        e = sim_submit(s, o, 0);
    }
    return sim_end(e);
}
