/* The public loader API, bad files under each error policy (skip,
 * substitute, fail): what is delivered, what is recorded and logged. Part
 * of the loader suites (testloader.h), run on the host backend and on
 * simulated CUDA. */
#include "testloader.h"

/* ---- bad files ---- */

typedef struct bad_set {
    int64_t idx[3];
    int code[3];
    char path[3][256];
} bad_set;

/* tu_make_tree(root, 22, 3) plus three bad files, one per class folder. */
static void make_tree_with_bad(char root[64], bad_set *bad)
{
    tu_make_tree(root, 22, 3);
    snprintf(bad->path[0], 256, "%s/c0/x.jpg", root);
    snprintf(bad->path[1], 256, "%s/c1/y.jpg", root);
    snprintf(bad->path[2], 256, "%s/c2/trunc.jpg", root);
    write_not_jpeg(bad->path[0]);
    write_empty(bad->path[1]);
    write_truncated_header(bad->path[2]);
    bad->code[0] = PL_ENOTIMAGE;
    bad->code[1] = PL_ENOTIMAGE;
    bad->code[2] = PL_ECORRUPT;
}

static void find_bad_indices(pl_loader *l, bad_set *bad)
{
    const pl_info in = info_of(l);
    for (int k = 0; k < 3; k++) {
        bad->idx[k] = -1;
        for (int64_t i = 0; i < in.dataset_size; i++) {
            const char *p;
            pl_loader_sample(l, i, &p, NULL);
            if (strcmp(p, bad->path[k]) == 0)
                bad->idx[k] = i;
        }
        cr_assert_geq(bad->idx[k], 0, "%s not listed", bad->path[k]);
    }
}

static int is_bad(const bad_set *bad, int64_t i)
{
    return i == bad->idx[0] || i == bad->idx[1] || i == bad->idx[2];
}

/* Each bad file recorded once, with its path and code, met `count` times
 * (count < 0: at least -count times). */
