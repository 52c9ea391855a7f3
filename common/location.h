/* Where a sample's bytes lie: a file named relative to an open directory,
 * or a range of an open file (a member of a tar shard). The catalog says
 * where each sample is (catalog_locate); workers/ read it
 * (fileio_read_loc); the loader passes one to the other without looking
 * inside. */
#ifndef PINLOAD_LOCATION_H
#define PINLOAD_LOCATION_H

#include <stddef.h>
#include <stdint.h>

/* A source whose bytes are not in an open file of ours (a remote shard):
 * the module that makes it (remote/remote.c) reads them on the worker's
 * thread, fetching or waiting as it must, and says why it could not. Any
 * thread may call read; it returns 0 with the size bytes at dst, or PL_E*
 * with reason[cap]. */
typedef struct location_reader {
    int (*read)(const struct location_reader *r, int64_t offset, int64_t size,
                void *dst, char *reason, size_t cap);
} location_reader;

typedef struct location {
    int fd;           /* the directory path is relative to, or the file */
    const char *path; /* a file under fd; NULL: bytes [offset, offset +
                         size) of fd, or of reader */
    int64_t offset, size;
    const location_reader *reader; /* non-NULL: the range comes from it
                                      (fd is then -1) */
    /* Non-NULL: the size bytes are here, in memory (a list file's column
     * held by the catalog); fd, path and reader are unused. */
    const void *bytes;
    /* Non-NULL (with path): not path itself but the file beside it with
     * this extension in place of path's ("x.jpg" and "txt": "x.txt"), a
     * folder sample's sidecar; its absence is PL_ENOEXTRA. */
    const char *sibling;
} location;

#endif
