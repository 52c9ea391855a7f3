/* decode auto's split (workers/balance.h), driven with made-up costs: half
 * each way at first, spread evenly; the GPU's share rising while an
 * offered sample costs less than a decoded one and falling while it costs
 * more, by one step every BALANCE_EVERY samples, never past its floor and
 * ceiling; nothing moves until both ways are measured. */
#include <criterion/criterion.h>

#include "../workers/balance.h"

/* n samples as the balance sends them, each way costing gpu_ns or cpu_ns:
 * how many it offered. */
static int run(balance *b, int n, uint64_t gpu_ns, uint64_t cpu_ns)
{
    int offered = 0;
    for (int i = 0; i < n; i++) {
        const int gpu = balance_take_gpu(b);
        offered += gpu;
        balance_note(b, gpu, gpu ? gpu_ns : cpu_ns);
    }
    return offered;
}

Test(balance, starts_half_each_way_spread_evenly)
{
    balance b;
    balance_init(&b);
    cr_assert_eq(b.share, 0.5);
    /* 0.5, 1.0: CPU then GPU, in turn. */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(balance_take_gpu(&b), i % 2, "sample %d", i);
}

Test(balance, a_cheaper_offer_raises_the_gpus_share_to_its_ceiling)
{
    balance b;
    balance_init(&b);
    /* 16 samples: one step, 0.5 -> 0.5625. */
    run(&b, BALANCE_EVERY, 100, 1000);
    cr_assert_float_eq(b.share, 0.5 + BALANCE_STEP, 1e-12);
    run(&b, 40 * BALANCE_EVERY, 100, 1000);
    cr_assert_float_eq(b.share, 1.0 - BALANCE_FLOOR, 1e-12);
    /* At the ceiling the CPU still gets 1 sample in 256. */
    const int offered = run(&b, 2560, 100, 1000);
    cr_assert(offered >= 2548 && offered <= 2552, "%d of 2560", offered);
}

Test(balance, a_dearer_offer_lowers_it_to_its_floor)
{
    balance b;
    balance_init(&b);
    run(&b, 40 * BALANCE_EVERY, 5000, 1000);
    cr_assert_float_eq(b.share, BALANCE_FLOOR, 1e-12);
    const int offered = run(&b, 2560, 5000, 1000);
    cr_assert(offered >= 9 && offered <= 11, "%d of 2560", offered);
}

Test(balance, it_follows_a_cost_that_changes)
{
    balance b;
    balance_init(&b);
    run(&b, 40 * BALANCE_EVERY, 100, 1000); /* the GPU: cheap */
    cr_assert_gt(b.share, 0.9);
    /* The GPU falls behind: an offer now waits 5 us. The moving mean
     * follows within a few samples, then the share steps down. */
    run(&b, 20 * BALANCE_EVERY, 5000, 1000);
    cr_assert_float_eq(b.share, BALANCE_FLOOR, 1e-12);
}

Test(balance, nothing_moves_until_both_ways_are_measured)
{
    balance b;
    balance_init(&b);
    for (int i = 0; i < 10 * BALANCE_EVERY; i++)
        balance_note(&b, 1, 10); /* offers only */
    cr_assert_eq(b.share, 0.5);
    balance_note(&b, 0, 1000);
    for (int i = 1; i < BALANCE_EVERY; i++)
        balance_note(&b, 1, 10);
    cr_assert_float_eq(b.share, 0.5 + BALANCE_STEP, 1e-12);
}
