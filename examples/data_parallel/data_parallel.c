/* data_parallel: one rank of a data-parallel training job fed by pinload,
 * run as torchrun runs a script: one process per GPU (or per share of the
 * CPUs), each with its own loader over its own shard of the data, all
 * training one model.
 *
 *     build/pinload-mkdata --out /tmp/dp_data --classes 4 --per-class 50
 *     examples/data_parallel/launch.sh 2 build/examples/data_parallel \
 *         --data /tmp/dp_data --epochs 3 --checkpoint /tmp/dp_ckpt
 *
 * or, under PyTorch's launcher (which sets the same variables):
 *
 *     torchrun --standalone --nproc_per_node=2 --no-python \
 *         build/examples/data_parallel --data /tmp/dp_data --epochs 3
 *
 * A preemption, and going on from where it stopped:
 *
 *     examples/data_parallel/launch.sh 2 build/examples/data_parallel \
 *         --data /tmp/dp_data --epochs 3 --checkpoint /tmp/dp_ckpt \
 *         --stop-after-steps 5
 *     examples/data_parallel/launch.sh 2 build/examples/data_parallel \
 *         --data /tmp/dp_data --epochs 3 --checkpoint /tmp/dp_ckpt --resume
 *
 * What each rank does:
 *
 * - Rank and world come from the launcher through pinload (cfg.rank and
 *   cfg.world_size are PL_FROM_ENV: RANK/WORLD_SIZE, SLURM, Open MPI,
 *   MPICH), and the loader shards the data as DistributedSampler does.
 * - Device: where the build has CUDA and the machine has a GPU, the
 *   launcher's local rank (PL_DEVICE_LOCAL_RANK: one GPU per rank, an error
 *   if this rank's is missing); without a GPU, PL_DEVICE_AUTO, which falls
 *   back to the host backend with a notice. --device host forces the host.
 * - Each step takes a batch (float32 NCHW, S x S, training augmentation),
 *   computes the gradient of a linear softmax classifier on it (on the
 *   host: the batch is read from pl_batch.host, which keep_host = 1 fills
 *   on the CUDA backend too), then all-reduces the gradient with every
 *   other rank and takes the same SGD step. The all-reduce carries every
 *   rank's (epoch, step) beside the gradient, so each step checks that all
 *   ranks are at the same step and stops naming them if not. It is NCCL's
 *   (ncclAllReduce on the rank's GPU; the ncclUniqueId passed through a
 *   file in a rendezvous directory) where the build found NCCL and the
 *   loader is on CUDA, else a host exchange through a shared-memory segment
 *   of the job (one node). No wait is unbounded: --timeout.
 * - pinload gives every rank exactly pl_info.batches_per_epoch batches per
 *   epoch whatever bad files it meets (PL_ON_ERROR_SKIP), so no rank waits
 *   for another at an epoch's end. An epoch in which not one sample of the
 *   rank's share can be decoded ends in PL_ENODATA: the rank says so, tells
 *   the others, and exits 1.
 * - At every epoch's end (and at a --stop-after-steps stop) the rank saves
 *   a checkpoint, DIR/rank-R.ckpt: the loader's state (pl_loader_state),
 *   the weights and the epoch's running totals, written beside and renamed
 *   into place. --resume creates the loader with cfg.resume pointing at the
 *   saved state, which delivers exactly the batches the interrupted run
 *   would have: the resumed run prints the same lines.
 *
 * Output on stdout, one line per rank and epoch (cut in two here):
 *
 *     rank 1/2 epoch 2: steps 4 samples 100 loss 0.594638
 *         data 381612638d8229ae model 8528aaf04a68a963
 *
 * steps and samples are this rank's, loss the job's mean over the epoch,
 * data a hash of this rank's batches (labels, indices and pixels), model a
 * hash of the weights after the epoch, the same on every rank. Exit status
 * 0 (done, or stopped by --stop-after-steps), 1 (a failure, said on
 * stderr), 2 (bad arguments). */
#define _DEFAULT_SOURCE /* sigaction (tools/cli.h) */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tools/cli.h"
#include "dp_collective.h"
#include "pinload.h"

#ifdef PL_SAMPLE_CUDA
#include <cuda_runtime_api.h>
#endif

