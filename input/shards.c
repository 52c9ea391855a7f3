/* The shard reader: tar shards in the WebDataset layout (readers.h says
 * which paths name shards and how members make samples), indexed in
 * parallel from their sidecar indexes or their headers, each kept open for
 * the workers' pread. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/braces.h"
#include "../common/error.h"
#include "../common/file.h"
#include "../common/grow.h"
#include "../index/idx_file.h"
#include "../index/node_tables.h"
#include "../index/tar.h"
#include "json_label.h"
#include "readers.h"

#define SCAN_THREADS 8 /* threads indexing shards at create */
#define SCAN_WINDOW 64 /* shards whose indexes live at once */
/* A json member larger than this gives no label (JSON_LABEL_UNREAD). */
#define JSON_LABEL_MAX_BYTES ((int64_t)16 << 20)
#define FD_MARGIN 256 /* descriptors left for everything else (CUDA, files) */

static char *join(const char *dir, const char *name)
{
    if (name[0] == '/' || strcmp(dir, ".") == 0)
        return strdup(name);
    char *s = malloc(strlen(dir) + strlen(name) + 2);
    if (s)
        sprintf(s, "%s/%s", dir, name);
    return s;
}

/* A folder whose visible entries are *.tar files: 1 with their paths, 0
 * if it holds none. Shards beside a visible sub-folder are refused: read
 * as shards, the sub-folder's images would be ignored; read as an image
 * folder, the shards would (a "preview/" beside 100 shards used to make a
 * one-image dataset). The message says how to name either. */
static int folder_of_shards(const char *dir, char ***out, int *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t cap = 0;
    int subdirs = 0, rc = 0;
    char first_subdir[256] = "";
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            if (!subdirs++)
                snprintf(first_subdir, sizeof first_subdir, "%s", e->d_name);
        } else if (S_ISREG(st.st_mode) && tar_is_name(e->d_name)) {
            rc = paths_push(out, n, &cap, join(dir, e->d_name));
        }
    }
    closedir(d);
    if (rc == 0 && *n > 0 && subdirs > 0)
        rc = err_set(PL_EINVAL,
                     "pl_loader_create: config.data: %s holds %d tar "
                     "shard%s and %d sub-folder%s (%s%s): as shards the "
                     "sub-folders would be ignored, as an image folder the "
                     "shards would. Name the shards alone (a brace pattern "
                     "such as %s/NAME-{000000..000099}.tar, or a list file "
                     "of shard paths), or move them out of the image folder",
                     dir, *n, *n == 1 ? "" : "s", subdirs,
                     subdirs == 1 ? "" : "s", first_subdir,
                     subdirs > 1 ? ", ..." : "", dir);
    if (rc < 0 || *n == 0) {
        paths_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc;
    }
    return 1;
}

/* A list file whose first line is one path ending in .tar: every line
 * names a shard (relative to the list's folder). */
static int list_of_shards(const char *list, char ***out, int *n)
{
    const char *why;
    FILE *f = file_open_regular(list, &why); /* the list reader says why */
    if (!f)
        return 0;
    char line[PATH_MAX + 2];
    const char *slash = strrchr(list, '/');
    char *dir = slash ? strndup(list, (size_t)(slash - list)) : strdup(".");
    if (slash == list) {
        free(dir);
        dir = strdup("/");
    }
    size_t cap = 0;
    int rc = dir ? 1 : PL_ENOMEM, lineno = 0;
    for (;;) {
        /* A line, bounded; a NUL byte or an over-long line means this is
         * not a list of shards (the list reader says what is wrong). */
        size_t len = 0;
        int c = 0, odd = 0;
        while ((c = getc(f)) != EOF && c != '\n') {
            if (c == '\0' || len == sizeof line - 1) {
                odd = 1;
                break;
            }
            line[len++] = (char)c;
        }
        line[len] = '\0';
        if (odd || (c == EOF && len == 0) || rc <= 0) {
            if (odd)
                rc = *n ? err_set(PL_EINVAL,
                                  "pl_loader_create: %s:%d: a NUL byte or "
                                  "a line over %d bytes in a list of shards",
                                  list, lineno + 1, (int)sizeof line - 1)
                        : 0;
            break;
        }
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' ||
                       line[len - 1] == ' ' || line[len - 1] == '\t'))
            line[--len] = '\0';
        char *text = line;
        if (lineno == 1 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
            text += 3;
        while (*text == ' ' || *text == '\t')
            text++;
        if (!*text || *text == '#')
            continue;
        if (strpbrk(text, " \t") || !tar_is_name(text)) {
            if (*n == 0) {
                rc = 0; /* an ordinary list of images */
                break;
            }
            rc = err_set(PL_EINVAL,
                         "pl_loader_create: %s:%d: expected one shard path "
                         "ending in .tar, as on the lines before",
                         list, lineno);
            break;
        }
        const int p = paths_push(out, n, &cap, join(dir, text));
        if (p < 0)
            rc = p;
    }
    fclose(f);
    free(dir);
    if (rc <= 0 || *n == 0) {
        paths_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc < 0 ? rc : 0;
    }
    return 1;
}

