/* The samples and examples, run as programs: samples/minimal iterates one
 * epoch; samples/train_loop prints every batch once and, killed and
 * resumed from its saved state, neither repeats nor skips one;
 * examples/train_classifier's loss falls on a small generated set;
 * examples/data_parallel runs as 2 and 3 real processes under
 * examples/data_parallel/launch.sh: equal steps past bad files, the same
 * weights on every rank, preempted and resumed runs that print what an
 * uninterrupted one does, and ranks out of step, missing or with nothing to
 * decode stopped with an error naming them, never a hang. */
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"

/* Run a command line with its stderr sent to `err` ("/dev/null", or "&1"
 * for both streams together); [out] what it wrote (malloc'd); returns the
 * exit code. */
static int run_to(const char *cmd, const char *err, char **out)
{
    char dir[64], full[8192], path[128];
    tu_tmpdir(dir);
    snprintf(full, sizeof full, "(%s) >%s/out 2>%s", cmd, dir, err);
    const int st = system(full);
    snprintf(path, sizeof path, "%s/out", dir);
    *out = tu_slurp(path);
    tu_rm_rf(dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run a command line; [out] its stdout (malloc'd); returns the exit code. */
static int run_cmd(const char *cmd, char **out)
{
    return run_to(cmd, "/dev/null", out);
}

/* The default dataset's generator, small: 4 classes x 20 images. */
static void make_generated(char root[64])
{
    tu_tmpdir(root);
    char cmd[512], *out;
    snprintf(cmd, sizeof cmd,
             "%s/pinload-mkdata --out %s/d --classes 4 "
             "--per-class 20 --size-range 64-128",
             tu_build_dir(), root);
    const int rc = run_cmd(cmd, &out); /* before `out` is read */
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_not_null(strstr(out, "wrote 80 images in 4 classes"), "%s", out);
    free(out);
}

/* The per-epoch losses printed by train_classifier. */
static int losses(const char *out, double *loss, double *acc, int cap)
{
    int n = 0;
    for (const char *p = strstr(out, "epoch "); p;
         p = strstr(p + 1, "\nepoch ")) {
        int e;
        if (sscanf(*p == '\n' ? p + 1 : p, "epoch %d: loss %lf accuracy %lf%%",
                   &e, &loss[n], &acc[n]) == 3) {
            cr_assert_eq(e, n + 1, "epochs in order");
            cr_assert_lt(++n, cap);
        }
    }
    return n;
}

Test(samples, train_classifier_loss_falls_over_three_epochs)
{
    char root[64], cmd[512], *out;
    make_generated(root);
    snprintf(cmd, sizeof cmd,
             "%s/examples/train_classifier --data %s/d "
             "--epochs 3 --device host",
             tu_build_dir(), root);
    const int rc = run_cmd(cmd, &out); /* before `out` is read */
    cr_assert_eq(rc, 0, "%s", out);
    double loss[8], acc[8];
    cr_assert_eq(losses(out, loss, acc, 8), 3, "%s", out);
    cr_assert_lt(loss[1], loss[0], "%s", out);
    cr_assert_lt(loss[2], loss[1], "%s", out);
    cr_assert_lt(loss[2], 0.8 * loss[0], "%s", out);
    double final = 0;
    const char *f = strstr(out, "final accuracy ");
    cr_assert(f && sscanf(f, "final accuracy %lf%%", &final) == 1, "%s", out);
    cr_assert_gt(final, 50.0, "well above the 25%% of chance: %s", out);
    free(out);
    tu_rm_rf(root);
}

/* The sample's numbers depend on the data and the seed, not on threads. */
Test(samples, train_classifier_learns_the_same_with_one_or_two_workers)
{
    char root[64], cmd[512], *a, *b;
    make_generated(root);
    snprintf(cmd, sizeof cmd,
             "%s/examples/train_classifier --data %s/d "
             "--epochs 2 --device host --workers 1 | sed 's/, [0-9.]* s.*//'",
             tu_build_dir(), root);
    cr_assert_eq(run_cmd(cmd, &a), 0);
    snprintf(cmd, sizeof cmd,
             "%s/examples/train_classifier --data %s/d "
             "--epochs 2 --device host --workers 2 | sed 's/, [0-9.]* s.*//'",
             tu_build_dir(), root);
    cr_assert_eq(run_cmd(cmd, &b), 0);
    cr_assert_str_eq(a, b);
    double loss[4], acc[4];
    cr_assert_eq(losses(a, loss, acc, 4), 2, "%s", a);
    free(a);
    free(b);
    tu_rm_rf(root);
}

Test(samples, train_classifier_rejects_bad_arguments)
{
    char cmd[512], *out;
    static const char *const bad[] = {"",
                                      "--data",
                                      "--data x --epochs 0",
                                      "--data x --device tpu",
                                      "--data x --lr abc",
                                      "--bogus 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/examples/train_classifier %s",
                 tu_build_dir(), bad[i]);
        cr_assert_eq(run_cmd(cmd, &out), 2, "\"%s\" should exit 2", bad[i]);
        free(out);
    }
}

Test(samples, minimal_iterates_one_epoch_in_batches_of_32)
{
    char root[64], cmd[512], *out;
    tu_tmpdir(root);
    char path[256];
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof path, "%s/c%d/%02d.jpg", root, i % 2, i);
        tu_write_jpeg(path, 40, 30, (unsigned)i, NULL);
    }
    snprintf(cmd, sizeof cmd, "%s/samples/minimal %s", tu_build_dir(), root);
    cr_assert_eq(run_cmd(cmd, &out), 0);
    int b0, n0, b1, n1;
    cr_assert_eq(sscanf(out,
                        "epoch 0 batch %d: %d samples, first label %*d\n"
                        "epoch 0 batch %d: %d samples",
                        &b0, &n0, &b1, &n1),
                 4, "%s", out);
    cr_assert(b0 == 0 && n0 == 32 && b1 == 1 && n1 == 8, "%s", out);
    cr_assert_null(strstr(out, "batch 2"), "%s", out);
    free(out);
    tu_rm_rf(root);
}

