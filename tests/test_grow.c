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

/* A buffer over GROW_KEEP_BYTES is given back when the next need fits in
 * that (counted in bytes, whatever the element size), and kept otherwise;
 * small buffers are never touched. */
Test(grow, trim_gives_back_a_large_buffer_only_for_a_small_need)
{
    int32_t *p = NULL;
    size_t cap = 0;
    const size_t keep = GROW_KEEP_BYTES / sizeof *p;
    cr_assert_eq(grow(&p, &cap, keep + 10, sizeof *p, 0), 0);
    grow_trim(&p, &cap, keep + 1, sizeof *p); /* still large: kept */
    cr_assert_eq(cap, keep + 10);
    cr_assert_not_null(p);
    grow_trim(&p, &cap, keep, sizeof *p); /* fits: given back */
    cr_assert_eq(cap, 0);
    cr_assert_null(p);
    cr_assert_eq(grow(&p, &cap, 100, sizeof *p, 0), 0);
    grow_trim(&p, &cap, 1, sizeof *p); /* small: kept */
    cr_assert_eq(cap, 100);
    cr_assert_not_null(p);
    free(p);
}
