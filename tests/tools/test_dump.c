/* pinload-dump, the tool: what it writes (one PPM per delivered sample and
 * index.tsv), that the output does not depend on the pipeline's shape,
 * --raw against djpeg, the error policies and its command line. Runs the
 * binary from $PINLOAD_BUILD (make tools). */
#include <sys/wait.h>

#include "pinload.h"
#include "testutil.h"

/* ---- running the tool ---- */

typedef struct result {
    int status; /* exit code, or -1 if it did not exit normally */
    char *out;  /* stdout, NUL-terminated */
    char *err;  /* stderr */
} result;

static void result_free(result *r)
{
    free(r->out);
    free(r->err);
}

/* Runs "pinload-dump ARGS" through the shell, capturing both streams in
 * files under `scratch`. */
static result dump(const char *scratch, const char *args)
{
    char tool[512], cmd[8192], out[256], err[256];
    snprintf(tool, sizeof tool, "%s/pinload-dump", tu_build_dir());
    cr_assert_eq(access(tool, X_OK), 0, "%s is missing: run make tools", tool);
    snprintf(out, sizeof out, "%s/stdout.txt", scratch);
    snprintf(err, sizeof err, "%s/stderr.txt", scratch);
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", tool, args, out, err);
    const int st = system(cmd);
    result r = {.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1};
    r.out = tu_slurp(out);
    r.err = tu_slurp(err);
    return r;
}

/* ---- reading what it wrote ---- */

static void ppm_path(char *buf, size_t cap, const char *dir, int k)
{
    snprintf(buf, cap, "%s/%06d.ppm", dir, k);
}

static void assert_same_file(const char *a, const char *b)
{
    size_t la, lb;
    uint8_t *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
    cr_assert_eq(la, lb, "%s and %s differ in size", a, b);
    cr_assert_eq(memcmp(x, y, la), 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

/* The sorted class folders of an ImageFolder root, computed here. */
static int class_folders(const char *root, char names[][256], int cap)
{
    DIR *d = opendir(root);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' &&
            (!de->d_name[1] || strcmp(de->d_name, "..") == 0))
            continue;
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", root, de->d_name);
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            cr_assert_lt(n, cap);
            snprintf(names[n++], 256, "%s", de->d_name);
        }
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort, byte order */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[256];
            memcpy(t, names[j], 256);
            memcpy(names[j], names[j - 1], 256);
            memcpy(names[j - 1], t, 256);
        }
    return n;
}

/* The class folder of "root/<class>/<file>". */
static void class_of(const char *root, const char *path, char *out, size_t cap)
{
    const size_t n = strlen(root);
    cr_assert_eq(strncmp(path, root, n), 0, "%s not under %s", path, root);
    cr_assert_eq(path[n], '/');
    const char *c = path + n + 1, *slash = strchr(c, '/');
    cr_assert_not_null(slash, "%s", path);
    snprintf(out, cap, "%.*s", (int)(slash - c), c);
}

