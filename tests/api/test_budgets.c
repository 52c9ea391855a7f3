/* The decode budgets (issue 11): memory, scans and time per sample, as
 * pl_config fields with zero meaning the default. The hostile files are
 * arithmetic-coded progressive JPEGs written here byte by byte: a header
 * claiming a huge frame, then hundreds of valid but empty scans (successive
 * approximation, one spectral band at a time), a few KB in all. libjpeg
 * accepts them without a warning, and each scan costs a pass over the
 * whole frame's coefficients. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pinload.h"
#include "testbombs.h"
#include "testloader.h"
#include "testutil.h"

#define MIB ((int64_t)1 << 20)

static void put16(FILE *f, int v)
{
    fputc((v >> 8) & 0xff, f);
    fputc(v & 0xff, f);
}

static void sos(FILE *f, int first_comp, int ncomps, int ss, int se, int ah,
                int al)
{
    fputc(0xff, f);
    fputc(0xda, f);
    put16(f, 6 + 2 * ncomps);
    fputc(ncomps, f);
    for (int c = 0; c < ncomps; c++) {
        fputc(first_comp + c + 1, f);
        fputc(0x00, f); /* arithmetic conditioning tables 0 */
    }
    fputc(ss, f);
    fputc(se, f);
    fputc((ah << 4) | al, f);
}

/* A w x h progressive arithmetic-coded JPEG of `comps` components (4:4:4):
 * the DC scan and its refinements down from bit `al`, then for each
 * component `bands` spectral bands, each scanned first at bit `al` and
 * refined down to 0. Returns the number of scans. */
static int write_bomb(const char *path, int w, int h, int comps, int al,
                      int bands)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    fputc(0xff, f);
    fputc(0xd8, f);
    fputc(0xff, f); /* DQT: table 0, all ones */
    fputc(0xdb, f);
    put16(f, 67);
    fputc(0, f);
    for (int i = 0; i < 64; i++)
        fputc(1, f);
    fputc(0xff, f); /* SOF10: progressive, arithmetic */
    fputc(0xca, f);
    put16(f, 8 + 3 * comps);
    fputc(8, f);
    put16(f, h);
    put16(f, w);
    fputc(comps, f);
    for (int c = 0; c < comps; c++) {
        fputc(c + 1, f);
        fputc(0x11, f);
        fputc(0, f);
    }
    int scans = 0;
    sos(f, 0, comps, 0, 0, 0, al);
    scans++;
    for (int a = al - 1; a >= 0; a--, scans++)
        sos(f, 0, comps, 0, 0, a + 1, a);
    for (int c = 0; c < comps; c++)
        for (int k = 1; k <= bands; k++) {
            sos(f, c, 1, k, k, 0, al);
            scans++;
            for (int a = al - 1; a >= 0; a--, scans++)
                sos(f, c, 1, k, k, a + 1, a);
        }
    fputc(0xff, f);
    fputc(0xd9, f);
    fclose(f);
    return scans;
}

/* The process's peak resident memory, in MiB. */
static long peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024;
}

/* pl_image_load of path, which must fail with PL_ELIMIT and a reason
 * holding `reason` and the path; [out] *secs: how long it took. */
static void load_fails_with(const char *path, const char *reason, double *secs)
{
    const double t0 = tu_seconds();
    pl_image img;
    const int rc = pl_image_load(path, &img);
    *secs = tu_seconds() - t0;
    cr_assert_eq(rc, PL_ELIMIT, "%d: %s", rc, pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), reason), "%s", pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), path), "%s", pl_last_error());
}

/* The bomb of the report: a frame just under max_pixels (13376^2, three
 * components), a few KB: 1 GiB of coefficients and a pass over them per
 * scan. The budget refuses it from its header: no time, no memory. */
Test(budgets, a_bomb_over_the_memory_budget_is_refused_from_its_header,
     .timeout = TIMEOUT)
{
    char dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/bomb.jpg", dir);
    const int scans = write_bomb(path, 13376, 13376, 3, 2, 30);
    size_t bytes = 0;
    free(tu_read_file(path, &bytes));
    cr_assert_lt(bytes, 4096, "%zu bytes", bytes);
    cr_assert_gt(scans, 256);

    const long before = peak_mib();
    double secs;
    load_fails_with(path,
                    "needs 1024 MiB of coefficients, over the decode memory "
                    "budget of 512 MiB",
                    &secs);
    cr_assert_lt(secs, 1.0, "%.2f s", secs);
    cr_assert_lt(peak_mib() - before, 32, "peak grew by %ld MiB",
                 peak_mib() - before);
    tu_rm_rf(dir);
}

