/* cudasim's stream capture and graphs (see sim.h for its files). */
#include <pthread.h>
#include <stdlib.h>

#include "sim.h"

/* ---- stream capture and graphs ----
 *
 * One stream's capture, in the modes CUDA has, with the rules of
 * cudaThreadExchangeStreamCaptureMode (capture_forbids) and of the calls
 * that conflict with a capture in any mode (capture_conflict,
 * capture_op). A graph is the captured operations in order; a launch
 * queues a copy of each on the stream it names. */

/* The thread's stream capture interaction mode
 * (cudaThreadExchangeStreamCaptureMode); 0 is cudaStreamCaptureModeGlobal,
 * the default. */
static _Thread_local enum cudaStreamCaptureMode t_capmode;

/* Whether the calling thread may make a potentially unsafe call now, by
 * its mode: "cudaStreamCaptureModeGlobal: ... If the local thread has an
 * ongoing capture sequence that was not initiated with
 * cudaStreamCaptureModeRelaxed ..., or if any other thread has a concurrent
 * capture sequence initiated with cudaStreamCaptureModeGlobal, this thread
 * is prohibited from potentially unsafe API calls";
 * "cudaStreamCaptureModeThreadLocal: If the local thread has an ongoing
 * capture sequence not initiated with cudaStreamCaptureModeRelaxed, it is
 * prohibited"; "cudaStreamCaptureModeRelaxed: The local thread is not
 * prohibited" (ibid.). A prohibited call fails and invalidates the
 * captures that forbade it, as a real one does: the graph that capture
 * would have made could not be right. G.mu held. */
cudaError_t sim_capture_forbids(void)
{
    if (t_capmode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    const pthread_t self = pthread_self();
    int forbidden = 0;
    for (struct CUstream_st *s = G.streams; s; s = s->next) {
        if (s->cap == CAP_NONE)
            continue;
        const int mine = pthread_equal(s->cap_thread, self);
        if ((mine && s->cap_mode != cudaStreamCaptureModeRelaxed) ||
            (!mine && t_capmode == cudaStreamCaptureModeGlobal &&
             s->cap_mode == cudaStreamCaptureModeGlobal)) {
            s->cap = CAP_INVALIDATED;
            forbidden = 1;
        }
    }
    return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

/* o, queued on a capturing stream, joins the capture instead of running.
 * What cannot be captured fails and invalidates the capture: a call that
 * would wait on the host for its own operation, and a wait for an event
 * not recorded in this capture (a cross-stream or external dependency,
 * which this model does not capture). G.mu held; o is the caller's to free
 * on failure. */
cudaError_t sim_capture_op(struct CUstream_st *s, op *o)
{
    if (s->cap == CAP_INVALIDATED)
        return cudaErrorStreamCaptureInvalidated;
    if (o->waited) {
        s->cap = CAP_INVALIDATED;
        return cudaErrorStreamCaptureUnsupported;
    }
    if (o->kind == OP_WAIT_EVENT && o->ev->captured != s) {
        s->cap = CAP_INVALIDATED;
        return cudaErrorStreamCaptureIsolation;
    }
    o->next = NULL;
    if (s->cap_tail)
        s->cap_tail->next = o;
    else
        s->cap_head = o;
    s->cap_tail = o;
    return cudaSuccess;
}

/* Asking whether a capturing stream is done, or waiting for it, conflicts
 * with its capture in every mode ("It is invalid to synchronize or query
 * the execution status of a stream which is being captured"): it fails,
 * and the capture is invalidated. G.mu held. */
cudaError_t sim_capture_conflict(struct CUstream_st *s)
{
    if (s->cap == CAP_NONE)
        return cudaSuccess;
    s->cap = CAP_INVALIDATED;
    return cudaErrorStreamCaptureUnsupported;
}

static void free_ops(op *o)
{
    while (o) {
        op *next = o->next;
        sim_event_unref(o->ev);
        free(o);
        o = next;
    }
}

/* A copy of captured operation g, to keep in an executable graph or to
 * queue; NULL when out of memory. */
static op *clone_op(const op *g)
{
    op *o = sim_new_op(g->kind);
    if (!o)
        return NULL;
    o->dst = g->dst;
    o->src = g->src;
    o->n = g->n;
    o->value = g->value;
    for (int i = 0; i < OP_USES; i++)
        o->use[i] = g->use[i];
    o->fn = g->fn;
    o->arg = g->arg;
    o->ev = g->ev;
    if (o->ev)
        o->ev->refs++;
    return o;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   enum cudaStreamCaptureMode mode)
{
    cudaError_t e = sim_begin(F_cudaStreamBeginCapture, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    /* "Capture may not be initiated if stream is cudaStreamLegacy" */
    if (e == cudaSuccess && sim_is_legacy(stream))
        e = cudaErrorStreamCaptureUnsupported;
    if (e == cudaSuccess && (unsigned)mode > cudaStreamCaptureModeRelaxed)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    /* "it may only be initiated if the stream is not already in capture
     * mode" */
    if (e == cudaSuccess && s->cap != CAP_NONE)
        e = cudaErrorIllegalState;
    if (e == cudaSuccess) {
        s->cap = CAP_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_head = s->cap_tail = NULL;
    }
    return sim_end(e);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    cudaError_t e = sim_begin(F_cudaStreamEndCapture, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess && !graph)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess && s->cap == CAP_NONE)
        e = cudaErrorIllegalState;
    /* "If mode is not cudaStreamCaptureModeRelaxed, cudaStreamEndCapture
     * must be called on this stream from the same thread." */
    if (e == cudaSuccess && s->cap_mode != cudaStreamCaptureModeRelaxed &&
        !pthread_equal(s->cap_thread, pthread_self()))
        e = cudaErrorStreamCaptureWrongThread;
    if (e != cudaSuccess)
        return sim_end(e);
    op *ops = s->cap_head;
    const capture_state was = s->cap;
    s->cap = CAP_NONE;
    s->cap_head = s->cap_tail = NULL;
    for (struct CUevent_st *v = G.events; v; v = v->next)
        if (v->captured == s)
            v->captured = NULL;
    *graph = NULL;
    struct CUgraph_st *g = NULL;
    if (was == CAP_INVALIDATED)
        e = cudaErrorStreamCaptureInvalidated;
    else if (!(g = calloc(1, sizeof *g)))
        e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        free_ops(ops);
        return sim_end(e);
    }
    g->magic = GRAPH_MAGIC;
    g->head = ops;
    g->next = G.graphs;
    G.graphs = g;
    *graph = g;
    return sim_end(cudaSuccess);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *status)
{
    cudaError_t e = sim_begin(F_cudaStreamIsCapturing, 1, stream, NULL);
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess && !status)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        *status = s->cap == CAP_ACTIVE ? cudaStreamCaptureStatusActive
                  : s->cap == CAP_INVALIDATED
                      ? cudaStreamCaptureStatusInvalidated
                      : cudaStreamCaptureStatusNone;
    return sim_end(e);
}

