/* The data-parallel sample's collectives (dp_collective.h): NCCL on CUDA
 * devices, or a shared-memory segment on the host.
 *
 * The host transport. Rank 0 creates /pinload-dp-JOB (shm_open, O_EXCL),
 * sizes it and sets up a robust process-shared mutex and a condition
 * variable on CLOCK_MONOTONIC in it, then marks it ready; the other ranks
 * open it once it exists. Each rank has a slot of two tags and two
 * gradients, by the parity of the exchange: a rank writes its slot of
 * parity n & 1, meets the others at a barrier, then reads every slot of
 * that parity and adds them in rank order. No rank can write parity n & 1
 * again (exchange n + 2) before every rank has entered the barrier of
 * exchange n + 1, that is, finished reading exchange n: one barrier per
 * exchange. The barrier is the mutex and condition variable rather than a
 * pthread_barrier_t, which cannot time out: a wait that times out names the
 * ranks that never came. The segment's name is removed once every rank has
 * attached (after the first exchange), so a job leaves nothing behind. */
#define _POSIX_C_SOURCE 200809L

#include "dp_collective.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef PL_SAMPLE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
/* Communicators that never block, so that a missing rank is a timeout and
 * not a hang, came with NCCL 2.14 (the Makefile looks for no older). */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error                                                                         \
    "examples/data_parallel/dp_collective.c needs NCCL 2.14 or newer (make NCCL=0 builds the host exchange only)"
#endif
#endif

#define SEG_MAGIC 0x31706470u /* "pdp1" */

typedef struct seg_rank {
    int32_t pid; /* 0 until the rank attached */
    int32_t unused;
    uint64_t entered;             /* exchanges this rank has entered */
    int64_t tag[2][DP_TAG_WORDS]; /* by the exchange's parity */
} seg_rank;

typedef struct seg_head {
    _Atomic uint32_t ready; /* SEG_MAGIC once rank 0 has set it up */
    int32_t world;
    uint64_t count;
    pthread_mutex_t mu;  /* robust, process-shared: guards what follows */
    pthread_cond_t cv;   /* process-shared, on CLOCK_MONOTONIC */
    uint64_t generation; /* barriers completed */
    int32_t arrived;     /* ranks in the current barrier */
    int32_t failed;      /* 1 + the rank that failed first; 0: none */
    char why[512];       /* what it failed on */
    seg_rank rank[];     /* [world], then the gradients [2][world][count] */
} seg_head;

typedef struct host_link {
    int fd;
    seg_head *seg;
    size_t bytes;
    double *data; /* [2][world][count] in the segment */
    int owner;    /* rank 0: made the name, removes it */
    int unlinked;
} host_link;

#ifdef PL_SAMPLE_NCCL
typedef struct nccl_link {
    ncclComm_t comm;
    cudaStream_t stream;
    double *d_buf, *h_buf;    /* [count], device and pinned host */
    int64_t *d_tags, *h_tags; /* [world][DP_TAG_WORDS] */
    int64_t *h_mine;          /* [DP_TAG_WORDS], pinned */
} nccl_link;
#endif

struct dp_comm {
    dp_comm_config cfg;
    uint64_t exchanges; /* completed */
    char shm_name[160];
    char name[200];
    char err[1536];
    host_link host;
#ifdef PL_SAMPLE_NCCL
    nccl_link nccl;
#endif
};

/* ---- small things --------------------------------------------------------
 */

