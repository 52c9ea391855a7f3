/* The host ring: claim order, the batch schedule, slot reuse, readiness,
 * stop, and slot memory. Runs on the host backend with pageable memory.
 * The top-up of an epoch under PL_ON_ERROR_SKIP is test_ring_skip.c's. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "../delivery/ring.h"
#include "testring.h"
#include "testutil.h"

/* ---- schedule and order -------------------------------------------------- */

Test(ring, claims_come_in_order_with_short_last_batch_and_epoch_rollover)
{
    /* 10 positions in batches of 4 from epoch 5: 4, 4, 2, then epoch 6. */
    static const struct {
        int64_t epoch, batch;
        int count;
    } want[] = {{5, 0, 4}, {5, 1, 4}, {5, 2, 2}, {6, 0, 4},
                {6, 1, 4}, {6, 2, 2}, {7, 0, 4}};
    fixture f;
    fx_open(&f, 3, 5, 10, 4, 12);
    cr_assert_eq(schedule_nominal_batches(&f.r.sched), 3);
    for (uint64_t seq = 0; seq < sizeof want / sizeof want[0]; seq++) {
        fill_batch(&f.r, seq, want[seq].epoch, want[seq].batch,
                   want[seq].count);
        release_batch(&f.r, seq);
        ring_slot *s = &f.r.slots[seq % 3];
        cr_assert_eq(s->state, SLOT_FREE);
        cr_assert_eq(s->seq, seq + 3, "a freed slot waits for seq + nslots");
    }
    fx_close(&f);
}

Test(ring, schedule_handles_exact_multiples_and_epochs_shorter_than_a_batch)
{
    /* 8 positions in batches of 4: no short batch. */
    fixture f;
    fx_open(&f, 2, 0, 8, 4, 3);
    cr_assert_eq(schedule_nominal_batches(&f.r.sched), 2);
    fill_batch(&f.r, 0, 0, 0, 4);
    release_batch(&f.r, 0);
    fill_batch(&f.r, 1, 0, 1, 4);
    release_batch(&f.r, 1);
    fill_batch(&f.r, 2, 1, 0, 4);
    release_batch(&f.r, 2);
    fill_batch(&f.r, 3, 1, 1, 4);
    release_batch(&f.r, 3);
    fill_batch(&f.r, 4, 2, 0, 4);
    fx_close(&f);

    /* 3 positions in batches of 4: each epoch is one batch of 3. */
    fx_open(&f, 2, 9, 3, 4, 3);
    cr_assert_eq(schedule_nominal_batches(&f.r.sched), 1);
    for (uint64_t seq = 0; seq < 4; seq++) {
        fill_batch(&f.r, seq, 9 + (int64_t)seq, 0, 3);
        release_batch(&f.r, seq);
    }
    fx_close(&f);

    /* Batches of 1. */
    fx_open(&f, 1, 0, 2, 1, 3);
    for (uint64_t seq = 0; seq < 5; seq++) {
        fill_batch(&f.r, seq, (int64_t)seq / 2, (int64_t)seq % 2, 1);
        release_batch(&f.r, seq);
    }
    fx_close(&f);
}

Test(ring, claims_run_ahead_through_every_free_slot)
{
    /* With 3 slots, all positions of batches 0, 1 and 2 can be claimed
     * before any is finished, each batch in its own slot. */
    fixture f;
    fx_open(&f, 3, 0, 10, 4, 12);
    const int counts[3] = {4, 4, 2};
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < counts[b]; k++) {
            ring_slot *s;
            int pos;
            cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
            cr_assert_eq(s, &f.r.slots[b]);
            cr_assert_eq(pos, k);
            cr_assert_eq(s->claimed, k + 1);
            cr_assert_eq(s->pending, counts[b], "nothing finished yet");
        }
    cr_assert_eq(f.r.claim_seq, 3);
    for (int b = 0; b < 3; b++)
        cr_assert_eq(f.r.slots[b].state, SLOT_FILLING);
    fx_close(&f);
}

/* ---- slot reuse ---------------------------------------------------------- */