/* Under the memory budget but with hundreds of scans: the scan limit. */
Test(budgets, a_bomb_with_hundreds_of_scans_stops_at_the_scan_limit,
     .timeout = TIMEOUT)
{
    char dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/scans.jpg", dir);
    const int scans = write_bomb(path, 2048, 2048, 1, 13, 63);
    cr_assert_eq(scans, 1 + 13 + 63 * 14);
    double secs;
    load_fails_with(path, "more than 256 progressive scans", &secs);
    /* 256 passes over 4 Mpx: a fraction of a second; generous for the
     * sanitizers. */
    cr_assert_lt(secs, 20.0, "%.2f s", secs);
    tu_rm_rf(dir);
}

/* A tree: n good files and, first in file order, the given bomb. */
static void tree_with(char root[64], pl_config *c, int n, int w, int h,
                      int comps, int al, int bands)
{
    fx_flat(root, c, n);
    char p[128];
    snprintf(p, sizeof p, "%s/a_bomb.jpg", root);
    write_bomb(p, w, h, comps, al, bands);
}

/* The three budgets are pl_config fields; each one set low makes the bomb
 * that sample's PL_ELIMIT with its own reason, and every good file is
 * delivered. */
Test(budgets, each_budget_is_a_config_field_naming_itself, .timeout = TIMEOUT)
{
    static const struct {
        int32_t ms, scans;
        int64_t memory;
        const char *reason;
    } cases[] = {
        {0, 0, 16 * MIB, "over the decode memory budget of 16 MiB"},
        {0, 40, 0, "more than 40 progressive scans"},
        {300, 60000, 0, "decoding took longer than the limit of 300 ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char root[64];
        pl_config c;
        /* 4096^2, one component: 32 MiB of coefficients, 896 scans of
         * about 6 ms each (far more under the sanitizers). */
        tree_with(root, &c, 6, 4096, 4096, 1, 13, 63);
        c.batch_size = 7;
        c.shuffle = 0;
        c.on_error = PL_ON_ERROR_FAIL;
        c.num_workers = 1;
        c.max_decode_ms = cases[i].ms;
        c.max_scans = cases[i].scans;
        c.max_decode_memory = cases[i].memory;
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        const pl_batch *b;
        const double t0 = tu_seconds();
        const int rc = pl_loader_next(l, &b);
        const double secs = tu_seconds() - t0;
        cr_assert_eq(rc, PL_ELIMIT, "case %zu: %d %s", i, rc, pl_last_error());
        cr_assert_not_null(strstr(pl_last_error(), cases[i].reason),
                           "case %zu: %s", i, pl_last_error());
        cr_assert_not_null(strstr(pl_last_error(), "a_bomb.jpg"), "%s",
                           pl_last_error());
        if (cases[i].ms)
            cr_assert_lt(secs, 0.3 + 5.0, "%.2f s", secs);
        fx_done(l, root);
    }
}

/* The memory budget holds for PNG and WebP too (issue 34): the report's
 * bombs, a 0.43 MB PNG of 12000 x 12000 and a lossy WebP of 13000 x 13000,
 * among good files under a 64 MiB budget are those samples' PL_ELIMIT,
 * naming the field, and every good file is delivered. They were delivered,
 * the PNG holding about 400 MiB and the WebP 750 to 970. */
Test(budgets, png_and_webp_bombs_are_refused_under_the_memory_budget,
     .timeout = TIMEOUT)
{
    char root[64], p[128];
    pl_config c;
    fx_flat(root, &c, 5);
    tb_buf png = {0};
    tb_png_begin(&png, 12000, 12000, 8, 2);
    tb_png_end_black(&png, 12000, 12000, 3);
    snprintf(p, sizeof p, "%s/a_bomb.png", root);
    tu_write_file(p, png.p, png.len);
    size_t len;
    uint8_t *webp = tb_webp_grey(13000, 13000, &len);
    snprintf(p, sizeof p, "%s/a_bomb.webp", root);
    tu_write_file(p, webp, len);
    c.batch_size = 5;
    c.shuffle = 0;
    c.num_workers = 2;
    c.max_decode_memory = 64 * MIB;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->count, 5);
    for (int i = 0; i < b->count; i++)
        cr_assert_geq(b->indices[i], 2, "the bombs are indices 0 and 1");
    pl_loader_release(l, b, NULL);
    pl_failure f[4];
    size_t n = 0;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(f[i].code, PL_ELIMIT, "%s: %s", f[i].path, f[i].reason);
        cr_assert_not_null(strstr(f[i].reason,
                                  "over the decode memory budget of 64 MiB "
                                  "(config.max_decode_memory)"),
                           "%s", f[i].reason);
    }
    free(png.p);
    free(webp);
    fx_done(l, root);
}

