/* pinload-bench, run as a user runs it: arguments, the table, the CSV and
 * JSON files against the table, the PNG chart. Sweeps are tiny (a few
 * batches of 32x32 samples) so the suite stays fast; no figure is judged,
 * only its presence, sign and agreement across outputs. --plan, the model
 * of docs/SCALE.md, is test_bench_plan.c's. */
#include <math.h>
#include <sys/wait.h>

#include "pinload.h"
#include "testbench.h"
#include "testutil.h"

static void make_data(char root[64])
{
    tu_tmpdir(root);
    char path[256];
    for (int i = 0; i < 24; i++) {
        snprintf(path, sizeof path, "%s/c%d/%02d.jpg", root, i % 3, i);
        tu_write_jpeg(path, 48 + i, 40 + 2 * i, (unsigned)i, NULL);
    }
}

/* ---- arguments ---- */

Test(bench, bad_arguments_exit_2_with_a_reason_and_the_usage)
{
    char root[64];
    make_data(root);
    char a[512];
    expect_usage_error("--frobnicate 3", "unknown option --frobnicate");
    expect_usage_error("--batch 4", "--data is required");
    expect_usage_error("--data /nonexistent/pinload", "/nonexistent/pinload");
    snprintf(a, sizeof a, "--data %s --workers ''", root);
    expect_usage_error(a, "empty list");
    snprintf(a, sizeof a, "--data %s --workers -1", root);
    expect_usage_error(a, "--workers: \"-1\"");
    snprintf(a, sizeof a, "--data %s --frobnicate", root);
    expect_usage_error(a, "unknown option --frobnicate\n"); /* last */
    snprintf(a, sizeof a, "--data %s --format f64", root);
    expect_usage_error(a, "unknown value \"f64\" (u8, f32, f16 or bf16)");
    snprintf(a, sizeof a, "--data %s --device gpu", root);
    expect_usage_error(a, "is not one of auto|host|local_rank|cuda|cuda:N");
    snprintf(a, sizeof a, "--data %s --workers 0 --baseline", root);
    expect_usage_error(a, "--workers 0 with --baseline");
    snprintf(a, sizeof a, "--data %s --workers 1,,2", root);
    expect_usage_error(a, "empty item");
    snprintf(a, sizeof a, "--data %s --prefetch 2,", root);
    expect_usage_error(a, "empty item");
    snprintf(a, sizeof a, "--data %s --pin on,sometimes", root);
    expect_usage_error(a, "\"sometimes\" is not on, off or managed");
    snprintf(a, sizeof a, "--data %s --gpu-normalize maybe", root);
    expect_usage_error(a, "--gpu-normalize: unknown value \"maybe\"");
    snprintf(a, sizeof a, "--data %s --augment crop", root);
    expect_usage_error(a, "unknown value \"crop\"");
    snprintf(a, sizeof a, "--data %s --compute-ms -1", root);
    expect_usage_error(a, "--compute-ms");
    snprintf(a, sizeof a, "--data %s --batches", root);
    expect_usage_error(a, "--batches needs a value");
    snprintf(a, sizeof a, "--data %s --rounds 0", root);
    expect_usage_error(a, "--rounds: \"0\" is not an integer in [1, 100]");
    tu_rm_rf(root);
}

Test(bench, help_prints_the_usage_and_exits_0)
{
    char *out, *err;
    cr_assert_eq(run_tool("--help", &out, &err), 0);
    cr_assert_not_null(strstr(out, "usage: pinload-bench --data PATH"));
    cr_assert_not_null(strstr(out, "--compute-ms"));
    free(out);
    free(err);
}

Test(bench, version_names_the_library_version)
{
    char *out, *err, want[128];
    cr_assert_eq(run_tool("--version", &out, &err), 0);
    snprintf(want, sizeof want, "pinload-bench (pinload %s)\n", pl_version());
    cr_assert_str_eq(out, want);
    free(out);
    free(err);
}

/* --workers 0 is the library's default, shown resolved; --format f16 runs;
 * the JSON records the configuration, the library version and the date. */
Test(bench, workers_0_and_f16_run_and_the_json_records_the_configuration)
{
    char root[64], json[128], a[1024];
    make_data(root);
    snprintf(json, sizeof json, "%s/b.json", root);
    snprintf(a, sizeof a,
             "--data %s --workers 0 --prefetch 1 --pin off --batches 2 "
             "--batch 4 --size 16 --warmup 0 --format f16 --augment eval "
             "--device host --gpu-normalize off --json %s",
             root, json);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, "16x16 eval f16 (gpu-normalize off)"), "%s",
                       out);
    char *j = tu_slurp(json);
    char want[256];
    snprintf(want, sizeof want, "\"pinload_version\": \"%s\"", pl_version());
    static const char *const keys[] = {
        "\"format\": \"f16\"", "\"augment\": \"eval\"",   "\"batch\": 4",
        "\"size\": 16",        "\"batches_per_row\": 2",  "\"device\": -2",
        "\"date\": \"20",      "\"gpu_normalize\": false"};
    cr_assert_not_null(strstr(j, want), "%s", j);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        cr_assert_not_null(strstr(j, keys[k]), "no %s in %s", keys[k], j);
    /* The row shows what 0 resolved to, never 0. */
    cr_assert_null(strstr(j, "\"workers\": 0"), "%s", j);
    cr_assert_not_null(strstr(j, "\"workers\": "), "%s", j);
    free(j);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* The table fits a 100-column terminal by default, whatever applies
 * (here --compute-ms adds step and overlap in place of the stage times);
 * --wide shows every column. */
