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

/* On a terminal: which row of how many, batches of how many, img/s and the
 * time left; into a file, no progress line. */
Test(bench, progress_on_a_terminal_names_the_row_batches_and_eta,
     .timeout = 120)
{
    char root[64], cmd[2048];
    make_data(root);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-bench --data %s --workers 1,2 --prefetch 1 --pin on "
             "--batches 40 --batch 2 --size 16 --warmup 0 --device host",
             tu_build_dir(), root);
    char *tty = tu_run_on_tty(cmd);
    cr_assert_not_null(strstr(tty, "row 1 of 2: pin on, 1 workers"), "%s", tty);
    cr_assert_not_null(strstr(tty, " of 40 batches, "), "%s", tty);
    cr_assert_not_null(strstr(tty, " img/s, ETA "), "%s", tty);
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
    cr_assert_not_null(strstr(err, "stopped by signal 2 after 1 row"), "%s",
                       err);
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
    double img_s, step_ms;
    char overlap[16];
} table_row;

/* The data rows of the printed table, in order. */
static int parse_table(const char *out, table_row *rows, int cap)
{
    int n = 0;
    for (const char *line = out; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        table_row r = {0};
        char h2d[32], step[32];
        double mb, wait, p99, us[4];
        if (sscanf(line,
                   "%15s %d %d %lf %lf %31s %lf %lf %lf %lf %lf %lf "
                   "%31s %15s",
                   r.pin, &r.workers, &r.prefetch, &r.img_s, &mb, h2d, &wait,
                   &p99, &us[0], &us[1], &us[2], &us[3], step,
                   r.overlap) == 14) {
            cr_assert_lt(n, cap);
            r.step_ms = step[0] == '-' ? -1 : atof(step);
            rows[n++] = r;
        }
    }
    return n;
}

Test(bench, a_sweep_prints_one_row_per_combination_and_names_the_best)
{
    char root[64];
    make_data(root);
    char a[512];
    snprintf(a, sizeof a,
             "--wide --data %s --workers 1,2 --prefetch 1,3 --pin "
             "on,off --batches 3 --batch 4 --size 32 --warmup 1",
             root);
    char *out, *err;
    const int rc = run_tool(a, &out, &err);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    table_row rows[16];
    const int n = parse_table(out, rows, 16);
    cr_assert_eq(n, 8, "%d rows in:\n%s", n, out);
    /* Pin outermost, then prefetch, then workers. */
    static const struct {
        const char *pin;
        int prefetch, workers;
    } want[8] = {{"on", 1, 1},  {"on", 1, 2},  {"on", 3, 1},  {"on", 3, 2},
                 {"off", 1, 1}, {"off", 1, 2}, {"off", 3, 1}, {"off", 3, 2}};
    int best = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(rows[i].pin, want[i].pin, "row %d", i);
        cr_assert_eq(rows[i].prefetch, want[i].prefetch, "row %d", i);
        cr_assert_eq(rows[i].workers, want[i].workers, "row %d", i);
        cr_assert_gt(rows[i].img_s, 0.0, "row %d", i);
        cr_assert_eq(rows[i].step_ms, -1, "no step without --compute-ms");
        if (rows[i].img_s > rows[best].img_s)
            best = i;
    }
    /* The tool compares unrounded rates: any row whose printed rate ties
     * the highest may be the one it names. */
    int named = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].img_s != rows[best].img_s)
            continue;
        char line[1024];
        snprintf(line, sizeof line,
                 "best: pin %s, %d workers, prefetch %d:", rows[i].pin,
                 rows[i].workers, rows[i].prefetch);
        named += strstr(out, line) != NULL;
    }
    cr_assert_eq(named, 1, "the best row is not named in:\n%s", out);
    cr_assert_not_null(strstr(out, "backend: host"), "%s", out);
    free(out);
    free(err);
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
        cr_assert_float_eq(img_s, rows[i].img_s, 0.0551, "csv %f, table %f",
                           img_s, rows[i].img_s);
        cr_assert_float_eq(img_s, images / seconds, img_s * 1e-3);
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
     * (1 decimal): they differ by at most the two roundings. */
    const char *at = json;
    for (int i = 0; i < 2; i++) {
        at = strstr(at, "\"images_per_s\": ");
        cr_assert_not_null(at, "row %d has no images_per_s", i);
        at += strlen("\"images_per_s\": ");
        const double v = strtod(at, NULL);
        cr_assert_float_eq(v, rows[i].img_s, 0.0551, "json %.2f, table %.1f", v,
                           rows[i].img_s);
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
             "pinload-bench: bad: %s: not a JPEG file (GIF data) "
             "(PL_ENOTJPEG)\n",
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