/* ---- samples/train_loop ------------------------------------------------- */

/* root: 40 small JPEGs in two classes: 2 batches of 32 and 8 an epoch. */
static void make_forty(char root[64])
{
    tu_tmpdir(root);
    char path[256];
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof path, "%s/c%d/%02d.jpg", root, i % 2, i);
        tu_write_jpeg(path, 40, 30, (unsigned)i, NULL);
    }
}

/* train_loop on root with `args`; exits 0. [out] its stdout (malloc'd). */
static char *train_loop(const char *root, const char *args)
{
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s/samples/train_loop %s %s", tu_build_dir(),
             root, args);
    const int rc = run_cmd(cmd, &out); /* before `out` is read */
    cr_assert_eq(rc, 0, "%s: %s", cmd, out);
    return out;
}

/* The first `n` (all if n < 0) batch lines of out, joined (malloc'd). */
static char *batch_lines(const char *out, int n)
{
    char *lines = calloc(1, strlen(out) + 1), *end = lines;
    for (const char *p = out; p && *p && n; p = strchr(p, '\n'), p += !!p)
        if (strncmp(p, "epoch ", 6) == 0) {
            const size_t len = strcspn(p, "\n");
            memcpy(end, p, len);
            end += len;
            *end++ = '\n';
            n--;
        }
    return lines;
}

static unsigned long long pixel_sum(const char *out)
{
    const char *p = strstr(out, ", pixel sum ");
    unsigned long long sum = 0;
    cr_assert(p && sscanf(p, ", pixel sum %llu", &sum) == 1, "%s", out);
    return sum;
}

