/* prefetch PL_AUTO through the public API: the ring starts at 2 slots and
 * grows when one slow sample holds its batch back while the other worker
 * waits for a slot (a hook that sleeps on every tenth sample makes one),
 * delivering the bytes of prefetch 2 meanwhile; a slow training step keeps
 * 2 and says so once; a slot the memory cannot be had for ends the
 * growing with a notice (simulated CUDA: cudaHostAlloc refused); 0 is
 * refused naming PL_AUTO. Part of the loader suites (testloader.h): host
 * backend and simulated CUDA. */
#include <dlfcn.h>
#include <stdlib.h>

#include "testloader.h"

/* 1 when the loaders run on the simulated runtime (it exports its own
 * fault table; a real libcudart does not). */
static int on_sim(void)
{
    return tu_on_cuda() && dlsym(RTLD_DEFAULT, "cudasim_inject") != NULL;
}

/* Every tenth sample takes 60 ms: in file order, the first of every other
 * batch of 5, so one worker holds that batch while the other fills the
 * next and then waits for a slot. The pixels are left alone. */
static int slow_tenth(void *ctx, pl_image *img, int64_t index, int64_t epoch,
                      uint64_t key)
{
    (void)ctx, (void)img, (void)epoch, (void)key;
    if (index % 10 == 0)
        nap_ms(60);
    return 0;
}

static void stalling_cfg(pl_config *c, const char *root)
{
    base_cfg(c, root);
    c->shuffle = 0;
    c->num_workers = 2;
    c->sample_fn = slow_tenth;
}

static pl_stats stats_of(const pl_loader *l)
{
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    return st;
}

Test(loader_prefetch, a_stalled_ring_grows_and_delivers_the_same_bytes,
     .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 40);
    notice_log a;
    notice_log_init(&a, "prefetch PL_AUTO: ");
    pl_config fixed, grows;
    stalling_cfg(&fixed, root);
    stalling_cfg(&grows, root);
    grows.prefetch = PL_AUTO;
    grows.log = count_notice;
    grows.log_ctx = &a;

    pl_loader *l = create(&grows);
    const pl_info in = info_of(l);
    cr_assert_eq(in.prefetch, 2, "it starts at 2 slots");
    cr_assert_eq(in.prefetch_max, 8, "a few KiB a slot: the bound is 8");
    cr_assert_eq(stats_of(l).prefetch_active, 2);
    /* 12 epochs of 8 batches, each epoch holding 4 slow samples (240 ms of
     * a worker's time): some 12 windows of 250 ms, each with the caller
     * waiting while a worker waits for a slot, until the ring is deep
     * enough. Recorded, and compared with prefetch 2's. */
    enum { EPOCHS = 12 };
    run x[EPOCHS], y[EPOCHS];
    for (int e = 0; e < EPOCHS; e++)
        run_batches(l, e, 0, MAXB, &y[e]);
    const pl_stats st = stats_of(l);
    cr_assert_gt(st.prefetch_active, 2, "the ring stayed at %llu slots",
                 (unsigned long long)st.prefetch_active);
    cr_assert_leq(st.prefetch_active, 8);
    cr_assert_eq(st.pinned_bytes,
                 st.prefetch_active * (uint64_t)in.batch_bytes,
                 "%llu bytes locked for %llu slots of %zu",
                 (unsigned long long)st.pinned_bytes,
                 (unsigned long long)st.prefetch_active, in.batch_bytes);
    pl_loader_destroy(l);
    run_loader(&fixed, EPOCHS, x);
    for (int e = 0; e < EPOCHS; e++) {
        assert_same_run(&x[e], &y[e], "PL_AUTO's growing ring against 2");
        run_free(&x[e]);
        run_free(&y[e]);
    }
    tu_rm_rf(root);
}

Test(loader_prefetch, a_slow_step_keeps_two_slots_and_says_so_once,
     .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 40);
    notice_log a;
    notice_log_init(&a, "prefetch PL_AUTO: ");
    pl_config c;
    base_cfg(&c, root);
    c.prefetch = PL_AUTO;
    c.log = count_notice;
    c.log_ctx = &a;
    pl_loader *l = create(&c);
    /* A 40 ms step against 5 tiny images a batch: the workers wait for
     * slots, the caller never waits; settled after 8 windows (2 s). */
    const pl_stats st = run_steps(l, 40, 20.0, &a);
    cr_assert_eq(notices_said(&a), 1, "the settled notice, once");
    cr_assert_eq(st.prefetch_active, 2);
    cr_assert(strstr(a.last, "2 slots of at most 8"), "%s", a.last);
    cr_assert(strstr(a.last, "settled"), "%s", a.last);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader_prefetch, a_slot_that_cannot_be_had_ends_the_growing,
     .timeout = TIMEOUT)
{
    if (!on_sim())
        cr_skip_test("the refused allocation is the simulator's");
    /* The ring's first allocation is the process's first cudaHostAlloc;
     * the second, the first grown slot's, is refused. */
    cr_assert_eq(setenv("CUDASIM_FAULTS",
                        "cudaHostAlloc@2:cudaErrorMemoryAllocation", 1),
                 0);
    char root[64];
    make_flat(root, 40);
    notice_log a;
    notice_log_init(&a, "prefetch PL_AUTO: the ring stays at");
    pl_config c;
    stalling_cfg(&c, root);
    c.prefetch = PL_AUTO;
    c.log = count_notice;
    c.log_ctx = &a;
    pl_loader *l = create(&c);
    run y[6];
    for (int e = 0; e < 6; e++)
        run_batches(l, e, 0, MAXB, &y[e]);
    cr_assert_eq(notices_said(&a), 1, "said once: %s", a.last);
    cr_assert_eq(stats_of(l).prefetch_active, 2);
    pl_loader_destroy(l);
    unsetenv("CUDASIM_FAULTS");
    run x[6];
    stalling_cfg(&c, root);
    run_loader(&c, 6, x);
    for (int e = 0; e < 6; e++) {
        assert_same_run(&x[e], &y[e], "a ring that could not grow");
        run_free(&x[e]);
        run_free(&y[e]);
    }
    tu_rm_rf(root);
}

Test(loader_prefetch, zero_slots_is_refused_naming_auto)
{
    pl_config c;
    base_cfg(&c, "/nonexistent");
    c.prefetch = 0;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert(strstr(pl_last_error(), "config.prefetch: 0 slots"), "%s",
              pl_last_error());
    cr_assert(strstr(pl_last_error(), "PL_AUTO"), "%s", pl_last_error());
    c.prefetch = -2;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "prefetch"), "%s", pl_last_error());
}
