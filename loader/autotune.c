/* num_workers PL_AUTO's decision (autotune.h has the rule and why). */
#include "autotune.h"

#include <stdio.h>
#include <string.h>

void autotune_init(autotune *t, int max, const autotune_sample *now)
{
    memset(t, 0, sizeof *t);
    t->max = max < 1 ? 1 : max;
    t->active = t->max;
    t->last = *now;
}

static int clamp(int n, int lo, int hi)
{
    return n < lo ? lo : n > hi ? hi : n;
}

int autotune_step(autotune *t, const autotune_sample *now)
{
    if (now->now_ns < t->last.now_ns + AUTOTUNE_WINDOW_NS ||
        now->batches < t->last.batches + AUTOTUNE_WINDOW_BATCHES)
        return 0;
    const uint64_t wall = now->now_ns - t->last.now_ns,
                   wait = now->ns_wait - t->last.ns_wait,
                   busy = now->ns_busy - t->last.ns_busy,
                   slot = now->ns_slot_wait - t->last.ns_slot_wait;
    t->last = *now;
    const int starved = wait * 50 > wall;
    const int blocked = slot * 4 > wall * (uint64_t)t->active;
    const uint64_t work = wall > wait ? wall - wait : 0;
    /* need = busy x 1.15 / work, rounded up; a caller that does nothing
     * between calls needs every worker. */
    const double need_f = work ? (double)busy * 1.15 / (double)work
                               : (double)t->max;
    const int need = clamp((int)need_f + (need_f > (int)need_f), 1, t->max);
    t->wait_permille = wall ? (int)(wait * 1000 / wall) : 0;
    t->need_x100 = (int)(need_f * 100 + 0.5);

    int next = t->active;
    if (starved && !blocked) {
        next = clamp(need > t->active + 1 ? need : t->active + 1, 1, t->max);
        t->down_votes = 0;
        if (next != t->active)
            t->cooldown = 5; /* this window and four more */
    } else if (!starved && need < t->active && t->cooldown == 0) {
        if (++t->down_votes >= 2) {
            next = t->active - 1;
            t->down_votes = 0;
        }
    } else {
        t->down_votes = 0;
    }
    if (t->cooldown > 0)
        t->cooldown--;
    if (next != t->active) {
        t->active = next;
        t->unchanged = 0;
        return 1;
    }
    if (++t->unchanged == AUTOTUNE_SETTLED && !t->settled) {
        t->settled = 1;
        return 2;
    }
    return 0;
}

void autotune_describe(const autotune *t, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "%d of %d worker%s take samples: pl_loader_next waited %d.%d%% "
             "of the last window, and keeping up takes %d.%02d workers' time",
             t->active, t->max, t->max == 1 ? "" : "s", t->wait_permille / 10,
             t->wait_permille % 10, t->need_x100 / 100, t->need_x100 % 100);
}
