/* The record of bad files: one record per file, in the order first met,
 * counted per kind; a file first decoded with warnings and later found bad
 * (another crop reached its damage) is recorded as bad. */
#include "../delivery/failures.h"
#include "testutil.h"

static failure get(failures *f, size_t i)
{
    cr_assert_lt(i, f->n);
    return f->items[i];
}

Test(failures, one_record_per_file_in_the_order_met_with_counts)
{
    failures f;
    failures_init(&f, 10);
    cr_assert_eq(failures_record(&f, 7, PL_ENOTIMAGE, "a/7", "PNG", 0), 1);
    cr_assert_eq(failures_record(&f, 2, PL_EIO, "a/2", "gone", 0), 1);
    cr_assert_eq(failures_record(&f, 7, PL_ENOTIMAGE, "a/7", "PNG", 0), 0);
    cr_assert_eq(failures_record(&f, 7, PL_ENOTIMAGE, "a/7", "PNG", 0), 0);
    cr_assert_eq(f.n, 2);
    cr_assert_eq(get(&f, 0).index, 7);
    cr_assert_eq(get(&f, 0).count, 3);
    cr_assert_eq(get(&f, 1).index, 2);
    cr_assert_eq(get(&f, 1).count, 1);
    int code = 0;
    char reason[16];
    cr_assert_eq(failures_find(&f, 2, &code, reason, sizeof reason), 1);
    cr_assert_eq(code, PL_EIO);
    cr_assert_str_eq(reason, "gone");
    cr_assert_eq(failures_find(&f, 3, &code, reason, sizeof reason), 0);
    failures_fini(&f);
}

Test(failures, warnings_then_an_error_become_the_error)
{
    failures f;
    failures_init(&f, 4);
    cr_assert_eq(failures_record(&f, 1, 0, "x", "Premature end", 2), 1);
    cr_assert_eq(failures_record(&f, 1, 0, "x", "Premature end", 2), 0);
    cr_assert_eq(get(&f, 0).count, 2);
    /* Another epoch's crop reaches the damage under strict-like failure:
     * the record becomes the error, reported as new. */
    cr_assert_eq(failures_record(&f, 1, PL_ECORRUPT, "x", "bad Huffman", 5), 1);
    cr_assert_eq(f.n, 1);
    cr_assert_eq(get(&f, 0).code, PL_ECORRUPT);
    cr_assert_str_eq(get(&f, 0).reason, "bad Huffman");
    cr_assert_eq(get(&f, 0).warnings, 5);
    cr_assert_eq(get(&f, 0).count, 1);
    int code = 0;
    char reason[32];
    failures_find(&f, 1, &code, reason, sizeof reason);
    cr_assert_eq(code, PL_ECORRUPT, "what FAIL reports is the error");
    cr_assert_str_eq(reason, "bad Huffman");
    /* A later decode with warnings only does not count as the error. */
    cr_assert_eq(failures_record(&f, 1, 0, "x", "Premature end", 1), 0);
    cr_assert_eq(get(&f, 0).count, 1);
    cr_assert_eq(failures_record(&f, 1, PL_ECORRUPT, "x", "bad Huffman", 5), 0);
    cr_assert_eq(get(&f, 0).count, 2);
    failures_fini(&f);
}
