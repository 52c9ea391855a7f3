#include "dev_buffers.h"

#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/error.h"
#include "../common/grow.h"

static void add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* Buffer d's memory and stream: the batch's device memory, its uint8
 * staging area when the GPU normalises, a page-locked host mirror when the
 * caller asked for the host copy and device memory is not host memory. */
static int init_buffer(handoff *h, dbuf *d)
{
    backend *be = h->cfg.be;
    const output_plan *out = h->cfg.out;
    const size_t n = (size_t)h->cfg.batch_size;
    const size_t bytes = out->sample_bytes * n;
    d->labels = calloc(n, sizeof *d->labels);
    d->indices = calloc(n, sizeof *d->indices);
    d->status = calloc(n, sizeof *d->status);
    if (!d->labels || !d->indices || !d->status)
        return err_set(PL_ENOMEM, "out of memory");
    if (out->batch_op &&
        !(d->soft = calloc(n * (size_t)out->num_classes, sizeof *d->soft)))
        return err_set(PL_ENOMEM, "out of memory for %zu x %d soft labels", n,
                       out->num_classes);
    for (int k = 0; k < h->cfg.nextras; k++) {
        if (!(d->extra_off[k] = calloc(n + 1, sizeof *d->extra_off[k])))
            return err_set(PL_ENOMEM, "out of memory");
        d->extras[k] = (pl_extra){.name = h->cfg.extra_names[k],
                                  .offsets = d->extra_off[k]};
    }
    int rc = be->ops->dev_alloc(be, bytes, &d->dev);
    if (rc == 0 && out->gpu_normalize)
        rc = be->ops->dev_alloc(be, out->ring_sample_bytes * n, &d->staging);
    if (rc == 0)
        rc = be->ops->stream_create(be, &d->stream);
    if (rc == 0 && h->cfg.keep_host) {
        hostmem kind;
        int node; /* the ring's, as a rule: the notice is the backend's */
        rc = be->ops->host_alloc(be, bytes, PL_MEMORY_PINNED, &d->mirror, &kind,
                                 &node);
        if (rc == 0 && kind == HOSTMEM_PINNED)
            d->mirror_locked = bytes; /* counted once in the table */
    }
    if (rc == PL_ENOMEM)
        return err_set(rc, "out of memory for a %zu-byte device buffer", bytes);
    d->state = DBUF_FREE;
    return rc;
}

/* The normalisation table, once, into device memory. */
static int upload_lut(handoff *h)
{
    backend *be = h->cfg.be;
    be_stream *s = h->bufs[0]->stream;
    size_t bytes;
    const void *lut = output_lut(h->cfg.out, &bytes);
    int rc = be->ops->dev_alloc(be, bytes, &h->lut_dev);
    if (rc == 0)
        rc = be->ops->copy(be, s, h->lut_dev, lut, bytes, HOSTMEM_PAGEABLE);
    if (rc == 0)
        rc = be->ops->sync(be, s); /* the host table may go away */
    return rc;
}

int handoff_put_extras(handoff *h, dbuf *d, int i, const fileio_buf *src)
{
    assert(d->state == DBUF_FILLING);
    for (int k = 0; k < h->cfg.nextras; k++) {
        uint64_t *off = d->extra_off[k];
        const size_t at = (size_t)off[i], len = src[k].len;
        if (grow(&d->extra_data[k], &d->extra_cap[k], at + len + 1, 1, 4096) <
            0)
            return err_set(PL_ENOMEM,
                           "out of memory for a batch's %s extras (%zu bytes)",
                           h->cfg.extra_names[k], at + len);
        if (len)
            memcpy(d->extra_data[k] + at, src[k].data, len);
        off[i + 1] = at + len;
        d->extras[k].data = d->extra_data[k];
    }
    return 0;
}

/* 1 if the buffer is still in use after `ms` and was left allocated. */
static int fini_buffer(handoff *h, dbuf *d, int ms)
{
    backend *be = h->cfg.be;
    if (d->stream) {
        /* The caller's kernels reading the batch it released last may
         * still run: the stream waits for them, and the host for the
         * stream (its copies and their callbacks) before anything is
         * freed; for `ms` at most: past that, nothing of the buffer is
         * freed under them, it is left allocated instead. */
        be->ops->wait_released(be, d->stream);
        if (be->ops->drain(be, d->stream, ms) == 1)
            return 1;
        be->ops->stream_destroy(be, d->stream);
    }
    if (d->dev)
        be->ops->dev_free(be, d->dev);
    if (d->staging)
        be->ops->dev_free(be, d->staging);
    if (d->mirror)
        be->ops->host_free(be, d->mirror,
                           h->cfg.out->sample_bytes * (size_t)h->cfg.batch_size,
                           HOSTMEM_PINNED);
    free(d->labels);
    free(d->soft);
    free(d->indices);
    free(d->status);
    for (int k = 0; k < PL_EXTRAS_MAX; k++) {
        free(d->extra_data[k]);
        free(d->extra_off[k]);
    }
    memset(d, 0, sizeof *d);
    return 0;
}

