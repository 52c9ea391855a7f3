/* The index file of a tar shard, on disk beside it (shard.tar.idx, its
 * "sidecar index"): what a scan of its headers found, so that the next
 * create reads one small file per shard instead of every header, and the
 * catalog reads each sample's key from it (sample_table.h: kept open, read
 * with pread, never mapped): the page cache holds one copy for every rank
 * of a node, and no rank keeps a per-sample table of its own. Opened
 * without following a link.
 *
 * The format is version 2, "PLTARIX2" (sample_table.h has its layout):
 * the shard's size and mtime, fixed-width member and key (sample)
 * records and the names, checked by an FNV-1a checksum. Version 1,
 * "PLTARIX1" (the size and mtime, then per member its offset, size, name
 * length, small length and bytes), is still read, and written anew as
 * version 2 where it was found. Written next to the shard (to a temporary
 * name, then renamed), or where that folder cannot be written in
 * $XDG_CACHE_HOME/pinload or ~/.cache/pinload, named by a hash of the
 * shard's absolute path; with $PINLOAD_INDEX_DIR set, only there. One whose
 * size or mtime differs from the shard's, or that does not check, is not
 * used (and is written anew). */
#ifndef PINLOAD_IDX_FILE_H
#define PINLOAD_IDX_FILE_H

#include <sys/stat.h>

#include "sample_table.h"
#include "tar.h"

/* The members of the shard at `path` (whose fstat is *st) from its
 * sidecar of either version: 1 with [out] *t, or 0 if there is none
 * usable; [out] *stale: one was found but did not match the shard or did
 * not check. Something other than a file under the index's name (a
 * folder, a FIFO: opened without blocking) counts as none. */
int idx_file_find(const char *path, const struct stat *st, tar_index *t,
                 int *stale);

/* The table of the shard at `path` from a version-2 sidecar that matches
 * *st: 1 with [out] *tab, in the heap and attached to the file (kept open,
 * sample_table_attach: file-backed once the catalog takes it), or only in
 * the heap when in_heap; or 0 if there is none (a version-1 one is not stale: it is
 * read with idx_file_find, then kept as version 2); [out] *stale as
 * idx_file_find's. */
int idx_file_table(const char *path, const struct stat *st, int in_heap,
                  sample_table *tab, int *stale);

/* The same for the index file idx of a shard of `size` bytes (any when
 * st is NULL and size < 0) or whose fstat is *st. */
int idx_file_table_at(const char *idx, const struct stat *st, int64_t size,
                     int in_heap, sample_table *tab, int *stale);

/* t written as the version-2 sidecar of the shard at `path`, in the first
 * place that takes it, and [out] *tab read from there (1); where no
 * place takes it, *tab holds the same bytes in the heap (0). PL_ENOMEM,
 * or PL_EINVAL for a shard past the format's bounds. */
int idx_file_keep(const char *path, const struct stat *st, const tar_index *t,
                 int in_heap, sample_table *tab);

/* The same at the index file idx of a remote shard of `size` bytes (a
 * version-2 file there that holds it is read as it is). */
int idx_file_keep_at(const char *idx, int64_t size, const tar_index *t,
                    int in_heap, sample_table *tab);

/* Write t as the sidecar of the shard at `path`, in the first place that
 * takes it (best effort: a shard on a read-only file system is read all
 * the same). 0 if written. */
int idx_file_write(const char *path, const struct stat *st, const tar_index *t);

/* A remote shard's index, fetched to the file idx (the shard is not here
 * yet, so its mtime is not checked): 1 with [out] *t and the size of the
 * shard it was made from in [out] *shard_size, or 0 if it is absent, damaged
 * or does not check. */
int idx_file_read_any(const char *idx, tar_index *t, int64_t *shard_size);

/* Write t as the index file idx of the shard whose fstat is *st (to a
 * temporary name, then renamed). 0 if written. */
int idx_file_write_at(const char *idx, const struct stat *st,
                     const tar_index *t);

/* The folder index files go to when not beside their shard (and the
 * dataset table file, node_tables.h, always): $PINLOAD_INDEX_DIR if set,
 * else $XDG_CACHE_HOME/pinload, else ~/.cache/pinload. 0 with out[0, cap),
 * or -1 if there is none (or it does not fit). */
int idx_file_dir(char *out, size_t cap);

/* mkdir -p of the folder holding `file` (best effort). */
void idx_file_make_folder_of(const char *file);

#endif
