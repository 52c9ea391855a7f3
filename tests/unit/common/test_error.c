/* Status codes: names, messages and the thread-local detail. */
#include <pthread.h>

#include "../common/error.h"
#include "testutil.h"

Test(error, every_code_has_a_distinct_name_and_message)
{
    static const int codes[] = {
#define CODE_(name, value, msg) PL_##name,
        PL_STATUS_MAP(CODE_)
#undef CODE_
    };
    const size_t n = sizeof codes / sizeof codes[0];
    cr_assert_eq(n, 15);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(codes[i], i < 2 ? (int)i : -(int)(i - 1),
                     "codes are 0, 1, -1, -2, ... in order");
        cr_assert_str_neq(pl_strerror(codes[i]), "unknown status");
        cr_assert_str_neq(pl_err_name(codes[i]), "PL_UNKNOWN");
        for (size_t j = 0; j < i; j++) {
            cr_assert_str_neq(pl_err_name(codes[i]), pl_err_name(codes[j]));
            cr_assert_str_neq(pl_strerror(codes[i]), pl_strerror(codes[j]));
        }
    }
    cr_assert_str_eq(pl_err_name(PL_ENOTIMAGE), "PL_ENOTIMAGE");
    cr_assert_str_eq(pl_strerror(PL_ENOTIMAGE),
                     "not an image pinload reads (JPEG, PNG, WebP)");
    /* The code's first name stays, for the same value. */
    cr_assert_eq(PL_ENOTJPEG, PL_ENOTIMAGE);
    cr_assert_eq(PL_ENOTIMAGE, -5);
    cr_assert_str_eq(pl_err_name(PL_EPOCH_END), "PL_EPOCH_END");
    cr_assert_str_eq(pl_strerror(PL_OK), "success");
}

Test(error, unknown_values_are_named_unknown)
{
    cr_assert_str_eq(pl_strerror(-999), "unknown status");
    cr_assert_str_eq(pl_err_name(42), "PL_UNKNOWN");
}

static void *set_in_thread(void *arg)
{
    (void)arg;
    err_set(PL_EIO, "from another thread");
    return NULL;
}

Test(error, detail_is_per_thread)
{
    err_clear();
    cr_assert_str_eq(pl_last_error(), "");
    cr_assert_eq(err_set(PL_EINVAL, "x=%d", 7), PL_EINVAL);
    pthread_t t;
    pthread_create(&t, NULL, set_in_thread, NULL);
    pthread_join(t, NULL);
    cr_assert_str_eq(pl_last_error(), "x=7");
}

Test(error, version_matches_the_header)
{
    cr_assert_str_eq(pl_version(), PL_VERSION_STRING);
    cr_assert_eq(pl_version_number(), (unsigned)PL_VERSION_HEX);
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d.%d", PL_VERSION_MAJOR, PL_VERSION_MINOR,
             PL_VERSION_PATCH);
    cr_assert_str_eq(pl_version(), buf);
}