static const char usage[] =
    "usage: data_parallel --data DIR [--epochs E] [--batch B] [--size S]\n"
    "                     [--workers W] [--lr X] [--seed N]\n"
    "                     [--device auto|local-rank|host] "
    "[--sync auto|nccl|host]\n"
    "                     [--checkpoint DIR [--resume] "
    "[--stop-after-steps K]]\n"
    "                     [--timeout SECONDS] [--job ID] [--rendezvous DIR]\n"
    "One rank of a data-parallel job: start it with\n"
    "examples/data_parallel/launch.sh N or torchrun --nproc_per_node=N, which\n"
    "set RANK, WORLD_SIZE and LOCAL_RANK.\n"
    "  --data DIR          ImageFolder root, or a list file (required)\n"
    "  --epochs E          train until E epochs are done (default 2)\n"
    "  --batch B           samples per batch and rank (default 32)\n"
    "  --size S            images are resized to S x S (default 16)\n"
    "  --workers W         decode threads; 0: this rank's share of the CPUs\n"
    "                      (default 0)\n"
    "  --lr X              SGD learning rate (default 0.1)\n"
    "  --seed N            sample order and augmentation (default 0)\n"
    "  --device D          auto: the local rank's GPU where there is one, "
    "else\n"
    "                      the host; local-rank: that GPU or fail; host\n"
    "                      (default auto)\n"
    "  --sync T            auto: NCCL if built with it and the loader is on "
    "CUDA,\n"
    "                      else host (shared memory, one node) (default "
    "auto)\n"
    "  --checkpoint DIR    save DIR/rank-R.ckpt at every epoch's end\n"
    "  --resume            go on from DIR/rank-R.ckpt where it exists\n"
    "  --stop-after-steps K  stop after K steps of this run (a preemption),\n"
    "                      saving a checkpoint; an epoch whose last step it\n"
    "                      is finishes first\n"
    "  --timeout SECONDS   the longest any rank waits for the others "
    "(default 120)\n"
    "  --job ID            the job's id, the same on every rank (default: "
    "from\n"
    "                      PINLOAD_JOB_ID, or torchrun's "
    "TORCHELASTIC_RUN_ID)\n"
    "  --rendezvous DIR    NCCL: where rank 0 leaves the NCCL id (default\n"
    "                      PINLOAD_RDZV_DIR, else TMPDIR or /tmp)\n";

typedef enum device_choice {
    DEVICE_AUTO,
    DEVICE_LOCAL_RANK,
    DEVICE_HOST
} device_choice;
typedef enum sync_choice { SYNC_AUTO, SYNC_NCCL, SYNC_HOST } sync_choice;

typedef struct options {
    const char *data, *checkpoint, *job, *rendezvous;
    int epochs, batch, size, workers, resume;
    int64_t stop_after;
    double lr, timeout;
    uint64_t seed;
    device_choice device;
    sync_choice sync;
} options;

/* ---- command line: tools/cli.h's parser, as the tools use it ---------- */

static const char prog[] = "data_parallel";

