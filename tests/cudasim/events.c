/* cudasim's events (see sim.h for its files): records, waits across
 * streams and devices, queries and timings. */
#include <pthread.h>
#include <stdlib.h>

#include "sim.h"

static cudaError_t get_event(cudaEvent_t h, struct CUevent_st **out)
{
    for (struct CUevent_st *v = G.events; v; v = v->next)
        if (v == h) {
            *out = v;
            return cudaSuccess;
        }
    return cudaErrorInvalidResourceHandle;
}

static cudaError_t create_event(int fid, cudaEvent_t *out, unsigned flags)
{
    cudaError_t e = sim_begin(fid, 0, NULL, NULL);
    const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming;
    if (e == cudaSuccess && (!out || (flags & ~known)))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_can_allocate();
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess && !(v = calloc(1, sizeof *v)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        v->magic = EVENT_MAGIC;
        v->device = sim_cur();
        v->flags = flags;
        v->refs = 1;
        v->next = G.events;
        G.events = v;
        *out = v;
    }
    return sim_end(e);
}

cudaError_t cudaEventCreate(cudaEvent_t *out)
{
    return create_event(F_cudaEventCreate, out, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
    return create_event(F_cudaEventCreateWithFlags, out, flags);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    cudaError_t e = sim_begin(F_cudaEventDestroy, 0, NULL, NULL);
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess) {
        struct CUevent_st **pp = &G.events;
        while (*pp != v)
            pp = &(*pp)->next;
        *pp = v->next;
        v->destroyed = 1;
        sim_event_unref(v); /* pending records and waits keep it */
        e = sim_ctx(sim_cur() < G.cfg.devices ? sim_cur() : 0);
    }
    return sim_end(e);
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream)
{
    cudaError_t async;
    cudaError_t e = sim_begin(F_cudaEventRecord, 1, stream, &async);
    struct CUstream_st *s = NULL;
    struct CUevent_st *v = NULL;
    op *o = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    /* "event and stream must be on the same CUDA context" (cudaEventRecord,
     * Runtime API): a record is judged on the device of the stream it
     * names, which for NULL and cudaStreamPerThread is the calling thread's
     * current one. */
    if (e == cudaSuccess && v->device != s->device)
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess && !(o = sim_new_op(OP_RECORD)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess && s->cap != CAP_NONE) {
        /* Into the capture: the event is recorded when a launch of the
         * graph reaches it, not now. */
        o->ev = v;
        v->refs++;
        e = sim_capture_op(s, o);
        if (e == cudaSuccess)
            v->captured = s;
        else {
            sim_event_unref(v);
            free(o);
        }
    } else if (e == cudaSuccess) {
        o->ev = v;
        o->gen = ++v->recorded;
        v->captured = NULL;
        v->refs++;
        o->fail = async;
        e = sim_enqueue(s, o);
        if (e != cudaSuccess) {
            v->recorded--;
            sim_event_unref(v);
            free(o);
        }
    }
    return sim_end(e);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t ev,
                                unsigned int flags)
{
    cudaError_t async;
    cudaError_t e = sim_begin(F_cudaStreamWaitEvent, 1, stream, &async);
    struct CUstream_st *s = NULL;
    struct CUevent_st *v = NULL;
    op *o = NULL;
    if (e == cudaSuccess && flags != 0)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    /* A stream outside capture waiting for an event recorded inside one
     * would join that capture in CUDA; not modelled. */
    if (e == cudaSuccess && s->cap == CAP_NONE && v->captured)
        e = cudaErrorCapturedEvent;
    if (e == cudaSuccess && v->recorded == 0 && v->captured != s)
        return sim_end(cudaSuccess); /* never recorded: nothing to wait for */
    /* "event may be from a different device than stream"
     * (cudaStreamWaitEvent, Runtime API): a wait on another device's event
     * succeeds, and orders only the stream it names, which for NULL and
     * cudaStreamPerThread is of the calling thread's current device. */
    if (e == cudaSuccess && !(o = sim_new_op(OP_WAIT_EVENT)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->ev = v;
        o->gen = v->recorded;
        v->refs++;
        o->fail = async;
        e = sim_enqueue(s, o);
        if (e != cudaSuccess) {
            sim_event_unref(v);
            free(o);
        }
    }
    return sim_end(e);
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    cudaError_t e = sim_begin(F_cudaEventQuery, 0, NULL, NULL);
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess)
        e = sim_ctx(v->device);
    if (e == cudaSuccess && v->captured)
        e = cudaErrorCapturedEvent; /* "last recorded inside a capture" */
    if (e == cudaSuccess && v->completed < v->recorded)
        e = cudaErrorNotReady;
    return sim_end(e);
}

typedef struct event_target {
    const struct CUevent_st *v;
    uint64_t gen;
} event_target;

static int event_reached(const void *arg)
{
    const event_target *t = arg;
    return t->v->completed >= t->gen;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    cudaError_t e = sim_begin(F_cudaEventSynchronize, 0, NULL, NULL);
    struct CUevent_st *v = NULL;
    if (e == cudaSuccess)
        e = get_event(ev, &v);
    if (e == cudaSuccess && v->captured)
        e = cudaErrorCapturedEvent;
    if (e == cudaSuccess) {
        const event_target t = {v, v->recorded};
        v->refs++;
        e = sim_wait_until(event_reached, &t, v->device);
        sim_event_unref(v);
    }
    return sim_end(e);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    cudaError_t e = sim_begin(F_cudaEventElapsedTime, 0, NULL, NULL);
    struct CUevent_st *x = NULL, *y = NULL;
    if (e == cudaSuccess && !ms)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = get_event(a, &x);
    if (e == cudaSuccess)
        e = get_event(b, &y);
    if (e == cudaSuccess)
        e = sim_ctx(x->device);
    if (e == cudaSuccess && (!x->recorded || !y->recorded ||
                             ((x->flags | y->flags) & cudaEventDisableTiming)))
        e = cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess &&
        (x->completed < x->recorded || y->completed < y->recorded))
        e = cudaErrorNotReady;
    if (e == cudaSuccess)
        *ms = (float)(((double)y->t_ns - (double)x->t_ns) / 1e6);
    return sim_end(e);
}