/* Number of lines in s (a last line without '\n' counts). */
static int count_lines(const char *s, const char *prefix, int *with_prefix)
{
    int n = 0;
    *with_prefix = 0;
    for (const char *p = s; *p;) {
        const char *nl = strchr(p, '\n');
        n++;
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            (*with_prefix)++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

/* ---- on the shared photos ---- */

#define PHOTOS 47

Test(dump, three_pipeline_shapes_write_the_same_47_samples, .timeout = 300)
{
    char data[512];
    TU_SHARED_OR_SKIP(data, "photos/imagefolder");
    char scratch[64];
    tu_tmpdir(scratch);
    static const char *const shapes[] = {
        "--workers 1 --pin on",
        "--workers 2 --pin off",
        "--workers 2 --pin on --prefetch 1",
    };
    char outs[3][128];
    for (int s = 0; s < 3; s++) {
        snprintf(outs[s], sizeof outs[s], "%s/out%d", scratch, s);
        char args[2048];
        snprintf(args, sizeof args,
                 "--data '%s' --out '%s' --size 48 --device host %s", data,
                 outs[s], shapes[s]);
        result r = dump(scratch, args);
        cr_assert_eq(r.status, 0, "%s: exit %d: %s", shapes[s], r.status,
                     r.err);
        result_free(&r);
        cr_assert_eq(tu_count_ppms(outs[s]), PHOTOS, "%s", shapes[s]);
    }

    char classes[64][256];
    const int nclasses = class_folders(data, classes, 64);
    cr_assert_eq(nclasses, 19);
    int n;
    tu_row *rows = tu_read_index(outs[0], &n);
    cr_assert_eq(n, PHOTOS);
    for (int k = 0; k < n; k++) {
        cr_assert_eq(rows[k].position, k);
        cr_assert_str_eq(rows[k].status, "ok");
        char cls[256];
        class_of(data, rows[k].path, cls, sizeof cls);
        int label = -1;
        for (int c = 0; c < nclasses; c++)
            if (strcmp(classes[c], cls) == 0)
                label = c;
        cr_assert_eq(rows[k].label, label,
                     "%s: label %d, folder %s is "
                     "class %d",
                     rows[k].path, rows[k].label, cls, label);
        for (int j = 0; j < k; j++)
            cr_assert_str_neq(rows[j].path, rows[k].path, "listed twice");
        struct stat st;
        cr_assert_eq(stat(rows[k].path, &st), 0, "%s", rows[k].path);
    }
    free(rows);

    for (int s = 1; s < 3; s++) {
        char a[256], b[256];
        snprintf(a, sizeof a, "%s/index.tsv", outs[0]);
        snprintf(b, sizeof b, "%s/index.tsv", outs[s]);
        assert_same_file(a, b);
        for (int k = 0; k < PHOTOS; k++) {
            ppm_path(a, sizeof a, outs[0], k);
            ppm_path(b, sizeof b, outs[s], k);
            assert_same_file(a, b);
        }
    }
    char p[256];
    ppm_path(p, sizeof p, outs[0], 0);
    int w, h;
    uint8_t *px = tu_read_ppm_file(p, &w, &h);
    cr_assert_not_null(px);
    cr_assert_eq(w, 48);
    cr_assert_eq(h, 48);
    free(px);
    tu_rm_rf(scratch);
}

Test(dump, raw_writes_each_file_at_its_size_with_djpegs_pixels, .timeout = 300)
{
    char data[512];
    TU_SHARED_OR_SKIP(data, "photos/imagefolder");
    char scratch[64], out[128];
    tu_tmpdir(scratch);
    snprintf(out, sizeof out, "%s/raw", scratch);
    char args[2048];
    snprintf(args, sizeof args,
             "--data '%s' --out '%s' --raw --limit 4 --device host", data, out);
    result r = dump(scratch, args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    result_free(&r);
    cr_assert_eq(tu_count_ppms(out), 4);
    int n;
    tu_row *rows = tu_read_index(out, &n);
    cr_assert_eq(n, 4);
    for (int k = 0; k < 4; k++) {
        char p[256];
        ppm_path(p, sizeof p, out, k);
        int w, h, rw, rh;
        uint8_t *got = tu_read_ppm_file(p, &w, &h);
        uint8_t *want = tu_djpeg(rows[k].path, &rw, &rh);
        cr_assert_not_null(got, "%s", p);
        cr_assert_not_null(want, "djpeg %s", rows[k].path);
        cr_assert_eq(w, rw, "%s: width %d, djpeg %d", rows[k].path, w, rw);
        cr_assert_eq(h, rh, "%s: height %d, djpeg %d", rows[k].path, h, rh);
        cr_assert_geq(w, 640, "a real photo, not a resized sample");
        cr_assert_eq(tu_max_diff(got, want, (size_t)w * h * 3), 0,
                     "%s differs from djpeg", rows[k].path);
        free(got);
        free(want);
    }
    free(rows);
    tu_rm_rf(scratch);
}

Test(dump, train_augment_with_size_64_writes_64x64_samples, .timeout = 300)
{
    char data[512];
    TU_SHARED_OR_SKIP(data, "photos/imagefolder");
    char scratch[64], out[128];
    tu_tmpdir(scratch);
    snprintf(out, sizeof out, "%s/train", scratch);
    char args[2048];
    snprintf(args, sizeof args,
             "--data '%s' --out '%s' --augment train --size 64 --workers 2 "
             "--device host",
             data, out);
    result r = dump(scratch, args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    result_free(&r);
    cr_assert_eq(tu_count_ppms(out), PHOTOS);
    for (int k = 0; k < PHOTOS; k++) {
        char p[256];
        ppm_path(p, sizeof p, out, k);
        size_t len;
        uint8_t *b = tu_read_file(p, &len);
        static const char header[] = "P6\n64 64\n255\n";
        cr_assert_eq(len, sizeof header - 1 + 64 * 64 * 3, "%s", p);
        cr_assert_eq(memcmp(b, header, sizeof header - 1), 0, "%s", p);
        free(b);
    }
    tu_rm_rf(scratch);
}

/* ---- on generated data ---- */

/* root/c<i % 2>/g<i>.jpg for 6 good files, and root/c1/bad.jpg. */
static void make_bad_folder(char root[64], char *bad, size_t cap)
{
    tu_tmpdir(root);
    for (int i = 0; i < 6; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/data/c%d/g%d.jpg", root, i % 2, i);
        tu_write_jpeg(p, 40, 32, (unsigned)i + 1, NULL);
    }
    snprintf(bad, cap, "%s/data/c1/bad.jpg", root);
    static const char text[] = "GIF89a, not a JPEG";
    tu_write_file(bad, text, sizeof text - 1);
}

Test(dump, on_error_fail_exits_nonzero_naming_the_bad_file, .timeout = 120)
{
    char root[64], bad[256], args[1024];
    make_bad_folder(root, bad, sizeof bad);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s/out' --size 16 --batch 2 "
             "--on-error fail --device host",
             root, root);
    result r = dump(root, args);
    cr_assert_neq(r.status, 0);
    cr_assert_neq(r.status, 2, "not a usage error");
    /* Its own message is one line; any other line is a library notice. */
    int own;
    const int lines = count_lines(r.err, "pinload-dump: ", &own);
    int notices;
    count_lines(r.err, "pinload: ", &notices);
    cr_assert_eq(own, 1, "stderr: %s", r.err);
    cr_assert_eq(lines, own + notices, "stderr: %s", r.err);
    const char *msg = strstr(r.err, "pinload-dump: ");
    const char *nl = strchr(msg, '\n');
    cr_assert_not_null(nl);
    char line[2048];
    snprintf(line, sizeof line, "%.*s", (int)(nl - msg), msg);
    cr_assert_not_null(strstr(line, bad), "stderr line: %s", line);
    cr_assert_not_null(strstr(line, "not an image pinload reads"),
                       "stderr line: %s", line);
    result_free(&r);
    tu_rm_rf(root);
}

Test(dump, on_error_skip_lists_the_bad_file_without_a_position, .timeout = 120)
{
    char root[64], bad[256], args[1024], out[128];
    make_bad_folder(root, bad, sizeof bad);
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s' --size 16 --batch 2 "
             "--on-error skip --device host",
             root, out);
    result r = dump(root, args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    /* The list of problem files at the end names it once, with the code. */
    char line[512];
    snprintf(line, sizeof line,
             "pinload-dump: bad: %s: not an image pinload reads", bad);
    const char *at = strstr(r.err, line);
    cr_assert_not_null(at, "stderr: %s", r.err);
    cr_assert_null(strstr(at + 1, line), "listed twice: %s", r.err);
    cr_assert_not_null(strstr(at, "(PL_ENOTIMAGE)\n"), "%s", at);
    result_free(&r);
    /* The bad file's place goes to the next good sample of the order,
     * wrapping to its start (equal steps on every rank): 7 positions. */
    cr_assert_eq(tu_count_ppms(out), 7);
    int n;
    tu_row *rows = tu_read_index(out, &n);
    cr_assert_eq(n, 8, "every position and the bad file have a row");
    int bad_rows = 0, next = 0;
    for (int k = 0; k < n; k++) {
        if (strcmp(rows[k].path, bad) == 0) {
            bad_rows++;
            cr_assert_eq(rows[k].position, -1);
            cr_assert_eq(rows[k].label, 1);
            cr_assert_str_neq(rows[k].status, "ok");
            cr_assert_not_null(strstr(rows[k].status, "PL_ENOTIMAGE"), "%s",
                               rows[k].status);
            cr_assert_not_null(
                strstr(rows[k].status, "not an image pinload reads"), "%s",
                rows[k].status);
            continue;
        }
        cr_assert_eq(rows[k].position, next++, "row %d", k);
        cr_assert_str_eq(rows[k].status, "ok");
        /* g<i>.jpg is in c<i % 2>. */
        const char *g = strrchr(rows[k].path, '/') + 2;
        cr_assert_eq(rows[k].label, (*g - '0') % 2, "%s", rows[k].path);
    }
    cr_assert_eq(bad_rows, 1);
    cr_assert_eq(next, 7);
    /* The last position repeats the first: the rank's order wrapped. */
    int first = -1, last = -1;
    for (int k = 0; k < n; k++) {
        if (rows[k].position == 0)
            first = k;
        if (rows[k].position == 6)
            last = k;
    }
    cr_assert(first >= 0 && last >= 0);
    cr_assert_str_eq(rows[last].path, rows[first].path);
    free(rows);
    tu_rm_rf(root);
}

/* ---- stopping and resuming ---- */

/* Each row of `part` is in `whole` (positions removed when matched; a bad
 * file's "-" row may be in both runs, as each pipeline may meet it). */
static void take_rows(tu_row *whole, int n, const tu_row *part, int m)
{
    for (int i = 0; i < m; i++) {
        int found = 0;
        for (int k = 0; k < n && !found; k++)
            if (whole[k].path[0] && whole[k].position == part[i].position &&
                strcmp(whole[k].path, part[i].path) == 0 &&
                whole[k].label == part[i].label &&
                strcmp(whole[k].status, part[i].status) == 0) {
                if (part[i].position >= 0)
                    whole[k].path[0] = '\0';
                found = 1;
            }
        cr_assert(found, "row %ld %s is not in the uninterrupted run's index",
                  part[i].position, part[i].path);
    }
}

/* --stop-after-batches 2 --save-state, then --resume-from with other
 * workers: the two runs write exactly the uninterrupted run's samples,
 * byte for byte and numbered alike, and its index rows between them,
 * under skip (the bad file's place taken, the order wrapping) and
 * substitute. */
Test(dump, stop_save_and_resume_write_the_uninterrupted_runs_files,
     .timeout = 120)
{
    char root[64], bad[256];
    make_bad_folder(root, bad, sizeof bad);
    const char *policies[] = {"skip", "substitute"};
    for (int p = 0; p < 2; p++) {
        char args[2048], full[128], a[128], b[128], st[128];
        snprintf(full, sizeof full, "%s/full-%d", root, p);
        snprintf(a, sizeof a, "%s/a-%d", root, p);
        snprintf(b, sizeof b, "%s/b-%d", root, p);
        snprintf(st, sizeof st, "%s/state-%d", root, p);
        const char *common =
            "--size 16 --batch 2 --device host --augment train";
        snprintf(args, sizeof args,
                 "--data '%s/data' --out '%s' %s --on-error %s", root, full,
                 common, policies[p]);
        result r = dump(root, args);
        cr_assert_eq(r.status, 0, "%s", r.err);
        result_free(&r);
        snprintf(args, sizeof args,
                 "--data '%s/data' --out '%s' %s --on-error %s --workers 1 "
                 "--stop-after-batches 2 --save-state '%s'",
                 root, a, common, policies[p], st);
        r = dump(root, args);
        cr_assert_eq(r.status, 0, "%s", r.err);
        result_free(&r);
        cr_assert_eq(tu_count_ppms(a), 4, "two batches of two");
        snprintf(args, sizeof args,
                 "--data '%s/data' --out '%s' %s --on-error %s --workers 3 "
                 "--resume-from '%s'",
                 root, b, common, policies[p], st);
        r = dump(root, args);
        cr_assert_eq(r.status, 0, "%s", r.err);
        result_free(&r);
        const int total = tu_count_ppms(full);
        cr_assert_eq(total, 7, "the nominal epoch under %s", policies[p]);
        for (int k = 0; k < total; k++) {
            char want[256], got[256];
            ppm_path(want, sizeof want, full, k);
            ppm_path(got, sizeof got, k < 4 ? a : b, k);
            assert_same_file(want, got);
            ppm_path(got, sizeof got, k < 4 ? b : a, k);
            cr_assert_neq(access(got, F_OK), 0, "%s written by both", got);
        }
        int nf, na, nb;
        tu_row *rf = tu_read_index(full, &nf), *ra = tu_read_index(a, &na),
               *rb = tu_read_index(b, &nb);
        int positioned = 0;
        for (int k = 0; k < nb; k++)
            positioned += rb[k].position >= 0;
        cr_assert_eq(positioned, 3, "the resumed run writes positions 4..6");
        take_rows(rf, nf, ra, na);
        take_rows(rf, nf, rb, nb);
        for (int k = 0; k < nf; k++)
            cr_assert(!rf[k].path[0] || rf[k].position < 0,
                      "position %ld of the uninterrupted run was not written",
                      rf[k].position);
        free(rf);
        free(ra);
        free(rb);
    }
    tu_rm_rf(root);
}

/* A state file that is damaged, or saved for another batch size, is
 * refused with the file named and the reason. */
Test(dump, resume_from_a_damaged_or_mismatched_state_fails_naming_it,
     .timeout = 120)
{
    char root[64], bad[256], args[2048], st[128], out[128];
    make_bad_folder(root, bad, sizeof bad);
    snprintf(st, sizeof st, "%s/state", root);
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s' --size 16 --batch 2 --device host "
             "--on-error skip --stop-after-batches 1 --save-state '%s'",
             root, out, st);
    result r = dump(root, args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    result_free(&r);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s/o2' --size 16 --batch 3 --device host "
             "--on-error skip --resume-from '%s'",
             root, root, st);
    r = dump(root, args);
    cr_assert_neq(r.status, 0);
    cr_assert_not_null(strstr(r.err, "batch_size 2"), "%s", r.err);
    result_free(&r);
    size_t len;
    uint8_t *bytes = tu_read_file(st, &len);
    cr_assert_eq(len, 128);
    bytes[40] ^= 0x10;
    tu_write_file(st, bytes, len);
    free(bytes);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s/o3' --size 16 --batch 2 --device host "
             "--on-error skip --resume-from '%s'",
             root, root, st);
    r = dump(root, args);
    cr_assert_neq(r.status, 0);
    cr_assert_not_null(strstr(r.err, "damaged"), "%s", r.err);
    result_free(&r);
    tu_write_file(st, "short", 5);
    r = dump(root, args);
    cr_assert_neq(r.status, 0);
    cr_assert_not_null(strstr(r.err, st), "names the file: %s", r.err);
    result_free(&r);
    tu_rm_rf(root);
}

/* ---- the command line ---- */

static void assert_usage_error_saying(const char *args, const char *says)
{
    char scratch[64];
    tu_tmpdir(scratch);
    result r = dump(scratch, args);
    cr_assert_eq(r.status, 2, "%s: exit %d", args, r.status);
    cr_assert_not_null(strstr(r.err, says), "%s: stderr lacks \"%s\": %s", args,
                       says, r.err);
    cr_assert_not_null(strstr(r.err, "usage: pinload-dump"), "%s: stderr %s",
                       args, r.err);
    cr_assert_str_eq(r.out, "", "%s: stdout %s", args, r.out);
    result_free(&r);
    tu_rm_rf(scratch);
}

static void assert_usage_error(const char *args)
{
    assert_usage_error_saying(args, "");
}

/* Unknown wherever it stands: first, in the middle, last (it was "needs a
 * value" when last). */
Test(dump, unknown_flag_is_a_usage_error_wherever_it_stands)
{
    assert_usage_error_saying("--bogus --data /tmp --out /tmp/pinload-never",
                              "unknown option --bogus\n");
    assert_usage_error_saying("--data /tmp --bogus 1 --out /tmp/pinload-never",
                              "unknown option --bogus\n");
    assert_usage_error_saying("--data /tmp --out /tmp/pinload-never --bogus",
                              "unknown option --bogus\n");
    assert_usage_error_saying("--data /tmp --out /tmp/pinload-never --batch",
                              "--batch needs a value");
}

Test(dump, negative_or_non_numeric_workers_are_usage_errors)
{
    assert_usage_error("--data /tmp --out /tmp/pinload-never --workers -1");
    assert_usage_error("--data /tmp --out /tmp/pinload-never --workers x");
}

/* 0, like the library's own default, is its choice of worker count. */
Test(dump, zero_workers_is_the_librarys_default, .timeout = 120)
{
    char root[64], bad[256], args[1024], out[128];
    make_bad_folder(root, bad, sizeof bad);
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s' --size 16 --batch 2 --device host "
             "--on-error skip --workers 0",
             root, out);
    result r = dump(root, args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_not_null(strstr(r.err, " workers ("), "%s", r.err);
    result_free(&r);
    cr_assert_eq(tu_count_ppms(out), 7);
    tu_rm_rf(root);
}

/* The same device words as pinload-bench (tools/cli.h); without a GPU an
 * explicit CUDA device is a run-time error that says why. */
Test(dump, device_words_are_the_benchs, .timeout = 120)
{
    assert_usage_error_saying(
        "--data /tmp --out /tmp/pinload-never --device gpu",
        "\"gpu\" is not one of auto|host|local_rank|cuda|cuda:N");
    assert_usage_error_saying(
        "--data /tmp --out /tmp/pinload-never --device cuda:x", "cuda:x");
    char root[64], bad[256], args[1024];
    make_bad_folder(root, bad, sizeof bad);
    const char *words[] = {"cuda", "cuda:0", "0"};
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args,
                 "--data '%s/data' --out '%s/o%d' --size 16 --device %s "
                 "--on-error skip",
                 root, root, k, words[k]);
        result r = dump(root, args);
        if (r.status == 0) /* a machine with a GPU */
            cr_assert_not_null(strstr(r.err, "backend: cuda"), "%s", r.err);
        else
            cr_assert(r.status == 1 &&
                          strstr(r.err, "CUDA device 0 requested, but"),
                      "--device %s: exit %d: %s", words[k], r.status, r.err);
        result_free(&r);
    }
    tu_rm_rf(root);
}