int shards_detect(const char *path, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    struct stat st;
    if (stat(path, &st) < 0)
        return braces_expand(path, out, n);
    if (S_ISDIR(st.st_mode))
        return folder_of_shards(path, out, n);
    /* A tar is a shard whatever its name (and never a list: its first
     * member's name would read as a list's first line). */
    if (tar_is_name(path) || (S_ISREG(st.st_mode) && tar_is_archive(path))) {
        size_t cap = 0;
        const int rc = paths_push(out, n, &cap, strdup(path));
        return rc < 0 ? rc : 1;
    }
    return list_of_shards(path, out, n);
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

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
        else if (shard_image_ext(ext) == -1)
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
        for (int64_t got = 0; got < size;) {
            const ssize_t n =
                pread(fd, *buf + got, (size_t)(size - got), (off_t)(off + got));
            if (n <= 0 && !(n < 0 && errno == EINTR))
                return JSON_LABEL_UNREAD;
            got += n > 0 ? n : 0;
        }
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
int shards_add_indexed(catalog *cat, int s, const char *path, sample_table *tab,
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

/* ---- indexing the shards, in parallel ---- */

typedef struct scan_job {
    const char *path;
    int fd;
    struct stat st;
    sample_table tab;
    int in_heap; /* the table read into the heap, not mapped */
    int rc;
    char msg[1024]; /* the error, read in the scanning thread */
    int from_idx, stale;
} scan_job;

typedef struct scan_pool {
    scan_job *jobs;
    int n;
    atomic_int next;
} scan_pool;

/* The shard's table: its version-2 sidecar mapped; else its members from
 * a version-1 sidecar or from its headers, kept as a version-2 sidecar
 * and mapped from there (or held in the heap where none can be
 * written). */
static void scan_one(scan_job *j)
{
    int stale, old;
    if (idx_file_table(j->path, &j->st, j->in_heap, &j->tab, &stale)) {
        j->from_idx = 1;
        return;
    }
    tar_index t = {0};
    if (idx_file_find(j->path, &j->st, &t, &old)) {
        j->from_idx = 1;
    } else {
        j->stale = stale | old;
        j->rc = tar_scan(j->fd, j->path, &t);
        if (j->rc == 0)
            j->rc = tar_read_small(j->fd, j->path, &t);
    }
    if (j->rc == 0)
        j->rc = idx_file_keep(j->path, &j->st, &t, j->in_heap, &j->tab);
    if (j->rc > 0)
        j->rc = 0;
    if (j->rc < 0)
        snprintf(j->msg, sizeof j->msg, "%s",
                 j->rc == PL_ENOMEM ? "out of memory" : pl_last_error());
    tar_index_free(&t);
}

static void *scan_main(void *arg)
{
    scan_pool *p = arg;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        scan_one(&p->jobs[i]);
    return NULL;
}

/* Descriptors this process has open now, or 0 if it cannot tell. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    long k = 0;
    for (const struct dirent *e; (e = readdir(d));)
        k += e->d_name[0] != '.';
    closedir(d);
    return k - 1; /* the listing's own */
}

/* Every shard stays open for the loader's life (workers pread members from
 * it), so n shards need n descriptors beside those open now and a margin.
 * A soft limit below that (1,024 is common; LAION-sized sets have tens of
 * thousands of shards) is raised towards the hard limit, with a notice;
 * past the hard limit create fails saying so, before opening anything. */
static int reserve_fds(int n, logger *lg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    const rlim_t need = (rlim_t)open_fds() + (rlim_t)n + FD_MARGIN;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        return err_set(PL_EIO,
                       "pl_loader_create: %d tar shards stay open, which "
                       "needs %llu file descriptors with those open now, but "
                       "this process may open at most %llu (ulimit -Hn): "
                       "raise the limit, or pack fewer, larger shards "
                       "(pinload-pack --shard-size)",
                       n, (unsigned long long)need,
                       (unsigned long long)rl.rlim_max);
    const rlim_t was = rl.rlim_cur;
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return err_set(PL_EIO,
                       "pl_loader_create: %d tar shards stay open, which "
                       "needs %llu file descriptors, and raising this "
                       "process's limit from %llu failed: %s",
                       n, (unsigned long long)need, (unsigned long long)was,
                       strerror(errno));
    log_msg(lg, PL_LOG_NOTICE,
            "%d tar shards stay open: raised this process's limit on open "
            "files from %llu to %llu (ulimit -n)",
            n, (unsigned long long)was, (unsigned long long)need);
    return 0;
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

/* Open every shard (they stay open for the loader's life): [out]
 * fds[0, n). */
static int open_shards(catalog *cat, char **paths, int n, int *fds)
{
    for (int s = 0; s < n; s++) {
        /* Without blocking: a FIFO named like a shard is refused below. */
        const int fd =
            open(paths[s], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
            return err_set(PL_EIO, "pl_loader_create: %s: %s", paths[s],
                           strerror(errno));
        int id;
        const int rc = catalog_add_source(cat, fd, &id);
        if (rc < 0)
            return rc;
        fds[s] = fd;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
            return err_set(PL_EIO, "pl_loader_create: %s: not a regular file",
                           paths[s]);
    }
    return 0;
}

/* Index jobs[0, n) on a few threads (their headers are small reads, often
 * over a network file system: latency, not CPU). */
static void scan_all(scan_job *jobs, int n)
{
    scan_pool pool = {.jobs = jobs, .n = n};
    atomic_init(&pool.next, 0);
    pthread_t th[SCAN_THREADS];
    int started = 0;
    for (; started < SCAN_THREADS && started < n - 1; started++)
        if (pthread_create(&th[started], NULL, scan_main, &pool) != 0)
            break;
    scan_main(&pool);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* Shards past which the tables come from one dataset table file:
 * SHARDS_MAPPED_MAX, or $PINLOAD_MAPPED_MAX, a hook for tests only (so
 * that a few dozen shards take that path). */
static int mapped_max(void)
{
    const char *v = getenv("PINLOAD_MAPPED_MAX");
    const long k = v && *v ? strtol(v, NULL, 10) : 0;
    return k > 0 && k < SHARDS_MAPPED_MAX ? (int)k : SHARDS_MAPPED_MAX;
}

/* What indexing the shards met, for create's notices. */
typedef struct scan_totals {
    int32_t max_label;
    int idx_files, stale;
    unread_members unread;
} scan_totals;

/* The shards are indexed SCAN_WINDOW at a time, each window's samples
 * added to the catalog in shard order and its indexes freed before the
 * next is read: the indexes (about 100 bytes a member while they live)
 * never all exist at once, so create's peak memory is the catalog's plus
 * one window's, not twice the catalog's. The jobs are one window's too:
 * an array of them for every shard (a kilobyte each) outlived create as
 * the allocator's, several bytes a sample. */
static int index_shards(catalog *cat, char **paths, int n, const int *fds,
                        scan_totals *tot)
{
    scan_job *jobs = calloc(SCAN_WINDOW, sizeof *jobs);
    if (!jobs)
        return PL_ENOMEM;
    const int mapped = mapped_max();
    int rc = 0;
    for (int w = 0; w < n && rc == 0; w += SCAN_WINDOW) {
        const int k = n - w < SCAN_WINDOW ? n - w : SCAN_WINDOW;
        for (int i = 0; i < k && rc == 0; i++) {
            jobs[i] = (scan_job){.path = paths[w + i],
                                 .fd = fds[w + i],
                                 .in_heap = w + i >= mapped};
            if (fstat(jobs[i].fd, &jobs[i].st) < 0)
                rc = err_set(PL_EIO, "pl_loader_create: %s: %s", paths[w + i],
                             strerror(errno));
        }
        if (rc < 0)
            break;
        scan_all(jobs, k);
        for (int i = 0; i < k && rc == 0; i++) {
            if (jobs[i].rc < 0)
                rc = err_set(jobs[i].rc, "pl_loader_create: %s", jobs[i].msg);
            else
                rc = shards_add_indexed(cat, w + i, paths[w + i], &jobs[i].tab,
                                        &tot->max_label, &tot->unread);
            tot->idx_files += jobs[i].from_idx;
            tot->stale += jobs[i].stale && !jobs[i].from_idx;
        }
        for (int i = 0; i < k; i++)
            sample_table_close(&jobs[i].tab); /* those not taken */
    }
    free(jobs);
    return rc;
}

/* The shards' tables, a window at a time (each read into the heap from its
 * sidecar or its headers, as index_shards reads them), appended to the
 * writer: 0, or an error of the shards' own; *ok 0 if the file could not
 * be written (the shards are then indexed as usual). */
static int write_tables(node_tables_writer *wr, char **paths, int n,
                        const int *fds, node_tables_entry *e, scan_totals *tot,
                        int *ok)
{
    scan_job *jobs = calloc(SCAN_WINDOW, sizeof *jobs);
    if (!jobs)
        return PL_ENOMEM;
    int rc = 0;
    *ok = 1;
    for (int w = 0; w < n && rc == 0 && *ok; w += SCAN_WINDOW) {
        const int k = n - w < SCAN_WINDOW ? n - w : SCAN_WINDOW;
        for (int i = 0; i < k; i++)
            jobs[i] = (scan_job){
                .path = paths[w + i], .fd = fds[w + i], .in_heap = 1};
        for (int i = 0; i < k && rc == 0; i++)
            if (fstat(jobs[i].fd, &jobs[i].st) < 0)
                rc = err_set(PL_EIO, "pl_loader_create: %s: %s", paths[w + i],
                             strerror(errno));
        if (rc == 0)
            scan_all(jobs, k);
        for (int i = 0; i < k && rc == 0; i++) {
            if (jobs[i].rc < 0)
                rc = err_set(jobs[i].rc, "pl_loader_create: %s", jobs[i].msg);
            else if (*ok)
                *ok = node_tables_add(wr, &jobs[i].tab, &e[w + i]) == 0;
            tot->idx_files += jobs[i].from_idx;
            tot->stale += jobs[i].stale && !jobs[i].from_idx;
        }
        for (int i = 0; i < k; i++)
            sample_table_close(&jobs[i].tab);
    }
    free(jobs);
    return rc;
}

/* The samples of tabs[0, n), slices of the catalog's mapping. */
static int add_joined(catalog *cat, char **paths, int n, sample_table *tabs,
                      scan_totals *tot)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0)
            rc = shards_add_indexed(cat, i, paths[i], &tabs[i], &tot->max_label,
                                    &tot->unread);
        else
            sample_table_close(&tabs[i]);
    }
    return rc;
}

/* How the dataset table file came to be mapped (index_joined's notice). */
enum { JOINED_FOUND, JOINED_WRITTEN, JOINED_REWRITTEN };

/* The dataset table file for shards e[0, n) mapped into tabs ([out]
 * *map, *len): found valid, or written now under its lock (another
 * process may have written it while this one waited). 1 with [out]
 * *how, 0 if it could not be written or mapped, or an error of the
 * shards'. */
static int map_joined(const char *file, char **paths, int n, const int *fds,
                      node_tables_entry *e, sample_table *tabs, void **map,
                      size_t *len, scan_totals *tot, int *how)
{
    int stale, again;
    *how = JOINED_FOUND;
    if (node_tables_map(file, e, n, tabs, map, len, &stale))
        return 1;
    const int lock = node_tables_lock(file);
    if (node_tables_map(file, e, n, tabs, map, len, &again)) {
        node_tables_unlock(lock);
        return 1;
    }
    node_tables_writer wr;
    int ok = 0, rc = 0;
    if (node_tables_begin(&wr, file, n) == 0) {
        rc = write_tables(&wr, paths, n, fds, e, tot, &ok);
        if (node_tables_end(&wr, e, n, rc == 0 && ok) == 0 && rc == 0)
            rc = node_tables_map(file, e, n, tabs, map, len, &again);
    }
    node_tables_unlock(lock);
    *how = stale ? JOINED_REWRITTEN : JOINED_WRITTEN;
    return rc < 0 ? rc : rc == 1;
}

/* Past mapped_max() shards: every table from one dataset table file
 * (node_tables.h), found valid or written now (streaming, a window of
 * tables at a time), and mapped once, the catalog owning the mapping. 1
 * if the shards were added so; 0 if no file could be written or mapped
 * (the caller holds the tables in the heap); or an error. */
static int index_joined(catalog *cat, char **paths, int n, const int *fds,
                        scan_totals *tot, logger *lg)
{
    static const char *const said[] = {
        [JOINED_FOUND] = "found",
        [JOINED_WRITTEN] = "written now",
        [JOINED_REWRITTEN] = "written anew: it was stale or damaged"};
    node_tables_entry *e = calloc((size_t)n, sizeof *e);
    sample_table *tabs = calloc((size_t)n, sizeof *tabs);
    char file[PATH_MAX];
    void *map = NULL;
    size_t len = 0;
    int how = JOINED_FOUND;
    int rc = e && tabs ? 0 : PL_ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        struct stat st;
        if (fstat(fds[i], &st) < 0)
            rc = err_set(PL_EIO, "pl_loader_create: %s: %s", paths[i],
                         strerror(errno));
        else
            node_tables_identify(&e[i], paths[i], &st);
    }
    if (rc == 0 && node_tables_path(e, n, file, sizeof file) == 0)
        rc = map_joined(file, paths, n, fds, e, tabs, &map, &len, tot, &how);
    if (rc == 1) {
        if (how == JOINED_FOUND)
            tot->idx_files = n;
        catalog_adopt_map(cat, map, len);
        log_msg(lg, PL_LOG_NOTICE,
                "%d tar shards (over %d): their tables are mapped from one "
                "file, %s (%s)",
                n, mapped_max(), file, said[how]);
        rc = add_joined(cat, paths, n, tabs, tot);
        rc = rc < 0 ? rc : 1;
    }
    free(e);
    free(tabs);
    return rc;
}

