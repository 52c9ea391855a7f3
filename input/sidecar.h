/* The sidecar index of a tar shard (shard.tar.idx): what a scan of its
 * headers found, so that the next create reads one small file per shard
 * instead of every header.
 *
 * The format: "PLTARIX1", the shard's size and mtime (s, ns), the member
 * count, then per member its offset, size, name length, small length (255:
 * none), name and small bytes, all little-endian; an FNV-1a checksum of
 * everything before closes it. Written next to the shard (to a temporary
 * name, then renamed), or where that folder cannot be written in
 * $XDG_CACHE_HOME/pinload or ~/.cache/pinload, named by a hash of the
 * shard's absolute path; with $PINLOAD_INDEX_DIR set, only there. One whose
 * size or mtime differs from the shard's, or that does not check, is not
 * used (and is written anew). */
#ifndef PINLOAD_SIDECAR_H
#define PINLOAD_SIDECAR_H

#include <sys/stat.h>

#include "tar.h"

/* The index of the shard at `path` (whose fstat is *st) from its sidecar:
 * 1 with [out] *t, or 0 if there is none usable; [out] *stale: one was
 * found but did not match the shard or did not check. Something other than
 * a file under the index's name (a folder, a FIFO: opened without
 * blocking) counts as none. */
int sidecar_find(const char *path, const struct stat *st, tar_index *t,
                 int *stale);

/* Write t as the sidecar of the shard at `path`, in the first place that
 * takes it (best effort: a shard on a read-only file system is read all
 * the same). 0 if written. */
int sidecar_write(const char *path, const struct stat *st, const tar_index *t);

/* A remote shard's index, fetched to the file idx (the shard is not here
 * yet, so its mtime is not checked): 1 with [out] *t and the size of the
 * shard it was made from in [out] *shard_size, or 0 if it is absent, damaged
 * or does not check. */
int sidecar_read_any(const char *idx, tar_index *t, int64_t *shard_size);

/* Write t as the index file idx of the shard whose fstat is *st (to a
 * temporary name, then renamed). 0 if written. */
int sidecar_write_at(const char *idx, const struct stat *st,
                     const tar_index *t);

#endif
