/* num_workers and prefetch PL_AUTO's decisions (autotune.h has the rules
 * and why). */
#include "autotune.h"

#include <stdio.h>
#include <string.h>

void autotune_init(autotune *t, int max, const autotune_sample *now)
{
    memset(t, 0, sizeof *t);
    t->max = max < 1 ? 1 : max;
    t->active = t->ceiling = t->max;
    t->probe_every = AUTOTUNE_PROBE_FIRST;
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
    const double rate =
        (double)(now->batches - t->last.batches) * 1e9 / (double)wall;
    t->last = *now;
    if (t->probing > 0) { /* one fewer, measured: nothing else moves */
        t->probe_sum += rate;
        if (--t->probing > 0)
            return 0;
        const double mean = t->probe_sum / AUTOTUNE_PROBE_WINDOWS;
        t->since_probe = 0;
        if (mean >= 0.97 * t->probe_base) { /* as fast: keep it */
            t->ceiling = t->active;
            t->since_ceiling = 0;
            t->rate = mean;
            t->rate_n = AUTOTUNE_PROBE_WINDOWS;
            t->probe_every = AUTOTUNE_PROBE_FIRST;
            t->unchanged = 0;
            return 1;
        }
        t->active = t->probe_from; /* slower: back */
        t->rate = t->probe_base;
        t->probe_every = t->probe_every * 2 > AUTOTUNE_PROBE_LAST
                             ? AUTOTUNE_PROBE_LAST
                             : t->probe_every * 2;
        t->unchanged = 0;
        return 1;
    }
    t->rate = t->rate_n ? 0.7 * t->rate + 0.3 * rate : rate;
    t->rate_n++;
    t->since_probe++;
    if (t->ceiling < t->max && ++t->since_ceiling >= AUTOTUNE_CEILING_RETRY) {
        t->ceiling++;
        t->since_ceiling = 0;
    }
    const int starved = wait * 50 > wall;
    const int blocked = slot * 4 > wall * (uint64_t)t->active;
    const uint64_t work = wall > wait ? wall - wait : 0;
    /* need = busy x 1.15 / work, rounded up; a caller that does nothing
     * between calls needs every worker. */
    const double need_f = work ? (double)busy * 1.15 / (double)work
                               : (double)t->max;
    const int need = clamp((int)need_f + (need_f > (int)need_f), 1, t->max);
    t->wait_permille = wall ? (int)(wait * 1000 / wall) : 0;
    /* For the notice: past every worker, "more than" says it all. */
    t->need_x100 = need_f > t->max + 1 ? (t->max + 1) * 100
                                       : (int)(need_f * 100 + 0.5);

    int next = t->active;
    if (starved && !blocked) {
        next = clamp(need > t->active + 1 ? need : t->active + 1, 1,
                     t->ceiling);
        t->down_votes = 0;
        if (next > t->active) {
            t->cooldown = 5; /* this window and four more */
        } else if (t->active > 1 && t->cooldown == 0 && t->rate_n >= 2 &&
                   t->since_probe >= t->probe_every) {
            /* Starved at the ceiling: do fewer deliver as much? */
            next = t->active - 1;
            t->probing = AUTOTUNE_PROBE_WINDOWS;
            t->probe_from = t->active;
            t->probe_base = t->rate;
            t->probe_sum = 0;
        } else {
            next = t->active; /* the ceiling came down below it */
            if (t->active > t->ceiling)
                next = t->ceiling;
        }
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
        if (!t->probing)
            t->rate_n = 0; /* a new count: its own rate */
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
    char need[64];
    if (t->need_x100 > t->max * 100)
        snprintf(need, sizeof need, "more than the %d workers' time", t->max);
    else
        snprintf(need, sizeof need, "%d.%02d workers' time",
                 t->need_x100 / 100, t->need_x100 % 100);
    snprintf(buf, cap,
             "%d of %d worker%s take samples: pl_loader_next waited %d.%d%% "
             "of the last window, and keeping up takes %s",
             t->active, t->max, t->max == 1 ? "" : "s", t->wait_permille / 10,
             t->wait_permille % 10, need);
}

void ringtune_init(ringtune *t, int max, const autotune_sample *now)
{
    memset(t, 0, sizeof *t);
    t->max = max < RINGTUNE_START ? RINGTUNE_START : max;
    t->slots = RINGTUNE_START;
    t->last = *now;
}

int ringtune_step(ringtune *t, const autotune_sample *now, int workers)
{
    if (now->now_ns < t->last.now_ns + AUTOTUNE_WINDOW_NS ||
        now->batches < t->last.batches + AUTOTUNE_WINDOW_BATCHES)
        return 0;
    const uint64_t wall = now->now_ns - t->last.now_ns,
                   wait = now->ns_wait - t->last.ns_wait,
                   slot = now->ns_slot_wait - t->last.ns_slot_wait;
    const uint64_t theirs = wall * (uint64_t)(workers < 1 ? 1 : workers);
    t->last = *now;
    t->wait_permille = (int)(wait * 1000 / wall);
    t->slot_permille = (int)(slot * 1000 / theirs);
    if (t->skip > 0) {
        t->skip--;
        return 0;
    }
    if (wait * 50 > wall && slot * 10 > theirs && t->slots < t->max) {
        t->slots++;
        t->skip = 1;
        t->unchanged = 0;
        return 1;
    }
    if (++t->unchanged == AUTOTUNE_SETTLED && !t->settled) {
        t->settled = 1;
        return 2;
    }
    return 0;
}

void ringtune_describe(const ringtune *t, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "%d slots of at most %d: pl_loader_next waited %d.%d%% of the "
             "last window while the workers waited for a free slot %d.%d%% "
             "of theirs",
             t->slots, t->max, t->wait_permille / 10, t->wait_permille % 10,
             t->slot_permille / 10, t->slot_permille % 10);
}
