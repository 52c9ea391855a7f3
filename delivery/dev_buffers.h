/* The device buffers and their hand-off to the caller (the handoff
 * object, handoff_*: the queue between the copy engine and the caller,
 * which it is named for; the file is named for what it owns). It owns
 * each buffer whole: its device memory (and, as the output plan needs, a
 * uint8 staging area and a page-locked host mirror), its copy stream, its
 * state and its life, from handoff_init to handoff_fini; and the
 * normalisation table on the device that the copy engine's kernel reads.
 * It keeps the queue of finished batches that pl_loader_next pops,
 * pl_loader_release (stream-ordered on CUDA, with its fallback on the
 * host), PL_EBUSY, the epoch boundaries the caller sees, where the caller
 * stands (pl_loader_state) and the sticky error. The copy engine
 * (copier.h) fills the buffers it lends.
 *
 * The pool grows on demand (config.max_device_buffers): when the caller
 * holds every buffer and waits for the next batch, which today would be
 * PL_EBUSY, it asks the copy engine for one more buffer instead, up to
 * the bound; the copy engine makes it on its own thread (the device bound
 * there) and keeps it until fini. Each buffer is allocated on its own, so
 * a pl_batch pointer into one stays valid while the table grows.
 *
 *   device buffer: FREE -> FILLING -> QUEUED -> HELD -> RELEASING -> FREE
 *                                                            \-> RETIRED
 *
 * FILLING belongs to the copy engine (handoff_acquire .. handoff_queue);
 * RELEASING lasts while pl_loader_release records the release event (or,
 * if it cannot, waits for the caller's stream), without the lock; a buffer
 * whose release can be ordered neither way is RETIRED, never used again,
 * and the loader's error is set. One mutex, handoff.mu, guards it all. */
#ifndef PINLOAD_DEV_BUFFERS_H
#define PINLOAD_DEV_BUFFERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/log.h"
#include "../device/backend.h"
#include "../workers/fileio.h"
#include "output.h"
#include "../order/resume.h"

typedef enum dbuf_state {
    DBUF_FREE,
    DBUF_FILLING,
    DBUF_QUEUED,
    DBUF_HELD,
    DBUF_RELEASING,
    DBUF_RETIRED,
} dbuf_state;

/* One device buffer: its memory, its stream and its state. */
typedef struct dbuf {
    pl_batch batch; /* first: the caller's pointer is the dbuf's */
    int id;         /* its place in the hand-off's table */
    dbuf_state state;
    void *dev;
    void *staging; /* normalize: the batch's uint8 pixels on the device */
    void *mirror;  /* keep_host on CUDA: page-locked copy of the batch */
    size_t mirror_locked; /* its bytes, if the mirror is page-locked */
    be_stream *stream;
    int32_t *labels;
    float *soft; /* [batch_size][num_classes]: a batch op's soft labels */
    int64_t *indices;
    int32_t *status;
    int64_t next_pos; /* the epoch position after the batch's last sample */
    /* The batch's extras (pl_batch.extras points here): each one's entries
     * in data, grown to the largest batch it held, offsets [batch_size +
     * 1]. */
    pl_extra extras[PL_EXTRAS_MAX];
    uint8_t *extra_data[PL_EXTRAS_MAX];
    size_t extra_cap[PL_EXTRAS_MAX];
    uint64_t *extra_off[PL_EXTRAS_MAX];
    pl_view views[PL_VIEWS_MAX]; /* config.views (pl_batch.views) */
} dbuf;

typedef struct handoff_config {
    backend *be;
    int nbufs;    /* buffers made at init */
    int max_bufs; /* the most there may be, >= nbufs (the bound on growth) */
    int batch_size;
    const output_plan *out; /* sizes, gpu_normalize and its table */
    int keep_host; /* a host mirror (device memory is not host memory) */
    resume_point start;
    logger *log; /* says once that the pool grew */
    int nextras;                   /* config.extras */
    const char *const *extra_names; /* [nextras], outliving the hand-off */
} handoff_config;

typedef struct handoff_stats {
    uint64_t batches;           /* handed to the caller */
    uint64_t ns_wait;           /* the caller's time in pl_loader_next */
    uint64_t ns_buffer_wait;    /* the copy engine's, in handoff_acquire */
    size_t mirror_bytes_locked; /* keep_host's page-locked mirrors */
    int buffers;                /* now: nbufs plus those added */
} handoff_stats;

