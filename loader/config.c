#include "config.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/defaults.h"
#include "../common/error.h"
#include "abi.h"
#include "cpus.h"
#include "launcher.h"
#include "../order/sampler.h"

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
    cfg->order = PL_ORDER_GLOBAL;
    cfg->shuffle_window = 0; /* PL_ORDER_SHARDS: SAMPLER_DEFAULT_WINDOW */
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
    cfg->decode = PL_DECODE_CPU;
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

static int check_shape(const pl_config *c)
{
    const range r[] = {
        {"batch_size", c->batch_size, 1, 1 << 16},
        {"width", c->width, 1, 1 << 14},
        {"height", c->height, 1, 1 << 14},
        {"format", (int)c->format, 0, PL_FORMAT_BF16_NCHW},
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
                       c->format == PL_FORMAT_F16_NCHW    ? "float16"
                       : c->format == PL_FORMAT_BF16_NCHW ? "bfloat16"
                                                          : "float32",
                       top);
    }
    return 0;
}

/* config.transform into *ops (with what check_shape let through). */
static int parse_transform(const pl_config *c, int *has, ops_pipeline *ops)
{
    *has = c->transform != NULL;
    if (!*has)
        return 0;
    op_setup s = {.out_w = c->width, .out_h = c->height, .format = c->format};
    memcpy(s.mean, c->mean, sizeof s.mean);
    memcpy(s.std, c->std, sizeof s.std);
    char why[512];
    if (ops_parse(ops, c->transform, &s, why, sizeof why) < 0)
        return BAD("transform", "%s", why);
    return 0;
}

/* config.views: 2 to PL_VIEWS_MAX specs, each parsed at the size it ends
 * at; width and height become view 0's. */
static int parse_views(const pl_config *c, config_resolved *out)
{
    if (c->num_views == 0 && !c->views)
        return 0;
    if (c->num_views < 2 || c->num_views > PL_VIEWS_MAX)
        return BAD("num_views",
                   "%d: config.views gives 2 to %d views (one view is "
                   "config.transform alone)",
                   (int)c->num_views, PL_VIEWS_MAX);
    if (!c->views)
        return BAD("views", "NULL with num_views %d", (int)c->num_views);
    if (c->transform)
        return BAD("transform",
                   "set with config.views: each view is its own spec "
                   "(leave transform NULL)");
    if (c->sample_fn)
        return BAD("sample_fn", "not with config.views (a hook sees one "
                                "image a sample)");
    if (c->decode == PL_DECODE_GPU)
        return BAD("decode",
                   "PL_DECODE_GPU with config.views: the views are made "
                   "from one decode on the CPU (PL_DECODE_AUTO decodes "
                   "there and says so)");
    char why[512];
    for (int v = 0; v < c->num_views; v++) {
        const char *spec = c->views[v];
        if (!spec)
            return BAD("views", "views[%d] is NULL", v);
        op_setup s = {.out_w = c->width, .out_h = c->height,
                      .format = c->format};
        memcpy(s.mean, c->mean, sizeof s.mean);
        memcpy(s.std, c->std, sizeof s.std);
        if (ops_end_size(spec, &s, &s.out_w, &s.out_h, why, sizeof why) < 0 ||
            ops_parse(&out->view_ops[v], spec, &s, why, sizeof why) < 0)
            return BAD("views", "views[%d]: %s", v, why);
        if (out->view_ops[v].nbatch)
            return BAD("views",
                       "views[%d]: %s: a batch op mixes one tensor a batch, "
                       "and a batch of views holds several: not with "
                       "config.views",
                       v, out->view_ops[v].op[out->view_ops[v].n - 1].written);
        if (s.out_w > 1 << 14 || s.out_h > 1 << 14)
            return BAD("views", "views[%d]: ends at %d x %d, past %d pixels a "
                                "side", v, s.out_w, s.out_h, 1 << 14);
        out->view_w[v] = s.out_w;
        out->view_h[v] = s.out_h;
    }
    out->nviews = c->num_views;
    out->cfg.width = out->view_w[0];
    out->cfg.height = out->view_h[0];
    out->cfg.views = NULL;
    return 0;
}

int config_output(const pl_config *cfg, int *has_transform, ops_pipeline *ops)
{
    if (cfg->views || cfg->num_views)
        return BAD("views",
                   "one sample of one spec is made here: give view v's spec "
                   "as config.transform, its size as width and height, and "
                   "seed + v as the seed");
    const int rc = check_shape(cfg);
    return rc ? rc : parse_transform(cfg, has_transform, ops);
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
        {"order", (int)c->order, 0, PL_ORDER_SHARDS},
        {"shuffle_window", c->shuffle_window, 0, INT32_MAX},
    };
    const int rc = check_ranges(r, N_(r));
    if (rc)
        return rc;
    if (c->shuffle_window && c->order != PL_ORDER_SHARDS)
        return BAD("shuffle_window",
                   "%d applies to order PL_ORDER_SHARDS only (order is "
                   "PL_ORDER_GLOBAL, whose shuffle is over the whole "
                   "dataset): leave it 0",
                   (int)c->shuffle_window);
    return 0;
}

