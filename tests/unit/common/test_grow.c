/* common/grow.c: the one way a buffer grows. Exact growth for buffers sized
 * to the largest need so far, doubling from a first size for arrays
 * appended to, and a failure that leaves the buffer as it was. */
#include <stdint.h>

#include "../common/grow.h"
#include "pinload.h"
#include "testutil.h"

Test(grow, exact_growth_allocates_what_is_needed_and_never_shrinks)
{
    uint8_t *p = NULL;
    size_t cap = 0;
    cr_assert_eq(grow(&p, &cap, 100, 1, 0), 0);
    cr_assert_not_null(p);
    cr_assert_eq(cap, 100);
    memset(p, 7, 100);
    cr_assert_eq(grow(&p, &cap, 50, 1, 0), 0);
    cr_assert_eq(cap, 100, "a smaller need keeps the buffer");
    cr_assert_eq(grow(&p, &cap, 130, 1, 0), 0);
    cr_assert_eq(cap, 130);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(p[i], 7, "byte %d kept", i);
    free(p);
}

Test(grow, appending_doubles_from_the_first_size_in_elements)
{
    int64_t *v = NULL;
    size_t cap = 0;
    static const size_t want[] = {16, 16, 32, 32, 64};
    static const size_t need[] = {1, 16, 17, 32, 33};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(grow(&v, &cap, need[i], sizeof *v, 16), 0);
        cr_assert_eq(cap, want[i], "need %zu", need[i]);
        v[need[i] - 1] = (int64_t)i; /* the whole need is writable */
    }
    cr_assert_eq(grow(&v, &cap, 1000, sizeof *v, 16), 0);
    cr_assert_eq(cap, 1024, "doubles as often as it takes");
    free(v);
}

Test(grow, a_size_that_overflows_is_enomem_and_leaves_the_buffer)
{
    uint32_t *p = NULL;
    size_t cap = 0;
    cr_assert_eq(grow(&p, &cap, 8, sizeof *p, 0), 0);
    p[7] = 42;
    uint32_t *const before = p;
    cr_assert_eq(grow(&p, &cap, SIZE_MAX / 2, sizeof *p, 0), PL_ENOMEM);
    cr_assert_eq(grow(&p, &cap, SIZE_MAX - 1, 1, 8), PL_ENOMEM);
    cr_assert_eq(p, before);
    cr_assert_eq(cap, 8);
    cr_assert_eq(p[7], 42);
    free(p);
}

/* grow_scratch: a buffer over GROW_KEEP_BYTES is given back and sized to
 * the need when that fits in GROW_KEEP_BYTES (counted in bytes, whatever the
 * element size), kept when it does not; small buffers only grow. */
Test(grow, scratch_gives_back_a_large_buffer_only_for_a_small_need)
{
    int32_t *p = NULL;
    size_t cap = 0;
    const size_t keep = GROW_KEEP_BYTES / sizeof *p;
    cr_assert_eq(grow_scratch(&p, &cap, keep + 10, sizeof *p, 0), 0);
    cr_assert_eq(cap, keep + 10);
    cr_assert_eq(grow_scratch(&p, &cap, keep + 1, sizeof *p, 0), 0);
    cr_assert_eq(cap, keep + 10, "still large: kept");
    cr_assert_eq(grow_scratch(&p, &cap, keep, sizeof *p, 0), 0);
    cr_assert_eq(cap, keep, "fits: given back, then grown to the need");
    cr_assert_eq(grow_scratch(&p, &cap, 100, sizeof *p, 0), 0);
    cr_assert_eq(cap, keep, "at the limit, not over it: kept");
    p[99] = 7; /* writable */
    free(p);
    p = NULL;
    cap = 0;
    cr_assert_eq(grow_scratch(&p, &cap, 100, sizeof *p, 16), 0);
    cr_assert_eq(cap, 128, "small: grows as grow() does, doubling from 16");
    cr_assert_eq(grow_scratch(&p, &cap, 1, sizeof *p, 16), 0);
    cr_assert_eq(cap, 128);
    free(p);
}
