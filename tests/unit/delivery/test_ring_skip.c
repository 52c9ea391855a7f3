/* The host ring under PL_ON_ERROR_SKIP: each epoch topped up past its
 * order's end until its good samples suffice, the gate on claims past an
 * epoch, the end when no sample is good, resuming mid-epoch. Runs on the
 * host backend with pageable memory. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "../delivery/ring.h"
#include "testring.h"
#include "testutil.h"

/* ---- topping an epoch up (PL_ON_ERROR_SKIP) ------------------------------ */

/* Claims every position of the next batch and checks where it stands. */
static ring_slot *claim_batch(ring *r, int64_t epoch, int64_t batch,
                              int64_t first, int count)
{
    ring_slot *slot = NULL;
    for (int k = 0; k < count; k++) {
        ring_slot *s;
        int pos;
        cr_assert_eq(ring_claim(r, 0, &s, &pos), 1);
        cr_assert_eq(pos, k);
        cr_assert_eq(s->epoch, epoch, "epoch %lld, want %lld",
                     (long long)s->epoch, (long long)epoch);
        cr_assert_eq(s->batch, batch, "batch %lld, want %lld",
                     (long long)s->batch, (long long)batch);
        cr_assert_eq(s->first, first, "first %lld, want %lld",
                     (long long)s->first, (long long)first);
        cr_assert_eq(s->count, count, "count %d, want %d", s->count, count);
        cr_assert_eq(s->no_good, 0);
        slot = s;
    }
    return slot;
}

/* 10 positions in batches of 4, two of epoch 0 bad: once all ten are
 * decoded, the epoch is topped up past its order's end (2 needed, 8 good of
 * 10: ceil(2 * 10 / 8) = 3 positions, 10..12), then epoch 1 starts. */
Test(ring, skip_tops_an_epoch_up_past_its_end_by_the_good_fraction)
{
    fixture f;
    fx_open_skip(&f, 4, 10, 4, 10, 0, 0);
    ring_slot *b0 = claim_batch(&f.r, 0, 0, 0, 4);
    ring_slot *b1 = claim_batch(&f.r, 0, 1, 4, 4);
    ring_slot *b2 = claim_batch(&f.r, 0, 2, 8, 2);
    for (int k = 0; k < 4; k++) {
        ring_finish(&f.r, b0, k != 1);
        ring_finish(&f.r, b1, k != 2);
    }
    ring_finish(&f.r, b2, 1);
    ring_finish(&f.r, b2, 1);
    ring_slot *top = claim_batch(&f.r, 0, 3, 10, 3);
    for (int k = 0; k < 3; k++)
        ring_finish(&f.r, top, 1);
    cr_assert_eq(top->state, SLOT_READY);
    for (uint64_t seq = 0; seq < 4; seq++)
        release_batch(&f.r, seq);
    claim_batch(&f.r, 1, 0, 0, 4);
    fx_close(&f);
}

/* Nothing bad: no top-up, the next epoch follows at once. */
Test(ring, skip_without_bad_samples_goes_straight_to_the_next_epoch)
{
    fixture f;
    fx_open_skip(&f, 4, 6, 4, 6, 0, 0);
    ring_slot *b0 = claim_batch(&f.r, 0, 0, 0, 4);
    ring_slot *b1 = claim_batch(&f.r, 0, 1, 4, 2);
    for (int k = 0; k < 4; k++)
        ring_finish(&f.r, b0, 1);
    for (int k = 0; k < 2; k++)
        ring_finish(&f.r, b1, 1);
    claim_batch(&f.r, 1, 0, 0, 4);
    fx_close(&f);
}

/* The gate: at the end of an epoch's positions, a claim waits until every
 * position of the epoch is decoded, since only then is it known whether a
 * top-up is needed; finishing the last one lets it go on. */
Test(ring, skip_claims_past_an_epoch_wait_until_its_positions_are_decoded,
     .timeout = 5)
{
    fixture f;
    fx_open_skip(&f, 4, 4, 2, 4, 0, 0);
    ring_slot *b0 = claim_batch(&f.r, 0, 0, 0, 2);
    ring_slot *b1 = claim_batch(&f.r, 0, 1, 2, 2);
    ring_finish(&f.r, b0, 1);
    ring_finish(&f.r, b0, 1);
    ring_finish(&f.r, b1, 0); /* one bad, one still being decoded */
    claimer c;
    pthread_t t;
    claimer_start(&c, &f.r, &t);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0, "claimed before the epoch was known");
    ring_finish(&f.r, b1, 1);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 1);
    /* 1 needed, 3 good of 4: ceil(4 / 3) = 2 positions, 4..5. */
    cr_assert_eq(c.slot->epoch, 0);
    cr_assert_eq(c.slot->batch, 2);
    cr_assert_eq(c.slot->first, 4);
    cr_assert_eq(c.slot->count, 2);
    fx_close(&f);
}