#define EXTRA_CHARS                                                            \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."

/* config.extras: up to PL_EXTRAS_MAX distinct names of letters, digits,
 * '_', '-' and inner dots, split into out->extras. */
static int split_extras(const pl_config *c, config_resolved *out)
{
    const range r[] = {{"extras_required", c->extras_required, 0, 1}};
    const int rc = check_ranges(r, N_(r));
    if (rc || !c->extras || !c->extras[0]) /* "": none */
        return rc;
    for (const char *p = c->extras;; p++) {
        const size_t len = strcspn(p, ",");
        if (out->nextras == PL_EXTRAS_MAX)
            return BAD("extras", "\"%s\" names more than %d extras",
                       c->extras, PL_EXTRAS_MAX);
        if (len == 0 || len > CONFIG_EXTRA_NAME_MAX || p[0] == '.' ||
            p[len - 1] == '.' || strspn(p, EXTRA_CHARS) < len)
            return BAD("extras",
                       "\"%.*s\" in \"%s\" is not an extension (1 to %d "
                       "letters, digits, '_', '-' or inner dots: \"txt\", "
                       "\"seg.png\")",
                       (int)len, p, c->extras, CONFIG_EXTRA_NAME_MAX);
        char *name = out->extras[out->nextras];
        memcpy(name, p, len);
        name[len] = '\0';
        for (int k = 0; k < out->nextras; k++)
            if (strcasecmp(out->extras[k], name) == 0)
                return BAD("extras", "\"%s\" names %s twice", c->extras,
                           name);
        out->nextras++;
        p += len;
        if (*p == '\0')
            return 0;
    }
}

static int check_pipeline(const pl_config *c)
{
    const range r[] = {
        {"num_workers", c->num_workers, PL_AUTO, 1024}, /* PL_AUTO: -1 */
        {"prefetch", c->prefetch, PL_AUTO, 1024}, /* 0: below */
        {"memory", (int)c->memory, 0, PL_MEMORY_MANAGED},
        {"pinned_fallback", c->pinned_fallback, 0, 1},
        {"device", c->device, PL_DEVICE_LOCAL_RANK, 1 << 16},
        {"device_buffers", c->device_buffers, 1, 64},
        /* -1: no bound; 0: device_buffers (the default) */
        {"max_device_buffers", c->max_device_buffers, -1, 1 << 20},
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
        {"channels_last", c->channels_last, 0, 1},
        {"pin_workers", c->pin_workers, 0, 1},
        {"readahead", c->readahead, 0, 4096},
        /* 0: the default; -1: no time limit; a day at most */
        {"max_decode_ms", c->max_decode_ms, -1, 86400000},
        {"max_scans", c->max_scans, 0, 65535},
        {"max_decode_memory", c->max_decode_memory, 0, (int64_t)1 << 40},
        {"cache_limit", c->cache_limit, 0, LLONG_MAX},
        /* 0: the default; a day at most */
        {"remote_timeout_ms", c->remote_timeout_ms, 0, 86400000},
        {"remote_retries", c->remote_retries, -1, 100},
        /* 0: the default; -1: none; a day at most */
        {"remote_create_timeout_ms", c->remote_create_timeout_ms, -1,
         86400000},
        {"decode", (int)c->decode, 0, PL_DECODE_AUTO},
        {"cpu_budget", c->cpu_budget, 0, 1024},
    };
    const int rc = check_ranges(r, N_(r));
    if (rc)
        return rc;
    if (c->cpu_budget > 0 && c->num_workers > c->cpu_budget)
        return BAD("num_workers",
                   "%d is above config.cpu_budget (%d): leave num_workers 0 "
                   "or PL_AUTO for the budget to bound it, or raise the "
                   "budget",
                   (int)c->num_workers, (int)c->cpu_budget);
    if (c->prefetch == 0)
        return BAD("prefetch",
                   "0 slots: the ring needs at least 1 (2, the default, "
                   "lets the workers fill a batch while the last one is "
                   "copied), or PL_AUTO for the loader to size it");
    if (c->max_device_buffers > 0 && c->max_device_buffers < c->device_buffers)
        return BAD("max_device_buffers",
                   "%d is less than device_buffers (%d): the bound on the "
                   "pool's growth is at least its first size (or 0 for no "
                   "growth, -1 for no bound)",
                   (int)c->max_device_buffers, (int)c->device_buffers);
    if (c->max_decode_memory > 0 && c->max_decode_memory < ((int64_t)1 << 20))
        return BAD("max_decode_memory",
                   "%lld bytes is less than libjpeg's own tables need "
                   "(at least 1 MiB, or 0 for the default)",
                   (long long)c->max_decode_memory);
    return 0;
}

