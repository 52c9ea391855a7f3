/* The node cache of remote shards (cache.h): the folder and its
 * names, the file locks, downloads through NAME.part renamed into place,
 * LRU eviction under the limit, each shard's state for the threads that
 * read it, and the thread that fetches the shards ahead of the workers. */
#include "cache.h"

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../common/bytes.h"
#include "../common/clock.h"
#include "../common/error.h"
#include "../common/file.h"
#include "../common/grow.h"
#include "../index/idx_file.h"
#include "cache_dir.h"

#define FAILED_RETRY_NS (60 * 1000000000LL) /* a failed shard: asked again */

enum { SH_NONE, SH_FETCHING, SH_READY, SH_FAILED };

struct remote_cache {
    char *dir;     /* checked (cache_dir.h), without links */
    int shared;    /* a group's folder: the files made group-writable */
    int64_t limit; /* bytes; 0: none */
    transfers *xfer;
    atomic_int *stop;
    logger *lg;
    atomic_int warned_full;
    cache_shard *s;
    int n;
    pthread_t ahead;
    int ahead_started;
    atomic_int open; /* shards open (SH_READY) now */
    /* The shard order (cache_stream): the sequence, under smu, copied by
     * the fetch-ahead thread at each new gen; reached, the furthest place
     * in it a read has got to (-1: none yet). */
    int streaming, span, hold;
    pthread_mutex_t smu;
    pthread_cond_t scv;
    int32_t *seq;
    int nseq;
    uint64_t gen;
    atomic_int reached;
};

/* ---- names ---- */

static uint64_t fnv(const char *s)
{
    return fnv1a(FNV_SEED, s, strlen(s));
}

/* The cache's name for the object `key` names (transfer_cache_key's): a
 * hash of the key, then the last component of the URL as shown (`shown`:
 * the shard's own name, whatever endpoint the key adds) made safe for a
 * file name. */
static char *cache_name(const char *dir, const char *key, const char *shown)
{
    const char *base = strrchr(shown, '/');
    base = base ? base + 1 : shown;
    char safe[96];
    size_t k = 0;
    for (; *base && k < sizeof safe - 1; base++)
        safe[k++] = isalnum((unsigned char)*base) || *base == '.' ||
                            *base == '-' || *base == '_'
                        ? *base
                        : '_';
    safe[k] = '\0';
    char *p = malloc(strlen(dir) + sizeof safe + 24);
    if (p)
        sprintf(p, "%s/%016llx-%s", dir, (unsigned long long)fnv(key), safe);
    return p;
}

/* path + suffix, allocated; NULL without memory. */
static char *with_suffix(const char *path, const char *suffix)
{
    char *p = malloc(strlen(path) + strlen(suffix) + 1);
    if (p)
        sprintf(p, "%s%s", path, suffix);
    return p;
}

/* The folder the user named ($PINLOAD_CACHE_DIR), else the default one,
 * into buf[cap]: 1 if named, 0 if not. */
