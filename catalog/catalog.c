#include "catalog.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    if (c->table_map)
        munmap(c->table_map, c->table_map_len);
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

void catalog_adopt_map(catalog *c, void *p, size_t len)
{
    assert(!c->table_map);
    c->table_map = p;
    c->table_map_len = len;
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
    const int k = c->nshards++;
    c->tables[k] = *tab;
    c->shard_first[k] = c->n;
    c->shard_name[k] = off;
    c->shard_source[k] = id;
    c->heap_tables += tab->mapped == SAMPLE_TABLE_HEAP;
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

/* Sample i of a shard catalog: its shard, its key there, and what it is
 * under the configured extras (reason as sample_table_sample's). */
static int shard_sample_of(const catalog *c, int64_t i, shard_sample *s,
                           int64_t *key, char *reason, size_t cap)
{
    const int k = shard_of(c, i);
    const shard_extras x = {.names = c->extra_names,
                            .n = c->nextras,
                            .required = c->extras_required};
    *key = i - c->shard_first[k];
    sample_table_sample(&c->tables[k], *key, &x, s, reason, cap);
    return k;
}

int32_t catalog_label(const catalog *c, int64_t i)
{
    if (c->json_label)
        return c->json_label[i] < 0 ? 0 : c->json_label[i];
    if (!c->nshards)
        return c->labels[i];
    const int k = shard_of(c, i);
    return shard_key_label(&c->tables[k], i - c->shard_first[k]);
}

/* A shard sample's name into buf: "shard.tar:member", or from the shard's
 * own name on when `rel` (a bad-by-construction sample's stays whole: so
 * resume states have fingerprinted it since they began). Its length (cut
 * short to cap - 1). */
static size_t shard_name(const catalog *c, int64_t i, int rel, char *buf,
                         size_t cap)
{
    shard_sample s;
    int64_t key;
    const int k = shard_sample_of(c, i, &s, &key, NULL, 0);
    size_t len;
    const char *member = sample_table_sample_name(&c->tables[k], key, &s, &len);
    const char *shard = c->arena + c->shard_name[k];
    if (rel && !s.code) {
        const char *slash = strrchr(shard, '/');
        shard = slash ? slash + 1 : shard;
    }
    const int n = snprintf(buf, cap, "%s:%.*s", shard, (int)len, member);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

const char *catalog_name_into(const catalog *c, int64_t i, char *buf,
                              size_t cap)
{
    if (!c->nshards)
        return c->arena + c->name_off[i];
    shard_name(c, i, 0, buf, cap);
    return buf;
}

const char *catalog_name(const catalog *c, int64_t i)
{
    if (!c->nshards)
        return c->arena + c->name_off[i];
    struct catalog_kept *k = c->kept;
    char buf[CATALOG_NAME_MAX];
    pthread_mutex_lock(&k->mu);
    const char *name = NULL;
    if (k->cap && k->index[kept_slot(k, i)] == i) {
        name = k->name[kept_slot(k, i)];
    } else if (kept_grow(k) == 0) {
        const size_t len = shard_name(c, i, 0, buf, sizeof buf);
        if ((name = kept_copy(k, buf, len))) {
            const size_t h = kept_slot(k, i);
            k->index[h] = i;
            k->name[h] = name;
            k->n++;
        }
    }
    pthread_mutex_unlock(&k->mu);
    return name;
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
    shard_name(c, i, 1, buf, cap); /* "dir/x.tar:member": from x.tar on */
    return buf;
}

int64_t catalog_stored_size(const catalog *c, int64_t i)
{
    if (!c->nshards)
        return -1;
    shard_sample s;
    int64_t key;
    const int k = shard_sample_of(c, i, &s, &key, NULL, 0);
    return s.code ? -1 : shard_member_size(&c->tables[k], s.image);
}

int catalog_locate(const catalog *c, int64_t i, location *loc, char *reason,
                   size_t cap)
{
    if (!c->nshards) {
        *loc = (location){.fd = c->dirfd, .path = open_path(c, i)};
        return 0;
    }
    shard_sample s;
    int64_t key;
    const int k = shard_sample_of(c, i, &s, &key, reason, cap);
    if (s.code) /* bad by construction */
        return s.code;
    if (c->json_label && c->json_label[i] < 0) {
        if (reason)
            json_label_reason(c, i, reason, cap);
        return PL_ECORRUPT;
    }
    const int src = c->shard_source[k];
    *loc = (location){.fd = c->source_fd[src],
                      .offset = shard_member_offset(&c->tables[k], s.image),
                      .size = shard_member_size(&c->tables[k], s.image),
                      .reader = c->source_reader[src]};
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

void catalog_locate_extras(const catalog *c, int64_t i, location *loc,
                           int *has)
{
    if (!c->nshards) {
        for (int k = 0; k < c->nextras; k++)
            has[k] = locate_file_extra(c, i, k, &loc[k]);
        return;
    }
    /* A shard sample's key is read once for all of its extras. */
    shard_sample s;
    int64_t key;
    const int sh = shard_sample_of(c, i, &s, &key, NULL, 0);
    const int src = c->shard_source[sh];
    for (int k = 0; k < c->nextras; k++) {
        if (!(has[k] = s.extra[k] >= 0))
            continue;
        loc[k] = (location){.fd = c->source_fd[src],
                            .offset =
                                shard_member_offset(&c->tables[sh], s.extra[k]),
                            .size = shard_member_size(&c->tables[sh], s.extra[k]),
                            .reader = c->source_reader[src]};
    }
}