/* As the real one, it needs a context: called on a thread with none, it
 * makes the primary context of the thread's device current (seen on an
 * H200, 2026-11-27: device 0's, for a thread that never chose one). */
cudaError_t
cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    cudaError_t e =
        sim_begin(F_cudaThreadExchangeStreamCaptureMode, 0, NULL, NULL);
    if (e == cudaSuccess &&
        (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        const enum cudaStreamCaptureMode old = t_capmode;
        t_capmode = *mode;
        *mode = old;
    }
    return sim_end(e);
}

static cudaError_t get_graph(cudaGraph_t h, struct CUgraph_st **out)
{
    for (struct CUgraph_st *g = G.graphs; g; g = g->next)
        if (g == h) {
            *out = g;
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}

static cudaError_t get_exec(cudaGraphExec_t h, struct CUgraphExec_st **out)
{
    for (struct CUgraphExec_st *x = G.execs; x; x = x->next)
        if (x == h) {
            *out = x;
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    cudaError_t e = sim_begin(F_cudaGraphInstantiate, 0, NULL, NULL);
    struct CUgraph_st *g = NULL;
    struct CUgraphExec_st *x = NULL;
    if (e == cudaSuccess && (!exec || flags != 0))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_graph(graph, &g);
    if (e == cudaSuccess && !(x = calloc(1, sizeof *x)))
        e = cudaErrorMemoryAllocation;
    op **tail = x ? &x->head : NULL;
    for (const op *o = g ? g->head : NULL; o && e == cudaSuccess; o = o->next) {
        if (!(*tail = clone_op(o)))
            e = cudaErrorMemoryAllocation;
        else
            tail = &(*tail)->next;
    }
    if (e != cudaSuccess) {
        if (x)
            free_ops(x->head);
        free(x);
        return sim_end(e);
    }
    x->magic = EXEC_MAGIC;
    x->next = G.execs;
    G.execs = x;
    *exec = x;
    return sim_end(cudaSuccess);
}

/* Queues a copy of each operation of the graph on `stream`, in order; an
 * event recorded in it is recorded anew by each launch. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    cudaError_t e = sim_begin(F_cudaGraphLaunch, 1, stream, NULL);
    struct CUgraphExec_st *x = NULL;
    struct CUstream_st *s = NULL;
    if (e == cudaSuccess)
        e = get_exec(exec, &x);
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    if (e == cudaSuccess && s->cap != CAP_NONE)
        e = cudaErrorStreamCaptureUnsupported; /* not modelled */
    for (const op *g = x ? x->head : NULL; g && e == cudaSuccess; g = g->next) {
        op *o = clone_op(g);
        if (!o) {
            e = cudaErrorMemoryAllocation;
            break;
        }
        if (o->kind == OP_RECORD) {
            o->gen = ++o->ev->recorded;
            o->ev->captured = NULL;
        } else if (o->kind == OP_WAIT_EVENT) {
            o->gen = o->ev->recorded;
        }
        e = sim_enqueue(s, o);
        if (e != cudaSuccess) {
            if (o->kind == OP_RECORD)
                o->ev->recorded--;
            sim_event_unref(o->ev);
            free(o);
        }
    }
    return sim_end(e);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    cudaError_t e = sim_begin(F_cudaGraphExecDestroy, 0, NULL, NULL);
    struct CUgraphExec_st *x = NULL;
    if (e == cudaSuccess)
        e = get_exec(exec, &x);
    if (e == cudaSuccess) {
        struct CUgraphExec_st **pp = &G.execs;
        while (*pp != x)
            pp = &(*pp)->next;
        *pp = x->next;
        free_ops(x->head); /* launches queued copies of their own */
        free(x);
    }
    return sim_end(e);
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    cudaError_t e = sim_begin(F_cudaGraphDestroy, 0, NULL, NULL);
    struct CUgraph_st *g = NULL;
    if (e == cudaSuccess)
        e = get_graph(graph, &g);
    if (e == cudaSuccess) {
        struct CUgraph_st **pp = &G.graphs;
        while (*pp != g)
            pp = &(*pp)->next;
        *pp = g->next;
        free_ops(g->head);
        free(g);
    }
    return sim_end(e);
}
