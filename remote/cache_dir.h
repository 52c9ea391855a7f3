/* The node cache's folder (cache_dir.c), made and checked before
 * any file is opened in it, so that another user of the machine cannot
 * turn the cache against its user: the folders it makes are 0700, and a
 * folder is refused when another user could change what lies in it (the
 * rules, and how to share a cache on purpose, are in docs/DATA.md). Used
 * by the cache (cache.c) alone. */
#ifndef PINLOAD_REMOTE_CACHE_DIR_H
#define PINLOAD_REMOTE_CACHE_DIR_H

#include <stddef.h>

/* The cache folder `dir`, made where missing (each folder made 0700) and
 * checked, with every folder above it, as docs/DATA.md says; `named`: the
 * user named it (config.cache_dir or $PINLOAD_CACHE_DIR), which a folder
 * shared by a group on purpose needs. 0 with [out] real[cap], the folder
 * with no symbolic link left in it (the cache's paths are made from it),
 * and *shared (1 for a group's shared folder, whose files are then made
 * group-writable); or PL_EIO with pl_last_error naming the folder, its
 * owner and mode and what to do. */
int cache_dir_prepare(const char *dir, int named, char *real, size_t cap,
                      int *shared);

#endif
