/* num_workers PL_AUTO's decision (loader/autotune.h), driven with made-up
 * figures: exact counts after each window for a fed caller, a starved
 * one, workers that wait for ring slots, a short window, the cool-down
 * after a rise and the one "settled" report. */
#include <criterion/criterion.h>

#include "../loader/autotune.h"

#define MS 1000000ull

/* The counters a window later: wall ms long, the caller waiting wait ms,
 * the workers busy busy ms and waiting for slots slot ms, b batches. */
typedef struct clock_fx {
    autotune_sample s;
} clock_fx;

static const autotune_sample *window(clock_fx *f, uint64_t wall, uint64_t wait,
                                     uint64_t busy, uint64_t slot, uint64_t b)
{
    f->s.now_ns += wall * MS;
    f->s.ns_wait += wait * MS;
    f->s.ns_busy += busy * MS;
    f->s.ns_slot_wait += slot * MS;
    f->s.batches += b;
    return &f->s;
}

Test(autotune, starts_with_every_worker)
{
    autotune t;
    clock_fx f = {{.now_ns = 5 * MS}};
    autotune_init(&t, 6, &f.s);
    cr_assert_eq(t.active, 6);
    cr_assert_eq(t.max, 6);
    autotune_init(&t, 0, &f.s);
    cr_assert_eq(t.active, 1, "at least one worker");
}

Test(autotune, a_fed_caller_sheds_a_worker_every_two_windows_down_to_need)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 4, &f.s);
    /* 1000 ms windows, the caller never waits, the workers busy 1500 ms
     * of the caller's 1000: need = ceil(1.5 x 1.15) = 2. */
    const int want[] = {4, 3, 3, 2, 2, 2, 2, 2};
    for (int w = 0; w < 8; w++) {
        const int r = autotune_step(&t, window(&f, 1000, 0, 1500, 0, 10));
        cr_assert_eq(t.active, want[w], "window %d: %d workers, not %d", w,
                     t.active, want[w]);
        cr_assert_eq(r, w == 1 || w == 3 ? 1 : 0, "window %d said %d", w, r);
    }
    cr_assert_eq(t.need_x100, 173, "1.5 x 1.15 = 1.725");
    cr_assert_eq(t.wait_permille, 0);
}

Test(autotune, a_starved_caller_gets_need_at_once_or_one_more)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 8, &f.s);
    /* Shed to 1 first: busy 100 of 1000 ms, need 1. */
    for (int w = 0; w < 14; w++)
        autotune_step(&t, window(&f, 1000, 0, 100, 0, 10));
    cr_assert_eq(t.active, 1);
    /* The step got faster: the caller waits 500 of 1000 ms while one
     * worker is busy 1000 ms: need = 1000 x 1.15 / 500 = 2.3 -> 3. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 500, 1000, 0, 10)), 1);
    cr_assert_eq(t.active, 3);
    cr_assert_eq(t.wait_permille, 500);
    /* Still waiting a little (3%), need 2: one more, not fewer. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 30, 1600, 0, 10)), 1);
    cr_assert_eq(t.active, 4);
    /* A caller that does nothing between calls needs every worker. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 1000, 4000, 0, 10)), 1);
    cr_assert_eq(t.active, 8);
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 1000, 8000, 0, 10)), 0);
    cr_assert_eq(t.active, 8, "never past max");
}

Test(autotune, workers_waiting_for_slots_get_no_more_company)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 4, &f.s);
    for (int w = 0; w < 10; w++)
        autotune_step(&t, window(&f, 1000, 0, 200, 0, 10));
    cr_assert_eq(t.active, 1);
    /* The caller waits (its releases or the copies are behind) while the
     * one worker waited 400 ms of 1000 for a free slot: no rise. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 300, 500, 400, 10)), 0);
    cr_assert_eq(t.active, 1);
    /* Below a quarter of the worker's time, it counts as starved. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 300, 500, 200, 10)), 1);
    cr_assert_eq(t.active, 2);
}

Test(autotune, a_window_is_a_quarter_second_and_four_batches)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 4, &f.s);
    cr_assert_eq(autotune_step(&t, window(&f, 200, 0, 0, 0, 40)), 0);
    cr_assert_eq(t.last.now_ns, 0, "200 ms: not a window yet");
    autotune_init(&t, 4, &(autotune_sample){0});
    f = (clock_fx){{0}};
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 0, 0, 0, 3)), 0);
    cr_assert_eq(t.last.now_ns, 0, "3 batches: not a window yet");
    /* The fourth batch ends it, measured from the start: 1.3 s. */
    cr_assert_eq(autotune_step(&t, window(&f, 300, 0, 0, 0, 1)), 0);
    cr_assert_eq(t.last.now_ns, 1300 * MS);
    cr_assert_eq(t.down_votes, 1, "busy 0: need 1 < 4, one vote");
    cr_assert_eq(autotune_step(&t, window(&f, 250, 0, 0, 0, 4)), 1,
                 "the second window in a row sheds one");
    cr_assert_eq(t.active, 3);
}

