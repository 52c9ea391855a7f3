#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/file.h"
#include "../common/grow.h"
#include "pinload.h"

static int io_error(int err, const char *what, char *reason, size_t cap)
{
    char buf[128];
    snprintf(reason, cap, "%s: %s", what, strerror_r(err, buf, sizeof buf));
    return PL_EIO;
}

/* Reads until EOF rather than trusting st_size alone, so a file that grows
 * or shrinks between fstat and read is still read consistently. */
static int read_all(int fd, int64_t max_bytes, fileio_buf *b, char *reason,
                    size_t cap)
{
    size_t len = 0;
    for (;;) {
        if (len == b->cap &&
            grow(&b->data, &b->cap, b->cap + 1, 1, 1 << 16) < 0) {
            snprintf(reason, cap, "out of memory reading %zu bytes", len);
            return PL_ENOMEM;
        }
        const ssize_t n = read(fd, b->data + len, b->cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return io_error(errno, "read", reason, cap);
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if ((int64_t)len > max_bytes) {
            snprintf(reason, cap, "file larger than the limit of %lld bytes",
                     (long long)max_bytes);
            return PL_ELIMIT;
        }
    }
    b->len = len;
    return 0;
}

/* Whether errno says something about the process or the system (out of
 * file descriptors or memory), not about the file. */
static int process_wide(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOMEM || err == EAGAIN ||
           err == ENOBUFS;
}

/* openat, retrying EINTR at once and process-wide failures with backoff
 * (1 ms doubling, FILEIO_RETRY_MS in all): another thread's descriptors or
 * memory may come back. O_NONBLOCK, so that a FIFO or a device named like
 * a JPEG is refused by the regular-file check instead of blocking the
 * worker forever in open(). */
static int open_file(int dirfd, const char *path)
{
    long slept_ms = 0, wait_ms = 1;
    for (;;) {
        const int fd =
            openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0)
            return fd;
        if (errno == EINTR)
            continue;
        if (!process_wide(errno) || slept_ms >= FILEIO_RETRY_MS)
            return -1;
        const int err = errno;
        const struct timespec ts = {wait_ms / 1000, (wait_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        slept_ms += wait_ms;
        wait_ms *= 2;
        errno = err;
    }
}

int fileio_read(int dirfd, const char *path, int64_t max_bytes, fileio_buf *b,
                char *reason, size_t cap)
{
    b->process_error = 0;
    const int fd = open_file(dirfd, path);
    b->missing = fd < 0 && errno == ENOENT;
    if (fd < 0) {
        const int err = errno;
        if (process_wide(err)) {
            char buf[128];
            b->process_error = 1;
            snprintf(reason, cap,
                     "open: %s (a limit of the process or the system, not "
                     "this file's fault; retried for %d ms)",
                     strerror_r(err, buf, sizeof buf), FILEIO_RETRY_MS);
            return PL_EIO;
        }
        return io_error(err, "open", reason, cap);
    }

    int rc;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = io_error(errno, "fstat", reason, cap);
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(reason, cap, "not a regular file (%s)",
                 S_ISDIR(st.st_mode)    ? "a directory"
                 : S_ISFIFO(st.st_mode) ? "a FIFO"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "a device or special file");
        rc = PL_EIO;
        goto done;
    }
    /* A regular file never blocks; reads go back to blocking all the same. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (st.st_size > max_bytes) {
        snprintf(reason, cap, "%lld bytes, over the limit of %lld",
                 (long long)st.st_size, (long long)max_bytes);
        rc = PL_ELIMIT;
        goto done;
    }
    /* A buffer grown for an unusually large file is not kept for the small
     * ones after it: a worker holds at most GROW_KEEP_BYTES between
     * samples, whatever it met before. */
    /* One spare byte lets read() see EOF without a second grow. */
    if (grow_scratch(&b->data, &b->cap, (size_t)st.st_size + 1, 1, 1 << 16) <
        0) {
        snprintf(reason, cap, "out of memory for %lld bytes",
                 (long long)st.st_size);
        rc = PL_ENOMEM;
        goto done;
    }
    rc = read_all(fd, max_bytes, b, reason, cap);
done:
    close(fd);
    return rc;
}

void fileio_buf_free(fileio_buf *b)
{
    free(b->data);
    *b = (fileio_buf){0};
}

static void hint_file(int dirfd, const char *path)
{
    const int fd =
        openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    close(fd);
}

int fileio_read_at(int fd, int64_t offset, int64_t size, int64_t max_bytes,
                   fileio_buf *b, char *reason, size_t cap)
{
    b->process_error = 0;
    if (size > max_bytes) {
        snprintf(reason, cap, "%lld bytes, over the limit of %lld",
                 (long long)size, (long long)max_bytes);
        return PL_ELIMIT;
    }
    if (grow_scratch(&b->data, &b->cap, (size_t)size + 1, 1, 1 << 16) < 0) {
        snprintf(reason, cap, "out of memory for %lld bytes", (long long)size);
        return PL_ENOMEM;
    }
    const ssize_t got = file_pread_full(fd, b->data, (size_t)size, (off_t)offset);
    if (got < 0)
        return io_error(errno, "pread", reason, cap);
    if (got < size) {
        snprintf(reason, cap,
                 "the shard ends at byte %lld, inside this member "
                 "(bytes %lld to %lld): truncated since it was indexed",
                 (long long)(offset + got), (long long)offset,
                 (long long)(offset + size));
        return PL_EIO;
    }
    b->len = got;
    return 0;
}

/* A range of a remote source, through its reader (which fetches it, or
 * waits for the node's cache to hold it). */
static int read_from_reader(const location *loc, int64_t max_bytes,
                            fileio_buf *b, char *reason, size_t cap)
{
    b->process_error = 0;
    if (loc->size > max_bytes) {
        snprintf(reason, cap, "%lld bytes, over the limit of %lld",
                 (long long)loc->size, (long long)max_bytes);
        return PL_ELIMIT;
    }
    if (grow_scratch(&b->data, &b->cap, (size_t)loc->size + 1, 1, 1 << 16) <
        0) {
        snprintf(reason, cap, "out of memory for %lld bytes",
                 (long long)loc->size);
        return PL_ENOMEM;
    }
    const int rc = loc->reader->read(loc->reader, loc->offset, loc->size,
                                     b->data, reason, cap);
    b->len = rc == 0 ? (size_t)loc->size : 0;
    return rc;
}

/* Bytes the catalog holds (a list file's column): copied, so that the
 * caller finds every source's bytes in b alike. */
static int read_from_memory(const location *loc, fileio_buf *b, char *reason,
                            size_t cap)
{
    b->process_error = 0;
    if (grow_scratch(&b->data, &b->cap, (size_t)loc->size + 1, 1, 1 << 16) <
        0) {
        snprintf(reason, cap, "out of memory for %lld bytes",
                 (long long)loc->size);
        return PL_ENOMEM;
    }
    memcpy(b->data, loc->bytes, (size_t)loc->size);
    b->len = (size_t)loc->size;
    return 0;
}

/* The file beside loc->path named with loc->sibling's extension in place
 * of its own: PL_ENOEXTRA if there is none. */
static int read_sibling(const location *loc, int64_t max_bytes, fileio_buf *b,
                        char *reason, size_t cap)
{
    const char *base = strrchr(loc->path, '/');
    const char *dot = strrchr(base ? base + 1 : loc->path, '.');
    const size_t stem = dot ? (size_t)(dot - loc->path) : strlen(loc->path);
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%.*s.%s", (int)stem, loc->path,
                         loc->sibling) >= sizeof path) {
        snprintf(reason, cap, "%s: path too long", loc->sibling);
        return PL_EIO;
    }
    const int rc = fileio_read(loc->fd, path, max_bytes, b, reason, cap);
    if (rc < 0 && b->missing) {
        const char *shown = strrchr(path, '/');
        snprintf(reason, cap, "no file %s beside it", shown ? shown + 1 : path);
        return PL_ENOEXTRA;
    }
    return rc;
}

int fileio_read_loc(const location *loc, int64_t max_bytes, fileio_buf *b,
                    char *reason, size_t cap)
{
    if (loc->bytes)
        return read_from_memory(loc, b, reason, cap);
    if (loc->sibling)
        return read_sibling(loc, max_bytes, b, reason, cap);
    if (loc->path)
        return fileio_read(loc->fd, loc->path, max_bytes, b, reason, cap);
    if (loc->reader)
        return read_from_reader(loc, max_bytes, b, reason, cap);
    return fileio_read_at(loc->fd, loc->offset, loc->size, max_bytes, b, reason,
                          cap);
}

void fileio_hint_loc(const location *loc)
{
    if (loc->bytes || loc->sibling)
        return;
    if (loc->path)
        hint_file(loc->fd, loc->path);
    else if (!loc->reader) /* a remote source fetches ahead on its own */
        (void)posix_fadvise(loc->fd, (off_t)loc->offset, (off_t)loc->size,
                            POSIX_FADV_WILLNEED);
}
