/* The sample catalog: every sample's name (its path as the user would
 * write it), label and location, and the class names, built once at create
 * time by the readers above it (folder.c, list.c, shards.c) and read by the
 * loader after. Files (folders, list files) are kept per sample in the
 * heap: a name in one arena (a million samples cost few allocations) and a
 * label, opened relative to a descriptor of the data root (so a later
 * chdir() changes nothing). Tar shards are kept per shard: the shard's
 * sample table (sample_table.h), file-backed (its sidecar index, or its
 * slice of the dataset table file) so that the page cache, not each rank,
 * holds it, its first sample and its name; a sample is found by a binary
 * search over the shards' first samples, then its key read from its
 * shard's table and checked (one pread of each of its key, members and
 * names): a range of the open shard, or bad by construction (a key without
 * an image), with the reason made when asked; or, where the table's file
 * was truncated or rewritten in place since create, PL_ECORRUPT naming
 * it. Not thread-safe while it is built; read-only, and so safe from any
 * thread, after (catalog_name's keep has its own lock). */
#ifndef PINLOAD_CATALOG_H
#define PINLOAD_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "../common/location.h"
#include "../index/sample_table.h"

#define CATALOG_EXTRAS_MAX SAMPLE_TABLE_EXTRAS /* PL_EXTRAS_MAX */
/* Classes a catalog may hold: labels are below it. */
#define MAX_CLASSES (1 << 20)
/* Room for any sample's name (catalog_name_into): a shard's path, ':' and
 * a member's name, or a file's path. */
#define CATALOG_NAME_MAX (2 * 4096 + 2)

struct catalog_kept;

typedef struct catalog {
    int dirfd;       /* the root, open, or -1 (no file samples) */
    char *root;      /* the root as the user named it ("." for none) */
    size_t rel_skip; /* chars of "root/" that start each file's name */
    char *arena;     /* NUL-terminated strings */
    size_t arena_len, arena_cap;
    size_t *name_off; /* [n] into arena */
    int32_t *labels;  /* [n] */
    int64_t n;
    size_t cap;
    size_t *class_off; /* [num_classes] into arena */
    int num_classes;
    size_t class_cap;
    /* Open files samples lie in (tar shards), closed by catalog_close. */
    int *source_fd;
    const location_reader **source_reader; /* [nsources]: a remote source's
                                              reader, else NULL */
    int nsources, source_cap;
    /* What the remote sources' readers belong to (remote/remote.c), freed
     * by catalog_close after the sources. */
    void *owned;
    void (*owned_stop)(void *);
    void (*owned_free)(void *);
    void (*owned_order)(void *, const int32_t *, int); /* or NULL */
    /* The extras (catalog_set_extras): for files from a list, per sample,
     * per extra, its text's place in the arena, [n * nextras] (size -1
     * where the sample has none); a shard's are found in its table. */
    const char *const *extra_names;
    int nextras, extras_required;
    int extras_beside; /* a folder's: each file's sidecars, by name */
    int64_t *extra_off, *extra_size;
    size_t extra_cap;
    /* Tar shards: shard k's samples are [shard_first[k], shard_first[k+1])
     * (the last one's end is n); none for files. What PL_ORDER_SHARDS
     * deals out: O(shards), the same for a shard read locally or remotely,
     * and its bad-by-construction samples included. */
    int64_t *shard_first;
    int nshards, shard_cap;
    /* Per shard: its sample table (file-backed, or in the heap), its name
     * as given (in the arena) and its source. Nothing per sample. */
    sample_table *tables;
    size_t *shard_name;
    int *shard_source;
    int heap_tables; /* shards whose table is in the heap */
    /* The dataset table file (node_tables.h) the tables are read from,
     * open as table_fd, closed after the tables; or NULL. */
    char *table_file;
    int table_fd;
    /* The names catalog_name returned for shard samples, kept until
     * catalog_close. */
    struct catalog_kept *kept;
    /* config.label_field (catalog_set_label_field): the field, and each
     * shard sample's label from it, [n], or a JSON_LABEL_* code (< 0). */
    char *label_field;
    int32_t *json_label;
    size_t json_cap;
} catalog;

/* Why a sample has no label from its JSON member (catalog.json_label). */
enum {
    JSON_LABEL_NO_MEMBER = -1,
    JSON_LABEL_NOT_JSON = -2,
    JSON_LABEL_NO_FIELD = -3,
    JSON_LABEL_NOT_LABEL = -4,
    JSON_LABEL_UNREAD = -5,
    JSON_LABEL_EMPTY = -6,
    JSON_LABEL_TOO_DEEP = -7,
};