static void assert_failures(pl_loader *l, const bad_set *bad, int64_t count)
{
    pl_failure f[8];
    size_t n = 99;
    cr_assert_eq(pl_loader_failures(l, 0, f, 8, &n), 0);
    cr_assert_eq(n, 3, "%zu failure records", n);
    for (int k = 0; k < 3; k++) {
        int found = 0;
        for (size_t j = 0; j < n; j++) {
            if (f[j].index != bad->idx[k])
                continue;
            found++;
            cr_assert_str_eq(f[j].path, bad->path[k]);
            cr_assert_eq(f[j].code, bad->code[k], "%s: %s, want %s",
                         bad->path[k], pl_err_name(f[j].code),
                         pl_err_name(bad->code[k]));
            cr_assert_not_null(f[j].reason);
            cr_assert_str_neq(f[j].reason, "");
            if (count > 0)
                cr_assert_eq(f[j].count, count, "%s met %lld times",
                             bad->path[k], (long long)f[j].count);
            else
                cr_assert_geq(f[j].count, -count);
        }
        cr_assert_eq(found, 1, "%s", bad->path[k]);
    }
    /* Paging: from the second record on. */
    cr_assert_eq(pl_loader_failures(l, 1, f, 8, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(pl_loader_failures(l, 3, f, 8, &n), 0);
    cr_assert_eq(n, 0);
}

/* Under SKIP: the first n samples of the epoch's order without the bad
 * files, the order repeating from its start as often as needed. */
static void expected_skip(const int64_t *order, int64_t len, const bad_set *bad,
                          int64_t n, int64_t *out)
{
    int64_t k = 0;
    for (int64_t j = 0; k < n; j++)
        if (!is_bad(bad, order[j % len]))
            out[k++] = order[j % len];
}

static void assert_one_warning_per_bad_file(log_count *lc, const bad_set *bad)
{
    pthread_mutex_lock(&lc->mu);
    cr_assert_eq(lc->warnings, 3, "%d warnings", lc->warnings);
    for (int k = 0; k < 3; k++) {
        int hits = 0;
        for (int w = 0; w < 3; w++)
            hits += strstr(lc->warning[w], bad->path[k]) != NULL;
        cr_assert_eq(hits, 1, "warnings naming %s", bad->path[k]);
    }
    pthread_mutex_unlock(&lc->mu);
}

Test(loader, skip_delivers_the_epoch_order_without_the_bad_files,
     .timeout = TIMEOUT)
{
    char root[64];
    bad_set bad;
    make_tree_with_bad(root, &bad);
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_SKIP;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    find_bad_indices(l, &bad);
    const pl_info in = info_of(l);
    cr_assert_eq(in.dataset_size, 25);
    cr_assert_eq(in.batches_per_epoch, 5);
    const int epochs = 3;
    for (int e = 0; e < epochs; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r);
        /* 22 good samples, then the first three good ones of the order
         * again for the three skipped: five full batches, as nominal. */
        cr_assert_eq(r.nb, 5, "epoch %d", e);
        for (int k = 0; k < 5; k++)
            cr_assert_eq(r.counts[k], 5, "epoch %d batch %d", e, k);
        cr_assert_eq(r.n, 25);
        int64_t want[25];
        expected_skip(order, 25, &bad, 25, want);
        for (int k = 0; k < 25; k++) {
            cr_assert_eq(r.idx[k], want[k], "epoch %d delivered %d", e, k);
            cr_assert_eq(r.st[k], 0);
            const char *p;
            pl_loader_sample(l, r.idx[k], &p, NULL);
            cr_assert_eq(r.lab[k], folder_label(root, p));
        }
        for (int k = 0; k < 3; k++)
            cr_assert_eq(r.idx[22 + k], r.idx[k], "the order wraps around");
        free(order);
        run_free(&r);
    }
    /* The pipeline may have met them once more, early in the next epoch. */
    assert_failures(l, &bad, -epochs);
    pl_loader_destroy(l);
    assert_one_warning_per_bad_file(&lc, &bad);
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

/* A flat folder f00..f23, shuffle off, bad files at f17, f19 and f22. With
 * one ring slot and one device buffer the pipeline runs at most two batches
 * of four into the next epoch, so after three epochs each bad file has been
 * met exactly three times. */
Test(loader, skip_counts_each_bad_file_once_per_epoch, .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 24);
    bad_set bad;
    snprintf(bad.path[0], 256, "%s/f17.jpg", root);
    snprintf(bad.path[1], 256, "%s/f19.jpg", root);
    snprintf(bad.path[2], 256, "%s/f22.jpg", root);
    write_not_jpeg(bad.path[0]);
    write_empty(bad.path[1]);
    write_truncated_header(bad.path[2]);
    bad.code[0] = PL_ENOTIMAGE;
    bad.code[1] = PL_ENOTIMAGE;
    bad.code[2] = PL_ECORRUPT;
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_SKIP;
    c.shuffle = 0;
    c.batch_size = 4;
    c.prefetch = 1;
    c.device_buffers = 1;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    find_bad_indices(l, &bad);
    cr_assert_eq(bad.idx[0], 17);
    cr_assert_eq(bad.idx[1], 19);
    cr_assert_eq(bad.idx[2], 22);
    for (int e = 0; e < 3; e++) {
        run r;
        run_epoch(l, e, &r);
        /* 21 good and f00..f02 again: six batches of four. */
        cr_assert_eq(r.nb, 6);
        cr_assert_eq(r.counts[5], 4);
        static const int64_t want[] = {0,  1,  2,  3,  4,  5,  6,  7,
                                       8,  9,  10, 11, 12, 13, 14, 15,
                                       16, 18, 20, 21, 23, 0,  1,  2};
        cr_assert_eq(r.n, 24);
        for (int k = 0; k < 24; k++)
            cr_assert_eq(r.idx[k], want[k], "epoch %d position %d", e, k);
        run_free(&r);
    }
    assert_failures(l, &bad, 3);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.images_failed, 9);
    pl_loader_destroy(l);
    assert_one_warning_per_bad_file(&lc, &bad);
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

/* 25 files, 3 bad, batches of 4: six full batches with drop_last (24
 * samples: 22 good and two from the order's start), seven without (the
 * last of one). */
Test(loader, skip_with_drop_last_keeps_only_full_batches, .timeout = TIMEOUT)
{
    char root[64];
    bad_set bad;
    make_tree_with_bad(root, &bad);
    for (int drop = 0; drop < 2; drop++) {
        pl_config c;
        base_cfg(&c, root);
        c.on_error = PL_ON_ERROR_SKIP;
        c.batch_size = 4;
        c.drop_last = drop;
        pl_loader *l = create(&c);
        find_bad_indices(l, &bad);
        const int nb = drop ? 6 : 7, n = drop ? 24 : 25;
        cr_assert_eq(info_of(l).batches_per_epoch, nb);
        for (int e = 0; e < 2; e++) {
            int64_t *order = epoch_order(l, e);
            run r;
            run_epoch(l, e, &r);
            cr_assert_eq(r.nb, nb, "drop_last %d", drop);
            for (int k = 0; k < nb; k++)
                cr_assert_eq(r.counts[k], k < 6 ? 4 : 1);
            cr_assert_eq(r.n, n);
            int64_t want[25];
            expected_skip(order, 25, &bad, n, want);
            for (int k = 0; k < n; k++)
                cr_assert_eq(r.idx[k], want[k], "drop_last %d, sample %d", drop,
                             k);
            free(order);
            run_free(&r);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, substitute_keeps_every_position_with_zeros_and_a_status,
     .timeout = TIMEOUT)
{
    char root[64];
    bad_set bad;
    make_tree_with_bad(root, &bad);
    log_count lc;
    log_count_init(&lc);
    for (int f = 0; f < 2; f++) {
        pl_config c;
        base_cfg(&c, root);
        c.on_error = PL_ON_ERROR_SUBSTITUTE;
        c.format = f ? PL_FORMAT_F32_NCHW : PL_FORMAT_U8_NHWC;
        c.log = counting;
        c.log_ctx = &lc;
        pl_loader *l = create(&c);
        find_bad_indices(l, &bad);
        for (int e = 0; e < 2; e++) {
            int64_t *order = epoch_order(l, e);
            run r;
            run_epoch(l, e, &r);
            static const int want[] = {5, 5, 5, 5, 5};
            cr_assert_eq(r.nb, 5);
            for (int k = 0; k < 5; k++)
                cr_assert_eq(r.counts[k], want[k]);
            uint8_t *zero = calloc(1, r.sample_bytes);
            for (int k = 0; k < 25; k++) {
                cr_assert_eq(r.idx[k], order[k], "position %d", k);
                const int zeros =
                    memcmp(sample_at(&r, k), zero, r.sample_bytes) == 0;
                int want_st = 0;
                for (int b = 0; b < 3; b++)
                    if (r.idx[k] == bad.idx[b])
                        want_st = bad.code[b];
                cr_assert_eq(r.st[k], want_st, "position %d (index %lld)", k,
                             (long long)r.idx[k]);
                cr_assert_eq(zeros, want_st != 0, "position %d: zeros %d", k,
                             zeros);
                const char *p;
                pl_loader_sample(l, r.idx[k], &p, NULL);
                cr_assert_eq(r.lab[k], folder_label(root, p));
            }
            free(zero);
            free(order);
            run_free(&r);
        }
        assert_failures(l, &bad, -2);
        pl_loader_destroy(l);
        pthread_mutex_lock(&lc.mu);
        cr_assert_eq(lc.warnings, 3 * (f + 1));
        for (int w = 3 * f; w < 3 * f + 3; w++)
            cr_assert_not_null(strstr(lc.warning[w], "substituted"), "%s",
                               lc.warning[w]);
        pthread_mutex_unlock(&lc.mu);
    }
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

Test(loader, fail_delivers_the_batches_before_the_bad_file_then_sticks,
     .timeout = TIMEOUT)
{
    char root[64], badp[128];
    make_flat(root, 23);
    snprintf(badp, sizeof badp, "%s/f12.jpg", root);
    write_not_jpeg(badp);
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_FAIL;
    c.shuffle = 0;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    for (int k = 0; k < 2; k++) {
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0, "batch %d: %s", k,
                     pl_last_error());
        cr_assert_eq(b->index, k);
        cr_assert_eq(b->count, 5);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(b->indices[i], k * 5 + i);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    for (int again = 0; again < 3; again++) {
        const pl_batch *b = NULL;
        cr_assert_eq(pl_loader_next(l, &b), PL_ENOTIMAGE, "call %d", again);
        cr_assert_null(b);
        cr_assert_not_null(strstr(pl_last_error(), badp), "%s",
                           pl_last_error());
    }
    pl_failure f[4];
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(f[0].index, 12);
    cr_assert_str_eq(f[0].path, badp);
    cr_assert_eq(f[0].code, PL_ENOTIMAGE);
    pl_loader_destroy(l);
    pthread_mutex_lock(&lc.mu);
    cr_assert_eq(lc.warnings, 0, "FAIL reports through pl_loader_next");
    pthread_mutex_unlock(&lc.mu);
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

Test(loader, fail_on_the_first_file_delivers_nothing, .timeout = TIMEOUT)
{
    char root[64], badp[128];
    make_flat(root, 8);
    snprintf(badp, sizeof badp, "%s/f00.jpg", root);
    write_empty(badp);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_FAIL;
    c.shuffle = 0;
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), PL_ENOTIMAGE);
    cr_assert_not_null(strstr(pl_last_error(), badp), "%s", pl_last_error());
    cr_assert_eq(pl_loader_next(l, &b), PL_ENOTIMAGE);
    fx_done(l, root);
}

/* A bad file whose name holds a newline and a tab: the warning about it is
 * still one line (pl_log_fn's promise), the bytes escaped as \n and \t. */
Test(loader, a_warning_about_a_file_named_with_a_newline_is_one_line,
     .timeout = TIMEOUT)
{
    char root[64], bad[128];
    tu_make_tree(root, 6, 2);
    snprintf(bad, sizeof bad, "%s/c0/x\ny\tz.jpg", root);
    tu_write_file(bad, "not a jpeg", 10);
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_SKIP;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    pl_loader_destroy(l);
    cr_assert_eq(lc.warnings, 1);
    cr_assert_null(strchr(lc.warning[0], '\n'), "%s", lc.warning[0]);
    cr_assert_null(strchr(lc.warning[0], '\t'), "%s", lc.warning[0]);
    cr_assert_not_null(strstr(lc.warning[0], "/c0/x\\ny\\tz.jpg"), "%s",
                       lc.warning[0]);
    run_free(&r);
    tu_rm_rf(root);
}