Test(bench, the_default_table_fits_100_columns_and_wide_shows_all)
{
    char root[64], a[1024];
    make_data(root);
    const char *extra[] = {"", "--compute-ms 1", "--wide --compute-ms 1"};
    for (int k = 0; k < 3; k++) {
        snprintf(a, sizeof a,
                 "--data %s --workers 1 --prefetch 1 --pin on --batches 2 "
                 "--batch 4 --size 16 --warmup 0 --device host %s",
                 root, extra[k]);
        char *out, *err;
        cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
        const char *table = strstr(out, "\npin ");
        cr_assert_not_null(table, "%s", out);
        size_t widest = 0;
        for (const char *l = table + 1; *l;) {
            const char *end = strchr(l, '\n');
            const size_t len = end ? (size_t)(end - l) : strlen(l);
            widest = len > widest ? len : widest;
            l += len + (end != NULL);
        }
        if (k < 2)
            cr_assert_leq(widest, 100, "%s: %zu columns:\n%s", extra[k], widest,
                          out);
        else
            cr_assert_gt(widest, 100, "--wide: %zu columns", widest);
        cr_assert_eq(strstr(table, "step ms") != NULL, k > 0, "%s", out);
        cr_assert_eq(strstr(table, "decode") != NULL, k != 1, "%s", out);
        free(out);
        free(err);
    }
    tu_rm_rf(root);
}

/* On a terminal: which round of how many, which row of how many, batches
 * of how many, img/s and the time left; into a file, no progress line.
 * The rounds are interleaved: every row of round 1, then every row of
 * round 2 (each row lasts 0.25 s, longer than the line's 0.2 s refresh,
 * so each shows). */
Test(bench, progress_on_a_terminal_names_the_round_row_batches_and_eta,
     .timeout = 120)
{
    char root[64], cmd[2048];
    make_data(root);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-bench --data %s --workers 1,2 --prefetch 1 --pin on "
             "--batches 40 --batch 2 --size 16 --warmup 0 --device host",
             tu_build_dir(), root);
    char *tty = tu_run_on_tty(cmd);
    cr_assert_not_null(strstr(tty, "round 1 of 3, row 1 of 2: pin on, 1 "
                                   "workers"),
                       "%s", tty);
    cr_assert_not_null(strstr(tty, " of 40 batches, "), "%s", tty);
    cr_assert_not_null(strstr(tty, " img/s, ETA "), "%s", tty);
    free(tty);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-bench --data %s --workers 1,2 --prefetch 1 --pin on "
             "--seconds 0.25 --rounds 2 --batch 2 --size 16 --warmup 0 "
             "--device host",
             tu_build_dir(), root);
    tty = tu_run_on_tty(cmd);
    /* (round, row, workers) as the progress line names them, each run of
     * repeats once */
    int seen[16][3], n = 0;
    for (const char *p = tty; (p = strstr(p, "round ")) != NULL; p++) {
        int rd, rounds, rw, rows, w;
        if (sscanf(p, "round %d of %d, row %d of %d: pin on, %d workers", &rd,
                   &rounds, &rw, &rows, &w) != 5)
            continue;
        cr_assert(rounds == 2 && rows == 2, "%s", tty);
        if (n > 0 && seen[n - 1][0] == rd && seen[n - 1][1] == rw)
            continue;
        cr_assert_lt(n, 16, "%s", tty);
        seen[n][0] = rd, seen[n][1] = rw, seen[n][2] = w;
        n++;
    }
    static const int want[4][3] = {{1, 1, 1}, {1, 2, 2}, {2, 1, 1}, {2, 2, 2}};
    cr_assert_eq(n, 4, "%d (round, row) in:\n%s", n, tty);
    for (int i = 0; i < 4; i++)
        cr_assert(seen[i][0] == want[i][0] && seen[i][1] == want[i][1] &&
                      seen[i][2] == want[i][2],
                  "step %d: round %d row %d (%d workers) in:\n%s", i,
                  seen[i][0], seen[i][1], seen[i][2], tty);
    char *err = tu_run_stderr(cmd);
    cr_assert_null(strchr(err, '\r'), "progress into a file: %s", err);
    free(tty);
    free(err);
    tu_rm_rf(root);
}

/* SIGINT during a sweep: the row in hand is finished and printed, the CSV
 * is written with every row measured, and the exit status is 128 + 2. */
