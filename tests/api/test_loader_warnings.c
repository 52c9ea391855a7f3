/* The public loader API, files libjpeg decodes with warnings: recorded,
 * counted per file, refused under strict. Part of the loader suites
 * (testloader.h), run on the host backend and on simulated CUDA. */
#include "testloader.h"

/* ---- files libjpeg decodes with warnings ---- */

/* A JPEG cut short (its bottom rows missing) decodes with libjpeg's
 * "premature end" warning: accepted, but recorded with code 0 and its count,
 * logged once and counted in the stats; under strict it is a bad file. */
Test(loader, files_decoded_with_warnings_are_recorded_and_strict_refuses_them,
     .timeout = TIMEOUT)
{
    char root[64], path[256];
    tu_make_tree(root, 6, 2);
    snprintf(path, sizeof path, "%s/c1/cut.jpg", root);
    tu_write_jpeg(path, 64, 200, 3, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    tu_write_file(path, bytes, len * 2 / 3);
    free(bytes);
    for (int strict = 0; strict < 2; strict++) {
        log_count lc;
        log_count_init(&lc);
        pl_config c;
        base_cfg(&c, root);
        c.augment = PL_AUGMENT_NONE; /* every row, so the cut is met */
        c.strict = strict;
        c.log = counting;
        c.log_ctx = &lc;
        pl_loader *l = create(&c);
        const pl_batch *b;
        int rc, delivered = 0;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            delivered += b->count;
            pl_loader_release(l, b, NULL);
        }
        cr_assert_eq(rc, PL_EPOCH_END);
        pl_failure f[4];
        size_t n;
        cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
        cr_assert_eq(n, 1, "strict %d: %zu records", strict, n);
        cr_assert_str_eq(f[0].path, path);
        cr_assert_geq(f[0].warnings, 1);
        cr_assert_not_null(strstr(f[0].reason, "Premature end"), "%s",
                           f[0].reason);
        pl_stats st;
        pl_loader_stats(l, &st);
        if (!strict) {
            cr_assert_eq(f[0].code, 0, "accepted");
            cr_assert_eq(delivered, 7, "the cut file is delivered");
            cr_assert_geq(st.images_warned, 1);
            cr_assert_eq(st.images_failed, 0);
            cr_assert_eq(lc.warnings, 1, "logged once");
            cr_assert_not_null(strstr(lc.warning[0], "libjpeg warning"), "%s",
                               lc.warning[0]);
        } else {
            cr_assert_eq(f[0].code, PL_ECORRUPT);
            cr_assert_eq(delivered, 7,
                         "skipped under strict, its place "
                         "taken by the order's first sample");
            cr_assert_eq(st.images_warned, 0);
            cr_assert_geq(st.images_failed, 1);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

/* Each record carries its own file's warning count: a file that cannot be
 * read, or is not a JPEG, right after one decoded with warnings has none. */
Test(loader, warning_counts_do_not_carry_over_to_the_next_file,
     .timeout = TIMEOUT)
{
    char root[64], path[256], list[256];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/cut.jpg", root);
    tu_write_jpeg(path, 64, 200, 3, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    tu_write_file(path, bytes, len * 2 / 3);
    free(bytes);
    snprintf(path, sizeof path, "%s/bmp.jpg", root);
    tu_write_file(path, "BM not really", 13);
    snprintf(list, sizeof list, "%s/list.txt", root);
    tu_write_file(list, "cut.jpg 0\nbmp.jpg 0\ngone.jpg 0\n", 31);
    pl_config c;
    base_cfg(&c, list);
    c.augment = PL_AUGMENT_NONE;
    c.shuffle = 0;
    c.num_workers = 1; /* one decoder meets the files in order */
    pl_loader *l = create(&c);
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0)
        pl_loader_release(l, b, NULL);
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    pl_failure f[4];
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(f[0].code, 0);
    cr_assert_geq(f[0].warnings, 1);
    cr_assert_eq(f[1].code, PL_ENOTIMAGE);
    cr_assert_eq(f[1].warnings, 0, "bmp.jpg: %d warnings", f[1].warnings);
    cr_assert_eq(f[2].code, PL_EIO);
    cr_assert_eq(f[2].warnings, 0, "gone.jpg: %d warnings", f[2].warnings);
    fx_done(l, root);
}

/* Damage below the rows a crop needs: unseen (and unrecorded) normally,
 * found by strict mode, which judges the whole file. */
Test(loader, strict_mode_finds_damage_outside_the_crop, .timeout = TIMEOUT)
{
    char root[64], path[256];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/tall.jpg", root);
    tu_write_jpeg(path, 64, 400, 5, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    tu_write_file(path, bytes, len * 9 / 10);
    free(bytes);
    for (int strict = 0; strict < 2; strict++) {
        pl_config c;
        base_cfg(&c, root);
        c.augment = PL_AUGMENT_EVAL; /* the centre rows, ~172..228 of 400 */
        c.strict = strict;
        pl_loader *l = create(&c);
        const pl_batch *b;
        int rc, delivered = 0;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            delivered += b->count;
            pl_loader_release(l, b, NULL);
        }
        /* Strict: the one file is bad, so the epoch has nothing at all. */
        cr_assert_eq(rc, strict ? PL_ENODATA : PL_EPOCH_END, "%s",
                     pl_last_error());
        pl_failure f[2];
        size_t n;
        cr_assert_eq(pl_loader_failures(l, 0, f, 2, &n), 0);
        if (!strict) {
            cr_assert_eq(delivered, 1);
            cr_assert_eq(n, 0, "the crop never reached the cut");
        } else {
            cr_assert_not_null(strstr(pl_last_error(), "epoch 0: none of the "
                                                       "1 samples"),
                               "%s", pl_last_error());
            cr_assert_eq(delivered, 0);
            cr_assert_eq(n, 1);
            cr_assert_eq(f[0].code, PL_ECORRUPT);
            cr_assert_not_null(strstr(f[0].reason, "Premature end"), "%s",
                               f[0].reason);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}
