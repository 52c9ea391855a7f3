#include "handoff.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/error.h"

static void add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

int handoff_init(handoff *h, const handoff_config *cfg)
{
    memset(h, 0, sizeof *h);
    h->cfg = *cfg;
    h->user_epoch = cfg->first_epoch;
    h->at_epoch = cfg->first_epoch;
    h->at_batch = cfg->start_batch;
    h->at_pos = cfg->start_pos;
    h->epochs_done = cfg->start_done;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->user_cv, NULL);
    pthread_cond_init(&h->pf_cv, NULL);
    h->bufs = calloc((size_t)cfg->nbufs, sizeof *h->bufs);
    h->queue = calloc((size_t)cfg->nbufs, sizeof *h->queue);
    if (!h->bufs || !h->queue)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    return 0;
}

void handoff_fini(handoff *h)
{
    free(h->bufs);
    free(h->queue);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->user_cv);
    pthread_cond_destroy(&h->pf_cv);
    memset(h, 0, sizeof *h);
}

dbuf *handoff_buffer(handoff *h, int i)
{
    return &h->bufs[i];
}

/* ---- the copy engine's side ---- */

int handoff_fail(handoff *h, int code, const char *fmt, ...)
{
    pthread_mutex_lock(&h->mu);
    if (!h->error) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(h->error_msg, sizeof h->error_msg, fmt, ap);
        va_end(ap);
        h->error = code;
    }
    pthread_cond_broadcast(&h->user_cv);
    pthread_mutex_unlock(&h->mu);
    return code;
}