Test(ring, claim_for_a_busy_slot_blocks_until_its_copies_are_done, .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 6);
    ring_slot *s0 = fill_batch(&f.r, 0, 0, 0, 2);
    fill_batch(&f.r, 1, 0, 1, 2);

    /* Batch 2 needs slot 0, which holds batch 0 (READY). */
    claimer c;
    pthread_t t;
    claimer_start(&c, &f.r, &t);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0, "claim returned while READY");

    /* Taken by the prefetcher, two copies outstanding. */
    cr_assert_eq(ring_wait_ready(&f.r, 0), s0);
    cr_assert_eq(s0->state, SLOT_COPYING);
    ring_add_copies(&f.r, s0, 2);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0, "claim returned while COPYING");

    ring_copy_done(s0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0,
                 "claim returned with one copy still outstanding");

    ring_copy_done(s0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(atomic_load(&c.done), 1);
    cr_assert_eq(c.rc, 1);
    cr_assert_eq(c.slot, s0);
    cr_assert_eq(c.pos, 0);
    cr_assert_eq(s0->seq, 2);
    cr_assert_eq(s0->state, SLOT_FILLING);
    cr_assert_eq(s0->epoch, 0);
    cr_assert_eq(s0->batch, 2);
    cr_assert_eq(s0->count, 2);
    cr_assert_eq(s0->copies, 0);
    cr_assert_eq(s0->pending, 2);
    fx_close(&f);
}

Test(ring, claim_blocks_while_the_slot_is_still_filling_the_previous_lap,
     .timeout = 5)
{
    /* One slot: batch 1 cannot start while batch 0 has an unfinished
     * position, even though every position of batch 0 is claimed. */
    fixture f;
    fx_open(&f, 1, 0, 4, 2, 3);
    ring_slot *s;
    int pos;
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    cr_assert_eq(pos, 1);
    ring_finish(&f.r, s, 1);
    claimer c;
    pthread_t t;
    claimer_start(&c, &f.r, &t);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0);
    ring_finish(&f.r, s, 1);
    release_batch(&f.r, 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 1);
    cr_assert_eq(c.slot, &f.r.slots[0]);
    cr_assert_eq(c.pos, 0);
    cr_assert_eq(c.slot->seq, 1);
    cr_assert_eq(c.slot->batch, 1);
    fx_close(&f);
}

/* ---- readiness ----------------------------------------------------------- */

Test(ring, finishing_the_last_position_hands_the_slot_to_wait_ready_as_copying,
     .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 6, 3, 3);
    ring_slot *s = NULL;
    int pos;
    for (int k = 0; k < 3; k++)
        cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    ring_finish(&f.r, s, 1);
    ring_finish(&f.r, s, 1);
    cr_assert_eq(s->state, SLOT_FILLING);
    cr_assert_eq(s->pending, 1);

    waiter w = {.r = &f.r, .seq = 0};
    atomic_init(&w.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&w.done), 0,
                 "wait_ready returned with a position unfinished");

    ring_finish(&f.r, s, 1);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.slot, s);
    cr_assert_eq(w.slot, &f.r.slots[0]);
    cr_assert_eq(s->state, SLOT_COPYING);
    cr_assert_eq(s->seq, 0);
    fx_close(&f);
}

Test(ring, wait_ready_ignores_a_ready_batch_in_another_slot, .timeout = 5)
{
    /* Batch 1 READY in slot 1 does not satisfy a wait for batch 0. */
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 3);
    ring_slot *s0 = NULL, *s1 = NULL;
    int pos;
    cr_assert_eq(ring_claim(&f.r, 0, &s0, &pos), 1);
    cr_assert_eq(ring_claim(&f.r, 0, &s0, &pos), 1);
    cr_assert_eq(ring_claim(&f.r, 0, &s1, &pos), 1);
    cr_assert_eq(ring_claim(&f.r, 0, &s1, &pos), 1);
    cr_assert_eq(s0, &f.r.slots[0]);
    cr_assert_eq(s1, &f.r.slots[1]);
    ring_finish(&f.r, s1, 1);
    ring_finish(&f.r, s1, 1);
    cr_assert_eq(s1->state, SLOT_READY);

    waiter w = {.r = &f.r, .seq = 0};
    atomic_init(&w.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&w.done), 0,
                 "wait for batch 0 returned while only batch 1 was ready");
    ring_finish(&f.r, s0, 1);
    ring_finish(&f.r, s0, 1);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.slot, s0);
    cr_assert_eq(s0->state, SLOT_COPYING);
    cr_assert_eq(s1->state, SLOT_READY, "batch 1 was not taken");
    fx_close(&f);
}

