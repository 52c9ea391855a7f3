/* The samples, run as programs: samples/minimal iterates one epoch;
 * samples/train_classifier's loss falls on a small generated set. */
#include <sys/wait.h>

#include "testutil.h"

/* Run a command line; [out] its stdout (malloc'd); returns the exit code. */
static int run_cmd(const char *cmd, char **out)
{
    char dir[64], full[8192], path[128];
    tu_tmpdir(dir);
    snprintf(full, sizeof full, "(%s) >%s/out 2>/dev/null", cmd, dir);
    const int st = system(full);
    snprintf(path, sizeof path, "%s/out", dir);
    size_t n;
    *out = (char *)tu_read_file(path, &n);
    (*out)[n] = '\0';
    tu_rm_rf(dir);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
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
             "%s/samples/train_classifier --data %s/d "
             "--epochs 3 --device host",
             tu_build_dir(), root);
    cr_assert_eq(run_cmd(cmd, &out), 0, "%s", out);
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
             "%s/samples/train_classifier --data %s/d "
             "--epochs 2 --device host --workers 1 | sed 's/, [0-9.]* s.*//'",
             tu_build_dir(), root);
    cr_assert_eq(run_cmd(cmd, &a), 0);
    snprintf(cmd, sizeof cmd,
             "%s/samples/train_classifier --data %s/d "
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
        snprintf(cmd, sizeof cmd, "%s/samples/train_classifier %s",
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
