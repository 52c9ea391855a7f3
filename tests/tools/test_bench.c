/* pinload-bench, run as a user runs it: arguments, the table, the CSV and
 * JSON files against the table, the PNG chart. Sweeps are tiny (a few
 * batches of 32x32 samples) so the suite stays fast; no figure is judged,
 * only its presence, sign and agreement across outputs. */
#include <math.h>
#include <sys/wait.h>

#include "pinload.h"
#include "testutil.h"

/* Run `args` through the shell; [out] stdout and stderr (malloc'd). */
static int run_tool(const char *args, char **out, char **err)
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

static void expect_usage_error(const char *args, const char *needle)
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

/* ---- --plan: the model of docs/SCALE.md ---- */

/* The number after "key": in s, after `from` if given. */
static double json_num(const char *s, const char *from, const char *key)
{
    const char *at = from ? strstr(s, from) : s;
    cr_assert_not_null(at, "no %s in %s", from, s);
    char k[96];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(at, k);
    cr_assert_not_null(p, "no %s in %s", key, at);
    return strtod(p + strlen(k), NULL);
}

/* A constant of the model, by name, from --plan --constants. */
static double plan_const(const char *table, const char *name)
{
    char k[96];
    snprintf(k, sizeof k, "  %s ", name);
    const char *p = strstr(table, k);
    cr_assert_not_null(p, "no constant %s in %s", name, table);
    return strtod(p + strlen(k), NULL);
}

static void assert_near(double got, double want, const char *what)
{
    cr_assert(fabs(got - want) <= 1e-6 * fabs(want) + 0.5,
              "%s: %.9g, by hand %.9g", what, got, want);
}

/* 1,000 samples of 1,000 bytes in 100 shards, 2 nodes of 4 ranks, 2
 * epochs, remote at 1 MB/s with no cache_limit: each value worked out
 * here from docs/SCALE.md's formulas, with the constants the tool lists. */
