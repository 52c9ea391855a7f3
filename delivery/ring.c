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

static pl_memory memory_of(hostmem k)
{
    return k == HOSTMEM_PINNED    ? PL_MEMORY_PINNED
           : k == HOSTMEM_MANAGED ? PL_MEMORY_MANAGED
                                  : PL_MEMORY_PAGEABLE;
}

static size_t batch_bytes_of(const ring *r)
{
    return r->sample_bytes * (size_t)r->sched.cfg.batch_size;
}

/* The slot holding (or about to hold) batch seq, or NULL: none has it
 * yet. Under mu. */
static ring_slot *slot_of(ring *r, uint64_t seq)
{
    for (int i = 0; i < r->nslots; i++)
        if (r->slots[i].seq == seq)
            return &r->slots[i];
    return NULL;
}

int ring_init(ring *r, int nslots, const schedule_config *sched,
              size_t sample_bytes, backend *be, pl_memory memory,
              int pinned_fallback, logger *lg)
{
    memset(r, 0, sizeof *r);
    r->node = -1;
    r->nslots = r->max_slots = r->want_slots = nslots;
    r->next_seq = (uint64_t)nslots;
    r->log = lg;
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

int ring_set_max(ring *r, int max_slots)
{
    if (max_slots <= r->max_slots)
        return 0;
    ring_slot *t = realloc(r->slots, (size_t)max_slots * sizeof *t);
    if (!t)
        return err_set(PL_ENOMEM, "out of memory for the slot table");
    memset(t + r->max_slots, 0,
           (size_t)(max_slots - r->max_slots) * sizeof *t);
    r->slots = t;
    r->max_slots = max_slots;
    return 0;
}

void ring_want_slots(ring *r, int n)
{
    pthread_mutex_lock(&r->mu);
    if (n > r->max_slots)
        n = r->max_slots;
    if (n > r->want_slots) {
        r->want_slots = n;
        pthread_cond_broadcast(&r->ready_cv); /* the prefetcher grows it */
    }
    pthread_mutex_unlock(&r->mu);
}

/* One more slot's memory, made outside the lock into *s (not yet in the
 * ring). */
static int make_slot(ring *r, ring_slot *s)
{
    const size_t batch = batch_bytes_of(r);
    const size_t nex = (size_t)r->sched.cfg.batch_size * (size_t)r->nextras;
    hostmem kind;
    int node;
    int rc = r->be->ops->host_alloc(r->be, batch, memory_of(r->kind),
                                    (void **)&s->pixels, &kind, &node);
    if (rc < 0)
        return rc;
    s->grown = 1;
    if (kind != r->kind) { /* the copies are issued for the ring's kind */
        r->be->ops->host_free(r->be, s->pixels, batch, kind);
        s->pixels = NULL;
        return err_set(PL_ENOMEM, "the memory had is not of the ring's kind");
    }
    if (r->dev_mem &&
        (rc = r->be->ops->dev_alloc(r->be, batch, (void **)&s->dev)) < 0)
        return rc;
    if (!(s->pos = calloc((size_t)r->sched.cfg.batch_size, sizeof *s->pos)) ||
        (nex && !(s->extras = calloc(nex, sizeof *s->extras))))
        return err_set(PL_ENOMEM, "out of memory for the slot table");
    return 0;
}

static void free_slot(ring *r, ring_slot *s)
{
    const size_t nex = (size_t)r->sched.cfg.batch_size * (size_t)r->nextras;
    for (size_t j = 0; s->extras && j < nex; j++)
        fileio_buf_free(&s->extras[j]);
    free(s->extras);
    free(s->pos);
    if (s->grown && s->pixels)
        r->be->ops->host_free(r->be, s->pixels, batch_bytes_of(r), r->kind);
    if (s->grown && s->dev)
        r->be->ops->dev_free(r->be, s->dev);
    memset(s, 0, sizeof *s);
}

int ring_grow(ring *r)
{
    pthread_mutex_lock(&r->mu);
    while (r->nslots < r->want_slots && !r->stop) {
        ring_slot s = {0};
        pthread_mutex_unlock(&r->mu);
        const int rc = make_slot(r, &s);
        pthread_mutex_lock(&r->mu);
        if (rc < 0) {
            free_slot(r, &s);
            log_msg(r->log, PL_LOG_NOTICE,
                    "prefetch PL_AUTO: the ring stays at %d slots: no "
                    "room for another %.1f MiB: %s",
                    r->nslots, (double)batch_bytes_of(r) / (1 << 20),
                    pl_last_error());
            r->max_slots = r->want_slots = r->nslots;
            break;
        }
        s.ring = r;
        s.state = SLOT_FREE;
        s.seq = r->next_seq++;
        r->slots[r->nslots++] = s;
        r->mem_bytes += batch_bytes_of(r);
        if (r->dev_mem)
            r->dev_bytes += batch_bytes_of(r);
        pthread_cond_broadcast(&r->work_cv);
    }
    const int n = r->nslots;
    pthread_mutex_unlock(&r->mu);
    return n;
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
    const size_t batch = batch_bytes_of(r);
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
    size_t first = 0; /* the one allocation's bytes: the slots not grown */
    for (int i = 0; r->slots && i < r->nslots; i++) {
        if (!r->slots[i].grown)
            first += batch_bytes_of(r);
        free_slot(r, &r->slots[i]);
    }
    free(r->slots);
    if (r->mem)
        r->be->ops->host_free(r->be, r->mem, first ? first : r->mem_bytes,
                              r->kind);
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
        ring_slot *s = slot_of(r, r->claim_seq);
        if (s && s->state == SLOT_FREE && !r->sched.dead)
            setup_next(r, s);
        if (s && s->state == SLOT_FILLING && s->claimed < s->count) {
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
    ring_slot *s = NULL;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    const uint64_t ns = (uint64_t)until.tv_nsec + timeout_ns;
    until.tv_sec += (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    int timed_out = 0;
    pthread_mutex_lock(&r->mu);
    int grow = 0;
    while (!r->stop && !((s = slot_of(r, seq)) && s->state == SLOT_READY) &&
           !timed_out && !(grow = timeout_ns && r->want_slots > r->nslots)) {
        if (timeout_ns)
            timed_out = pthread_cond_timedwait(&r->ready_cv, &r->mu, &until) ==
                        ETIMEDOUT;
        else
            pthread_cond_wait(&r->ready_cv, &r->mu);
    }
    const int stopped = r->stop;
    if (stopped || timed_out || grow)
        s = NULL;
    else
        s->state = SLOT_COPYING;
    pthread_mutex_unlock(&r->mu);
    if (idle)
        *idle = !stopped && (timed_out || grow);
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
        s->seq = r->next_seq++;
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
    s->kind = r->kind;
    s->node = r->node;
    pthread_mutex_lock((pthread_mutex_t *)&r->mu);
    s->mem_bytes = r->mem_bytes;
    s->slots = r->nslots;
    s->max_slots = r->max_slots;
    s->dev_bytes = r->dev_bytes;
    s->pinned_bytes = r->kind == HOSTMEM_PINNED ? r->mem_bytes : 0;
    s->ns_slot_wait = r->ns_slot_wait;
    pthread_mutex_unlock((pthread_mutex_t *)&r->mu);
}
