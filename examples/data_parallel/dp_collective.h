/* What data_parallel.c asks of the other ranks: one all-reduce of the
 * gradient per step, with every rank's position beside it, so that
 * each step also checks that every rank is at the same step. Two
 * transports: NCCL's all-reduce (builds with -DPL_SAMPLE_NCCL, ranks on
 * CUDA devices), and a host exchange through a POSIX shared-memory segment
 * (one node, any build). Internal to the sample; not part of pinload's API.
 *
 * Nothing here waits forever: every wait ends after the configured timeout
 * with an error naming the ranks that did not come and where they were
 * last seen. Used from one thread per process. */
#ifndef DP_COLLECTIVE_H
#define DP_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

typedef enum dp_transport {
    DP_TRANSPORT_HOST = 0, /* shared memory on this node */
    DP_TRANSPORT_NCCL = 1, /* NCCL on the ranks' CUDA devices */
} dp_transport;

/* What each rank says of itself at every exchange (its epoch and step, or
 * what it starts from): compared across ranks by the caller. */
#define DP_TAG_WORDS 4
typedef struct dp_tag {
    int64_t w[DP_TAG_WORDS];
} dp_tag;

/* Writes one line, without a newline, saying what a tag means ("epoch 2
 * step 7"). */
typedef void (*dp_describe_fn)(const dp_tag *tag, char *buf, size_t cap);

typedef struct dp_comm_config {
    int rank, world;
    dp_transport transport;
    /* The job's identity: the shared-memory segment's name and the NCCL id
     * file's. Every rank of a job must give the same; two jobs running at
     * once must not. Characters outside [A-Za-z0-9._-] become '_'. */
    const char *job;
    /* NCCL: the directory where rank 0 leaves the job's ncclUniqueId for
     * the others (one every rank can read: a shared file system when the
     * job spans nodes). */
    const char *rendezvous_dir;
    int device;     /* NCCL: the CUDA ordinal this rank's buffers live on */
    size_t count;   /* doubles in every all-reduce */
    double timeout; /* seconds any one wait may take */
    dp_describe_fn describe;
} dp_comm_config;

typedef struct dp_comm dp_comm;

/* Join the job: returns 0 with [out] *out once this rank is attached (the
 * others may not be yet: the first exchange waits for them), or -1 with
 * err[errlen] saying why. Freed by dp_comm_close. */
int dp_comm_open(const dp_comm_config *cfg, dp_comm **out, char *err,
                 size_t errlen);

/* The collective: waits until every rank has called it, then [out] all[r]
 * holds rank r's tag and, if buf is not NULL, buf[0 .. count) holds the sum
 * over ranks of what each passed there, added in rank order, so every rank
 * holds the same bits. Returns 0, or -1 with dp_comm_error() saying why (a
 * timeout naming the ranks that did not come, another rank's failure). */
int dp_comm_exchange(dp_comm *c, const dp_tag *mine, dp_tag *all, double *buf);

/* This rank is failing, for why (one line). The host transport tells the
 * other ranks, which stop at their next exchange instead of waiting out the
 * timeout; NCCL's communicator is aborted (its other ranks time out, unless
 * their launcher stops them first). NULL is a no-op. */
void dp_comm_abort(dp_comm *c, const char *why);

/* What the last failed call on c failed on. */
const char *dp_comm_error(const dp_comm *c);

/* "shared memory /pinload-dp-JOB" or "NCCL 2.28.9 on CUDA device 0". */
const char *dp_comm_name(const dp_comm *c);

/* Leave the job and free everything. NULL is a no-op. */
void dp_comm_close(dp_comm *c);

/* Whether this build can use NCCL. */
int dp_nccl_available(void);

#endif
