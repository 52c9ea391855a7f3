/* The sample catalog: every sample's name (its path as the user would
 * write it), label and location, and the class names, built once at create
 * time by the readers above it (folder.c, list.c, shards.c) and read by the
 * loader after. Names live in one arena, so a million samples cost few
 * allocations. A sample is either a file, opened relative to a descriptor
 * of the data root (so a later chdir() changes nothing), or a range of an
 * open file the catalog holds (a tar member of its shard), or bad by
 * construction (a shard key without an image), with the reason kept.
 * Not thread-safe while it is built; read-only, and so safe from any
 * thread, after. */
#ifndef PINLOAD_CATALOG_H
#define PINLOAD_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "../common/location.h"

#define CATALOG_EXTRAS_MAX 8 /* PL_EXTRAS_MAX */

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
    /* What the remote sources' readers belong to (input/remote.c), freed
     * by catalog_close after the sources. */
    void *owned;
    void (*owned_stop)(void *);
    void (*owned_free)(void *);
    void (*owned_order)(void *, const int32_t *, int); /* or NULL */
    /* Per sample, made at the first range: its source (-1: a file under
     * the root), and its range; or, for a sample bad by construction, its
     * code in size (negative) and its reason's place in the arena in
     * offset. */
    int32_t *source;
    int64_t *offset, *size;
    size_t range_cap;
    /* The extras (catalog_set_extras): per sample, per extra, where its
     * bytes lie, [n * nextras]: a range of the sample's source, or of the
     * arena for a sample that is a file (a list file's column); size -1
     * where the sample has none. */
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
} catalog;

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
 * catalog_add_range. PL_ENOMEM (fd is then closed). */
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

/* What owns the remote sources (catalog_adopt) wants to know the order
 * the shards are read in: order_fn(p, ...) receives catalog_hint_order's
 * arguments. */
void catalog_adopt_order(catalog *c,
                         void (*order_fn)(void *, const int32_t *, int));

/* A sample that is bytes [offset, offset + size) of source `id`, named
 * `name` (as given: "shard.tar:key.jpg"). PL_ENOMEM. */
int catalog_add_range(catalog *c, const char *name, size_t len, int32_t label,
                      int id, int64_t offset, int64_t size);

/* A sample that is bad before any byte is read: `code` (PL_E*) with
 * `reason`, named `name`. PL_ENOMEM. */
int catalog_add_bad(catalog *c, const char *name, size_t len, int32_t label,
                    int code, const char *reason);

/* Before the first sample: the extras each sample may carry, by name
 * (names[0 .. n), kept, so they must outlive the catalog); required: a
 * sample lacking one is bad (the readers add it with catalog_add_bad). */
void catalog_set_extras(catalog *c, const char *const *names, int n,
                        int required);

/* The files added from now on have their extras beside them, found by
 * name when read ("x.jpg"'s txt is "x.txt"): nothing is kept per sample. */
void catalog_extras_beside(catalog *c);

/* The last sample added has extra k at bytes [offset, offset + size) of
 * its source. */
void catalog_set_extra(catalog *c, int k, int64_t offset, int64_t size);

/* The last sample added (a file) has extra k's bytes: text[0, len),
 * copied. PL_ENOMEM. */
int catalog_set_extra_text(catalog *c, int k, const char *text, size_t len);

/* The samples added from now on, up to the next call, are one shard's
 * (shards_add_indexed, for local and remote shards alike). PL_ENOMEM. */
int catalog_begin_shard(catalog *c);

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
 * root as given, or "shard.tar:member". */
static inline const char *catalog_name(const catalog *c, int64_t i)
{
    return c->arena + c->name_off[i];
}

static inline int32_t catalog_label(const catalog *c, int64_t i)
{
    return c->labels[i];
}

static inline const char *catalog_class(const catalog *c, int k)
{
    return c->arena + c->class_off[k];
}

/* What sample i is, wherever the data is mounted: a file's name relative
 * to the root (an absolute list entry as it is), or "shard.tar:member"
 * without the shard's folder; and its stored size where the catalog knows
 * it (a tar member's), else -1. What a resume state fingerprints, so that
 * a state moves with a copy of the dataset. */
const char *catalog_rel_name(const catalog *c, int64_t i);
int64_t catalog_stored_size(const catalog *c, int64_t i);

static inline int catalog_extras(const catalog *c)
{
    return c->nextras;
}

/* Where sample i's extra k lies: 1 with [out] *loc (valid while c is), or
 * 0 if the sample has none (a file beside a folder's sample may be missing
 * still: its read says so). */
int catalog_locate_extra(const catalog *c, int64_t i, int k, location *loc);

/* Where sample i's bytes lie ([out] *loc, valid while c is), or the code
 * of a sample bad by construction, with [out] *reason. */
int catalog_locate(const catalog *c, int64_t i, location *loc,
                   const char **reason);

#endif