void catalog_init(catalog *c);
/* Closes the root and every source, frees everything; safe after a failed
 * or partial build, and twice. */
void catalog_close(catalog *c);

/* ---- building (the readers) ---- */

/* The root the files added later are named under: opened now, PL_EIO with
 * pl_last_error naming it if it cannot be. "." and "/" are roots too. */
int catalog_set_root(catalog *c, const char *root, size_t len);

/* A file, named relative to the root (or absolute). PL_ENOMEM. */
int catalog_add_file(catalog *c, const char *rel, size_t len, int32_t label);

/* An open file that samples lie in; the catalog closes it. [out] *id, for
 * catalog_add_shard. PL_ENOMEM (fd is then closed). */
int catalog_add_source(catalog *c, int fd, int *id);

/* A source whose bytes come through r (a remote shard): [out] *id, as
 * catalog_add_source's. r stays the caller's; it must outlive the catalog
 * (catalog_adopt). PL_ENOMEM. */
int catalog_add_reader(catalog *c, const location_reader *r, int *id);

/* The catalog takes p, freeing it with free_fn(p) when it closes (after
 * its sources): what the readers of catalog_add_reader belong to;
 * stop_fn(p) makes them give up what they wait for (catalog_stop). */
void catalog_adopt(catalog *c, void *p, void (*stop_fn)(void *),
                   void (*free_fn)(void *));

/* Before the first shard: the catalog takes the dataset table file open
 * as fd (closed at catalog_close, after the tables that read it). The
 * catalog's copy of path, which the tables attach to
 * (node_tables_table), or NULL when out of memory (fd stays the
 * caller's). */
const char *catalog_adopt_table_file(catalog *c, int fd, const char *path);

/* The shards added so far dropped, and the dataset table file closed:
 * the catalog holds its sources, as before the first shard (a dataset
 * table file found damaged half-way through is read anew). */
void catalog_forget_shards(catalog *c);

/* The samples of one tar shard, source `id`, named `name` (as given:
 * "dir/shard.tar"; its samples are "dir/shard.tar:member"): the table's
 * keys, in order. The catalog takes tab (closed on failure too), letting
 * its heap copy go where it is attached to a file (sample_table_settle).
 * PL_ENOMEM. */
int catalog_add_shard(catalog *c, const char *name, int id, sample_table *tab);

/* What owns the remote sources (catalog_adopt) wants to know the order
 * the shards are read in: order_fn(p, ...) receives catalog_hint_order's
 * arguments. */
void catalog_adopt_order(catalog *c,
                         void (*order_fn)(void *, const int32_t *, int));

/* Before the first sample: the extras each sample may carry, by name
 * (names[0 .. n), kept, so they must outlive the catalog); required: a
 * sample lacking one is bad by construction (PL_ENOEXTRA). */
void catalog_set_extras(catalog *c, const char *const *names, int n,
                        int required);

/* The files added from now on have their extras beside them, found by
 * name when read ("x.jpg"'s txt is "x.txt"): nothing is kept per sample. */
void catalog_extras_beside(catalog *c);

/* The last sample added (a file) has extra k's bytes: text[0, len),
 * copied. PL_ENOMEM. */
int catalog_set_extra_text(catalog *c, int k, const char *text, size_t len);

/* Before the first shard: labels come from `field` of each sample's JSON
 * member (copied), which the shard reader fills in with
 * catalog_set_json_labels. PL_ENOMEM. */
int catalog_set_label_field(catalog *c, const char *field);

/* The labels (or JSON_LABEL_* codes) of the samples [first, first + n):
 * PL_ENOMEM. */
int catalog_set_json_labels(catalog *c, int64_t first, const int32_t *labels,
                            int64_t n);

/* The next class, named `name` (its label is the count before it). */
int catalog_add_class(catalog *c, const char *name);

/* Before the threads reading the catalog are joined (destroy): readers
 * of remote sources stop waiting and fetching (a read under way fails at
 * once), so that no worker keeps destroy waiting on the network. The
 * catalog stays valid until catalog_close. Safe on any catalog. */
void catalog_stop(catalog *c);

/* PL_ORDER_SHARDS: the shards (0 .. catalog_shards) this rank reads from
 * now on, shards[0 .. n) in the order it reaches them (the loader's
 * sampler_shard_sequence), told at create and at each epoch's start, so
 * that remote sources fetch them whole in that order (remote.h); copied.
 * Nothing for local shards. Safe from any thread, one call at a time. */
void catalog_hint_order(catalog *c, const int32_t *shards, int n);

