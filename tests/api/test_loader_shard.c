/* The public loader API, sharding: ranks cover every index with equal batch
 * counts, drop mode, rank and world from the environment. Part of the
 * loader suites (testloader.h), run on the host backend and on simulated
 * CUDA. */
#include "testloader.h"

/* ---- sharding ---- */

Test(loader, three_ranks_cover_every_index_with_equal_batch_counts,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    int seen[23] = {0};
    int64_t rank0_first = -1, rank2_last = -1;
    for (int rank = 0; rank < 3; rank++) {
        pl_config c;
        base_cfg(&c, root);
        c.rank = rank;
        c.world_size = 3;
        pl_loader *l = create(&c);
        const pl_info in = info_of(l);
        cr_assert_eq(in.rank, rank);
        cr_assert_eq(in.world_size, 3);
        cr_assert_eq(in.dataset_size, 23);
        cr_assert_eq(in.samples_per_epoch, 8); /* ceil(23 / 3) */
        cr_assert_eq(in.batches_per_epoch, 2);
        int64_t *order = epoch_order(l, 0);
        run r;
        run_epoch(l, 0, &r);
        cr_assert_eq(r.nb, 2, "rank %d: %d batches", rank, r.nb);
        cr_assert_eq(r.counts[0], 5);
        cr_assert_eq(r.counts[1], 3);
        for (int k = 0; k < 8; k++) {
            cr_assert_eq(r.idx[k], order[k], "rank %d position %d", rank, k);
            seen[r.idx[k]]++;
        }
        if (rank == 0)
            rank0_first = r.idx[0];
        if (rank == 2)
            rank2_last = r.idx[7];
        free(order);
        run_free(&r);
        pl_loader_destroy(l);
    }
    /* 24 positions for 23 files: the padding wraps to the epoch's start. */
    for (int i = 0; i < 23; i++)
        cr_assert_eq(seen[i], i == rank0_first ? 2 : 1, "index %d seen %d", i,
                     seen[i]);
    cr_assert_eq(rank2_last, rank0_first);
    tu_rm_rf(root);
}

Test(loader, shard_drop_mode_cuts_the_tail_without_repeats, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    int seen[23] = {0};
    for (int rank = 0; rank < 3; rank++) {
        pl_config c;
        base_cfg(&c, root);
        c.rank = rank;
        c.world_size = 3;
        c.shard_mode = PL_SHARD_DROP;
        pl_loader *l = create(&c);
        cr_assert_eq(info_of(l).samples_per_epoch, 7);
        run r;
        run_epoch(l, 0, &r);
        cr_assert_eq(r.n, 7);
        for (int k = 0; k < 7; k++)
            seen[r.idx[k]]++;
        run_free(&r);
        pl_loader_destroy(l);
    }
    int once = 0;
    for (int i = 0; i < 23; i++) {
        cr_assert_leq(seen[i], 1);
        once += seen[i];
    }
    cr_assert_eq(once, 21);
    tu_rm_rf(root);
}

Test(loader, rank_and_world_size_come_from_the_environment, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.rank = 1;
    c.world_size = 3;
    pl_loader *explicit_l = create(&c);
    int64_t *want = epoch_order(explicit_l, 0);
    pl_loader_destroy(explicit_l);

    cr_assert_eq(setenv("RANK", "1", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "3", 1), 0);
    base_cfg(&c, root);
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.rank, 1);
    cr_assert_eq(in.world_size, 3);
    cr_assert_eq(in.samples_per_epoch, 8);
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(r.n, 8);
    for (int k = 0; k < 8; k++)
        cr_assert_eq(r.idx[k], want[k], "position %d", k);
    run_free(&r);
    pl_loader_destroy(l);

    /* An explicit value wins over the environment. */
    c.rank = 0;
    c.world_size = 1;
    l = create(&c);
    cr_assert_eq(info_of(l).world_size, 1);
    cr_assert_eq(info_of(l).samples_per_epoch, 23);
    pl_loader_destroy(l);
    free(want);
    tu_rm_rf(root);
}