Test(bench, a_signal_keeps_the_rows_measured, .timeout = 120)
{
    char root[64], cmd[2048], csv[128];
    make_data(root);
    snprintf(csv, sizeof csv, "%s/rows.csv", root);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-bench --data %s --workers 1,2,1,2 --prefetch 1 "
             "--pin on --batches 100000000 --batch 2 --size 16 --warmup 0 "
             "--device host --csv %s >%s/out 2>%s/err",
             tu_build_dir(), root, csv, root, root);
    char ready[128];
    snprintf(ready, sizeof ready, "%s/out", root);
    const int rc = tu_run_and_signal(cmd, ready, 1.0, SIGINT);
    cr_assert_eq(rc, 128 + SIGINT, "exit %d", rc);
    char *text = tu_slurp(csv);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 2, "header and the row in hand: %s", text);
    free(text);
    char path[128];
    snprintf(path, sizeof path, "%s/err", root);
    char *err = tu_slurp(path);
    cr_assert_not_null(strstr(err, "stopped by signal 2 after 1 row (round 1 "
                                   "of 3)"),
                       "%s", err);
    free(err);
    tu_rm_rf(root);
}

Test(bench, device_cuda_without_a_gpu_is_an_error_naming_the_reason)
{
    char root[64];
    make_data(root);
    char a[512];
    snprintf(a, sizeof a,
             "--data %s --device cuda --workers 1 --prefetch 1 "
             "--pin on --batches 1 --batch 4 --size 16 --warmup 0",
             root);
    char *out, *err;
    const int rc = run_tool(a, &out, &err);
    /* On a GPU machine this succeeds; here it must say why it cannot. */
    if (rc == 0)
        cr_assert_not_null(strstr(out, "backend: cuda"), "%s", out);
    else
        cr_assert(rc == 1 && strstr(err, "config.device: CUDA device 0 "
                                         "requested, but"),
                  "exit %d: %s", rc, err);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* ---- the sweep ---- */

typedef struct table_row {
    char pin[16];
    int workers, prefetch;
    double img_s, img_min, img_max; /* min, max: -1 where not shown */
    int one_round;                  /* "(1 round)" */
    double step_ms;
    char overlap[16];
} table_row;

/* The img/s cell at *p: "median (min-max)", "median (1 round)" or the
 * median alone; p moves past it. 0 if it is not one. */
static int parse_rate(const char **p, table_row *r)
{
    int used = 0;
    if (sscanf(*p, " %lf%n", &r->img_s, &used) != 1)
        return 0;
    *p += used;
    r->img_min = r->img_max = -1;
    if (sscanf(*p, " (%lf-%lf)%n", &r->img_min, &r->img_max, &used) == 2) {
        *p += used;
    } else if (strncmp(*p, " (1 round)", 10) == 0) {
        r->one_round = 1;
        *p += 10;
    }
    return 1;
}

/* The data rows of a --wide table, in order. */
static int parse_table(const char *out, table_row *rows, int cap)
{
    int n = 0;
    for (const char *line = out; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        table_row r = {0};
        char h2d[32], step[32], vs[32];
        double mb, wait, p99, us[4];
        int used = 0;
        if (sscanf(line, "%15s %d %d%n", r.pin, &r.workers, &r.prefetch,
                   &used) != 3 ||
            strcmp(r.pin, "pin") == 0)
            continue;
        const char *p = line + used;
        if (!parse_rate(&p, &r))
            continue;
        if (sscanf(p, "%lf %31s %lf %lf %lf %lf %lf %lf %31s %15s %31s", &mb,
                   h2d, &wait, &p99, &us[0], &us[1], &us[2], &us[3], step,
                   r.overlap, vs) == 11) {
            cr_assert_lt(n, cap);
            r.step_ms = step[0] == '-' ? -1 : atof(step);
            rows[n++] = r;
        }
    }
    return n;
}

/* One row of the JSON report. */
typedef struct json_row {
    char pin[16];
    int workers, prefetch, rounds, nvals;
    double img_s, img_min, img_max, vals[8];
} json_row;

/* The number after "key": in the text from p (to its line's end). */
static double json_key(const char *p, const char *key)
{
    char k[96];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *end = strchr(p, '\n');
    const char *at = strstr(p, k);
    cr_assert(at && (!end || at < end), "no %s in %.300s", key, p);
    return strtod(at + strlen(k), NULL);
}

/* The rows of the JSON report at path (each on a line of its own). */
static int read_json_rows(const char *path, json_row *rows, int cap)
{
    char *j = tu_slurp(path);
    int n = 0;
    for (const char *p = j; (p = strstr(p, "\n    {\"pin\": \"")) != NULL;
         p++) {
        cr_assert_lt(n, cap);
        json_row *r = &rows[n++];
        cr_assert_eq(sscanf(p, "\n    {\"pin\": \"%15[^\"]\"", r->pin), 1);
        r->workers = (int)json_key(p + 1, "workers");
        r->prefetch = (int)json_key(p + 1, "prefetch");
        r->rounds = (int)json_key(p + 1, "rounds");
        r->img_s = json_key(p + 1, "images_per_s");
        r->img_min = json_key(p + 1, "images_per_s_min");
        r->img_max = json_key(p + 1, "images_per_s_max");
        const char *v = strstr(p, "\"images_per_s_rounds\": [");
        cr_assert_not_null(v, "%s", p);
        v += strlen("\"images_per_s_rounds\": [");
        for (r->nvals = 0; *v != ']'; r->nvals++) {
            cr_assert_lt(r->nvals, 8);
            char *e;
            r->vals[r->nvals] = strtod(v, &e);
            cr_assert(e != v, "%s", p);
            v = e + (*e == ',' ? 2 : 0);
        }
    }
    free(j);
    return n;
}

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --rounds 3: each row measured three times; the JSON gives each round's
 * img/s, and images_per_s is their median, min and max their extremes;
 * the table shows "median (min-max)"; the rows come in the sweep's
 * order (pin outermost, then prefetch, then workers). */
Test(bench, rounds_give_every_rows_rates_and_their_median, .timeout = 120)
{
    char root[64], a[1024], json[128];
    make_data(root);
    snprintf(json, sizeof json, "%s/r.json", root);
    snprintf(a, sizeof a,
             "--wide --data %s --workers 1,2 --prefetch 1,3 --pin on,off "
             "--rounds 3 --batches 3 --batch 4 --size 32 --warmup 1 "
             "--json %s",
             root, json);
    char *out, *err;
    const int rc = run_tool(a, &out, &err);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    cr_assert_not_null(strstr(out, ", 3 rounds\n"), "%s", out);
    table_row t[16];
    const int n = parse_table(out, t, 16);
    cr_assert_eq(n, 8, "%d rows in:\n%s", n, out);
    json_row j[16];
    cr_assert_eq(read_json_rows(json, j, 16), 8);
    static const struct {
        const char *pin;
        int prefetch, workers;
    } want[8] = {{"on", 1, 1},  {"on", 1, 2},  {"on", 3, 1},  {"on", 3, 2},
                 {"off", 1, 1}, {"off", 1, 2}, {"off", 3, 1}, {"off", 3, 2}};
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(t[i].pin, want[i].pin, "row %d", i);
        cr_assert_eq(t[i].prefetch, want[i].prefetch, "row %d", i);
        cr_assert_eq(t[i].workers, want[i].workers, "row %d", i);
        cr_assert_eq(t[i].step_ms, -1, "no step without --compute-ms");
        cr_assert_str_eq(j[i].pin, want[i].pin, "row %d", i);
        cr_assert_eq(j[i].workers, want[i].workers, "row %d", i);
        cr_assert_eq(j[i].rounds, 3, "row %d", i);
        cr_assert_eq(j[i].nvals, 3, "row %d: %d values", i, j[i].nvals);
        double v[3] = {j[i].vals[0], j[i].vals[1], j[i].vals[2]};
        qsort(v, 3, sizeof v[0], cmp_dbl);
        cr_assert_gt(v[0], 0.0, "row %d", i);
        cr_assert_float_eq(j[i].img_s, v[1], 0.0051, "row %d: median", i);
        cr_assert_float_eq(j[i].img_min, v[0], 0.0051, "row %d: min", i);
        cr_assert_float_eq(j[i].img_max, v[2], 0.0051, "row %d: max", i);
        /* the table's cell, rounded as it prints (whole above 100) */
        const double tol[3] = {t[i].img_s, t[i].img_min, t[i].img_max};
        const double js[3] = {j[i].img_s, j[i].img_min, j[i].img_max};
        for (int k = 0; k < 3; k++)
            cr_assert(fabs(tol[k] - js[k]) <= (js[k] >= 100 ? 0.51 : 0.051),
                      "row %d: table %g, json %g", i, tol[k], js[k]);
    }
    cr_assert_not_null(strstr(out, "backend: host"), "%s", out);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* The verdict follows the rounds: a row is named best only where its
 * lowest round beats every other row's highest; otherwise the tool says
 * none is clearly fastest and names the nearest row within the spread.
 * Checked against the tool's own figures, whichever way they fell; and
 * the JSON says the same. */
Test(bench, best_is_named_only_where_its_lowest_round_beats_every_other,
     .timeout = 120)
{
    char root[64], a[1024], json[128];
    make_data(root);
    snprintf(json, sizeof json, "%s/v.json", root);
    for (int run = 0; run < 3; run++) {
        snprintf(a, sizeof a,
                 "--data %s --workers 1,2 --prefetch 1,2 --pin on "
                 "--rounds 3 --batches 4 --batch 4 --size 32 --warmup 1 "
                 "--json %s",
                 root, json);
        char *out, *err;
        cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
        json_row j[8];
        const int n = read_json_rows(json, j, 8);
        cr_assert_eq(n, 4);
        int f = 0;
        for (int i = 1; i < n; i++)
            f = j[i].img_s > j[f].img_s ? i : f;
        int within = 0;
        for (int i = 0; i < n; i++)
            within += i != f && j[i].img_max >= j[f].img_min;
        char *doc = tu_slurp(json);
        char named[256];
        snprintf(named, sizeof named,
                 "pin %s, %d workers, prefetch %d: ", j[f].pin, j[f].workers,
                 j[f].prefetch);
        if (within == 0) {
            char line[512];
            snprintf(line, sizeof line, "\nbest: %s", named);
            cr_assert_not_null(strstr(out, line), "%s", out);
            cr_assert_not_null(strstr(doc, "\"judged\": \"clear\""), "%s", doc);
        } else {
            char line[512];
            snprintf(line, sizeof line,
                     "\nno row is clearly fastest: %d other row%s within "
                     "the spread of the highest median\n  highest median: %s",
                     within, within == 1 ? " is" : "s are", named);
            cr_assert_not_null(strstr(out, line), "want %s in:\n%s", line, out);
            cr_assert_null(strstr(out, "\nbest: "), "%s", out);
            cr_assert_not_null(strstr(doc, "\"best\": null"), "%s", doc);
        }
        free(doc);
        free(out);
        free(err);
    }
    tu_rm_rf(root);
}

/* One round measures no spread: however far apart two rows fall, neither
 * is named best, and the highest is pasted as such. Two rows of the same
 * settings are never told apart. */
Test(bench, one_round_names_no_best_and_same_settings_never_differ,
     .timeout = 120)
{
    char root[64], a[1024];
    make_data(root);
    snprintf(a, sizeof a,
             "--data %s --workers 1,1 --prefetch 1 --pin on --rounds 1 "
             "--batches 3 --batch 4 --size 32 --warmup 0",
             root);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, ", 1 round\n"), "%s", out);
    cr_assert_null(strstr(out, "\nbest: "), "%s", out);
    cr_assert_not_null(strstr(out, "\nno row is clearly fastest: a row "
                                   "measured in one round has no spread"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "settings to paste (the highest, not "
                                   "judged against the noise):\n"),
                       "%s", out);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* The last lines: the settings to paste, C and Python, for the row the
 * verdict picks (the JSON's "settings"). The C line compiles against
 * pinload.h and sets those fields; the Python line parses as a call of
 * pinload.Loader whose keywords are LoaderOptions' and whose memory word
 * is one of CHOICES["memory"] (python/pinload/_options.py). */
Test(bench, the_settings_to_paste_compile_and_name_the_verdicts_row,
     .timeout = 120)
{
    char root[64], a[1024], json[128];
    make_data(root);
    snprintf(json, sizeof json, "%s/s.json", root);
    snprintf(a, sizeof a,
             "--data %s --workers 1,2 --prefetch 1,2 --pin on,off "
             "--batches 3 --batch 4 --size 32 --warmup 0 --json %s",
             root, json);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    char *doc = tu_slurp(json);
    const char *set = strstr(doc, "\"settings\": {");
    cr_assert_not_null(set, "%s", doc);
    int workers = -1, prefetch = -1;
    char memory[32] = "";
    cr_assert_eq(sscanf(set,
                        "\"settings\": {\"num_workers\": %d, \"prefetch\": "
                        "%d, \"memory\": \"%31[a-z]\"}",
                        &workers, &prefetch, memory),
                 3, "%s", set);
    free(doc);
    /* the last two lines, as printed */
    const char *c = strstr(out, "\n  C:      ");
    cr_assert_not_null(c, "%s", out);
    c += strlen("\n  C:      ");
    const char *py = strstr(c, "\n  Python: ");
    cr_assert_not_null(py, "%s", out);
    const int clen = (int)(py - c);
    py += strlen("\n  Python: ");
    const char *pyend = strchr(py, '\n');
    cr_assert(pyend && pyend[1] == '\0', "not the last lines:\n%s", out);
    const int pylen = (int)(pyend - py);

    char dir[64], path[128], cmd[1024];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/paste.c", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "#include <stdio.h>\n#include \"pinload.h\"\n"
            "#include <string.h>\nint main(void)\n{\n    pl_config cfg;\n"
            "    memset(&cfg, 0, sizeof cfg);\n    %.*s\n"
            "    printf(\"%%d %%d %%d\\n\", (int)cfg.num_workers, "
            "(int)cfg.prefetch, (int)cfg.memory);\n    return 0;\n}\n",
            clen, c);
    fclose(f);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd,
             "%s -std=c11 -Wall -Werror -Iinclude -o %s/paste %s 2>&1 && "
             "%s/paste",
             cc && *cc ? cc : "cc", dir, path, dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char got[512] = "";
    const size_t len = fread(got, 1, sizeof got - 1, p);
    got[len] = '\0';
    cr_assert_eq(pclose(p), 0, "%s: %s", cmd, got);
    char want[64];
    snprintf(want, sizeof want, "%d %d %d\n", workers, prefetch,
             strcmp(memory, "pinned") == 0     ? PL_MEMORY_PINNED
             : strcmp(memory, "pageable") == 0 ? PL_MEMORY_PAGEABLE
                                               : PL_MEMORY_MANAGED);
    cr_assert_str_eq(got, want, "the C line %.*s", clen, c);

    /* Python: the line's own words checked by Python's parser */
    snprintf(path, sizeof path, "%s/paste.py", dir);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "import ast, sys\n"
            "call = ast.parse(sys.argv[1], mode='eval').body\n"
            "assert ast.unparse(call.func) == 'pinload.Loader', "
            "ast.unparse(call.func)\n"
            "assert isinstance(call.args[0], ast.Constant) and "
            "call.args[0].value is Ellipsis\n"
            "src = ast.parse(open('python/pinload/_options.py').read())\n"
            "keys = choices = None\n"
            "for node in src.body:\n"
            "    if isinstance(node, ast.ClassDef) and "
            "node.name == 'LoaderOptions':\n"
            "        keys = {n.target.id for n in node.body\n"
            "                if isinstance(n, ast.AnnAssign)}\n"
            "    if isinstance(node, ast.AnnAssign) and "
            "getattr(node.target, 'id', '') == 'CHOICES':\n"
            "        choices = ast.literal_eval(node.value)\n"
            "kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}\n"
            "assert set(kw) <= keys, set(kw) - keys\n"
            "assert kw['memory'] in choices['memory'], kw\n"
            "print(kw['num_workers'], kw['prefetch'], kw['memory'])\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s '%.*s' 2>&1", path, pylen, py);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    const size_t plen = fread(got, 1, sizeof got - 1, p);
    got[plen] = '\0';
    const int prc = pclose(p);
    if (WIFEXITED(prc) && WEXITSTATUS(prc) == 127) {
        cr_log_info("no python3: the Python line is checked by pattern only");
        char kw[32];
        int w2, p2;
        cr_assert_eq(sscanf(py,
                            "pinload.Loader(..., num_workers=%d, prefetch=%d, "
                            "memory=\"%31[a-z]\")",
                            &w2, &p2, kw),
                     3, "%.*s", pylen, py);
        snprintf(got, sizeof got, "%d %d %s\n", w2, p2, kw);
    } else {
        cr_assert_eq(prc, 0, "%s: %s", cmd, got);
    }
    snprintf(want, sizeof want, "%d %d %s\n", workers, prefetch, memory);
    cr_assert_str_eq(got, want, "the Python line %.*s", pylen, py);
    tu_rm_rf(dir);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* Without a GPU pinned and pageable memory differ only by noise: the
 * tool says so, and without --pin sweeps pinned memory alone; with --pin
 * on,off it measures both, and says they differ by noise. */
