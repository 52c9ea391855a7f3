#include "failures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"

void failures_init(failures *f, int64_t dataset_size)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->dataset_size = dataset_size;
}

void failures_fini(failures *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->items[i].path);
        free(f->items[i].reason);
    }
    free(f->items);
    free(f->where);
    pthread_mutex_destroy(&f->mu);
    memset(f, 0, sizeof *f);
}

static int add_item(failures *f, int64_t index, int code, const char *path,
                    const char *reason, int warnings)
{
    if (!f->where) {
        f->where = calloc((size_t)f->dataset_size, sizeof *f->where);
        if (!f->where)
            return PL_ENOMEM;
    }
    if (grow(&f->items, &f->cap, f->n + 1, sizeof *f->items, 16) < 0)
        return PL_ENOMEM;
    failure *it = &f->items[f->n];
    it->index = index;
    it->code = code;
    it->count = 1;
    it->warnings = warnings;
    it->path = strdup(path);
    it->reason = strdup(reason);
    if (!it->path || !it->reason) {
        free(it->path);
        free(it->reason);
        return PL_ENOMEM;
    }
    f->where[index] = (uint32_t)++f->n;
    return 1;
}

int failures_record(failures *f, int64_t index, int code, const char *path,
                    const char *reason, int warnings)
{
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    if (f->where && f->where[index]) {
        failure *it = &f->items[f->where[index] - 1];
        if (it->code == 0 && code < 0) {
            /* Decoded with warnings before (another crop), bad now: the
             * record becomes the error, met once. */
            char *r = strdup(reason);
            if (r) {
                free(it->reason);
                it->reason = r;
                it->code = code;
                it->warnings = warnings;
                it->count = 1;
                rc = 1;
            } else {
                rc = PL_ENOMEM;
            }
        } else if ((it->code < 0) == (code < 0)) {
            it->count++;
        }
    } else {
        rc = add_item(f, index, code, path, reason, warnings);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int failures_find(failures *f, int64_t index, int *code, char *reason,
                  size_t cap)
{
    pthread_mutex_lock(&f->mu);
    const uint32_t w = f->where ? f->where[index] : 0;
    if (w) {
        *code = f->items[w - 1].code;
        snprintf(reason, cap, "%s", f->items[w - 1].reason);
    }
    pthread_mutex_unlock(&f->mu);
    return w != 0;
}

size_t failures_copy(failures *f, size_t first, pl_failure *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = first; i < f->n && n < cap; i++, n++) {
        const failure *it = &f->items[i];
        out[n] = (pl_failure){.index = it->index,
                              .path = it->path,
                              .code = it->code,
                              .reason = it->reason,
                              .count = it->count,
                              .warnings = it->warnings};
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t failures_count(failures *f)
{
    pthread_mutex_lock(&f->mu);
    const size_t n = f->n;
    pthread_mutex_unlock(&f->mu);
    return n;
}
