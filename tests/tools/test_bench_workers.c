/* pinload-bench --workers auto, run as a user runs it: the row measured
 * with num_workers PL_AUTO shows "auto:N" (N the count the loader took
 * samples with), the JSON says so, the settings pasted say PL_AUTO, and
 * --baseline refuses it as it refuses 0. */
#include "pinload.h"
#include "testbench.h"
#include "testutil.h"

static void make_data(char root[64])
{
    tu_tmpdir(root);
    char path[256];
    for (int i = 0; i < 16; i++) {
        snprintf(path, sizeof path, "%s/c%d/%02d.jpg", root, i % 2, i);
        tu_write_jpeg(path, 40 + i, 36 + i, (unsigned)i, NULL);
    }
}

Test(bench_workers, auto_rows_show_the_count_and_paste_pl_auto,
     .timeout = 120)
{
    char root[64], json[128], a[1024];
    make_data(root);
    snprintf(json, sizeof json, "%s/b.json", root);
    snprintf(a, sizeof a,
             "--data %s --workers auto --prefetch 2 --batches 4 --batch 4 "
             "--size 16 --warmup 0 --rounds 1 --device host --json %s",
             root, json);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    const char *cell = strstr(out, " auto:");
    cr_assert_not_null(cell, "%s", out);
    const int n = atoi(cell + 6);
    cr_assert(n >= 1, "auto:%d in %s", n, out);
    cr_assert_not_null(strstr(out, "C:      cfg.num_workers = PL_AUTO;"), "%s",
                       out);
    cr_assert_not_null(strstr(out, "num_workers=\"auto\""), "%s", out);
    char *j = tu_slurp(json);
    char want[64];
    snprintf(want, sizeof want, "\"workers\": %d, \"auto_workers\": true", n);
    cr_assert_not_null(strstr(j, want), "no %s in %s", want, j);
    cr_assert_not_null(strstr(j, "\"settings\": {\"num_workers\": \"auto\""),
                       "%s", j);
    free(j);
    free(out);
    free(err);
    tu_rm_rf(root);
}

Test(bench_workers, baseline_refuses_auto_naming_it)
{
    expect_usage_error("--data /tmp --workers 1,auto --baseline",
                       "--workers auto with --baseline");
    expect_usage_error("--data /tmp --workers autox",
                       "--workers");
}