Test(bench, plan_values_follow_the_documented_formulas)
{
    char *tab, *out, *err;
    cr_assert_eq(run_tool("--plan --constants", &tab, &err), 0, "%s", err);
    free(err);
    const double table = plan_const(tab, "table_bytes_per_sample"),
                 mapped_shard = plan_const(tab, "table_bytes_per_mapped_shard"),
                 shard = plan_const(tab, "private_bytes_per_shard"),
                 sample = plan_const(tab, "private_bytes_per_sample"),
                 scan = plan_const(tab, "scan_bytes_per_window_sample"),
                 t_idx = plan_const(tab, "create_seconds_per_sample_idx"),
                 t_shard = plan_const(tab, "create_seconds_per_shard_idx"),
                 t_hdr = plan_const(tab, "create_seconds_per_sample_headers"),
                 t_hdr_shard =
                     plan_const(tab, "create_seconds_per_shard_headers"),
                 latency = plan_const(tab, "request_latency"),
                 shards_create =
                     plan_const(tab, "shards_order_create_fraction");
    cr_assert_eq(plan_const(tab, "table_bytes_per_heap_shard"), 72);
    cr_assert_eq(plan_const(tab, "mapped_shards_max"), 32768);
    cr_assert_eq(plan_const(tab, "shards_order_bytes_per_shard"), 44);
    cr_assert_eq(plan_const(tab, "bytes_per_remote_shard"), 900);
    cr_assert_eq(plan_const(tab, "index_bytes_per_member"), 96);
    cr_assert_eq(plan_const(tab, "shards_order_shards_in_hand"), 5);
    cr_assert_eq(plan_const(tab, "index_requests_in_flight"), 8);
    cr_assert_eq(plan_const(tab, "scan_window_shards"), 64);
    free(tab);
    cr_assert_eq(run_tool("--plan --samples 1K --shards 100 --bytes 1M "
                          "--nodes 2 --ranks-per-node 4 --batch 8 --epochs 2 "
                          "--bandwidth 1MB --size 10 --prefetch 2 --json",
                          &out, &err),
                 0, "%s", err);
    const char *g = "\"order\": \"global\"", *s = "\"order\": \"shards\"";
    const double ring = 2 * 8 * 10 * 10 * 3; /* slots x batch x 10x10 RGB */
    assert_near(json_num(out, g, "ring_bytes"), 4800, "ring");
    /* the mapped tables, once a node: 10 samples' records and names a
     * shard and the rest of its pages */
    const double shared = 100 * (10 * table + mapped_shard);
    assert_near(json_num(out, g, "node_shared_bytes"), shared, "shared");
    assert_near(json_num(out, g, "rank_heap_table_bytes"), 0, "heap tables");
    /* private: per shard (and 900 B a remote shard), per sample, the
     * ring; create's peak adds the indexes of 64 shards at a time (10
     * samples each, 2 members of 96 B a sample) */
    const double resident = 100 * (shard + 900) + 1000 * sample + ring;
    assert_near(json_num(out, g, "rank_resident_bytes"), resident, "resident");
    assert_near(json_num(out, g, "rank_peak_bytes"),
                resident + 64 * 10 * 2 * 96, "peak");
    assert_near(json_num(out, g, "node_peak_bytes"),
                4 * (resident + 64 * 10 * 2 * 96) + shared, "node peak");
    /* create: the samples and shards, 100 .idx requests 8 at a time,
     * their bytes (the table's, 72 a shard) at 1 MB/s */
    const double create = 1000 * t_idx + 100 * t_shard + 100 / 8.0 * latency +
                          (1000 * table + 100 * 72) / 1e6;
    assert_near(json_num(out, g, "create_s") * 1e6, create * 1e6, "create");
    /* no cache_limit: whole shards, the data once a node (1 MB, 1 s) */
    cr_assert_not_null(strstr(out, "\"mode\": \"whole\""), "%s", out);
    assert_near(json_num(out, g, "cache_need_bytes"), 1e6, "cache");
    assert_near(json_num(out, g, "fetch_first_bytes"), 1e6, "fetch1");
    assert_near(json_num(out, g, "fetch_mean_bytes"), 5e5, "fetch");
    /* 100 fetches for 2 epochs x 500 samples read a node */
    assert_near(json_num(out, g, "hit_rate") * 1e6, 0.9e6, "hit");
    assert_near(json_num(out, g, "epoch_first_s") * 1e6, 1e6, "epoch1 s");
    /* shards: the same and the sampler's 44 B a shard; the same tables;
     * create the global's times the measured fraction; a node reads half
     * the shards an epoch: 500 kB, then half of those again (it saw half
     * the data in epoch 1, and keeps it). */
    assert_near(json_num(out, s, "rank_resident_bytes"), resident + 100 * 44,
                "shards resident");
    assert_near(json_num(out, s, "node_shared_bytes"), shared, "shared");
    assert_near(json_num(out, s, "create_s") * 1e6,
                create * shards_create * 1e6, "shards create");
    assert_near(json_num(out, s, "cache_need_bytes"), 4 * 5 * 1e4, "cache");
    assert_near(json_num(out, s, "fetch_first_bytes"), 5e5, "fetch1");
    assert_near(json_num(out, s, "fetch_mean_bytes"), (5e5 + 2.5e5) / 2,
                "fetch");
    assert_near(json_num(out, s, "requests_mean") * 1e3, 37.5e3, "requests");
    assert_near(json_num(out, s, "hit_rate") * 1e6, (1 - 75 / 1000.0) * 1e6,
                "hit");
    free(out);
    free(err);
    /* local shards (no --bandwidth): no remote shard's 900 B; create's
     * peak (the indexes written) adds 64 shards' samples at a time */
    cr_assert_eq(run_tool("--plan --samples 12800 --shards 128 --bytes 1G "
                          "--ranks-per-node 2 --batch 8 --size 10 "
                          "--order global --json",
                          &out, &err),
                 0, "%s", err);
    const double local = 128 * shard + 12800 * sample + ring;
    assert_near(json_num(out, g, "rank_resident_bytes"), local, "local");
    assert_near(json_num(out, g, "rank_peak_bytes"), local + 64 * 100 * scan,
                "local peak");
    assert_near(json_num(out, g, "node_shared_bytes"),
                128 * (100 * table + mapped_shard), "local shared");
    assert_near(json_num(out, g, "create_s") * 1e6,
                (12800 * t_idx + 128 * t_shard) * 1e6, "local create");
    assert_near(json_num(out, g, "create_no_idx_s") * 1e6,
                (12800 * t_hdr + 128 * t_hdr_shard) * 1e6, "no .idx");
    assert_near(json_num(out, g, "hit_rate"), 1, "local hit");
    free(out);
    free(err);
    /* past 32,768 local shards the tables come from one dataset table
     * file, shared: 40,000 shards of 2 samples, 7,232 of them past the
     * limit (2 samples, the 72-byte head and a 64-byte directory entry
     * each), none in the heap */
    cr_assert_eq(run_tool("--plan --samples 80000 --shards 40000 --bytes 1G "
                          "--batch 8 --size 10 --order global --json",
                          &out, &err),
                 0, "%s", err);
    assert_near(json_num(out, g, "rank_heap_table_bytes"), 0, "heap");
    assert_near(json_num(out, g, "rank_resident_bytes"),
                40000 * shard + 80000 * sample + ring, "joined resident");
    assert_near(json_num(out, g, "node_shared_bytes"),
                32768 * (2 * table + mapped_shard) +
                    7232 * (2 * table + 72 + 64),
                "joined shared");
    free(out);
    free(err);
    /* a cache_limit below the data: ranged reads, 500 a node an epoch,
     * each the sample's 1,000 bytes and 600 of request */
    cr_assert_eq(run_tool("--plan --samples 1000 --shards 100 --bytes 1e6 "
                          "--nodes 2 --bandwidth 1M --cache-limit 999999 "
                          "--order global --json",
                          &out, &err),
                 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"mode\": \"ranged\""), "%s", out);
    cr_assert_null(strstr(out, s), "%s", out);
    assert_near(json_num(out, g, "fetch_mean_bytes"), 500 * 1600, "ranged");
    assert_near(json_num(out, g, "hit_rate"), 0, "ranged hit");
    free(out);
    free(err);
}

