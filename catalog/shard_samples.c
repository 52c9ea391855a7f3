/* A shard's indexed samples into the catalog (shard_samples.h): the keys
 * of its table, their labels (cls members, or a JSON member's field),
 * the members left out, the class names; the same for local and remote
 * shards. */
#include "shard_samples.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../codecs/codec.h"
#include "../common/error.h"
#include "../common/file.h"
#include "../common/grow.h"
#include "json_label.h"

/* A json member larger than this gives no label (JSON_LABEL_UNREAD). */
#define JSON_LABEL_MAX_BYTES ((int64_t)16 << 20)

static void unread_note(unread_members *u, const char *path, const char *member)
{
    if (u->count++ >= SHARDS_UNREAD_NAMED)
        return;
    const int n = snprintf(u->names + u->len, sizeof u->names - u->len,
                           "%s%.80s:%.60s", u->len ? ", " : "", path, member);
    if (n > 0)
        u->len += (size_t)n < sizeof u->names - u->len
                      ? (size_t)n
                      : sizeof u->names - u->len - 1;
}

/* The image members of kinds not read among one key's members [first,
 * end) (those that are not one of the configured extras), into *u; and
 * whether the key has a cls member to take its label from. */
static void note_unread(const catalog *cat, const sample_table *tab,
                        const char *path, int64_t first, int64_t end,
                        unread_members *u)
{
    int taken[CATALOG_EXTRAS_MAX] = {0};
    int cls = 0;
    for (int64_t j = first; j < end; j++) {
        size_t kl;
        const char *ext, *name = shard_member_name(tab, j);
        shard_split_key(name, &kl, &ext);
        cls |= strcasecmp(ext, "cls") == 0;
        int k = 0;
        while (k < cat->nextras &&
               (taken[k] || strcasecmp(ext, cat->extra_names[k]) != 0))
            k++;
        if (k < cat->nextras)
            taken[k] = 1;
        else if (codec_extension_kind(ext) == -1)
            unread_note(u, path, name);
    }
    u->keys++;
    if (cls || cat->label_field || end == first)
        return;
    if (u->unlabelled++ == 0) {
        size_t kl;
        const char *ext, *name = shard_member_name(tab, first);
        shard_split_key(name, &kl, &ext);
        const size_t cut = kl > 100 ? kl - 100 : 0; /* a long key's end */
        snprintf(u->unlabelled_name, sizeof u->unlabelled_name, "%.120s:%s%.*s",
                 path, cut ? "..." : "", (int)(kl - cut), name + cut);
    }
}

/* Key k's label from its json member's field (config.label_field), read
 * from the shard at fd now; or a JSON_LABEL_* code. */
static int32_t json_label_at(const catalog *cat, const sample_table *tab,
                             uint32_t first, uint32_t count, int fd, char **buf,
                             size_t *cap)
{
    for (uint32_t m = first; m < first + count; m++) {
        size_t klen;
        const char *ext;
        shard_split_key(shard_member_name(tab, m), &klen, &ext);
        if (strcasecmp(ext, "json") != 0)
            continue;
        const int64_t off = shard_member_offset(tab, m);
        const int64_t size = shard_member_size(tab, m);
        if (size > JSON_LABEL_MAX_BYTES ||
            grow(buf, cap, (size_t)size + 1, 1, 4096) < 0)
            return JSON_LABEL_UNREAD;
        if (file_pread_full(fd, *buf, (size_t)size, (off_t)off) != size)
            return JSON_LABEL_UNREAD;
        return json_label_of(*buf, (size_t)size, cat->label_field, MAX_CLASSES);
    }
    return JSON_LABEL_NO_MEMBER;
}

/* The labels of a shard's keys from their json members, into the catalog
 * from sample `first` on; *max_label rises to the largest. */
static int add_json_labels(catalog *cat, int s, const char *path,
                           const sample_table *tab, int64_t first,
                           int32_t *max_label)
{
    if (cat->source_reader[s])
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.label_field: %s is a remote "
                       "shard; labels from JSON members are read at create, "
                       "from local shards only (pinload-pack can store them "
                       "as cls members)",
                       path);
    int32_t *labels = malloc((tab->nkeys ? tab->nkeys : 1) * sizeof *labels);
    char *buf = NULL;
    size_t cap = 0;
    if (!labels)
        return PL_ENOMEM;
    for (uint32_t k = 0; k < tab->nkeys; k++) {
        labels[k] = json_label_at(cat, tab, shard_key_first(tab, k),
                                  shard_key_members(tab, k), cat->source_fd[s],
                                  &buf, &cap);
        if (labels[k] > *max_label)
            *max_label = labels[k];
    }
    const int rc = catalog_set_json_labels(cat, first, labels, tab->nkeys);
    free(labels);
    free(buf);
    return rc;
}

/* The samples of one shard: its keys, as its table has them (the catalog
 * takes the table). */
