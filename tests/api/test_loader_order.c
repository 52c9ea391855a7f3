/* The public loader API, config.order = PL_ORDER_SHARDS: equal steps on
 * every rank with unequal shards and bad samples, each rank's shards read
 * in sequence, every sample once per epoch, exact resume, bytes whatever
 * the worker count, the same order from local and remote shards; folders,
 * lists and a state of the other order refused. The order's exact
 * definition is test_sampler_shards.c's. Part of the loader suites
 * (testloader.h), run on the host backend and on simulated CUDA. */
#include "testloader.h"
#include "testremote.h"

/* Six shards of unequal sizes; sample i of shard k is key s<k>_<i>, its
 * label k. Shard 2's sample 3 is not a JPEG (bad when decoded), shard 4's
 * sample 1 has no image (bad by construction). */
static const int COUNTS[] = {5, 2, 9, 4, 7, 3};
#define NSHARDS 6
#define NSAMPLES 30

typedef struct shards_fx {
    char dir[64];
    char data[128];
    int64_t first[NSHARDS + 1];
    int64_t bad[2]; /* the two bad samples' indexes */
} shards_fx;

static void make_shards(shards_fx *f)
{
    tu_tmpdir(f->dir);
    f->first[0] = 0;
    for (int k = 0; k < NSHARDS; k++) {
        char p[256], cmd[512];
        for (int i = 0; i < COUNTS[k]; i++) {
            snprintf(p, sizeof p, "%s/stage%d/s%d_%02d.jpg", f->dir, k, k, i);
            tu_mkdirs_for(p);
            if (k == 2 && i == 3)
                tu_write_file(p, "not a jpeg", 10);
            else if (!(k == 4 && i == 1))
                tu_write_jpeg(p, 24 + (i % 4) * 7, 20 + (k % 3) * 9,
                              (unsigned)(k * 31 + i), NULL);
            snprintf(p, sizeof p, "%s/stage%d/s%d_%02d.cls", f->dir, k, k, i);
            char label[16];
            snprintf(label, sizeof label, "%d\n", k);
            tu_write_file(p, label, strlen(label));
        }
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s/pack && cd %s/stage%d && tar --format=ustar "
                 "-cf ../pack/s-%d.tar $(ls | sort)",
                 f->dir, f->dir, k, k);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        f->first[k + 1] = f->first[k] + COUNTS[k];
    }
    f->bad[0] = f->first[2] + 3;
    f->bad[1] = f->first[4] + 1;
    snprintf(f->data, sizeof f->data, "%s/pack", f->dir);
}

static void shards_cfg(pl_config *c, const shards_fx *f, int rank, int world)
{
    base_cfg(c, f->data);
    c->order = PL_ORDER_SHARDS;
    c->shuffle_window = 4;
    c->batch_size = 3;
    c->rank = rank;
    c->world_size = world;
}

static int shard_of(const shards_fx *f, int64_t idx)
{
    int k = 0;
    while (f->first[k + 1] <= idx)
        k++;
    return k;
}

static int is_bad(const shards_fx *f, int64_t idx)
{
    return idx == f->bad[0] || idx == f->bad[1];
}

/* 30 samples on 4 ranks: 8 positions each (the stream padded by 2), 3
 * batches each, every epoch, whatever each rank met; no bad sample
 * delivered. */