Test(bench, plan_refuses_bad_arguments_naming_the_option)
{
    expect_usage_error("--plan --shards 10 --bytes 1G",
                       "--plan: --samples is required");
    expect_usage_error("--plan --samples 1M --bytes 1G",
                       "--plan: --shards is required");
    expect_usage_error("--plan --samples 1M --shards 10",
                       "--plan: --bytes is required");
    expect_usage_error("--plan --samples 1x --shards 10 --bytes 1G",
                       "--samples: \"1x\" is not a size");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes -5",
                       "--bytes: \"-5\" is not a size");
    expect_usage_error("--plan --samples 10 --shards 20 --bytes 1G",
                       "--shards: 20 shards for 10 samples");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G --nodes 0",
                       "--nodes: \"0\" is below 1");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G "
                       "--order random",
                       "--order: unknown value \"random\"");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G "
                       "--epochs 0",
                       "--epochs: \"0\" is not an integer");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G --wide",
                       "unknown option --wide");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G --bandwidth",
                       "--bandwidth needs a value");
}

static void quiet_log(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx, (void)level, (void)msg;
}

/* The peak memory a loader over data adds by its first batch (host,
 * batch 64 at 16x16, 2 workers), measured in a child process. */
static double child_peak(const char *data)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        pl_config c;
        pl_config_default(&c);
        c.data = data;
        c.device = PL_DEVICE_HOST;
        c.batch_size = 64;
        c.width = c.height = 16;
        c.num_workers = 2;
        c.rank = 0;
        c.world_size = 1;
        c.log = quiet_log;
        const long before = tu_status_kib("VmRSS");
        pl_loader *l;
        const pl_batch *b;
        double peak = -1;
        if (pl_loader_create(&c, &l) == 0) {
            if (pl_loader_next(l, &b) == 0) {
                pl_loader_release(l, b, NULL);
                peak = (double)(tu_status_kib("VmHWM") - before) * 1024.0;
            }
            pl_loader_destroy(l);
        }
        _exit(write(fd[1], &peak, sizeof peak) == sizeof peak ? 0 : 1);
    }
    close(fd[1]);
    double peak = -1;
    cr_assert_eq(read(fd[0], &peak, sizeof peak), (ssize_t)sizeof peak);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(peak > 0, "the child's create failed");
    return peak;
}

