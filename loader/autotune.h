/* num_workers PL_AUTO: how many of the started workers take samples; and
 * prefetch PL_AUTO: how many ring slots (ringtune, below).
 *
 * The loader starts the threads num_workers 0 would and then uses the
 * fewest that keep pl_loader_next from waiting, so that a training step
 * slower than decoding keeps its CPUs. Every window (a quarter second
 * and four batches at least) it looks at what it measured:
 *
 *   the caller's wait in pl_loader_next: over 2% of the window means
 *     the workers are behind, unless the workers themselves waited for
 *     ring slots (then the copies or the caller's releases are behind,
 *     and more workers would not help);
 *   the workers' time on samples (read, decode, augment) against the
 *     caller's time between calls: the workers it takes to keep up,
 *     need = busy x 1.15 / (window - wait).
 *
 * A starved caller gets max(active + 1, need) workers at once; a fed one
 * loses one worker when two windows in a row say need < active, and not
 * within four windows of a rise (no see-saw on a noisy step).
 *
 * The workers' time says what they need, not what the CPUs can give: a
 * step that itself takes a CPU (a Python training loop, a host step) can
 * be starved with every worker on, and fewer workers then deliver as much
 * or more. So a caller starved at the ceiling tries one worker fewer for
 * four windows (a probe, after 32 windows, then 64, 128... while probes
 * fail): if that delivers at least 97% of the batches per second, the
 * ceiling comes down to it; else the count goes back. Every 128 windows
 * the ceiling rises by one again (the step may have changed). The
 * decision is a pure function of the figures, so that tests drive it
 * with made-up ones; the loader gathers them (loader.c). Not thread
 * safe: the loader calls it under its own lock. */
#ifndef PINLOAD_AUTOTUNE_H
#define PINLOAD_AUTOTUNE_H

#include <stddef.h>
#include <stdint.h>

#define AUTOTUNE_WINDOW_NS 250000000u /* a window: at least this long */
#define AUTOTUNE_WINDOW_BATCHES 4     /* and at least this many batches */
#define AUTOTUNE_SETTLED 8            /* unchanged windows: "settled" */
#define AUTOTUNE_PROBE_WINDOWS 4      /* a probe of one worker fewer */
#define AUTOTUNE_PROBE_FIRST 32       /* windows before the first probe */
#define AUTOTUNE_PROBE_LAST 256       /* the longest wait between probes */
#define AUTOTUNE_CEILING_RETRY 128    /* windows until the ceiling rises */

/* Counters since create, as the loader reads them. */
typedef struct autotune_sample {
    uint64_t now_ns;
    uint64_t batches;      /* handed to the caller */
    uint64_t ns_wait;      /* the caller, in pl_loader_next */
    uint64_t ns_busy;      /* the workers, on samples */
    uint64_t ns_slot_wait; /* the workers, for a free ring slot */
} autotune_sample;

typedef struct autotune {
    int max, active;
    int down_votes, cooldown, unchanged;
    int settled; /* said so once */
    int ceiling; /* the most the starved rule gives */
    /* Batches per second at the active count (a moving mean over rate_n
     * windows), and the probe: windows left, from which count, the rate
     * there, the sum of the probe's rates. */
    double rate, probe_base, probe_sum;
    int rate_n, probing, probe_from, probe_every, since_probe;
    int since_ceiling;
    autotune_sample last;
    /* The last window's figures, for the notice: per mille of the window
     * the caller waited, and the workers it takes (x 100). */
    int wait_permille, need_x100;
} autotune;

/* max workers exist; all of them take samples at first. */
void autotune_init(autotune *t, int max, const autotune_sample *now);

/* prefetch PL_AUTO: how many ring slots. The ring starts at 2 (the
 * default) and grows, up to RINGTUNE_MAX or what the pinned bound allows, by one slot in a window where both
 *
 *   the caller waited in pl_loader_next over 2% of the window, and
 *   the workers waited for a free ring slot over 10% of their time
 *     (the active ones' window, summed),
 *
 * that is, batches were late while the workers could not go on: the
 * ring, not the workers, held the pipeline back. That is what happens when
 * one slow sample (a large image, a cold file, a remote read) holds its
 * batch back: the workers finish the batches behind it, then stop, and
 * the caller waits for the slow one; another slot lets them go on. A
 * window after a growth is not judged (it began with the old ring). It
 * never shrinks (the pinned memory is taken; the bound is set at create,
 * max), and says once, after AUTOTUNE_SETTLED windows without a growth,
 * where it settled. Pure, like autotune_step: the loader gathers the
 * figures. */
typedef struct ringtune {
    int slots, max;
    int skip;      /* windows not to judge */
    int unchanged; /* windows since the last growth */
    int settled;   /* said so once */
    autotune_sample last;
    int wait_permille, slot_permille; /* the last window's, for the notice */
} ringtune;

#define RINGTUNE_START 2
/* The most slots it grows to, where the pinned bound allows: eight
 * batches cover a stall of eight steps, and every rank of a node may grow
 * as far (pinned.h counts them all at this bound). */
#define RINGTUNE_MAX 8

void ringtune_init(ringtune *t, int max, const autotune_sample *now);

/* The figures now, with `workers` taking samples: 1 if a window ended and
 * the ring should grow (t->slots is the new count), 2 if it has stood for
 * AUTOTUNE_SETTLED windows (said once), else 0. */
int ringtune_step(ringtune *t, const autotune_sample *now, int workers);

/* "3 slots of at most 8: pl_loader_next waited 3.1% of the last window
 * while the workers waited for a free slot 22.0% of theirs" into buf. */
void ringtune_describe(const ringtune *t, char *buf, size_t cap);

/* The figures now: 1 if a window ended and the active count changed
 * (t->active is the new one), 2 if it ended and the count has now stood
 * for AUTOTUNE_SETTLED windows (said once), else 0. */
int autotune_step(autotune *t, const autotune_sample *now);

/* "2 of 4 workers: the caller waited 0.4% of the last window; the
 * workers it takes: 1.62" into buf. */
void autotune_describe(const autotune *t, char *buf, size_t cap);

#endif