Test(autotune, no_shedding_within_four_windows_of_a_rise)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 4, &f.s);
    for (int w = 0; w < 10; w++)
        autotune_step(&t, window(&f, 1000, 0, 100, 0, 10));
    cr_assert_eq(t.active, 1);
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 100, 1000, 0, 10)), 1);
    cr_assert_eq(t.active, 2);
    /* Fed at once: four windows keep 2, the fifth and sixth vote, the
     * sixth sheds. */
    for (int w = 0; w < 5; w++) {
        cr_assert_eq(autotune_step(&t, window(&f, 1000, 0, 100, 0, 10)), 0,
                     "window %d after the rise", w);
        cr_assert_eq(t.active, 2);
    }
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 0, 100, 0, 10)), 1);
    cr_assert_eq(t.active, 1);
}

Test(autotune, settling_is_said_once)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 2, &f.s);
    int said = 0, at = -1;
    for (int w = 0; w < 30; w++) {
        /* busy 1800 of 1000 ms: need ceil(2.07) = 3 > 2: stays at 2 */
        const int r = autotune_step(&t, window(&f, 1000, 0, 1800, 0, 10));
        cr_assert_neq(r, 1, "window %d changed the count", w);
        if (r == 2)
            said++, at = w;
    }
    cr_assert_eq(said, 1);
    cr_assert_eq(at, AUTOTUNE_SETTLED - 1);
    char buf[256];
    autotune_describe(&t, buf, sizeof buf);
    cr_assert_str_eq(buf, "2 of 2 workers take samples: pl_loader_next "
                          "waited 0.0% of the last window, and keeping up "
                          "takes more than the 2 workers' time");
    /* A caller that never waits on a step of 1000 ms of 2 workers' 300. */
    autotune_step(&t, window(&f, 1000, 0, 300, 0, 10));
    autotune_describe(&t, buf, sizeof buf);
    cr_assert_str_eq(buf, "2 of 2 workers take samples: pl_loader_next "
                          "waited 0.0% of the last window, and keeping up "
                          "takes 0.35 workers' time");
}

/* Starved at the ceiling with a step that takes a CPU itself: a probe of
 * one worker fewer delivers as many batches, so the ceiling comes down,
 * stays down, and rises again after AUTOTUNE_CEILING_RETRY windows. */
Test(autotune, a_probe_that_delivers_as_much_with_one_fewer_keeps_it)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 2, &f.s);
    /* Starved (the caller waits 400 of 1000 ms), 10 batches a second. */
    int w = 0;
    for (; w < AUTOTUNE_PROBE_FIRST - 1; w++)
        cr_assert_neq(autotune_step(&t, window(&f, 1000, 400, 1900, 0, 10)),
                      1, "window %d changed the count", w);
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 400, 1900, 0, 10)), 1,
                 "the probe starts");
    cr_assert_eq(t.active, 1);
    cr_assert_eq(t.probing, AUTOTUNE_PROBE_WINDOWS);
    /* One worker, 10 batches a second too (the step had a CPU back). */
    for (int k = 0; k < AUTOTUNE_PROBE_WINDOWS - 1; k++)
        cr_assert_eq(autotune_step(&t, window(&f, 1000, 400, 950, 0, 10)), 0);
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 400, 950, 0, 10)), 1);
    cr_assert_eq(t.active, 1);
    cr_assert_eq(t.ceiling, 1);
    /* Still starved, need 2: the ceiling holds it at 1... */
    for (int k = 0; k < AUTOTUNE_CEILING_RETRY - 1; k++) {
        const int r = autotune_step(&t, window(&f, 1000, 400, 950, 0, 10));
        cr_assert(r == 0 || r == 2, "window %d after the probe: %d", k, r);
        cr_assert_eq(t.active, 1);
    }
    /* ...until it rises again. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 400, 950, 0, 10)), 1);
    cr_assert_eq(t.active, 2);
    cr_assert_eq(t.ceiling, 2);
}

/* Decoding is what the caller waits for: one worker fewer delivers half;
 * back at once, and the next probe twice as late. */
Test(autotune, a_probe_that_delivers_less_goes_back_and_backs_off)
{
    autotune t;
    clock_fx f = {{0}};
    autotune_init(&t, 2, &f.s);
    for (int w = 0; w < AUTOTUNE_PROBE_FIRST; w++)
        autotune_step(&t, window(&f, 1000, 900, 2000, 0, 10));
    cr_assert_eq(t.active, 1, "probing");
    for (int k = 0; k < AUTOTUNE_PROBE_WINDOWS - 1; k++)
        cr_assert_eq(autotune_step(&t, window(&f, 1000, 950, 1000, 0, 5)), 0);
    /* 9.6 batches a second would have been kept (97%); 5 is not. */
    cr_assert_eq(autotune_step(&t, window(&f, 1000, 950, 1000, 0, 5)), 1);
    cr_assert_eq(t.active, 2, "back");
    cr_assert_eq(t.ceiling, 2);
    cr_assert_eq(t.probe_every, 2 * AUTOTUNE_PROBE_FIRST);
    int w = 0;
    while (t.active == 2 && w < 100) {
        autotune_step(&t, window(&f, 1000, 900, 2000, 0, 10));
        w++;
    }
    cr_assert_eq(w, 2 * AUTOTUNE_PROBE_FIRST, "the next probe after %d",
                 2 * AUTOTUNE_PROBE_FIRST);
}