/* Returns only to run (--help exits 0, a bad argument 2). */
static void parse_args(int argc, char **argv, options *o)
{
    static const char *const valued[] = {"--data",   "--checkpoint",
                                         "--job",    "--rendezvous",
                                         "--epochs", "--batch",
                                         "--size",   "--workers",
                                         "--lr",     "--timeout",
                                         "--seed",   "--device",
                                         "--sync",   "--stop-after-steps",
                                         NULL};
    static const char *const devices[] = {"auto", "local-rank", "host", NULL};
    static const char *const syncs[] = {"auto", "nccl", "host", NULL};
    *o = (options){.epochs = 2,
                   .batch = 32,
                   .size = 16,
                   .lr = 0.1,
                   .timeout = 120,
                   .device = DEVICE_AUTO,
                   .sync = SYNC_AUTO};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        cli_help(usage, f);
        if (!strcmp(f, "--resume")) {
            o->resume = 1;
            continue;
        }
        const char *v = cli_value(prog, usage, valued, argc, argv, &i);
        if (!strcmp(f, "--data"))
            o->data = v;
        else if (!strcmp(f, "--checkpoint"))
            o->checkpoint = v;
        else if (!strcmp(f, "--job"))
            o->job = v;
        else if (!strcmp(f, "--rendezvous"))
            o->rendezvous = v;
        else if (!strcmp(f, "--epochs"))
            o->epochs = (int)cli_long(prog, usage, f, v, 1, 1000000);
        else if (!strcmp(f, "--batch"))
            o->batch = (int)cli_long(prog, usage, f, v, 1, 65536);
        else if (!strcmp(f, "--size"))
            o->size = (int)cli_long(prog, usage, f, v, 1, 512);
        else if (!strcmp(f, "--workers"))
            o->workers = (int)cli_long(prog, usage, f, v, 0, 1024);
        else if (!strcmp(f, "--stop-after-steps"))
            o->stop_after = cli_long(prog, usage, f, v, 1, INT64_MAX);
        else if (!strcmp(f, "--lr"))
            o->lr = cli_double(prog, usage, f, v, 0, 100, CLI_OPEN_LO);
        else if (!strcmp(f, "--timeout"))
            o->timeout = cli_double(prog, usage, f, v, 0, 86400, CLI_OPEN_LO);
        else if (!strcmp(f, "--seed"))
            o->seed = (uint64_t)cli_long(prog, usage, f, v, 0, INT64_MAX);
        else if (!strcmp(f, "--device"))
            o->device = (device_choice)cli_choice(prog, usage, f, v, devices);
        else
            o->sync = (sync_choice)cli_choice(prog, usage, f, v, syncs);
    }
    if (!o->data)
        cli_usage_error(prog, usage, "--data DIR is required");
    if ((o->resume || o->stop_after) && !o->checkpoint)
        cli_usage_error(prog, usage, "%s needs --checkpoint DIR",
                        o->resume ? "--resume" : "--stop-after-steps");
    if (o->sync == SYNC_NCCL && !dp_nccl_available())
        cli_usage_error(prog, usage,
                        "--sync nccl: this build has no NCCL (the Makefile "
                        "found no nccl.h and libnccl)");
}

/* ---- the job ------------------------------------------------------------- */

/* The model: W [classes][inputs] then b [classes], as doubles, and a
 * gradient buffer of the same shape followed by the batch's loss sum and
 * sample count, which the all-reduce sums with it. */
typedef struct model {
    int classes, inputs;
    size_t params;
    double *w;    /* [params] */
    double *grad; /* [params + 2] */
    double *z;    /* [classes] scratch */
} model;

/* The running totals of the epoch in progress. */
typedef struct epoch_acc {
    int64_t steps, samples; /* this rank's */
    double loss_sum, count; /* the job's */
    uint64_t data;          /* hash of this rank's batches */
} epoch_acc;

typedef struct job {
    options o;
    int rank, world;
    pl_loader *l;
    pl_info info;
    dp_comm *comm;
    dp_tag *all; /* [world]: every rank's tag at the last exchange */
    model m;
    int64_t epoch, step; /* the next step's */
    int64_t steps_run;   /* steps taken by this process */
    epoch_acc acc;
    char ckpt[4096]; /* DIR/rank-R.ckpt, or "" */
} job;

/* "data_parallel: rank 1/2: " then the message, on stderr; the other ranks
 * are told (dp_comm_abort), so they stop rather than wait. */
static int job_fail(job *j, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "data_parallel: rank %d/%d: %s\n", j->rank, j->world, msg);
    dp_comm_abort(j->comm, msg);
    return -1;
}

/* FNV-1a, 64 bits. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define HASH_INIT 0xcbf29ce484222325ull

/* ---- the model ----------------------------------------------------------- */

static int model_init(model *m, int classes, int inputs)
{
    *m = (model){.classes = classes, .inputs = inputs};
    m->params = (size_t)classes * inputs + (size_t)classes;
    m->w = calloc(m->params, sizeof *m->w);
    m->grad = calloc(m->params + 2, sizeof *m->grad);
    m->z = calloc((size_t)classes, sizeof *m->z);
    return m->w && m->grad && m->z ? 0 : -1;
}

static void model_free(model *m)
{
    free(m->w);
    free(m->grad);
    free(m->z);
}

static uint64_t model_hash(const model *m)
{
    return hash_bytes(HASH_INIT, m->w, m->params * sizeof *m->w);
}

/* The gradient of the summed softmax cross-entropy over the batch, with
 * the loss sum and the count in the buffer's last two places. */
