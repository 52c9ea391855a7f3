#include "ring.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/clock.h"
#include "../common/error.h"
#include "pinload.h"

/* Slot s takes the next nominal batch; returns 0 (s left FREE) when the
 * ring must wait to know what that is. */
static int setup_next(ring *r, ring_slot *s)
{
    nominal_batch nb;
    if (!schedule_next(&r->sched, &nb))
        return 0;
    s->epoch = nb.epoch;
    s->batch = nb.batch;
    s->first = nb.first;
    s->count = s->pending = nb.count;
    s->claimed = 0;
    s->copies = 0;
    s->no_good = nb.no_good;
    if (nb.no_good) { /* ends the pipeline: READY at once, no position */
        s->state = SLOT_READY;
        r->claim_seq++;
        pthread_cond_broadcast(&r->ready_cv);
        return 1;
    }
    s->state = SLOT_FILLING;
    return 1;
}

static int alloc_ring(ring *r, backend *be, pl_memory memory,
                      int pinned_fallback, logger *lg)
{
    int rc = be->ops->host_alloc(be, r->mem_bytes, memory, (void **)&r->mem,
                                 &r->kind, &r->node);
    if (rc < 0 && memory == PL_MEMORY_PINNED && pinned_fallback) {
        log_msg(lg, PL_LOG_NOTICE, "%s: the host ring is pageable instead",
                pl_last_error());
        rc = be->ops->host_alloc(be, r->mem_bytes, PL_MEMORY_PAGEABLE,
                                 (void **)&r->mem, &r->kind, &r->node);
    }
    return rc;
}

int ring_init(ring *r, int nslots, const schedule_config *sched,
              size_t sample_bytes, backend *be, pl_memory memory,
              int pinned_fallback, logger *lg)
{
    memset(r, 0, sizeof *r);
    r->node = -1;
    r->nslots = nslots;
    r->active = INT_MAX;
    schedule_init(&r->sched, sched);
    r->sample_bytes = sample_bytes;
    r->be = be;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->work_cv, NULL);
    pthread_condattr_t ca; /* ready waits time out on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->ready_cv, &ca);
    pthread_condattr_destroy(&ca);

    const size_t batch_bytes = sample_bytes * (size_t)sched->batch_size;
    r->mem_bytes = batch_bytes * (size_t)nslots;
    const int rc = alloc_ring(r, be, memory, pinned_fallback, lg);
    if (rc < 0)
        return rc;
    r->slots = calloc((size_t)nslots, sizeof *r->slots);
    if (!r->slots)
        return err_set(PL_ENOMEM, "out of memory for the slot table");
    for (int i = 0; i < nslots; i++) {
        ring_slot *s = &r->slots[i];
        s->ring = r;
        s->seq = (uint64_t)i;
        s->state = SLOT_FREE;
        s->pixels = r->mem + batch_bytes * (size_t)i;
        s->pos = calloc((size_t)sched->batch_size, sizeof *s->pos);
        if (!s->pos)
            return err_set(PL_ENOMEM, "out of memory for the slot table");
    }
    return 0;
}

int ring_add_extras(ring *r, int nextras)
{
    const size_t n = (size_t)r->sched.cfg.batch_size * (size_t)nextras;
    r->nextras = nextras;
    for (int i = 0; i < r->nslots; i++)
        if (!(r->slots[i].extras = calloc(n, sizeof *r->slots[i].extras)))
            return err_set(PL_ENOMEM, "out of memory for the extras' table");
    return 0;
}

int ring_add_device(ring *r)
{
    const size_t batch = r->sample_bytes * (size_t)r->sched.cfg.batch_size;
    r->dev_bytes = batch * (size_t)r->nslots;
    const int rc =
        r->be->ops->dev_alloc(r->be, r->dev_bytes, (void **)&r->dev_mem);
    if (rc < 0) {
        r->dev_mem = NULL;
        r->dev_bytes = 0;
        return rc;
    }
    for (int i = 0; i < r->nslots; i++)
        r->slots[i].dev = r->dev_mem + batch * (size_t)i;
    return 0;
}

void ring_fini(ring *r)
{
    const size_t per_slot =
        (size_t)r->sched.cfg.batch_size * (size_t)r->nextras;
    for (int i = 0; r->slots && i < r->nslots; i++) {
        for (size_t j = 0; r->slots[i].extras && j < per_slot; j++)
            fileio_buf_free(&r->slots[i].extras[j]);
        free(r->slots[i].extras);
        free(r->slots[i].pos);
    }
    free(r->slots);
    if (r->mem)
        r->be->ops->host_free(r->be, r->mem, r->mem_bytes, r->kind);
    if (r->dev_mem)
        r->be->ops->dev_free(r->be, r->dev_mem);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->work_cv);
    pthread_cond_destroy(&r->ready_cv);
    memset(r, 0, sizeof *r);
}

int ring_claim(ring *r, int worker, ring_slot **slot, int *pos)
{
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->stop) {
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
        if (worker >= r->active) { /* asleep: not a wait for a slot */
            pthread_cond_wait(&r->work_cv, &r->mu);
            continue;
        }
        ring_slot *s = &r->slots[r->claim_seq % (uint64_t)r->nslots];
        if (s->seq == r->claim_seq && s->state == SLOT_FREE && !r->sched.dead)
            setup_next(r, s);
        if (s->seq == r->claim_seq && s->state == SLOT_FILLING &&
            s->claimed < s->count) {
            *slot = s;
            *pos = s->claimed++;
            schedule_claimed(&r->sched);
            if (s->claimed == s->count)
                r->claim_seq++;
            pthread_mutex_unlock(&r->mu);
            return 1;
        }
        const uint64_t t0 = clock_now_ns();
        pthread_cond_wait(&r->work_cv, &r->mu);
        r->ns_slot_wait += clock_now_ns() - t0;
    }
}

