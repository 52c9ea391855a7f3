/* pinload-bench --workers auto, run as a user runs it: the row measured
 * with num_workers PL_AUTO shows "auto:N" (N the count the loader took
 * samples with), the JSON says so, the settings pasted say PL_AUTO, and
 * --baseline refuses it as it refuses 0. --prefetch auto likewise (the
 * slots the ring grew to). */
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

Test(bench_workers, auto_prefetch_rows_show_the_slots_and_paste_pl_auto,
     .timeout = 120)
{
    char root[64], json[128], csv[128], a[1024];
    make_data(root);
    snprintf(json, sizeof json, "%s/b.json", root);
    snprintf(csv, sizeof csv, "%s/b.csv", root);
    snprintf(a, sizeof a,
             "--data %s --workers 1 --prefetch auto,3 --batches 4 --batch 4 "
             "--size 16 --warmup 0 --rounds 2 --device host --json %s "
             "--csv %s",
             root, json, csv);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    /* 4 batches of a 16-image set: no window, so the 2 it starts with. */
    cr_assert_not_null(strstr(out, "  auto:2 "), "%s", out);
    char *j = tu_slurp(json);
    cr_assert_not_null(strstr(j, "\"prefetch\": 2, \"auto_prefetch\": true"),
                       "%s", j);
    cr_assert_not_null(strstr(j, "\"prefetch\": 3, \"auto_prefetch\": false"),
                       "%s", j);
    char *c = tu_slurp(csv);
    cr_assert_not_null(strstr(c, "on,1,auto:2,"), "%s", c);
    cr_assert_not_null(strstr(c, "on,1,3,"), "%s", c);
    /* Whichever row is pasted says what to write: PL_AUTO or 3. */
    const int pasted_auto = strstr(out, "cfg.prefetch = PL_AUTO;") != NULL;
    cr_assert(pasted_auto || strstr(out, "cfg.prefetch = 3;"), "%s", out);
    cr_assert_not_null(strstr(out, pasted_auto ? "prefetch=\"auto\""
                                               : "prefetch=3,"),
                       "%s", out);
    free(c);
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
    expect_usage_error("--data /tmp --prefetch 0", "--prefetch");
}
