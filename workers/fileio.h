/* Reading one file whole into a worker's reusable buffer. */
#ifndef PINLOAD_FILEIO_H
#define PINLOAD_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "../common/location.h"

/* How long a process-wide failure to open (EMFILE, ENFILE, ENOMEM, EAGAIN,
 * ENOBUFS) is retried before it is reported. */
#define FILEIO_RETRY_MS 1023

typedef struct fileio_buf {
    uint8_t *data;
    size_t len; /* bytes of the last file read */
    size_t cap;
    int process_error; /* the last read failed for the process's reason
                          (out of descriptors or memory), not the file's */
    int missing;       /* the last read found no such file (ENOENT) */
} fileio_buf;

/* Read `path` (relative to the directory dirfd, or absolute) into b,
 * growing it as needed. Files over max_bytes, directories and other
 * non-regular files are refused. Returns 0, or PL_EIO / PL_ELIMIT /
 * PL_ENOMEM with a reason in reason[cap]. Retries EINTR and short reads,
 * and process-wide failures to open for FILEIO_RETRY_MS; if they last,
 * PL_EIO with b->process_error set. FIFOs and devices are refused without
 * blocking. */
int fileio_read(int dirfd, const char *path, int64_t max_bytes, fileio_buf *b,
                char *reason, size_t cap);

/* Read bytes [offset, offset + size) of the open file fd (a member of a
 * tar shard) into b, as fileio_read does a whole file: PL_ELIMIT over
 * max_bytes, PL_EIO naming the call and the error, PL_EIO if the file now
 * ends before them (truncated since it was indexed). */
int fileio_read_at(int fd, int64_t offset, int64_t size, int64_t max_bytes,
                   fileio_buf *b, char *reason, size_t cap);

/* The bytes at *loc: the whole file (fileio_read), the range
 * (fileio_read_at, or its remote reader's read), or bytes in memory. */
int fileio_read_loc(const location *loc, int64_t max_bytes, fileio_buf *b,
                    char *reason, size_t cap);

void fileio_buf_free(fileio_buf *b);

/* Hint the kernel to start reading the bytes at *loc now (posix_fadvise
 * WILLNEED). Failures are ignored: it is only a hint. */
void fileio_hint_loc(const location *loc);

#endif