Test(dump, version_names_the_library_version)
{
    char scratch[64], want[128];
    tu_tmpdir(scratch);
    result r = dump(scratch, "--version");
    cr_assert_eq(r.status, 0);
    snprintf(want, sizeof want, "pinload-dump (pinload %s)\n", pl_version());
    cr_assert_str_eq(r.out, want);
    result_free(&r);
    tu_rm_rf(scratch);
}

Test(dump, missing_data_or_out_is_a_usage_error)
{
    assert_usage_error("--out /tmp/pinload-never");
    assert_usage_error("--data /tmp");
    assert_usage_error("--data");
}

Test(dump, bad_choice_values_are_usage_errors)
{
    assert_usage_error("--data /tmp --out /tmp/pinload-never --pin maybe");
    assert_usage_error("--data /tmp --out /tmp/pinload-never --augment flip");
    assert_usage_error("--data /tmp --out /tmp/pinload-never --order random");
    assert_usage_error("--data /tmp --out /tmp/pinload-never --order shards "
                       "--shuffle-window 0");
}

/* --order shards: two shards, rank 1 of 2 by the launcher's variables,
 * unshuffled: the second half of the file order, in index.tsv; on a
 * folder, exit 1 with the library's reason naming config.order. */
Test(dump, order_shards_writes_the_ranks_range_and_refuses_a_folder,
     .timeout = 120)
{
    char root[64], p[256], cmd[1024], args[1024];
    tu_tmpdir(root);
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", root, i);
        tu_mkdirs_for(p);
        tu_write_jpeg(p, 20, 16, (unsigned)i + 1, NULL);
    }
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/pack && cd %s/stage && tar -cf ../pack/a.tar k0.jpg "
             "k1.jpg && tar -cf ../pack/b.tar k2.jpg k3.jpg k4.jpg k5.jpg",
             root, root);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(args, sizeof args,
             "--data '%s/pack' --out '%s/out' --size 8 --device host --order "
             "shards --shuffle off",
             root, root);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    result r = dump(root, args);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    cr_assert_eq(r.status, 0, "%s", r.err);
    result_free(&r);
    int n;
    snprintf(p, sizeof p, "%s/out", root);
    tu_row *rows = tu_read_index(p, &n);
    cr_assert_eq(n, 3);
    for (int k = 0; k < 3; k++) {
        char want[64];
        snprintf(want, sizeof want, "b.tar:k%d.jpg", 3 + k);
        cr_assert_not_null(strstr(rows[k].path, want), "row %d: %s", k,
                           rows[k].path);
    }
    free(rows);
    snprintf(args, sizeof args,
             "--data '%s/stage' --out '%s/out2' --device host --order shards",
             root, root);
    r = dump(root, args);
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "config.order"), "%s", r.err);
    result_free(&r);
    tu_rm_rf(root);
}

