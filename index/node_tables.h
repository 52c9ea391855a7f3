/* The dataset table file: the sample tables (sample_table.h) of every
 * shard of a dataset, one after another in one file, open once. Past
 * SHARDS_MAPPED_MAX shards (catalog/shard_samples.h) the tables are not
 * read from one index file each (a descriptor each) but from this file:
 * the page cache holds them, shared by the node's ranks, and a rank keeps
 * O(shards) of its own, one descriptor for them all. A table is read
 * into the heap at create (one at a time, checked), then only its place
 * is kept and each sample's key is read with pread and checked again
 * (sample_table_key_view): the file truncated or rewritten in place under
 * a running loader gives an error naming it, never a signal.
 *
 * It lives in the index folder (idx_file_dir: $PINLOAD_INDEX_DIR, else the
 * user's cache folder), named by a hash of the shards' absolute paths
 * ("<hash>-<n>.tables"), written to a temporary name then renamed (never
 * in place: a reader's descriptor keeps the file it opened), by one
 * process while the others creating over the same shards wait on its
 * lock (where there is no lock, each writes a whole one; the last rename
 * wins, and either is valid). A shard that changed (its size, mtime or
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

/* The file at `path`, opened without following a link, if its header
 * and directory are exactly those of the shards of e[0, n): its
 * descriptor, with each table's place set in e[i].offset and .len; else
 * -1 ([out] *stale: 0 if it is absent, 1 if damaged or for other
 * shards). */
int node_tables_open(const char *path, node_tables_entry *e, int n,
                     int *stale);

/* Shard e's table from the file open as fd (node_tables_open's), read
 * into the heap and checked (its checksum, its records, its shard): 0
 * with *tab attached to the file (fd and path stay the caller's and must
 * outlive the table: sample_table_attach), or -1 if it does not check
 * (the file is damaged: written anew). One table at a time, so that
 * create never holds the whole file. */
int node_tables_table(int fd, const char *path, const node_tables_entry *e,
                      sample_table *tab);

/* The lock that makes one process of those creating over the same shards
 * at once (a node's ranks) write the file while the others wait, then
 * read it: `path`.lock (made, and kept; a link there is not followed),
 * locked with flock. Its
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