/* The table holds at least `want` buffers (and the queue as many ids),
 * the queue kept in order. h->mu held, or before the copy engine starts. */
static int reserve(handoff *h, int want)
{
    if (want <= h->cap)
        return 0;
    int cap = h->cap ? h->cap : 4;
    while (cap < want)
        cap *= 2;
    dbuf **bufs = realloc(h->bufs, (size_t)cap * sizeof *bufs);
    if (!bufs)
        return PL_ENOMEM;
    h->bufs = bufs;
    int *queue = malloc((size_t)cap * sizeof *queue);
    if (!queue)
        return PL_ENOMEM;
    for (int k = 0; k < h->qlen; k++)
        queue[k] = h->queue[(h->qhead + k) % h->cap];
    free(h->queue);
    h->queue = queue;
    h->qhead = 0;
    h->cap = cap;
    return 0;
}

/* A new buffer with its memory and stream, not yet in the table. */
static int new_buffer(handoff *h, dbuf **out)
{
    dbuf *d = calloc(1, sizeof *d);
    int rc = d ? init_buffer(h, d) : err_set(PL_ENOMEM, "out of memory");
    if (rc < 0 && d) {
        fini_buffer(h, d, -1);
        free(d);
    }
    *out = rc < 0 ? NULL : d;
    return rc;
}

int handoff_init(handoff *h, const handoff_config *cfg)
{
    memset(h, 0, sizeof *h);
    h->cfg = *cfg;
    const resume_point *r = &cfg->start;
    h->user_epoch = r->epoch;
    h->at_epoch = r->epoch;
    h->at_batch = r->batch;
    h->at_pos = r->position;
    h->epochs_done = r->done;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->user_cv, NULL);
    pthread_cond_init(&h->pf_cv, NULL);
    if (reserve(h, cfg->nbufs) < 0)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    for (int i = 0; i < cfg->nbufs; i++) {
        dbuf *d;
        const int rc = new_buffer(h, &d);
        if (rc < 0) {
            char why[512]; /* the detail is about to be rewritten */
            snprintf(why, sizeof why, "%s", pl_last_error());
            return err_set(rc, "pl_loader_create: %s", why);
        }
        d->id = h->nbufs;
        h->bufs[h->nbufs++] = d;
        h->mirror_bytes_locked += d->mirror_locked;
    }
    return cfg->out->gpu_normalize ? upload_lut(h) : 0;
}

int handoff_fini(handoff *h, int ms)
{
    const uint64_t end =
        clock_now_ns() + (uint64_t)(ms < 0 ? 0 : ms) * 1000000u;
    int busy = 0;
    for (int i = 0; i < h->nbufs; i++) {
        const uint64_t now = clock_now_ns();
        const int left = ms < 0       ? -1
                         : now >= end ? 0
                                      : (int)((end - now) / 1000000u);
        const int in_use = fini_buffer(h, h->bufs[i], left);
        if (!in_use)
            free(h->bufs[i]); /* else left allocated, its stream too */
        busy += in_use;
    }
    /* Every stream is idle now: no kernel reads the table any more. */
    if (h->lut_dev && !busy)
        h->cfg.be->ops->dev_free(h->cfg.be, h->lut_dev);
    free(h->bufs);
    free(h->queue);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->user_cv);
    pthread_cond_destroy(&h->pf_cv);
    memset(h, 0, sizeof *h);
    return busy;
}

const void *handoff_lut(const handoff *h)
{
    return h->lut_dev;
}

/* Buffer i's stream, or NULL past the last buffer. The table may grow
 * meanwhile, but a stream lives until fini: it is used without the lock,
 * which no backend call is made under. */
static be_stream *stream_at(handoff *h, int i)
{
    pthread_mutex_lock(&h->mu);
    be_stream *s = i < h->nbufs ? h->bufs[i]->stream : NULL;
    pthread_mutex_unlock(&h->mu);
    return s;
}

int handoff_check_streams(handoff *h)
{
    backend *be = h->cfg.be;
    be_stream *s;
    for (int i = 0; (s = stream_at(h, i)); i++)
        if (be->ops->query(be, s) < 0)
            return handoff_fail(h, PL_ECUDA, "%s", pl_last_error());
    return 0;
}

