#include "state.h"

#include <stdio.h>
#include <string.h>

#include "../common/bytes.h"
#include "../common/defaults.h"
#include "../common/error.h"
#include "../order/sampler.h"

#define STATE_MAGIC "PLST"
/* 2: the list hash of relative names (1: of full paths; still read). */
#define STATE_VERSION 2
#define CHECKSUM_AT (PL_STATE_BYTES - 8)
/* In the order byte: the states of PL_ORDER_SHARDS (whose window is at
 * byte 88; both 0 in states saved before it existed, which so stay valid
 * and of the global order, and a pinload without it refuses such a state
 * for its other order settings). */
#define ORDER_SHARDS_BIT 8

/* FNV-1a, 64 bits (common/bytes.h): enough to tell one file list or
 * configuration from another, and the same on every machine. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    unsigned char b[8];
    le_put64(b, v);
    return fnv1a(h, b, 8);
}

static uint64_t fnv_float(uint64_t h, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return fnv_u64(h, u);
}

/* One sample into the list hash *arg: its name (with its NUL), stored
 * size and label, as the state's format has them since version 2. */
static void hash_sample(void *arg, const char *name, int64_t size,
                        int32_t label)
{
    uint64_t *h = arg;
    *h = fnv1a(*h, name, strlen(name) + 1);
    *h = fnv_u64(*h, (uint64_t)size);
    *h = fnv_u64(*h, (uint64_t)(uint32_t)label);
}

/* The same for a state of version 1: the full name and the label. */
static void hash_sample_v1(void *arg, const char *name, int64_t size,
                           int32_t label)
{
    uint64_t *h = arg;
    (void)size;
    *h = fnv1a(*h, name, strlen(name) + 1);
    *h = fnv_u64(*h, (uint64_t)(uint32_t)label);
}

int state_fingerprint(state_fields *f, const catalog *cat, const pl_config *c,
                      const ops_pipeline *ops, const ops_pipeline *views,
                      int nviews, int rank, int world)
{
    memset(f, 0, sizeof *f);
    f->rank = rank;
    f->world = world;
    f->dataset_size = catalog_size(cat);
    f->batch_size = c->batch_size;
    f->width = c->width;
    f->height = c->height;
    f->format = (uint8_t)c->format;
    f->augment = (uint8_t)c->augment;
    f->on_error = (uint8_t)c->on_error;
    const int shards = c->order == PL_ORDER_SHARDS;
    f->order = (uint8_t)((c->shuffle ? 1 : 0) | (c->drop_last ? 2 : 0) |
                         (c->shard_mode == PL_SHARD_DROP ? 4 : 0) |
                         (shards ? ORDER_SHARDS_BIT : 0));
    if (shards)
        f->window = c->shuffle_window; /* settled by config_resolve */
    f->seed = c->seed;
    uint64_t h = FNV_SEED;
    const int rc = catalog_walk(cat, 1, hash_sample, &h);
    if (rc < 0)
        return rc;
    f->list_hash = h;
    h = FNV_SEED;
    for (int i = 0; i < 3; i++) {
        h = fnv_float(h, c->mean[i]);
        h = fnv_float(h, c->std[i]);
    }
    h = fnv_u64(h, (uint64_t)c->dct_scaling);
    h = fnv_u64(h, (uint64_t)c->strict);
    h = fnv_u64(h, (uint64_t)c->max_width);
    h = fnv_u64(h, (uint64_t)c->max_height);
    h = fnv_u64(h, (uint64_t)c->max_pixels);
    h = fnv_u64(h, (uint64_t)c->max_file_bytes);
    /* Budgets that decide which samples are bad; hashed only when not
     * the default, so that states saved before they existed still match.
     * (The time limit depends on the machine: not hashed.) */
    if (c->max_scans && c->max_scans != DEFAULT_MAX_SCANS)
        h = fnv_u64(h, 0x5ca45u ^ (uint64_t)c->max_scans);
    if (c->max_decode_memory &&
        c->max_decode_memory != DEFAULT_MAX_DECODE_MEMORY)
        h = fnv_u64(h, 0x3e30u ^ (uint64_t)c->max_decode_memory);
    /* The layout of float output: hashed only when channels-last, so that
     * states saved before it existed still match. */
    if (c->channels_last && c->format != PL_FORMAT_U8_NHWC)
        h = fnv_u64(h, 0xc1a5u);
    /* The ops, every parameter written out: hashed only when
     * config.transform is set, likewise. */
    if (ops) {
        char spec[8192];
        const int n = ops_format(ops, spec, sizeof spec);
        h = fnv_u64(h, 0x7a5fu);
        h = fnv1a(h, spec, n < (int)sizeof spec ? (size_t)n : sizeof spec - 1);
    }
    /* The views, each every parameter written out: hashed only when
     * config.views is set, likewise. */
    for (int v = 0; v < nviews; v++) {
        char spec[8192];
        const int n = ops_format(&views[v], spec, sizeof spec);
        h = fnv_u64(h, 0x71e0u + (uint64_t)v);
        h = fnv1a(h, spec, n < (int)sizeof spec ? (size_t)n : sizeof spec - 1);
    }
    f->pixels_hash = h;
    return 0;
}

