#include "copier.h"

#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/error.h"

#define STOPPED 1 /* internal: the loader is being destroyed */

/* How long the prefetcher waits for the workers before it checks that the
 * copies it has in flight can still complete (a device that broke under
 * them never calls their callbacks back). */
#define HEALTH_CHECK_NS 100000000u /* 100 ms */

/* The prefetcher thread's own state while it assembles a batch. */
typedef struct fill {
    dbuf *cur;         /* buffer being filled, or NULL */
    int count;         /* samples in it */
    int64_t epoch;     /* the epoch being assembled */
    int64_t delivered; /* its batches queued */
    int64_t placed;    /* its samples placed in batches */
    int64_t next_pos;  /* its position after the last sample placed */
    /* The open run: slot positions [run_src, run_src + run_len) go to
     * buffer positions [run_dst, ...). */
    int run_src, run_dst, run_len;
    int run_dev;   /* the run's samples are in the slot's device memory */
    dbuf *used[2]; /* buffers whose streams copy from the current slot */
    int nused;
} fill;

static void add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* ---- the prefetcher thread ---- */

static int open_buffer(copier *p, fill *f)
{
    backend *be = p->cfg.be;
    dbuf *d = handoff_acquire(p->cfg.ho);
    if (!d)
        return STOPPED;
    /* Copies into d wait, on the GPU, for the caller's kernels that read
     * its previous batch. The host mirror is overwritten by the host: its
     * previous upload must be done, and so must the caller's work queued
     * before the release, which may read b->host (an upload of its own,
     * say), so the host waits for both. */
    int rc = be->ops->wait_released(be, d->stream);
    if (rc == 0 && d->mirror)
        rc = be->ops->sync_released(be, d->stream);
    if (rc == 0 && d->mirror)
        rc = be->ops->sync_ready(be, d->stream);
    if (rc < 0)
        return handoff_fail(p->cfg.ho, rc, "%s", pl_last_error());
    f->cur = d;
    f->count = 0;
    return 0;
}

static void note_stream(fill *f, dbuf *d)
{
    for (int i = 0; i < f->nused; i++)
        if (f->used[i] == d)
            return;
    assert(f->nused < 2); /* one slot's samples span at most two batches */
    f->used[f->nused++] = d;
}

/* A run the GPU decoded: the buffer's stream waits for the event of each
 * worker that decoded a sample of it (each worker's last sample of the
 * slot), then copies it on the device. */
static int copy_decoded(copier *p, fill *f, const ring_slot *s, uint8_t *dst,
                        size_t bytes)
{
    backend *be = p->cfg.be;
    const size_t sb = p->cfg.out->ring_sample_bytes;
    const int slot = (int)(s - p->cfg.ring->slots);
    assert(!f->cur->mirror); /* keep_host never decodes on the GPU */
    memset(p->waited, 0, (size_t)p->cfg.workers);
    int rc = 0;
    for (int i = f->run_src; i < f->run_src + f->run_len && rc == 0; i++) {
        const int w = s->pos[i].worker;
        assert(s->pos[i].on_device && w >= 0 && w < p->cfg.workers);
        if (p->waited[w])
            continue;
        p->waited[w] = 1;
        rc = be->ops->wait_event(be, f->cur->stream,
                                 p->cfg.gpu->ops->decoded(p->cfg.gpu, w, slot));
    }
    if (rc == 0)
        rc = be->ops->copy_device(be, f->cur->stream, dst,
                                  s->dev + sb * (size_t)f->run_src, bytes);
    return rc;
}

/* A run of config.views' samples: each view's part, from the slot's
 * region of it to the buffer's (into the mirror, or issued to the
 * device). */
