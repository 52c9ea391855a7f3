/* Recording what loaders deliver, for the suites that compare runs
 * (test_loader_*, test_resume): every batch checked against what it says of
 * itself, copied out sample by sample, compared byte for byte. Header-only,
 * like testutil.h. */
#ifndef PINLOAD_TESTRUN_H
#define PINLOAD_TESTRUN_H

#include "pinload.h"
#include "testcuda.h"
#include "testutil.h"

#define MAXS 256 /* samples per recorded epoch, at most */
#define MAXB 64  /* batches per recorded epoch, at most */

static inline pl_info info_of(const pl_loader *l)
{
    pl_info in;
    cr_assert_eq(pl_loader_info(l, &in), 0);
    return in;
}

static inline int64_t *epoch_order(const pl_loader *l, int64_t epoch)
{
    const pl_info in = info_of(l);
    int64_t *o = malloc((size_t)in.samples_per_epoch * sizeof *o);
    cr_assert_eq(pl_loader_epoch_order(l, epoch, o, in.samples_per_epoch), 0,
                 "%s", pl_last_error());
    return o;
}

/* ---- recording epochs ---- */

/* What one epoch delivered, sample by sample in delivery order. */
typedef struct run {
    int64_t epoch;
    int nb;
    int counts[MAXB];
    int n;
    int64_t idx[MAXS];
    int32_t lab[MAXS];
    int32_t st[MAXS];
    size_t sample_bytes;
    uint8_t *bytes; /* [n][sample_bytes] */
} run;

static inline void run_free(run *r)
{
    free(r->bytes);
    r->bytes = NULL;
}

static inline const uint8_t *sample_at(const run *r, int k)
{
    return r->bytes + (size_t)k * r->sample_bytes;
}

/* Reads at most `max` batches of `epoch`, numbered from `first`, or up to
 * and including PL_EPOCH_END, checking what every batch says of itself,
 * copying it out and releasing it. Returns 1 if PL_EPOCH_END came. */
static inline int run_batches(pl_loader *l, int64_t epoch, int first, int max,
                              run *r)
{
    const pl_info in = info_of(l);
    memset(r, 0, sizeof *r);
    r->epoch = epoch;
    r->sample_bytes = in.sample_bytes;
    r->bytes = malloc(in.sample_bytes * MAXS);
    while (r->nb < max) {
        const pl_batch *b = NULL;
        const int rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END)
            return 1;
        cr_assert_eq(rc, 0, "epoch %lld batch %d: %s (%s)", (long long)epoch,
                     first + r->nb, pl_err_name(rc), pl_last_error());
        cr_assert_not_null(b);
        cr_assert_eq(b->epoch, epoch, "batch of epoch %lld in epoch %lld",
                     (long long)b->epoch, (long long)epoch);
        cr_assert_eq(b->index, first + r->nb, "batch index %lld, want %d",
                     (long long)b->index, first + r->nb);
        cr_assert(b->count >= 1 && b->count <= in.batch_size, "count %d",
                  b->count);
        cr_assert_eq(b->bytes, (size_t)b->count * in.sample_bytes);
        cr_assert_not_null(b->data);
        if (tu_on_cuda()) {
            cr_assert_not_null(b->ready, "CUDA: the batch has a ready event");
        } else {
            cr_assert_eq(b->host, b->data, "host backend: host is the data");
            cr_assert_null(b->ready);
        }
        cr_assert_lt(r->nb, MAXB);
        cr_assert_leq(r->n + b->count, MAXS);
        r->counts[r->nb++] = b->count;
        tu_batch_pixels(b, r->bytes + (size_t)r->n * in.sample_bytes);
        for (int i = 0; i < b->count; i++) {
            r->idx[r->n] = b->indices[i];
            r->lab[r->n] = b->labels[i];
            r->st[r->n] = b->status[i];
            r->n++;
        }
        cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    }
    return 0;
}

/* Reads batches up to and including PL_EPOCH_END. */
static inline void run_epoch(pl_loader *l, int64_t epoch, run *r)
{
    run_batches(l, epoch, 0, MAXB + 1, r);
}

/* Creates a loader from c, records `epochs` epochs from c->first_epoch,
 * destroys it. */
static inline void run_loader(const pl_config *c, int epochs, run *out)
{
    pl_loader *l = create(c);
    for (int e = 0; e < epochs; e++)
        run_epoch(l, c->first_epoch + e, &out[e]);
    pl_loader_destroy(l);
}

/* Same batches, same samples, same bytes. */
static inline void assert_same_run(const run *a, const run *b, const char *what)
{
    cr_assert_eq(a->nb, b->nb, "%s: %d vs %d batches", what, a->nb, b->nb);
    for (int k = 0; k < a->nb; k++)
        cr_assert_eq(a->counts[k], b->counts[k], "%s: batch %d count", what, k);
    cr_assert_eq(a->n, b->n, "%s", what);
    cr_assert_eq(a->sample_bytes, b->sample_bytes, "%s", what);
    for (int k = 0; k < a->n; k++) {
        cr_assert_eq(a->idx[k], b->idx[k], "%s: position %d", what, k);
        cr_assert_eq(a->lab[k], b->lab[k], "%s: position %d", what, k);
        cr_assert_eq(a->st[k], b->st[k], "%s: position %d", what, k);
    }
    cr_assert_eq(memcmp(a->bytes, b->bytes, a->sample_bytes * (size_t)a->n), 0,
                 "%s: pixels differ (epoch %lld)", what, (long long)a->epoch);
}

#endif