Test(ring, wait_ready_ignores_the_previous_lap_of_its_slot, .timeout = 5)
{
    /* Slot 0 holding batch 0 READY does not satisfy a wait for batch 2,
     * the slot's next lap; nor does batch 2 while it is filling. */
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 3);
    ring_slot *s0 = fill_batch(&f.r, 0, 0, 0, 2);

    waiter w = {.r = &f.r, .seq = 2};
    atomic_init(&w.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&w.done), 0,
                 "wait for batch 2 returned slot 0 holding batch 0");
    cr_assert_eq(s0->state, SLOT_READY);
    cr_assert_eq(ring_wait_ready(&f.r, 0), s0);
    ring_add_copies(&f.r, s0, 1);
    ring_copy_done(s0);

    fill_batch(&f.r, 1, 0, 1, 2);
    ring_slot *s;
    int pos;
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    cr_assert_eq(s, s0);
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    ring_finish(&f.r, s, 1);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&w.done), 0,
                 "wait for batch 2 returned while it was filling");
    ring_finish(&f.r, s, 1);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.slot, s0);
    cr_assert_eq(s0->seq, 2);
    cr_assert_eq(s0->batch, 2);
    cr_assert_eq(s0->state, SLOT_COPYING);
    fx_close(&f);
}

/* ---- sleeping workers (num_workers PL_AUTO) ------------------------------ */

Test(ring, a_worker_past_the_active_count_sleeps_until_it_is_counted_again,
     .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 3);
    ring_set_active(&f.r, 1);
    claimer c = {.r = &f.r, .worker = 1, .rc = -1};
    atomic_init(&c.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, claim_thread, &c), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0, "worker 1 of 1 active claimed");
    /* Worker 0 takes positions meanwhile, and the sleeper's time is not a
     * wait for a slot. */
    ring_slot *s;
    int pos;
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    cr_assert_eq(pos, 0);
    ring_stats rs;
    ring_get_stats(&f.r, &rs);
    cr_assert_eq(rs.ns_slot_wait, 0);
    ring_set_active(&f.r, 2);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 1);
    cr_assert_eq(c.slot, s);
    cr_assert_eq(c.pos, 1, "the next position in order");
    /* 0 counts as 1: worker 0 never sleeps. */
    ring_set_active(&f.r, 0);
    cr_assert_eq(f.r.active, 1);
    fx_close(&f);
}

Test(ring, stop_wakes_a_sleeping_worker, .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 3);
    ring_set_active(&f.r, 1);
    claimer c = {.r = &f.r, .worker = 3, .rc = -1};
    atomic_init(&c.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, claim_thread, &c), 0);
    sleep_ms(30);
    ring_stop(&f.r);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 0);
    fx_close(&f);
}

/* ---- growing (prefetch PL_AUTO) ------------------------------------------ */

/* Claim batch seq's count positions from whichever slot holds it, finish
 * them; the slot (READY). */
static ring_slot *fill_any(ring *r, uint64_t seq, int count)
{
    ring_slot *first = NULL;
    for (int k = 0; k < count; k++) {
        ring_slot *s = NULL;
        int pos = -1;
        cr_assert_eq(ring_claim(r, 0, &s, &pos), 1);
        cr_assert_eq(s->seq, seq, "claim of batch %llu went to batch %llu",
                     (unsigned long long)seq, (unsigned long long)s->seq);
        cr_assert_eq(pos, k);
        first = s;
    }
    for (int k = 0; k < count; k++)
        ring_finish(r, first, 1);
    return first;
}