Test(order_shards, equal_steps_on_every_rank_with_unequal_shards_and_bad_ones,
     .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    int total_bad = 0;
    for (int rank = 0; rank < 4; rank++) {
        pl_config c;
        shards_cfg(&c, &f, rank, 4);
        c.on_error = PL_ON_ERROR_SKIP;
        pl_loader *l = create(&c);
        const pl_info in = info_of(l);
        cr_assert_eq(in.dataset_size, NSAMPLES);
        cr_assert_eq(in.samples_per_epoch, 8);
        cr_assert_eq(in.batches_per_epoch, 3);
        for (int64_t e = 0; e < 2; e++) {
            int64_t *order = epoch_order(l, e);
            for (int j = 0; j < 8; j++)
                total_bad += is_bad(&f, order[j]);
            run r;
            run_epoch(l, e, &r);
            cr_assert_eq(r.nb, 3, "rank %d epoch %lld: %d batches", rank,
                         (long long)e, r.nb);
            cr_assert_eq(r.n, 8, "rank %d: %d samples", rank, r.n);
            for (int k = 0; k < r.n; k++) {
                cr_assert(!is_bad(&f, r.idx[k]), "bad sample %lld delivered",
                          (long long)r.idx[k]);
                cr_assert_eq(r.st[k], 0);
                cr_assert_eq(r.lab[k], shard_of(&f, r.idx[k]));
            }
            free(order);
            run_free(&r);
        }
        pl_loader_destroy(l);
    }
    /* both bad samples were met (and skipped) in each of the two epochs */
    cr_assert_geq(total_bad, 4);
    tu_rm_rf(f.dir);
}

/* With window 1 each rank's order is whole shards in sequence (parts of
 * at most one at each end), the ranks' ranges laid end to end are the
 * epoch's stream, and every sample is in it once (30 = 3 x 10). */
Test(order_shards, ranks_read_consecutive_shards_and_cover_every_sample_once,
     .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    for (int64_t e = 0; e < 3; e++) {
        int seen[NSAMPLES] = {0};
        int64_t stream[NSAMPLES];
        for (int rank = 0; rank < 3; rank++) {
            pl_config c;
            shards_cfg(&c, &f, rank, 3);
            c.shuffle_window = 1;
            pl_loader *l = create(&c);
            cr_assert_eq(info_of(l).samples_per_epoch, 10);
            int64_t *o = epoch_order(l, e);
            for (int j = 0; j < 10; j++) {
                stream[rank * 10 + j] = o[j];
                seen[o[j]]++;
            }
            free(o);
            pl_loader_destroy(l);
        }
        for (int i = 0; i < NSAMPLES; i++)
            cr_assert_eq(seen[i], 1, "epoch %lld sample %d: %d", (long long)e,
                         i, seen[i]);
        /* The stream: each shard entered at its start and left at its end,
         * its samples in file order. */
        int met[NSHARDS] = {0};
        for (int q = 0; q < NSAMPLES; q++) {
            const int k = shard_of(&f, stream[q]);
            if (q > 0 && shard_of(&f, stream[q - 1]) == k) {
                cr_assert_eq(stream[q], stream[q - 1] + 1);
                continue;
            }
            cr_assert_eq(met[k]++, 0, "shard %d entered twice", k);
            cr_assert_eq(stream[q], f.first[k], "shard %d entered mid-way", k);
        }
    }
    tu_rm_rf(f.dir);
}

/* Window 4: each window's samples are those of the same positions of the
 * window-1 order, moved among themselves. And the epochs' shard orders
 * differ. */
Test(order_shards, windows_shuffle_in_place_and_epochs_differ,
     .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    pl_config c;
    shards_cfg(&c, &f, 1, 2);
    pl_loader *w4 = create(&c);
    c.shuffle_window = 1;
    pl_loader *w1 = create(&c);
    int moved = 0, epochs_differ = 0;
    int64_t *b0 = epoch_order(w1, 0);
    for (int64_t e = 0; e < 4; e++) {
        int64_t *a = epoch_order(w4, e), *b = epoch_order(w1, e);
        for (int start = 0; start < 15; start += 4) {
            const int end = start + 4 < 15 ? start + 4 : 15;
            for (int j = start; j < end; j++) {
                int found = 0;
                for (int k = start; k < end; k++)
                    found |= b[k] == a[j];
                cr_assert(found, "epoch %lld position %d left its window",
                          (long long)e, j);
                moved += a[j] != b[j];
            }
        }
        epochs_differ += memcmp(b, b0, 15 * sizeof *b) != 0;
        free(a);
        free(b);
    }
    cr_assert_gt(moved, 20);
    cr_assert_eq(epochs_differ, 3, "epochs 1-3: %d orders unlike epoch 0's",
                 epochs_differ);
    free(b0);
    pl_loader_destroy(w4);
    pl_loader_destroy(w1);
    tu_rm_rf(f.dir);
}

