/* The node-wide dataset table file: its name, checking it and reading its
 * tables, writing it a table at a time (node_tables.h has the layout). */
#include "node_tables.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../common/file.h"
#include "../common/bytes.h"

#include "idx_file.h"


void node_tables_identify(node_tables_entry *e, const char *path,
                         const struct stat *st)
{
    memset(e, 0, sizeof *e);
    e->size = (uint64_t)st->st_size;
    e->mtime_s = (int64_t)st->st_mtim.tv_sec;
    e->mtime_ns = (int64_t)st->st_mtim.tv_nsec;
    e->ino = (uint64_t)st->st_ino;
    uint64_t h = FNV_SEED;
    char cwd[PATH_MAX];
    if (path[0] != '/' && getcwd(cwd, sizeof cwd)) {
        h = fnv1a(h, cwd, strlen(cwd));
        h = fnv1a(h, "/", 1);
    }
    e->path_hash = fnv1a(h, path, strlen(path));
}

int node_tables_path(const node_tables_entry *e, int n, char *out, size_t cap)
{
    char dir[PATH_MAX];
    if (idx_file_dir(dir, sizeof dir) < 0)
        return -1;
    uint64_t h = FNV_SEED;
    for (int i = 0; i < n; i++)
        h = fnv1a(h, &e[i].path_hash, 8);
    return snprintf(out, cap, "%s/%016llx-%d.tables", dir,
                    (unsigned long long)h, n) < (int)cap
               ? 0
               : -1;
}

/* Directory entry i of the file as bytes, at d. */
static void entry_put(unsigned char *d, const node_tables_entry *e)
{
    le_put64(d, e->offset);
    le_put64(d + 8, e->len);
    le_put64(d + 16, e->size);
    le_put64(d + 24, (uint64_t)e->mtime_s);
    le_put64(d + 32, (uint64_t)e->mtime_ns);
    le_put64(d + 40, e->ino);
    le_put64(d + 48, e->path_hash);
    le_put64(d + 56, 0);
}

/* The header and directory's checksum: bytes [0, 24) and the entries. */
static uint64_t head_sum(const unsigned char *p, int n)
{
    const uint64_t h = fnv1a(FNV_SEED, p, 24);
    return fnv1a(h, p + NODE_TABLES_HEAD, (size_t)n * NODE_TABLES_ENTRY);
}

/* Whether directory entry d is shard e's, its table in bounds of a file
 * of `size` bytes past the directory. */
static int entry_fits(const unsigned char *d, const node_tables_entry *e,
                      uint64_t dir_end, uint64_t size)
{
    const uint64_t off = le_get64(d), len = le_get64(d + 8);
    return le_get64(d + 16) == e->size && (int64_t)le_get64(d + 24) == e->mtime_s &&
           (int64_t)le_get64(d + 32) == e->mtime_ns && le_get64(d + 40) == e->ino &&
           le_get64(d + 48) == e->path_hash && off % 8 == 0 && off >= dir_end &&
           off <= size && len <= size - off;
}

static int read_at(int fd, unsigned char *p, size_t n, uint64_t at)
{
    return file_pread_full(fd, p, n, (off_t)at) == (ssize_t)n ? 0 : -1;
}

/* The header and directory of the file open as fd, `size` bytes, for
 * shards e[0, n): 0 with each table's place in e[i].offset and .len, or
 * -1 if anything does not check. */
static int read_directory(int fd, uint64_t size, node_tables_entry *e, int n)
{
    const uint64_t dir_end = NODE_TABLES_HEAD + (uint64_t)n * NODE_TABLES_ENTRY;
    if (size < dir_end)
        return -1;
    unsigned char *p = malloc((size_t)dir_end);
    int ok = p && read_at(fd, p, (size_t)dir_end, 0) == 0 &&
             memcmp(p, NODE_TABLES_MAGIC, 8) == 0 &&
             le_get64(p + 8) == (uint64_t)n && le_get64(p + 16) == 0 &&
             le_get64(p + 24) == head_sum(p, n);
    for (int i = 0; ok && i < n; i++) {
        const unsigned char *d =
            p + NODE_TABLES_HEAD + (size_t)i * NODE_TABLES_ENTRY;
        ok = entry_fits(d, &e[i], dir_end, size);
        e[i].offset = le_get64(d);
        e[i].len = le_get64(d + 8);
    }
    free(p);
    return ok ? 0 : -1;
}