static int default_cache_dir(char *buf, size_t cap)
{
    const char *env = getenv("PINLOAD_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env)
        snprintf(buf, cap, "%s", env);
    else if (xdg && *xdg)
        snprintf(buf, cap, "%s/pinload/shards", xdg);
    else if (home && *home)
        snprintf(buf, cap, "%s/.cache/pinload/shards", home);
    else /* a name another user may have taken first: checked */
        snprintf(buf, cap, "/tmp/pinload-%ld/shards", (long)geteuid());
    return env && *env;
}

/* The mode of the files the cache makes: the user's alone (in a folder
 * that is too), or the group's in a group's shared folder. */
static mode_t file_mode(const remote_cache *c)
{
    return c->shared ? 0660 : 0644;
}

/* A file the cache made, in a shared folder: the group may write it
 * whatever the umask (a member resumes another's download, takes its
 * locks). Not ours (another member's): left as it is. */
static void share_file(const remote_cache *c, int fd)
{
    struct stat st;
    if (c->shared && fstat(fd, &st) == 0 && st.st_uid == geteuid())
        (void)fchmod(fd, 0660);
}

/* A file of the cache open, never through a symbolic link (O_NOFOLLOW),
 * nor blocking, and only if it is a regular file: fd, or -1 with errno
 * (ELOOP for a link, EINVAL for a FIFO, a folder...). */
static int open_regular(int dirfd, const char *path, int flags, mode_t mode)
{
    const int fd =
        openat(dirfd, path,
               flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, mode);
    if (fd < 0)
        return -1;
    struct stat st;
    const int known = fstat(fd, &st) == 0;
    if (known && S_ISREG(st.st_mode))
        return fd;
    const int e = known ? EINVAL : errno;
    close(fd);
    errno = e;
    return -1;
}

const char *cache_dir(const remote_cache *c)
{
    return c->dir;
}

int64_t cache_limit(const remote_cache *c)
{
    return c->limit;
}

cache_shard *cache_shard_at(remote_cache *c, int i)
{
    assert(i >= 0 && i < c->n);
    return &c->s[i];
}

/* A download's file (NAME.part, or a small file's NAME.part.PID) open
 * for reading and writing, never through a link, by the one thread that
 * may write it (the shard's lock, or the process's own name): a regular
 * file of one link is resumed (a download cut short); anything else there
 * (a symbolic link, a FIFO, a file with another link, another member's
 * file we may not write) is removed, not followed, with a warning, and a
 * new file made with O_EXCL, so that a download writes nothing outside
 * the cache. fd, or -1 with errno. */
static int open_part(const remote_cache *c, const char *part)
{
    const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
    for (int tries = 0; tries < 3; tries++) {
        int fd = open(part, flags);
        if (fd < 0 && errno == ENOENT)
            fd = open(part, flags | O_CREAT | O_EXCL, file_mode(c));
        if (fd < 0 && errno == EEXIST)
            continue; /* made meanwhile: opened as it is next time */
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                st.st_nlink == 1) {
                share_file(c, fd);
                return fd;
            }
            close(fd);
        } else if (errno != ELOOP && errno != EACCES) {
            return -1;
        }
        const int removed = unlink(part) == 0;
        if (!removed && errno != ENOENT)
            return -1;
        if (removed)
            log_msg(c->lg, PL_LOG_WARNING,
                    "the cache's %s was not a file it may use (a symbolic "
                    "link, a FIFO, a file with another link or that this "
                    "user may not write): removed, not followed",
                    part);
    }
    errno = EEXIST;
    return -1;
}

/* ---- the cache's life ---- */

/* Shard sh of c, for url: its names, its state (none yet). -1 without
 * memory. */
static int shard_init(remote_cache *c, cache_shard *sh, const char *url)
{
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->cv, NULL);
    sh->cache = c;
    sh->fd = -1;
    sh->size = -1;
    atomic_init(&sh->seq_pos, -1);
    char shown[2048], key[4200];
    transfer_display(url, shown, sizeof shown);
    transfer_cache_key(c->xfer, url, key, sizeof key);
    sh->url = strdup(url);
    sh->name = strdup(shown);
    sh->path = cache_name(c->dir, key, shown);
    return sh->url && sh->name && sh->path ? 0 : -1;
}

int cache_new(const char *dir, int64_t limit, char **urls, int n,
              transfers *xfer, atomic_int *stop, logger *lg, remote_cache **out)
{
    *out = NULL;
    char given[PATH_MAX], real[PATH_MAX];
    int named = 1;
    if (dir && *dir)
        snprintf(given, sizeof given, "%s", dir);
    else
        named = default_cache_dir(given, sizeof given);
    int shared = 0;
    const int rc = cache_dir_prepare(given, named, real, sizeof real, &shared);
    if (rc < 0)
        return rc;
    remote_cache *c = calloc(1, sizeof *c);
    if (!c)
        return PL_ENOMEM;
    pthread_mutex_init(&c->smu, NULL);
    pthread_cond_init(&c->scv, NULL);
    atomic_init(&c->open, 0);
    atomic_init(&c->reached, -1);
    c->limit = limit;
    c->xfer = xfer;
    c->stop = stop;
    c->lg = lg;
    c->shared = shared;
    c->dir = strdup(real);
    c->s = calloc((size_t)n, sizeof *c->s);
    if (!c->dir || !c->s) {
        cache_free(c);
        return PL_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        c->n++; /* its mutex made: cache_free destroys it */
        if (shard_init(c, &c->s[i], urls[i]) < 0) {
            cache_free(c);
            return PL_ENOMEM;
        }
    }
    *out = c;
    return 0;
}

void cache_free(remote_cache *c)
{
    if (!c)
        return;
    assert(!c->ahead_started || atomic_load(c->stop));
    if (c->ahead_started)
        pthread_join(c->ahead, NULL);
    for (int i = 0; i < c->n; i++) {
        cache_shard *sh = &c->s[i];
        if (sh->fd >= 0)
            close(sh->fd);
        pthread_mutex_destroy(&sh->mu);
        pthread_cond_destroy(&sh->cv);
        free(sh->url);
        free(sh->name);
        free(sh->path);
    }
    free(c->s);
    free(c->seq);
    free(c->dir);
    pthread_mutex_destroy(&c->smu);
    pthread_cond_destroy(&c->scv);
    free(c);
}