Test(samples, train_loop_prints_every_batch_of_two_epochs_once)
{
    char root[64];
    make_forty(root);
    char *out = train_loop(root, "--epochs 2");
    static const int want[4][3] = {
        {0, 0, 32}, {0, 1, 8}, {1, 0, 32}, {1, 1, 8}};
    char hash[4][17];
    const char *p = out;
    for (int k = 0; k < 4; k++, p = strchr(p, '\n') + 1) {
        int e, i, n;
        cr_assert_eq(sscanf(p, "epoch %d batch %d: %d samples, labels %16s", &e,
                            &i, &n, hash[k]),
                     4, "line %d: %s", k, out);
        cr_assert(e == want[k][0] && i == want[k][1] && n == want[k][2],
                  "line %d: %s", k, out);
    }
    cr_assert_eq(strncmp(p, "done: 4 batches, pixel sum ", 27), 0, "%s", out);
    cr_assert_gt(pixel_sum(out), 0);
    cr_assert_str_neq(hash[0], hash[2], "each epoch its own order: %s", out);
    free(out);
    tu_rm_rf(root);
}

/* Killed after K batches, then resumed from the state saved every N
 * batches: the resumed run prints exactly the uninterrupted run's batches
 * from the last save on (mid-epoch, or at an epoch's end); resumed at an
 * epoch's end, the two runs' pixels add up to the whole run's. */
Test(samples, train_loop_resumed_from_its_last_save_repeats_the_same_batches)
{
    char root[64], args[256], state[128];
    make_forty(root);
    char *whole = train_loop(root, "--epochs 3");
    char *want = batch_lines(whole, -1);
    cr_assert_not_null(strstr(whole, "\ndone: 6 batches, "), "%s", whole);
    static const int stops[][2] = {{2, 2}, {3, 3}, {5, 2}, {5, 3}};
    for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++) {
        const int every = stops[k][1], stop = stops[k][0];
        const int saved = stop / every * every;
        snprintf(state, sizeof state, "%s/state%zu", root, k);
        snprintf(args, sizeof args,
                 "--epochs 3 --save %s --every %d --stop-after %d", state,
                 every, stop);
        char *first = train_loop(root, args);
        char *all = batch_lines(first, -1), *kept = batch_lines(first, saved);
        char *head = batch_lines(want, stop);
        cr_assert_str_eq(all, head, "the first %d batches, then nothing: %s",
                         stop, first);
        snprintf(args, sizeof args, "--epochs 3 --resume %s", state);
        char *second = train_loop(root, args);
        char *got = batch_lines(second, -1);
        char *both = malloc(strlen(kept) + strlen(got) + 1);
        strcat(strcpy(both, kept), got);
        cr_assert_str_eq(both, want, "killed after %d:\n%s\n%s", stop, first,
                         second);
        char done[32];
        snprintf(done, sizeof done, "\ndone: %d batches", 6 - saved);
        cr_assert_not_null(strstr(second, done), "%s", second);
        free(both);
        free(got);
        free(second);
        free(head);
        free(kept);
        free(all);
        free(first);
    }
    snprintf(args, sizeof args, "--epochs 1 --save %s/e0 --every 2", root);
    char *e0 = train_loop(root, args);
    snprintf(args, sizeof args, "--epochs 3 --resume %s/e0", root);
    char *rest = train_loop(root, args);
    cr_assert_eq(pixel_sum(e0) + pixel_sum(rest), pixel_sum(whole), "%s\n%s",
                 e0, rest);
    free(e0);
    free(rest);
    free(want);
    free(whole);
    tu_rm_rf(root);
}

Test(samples, train_loop_rejects_bad_arguments_and_a_missing_state)
{
    char cmd[512], *out;
    static const char *const bad[] = {
        "",           "--epochs 2", "d --epochs", "d --epochs 0", "d --every 0",
        "d --bogus 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/samples/train_loop %s", tu_build_dir(),
                 bad[i]);
        cr_assert_eq(run_cmd(cmd, &out), 2, "\"%s\" should exit 2", bad[i]);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s/samples/train_loop . --resume /nonexistent",
             tu_build_dir());
    cr_assert_eq(run_to(cmd, "&1", &out), 1);
    cr_assert_not_null(strstr(out, "/nonexistent: no loader state"), "%s", out);
    free(out);
}