dbuf *handoff_acquire(handoff *h)
{
    dbuf *d = NULL;
    pthread_mutex_lock(&h->mu);
    while (!h->stop && !d) {
        for (int k = 0; k < h->cfg.nbufs && !d; k++) {
            const int i = (h->next_free + k) % h->cfg.nbufs;
            if (h->bufs[i].state == DBUF_FREE) {
                d = &h->bufs[i];
                d->state = DBUF_FILLING;
                h->next_free = (i + 1) % h->cfg.nbufs;
            }
        }
        if (!d) {
            h->wants_buffer = 1;
            pthread_cond_broadcast(&h->user_cv); /* lets next() see EBUSY */
            pthread_cond_wait(&h->pf_cv, &h->mu);
            h->wants_buffer = 0;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return d;
}

void handoff_queue(handoff *h, dbuf *d)
{
    pthread_mutex_lock(&h->mu);
    d->state = DBUF_QUEUED;
    h->queue[(h->qhead + h->qlen++) % h->cfg.nbufs] = (int)(d - h->bufs);
    pthread_cond_broadcast(&h->user_cv);
    pthread_mutex_unlock(&h->mu);
}

void handoff_epoch_done(handoff *h, dbuf *unused)
{
    pthread_mutex_lock(&h->mu);
    if (unused) {
        unused->state = DBUF_FREE;
        pthread_cond_broadcast(&h->pf_cv);
    }
    h->epochs_done++;
    pthread_cond_broadcast(&h->user_cv);
    pthread_mutex_unlock(&h->mu);
}

void handoff_unfill(handoff *h, dbuf *d)
{
    pthread_mutex_lock(&h->mu);
    d->state = DBUF_FREE;
    pthread_mutex_unlock(&h->mu);
}

/* Also waits until no thread is inside handoff_next: one blocked there
 * (a watchdog destroying the loader under a training loop) returns
 * PL_ECLOSED first, and touches nothing of h once it has left. */
void handoff_stop(handoff *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_broadcast(&h->pf_cv);
    pthread_cond_broadcast(&h->user_cv);
    while (h->callers > 0)
        pthread_cond_wait(&h->user_cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

/* ---- the caller's side ---- */

void handoff_get_stats(const handoff *h, handoff_stats *s)
{
    s->batches = atomic_load(&h->batches);
    s->ns_wait = atomic_load(&h->ns_wait);
}

/* The head of the queue goes to the caller. h->mu held. */
static const pl_batch *pop(handoff *h)
{
    dbuf *d = &h->bufs[h->queue[h->qhead]];
    h->qhead = (h->qhead + 1) % h->cfg.nbufs;
    h->qlen--;
    d->state = DBUF_HELD;
    h->held++;
    h->at_epoch = d->batch.epoch;
    h->at_batch = d->batch.index + 1;
    h->at_pos = d->next_pos;
    add(&h->batches, 1);
    return &d->batch;
}

int handoff_next(handoff *h, const pl_batch **out)
{
    int rc;
    const uint64_t t0 = clock_now_ns();
    pthread_mutex_lock(&h->mu);
    h->callers++;
    for (;;) {
        if (h->stop) {
            rc = err_set(PL_ECLOSED, "pl_loader_next: the loader is being "
                                     "destroyed (by another thread)");
            break;
        }
        if (h->qlen > 0 &&
            h->bufs[h->queue[h->qhead]].batch.epoch == h->user_epoch) {
            *out = pop(h);
            rc = 0;
            break;
        }
        if (h->epochs_done > h->user_epoch - h->cfg.first_epoch) {
            h->user_epoch++;
            h->at_epoch = h->user_epoch;
            h->at_batch = h->at_pos = 0;
            rc = PL_EPOCH_END;
            break;
        }
        if (h->error) {
            rc = err_set(h->error, "%s", h->error_msg);
            break;
        }
        if (h->held == h->cfg.nbufs && h->wants_buffer) {
            rc = err_set(PL_EBUSY,
                         "pl_loader_next: the caller holds all %d "
                         "batches (config.device_buffers); release one first",
                         h->cfg.nbufs);
            break;
        }
        pthread_cond_wait(&h->user_cv, &h->mu);
    }
    add(&h->ns_wait, clock_now_ns() - t0);
    if (--h->callers == 0 && h->stop)
        pthread_cond_broadcast(&h->user_cv); /* handoff_stop may go on */
    pthread_mutex_unlock(&h->mu);            /* the last touch of h */
    return rc;
}

/* The release event could not be recorded, so the next copy into the
 * buffer cannot be made to wait for the caller's kernels on the GPU: the
 * host waits for the caller's stream instead, and the batch is released
 * all the same (the call still reports the failure). If even that fails,
 * *next becomes RETIRED: the buffer is never refilled, and the loader
 * stops with the error. */
static int release_on_host(handoff *h, struct CUstream_st *stream,
                           dbuf_state *next)
{
    char why[512];
    snprintf(why, sizeof why, "%s", pl_last_error());
    backend *be = h->cfg.be;
    if (be->ops->sync_user(be, stream) == 0)
        return err_set(PL_ECUDA,
                       "pl_loader_release: %s; waited for the caller's "
                       "stream on the host instead, and released the batch",
                       why);
    *next = DBUF_RETIRED;
    char msg[1024];
    snprintf(msg, sizeof msg,
             "pl_loader_release: %s, and waiting for the caller's stream "
             "failed too (%s): a device buffer is retired",
             why, pl_last_error());
    handoff_fail(h, PL_ECUDA, "%s", msg);
    return err_set(PL_ECUDA, "%s", msg);
}

void handoff_position(handoff *h, int64_t *epoch, int64_t *batch, int64_t *pos)
{
    pthread_mutex_lock(&h->mu);
    *epoch = h->at_epoch;
    *batch = h->at_batch;
    *pos = h->at_pos;
    pthread_mutex_unlock(&h->mu);
}

int handoff_release(handoff *h, const pl_batch *b, struct CUstream_st *stream)
{
    const dbuf *first = h->bufs, *last = h->bufs + h->cfg.nbufs;
    const dbuf *cd = (const dbuf *)b;
    if (!b || cd < first || cd >= last ||
        (size_t)((const char *)cd - (const char *)first) % sizeof *cd != 0)
        return err_set(PL_EINVAL, "pl_loader_release: not a batch of this "
                                  "loader");
    dbuf *d = &h->bufs[cd - first];
    pthread_mutex_lock(&h->mu);
    const int held = d->state == DBUF_HELD;
    if (held)
        d->state = DBUF_RELEASING;
    pthread_mutex_unlock(&h->mu);
    /* Not d->batch's fields: the copy engine may be refilling it. */
    if (!held)
        return err_set(PL_EINVAL, "pl_loader_release: that batch is not held "
                                  "(released twice?)");
    /* Without the lock: the fallback waits for the caller's stream. */
    backend *be = h->cfg.be;
    dbuf_state next = DBUF_FREE;
    int rc = be->ops->record_release(be, d->stream, stream);
    if (rc < 0)
        rc = release_on_host(h, stream, &next);
    pthread_mutex_lock(&h->mu);
    d->state = next;
    h->held--;
    pthread_cond_broadcast(&h->pf_cv);
    pthread_mutex_unlock(&h->mu);
    return rc;
}