void handoff_copy_time(handoff *h, uint64_t *ns, uint64_t *bytes)
{
    be_stream *s;
    for (int i = 0; (s = stream_at(h, i)); i++)
        h->cfg.be->ops->copy_time(h->cfg.be, s, ns, bytes);
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

/* The caller holds every buffer and waits: one more, on the copy
 * engine's thread (where the device is bound), made without the lock
 * (device allocations take milliseconds). h->mu held; NULL if it could
 * not be had, with h->grow_msg saying why. *first: the pool's first
 * growth, for the caller to say once it has let go of the lock. */
static dbuf *add_buffer(handoff *h, int *first)
{
    const int n = h->nbufs;
    pthread_mutex_unlock(&h->mu);
    dbuf *d;
    new_buffer(h, &d);
    char why[sizeof h->grow_msg];
    snprintf(why, sizeof why, "%s", d ? "" : pl_last_error());
    pthread_mutex_lock(&h->mu);
    if (d && reserve(h, h->nbufs + 1) < 0) {
        fini_buffer(h, d, -1);
        free(d);
        d = NULL;
        snprintf(why, sizeof why, "out of memory");
    }
    if (!d) {
        h->grow_failed = 1;
        snprintf(h->grow_msg, sizeof h->grow_msg, "%s", why);
        return NULL;
    }
    d->id = h->nbufs;
    h->bufs[h->nbufs++] = d;
    h->mirror_bytes_locked += d->mirror_locked;
    *first = n == h->cfg.nbufs;
    return d;
}

/* The notice of the pool's first growth: without h->mu, as every log
 * call (the user's callback may call back into the loader). */
static void say_grown(handoff *h)
{
    if (!h->cfg.log)
        return;
    const size_t bytes = h->cfg.out->sample_bytes * (size_t)h->cfg.batch_size;
    char bound[64] = "no bound but memory";
    if (h->cfg.max_bufs != INT_MAX)
        snprintf(bound, sizeof bound, "at most %d", h->cfg.max_bufs);
    log_msg(h->cfg.log, PL_LOG_NOTICE,
            "the caller holds all %d batches and asks for another: a device "
            "buffer of %zu bytes is added for each batch kept "
            "(config.max_device_buffers: %s); said once",
            h->cfg.nbufs, bytes, bound);
}

dbuf *handoff_acquire(handoff *h)
{
    dbuf *d = NULL;
    int first = 0;
    pthread_mutex_lock(&h->mu);
    while (!h->stop && !d) {
        for (int k = 0; k < h->nbufs && !d; k++) {
            const int i = (h->next_free + k) % h->nbufs;
            if (h->bufs[i]->state == DBUF_FREE) {
                d = h->bufs[i];
                h->next_free = (i + 1) % h->nbufs;
                h->grow = 0; /* a release came first: it is the batch */
            }
        }
        if (!d && h->grow) {
            h->grow = 0;
            d = add_buffer(h, &first);
            pthread_cond_broadcast(&h->user_cv); /* a failure is EBUSY */
            if (!d)
                continue; /* wait for a release */
        }
        if (d) {
            d->state = DBUF_FILLING;
            break;
        }
        if (h->stop)
            break;
        h->wants_buffer = 1;
        pthread_cond_broadcast(&h->user_cv); /* lets next() ask for more */
        const uint64_t t0 = clock_now_ns();
        pthread_cond_wait(&h->pf_cv, &h->mu);
        add(&h->ns_buffer_wait, clock_now_ns() - t0);
        h->wants_buffer = 0;
    }
    pthread_mutex_unlock(&h->mu);
    if (first)
        say_grown(h);
    return d;
}

void handoff_queue(handoff *h, dbuf *d)
{
    pthread_mutex_lock(&h->mu);
    d->state = DBUF_QUEUED;
    h->queue[(h->qhead + h->qlen++) % h->cap] = d->id;
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
    s->ns_buffer_wait = atomic_load(&h->ns_buffer_wait);
    pthread_mutex_lock((pthread_mutex_t *)&h->mu);
    s->mirror_bytes_locked = h->mirror_bytes_locked;
    s->buffers = h->nbufs;
    pthread_mutex_unlock((pthread_mutex_t *)&h->mu);
}

/* The head of the queue goes to the caller. h->mu held. */
static const pl_batch *pop(handoff *h)
{
    dbuf *d = h->bufs[h->queue[h->qhead]];
    h->qhead = (h->qhead + 1) % h->cap;
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
            h->bufs[h->queue[h->qhead]]->batch.epoch == h->user_epoch) {
            *out = pop(h);
            rc = 0;
            break;
        }
        if (h->epochs_done > h->user_epoch - h->cfg.start.epoch) {
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
        if (h->held == h->nbufs && h->wants_buffer) {
            /* Every buffer is the caller's: one more, or PL_EBUSY. */
            if (h->nbufs < h->cfg.max_bufs && !h->grow_failed) {
                h->grow = 1;
                pthread_cond_broadcast(&h->pf_cv);
                pthread_cond_wait(&h->user_cv, &h->mu);
                continue;
            }
            if (h->grow_failed) {
                h->grow_failed = 0; /* a later call may try again */
                rc = err_set(PL_EBUSY,
                             "pl_loader_next: the caller holds all %d "
                             "batches, and another device buffer cannot be "
                             "had (%s); release one first",
                             h->nbufs, h->grow_msg);
            } else
                rc = err_set(PL_EBUSY,
                             "pl_loader_next: the caller holds all %d "
                             "batches (%s); release one first",
                             h->nbufs,
                             h->cfg.max_bufs > h->cfg.nbufs
                                 ? "config.max_device_buffers"
                                 : "config.device_buffers; "
                                   "config.max_device_buffers lets the "
                                   "pool grow");
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
 * all the same. That is a success: the batch is released, correctly, at
 * the cost of the host's wait; the first time a loader does it, a notice
 * says why and what to do (a stream of another context or device, whose
 * work CUDA events cannot order). If even the wait fails, *next becomes
 * RETIRED: the buffer is never refilled, and the loader stops with the
 * error. */
static int release_on_host(handoff *h, struct CUstream_st *stream,
                           dbuf_state *next)
{
    char why[512];
    snprintf(why, sizeof why, "%s", pl_last_error());
    backend *be = h->cfg.be;
    if (be->ops->sync_user(be, stream) == 0) {
        if (!atomic_exchange(&h->told_host_release, 1))
            log_msg(be->log, PL_LOG_NOTICE,
                    "pl_loader_release: %s; the host waited for the "
                    "caller's stream instead, and released the batch (a "
                    "stream of another CUDA context or device cannot be "
                    "ordered on the GPU: release on a stream of the "
                    "loader's device to keep the host free; said once)",
                    why);
        return 0;
    }
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

int handoff_release(handoff *h, const pl_batch *b,
                    struct CUstream_st *const *streams, int n)
{
    dbuf *d = NULL;
    int held = 0;
    pthread_mutex_lock(&h->mu);
    /* b is compared, never followed, until it is known to be ours. */
    for (int i = 0; i < h->nbufs && !d; i++)
        if (&h->bufs[i]->batch == b)
            d = h->bufs[i];
    if (d && (held = d->state == DBUF_HELD))
        d->state = DBUF_RELEASING;
    pthread_mutex_unlock(&h->mu);
    if (!d)
        return err_set(PL_EINVAL, "pl_loader_release: not a batch of this "
                                  "loader");
    /* A release recorded into a caller's CUDA graph capture would happen
     * at each replay, never now, and the copy engine's wait for it would
     * break the capture: refused, and the batch stays the caller's. */
    for (int i = 0; held && i < n; i++)
        if (h->cfg.be->ops->capturing(h->cfg.be, streams[i])) {
            pthread_mutex_lock(&h->mu);
            d->state = DBUF_HELD;
            pthread_mutex_unlock(&h->mu);
            return err_set(PL_EINVAL,
                           "pl_loader_release: stream %d of %d is "
                           "capturing a CUDA graph, whose replays cannot "
                           "release this one batch: release it on a stream "
                           "outside the capture; the batch is still held",
                           i + 1, n);
        }
    /* Not d->batch's fields: the copy engine may be refilling it. */
    if (!held)
        return err_set(PL_EINVAL, "pl_loader_release: that batch is not held "
                                  "(released twice?)");
    /* Without the lock: the fallback waits for the caller's stream. */
    backend *be = h->cfg.be;
    dbuf_state next = DBUF_FREE;
    int rc = 0;
    for (int i = 0; i < n && next == DBUF_FREE; i++) {
        int r = be->ops->record_release(be, d->stream, i, streams[i]);
        if (r < 0)
            r = release_on_host(h, streams[i], &next);
        if (r < 0 && rc == 0)
            rc = r;
    }
    pthread_mutex_lock(&h->mu);
    d->state = next;
    h->held--;
    pthread_cond_broadcast(&h->pf_cv);
    pthread_mutex_unlock(&h->mu);
    return rc;
}
