/* pl_config: defaults, validation, and the values pinload settles on at
 * create time (rank and world from the environment, worker count). */
#ifndef PINLOAD_CONFIG_H
#define PINLOAD_CONFIG_H

#include "pinload.h"

/* The settled configuration. */
typedef struct config_resolved {
    pl_config cfg; /* cfg.data still points at the caller's string */
    int rank, world;
    int num_workers;
} config_resolved;

/* Check every field of *cfg and settle the automatic ones. On error sets
 * pl_last_error to "pl_loader_create: config.<field>: <why>" and returns
 * PL_EINVAL. */
int config_resolve(const pl_config *cfg, config_resolved *out);

#endif
