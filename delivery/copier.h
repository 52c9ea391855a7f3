/* The copy engine. One thread takes ring slots in order and copies their
 * samples into the device buffers the hand-off (dev_buffers.h) lends it:
 * one copy per run of consecutive good samples, so a sample skipped under
 * PL_ON_ERROR_SKIP closes up the batch without any extra copy. A full
 * buffer gets a ready event and is handed to the caller's queue. An epoch
 * ends when it has placed samples_per_epoch samples: the ring's top-ups
 * make sure that many come under SKIP, and what a slot holds past that
 * point is not delivered. The buffers, their streams and the table the
 * GPU normalises with are the hand-off's; this module owns its thread. */
#ifndef PINLOAD_COPIER_H
#define PINLOAD_COPIER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../catalog/catalog.h"
#include "../device/backend.h"
#include "../device/gpu_decode.h"
#include "dev_buffers.h"
#include "failures.h"
#include "output.h"
#include "../order/resume.h"
#include "ring.h"

typedef struct copier_config {
    ring *ring;
    handoff *ho; /* the buffers, and where finished batches go */
    backend *be;
    failures *fails;
    const catalog *cat; /* names a bad sample under PL_ON_ERROR_FAIL */
    int batch_size;
    /* What the ring holds and what is delivered; with gpu_normalize the
     * ring holds uint8 samples and the device float ones, made on the GPU
     * from the plan's table. */
    const output_plan *out;
    pl_on_error on_error;
    int64_t samples_per_epoch; /* delivered in every epoch */
    resume_point start;
    /* The GPU decoder (NULL: none): a position it decoded is copied from
     * the slot's device memory, after the event of the worker that queued
     * it (workers: how many there are). */
    gpu_decoder *gpu;
    int workers;
} copier_config;

typedef struct copier_stats {
    uint64_t bytes_copied, ns_copy; /* issuing the copies, host time */
    uint64_t ns_h2d, bytes_h2d;     /* the copies' GPU time (CUDA only) */
} copier_stats;

typedef struct copier {
    copier_config cfg;
    pthread_t thread;
    int started;
    _Atomic uint64_t bytes_copied, ns_copy;
    _Atomic uint64_t ns_h2d, bytes_h2d; /* GPU copy time, harvested */
    uint8_t *waited; /* [workers]: whose events the current run waited for */
} copier;

/* Start the thread on cfg (which outlives it). PL_ETHREAD. */
int copier_start(copier *p, const copier_config *cfg);
/* End the thread (after ring_stop and handoff_stop) and join it. */
void copier_stop(copier *p);

/* The counters so far; harvests the copies' GPU time (CUDA; zeros on the
 * host backend). Thread-safe. */
void copier_get_stats(copier *p, copier_stats *s);

#endif