Test(dump, help_prints_usage_and_exits_zero)
{
    char scratch[64];
    tu_tmpdir(scratch);
    result r = dump(scratch, "--help");
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "usage: pinload-dump"), "%s", r.out);
    cr_assert_str_eq(r.err, "");
    result_free(&r);
    tu_rm_rf(scratch);
}

/* On a terminal, "N of TOTAL samples written"; into a file, none. */
Test(dump, progress_on_a_terminal_only, .timeout = 120)
{
    char root[64], bad[256], cmd[2048];
    make_bad_folder(root, bad, sizeof bad);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-dump --data %s/data --out %s/o --size 16 --batch 2 "
             "--device host --on-error skip",
             tu_build_dir(), root, root);
    char *tty = tu_run_on_tty(cmd);
    cr_assert_not_null(strstr(tty, "pinload-dump: 1 of 7 samples written"),
                       "%s", tty);
    char *err = tu_run_stderr(cmd);
    cr_assert_null(strchr(err, '\r'), "progress into a file: %s", err);
    free(tty);
    free(err);
    tu_rm_rf(root);
}

/* File names with a newline, a tab, a backslash or bytes that are not
 * UTF-8 still give one row of four fields each in index.tsv, the bytes
 * escaped as --help says. */
Test(dump, odd_file_names_are_escaped_in_index_tsv, .timeout = 120)
{
    char root[64], p[256], out[128], args[1024];
    tu_tmpdir(root);
    const char *names[] = {"a\nb.jpg", "t\tab.jpg", "back\\slash.jpg",
                           "latin\xe9.jpg", "caf\xc3\xa9.jpg"};
    const char *escaped[] = {"a\\nb.jpg", "t\\tab.jpg", "back\\\\slash.jpg",
                             "latin\\xe9.jpg", "caf\xc3\xa9.jpg"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/data/c0/%s", root, names[i]);
        tu_write_jpeg(p, 24, 20, (unsigned)i + 1, NULL);
    }
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s' --size 16 --batch 5 --device host "
             "--shuffle off",
             root, out);
    result r = dump(root, args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    result_free(&r);
    int n;
    tu_row *rows = tu_read_index(out, &n); /* asserts 4 fields a row */
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++) {
        int found = 0;
        for (int k = 0; k < n; k++)
            found += strstr(rows[k].path, escaped[i]) != NULL;
        cr_assert_eq(found, 1, "no row names %s", escaped[i]);
    }
    free(rows);
    tu_rm_rf(root);
}

