/* The tools against hostile paths and file systems (issue 21): no user
 * string reaches a shell or gnuplot's command language, no named path is
 * waited on (FIFOs) or written half, an output folder holds nothing stale,
 * and a pack is there whole or not at all. Each test names the case of
 * docs/RELIABILITY.md it checks. */
#include <criterion/criterion.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "pinload.h"
#include "testloader.h"
#include "testutil.h"

/* "TOOL ARGS" run by the shell in dir, bounded to 20 s (then killed); its exit
 * status (124 on the bound), stderr in *err (malloc'd). */
static int tool(const char *dir, const char *name, const char *args, char **err)
{
    char cmd[8192], errf[128], build[4096];
    cr_assert_not_null(realpath(tu_build_dir(), build), "%s", tu_build_dir());
    snprintf(errf, sizeof errf, "%s.err", dir);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && timeout -k 5 20 '%s/%s' %s >/dev/null 2>'%s'", dir,
             build, name, args, errf);
    const int st = system(cmd);
    *err = tu_slurp(errf);
    unlink(errf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_in(const char *text, const char *needle)
{
    cr_assert_not_null(strstr(text, needle), "no \"%s\" in:\n%s", needle, text);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- the bench's plot ---- */

/* Backquotes in the data path and in the plot path: gnuplot runs none of
 * them, and the PNG is written where asked. */
Test(tool_paths, the_bench_plot_runs_nothing_a_path_holds, .timeout = 120)
{
    char dir[64], *err;
    tu_tmpdir(dir);
    char data[256], p[512];
    snprintf(data, sizeof data, "%s/d`touch PWNED-DATA`'x", dir);
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/c%d/%d.jpg", data, i % 2, i);
        tu_write_jpeg(p, 40, 32, (unsigned)i, NULL);
    }
    const char *args =
        "--data \"$PWD\"/'d`touch PWNED-DATA`'\\''x' --workers 1 --prefetch 1 "
        "--pin on --batches 2 --batch 2 --size 16 --warmup 0 --device host "
        "--plot 'p`touch PWNED-PLOT`\"$(touch PWNED-SUB)\".png'";
    cr_assert_eq(tool(dir, "pinload-bench", args, &err), 0, "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/PWNED-DATA", dir);
    cr_assert(!exists(p), "gnuplot ran the data path's backquotes");
    snprintf(p, sizeof p, "%s/PWNED-PLOT", dir);
    cr_assert(!exists(p), "gnuplot ran the plot path's backquotes");
    snprintf(p, sizeof p, "%s/PWNED-SUB", dir);
    cr_assert(!exists(p), "a shell ran the plot path");
    snprintf(p, sizeof p, "%s/p`touch PWNED-PLOT`\"$(touch PWNED-SUB)\".png",
             dir);
    size_t n;
    uint8_t *png = tu_read_file(p, &n);
    cr_assert(n > 8 && memcmp(png, "\x89PNG", 4) == 0, "no PNG at %s", p);
    free(png);
    tu_rm_rf(dir);
}

/* An output that cannot be written is named before the sweep, and nothing
 * is written to stdout in its place. */
Test(tool_paths, the_bench_names_an_unwritable_report_before_measuring)
{
    char dir[64], data[64], *err;
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 2);
    const char *cases[][2] = {
        {"--plot nowhere/p.png", "--plot nowhere/p.png: cannot write in"},
        {"--csv .", "--csv .: not a regular file"},
        {"--json /dev/null", "--json /dev/null: not a regular file"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char args[512];
        snprintf(args, sizeof args,
                 "--data %s --workers 1 --device host --batches 2 --batch 2 "
                 "--size 8 %s",
                 data, cases[k][0]);
        cr_assert_eq(tool(dir, "pinload-bench", args, &err), 1, "%s: %s",
                     cases[k][0], err);
        expect_in(err, cases[k][1]);
        /* Refused before any loader is made. */
        cr_assert_null(strstr(err, "backend:"), "%s", err);
        free(err);
    }
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* ---- FIFOs named as files ---- */

/* A FIFO as the list file (config.data), as a list of shards or as the
 * resume state: refused at once, naming it, instead of waiting for a
 * writer for ever. */
Test(tool_paths, a_fifo_named_as_a_file_is_refused_at_once, .timeout = 60)
{
    char dir[64], fifo[128], *err, args[512];
    tu_tmpdir(dir);
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "--data %s --out %s/o --device host", fifo,
             dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 1, "%s", err);
    expect_in(err, "pipe: not a regular file (a FIFO)");
    free(err);

    char data[64];
    pl_config c;
    fx_flat(data, &c, 3);
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --resume-from %s", data, dir,
             fifo);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 1, "%s", err);
    expect_in(err, "--resume-from ");
    expect_in(err, "pipe: not a regular file (a FIFO)");
    free(err);
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --resume-from %s", data, dir,
             dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 1, "%s", err);
    expect_in(err, "not a regular file (a directory)");
    free(err);

    /* The library itself, without a tool. */
    c.data = fifo;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    expect_in(pl_last_error(), "pipe: not a regular file (a FIFO)");
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* ---- pinload-dump's output folder ---- */