static int fail(dp_comm *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap_us(long us)
{
    const struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* CLOCK_MONOTONIC `seconds` from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double whole = (double)(time_t)seconds;
    ts.tv_sec += (time_t)seconds;
    ts.tv_nsec += (long)((seconds - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static void describe(const dp_comm *c, const int64_t *w, char *buf, size_t cap)
{
    dp_tag t;
    memcpy(t.w, w, sizeof t.w);
    c->cfg.describe(&t, buf, cap);
}

/* ---- the host transport: the segment -------------------------------------
 */

static size_t seg_data_offset(int world)
{
    const size_t head = sizeof(seg_head) + (size_t)world * sizeof(seg_rank);
    return (head + 63) & ~(size_t)63;
}

static size_t seg_bytes(int world, size_t count)
{
    return seg_data_offset(world) + 2 * (size_t)world * count * sizeof(double);
}

/* The mutex is robust: if a rank died holding it, the lock is ours, the job
 * is marked failed, and the exchange reports it. */
static int seg_lock(dp_comm *c)
{
    seg_head *s = c->host.seg;
    const int e = pthread_mutex_lock(&s->mu);
    if (e == EOWNERDEAD) {
        pthread_mutex_consistent(&s->mu);
        if (!s->failed) {
            s->failed = s->world + 1;
            snprintf(s->why, sizeof s->why,
                     "a rank died inside the exchange (holding its lock)");
        }
        return 0;
    }
    if (e)
        return fail(c, "locking the exchange: %s", strerror(e));
    return 0;
}

static void seg_unlock(dp_comm *c)
{
    pthread_mutex_unlock(&c->host.seg->mu);
}

/* Mark the job failed, with why, and wake every waiting rank. */
static void host_abort(dp_comm *c, const char *why)
{
    seg_head *s = c->host.seg;
    if (!s || seg_lock(c) < 0)
        return;
    if (!s->failed) {
        s->failed = c->cfg.rank + 1;
        snprintf(s->why, sizeof s->why, "%.*s", (int)sizeof s->why - 1, why);
        pthread_cond_broadcast(&s->cv);
    }
    seg_unlock(c);
}

static int seg_init_sync(dp_comm *c, seg_head *s)
{
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    int e = pthread_mutexattr_init(&ma);
    if (!e)
        e = pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    if (!e)
        e = pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    if (!e)
        e = pthread_mutex_init(&s->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    if (e)
        return fail(c, "a process-shared mutex: %s", strerror(e));
    e = pthread_condattr_init(&ca);
    if (!e)
        e = pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    if (!e)
        e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!e)
        e = pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e)
        return fail(c, "a process-shared condition variable: %s", strerror(e));
    return 0;
}

static int seg_map(dp_comm *c, size_t bytes)
{
    void *p =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->host.fd, 0);
    if (p == MAP_FAILED)
        return fail(c, "mapping %s: %s", c->shm_name, strerror(errno));
    c->host.seg = p;
    c->host.bytes = bytes;
    return 0;
}

/* Rank 0: create, size, set up, then mark ready. */
static int seg_create(dp_comm *c, size_t bytes)
{
    host_link *h = &c->host;
    h->fd = shm_open(c->shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (h->fd < 0 && errno == EEXIST)
        return fail(c,
                    "shared-memory segment %s exists already: another job "
                    "with the id '%s' is running, or one that crashed left "
                    "it behind (remove /dev/shm%s, or give another job id)",
                    c->shm_name, c->cfg.job, c->shm_name);
    if (h->fd < 0)
        return fail(c, "creating %s: %s", c->shm_name, strerror(errno));
    h->owner = 1;
    if (ftruncate(h->fd, (off_t)bytes) != 0)
        return fail(c, "sizing %s to %zu bytes: %s", c->shm_name, bytes,
                    strerror(errno));
    if (seg_map(c, bytes) < 0)
        return -1;
    seg_head *s = h->seg; /* zero-filled by ftruncate */
    s->world = c->cfg.world;
    s->count = c->cfg.count;
    if (seg_init_sync(c, s) < 0)
        return -1;
    atomic_store_explicit(&s->ready, SEG_MAGIC, memory_order_release);
    return 0;
}

/* Other ranks: wait for rank 0's segment to exist, be sized and be ready.
 */
static int seg_join(dp_comm *c, size_t bytes)
{
    host_link *h = &c->host;
    const double give_up = now_s() + c->cfg.timeout;
    struct stat st = {0};
    for (;;) {
        h->fd = shm_open(c->shm_name, O_RDWR, 0);
        if (h->fd < 0 && errno != ENOENT)
            return fail(c, "opening %s: %s", c->shm_name, strerror(errno));
        if (h->fd >= 0 && fstat(h->fd, &st) == 0 && st.st_size > 0)
            break;
        if (h->fd >= 0)
            close(h->fd);
        h->fd = -1;
        if (now_s() > give_up)
            return fail(c,
                        "timed out after %g s waiting for rank 0 to create "
                        "%s (is rank 0 running, on this node, with the same "
                        "job id? The host exchange is one node's shared "
                        "memory: a job across nodes needs NCCL)",
                        c->cfg.timeout, c->shm_name);
        nap_us(5000);
    }
    if (seg_map(c, (size_t)st.st_size) < 0)
        return -1;
    seg_head *s = h->seg;
    while (atomic_load_explicit(&s->ready, memory_order_acquire) != SEG_MAGIC) {
        if (now_s() > give_up)
            return fail(c,
                        "timed out after %g s waiting for rank 0 to set up %s",
                        c->cfg.timeout, c->shm_name);
        nap_us(1000);
    }
    if ((size_t)st.st_size != bytes || s->world != c->cfg.world ||
        s->count != c->cfg.count) {
        fail(c,
             "%s was made for %d ranks exchanging %llu values; this rank "
             "expects %d ranks and %zu values (do all ranks run the same "
             "program and arguments?)",
             c->shm_name, s->world, (unsigned long long)s->count, c->cfg.world,
             c->cfg.count);
        host_abort(c, c->err); /* the others need not wait it out */
        return -1;
    }
    return 0;
}

/* Claim this rank's slot: two processes with the same RANK is an error. */
static int seg_attach(dp_comm *c)
{
    if (seg_lock(c) < 0)
        return -1;
    seg_rank *me = &c->host.seg->rank[c->cfg.rank];
    const int32_t other = me->pid;
    if (!other)
        me->pid = (int32_t)getpid();
    seg_unlock(c);
    if (other) {
        fail(c,
             "rank %d is taken by pid %d already: two processes of this job "
             "have RANK=%d",
             c->cfg.rank, (int)other, c->cfg.rank);
        host_abort(c, c->err);
        return -1;
    }
    return 0;
}

static int host_open(dp_comm *c)
{
    const size_t bytes = seg_bytes(c->cfg.world, c->cfg.count);
    c->host.fd = -1;
    const int rc = c->cfg.rank == 0 ? seg_create(c, bytes) : seg_join(c, bytes);
    if (rc < 0)
        return -1;
    c->host.data =
        (double *)((char *)c->host.seg + seg_data_offset(c->cfg.world));
    snprintf(c->name, sizeof c->name, "shared memory %s", c->shm_name);
    return seg_attach(c);
}

static void host_close(dp_comm *c)
{
    host_link *h = &c->host;
    if (h->seg)
        munmap(h->seg, h->bytes);
    if (h->fd >= 0)
        close(h->fd);
    if (h->owner && !h->unlinked)
        shm_unlink(c->shm_name);
}

/* ---- the host transport: the barrier
 * -------------------------------------
 */

/* Under the lock: why the job failed, as this rank reports it. */
static int failed_msg(dp_comm *c)
{
    const seg_head *s = c->host.seg;
    if (s->failed > 0 && s->failed <= s->world)
        return fail(c, "rank %d failed: %s", s->failed - 1, s->why);
    return fail(c, "%s", s->why);
}

/* Under the lock, after a timeout: which ranks are missing, and where each
 * was last seen. */
static void missing_msg(dp_comm *c, uint64_t mine, int parity)
{
    const seg_head *s = c->host.seg;
    char here[160], *p = c->err, *const end = c->err + sizeof c->err;
    describe(c, s->rank[c->cfg.rank].tag[parity], here, sizeof here);
    p +=
        snprintf(p, (size_t)(end - p), "timed out after %g s at %s waiting for",
                 c->cfg.timeout, here);
    for (int r = 0; r < s->world && p < end; r++) {
        const seg_rank *o = &s->rank[r];
        if (o->entered >= mine)
            continue;
        char last[160] = "";
        if (o->entered)
            describe(c, o->tag[(o->entered - 1) & 1], last, sizeof last);
        const int alive = o->pid && kill(o->pid, 0) == 0;
        if (!o->pid)
            p +=
                snprintf(p, (size_t)(end - p), " rank %d (never attached);", r);
        else if (!o->entered)
            p += snprintf(p, (size_t)(end - p),
                          " rank %d (pid %d, %s, attached but never "
                          "exchanged);",
                          r, (int)o->pid, alive ? "running" : "gone");
        else
            p += snprintf(p, (size_t)(end - p),
                          " rank %d (pid %d, %s, last at %s);", r, (int)o->pid,
                          alive ? "running" : "gone", last);
    }
    if (p > c->err && p < end && p[-1] == ';')
        p[-1] = '\0';
}

/* Enter exchange n (parity n & 1) with this rank's tag, and wait for every
 * rank to enter it. */
static int host_barrier(dp_comm *c, const dp_tag *mine, int parity)
{
    seg_head *s = c->host.seg;
    if (seg_lock(c) < 0)
        return -1;
    if (s->failed) {
        failed_msg(c);
        seg_unlock(c);
        return -1;
    }
    seg_rank *me = &s->rank[c->cfg.rank];
    memcpy(me->tag[parity], mine->w, sizeof mine->w);
    const uint64_t entered = ++me->entered;
    if (++s->arrived == s->world) {
        s->arrived = 0;
        s->generation++;
        pthread_cond_broadcast(&s->cv);
        seg_unlock(c);
        return 0;
    }
    const uint64_t gen = s->generation;
    const struct timespec until = deadline_in(c->cfg.timeout);
    int e = 0;
    while (s->generation == gen && !s->failed && !e) {
        e = pthread_cond_timedwait(&s->cv, &s->mu, &until);
        if (e == EOWNERDEAD) { /* its holder died: see seg_lock */
            pthread_mutex_consistent(&s->mu);
            if (!s->failed) {
                s->failed = s->world + 1;
                snprintf(s->why, sizeof s->why,
                         "a rank died inside the exchange (holding its "
                         "lock)");
            }
            e = 0;
        }
    }
    int rc = 0;
    if (s->generation == gen && s->failed) {
        rc = failed_msg(c);
    } else if (s->generation == gen) { /* the others must stop too */
        if (e == ETIMEDOUT)
            missing_msg(c, entered, parity);
        else
            fail(c, "waiting for the other ranks: %s", strerror(e));
        s->failed = c->cfg.rank + 1;
        snprintf(s->why, sizeof s->why, "%.*s", (int)sizeof s->why - 1, c->err);
        pthread_cond_broadcast(&s->cv);
        rc = -1;
    }
    seg_unlock(c);
    return rc;
}

static int host_exchange(dp_comm *c, const dp_tag *mine, dp_tag *all,
                         double *buf)
{
    const int parity = (int)(c->exchanges & 1);
    const int world = c->cfg.world;
    const size_t n = c->cfg.count;
    double *const slots = c->host.data + (size_t)parity * world * n;
    if (buf)
        memcpy(slots + (size_t)c->cfg.rank * n, buf, n * sizeof *buf);
    if (host_barrier(c, mine, parity) < 0)
        return -1;
    /* Until every rank has entered the next exchange, no one writes this
     * parity's slots: they are read without the lock, which the barrier
     * ordered after every rank's writes. */
    for (int r = 0; r < world; r++)
        memcpy(all[r].w, c->host.seg->rank[r].tag[parity], sizeof all[r].w);
    if (buf)
        for (size_t i = 0; i < n; i++) {
            double sum = slots[i];
            for (int r = 1; r < world; r++)
                sum += slots[(size_t)r * n + i];
            buf[i] = sum;
        }
    /* Every rank has attached: the name can go, the mappings stay. */
    if (c->host.owner && !c->host.unlinked) {
        shm_unlink(c->shm_name);
        c->host.unlinked = 1;
    }
    return 0;
}

/* ---- the NCCL transport --------------------------------------------------
 */

#ifdef PL_SAMPLE_NCCL
static int cuda_fail(dp_comm *c, const char *what, cudaError_t e)
{
    return fail(c, "%s: %s (%s)", what, cudaGetErrorString(e),
                cudaGetErrorName(e));
}

static int nccl_fail(dp_comm *c, const char *what, ncclResult_t r)
{
    const char *last = c->nccl.comm ? ncclGetLastError(c->nccl.comm) : "";
    return fail(c, "%s: %s%s%s", what, ncclGetErrorString(r),
                last && *last ? ": " : "", last ? last : "");
}

static void nccl_drop(dp_comm *c)
{
    if (c->nccl.comm)
        ncclCommAbort(c->nccl.comm);
    c->nccl.comm = NULL;
}

/* Wait for the communicator's pending operation (nonblocking init, group
 * end, finalize), at most the timeout. */
static int nccl_settle(dp_comm *c, const char *what)
{
    const double give_up = now_s() + c->cfg.timeout;
    ncclResult_t st;
    for (;;) {
        const ncclResult_t r = ncclCommGetAsyncError(c->nccl.comm, &st);
        if (r != ncclSuccess)
            st = r;
        if (st != ncclInProgress)
            break;
        if (now_s() > give_up) {
            nccl_drop(c);
            return fail(c,
                        "%s: timed out after %g s (a rank did not join; "
                        "NCCL does not say which: see the other ranks' "
                        "output)",
                        what, c->cfg.timeout);
        }
        nap_us(100);
    }
    if (st != ncclSuccess) {
        nccl_fail(c, what, st);
        nccl_drop(c);
        return -1;
    }
    return 0;
}

/* The id file: rank 0 writes it beside, then renames it into place. */
static int nccl_id_path(const dp_comm *c, char *path, size_t cap)
{
    const int n = snprintf(path, cap, "%s/%s.nccl-id", c->cfg.rendezvous_dir,
                           c->shm_name + 1);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int nccl_publish_id(dp_comm *c, const ncclUniqueId *id, const char *path)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(id, sizeof *id, 1, f) == 1;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        return fail(c, "writing the NCCL id to %s: %s", path, strerror(e));
    }
    return 0;
}

static int nccl_read_id(dp_comm *c, ncclUniqueId *id, const char *path)
{
    const double give_up = now_s() + c->cfg.timeout;
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            const size_t n = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (n == 1)
                return 0;
        }
        if (now_s() > give_up)
            return fail(c,
                        "timed out after %g s waiting for rank 0's NCCL id "
                        "in %s (do all ranks see the same rendezvous "
                        "directory, and the same job id?)",
                        c->cfg.timeout, path);
        nap_us(10000);
    }
}