/* Two epochs, in full, from one loader; the same from a loader stopped
 * after two batches of epoch 0 and one that resumes from its state: the
 * same bytes, indexes and labels. */
Test(order_shards, resume_mid_epoch_gives_the_same_bytes, .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    pl_config c;
    shards_cfg(&c, &f, 1, 2);
    run whole[2];
    run_loader(&c, 2, whole);
    cr_assert_eq(whole[0].nb, 5);

    pl_loader *l = create(&c);
    run head;
    cr_assert_eq(run_batches(l, 0, 0, 2, &head), 0);
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    c.resume = &st;
    l = create(&c);
    run tail, next;
    run_batches(l, 0, 2, MAXB + 1, &tail);
    run_epoch(l, 1, &next);
    pl_loader_destroy(l);

    cr_assert_eq(head.n + tail.n, whole[0].n);
    for (int k = 0; k < whole[0].n; k++) {
        const run *p = k < head.n ? &head : &tail;
        const int at = k < head.n ? k : k - head.n;
        cr_assert_eq(p->idx[at], whole[0].idx[k], "position %d", k);
        cr_assert_eq(p->lab[at], whole[0].lab[k]);
        cr_assert(memcmp(sample_at(p, at), sample_at(&whole[0], k),
                         whole[0].sample_bytes) == 0,
                  "position %d: other bytes", k);
    }
    cr_assert_eq(next.n, whole[1].n);
    cr_assert(memcmp(next.bytes, whole[1].bytes,
                     (size_t)next.n * next.sample_bytes) == 0);
    cr_assert(memcmp(next.idx, whole[1].idx, (size_t)next.n * 8) == 0);
    run_free(&head);
    run_free(&tail);
    run_free(&next);
    run_free(&whole[0]);
    run_free(&whole[1]);
    tu_rm_rf(f.dir);
}

Test(order_shards, bytes_do_not_depend_on_the_workers, .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    run a[2], b[2];
    pl_config c;
    shards_cfg(&c, &f, 0, 1);
    c.num_workers = 1;
    run_loader(&c, 2, a);
    c.num_workers = 4;
    run_loader(&c, 2, b);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(a[e].n, NSAMPLES); /* the bad two topped up */
        cr_assert_eq(a[e].n, b[e].n);
        cr_assert(memcmp(a[e].idx, b[e].idx, (size_t)a[e].n * 8) == 0);
        cr_assert(memcmp(a[e].bytes, b[e].bytes,
                         (size_t)a[e].n * a[e].sample_bytes) == 0,
                  "epoch %d: 1 and 4 workers give other bytes", e);
        run_free(&a[e]);
        run_free(&b[e]);
    }
    tu_rm_rf(f.dir);
}

Test(order_shards, folders_and_lists_are_refused_naming_the_field,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_flat(root, &c, 4);
    c.order = PL_ORDER_SHARDS;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.order"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), root), "%s", pl_last_error());
    tu_rm_rf(root);
}

/* A state of the global order resumed with the shard order, or of another
 * window, is refused naming both orders. */
