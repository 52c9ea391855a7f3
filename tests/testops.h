/* The ops suites' checks of a spec (tests/unit/workers/test_ops_*.c): it
 * parses for a setup and is written out as `want`, which reads back as
 * itself; or it is refused with exactly `want` (the op as written, the
 * parameter and why). Header-only: each suite is one program. */
#ifndef PINLOAD_TESTOPS_H
#define PINLOAD_TESTOPS_H

#include "../workers/ops/ops.h"
#include "testutil.h"

/* The read-back's pipeline, so that *pl stays what `spec` made. */
static ops_pipeline tops_again_;

static inline void tops_parses_to(ops_pipeline *pl, const op_setup *s,
                                  const char *spec, const char *want)
{
    char why[512], got[2048], again[2048];
    cr_assert_eq(ops_parse(pl, spec, s, why, sizeof why), 0, "%s: %s", spec,
                 why);
    ops_format(pl, got, sizeof got);
    cr_assert_str_eq(got, want, "%s", spec);
    cr_assert_eq(ops_parse(&tops_again_, got, s, why, sizeof why), 0, "%s: %s",
                 got, why);
    ops_format(&tops_again_, again, sizeof again);
    cr_assert_str_eq(again, got);
}

static inline void tops_refused(ops_pipeline *pl, const op_setup *s,
                                const char *spec, const char *want)
{
    char why[512];
    cr_assert_eq(ops_parse(pl, spec, s, why, sizeof why), PL_EINVAL,
                 "accepted: %s", spec);
    cr_assert_str_eq(why, want, "%s", spec);
}

#endif