int shard_samples_add(catalog *cat, int s, const char *path, sample_table *tab,
                      int32_t *max_label, unread_members *unread)
{
    if (cat->label_field) {
        const int rc = add_json_labels(cat, s, path, tab, cat->n, max_label);
        if (rc < 0) {
            sample_table_close(tab);
            return rc;
        }
    }
    for (uint32_t k = 0; k < tab->nkeys; k++) {
        const int64_t first = shard_key_first(tab, k);
        note_unread(cat, tab, path, first, first + shard_key_members(tab, k),
                    unread);
        /* Every sample's label counts, a bad one's too: under SUBSTITUTE
         * it is delivered (a key without an image keeps its cls label). */
        const int32_t label = shard_key_label(tab, k);
        if (!cat->label_field && label > *max_label)
            *max_label = label;
    }
    return catalog_add_shard(cat, path, s, tab);
}

/* The class names of a pack: classes.txt in the first shard's folder
 * (pinload-pack writes it), one per line, label 0 first. 0 if there is
 * none (the names are then the decimal labels), 1 once they are all in
 * the catalog; or an error naming the file and the line: an empty or
 * repeated name, or fewer names than the shards' labels need. */
static int read_classes(catalog *cat, const char *path, int32_t max_label,
                        logger *lg)
{
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return err_set(PL_EIO, "pl_loader_create: %s: %s", path, why);
    }
    char *line = NULL, **names = NULL;
    size_t cap = 0;
    int32_t n = 0, names_cap = 0;
    int rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0) {
            rc = err_set(PL_EINVAL,
                         "pl_loader_create: %s, line %d: an empty class name",
                         path, (int)n + 1);
            break;
        }
        for (int32_t k = 0; k < n; k++)
            if (strcmp(names[k], line) == 0)
                rc = err_set(PL_EINVAL,
                             "pl_loader_create: %s, line %d: class \"%s\" is "
                             "named twice (line %d too)",
                             path, (int)n + 1, line, (int)k + 1);
        if (rc == 0 && n == names_cap) {
            names_cap = names_cap ? 2 * names_cap : 64;
            char **g = realloc(names, (size_t)names_cap * sizeof *g);
            if (!g)
                rc = PL_ENOMEM;
            else
                names = g;
        }
        if (rc == 0 && !(names[n] = strdup(line)))
            rc = PL_ENOMEM;
        if (rc == 0)
            n++;
    }
    const int read_error = ferror(f);
    fclose(f);
    free(line);
    if (rc == 0 && read_error)
        rc = err_set(PL_EIO, "pl_loader_create: %s: read error", path);
    if (rc == 0 && n <= max_label)
        rc = err_set(PL_EINVAL,
                     "pl_loader_create: %s names %d classes, but the shards "
                     "hold label %d: it belongs to another pack",
                     path, (int)n, (int)max_label);
    for (int32_t k = 0; k < n; k++) {
        if (rc == 0)
            rc = catalog_add_class(cat, names[k]);
        free(names[k]);
    }
    free(names);
    if (rc == PL_ENOMEM)
        return err_set(rc, "pl_loader_create: out of memory");
    if (rc == 0)
        log_msg(lg, PL_LOG_NOTICE, "%d class names from %s", (int)n, path);
    return rc < 0 ? rc : 1;
}

void shard_samples_say_heap(const catalog *cat, logger *lg)
{
    if (cat->heap_tables)
        log_msg(lg, PL_LOG_NOTICE,
                "%d of %d shard(s) have no index file to read their sample "
                "tables from (none could be written beside them or in the "
                "cache folder, or over %d shards or the limit on open files, "
                "no dataset table file): their tables are held in this "
                "process's memory instead of the page cache, about 96 bytes "
                "a sample (set PINLOAD_INDEX_DIR to a writable folder)",
                cat->heap_tables, cat->nshards, SHARDS_MAPPED_MAX);
}

/* Warnings, not notices: the samples left out and the labels made up
 * change what the caller trains on. */
void shard_samples_say_unread(const unread_members *u, logger *lg)
{
    if (u->count) {
        char unread[64], formats[64];
        codec_words(unread, sizeof unread, CODEC_UNREAD, ", ");
        codec_words(formats, sizeof formats, CODEC_NAMES, " and ");
        log_msg(lg, PL_LOG_WARNING,
                "%zu image member(s) of kinds not supported (%s; %s are) left "
                "out: %s%s",
                u->count, unread, formats, u->names,
                u->count > SHARDS_UNREAD_NAMED ? ", ..." : "");
    }
    if (u->unlabelled)
        log_msg(lg, PL_LOG_WARNING,
                "%lld of %lld sample(s) have no cls member (KEY.cls, a "
                "decimal label), first %s: they are labelled 0 (store "
                "labels as cls members, as pinload-pack does, or name a "
                "JSON member's field with config.label_field)",
                (long long)u->unlabelled, (long long)u->keys,
                u->unlabelled_name);
}

int shard_samples_add_classes(catalog *cat, const char *classes,
                              int32_t max_label, logger *lg)
{
    int named = 0;
    if (classes && classes[0] &&
        (named = read_classes(cat, classes, max_label, lg)) < 0)
        return named;
    int rc = 0;
    for (int32_t c = 0; rc == 0 && !named && c <= max_label; c++) {
        char name[16];
        snprintf(name, sizeof name, "%d", c);
        rc = catalog_add_class(cat, name);
    }
    return rc;
}