/* Whether catalog_hint_order does anything (the sources are remote and
 * read in the shard order), so that the loader computes no sequence in
 * vain. */
static inline int catalog_takes_order(const catalog *c)
{
    return c->owned_order != NULL;
}

/* ---- reading ---- */

static inline int64_t catalog_size(const catalog *c)
{
    return c->n;
}

/* Tar shards in the catalog (0: the samples are files). */
static inline int catalog_shards(const catalog *c)
{
    return c->nshards;
}

/* Shard k's first sample, 0 <= k <= catalog_shards(c) (k == shards: n). */
static inline int64_t catalog_shard_first(const catalog *c, int k)
{
    return k == c->nshards ? c->n : c->shard_first[k];
}

static inline int catalog_classes(const catalog *c)
{
    return c->num_classes;
}

/* Sample i's name as the user would write it: the file's path under the
 * root as given, or "shard.tar:member", [out] *name valid until
 * catalog_close. A shard sample's name is made and kept the first time it
 * is asked for (the keep grows only with the names asked for:
 * pl_loader_sample's). 0, or PL_ENOMEM, or the code of a table that no
 * longer reads, with its reason in reason[0, cap). Any thread. */
int catalog_name(const catalog *c, int64_t i, const char **name, char *reason,
                 size_t cap);

/* The same name, into buf[0, cap) when it must be made (a shard
 * sample's; cut short past cap): what messages use, with no allocation.
 * Where its table no longer reads, "shard.tar:#K" (its key K): the
 * message then carries the table's error. The result is buf or the
 * catalog's own. */
const char *catalog_name_into(const catalog *c, int64_t i, char *buf,
                              size_t cap);

/* Sample i's label: [out] *label; 0, or the code of a table that no
 * longer reads (*label 0), with its reason in reason[0, cap) (reason may
 * be NULL). */
int catalog_label(const catalog *c, int64_t i, int32_t *label, char *reason,
                  size_t cap);

static inline const char *catalog_class(const catalog *c, int k)
{
    return c->arena + c->class_off[k];
}

/* What sample i is, wherever the data is mounted: a file's name relative
 * to the root (an absolute list entry as it is), or "shard.tar:member"
 * without the shard's folder; and its stored size where the catalog knows
 * it (a tar member's), else -1. What a resume state fingerprints, so that
 * a state moves with a copy of the dataset. One sample at a time (a read
 * of its key each): catalog_walk gives them all. */
const char *catalog_rel_name_into(const catalog *c, int64_t i, char *buf,
                                  size_t cap);
int64_t catalog_stored_size(const catalog *c, int64_t i);

/* Each sample in order, fn(arg, name, stored size, label): the name as
 * catalog_rel_name_into gives it (rel) or as catalog_name_into does, the
 * size as catalog_stored_size's, the label catalog_label's; the same
 * values, from one read of each shard's table (what create's
 * fingerprint needs: not a few syscalls a sample). 0, or the code of a
 * table that no longer reads ("pl_loader_create: " and its reason in
 * pl_last_error). */
typedef void (*catalog_walk_fn)(void *arg, const char *name,
                                int64_t stored_size, int32_t label);
int catalog_walk(const catalog *c, int rel, catalog_walk_fn fn, void *arg);

static inline int catalog_extras(const catalog *c)
{
    return c->nextras;
}

/* Where each of sample i's extras lies: for k < catalog_extras(c), [out]
 * has[k] 1 with loc[k] (valid while c is), or 0 if the sample has none (a
 * file beside a folder's sample may be missing still: its read says so).
 * A shard sample's key is read once for them all. 0, or the code of a
 * table that no longer reads (every has[k] 0), with its reason. */
int catalog_locate_extras(const catalog *c, int64_t i, location *loc,
                          int *has, char *reason, size_t cap);

/* Where sample i's bytes lie ([out] *loc, valid while c is), or the code
 * of a sample bad by construction, or of a table that no longer reads,
 * with its reason in reason[0, cap) (reason may be NULL). */
int catalog_locate(const catalog *c, int64_t i, location *loc, char *reason,
                   size_t cap);

/* catalog_locate, and with the same read of a shard sample's key its
 * label ([out] *label, when not NULL: what catalog_label gives, and 0
 * when the table no longer reads) and its extras (xloc and has as
 * catalog_locate_extras's, when xloc is not NULL): what a worker's claim
 * needs, so that the label delivered is the one of the bytes read. */
int catalog_sample(const catalog *c, int64_t i, location *loc, int32_t *label,
                   location *xloc, int *has, char *reason, size_t cap);

#endif