/* ---- examples/data_parallel through its launch.sh ------------------------ */

/* Run a command line; [out] its stdout and stderr together (malloc'd);
 * returns the exit code. */
static int run_all(const char *cmd, char **out)
{
    return run_to(cmd, "&1", out);
}

/* root/d: `good` small JPEGs in two classes, and `bad` files that are not
 * JPEGs at all (a skip each, under the sample's PL_ON_ERROR_SKIP). */
static void make_dp_data(char root[64], int good, int bad)
{
    tu_tmpdir(root);
    char path[256];
    for (int i = 0; i < good; i++) {
        snprintf(path, sizeof path, "%s/d/c%d/img%02d.jpg", root, i % 2, i);
        tu_write_jpeg(path, 16 + (i % 3) * 4, 12 + (i % 2) * 4, (unsigned)i + 1,
                      NULL);
    }
    for (int i = 0; i < bad; i++) {
        snprintf(path, sizeof path, "%s/d/c%d/bad%02d.jpg", root, i % 2, i);
        tu_write_file(path, "GIF89a, not a JPEG", 18);
    }
}

/* One rank's line for one epoch, as data_parallel prints it. */
typedef struct dp_line {
    int rank, world;
    long long epoch, steps, samples;
    double loss;
    char data[17], model[17];
} dp_line;

/* Every epoch line of out, in the order printed. */
static int dp_lines(const char *out, dp_line *lines, int cap)
{
    int n = 0;
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        dp_line l;
        if (sscanf(p,
                   "rank %d/%d epoch %lld: steps %lld samples %lld loss %lf "
                   "data %16s model %16s",
                   &l.rank, &l.world, &l.epoch, &l.steps, &l.samples, &l.loss,
                   l.data, l.model) == 8) {
            cr_assert_lt(n, cap, "%s", out);
            lines[n++] = l;
        }
    }
    return n;
}

/* Every rank printed every epoch once, with `steps` steps and `samples`
 * samples, and the job's loss and weights are the same on every rank. */
static void check_epochs(const char *out, int world, int epochs,
                         long long steps, long long samples)
{
    dp_line lines[64];
    const int n = dp_lines(out, lines, 64);
    cr_assert_eq(n, world * epochs, "%s", out);
    for (int e = 0; e < epochs; e++) {
        const dp_line *first = NULL;
        for (int r = 0; r < world; r++) {
            const dp_line *l = NULL;
            for (int i = 0; i < n; i++)
                if (lines[i].rank == r && lines[i].epoch == e) {
                    cr_assert_null(l, "rank %d epoch %d twice: %s", r, e, out);
                    l = &lines[i];
                }
            cr_assert_not_null(l, "rank %d epoch %d missing: %s", r, e, out);
            cr_assert_eq(l->world, world, "%s", out);
            cr_assert_eq(l->steps, steps, "rank %d epoch %d: %s", r, e, out);
            cr_assert_eq(l->samples, samples, "rank %d epoch %d: %s", r, e,
                         out);
            if (!first) {
                first = l;
                continue;
            }
            cr_assert_eq(l->loss, first->loss, "%s", out);
            cr_assert_str_eq(l->model, first->model, "%s", out);
            cr_assert_str_neq(l->data, first->data, "each its own shard: %s",
                              out);
        }
    }
}

static int dp_run(const char *root, int ranks, const char *args, char **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "examples/data_parallel/launch.sh %d %s/examples/data_parallel "
             "--data %s/d "
             "--size 8 --workers 1 --timeout 20 %s",
             ranks, tu_build_dir(), root, args);
    return run_all(cmd, out);
}