/* ---- locks ---- */

/* PATH.lock, locked exclusively: waited for in 20 ms steps, so that a
 * closing loader does not wait for another process's download. -1 (errno
 * ECANCELED when closing). */
static int lock_file(const remote_cache *c, const char *path)
{
    char *lk = with_suffix(path, ".lock");
    if (!lk)
        return -1;
    /* Opened for writing, which flock needs over NFS. */
    const int fd = open_regular(AT_FDCWD, lk, O_RDWR | O_CREAT, file_mode(c));
    free(lk);
    if (fd < 0)
        return -1;
    share_file(c, fd);
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) ||
            transfer_stopping(c->xfer)) {
            const int err = errno == EWOULDBLOCK ? ECANCELED : errno;
            close(fd);
            errno = err;
            return -1;
        }
        const struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return fd;
}

/* The cached shard at `path`, open and locked shared, if it is there
 * whole (`size` bytes; -1: any); else -1. Its atime says it was used. */
static int open_cached(const char *path, int64_t size)
{
    const int fd = open_regular(AT_FDCWD, path, O_RDONLY, 0);
    if (fd < 0)
        return -1;
    struct stat st;
    if (flock(fd, LOCK_SH) != 0 || fstat(fd, &st) != 0 || st.st_nlink == 0 ||
        (size >= 0 && st.st_size != size)) {
        close(fd);
        return -1;
    }
    const struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    futimens(fd, t);
    return fd;
}

/* ---- eviction ---- */

typedef struct entry {
    char *name;
    int64_t size;
    int64_t used; /* atime, ns */
} entry;

static int by_use(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->used < y->used ? -1 : x->used > y->used;
}

static int ends_with(const char *name, const char *end)
{
    const size_t n = strlen(name), k = strlen(end);
    return name[0] != '.' && n > k && strcmp(name + n - k, end) == 0;
}

/* The size of the shard whose index is the file `idx` (under dirfd d),
 * from its header; 0 if there is none. */
static int64_t size_from_index(int d, const char *idx)
{
    const int fd = open_regular(d, idx, O_RDONLY, 0);
    if (fd < 0)
        return 0;
    unsigned char b[16];
    int64_t v = 0;
    if (pread(fd, b, sizeof b, 0) == (ssize_t)sizeof b)
        for (int i = 0; i < 8; i++)
            v |= (int64_t)b[8 + i] << (8 * i);
    close(fd);
    return v > 0 ? v : 0;
}

/* The cached shards of folder d in [out] *e (the caller frees each name
 * and the array), least recently used first; their count. [out] *total:
 * the bytes they hold, and the downloads under way at their whole size
 * (from their index). */
static size_t list_shards(DIR *d, entry **e, int64_t *total)
{
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        const int part = ends_with(de->d_name, ".tar.part");
        if ((!part && !ends_with(de->d_name, ".tar")) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (part) { /* a download under way: what it will be */
            char idx[NAME_MAX + 8];
            snprintf(idx, sizeof idx, "%.*s.idx", (int)(strlen(de->d_name) - 5),
                     de->d_name);
            const int64_t whole = size_from_index(dirfd(d), idx);
            *total += whole > st.st_size ? whole : st.st_size;
            continue;
        }
        *total += st.st_size;
        if (grow(e, &cap, n + 1, sizeof **e, 64) < 0)
            break;
        (*e)[n].name = strdup(de->d_name);
        (*e)[n].size = st.st_size;
        (*e)[n].used =
            (int64_t)st.st_atim.tv_sec * 1000000000 + st.st_atim.tv_nsec;
        if ((*e)[n].name)
            n++;
    }
    if (n > 0)
        qsort(*e, n, sizeof **e, by_use);
    return n;
}

/* Evict least recently used shards no rank holds until `need` more bytes
 * fit under the limit, counting the downloads under way at their whole
 * size. 0, or -1 if they cannot be made to fit. The caller holds the
 * cache's eviction lock, and creates its own .part before it lets go, so
 * that two fetchers never count the same room. */