/* Zero is the default for each budget, and pl_config_default says what
 * that is; out-of-range values are refused naming the field. */
Test(budgets, zero_means_the_default_and_bad_values_are_refused,
     .timeout = TIMEOUT)
{
    pl_config d;
    pl_config_default(&d);
    cr_assert_eq(d.max_decode_ms, 5000);
    cr_assert_eq(d.max_scans, 256);
    cr_assert_eq(d.max_decode_memory, 512 * MIB);

    char root[64];
    pl_config c;
    /* The report's bomb among good files, every budget 0: refused by the
     * default memory budget, the good files delivered under SKIP. */
    tree_with(root, &c, 6, 13376, 13376, 3, 2, 30);
    c.batch_size = 6;
    c.max_decode_ms = 0;
    c.max_scans = 0;
    c.max_decode_memory = 0;
    c.num_workers = 2;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->count, 6);
    for (int i = 0; i < b->count; i++)
        cr_assert_neq(b->indices[i], 0, "the bomb is index 0");
    pl_failure f;
    size_t n = 0;
    cr_assert_eq(pl_loader_failures(l, 0, &f, 1, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(f.code, PL_ELIMIT);
    cr_assert_not_null(strstr(f.reason, "512 MiB"), "%s", f.reason);
    pl_loader_release(l, b, NULL);
    pl_loader_destroy(l);

    static const struct {
        int32_t ms, scans;
        int64_t memory;
        const char *field;
    } bad[] = {
        {-2, 0, 0, "config.max_decode_ms"},
        {86400001, 0, 0, "config.max_decode_ms"},
        {0, -1, 0, "config.max_scans"},
        {0, 65536, 0, "config.max_scans"},
        {0, 0, -1, "config.max_decode_memory"},
        {0, 0, 1000, "config.max_decode_memory"},
        {0, 0, ((int64_t)1 << 40) + 1, "config.max_decode_memory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c.max_decode_ms = bad[i].ms;
        c.max_scans = bad[i].scans;
        c.max_decode_memory = bad[i].memory;
        cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL, "case %zu", i);
        cr_assert_not_null(strstr(pl_last_error(), bad[i].field),
                           "case %zu: %s", i, pl_last_error());
    }
    tu_rm_rf(root);
}

/* destroy's bound: the time limit plus one file read, with every worker
 * deep in a decode that would take seconds. */
Test(budgets, destroy_returns_within_the_time_limit_during_slow_decodes,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 4; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/b%d.jpg", root, i);
        write_bomb(p, 4096, 4096, 1, 13, 63);
    }
    pl_config c;
    base_cfg(&c, root);
    c.batch_size = 2;
    c.num_workers = 2;
    c.max_scans = 60000;
    c.max_decode_ms = 300;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    usleep(100 * 1000); /* both workers are decoding now */
    const double t0 = tu_seconds();
    pl_loader_destroy(l);
    const double secs = tu_seconds() - t0;
    cr_assert_lt(secs, 0.3 + 2.0, "destroy took %.2f s", secs);
    tu_rm_rf(root);
}

/* Every real photo decodes within the default budgets, with room. */
Test(budgets, every_real_photo_decodes_within_the_default_budgets,
     .timeout = TIMEOUT)
{
    char dir[512];
    TU_SHARED_OR_SKIP(dir, "photos");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -name '*.jpg' | sort", dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char path[1024];
    int n = 0;
    double slowest = 0;
    while (fgets(path, sizeof path, p)) {
        path[strcspn(path, "\n")] = 0;
        const double t0 = tu_seconds();
        pl_image img;
        cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
        const double secs = tu_seconds() - t0;
        slowest = secs > slowest ? secs : slowest;
        pl_image_free(&img);
        n++;
    }
    pclose(p);
    cr_assert_gt(n, 0);
    cr_log_info("%d photos, the slowest %.3f s", n, slowest);
    if (!TU_SANITIZED)
        cr_assert_lt(slowest, 2.5, "%.2f s: half the time limit", slowest);
}
