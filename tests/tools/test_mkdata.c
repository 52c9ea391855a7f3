/* pinload-mkdata: the generated default dataset is deterministic, shaped
 * as asked, and mixes baseline and progressive 4:2:0 files. */
#include <sys/wait.h>

#include "pinload.h"
#include "testutil.h"

static int mkdata(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/pinload-mkdata %s >/dev/null 2>&1",
             tu_build_dir(), args);
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Whether the JPEG's frame is progressive (SOF2), and its luma sampling. */
static void frame_kind(const uint8_t *b, size_t n, int *progressive, int *h,
                       int *v)
{
    *progressive = -1;
    *h = *v = 0;
    for (size_t i = 2; i + 11 < n;) {
        cr_assert_eq(b[i], 0xFF, "marker expected at %zu", i);
        const int m = b[i + 1];
        const size_t len = (size_t)b[i + 2] << 8 | b[i + 3];
        if (m == 0xC0 || m == 0xC2) {
            *progressive = m == 0xC2;
            *h = b[i + 11] >> 4;
            *v = b[i + 11] & 15;
            return;
        }
        i += 2 + len;
    }
}

Test(
    mkdata,
    the_same_seed_writes_the_same_bytes_on_any_threads_and_another_seed_does_not)
{
    char a[64], b[64], c[64], args[512];
    tu_tmpdir(a);
    tu_tmpdir(b);
    tu_tmpdir(c);
    /* One thread and five write the same files. */
    snprintf(args, sizeof args,
             "--out %s/d --classes 3 --per-class 4 "
             "--size-range 40-90 --seed 5 --jobs 1",
             a);
    cr_assert_eq(mkdata(args), 0);
    snprintf(args, sizeof args,
             "--out %s/d --classes 3 --per-class 4 "
             "--size-range 40-90 --seed 5 --jobs 5",
             b);
    cr_assert_eq(mkdata(args), 0);
    snprintf(args, sizeof args,
             "--out %s/d --classes 3 --per-class 4 "
             "--size-range 40-90 --seed 6",
             c);
    cr_assert_eq(mkdata(args), 0);
    int differ = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) {
            char pa[128], pb[128], pc[128];
            snprintf(pa, sizeof pa, "%s/d/class_%02d/img_%05d.jpg", a, k, i);
            snprintf(pb, sizeof pb, "%s/d/class_%02d/img_%05d.jpg", b, k, i);
            snprintf(pc, sizeof pc, "%s/d/class_%02d/img_%05d.jpg", c, k, i);
            size_t na, nb, nc;
            uint8_t *x = tu_read_file(pa, &na), *y = tu_read_file(pb, &nb),
                    *z = tu_read_file(pc, &nc);
            cr_assert(na == nb && memcmp(x, y, na) == 0, "%s differs", pb);
            differ += na != nc || memcmp(x, z, na) != 0;
            free(x);
            free(y);
            free(z);
        }
    cr_assert_eq(differ, 12, "seed 6 must change every image");
    tu_rm_rf(a);
    tu_rm_rf(b);
    tu_rm_rf(c);
}

Test(mkdata, images_have_the_asked_sizes_and_a_mix_of_frames)
{
    char d[64], args[512];
    tu_tmpdir(d);
    snprintf(args, sizeof args,
             "--out %s/x/y --classes 4 --per-class 10 "
             "--size-range 100-160",
             d);
    cr_assert_eq(mkdata(args), 0, "parents of --out are created");
    int progressive = 0, baseline = 0;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 10; i++) {
            char p[128];
            snprintf(p, sizeof p, "%s/x/y/class_%02d/img_%05d.jpg", d, k, i);
            int w, h;
            uint8_t *rgb = tu_djpeg(p, &w, &h);
            cr_assert_not_null(rgb, "%s does not decode", p);
            const int big = w > h ? w : h;
            cr_assert(big >= 100 && big <= 160, "%s: %dx%d", p, w, h);
            free(rgb);
            size_t n;
            uint8_t *b = tu_read_file(p, &n);
            int prog, hs, vs;
            frame_kind(b, n, &prog, &hs, &vs);
            cr_assert(prog >= 0 && hs == 2 && vs == 2, "%s: 4:2:0", p);
            progressive += prog;
            baseline += !prog;
            free(b);
        }
    cr_assert(progressive >= 4 && baseline >= 20, "%d progressive, %d baseline",
              progressive, baseline);
    char extra[128];
    snprintf(extra, sizeof extra, "%s/x/y/class_04", d);
    struct stat st;
    cr_assert_neq(stat(extra, &st), 0, "exactly 4 classes");
    tu_rm_rf(d);
}

Test(mkdata, bad_arguments_exit_2)
{
    cr_assert_eq(mkdata(""), 2, "--out is required");
    cr_assert_eq(mkdata("--out /tmp/x --classes 0"), 2);
    cr_assert_eq(mkdata("--out /tmp/x --size-range 90-40"), 2);
    cr_assert_eq(mkdata("--out /tmp/x --quality 101"), 2);
    cr_assert_eq(mkdata("--out /tmp/x --jobs 0"), 2);
    cr_assert_eq(mkdata("--out /tmp/x --colour red"), 2);
    cr_assert_eq(mkdata("--out /tmp/x --colour"), 2, "unknown, even last");
    cr_assert_eq(mkdata("--version"), 0);
    cr_assert_eq(mkdata("--help"), 0);
}

Test(mkdata, unknown_options_are_named_and_version_names_the_library)
{
    char cmd[1024], dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-mkdata --out %s/d --colour 2>%s/err; "
             "%s/pinload-mkdata --version >%s/out",
             tu_build_dir(), dir, dir, tu_build_dir(), dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = tu_slurp(path);
    cr_assert_eq(strncmp(err, "pinload-mkdata: unknown option --colour\n", 40),
                 0, "%s", err);
    snprintf(path, sizeof path, "%s/out", dir);
    char *out = tu_slurp(path), want[128];
    snprintf(want, sizeof want, "pinload-mkdata (pinload %s)\n", pl_version());
    cr_assert_str_eq(out, want);
    free(err);
    free(out);
    tu_rm_rf(dir);
}

/* On a terminal, "N of TOTAL files written" as it goes; into a file or with
 * --quiet, no progress line at all. */
Test(mkdata, progress_on_a_terminal_only, .timeout = 120)
{
    char dir[64], cmd[1024];
    tu_tmpdir(dir);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-mkdata --out %s/a --classes 2 --per-class 20 "
             "--size-range 16-24",
             tu_build_dir(), dir);
    char *tty = tu_run_on_tty(cmd);
    cr_assert_not_null(strstr(tty, "pinload-mkdata: 1 of 40 files written"),
                       "%s", tty);
    char *err = tu_run_stderr(cmd);
    cr_assert_str_eq(err, "", "progress into a file");
    strcat(cmd, " --quiet");
    char *quiet = tu_run_on_tty(cmd);
    cr_assert_null(strstr(quiet, "files written"), "%s", quiet);
    free(tty);
    free(err);
    free(quiet);
    tu_rm_rf(dir);
}
