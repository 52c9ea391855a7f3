/* The shard reader: tar shards in the WebDataset layout (readers.h says
 * which paths name shards and how members make samples), indexed in
 * parallel from their sidecar indexes or their headers, each kept open for
 * the workers' pread. */

#include <ctype.h>
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

#include "../common/error.h"
#include "../common/file.h"
#include "../common/grow.h"
#include "readers.h"
#include "sidecar.h"
#include "tar.h"

#define MAX_SHARDS (1 << 20)
#define CLS_MAX TAR_SMALL_MAX /* bytes of a .cls member: a decimal label */
#define SCAN_THREADS 8        /* threads indexing shards at create */
#define SCAN_WINDOW 64        /* shards whose indexes live at once */
#define FD_MARGIN 256 /* descriptors left for everything else (CUDA, files) */

static void paths_free(char **p, int n)
{
    for (int i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

static int push(char ***p, int *n, size_t *cap, char *s)
{
    if (!s || *n >= MAX_SHARDS ||
        grow(p, cap, (size_t)*n + 1, sizeof **p, 64) < 0) {
        free(s);
        return PL_ENOMEM;
    }
    (*p)[(*n)++] = s;
    return 0;
}

static char *join(const char *dir, const char *name)
{
    if (name[0] == '/' || strcmp(dir, ".") == 0)
        return strdup(name);
    char *s = malloc(strlen(dir) + strlen(name) + 2);
    if (s)
        sprintf(s, "%s/%s", dir, name);
    return s;
}

/* "train-{000000..000146}.tar": the numbers from a to b, zero-padded to
 * a's width when a starts with 0. Returns 1 with the paths, 0 if `path`
 * has no such pattern, or an error. */
int shards_expand_braces(const char *path, char ***out, int *n)
{
    const char *open = strchr(path, '{');
    const char *dots = open ? strstr(open, "..") : NULL;
    const char *close = dots ? strchr(dots, '}') : NULL;
    if (!close)
        return 0;
    for (const char *c = open + 1; c < dots; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    for (const char *c = dots + 2; c < close; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    if (dots == open + 1 || close == dots + 2)
        return 0;
    const long long a = strtoll(open + 1, NULL, 10);
    const long long b = strtoll(dots + 2, NULL, 10);
    const int width = open[1] == '0' ? (int)(dots - open - 1) : 0;
    if (b < a || b - a >= MAX_SHARDS)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.data: %s: the range "
                       "{%lld..%lld} is empty or over %d shards",
                       path, a, b, MAX_SHARDS);
    size_t cap = 0;
    for (long long v = a; v <= b; v++) {
        char *s = malloc(strlen(path) + 32);
        if (s)
            sprintf(s, "%.*s%0*lld%s", (int)(open - path), path, width, v,
                    close + 1);
        const int rc = push(out, n, &cap, s);
        if (rc < 0)
            return rc;
    }
    return 1;
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
            rc = push(out, n, &cap, join(dir, e->d_name));
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
        const int p = push(out, n, &cap, join(dir, text));
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
        return shards_expand_braces(path, out, n);
    if (S_ISDIR(st.st_mode))
        return folder_of_shards(path, out, n);
    if (tar_is_name(path)) {
        size_t cap = 0;
        const int rc = push(out, n, &cap, strdup(path));
        return rc < 0 ? rc : 1;
    }
    return list_of_shards(path, out, n);
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The key of a member (its path up to the first dot of its last
 * component) has length *klen; its extension starts at *ext ("" if none). */
static void split_key(const char *name, size_t *klen, const char **ext)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    *klen = dot ? (size_t)(dot - name) : strlen(name);
    *ext = dot ? dot + 1 : "";
}

/* A member's extension: one that makes the image of its sample (1), one
 * of the image kinds torchvision reads that pinload does not (-1), or any
 * other (0). */
static int image_ext(const char *ext)
{
    static const char *const read[] = {"jpg", "jpeg", "png", "webp"};
    static const char *const unread[] = {"bmp", "pgm", "ppm", "tif", "tiff"};
    for (size_t i = 0; i < sizeof read / sizeof *read; i++)
        if (strcasecmp(ext, read[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof unread / sizeof *unread; i++)
        if (strcasecmp(ext, unread[i]) == 0)
            return -1;
    return 0;
}

static void unread_note(unread_members *u, const char *path,
                        const tar_member *m)
{
    if (u->count++ >= SHARDS_UNREAD_NAMED)
        return;
    const int n = snprintf(u->names + u->len, sizeof u->names - u->len,
                           "%s%.80s:%.60s", u->len ? ", " : "", path, m->name);
    if (n > 0)
        u->len += (size_t)n < sizeof u->names - u->len
                      ? (size_t)n
                      : sizeof u->names - u->len - 1;
}

/* A .cls member's label: decimal digits, blanks around them. -1 if it is
 * not one (reason says why). */
static int32_t read_label(const tar_member *m, char *reason, size_t cap)
{
    char text[CLS_MAX + 1];
    if (m->size > CLS_MAX) {
        snprintf(reason, cap, "%s: %lld bytes, not a decimal label", m->name,
                 (long long)m->size);
        return -1;
    }
    /* tar_read_small (or the sidecar) holds every member this small */
    const size_t got = (size_t)m->small_len;
    memcpy(text, m->small, got);
    text[got] = '\0';
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    long long v = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*p) && v <= INT32_MAX; p++, digits++)
        v = v * 10 + (*p - '0');
    while (isspace((unsigned char)*p))
        p++;
    if (!digits || *p || v >= (1 << 20)) {
        snprintf(reason, cap,
                 "%s: \"%.*s\" is not a label (a decimal number below "
                 "2^20)",
                 m->name, (int)strcspn(text, "\r\n"), text);
        return -1;
    }
    return (int32_t)v;
}

/* Which of the catalog's extras `ext` is (the first member of a key with
 * it counts), or -1. */
static int extra_of(const catalog *cat, const char *ext,
                    const tar_member *const *extra)
{
    for (int k = 0; k < cat->nextras; k++)
        if (!extra[k] && strcasecmp(ext, cat->extra_names[k]) == 0)
            return k;
    return -1;
}

/* Why a key is bad by construction, into reason: no image, or (when the
 * extras are required) no member of an extra. "" if it is not. */
static void key_reason(const catalog *cat, const tar_member *first,
                       size_t klen, const tar_member *image,
                       const tar_member *const *extra, char *reason, size_t cap)
{
    if (!image) {
        snprintf(reason, cap, "key %.*s has no jpg, jpeg, png or webp member",
                 (int)klen, first->name);
        return;
    }
    for (int k = 0; cat->extras_required && k < cat->nextras; k++)
        if (!extra[k]) {
            snprintf(reason, cap, "key %.*s has no %s member (config.extras)",
                     (int)klen, first->name, cat->extra_names[k]);
            return;
        }
}

/* The samples of one shard: its members grouped by key, in file order. */
int shards_add_indexed(catalog *cat, int s, const char *path,
                       const tar_index *t, int32_t *max_label,
                       unread_members *unread)
{
    const int began = catalog_begin_shard(cat);
    if (began < 0)
        return began;
    for (size_t i = 0; i < t->n;) {
        size_t klen;
        const char *ext;
        split_key(t->m[i].name, &klen, &ext);
        const tar_member *image = NULL, *cls = NULL;
        const tar_member *extra[CATALOG_EXTRAS_MAX] = {NULL};
        size_t j = i;
        for (; j < t->n; j++) {
            size_t kj;
            const char *ej;
            split_key(t->m[j].name, &kj, &ej);
            if (kj != klen || strncmp(t->m[j].name, t->m[i].name, klen) != 0)
                break;
            const int kind = image_ext(ej), k = extra_of(cat, ej, extra);
            if (k >= 0) /* an extra (a cls one still gives the label) */
                extra[k] = &t->m[j];
            if (!cls && strcasecmp(ej, "cls") == 0)
                cls = &t->m[j];
            else if (k < 0 && !image && kind == 1)
                image = &t->m[j];
            else if (k < 0 && kind == -1)
                unread_note(unread, path, &t->m[j]);
        }
        char reason[PATH_MAX + 128] = "";
        int32_t label = 0;
        if (cls && (label = read_label(cls, reason, sizeof reason)) < 0)
            label = 0;
        int code = image ? PL_ECORRUPT : PL_ENOTJPEG;
        if (!reason[0]) {
            key_reason(cat, &t->m[i], klen, image, extra, reason,
                       sizeof reason);
            if (image && reason[0])
                code = PL_ENOEXTRA;
        }
        /* "shard.tar:member": what failures and warnings name */
        const tar_member *named = image ? image : &t->m[i];
        const size_t plen = strlen(path),
                     nlen = image ? strlen(named->name) : klen;
        char *full = malloc(plen + nlen + 2);
        if (!full)
            return PL_ENOMEM;
        const int flen = sprintf(full, "%s:%.*s", path, (int)nlen, named->name);
        int rc;
        if (reason[0]) /* bad by construction: the reason, kept */
            rc = catalog_add_bad(cat, full, (size_t)flen, label, code, reason);
        else
            rc = catalog_add_range(cat, full, (size_t)flen, label, s,
                                   image->offset, image->size);
        free(full);
        if (rc < 0)
            return rc;
        for (int k = 0; !reason[0] && k < cat->nextras; k++)
            if (extra[k])
                catalog_set_extra(cat, k, extra[k]->offset, extra[k]->size);
        /* Every sample's label counts, a bad one's too: under SUBSTITUTE
         * it is delivered (a key without an image keeps its cls label). */
        if (label > *max_label)
            *max_label = label;
        i = j;
    }
    return 0;
}

/* ---- indexing the shards, in parallel ---- */

typedef struct scan_job {
    const char *path;
    int fd;
    struct stat st;
    tar_index t;
    int rc;
    char msg[1024]; /* the error, read in the scanning thread */
    int from_sidecar, stale;
} scan_job;

typedef struct scan_pool {
    scan_job *jobs;
    int n;
    atomic_int next;
} scan_pool;

static void scan_one(scan_job *j)
{
    int stale;
    if (sidecar_find(j->path, &j->st, &j->t, &stale)) {
        j->from_sidecar = 1;
        return;
    }
    j->stale = stale;
    j->rc = tar_scan(j->fd, j->path, &j->t);
    if (j->rc == 0)
        j->rc = tar_read_small(j->fd, j->path, &j->t);
    if (j->rc < 0) {
        snprintf(j->msg, sizeof j->msg, "%s", pl_last_error());
        return;
    }
    sidecar_write(j->path, &j->st, &j->t);
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

/* Open every shard (they stay open for the loader's life) and stat it. */
static int open_shards(catalog *cat, char **paths, int n, scan_job *jobs)
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
        jobs[s] = (scan_job){.path = paths[s], .fd = fd};
        if (fstat(fd, &jobs[s].st) < 0 || !S_ISREG(jobs[s].st.st_mode))
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

/* What indexing the shards met, for create's notices. */
typedef struct scan_totals {
    int32_t max_label;
    int sidecars, stale;
    unread_members unread;
} scan_totals;

/* The shards are indexed SCAN_WINDOW at a time, each window's samples
 * added to the catalog in shard order and its indexes freed before the
 * next is read: the indexes (about 100 bytes a member while they live)
 * never all exist at once, so create's peak memory is the catalog's plus
 * one window's, not twice the catalog's. */
static int index_shards(catalog *cat, char **paths, int n, scan_job *jobs,
                        scan_totals *tot)
{
    int rc = 0;
    for (int w = 0; w < n && rc == 0; w += SCAN_WINDOW) {
        const int k = n - w < SCAN_WINDOW ? n - w : SCAN_WINDOW;
        scan_all(jobs + w, k);
        for (int s = w; s < w + k && rc == 0; s++) {
            if (jobs[s].rc < 0)
                rc = err_set(jobs[s].rc, "pl_loader_create: %s",
                             jobs[s].msg);
            else
                rc = shards_add_indexed(cat, s, paths[s], &jobs[s].t,
                                        &tot->max_label, &tot->unread);
            tot->sidecars += jobs[s].from_sidecar;
            tot->stale += jobs[s].stale && !jobs[s].from_sidecar;
        }
        for (int s = w; s < w + k; s++)
            tar_index_free(&jobs[s].t);
    }
    return rc;
}

int shards_read(catalog *cat, char **paths, int n, logger *lg)
{
    qsort(paths, (size_t)n, sizeof *paths, cmp_path);
    const int reserved = reserve_fds(n, lg);
    if (reserved < 0)
        return reserved;
    scan_job *jobs = calloc((size_t)n, sizeof *jobs);
    if (!jobs)
        return PL_ENOMEM;
    scan_totals tot = {0};
    int rc = open_shards(cat, paths, n, jobs);
    if (rc == 0)
        rc = index_shards(cat, paths, n, jobs, &tot);
    for (int s = 0; s < n; s++)
        tar_index_free(&jobs[s].t);
    free(jobs);
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
                tot.sidecars, n - tot.sidecars);
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

void shards_say_unread(const unread_members *u, logger *lg)
{
    if (u->count)
        log_msg(lg, PL_LOG_NOTICE,
                "%zu image member(s) of kinds not supported (bmp, pgm, ppm, "
                "tif, tiff; JPEG, PNG and WebP are) left out: %s%s",
                u->count, u->names,
                u->count > SHARDS_UNREAD_NAMED ? ", ..." : "");
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
