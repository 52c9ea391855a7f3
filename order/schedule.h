/* The claim schedule: the sequence of nominal batches the workers fill,
 * each a run of up to batch_size consecutive positions of an epoch
 * (numbered within the epoch's claims).
 *
 * Each epoch first claims its `positions`. With a `target` (under
 * PL_ON_ERROR_SKIP: the good samples an epoch must deliver), the schedule
 * then waits until every position claimed so far is decoded and, if fewer
 * than `target` were good, tops the epoch up with the positions that follow
 * (the loader maps position j past the rank's order to j mod order_len:
 * the order wraps around), as many rounds as it takes, before the next
 * epoch starts. An epoch whose whole order held no good sample ends in a
 * batch with no_good set and no position, after which nothing more is
 * scheduled.
 *
 * Not thread-safe: the ring calls it under its mutex. */
#ifndef PINLOAD_SCHEDULE_H
#define PINLOAD_SCHEDULE_H

#include <stdint.h>

#include "resume.h"

typedef struct schedule_config {
    int64_t positions; /* claimed in every epoch before any top-up */
    int batch_size;
    int64_t target;    /* good positions an epoch needs; 0: no top-up */
    int64_t order_len; /* the rank's order: past it, positions repeat */
    resume_point start;
} schedule_config;

/* One nominal batch. */
typedef struct nominal_batch {
    int64_t epoch;
    int64_t batch; /* its number within the epoch's claims */
    int64_t first; /* the epoch position of its first sample */
    int count;     /* positions, 0 when no_good */
    int no_good;   /* the epoch's whole order held no good sample */
} nominal_batch;

typedef struct schedule {
    schedule_config cfg;
    /* The epoch being scheduled, its next position, the end of what is
     * scheduled so far, where it started and its next batch number; with a
     * target, what is known of it: positions handed out and not finished,
     * good ones, good ones needed. */
    int64_t epoch, pos, end, first, batch;
    int64_t pending, good, need;
    /* The current top-up round (its first position, the good count when it
     * began) and the positions claimed since a good sample was last met: a
     * whole pass over the order without one ends the epoch, even when a
     * sample was good once (its file gone or changed since). */
    int64_t round_first, round_good0, dry;
    int dead; /* a no_good batch was scheduled: nothing more comes */
} schedule;

void schedule_init(schedule *s, const schedule_config *cfg);

/* The next nominal batch into *nb: 1, or 0 when it cannot be known yet
 * (the epoch's positions are still being decoded, under a target). After a
 * no_good batch, every call gives another. */
int schedule_next(schedule *s, nominal_batch *nb);

/* A position of the epoch being scheduled was handed to a worker. */
void schedule_claimed(schedule *s);

/* A position of `epoch` was decoded, good or not. Returns 1 when that
 * makes the next batch knowable (the epoch's last pending position under a
 * target), so waiting claims should look again. */
int schedule_finished(schedule *s, int64_t epoch, int good);

/* The nominal batches of an epoch, without top-ups. */
int64_t schedule_nominal_batches(const schedule *s);

#endif
