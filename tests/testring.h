/* The ring suites' fixture (tests/unit/delivery/test_ring*.c): a ring on the
 * host backend with pageable memory, opened for a schedule with or without
 * the top-up of PL_ON_ERROR_SKIP, and the threads that claim, fill, release
 * and wait on its slots. */
#ifndef PINLOAD_TESTRING_H
#define PINLOAD_TESTRING_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "../common/log.h"
#include "../device/backend.h"
#include "../delivery/ring.h"
#include "testutil.h"

typedef struct fixture {
    logger lg;
    backend *be;
    ring r;
} fixture;

static inline void fx_open(fixture *f, int nslots, int64_t first_epoch,
                           int64_t positions, int batch_size,
                           size_t sample_bytes)
{
    logger_init(&f->lg, NULL, NULL);
    cr_assert_eq(backend_host_open(&f->be, &f->lg, "test"), 0);
    const schedule_config sched = {.positions = positions,
                                   .batch_size = batch_size,
                                   .order_len = positions,
                                   .start = {.epoch = first_epoch}};
    cr_assert_eq(ring_init(&f->r, nslots, &sched, sample_bytes, f->be,
                           PL_MEMORY_PAGEABLE, 1, &f->lg),
                 0);
}

/* A ring under PL_ON_ERROR_SKIP: each epoch must deliver `target` good
 * samples out of an order of order_len positions; resuming, epoch 0 goes
 * on at batch start_batch, which starts at position start_pos. */
static inline void fx_open_skip(fixture *f, int nslots, int64_t positions,
                                int batch_size, int64_t target,
                                int64_t start_pos, int64_t start_batch)
{
    logger_init(&f->lg, NULL, NULL);
    cr_assert_eq(backend_host_open(&f->be, &f->lg, "test"), 0);
    const schedule_config sched = {
        .positions = positions,
        .batch_size = batch_size,
        .target = target,
        .order_len = positions,
        .start = {.batch = start_batch, .position = start_pos}};
    cr_assert_eq(ring_init(&f->r, nslots, &sched, 4, f->be, PL_MEMORY_PAGEABLE,
                           1, &f->lg),
                 0);
}

static inline void fx_close(fixture *f)
{
    ring_fini(&f->r);
    backend_close(f->be);
    logger_fini(&f->lg);
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Hand a READY batch back as the prefetcher does: take it, one copy, done. */
static inline void release_batch(ring *r, uint64_t seq)
{
    ring_slot *s = ring_wait_ready(r, seq);
    cr_assert_not_null(s);
    cr_assert_eq(s->state, SLOT_COPYING);
    ring_add_copies(r, s, 1);
    ring_copy_done(s);
}

/* Claim and finish every position of batch seq, single-threaded, checking
 * slot, order and schedule; returns the slot (READY). */
static inline ring_slot *fill_batch(ring *r, uint64_t seq, int64_t epoch,
                                    int64_t batch, int count)
{
    ring_slot *first = NULL;
    for (int k = 0; k < count; k++) {
        ring_slot *s = NULL;
        int pos = -1;
        cr_assert_eq(ring_claim(r, 0, &s, &pos), 1);
        cr_assert_eq(s, &r->slots[seq % (uint64_t)r->nslots],
                     "batch %llu went to slot %td", (unsigned long long)seq,
                     s - r->slots);
        cr_assert_eq(pos, k, "batch %llu: claim %d got position %d",
                     (unsigned long long)seq, k, pos);
        cr_assert_eq(s->seq, seq);
        cr_assert_eq(s->epoch, epoch, "batch %llu: epoch %lld, want %lld",
                     (unsigned long long)seq, (long long)s->epoch,
                     (long long)epoch);
        cr_assert_eq(s->batch, batch, "batch %llu: batch %lld, want %lld",
                     (unsigned long long)seq, (long long)s->batch,
                     (long long)batch);
        cr_assert_eq(s->count, count, "batch %llu: count %d, want %d",
                     (unsigned long long)seq, s->count, count);
        cr_assert_eq(s->state, SLOT_FILLING);
        first = s;
    }
    for (int k = 0; k < count; k++)
        ring_finish(r, first, 1);
    cr_assert_eq(first->state, SLOT_READY);
    return first;
}

/* A thread blocked in ring_claim. Tests with threads carry a generous
 * .timeout, so that a lost wake-up fails the test instead of hanging the
 * suite; no assertion depends on how long anything takes. */
typedef struct claimer {
    ring *r;
    int worker; /* which worker claims */
    ring_slot *slot;
    int pos;
    int rc;
    atomic_int done;
} claimer;

static inline void *claim_thread(void *arg)
{
    claimer *c = arg;
    c->rc = ring_claim(c->r, c->worker, &c->slot, &c->pos);
    atomic_store(&c->done, 1);
    return NULL;
}

/* Starts a thread claiming from r into c (which must stay put until the
 * thread is joined through *t). */
static inline void claimer_start(claimer *c, ring *r, pthread_t *t)
{
    memset(c, 0, sizeof *c);
    c->r = r;
    atomic_init(&c->done, 0);
    cr_assert_eq(pthread_create(t, NULL, claim_thread, c), 0);
}

/* A thread blocked in ring_wait_ready. */
typedef struct waiter {
    ring *r;
    uint64_t seq;
    ring_slot *slot;
    atomic_int done;
} waiter;

static inline void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->slot = ring_wait_ready(w->r, w->seq);
    atomic_store(&w->done, 1);
    return NULL;
}

#endif
