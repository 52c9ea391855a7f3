/* The sidecar index: its places, reading it back, writing it atomically
 * (sidecar.h has the format). */
#include "sidecar.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/grow.h"

#define IDX_MAGIC "PLTARIX1"
#define IDX_MAX_BYTES ((size_t)1 << 30)

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3u;
    return h;
}

typedef struct obuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} obuf;

static void put(obuf *b, const void *d, size_t n)
{
    if (b->oom || grow(&b->p, &b->cap, b->n + n, 1, 1 << 16) < 0) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put64(obuf *b, uint64_t v)
{
    unsigned char x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (unsigned char)(v >> (8 * i));
    put(b, x, 8);
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Where the sidecar of `path` may be, in order (which = 0, 1): with
 * $PINLOAD_INDEX_DIR set, there only; otherwise next to the shard, then in
 * the user's cache folder. -1 when `which` has no place. */
static int sidecar_path(const char *path, int which, char *out, size_t cap)
{
    const char *dir = getenv("PINLOAD_INDEX_DIR");
    const int fixed = dir && *dir;
    if (which == 0 && !fixed)
        return snprintf(out, cap, "%s.idx", path) < (int)cap ? 0 : -1;
    if (which == 1 && fixed)
        return -1;
    char abs[PATH_MAX];
    if (!realpath(path, abs))
        return -1;
    char buf[PATH_MAX];
    if (!fixed) {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg)
            snprintf(buf, sizeof buf, "%s/pinload", xdg);
        else if (home && *home)
            snprintf(buf, sizeof buf, "%s/.cache/pinload", home);
        else
            return -1;
        dir = buf;
    }
    const char *base = strrchr(abs, '/');
    return snprintf(
               out, cap, "%s/%016llx-%s.idx", dir,
               (unsigned long long)fnv(0xcbf29ce484222325u, abs, strlen(abs)),
               base ? base + 1 : abs) < (int)cap
               ? 0
               : -1;
}

/* The index from a sidecar that matches st: 1, or 0 if there is none
 * usable (absent, stale or damaged: *stale says which of the last two).
 * Something else under the index's name (a folder, a FIFO: opened without
 * blocking) counts as absent. */
static int sidecar_load(const char *idx, const struct stat *st, tar_index *t,
                        int *stale, int64_t *shard_size)
{
    *stale = 0;
    const int fd = open(idx, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return 0;
    struct stat is;
    if (fstat(fd, &is) != 0 || !S_ISREG(is.st_mode)) {
        close(fd);
        return 0;
    }
    unsigned char *b = NULL;
    int ok = 0;
    if (is.st_size >= 48 && (size_t)is.st_size <= IDX_MAX_BYTES &&
        (b = malloc((size_t)is.st_size))) {
        size_t got = 0;
        while (got < (size_t)is.st_size) {
            const ssize_t r = read(fd, b + got, (size_t)is.st_size - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        const size_t n = got;
        ok = n == (size_t)is.st_size && memcmp(b, IDX_MAGIC, 8) == 0 &&
             get64(b + n - 8) == fnv(0xcbf29ce484222325u, b, n - 8);
        /* st NULL: a remote shard's index, whose size is the shard's to
         * be (its mtime was the packer's). */
        const uint64_t size_of_shard = ok ? get64(b + 8) : 0;
        if (ok && st &&
            (size_of_shard != (uint64_t)st->st_size ||
             (int64_t)get64(b + 16) != (int64_t)st->st_mtim.tv_sec ||
             (int64_t)get64(b + 24) != (int64_t)st->st_mtim.tv_nsec))
            ok = 0, *stale = 1;
        else if (ok && !st && size_of_shard > (uint64_t)INT64_MAX)
            ok = 0, *stale = 1;
        if (ok && shard_size)
            *shard_size = (int64_t)size_of_shard;
        else if (!ok)
            *stale = 1;
        const uint64_t count = ok ? get64(b + 32) : 0;
        size_t at = 40;
        memset(t, 0, sizeof *t);
        for (uint64_t i = 0; ok && i < count; i++) {
            if (at + 21 > n - 8) {
                ok = 0;
                break;
            }
            const uint64_t off = get64(b + at), size = get64(b + at + 8);
            const uint32_t nl =
                (uint32_t)b[at + 16] | (uint32_t)b[at + 17] << 8 |
                (uint32_t)b[at + 18] << 16 | (uint32_t)b[at + 19] << 24;
            const unsigned sl = b[at + 20];
            at += 21;
            const size_t sbytes = sl == 255 ? 0 : sl;
            if (nl > PATH_MAX || sbytes > TAR_SMALL_MAX ||
                at + nl + sbytes > n - 8 || off + size > size_of_shard) {
                ok = 0;
                break;
            }
            char *name = strndup((const char *)b + at, nl);
            if (!name || tar_add(t, name, (int64_t)off, (int64_t)size) < 0) {
                ok = 0;
                break;
            }
            at += nl;
            tar_member *m = &t->m[t->n - 1];
            if (sl != 255) {
                memcpy(m->small, b + at, sbytes);
                m->small_len = (int)sbytes;
            }
            at += sbytes;
        }
        if (ok && at != n - 8)
            ok = 0;
        if (!ok)
            tar_index_free(t);
    }
    free(b);
    close(fd);
    return ok;
}

/* Write the sidecar (best effort: a shard on a read-only file system is
 * read all the same). 0 if written. */
static int sidecar_save(const char *idx, const struct stat *st,
                        const tar_index *t)
{
    obuf b = {0};
    put(&b, IDX_MAGIC, 8);
    put64(&b, (uint64_t)st->st_size);
    put64(&b, (uint64_t)st->st_mtim.tv_sec);
    put64(&b, (uint64_t)st->st_mtim.tv_nsec);
    put64(&b, t->n);
    for (size_t i = 0; i < t->n; i++) {
        const tar_member *m = &t->m[i];
        const uint32_t nl = (uint32_t)strlen(m->name);
        put64(&b, (uint64_t)m->offset);
        put64(&b, (uint64_t)m->size);
        const unsigned char x[5] = {
            (unsigned char)nl, (unsigned char)(nl >> 8),
            (unsigned char)(nl >> 16), (unsigned char)(nl >> 24),
            (unsigned char)(m->small_len < 0 ? 255 : m->small_len)};
        put(&b, x, 5);
        put(&b, m->name, nl);
        if (m->small_len > 0)
            put(&b, m->small, (size_t)m->small_len);
    }
    put64(&b, b.oom ? 0 : fnv(0xcbf29ce484222325u, b.p, b.n));
    char tmp[PATH_MAX + 128];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", idx, (long)getpid());
    int rc = -1;
    const int fd =
        b.oom ? -1
              : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC,
                     0644);
    if (fd >= 0) {
        size_t done = 0;
        while (done < b.n) {
            const ssize_t w = write(fd, b.p + done, b.n - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        const int good = done == b.n && fsync(fd) == 0;
        close(fd);
        if (good && rename(tmp, idx) == 0)
            rc = 0;
        else
            unlink(tmp);
    }
    free(b.p);
    return rc;
}

/* mkdir -p of the folder holding `file`. */
static void make_folder_of(const char *file)
{
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    mkdir(dir, 0755);
}

int sidecar_find(const char *path, const struct stat *st, tar_index *t,
                 int *stale)
{
    char idx[PATH_MAX + 64];
    *stale = 0;
    for (int which = 0; which < 2; which++) {
        int bad = 0;
        if (sidecar_path(path, which, idx, sizeof idx) == 0 &&
            sidecar_load(idx, st, t, &bad, NULL))
            return 1;
        *stale |= bad;
    }
    return 0;
}

int sidecar_write(const char *path, const struct stat *st, const tar_index *t)
{
    char idx[PATH_MAX + 64];
    for (int which = 0; which < 2; which++) {
        if (sidecar_path(path, which, idx, sizeof idx) < 0)
            continue;
        make_folder_of(idx);
        if (sidecar_save(idx, st, t) == 0)
            return 0;
    }
    return -1;
}

int sidecar_read_any(const char *idx, tar_index *t, int64_t *shard_size)
{
    int stale;
    return sidecar_load(idx, NULL, t, &stale, shard_size);
}

int sidecar_write_at(const char *idx, const struct stat *st, const tar_index *t)
{
    return sidecar_save(idx, st, t);
}
