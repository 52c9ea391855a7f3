/* The bound on page-locked host memory (include/pinload.h,
 * pl_loader_create): what a loader locks at create, times the ranks of its
 * node (each makes its own), against half of what the node may use: its
 * memory, or the cgroup's limit where that is lower. Checked before
 * anything is allocated, so that a configuration the node cannot hold
 * fails at once, naming the numbers, instead of taking memory the kernel
 * can neither swap nor reclaim until the node thrashes or its OOM killer
 * comes. */
#ifndef PINLOAD_PINNED_H
#define PINLOAD_PINNED_H

#include <stddef.h>

#include "../common/machine.h"

/* Of what the node may use, the page-locked memory of its loaders may
 * take at most 1 / PINNED_SHARE (see pinned.c for why half). */
#define PINNED_SHARE 2

/* What one loader will lock. */
typedef struct pinned_need {
    int ranks;           /* the launcher's ranks on this node; 1 unknown */
    int slots;           /* ring slots (prefetch) if the ring is locked */
    size_t slot_bytes;   /* one slot: a batch as the workers write it */
    int mirrors;         /* keep_host's host mirrors (device_buffers) */
    size_t mirror_bytes; /* one mirror: a batch as delivered */
} pinned_need;

/* 0 if need x ranks fits within the share of *m; else PL_ENOMEM, with
 * pl_last_error naming the numbers and what to change. Nothing is checked
 * where the machine's memory is not known (total 0). */
int pinned_check(const pinned_need *need, const machine_memory *m);

#endif