int shards_read(catalog *cat, char **paths, int n, logger *lg)
{
    qsort(paths, (size_t)n, sizeof *paths, cmp_path);
    const int reserved = reserve_fds(n, lg);
    if (reserved < 0)
        return reserved;
    int *fds = malloc((size_t)n * sizeof *fds);
    if (!fds)
        return PL_ENOMEM;
    scan_totals tot = {0};
    int rc = open_shards(cat, paths, n, fds);
    if (rc == 0 && n > mapped_max())
        rc = index_joined(cat, paths, n, fds, &tot, lg);
    if (rc == 0) { /* or no dataset table file could be written */
        tot = (scan_totals){0};
        rc = index_shards(cat, paths, n, fds, &tot);
    } else if (rc == 1) {
        rc = 0;
    }
    free(fds);
    if (rc == 0 && tot.stale)
        log_msg(lg, PL_LOG_NOTICE,
                "%d shard index file(s) (.idx) did not match their shard "
                "(changed since, or damaged): those shards were read anew",
                tot.stale);
    if (rc == 0)
        shards_say_unread(&tot.unread, lg);
    if (rc == 0)
        log_msg(lg, PL_LOG_NOTICE,
                "%d tar shard(s): %d indexed from their .idx file, %d read", n,
                tot.idx_files, n - tot.idx_files);
    if (rc == 0)
        shards_say_heap(cat, lg);
    if (rc == 0 && n > 0) {
        const char *slash = strrchr(paths[0], '/');
        char classes[PATH_MAX];
        if (snprintf(classes, sizeof classes, "%.*sclasses.txt",
                     slash ? (int)(slash - paths[0] + 1) : 0,
                     paths[0]) >= (int)sizeof classes)
            classes[0] = '\0';
        rc = shards_add_classes(cat, classes, tot.max_label, lg);
    }
    return rc;
}

