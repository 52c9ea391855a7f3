/* The public loader API when the caller keeps batches: with
 * config.max_device_buffers the pool grows instead of PL_EBUSY, each kept
 * batch keeps its bytes, the growth is bounded, counted and said once.
 * Part of the loader suites (testloader.h), run on the host backend and on
 * simulated CUDA. */
#include <stdatomic.h>

#include "testloader.h"

#define KEEP 20

/* Every batch of epochs 0 and 1 of c (23 samples, batches of 5: 5 a
 * epoch), all kept until the end, then compared with a run that releases
 * each batch at once: the same indices, labels and bytes. */
static void keep_two_epochs(pl_config *c, int device_buffers)
{
    run want[2];
    c->device_buffers = device_buffers;
    c->max_device_buffers = 0;
    run_loader(c, 2, want);

    c->max_device_buffers = -1;
    log_count lc;
    log_count_init(&lc);
    c->log = counting;
    c->log_ctx = &lc;
    pl_loader *l = create(c);
    const pl_info in = info_of(l);
    const pl_batch *kept[KEEP];
    int n = 0;
    for (int e = 0; e < 2; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            cr_assert_lt(n, KEEP);
            cr_assert_eq(b->epoch, e);
            kept[n++] = b;
        }
        cr_assert_eq(rc, PL_EPOCH_END, "%s (%s)", pl_err_name(rc),
                     pl_last_error());
    }
    cr_assert_eq(n, 2 * in.batches_per_epoch);
    /* Exactly the batches held: the pool grows only when the caller holds
     * every buffer and asks for one more. */
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, (uint64_t)n, "%llu buffers for %d kept",
                 (unsigned long long)st.device_buffers, n);
    uint8_t *px = malloc(in.batch_bytes);
    for (int k = 0; k < n; k++) {
        const run *w = &want[kept[k]->epoch];
        const int bi = (int)kept[k]->index;
        int first = 0;
        for (int j = 0; j < bi; j++)
            first += w->counts[j];
        cr_assert_eq(kept[k]->count, w->counts[bi], "batch %d", k);
        tu_batch_pixels(kept[k], px);
        for (int i = 0; i < kept[k]->count; i++) {
            cr_assert_eq(kept[k]->indices[i], w->idx[first + i]);
            cr_assert_eq(kept[k]->labels[i], w->lab[first + i]);
        }
        cr_assert_eq(memcmp(px, sample_at(w, first),
                            (size_t)kept[k]->count * in.sample_bytes),
                     0, "kept batch %d (epoch %lld, batch %d) changed", k,
                     (long long)kept[k]->epoch, bi);
    }
    free(px);
    /* Released in another order, the pool is reused: another epoch kept
     * whole needs no new buffer. */
    for (int k = n - 1; k >= 0; k--)
        cr_assert_eq(pl_loader_release(l, kept[k], NULL), 0, "%s",
                     pl_last_error());
    const pl_batch *b;
    int m = 0;
    while (pl_loader_next(l, &b) == 0)
        kept[m++] = b;
    cr_assert_eq(m, in.batches_per_epoch);
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, (uint64_t)n);
    pl_loader_destroy(l); /* with every batch of epoch 2 held */
    /* One notice at create, one for the growth however many buffers. */
    cr_assert_eq(lc.warnings, 0);
    cr_assert_eq(lc.notices, n > device_buffers ? 2 : 1);
    for (int e = 0; e < 2; e++)
        run_free(&want[e]);
}

Test(loader, kept_batches_keep_their_bytes_as_the_pool_grows,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    keep_two_epochs(&c, 1);
    keep_two_epochs(&c, 2);
    tu_rm_rf(root);
}

Test(loader, the_growth_stops_at_max_device_buffers_with_ebusy,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.device_buffers = 2;
    c.max_device_buffers = 3;
    pl_loader *l = create(&c);
    const pl_batch *b[3], *x;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(pl_loader_next(l, &b[i]), 0, "%s", pl_last_error());
        cr_assert_eq(b[i]->index, i);
    }
    cr_assert_eq(pl_loader_next(l, &x), PL_EBUSY);
    cr_assert_not_null(strstr(pl_last_error(), "max_device_buffers"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "all 3 batches"), "%s",
                       pl_last_error());
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, 3);
    /* Nothing was lost: a release lets the epoch go on in order. */
    cr_assert_eq(pl_loader_release(l, b[1], NULL), 0);
    cr_assert_eq(pl_loader_next(l, &x), 0, "%s", pl_last_error());
    cr_assert_eq(x->index, 3);
    fx_done(l, root);
}

