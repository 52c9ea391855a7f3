/* The host ring: `prefetch` batch slots of page-locked (or pageable, or
 * managed) memory, allocated once; under prefetch PL_AUTO it may grow by a
 * slot at a time up to a bound set before the workers start (each grown
 * slot its own allocation, kept until ring_fini; it never shrinks). The
 * claim schedule (schedule.h) says which nominal batch comes next
 * (numbered seq = 0, 1, 2, ... across epochs); a slot that becomes FREE
 * takes the next batch no slot has had yet, so with a fixed ring and
 * copies done in order slot seq % nslots holds batch seq, as before.
 *
 *   FREE --(first claim)--> FILLING --(last finish)--> READY
 *        <--(copies done)-- COPYING <--(prefetcher takes it)--
 *
 * Workers claim positions in order and write samples straight into the
 * slot; the prefetcher takes slots in order. One mutex guards the states
 * and the schedule; nobody holds it across I/O, decoding or copying. */
#ifndef PINLOAD_RING_H
#define PINLOAD_RING_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../device/backend.h"
#include "../workers/fileio.h"
#include "../order/schedule.h"

typedef enum slot_state {
    SLOT_FREE,
    SLOT_FILLING,
    SLOT_READY,
    SLOT_COPYING,
} slot_state;

/* One sample position of a slot: written by the worker that claimed it,
 * read by the prefetcher once the slot is READY. */
typedef struct ring_pos {
    int64_t index; /* dataset index */
    int32_t label;
    int32_t status; /* 0 or PL_E* */
    /* The GPU decoder wrote the sample into the slot's device memory (dev),
     * on the stream of worker `worker`; else its pixels are in `pixels`. */
    int32_t on_device;
    int32_t worker;
} ring_pos;

typedef struct ring_slot {
    uint64_t seq; /* nominal batch held now, or next when FREE */
    slot_state state;
    int64_t epoch; /* of batch seq */
    int64_t batch; /* nominal batch number within the epoch's claims */
    int64_t first; /* the epoch position of pos[0] */
    int count;     /* positions in this batch */
    int no_good;   /* the epoch's whole order held no good sample */
    int claimed;   /* positions handed to workers */
    int pending;   /* positions not finished */
    int copies;    /* outstanding copy completions while COPYING */
    uint8_t *pixels;
    uint8_t *dev;  /* the same batch's place in device memory (GPU decoding;
                      else NULL): ring_add_device */
    ring_pos *pos; /* [batch_size] */
    /* [batch_size * nextras]: position i's extra k at i * nextras + k,
     * written by the worker as it writes the pixels */
    fileio_buf *extras;
    int grown; /* pixels (and dev) are this slot's own (ring_grow) */
    struct ring *ring;
} ring_slot;

typedef struct ring {
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers: a slot became free */
    pthread_cond_t ready_cv; /* prefetcher: a slot became ready */
    ring_slot *slots; /* [max_slots]; the first nslots in use */
    int nslots;
    /* prefetch PL_AUTO: the most slots the ring may grow to (nslots for a
     * fixed ring), and how many were asked for (ring_want_slots); the
     * prefetcher's thread does the growing (ring_grow). Guarded by mu. */
    int max_slots, want_slots;
    uint64_t next_seq; /* the batch the next slot to come FREE takes */
    logger *log;
    schedule sched; /* what the next slot holds */
    size_t sample_bytes;
    int nextras; /* extras per position (ring_add_extras) */
    uint64_t claim_seq; /* batch of the next claim */
    int stop;
    backend *be;
    uint8_t *mem;
    size_t mem_bytes;
    uint8_t *dev_mem; /* the slots' device memory (ring_add_device) */
    size_t dev_bytes;
    hostmem kind; /* what mem is */
    int node;     /* the NUMA node it was placed on, or -1 */
    /* Workers' time blocked in ring_claim: no slot to fill, every one
     * holding a batch not yet copied out (pl_stats.ns_slot_wait). Guarded
     * by mu. */
    uint64_t ns_slot_wait;
    /* Workers 0 .. active - 1 take positions; the others sleep in
     * ring_claim (num_workers PL_AUTO, autotune.h). Guarded by mu. */
    int active;
} ring;