void ring_finish(ring *r, ring_slot *slot, int good)
{
    pthread_mutex_lock(&r->mu);
    assert(slot->state == SLOT_FILLING && slot->pending > 0);
    if (schedule_finished(&r->sched, slot->epoch, good))
        pthread_cond_broadcast(&r->work_cv); /* a top-up can be planned */
    if (--slot->pending == 0) {
        slot->state = SLOT_READY;
        pthread_cond_broadcast(&r->ready_cv);
    }
    pthread_mutex_unlock(&r->mu);
}

ring_slot *ring_wait_ready_for(ring *r, uint64_t seq, uint64_t timeout_ns,
                               int *idle)
{
    ring_slot *s = &r->slots[seq % (uint64_t)r->nslots];
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    const uint64_t ns = (uint64_t)until.tv_nsec + timeout_ns;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    int timed_out = 0;
    pthread_mutex_lock(&r->mu);
    while (!r->stop && !(s->seq == seq && s->state == SLOT_READY) &&
           !timed_out) {
        if (timeout_ns)
            timed_out = pthread_cond_timedwait(&r->ready_cv, &r->mu, &until) ==
                        ETIMEDOUT;
        else
            pthread_cond_wait(&r->ready_cv, &r->mu);
    }
    const int stopped = r->stop;
    if (stopped || timed_out)
        s = NULL;
    else
        s->state = SLOT_COPYING;
    pthread_mutex_unlock(&r->mu);
    if (idle)
        *idle = !stopped && timed_out;
    return s;
}

ring_slot *ring_wait_ready(ring *r, uint64_t seq)
{
    return ring_wait_ready_for(r, seq, 0, NULL);
}

void ring_add_copies(ring *r, ring_slot *slot, int n)
{
    pthread_mutex_lock(&r->mu);
    assert(slot->state == SLOT_COPYING);
    slot->copies += n;
    pthread_mutex_unlock(&r->mu);
}

void ring_copy_done(void *arg)
{
    ring_slot *s = arg;
    ring *r = s->ring;
    pthread_mutex_lock(&r->mu);
    assert(s->state == SLOT_COPYING && s->copies > 0);
    if (--s->copies == 0) {
        s->state = SLOT_FREE;
        s->seq += (uint64_t)r->nslots;
        pthread_cond_broadcast(&r->work_cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void ring_set_active(ring *r, int n)
{
    pthread_mutex_lock(&r->mu);
    r->active = n < 1 ? 1 : n;
    pthread_cond_broadcast(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
}

void ring_stop(ring *r)
{
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->work_cv);
    pthread_cond_broadcast(&r->ready_cv);
    pthread_mutex_unlock(&r->mu);
}

void ring_get_stats(const ring *r, ring_stats *s)
{
    s->mem_bytes = r->mem_bytes;
    s->kind = r->kind;
    s->node = r->node;
    s->pinned_bytes = r->kind == HOSTMEM_PINNED ? r->mem_bytes : 0;
    pthread_mutex_lock((pthread_mutex_t *)&r->mu);
    s->ns_slot_wait = r->ns_slot_wait;
    pthread_mutex_unlock((pthread_mutex_t *)&r->mu);
}
