/* pinload-bench run as a user runs it, for its suites (test_bench,
 * test_bench_plan). Header-only, like testutil.h. */
#ifndef PINLOAD_TESTBENCH_H
#define PINLOAD_TESTBENCH_H

#include <sys/wait.h>

#include "testutil.h"

/* Run `args` through the shell; [out] stdout and stderr (malloc'd). */
static inline int run_tool(const char *args, char **out, char **err)
{
    char dir[64];
    tu_tmpdir(dir);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/pinload-bench %s >%s/out 2>%s/err",
             tu_build_dir(), args, dir, dir);
    const int st = system(cmd);
    char path[128];
    size_t n;
    snprintf(path, sizeof path, "%s/out", dir);
    *out = (char *)tu_read_file(path, &n);
    (*out)[n] = '\0';
    snprintf(path, sizeof path, "%s/err", dir);
    *err = (char *)tu_read_file(path, &n);
    (*err)[n] = '\0';
    tu_rm_rf(dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A usage error: exit status 2, `needle` and the usage on stderr. */
static inline void expect_usage_error(const char *args, const char *needle)
{
    char *out, *err;
    const int rc = run_tool(args, &out, &err);
    cr_assert_eq(rc, 2, "%s: exit %d, stderr: %s", args, rc, err);
    cr_assert_not_null(strstr(err, needle), "%s: stderr lacks \"%s\": %s", args,
                       needle, err);
    cr_assert_not_null(strstr(err, "usage: pinload-bench"), "%s: no usage",
                       args);
    free(out);
    free(err);
}

#endif
