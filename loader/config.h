/* pl_config: defaults, validation naming the field, and the values pinload
 * settles on at create time: rank and world (from the launcher's
 * environment, launcher.h, where the config leaves them), and the worker
 * count (cpus.h). */
#ifndef PINLOAD_CONFIG_H
#define PINLOAD_CONFIG_H

#include "../workers/ops/ops.h"
#include "pinload.h"

/* The longest name config.extras may give. */
#define CONFIG_EXTRA_NAME_MAX 31

/* The settled configuration. */
typedef struct config_resolved {
    pl_config cfg; /* cfg.data still points at the caller's string */
    int rank, world;
    int local_rank, local_world; /* on this node; 0 and 1 when unknown */
    /* Where rank and world came from, for the create notice: "config",
     * "defaults (no launcher variables)", "torchrun (RANK, WORLD_SIZE)". */
    char rank_source[96];
    int num_workers;  /* threads started */
    int auto_workers; /* PL_AUTO: autotune.h picks how many take samples */
    char workers_why[224]; /* "config", or how the default was reached */
    /* prefetch PL_AUTO: the ring starts at RINGTUNE_START slots and grows
     * as autotune.h's ringtune says, up to what the pinned bound allows. */
    int auto_prefetch;
    /* config.extras, split: the names in the order given. */
    int nextras;
    char extras[PL_EXTRAS_MAX][CONFIG_EXTRA_NAME_MAX + 1];
    /* config.transform, parsed (cfg.transform is then NULL: not kept);
     * has_transform 0: config.augment's preset. */
    int has_transform;
    ops_pipeline ops;
    /* config.views, parsed (cfg.views is then NULL: not kept), each at the
     * size it ends at (cfg.width and height: view 0's); nviews 0: none. */
    int nviews;
    int view_w[PL_VIEWS_MAX], view_h[PL_VIEWS_MAX];
    ops_pipeline view_ops[PL_VIEWS_MAX];
} config_resolved;

/* Check every field of *cfg and settle the automatic ones (the shard
 * order's shuffle_window included). On error sets
 * pl_last_error to "pl_loader_create: config.<field>: <why>" and returns
 * PL_EINVAL. */
int config_resolve(const pl_config *cfg, config_resolved *out);

/* The output's fields alone (width, height, format, augment, mean, std,
 * transform), checked as config_resolve checks them, config.data not
 * read; [out] *has_transform and *ops as config_resolve sets them. */
int config_output(const pl_config *cfg, int *has_transform, ops_pipeline *ops);

#endif