static int make_room(const remote_cache *c, int64_t need)
{
    if (c->limit <= 0)
        return 0;
    if (need > c->limit)
        return -1;
    DIR *d = opendir(c->dir);
    if (!d)
        return -1;
    entry *e = NULL;
    int64_t total = 0;
    const size_t n = list_shards(d, &e, &total);
    for (size_t i = 0; i < n && total + need > c->limit; i++) {
        const int fd = open_regular(dirfd(d), e[i].name, O_RDONLY, 0);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            unlinkat(dirfd(d), e[i].name, 0) == 0)
            total -= e[i].size;
        close(fd); /* a rank holding it shared kept it */
    }
    for (size_t i = 0; i < n; i++)
        free(e[i].name);
    free(e);
    closedir(d);
    return total + need <= c->limit ? 0 : -1;
}

/* Room for the shard, and its .part made, under the cache's eviction lock
 * (dir/.evict.lock). 0, or -1 if it cannot be had. */
static int reserve(cache_shard *sh)
{
    const remote_cache *c = sh->cache;
    if (c->limit <= 0)
        return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.evict", c->dir);
    const int ev = lock_file(c, path);
    if (ev < 0)
        return -1;
    const int rc = make_room(c, sh->size);
    if (rc == 0) {
        char *part = with_suffix(sh->path, ".part");
        const int fd = part ? open_part(c, part) : -1;
        if (fd >= 0)
            close(fd);
        free(part);
    }
    close(ev);
    return rc;
}

/* ---- downloads ---- */

/* A whole download `part` renamed to `path`. 0, or PL_EIO with
 * "URL: why" in err[cap]. */
static int rename_in(const char *url, const char *part, const char *path,
                     char *err, size_t cap)
{
    if (rename(part, path) == 0)
        return 0;
    const int e = errno;
    char shown[1024];
    transfer_display(url, shown, sizeof shown);
    snprintf(err, cap, "%s: rename into the cache: %s", shown, strerror(e));
    return PL_EIO;
}

/* url fetched into the file `part` of the cache, opened with open_part:
 * transfer_fetch's answer, or PL_EIO naming the file. A download the
 * disk has no room for is removed (TRANSFER_NO_ROOM), err naming the
 * cache's folder and what its disk has free. */
static int download_into(const remote_cache *c, const char *url,
                         const char *part, int64_t expect, char *err,
                         size_t cap)
{
    const int fd = open_part(c, part);
    if (fd < 0) {
        snprintf(err, cap, "%s: %s", part, strerror(errno));
        return PL_EIO;
    }
    const int rc = transfer_fetch(c->xfer, url, fd, expect, err, cap);
    close(fd);
    if (rc == TRANSFER_NO_ROOM) {
        unlink(part); /* what it holds takes the room others need */
        struct statvfs v;
        const long long room = statvfs(c->dir, &v) == 0
                                   ? (long long)(v.f_bavail * v.f_frsize)
                                   : -1LL;
        const size_t k = strlen(err);
        if (expect >= 0)
            snprintf(err + k, cap - k,
                     "; the cache's disk is full: %s has %lld bytes free, "
                     "the shard needs %lld",
                     c->dir, room, (long long)expect);
        else
            snprintf(err + k, cap - k,
                     "; the cache's disk is full: %s has %lld bytes free",
                     c->dir, room);
    }
    return rc;
}

/* With the shard's lock held: the shard fetched into its cache file
 * (through NAME.part, renamed once whole). 0; 1 if the cache's disk has
 * no room for it (err says so; nothing left behind), to be read member by
 * member; or an error in err (a pipe: shard's want of room too: it has
 * no members to read alone). */
static int fetch_locked(cache_shard *sh, char *err, size_t cap)
{
    char *part = with_suffix(sh->path, ".part");
    if (!part)
        return PL_ENOMEM;
    int rc = download_into(sh->cache, sh->url, part, sh->size, err, cap);
    if (rc == TRANSFER_ABSENT)
        rc = PL_EIO; /* a shard its index names: missing is an error */
    if (rc == TRANSFER_NO_ROOM)
        rc = transfer_is_command(sh->url) ? PL_EIO : 1;
    if (rc == 0)
        rc = rename_in(sh->url, part, sh->path, err, cap);
    free(part);
    return rc;
}

/* The shard's lock file in the cache, held exclusively: its descriptor,
 * or -1 with err saying why. */
