/* A shard's index file (.idx): its places, reading it back, writing it
 * atomically (idx_file.h has the format). */
#include "idx_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/file.h"
#include "../common/bytes.h"
#include "../common/error.h"
#include "sample_table.h"

#define IDX_MAGIC "PLTARIX1"
#define IDX_MAX_BYTES ((size_t)1 << 30)

int idx_file_dir(char *out, size_t cap)
{
    const char *dir = getenv("PINLOAD_INDEX_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (dir && *dir)
        n = snprintf(out, cap, "%s", dir);
    else if (xdg && *xdg)
        n = snprintf(out, cap, "%s/pinload", xdg);
    else if (home && *home)
        n = snprintf(out, cap, "%s/.cache/pinload", home);
    else
        return -1;
    return n < (int)cap ? 0 : -1;
}

/* Where the sidecar of `path` may be, in order (which = 0, 1): with
 * $PINLOAD_INDEX_DIR set, there only; otherwise next to the shard, then in
 * the user's cache folder. -1 when `which` has no place. */
static int idx_file_path(const char *path, int which, char *out, size_t cap)
{
    const char *fixed = getenv("PINLOAD_INDEX_DIR");
    if (which == 0 && !(fixed && *fixed))
        return snprintf(out, cap, "%s.idx", path) < (int)cap ? 0 : -1;
    if (which == 1 && fixed && *fixed)
        return -1;
    char abs[PATH_MAX], dir[PATH_MAX];
    if (!realpath(path, abs) || idx_file_dir(dir, sizeof dir) < 0)
        return -1;
    const char *base = strrchr(abs, '/');
    return snprintf(
               out, cap, "%s/%016llx-%s.idx", dir,
               (unsigned long long)fnv1a(FNV_SEED, abs, strlen(abs)),
               base ? base + 1 : abs) < (int)cap
               ? 0
               : -1;
}

/* The whole of file idx, opened without blocking and without following a
 * link (an index is pinload's own file: a link put in its place is not
 * read through), read into the heap: 0 with [out] *p and *len, and the
 * file open as *fd when fd is not NULL (for reading its table later), or
 * -1 if it is absent, not a regular file, or over IDX_MAX_BYTES. */
static int file_bytes(const char *idx, int *fd_out, unsigned char **p,
                      size_t *len)
{
    const int fd =
        open(idx, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat is;
    int rc = -1;
    if (fstat(fd, &is) != 0 || !S_ISREG(is.st_mode) || is.st_size < 48 ||
        (size_t)is.st_size > IDX_MAX_BYTES ||
        !(*p = sample_table_bytes((size_t)is.st_size)))
        goto done;
    *len = (size_t)is.st_size;
    if (file_pread_full(fd, *p, *len, 0) == (ssize_t)*len)
        rc = 0;
    else
        sample_table_bytes_free(*p, *len);
done:
    if (rc == 0 && fd_out)
        *fd_out = fd;
    else
        close(fd);
    return rc;
}

/* Whether a table's shard is st's (st NULL: a remote shard's index, whose
 * size is the shard's to be, its mtime the packer's; size < 0: any). */
static int table_matches(const sample_table *tab, const struct stat *st,
                         int64_t size)
{
    if (st)
        return tab->shard_size == (uint64_t)st->st_size &&
               tab->mtime_s == (int64_t)st->st_mtim.tv_sec &&
               tab->mtime_ns == (int64_t)st->st_mtim.tv_nsec;
    return size < 0 || tab->shard_size == (uint64_t)size;
}

/* The version-1 body of b[0, n) (checked) into t: 1, or 0 if it does not
 * hold. */
static int v1_members(const unsigned char *b, size_t n, uint64_t size_of_shard,
                      tar_index *t)
{
    const uint64_t count = le_get64(b + 32);
    size_t at = 40;
    int ok = 1;
    memset(t, 0, sizeof *t);
    for (uint64_t i = 0; ok && i < count; i++) {
        if (at + 21 > n - 8) {
            ok = 0;
            break;
        }
        const uint64_t off = le_get64(b + at), size = le_get64(b + at + 8);
        const uint32_t nl = (uint32_t)b[at + 16] | (uint32_t)b[at + 17] << 8 |
                            (uint32_t)b[at + 18] << 16 |
                            (uint32_t)b[at + 19] << 24;
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
    return ok;
}

/* The members from a sidecar of either version that matches st: 1, or 0
 * if there is none usable (absent, stale or damaged: *stale says which of
 * the last two). Something else under the index's name (a folder, a FIFO:
 * opened without blocking) counts as absent. */
static int idx_file_load(const char *idx, const struct stat *st, tar_index *t,
                        int *stale, int64_t *shard_size)
{
    *stale = 0;
    unsigned char *b;
    size_t n;
    if (file_bytes(idx, NULL, &b, &n) < 0)
        return 0;
    int ok = 0;
    sample_table tab;
    if (sample_table_is(b, n)) {
        if (sample_table_open(&tab, b, n) == 0) {
            ok = table_matches(&tab, st, -1) &&
                 tab.shard_size <= (uint64_t)INT64_MAX &&
                 sample_table_members(&tab, t) == 0;
            if (ok && shard_size)
                *shard_size = (int64_t)tab.shard_size;
            sample_table_close(&tab); /* gives b back */
            b = NULL;
        }
    } else if (memcmp(b, IDX_MAGIC, 8) == 0 &&
               le_get64(b + n - 8) == fnv1a(FNV_SEED, b, n - 8)) {
        const uint64_t size_of_shard = le_get64(b + 8);
        ok = st ? size_of_shard == (uint64_t)st->st_size &&
                      (int64_t)le_get64(b + 16) == (int64_t)st->st_mtim.tv_sec &&
                      (int64_t)le_get64(b + 24) == (int64_t)st->st_mtim.tv_nsec
                : size_of_shard <= (uint64_t)INT64_MAX;
        ok = ok && v1_members(b, n, size_of_shard, t);
        if (ok && shard_size)
            *shard_size = (int64_t)size_of_shard;
    }
    *stale = !ok;
    sample_table_bytes_free(b, n);
    return ok;
}

/* Write the sidecar (best effort: a shard on a read-only file system is
 * read all the same), bytes b[0, n). 0 if written. */
static int idx_file_save(const char *idx, const unsigned char *b, size_t n)
{
    char tmp[PATH_MAX + 128];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", idx, (long)getpid());
    int rc = -1;
    const int fd =
        open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd >= 0) {
        size_t done = 0;
        while (done < n) {
            const ssize_t w = write(fd, b + done, n - done);
            if (w <= 0)
                break;
            done += (size_t)w;
        }
        const int good = done == n && fsync(fd) == 0;
        close(fd);
        if (good && rename(tmp, idx) == 0)
            rc = 0;
        else
            unlink(tmp);
    }
    return rc;
}

/* t's table as bytes, for the shard of st (or of `size` bytes). */
static int build(const tar_index *t, const struct stat *st, int64_t size,
                 unsigned char **b, size_t *n)
{
    return sample_table_build(t, st ? (uint64_t)st->st_size : (uint64_t)size,
                             st ? (int64_t)st->st_mtim.tv_sec : 0,
                             st ? (int64_t)st->st_mtim.tv_nsec : 0, b, n);
}

void idx_file_make_folder_of(const char *file)
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

int idx_file_find(const char *path, const struct stat *st, tar_index *t,
                 int *stale)
{
    char idx[PATH_MAX + 64];
    *stale = 0;
    for (int which = 0; which < 2; which++) {
        int bad = 0;
        if (idx_file_path(path, which, idx, sizeof idx) == 0 &&
            idx_file_load(idx, st, t, &bad, NULL))
            return 1;
        *stale |= bad;
    }
    return 0;
}

int idx_file_table_at(const char *idx, const struct stat *st, int64_t size,
                     int in_heap, sample_table *tab, int *stale)
{
    unsigned char *b;
    size_t n;
    int fd;
    *stale = 0;
    if (file_bytes(idx, &fd, &b, &n) < 0)
        return 0;
    if (!sample_table_is(b, n)) { /* version 1: read, and written anew */
        sample_table_bytes_free(b, n);
        close(fd);
        return 0;
    }
    if (sample_table_open(tab, b, n) < 0) {
        sample_table_bytes_free(b, n);
        close(fd);
        *stale = 1;
        return 0;
    }
    if (!table_matches(tab, st, size)) {
        sample_table_close(tab);
        close(fd);
        *stale = 1;
        return 0;
    }
    /* Where the file's name cannot be kept the table stays in the heap. */
    if (in_heap || sample_table_attach(tab, fd, idx, 0, 1) < 0)
        close(fd);
    return 1;
}

int idx_file_table(const char *path, const struct stat *st, int in_heap,
                  sample_table *tab, int *stale)
{
    char idx[PATH_MAX + 64];
    *stale = 0;
    for (int which = 0; which < 2; which++) {
        int bad = 0;
        if (idx_file_path(path, which, idx, sizeof idx) == 0 &&
            idx_file_table_at(idx, st, -1, in_heap, tab, &bad))
            return 1;
        *stale |= bad;
    }
    return 0;
}

/* The table of bytes b[0, n) in the heap (taken). */
static int keep_in_heap(unsigned char *b, size_t n, sample_table *tab)
{
    if (sample_table_open(tab, b, n) < 0) {
        sample_table_bytes_free(b, n);
        return err_set(PL_ECORRUPT, "a shard's table did not check");
    }
    return 0;
}

int idx_file_keep(const char *path, const struct stat *st, const tar_index *t,
                 int in_heap, sample_table *tab)
{
    unsigned char *b;
    size_t n;
    int rc = build(t, st, 0, &b, &n);
    if (rc < 0)
        return rc;
    char idx[PATH_MAX + 64];
    for (int which = 0; which < 2; which++) {
        if (idx_file_path(path, which, idx, sizeof idx) < 0)
            continue;
        idx_file_make_folder_of(idx);
        int stale;
        if (idx_file_save(idx, b, n) == 0 &&
            idx_file_table_at(idx, st, -1, in_heap, tab, &stale)) {
            sample_table_bytes_free(b, n);
            return 1;
        }
    }
    rc = keep_in_heap(b, n, tab);
    return rc < 0 ? rc : 0;
}

int idx_file_keep_at(const char *idx, int64_t size, const tar_index *t,
                    int in_heap, sample_table *tab)
{
    int stale;
    if (idx_file_table_at(idx, NULL, size, in_heap, tab, &stale))
        return 1;
    unsigned char *b;
    size_t n;
    int rc = build(t, NULL, size, &b, &n);
    if (rc < 0)
        return rc;
    if (idx_file_save(idx, b, n) == 0 &&
        idx_file_table_at(idx, NULL, size, in_heap, tab, &stale)) {
        sample_table_bytes_free(b, n);
        return 1;
    }
    rc = keep_in_heap(b, n, tab);
    return rc < 0 ? rc : 0;
}

int idx_file_write(const char *path, const struct stat *st, const tar_index *t)
{
    unsigned char *b;
    size_t n;
    if (build(t, st, 0, &b, &n) < 0)
        return -1;
    char idx[PATH_MAX + 64];
    int rc = -1;
    for (int which = 0; which < 2 && rc < 0; which++) {
        if (idx_file_path(path, which, idx, sizeof idx) < 0)
            continue;
        idx_file_make_folder_of(idx);
        rc = idx_file_save(idx, b, n);
    }
    sample_table_bytes_free(b, n);
    return rc;
}

int idx_file_read_any(const char *idx, tar_index *t, int64_t *shard_size)
{
    int stale;
    return idx_file_load(idx, NULL, t, &stale, shard_size);
}

int idx_file_write_at(const char *idx, const struct stat *st, const tar_index *t)
{
    unsigned char *b;
    size_t n;
    if (build(t, st, 0, &b, &n) < 0)
        return -1;
    const int rc = idx_file_save(idx, b, n);
    sample_table_bytes_free(b, n);
    return rc;
}