static int copy_views(copier *p, fill *f, const ring_slot *s)
{
    backend *be = p->cfg.be;
    const output_plan *o = p->cfg.out;
    const int n = p->cfg.batch_size;
    int rc = 0;
    for (int v = 0; v < o->nviews && rc == 0; v++) {
        const uint8_t *src = s->pixels + output_view_at(o, v, f->run_src, n);
        const size_t off = output_view_at(o, v, f->run_dst, n);
        const size_t bytes = o->view_bytes[v] * (size_t)f->run_len;
        if (f->cur->mirror)
            memcpy((uint8_t *)f->cur->mirror + off, src, bytes);
        else
            rc = be->ops->copy(be, f->cur->stream, (uint8_t *)f->cur->dev + off,
                               src, bytes, p->cfg.ring->kind);
    }
    if (!f->cur->mirror)
        note_stream(f, f->cur);
    return rc;
}

static int close_run(copier *p, fill *f, const ring_slot *s)
{
    if (f->run_len == 0)
        return 0;
    backend *be = p->cfg.be;
    const size_t sb = p->cfg.out->ring_sample_bytes;
    const size_t bytes = sb * (size_t)f->run_len;
    const uint8_t *src = s->pixels + sb * (size_t)f->run_src;
    const size_t off = sb * (size_t)f->run_dst;
    const uint64_t t0 = clock_now_ns();
    int rc = 0;
    if (p->cfg.out->nviews) {
        rc = copy_views(p, f, s);
    } else if (f->run_dev) {
        uint8_t *dst =
            p->cfg.out->gpu_normalize ? f->cur->staging : f->cur->dev;
        rc = copy_decoded(p, f, s, dst + off, bytes);
        note_stream(f, f->cur);
    } else if (f->cur->mirror) {
        memcpy((uint8_t *)f->cur->mirror + off, src, bytes);
    } else {
        /* Straight into the batch, or into its uint8 staging area when the
         * GPU normalises. */
        uint8_t *dst =
            p->cfg.out->gpu_normalize ? f->cur->staging : f->cur->dev;
        rc = be->ops->copy(be, f->cur->stream, dst + off, src, bytes,
                           p->cfg.ring->kind);
        note_stream(f, f->cur);
    }
    add(&p->ns_copy, clock_now_ns() - t0);
    f->run_len = 0;
    if (rc < 0)
        return handoff_fail(p->cfg.ho, rc, "%s", pl_last_error());
    if (!f->cur->mirror)
        add(&p->bytes_copied, bytes);
    return 0;
}

/* Whether the batch op mixes d on the device (the backend's kernel, on
 * the copy stream after the copies), rather than in host memory. */
static int mix_on_device(const copier *p, const dbuf *d)
{
    return p->cfg.out->batch_op && p->cfg.be->ops->mix && !d->mirror;
}

/* The batch op (mixup) on the assembled batch: its draw and soft labels,
 * and its pixels in host memory (the mirror, or the device buffer on the
 * host backend: its copies into the buffer are done, a host backend's
 * copy being a memcpy and a mirror filled by memcpy), or queued on the
 * copy stream for the device's kernel. */
static int mix_batch(copier *p, fill *f, dbuf *d)
{
    const output_plan *o = p->cfg.out;
    const int on_device = mix_on_device(p, d);
    op_batch b = {
        .data = d->mirror ? d->mirror : d->dev,
        .pixels_elsewhere = on_device,
        .format = o->format,
        .count = f->count,
        .w = o->width,
        .h = o->height,
        .channels_last = o->aug.channels_last,
        .sample_bytes = o->sample_bytes,
        .labels = d->labels,
        .soft = d->soft,
        .num_classes = o->num_classes,
    };
    ops_batch(&o->aug.ops, o->aug.seed, f->epoch, f->delivered, &b);
    if (!on_device || !b.mixed)
        return 0;
    backend *be = p->cfg.be;
    return be->ops->mix(be, d->stream, &b.mix);
}