static int nccl_buffers(dp_comm *c)
{
    nccl_link *k = &c->nccl;
    const size_t tags = (size_t)c->cfg.world * DP_TAG_WORDS * sizeof(int64_t);
    cudaError_t e = cudaSetDevice(c->cfg.device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&k->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess && c->cfg.count)
        e = cudaMalloc((void **)&k->d_buf, c->cfg.count * sizeof(double));
    if (e == cudaSuccess && c->cfg.count)
        e = cudaMallocHost((void **)&k->h_buf, c->cfg.count * sizeof(double));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&k->d_tags, tags);
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&k->h_tags, tags);
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&k->h_mine, DP_TAG_WORDS * sizeof(int64_t));
    return e == cudaSuccess ? 0
                            : cuda_fail(c, "the exchange's CUDA buffers", e);
}

static int nccl_open(dp_comm *c)
{
    char path[4096];
    ncclUniqueId id;
    ncclResult_t r;
    if (nccl_id_path(c, path, sizeof path) < 0)
        return fail(c, "the rendezvous directory's name is too long");
    if (nccl_buffers(c) < 0)
        return -1;
    if (c->cfg.rank == 0) {
        if ((r = ncclGetUniqueId(&id)) != ncclSuccess)
            return nccl_fail(c, "ncclGetUniqueId", r);
        if (nccl_publish_id(c, &id, path) < 0)
            return -1;
    } else if (nccl_read_id(c, &id, path) < 0) {
        return -1;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    r = ncclCommInitRankConfig(&c->nccl.comm, c->cfg.world, id, c->cfg.rank,
                               &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_fail(c, "ncclCommInitRank", r);
        nccl_drop(c);
        return -1;
    }
    if (nccl_settle(c, "joining the NCCL communicator") < 0)
        return -1;
    if (c->cfg.rank == 0)
        unlink(path); /* every rank has joined: it has served */
    int v = 0;
    ncclGetVersion(&v);
    snprintf(c->name, sizeof c->name, "NCCL %d.%d.%d on CUDA device %d",
             v / 10000, v / 100 % 100, v % 100, c->cfg.device);
    return 0;
}

/* Poll the stream, so that a rank that never comes is a timeout. */
static int nccl_wait_stream(dp_comm *c, const dp_tag *mine)
{
    const double give_up = now_s() + c->cfg.timeout;
    cudaError_t e;
    while ((e = cudaStreamQuery(c->nccl.stream)) == cudaErrorNotReady) {
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(c->nccl.comm, &st);
        if (st != ncclSuccess && st != ncclInProgress) {
            nccl_fail(c, "the all-reduce", st);
            nccl_drop(c);
            return -1;
        }
        if (now_s() > give_up) {
            char here[160];
            c->cfg.describe(mine, here, sizeof here);
            nccl_drop(c);
            return fail(c,
                        "timed out after %g s at %s: a rank did not join "
                        "the all-reduce (NCCL does not say which: see the "
                        "other ranks' output)",
                        c->cfg.timeout, here);
        }
        nap_us(50);
    }
    return e == cudaSuccess ? 0 : cuda_fail(c, "the all-reduce's stream", e);
}

static int nccl_exchange(dp_comm *c, const dp_tag *mine, dp_tag *all,
                         double *buf)
{
    nccl_link *k = &c->nccl;
    if (!k->comm)
        return fail(c, "the NCCL communicator was aborted");
    const size_t w = DP_TAG_WORDS, n = c->cfg.count;
    int64_t *const d_mine = k->d_tags + (size_t)c->cfg.rank * w;
    memcpy(k->h_mine, mine->w, sizeof mine->w);
    cudaError_t e = cudaMemcpyAsync(d_mine, k->h_mine, w * sizeof(int64_t),
                                    cudaMemcpyHostToDevice, k->stream);
    if (e == cudaSuccess && buf) {
        memcpy(k->h_buf, buf, n * sizeof *buf);
        e = cudaMemcpyAsync(k->d_buf, k->h_buf, n * sizeof *buf,
                            cudaMemcpyHostToDevice, k->stream);
    }
    if (e != cudaSuccess)
        return cuda_fail(c, "copying to the exchange's buffers", e);
    ncclGroupStart();
    if (buf)
        ncclAllReduce(k->d_buf, k->d_buf, n, ncclDouble, ncclSum, k->comm,
                      k->stream);
    ncclAllGather(d_mine, k->d_tags, w, ncclInt64, k->comm, k->stream);
    const ncclResult_t r = ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_fail(c, "ncclAllReduce", r);
        nccl_drop(c);
        return -1;
    }
    if (nccl_settle(c, "queueing the all-reduce") < 0)
        return -1;
    e = cudaMemcpyAsync(k->h_tags, k->d_tags,
                        (size_t)c->cfg.world * w * sizeof(int64_t),
                        cudaMemcpyDeviceToHost, k->stream);
    if (e == cudaSuccess && buf)
        e = cudaMemcpyAsync(k->h_buf, k->d_buf, n * sizeof *buf,
                            cudaMemcpyDeviceToHost, k->stream);
    if (e != cudaSuccess)
        return cuda_fail(c, "copying the all-reduce back", e);
    if (nccl_wait_stream(c, mine) < 0)
        return -1;
    for (int rk = 0; rk < c->cfg.world; rk++)
        memcpy(all[rk].w, k->h_tags + (size_t)rk * w, sizeof all[rk].w);
    if (buf)
        memcpy(buf, k->h_buf, n * sizeof *buf);
    return 0;
}