typedef struct handoff {
    handoff_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t user_cv; /* caller: a batch, an epoch end or an error */
    pthread_cond_t pf_cv;   /* copy engine: a buffer was released */
    dbuf **bufs; /* nbufs of them, each allocated on its own */
    int nbufs;
    int cap;    /* entries of bufs and queue */
    int *queue; /* ids of QUEUED buffers, oldest first, modulo cap */
    int qhead, qlen;
    int held;
    int grow;            /* the caller waits for a buffer to be added */
    int grow_failed;     /* adding one failed: PL_EBUSY, grow_msg says why */
    char grow_msg[512];
    int next_free;
    int wants_buffer; /* the copy engine waits for a release */
    int64_t user_epoch;
    int64_t epochs_done; /* epochs whose batches are all queued */
    /* Where the caller stands: after batch at_batch - 1 of epoch at_epoch,
     * the next sample at or after position at_pos (pl_loader_state). */
    int64_t at_epoch, at_batch, at_pos;
    int error; /* sticky: PL_ON_ERROR_FAIL, or a CUDA failure */
    char error_msg[1024];
    int stop;
    int callers;   /* threads inside handoff_next: stop waits for them */
    void *lut_dev; /* gpu_normalize: the table in device memory */
    size_t mirror_bytes_locked;
    _Atomic int told_host_release; /* release_on_host's notice, given once */
    _Atomic uint64_t batches, ns_wait, ns_buffer_wait;
} handoff;

/* Every buffer FREE, with its memory and stream (on the caller's thread,
 * the backend's device current); the table on the device. On failure
 * pl_last_error says what could not be had; handoff_fini frees what was. */
int handoff_init(handoff *h, const handoff_config *cfg);
/* Wait for each buffer's stream (its copies, and the caller's kernels
 * reading the batch it released last) and free everything; once nothing
 * can use a buffer any more (after copier_stop), the device current.
 * The waits take `ms` milliseconds at most in all (< 0: no limit): a
 * buffer whose stream still runs then is left allocated, its stream
 * too (the ring slot its copies read, and their callback, must outlive
 * it). Returns how many were. */
int handoff_fini(handoff *h, int ms);

/* Ask each buffer's stream whether it failed (be->ops->query); the first
 * failure sets the loader's error and is returned. Thread-safe. */
int handoff_check_streams(handoff *h);
/* Add every buffer's harvested copy time (be->ops->copy_time) to *ns and
 * *bytes. Thread-safe. */
void handoff_copy_time(handoff *h, uint64_t *ns, uint64_t *bytes);

/* The normalisation table in device memory (gpu_normalize), or NULL. */
const void *handoff_lut(const handoff *h);

/* ---- the copy engine's side ---- */

/* The next FREE buffer, now FILLING; blocks while the caller holds them
 * all, and adds one when the caller asks for it (which, past
 * cfg.max_bufs, lets pl_loader_next report PL_EBUSY). NULL once
 * stopped. */
dbuf *handoff_acquire(handoff *h);
/* Entry i of each extra of the FILLING buffer d's batch: src[k]'s bytes,
 * after entries 0 .. i - 1 (i = 0 starts the batch afresh). PL_ENOMEM. */
int handoff_put_extras(handoff *h, dbuf *d, int i, const fileio_buf *src);
/* A FILLING buffer whose batch is complete joins the queue. */
void handoff_queue(handoff *h, dbuf *d);
/* The epoch's batches are all queued; `unused` (or NULL), a buffer
 * acquired but never filled, goes back FREE. */
void handoff_epoch_done(handoff *h, dbuf *unused);
/* A FILLING buffer goes back FREE (the copy engine is stopping). */
void handoff_unfill(handoff *h, dbuf *d);
/* Sticky: from now on pl_loader_next returns `code` after the batches
 * already queued; the first error set is the one kept. Returns code. */
int handoff_fail(handoff *h, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Wake and end every wait (destroy). */
void handoff_stop(handoff *h);

/* ---- the caller's side ---- */

int handoff_next(handoff *h, const pl_batch **out);
int handoff_release(handoff *h, const pl_batch *b,
                    struct CUstream_st *const *streams, int n);
/* Where the caller stands (see at_epoch); thread-safe. */
void handoff_position(handoff *h, int64_t *epoch, int64_t *batch, int64_t *pos);
/* Thread-safe. */
void handoff_get_stats(const handoff *h, handoff_stats *s);

#endif