static int queue_batch(copier *p, fill *f)
{
    backend *be = p->cfg.be;
    dbuf *d = f->cur;
    const size_t bytes = p->cfg.out->ring_sample_bytes * (size_t)f->count;
    int rc = 0;
    const output_plan *o = p->cfg.out;
    /* In host memory before the copy, or on the device after it (and
     * after the GPU's normalising: the floats are mixed). */
    if (o->batch_op && !mix_on_device(p, d))
        rc = mix_batch(p, f, d);
    if (rc == 0 && d->mirror) {
        const uint64_t t0 = clock_now_ns();
        if (!o->nviews)
            rc = be->ops->copy(be, d->stream, d->dev, d->mirror, bytes,
                               HOSTMEM_PINNED);
        for (int v = 0; v < o->nviews && rc == 0; v++) {
            const size_t off = output_view_at(o, v, 0, p->cfg.batch_size);
            rc = be->ops->copy(be, d->stream, (uint8_t *)d->dev + off,
                               (uint8_t *)d->mirror + off,
                               o->view_bytes[v] * (size_t)f->count,
                               HOSTMEM_PINNED);
        }
        add(&p->ns_copy, clock_now_ns() - t0);
        add(&p->bytes_copied, bytes);
    }
    if (rc == 0 && p->cfg.out->gpu_normalize)
        rc = be->ops->normalize(be, d->stream, d->dev, d->staging, d->status,
                                f->count, p->cfg.out->width, p->cfg.out->height,
                                p->cfg.out->format == PL_FORMAT_F16_NCHW ||
                                    p->cfg.out->format == PL_FORMAT_BF16_NCHW,
                                p->cfg.out->aug.channels_last,
                                handoff_lut(p->cfg.ho));
    if (rc == 0 && o->batch_op && mix_on_device(p, d))
        rc = mix_batch(p, f, d);
    if (rc == 0)
        rc = be->ops->record_ready(be, d->stream);
    if (rc < 0)
        return handoff_fail(p->cfg.ho, rc, "%s", pl_last_error());
    d->next_pos = f->next_pos;
    d->batch = (pl_batch){
        .count = f->count,
        .epoch = f->epoch,
        .index = f->delivered,
        .bytes = p->cfg.out->sample_bytes * (size_t)f->count,
        .data = d->dev,
        .host = be->host_visible ? d->dev : d->mirror,
        .labels = d->labels,
        .indices = d->indices,
        .status = d->status,
        .ready = be->ops->ready_event(d->stream),
        .num_extras = p->cfg.ho->cfg.nextras,
        .extras = p->cfg.ho->cfg.nextras ? d->extras : NULL,
        .soft_labels = p->cfg.out->batch_op ? d->soft : NULL,
        .num_classes = p->cfg.out->batch_op ? p->cfg.out->num_classes : 0,
    };
    if (o->nviews) {
        uint8_t *host = (uint8_t *)(be->host_visible ? d->dev : d->mirror);
        for (int v = 0; v < o->nviews; v++) {
            const size_t off = output_view_at(o, v, 0, p->cfg.batch_size);
            d->views[v] = (pl_view){
                .data = (uint8_t *)d->dev + off,
                .host = host ? host + off : NULL,
                .bytes = o->view_bytes[v] * (size_t)f->count,
                .sample_bytes = o->view_bytes[v],
                .width = o->views[v].out_w,
                .height = o->views[v].out_h,
            };
        }
        d->batch.bytes = d->views[0].bytes;
        d->batch.num_views = o->nviews;
        d->batch.views = d->views;
    }
    handoff_queue(p->cfg.ho, d);
    f->cur = NULL;
    f->count = 0;
    f->delivered++;
    return 0;
}

static int fail_on_sample(copier *p, const ring_pos *pos)
{
    char reason[512] = "reason not recorded (out of memory)";
    int code;
    failures_find(p->cfg.fails, pos->index, &code, reason, sizeof reason);
    char name[CATALOG_NAME_MAX];
    return handoff_fail(
        p->cfg.ho, pos->status, "pl_loader_next: %s: %s",
        catalog_name_into(p->cfg.cat, pos->index, name, sizeof name), reason);
}

