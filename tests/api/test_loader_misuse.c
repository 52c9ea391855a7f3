/* The public loader API, the caller's mistakes: PL_EBUSY while holding
 * every buffer, releasing twice or releasing what is not a batch. Part of
 * the loader suites (testloader.h), run on the host backend and on
 * simulated CUDA. */
#include "testloader.h"

/* ---- the caller's mistakes ---- */

Test(loader, next_while_holding_every_device_buffer_is_ebusy,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.device_buffers = 1;
    pl_loader *l = create(&c);
    int64_t *order = epoch_order(l, 0);
    const pl_batch *b0, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(b0->index, 0);
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY);
    cr_assert_not_null(strstr(pl_last_error(), "device_buffers"), "%s",
                       pl_last_error());
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY, "and again");
    /* Nothing was lost: releasing lets the epoch go on in order. */
    cr_assert_eq(pl_loader_release(l, b0, NULL), 0);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->index, 1);
    for (int i = 0; i < b->count; i++)
        cr_assert_eq(b->indices[i], order[5 + i]);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    free(order);
    pl_loader_destroy(l);

    /* With two buffers, holding two. */
    c.device_buffers = 2;
    l = create(&c);
    const pl_batch *b1;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY);
    cr_assert_eq(pl_loader_release(l, b1, NULL), 0);
    cr_assert_eq(pl_loader_next(l, &b), 0);
    cr_assert_eq(b->index, 2);
    pl_loader_destroy(l); /* with two held */
    tu_rm_rf(root);
}

Test(loader, releasing_a_batch_twice_is_einval, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    cr_assert_eq(pl_loader_release(l, b, NULL), PL_EINVAL);
    cr_assert_str_neq(pl_last_error(), "");
    /* The loader is unharmed. */
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->index, 1);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    fx_done(l, root);
}

/* The second release comes while the prefetcher is filling that same
 * buffer again (a skipped file makes it wait for the next ring slot, whose
 * large images take a while to decode). Still PL_EINVAL; a TSan build also
 * checks that the error path does not read the batch the prefetcher is
 * writing. */
Test(loader, releasing_twice_while_the_buffer_refills_is_einval,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 10; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/f%d.jpg", root, i);
        if (i == 5)
            write_not_jpeg(p);
        else if (i >= 6)
            tu_write_jpeg(p, 1600, 1200, (unsigned)i, NULL);
        else
            tu_write_jpeg(p, 40, 32, (unsigned)i, NULL);
    }
    pl_config c;
    base_cfg(&c, root);
    c.batch_size = 2;
    c.shuffle = 0;
    c.num_workers = 1;
    c.prefetch = 1;
    c.device_buffers = 2;
    c.on_error = PL_ON_ERROR_SKIP;
    pl_loader *l = create(&c);
    const pl_batch *b0, *b1, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_release(l, b0, NULL), 0);
    /* Wait until f4 and f5 are done: the prefetcher then puts f4 in b0's
     * buffer and waits for f6. */
    pl_stats st;
    do {
        usleep(200);
        pl_loader_stats(l, &st);
    } while (st.images_decoded < 5 || st.images_failed < 1);
    usleep(1000);
    cr_assert_eq(pl_loader_release(l, b0, NULL), PL_EINVAL);
    cr_assert_eq(pl_loader_release(l, b1, NULL), 0);
    /* The epoch goes on: f4 and f6, f7 and f8, then f9 and f0, which takes
     * the skipped f5's place at the end (the order wraps around). */
    static const int64_t want[][2] = {{4, 6}, {7, 8}, {9, 0}};
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        cr_assert_eq(b->index, 2 + k);
        cr_assert_eq(b->count, 2);
        for (int i = 0; i < b->count; i++)
            cr_assert_eq(b->indices[i], want[k][i]);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END);
    fx_done(l, root);
}

Test(loader, releasing_what_is_not_a_batch_is_einval, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0);
    pl_batch fake = *b;
    cr_assert_eq(pl_loader_release(l, &fake, NULL), PL_EINVAL);
    cr_assert_eq(pl_loader_release(l, NULL, NULL), PL_EINVAL);
    cr_assert_eq(
        pl_loader_release(l, (const pl_batch *)((const char *)b + 8), NULL),
        PL_EINVAL);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "the real one still is");
    cr_assert_eq(pl_loader_next(NULL, &b), PL_EINVAL);
    cr_assert_eq(pl_loader_next(l, NULL), PL_EINVAL);
    fx_done(l, root);
}