int node_tables_open(const char *path, node_tables_entry *e, int n,
                     int *stale)
{
    *stale = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
                                  O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        read_directory(fd, (uint64_t)st.st_size, e, n) == 0)
        return fd;
    close(fd);
    *stale = 1;
    return -1;
}

int node_tables_table(int fd, const char *path, const node_tables_entry *e,
                      sample_table *tab)
{
    memset(tab, 0, sizeof *tab);
    unsigned char *b =
        e->len <= SIZE_MAX ? sample_table_bytes((size_t)e->len) : NULL;
    if (!b || read_at(fd, b, (size_t)e->len, e->offset) < 0 ||
        sample_table_open(tab, b, (size_t)e->len) < 0) {
        sample_table_bytes_free(b, (size_t)e->len);
        return -1;
    }
    if (tab->shard_size != e->size || tab->mtime_s != e->mtime_s ||
        tab->mtime_ns != e->mtime_ns ||
        sample_table_attach(tab, fd, path, e->offset, 0) < 0) {
        sample_table_close(tab);
        return -1;
    }
    return 0;
}

int node_tables_begin(node_tables_writer *w, const char *path, int n)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    /* The pid and the writer's address: two loaders of one process too
     * write apart. */
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld.%lx", path, (long)getpid(),
             (unsigned long)(uintptr_t)w);
    idx_file_make_folder_of(path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC,
                 0644);
    w->at = NODE_TABLES_HEAD + (uint64_t)n * NODE_TABLES_ENTRY;
    return w->fd < 0 ? -1 : 0;
}

static int write_at(int fd, const unsigned char *p, size_t n, uint64_t at)
{
    for (size_t done = 0; done < n;) {
        const ssize_t k = pwrite(fd, p + done, n - done, (off_t)(at + done));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

int node_tables_add(node_tables_writer *w, const sample_table *tab,
                   node_tables_entry *e)
{
    e->offset = w->at;
    e->len = tab->len;
    if (write_at(w->fd, tab->base, tab->len, w->at) < 0)
        return -1;
    w->at += tab->len; /* a table's length is a multiple of 8 */
    return 0;
}

int node_tables_end(node_tables_writer *w, const node_tables_entry *e, int n,
                   int ok)
{
    const size_t dir_end = NODE_TABLES_HEAD + (size_t)n * NODE_TABLES_ENTRY;
    unsigned char *h = ok ? calloc(1, dir_end) : NULL;
    if (h) {
        memcpy(h, NODE_TABLES_MAGIC, 8);
        le_put64(h + 8, (uint64_t)n);
        for (int i = 0; i < n; i++)
            entry_put(h + NODE_TABLES_HEAD + (size_t)i * NODE_TABLES_ENTRY,
                      &e[i]);
        le_put64(h + 24, head_sum(h, n));
    }
    ok = h && write_at(w->fd, h, dir_end, 0) == 0 && fsync(w->fd) == 0;
    free(h);
    if (close(w->fd) != 0)
        ok = 0;
    if (ok && rename(w->tmp, w->path) == 0)
        return 0;
    unlink(w->tmp);
    return -1;
}

int node_tables_lock(const char *path)
{
    char lock[PATH_MAX + 8];
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock)
        return -1;
    idx_file_make_folder_of(path);
    const int fd = open(lock,
                        O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
                            O_NOFOLLOW,
                        0644);
    if (fd < 0)
        return -1;
    int rc;
    while ((rc = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
        ;
    if (rc < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void node_tables_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* and the lock with it */
}