/* Whether position pos goes into a batch: good samples do, and bad ones
 * too under SUBSTITUTE (as zeros). */
static int wanted(const copier *p, const ring_pos *pos)
{
    return pos->status == 0 || p->cfg.on_error == PL_ON_ERROR_SUBSTITUTE;
}

static int add_position(copier *p, fill *f, const ring_slot *s, int i)
{
    int rc = 0;
    if (!f->cur && (rc = open_buffer(p, f)) != 0)
        return rc;
    const ring_pos *pos = &s->pos[i];
    /* A run is copied from one place: host memory, or the device's. */
    if (f->run_len && f->run_dev != pos->on_device &&
        (rc = close_run(p, f, s)) != 0)
        return rc;
    if (f->run_len == 0) {
        f->run_src = i;
        f->run_dst = f->count;
        f->run_dev = pos->on_device;
    }
    f->run_len++;
    f->cur->labels[f->count] = pos->label;
    f->cur->indices[f->count] = pos->index;
    f->cur->status[f->count] = pos->status;
    if (s->ring->nextras &&
        (rc = handoff_put_extras(
             p->cfg.ho, f->cur, f->count,
             &s->extras[(size_t)i * (size_t)s->ring->nextras])) < 0)
        return handoff_fail(p->cfg.ho, rc, "pl_loader_next: %s",
                            pl_last_error());
    f->placed++;
    f->next_pos = s->first + i + 1;
    if (++f->count == p->cfg.batch_size) {
        rc = close_run(p, f, s);
        if (rc == 0)
            rc = queue_batch(p, f);
    }
    return rc;
}

/* The epoch has all its samples: its short last batch goes out (under
 * drop_last there is none), and the next epoch begins. */
static int end_epoch(copier *p, fill *f, const ring_slot *s)
{
    int rc = close_run(p, f, s);
    if (rc == 0 && f->cur && f->count > 0)
        rc = queue_batch(p, f);
    if (rc != 0)
        return rc;
    handoff_epoch_done(p->cfg.ho, f->cur); /* f->cur: opened, never filled */
    f->cur = NULL;
    f->count = 0;
    f->epoch++;
    f->delivered = f->placed = f->next_pos = 0;
    return 0;
}

/* A whole pass over the rank's order failed this epoch (every position,
 * or every one since the last good sample, whose file has gone bad since):
 * the epoch cannot be filled, and the caller must hear it rather than see
 * an empty epoch or wait for ever. */
static int no_good_sample(copier *p, const ring_slot *s)
{
    return handoff_fail(p->cfg.ho, PL_ENODATA,
                        "pl_loader_next: epoch %lld: none of the %lld samples "
                        "of this rank's order could be decoded in a whole "
                        "pass over it (%zu bad files recorded: see "
                        "pl_loader_failures)",
                        (long long)s->epoch,
                        (long long)p->cfg.ring->sched.cfg.order_len,
                        failures_count(p->cfg.fails));
}

/* Copy slot s's samples out, then hand the slot back to the workers once
 * the copies that read it have completed. */