/* Without max_device_buffers the pool never grows (the C default). */
Test(loader, the_default_pool_does_not_grow, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.device_buffers = 2;
    pl_loader *l = create(&c);
    const pl_batch *b0, *b1, *x;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_next(l, &x), PL_EBUSY);
    cr_assert_not_null(strstr(pl_last_error(), "config.max_device_buffers "
                                               "lets the pool grow"),
                       "%s", pl_last_error());
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, 2);
    fx_done(l, root);
}

/* A batch held while the caller asks for the next one (the plainest Python
 * loop does this) costs no buffer: the prefetched batch is there. */
Test(loader, holding_one_batch_while_asking_for_the_next_adds_no_buffer,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.device_buffers = 2;
    c.max_device_buffers = -1;
    pl_loader *l = create(&c);
    const pl_batch *prev = NULL, *b;
    for (int e = 0; e < 3; e++) {
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            if (prev)
                cr_assert_eq(pl_loader_release(l, prev, NULL), 0);
            prev = b;
        }
        cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    }
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, 2);
    cr_assert_eq(st.batches, 15);
    fx_done(l, root);
}

/* Two threads share one loader, each keeping what it takes: every sample
 * of the epoch reaches exactly one of them. Together they ask for the
 * epoch's 5 batches (a ticket each), so neither runs into the next epoch. */
typedef struct taker {
    pl_loader *l;
    atomic_int *tickets;
    int n;
    const pl_batch *got[16];
} taker;

static void *take_all(void *arg)
{
    taker *t = arg;
    const pl_batch *b;
    while (atomic_fetch_add(t->tickets, 1) < 5) {
        cr_assert_eq(pl_loader_next(t->l, &b), 0, "%s", pl_last_error());
        t->got[t->n++] = b;
        sched_yield();
    }
    return NULL;
}

Test(loader, two_threads_keeping_batches_share_an_epoch, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.device_buffers = 1;
    c.max_device_buffers = -1;
    pl_loader *l = create(&c);
    int64_t *order = epoch_order(l, 0);
    atomic_int tickets = 0;
    taker t[2] = {{.l = l, .tickets = &tickets}, {.l = l, .tickets = &tickets}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, take_all, &t[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    int seen[23] = {0};
    int batches = 0;
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < t[i].n; k++) {
            const pl_batch *b = t[i].got[k];
            cr_assert_eq(b->epoch, 0);
            for (int j = 0; j < b->count; j++) {
                cr_assert_eq(b->indices[j], order[b->index * 5 + j]);
                seen[b->indices[j]]++;
            }
            batches++;
        }
    }
    cr_assert_eq(batches, 5, "each batch once: %d", batches);
    for (int i = 0; i < 23; i++)
        cr_assert_eq(seen[i], 1, "sample %d seen %d times", i, seen[i]);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END);
    free(order);
    fx_done(l, root);
}

/* The growth notice comes without the hand-off's lock: a log callback
 * may call back into the loader (here pl_loader_stats, which takes it). */
typedef struct reentrant {
    pl_loader *_Atomic l;
    atomic_int calls;
} reentrant;

static void stats_from_log(void *ctx, pl_log_level level, const char *msg)
{
    (void)level;
    reentrant *r = ctx;
    pl_loader *l = atomic_load(&r->l);
    if (l && strstr(msg, "max_device_buffers")) {
        pl_stats st;
        cr_assert_eq(pl_loader_stats(l, &st), 0);
        atomic_fetch_add(&r->calls, 1);
    }
}

Test(loader, the_growth_notice_may_call_back_into_the_loader,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.device_buffers = 1;
    c.max_device_buffers = -1;
    reentrant r = {0};
    c.log = stats_from_log;
    c.log_ctx = &r;
    pl_loader *l = create(&c);
    atomic_store(&r.l, l);
    const pl_batch *b0, *b1;
    cr_assert_eq(pl_loader_next(l, &b0), 0, "%s", pl_last_error());
    cr_assert_eq(pl_loader_next(l, &b1), 0, "%s", pl_last_error());
    cr_assert_eq(b1->index, 1);
    cr_assert_eq(atomic_load(&r.calls), 1, "the notice, once");
    fx_done(l, root);
}