static void nccl_close(dp_comm *c)
{
    nccl_link *k = &c->nccl;
    if (k->comm) {
        const ncclResult_t r = ncclCommFinalize(k->comm);
        if ((r == ncclSuccess || r == ncclInProgress) &&
            nccl_settle(c, "leaving the communicator") == 0)
            ncclCommDestroy(k->comm);
        else
            nccl_drop(c);
        k->comm = NULL;
    }
    if (k->stream) {
        cudaStreamSynchronize(k->stream);
        cudaStreamDestroy(k->stream);
    }
    cudaFree(k->d_buf);
    cudaFree(k->d_tags);
    cudaFreeHost(k->h_buf);
    cudaFreeHost(k->h_tags);
    cudaFreeHost(k->h_mine);
}
#endif

/* ---- the interface -------------------------------------------------------
 */

int dp_nccl_available(void)
{
#ifdef PL_SAMPLE_NCCL
    return 1;
#else
    return 0;
#endif
}

int dp_comm_open(const dp_comm_config *cfg, dp_comm **out, char *err,
                 size_t errlen)
{
    *out = NULL;
    dp_comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->cfg = *cfg;
    c->host.fd = -1;
    char *p = c->shm_name;
    p += snprintf(p, 64, "/pinload-dp-");
    for (const char *j = cfg->job; *j && p < c->shm_name + 150; j++) {
        const int ok = (*j >= 'a' && *j <= 'z') || (*j >= 'A' && *j <= 'Z') ||
                       (*j >= '0' && *j <= '9') || strchr("._-", *j);
        *p++ = ok ? *j : '_';
    }
    *p = '\0';
    int rc;
    if (cfg->transport == DP_TRANSPORT_NCCL) {
#ifdef PL_SAMPLE_NCCL
        rc = nccl_open(c);
#else
        rc = fail(c, "this build has no NCCL");
#endif
    } else {
        rc = host_open(c);
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s", c->err);
        dp_comm_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

int dp_comm_exchange(dp_comm *c, const dp_tag *mine, dp_tag *all, double *buf)
{
    int rc;
#ifdef PL_SAMPLE_NCCL
    if (c->cfg.transport == DP_TRANSPORT_NCCL)
        rc = nccl_exchange(c, mine, all, buf);
    else
#endif
        rc = host_exchange(c, mine, all, buf);
    if (rc == 0)
        c->exchanges++;
    return rc;
}

void dp_comm_abort(dp_comm *c, const char *why)
{
    if (!c)
        return;
#ifdef PL_SAMPLE_NCCL
    if (c->cfg.transport == DP_TRANSPORT_NCCL)
        nccl_drop(c); /* no finalize, which would wait for the others */
#endif
    if (c->cfg.transport == DP_TRANSPORT_HOST)
        host_abort(c, why);
}

const char *dp_comm_error(const dp_comm *c)
{
    return c->err;
}

const char *dp_comm_name(const dp_comm *c)
{
    return c->name;
}

void dp_comm_close(dp_comm *c)
{
    if (!c)
        return;
#ifdef PL_SAMPLE_NCCL
    if (c->cfg.transport == DP_TRANSPORT_NCCL)
        nccl_close(c);
#endif
    if (c->cfg.transport == DP_TRANSPORT_HOST)
        host_close(c);
    free(c);
}