Test(bench, without_a_gpu_pin_defaults_to_on_and_a_note_says_why,
     .timeout = 120)
{
    char root[64], a[1024];
    make_data(root);
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a,
                 "--wide --data %s --workers 1 --prefetch 1,2 %s --rounds 2 "
                 "--batches 2 --batch 4 --size 32 --warmup 0 --device host",
                 root, k ? "--pin on,off" : "");
        char *out, *err;
        cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "\nnote: no GPU (host backend): pinned "
                                       "and pageable memory differ only in "
                                       "copies\n  to a GPU"),
                           "%s", out);
        table_row t[8];
        const int n = parse_table(out, t, 8);
        cr_assert_eq(n, k ? 4 : 2, "%s", out);
        for (int i = 0; i < n; i++)
            cr_assert_str_eq(t[i].pin, i < 2 ? "on" : "off", "%s", out);
        free(out);
        free(err);
    }
    tu_rm_rf(root);
}

Test(bench, compute_ms_fills_step_time_and_an_overlap_percentage)
{
    char root[64];
    make_data(root);
    char a[512];
    snprintf(a, sizeof a,
             "--wide --data %s --workers 2 --prefetch 2 --pin on "
             "--batches 3 --batch 4 --size 32 --warmup 1 --compute-ms 5",
             root);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    table_row rows[2];
    cr_assert_eq(parse_table(out, rows, 2), 1, "%s", out);
    cr_assert_geq(rows[0].step_ms, 5.0, "a step lasts at least its compute");
    const int pct = atoi(rows[0].overlap);
    cr_assert(strchr(rows[0].overlap, '%') && pct >= 0 && pct <= 100,
              "overlap \"%s\"", rows[0].overlap);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* ---- the files ---- */

/* A small JSON validator: value := object | array | string | number |
 * true | false | null. Returns the end of the value or NULL. */
static const char *json_value(const char *p);

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_string_end(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++)
        if (*p == '\\' && !*++p)
            return NULL;
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_list(const char *p, char close, int object)
{
    p = json_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (object) {
            p = json_string_end(json_ws(p));
            if (!p || *(p = json_ws(p)) != ':')
                return NULL;
            p++;
        }
        p = json_value(p);
        if (!p)
            return NULL;
        p = json_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}

static const char *json_value(const char *p)
{
    p = json_ws(p);
    if (*p == '{')
        return json_list(p, '}', 1);
    if (*p == '[')
        return json_list(p, ']', 0);
    if (*p == '"')
        return json_string_end(p);
    for (const char *const *w =
             (const char *const[]){"true", "false", "null", NULL};
         *w; w++)
        if (!strncmp(p, *w, strlen(*w)))
            return p + strlen(*w);
    char *end;
    strtod(p, &end);
    return end == p ? NULL : end;
}

Test(bench, csv_json_and_png_agree_with_the_table)
{
    char root[64], out_dir[64];
    make_data(root);
    tu_tmpdir(out_dir);
    char a[1024];
    snprintf(a, sizeof a,
             "--wide --data %s --workers 1,2 --prefetch 2 --pin on "
             "--batches 3 --batch 4 --size 32 --warmup 1 --csv %s/t.csv "
             "--json %s/t.json --plot %s/t.png --quiet",
             root, out_dir, out_dir, out_dir);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    table_row rows[4];
    cr_assert_eq(parse_table(out, rows, 4), 2, "%s", out);

    char path[128];
    size_t n;
    snprintf(path, sizeof path, "%s/t.csv", out_dir);
    char *csv = (char *)tu_read_file(path, &n);
    csv[n] = '\0';
    cr_assert_eq(strncmp(csv,
                         "pin,workers,prefetch,images,batches,seconds,"
                         "images_per_s,",
                         45),
                 0, "%s", csv);
    cr_assert_not_null(strstr(csv, ",buffer_wait_ms,rounds,images_per_s_min,"
                                   "images_per_s_max,images_per_s_rounds,"
                                   "decode,decode_used,cpu_us\n"),
                       "%s", csv);
    const char *line = strchr(csv, '\n') + 1;
    for (int i = 0; i < 2; i++, line = strchr(line, '\n') + 1) {
        char pin[16];
        int workers, prefetch, batches;
        long images;
        double seconds, img_s;
        cr_assert_eq(sscanf(line, "%15[^,],%d,%d,%ld,%d,%lf,%lf", pin, &workers,
                            &prefetch, &images, &batches, &seconds, &img_s),
                     7, "%s", line);
        cr_assert_str_eq(pin, rows[i].pin);
        cr_assert_eq(workers, rows[i].workers);
        cr_assert_eq(prefetch, rows[i].prefetch);
        cr_assert_eq(batches, 3);
        cr_assert_eq(images, 12, "3 full batches of 4");
        cr_assert_float_eq(img_s, rows[i].img_s, img_s >= 100 ? 0.51 : 0.0551,
                           "csv %f, table %f", img_s, rows[i].img_s);
        /* the median round's images and seconds (3 rounds of 3 batches) */
        cr_assert_float_eq(img_s, images / seconds, img_s * 1e-3);
        /* the last four columns: rounds, min, max and every round's */
        const char *c = line;
        for (int k = 0; k < 23; k++)
            c = strchr(c, ',') + 1;
        int rounds;
        double lo, hi, r[3];
        cr_assert_eq(sscanf(c, "%d,%lf,%lf,%lf;%lf;%lf\n", &rounds, &lo, &hi,
                            &r[0], &r[1], &r[2]),
                     6, "%s", line);
        cr_assert_eq(rounds, 3);
        qsort(r, 3, sizeof r[0], cmp_dbl);
        cr_assert(r[0] == lo && r[1] == img_s && r[2] == hi, "%s", line);
    }
    cr_assert_eq(*line, '\0', "exactly two data rows");
    free(csv);

    snprintf(path, sizeof path, "%s/t.json", out_dir);
    char *json = (char *)tu_read_file(path, &n);
    json[n] = '\0';
    const char *end = json_value(json);
    cr_assert(end && *json_ws(end) == '\0', "not one JSON value:\n%s", json);
    cr_assert_not_null(strstr(json, "\"rows\": ["));
    /* Each row's images_per_s, as printed (2 decimals), against the table's
     * (whole above 100, else 1 decimal): they differ by at most the two
     * roundings. */
    const char *at = json;
    for (int i = 0; i < 2; i++) {
        at = strstr(at, "\"images_per_s\": ");
        cr_assert_not_null(at, "row %d has no images_per_s", i);
        at += strlen("\"images_per_s\": ");
        const double v = strtod(at, NULL);
        cr_assert_float_eq(v, rows[i].img_s, v >= 100 ? 0.51 : 0.0551,
                           "json %.2f, table %.1f", v, rows[i].img_s);
    }
    cr_assert_null(strstr(at, "\"images_per_s\": "), "exactly two rows");
    free(json);

    snprintf(path, sizeof path, "%s/t.png", out_dir);
    uint8_t *png = tu_read_file(path, &n);
    cr_assert_gt(n, 1000);
    cr_assert_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0, "PNG signature");
    cr_assert_eq(memcmp(png + 12, "IHDR", 4), 0);
    const uint32_t w =
        (uint32_t)png[16] << 24 | png[17] << 16 | png[18] << 8 | png[19];
    const uint32_t h =
        (uint32_t)png[20] << 24 | png[21] << 16 | png[22] << 8 | png[23];
    cr_assert(w == 960 && h == 600, "%ux%u", w, h);
    cr_assert_eq(memcmp(png + n - 8, "IEND", 4), 0, "ends with IEND");
    free(png);
    free(out);
    free(err);
    tu_rm_rf(out_dir);
    tu_rm_rf(root);
}