/* SIGTERM in the middle: the sample in hand is finished, index.tsv has a
 * whole row for every PPM written and nothing cut, and the exit status is
 * 128 + 15. */
Test(dump, a_signal_stops_after_whole_samples_and_a_whole_index, .timeout = 120)
{
    char dir[64], cmd[2048], out[128];
    tu_tmpdir(dir);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-mkdata --out %s/data --classes 2 --per-class 300 "
             "--quiet >/dev/null",
             tu_build_dir(), dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-dump --data %s/data --out %s --size 224 --augment "
             "eval --device host --workers 1 >/dev/null 2>%s/err",
             tu_build_dir(), dir, out, dir);
    char ready[256];
    snprintf(ready, sizeof ready, "%s/index.tsv", out);
    const int rc = tu_run_and_signal(cmd, ready, 0.1, SIGTERM);
    cr_assert_eq(rc, 128 + SIGTERM, "exit %d (finished before the signal?)",
                 rc);
    char path[256];
    snprintf(path, sizeof path, "%s/index.tsv", out);
    char *text = tu_slurp(path);
    const size_t len = strlen(text);
    cr_assert(len > 0 && text[len - 1] == '\n', "index.tsv cut mid-row");
    free(text);
    int n;
    tu_row *rows = tu_read_index(out, &n); /* 4 fields a row */
    const int ppms = tu_count_ppms(out);
    cr_assert_eq(n, ppms, "%d rows, %d PPMs", n, ppms);
    cr_assert_lt(ppms, 600, "stopped early");
    for (int k = 0; k < n; k++)
        cr_assert_eq(rows[k].position, k);
    free(rows);
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = tu_slurp(path);
    cr_assert_not_null(strstr(err, "stopped by signal 15"), "%s", err);
    free(err);
    tu_rm_rf(dir);
}