static void model_gradient(model *m, const float *x, const int32_t *labels,
                           int count)
{
    const int C = m->classes, D = m->inputs;
    double *gw = m->grad, *gb = m->grad + (size_t)C * D;
    double loss = 0;
    memset(m->grad, 0, (m->params + 2) * sizeof *m->grad);
    for (int s = 0; s < count; s++) {
        const float *xs = x + (size_t)s * D;
        int best = 0;
        for (int c = 0; c < C; c++) {
            const double *wc = m->w + (size_t)c * D;
            double acc = m->w[(size_t)C * D + c];
            for (int k = 0; k < D; k++)
                acc += wc[k] * xs[k];
            m->z[c] = acc;
            best = acc > m->z[best] ? c : best;
        }
        double sum = 0;
        for (int c = 0; c < C; c++)
            sum += exp(m->z[c] - m->z[best]);
        loss += log(sum) - (m->z[labels[s]] - m->z[best]);
        for (int c = 0; c < C; c++) {
            const double g =
                exp(m->z[c] - m->z[best]) / sum - (c == labels[s] ? 1 : 0);
            double *gwc = gw + (size_t)c * D;
            for (int k = 0; k < D; k++)
                gwc[k] += g * xs[k];
            gb[c] += g;
        }
    }
    m->grad[m->params] = loss;
    m->grad[m->params + 1] = count;
}

/* SGD on the job's mean gradient (the all-reduced sums over its count). */
static void model_update(model *m, double lr)
{
    const double scale = lr / m->grad[m->params + 1];
    for (size_t i = 0; i < m->params; i++)
        m->w[i] -= scale * m->grad[i];
}

/* ---- checkpoints --------------------------------------------------------- */

#define CKPT_MAGIC "PLDPCK01"

/* DIR/rank-R.ckpt: this header, the weights (params doubles), then the
 * FNV-1a hash of both. In the machine's byte order: a sample's format. */
typedef struct ckpt_head {
    char magic[8];
    int32_t rank, world;
    int64_t params;
    int64_t epoch, step; /* where the state stands: the next step */
    epoch_acc acc;       /* the epoch in progress, so far */
    pl_state state;
} ckpt_head;

static int write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        const ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Written beside, synced, then renamed over the old one: a crash at any
 * moment leaves the old checkpoint or the new, never half of one. */