Test(ring, a_grown_slot_takes_the_next_batch_and_the_blocked_claim, .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 16, 2, 3); /* 2 slots, 16 positions, batches of 2 */
    cr_assert_eq(ring_set_max(&f.r, 4), 0);
    cr_assert_eq(ring_add_extras(&f.r, 1), 0);
    ring_slot *s0 = fill_any(&f.r, 0, 2), *s1 = fill_any(&f.r, 1, 2);
    cr_assert_neq(s0, s1);
    /* Both slots hold batches not copied out: a third claim blocks. */
    claimer c;
    pthread_t t;
    claimer_start(&c, &f.r, &t);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0, "claimed with every slot full");
    ring_stats before, after;
    ring_get_stats(&f.r, &before);
    cr_assert_eq(before.slots, 2);
    cr_assert_eq(before.max_slots, 4);
    ring_want_slots(&f.r, 3);
    cr_assert_eq(ring_grow(&f.r), 3);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 1);
    cr_assert_eq(c.slot, &f.r.slots[2], "the new slot");
    cr_assert_eq(c.slot->seq, 2, "holds the next batch");
    cr_assert_eq(c.pos, 0);
    cr_assert_eq(c.slot->batch, 2);
    cr_assert_not_null(c.slot->extras, "with its extras");
    cr_assert_not_null(c.slot->pos);
    /* Its memory is its own: no overlap with the first allocation. */
    const size_t batch = 2 * 3;
    const uint8_t *p = c.slot->pixels;
    cr_assert(p + batch <= f.r.mem || p >= f.r.mem + 2 * batch,
              "the grown slot's pixels overlap the ring's first block");
    memset(c.slot->pixels, 0x5a, batch); /* ASan: all of it is there */
    ring_get_stats(&f.r, &after);
    cr_assert_eq(after.slots, 3);
    cr_assert_eq(after.mem_bytes, before.mem_bytes + batch);
    /* Batch 2 finishes; 0 is copied out: slot 0 takes batch 3, the next no
     * slot has had. */
    ring_claim(&f.r, 0, &(ring_slot *){NULL}, &(int){0});
    ring_finish(&f.r, c.slot, 1);
    ring_finish(&f.r, c.slot, 1);
    release_batch(&f.r, 0);
    cr_assert_eq(s0->seq, 3);
    release_batch(&f.r, 1);
    cr_assert_eq(s1->seq, 4);
    release_batch(&f.r, 2);
    cr_assert_eq(c.slot->seq, 5);
    for (uint64_t seq = 3; seq < 8; seq++) { /* 8 batches of 2 = 16 */
        ring_slot *s = fill_any(&f.r, seq, 2);
        cr_assert_eq(s->batch, (int64_t)seq);
        release_batch(&f.r, seq);
    }
    fx_close(&f);
}

typedef struct idle_waiter {
    ring *r;
    ring_slot *slot;
    int idle;
    atomic_int done;
} idle_waiter;

static void *idle_wait_thread(void *arg)
{
    idle_waiter *w = arg;
    w->slot = ring_wait_ready_for(w->r, 0, 60000000000ull, &w->idle);
    atomic_store(&w->done, 1);
    return NULL;
}

Test(ring, a_wanted_slot_wakes_the_prefetchers_wait_to_grow_it, .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 3);
    cr_assert_eq(ring_set_max(&f.r, 3), 0);
    idle_waiter w = {.r = &f.r};
    atomic_init(&w.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, idle_wait_thread, &w), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&w.done), 0, "nothing is ready");
    ring_want_slots(&f.r, 9); /* past the bound: 3 */
    cr_assert_eq(pthread_join(t, NULL), 0, "woken long before its minute");
    cr_assert_null(w.slot);
    cr_assert_eq(w.idle, 1);
    cr_assert_eq(f.r.want_slots, 3);
    cr_assert_eq(ring_grow(&f.r), 3);
    ring_stats rs;
    ring_get_stats(&f.r, &rs);
    cr_assert_eq(rs.slots, 3);
    /* Nothing more wanted: the wait is a plain wait again. */
    int idle = -1;
    cr_assert_null(ring_wait_ready_for(&f.r, 0, 20000000, &idle));
    cr_assert_eq(idle, 1, "timed out");
    fx_close(&f);
}

Test(ring, a_fixed_ring_does_not_grow)
{
    fixture f;
    fx_open(&f, 2, 0, 8, 2, 3);
    ring_want_slots(&f.r, 5);
    cr_assert_eq(ring_grow(&f.r), 2);
    ring_stats rs;
    ring_get_stats(&f.r, &rs);
    cr_assert_eq(rs.slots, 2);
    cr_assert_eq(rs.max_slots, 2);
    fx_close(&f);
}

/* ---- stop ---------------------------------------------------------------- */