Test(tool_paths, dump_names_an_out_that_is_not_a_folder)
{
    char dir[64], data[64], args[512], *err;
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 2);
    snprintf(args, sizeof args, "--data %s --out /etc/passwd --device host",
             data);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 1, "%s", err);
    expect_in(err, "--out /etc/passwd: not a directory");
    free(err);
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* A second, shorter dump into the same --out: only its own samples are
 * there after (the first run's extra PPMs are removed, and said so); other
 * files are left alone. */
Test(tool_paths, dump_into_a_used_out_leaves_nothing_stale, .timeout = 60)
{
    char dir[64], data[64], args[512], *err, p[256];
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 9);
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --size 8 --augment eval", data,
             dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 0, "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/o", dir);
    cr_assert_eq(tu_count_ppms(p), 9);
    snprintf(p, sizeof p, "%s/o/mine.txt", dir);
    tu_write_file(p, "x", 1);
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --size 8 --augment eval "
             "--limit 4",
             data, dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 0, "%s", err);
    expect_in(err, "removed 10 files of an earlier dump");
    free(err);
    snprintf(p, sizeof p, "ls %s/o | grep -c '[.]ppm$'", dir);
    FILE *f = popen(p, "r");
    int ppms = -1;
    cr_assert_eq(fscanf(f, "%d", &ppms), 1);
    pclose(f);
    cr_assert_eq(ppms, 4);
    snprintf(p, sizeof p, "%s/o", dir);
    int n;
    tu_row *rows = tu_read_index(p, &n);
    cr_assert_eq(n, 4);
    free(rows);
    snprintf(p, sizeof p, "%s/o/mine.txt", dir);
    cr_assert(exists(p), "a file not the dump's own was removed");
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* A full disk (here: the file size limit) while writing index.tsv: the
 * error names it, the index ends at its last whole row, and every PPM
 * left has its row. */
Test(tool_paths, dump_on_a_full_disk_keeps_whole_rows_only, .timeout = 60)
{
    char dir[64], data[128], cmd[2048], p[256];
    tu_tmpdir(dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-mkdata --out %s --classes 2 --per-class 150 "
             "--size-range 16-24 --quiet >/dev/null 2>&1",
             tu_build_dir(), data);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    /* 4 KiB per file; SIGXFSZ ignored, so writes past it fail (EFBIG). */
    snprintf(cmd, sizeof cmd,
             "ulimit -f 8; trap '' XFSZ; %s/pinload-dump --data %s --out %s/o "
             "--device host --size 4 --augment eval --quiet 2>%s/err",
             tu_build_dir(), data, dir, dir);
    const int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    snprintf(p, sizeof p, "%s/err", dir);
    char *err = tu_slurp(p);
    expect_in(err, "index.tsv: File too large; it ends at its last whole row");
    free(err);
    snprintf(p, sizeof p, "%s/o/index.tsv", dir);
    char *text = tu_slurp(p);
    const size_t len = strlen(text);
    cr_assert(len > 3000 && text[len - 1] == '\n', "cut mid-row (%zu bytes)",
              len);
    free(text);
    snprintf(p, sizeof p, "%s/o", dir);
    int n;
    tu_row *rows = tu_read_index(p, &n);
    cr_assert_gt(n, 10);
    cr_assert_lt(n, 300, "the limit was never met");
    cr_assert_eq(tu_count_ppms(p), n, "every PPM has its row");
    free(rows);
    tu_rm_rf(dir);
}

/* File names with newlines and tabs: the closing "bad:" lines stay one
 * line each. */
Test(tool_paths, dump_lists_bad_files_one_line_each_whatever_their_names)
{
    char dir[64], data[64], args[512], *err, p[256];
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 3);
    snprintf(p, sizeof p, "%s/f01\nx\ty.jpg", data);
    write_not_jpeg(p);
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --size 8 --augment eval "
             "--on-error skip",
             data, dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 0, "%s", err);
    expect_in(err, "pinload-dump: bad: ");
    expect_in(err, "f01\\nx\\ty.jpg: not an image pinload reads");
    cr_assert_null(strstr(err, "f01\nx"), "a raw newline: %s", err);
    free(err);
    /* Under FAIL, the error that stops the dump is one line too. */
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --size 8 --augment eval "
             "--on-error fail",
             data, dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 1, "%s", err);
    expect_in(err, "pinload-dump: pl_loader_next: ");
    expect_in(err, "f01\\nx\\ty.jpg: not an image pinload reads");
    cr_assert_null(strstr(err, "f01\nx"), "a raw newline: %s", err);
    free(err);
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* ---- a data file never runs a command (issue 34) ---- */

