#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

PL_EXPORT void pl_config_default(pl_config *cfg)
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
    cfg->max_width = 32768;
    cfg->max_height = 32768;
    cfg->max_pixels = 178956970;
    cfg->max_file_bytes = (int64_t)256 << 20;
    cfg->dct_scaling = 1;
    cfg->gpu_normalize = 1;
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

/* An environment integer; absent gives `dflt`, malformed is an error. */
static int env_int(const char *name, const char *field, int dflt, int *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        *out = dflt;
        return 0;
    }
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (*end != '\0' || errno || v < 0 || v > 1 << 20)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.%s: environment "
                       "variable %s=\"%s\" is not a valid count",
                       field, name, s);
    *out = (int)v;
    return 0;
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
    for (int i = 0; i < 3; i++) {
        if (!isfinite(c->mean[i]))
            return BAD("mean", "mean[%d] is not finite", i);
        if (!(c->std[i] > 0.0f) || !isfinite(c->std[i]))
            return BAD("std", "std[%d] must be positive (got %g)", i,
                       (double)c->std[i]);
    }
    return 0;
}

static int check_order(const pl_config *c)
{
    const range r[] = {
        {"shuffle", c->shuffle, 0, 1},
        {"drop_last", c->drop_last, 0, 1},
        {"first_epoch", c->first_epoch, 0, LLONG_MAX},
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
        {"device", c->device, PL_DEVICE_HOST, 1 << 16},
        {"device_buffers", c->device_buffers, 1, 64},
        {"keep_host", c->keep_host, 0, 1},
        {"on_error", (int)c->on_error, 0, PL_ON_ERROR_SUBSTITUTE},
        {"strict", c->strict, 0, 1},
        {"max_width", c->max_width, 1, 65535},
        {"max_height", c->max_height, 1, 65535},
        {"max_pixels", c->max_pixels, 1, LLONG_MAX},
        {"max_file_bytes", c->max_file_bytes, 1, LLONG_MAX},
        {"dct_scaling", c->dct_scaling, 0, 1},
        {"gpu_normalize", c->gpu_normalize, 0, 1},
        {"pin_workers", c->pin_workers, 0, 1},
        {"readahead", c->readahead, 0, 4096},
    };
    const int rc = check_ranges(r, N_(r));
    if (rc)
        return rc;
    for (int i = 0; i < 8; i++)
        if (c->reserved[i])
            return BAD("reserved",
                       "reserved[%d] must be zero (was the config "
                       "filled by pl_config_default?)",
                       i);
    return 0;
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

    out->rank = cfg->rank;
    out->world = cfg->world_size;
    if (cfg->rank == PL_FROM_ENV &&
        (rc = env_int("RANK", "rank", 0, &out->rank)) != 0)
        return rc;
    if (cfg->world_size == PL_FROM_ENV &&
        (rc = env_int("WORLD_SIZE", "world_size", 1, &out->world)) != 0)
        return rc;
    if (out->world < 1)
        return BAD("world_size", "must be >= 1 (got %d)", out->world);
    if (out->rank >= out->world)
        return BAD("rank", "%d is not below world_size %d", out->rank,
                   out->world);

    out->num_workers = cfg->num_workers;
    if (out->num_workers == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        out->num_workers = n > 0 ? (n > 1024 ? 1024 : (int)n) : 1;
    }
    return 0;
}