static int lock_shard(cache_shard *sh, char *err, size_t cap)
{
    const int lk = lock_file(sh->cache, sh->path);
    if (lk < 0)
        snprintf(err, cap, "%s: cannot lock it in the cache %s: %s", sh->name,
                 sh->cache->dir,
                 errno == ELOOP || errno == EINVAL
                     ? "its .lock file is a symbolic link or not a plain "
                       "file, which pinload never follows: remove it"
                 : errno == ECANCELED
                     ? "the wait for another process's download of it was "
                       "cut (the loader closes, or create's deadline, "
                       "config.remote_create_timeout_ms, passed)"
                     : strerror(errno));
    return lk;
}

/* The shard, whole in the node's cache: [out] *fd open and locked shared.
 * Whoever takes the lock first fetches it; the others find it there. 1 if
 * the cache has no room for it: under its limit (err ""), or on its disk
 * (err says so). */
static int cache_get(cache_shard *sh, int *fd, char *err, size_t cap)
{
    if ((*fd = open_cached(sh->path, sh->size)) >= 0)
        return 0;
    const int lk = lock_shard(sh, err, cap);
    if (lk < 0)
        return PL_EIO;
    int rc = 0;
    err[0] = '\0';
    if ((*fd = open_cached(sh->path, sh->size)) < 0) {
        if (reserve(sh) < 0) {
            rc = 1; /* no room: read it member by member */
        } else if ((rc = fetch_locked(sh, err, cap)) == 0 &&
                   (*fd = open_cached(sh->path, sh->size)) < 0) {
            snprintf(err, cap, "%s: evicted from the cache as it came",
                     sh->name);
            rc = PL_EIO;
        }
    }
    close(lk);
    return rc;
}

/* A small file at url into `path` (tmp + rename), unless it is there
 * already. 0; 1 if the store has none; or an error naming the URL. */
static int fetch_small(const remote_cache *c, const char *url, const char *path,
                       char *err, size_t cap)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
        return 0;
    char part[PATH_MAX + 32];
    snprintf(part, sizeof part, "%s.part.%ld", path, (long)getpid());
    unlink(part);
    int rc = download_into(c, url, part, -1, err, cap);
    if (rc == 0)
        rc = rename_in(url, part, path, err, cap);
    if (rc != 0)
        unlink(part);
    return rc == TRANSFER_ABSENT ? 1 : rc == TRANSFER_NO_ROOM ? PL_EIO : rc;
}

int cache_fetch_file(remote_cache *c, const char *url, char *out, size_t cap,
                     char *err, size_t ecap)
{
    out[0] = '\0';
    char key[4200], shown[2048];
    transfer_cache_key(c->xfer, url, key, sizeof key);
    transfer_display(url, shown, sizeof shown);
    char *path = cache_name(c->dir, key, shown);
    if (!path)
        return PL_ENOMEM;
    const int rc = fetch_small(c, url, path, err, ecap);
    if (rc == 0)
        snprintf(out, cap, "%s", path);
    free(path);
    return rc;
}

/* ---- indexes, at create ---- */

/* With the shard's lock held: URL.idx fetched to idx and read. 1 if read,
 * 0 if the store has none, or an error. */
static int index_fetch_locked(cache_shard *sh, const char *idx, tar_index *t,
                              char *err, size_t cap)
{
    unlink(idx); /* damaged: fetched anew */
    char *url = with_suffix(sh->url, ".idx");
    if (!url)
        return PL_ENOMEM;
    int rc = fetch_small(sh->cache, url, idx, err, cap);
    free(url);
    if (rc == 0 && !idx_file_read_any(idx, t, &sh->size)) {
        snprintf(err, cap, "%s.idx: not a pinload shard index", sh->name);
        rc = PL_ECORRUPT;
    } else if (rc == 0) {
        rc = 1;
    } else if (rc == 1) {
        rc = 0;
    }
    return rc;
}

int cache_index(cache_shard *sh, tar_index *t, char *err, size_t cap)
{
    char idx[PATH_MAX + 16];
    snprintf(idx, sizeof idx, "%s.idx", sh->path);
    if (idx_file_read_any(idx, t, &sh->size))
        return 1;
    if (transfer_is_command(sh->url))
        return 0;
    const int lk = lock_shard(sh, err, cap);
    if (lk < 0)
        return PL_EIO;
    int rc = 1;
    if (!idx_file_read_any(idx, t, &sh->size))
        rc = index_fetch_locked(sh, idx, t, err, cap);
    close(lk);
    return rc;
}

