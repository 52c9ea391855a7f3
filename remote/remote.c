/* Remote shards (remote.h): the set of a loader's remote shards and the
 * readers the workers call. The URLs are expanded and sorted, each
 * shard's index fetched at create (from URL.idx, or from the shard
 * fetched whole), and the mode chosen: whole shards through the node
 * cache (cache.h) when it holds the data, else every member read
 * alone with a ranged request (transfer.h). The set owns the
 * transfers, the cache and the stop flag they share; the catalog owns
 * the set (catalog_adopt), stopping it before the workers are joined and
 * freeing it when it closes. */
#include "remote.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../catalog/shard_samples.h"
#include "../common/braces.h"
#include "../common/error.h"
#include "../common/file.h"
#include "../common/grow.h"
#include "../index/idx_file.h"
#include "../index/tar.h"
#include "cache.h"
#include "transfer.h"

#define INDEX_THREADS 8 /* threads fetching indexes at create */
#define INDEX_WINDOW 64 /* shards whose member indexes live at once */
/* The stream's shards open beyond those a window's reads may still want
 * (the span behind the furthest shard read and the span from it on). */
#define STREAM_AHEAD 1
/* config.remote_create_timeout_ms's default: 10 minutes. */
#define CREATE_TIMEOUT_MS 600000

/* Descriptors left for the transfers, the cache and the rest of the
 * process when the tables take theirs. */
#define FD_ROOM 512

typedef struct remote_set remote_set;

typedef struct rshard {
    location_reader reader; /* first: the workers' handle is the shard */
    remote_set *set;
    cache_shard *c; /* its URL, name, size and cached copy */
} rshard;

struct remote_set {
    rshard *s;
    int n;
    int ranged; /* the data is larger than the cache: ranged reads */
    int stream; /* PL_ORDER_SHARDS: whole shards in the rank's order */
    /* Set once, when the catalog stops: every transfer, backoff and wait
     * for a lock gives up. */
    atomic_int stop;
    transfers *xfer;
    remote_cache *cache; /* borrows xfer and stop */
    int file_backed; /* shards whose tables are read from their cached
                        index file (a descriptor each); the others' are
                        held in the heap */
};

/* ---- URLs ---- */

int remote_is_url(const char *s)
{
    return transfer_knows(s);
}

/* ---- the workers' reader ---- */

static int shard_read(const location_reader *r, int64_t off, int64_t size,
                      void *dst, char *reason, size_t cap)
{
    const rshard *sh = (const rshard *)r;
    if (size == 0) /* nothing to fetch: the decoder says what is wrong */
        return 0;
    /* Ranged mode reads a shard whole only if create fetched it to index
     * it. */
    int rc = cache_read(sh->c, !sh->set->ranged, off, size, dst, reason, cap);
    if (rc == 1)
        rc = transfer_range(sh->set->xfer, sh->c->url, off, size, dst, reason,
                            cap);
    if (rc != 0 && atomic_load(&sh->set->stop)) {
        /* Cut by pl_loader_destroy: not the sample's failure. */
        snprintf(reason, cap, "the loader is closing");
        return PL_ECLOSED;
    }
    return rc == TRANSFER_NO_RANGES ? PL_EIO : rc;
}

/* ---- the set's life ---- */

static void set_stop(void *p)
{
    atomic_store(&((remote_set *)p)->stop, 1);
}

static void set_order(void *p, const int32_t *shards, int n)
{
    remote_set *rs = p;
    cache_stream_order(rs->cache, shards, n);
}

static void set_free(void *p)
{
    remote_set *rs = p;
    if (!rs)
        return;
    atomic_store(&rs->stop, 1);
    cache_free(rs->cache); /* first: it borrows the transfers */
    transfers_free(rs->xfer);
    free(rs->s);
    free(rs);
}

/* The set of the n shards at urls, its cache made and checked: 0 with
 * [out] *out, or an error (pl_last_error says why). */
static int set_new(char **urls, int n, const remote_opts *o, logger *lg,
                   remote_set **out)
{
    *out = NULL;
    remote_set *rs = calloc(1, sizeof *rs);
    if (!rs)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    atomic_init(&rs->stop, 0);
    rs->xfer = transfers_new(o->timeout_ms, o->retries, &rs->stop);
    int rc = rs->xfer ? cache_new(o->cache_dir, o->cache_limit, urls, n,
                                  rs->xfer, &rs->stop, lg, &rs->cache)
                      : PL_ENOMEM;
    rs->s = calloc((size_t)n, sizeof *rs->s);
    if (rc == 0 && !rs->s)
        rc = PL_ENOMEM;
    if (rc < 0) {
        set_free(rs);
        return rc == PL_ENOMEM
                   ? err_set(PL_ENOMEM, "pl_loader_create: out of memory")
                   : rc;
    }
    rs->n = n;
    for (int i = 0; i < n; i++) {
        rs->s[i].reader.read = shard_read;
        rs->s[i].set = rs;
        rs->s[i].c = cache_shard_at(rs->cache, i);
    }
    *out = rs;
    return 0;
}