/* A tar whose first member is named "pipe:touch MARKER #", given to
 * pinload-dump and pinload-pack as --data: nothing runs; with an image in
 * it, the dump reads it as the shard it is. Before, both tools ran the
 * member's name at create. */
Test(tool_paths, a_tar_given_as_data_runs_no_command, .timeout = 60)
{
    char dir[64], marker[128], bare[128], with[128], jpeg[128], cache[128];
    char args[1024], *err;
    tu_tmpdir(dir);
    snprintf(marker, sizeof marker, "%s/marker", dir);
    snprintf(bare, sizeof bare, "%s/x.tar", dir);
    snprintf(with, sizeof with, "%s/y.tar", dir);
    snprintf(jpeg, sizeof jpeg, "%s/k0.jpg", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    tu_write_jpeg(jpeg, 24, 20, 5, NULL);
    tu_hostile_tar(bare, marker, NULL);
    tu_hostile_tar(with, marker, jpeg);
    setenv("PINLOAD_CACHE_DIR", cache, 1); /* not the user's, if it ran */
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --size 8 --augment eval", bare,
             dir);
    tool(dir, "pinload-dump", args, &err);
    cr_assert(!exists(marker), "pinload-dump ran x.tar's member: %s", err);
    free(err);
    snprintf(args, sizeof args, "--data %s --out %s/p --per-shard 10", bare,
             dir);
    tool(dir, "pinload-pack", args, &err);
    cr_assert(!exists(marker), "pinload-pack ran x.tar's member: %s", err);
    free(err);
    snprintf(args, sizeof args,
             "--data %s --out %s/o --device host --size 8 --augment eval "
             "--on-error skip",
             with, dir);
    cr_assert_eq(tool(dir, "pinload-dump", args, &err), 0, "%s", err);
    cr_assert(!exists(marker), "pinload-dump ran y.tar's member");
    free(err);
    int n;
    char out[128];
    snprintf(out, sizeof out, "%s/o", dir);
    tu_row *rows = tu_read_index(out, &n);
    int k0 = 0;
    for (int i = 0; i < n; i++)
        if (strstr(rows[i].path, "y.tar:k0.jpg") && rows[i].position >= 0) {
            cr_assert_eq(rows[i].label, 2);
            k0++;
        }
    cr_assert_gt(k0, 0, "k0 was not read from the shard");
    free(rows);
    cr_assert(!exists(cache), "a tar went through the remote cache");
    tu_rm_rf(dir);
}

/* ---- pinload-pack: whole or not at all ---- */

/* The shards of `out` as a list "shard-000000.tar,..." in *names. */
static int list_shards(const char *out, char *names, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep '\\.tar$' | tr '\\n' ,", out);
    FILE *f = popen(cmd, "r");
    names[0] = '\0';
    if (!fgets(names, (int)cap, f))
        names[0] = '\0';
    pclose(f);
    int n = 0;
    for (const char *q = names; *q; q++)
        n += *q == ',';
    return n;
}