int cache_index_whole(cache_shard *sh, tar_index *t, char *err, size_t cap)
{
    int fd = -1;
    int rc = cache_get(sh, &fd, err, cap);
    if (rc == 1 && err[0]) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, cap,
                 "%s has no index (.idx), and fetching it whole to index it "
                 "failed: %s",
                 sh->name, why);
        return PL_EIO;
    }
    if (rc == 1) {
        snprintf(err, cap,
                 "%s has no index (.idx) and the cache %s has no room to "
                 "fetch it whole and index it (cache_limit)",
                 sh->name, sh->cache->dir);
        return PL_EIO;
    }
    if (rc < 0)
        return rc;
    struct stat st;
    rc = fstat(fd, &st) == 0 ? 0 : PL_EIO;
    if (rc == 0)
        rc = tar_scan(fd, sh->name, t);
    if (rc == 0)
        rc = tar_read_small(fd, sh->name, t);
    if (rc < 0) {
        snprintf(err, cap, "%s", pl_last_error());
        close(fd);
        return rc;
    }
    char idx[PATH_MAX + 16];
    snprintf(idx, sizeof idx, "%s.idx", sh->path);
    idx_file_write_at(idx, &st, t);
    sh->size = st.st_size;
    pthread_mutex_lock(&sh->mu);
    sh->fd = fd;
    sh->state = SH_READY;
    atomic_fetch_add(&sh->cache->open, 1);
    pthread_mutex_unlock(&sh->mu);
    return 0;
}

/* ---- the readers' side ---- */

/* How shard_ready is asked: for a read (which then holds the descriptor
 * until shard_done), and whether a want of room is only this time's (the
 * stream's fetch-ahead, which tries again when a shard is let go). */
enum { READY_USE = 1, READY_TRY = 2 };

/* The state a fetch left: ready with fd, no room (read member by member,
 * unless READY_TRY), or failed with err (kept for FAILED_RETRY_NS); the
 * waiters woken. */