/* Allocate the slots in `memory`; if pinned memory cannot be had and
 * pinned_fallback is set, use pageable memory and log why. */
int ring_init(ring *r, int nslots, const schedule_config *sched,
              size_t sample_bytes, backend *be, pl_memory memory,
              int pinned_fallback, logger *lg);
void ring_fini(ring *r);

/* Before the workers start (after ring_init, before ring_add_extras and
 * ring_add_device): the ring may grow to max_slots (>= nslots). PL_ENOMEM
 * for the table. */
int ring_set_max(ring *r, int max_slots);

/* Ask for n slots (clamped to max_slots): the prefetcher's thread adds
 * them in ring_grow, and a wait in ring_wait_ready_for returns (idle) so
 * that it can. Thread-safe. */
void ring_want_slots(ring *r, int n);

/* The prefetcher: add the slots asked for, each with its host memory of
 * the ring's kind, its extras and its device memory when the ring has
 * some. A slot that cannot be had ends the growing for good (the bound
 * comes down to what there is) with a notice naming why; returns the slots
 * the ring has now. Call on a thread the backend is bound to. */
int ring_grow(ring *r);

/* Before the workers start: each position gets nextras buffers for its
 * sample's extras (empty until written; each grows to the largest entry
 * it held). PL_ENOMEM. */
int ring_add_extras(ring *r, int nextras);

/* Before the workers start: each slot gets device memory for its batch,
 * where the GPU decoder writes the samples it decodes (pl_last_error says
 * why not). */
int ring_add_device(ring *r);

/* Next position to fill, in order, for worker `worker`; blocks while its
 * slot is busy, and while the worker is not among the active ones. [out]
 * *slot, *pos. Returns 1, or 0 once ring_stop was called. */
int ring_claim(ring *r, int worker, ring_slot **slot, int *pos);

/* Workers [0, n) take positions from now on (at least 1); the others
 * finish the sample in hand and sleep. All of them until called. */
void ring_set_active(ring *r, int n);

/* A worker finished a position (its ring_pos is written); good: it may be
 * delivered (status 0). */
void ring_finish(ring *r, ring_slot *slot, int good);

/* The prefetcher's next slot: batch seq once READY (now COPYING), or NULL
 * once ring_stop was called. */
ring_slot *ring_wait_ready(ring *r, uint64_t seq);
/* The same, but giving up after timeout_ns (0: never), or when more slots
 * are wanted: then NULL with *idle set, so the caller can look at the
 * copies it has in flight and grow the ring. */
ring_slot *ring_wait_ready_for(ring *r, uint64_t seq, uint64_t timeout_ns,
                               int *idle);

/* While COPYING: n more completions must be reported by ring_copy_done
 * before the slot returns to FREE, for the next batch no slot has had. */
void ring_add_copies(ring *r, ring_slot *slot, int n);
void ring_copy_done(void *slot); /* a backend callback */

/* Wake and end every ring_claim and ring_wait_ready. */
void ring_stop(ring *r);

typedef struct ring_stats {
    size_t mem_bytes; /* the whole ring, grown slots included */
    int slots;        /* in use now */
    int max_slots;    /* the most it may grow to now */
    hostmem kind;     /* what it is */
    int node;         /* the NUMA node it was placed on, or -1 */
    size_t pinned_bytes;
    size_t dev_bytes; /* the slots' device memory (GPU decoding) */
    uint64_t ns_slot_wait; /* workers, waiting for a free slot */
} ring_stats;

/* The sizes grow only under prefetch PL_AUTO; the wait grows. */
void ring_get_stats(const ring *r, ring_stats *s);

#endif
