/* Where a sample's bytes lie: a file named relative to an open directory,
 * or a range of an open file (a member of a tar shard). input/ says where
 * each sample is (catalog_locate); workers/ read it (fileio_read_loc); the
 * loader passes one to the other without looking inside. */
#ifndef PINLOAD_LOCATION_H
#define PINLOAD_LOCATION_H

#include <stdint.h>

typedef struct location {
    int fd;           /* the directory path is relative to, or the file */
    const char *path; /* a file under fd; NULL: bytes [offset, offset +
                         size) of fd */
    int64_t offset, size;
} location;

#endif