static void fetched(cache_shard *sh, int rc, int fd, const char *err, int how)
{
    pthread_mutex_lock(&sh->mu);
    if (rc == 0) {
        sh->fd = fd;
        sh->state = SH_READY;
        sh->readers += how & READY_USE;
        atomic_fetch_add(&sh->cache->open, 1);
    } else if (rc == 1) {
        /* The stream lets go of shards as the reads move: tried again. */
        sh->no_room = !(how & READY_TRY) && !sh->cache->streaming;
        sh->state = SH_NONE;
    } else {
        sh->state = SH_FAILED;
        sh->err_code = rc;
        sh->failed_ns = clock_now_ns();
        snprintf(sh->err, sizeof sh->err, "%s", err);
    }
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* The shard ready to read: fetched (once per loader; the cache makes it
 * once per node), or its error, kept for FAILED_RETRY_NS. 1: read it
 * member by member instead. With READY_USE the caller holds fd until
 * shard_done. */
static int shard_ready(cache_shard *sh, int *fd, char *reason, size_t cap,
                       int how)
{
    pthread_mutex_lock(&sh->mu);
    while (sh->state == SH_FETCHING)
        pthread_cond_wait(&sh->cv, &sh->mu);
    if (sh->state == SH_FAILED &&
        clock_now_ns() - sh->failed_ns < FAILED_RETRY_NS) {
        snprintf(reason, cap, "%s", sh->err);
        const int code = sh->err_code;
        pthread_mutex_unlock(&sh->mu);
        return code;
    }
    if (sh->state == SH_READY || sh->no_room) {
        *fd = sh->fd;
        const int rc = sh->state == SH_READY ? 0 : 1;
        if (rc == 0)
            sh->readers += how & READY_USE;
        pthread_mutex_unlock(&sh->mu);
        return rc;
    }
    sh->state = SH_FETCHING;
    pthread_mutex_unlock(&sh->mu);
    char err[512] = "";
    int got = -1;
    const int rc = cache_get(sh, &got, err, sizeof err);
    fetched(sh, rc, got, err, how);
    remote_cache *c = sh->cache;
    if (rc == 1 && !(how & READY_TRY) &&
        atomic_exchange(&c->warned_full, 1) == 0) {
        if (err[0])
            log_msg(c->lg, PL_LOG_WARNING,
                    "%s: %s and any other shard that does not fit are read "
                    "member by member",
                    err, sh->name);
        else
            log_msg(c->lg, PL_LOG_WARNING,
                    "the cache %s is full of shards other ranks read: %s and "
                    "any other that does not fit are read member by member",
                    c->dir, sh->name);
    }
    if (rc < 0)
        snprintf(reason, cap, "%s", err);
    *fd = got;
    return rc;
}

/* The descriptor of a copy already open (create fetched the shard to
 * index it), held until shard_done, or -1. */
static int shard_open_fd(cache_shard *sh)
{
    pthread_mutex_lock(&sh->mu);
    const int fd = sh->state == SH_READY ? sh->fd : -1;
    if (fd >= 0)
        sh->readers++;
    pthread_mutex_unlock(&sh->mu);
    return fd;
}

/* Under sh->mu: the open copy closed (its shared lock let go, so that
 * eviction may take it); the next read opens it again. */
static void shard_close_locked(cache_shard *sh)
{
    assert(sh->state == SH_READY && sh->readers == 0);
    close(sh->fd);
    sh->fd = -1;
    sh->state = SH_NONE;
    sh->release = 0;
    atomic_fetch_sub(&sh->cache->open, 1);
}

/* A read is done with the descriptor shard_ready or shard_open_fd gave. */
static void shard_done(cache_shard *sh)
{
    pthread_mutex_lock(&sh->mu);
    assert(sh->readers > 0);
    if (--sh->readers == 0 && sh->release)
        shard_close_locked(sh);
    pthread_mutex_unlock(&sh->mu);
}

/* The stream has passed the shard: closed now, or by its last reader. */
static void shard_release(cache_shard *sh)
{
    pthread_mutex_lock(&sh->mu);
    if (sh->state == SH_READY) {
        if (sh->readers > 0)
            sh->release = 1;
        else
            shard_close_locked(sh);
    }
    pthread_mutex_unlock(&sh->mu);
}

/* Whether the shard's first place in the sequence is in [base, end). */
static int in_band(cache_shard *sh, int base, int end)
{
    const int p = atomic_load(&sh->seq_pos);
    return p >= base && p < end;
}

/* A new sequence: every open shard outside its first band (the previous
 * sequence's, and any a late read opened again) let go; a read of the
 * previous one still under way keeps its shard until it is done, and one
 * that comes later opens it again. O(shards), once per sequence. */
static void release_outside(remote_cache *c, int base, int end)
{
    for (int i = 0; i < c->n; i++)
        if (!in_band(&c->s[i], base, end))
            shard_release(&c->s[i]);
}

/* Where the stream's band starts when the reads have reached place
 * `reached` of the sequence (-1: none yet): the band is [base, base +
 * hold), the span behind `reached` included. */
static int band_base(const remote_cache *c, int reached)
{
    return reached > c->span ? reached - c->span : 0;
}

/* A read of the shard, done: if it lies further in the stream than any
 * read before, and within the band (a read the previous sequence still
 * makes may name a shard far into this one, which says nothing of where
 * the reads are), the band moves on: once per shard, not per read. A
 * shard named twice in a sequence counts at its first place. */
static void note_reached(remote_cache *c, cache_shard *sh)
{
    const int p = atomic_load(&sh->seq_pos);
    const int r = atomic_load(&c->reached);
    if (p < band_base(c, r)) {
        /* A late read behind the band, or of a shard of no sequence (the
         * previous epoch's last ones): let go again at once. */
        shard_release(sh);
        return;
    }
    if (p <= r || p >= band_base(c, r) + c->hold)
        return;
    pthread_mutex_lock(&c->smu);
    const int was = atomic_load(&c->reached);
    if (p > was) {
        /* The shards the band leaves behind are let go here, by the read
         * that moves it, so that the next shard finds their room. */
        const int base = band_base(c, p), end = base + c->hold;
        for (int k = band_base(c, was); k < base && k < c->nseq; k++)
            if (!in_band(&c->s[c->seq[k]], base, end))
                shard_release(&c->s[c->seq[k]]);
        atomic_store(&c->reached, p);
        pthread_cond_broadcast(&c->scv);
    }
    pthread_mutex_unlock(&c->smu);
}

int cache_read(cache_shard *sh, int fetch, int64_t off, int64_t size, void *dst,
               char *reason, size_t cap)
{
    int fd = -1;
    int rc;
    if (!fetch) {
        fd = shard_open_fd(sh);
        rc = fd >= 0 ? 0 : 1;
    } else {
        rc = shard_ready(sh, &fd, reason, cap, READY_USE);
    }
    if (rc != 0)
        return rc;
    const ssize_t got = file_pread_full(fd, dst, (size_t)size, (off_t)off);
    if (got != size) {
        snprintf(reason, cap, "%s: the cached copy %s %s", sh->name, sh->path,
                 got < 0 ? strerror(errno) : "ends early");
        rc = PL_EIO;
    }
    shard_done(sh);
    if (rc == 0 && sh->cache->streaming)
        note_reached(sh->cache, sh);
    return rc;
}

/* The thread that fetches the shards ahead of the workers, in order. */
static void *fetch_ahead(void *arg)
{
    remote_cache *c = arg;
    for (int i = 0; i < c->n && !atomic_load(c->stop); i++) {
        int fd;
        char why[512];
        shard_ready(&c->s[i], &fd, why, sizeof why, 0);
    }
    return NULL;
}

/* ---- the stream (PL_ORDER_SHARDS) ---- */

/* The band's shards not open yet, fetched in order while fewer than hold
 * are open. 1 if the sequence or the reads moved on meanwhile (the caller
 * looks again at once), else 0. */
static int fetch_band(remote_cache *c, const int32_t *seq, int base, int end,
                      uint64_t gen, int reached)
{
    for (int k = base; k < end && !atomic_load(c->stop); k++) {
        cache_shard *sh = &c->s[seq[k]];
        pthread_mutex_lock(&sh->mu);
        const int ready = sh->state == SH_READY;
        pthread_mutex_unlock(&sh->mu);
        if (ready)
            continue;
        if (atomic_load(&c->open) >= c->hold)
            return 0;
        int fd;
        char why[512];
        if (shard_ready(sh, &fd, why, sizeof why, READY_TRY) == 1)
            return 0; /* no room yet: the reads free some as they go */
        pthread_mutex_lock(&c->smu);
        const int moved = c->gen != gen || atomic_load(&c->reached) != reached;
        pthread_mutex_unlock(&c->smu);
        if (moved)
            return 1;
    }
    return 0;
}

/* Until the sequence or the reads move on, a shard is let go, or the
 * cache stops (checked every 50 ms: the stop flag has no condition). */
static void stream_wait(remote_cache *c, uint64_t gen, int reached)
{
    pthread_mutex_lock(&c->smu);
    if (!atomic_load(c->stop) && c->gen == gen &&
        atomic_load(&c->reached) == reached) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->scv, &c->smu, &ts);
    }
    pthread_mutex_unlock(&c->smu);
}