void shards_say_heap(const catalog *cat, logger *lg)
{
    if (cat->heap_tables)
        log_msg(lg, PL_LOG_NOTICE,
                "%d of %d shard(s) have no index file mapped (none could be "
                "written beside them or in the cache folder, or over %d "
                "shards, no dataset table file): their sample tables are held "
                "in this process's "
                "memory instead of the page cache, about 96 bytes a sample "
                "(set PINLOAD_INDEX_DIR to a writable folder)",
                cat->heap_tables, cat->nshards, SHARDS_MAPPED_MAX);
}

/* Warnings, not notices: the samples left out and the labels made up
 * change what the caller trains on. */
void shards_say_unread(const unread_members *u, logger *lg)
{
    if (u->count)
        log_msg(lg, PL_LOG_WARNING,
                "%zu image member(s) of kinds not supported (bmp, pgm, ppm, "
                "tif, tiff; JPEG, PNG and WebP are) left out: %s%s",
                u->count, u->names,
                u->count > SHARDS_UNREAD_NAMED ? ", ..." : "");
    if (u->unlabelled)
        log_msg(lg, PL_LOG_WARNING,
                "%lld of %lld sample(s) have no cls member (KEY.cls, a "
                "decimal label), first %s: they are labelled 0 (store "
                "labels as cls members, as pinload-pack does, or name a "
                "JSON member's field with config.label_field)",
                (long long)u->unlabelled, (long long)u->keys,
                u->unlabelled_name);
}

int shards_add_classes(catalog *cat, const char *classes, int32_t max_label,
                       logger *lg)
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
