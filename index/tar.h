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

#define TAR_SMALL_MAX 32 /* members this small keep their bytes (labels) */

typedef struct tar_member {
    char *name;     /* the member's path in the archive */
    int64_t offset; /* of its data in the archive */
    int64_t size;
    int small_len; /* -1, or the bytes of a member of at most
                      TAR_SMALL_MAX, in small[] (tar_read_small) */
    unsigned char small[TAR_SMALL_MAX];
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

/* Read the bytes of every member of at most TAR_SMALL_MAX bytes into its
 * small[] (a sample's label, so that the index carries it). PL_EIO. */
int tar_read_small(int fd, const char *path, tar_index *t);

/* Append a member (name is taken). PL_ENOMEM. */
int tar_add(tar_index *t, char *name, int64_t offset, int64_t size);

/* Whether `name` looks like a tar archive by its name (".tar"). */
int tar_is_name(const char *name);

/* Whether the regular file at `path` is a tar archive by its bytes,
 * whatever its name: its first block a header with ustar's magic at byte
 * 257, or one whose checksum holds (the old v7 format has no magic). A
 * file that is one is a shard, never read as a list of anything. Opened
 * without blocking; 0 for a FIFO, a device, a short or unreadable file. */
int tar_is_archive(const char *path);

#endif
