#include "config.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/defaults.h"
#include "abi.h"
#include "../common/error.h"

static void config_default(pl_config *cfg)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f};
    static const float std[3] = {0.229f, 0.224f, 0.225f};
    memset(cfg, 0, sizeof *cfg);
    cfg->batch_size = 64;
    cfg->width = 224;
    cfg->height = 224;
    cfg->format = PL_FORMAT_U8_NHWC;
    cfg->augment = PL_AUGMENT_TRAIN;
    memcpy(cfg->mean, mean, sizeof mean);
    memcpy(cfg->std, std, sizeof std);
    cfg->seed = 0;
    cfg->shuffle = 1;
    cfg->drop_last = 0;
    cfg->first_epoch = 0;
    cfg->rank = PL_FROM_ENV;
    cfg->world_size = PL_FROM_ENV;
    cfg->shard_mode = PL_SHARD_PAD;
    cfg->num_workers = 0;
    cfg->prefetch = 2;
    cfg->memory = PL_MEMORY_PINNED;
    cfg->pinned_fallback = 1;
    cfg->device = PL_DEVICE_AUTO;
    cfg->device_buffers = 2;
    cfg->keep_host = 0;
    cfg->on_error = PL_ON_ERROR_SKIP;
    cfg->strict = 0;
    cfg->max_width = DEFAULT_MAX_WIDTH;
    cfg->max_height = DEFAULT_MAX_HEIGHT;
    cfg->max_pixels = DEFAULT_MAX_PIXELS;
    cfg->max_file_bytes = DEFAULT_MAX_FILE_BYTES;
    cfg->dct_scaling = 1;
    cfg->gpu_normalize = 1;
    cfg->max_decode_ms = DEFAULT_MAX_DECODE_MS;
    cfg->max_scans = DEFAULT_MAX_SCANS;
    cfg->max_decode_memory = DEFAULT_MAX_DECODE_MEMORY;
}

/* A caller's struct of `size` bytes: the defaults of the fields it has, and
 * zeros past ours (which a newer library reads as its defaults). */
PL_EXPORT void pl_config_default_sized(pl_config *cfg, size_t size)
{
    if (!cfg || size < ABI_MIN_CONFIG)
        return; /* nothing can be reported from here; create will be */
    pl_config ours;
    config_default(&ours);
    abi_copy_out(cfg, size, &ours, sizeof ours);
}

#define BAD(field, ...)                                                        \
    err_set(PL_EINVAL, "pl_loader_create: config." field ": " __VA_ARGS__)

/* One integer field and the values it may take. */
typedef struct range {
    const char *field;
    long long v, lo, hi;
    int unset; /* PL_FROM_ENV: checked after the environment is read */
} range;

/* The first field out of its range, in the order given (the struct's). */
static int check_ranges(const range *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i].unset || (r[i].v >= r[i].lo && r[i].v <= r[i].hi))
            continue;
        if (r[i].hi == LLONG_MAX)
            return err_set(PL_EINVAL,
                           "pl_loader_create: config.%s: must be "
                           ">= %lld (got %lld)",
                           r[i].field, r[i].lo, r[i].v);
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.%s: %lld is "
                       "outside [%lld, %lld]",
                       r[i].field, r[i].v, r[i].lo, r[i].hi);
    }
    return 0;
}

#define N_(a) (sizeof(a) / sizeof((a)[0]))

/* An environment integer; absent (or name NULL) leaves *out and returns
 * 0, malformed is an error naming `field`; 1 when it was read. */
static int env_int(const char *name, const char *field, int *out)
{
    const char *s = name ? getenv(name) : NULL;
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (*end != '\0' || errno || v < 0 || v > 1 << 20)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.%s: environment "
                       "variable %s=\"%s\" is not a valid count",
                       field, name, s);
    *out = (int)v;
    return 1;
}