static void put(uint8_t *b, size_t at, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get(const uint8_t *b, size_t at, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)b[at + (size_t)i] << (8 * i);
    return v;
}

int state_list_hash_v1(const catalog *cat, uint64_t *hash)
{
    *hash = FNV_SEED;
    return catalog_walk(cat, 0, hash_sample_v1, hash);
}

void state_encode(const state_fields *f, pl_state *out)
{
    uint8_t *b = out->bytes;
    memset(b, 0, PL_STATE_BYTES);
    memcpy(b, STATE_MAGIC, 4);
    put(b, 4, STATE_VERSION, 2);
    put(b, 6, PL_STATE_BYTES, 2);
    put(b, 8, (uint64_t)f->epoch, 8);
    put(b, 16, (uint64_t)f->batch, 8);
    put(b, 24, (uint64_t)f->position, 8);
    put(b, 32, (uint32_t)f->rank, 4);
    put(b, 36, (uint32_t)f->world, 4);
    put(b, 40, (uint64_t)f->dataset_size, 8);
    put(b, 48, (uint32_t)f->batch_size, 4);
    put(b, 52, (uint32_t)f->width, 4);
    put(b, 56, (uint32_t)f->height, 4);
    b[60] = f->format;
    b[61] = f->augment;
    b[62] = f->on_error;
    b[63] = f->order;
    put(b, 64, f->seed, 8);
    put(b, 72, f->list_hash, 8);
    put(b, 80, f->pixels_hash, 8);
    put(b, 88, (uint32_t)f->window, 4);
    put(b, CHECKSUM_AT, fnv1a(FNV_SEED, b, CHECKSUM_AT), 8);
}

int state_decode(const pl_state *in, state_fields *f, const char *who)
{
    const uint8_t *b = in->bytes;
    if (memcmp(b, STATE_MAGIC, 4) != 0)
        return err_set(PL_EINVAL, "%s: not a pinload state", who);
    const uint64_t version = get(b, 4, 2);
    if (version < 1 || version > STATE_VERSION ||
        get(b, 6, 2) != PL_STATE_BYTES)
        return err_set(PL_EINVAL,
                       "%s: a state of format %u, this pinload reads "
                       "formats 1 to %d",
                       who, (unsigned)get(b, 4, 2), STATE_VERSION);
    if (get(b, CHECKSUM_AT, 8) != fnv1a(FNV_SEED, b, CHECKSUM_AT))
        return err_set(PL_EINVAL, "%s: the state is damaged (checksum)", who);
    memset(f, 0, sizeof *f);
    f->version = (int)version;
    f->epoch = (int64_t)get(b, 8, 8);
    f->batch = (int64_t)get(b, 16, 8);
    f->position = (int64_t)get(b, 24, 8);
    f->rank = (int32_t)get(b, 32, 4);
    f->world = (int32_t)get(b, 36, 4);
    f->dataset_size = (int64_t)get(b, 40, 8);
    f->batch_size = (int32_t)get(b, 48, 4);
    f->width = (int32_t)get(b, 52, 4);
    f->height = (int32_t)get(b, 56, 4);
    f->format = b[60];
    f->augment = b[61];
    f->on_error = b[62];
    f->order = b[63];
    f->seed = get(b, 64, 8);
    f->list_hash = get(b, 72, 8);
    f->pixels_hash = get(b, 80, 8);
    f->window = (int32_t)get(b, 88, 4);
    if (f->epoch < 0 || f->batch < 0 || f->position < 0 || f->world < 1 ||
        f->rank < 0 || f->rank >= f->world)
        return err_set(PL_EINVAL, "%s: the state is damaged (fields)", who);
    return 0;
}

