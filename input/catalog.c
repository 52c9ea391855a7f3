#include "catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/error.h"
#include "../common/grow.h"

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
    free(c->source);
    free(c->offset);
    free(c->size);
    free(c->extra_off);
    free(c->extra_size);
    free(c->shard_first);
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

/* A sample named by arena string `off`: the tables grow by one. The range
 * tables, once made, keep the capacity of the others. */
static int add_sample(catalog *c, size_t off, int32_t label)
{
    const size_t need = (size_t)c->n + 1;
    size_t cap_name = c->cap, cap_label = c->cap;
    if (grow(&c->name_off, &cap_name, need, sizeof *c->name_off, 1024) < 0 ||
        grow(&c->labels, &cap_label, need, sizeof *c->labels, 1024) < 0)
        return PL_ENOMEM;
    c->cap = cap_label;
    if (c->source) {
        size_t c1 = c->range_cap, c2 = c->range_cap, c3 = c->range_cap;
        if (grow(&c->source, &c1, need, sizeof *c->source, 1024) < 0 ||
            grow(&c->offset, &c2, need, sizeof *c->offset, 1024) < 0 ||
            grow(&c->size, &c3, need, sizeof *c->size, 1024) < 0)
            return PL_ENOMEM;
        c->range_cap = c1;
        c->source[c->n] = -1;
        c->offset[c->n] = c->size[c->n] = 0;
    }
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

/* The first range: the tables say where every sample so far lies (under
 * the root). */
static int make_ranges(catalog *c)
{
    if (c->source)
        return 0;
    const size_t cap = (size_t)c->n + 1024;
    c->source = malloc(cap * sizeof *c->source);
    c->offset = calloc(cap, sizeof *c->offset);
    c->size = calloc(cap, sizeof *c->size);
    if (!c->source || !c->offset || !c->size)
        return PL_ENOMEM;
    for (int64_t i = 0; i < c->n; i++)
        c->source[i] = -1;
    c->range_cap = cap;
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

int catalog_begin_shard(catalog *c)
{
    size_t cap = (size_t)c->shard_cap;
    if (grow(&c->shard_first, &cap, (size_t)c->nshards + 1,
             sizeof *c->shard_first, 64) < 0)
        return PL_ENOMEM;
    c->shard_cap = (int)cap;
    c->shard_first[c->nshards++] = c->n;
    return 0;
}

/* Also catalog_add_bad's: source -1, the reason's place and the code. */
int catalog_add_range(catalog *c, const char *name, size_t len, int32_t label,
                      int id, int64_t offset, int64_t size)
{
    size_t off;
    int rc = make_ranges(c);
    if (rc == 0)
        rc = arena_add(c, name, len, &off);
    if (rc == 0)
        rc = add_sample(c, off, label);
    if (rc < 0)
        return rc;
    c->source[c->n - 1] = id;
    c->offset[c->n - 1] = offset;
    c->size[c->n - 1] = size;
    return 0;
}

int catalog_add_bad(catalog *c, const char *name, size_t len, int32_t label,
                    int code, const char *reason)
{
    size_t off;
    const int rc = arena_add(c, reason, strlen(reason), &off);
    return rc < 0
               ? rc
               : catalog_add_range(c, name, len, label, -1, (int64_t)off, code);
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

void catalog_set_extra(catalog *c, int k, int64_t offset, int64_t size)
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
        catalog_set_extra(c, k, (int64_t)off, (int64_t)len);
    return rc;
}

int catalog_add_class(catalog *c, const char *name)
{
    if (grow(&c->class_off, &c->class_cap, (size_t)c->num_classes + 1,
             sizeof *c->class_off, 64) < 0)
        return PL_ENOMEM;
    return arena_add(c, name, strlen(name), &c->class_off[c->num_classes++]);
}

/* ---- reading ---- */

/* A file's name for openat(c->dirfd, ...): relative to the root when it
 * lies under it, so that renaming or leaving the root's parent directory
 * after create changes nothing; as given for an absolute list entry. */
static const char *open_path(const catalog *c, int64_t i)
{
    const char *p = catalog_name(c, i);
    const size_t n = c->rel_skip;
    if (n && strncmp(p, c->root, n - 1) == 0 && p[n - 1] == '/')
        return p + n;
    return p;
}

const char *catalog_rel_name(const catalog *c, int64_t i)
{
    if (!c->source || c->source[i] == -1)
        return open_path(c, i);
    /* "dir/x.tar:member": from the shard's own name on. */
    const char *p = catalog_name(c, i);
    const char *colon = strstr(p, ".tar:");
    const char *base = p;
    for (const char *q = p; colon && q < colon; q++)
        if (*q == '/')
            base = q + 1;
    return base;
}

int64_t catalog_stored_size(const catalog *c, int64_t i)
{
    if (!c->source || c->source[i] == -1 || c->size[i] < 0)
        return -1;
    return c->size[i];
}

int catalog_locate(const catalog *c, int64_t i, location *loc,
                   const char **reason)
{
    if (!c->source || c->source[i] == -1) {
        if (c->source && c->size[i] < 0) { /* bad by construction */
            *reason = c->arena + c->offset[i];
            return (int)c->size[i];
        }
        *loc = (location){.fd = c->dirfd, .path = open_path(c, i)};
        return 0;
    }
    *loc = (location){.fd = c->source_fd[c->source[i]],
                      .offset = c->offset[i],
                      .size = c->size[i],
                      .reader = c->source_reader[c->source[i]]};
    return 0;
}

int catalog_locate_extra(const catalog *c, int64_t i, int k, location *loc)
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
    if (!c->source || c->source[i] == -1) /* a file's: text in the arena */
        *loc = (location){.fd = -1,
                          .bytes = c->arena + c->extra_off[j],
                          .size = c->extra_size[j]};
    else
        *loc = (location){.fd = c->source_fd[c->source[i]],
                          .offset = c->extra_off[j],
                          .size = c->extra_size[j],
                          .reader = c->source_reader[c->source[i]]};
    return 1;
}
