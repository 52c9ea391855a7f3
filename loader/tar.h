/* Tar shards: the members of one archive, found by reading its headers
 * only (pread of each 512-byte header; member data is skipped). Reads the
 * POSIX ustar format (with its name prefix), GNU long names ('L') and pax
 * extended headers ('x': path and size), as GNU tar, Python's tarfile and
 * WebDataset's writers make them. Members that are not regular files
 * (directories, links, ...) are passed over. */
#ifndef PINLOAD_TAR_H
#define PINLOAD_TAR_H

#include <stddef.h>
#include <stdint.h>

typedef struct tar_member {
    char *name;     /* the member's path in the archive */
    int64_t offset; /* of its data in the archive */
    int64_t size;
} tar_member;

typedef struct tar_index {
    tar_member *m;
    size_t n, cap;
} tar_index;

/* Scan the archive open at fd, `path` naming it in errors. [out] *out, to
 * be freed with tar_index_free (also on failure). Returns 0, or
 * PL_ECORRUPT ("train-000.tar: byte 1536: header checksum 4417, computed
 * 4353"; "...: truncated: member x.jpg needs bytes to 9216, the file ends
 * at 8704"), PL_EIO or PL_ENOMEM, with pl_last_error set. */
int tar_scan(int fd, const char *path, tar_index *out);

void tar_index_free(tar_index *t);

/* Whether `name` looks like a tar archive by its name (".tar"). */
int tar_is_name(const char *name);

#endif