Test(ring, stop_wakes_a_blocked_claim_which_returns_zero, .timeout = 5)
{
    fixture f;
    fx_open(&f, 1, 0, 4, 2, 3);
    ring_slot *s;
    int pos;
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 1);

    claimer c = {.r = &f.r, .rc = -1};
    atomic_init(&c.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, claim_thread, &c), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0);
    ring_stop(&f.r);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 0);

    /* After stop, claims end at once even where a position is free. */
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 0);
    fx_close(&f);
}

Test(ring, stop_ends_claims_even_with_free_positions)
{
    fixture f;
    fx_open(&f, 2, 0, 4, 2, 3);
    ring_stop(&f.r);
    ring_slot *s = NULL;
    int pos = -1;
    cr_assert_eq(ring_claim(&f.r, 0, &s, &pos), 0);
    cr_assert_null(s, "no slot handed out after stop");
    cr_assert_eq(pos, -1);
    fx_close(&f);
}

/* The prefetcher's timed wait: NULL and idle after the timeout while the
 * batch is not ready, the slot as soon as it is; after stop, NULL and not
 * idle. */
Test(ring, timed_wait_ready_reports_idle_then_returns_the_ready_slot,
     .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 4, 2, 3);
    int idle = 0;
    cr_assert_null(ring_wait_ready_for(&f.r, 0, 20000000, &idle));
    cr_assert_eq(idle, 1, "timed out: idle");
    ring_slot *s0 = fill_batch(&f.r, 0, 0, 0, 2);
    idle = 1;
    cr_assert_eq(ring_wait_ready_for(&f.r, 0, 20000000, &idle), s0);
    cr_assert_eq(idle, 0);
    cr_assert_eq(s0->state, SLOT_COPYING);
    ring_stop(&f.r);
    idle = 1;
    cr_assert_null(ring_wait_ready_for(&f.r, 1, 20000000, &idle));
    cr_assert_eq(idle, 0, "stopped, not idle");
    fx_close(&f);
}

Test(ring, stop_wakes_a_blocked_wait_ready_which_returns_null, .timeout = 5)
{
    fixture f;
    fx_open(&f, 2, 0, 4, 2, 3);
    waiter w = {.r = &f.r, .seq = 0};
    atomic_init(&w.done, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&w.done), 0);
    ring_stop(&f.r);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_null(w.slot);
    /* Later waits end at once. */
    cr_assert_null(ring_wait_ready(&f.r, 1));
    fx_close(&f);
}

/* ---- memory -------------------------------------------------------------- */

Test(ring, slot_pixels_are_disjoint_and_one_batch_apart)
{
    /* 5 x 7 RGB: an odd sample size, so nothing lines up by accident. */
    const size_t sample = 5 * 7 * 3;
    const int batch = 3, nslots = 4;
    const size_t stride = sample * (size_t)batch;
    fixture f;
    fx_open(&f, nslots, 0, 10, batch, sample);
    cr_assert_eq(f.r.mem_bytes, stride * (size_t)nslots);
    cr_assert_eq(f.r.kind, HOSTMEM_PAGEABLE,
                 "PL_MEMORY_PAGEABLE gives pageable memory");
    cr_assert_not_null(f.r.mem);
    for (int i = 0; i < nslots; i++) {
        cr_assert_eq(f.r.slots[i].pixels, f.r.mem + stride * (size_t)i,
                     "slot %d", i);
        cr_assert_eq(f.r.slots[i].ring, &f.r);
        cr_assert_eq(f.r.slots[i].state, SLOT_FREE);
        cr_assert_eq(f.r.slots[i].seq, (uint64_t)i);
        if (i > 0)
            cr_assert_eq(
                (size_t)(f.r.slots[i].pixels - f.r.slots[i - 1].pixels),
                stride);
    }
    /* Fill each slot's whole batch with its own byte, and each slot's
     * positions; then nothing was overwritten by a neighbour. Under
     * AddressSanitizer an out-of-range slot would fault here. */
    for (int i = 0; i < nslots; i++) {
        memset(f.r.slots[i].pixels, 0x10 + i, stride);
        for (int k = 0; k < batch; k++)
            f.r.slots[i].pos[k] =
                (ring_pos){.index = i * 100 + k, .label = i, .status = -k};
    }
    for (int i = 0; i < nslots; i++) {
        for (size_t b = 0; b < stride; b++)
            cr_assert_eq(f.r.slots[i].pixels[b], 0x10 + i, "slot %d byte %zu",
                         i, b);
        for (int k = 0; k < batch; k++) {
            cr_assert_eq(f.r.slots[i].pos[k].index, i * 100 + k);
            cr_assert_eq(f.r.slots[i].pos[k].label, i);
            cr_assert_eq(f.r.slots[i].pos[k].status, -k);
        }
    }
    fx_close(&f);
}