/* ---- create: the indexes, the mode, the classes ---- */

/* classes.txt beside the first shard, into the cache: its path in out, or
 * "" if the store has none. */
static int fetch_classes(remote_set *rs, const char *first, char *out,
                         size_t cap)
{
    out[0] = '\0';
    if (transfer_is_command(first))
        return 0;
    const char *slash = strrchr(first, '/');
    if (!slash || slash < strstr(first, "://") + 3)
        return 0;
    char url[4096];
    snprintf(url, sizeof url, "%.*sclasses.txt", (int)(slash - first + 1),
             first);
    char err[1024];
    const int rc = cache_fetch_file(rs->cache, url, out, cap, err, sizeof err);
    if (rc < 0)
        return err_set(rc, "pl_loader_create: %s", err);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Indexing on a few threads: the requests are latency, not CPU. The
 * shards are indexed a window at a time, each window's member indexes
 * (about 100 bytes a member while they live) made into mapped tables the
 * catalog takes, and freed, before the next window's are fetched: create's
 * peak is the catalog's plus one window's, not every shard's indexes at
 * once (hundreds of bytes a sample, as input/shards.c found for local
 * shards). */
typedef struct index_pool {
    remote_set *rs;
    int from, to; /* the window: shards [from, to) */
    int whole;    /* 0: the .idx files; 1: the shards without one, whole */
    atomic_int next;
    tar_index t[INDEX_WINDOW];
    int rc[INDEX_WINDOW];
    char err[INDEX_WINDOW][512];
} index_pool;

static void *index_main(void *arg)
{
    index_pool *p = arg;
    for (int i; (i = p->from + atomic_fetch_add(&p->next, 1)) < p->to;) {
        cache_shard *sh = p->rs->s[i].c;
        const int j = i - p->from;
        int rc;
        if (p->whole && sh->size < 0) {
            rc = cache_index_whole(sh, &p->t[j], p->err[j], sizeof p->err[j]);
            rc = rc == 0 ? 1 : rc;
        } else { /* the .idx: fetched once per node, then the cache's copy */
            rc = cache_index(sh, &p->t[j], p->err[j], sizeof p->err[j]);
        }
        if (p->whole && rc == 0) {
            snprintf(p->err[j], sizeof p->err[j],
                     "%s.idx: gone from the cache and the store while "
                     "indexing",
                     sh->name);
            rc = PL_EIO;
        }
        p->rc[j] = rc; /* 1: indexed; 0: no index (the .idx pass) */
    }
    return NULL;
}

/* One pass of the pool over the shards [from, to); the first shard's
 * error in order, if any. */
static int index_pass(index_pool *p, int from, int to)
{
    assert(to - from <= INDEX_WINDOW);
    p->from = from;
    p->to = to;
    memset(p->rc, 0, sizeof p->rc);
    for (int j = 0; j < INDEX_WINDOW; j++)
        p->err[j][0] = '\0';
    atomic_init(&p->next, 0);
    pthread_t th[INDEX_THREADS];
    int started = 0;
    for (; started < INDEX_THREADS && started < to - from - 1; started++)
        if (pthread_create(&th[started], NULL, index_main, p) != 0)
            break;
    index_main(p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int j = 0; j < to - from; j++) {
        if (p->rc[j] == PL_ENOMEM)
            return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
        if (p->rc[j] < 0)
            return err_set(p->rc[j], "pl_loader_create: %s", p->err[j]);
    }
    return 0;
}

/* A remote shard's table, kept as its index file in the cache (version 2,
 * whatever the store's was) and read from there (sample_table.h), so that
 * the node's ranks share it; in the heap where it cannot be written. */
static int table_of(const cache_shard *sh, const tar_index *t, int in_heap,
                    sample_table *tab)
{
    char idx[PATH_MAX + 16];
    snprintf(idx, sizeof idx, "%s.idx", sh->path);
    const int rc = idx_file_keep_at(idx, sh->size, t, in_heap, tab);
    if (rc == PL_ENOMEM)
        return err_set(rc, "pl_loader_create: out of memory");
    if (rc < 0)
        return err_set(rc, "pl_loader_create: %s: %s", sh->name,
                       pl_last_error());
    return 0;
}

/* What adding the shards met, for create's notices and the classes. */
typedef struct add_totals {
    int32_t max_label;
    unread_members unread;
} add_totals;

/* Shard i, the catalog's next source, its indexed members its samples. */
static int add_shard(catalog *c, remote_set *rs, int i, const tar_index *t,
                     add_totals *tot)
{
    int id;
    sample_table tab = {0};
    int rc = catalog_add_reader(c, &rs->s[i].reader, &id);
    assert(rc < 0 || id == i);
    if (rc == 0)
        rc = table_of(rs->s[i].c, t, i >= rs->file_backed, &tab);
    if (rc == 0)
        rc = shard_samples_add(c, id, rs->s[i].c->name, &tab, &tot->max_label,
                               &tot->unread);
    return rc;
}

/* The window's indexes, freed: the catalog has what it needs of them. */
static void window_free(index_pool *p)
{
    for (int j = 0; j < INDEX_WINDOW; j++)
        tar_index_free(&p->t[j]);
}

/* The .idx files, a window at a time, each shard added while no shard
 * before it lacks one: [out] *added shards added, *missing those without
 * an index (the first of them at *added). */
static int index_fetched(catalog *c, remote_set *rs, index_pool *p,
                         add_totals *tot, int *added, int *missing)
{
    int rc = 0;
    p->whole = 0;
    for (int w = 0; w < rs->n && rc == 0; w += INDEX_WINDOW) {
        const int to = rs->n - w < INDEX_WINDOW ? rs->n : w + INDEX_WINDOW;
        rc = index_pass(p, w, to);
        for (int i = w; i < to && rc == 0; i++) {
            if (p->rc[i - w] == 0)
                ++*missing;
            else if (!*missing &&
                     (rc = add_shard(c, rs, i, &p->t[i - w], tot)) == 0)
                ++*added;
        }
        window_free(p);
    }
    return rc;
}

/* The shards from `from` on, a window at a time, those without an index
 * fetched whole and indexed from their headers, the others from their
 * .idx in the cache (fetched by index_fetched: no request). */
static int index_whole(catalog *c, remote_set *rs, index_pool *p, int from,
                       add_totals *tot)
{
    int rc = 0;
    p->whole = 1;
    for (int w = from; w < rs->n && rc == 0; w += INDEX_WINDOW) {
        const int to = rs->n - w < INDEX_WINDOW ? rs->n : w + INDEX_WINDOW;
        rc = index_pass(p, w, to);
        for (int i = w; i < to && rc == 0; i++)
            rc = add_shard(c, rs, i, &p->t[i - w], tot);
        window_free(p);
    }
    return rc;
}

/* Every shard's index, into the catalog in order: from the .idx files
 * first; then, said beforehand, the shards without one fetched whole. */
static int index_all(catalog *c, remote_set *rs, add_totals *tot, logger *lg)
{
    index_pool *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    p->rs = rs;
    int added = 0, missing = 0;
    int rc = index_fetched(c, rs, p, tot, &added, &missing);
    if (rc == 0 && missing)
        log_msg(lg, PL_LOG_NOTICE,
                "%d of %d remote shard(s) have no index beside them "
                "(SHARD.idx, as pinload-pack writes it): create fetches "
                "those %d shard(s) whole into %s to index them, first %s",
                missing, rs->n, missing, cache_dir(rs->cache),
                rs->s[added].c->name);
    if (rc == 0 && missing)
        rc = index_whole(c, rs, p, added, tot);
    free(p);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The most shards a window of w stream positions touches, whatever the
 * epoch's shard order: one partly at each end and, between them, whole
 * shards of at most w - 2 samples together, at most as many as the
 * smallest ones fit (empty shards are never in a rank's sequence). */
static int window_span(const catalog *c, int n, int64_t w)
{
    int64_t *len = malloc((size_t)n * sizeof *len);
    if (!len)
        return n;
    int m = 0;
    for (int k = 0; k < n; k++) {
        const int64_t l =
            catalog_shard_first(c, k + 1) - catalog_shard_first(c, k);
        if (l > 0)
            len[m++] = l;
    }
    qsort(len, (size_t)m, sizeof *len, cmp_i64);
    int span = w > 1 ? 2 : 1;
    for (int64_t sum = 0, k = 0; w > 2 && k < m && sum + len[k] <= w - 2; k++) {
        sum += len[k];
        span++;
    }
    free(len);
    return span < m ? span : m > 0 ? m : 1;
}

/* The bytes of the `hold` largest shards. */
static int64_t largest_bytes(const remote_set *rs, int hold)
{
    int64_t *b = malloc((size_t)rs->n * sizeof *b), sum = 0;
    if (!b)
        return INT64_MAX;
    for (int i = 0; i < rs->n; i++)
        b[i] = rs->s[i].c->size;
    qsort(b, (size_t)rs->n, sizeof *b, cmp_i64);
    for (int i = rs->n - 1; i >= 0 && i >= rs->n - hold; i--)
        sum += b[i];
    free(b);
    return sum;
}

/* PL_ORDER_SHARDS: whole shards streamed in the rank's order if the cache
 * holds what every rank of the node keeps open at once, whatever the
 * data's size. 1 if streamed, 0 if not (said why, when the data exceeds
 * the cache). */
static int choose_stream(remote_set *rs, const catalog *c, const remote_opts *o,
                         int64_t total, logger *lg)
{
    if (o->stream_window <= 0)
        return 0;
    const int64_t limit = cache_limit(rs->cache);
    const int span = window_span(c, rs->n, o->stream_window);
    int hold = 2 * span + STREAM_AHEAD;
    hold = hold < rs->n ? hold : rs->n;
    const int ranks = o->ranks > 0 ? o->ranks : 1;
    const int64_t need = largest_bytes(rs, hold) * ranks;
    const int over = limit > 0 && total > limit;
    if (over && need > limit) {
        log_msg(lg, PL_LOG_NOTICE,
                "the shard order streams remote shards whole, %d at once per "
                "rank (a window spans up to %d; that many behind the "
                "furthest one read, from it on, and %d ahead), and %d "
                "rank(s) of this node need up to %lld bytes of cache for "
                "them: more than cache_limit (%lld bytes), so they are not "
                "streamed",
                hold, span, STREAM_AHEAD, ranks, (long long)need,
                (long long)limit);
        return 0;
    }
    if (cache_stream(rs->cache, span, hold) < 0)
        return 0;
    if (over)
        log_msg(lg, PL_LOG_NOTICE,
                "the %d remote shards (%lld bytes) exceed cache_limit (%lld "
                "bytes): in the shard order each rank fetches its own whole, "
                "in the order it reads them, %d open at once (%lld bytes "
                "for %d rank(s) of this node), and lets go of those it has "
                "read",
                rs->n, (long long)total, (long long)limit, hold,
                (long long)need, ranks);
    return 1;
}

/* Ranged mode asks the store for one range first, the first sample's
 * bytes (its first MiB at most), as its read will: a store that ignores
 * Range requests, or answers with other bytes, fails create once, naming
 * it, rather than every sample of the epoch. Any other failure is left to
 * the samples' own reads. */
static int probe_ranges(remote_set *rs, const catalog *c, int64_t limit,
                        int64_t total)
{
    location loc;
    int64_t i = 0;
    while (i < catalog_size(c) && (catalog_locate(c, i, &loc, NULL, 0) != 0 ||
                                   !loc.reader || loc.size <= 0))
        i++;
    if (i == catalog_size(c))
        return 0;
    const rshard *sh = (const rshard *)loc.reader;
    const int64_t size = loc.size < (1 << 20) ? loc.size : (1 << 20);
    void *buf = malloc((size_t)size);
    if (!buf)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    char why[1024];
    const int rc = transfer_range(rs->xfer, sh->c->url, loc.offset, size, buf,
                                  why, sizeof why);
    free(buf);
    if (rc != TRANSFER_NO_RANGES)
        return 0;
    return err_set(PL_EIO,
                   "pl_loader_create: the %d remote shards (%lld bytes) "
                   "exceed cache_limit (%lld bytes), so each member would be "
                   "read alone with a ranged request, and %s",
                   rs->n, (long long)total, (long long)limit, why);
}

/* Whole shards when the cache holds the data, or streamed in the shard
 * order; else members by ranged requests (the exact order reads any
 * member at any time). */
static int choose_mode(remote_set *rs, const catalog *c, const remote_opts *o,
                       logger *lg)
{
    const int64_t limit = cache_limit(rs->cache);
    int64_t total = 0;
    int pipes = 0;
    for (int i = 0; i < rs->n; i++) {
        total += rs->s[i].c->size;
        pipes += transfer_is_command(rs->s[i].c->url);
    }
    if ((rs->stream = choose_stream(rs, c, o, total, lg)))
        return 0;
    if (limit <= 0 || total <= limit)
        return 0;
    if (pipes)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.cache_limit: %lld bytes is "
                       "less than the %lld bytes of the %d shards, and a "
                       "pipe: shard cannot be read member by member: raise "
                       "the limit, or use http(s)://, s3://, gs:// or hf:// "
                       "URLs",
                       (long long)limit, (long long)total, rs->n);
    rs->ranged = 1;
    const int rc = probe_ranges(rs, c, limit, total);
    if (rc < 0)
        return rc;
    log_msg(lg, PL_LOG_NOTICE,
            "the %d remote shards (%lld bytes) exceed cache_limit (%lld "
            "bytes): each member is read alone with a ranged request, in the "
            "exact order, and no shard is cached whole",
            rs->n, (long long)total, (long long)limit);
    return 0;
}

/* The shards' samples, then the classes. */
static int add_shards(catalog *c, remote_set *rs, const char *first, logger *lg)
{
    add_totals tot = {0};
    int rc = index_all(c, rs, &tot, lg);
    if (rc == 0)
        shard_samples_say_unread(&tot.unread, lg);
    if (rc == 0)
        shard_samples_say_heap(c, lg);
    char classes[PATH_MAX + 64];
    if (rc == 0)
        rc = fetch_classes(rs, first, classes, sizeof classes);
    if (rc == 0)
        rc = shard_samples_add_classes(c, classes, tot.max_label, lg);
    return rc;
}

int remote_read(catalog *c, char **urls, int n, const remote_opts *o,
                logger *lg)
{
    qsort(urls, (size_t)n, sizeof *urls, cmp_str);
    remote_set *rs;
    const int made = set_new(urls, n, o, lg, &rs);
    if (made < 0)
        return made;
    catalog_adopt(c, rs, set_stop, set_free);
    /* Create's transfers (the indexes, the shards without one, the
     * classes, the ranges' probe) end by its deadline; the workers' and
     * the fetch-ahead thread's have none. */
    const int32_t ms =
        o->create_timeout_ms == 0 ? CREATE_TIMEOUT_MS : o->create_timeout_ms;
    transfer_deadline(rs->xfer, ms);
    /* The remote shards are the catalog's only ones (remote_detect: all
     * of config.data), so catalog shard k is rs->s[k]. The mode needs
     * every shard's size and samples: chosen once all are added. */
    /* Each table read from its cached index file keeps it open: as many
     * as the limit on open files leaves room for (FD_ROOM for the
     * transfers, the cache and everything else). */
    rs->file_backed = (int)file_fds_room(n < SHARDS_MAPPED_MAX ? n
                                                               : SHARDS_MAPPED_MAX,
                                         FD_ROOM);
    int rc = add_shards(c, rs, urls[0], lg);
    if (rc == 0)
        rc = choose_mode(rs, c, o, lg);
    transfer_deadline(rs->xfer, 0);
    if (rc == 0)
        log_msg(lg, PL_LOG_NOTICE, "%d remote shard(s) through the cache %s", n,
                cache_dir(rs->cache));
    if (rc == 0 && rs->stream)
        catalog_adopt_order(c, set_order);
    if (rc == 0 && !rs->ranged)
        cache_start_ahead(rs->cache);
    return rc;
}

/* ---- which data is remote ---- */

/* The URL a list file's line holds, trimmed (and the first line's BOM
 * skipped); NULL for a blank or # line. */
static char *list_line(char *line, int lineno)
{
    size_t len = strlen(line);
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    char *s = line;
    if (lineno == 1 && strncmp(s, "\xef\xbb\xbf", 3) == 0)
        s += 3;
    while (isspace((unsigned char)*s))
        s++;
    return *s && *s != '#' ? s : NULL;
}

/* Lines of a bounded length: a shard or an image named as data is not
 * read whole looking for a newline. */
#define URL_LINE_MAX 8192

/* Whether s[0, n) is a line of text: UTF-8 (ASCII included), and no
 * control byte but a tab or a carriage return. */
static int text_bytes(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        const unsigned c = s[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
                return 0;
            i++;
            continue;
        }
        /* A sequence's length past its first byte, and the least code
         * point it may hold (no overlong forms). */
        const size_t k = c >= 0xc2 && c <= 0xdf   ? 1
                         : (c & 0xf0) == 0xe0     ? 2
                         : c >= 0xf0 && c <= 0xf4 ? 3
                                                  : 0;
        if (k == 0 || n - i <= k)
            return 0;
        uint32_t v = c & (0x3fu >> k);
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            v = v << 6 | (s[i + j] & 0x3fu);
        }
        const uint32_t least = k == 1 ? 0x80 : k == 2 ? 0x800 : 0x10000;
        if (v < least || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* The next line of f, its newline dropped, into line[URL_LINE_MAX]: 1;
 * 0 at the end of the file; or -1 if it is not a line of text, *why
 * saying how (a NUL byte, another control byte, bytes that are not
 * UTF-8, a line too long): a binary file is never a list. */
static int text_line(FILE *f, char *line, const char **why)
{
    size_t len = 0;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (c == '\0' || len == URL_LINE_MAX - 1) {
            *why = c == '\0' ? "a NUL byte" : "a line over 8191 bytes";
            return -1;
        }
        line[len++] = (char)c;
    }
    line[len] = '\0';
    if (c == EOF && len == 0)
        return 0;
    if (!text_bytes((const unsigned char *)line, len)) {
        *why = "a control byte, or bytes that are not UTF-8";
        return -1;
    }
    return 1;
}

/* Whether the user let list files run pipe: commands. Only an
 * environment variable, set where the job is launched, can: a config
 * may come from a file as the list does. */
static int pipe_lists_allowed(void)
{
    const char *v = getenv("PINLOAD_ALLOW_PIPE_LISTS");
    return v && strcmp(v, "1") == 0;
}

/* The URLs of f's lines into *out: 1 if it held one, 0 if it is not a
 * list of URLs (a line that is not one, or not text, before any that
 * is), or an error. A pipe: line is refused unless the user allowed
 * list files to run commands: a command runs only from what the user
 * wrote in config.data, never from a file's contents. */
static int read_url_lines(FILE *f, const char *path, char ***out, int *n)
{
    char line[URL_LINE_MAX];
    size_t cap = 0;
    for (int lineno = 1;; lineno++) {
        const char *why = NULL;
        const int got = text_line(f, line, &why);
        if (got < 0)
            return *n ? err_set(PL_EINVAL,
                                "pl_loader_create: %s:%d: %s in a list of "
                                "URLs",
                                path, lineno, why)
                      : 0;
        if (got == 0)
            return *n > 0;
        const char *s = list_line(line, lineno);
        if (!s)
            continue;
        char refused[512];
        if (transfer_refusal(s, refused, sizeof refused))
            return err_set(PL_EINVAL, "pl_loader_create: %s:%d: %s", path,
                           lineno, refused);
        if (!remote_is_url(s))
            return *n ? err_set(PL_EINVAL,
                                "pl_loader_create: %s:%d: expected a URL "
                                "(http(s)://, s3://, gs://, hf://, pipe:), as "
                                "on the lines before",
                                path, lineno)
                      : 0;
        if (transfer_is_command(s) && !pipe_lists_allowed())
            return err_set(PL_EINVAL,
                           "pl_loader_create: %s:%d: a pipe: command in a "
                           "list file is not run: commands run only from "
                           "config.data itself, never from a file's lines. "
                           "If you wrote this list and trust every line, "
                           "set PINLOAD_ALLOW_PIPE_LISTS=1",
                           path, lineno);
        const int rc = paths_push(out, n, &cap, strdup(s));
        if (rc < 0)
            return rc;
    }
}

/* A local file whose lines (blank and # lines aside) are URLs: a regular
 * file of text that is not a tar (a tar is a shard, docs/DATA.md). */
static int list_of_urls(const char *path, char ***out, int *n)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || tar_is_name(path) ||
        tar_is_archive(path))
        return 0;
    const char *why;
    FILE *f = file_open_regular(path, &why); /* the other readers say why */
    if (!f)
        return 0;
    const int rc = read_url_lines(f, path, out, n);
    fclose(f);
    if (rc <= 0 || *n == 0) {
        paths_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc < 0 ? rc : 0;
    }
    return 1;
}

int remote_detect(const char *data, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    char why[512];
    if (transfer_refusal(data, why, sizeof why))
        return err_set(PL_EINVAL, "pl_loader_create: config.data: %s", why);
    if (!remote_is_url(data))
        return list_of_urls(data, out, n);
    const int rc = braces_expand(data, out, n);
    if (rc != 0)
        return rc;
    size_t cap = 0;
    const int p = paths_push(out, n, &cap, strdup(data));
    return p < 0 ? p : 1;
}