static int check_shape(const pl_config *c)
{
    if (!c->data || !*c->data)
        return BAD("data", "required (a directory or a list file)");
    const range r[] = {
        {"batch_size", c->batch_size, 1, 1 << 16},
        {"width", c->width, 1, 1 << 14},
        {"height", c->height, 1, 1 << 14},
        {"format", (int)c->format, 0, PL_FORMAT_F16_NCHW},
        {"augment", (int)c->augment, 0, PL_AUGMENT_TRAIN},
    };
    const int rc = check_ranges(r, N_(r));
    if (rc)
        return rc;
    /* The largest |(v / 255 - mean) / std| over v in [0, 255] must be a
     * finite number of the output format (float16 stops at 65504), so no
     * sample holds an infinity. */
    const double top = c->format == PL_FORMAT_F16_NCHW ? 65504.0 : FLT_MAX;
    for (int i = 0; i < 3; i++) {
        if (!isfinite(c->mean[i]))
            return BAD("mean", "mean[%d] is not finite", i);
        if (!(c->std[i] > 0.0f) || !isfinite(c->std[i]))
            return BAD("std", "std[%d] must be positive (got %g)", i,
                       (double)c->std[i]);
        const double m = c->mean[i];
        const double far = fabs(m) > fabs(1.0 - m) ? fabs(m) : fabs(1.0 - m);
        if (c->format != PL_FORMAT_U8_NHWC && far / c->std[i] > top)
            return BAD("std",
                       "std[%d] = %g with mean[%d] = %g gives values up to "
                       "%g, beyond what %s holds (%g)",
                       i, (double)c->std[i], i, m, far / c->std[i],
                       c->format == PL_FORMAT_F16_NCHW ? "float16" : "float32",
                       top);
    }
    return 0;
}

static int check_order(const pl_config *c)
{
    const range r[] = {
        {"shuffle", c->shuffle, 0, 1},
        {"drop_last", c->drop_last, 0, 1},
        /* epoch numbers add up from here: far below overflow */
        {"first_epoch", c->first_epoch, 0, (int64_t)1 << 48},
        {"shard_mode", (int)c->shard_mode, 0, PL_SHARD_DROP},
        {"rank", c->rank, 0, 1 << 20, c->rank == PL_FROM_ENV},
        {"world_size", c->world_size, 1, 1 << 20, c->world_size == PL_FROM_ENV},
    };
    return check_ranges(r, N_(r));
}

static int check_pipeline(const pl_config *c)
{
    const range r[] = {
        {"num_workers", c->num_workers, 0, 1024},
        {"prefetch", c->prefetch, 1, 1024},
        {"memory", (int)c->memory, 0, PL_MEMORY_MANAGED},
        {"pinned_fallback", c->pinned_fallback, 0, 1},
        {"device", c->device, PL_DEVICE_LOCAL_RANK, 1 << 16},
        {"device_buffers", c->device_buffers, 1, 64},
        {"keep_host", c->keep_host, 0, 1},
        {"on_error", (int)c->on_error, 0, PL_ON_ERROR_SUBSTITUTE},
        {"strict", c->strict, 0, 1},
        {"max_width", c->max_width, 1, 65535},
        {"max_height", c->max_height, 1, 65535},
        /* what max_width x max_height can reach */
        {"max_pixels", c->max_pixels, 1, (int64_t)65535 * 65535},
        {"max_file_bytes", c->max_file_bytes, 1, (int64_t)1 << 40},
        {"dct_scaling", c->dct_scaling, 0, 1},
        {"gpu_normalize", c->gpu_normalize, 0, 1},
        {"pin_workers", c->pin_workers, 0, 1},
        {"readahead", c->readahead, 0, 4096},
        /* 0: the default; -1: no time limit; a day at most */
        {"max_decode_ms", c->max_decode_ms, -1, 86400000},
        {"max_scans", c->max_scans, 0, 65535},
        {"max_decode_memory", c->max_decode_memory, 0, (int64_t)1 << 40},
    };
    const int rc = check_ranges(r, N_(r));
    if (rc)
        return rc;
    if (c->max_decode_memory > 0 && c->max_decode_memory < ((int64_t)1 << 20))
        return BAD("max_decode_memory",
                   "%lld bytes is less than libjpeg's own tables need "
                   "(at least 1 MiB, or 0 for the default)",
                   (long long)c->max_decode_memory);
    return 0;
}