Test(samples, data_parallel_two_ranks_take_the_same_steps_past_a_bad_file)
{
    int rc;
    char root[64], *out;
    make_dp_data(root, 21, 1);
    /* 22 files: 11 a rank (the bad one's place taken by a good one),
     * batches of 4, 4, 3. */
    rc = dp_run(root, 2, "--epochs 2 --batch 4", &out);
    cr_assert_eq(rc, 0, "%s", out);
    check_epochs(out, 2, 2, 3, 11);
    cr_assert_not_null(
        strstr(out, "/d/c0/bad00.jpg: not an image pinload reads"), "met: %s",
        out);
    cr_assert_not_null(strstr(out, "rank 0/2: done, 2 epochs"), "%s", out);
    cr_assert_not_null(strstr(out, "rank 1/2: done, 2 epochs"), "%s", out);
    cr_assert_not_null(strstr(out, "shared memory /pinload-dp-"), "%s", out);
    free(out);
    tu_rm_rf(root);
}

Test(samples, data_parallel_three_ranks_take_the_same_steps_past_a_bad_file)
{
    int rc;
    char root[64], *out;
    make_dp_data(root, 21, 1);
    /* 22 files: 8 a rank (padded by wrapping), batches of 3, 3, 2. */
    rc = dp_run(root, 3, "--epochs 2 --batch 3", &out);
    cr_assert_eq(rc, 0, "%s", out);
    check_epochs(out, 3, 2, 3, 8);
    cr_assert_not_null(
        strstr(out, "/d/c0/bad00.jpg: not an image pinload reads"), "met: %s",
        out);
    free(out);
    tu_rm_rf(root);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The epoch lines of a run (or of two runs' outputs, concatenated), sorted
 * and joined: what must be equal. [out] malloc'd. */
static char *epoch_lines(const char *out)
{
    char *copy = strdup(out), *lines[64], *save;
    int n = 0;
    for (char *l = strtok_r(copy, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save))
        if (strstr(l, ": steps ") && n < 64)
            lines[n++] = l;
    qsort(lines, (size_t)n, sizeof *lines, cmp_str);
    char *joined = calloc(1, strlen(out) + 1);
    for (int i = 0; i < n; i++)
        strcat(strcat(joined, lines[i]), "\n");
    free(copy);
    return joined;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Stopped after K steps (mid-epoch, on an epoch's last step, in the second
 * epoch), then resumed from the checkpoints: the epochs print exactly what
 * an uninterrupted run prints, the bad file's replacement included. */
Test(samples, data_parallel_resumed_after_a_preemption_prints_the_same_epochs)
{
    int rc;
    char root[64], args[512], ckpt[128], *whole, *first, *second;
    make_dp_data(root, 21, 1);
    snprintf(args, sizeof args, "--epochs 3 --batch 4 --checkpoint %s/whole",
             root);
    rc = dp_run(root, 2, args, &whole);
    cr_assert_eq(rc, 0, "%s", whole);
    check_epochs(whole, 2, 3, 3, 11);
    char *want = epoch_lines(whole);
    static const int stops[] = {2, 3, 4};
    for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++) {
        snprintf(ckpt, sizeof ckpt, "%s/ckpt%d", root, stops[k]);
        snprintf(args, sizeof args,
                 "--epochs 3 --batch 4 --checkpoint %s --stop-after-steps %d",
                 ckpt, stops[k]);
        rc = dp_run(root, 2, args, &first);
        cr_assert_eq(rc, 0, "%s", first);
        char said[64];
        snprintf(said, sizeof said, "rank 1/2: stopped after %d steps",
                 stops[k]);
        cr_assert_not_null(strstr(first, said), "%s", first);
        cr_assert_null(strstr(first, "done"), "%s", first);
        cr_assert_eq(count_files(ckpt), 2, "rank-0.ckpt, rank-1.ckpt only");
        snprintf(args, sizeof args,
                 "--epochs 3 --batch 4 --checkpoint %s "
                 "--resume",
                 ckpt);
        rc = dp_run(root, 2, args, &second);
        cr_assert_eq(rc, 0, "%s", second);
        cr_assert_not_null(strstr(second, "rank 0/2: done, 3 epochs"), "%s",
                           second);
        char *both = malloc(strlen(first) + strlen(second) + 2);
        strcat(strcat(strcpy(both, first), "\n"), second);
        char *got = epoch_lines(both);
        cr_assert_str_eq(got, want, "stopped after %d steps:\n%s\n%s", stops[k],
                         first, second);
        free(got);
        free(both);
        free(first);
        free(second);
    }
    free(want);
    free(whole);
    tu_rm_rf(root);
}

/* A rank that resumes from nothing while the other resumes mid-epoch is
 * stopped before the first step, naming where each rank stands. */
Test(samples, data_parallel_stops_ranks_that_resume_from_different_places)
{
    int rc;
    char root[64], args[256], path[128], *out;
    make_dp_data(root, 16, 0);
    snprintf(args, sizeof args,
             "--epochs 2 --batch 4 --checkpoint %s/ck --stop-after-steps 1",
             root);
    rc = dp_run(root, 2, args, &out);
    cr_assert_eq(rc, 0, "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/ck/rank-1.ckpt", root);
    cr_assert_eq(unlink(path), 0);
    snprintf(args, sizeof args,
             "--epochs 2 --batch 4 --checkpoint %s/ck "
             "--resume",
             root);
    rc = dp_run(root, 2, args, &out);
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert_not_null(strstr(out, "rank 1/2: no checkpoint"), "%s", out);
    cr_assert_not_null(strstr(out, "do not start from the same place"), "%s",
                       out);
    cr_assert_eq(dp_lines(out, (dp_line[4]){0}, 4), 0, "no step taken: %s",
                 out);
    free(out);
    tu_rm_rf(root);
}

/* Rank 1 goes on to a second epoch that rank 0 does not: the exchange of
 * that step stops both, saying where each one was. */
Test(samples, data_parallel_stops_ranks_that_are_not_at_the_same_step)
{
    int rc;
    char root[64], cmd[1024], *out;
    make_dp_data(root, 16, 0);
    snprintf(cmd, sizeof cmd,
             "examples/data_parallel/launch.sh 2 sh -c "
             "'exec %s/examples/data_parallel "
             "--data %s/d --size 8 --batch 4 --workers 1 --timeout 20 "
             "--epochs $((RANK + 1))'",
             tu_build_dir(), root);
    const double t0 = tu_seconds();
    rc = run_all(cmd, &out);
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert_lt(tu_seconds() - t0, 10.0, "no waiting out the timeout: %s",
                 out);
    check_epochs(out, 2, 1, 2, 8);
    cr_assert_not_null(strstr(out, "the ranks are not in step: rank 0 at the "
                                   "end (all 1 epochs done); rank 1 at epoch "
                                   "1 step 0"),
                       "%s", out);
    free(out);
    tu_rm_rf(root);
}

/* A rank alone in a world of two waits no longer than --timeout, and says
 * which rank never came (rank 0), or that rank 0 never made the segment. */
Test(samples, data_parallel_times_out_naming_the_rank_that_never_came)
{
    int rc;
    char root[64], cmd[1024], *out;
    make_dp_data(root, 8, 0);
    for (int rank = 0; rank < 2; rank++) {
        snprintf(cmd, sizeof cmd,
                 "RANK=%d WORLD_SIZE=2 PINLOAD_JOB_ID=%s-%d "
                 "%s/examples/data_parallel --data %s/d --size 8 --batch 4 "
                 "--workers 1 --timeout 0.5",
                 rank, strrchr(root, '/') + 1, rank, tu_build_dir(), root);
        const double t0 = tu_seconds();
        rc = run_all(cmd, &out);
        cr_assert_eq(rc, 1, "%s", out);
        cr_assert_lt(tu_seconds() - t0, 5.0, "%s", out);
        cr_assert_not_null(strstr(out, "timed out after 0.5 s"), "%s", out);
        cr_assert_not_null(strstr(out, rank == 0 ? "waiting for rank 1 (never "
                                                   "attached)"
                                                 : "waiting for rank 0 to "
                                                   "create /pinload-dp-"),
                           "%s", out);
        free(out);
    }
    tu_rm_rf(root);
}

/* Two files, one of them bad, two ranks: one rank's share has nothing to
 * decode. It says PL_ENODATA and fails; the other stops at once. */
Test(samples, data_parallel_a_rank_with_nothing_to_decode_fails_with_enodata)
{
    int rc;
    char root[64], *out;
    make_dp_data(root, 1, 1);
    const double t0 = tu_seconds();
    rc = dp_run(root, 2, "--epochs 1 --batch 1", &out);
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert_lt(tu_seconds() - t0, 10.0, "%s", out);
    cr_assert_not_null(strstr(out, "not one sample of this rank's share could "
                                   "be decoded (PL_ENODATA)"),
                       "%s", out);
    cr_assert_not_null(strstr(out, "launch.sh: rank "), "%s", out);
    cr_assert_eq(dp_lines(out, (dp_line[4]){0}, 4), 0, "%s", out);
    free(out);
    tu_rm_rf(root);
}

Test(samples, data_parallel_rejects_bad_arguments)
{
    int rc;
    char cmd[512], *out;
    static const char *const bad[] = {"",
                                      "--data",
                                      "--data x --epochs 0",
                                      "--data x --resume",
                                      "--data x --stop-after-steps 3",
                                      "--data x --checkpoint c "
                                      "--stop-after-steps 0",
                                      "--data x --device tpu",
                                      "--data x --sync pigeon",
                                      "--data x --timeout 0",
                                      "--bogus 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/examples/data_parallel %s",
                 tu_build_dir(), bad[i]);
        rc = run_all(cmd, &out);
        cr_assert_eq(rc, 2, "\"%s\" should exit 2: %s", bad[i], out);
        free(out);
    }
}

/* The launcher's variables, one job id for all ranks. */
Test(samples, launch_sets_each_ranks_variables)
{
    int rc;
    char *out;
    rc = run_all(
        "examples/data_parallel/launch.sh 3 sh -c 'echo \"$RANK $LOCAL_RANK "
        "$WORLD_SIZE $LOCAL_WORLD_SIZE $PINLOAD_JOB_ID\"'",
        &out);
    cr_assert_eq(rc, 0, "%s", out);
    char job[3][128];
    int seen = 0;
    for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        int r, lr, w, lw;
        char id[128];
        cr_assert_eq(sscanf(p, "%d %d %d %d %127s", &r, &lr, &w, &lw, id), 5,
                     "%s", out);
        cr_assert(r >= 0 && r < 3 && lr == r && w == 3 && lw == 3, "%s", out);
        cr_assert_eq(seen & 1 << r, 0, "%s", out);
        seen |= 1 << r;
        snprintf(job[r], sizeof job[r], "%s", id);
    }
    cr_assert_eq(seen, 7, "%s", out);
    cr_assert_str_eq(job[0], job[1]);
    cr_assert_str_eq(job[0], job[2]);
    free(out);
}

/* One rank fails: the launcher names it, stops the others at once rather
 * than waiting for them, and exits with its status. */
Test(samples, launch_stops_every_rank_when_one_fails)
{
    int rc;
    char *out;
    const double t0 = tu_seconds();
    cr_assert_eq(
        run_all(
            "examples/data_parallel/launch.sh 3 sh -c 'if [ $RANK = 1 ]; then "
            "exit 3; fi; exec sleep 30'",
            &out),
        3, "%s", out);
    cr_assert_lt(tu_seconds() - t0, 5.0, "%s", out);
    cr_assert_not_null(strstr(out, "launch.sh: rank 1 exited with status 3; "
                                   "stopping the other ranks"),
                       "%s", out);
    free(out);
    rc = run_all("examples/data_parallel/launch.sh 0 true", &out);
    cr_assert_eq(rc, 2, "%s", out);
    free(out);
    rc = run_all("examples/data_parallel/launch.sh 2", &out);
    cr_assert_eq(rc, 2, "%s", out);
    free(out);
}