/* ---- many threads -------------------------------------------------------- */

enum { MT_SLOTS = 2, MT_POSITIONS = 10, MT_BATCH = 3, MT_EPOCHS = 3 };
#define MT_BATCHES_PER_EPOCH ((MT_POSITIONS + MT_BATCH - 1) / MT_BATCH)
#define MT_BATCHES (MT_BATCHES_PER_EPOCH * MT_EPOCHS)

typedef struct mt_state {
    ring *r;
    atomic_int claims[MT_BATCHES][MT_BATCH];
} mt_state;

static void *mt_worker(void *arg)
{
    mt_state *m = arg;
    ring_slot *s;
    int pos;
    while (ring_claim(m->r, 0, &s, &pos)) {
        /* The slot's schedule is stable from claim until finish. */
        const uint64_t seq = s->seq;
        if (seq < MT_BATCHES)
            atomic_fetch_add(&m->claims[seq][pos], 1);
        s->pos[pos] =
            (ring_pos){.index = s->epoch * 1000 + s->batch * MT_BATCH + pos,
                       .label = (int32_t)seq,
                       .status = 0};
        memset(s->pixels + (size_t)pos * m->r->sample_bytes, (int)(seq & 0xff),
               m->r->sample_bytes);
        ring_finish(m->r, s, 1);
    }
    return NULL;
}

Test(ring, concurrent_workers_fill_every_position_once_in_batch_order,
     .timeout = 5)
{
    fixture f;
    fx_open(&f, MT_SLOTS, 2, MT_POSITIONS, MT_BATCH, 8);
    mt_state m = {.r = &f.r};
    for (int i = 0; i < MT_BATCHES; i++)
        for (int k = 0; k < MT_BATCH; k++)
            atomic_init(&m.claims[i][k], 0);
    pthread_t w[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&w[i], NULL, mt_worker, &m), 0);

    /* The prefetcher's side, in order. */
    for (uint64_t seq = 0; seq < MT_BATCHES; seq++) {
        ring_slot *s = ring_wait_ready(&f.r, seq);
        cr_assert_not_null(s);
        cr_assert_eq(s, &f.r.slots[seq % MT_SLOTS]);
        cr_assert_eq(s->seq, seq);
        const int64_t epoch = 2 + (int64_t)seq / MT_BATCHES_PER_EPOCH;
        const int64_t b = (int64_t)seq % MT_BATCHES_PER_EPOCH;
        const int count = b == MT_BATCHES_PER_EPOCH - 1 ? 1 : MT_BATCH;
        cr_assert_eq(s->epoch, epoch);
        cr_assert_eq(s->batch, b);
        cr_assert_eq(s->count, count, "seq %llu", (unsigned long long)seq);
        for (int k = 0; k < count; k++) {
            cr_assert_eq(s->pos[k].index, epoch * 1000 + b * MT_BATCH + k);
            cr_assert_eq(s->pos[k].label, (int32_t)seq);
            for (size_t x = 0; x < 8; x++)
                cr_assert_eq(s->pixels[(size_t)k * 8 + x],
                             (uint8_t)(seq & 0xff));
        }
        ring_add_copies(&f.r, s, 1);
        ring_copy_done(s);
    }
    ring_stop(&f.r);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_join(w[i], NULL), 0);
    for (int i = 0; i < MT_BATCHES; i++) {
        const int count =
            i % MT_BATCHES_PER_EPOCH == MT_BATCHES_PER_EPOCH - 1 ? 1 : MT_BATCH;
        for (int k = 0; k < MT_BATCH; k++)
            cr_assert_eq(atomic_load(&m.claims[i][k]), k < count ? 1 : 0,
                         "batch %d position %d", i, k);
    }
    fx_close(&f);
}
