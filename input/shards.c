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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../catalog/shard_samples.h"
#include "../common/braces.h"
#include "../common/error.h"
#include "../common/file.h"
#include "../index/idx_file.h"
#include "../index/node_tables.h"
#include "../index/tar.h"
#include "readers.h"

#define SCAN_THREADS 8 /* threads indexing shards at create */
#define SCAN_WINDOW 64 /* shards whose indexes live at once */
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

/* ---- indexing the shards, in parallel ---- */

typedef struct scan_job {
    const char *path;
    int fd;
    struct stat st;
    sample_table tab;
    int in_heap; /* the table held in the heap, not read from its file */
    int rc;
    char msg[1024]; /* the error, read in the scanning thread */
    int from_idx, stale;
} scan_job;

typedef struct scan_pool {
    scan_job *jobs;
    int n;
    atomic_int next;
} scan_pool;

/* The shard's table: from its version-2 sidecar; else its members from a
 * version-1 sidecar or from its headers, kept as a version-2 sidecar and
 * read from there (or held in the heap where none can be written). */
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

/* Every shard stays open for the loader's life (workers pread members from
 * it), so n shards need n descriptors beside those open now and a margin,
 * and `tables` more for their index files (each file-backed table keeps
 * its file open: sample_table.h). A soft limit below that (1,024 is
 * common; LAION-sized sets have tens of thousands of shards) is raised
 * towards the hard limit, with a notice. Where the hard limit leaves no
 * room for the index files, [out] *tables_ok is 0: the tables are then
 * read from the one dataset table file. Past the hard limit for the
 * shards alone create fails saying so, before opening anything. */
static int reserve_fds(int n, int tables, logger *lg, int *tables_ok)
{
    struct rlimit rl;
    *tables_ok = 1;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    rlim_t need = (rlim_t)file_open_fds() + (rlim_t)n + (rlim_t)tables + FD_MARGIN;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        *tables_ok = 0;
        need -= (rlim_t)tables;
        if (rl.rlim_cur >= need)
            return 0;
    }
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
 * the allocator's, several bytes a sample. The first `file_backed`
 * shards' tables are read from their index files after create (a
 * descriptor each), the others' held in the heap. */