/* --extras: NNNNNN.txt and NNNNNN.json beside each NNNNNN.ppm, the sample's
 * members byte for byte (index.tsv names the member each place holds); a
 * key without a txt member gets an empty file, or, with
 * --extras-required and --on-error fail, the dump stops naming it. */
Test(dump, extras_are_written_beside_each_ppm, .timeout = 120)
{
    char dir[64], p[512], cmd[1024];
    tu_tmpdir(dir);
    for (int i = 0; i < 7; i++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", dir, i);
        tu_write_jpeg(p, 24 + i, 20, (unsigned)i, NULL);
        char text[64];
        const int n = snprintf(text, sizeof text, "caption of key %d", i);
        if (i != 5) {
            snprintf(p, sizeof p, "%s/stage/k%d.txt", dir, i);
            tu_write_file(p, text, (size_t)n);
        }
        const int m = snprintf(text, sizeof text, "{\"key\": %d}", i);
        snprintf(p, sizeof p, "%s/stage/k%d.json", dir, i);
        tu_write_file(p, text, (size_t)m);
    }
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar $(ls | sort)",
             dir);
    cr_assert_eq(system(cmd), 0);
    char args[1024];
    snprintf(args, sizeof args,
             "--data %s/s.tar --out %s/out --size 16 --batch 3 --seed 4 "
             "--extras txt,json --device host --quiet",
             dir, dir);
    result r = dump(dir, args);
    cr_assert_eq(r.status, 0, "%s", r.err);
    int rows;
    snprintf(p, sizeof p, "%s/out", dir);
    tu_row *row = tu_read_index(p, &rows);
    cr_assert_eq(rows, 7);
    for (int k = 0; k < rows; k++) {
        const char *key = strstr(row[k].path, "s.tar:k");
        cr_assert_not_null(key, "%s", row[k].path);
        const int i = atoi(key + 7);
        char want[512], got[512];
        const char *ext[] = {"txt", "json"};
        for (int e = 0; e < 2; e++) {
            snprintf(want, sizeof want, "%s/stage/k%d.%s", dir, i, ext[e]);
            snprintf(got, sizeof got, "%s/out/%06d.%s", dir, k, ext[e]);
            if (access(want, F_OK) == 0) {
                assert_same_file(want, got);
            } else {
                size_t len;
                free(tu_read_file(got, &len));
                cr_assert_eq(len, 0, "%s: %zu bytes", got, len);
            }
        }
    }
    free(row);
    result_free(&r);

    snprintf(args, sizeof args,
             "--data %s/s.tar --out %s/out --size 16 --batch 3 --shuffle off "
             "--extras txt --extras-required --device host --quiet",
             dir, dir);
    r = dump(dir, args);
    cr_assert_neq(r.status, 0);
    cr_assert_not_null(strstr(r.err, "s.tar:k5.jpg"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "has no txt member"), "%s", r.err);
    result_free(&r);
    tu_rm_rf(dir);
}