/* The stream's fetch-ahead thread: the band of the sequence around the
 * furthest shard read, [reached - span, reached - span + hold), open (the
 * reads let go of the shards behind it as they pass them). */
static void *stream_ahead(void *arg)
{
    remote_cache *c = arg;
    int32_t *seq = malloc(((size_t)c->n + 1) * sizeof *seq);
    int n = 0;
    uint64_t gen = 0;
    while (seq && !atomic_load(c->stop)) {
        pthread_mutex_lock(&c->smu);
        if (c->gen != gen) {
            gen = c->gen;
            n = c->nseq;
            memcpy(seq, c->seq, (size_t)n * sizeof *seq);
        }
        const int reached = atomic_load(&c->reached);
        pthread_mutex_unlock(&c->smu);
        const int base = band_base(c, reached);
        const int end = base + c->hold < n ? base + c->hold : n;
        if (!fetch_band(c, seq, base, end, gen, reached))
            stream_wait(c, gen, reached);
    }
    free(seq);
    return NULL;
}

int cache_stream(remote_cache *c, int span, int hold)
{
    assert(!c->ahead_started && span >= 1 && hold >= span);
    c->seq = malloc(((size_t)c->n + 1) * sizeof *c->seq);
    if (!c->seq)
        return -1;
    c->streaming = 1;
    c->span = span;
    c->hold = hold;
    return 0;
}

void cache_stream_order(remote_cache *c, const int32_t *seq, int n)
{
    assert(c->streaming && n <= c->n + 1);
    pthread_mutex_lock(&c->smu);
    for (int k = 0; k < c->nseq; k++)
        atomic_store(&c->s[c->seq[k]].seq_pos, -1);
    memcpy(c->seq, seq, (size_t)n * sizeof *seq);
    c->nseq = n;
    for (int k = n - 1; k >= 0; k--) /* a shard named twice: its first */
        atomic_store(&c->s[seq[k]].seq_pos, k);
    c->gen++;
    atomic_store(&c->reached, -1);
    release_outside(c, 0, c->hold);
    pthread_cond_broadcast(&c->scv);
    pthread_mutex_unlock(&c->smu);
}

int cache_start_ahead(remote_cache *c)
{
    assert(!c->ahead_started);
    if (pthread_create(&c->ahead, NULL,
                       c->streaming ? stream_ahead : fetch_ahead, c) != 0)
        return -1;
    c->ahead_started = 1;
    return 0;
}