/* Every position of the order bad: after one whole pass with no good
 * sample, a slot with no_good and no position ends the pipeline, and no
 * claim is handed out after it. */
Test(ring, skip_with_no_good_sample_in_a_whole_order_ends_in_no_good,
     .timeout = 5)
{
    fixture f;
    fx_open_skip(&f, 4, 3, 2, 3, 0, 0);
    ring_slot *b0 = claim_batch(&f.r, 0, 0, 0, 2);
    ring_slot *b1 = claim_batch(&f.r, 0, 1, 2, 1);
    ring_finish(&f.r, b0, 0);
    ring_finish(&f.r, b0, 0);
    ring_finish(&f.r, b1, 0);
    /* The claim that finds out makes the no_good slot and waits on. */
    claimer c;
    pthread_t t;
    claimer_start(&c, &f.r, &t);
    ring_slot *end = ring_wait_ready(&f.r, 2);
    cr_assert_not_null(end);
    cr_assert_eq(end->no_good, 1);
    cr_assert_eq(end->count, 0);
    cr_assert_eq(end->epoch, 0);
    sleep_ms(50);
    cr_assert_eq(atomic_load(&c.done), 0, "a claim after the end");
    ring_stop(&f.r);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 0);
    fx_close(&f);
}

/* One sample good once and bad after (its file deleted or rewritten
 * mid-epoch), every other one bad: no top-up can fill the epoch. A whole
 * pass over the order without a good sample ends it in no_good, as when
 * none was ever good (the loader fuzz harness found the ring topping up for
 * ever here, the caller waiting in pl_loader_next). */
Test(ring, skip_ends_after_a_whole_pass_without_a_good_sample_even_after_one,
     .timeout = 5)
{
    fixture f;
    fx_open_skip(&f, 4, 3, 3, 3, 0, 0);
    ring_slot *b0 = claim_batch(&f.r, 0, 0, 0, 3);
    ring_finish(&f.r, b0, 1);
    ring_finish(&f.r, b0, 0);
    ring_finish(&f.r, b0, 0);
    /* 2 needed, 1 good of 3: a top-up of one whole pass, 3..5; all bad. */
    ring_slot *top = claim_batch(&f.r, 0, 1, 3, 3);
    for (int k = 0; k < 3; k++)
        ring_finish(&f.r, top, 0);
    claimer c;
    pthread_t t;
    claimer_start(&c, &f.r, &t);
    ring_slot *end = ring_wait_ready(&f.r, 2);
    cr_assert_not_null(end);
    cr_assert_eq(end->no_good, 1);
    cr_assert_eq(end->count, 0);
    ring_stop(&f.r);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(c.rc, 0);
    fx_close(&f);
}

/* A good sample met in a round resets the count: 1 good of 3, then a
 * round with a good one again is not the end. */
Test(ring, skip_a_round_with_a_good_sample_is_not_the_end, .timeout = 5)
{
    fixture f;
    fx_open_skip(&f, 4, 3, 3, 3, 0, 0);
    ring_slot *b0 = claim_batch(&f.r, 0, 0, 0, 3);
    ring_finish(&f.r, b0, 1);
    ring_finish(&f.r, b0, 0);
    ring_finish(&f.r, b0, 0);
    ring_slot *top = claim_batch(&f.r, 0, 1, 3, 3);
    ring_finish(&f.r, top, 1);
    ring_finish(&f.r, top, 0);
    ring_finish(&f.r, top, 0);
    /* 1 needed, 2 good of 6: ceil(1 * 6 / 2) = 3 positions, 6..8. */
    claim_batch(&f.r, 0, 2, 6, 3);
    fx_close(&f);
}

/* Resuming at batch 1, position 6 of 10 (two bad before it): 4 good
 * already delivered, the first batch is batch 1, positions 6..9; then the
 * top-up needs 10 - 4 - 4 = 2 more: 4 good of 4, two positions, 10..11. */
Test(ring, skip_resumes_mid_epoch_at_its_position_and_count)
{
    fixture f;
    fx_open_skip(&f, 4, 10, 4, 10, 6, 1);
    ring_slot *b1 = claim_batch(&f.r, 0, 1, 6, 4);
    for (int k = 0; k < 4; k++)
        ring_finish(&f.r, b1, 1);
    ring_slot *top = claim_batch(&f.r, 0, 2, 10, 2);
    ring_finish(&f.r, top, 1);
    ring_finish(&f.r, top, 1);
    for (uint64_t seq = 0; seq < 2; seq++)
        release_batch(&f.r, seq);
    claim_batch(&f.r, 1, 0, 0, 4);
    fx_close(&f);
}