static int save_checkpoint(job *j)
{
    ckpt_head h;
    memset(&h, 0, sizeof h); /* no stray padding bytes in the file */
    memcpy(h.magic, CKPT_MAGIC, sizeof h.magic);
    h.rank = j->rank;
    h.world = j->world;
    h.params = (int64_t)j->m.params;
    h.epoch = j->epoch;
    h.step = j->step;
    h.acc = j->acc;
    pl_loader_state(j->l, &h.state);
    uint64_t sum = hash_bytes(HASH_INIT, &h, sizeof h);
    sum = hash_bytes(sum, j->m.w, j->m.params * sizeof *j->m.w);

    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", j->ckpt);
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int ok = fd >= 0 && write_all(fd, &h, sizeof h) == 0 &&
             write_all(fd, j->m.w, j->m.params * sizeof *j->m.w) == 0 &&
             write_all(fd, &sum, sizeof sum) == 0 && fsync(fd) == 0;
    const int e = errno;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    if (!ok || rename(tmp, j->ckpt) != 0) {
        const int e2 = ok ? errno : e;
        unlink(tmp);
        return job_fail(j, "saving %s: %s", j->ckpt, strerror(e2));
    }
    /* The rename itself is durable once the directory is synced. */
    const int dfd = open(j->o.checkpoint, O_RDONLY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* 1: read into *h and [out] *w (malloc'd); 0: no checkpoint for this rank;
 * -1: one that cannot be used (said). */
static int read_checkpoint(job *j, ckpt_head *h, double **w)
{
    *w = NULL;
    FILE *f = fopen(j->ckpt, "rb");
    if (!f && errno == ENOENT)
        return 0;
    if (!f)
        return job_fail(j, "%s: %s", j->ckpt, strerror(errno));
    const char *bad = NULL;
    uint64_t sum = 0;
    if (fread(h, sizeof *h, 1, f) != 1 ||
        memcmp(h->magic, CKPT_MAGIC, sizeof h->magic) != 0)
        bad = "not a checkpoint of this sample";
    else if (h->params < 1 || h->params > (int64_t)1 << 32)
        bad = "damaged (parameter count)";
    else if (!(*w = malloc((size_t)h->params * sizeof **w)))
        bad = "out of memory";
    else if (fread(*w, sizeof **w, (size_t)h->params, f) != (size_t)h->params ||
             fread(&sum, sizeof sum, 1, f) != 1 || fgetc(f) != EOF)
        bad = "damaged (wrong length)";
    else if (sum != hash_bytes(hash_bytes(HASH_INIT, h, sizeof *h), *w,
                               (size_t)h->params * sizeof **w))
        bad = "damaged (checksum)";
    else if (h->rank != j->rank)
        bad = "saved by another rank";
    fclose(f);
    if (!bad)
        return 1;
    free(*w);
    *w = NULL;
    return job_fail(j, "%s: %s", j->ckpt, bad);
}

/* ---- setting up ---------------------------------------------------------- */

static int loader_device(const options *o)
{
    if (o->device == DEVICE_HOST)
        return PL_DEVICE_HOST;
    if (o->device == DEVICE_LOCAL_RANK)
        return PL_DEVICE_LOCAL_RANK;
#ifdef PL_SAMPLE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
        return PL_DEVICE_LOCAL_RANK; /* one GPU per rank, as torchrun */
    cudaGetLastError();
#endif
    return PL_DEVICE_AUTO; /* no GPU: the host, with pinload's notice */
}

/* Rank and world before the loader exists, to name the checkpoint that
 * creates it: the first launcher family set, in pinload's order
 * (PL_FROM_ENV). The loader's own reading must agree (open_job). */
static void provisional_rank(job *j)
{
    static const char *const vars[][2] = {
        {"RANK", "WORLD_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"PMI_RANK", "PMI_SIZE"},
    };
    j->rank = 0;
    j->world = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *r = getenv(vars[i][0]), *w = getenv(vars[i][1]);
        if ((r && *r) || (w && *w)) {
            j->rank = r ? atoi(r) : 0;
            j->world = w ? atoi(w) : 1;
            return;
        }
    }
}

static int open_loader(job *j, const pl_state *resume)
{
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = j->o.data;
    cfg.batch_size = j->o.batch;
    cfg.width = cfg.height = j->o.size;
    cfg.format = PL_FORMAT_F32_NCHW;
    cfg.augment = PL_AUGMENT_TRAIN;
    cfg.seed = j->o.seed;
    cfg.num_workers = j->o.workers;
    cfg.device = loader_device(&j->o);
    cfg.keep_host = 1; /* the maths reads the batch on the host */
    cfg.rank = PL_FROM_ENV;
    cfg.world_size = PL_FROM_ENV;
    cfg.on_error = PL_ON_ERROR_SKIP;
    cfg.resume = resume;
    if (pl_loader_create(&cfg, &j->l) < 0 || pl_loader_info(j->l, &j->info) < 0)
        return job_fail(j, "%s", pl_last_error());
    j->rank = j->info.rank;
    j->world = j->info.world_size;
    if (j->info.sample_bytes % sizeof(float) || !j->info.num_classes)
        return job_fail(j, "unexpected sample layout (%zu bytes)",
                        j->info.sample_bytes);
    return 0;
}

/* Where the loader stands: the checkpoint's step, or, after an elastic
 * restart (another world size), the start of the checkpoint's epoch, whose
 * running totals then start again too. */
static int position_from(job *j, const ckpt_head *h)
{
    pl_state st;
    int64_t epoch, batch;
    pl_loader_state(j->l, &st);
    if (pl_state_get(&st, &epoch, &batch, NULL) < 0)
        return job_fail(j, "%s", pl_last_error());
    if (h && (epoch != h->epoch || batch != h->step)) {
        if (epoch != h->epoch || batch != 0)
            return job_fail(j,
                            "%s says epoch %lld step %lld, the loader "
                            "resumed at epoch %lld step %lld",
                            j->ckpt, (long long)h->epoch, (long long)h->step,
                            (long long)epoch, (long long)batch);
        memset(&j->acc, 0, sizeof j->acc);
        j->acc.data = HASH_INIT;
    }
    j->epoch = epoch;
    j->step = batch;
    return 0;
}

static int setup_model(job *j, const ckpt_head *h, const double *w)
{
    const int inputs = (int)(j->info.sample_bytes / sizeof(float));
    if (model_init(&j->m, j->info.num_classes, inputs) < 0)
        return job_fail(j, "out of memory for the model");
    j->acc = (epoch_acc){.data = HASH_INIT};
    if (!h)
        return 0; /* zero weights: the same on every rank */
    if ((size_t)h->params != j->m.params)
        return job_fail(j,
                        "%s holds %lld weights, this model has %zu (another "
                        "--size, or other data?)",
                        j->ckpt, (long long)h->params, j->m.params);
    memcpy(j->m.w, w, j->m.params * sizeof *w);
    j->acc = h->acc;
    return 0;
}

/* Read the checkpoint if resuming, then create the loader from its state. */
static int open_job(job *j)
{
    ckpt_head h;
    double *w = NULL;
    int found = 0, rc = -1;
    provisional_rank(j);
    const int rank = j->rank;
    if (j->o.checkpoint) {
        /* mkdir -p, which every rank may run at once (EEXIST is no error). */
        if (cli_mkdir_p(j->o.checkpoint) < 0) {
            job_fail(j, "%s: %s", j->o.checkpoint, strerror(errno));
            goto done;
        }
        snprintf(j->ckpt, sizeof j->ckpt, "%s/rank-%d.ckpt", j->o.checkpoint,
                 j->rank);
    }
    if (j->o.resume && (found = read_checkpoint(j, &h, &w)) < 0)
        goto done;
    if (open_loader(j, found ? &h.state : NULL) < 0)
        goto done;
    if (j->rank != rank) {
        job_fail(j, "pinload read rank %d from the launcher, this sample %d",
                 j->rank, rank);
        goto done;
    }
    if (setup_model(j, found ? &h : NULL, w) < 0 ||
        position_from(j, found ? &h : NULL) < 0)
        goto done;
    if (j->o.resume && !found)
        printf("rank %d/%d: no checkpoint %s: starting from the beginning\n",
               j->rank, j->world, j->ckpt);
    rc = 0;
done:
    free(w);
    return rc;
}

/* The job's id: --job, PINLOAD_JOB_ID (examples/data_parallel/launch.sh),
 * or torchrun's run id with its restart count and port. */
static int job_id(const job *j, char *buf, size_t cap)
{
    const char *id = j->o.job ? j->o.job : getenv("PINLOAD_JOB_ID");
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    const char *restart = getenv("TORCHELASTIC_RESTART_COUNT");
    const char *port = getenv("MASTER_PORT");
    if (id && *id)
        snprintf(buf, cap, "%s", id);
    else if (run && *run)
        snprintf(buf, cap, "torchrun-%s-%s-%s", run, restart ? restart : "0",
                 port ? port : "");
    else if (port && *port)
        snprintf(buf, cap, "master-%s", port);
    else
        return -1;
    return 0;
}

static void describe_tag(const dp_tag *t, char *buf, size_t cap);

static int open_comm(job *j)
{
    char id[256], err[2048];
    if (j->world == 1)
        return 0; /* alone: nothing to exchange */
    const int nccl = j->o.sync == SYNC_NCCL ||
                     (j->o.sync == SYNC_AUTO && dp_nccl_available() &&
                      j->info.backend == PL_BACKEND_CUDA);
    if (nccl && j->info.backend != PL_BACKEND_CUDA)
        return job_fail(j, "--sync nccl: the loader is on the host (%s)",
                        j->info.backend_name);
    const char *lws = getenv("LOCAL_WORLD_SIZE");
    if (!nccl && lws && *lws && atoi(lws) != j->world)
        return job_fail(j,
                        "the host exchange is one node's shared memory, but "
                        "LOCAL_WORLD_SIZE is %s of %d ranks: a job across "
                        "nodes needs NCCL",
                        lws, j->world);
    if (job_id(j, id, sizeof id) < 0)
        return job_fail(j, "no job id: start the ranks with "
                           "examples/data_parallel/launch.sh or torchrun, or "
                           "give each the same --job ID");
    const char *tmp = getenv("TMPDIR");
    const char *rdzv = j->o.rendezvous              ? j->o.rendezvous
                       : getenv("PINLOAD_RDZV_DIR") ? getenv("PINLOAD_RDZV_DIR")
                       : tmp && *tmp                ? tmp
                                                    : "/tmp";
    const dp_comm_config cc = {
        .rank = j->rank,
        .world = j->world,
        .transport = nccl ? DP_TRANSPORT_NCCL : DP_TRANSPORT_HOST,
        .job = id,
        .rendezvous_dir = rdzv,
        .device = j->info.device,
        .count = j->m.params + 2,
        .timeout = j->o.timeout,
        .describe = describe_tag,
    };
    if (dp_comm_open(&cc, &j->comm, err, sizeof err) < 0)
        return job_fail(j, "%s", err);
    return 0;
}

/* ---- the exchange -------------------------------------------------------- */

/* What a rank says at each exchange: where it starts, each step, where it
 * ends. Every rank must say the same. */
enum { TAG_START = 1, TAG_STEP = 2, TAG_END = 3 };

static void describe_tag(const dp_tag *t, char *buf, size_t cap)
{
    const long long a = t->w[1], b = t->w[2], c = t->w[3];
    switch (t->w[0]) {
    case TAG_START:
        snprintf(buf, cap,
                 "the start (%lld steps per epoch, %lld files, model %016llx)",
                 a, c, (unsigned long long)b);
        break;
    case TAG_STEP:
        snprintf(buf, cap, "epoch %lld step %lld", a, b);
        break;
    case TAG_END:
        if (c)
            snprintf(buf, cap, "its stop before epoch %lld step %lld", a, b);
        else
            snprintf(buf, cap, "the end (all %lld epochs done)", a);
        break;
    default:
        snprintf(buf, cap, "an unknown exchange (%lld)", (long long)t->w[0]);
    }
}

/* Every rank's tag must equal this one's: else name where each one is. */
static int check_tags(job *j, const dp_tag *mine)
{
    int same = 1;
    for (int r = 0; r < j->world; r++)
        same &= !memcmp(j->all[r].w, mine->w, sizeof mine->w);
    if (same)
        return 0;
    char msg[1536], *p = msg, *const end = msg + sizeof msg;
    p += snprintf(p, (size_t)(end - p), "%s",
                  mine->w[0] == TAG_START
                      ? "the ranks do not start from the same place:"
                      : "the ranks are not in step:");
    for (int r = 0; r < j->world && p < end; r++) {
        char where[160];
        describe_tag(&j->all[r], where, sizeof where);
        p += snprintf(p, (size_t)(end - p), "%s rank %d at %s", r ? ";" : "", r,
                      where);
    }
    return job_fail(j, "%s", msg);
}

/* One exchange: the tags always, the gradient when grad is set. */
static int exchange(job *j, const dp_tag *mine, double *grad)
{
    if (!j->comm) {
        j->all[0] = *mine;
        return 0;
    }
    if (dp_comm_exchange(j->comm, mine, j->all, grad) < 0)
        return job_fail(j, "%s", dp_comm_error(j->comm));
    return check_tags(j, mine);
}

/* Before the first step: the same steps per epoch, data and weights. */
static int start(job *j)
{
    const dp_tag t = {{TAG_START, j->info.batches_per_epoch,
                       (int64_t)model_hash(&j->m), j->info.dataset_size}};
    if (exchange(j, &t, NULL) < 0)
        return -1;
    printf("rank %d/%d: %s; %s; %lld steps per epoch; starting at epoch %lld "
           "step %lld\n",
           j->rank, j->world, j->info.backend_name,
           j->comm ? dp_comm_name(j->comm) : "one rank, no exchange",
           (long long)j->info.batches_per_epoch, (long long)j->epoch,
           (long long)j->step);
    return 0;
}

/* ---- training ------------------------------------------------------------ */

static int check_labels(job *j, const pl_batch *b)
{
    for (int i = 0; i < b->count; i++)
        if (b->labels[i] < 0 || b->labels[i] >= j->m.classes)
            return job_fail(j, "sample %lld has label %d, outside 0..%d",
                            (long long)b->indices[i], b->labels[i],
                            j->m.classes - 1);
    return 0;
}

/* This rank's half of a step: the batch's gradient, and its hash. */
static int local_step(job *j, const pl_batch *b)
{
    if (b->epoch != j->epoch || b->index != j->step)
        return job_fail(j,
                        "the loader delivered epoch %lld batch %lld where "
                        "epoch %lld step %lld was due",
                        (long long)b->epoch, (long long)b->index,
                        (long long)j->epoch, (long long)j->step);
    if (check_labels(j, b) < 0)
        return -1;
    model_gradient(&j->m, b->host, b->labels, b->count);
    uint64_t h = j->acc.data;
    h = hash_bytes(h, &b->index, sizeof b->index);
    h = hash_bytes(h, b->labels, (size_t)b->count * sizeof *b->labels);
    h = hash_bytes(h, b->indices, (size_t)b->count * sizeof *b->indices);
    j->acc.data = hash_bytes(h, b->host, b->bytes);
    j->acc.samples += b->count;
    return 0;
}

/* The job's half: all-reduce the gradient (checking every rank is at this
 * step), then the same SGD step on every rank. */
static int global_step(job *j)
{
    const dp_tag t = {{TAG_STEP, j->epoch, j->step, 0}};
    if (exchange(j, &t, j->m.grad) < 0)
        return -1;
    model_update(&j->m, j->o.lr);
    j->acc.steps++;
    j->acc.loss_sum += j->m.grad[j->m.params];
    j->acc.count += j->m.grad[j->m.params + 1];
    j->step++;
    j->steps_run++;
    return 0;
}

static int finish_epoch(job *j)
{
    const double loss = j->acc.count ? j->acc.loss_sum / j->acc.count : 0;
    printf("rank %d/%d epoch %lld: steps %lld samples %lld loss %.6f data "
           "%016llx model %016llx\n",
           j->rank, j->world, (long long)j->epoch, (long long)j->acc.steps,
           (long long)j->acc.samples, loss, (unsigned long long)j->acc.data,
           (unsigned long long)model_hash(&j->m));
    j->epoch++;
    j->step = 0;
    j->acc = (epoch_acc){.data = HASH_INIT};
    return j->ckpt[0] ? save_checkpoint(j) : 0;
}

static int loader_failed(job *j, int rc)
{
    if (rc == PL_ENODATA)
        return job_fail(j,
                        "epoch %lld: not one sample of this rank's share "
                        "could be decoded (PL_ENODATA): %s",
                        (long long)j->epoch, pl_last_error());
    return job_fail(j, "%s: %s", pl_err_name(rc), pl_last_error());
}

/* The epochs, until all are done or --stop-after-steps; [out] *stopped. */
static int train(job *j, int *stopped)
{
    int stop_at_epoch_end = 0;
    *stopped = 0;
    while (j->epoch < j->o.epochs) {
        const pl_batch *b;
        const int rc = pl_loader_next(j->l, &b);
        if (rc == PL_EPOCH_END) {
            if (finish_epoch(j) < 0)
                return -1;
            if (stop_at_epoch_end) {
                *stopped = 1;
                return 0;
            }
            continue;
        }
        if (rc < 0)
            return loader_failed(j, rc);
        const int local = local_step(j, b);
        pl_loader_release(j->l, b, NULL);
        if (local < 0 || global_step(j) < 0)
            return -1;
        if (j->steps_run != j->o.stop_after)
            continue;
        /* A preemption: mid-epoch, save where this step left the loader;
         * after an epoch's last step, finish the epoch first. */
        if (j->step < j->info.batches_per_epoch) {
            *stopped = 1;
            return save_checkpoint(j);
        }
        stop_at_epoch_end = 1;
    }
    return 0;
}

/* The last exchange: every rank ends at the same place. */
static int finish(job *j, int stopped)
{
    const dp_tag t = {{TAG_END, stopped ? j->epoch : j->o.epochs,
                       stopped ? j->step : 0, stopped}};
    if (exchange(j, &t, NULL) < 0)
        return -1;
    if (stopped)
        printf("rank %d/%d: stopped after %lld steps, at epoch %lld step "
               "%lld; saved %s\n",
               j->rank, j->world, (long long)j->steps_run, (long long)j->epoch,
               (long long)j->step, j->ckpt);
    else
        printf("rank %d/%d: done, %d epochs\n", j->rank, j->world, j->o.epochs);
    return 0;
}

static int run(const options *o)
{
    job j = {.o = *o};
    int rc = -1, stopped = 0;
    if (open_job(&j) < 0)
        goto done;
    j.all = calloc((size_t)j.world, sizeof *j.all);
    if (!j.all) {
        job_fail(&j, "out of memory");
        goto done;
    }
    if (open_comm(&j) < 0 || start(&j) < 0 || train(&j, &stopped) < 0 ||
        finish(&j, stopped) < 0)
        goto done;
    rc = 0;
done:
    dp_comm_close(j.comm);
    pl_loader_destroy(j.l);
    model_free(&j.m);
    free(j.all);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);
    /* One line at a time, whole, even when the ranks share a pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    return run(&o) == 0 ? 0 : 1;
}