/* The model against a real create: 100,000 samples (or
 * $PINLOAD_PLAN_SAMPLES) packed by pinload-pack in shards of 200, a
 * loader over them (host, batch 64 at 16x16), its peak memory at the
 * first batch against --plan's for one rank alone on its node (its
 * private peak and the mapped indexes it shares), within docs/SCALE.md's
 * 25%: the constants were measured at 500k and 2M samples, and at 100k
 * the threads' malloc arenas and the libraries' pages (about 1.5 MB,
 * not modelled) are 12% of the peak. */
Test(bench, plan_predicts_the_measured_peak_at_100k_samples, .timeout = 300)
{
    const char *env = getenv("PINLOAD_PLAN_SAMPLES");
    const int samples = env && atoi(env) >= 200 ? atoi(env) : 100000;
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    char root[64], path[256], cmd[1024];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/one.jpg", root);
    tu_write_jpeg(path, 16, 16, 7, NULL);
    snprintf(cmd, sizeof cmd, "%s/list.txt", root);
    FILE *f = fopen(cmd, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < samples; i++)
        fprintf(f, "%s %d\n", path, i % 100);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-pack --data %s/list.txt --out %s/p --per-shard 200 "
             "--quiet",
             tu_build_dir(), root, root);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char data[128];
    snprintf(data, sizeof data, "%s/p", root);
    /* The median of three creates, each in a child process of its own
     * (VmHWM is per process): the threads' arenas move the peak by about
     * 1.5 MB from one run to the next. */
    double runs[3];
    for (int k = 0; k < 3; k++)
        runs[k] = child_peak(data);
    const double lo = fmin(runs[0], fmin(runs[1], runs[2])),
                 hi = fmax(runs[0], fmax(runs[1], runs[2]));
    const double peak = runs[0] + runs[1] + runs[2] - lo - hi;
    char args[512], *out, *err;
    snprintf(args, sizeof args,
             "--plan --samples %d --shards %d --bytes 1G --nodes 1 "
             "--ranks-per-node 1 --batch 64 --size 16 --prefetch 2 "
             "--order global --json",
             samples, samples / 200);
    cr_assert_eq(run_tool(args, &out, &err), 0, "%s", err);
    /* one rank on its node: its private peak and the shared tables */
    const double model = json_num(out, NULL, "node_peak_bytes");
    cr_log_info("peak at %d samples: measured %.0f, model %.0f (%.2fx)",
                samples, peak, model, model / peak);
    cr_assert(model > 0.75 * peak && model < 1.25 * peak,
              "model %.0f bytes against %.0f measured (%.2fx), outside "
              "docs/SCALE.md's 25%%",
              model, peak, model / peak);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* The table fits 100 columns, as the sweep's does, local and remote, and
 * names both orders; --order picks one. */
Test(bench, plan_table_fits_100_columns_and_order_picks_one)
{
    static const char *const jobs[] = {
        "--plan --samples 5G --shards 1M --bytes 550T --nodes 512 --epochs 10 "
        "--bandwidth 12.5G --cache-limit 2T",
        "--plan --samples 2M --shards 4000 --bytes 5G"};
    for (size_t k = 0; k < 2; k++) {
        char *out, *err;
        cr_assert_eq(run_tool(jobs[k], &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "\nglobal "), "%s", out);
        cr_assert_not_null(strstr(out, "\nshards "), "%s", out);
        for (const char *l = out; *l;) {
            const char *e = strchr(l, '\n');
            const size_t len = e ? (size_t)(e - l) : strlen(l);
            cr_assert_leq(len, 100, "a line of %zu columns: %.*s", len,
                          (int)len, l);
            l += len + (e != NULL);
        }
        free(out);
        free(err);
    }
    char *out, *err;
    /* --name-bytes is accepted and changes nothing: no name is kept a
     * shard sample */
    cr_assert_eq(run_tool("--plan --samples 2M --shards 4000 --bytes 5G "
                          "--order shards --name-bytes 99",
                          &out, &err),
                 0, "%s", err);
    cr_assert_null(strstr(out, "\nglobal "), "%s", out);
    cr_assert_not_null(strstr(out, "\nshards local"), "%s", out);
    free(out);
    free(err);
}