/* Rank and world size come as a pair: both from the config, or both from
 * the launcher's environment. Half of each would give a rank of another
 * job's world ("rank 0 of 4" on every process of a job the environment
 * does not describe), so one explicit and one PL_FROM_ENV is refused,
 * naming both fields and where each would have come from. */
static int resolve_ranks(const pl_config *cfg, config_resolved *out)
{
    const int rank_env = cfg->rank == PL_FROM_ENV;
    const int world_env = cfg->world_size == PL_FROM_ENV;
    out->rank = rank_env ? 0 : cfg->rank;
    out->world = world_env ? 1 : cfg->world_size;
    out->local_rank = 0;
    out->local_world = 1;
    snprintf(out->rank_source, sizeof out->rank_source, "config");
    if (rank_env || world_env) {
        launch env;
        const int rc = launcher_read(&env);
        if (rc < 0)
            return rc;
        if (rank_env != world_env) {
            char from_env[128];
            if (env.found)
                snprintf(from_env, sizeof from_env, "%d from %s",
                         rank_env ? env.rank : env.world, env.source);
            else
                snprintf(from_env, sizeof from_env,
                         "%d by default: no launcher variables are set",
                         rank_env ? 0 : 1);
            return err_set(PL_EINVAL,
                           "pl_loader_create: config.rank and "
                           "config.world_size: %s is %d in the config, but "
                           "%s is PL_FROM_ENV (%s): set both, or neither",
                           rank_env ? "world_size" : "rank",
                           rank_env ? cfg->world_size : cfg->rank,
                           rank_env ? "rank" : "world_size", from_env);
        }
        if (env.found) {
            out->rank = env.rank;
            out->world = env.world;
            out->local_rank = env.local_rank;
            out->local_world = env.local_world;
        }
        snprintf(out->rank_source, sizeof out->rank_source, "%s", env.source);
    }
    if (out->world < 1)
        return BAD("world_size", "must be >= 1 (got %d, from %s)", out->world,
                   out->rank_source);
    if (out->rank >= out->world)
        return BAD("rank", "%d is not below world_size %d (from %s)", out->rank,
                   out->world, out->rank_source);
    return 0;
}

int config_resolve(const pl_config *cfg, config_resolved *out)
{
    if (!cfg)
        return err_set(PL_EINVAL, "pl_loader_create: config is NULL");
    memset(out, 0, sizeof *out);
    out->cfg = *cfg;
    if (!cfg->data || !*cfg->data)
        return BAD("data", "required (a directory or a list file)");
    int rc = check_shape(cfg);
    if (!rc)
        rc = check_order(cfg);
    if (!rc)
        rc = check_pipeline(cfg);
    if (!rc)
        rc = split_extras(cfg, out);
    if (!rc)
        rc = parse_transform(cfg, &out->has_transform, &out->ops);
    if (!rc)
        rc = parse_views(cfg, out);
    if (rc)
        return rc;
    out->cfg.extras = NULL; /* not kept: out->extras has the names */
    /* Nor the spec: out->ops is it. */
    out->cfg.transform = NULL;
    if (cfg->order == PL_ORDER_SHARDS && cfg->shuffle_window == 0)
        out->cfg.shuffle_window = SAMPLER_DEFAULT_WINDOW;

    if ((rc = resolve_ranks(cfg, out)) != 0)
        return rc;
    out->num_workers = cfg->num_workers;
    out->auto_workers = cfg->num_workers == PL_AUTO;
    out->auto_prefetch = cfg->prefetch == PL_AUTO;
    snprintf(out->workers_why, sizeof out->workers_why, "config");
    if (cfg->num_workers <= 0) {
        char why[sizeof out->workers_why - 64];
        out->num_workers =
            cpus_default_workers(out->local_world, why, sizeof why);
        snprintf(out->workers_why, sizeof out->workers_why, "%s%s",
                 out->auto_workers ? "PL_AUTO: the fewest that keep up, of "
                                     "those for "
                                   : "",
                 why);
        if (cfg->cpu_budget > 0 && out->num_workers > cfg->cpu_budget) {
            out->num_workers = cfg->cpu_budget;
            const size_t n = strlen(out->workers_why);
            snprintf(out->workers_why + n, sizeof out->workers_why - n,
                     "; config.cpu_budget %d", (int)cfg->cpu_budget);
        }
    }
    return 0;
}
