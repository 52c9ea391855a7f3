/* The record of bad files: (dataset index, path, code, reason, count), in
 * the order first met, so nothing is dropped silently whatever the error
 * policy. Thread-safe: workers record, the caller reads. */
#ifndef PINLOAD_FAILURES_H
#define PINLOAD_FAILURES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pinload.h"

typedef struct failure {
    int64_t index;
    int code;
    char *path; /* as the user would write it */
    char *reason;
    int64_t count;
    int warnings;
} failure;

typedef struct failures {
    pthread_mutex_t mu;
    failure *items;
    size_t n, cap;
    uint32_t *where; /* [dataset_size] item + 1, or 0; made on first use */
    int64_t dataset_size;
} failures;

void failures_init(failures *f, int64_t dataset_size);
void failures_fini(failures *f);

/* Record a failure of sample `index` (code < 0), or its decoding with
 * libjpeg warnings (code 0). Returns 1 the first time this index is
 * recorded, and when a record of warnings becomes one of an error (a later
 * crop met worse damage); 0 when only the count grows (a record counts the
 * times met of its own kind); PL_ENOMEM when the record cannot be made. */
int failures_record(failures *f, int64_t index, int code, const char *path,
                    const char *reason, int warnings);

/* The record of `index`: [out] *code and reason (cut to cap). Returns 1 if
 * found, else 0. */
int failures_find(failures *f, int64_t index, int *code, char *reason,
                  size_t cap);

/* pl_loader_failures' copy-out; strings stay owned by f. */
size_t failures_copy(failures *f, size_t first, pl_failure *out, size_t cap);

size_t failures_count(failures *f);

#endif
