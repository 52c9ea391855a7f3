/* The public loader API, what each epoch delivers and in which order: every
 * file once with its label, epoch ends, the order, short and dropped last
 * batches, starting at a later epoch. Part of the loader suites
 * (testloader.h), run on the host backend and on simulated CUDA. */
#include "testloader.h"

/* ---- what an epoch delivers ---- */

Test(loader, every_file_is_delivered_once_per_epoch_with_its_folder_label,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.dataset_size, 23);
    cr_assert_eq(in.batches_per_epoch, 5);
    for (int e = 0; e < 3; e++) {
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.nb, in.batches_per_epoch);
        static const int want[] = {5, 5, 5, 5, 3};
        for (int k = 0; k < 5; k++)
            cr_assert_eq(r.counts[k], want[k], "epoch %d batch %d", e, k);
        int seen[23] = {0};
        for (int k = 0; k < r.n; k++) {
            cr_assert(r.idx[k] >= 0 && r.idx[k] < 23);
            seen[r.idx[k]]++;
            const char *path;
            int32_t label;
            cr_assert_eq(pl_loader_sample(l, r.idx[k], &path, &label), 0);
            cr_assert_eq(r.lab[k], folder_label(root, path), "%s", path);
            cr_assert_eq(r.lab[k], label);
            cr_assert_eq(r.st[k], 0);
        }
        for (int i = 0; i < 23; i++)
            cr_assert_eq(seen[i], 1, "epoch %d: index %d seen %d times", e, i,
                         seen[i]);
        run_free(&r);
    }
    fx_done(l, root);
}

Test(loader, epoch_end_comes_once_then_the_next_epoch_starts_at_batch_zero,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 12, 2);
    c.batch_size = 4;
    pl_loader *l = create(&c);
    for (int e = 0; e < 3; e++) {
        for (int k = 0; k < 3; k++) {
            const pl_batch *b;
            cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
            cr_assert_eq(b->epoch, e);
            cr_assert_eq(b->index, k);
            cr_assert_eq(b->count, 4);
            cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        }
        const pl_batch *b = (const pl_batch *)&c; /* must be reset */
        cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END, "epoch %d", e);
        cr_assert_null(b);
    }
    fx_done(l, root);
}

Test(loader, batch_indices_are_the_epoch_order_position_by_position,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader *l = create(&c);
    int64_t *prev = NULL;
    for (int e = 0; e < 3; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.n, 23);
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.idx[k], order[k], "epoch %d position %d", e, k);
        if (prev) /* shuffled anew each epoch */
            cr_assert_neq(memcmp(prev, order, 23 * sizeof *order), 0);
        free(prev);
        prev = order;
        run_free(&r);
    }
    free(prev);
    fx_done(l, root);
}

Test(loader, shuffle_off_gives_file_order, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.shuffle = 0;
    pl_loader *l = create(&c);
    for (int e = 0; e < 2; e++) {
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.n, 23);
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.idx[k], k, "epoch %d position %d", e, k);
        /* File order: class c0's files, then c1's, then c2's. */
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.lab[k],
                         k < 8    ? 0
                         : k < 16 ? 1
                                  : 2,
                         "position %d", k);
        run_free(&r);
    }
    fx_done(l, root);
}

Test(loader, short_last_batch_reports_its_real_count, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    run r[2];
    run_loader(&c, 2, r);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(r[e].nb, 5);
        static const int want[] = {5, 5, 5, 5, 3};
        for (int k = 0; k < 5; k++)
            cr_assert_eq(r[e].counts[k], want[k]);
        run_free(&r[e]);
    }
    tu_rm_rf(root);
}

Test(loader, drop_last_drops_the_short_batch, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.drop_last = 1;
    pl_loader *l = create(&c);
    cr_assert_eq(info_of(l).batches_per_epoch, 4);
    cr_assert_eq(info_of(l).samples_per_epoch, 23);
    for (int e = 0; e < 2; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.nb, 4);
        for (int k = 0; k < 4; k++)
            cr_assert_eq(r.counts[k], 5);
        for (int k = 0; k < 20; k++)
            cr_assert_eq(r.idx[k], order[k]);
        free(order);
        run_free(&r);
    }
    fx_done(l, root);
}

Test(loader, first_epoch_resumes_with_that_epochs_order_and_pixels,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    run from0[5];
    run_loader(&c, 5, from0);

    c.first_epoch = 3;
    pl_loader *l = create(&c);
    for (int e = 3; e < 5; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r); /* asserts epoch fields == e */
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.idx[k], order[k], "epoch %d position %d", e, k);
        assert_same_run(&r, &from0[e], "resumed vs from epoch 0");
        free(order);
        run_free(&r);
    }
    pl_loader_destroy(l);
    for (int e = 0; e < 5; e++)
        run_free(&from0[e]);
    tu_rm_rf(root);
}
