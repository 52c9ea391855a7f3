/* The tar shard suites' fixture (test_shards, test_shards_index): a
 * loader's messages kept, a tar of JPEGs, one epoch's pixels and labels
 * read whole and compared. Header-only, like testutil.h. */
#ifndef PINLOAD_TESTSHARDS_H
#define PINLOAD_TESTSHARDS_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"
#include "testloader.h"
#include "testutil.h"

/* The messages of a loader, a line each, a warning's after "warning: ". */
typedef struct kept_log {
    pthread_mutex_t mu;
    char text[8192];
    size_t len;
} kept_log;

static inline void keep_log(void *ctx, pl_log_level level, const char *msg)
{
    kept_log *k = ctx;
    pthread_mutex_lock(&k->mu);
    const int w = snprintf(k->text + k->len, sizeof k->text - k->len, "%s%s\n",
                           level == PL_LOG_WARNING ? "warning: " : "", msg);
    if (w > 0 && (size_t)w < sizeof k->text - k->len)
        k->len += (size_t)w;
    pthread_mutex_unlock(&k->mu);
}

/* dir/stage/k<i>.jpg for i < n (side x side, or side + i wide when
 * widen), then dir/s.tar of them in name order; [out] data: its path. */
static inline void tar_of_jpegs(const char *dir, int n, int side, int widen,
                                char data[128])
{
    char p[256], cmd[512];
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", dir, i);
        tu_write_jpeg(p, side + (widen ? i : 0), side, (unsigned)i, NULL);
    }
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar $(ls | sort)",
             dir);
    tu_system(cmd);
    snprintf(data, 128, "%s/s.tar", dir);
}

typedef struct epoch_bytes {
    uint8_t *pixels;
    int32_t labels[256];
    int n;
    size_t sample_bytes;
} epoch_bytes;

/* One epoch of `data` (shuffled, seed 5, train augment) in `order`,
 * whole. */
static inline void read_epoch_in(const char *data, epoch_bytes *out,
                                 int workers, int32_t order)
{
    pl_config c;
    base_cfg(&c, data);
    c.order = order;
    c.batch_size = 7;
    c.width = c.height = 24;
    c.seed = 5;
    c.num_workers = workers;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s: %s", data, pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    out->sample_bytes = info.sample_bytes;
    out->pixels = malloc(info.sample_bytes * 256);
    out->n = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        memcpy(out->pixels + (size_t)out->n * info.sample_bytes, b->data,
               b->bytes);
        memcpy(out->labels + out->n, b->labels, (size_t)b->count * 4);
        out->n += b->count;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s: %s", data, pl_last_error());
    pl_loader_destroy(l);
}

static inline void read_epoch(const char *data, epoch_bytes *out, int workers)
{
    read_epoch_in(data, out, workers, PL_ORDER_GLOBAL);
}

static inline void assert_same_epoch(const epoch_bytes *a, const epoch_bytes *b,
                                     const char *what)
{
    cr_assert_eq(a->n, b->n, "%s: %d samples against %d", what, b->n, a->n);
    for (int i = 0; i < a->n; i++)
        cr_assert_eq(a->labels[i], b->labels[i], "%s: sample %d's label", what,
                     i);
    cr_assert(memcmp(a->pixels, b->pixels, a->sample_bytes * (size_t)a->n) == 0,
              "%s: pixels differ from the folder's", what);
}

#endif
