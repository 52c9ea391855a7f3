/* num_workers PL_AUTO through the public API: the bytes of one worker,
 * the threads num_workers 0 starts, a slow training step that settles on
 * one worker (said in a notice, shown in pl_stats.workers_active), and a
 * caller that only takes batches keeping every worker. Part of the loader
 * suites (testloader.h): host backend and simulated CUDA. */
#include "testloader.h"

static int default_workers(const char *root)
{
    pl_config c;
    base_cfg(&c, root);
    c.num_workers = 0;
    pl_loader *l = create(&c);
    const int n = info_of(l).num_workers;
    pl_loader_destroy(l);
    return n;
}

Test(loader_workers, auto_delivers_the_bytes_of_one_worker, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config a, b;
    base_cfg(&a, root);
    base_cfg(&b, root);
    a.num_workers = 1;
    b.num_workers = PL_AUTO;
    run x[2], y[2];
    run_loader(&a, 2, x);
    run_loader(&b, 2, y);
    for (int e = 0; e < 2; e++) {
        assert_same_run(&x[e], &y[e], "PL_AUTO against 1 worker");
        run_free(&x[e]);
        run_free(&y[e]);
    }
    /* The threads are those num_workers 0 starts, all taking samples at
     * first. */
    pl_loader *l = create(&b);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(info_of(l).num_workers, default_workers(root));
    cr_assert_eq(st.workers_active, (uint64_t)info_of(l).num_workers);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader_workers, a_fixed_count_is_the_active_count, .timeout = TIMEOUT)
{
    pl_config c;
    char root[64];
    fx_flat(root, &c, 10);
    c.num_workers = 3;
    pl_loader *l = create(&c);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.workers_active, 3);
    fx_done(l, root);
}

Test(loader_workers, auto_out_of_range_values_are_refused)
{
    pl_config c;
    base_cfg(&c, "/nonexistent");
    c.num_workers = -2;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert(strstr(pl_last_error(), "num_workers"), "%s", pl_last_error());
}

Test(loader_workers, a_slow_step_settles_on_one_worker_and_says_so,
     .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 40);
    const int n = default_workers(root);
    if (n < 2) {
        tu_rm_rf(root);
        cr_skip_test("this process may use %d CPU: nothing to shed", n);
    }
    notice_log a;
    notice_log_init(&a, "num_workers PL_AUTO");
    pl_config c;
    base_cfg(&c, root);
    c.num_workers = PL_AUTO;
    c.log = count_notice;
    c.log_ctx = &a;
    pl_loader *l = create(&c);
    /* A step of 25 ms against 5 tiny images a batch (well under 1 ms of
     * a worker's time): one worker keeps up. Settling takes 2 windows
     * per worker shed and 8 more: about 2.5 s for 2 workers. */
    const pl_stats st = run_steps(l, 25, 20.0, &a);
    cr_assert_eq(a.said, 1, "the settled notice, once");
    cr_assert_eq(st.workers_active, 1, "%llu workers",
                 (unsigned long long)st.workers_active);
    char want[64];
    snprintf(want, sizeof want, "1 of %d workers take samples", n);
    cr_assert(strstr(a.last, want), "%s", a.last);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader_workers, a_caller_that_only_takes_batches_keeps_every_worker,
     .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 40);
    notice_log a;
    notice_log_init(&a, "num_workers PL_AUTO");
    pl_config c;
    base_cfg(&c, root);
    c.num_workers = PL_AUTO;
    c.log = count_notice;
    c.log_ctx = &a;
    pl_loader *l = create(&c);
    const int n = info_of(l).num_workers;
    const pl_stats st = run_steps(l, 0, 3.0, &a);
    cr_assert_eq(st.workers_active, (uint64_t)n, "%llu of %d workers",
                 (unsigned long long)st.workers_active, n);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}
