#include "catalog.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/grow.h"
#include "json_label.h"

/* The shard samples' names catalog_name made: an open-addressed table
 * from index to name, the names in blocks that never move, so that a
 * name stays valid while more are added. Under its own lock: catalog_name
 * is called from any thread on a catalog otherwise read-only. */
typedef struct kept_block {
    struct kept_block *next;
    size_t used, cap;
    char bytes[];
} kept_block;

struct catalog_kept {
    pthread_mutex_t mu;
    int64_t *index; /* [cap], -1: empty */
    const char **name;
    size_t n, cap;
    kept_block *blocks;
};

static void kept_free(struct catalog_kept *k)
{
    if (!k)
        return;
    for (kept_block *b = k->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(k->index);
    free(k->name);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

static size_t kept_slot(const struct catalog_kept *k, int64_t i)
{
    size_t h = (size_t)((uint64_t)i * 0x9e3779b97f4a7c15u) & (k->cap - 1);
    while (k->index[h] != -1 && k->index[h] != i)
        h = (h + 1) & (k->cap - 1);
    return h;
}

/* Room for one more entry: the table at most half full. */
static int kept_grow(struct catalog_kept *k)
{
    if (2 * (k->n + 1) <= k->cap)
        return 0;
    const size_t cap = k->cap ? 2 * k->cap : 64;
    struct catalog_kept old = *k;
    k->index = malloc(cap * sizeof *k->index);
    k->name = malloc(cap * sizeof *k->name);
    if (!k->index || !k->name) {
        free(k->index);
        free(k->name);
        k->index = old.index;
        k->name = old.name;
        return PL_ENOMEM;
    }
    k->cap = cap;
    for (size_t j = 0; j < cap; j++)
        k->index[j] = -1;
    for (size_t j = 0; j < old.cap; j++)
        if (old.index[j] != -1) {
            const size_t h = kept_slot(k, old.index[j]);
            k->index[h] = old.index[j];
            k->name[h] = old.name[j];
        }
    free(old.index);
    free(old.name);
    return 0;
}

/* A copy of s[0, len) that stays where it is until kept_free. */
static const char *kept_copy(struct catalog_kept *k, const char *s, size_t len)
{
    kept_block *b = k->blocks;
    if (!b || b->cap - b->used < len + 1) {
        const size_t cap = len + 1 > 16384 ? len + 1 : 16384;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = k->blocks;
        k->blocks = b;
    }
    char *p = b->bytes + b->used;
    memcpy(p, s, len);
    p[len] = '\0';
    b->used += len + 1;
    return p;
}

void catalog_init(catalog *c)
{
    memset(c, 0, sizeof *c);
    c->dirfd = -1;
}

void catalog_close(catalog *c)
{
    if (c->dirfd >= 0)
        close(c->dirfd);
    for (int i = 0; i < c->nsources; i++)
        if (c->source_fd[i] >= 0)
            close(c->source_fd[i]);
    free(c->source_fd);
    free(c->source_reader);
    if (c->owned_free)
        c->owned_free(c->owned);
    free(c->root);
    free(c->arena);
    free(c->name_off);
    free(c->labels);
    free(c->class_off);
    free(c->extra_off);
    free(c->extra_size);
    free(c->shard_first);
    for (int k = 0; k < c->nshards; k++)
        sample_table_close(&c->tables[k]);
    free(c->tables);
    if (c->table_file) { /* after the tables that read it */
        close(c->table_fd);
        free(c->table_file);
    }
    free(c->shard_name);
    free(c->shard_source);
    kept_free(c->kept);
    free(c->label_field);
    free(c->json_label);
    catalog_init(c);
}

/* ---- building ---- */

static int arena_add(catalog *c, const char *s, size_t len, size_t *off)
{
    if (grow(&c->arena, &c->arena_cap, c->arena_len + len + 1, 1, 1 << 16) < 0)
        return PL_ENOMEM;
    memcpy(c->arena + c->arena_len, s, len);
    c->arena[c->arena_len + len] = '\0';
    *off = c->arena_len;
    c->arena_len += len + 1;
    return 0;
}

int catalog_set_root(catalog *c, const char *root, size_t len)
{
    free(c->root);
    c->root = strndup(root, len);
    if (!c->root)
        return PL_ENOMEM;
    if (strcmp(c->root, ".") == 0)
        c->rel_skip = 0;
    else if (strcmp(c->root, "/") == 0)
        c->rel_skip = 1;
    else
        c->rel_skip = len + 1;
    if (c->dirfd >= 0)
        close(c->dirfd);
    c->dirfd = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd < 0)
        return err_set(PL_EIO, "pl_loader_create: %s: %s", c->root,
                       strerror(errno));
    return 0;
}

/* A file named by arena string `off`: the tables grow by one. */
static int add_sample(catalog *c, size_t off, int32_t label)
{
    const size_t need = (size_t)c->n + 1;
    size_t cap_name = c->cap, cap_label = c->cap;
    if (grow(&c->name_off, &cap_name, need, sizeof *c->name_off, 1024) < 0 ||
        grow(&c->labels, &cap_label, need, sizeof *c->labels, 1024) < 0)
        return PL_ENOMEM;
    c->cap = cap_label;
    if (c->nextras && !c->extras_beside) {
        const size_t k = (size_t)c->nextras, at = (size_t)c->n * k;
        size_t c1 = c->extra_cap, c2 = c->extra_cap;
        if (grow(&c->extra_off, &c1, at + k, sizeof *c->extra_off, 1024) < 0 ||
            grow(&c->extra_size, &c2, at + k, sizeof *c->extra_size, 1024) < 0)
            return PL_ENOMEM;
        c->extra_cap = c1 < c2 ? c1 : c2;
        for (size_t j = at; j < at + k; j++) {
            c->extra_off[j] = 0;
            c->extra_size[j] = -1;
        }
    }
    c->name_off[c->n] = off;
    c->labels[c->n++] = label;
    return 0;
}

/* Adds "root/rel" (just rel when it is absolute or the root is "."). */
int catalog_add_file(catalog *c, const char *rel, size_t len, int32_t label)
{
    const size_t skip = rel[0] == '/' ? 0 : c->rel_skip;
    char *tmp = malloc(skip + len + 1);
    if (!tmp)
        return PL_ENOMEM;
    memcpy(tmp, c->root, skip); /* "root/" or nothing */
    if (skip)
        tmp[skip - 1] = '/';
    memcpy(tmp + skip, rel, len);
    size_t off;
    int rc = arena_add(c, tmp, skip + len, &off);
    free(tmp);
    if (rc == 0)
        rc = add_sample(c, off, label);
    return rc;
}

static int add_source(catalog *c, int fd, const location_reader *r, int *id)
{
    size_t cap = (size_t)c->source_cap, cap_r = (size_t)c->source_cap;
    if (grow(&c->source_fd, &cap, (size_t)c->nsources + 1, sizeof *c->source_fd,
             64) < 0 ||
        grow(&c->source_reader, &cap_r, (size_t)c->nsources + 1,
             sizeof *c->source_reader, 64) < 0) {
        if (fd >= 0)
            close(fd);
        return PL_ENOMEM;
    }
    c->source_cap = (int)(cap < cap_r ? cap : cap_r);
    *id = c->nsources;
    c->source_reader[c->nsources] = r;
    c->source_fd[c->nsources++] = fd;
    return 0;
}

int catalog_add_source(catalog *c, int fd, int *id)
{
    return add_source(c, fd, NULL, id);
}

int catalog_add_reader(catalog *c, const location_reader *r, int *id)
{
    return add_source(c, -1, r, id);
}

void catalog_adopt(catalog *c, void *p, void (*stop_fn)(void *),
                   void (*free_fn)(void *))
{
    c->owned = p;
    c->owned_stop = stop_fn;
    c->owned_free = free_fn;
}

void catalog_adopt_order(catalog *c,
                         void (*order_fn)(void *, const int32_t *, int))
{
    c->owned_order = order_fn;
}

void catalog_hint_order(catalog *c, const int32_t *shards, int n)
{
    if (c->owned_order)
        c->owned_order(c->owned, shards, n);
}

void catalog_stop(catalog *c)
{
    if (c->owned_stop)
        c->owned_stop(c->owned);
}

/* Room for shard nshards in the per-shard tables. */
static int shard_room(catalog *c)
{
    size_t c1 = (size_t)c->shard_cap, c2 = c1, c3 = c1, c4 = c1;
    const size_t need = (size_t)c->nshards + 1;
    if (grow(&c->shard_first, &c1, need, sizeof *c->shard_first, 64) < 0 ||
        grow(&c->tables, &c2, need, sizeof *c->tables, 64) < 0 ||
        grow(&c->shard_name, &c3, need, sizeof *c->shard_name, 64) < 0 ||
        grow(&c->shard_source, &c4, need, sizeof *c->shard_source, 64) < 0)
        return PL_ENOMEM;
    c1 = c1 < c2 ? c1 : c2;
    c3 = c3 < c4 ? c3 : c4;
    c->shard_cap = (int)(c1 < c3 ? c1 : c3);
    if (!c->kept) {
        if (!(c->kept = calloc(1, sizeof *c->kept)))
            return PL_ENOMEM;
        pthread_mutex_init(&c->kept->mu, NULL);
    }
    return 0;
}

const char *catalog_adopt_table_file(catalog *c, int fd, const char *path)
{
    assert(!c->table_file && c->nshards == 0);
    if (!(c->table_file = strdup(path)))
        return NULL;
    c->table_fd = fd;
    return c->table_file;
}

void catalog_forget_shards(catalog *c)
{
    for (int k = 0; k < c->nshards; k++)
        sample_table_close(&c->tables[k]);
    c->nshards = 0;
    c->heap_tables = 0;
    c->n = 0;
    if (c->table_file) {
        close(c->table_fd);
        free(c->table_file);
        c->table_file = NULL;
    }
}

int catalog_add_shard(catalog *c, const char *name, int id, sample_table *tab)
{
    size_t off;
    int rc = shard_room(c);
    if (rc == 0)
        rc = arena_add(c, name, strlen(name), &off);
    if (rc < 0) {
        sample_table_close(tab);
        return rc;
    }
    /* Create's pass over every key is done: a table read from a file is
     * read from it from now on, a key at a time. */
    sample_table_settle(tab);
    const int k = c->nshards++;
    c->tables[k] = *tab;
    c->shard_first[k] = c->n;
    c->shard_name[k] = off;
    c->shard_source[k] = id;
    c->heap_tables += tab->file == NULL;
    c->n += tab->nkeys;
    memset(tab, 0, sizeof *tab);
    return 0;
}

void catalog_set_extras(catalog *c, const char *const *names, int n,
                        int required)
{
    c->extra_names = names;
    c->nextras = n;
    c->extras_required = required;
}

void catalog_extras_beside(catalog *c)
{
    c->extras_beside = 1;
}

static void set_extra(catalog *c, int k, int64_t offset, int64_t size)
{
    const size_t j = (size_t)(c->n - 1) * (size_t)c->nextras + (size_t)k;
    c->extra_off[j] = offset;
    c->extra_size[j] = size;
}

int catalog_set_extra_text(catalog *c, int k, const char *text, size_t len)
{
    size_t off;
    const int rc = arena_add(c, text, len, &off);
    if (rc == 0)
        set_extra(c, k, (int64_t)off, (int64_t)len);
    return rc;
}

int catalog_set_label_field(catalog *c, const char *field)
{
    free(c->label_field);
    c->label_field = strdup(field);
    return c->label_field ? 0 : PL_ENOMEM;
}

int catalog_set_json_labels(catalog *c, int64_t first, const int32_t *labels,
                            int64_t n)
{
    if (grow(&c->json_label, &c->json_cap, (size_t)(first + n),
             sizeof *c->json_label, 1024) < 0)
        return PL_ENOMEM;
    memcpy(c->json_label + first, labels, (size_t)n * sizeof *labels);
    return 0;
}

#define DEPTH_WORDS_(n) #n
#define DEPTH_WORDS(n) DEPTH_WORDS_(n)

/* Why sample i has no label from its JSON member, into reason. */
static void json_label_reason(const catalog *c, int64_t i, char *reason,
                              size_t cap)
{
    static const char *const why[] = {
        "no json member",
        "its json member is not JSON",
        "its json has no field \"%s\"",
        "its json's \"%s\" is not a label (an integer in [0, 2^20))",
        "its json member could not be read",
        "its json member is empty",
        "its json member is nested too deep (JSON deeper than " DEPTH_WORDS(
            JSON_LABEL_MAX_DEPTH) " levels)"};
    const int n = (int)(sizeof why / sizeof *why);
    const int code = -c->json_label[i] - 1;
    char fmt[112];
    snprintf(fmt, sizeof fmt, "%s (config.label_field)",
             why[code >= 0 && code < n ? code : 4]);
    snprintf(reason, cap, fmt, c->label_field);
}

int catalog_add_class(catalog *c, const char *name)
{
    if (grow(&c->class_off, &c->class_cap, (size_t)c->num_classes + 1,
             sizeof *c->class_off, 64) < 0)
        return PL_ENOMEM;
    return arena_add(c, name, strlen(name), &c->class_off[c->num_classes++]);
}

/* ---- reading ---- */

/* The shard sample i lies in: the last whose first sample is at most i. */
static int shard_of(const catalog *c, int64_t i)
{
    int lo = 0, hi = c->nshards - 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (c->shard_first[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Sample i of a shard catalog: its shard [out] *k, its key's records
 * read and checked [out] *v (free it with sample_view_free, whatever the
 * result), and what it is under the configured extras (reason as
 * sample_table_sample's). 0, or the code of a table that no longer reads,
 * with its reason. */
static int shard_sample_of(const catalog *c, int64_t i, int *k,
                           sample_view *v, shard_sample *s, char *reason,
                           size_t cap)
{
    *k = shard_of(c, i);
    const int rc = sample_table_key_view(&c->tables[*k], i - c->shard_first[*k],
                                         v, reason, cap);
    if (rc < 0)
        return rc;
    const shard_extras x = {.names = c->extra_names,
                            .n = c->nextras,
                            .required = c->extras_required};
    sample_table_sample(&v->tab, 0, &x, s, reason, cap);
    return 0;
}

/* A shard sample's label, its key read into v. */
static int32_t shard_label(const catalog *c, int64_t i, const sample_view *v)
{
    if (c->json_label)
        return c->json_label[i] < 0 ? 0 : c->json_label[i];
    return shard_key_label(&v->tab, 0);
}

int catalog_label(const catalog *c, int64_t i, int32_t *label, char *reason,
                  size_t cap)
{
    *label = 0;
    if (c->json_label) {
        *label = c->json_label[i] < 0 ? 0 : c->json_label[i];
        return 0;
    }
    if (!c->nshards) {
        *label = c->labels[i];
        return 0;
    }
    const int k = shard_of(c, i);
    sample_view v;
    const int rc = sample_table_key_view(&c->tables[k], i - c->shard_first[k],
                                         &v, reason, cap);
    if (rc == 0)
        *label = shard_label(c, i, &v);
    sample_view_free(&v);
    return rc;
}

/* Key `key` of tab (a view, or a whole table) as sample s of the shard
 * named `shard`, into buf: "shard.tar:member", or from the shard's own
 * name on when `rel` (a bad-by-construction sample's stays whole: so
 * resume states have fingerprinted it since they began). Its length (cut
 * short to cap - 1). */
static size_t name_of(const char *shard, const sample_table *tab, int64_t key,
                      const shard_sample *s, int rel, char *buf, size_t cap)
{
    size_t len;
    const char *member = sample_table_sample_name(tab, key, s, &len);
    if (rel && !s->code) {
        const char *slash = strrchr(shard, '/');
        shard = slash ? slash + 1 : shard;
    }
    const int n = snprintf(buf, cap, "%s:%.*s", shard, (int)len, member);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Shard sample i's name into buf (name_of's); where its table no longer
 * reads, "shard.tar:#K" (its key) for messages, and the code, with its
 * reason in reason[0, rcap) (reason may be NULL). [out] *len. */
static int shard_name(const catalog *c, int64_t i, int rel, char *buf,
                      size_t cap, size_t *len, char *reason, size_t rcap)
{
    shard_sample s;
    sample_view v;
    int k;
    const int rc = shard_sample_of(c, i, &k, &v, &s, reason, rcap);
    const char *shard = c->arena + c->shard_name[k];
    if (rc == 0) {
        *len = name_of(shard, &v.tab, 0, &s, rel, buf, cap);
    } else {
        const int n = snprintf(buf, cap, "%s:#%lld", shard,
                               (long long)(i - c->shard_first[k]));
        *len = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
    }
    sample_view_free(&v);
    return rc;
}

const char *catalog_name_into(const catalog *c, int64_t i, char *buf,
                              size_t cap)
{
    if (!c->nshards)
        return c->arena + c->name_off[i];
    size_t len;
    shard_name(c, i, 0, buf, cap, &len, NULL, 0);
    return buf;
}

/* Name i in the keep, or NULL. */
static const char *kept_find(struct catalog_kept *k, int64_t i)
{
    return k->cap && k->index[kept_slot(k, i)] == i ? k->name[kept_slot(k, i)]
                                                  : NULL;
}

int catalog_name(const catalog *c, int64_t i, const char **name, char *reason,
                 size_t cap)
{
    if (!c->nshards) {
        *name = c->arena + c->name_off[i];
        return 0;
    }
    struct catalog_kept *k = c->kept;
    pthread_mutex_lock(&k->mu);
    *name = kept_find(k, i);
    pthread_mutex_unlock(&k->mu);
    if (*name)
        return 0;
    /* Made outside the lock: the key is read from the table's file. */
    char buf[CATALOG_NAME_MAX];
    size_t len;
    const int rc = shard_name(c, i, 0, buf, sizeof buf, &len, reason, cap);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&k->mu);
    if (!(*name = kept_find(k, i)) && kept_grow(k) == 0 &&
        (*name = kept_copy(k, buf, len))) {
        const size_t h = kept_slot(k, i);
        k->index[h] = i;
        k->name[h] = *name;
        k->n++;
    }
    pthread_mutex_unlock(&k->mu);
    if (!*name && reason)
        snprintf(reason, cap, "out of memory");
    return *name ? 0 : PL_ENOMEM;
}

/* A file's name for openat(c->dirfd, ...): relative to the root when it
 * lies under it, so that renaming or leaving the root's parent directory
 * after create changes nothing; as given for an absolute list entry. */
static const char *open_path(const catalog *c, int64_t i)
{
    const char *p = c->arena + c->name_off[i];
    const size_t n = c->rel_skip;
    if (n && strncmp(p, c->root, n - 1) == 0 && p[n - 1] == '/')
        return p + n;
    return p;
}

const char *catalog_rel_name_into(const catalog *c, int64_t i, char *buf,
                                  size_t cap)
{
    if (!c->nshards)
        return open_path(c, i);
    size_t len;
    shard_name(c, i, 1, buf, cap, &len, NULL, 0); /* from x.tar on */
    return buf;
}

int64_t catalog_stored_size(const catalog *c, int64_t i)
{
    if (!c->nshards)
        return -1;
    shard_sample s;
    sample_view v;
    int k;
    const int rc = shard_sample_of(c, i, &k, &v, &s, NULL, 0);
    const int64_t size =
        rc < 0 || s.code ? -1 : shard_member_size(&v.tab, s.image);
    sample_view_free(&v);
    return size;
}

int catalog_walk(const catalog *c, int rel, catalog_walk_fn fn, void *arg)
{
    char buf[CATALOG_NAME_MAX];
    if (!c->nshards) {
        for (int64_t i = 0; i < c->n; i++)
            fn(arg, rel ? open_path(c, i) : c->arena + c->name_off[i], -1,
               c->labels[i]);
        return 0;
    }
    const shard_extras x = {.names = c->extra_names,
                            .n = c->nextras,
                            .required = c->extras_required};
    for (int k = 0; k < c->nshards; k++) {
        /* One read of the whole table: not a syscall per key. */
        sample_table w;
        char why[1024];
        const int rc = sample_table_whole(&c->tables[k], &w, why, sizeof why);
        if (rc < 0)
            return err_set(rc, "pl_loader_create: %s", why);
        const char *shard = c->arena + c->shard_name[k];
        for (uint32_t key = 0; key < w.nkeys; key++) {
            const int64_t i = c->shard_first[k] + key;
            shard_sample s;
            sample_table_sample(&w, key, &x, &s, NULL, 0);
            name_of(shard, &w, key, &s, rel, buf, sizeof buf);
            fn(arg, buf, s.code ? -1 : shard_member_size(&w, s.image),
               c->json_label ? (c->json_label[i] < 0 ? 0 : c->json_label[i])
                             : shard_key_label(&w, key));
        }
        sample_table_close(&w);
    }
    return 0;
}

/* Extra k of a sample lying in the catalog's arena or beside its file. */
static int locate_file_extra(const catalog *c, int64_t i, int k,
                             location *loc)
{
    if (c->extras_beside) {
        *loc = (location){.fd = c->dirfd,
                          .path = open_path(c, i),
                          .sibling = c->extra_names[k]};
        return 1;
    }
    const size_t j = (size_t)i * (size_t)c->nextras + (size_t)k;
    if (c->extra_size[j] < 0)
        return 0;
    *loc = (location){.fd = -1,
                      .bytes = c->arena + c->extra_off[j],
                      .size = c->extra_size[j]};
    return 1;
}

/* Member m of shard k's key view v, as a location. */
static location member_loc(const catalog *c, int k, const sample_view *v,
                           int64_t m)
{
    const int src = c->shard_source[k];
    return (location){.fd = c->source_fd[src],
                      .offset = shard_member_offset(&v->tab, m),
                      .size = shard_member_size(&v->tab, m),
                      .reader = c->source_reader[src]};
}

int catalog_sample(const catalog *c, int64_t i, location *loc, int32_t *label,
                   location *xloc, int *has, char *reason, size_t cap)
{
    if (!c->nshards) {
        for (int k = 0; xloc && k < c->nextras; k++)
            has[k] = locate_file_extra(c, i, k, &xloc[k]);
        if (label)
            *label = c->labels[i];
        *loc = (location){.fd = c->dirfd, .path = open_path(c, i)};
        return 0;
    }
    for (int k = 0; xloc && k < c->nextras; k++)
        has[k] = 0;
    if (label)
        *label = 0;
    shard_sample s;
    sample_view v;
    int k;
    int rc = shard_sample_of(c, i, &k, &v, &s, reason, cap);
    if (rc == 0) {
        /* The label and the bytes from the one read of the key. */
        if (label)
            *label = shard_label(c, i, &v);
        for (int e = 0; xloc && e < c->nextras; e++)
            if ((has[e] = s.extra[e] >= 0))
                xloc[e] = member_loc(c, k, &v, s.extra[e]);
        rc = s.code; /* bad by construction */
    }
    if (rc == 0 && c->json_label && c->json_label[i] < 0) {
        if (reason)
            json_label_reason(c, i, reason, cap);
        rc = PL_ECORRUPT;
    }
    if (rc == 0)
        *loc = member_loc(c, k, &v, s.image);
    sample_view_free(&v);
    return rc;
}

int catalog_locate(const catalog *c, int64_t i, location *loc, char *reason,
                   size_t cap)
{
    return catalog_sample(c, i, loc, NULL, NULL, NULL, reason, cap);
}

int catalog_locate_extras(const catalog *c, int64_t i, location *loc,
                          int *has, char *reason, size_t cap)
{
    if (!c->nshards) {
        for (int k = 0; k < c->nextras; k++)
            has[k] = locate_file_extra(c, i, k, &loc[k]);
        return 0;
    }
    /* A shard sample's key is read once for all of its extras. */
    const int k = shard_of(c, i);
    sample_view v;
    shard_sample s;
    const int rc = sample_table_key_view(&c->tables[k], i - c->shard_first[k],
                                         &v, reason, cap);
    if (rc == 0) {
        const shard_extras x = {.names = c->extra_names,
                                .n = c->nextras,
                                .required = c->extras_required};
        sample_table_sample(&v.tab, 0, &x, &s, NULL, 0);
    }
    for (int e = 0; e < c->nextras; e++)
        if ((has[e] = rc == 0 && s.extra[e] >= 0))
            loc[e] = member_loc(c, k, &v, s.extra[e]);
    sample_view_free(&v);
    return rc;
}
