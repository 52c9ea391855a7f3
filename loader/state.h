/* pl_state: where a loader stands, as plain bytes to keep in a checkpoint,
 * and the fingerprint of what must not change between the run that saved
 * it and the one that resumes from it. The bytes are little-endian,
 * versioned and checksummed, so a state read back on another machine, or
 * damaged, or from another version, is recognised as such. */
#ifndef PINLOAD_STATE_H
#define PINLOAD_STATE_H

#include <stdint.h>

#include "../catalog/catalog.h"
#include "../workers/ops/ops.h"
#include "pinload.h"

typedef struct state_fields {
    int version; /* of the bytes decoded; state_encode writes the latest */
    int64_t epoch, batch, position; /* the next batch and where it starts */
    int32_t rank, world;
    /* The fingerprint. */
    int64_t dataset_size;
    int32_t batch_size, width, height;
    uint8_t format, augment, on_error, order; /* order: shuffle, drop_last,
                                                 shard_mode, PL_ORDER_SHARDS
                                                 as bits */
    int32_t window; /* PL_ORDER_SHARDS' window; 0 with the global order (as
                       in states saved before it existed) */
    uint64_t seed;
    /* Every sample's name relative to the data root (catalog_rel_name),
     * stored size where known, and label, in order: so a state moves with
     * a copy of the dataset. (Format 1 hashed full paths and labels:
     * state_list_hash_v1.) */
    uint64_t list_hash;
    uint64_t pixels_hash; /* transform, mean, std, dct_scaling, strict, the
                             limits */
} state_fields;

/* The fingerprint of a loader's dataset and configuration (every field but
 * epoch, batch, position); ops: config.transform's pipeline, or NULL for
 * the preset (hashed only when set, so that states saved before it
 * existed still match); views[0 .. nviews): config.views' pipelines
 * (likewise). The list is walked once (catalog_walk: a read of each
 * shard's table, not of each sample's key). 0, or the code of a table that
 * no longer reads (pl_last_error names it). */
int state_fingerprint(state_fields *f, const catalog *cat, const pl_config *c,
                      const ops_pipeline *ops, const ops_pipeline *views,
                      int nviews, int rank, int world);

/* Format 1's list hash (full paths and labels), to compare a format 1
 * state with: computed only when one is resumed from. 0 with [out]
 * *hash, or state_fingerprint's error. */
int state_list_hash_v1(const catalog *cat, uint64_t *hash);

void state_encode(const state_fields *f, pl_state *out);

/* PL_EINVAL, with pl_last_error naming `who`, if the bytes are not a state
 * this version can read. */
int state_decode(const pl_state *in, state_fields *f, const char *who);

/* The first fingerprint field that differs, as a phrase for an error
 * ("the state was saved for 1000 files; this loader lists 999"), or NULL
 * when they agree. Rank and world are not compared. */
const char *state_mismatch(const state_fields *saved, const state_fields *now,
                           char *buf, size_t cap);

#endif