/* ---- prefetch PL_AUTO: the ring's size (ringtune) ---------------------- */

Test(ringtune, starts_at_two_slots_within_its_bound)
{
    ringtune t;
    clock_fx f = {{0}};
    ringtune_init(&t, 8, &f.s);
    cr_assert_eq(t.slots, RINGTUNE_START);
    cr_assert_eq(t.slots, 2);
    cr_assert_eq(t.max, 8);
    ringtune_init(&t, 1, &f.s);
    cr_assert_eq(t.max, 2, "the bound is at least the start");
}

Test(ringtune, grows_only_when_the_caller_waits_while_the_workers_wait_for_slots)
{
    ringtune t;
    clock_fx f = {{0}};
    ringtune_init(&t, 8, &f.s);
    /* 1000 ms windows, 2 workers (2000 ms of theirs). */
    /* A fed caller (1%) with workers blocked on slots 50%: the caller is
     * the slow one; a larger ring would only hold more batches. */
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 10, 0, 1000, 10), 2), 0);
    cr_assert_eq(t.slots, 2);
    /* A starved caller (30%) with workers that never wait for a slot:
     * the workers are slow; more slots would not help. */
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 300, 0, 100, 10), 2), 0);
    cr_assert_eq(t.slots, 2);
    cr_assert_eq(t.slot_permille, 50, "100 of the workers' 2000 ms");
    /* Both: one slow sample holds a batch back while the other worker
     * waits: one more slot. */
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 300, 0, 600, 10), 2), 1);
    cr_assert_eq(t.slots, 3);
    cr_assert_eq(t.wait_permille, 300);
    cr_assert_eq(t.slot_permille, 300);
    /* The window after a growth began with the old ring: not judged. */
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 300, 0, 600, 10), 2), 0);
    cr_assert_eq(t.slots, 3);
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 300, 0, 600, 10), 2), 1);
    cr_assert_eq(t.slots, 4);
    /* The slot wait is the workers' share: 4 workers waiting 600 of their
     * 4000 ms (15%) still count, 8 of them (7.5%) do not. */
    ringtune_step(&t, window(&f, 1000, 0, 0, 0, 10), 4);
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 300, 0, 600, 10), 8), 0);
    cr_assert_eq(t.slots, 4);
    cr_assert_eq(ringtune_step(&t, window(&f, 1000, 300, 0, 600, 10), 4), 1);
    cr_assert_eq(t.slots, 5);
}

Test(ringtune, never_past_its_bound_nor_in_a_short_window)
{
    ringtune t;
    clock_fx f = {{0}};
    ringtune_init(&t, 3, &f.s);
    /* Too short (100 ms), then too few batches (3): no window yet. */
    cr_assert_eq(ringtune_step(&t, window(&f, 100, 100, 0, 200, 1), 2), 0);
    cr_assert_eq(ringtune_step(&t, window(&f, 900, 400, 0, 900, 2), 2), 0);
    cr_assert_eq(t.slots, 2);
    /* Now 1000 ms and 13 batches since the start: a window. */
    cr_assert_eq(ringtune_step(&t, window(&f, 0, 0, 0, 0, 10), 2), 1);
    cr_assert_eq(t.slots, 3);
    for (int w = 0; w < 6; w++)
        ringtune_step(&t, window(&f, 1000, 500, 0, 1000, 10), 2);
    cr_assert_eq(t.slots, 3, "the bound");
}

Test(ringtune, says_once_where_it_settled)
{
    ringtune t;
    clock_fx f = {{0}};
    ringtune_init(&t, 8, &f.s);
    int said = 0, at = -1;
    for (int w = 0; w < 30; w++) {
        const int r = ringtune_step(&t, window(&f, 1000, 0, 0, 0, 10), 2);
        if (r == 2) {
            said++;
            at = w;
        }
        cr_assert_neq(r, 1, "window %d: a fed caller never grows it", w);
    }
    cr_assert_eq(said, 1);
    cr_assert_eq(at, AUTOTUNE_SETTLED - 1);
    char buf[256];
    ringtune_describe(&t, buf, sizeof buf);
    cr_assert_str_eq(buf, "2 slots of at most 8: pl_loader_next waited 0.0% "
                          "of the last window while the workers waited for "
                          "a free slot 0.0% of theirs");
}