Test(tool_paths, pack_refuses_a_used_out_and_replaces_a_pack_with_force,
     .timeout = 60)
{
    char dir[64], data[64], args[512], *err, p[256], names[512];
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 6);
    snprintf(args, sizeof args, "--data %s --out %s/o --per-shard 1 --quiet",
             data, dir);
    cr_assert_eq(tool(dir, "pinload-pack", args, &err), 0, "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/o", dir);
    cr_assert_eq(list_shards(p, names, sizeof names), 6, "%s", names);
    /* Again into the same folder: refused, the pack untouched. */
    snprintf(args, sizeof args, "--data %s --out %s/o --per-shard 2 --quiet",
             data, dir);
    cr_assert_eq(tool(dir, "pinload-pack", args, &err), 1, "%s", err);
    expect_in(err, "holds a pack already: --force replaces it");
    free(err);
    cr_assert_eq(list_shards(p, names, sizeof names), 6, "%s", names);
    /* With --force: the new pack alone, none of the old shards mixed in. */
    snprintf(args, sizeof args,
             "--data %s --out %s/o --per-shard 2 --quiet --force", data, dir);
    cr_assert_eq(tool(dir, "pinload-pack", args, &err), 0, "%s", err);
    free(err);
    cr_assert_eq(list_shards(p, names, sizeof names), 3, "%s", names);
    cr_assert_str_eq(names, "shard-000000.tar,shard-000001.tar,"
                            "shard-000002.tar,");
    snprintf(p, sizeof p, "%s/o/manifest.tsv", dir);
    char *m = tu_slurp(p);
    expect_in(m, "# end: 6 samples in 3 shards, 0 not packed\n");
    free(m);
    /* A folder holding anything else is never replaced. */
    snprintf(p, sizeof p, "%s/o/notes.txt", dir);
    tu_write_file(p, "mine", 4);
    cr_assert_eq(tool(dir, "pinload-pack", args, &err), 1, "%s", err);
    expect_in(err, "holds notes.txt, which is not a pack's own");
    free(err);
    cr_assert(exists(p));
    /* Nothing is left beside --out: no staging folder. */
    snprintf(p, sizeof p, "ls -a %s | grep -c pack-", dir);
    FILE *f = popen(p, "r");
    int left = -1;
    cr_assert_eq(fscanf(f, "%d", &left), 1);
    pclose(f);
    cr_assert_eq(left, 0, "a staging folder was left beside --out");
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* Bytes that are not a JPEG's, a PNG's or a WebP's (a GIF here) are not
 * packed: named, counted, in the manifest, and the exit status is 1. */
Test(tool_paths, pack_stores_only_images_it_reads, .timeout = 60)
{
    char dir[64], data[64], args[512], *err, p[256];
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 3);
    snprintf(p, sizeof p, "%s/f01.jpg", data);
    tu_write_file(p, "GIF89a\x01\0\x01\0\0\0", 12);
    snprintf(args, sizeof args, "--data %s --out %s/o --per-shard 10", data,
             dir);
    cr_assert_eq(tool(dir, "pinload-pack", args, &err), 1, "%s", err);
    expect_in(err, "not packed: ");
    expect_in(err, "f01.jpg: not a JPEG, PNG or WebP image");
    expect_in(err, "2 samples in 1 shards in");
    expect_in(err, "1 not packed");
    free(err);
    snprintf(p, sizeof p, "%s/o/manifest.tsv", dir);
    char *m = tu_slurp(p);
    expect_in(m, "f01.jpg\tPL_ENOTIMAGE");
    expect_in(m, "# end: 2 samples in 1 shards, 1 not packed\n");
    free(m);
    fx_done(NULL, data);
    tu_rm_rf(dir);
}

/* A pack stopped by a signal leaves nothing at --out, and nothing a reader
 * would take for a dataset beside it. */
Test(tool_paths, a_stopped_pack_leaves_no_dataset, .timeout = 120)
{
    char dir[64], cmd[2048], p[256];
    tu_tmpdir(dir);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-mkdata --out %s/data --classes 2 --per-class 400 "
             "--quiet >/dev/null 2>&1",
             tu_build_dir(), dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-pack --data %s/data --out %s/o --per-shard 1 "
             "--max-side 300 2>%s/err",
             tu_build_dir(), dir, dir, dir);
    char ready[128];
    snprintf(ready, sizeof ready, "%s/err", dir);
    const int rc = tu_run_and_signal(cmd, ready, 0.5, SIGTERM);
    cr_assert_eq(rc, 128 + SIGTERM, "exit %d (finished first?)", rc);
    snprintf(p, sizeof p, "%s/o", dir);
    cr_assert(!exists(p), "a stopped pack left %s", p);
    snprintf(p, sizeof p, "ls -a %s | grep -c pack-", dir);
    FILE *f = popen(p, "r");
    int left = -1;
    cr_assert_eq(fscanf(f, "%d", &left), 1);
    pclose(f);
    cr_assert_eq(left, 0, "the staging folder was left");
    snprintf(p, sizeof p, "%s/err", dir);
    char *err = tu_slurp(p);
    expect_in(err, "stopped by signal 15");
    expect_in(err, "nothing written to");
    free(err);
    tu_rm_rf(dir);
}

/* --quiet: not even the loader's notice. */
Test(tool_paths, pack_quiet_prints_nothing_when_all_goes_well)
{
    char dir[64], data[64], args[512], *err;
    tu_tmpdir(dir);
    pl_config c;
    fx_flat(data, &c, 2);
    snprintf(args, sizeof args, "--data %s --out %s/o --per-shard 10 --quiet",
             data, dir);
    cr_assert_eq(tool(dir, "pinload-pack", args, &err), 0, "%s", err);
    cr_assert_str_eq(err, "");
    free(err);
    fx_done(NULL, data);
    tu_rm_rf(dir);
}