static int take_slot(copier *p, fill *f, ring_slot *s)
{
    ring *r = p->cfg.ring;
    backend *be = p->cfg.be;
    int rc = 0;
    ring_add_copies(r, s, 1); /* our own reference, dropped below */
    f->nused = 0;
    f->run_len = 0;
    assert(s->epoch <= f->epoch);
    if (s->no_good)
        rc = no_good_sample(p, s);
    /* A slot of an epoch already complete holds only what a top-up decoded
     * beyond the need: nothing of it is delivered. */
    for (int i = 0; i < s->count && rc == 0 && s->epoch == f->epoch; i++) {
        const ring_pos *pos = &s->pos[i];
        if (wanted(p, pos)) {
            rc = add_position(p, f, s, i);
            if (rc == 0 && f->placed == p->cfg.samples_per_epoch)
                rc = end_epoch(p, f, s);
            continue;
        }
        rc = close_run(p, f, s);
        if (rc == 0 && pos->status != 0 && p->cfg.on_error == PL_ON_ERROR_FAIL)
            rc = fail_on_sample(p, pos);
    }
    if (rc == 0)
        rc = close_run(p, f, s);
    for (int i = 0; i < f->nused; i++) {
        be_stream *st = f->used[i]->stream;
        ring_add_copies(r, s, 1);
        if (be->ops->after(be, st, ring_copy_done, s) == 0)
            continue;
        rc = handoff_fail(p->cfg.ho, PL_ECUDA, "%s", pl_last_error());
        /* The copies already queued on st still read the slot: it goes back
         * to the workers once they are done, or never, if even waiting for
         * them fails (the error is sticky either way). */
        if (be->ops->sync(be, st) == 0)
            ring_copy_done(s);
    }
    ring_copy_done(s);
    return rc;
}

/* The workers are slow, or cannot go on because a slot never came back: a
 * device that broke under a copy never runs its callback. Then the copy
 * streams say so, and the caller gets the error instead of waiting for a
 * batch that cannot come. */
static void *copier_main(void *arg)
{
    copier *p = arg;
    backend *be = p->cfg.be;
    const resume_point *r = &p->cfg.start;
    fill f = {.epoch = r->epoch};
    if (r->done) /* resumed after an epoch's last batch */
        f.epoch++;
    else {
        f.delivered = r->batch;
        f.placed = r->batch * p->cfg.batch_size;
        f.next_pos = r->position;
    }
    if (be->ops->bind_thread(be) < 0) {
        handoff_fail(p->cfg.ho, PL_ECUDA, "%s", pl_last_error());
        return NULL;
    }
    for (uint64_t seq = 0;;) {
        int idle;
        ring_slot *s =
            ring_wait_ready_for(p->cfg.ring, seq, HEALTH_CHECK_NS, &idle);
        if (idle)
            ring_grow(p->cfg.ring); /* prefetch PL_AUTO asked for a slot */
        if (idle && handoff_check_streams(p->cfg.ho) == 0)
            continue;
        if (!s || take_slot(p, &f, s) != 0)
            break;
        seq++;
    }
    /* A half-filled buffer goes back, so destroy finds every buffer idle. */
    if (f.cur)
        handoff_unfill(p->cfg.ho, f.cur);
    return NULL;
}

int copier_start(copier *p, const copier_config *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    if (cfg->gpu && !(p->waited = calloc((size_t)cfg->workers, 1)))
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int rc = pthread_create(&p->thread, NULL, copier_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        free(p->waited);
        p->waited = NULL;
        return err_set(PL_ETHREAD,
                       "pl_loader_create: cannot start the "
                       "prefetcher thread: %s",
                       strerror(rc));
    }
    /* The name top -H and gdb show, config.prefetch's, as before. */
    pthread_setname_np(p->thread, "pl-prefetch");
    p->started = 1;
    return 0;
}

void copier_stop(copier *p)
{
    if (p->started)
        pthread_join(p->thread, NULL);
    p->started = 0;
    free(p->waited);
    p->waited = NULL;
}

void copier_get_stats(copier *p, copier_stats *s)
{
    uint64_t dn = 0, db = 0;
    handoff_copy_time(p->cfg.ho, &dn, &db);
    s->ns_h2d = atomic_fetch_add(&p->ns_h2d, dn) + dn;
    s->bytes_h2d = atomic_fetch_add(&p->bytes_h2d, db) + db;
    s->bytes_copied = atomic_load(&p->bytes_copied);
    s->ns_copy = atomic_load(&p->ns_copy);
}
