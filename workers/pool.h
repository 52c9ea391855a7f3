/* The worker threads. Each loops: claim a job from its source, produce the
 * sample into the job's destination, report back. The source (the loader's
 * ring) decides what to do and when to stop; the pool only computes. */
#ifndef PINLOAD_POOL_H
#define PINLOAD_POOL_H

#include <stdint.h>

#include "balance.h"
#include "fileio.h"
#include "route.h"
#include "sample.h"

#define POOL_EXTRAS_MAX 8 /* PL_EXTRAS_MAX */
#define POOL_VIEWS_MAX 16 /* PL_VIEWS_MAX */

typedef struct pool pool;

/* One sample to produce. The source fills the inputs in claim(); the pool
 * fills status and reason before finish(). */
typedef struct pool_job {
    int64_t epoch, index; /* what augment_plan_make is keyed by */
    location loc;         /* where its bytes are */
    /* Set by the source: the sample is bad before any byte is read (a tar
     * key with no image); reason holds why. */
    int preset_status;
    void *dst;                       /* augment_sample_bytes() bytes */
    /* With views (pool_config.nviews): where each view of the sample goes
     * (dst is view_dst[0]). */
    void *view_dst[POOL_VIEWS_MAX];
    /* Side data read after the pixels, into out[k] (the source's buffers,
     * grown as needed): extra k lies at loc[k] if has[k], else it is
     * empty. A sample that fails gets every entry empty. */
    struct {
        int n;
        int has[POOL_EXTRAS_MAX];
        location loc[POOL_EXTRAS_MAX];
        const char *name[POOL_EXTRAS_MAX]; /* for the reason */
        int required; /* a read's PL_ENOEXTRA fails the sample */
        fileio_buf *out;
    } extras;
    void *tag;                      /* the source's own */
    int tag_pos;                    /* likewise */
    int worker;                     /* which worker holds the job */
    int offloaded;                  /* the source's offload took it: its
                                       pixels are not in dst */
    int status;                     /* 0 or PL_E* */
    int warnings;                   /* libjpeg warnings (status 0: accepted) */
    int process_error;              /* status is the process's failure (out
                                       of descriptors or memory, retried),
                                       not the file's */
    char reason[SAMPLE_REASON_MAX]; /* why it failed, or the first
                                        warning */
} pool_job;

typedef struct pool_source {
    /* Fill *job and return 1, or return 0 to end the calling worker. May
     * block. Called without any pool lock held. */
    int (*claim)(void *ctx, pool_job *job);
    /* The job is done (job->status says how). */
    void (*finish)(void *ctx, pool_job *job);
    /* NULL, or another decoder (the GPU's), offered each image route.h
     * lets go there: 0 when it took the sample (it writes the pixels
     * elsewhere; the job's status is 0), an error (the reason written into
     * job->reason is not kept) when the worker must decode it itself.
     * Called on the worker's thread without any pool lock. */
    int (*offload)(void *ctx, pool_job *job, const offload_sample *o);
    void *ctx;
} pool_source;

typedef struct pool_config {
    int workers;
    int pin; /* worker i on the i-th allowed CPU */
    int64_t max_file_bytes;
    decode_limits limits;
    const augment_params *augment; /* outlives the pool */
    /* config.views: nviews params (outliving the pool), each sample
     * decoded once and made into each; 0: none, augment alone. */
    const augment_params *views;
    int nviews;
    /* decode PL_DECODE_AUTO with a GPU decoder: each worker splits the
     * JPEGs the offload could take between it and itself (balance.h);
     * 0: every one is offered. */
    int balance;
    pool_source source;
} pool_config;

typedef struct pool_stats {
    uint64_t decoded, failed, warned, bytes_read;
    uint64_t offloaded, declined; /* taken by the offload, or handed back */
    uint64_t ns_read, ns_decode, ns_augment;
} pool_stats;

/* Allocate the workers' state; no thread runs yet. */
int pool_create(pool **out, const pool_config *cfg);

/* Start the threads. On failure (PL_ETHREAD), the threads already started
 * run on: make the source return 0 and call pool_join as usual. */
int pool_start(pool *p);

/* Wait for every started thread to return (the source must be returning
 * 0 from claim by now). */
void pool_join(pool *p);

/* Join, then free. NULL is a no-op. */
void pool_destroy(pool *p);

/* Counters summed over the workers; safe while they run. */
void pool_get_stats(const pool *p, pool_stats *s);

#endif