Test(order_shards, a_state_of_another_order_is_refused, .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    pl_config c;
    shards_cfg(&c, &f, 0, 1);
    c.order = PL_ORDER_GLOBAL;
    c.shuffle_window = 0;
    pl_loader *l = create(&c);
    pl_state global, shards;
    cr_assert_eq(pl_loader_state(l, &global), 0);
    pl_loader_destroy(l);
    shards_cfg(&c, &f, 0, 1);
    l = create(&c);
    cr_assert_eq(pl_loader_state(l, &shards), 0);
    pl_loader_destroy(l);

    c.resume = &global;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(),
                              "saved with order global; this loader has "
                              "shards (shuffle_window 4)"),
                       "%s", pl_last_error());
    c.resume = &shards;
    c.shuffle_window = 8;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "shuffle_window 8"), "%s",
                       pl_last_error());
    c.order = PL_ORDER_GLOBAL;
    c.shuffle_window = 0;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "this loader has global"), "%s",
                       pl_last_error());
    c.order = PL_ORDER_SHARDS;
    c.shuffle_window = 4;
    l = create(&c); /* its own order resumes */
    pl_loader_destroy(l);
    tu_rm_rf(f.dir);
}

/* The remote test pack read locally and over http:// (through the node
 * cache): the same indexes and bytes, rank 1 of 3, two epochs. */
Test(order_shards, local_and_remote_shards_give_the_same_order,
     .timeout = TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run a[2], b[2];
    pl_config c;
    base_cfg(&c, f.local);
    c.order = PL_ORDER_SHARDS;
    c.shuffle_window = 3;
    c.rank = 1;
    c.world_size = 3;
    c.cache_dir = f.cache;
    run_loader(&c, 2, a);
    c.data = f.url;
    run_loader(&c, 2, b);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(a[e].n, RT_SAMPLES / 3);
        cr_assert_eq(a[e].n, b[e].n);
        cr_assert(memcmp(a[e].idx, b[e].idx, (size_t)a[e].n * 8) == 0,
                  "epoch %d: other indexes", e);
        cr_assert(memcmp(a[e].bytes, b[e].bytes,
                         (size_t)a[e].n * a[e].sample_bytes) == 0,
                  "epoch %d: other bytes", e);
        run_free(&a[e]);
        run_free(&b[e]);
    }
    rt_pack_down(&f);
}

/* Elastic, as the global order: a state saved mid-epoch by rank 0 of 2,
 * resumed by a job of world size 1, starts that epoch again from its
 * beginning, in the world-1 order, and says so in a warning (samples are
 * delivered again). */
Test(order_shards, another_world_size_starts_the_states_epoch_again,
     .timeout = TIMEOUT)
{
    shards_fx f;
    make_shards(&f);
    pl_config c;
    shards_cfg(&c, &f, 0, 2);
    c.first_epoch = 3;
    pl_loader *l = create(&c);
    run head;
    run_batches(l, 3, 0, 2, &head);
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    run_free(&head);

    shards_cfg(&c, &f, 0, 1);
    c.first_epoch = 0;
    pl_loader *fresh = create(&c);
    int64_t *want = epoch_order(fresh, 3);
    pl_loader_destroy(fresh);
    c.resume = &st;
    log_count lc;
    log_count_init(&lc);
    c.log = counting;
    c.log_ctx = &lc;
    l = create(&c);
    int said = 0; /* create's warning; the workers' skips may follow */
    char first[1024];
    pthread_mutex_lock(&lc.mu);
    for (int i = 0; i < lc.warnings && i < 16; i++)
        said += strstr(lc.warning[i], "world_size 2") &&
                strstr(lc.warning[i], "delivered again");
    snprintf(first, sizeof first, "%s", lc.warnings ? lc.warning[0] : "");
    pthread_mutex_unlock(&lc.mu);
    cr_assert_eq(said, 1, "first warning: %s", first);
    run r;
    run_epoch(l, 3, &r);
    cr_assert_eq(r.n, NSAMPLES);
    int k = 0;
    for (int j = 0; j < NSAMPLES; j++) {
        if (is_bad(&f, want[j]))
            continue; /* skipped, topped up at the end */
        cr_assert_eq(r.idx[k], want[j], "position %d", k);
        k++;
    }
    free(want);
    run_free(&r);
    pl_loader_destroy(l);
    tu_rm_rf(f.dir);
}
