/* The prefetcher and the hand-off to the caller. One thread takes ring
 * slots in order and copies their samples into device buffers: one copy per
 * run of consecutive good samples, so a sample skipped under
 * PL_ON_ERROR_SKIP closes up the batch without any extra copy. A full
 * buffer gets a ready event and joins the queue that pl_loader_next pops;
 * pl_loader_release hands it back, stream-ordered on CUDA. An epoch ends
 * when it has placed samples_per_epoch samples: the ring's top-ups make
 * sure that many come under SKIP, and what a slot holds past that point is
 * not delivered.
 *
 *   device buffer: FREE -> FILLING -> QUEUED -> HELD -> RELEASING -> FREE
 *
 * RELEASING lasts while pl_loader_release records the release event (or,
 * if it cannot, waits for the caller's stream), without the lock; a buffer
 * whose release can be ordered neither way is RETIRED, never used again,
 * and the loader's error is set. */
#ifndef PINLOAD_PREFETCH_H
#define PINLOAD_PREFETCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend.h"
#include "dataset.h"
#include "failures.h"
#include "ring.h"

typedef enum dbuf_state {
    DBUF_FREE,
    DBUF_FILLING,
    DBUF_QUEUED,
    DBUF_HELD,
    DBUF_RELEASING,
    DBUF_RETIRED,
} dbuf_state;

typedef struct dbuf {
    pl_batch batch; /* first: the caller's pointer is the dbuf's */
    dbuf_state state;
    void *dev;
    void *staging; /* normalize: the batch's uint8 pixels on the device */
    void *mirror;  /* keep_host on CUDA: page-locked copy of the batch */
    be_stream *stream;
    int32_t *labels;
    int64_t *indices;
    int32_t *status;
    int64_t next_pos; /* the epoch position after the batch's last sample */
} dbuf;

typedef struct prefetch_config {
    ring *ring;
    backend *be;
    failures *fails;
    const dataset *ds;
    int nbufs;
    int batch_size;
    size_t sample_bytes; /* in the ring, as the workers write them */
    /* normalize: the ring holds uint8 samples, the device float ones, made
     * on the GPU from `lut` (3 x 256 floats, or halves when half). */
    int normalize, half, width, height;
    size_t out_sample_bytes; /* as delivered */
    const void *lut;
    size_t lut_bytes;
    int keep_host;
    pl_on_error on_error;
    int64_t samples_per_epoch; /* delivered in every epoch */
    int64_t first_epoch;
    /* Resuming: the first epoch goes on from batch start_batch, whose first
     * sample is at or after epoch position start_pos. */
    int64_t start_batch, start_pos;
    int start_done; /* the first epoch's batches were all delivered */
} prefetch_config;

typedef struct prefetch {
    prefetch_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t user_cv; /* caller: a batch, an epoch end or an error */
    pthread_cond_t pf_cv;   /* prefetcher: a buffer was released */
    dbuf *bufs;
    int *queue; /* ids of QUEUED buffers, oldest first */
    int qhead, qlen;
    int held;
    int next_free;
    int wants_buffer; /* the prefetcher waits for a release */
    int64_t user_epoch;
    int64_t epochs_done; /* epochs whose batches are all queued */
    /* Where the caller stands: after batch at_batch - 1 of epoch at_epoch,
     * the next sample at or after position at_pos (pl_loader_state). */
    int64_t at_epoch, at_batch, at_pos;
    int error; /* sticky: PL_ON_ERROR_FAIL, or a CUDA failure */
    char error_msg[1024];
    int stop;
    pthread_t thread;
    int started;
    size_t mirror_bytes_locked;
    void *lut_dev; /* normalize: the table in device memory */
    _Atomic uint64_t bytes_copied, batches, ns_copy, ns_wait;
    _Atomic uint64_t ns_h2d, bytes_h2d; /* GPU copy time, harvested */
} prefetch;

int prefetch_init(prefetch *p, const prefetch_config *cfg);
int prefetch_start(prefetch *p);
/* End the thread (after ring_stop) and join it. */
void prefetch_stop(prefetch *p);
/* Wait for every copy and free the buffers; after prefetch_stop. */
void prefetch_fini(prefetch *p);

int prefetch_next(prefetch *p, const pl_batch **out);

/* Where the caller stands (see at_epoch); thread-safe. */
void prefetch_position(prefetch *p, int64_t *epoch, int64_t *batch,
                       int64_t *pos);

/* The GPU time and bytes of the copies completed so far (CUDA; zeros on
 * the host backend). Thread-safe. */
void prefetch_copy_time(prefetch *p, uint64_t *ns, uint64_t *bytes);
int prefetch_release(prefetch *p, const pl_batch *b,
                     struct CUstream_st *stream);

#endif
