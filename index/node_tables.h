/* The dataset table file: the sample tables (sample_table.h) of every
 * shard of a dataset, one after another in one file, mapped once. Each
 * mapping is one of the process's vm.max_map_count areas (65,530 by
 * default), so past SHARDS_MAPPED_MAX shards (catalog/shard_samples.h)
 * the tables are not mapped one file each but from this file: the page
 * cache holds them, shared by the node's ranks, and a rank keeps
 * O(shards) of its own.
 *
 * It lives in the index folder (idx_file_dir: $PINLOAD_INDEX_DIR, else the
 * user's cache folder), named by a hash of the shards' absolute paths
 * ("<hash>-<n>.tables"), written to a temporary name then renamed, by
 * one process while the others creating over the same shards wait on
 * its lock (where there is no lock, each writes a whole one; the last
 * rename wins, and either is valid). A shard that changed (its size, mtime or
 * inode) makes it stale: it is written anew under the same name.
 *
 * The layout, little-endian, 8-byte aligned:
 *   0   "PLTABLES"
 *   8   shards n (u64), 16: zero (u64), 24: FNV-1a 64 of bytes [0, 24)
 *       and of the directory
 *   32  n entries of 64 bytes: the table's offset (u64) and length (u64);
 *       the shard's size (u64), mtime s (i64), ns (i64), inode (u64) and
 *       FNV-1a 64 of its absolute path (u64); zero (u64)
 *   then the tables, each a whole version-2 table (its own checksum). */
#ifndef PINLOAD_NODE_TABLES_H
#define PINLOAD_NODE_TABLES_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "sample_table.h"

#define NODE_TABLES_MAGIC "PLTABLES"
#define NODE_TABLES_HEAD 32
#define NODE_TABLES_ENTRY 64

/* What identifies shard i: set by node_tables_identify from its path and
 * fstat, filled with its table's place by the writer. */
typedef struct node_tables_entry {
    uint64_t offset, len;
    uint64_t size;
    int64_t mtime_s, mtime_ns;
    uint64_t ino, path_hash;
} node_tables_entry;

/* Entry e for the shard at `path` whose fstat is *st (a relative path is
 * taken from the working folder, without resolving links: a cheap,
 * stable name). */
void node_tables_identify(node_tables_entry *e, const char *path,
                         const struct stat *st);

/* The file for the shards of e[0, n) in the index folder: 0 with
 * out[0, cap), or -1 where there is no index folder. */
int node_tables_path(const node_tables_entry *e, int n, char *out, size_t cap);

/* The file at `path`, if it holds exactly the shards of e[0, n) and every
 * table checks: 1, with tabs[0, n) slices of it (SAMPLE_TABLE_PART) and
 * [out] *map, *len the mapping, which the caller unmaps after the
 * tables; else 0 (absent: *stale 0; damaged or for other shards: 1). */
int node_tables_map(const char *path, const node_tables_entry *e, int n,
                   sample_table *tabs, void **map, size_t *len, int *stale);

/* The lock that makes one process of those creating over the same shards
 * at once (a node's ranks) write the file while the others wait, then
 * map it: `path`.lock (made, and kept), locked with flock. Its
 * descriptor, or -1 where it cannot be had (each then writes its own:
 * still correct, only slower). */
int node_tables_lock(const char *path);

/* Safe with -1. */
void node_tables_unlock(int fd);

/* Writing one: begin, a table for each shard in order, end. */
typedef struct node_tables_writer {
    int fd;
    uint64_t at; /* where the next table goes */
    char tmp[PATH_MAX + 64];
    char path[PATH_MAX];
} node_tables_writer;

/* A temporary file beside `path` for n shards: 0, or -1 if it cannot be
 * made there (the folder is made first). */
int node_tables_begin(node_tables_writer *w, const char *path, int n);

/* Shard i's table appended, its place noted in *e. 0 or -1. */
int node_tables_add(node_tables_writer *w, const sample_table *tab,
                   node_tables_entry *e);

/* The directory e[0, n) written, the file synced and renamed to its path
 * (ok != 0), or the temporary file removed (ok == 0, or a failure): 0 if
 * it was renamed. */
int node_tables_end(node_tables_writer *w, const node_tables_entry *e, int n,
                   int ok);

#endif