static int index_shards(catalog *cat, char **paths, int n, const int *fds,
                        int file_backed, scan_totals *tot)
{
    scan_job *jobs = calloc(SCAN_WINDOW, sizeof *jobs);
    if (!jobs)
        return PL_ENOMEM;
    int rc = 0;
    for (int w = 0; w < n && rc == 0; w += SCAN_WINDOW) {
        const int k = n - w < SCAN_WINDOW ? n - w : SCAN_WINDOW;
        for (int i = 0; i < k && rc == 0; i++) {
            jobs[i] = (scan_job){.path = paths[w + i],
                                 .fd = fds[w + i],
                                 .in_heap = w + i >= file_backed};
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
                rc = shard_samples_add(cat, w + i, paths[w + i], &jobs[i].tab,
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

/* The shards' samples from the dataset table file `file`, valid for
 * shards e[0, n): each table read and checked in turn (one in the heap at
 * a time), added, then read from the file (the catalog holds it open). 1
 * if every shard was added; 0 if the file is absent or does not check
 * (*stale: 1 for the latter), the catalog as it was; or an error. */
static int add_joined(catalog *cat, const char *file, char **paths, int n,
                      node_tables_entry *e, scan_totals *tot, int *stale)
{
    const int fd = node_tables_open(file, e, n, stale);
    if (fd < 0)
        return 0;
    const char *name = catalog_adopt_table_file(cat, fd, file);
    if (!name) {
        close(fd);
        return PL_ENOMEM;
    }
    *tot = (scan_totals){0};
    for (int i = 0; i < n; i++) {
        sample_table tab;
        if (node_tables_table(fd, name, &e[i], &tab) < 0) {
            catalog_forget_shards(cat); /* damaged: written anew */
            *tot = (scan_totals){0};
            *stale = 1;
            return 0;
        }
        const int rc = shard_samples_add(cat, i, paths[i], &tab,
                                         &tot->max_label, &tot->unread);
        if (rc < 0)
            return rc;
    }
    return 1;
}

/* How the dataset table file came to be read (index_joined's notice). */
enum { JOINED_FOUND, JOINED_WRITTEN, JOINED_REWRITTEN };

/* The shards' samples from the dataset table file for shards e[0, n):
 * found valid, or written now under its lock (another process may have
 * written it while this one waited). 1 with [out] *how, 0 if it could not
 * be written or read, or an error of the shards'. */
static int read_joined(catalog *cat, const char *file, char **paths, int n,
                       const int *fds, node_tables_entry *e, scan_totals *tot,
                       int *how)
{
    int stale, again;
    *how = JOINED_FOUND;
    int rc = add_joined(cat, file, paths, n, e, tot, &stale);
    if (rc != 0)
        return rc;
    const int lock = node_tables_lock(file);
    rc = add_joined(cat, file, paths, n, e, tot, &again);
    if (rc != 0) {
        node_tables_unlock(lock);
        return rc;
    }
    node_tables_writer wr;
    int ok = 0;
    *tot = (scan_totals){0};
    if (node_tables_begin(&wr, file, n) == 0) {
        rc = write_tables(&wr, paths, n, fds, e, tot, &ok);
        if (node_tables_end(&wr, e, n, rc == 0 && ok) == 0 && rc == 0) {
            const scan_totals written = *tot;
            rc = add_joined(cat, file, paths, n, e, tot, &again);
            tot->idx_files = written.idx_files;
            tot->stale = written.stale;
        }
    }
    node_tables_unlock(lock);
    *how = stale ? JOINED_REWRITTEN : JOINED_WRITTEN;
    return rc;
}

/* Past mapped_max() shards (or where the descriptors of one index file
 * each cannot be had): every table from one dataset table file
 * (node_tables.h), found valid or written now (streaming, a window of
 * tables at a time), and open once, the catalog owning it. 1 if the
 * shards were added so; 0 if no file could be written or read (the
 * caller holds the tables in the heap); or an error. */
static int index_joined(catalog *cat, char **paths, int n, const int *fds,
                        scan_totals *tot, logger *lg)
{
    static const char *const said[] = {
        [JOINED_FOUND] = "found",
        [JOINED_WRITTEN] = "written now",
        [JOINED_REWRITTEN] = "written anew: it was stale or damaged"};
    node_tables_entry *e = calloc((size_t)n, sizeof *e);
    char file[PATH_MAX];
    int how = JOINED_FOUND;
    int rc = e ? 0 : PL_ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        struct stat st;
        if (fstat(fds[i], &st) < 0)
            rc = err_set(PL_EIO, "pl_loader_create: %s: %s", paths[i],
                         strerror(errno));
        else
            node_tables_identify(&e[i], paths[i], &st);
    }
    if (rc == 0 && node_tables_path(e, n, file, sizeof file) == 0)
        rc = read_joined(cat, file, paths, n, fds, e, tot, &how);
    if (rc == 1) {
        if (how == JOINED_FOUND)
            tot->idx_files = n;
        log_msg(lg, PL_LOG_NOTICE,
                "%d tar shards (over %d): their tables are read from one "
                "file, %s (%s)",
                n, mapped_max(), file, said[how]);
    }
    free(e);
    return rc;
}

int shards_read(catalog *cat, char **paths, int n, logger *lg)
{
    qsort(paths, (size_t)n, sizeof *paths, cmp_path);
    const int file_backed = n < mapped_max() ? n : mapped_max();
    int tables_ok;
    const int reserved = reserve_fds(n, file_backed, lg, &tables_ok);
    if (reserved < 0)
        return reserved;
    int *fds = malloc((size_t)n * sizeof *fds);
    if (!fds)
        return PL_ENOMEM;
    scan_totals tot = {0};
    int rc = open_shards(cat, paths, n, fds);
    if (rc == 0 && (n > mapped_max() || !tables_ok))
        rc = index_joined(cat, paths, n, fds, &tot, lg);
    if (rc == 0) { /* or no dataset table file could be written */
        tot = (scan_totals){0};
        rc = index_shards(cat, paths, n, fds, tables_ok ? file_backed : 0,
                          &tot);
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
        shard_samples_say_unread(&tot.unread, lg);
    if (rc == 0)
        log_msg(lg, PL_LOG_NOTICE,
                "%d tar shard(s): %d indexed from their .idx file, %d read", n,
                tot.idx_files, n - tot.idx_files);
    if (rc == 0)
        shard_samples_say_heap(cat, lg);
    if (rc == 0 && n > 0) {
        const char *slash = strrchr(paths[0], '/');
        char classes[PATH_MAX];
        if (snprintf(classes, sizeof classes, "%.*sclasses.txt",
                     slash ? (int)(slash - paths[0] + 1) : 0,
                     paths[0]) >= (int)sizeof classes)
            classes[0] = '\0';
        rc = shard_samples_add_classes(cat, classes, tot.max_label, lg);
    }
    return rc;
}
