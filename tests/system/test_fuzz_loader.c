/* The loader fuzz harness (fuzz/loader_harness.h) in the regular suite:
 * inputs from a fixed pseudo-random sequence, each a configuration and a
 * hostile file tree, and every input in tests/fuzz/regressions-loader.
 * Each must keep the harness's contract (no hang, counts and ranges,
 * equal steps under SKIP and SUBSTITUTE, destroy's bound). */
#include <criterion/criterion.h>

#include "fuzz/loader_harness.h"
#include "testutil.h"

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* n inputs of 512 pseudo-random bytes from `first`, each through one. */
static void run_seeds_with(void (*one)(const uint8_t *, size_t, const char *),
                           uint64_t first, int n)
{
    char scratch[64];
    tu_tmpdir(scratch);
    for (int i = 0; i < n; i++) {
        uint64_t s = first + (uint64_t)i * 0x9e3779b97f4a7c15u;
        uint8_t input[512];
        for (size_t k = 0; k < sizeof input; k++)
            input[k] = (uint8_t)(next_rand(&s) >> 56);
        if (getenv("PINLOAD_FUZZ_VERBOSE"))
            fprintf(stderr, "-- input %d\n", i);
        one(input, sizeof input, scratch);
    }
    tu_rm_rf(scratch);
}

static void run_seeds(uint64_t first, int n)
{
    run_seeds_with(fuzz_loader_one, first, n);
}

Test(fuzz_loader, random_configs_and_trees_keep_the_contract_a, .timeout = 300)
{
    run_seeds(1, TU_SANITIZED ? 40 : 120);
}

Test(fuzz_loader, random_configs_and_trees_keep_the_contract_b, .timeout = 300)
{
    run_seeds(7777, TU_SANITIZED ? 40 : 120);
}

static char replay_scratch[64];

static void replay_one(const uint8_t *bytes, size_t len)
{
    fuzz_loader_one(bytes, len, replay_scratch);
}

Test(fuzz_loader, every_regression_input_keeps_the_contract, .timeout = 300)
{
    tu_tmpdir(replay_scratch);
    const int n = tu_each_file("tests/fuzz/regressions-loader", replay_one);
    tu_rm_rf(replay_scratch);
    cr_assert_gt(n, 0, "no input in tests/fuzz/regressions-loader");
    cr_log_info("%d regression inputs", n);
}

/* The same contract over tar shards (fuzz_shards_one): random shards,
 * damaged, named every way, with hostile things where their index goes. */
Test(fuzz_loader, random_configs_and_shards_keep_the_contract, .timeout = 300)
{
    run_seeds_with(fuzz_shards_one, 4242, TU_SANITIZED ? 40 : 160);
}

static void replay_shards(const uint8_t *bytes, size_t len)
{
    fuzz_shards_one(bytes, len, replay_scratch);
}

Test(fuzz_loader, every_shards_regression_input_keeps_the_contract,
     .timeout = 300)
{
    tu_tmpdir(replay_scratch);
    const int n = tu_each_file("tests/fuzz/regressions-shards", replay_shards);
    tu_rm_rf(replay_scratch);
    cr_assert_gt(n, 0, "no input in tests/fuzz/regressions-shards");
    cr_log_info("%d regression inputs", n);
}