/* "global", or "shards (shuffle_window 4096)". */
static const char *order_name(const state_fields *f, char *buf, size_t cap)
{
    if (!(f->order & ORDER_SHARDS_BIT))
        return "global";
    snprintf(buf, cap, "shards (shuffle_window %d)", (int)f->window);
    return buf;
}

const char *state_mismatch(const state_fields *s, const state_fields *n,
                           char *buf, size_t cap)
{
    char sa[48], na[48];
    if (s->dataset_size != n->dataset_size)
        snprintf(buf, cap,
                 "the state was saved for %lld files; this loader lists %lld",
                 (long long)s->dataset_size, (long long)n->dataset_size);
    else if (s->list_hash != n->list_hash)
        snprintf(buf, cap,
                 "the state was saved for another file list (same count, "
                 "other paths or labels)");
    else if (s->batch_size != n->batch_size)
        snprintf(buf, cap,
                 "the state was saved with batch_size %d; this "
                 "loader has %d",
                 s->batch_size, n->batch_size);
    else if (s->width != n->width || s->height != n->height)
        snprintf(buf, cap,
                 "the state was saved for %dx%d output; this loader "
                 "makes %dx%d",
                 s->width, s->height, n->width, n->height);
    else if (s->format != n->format || s->augment != n->augment)
        snprintf(buf, cap,
                 "the state was saved with format %d and augment %d;"
                 " this loader has %d and %d",
                 s->format, s->augment, n->format, n->augment);
    else if (s->seed != n->seed)
        snprintf(buf, cap,
                 "the state was saved with seed %llu; this loader "
                 "has %llu",
                 (unsigned long long)s->seed, (unsigned long long)n->seed);
    else if ((s->order & ORDER_SHARDS_BIT) != (n->order & ORDER_SHARDS_BIT) ||
             s->window != n->window)
        snprintf(buf, cap,
                 "the state was saved with order %s; this loader has %s",
                 order_name(s, sa, sizeof sa), order_name(n, na, sizeof na));
    else if (s->order != n->order)
        snprintf(buf, cap,
                 "the state was saved with other shuffle, drop_last "
                 "or shard_mode settings");
    else if (s->on_error != n->on_error)
        snprintf(buf, cap,
                 "the state was saved with on_error %d; this loader "
                 "has %d",
                 s->on_error, n->on_error);
    else if (s->pixels_hash != n->pixels_hash)
        snprintf(buf, cap,
                 "the state was saved with another transform, or "
                 "other mean, std, dct_scaling, strict, channels_last or "
                 "limits");
    else
        return NULL;
    return buf;
}

PL_EXPORT int pl_state_get(const pl_state *state, int64_t *epoch,
                           int64_t *batch, int64_t *position)
{
    if (!state)
        return err_set(PL_EINVAL, "pl_state_get: state is NULL");
    state_fields f;
    const int rc = state_decode(state, &f, "pl_state_get");
    if (rc < 0)
        return rc;
    if (epoch)
        *epoch = f.epoch;
    if (batch)
        *batch = f.batch;
    if (position)
        *position = f.position;
    return 0;
}