/* Every problem file the sweep met is listed once at the end, on stderr,
 * with its reason and code; the table on stdout stays a table. 25 files,
 * 5 batches of 5: a whole epoch, so the bad file is met. */
Test(bench, problem_files_are_listed_once_at_the_end, .timeout = 120)
{
    char root[64], bad[256], args[512];
    make_data(root);
    snprintf(bad, sizeof bad, "%s/c1/bad.jpg", root);
    tu_write_file(bad, "GIF89a", 6);
    snprintf(args, sizeof args,
             "--data %s --size 32 --batch 5 --workers 1,2 --prefetch 1 "
             "--pin off --batches 5 --warmup 0 --device host --quiet",
             root);
    char *out, *err;
    cr_assert_eq(run_tool(args, &out, &err), 0, "%s", err);
    char line[512];
    snprintf(line, sizeof line,
             "pinload-bench: bad: %s: not an image pinload reads (GIF data) "
             "(PL_ENOTIMAGE)\n",
             bad);
    const char *at = strstr(err, line);
    cr_assert_not_null(at, "stderr: %s", err);
    cr_assert_null(strstr(at + 1, line), "listed twice: %s", err);
    cr_assert_null(strstr(out, "bad.jpg"), "stdout: %s", out);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* A dataset in which no file can be decoded: the bench stops with the
 * loader's PL_ENODATA, naming the epoch, instead of looping on empty
 * epochs. */
Test(bench, data_with_no_good_file_is_an_error_not_an_endless_loop,
     .timeout = 60)
{
    char root[64], path[256], args[512];
    tu_tmpdir(root);
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/c%d/%d.jpg", root, i % 2, i);
        tu_write_file(path, "GIF89a", 6);
    }
    snprintf(args, sizeof args,
             "--data %s --workers 1 --batches 3 --batch 2 --size 16 "
             "--warmup 1",
             root);
    char *out, *err;
    const int rc = run_tool(args, &out, &err);
    cr_assert_neq(rc, 0, "stdout: %s", out);
    cr_assert_neq(rc, 2, "not a usage error: %s", err);
    cr_assert_not_null(strstr(err, "epoch 0"), "stderr: %s", err);
    cr_assert_not_null(strstr(err, "4"), "stderr: %s", err);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* --decode is a sweep axis like --workers: a row per decoder asked, the
 * table and the CSV naming it and what auto became (the CPU on the host
 * backend), with the process's CPU time per image. */
Test(bench, decode_is_swept_and_each_row_names_its_decoder)
{
    char root[64], out_dir[64];
    make_data(root);
    tu_tmpdir(out_dir);
    char a[1024];
    snprintf(a, sizeof a,
             "--data %s --decode cpu,auto --workers 1,2 --prefetch 2 "
             "--pin on --device host --batches 3 --batch 4 --size 32 "
             "--warmup 1 --csv %s/t.csv --quiet",
             root, out_dir);
    char *out, *err;
    cr_assert_eq(run_tool(a, &out, &err), 0, "%s", err);
    cr_assert_not_null(strstr(out, " decode "), "%s", out);
    int auto_cpu = 0;
    for (const char *p = out; (p = strstr(p, " auto:cpu ")); p++)
        auto_cpu++;
    cr_assert_eq(auto_cpu, 2, "%s", out);
    char path[128];
    size_t n;
    snprintf(path, sizeof path, "%s/t.csv", out_dir);
    char *csv = (char *)tu_read_file(path, &n);
    csv[n] = '\0';
    int rows = 0, autos = 0;
    for (const char *line = strchr(csv, '\n') + 1; *line;
         line = strchr(line, '\n') + 1, rows++) {
        const char *end = strchr(line, '\n');
        const char *tail = end;
        for (int commas = 0; tail > line && commas < 3; tail--)
            commas += tail[-1] == ',';
        char asked[8], used[8];
        double us;
        cr_assert_eq(sscanf(tail, ",%7[^,],%7[^,],%lf", asked, used, &us), 3,
                     "%.*s", (int)(end - line), line);
        cr_assert_str_eq(used, "cpu");
        cr_assert_gt(us, 0, "CPU time per image");
        autos += !strcmp(asked, "auto");
    }
    cr_assert_eq(rows, 4, "%s", csv);
    cr_assert_eq(autos, 2, "%s", csv);
    free(csv);
    free(out);
    free(err);
    tu_rm_rf(root);
    tu_rm_rf(out_dir);
}