/* ---- rank and world: the launchers' conventions ---- */

/* The variables each launcher sets, in the order they are looked for. */
typedef struct launcher {
    const char *name;
    const char *rank, *world, *local_rank, *local_world;
} launcher;

static const launcher launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    /* SLURM's tasks on this node: SLURM_NTASKS_PER_NODE when --ntasks-per-
     * node was given, else this node's entry of SLURM_TASKS_PER_NODE. */
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

static int is_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

/* SLURM_TASKS_PER_NODE ("4(x2),3": four tasks on each of two nodes, then
 * three) at node SLURM_NODEID; 0 when either is missing or malformed. */
static int slurm_tasks_here(void)
{
    const char *spec = getenv("SLURM_TASKS_PER_NODE");
    const char *node = getenv("SLURM_NODEID");
    if (!spec || !node || !*node)
        return 0;
    long left = strtol(node, NULL, 10);
    while (*spec) {
        char *end;
        const long tasks = strtol(spec, &end, 10);
        long reps = 1;
        if (end == spec || tasks < 1)
            return 0;
        if (strncmp(end, "(x", 2) == 0) {
            reps = strtol(end + 2, &end, 10);
            if (*end++ != ')' || reps < 1)
                return 0;
        }
        if (left < reps)
            return tasks > 1 << 20 ? 0 : (int)tasks;
        left -= reps;
        spec = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end)
            return 0;
    }
    return 0;
}

/* The node-local rank and size, where the launcher says. */
static int read_local(const launcher *L, config_resolved *out)
{
    int rc = env_int(L->local_rank, "rank", &out->local_rank);
    if (rc >= 0)
        rc = env_int(L->local_world, "world_size", &out->local_world);
    if (rc == 0 && L == &launchers[1]) {
        const int here = slurm_tasks_here();
        if (here > 0)
            out->local_world = here;
    }
    if (rc < 0)
        return rc;
    if (out->local_world < 1 || out->local_rank >= out->local_world) {
        out->local_rank = 0;
        out->local_world = 1; /* inconsistent: not used */
    }
    return 0;
}

/* rank and world from the first launcher whose variables are set; both of
 * its pair must be. */
static int ranks_from_env(const pl_config *cfg, config_resolved *out)
{
    const launcher *L = NULL;
    for (size_t i = 0; i < N_(launchers) && !L; i++)
        if (is_set(launchers[i].rank) || is_set(launchers[i].world))
            L = &launchers[i];
    if (!L) {
        snprintf(out->rank_source, sizeof out->rank_source,
                 "defaults (no launcher variables)");
        return 0;
    }
    int rank = out->rank, world = out->world, rc;
    if ((rc = env_int(L->rank, "rank", &rank)) < 0 ||
        (rc = env_int(L->world, "world_size", &world)) < 0)
        return rc;
    if (!is_set(L->rank) || !is_set(L->world))
        return BAD("%s",
                   "the environment sets %s but not %s (%s's pair): set "
                   "both, or neither",
                   is_set(L->rank) ? "world_size" : "rank",
                   is_set(L->rank) ? L->rank : L->world,
                   is_set(L->rank) ? L->world : L->rank, L->name);
    if (cfg->rank == PL_FROM_ENV)
        out->rank = rank;
    if (cfg->world_size == PL_FROM_ENV)
        out->world = world;
    snprintf(out->rank_source, sizeof out->rank_source, "%s (%s, %s)", L->name,
             L->rank, L->world);
    return read_local(L, out);
}

static int resolve_ranks(const pl_config *cfg, config_resolved *out)
{
    out->rank = cfg->rank == PL_FROM_ENV ? 0 : cfg->rank;
    out->world = cfg->world_size == PL_FROM_ENV ? 1 : cfg->world_size;
    out->local_rank = 0;
    out->local_world = 1;
    snprintf(out->rank_source, sizeof out->rank_source, "config");
    if (cfg->rank == PL_FROM_ENV || cfg->world_size == PL_FROM_ENV) {
        const int rc = ranks_from_env(cfg, out);
        if (rc < 0)
            return rc;
    }
    if (out->world < 1)
        return BAD("world_size", "must be >= 1 (got %d, from %s)", out->world,
                   out->rank_source);
    if (out->rank >= out->world)
        return BAD("rank", "%d is not below world_size %d (from %s)", out->rank,
                   out->world, out->rank_source);
    return 0;
}

