/* The file list, built once at create time: every sample's path and label,
 * and the class names. Paths are kept as the user would write them (the
 * data root joined with the file's place under it); workers open them
 * relative to a descriptor of the root, so a later chdir() changes nothing.
 * Strings live in one arena, so a million files cost few allocations. */
#ifndef PINLOAD_DATASET_H
#define PINLOAD_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../common/log.h"
#include "pinload.h"

typedef struct dataset {
    int dirfd;       /* the root, open */
    char *root;      /* the root as the user named it ("." for none) */
    size_t rel_skip; /* chars of "root/" that start each relative path */
    char *arena;     /* NUL-terminated strings */
    size_t arena_len, arena_cap;
    size_t *path_off; /* [n] into arena */
    int32_t *labels;  /* [n] */
    int64_t n;
    size_t cap;
    size_t *class_off; /* [num_classes] into arena */
    int num_classes;
    size_t class_cap;
    /* Tar shards (input/shards.h), nshards > 0: sample i is bytes
     * [offset[i], offset[i] + size[i]) of shard_fd[shard[i]]; a negative
     * size (SHARD_*) marks a sample bad by construction, offset[i] then
     * being its reason's place in the arena. */
    int nshards;
    int *shard_fd;
    int32_t *shard;
    int64_t *offset, *size;
    size_t shard_cap;
} dataset;

#define SHARD_NO_IMAGE (-1)  /* a key without a jpg/jpeg member */
#define SHARD_BAD_LABEL (-2) /* a cls member that is not a label */

/* A shard sample bad by construction: its code (PL_ENOTJPEG for a key
 * without an image, PL_ECORRUPT for a bad label) and [out] *reason; 0 for
 * every other sample. */
static inline int dataset_sample_error(const dataset *ds, int64_t i,
                                       const char **reason)
{
    if (!ds->nshards || ds->size[i] >= 0)
        return 0;
    *reason = ds->arena + ds->offset[i];
    return ds->size[i] == SHARD_NO_IMAGE ? PL_ENOTJPEG : PL_ECORRUPT;
}

/* List `path`: a directory (ImageFolder, or flat with label 0) or a list
 * file. Sets pl_last_error and returns PL_ENODATA when nothing is found,
 * PL_EIO / PL_EINVAL / PL_ENOMEM otherwise. Notices (ignored files,
 * symlink loops) go to lg. */
int dataset_open(dataset *ds, const char *path, logger *lg);
void dataset_close(dataset *ds);

/* Sample i's path as the user would write it. */
static inline const char *dataset_path(const dataset *ds, int64_t i)
{
    return ds->arena + ds->path_off[i];
}

/* The same path for openat(ds->dirfd, ...): relative to the root when it
 * lies under it, so that renaming or leaving the root's parent directory
 * after create changes nothing; as given for an absolute list entry. */
static inline const char *dataset_open_path(const dataset *ds, int64_t i)
{
    const char *p = ds->arena + ds->path_off[i];
    const size_t n = ds->rel_skip;
    if (n && strncmp(p, ds->root, n - 1) == 0 && p[n - 1] == '/')
        return p + n;
    return p;
}

static inline const char *dataset_class(const dataset *ds, int c)
{
    return ds->arena + ds->class_off[c];
}

/* For input/shards.c: a sample (path as given, the root being "."), a
 * class name, a string kept in the arena. */
int dataset_add_sample(dataset *ds, const char *path, size_t len,
                       int32_t label);
int dataset_add_class(dataset *ds, const char *name);
int dataset_arena_add(dataset *ds, const char *s, size_t len, size_t *off);

#endif