/* --raw reads each file's bytes and decodes them with pl_image_decode: an
 * empty file comes back as no buffer at all before any other file has
 * been read, and its row said "PL_EINVAL: pl_image_decode: NULL argument";
 * it is "not an image pinload reads (empty)". */
Test(dump, raw_names_an_empty_file_empty, .timeout = 120)
{
    char root[64], p[256], out[128], args[1024];
    tu_tmpdir(root);
    snprintf(p, sizeof p, "%s/data/c/a_empty.jpg", root);
    tu_mkdirs_for(p);
    tu_write_file(p, "", 0);
    snprintf(p, sizeof p, "%s/data/c/b.jpg", root);
    tu_write_jpeg(p, 20, 10, 3, NULL);
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(args, sizeof args,
             "--data '%s/data' --out '%s' --raw --shuffle off --workers 1 "
             "--on-error skip --device host",
             root, out);
    result r = dump(root, args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    result_free(&r);
    int n;
    tu_row *rows = tu_read_index(out, &n);
    cr_assert_eq(n, 2);
    int seen = 0;
    for (int k = 0; k < n; k++) {
        if (!strstr(rows[k].path, "a_empty.jpg"))
            continue;
        seen++;
        cr_assert_str_eq(rows[k].status,
                         "PL_ENOTIMAGE: pl_image_decode: not an image "
                         "pinload reads (empty)");
    }
    cr_assert_eq(seen, 1);
    free(rows);
    tu_rm_rf(root);
}