/* ---- the default worker count ---- */

static int read_long2(const char *path, long long *a, long long *b)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char buf[128] = "";
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    if (strncmp(buf, "max", 3) == 0) {
        *a = -1;
        return 1;
    }
    return sscanf(buf, "%lld %lld", a, b);
}

int config_cgroup_cpus(const char *root)
{
    char p[512];
    long long quota = -1, period = 0;
    snprintf(p, sizeof p, "%s/cpu.max", root);
    int n = read_long2(p, &quota, &period);
    if (n == 0) { /* cgroup v1 */
        snprintf(p, sizeof p, "%s/cpu/cpu.cfs_quota_us", root);
        long long unused;
        if (read_long2(p, &quota, &unused) == 0)
            return 0;
        snprintf(p, sizeof p, "%s/cpu/cpu.cfs_period_us", root);
        if (read_long2(p, &period, &unused) == 0)
            return 0;
        n = 2;
    }
    if (n < 2 || quota <= 0 || period <= 0)
        return 0;
    const long long cpus = (quota + period - 1) / period;
    return cpus > 1 << 20 ? 1 << 20 : (int)cpus;
}

/* The CPUs this process may run on (its affinity mask). */
static int allowed_cpus(void)
{
    for (int ncpu = 1024; ncpu <= 1 << 16; ncpu *= 4) {
        cpu_set_t *set = CPU_ALLOC((size_t)ncpu);
        if (!set)
            break;
        const size_t size = CPU_ALLOC_SIZE((size_t)ncpu);
        const int ok = sched_getaffinity(0, size, set) == 0;
        const int n = ok ? CPU_COUNT_S(size, set) : 0;
        CPU_FREE(set);
        if (ok)
            return n;
        if (errno != EINVAL)
            break;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* num_workers 0: this rank's share of the CPUs it may use. An affinity
 * mask small enough to be this rank's own (a launcher that binds each rank
 * to its CPUs) is used as it is; a mask the ranks of the node share is
 * divided among them, and so is a cgroup quota. */
static void resolve_workers(const pl_config *cfg, config_resolved *out)
{
    out->num_workers = cfg->num_workers;
    snprintf(out->workers_why, sizeof out->workers_why, "config");
    if (cfg->num_workers > 0)
        return;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int allowed = allowed_cpus(), lw = out->local_world;
    const int own = lw > 1 && (long)allowed * lw <= online;
    int n = own ? allowed : allowed / lw;
    const int quota = config_cgroup_cpus("/sys/fs/cgroup");
    if (quota > 0 && quota / lw < n)
        n = quota / lw;
    n = n < 1 ? 1 : n > 1024 ? 1024 : n;
    char q[48] = "";
    if (quota > 0)
        snprintf(q, sizeof q, ", cgroup quota %d", quota);
    if (lw > 1)
        snprintf(out->workers_why, sizeof out->workers_why,
                 "%d CPUs allowed%s, %d local ranks%s", allowed, q, lw,
                 own ? " (each bound to its own CPUs)" : "");
    else
        snprintf(out->workers_why, sizeof out->workers_why, "%d CPUs allowed%s",
                 allowed, q);
    out->num_workers = n;
}

int config_resolve(const pl_config *cfg, config_resolved *out)
{
    if (!cfg)
        return err_set(PL_EINVAL, "pl_loader_create: config is NULL");
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    int rc = check_shape(cfg);
    if (!rc)
        rc = check_order(cfg);
    if (!rc)
        rc = check_pipeline(cfg);
    if (rc)
        return rc;

    if ((rc = resolve_ranks(cfg, out)) != 0)
        return rc;
    resolve_workers(cfg, out);
    return 0;
}
