/* config.decode: whether JPEGs are decoded on the GPU, and the wiring that
 * does it. At create it opens the backend's GPU decoder (nvJPEG, through
 * device/gpu_decode.h) and gives the ring's slots their device memory, or
 * says why not: PL_DECODE_GPU fails create naming the reason, PL_DECODE_AUTO
 * logs it once and leaves every sample to the workers. Then each worker
 * offers it the JPEGs its route allows (workers/route.h, through the pool's
 * offload hook): the sample is decoded into its slot's device memory, on
 * that worker's stream, and the copy engine copies it into the batch after
 * that worker's event; a refused one the worker decodes itself. Owns the
 * GPU decoder; the ring owns the device memory. */
#ifndef PINLOAD_DECODE_GPU_H
#define PINLOAD_DECODE_GPU_H

#include <stdatomic.h>
#include <stdint.h>

#include "../catalog/catalog.h"
#include "../common/log.h"
#include "../device/backend.h"
#include "../device/gpu_decode.h"
#include "../workers/pool.h"
#include "output.h"
#include "ring.h"

typedef struct decode_gpu {
    gpu_decoder *g;        /* NULL: the workers decode everything */
    pl_decode in_use;      /* PL_DECODE_GPU or PL_DECODE_CPU */
    char name[320];        /* pl_info.decoder_name */
    uint64_t create_bytes; /* device memory taken at create */
    ring *ring;
    logger *log;
    const catalog *cat;
    atomic_int told_refusal; /* the first refusal's notice was given */
} decode_gpu;

/* Resolve config.decode on the caller's thread, the backend's device
 * current, once the ring is made and before the workers start: `workers`
 * worker states. 0 (whatever decodes), or PL_DECODE_GPU's error. */
int decode_gpu_open(decode_gpu *d, const pl_config *c, backend *be,
                    const output_plan *out, int workers, ring *r,
                    const catalog *cat, logger *lg);

/* Once no worker runs and the copies are done, the device current. NULL
 * decoder: nothing. */
void decode_gpu_close(decode_gpu *d);

/* The pool's offload (pool_source.offload): job's sample (a position of a
 * ring slot: job->tag, job->tag_pos) decoded on the GPU into the slot's
 * device memory. 0, or the GPU's refusal (the worker decodes it). */
int decode_gpu_sample(decode_gpu *d, pool_job *job, const offload_sample *o);

/* Device memory the GPU decoder holds now (0 without one). */
uint64_t decode_gpu_bytes(const decode_gpu *d);

#endif
