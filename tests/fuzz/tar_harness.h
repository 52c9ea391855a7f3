/* One fuzz input through the tar shard indexer (index/tar.c), shared by the
 * libFuzzer target (fuzz_tar.c) and the seeded runs in the regular suite
 * (test_fuzz_tar.c). The input is the shard's bytes, in a memory file. The
 * contract: tar_scan returns 0 or a negative code with a sentence naming
 * the shard; every member it lists lies inside the file, has a name, and
 * starts on a 512-byte boundary; tar_read_small reads every small member.
 * A violation aborts. */
#ifndef PINLOAD_FUZZ_TAR_HARNESS_H
#define PINLOAD_FUZZ_TAR_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../index/tar.h"
#include "pinload.h"

static inline void fuzz_tar_check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tar: broken contract: %s (%s)\n", what,
                pl_last_error());
        abort();
    }
}

static inline void fuzz_tar_one(const uint8_t *data, size_t size)
{
    const int fd = memfd_create("shard.tar", MFD_CLOEXEC);
    fuzz_tar_check(fd >= 0, "memfd_create");
    size_t done = 0;
    while (done < size) {
        const ssize_t w = write(fd, data + done, size - done);
        fuzz_tar_check(w > 0, "write");
        done += (size_t)w;
    }
    tar_index t;
    const int rc = tar_scan(fd, "shard.tar", &t);
    if (rc < 0) {
        fuzz_tar_check(strstr(pl_last_error(), "shard.tar") != NULL,
                       "the error names the shard");
    } else {
        for (size_t i = 0; i < t.n; i++) {
            const tar_member *m = &t.m[i];
            fuzz_tar_check(m->name != NULL, "a name");
            fuzz_tar_check(m->offset >= 512 && m->offset % 512 == 0,
                           "data on a block boundary after a header");
            fuzz_tar_check(m->size >= 0 &&
                               (uint64_t)(m->offset + m->size) <= size,
                           "inside the file");
        }
        fuzz_tar_check(tar_read_small(fd, "shard.tar", &t) == 0,
                       "small members read");
    }
    tar_index_free(&t);
    close(fd);
}

#endif
