/* loader/pinned.c: the bound on page-locked memory. What a loader locks
 * (the ring when pinned, keep_host's mirrors) times the node's ranks
 * passes up to half of what the node may use (its memory, or the cgroup's
 * lower limit) and fails past it with PL_ENOMEM, the message naming every
 * number and what to change. */
#include "../loader/pinned.h"
#include "pinload.h"
#include "testutil.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

static const machine_memory machine_16g = {.total = 16 * GIB};

static void assert_has(const char *what)
{
    cr_assert(strstr(pl_last_error(), what), "no \"%s\" in \"%s\"", what,
              pl_last_error());
}

Test(pinned, past_half_of_the_node_fails_naming_the_numbers)
{
    /* 8 ranks x 4 x 270 MiB = 8.44 GiB, over half of 16 GiB. */
    const pinned_need n = {.ranks = 8, .slots = 4, .slot_bytes = 270 * MIB};
    cr_assert_eq(pinned_check(&n, &machine_16g), PL_ENOMEM);
    assert_has("pl_loader_create: 8 ranks on this node x 1.05 GiB of pinned "
               "memory (the ring: prefetch 4 x 270.0 MiB batches) = 8.44 GiB, "
               "over 8.00 GiB, half of this node's 16.00 GiB of memory");
    assert_has("Lower config.prefetch or config.batch_size, or set "
               "config.memory to PL_MEMORY_PAGEABLE");
    cr_assert_null(strstr(pl_last_error(), "keep_host"), "no mirrors here");
}

Test(pinned, the_ranks_of_the_node_are_counted)
{
    /* One rank's 1.05 GiB fits; seven of them (7.38 GiB) fit; eight do not. */
    pinned_need n = {.ranks = 1, .slots = 4, .slot_bytes = 270 * MIB};
    cr_assert_eq(pinned_check(&n, &machine_16g), 0);
    n.ranks = 7;
    cr_assert_eq(pinned_check(&n, &machine_16g), 0);
    n.ranks = 8;
    cr_assert_eq(pinned_check(&n, &machine_16g), PL_ENOMEM);
    n.ranks = 0; /* unknown: one */
    cr_assert_eq(pinned_check(&n, &machine_16g), 0);
}

Test(pinned, exactly_half_fits_and_a_byte_more_does_not)
{
    pinned_need n = {.ranks = 2, .slots = 2, .slot_bytes = 2 * GIB};
    cr_assert_eq(pinned_check(&n, &machine_16g), 0, "8 GiB of 16");
    const machine_memory less = {.total = 16 * GIB - 2};
    cr_assert_eq(pinned_check(&n, &less), PL_ENOMEM);
}

Test(pinned, a_cgroup_limit_below_the_machine_is_the_bound)
{
    const machine_memory m = {
        .total = 64 * GIB, .limit = 2 * GIB, .limit_from = "cgroup memory.max"};
    const pinned_need n = {.ranks = 4, .slots = 2, .slot_bytes = 160 * MIB};
    cr_assert_eq(pinned_check(&n, &m), PL_ENOMEM, "1.25 GiB of 2");
    assert_has("4 ranks on this node x 320.0 MiB of pinned memory");
    assert_has("= 1.25 GiB, over 1.00 GiB, half of the 2.00 GiB this "
               "process may use (cgroup memory.max; the machine has 64.00 "
               "GiB)");
    const pinned_need fits = {.ranks = 4, .slots = 1, .slot_bytes = 160 * MIB};
    cr_assert_eq(pinned_check(&fits, &m), 0, "640 MiB of 2 GiB");
}

Test(pinned, keep_host_mirrors_count_with_the_ring_or_alone)
{
    pinned_need n = {.ranks = 8,
                     .slots = 2,
                     .slot_bytes = 100 * MIB,
                     .mirrors = 4,
                     .mirror_bytes = 400 * MIB};
    cr_assert_eq(pinned_check(&n, &machine_16g), PL_ENOMEM, "8 x 1.76 GiB");
    assert_has("(the ring: prefetch 2 x 100.0 MiB batches; keep_host: 4 x "
               "400.0 MiB mirrors, one per device buffer) = 14.06 GiB");
    assert_has("set config.keep_host to 0, or set config.memory to "
               "PL_MEMORY_PAGEABLE");
    /* A pageable ring: the mirrors alone are locked, and counted. */
    n.slots = 0;
    cr_assert_eq(pinned_check(&n, &machine_16g), PL_ENOMEM, "8 x 1.56 GiB");
    assert_has("(keep_host: 4 x 400.0 MiB mirrors, one per device buffer) = "
               "12.50 GiB");
    cr_assert_null(strstr(pl_last_error(), "PL_MEMORY_PAGEABLE"),
                   "the ring is pageable already: %s", pl_last_error());
    n.ranks = 2;
    cr_assert_eq(pinned_check(&n, &machine_16g), 0, "3.1 GiB of 16");
}

Test(pinned, nothing_locked_or_nothing_known_passes)
{
    const pinned_need none = {.ranks = 8, .slot_bytes = 512 * GIB};
    cr_assert_eq(pinned_check(&none, &machine_16g), 0, "a pageable ring");
    const pinned_need big = {.ranks = 8, .slots = 8, .slot_bytes = 512 * GIB};
    const machine_memory unknown = {0};
    cr_assert_eq(pinned_check(&big, &unknown), 0, "no size to bound by");
}

Test(pinned, sizes_too_large_to_multiply_fail_rather_than_wrap)
{
    /* 2^40 slots of 2^40 bytes would wrap to 0 in 64 bits. */
    const pinned_need n = {
        .ranks = 1 << 20, .slots = 1 << 30, .slot_bytes = (size_t)1 << 40};
    cr_assert_eq(pinned_check(&n, &machine_16g), PL_ENOMEM);
}
