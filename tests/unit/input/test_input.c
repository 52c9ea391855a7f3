/* The file list (input/: catalog, folder and list readers): ImageFolder trees
 * listed and labelled exactly as torchvision's ImageFolder lists them, flat
 * folders, list files and their errors. The dataset never reads the files, so
 * most fixtures are empty files with the right names. */
#include <fcntl.h>
#include <pthread.h>

#include "../input/input.h"
#include "../common/bytes.h"
#include "../common/error.h"
#include "../common/log.h"
#include "testutil.h"

/* ---- helpers ---- */

/* A logger context that keeps every message it is sent. */
typedef struct log_record {
    int n, notices, warnings;
    char msgs[16][1024];
} log_record;

static void record_log(void *ctx, pl_log_level level, const char *msg)
{
    log_record *r = ctx;
    if (r->n < 16)
        snprintf(r->msgs[r->n], sizeof r->msgs[r->n], "%s", msg);
    r->n++;
    if (level == PL_LOG_NOTICE)
        r->notices++;
    else
        r->warnings++;
}

/* The logged messages that contain `needle`. */
static int log_count(const log_record *r, const char *needle)
{
    int k = 0;
    for (int i = 0; i < r->n && i < 16; i++)
        k += strstr(r->msgs[i], needle) != NULL;
    return k;
}

/* An empty file at root/rel (the dataset only looks at names). */
static void touch(const char *root, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    tu_write_file(p, "", 0);
}

static void mkdir_at(const char *root, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s/", root, rel);
    tu_mkdirs_for(p);
}

/* catalog_name's and catalog_label's results, which must be had. */
static const char *name_of(const catalog *c, int64_t i)
{
    const char *name;
    char why[256];
    cr_assert_eq(catalog_name(c, i, &name, why, sizeof why), 0, "%s", why);
    return name;
}

static int32_t label_of(const catalog *c, int64_t i)
{
    int32_t label;
    char why[256];
    cr_assert_eq(catalog_label(c, i, &label, why, sizeof why), 0, "%s", why);
    return label;
}

/* Where catalog_locate says file sample i is, for openat(ds->dirfd, ...). */
static const char *open_path(const catalog *ds, int64_t i)
{
    location loc;
    cr_assert_eq(catalog_locate(ds, i, &loc, NULL, 0), 0);
    cr_assert_eq(loc.fd, ds->dirfd);
    cr_assert_not_null(loc.path);
    return loc.path;
}

static int open_logged(catalog *ds, const char *path, log_record *rec)
{
    logger lg;
    logger_init(&lg, record_log, rec);
    catalog_init(ds);
    const int rc = input_open(ds, path, &(remote_opts){0}, &lg);
    logger_fini(&lg);
    return rc;
}

/* Asserts that ds lists exactly root/want[i] with label labels[i], in that
 * order (where each file is opened, open_path, is tested on its own, below). */
static void assert_paths(const catalog *ds, const char *root,
                         const char *const *want, const int32_t *labels, int n)
{
    for (int i = 0; i < ds->n && i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", root, want[i]);
        cr_assert_str_eq(name_of(ds, i), p, "position %d: got %s, want %s",
                         i, name_of(ds, i), p);
        cr_assert_eq(ds->labels[i], labels[i], "label of %s", want[i]);
    }
    cr_assert_eq(ds->n, n, "listed %lld files, want %d", (long long)ds->n, n);
}

/* ---- ImageFolder ---- */

Test(dataset, classes_are_the_sorted_folder_names_in_byte_order)
{
    char root[64];
    tu_tmpdir(root);
    static const char *const folders[] = {"b", "a", "A", "10", "9"};
    for (int i = 0; i < 5; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "%s/img.jpg", folders[i]);
        touch(root, rel);
    }
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    /* sorted(["b", "a", "A", "10", "9"]) in Python. */
    static const char *const want[] = {"10", "9", "A", "a", "b"};
    cr_assert_eq(ds.num_classes, 5);
    for (int c = 0; c < 5; c++)
        cr_assert_str_eq(catalog_class(&ds, c), want[c], "class %d", c);
    static const char *const paths[] = {"10/img.jpg", "9/img.jpg", "A/img.jpg",
                                        "a/img.jpg", "b/img.jpg"};
    static const int32_t labels[] = {0, 1, 2, 3, 4};
    assert_paths(&ds, root, paths, labels, 5);
    cr_assert_eq(rec.n, 0, "no notice for a clean tree");
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* torchvision walks a class with sorted(os.walk(class_dir)): directories in
 * the order of their path strings, where "a-b" and "a.b" come before
 * "a/y" because '-' and '.' sort before '/', and "a0" after it. A
 * depth-first walk would put a/y/deep.jpg right after a/x.jpg. The expected
 * list was printed by Python 3 on the same tree. */
Test(dataset, files_within_a_class_follow_sorted_os_walk_not_depth_first)
{
    char root[64];
    tu_tmpdir(root);
    static const char *const files[] = {
        "cls/z.jpg",   "cls/a0/v.jpg",     "cls/a/y/deep.jpg",
        "cls/a.jpg",   "cls/a.b/w.jpg",    "cls/a-b/y.jpg",
        "cls/a/x.jpg", "cls/x.jpg/in.jpg",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        touch(root, files[i]);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {
        "cls/a.jpg",     "cls/z.jpg",        "cls/a/x.jpg",  "cls/a-b/y.jpg",
        "cls/a.b/w.jpg", "cls/a/y/deep.jpg", "cls/a0/v.jpg", "cls/x.jpg/in.jpg",
    };
    static const int32_t labels[8] = {0};
    assert_paths(&ds, root, want, labels, 8);
    cr_assert_eq(ds.num_classes, 1);
    cr_assert_str_eq(catalog_class(&ds, 0), "cls");
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* "a/z" is a prefix of "a/z-", so its files come first, although the full
 * path "a/z-/8.jpg" sorts before "a/z/9.jpg" ('-' < '/'): the order is by
 * directory, then name, not by whole path. */
Test(dataset, files_sort_by_directory_then_name_not_by_whole_path)
{
    char root[64];
    tu_tmpdir(root);
    static const char *const files[] = {"b/q/1.jpg", "b/0.jpg", "a/z/9.jpg",
                                        "a/z-/8.jpg", "a/5.jpg"};
    for (size_t i = 0; i < 5; i++)
        touch(root, files[i]);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"a/5.jpg", "a/z/9.jpg", "a/z-/8.jpg",
                                       "b/0.jpg", "b/q/1.jpg"};
    static const int32_t labels[] = {0, 0, 0, 1, 1};
    assert_paths(&ds, root, want, labels, 5);
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* Files and sub-directories with interleaved names in one folder: every
 * entry must keep its own kind when the names are sorted, whatever order
 * readdir returns them in. */
Test(dataset, every_file_in_a_folder_mixing_files_and_directories_is_listed)
{
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 12; i++) {
        char rel[64];
        if (i % 2 == 0)
            snprintf(rel, sizeof rel, "mix/e%02d.jpg", i);
        else
            snprintf(rel, sizeof rel, "mix/e%02d/in.jpg", i);
        touch(root, rel);
    }
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {
        "mix/e00.jpg",    "mix/e02.jpg",    "mix/e04.jpg",    "mix/e06.jpg",
        "mix/e08.jpg",    "mix/e10.jpg",    "mix/e01/in.jpg", "mix/e03/in.jpg",
        "mix/e05/in.jpg", "mix/e07/in.jpg", "mix/e09/in.jpg", "mix/e11/in.jpg",
    };
    static const int32_t labels[12] = {0};
    assert_paths(&ds, root, want, labels, 12);
    cr_assert_eq(rec.n, 0, "no notice, got \"%s\"", rec.msgs[0]);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset, image_extensions_match_case_insensitively_and_others_are_ignored)
{
    char root[64];
    tu_tmpdir(root);
    static const char *const files[] = {
        "c/1.jpg",   "c/2.jpeg", "c/3.JPG",     "c/4.JPEG", "c/5.Jpg",
        "c/6.png",   "c/7.txt",  "c/8.jpg.txt", "c/9.jpgx", "c/jpg",
        "c/10.JpEg", "c/11.gif", "c/12.WebP",   "c/13.PNG", "c/14.webp.gif",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        touch(root, files[i]);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    /* strcmp order of the names that count. */
    static const char *const want[] = {"c/1.jpg",  "c/10.JpEg", "c/12.WebP",
                                       "c/13.PNG", "c/2.jpeg",  "c/3.JPG",
                                       "c/4.JPEG", "c/5.Jpg",   "c/6.png"};
    static const int32_t labels[9] = {0};
    assert_paths(&ds, root, want, labels, 9);
    /* .gif is no ImageFolder extension: ignored without a notice. */
    for (int i = 0; i < rec.n; i++)
        cr_assert_null(strstr(rec.msgs[i], "not supported"), "%s", rec.msgs[i]);
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* Every file torchvision's ImageFolder would read is a sample or named in
 * a warning with the count of its kind (left out, it changes the data). */
Test(dataset, unsupported_image_files_are_counted_and_named_in_a_warning)
{
    char root[64];
    tu_tmpdir(root);
    static const char *const files[] = {
        "a/1.jpg",  "a/2.tif",  "a/3.TIFF",  "a/4.bmp", "b/5.png",
        "b/6.tif",  "b/7.tif",  "b/8.tif",   "b/9.tif", "b/x/10.tif",
        "b/11.ppm", "b/12.pgm", "b/13.webp",
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        touch(root, files[i]);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"a/1.jpg", "b/13.webp", "b/5.png"};
    static const int32_t labels[3] = {0, 1, 1};
    assert_paths(&ds, root, want, labels, 3);
    char want_tif[256];
    snprintf(want_tif, sizeof want_tif,
             "%s: 6 .tif files not supported (JPEG, PNG and WebP are), left "
             "out: a/2.tif, b/6.tif, b/7.tif, b/8.tif, b/9.tif, ...",
             root);
    static const char *const others[] = {
        ": 1 .tiff file not supported (JPEG, PNG and WebP are), left out: "
        "a/3.TIFF",
        ": 1 .bmp file not supported (JPEG, PNG and WebP are), left out: "
        "a/4.bmp",
        ": 1 .ppm file not supported (JPEG, PNG and WebP are), left out: "
        "b/11.ppm",
        ": 1 .pgm file not supported (JPEG, PNG and WebP are), left out: "
        "b/12.pgm"};
    int found = 0;
    for (int i = 0; i < rec.n; i++) {
        found += strcmp(rec.msgs[i], want_tif) == 0;
        for (size_t k = 0; k < 4; k++)
            found += strstr(rec.msgs[i], others[k]) != NULL;
    }
    cr_assert_eq(found, 5, "want 5 warnings, got %d; first: %s", found,
                 rec.n ? rec.msgs[0] : "(none)");
    cr_assert_eq(rec.warnings, 5, "%d warnings, %d notices", rec.warnings,
                 rec.notices);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset,
     nested_directories_are_walked_and_a_directory_named_jpg_is_no_file)
{
    char root[64];
    tu_tmpdir(root);
    touch(root, "k/d1/d2/d3/d4/deep.jpg");
    touch(root, "k/top.jpg");
    mkdir_at(root, "k/empty.jpg"); /* a directory with a JPEG name, empty */
    touch(root, "k/pic.jpeg/inside.jpg");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"k/top.jpg", "k/d1/d2/d3/d4/deep.jpg",
                                       "k/pic.jpeg/inside.jpg"};
    static const int32_t labels[3] = {0};
    assert_paths(&ds, root, want, labels, 3);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset, flat_folder_is_one_class_named_after_the_folder)
{
    char parent[64], root[128];
    tu_tmpdir(parent);
    snprintf(root, sizeof root, "%s/flowers", parent);
    touch(root, "b.jpg");
    touch(root, "a.JPEG");
    touch(root, "notes.txt");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    cr_assert_eq(ds.num_classes, 1);
    cr_assert_str_eq(catalog_class(&ds, 0), "flowers");
    static const char *const want[] = {"a.JPEG", "b.jpg"};
    static const int32_t labels[] = {0, 0};
    assert_paths(&ds, root, want, labels, 2);
    catalog_close(&ds);

    /* A trailing slash names the same folder. */
    char slashed[160];
    snprintf(slashed, sizeof slashed, "%s//", root);
    cr_assert_eq(open_logged(&ds, slashed, &rec), 0, "%s", pl_last_error());
    cr_assert_str_eq(catalog_class(&ds, 0), "flowers");
    assert_paths(&ds, root, want, labels, 2);
    cr_assert_eq(rec.n, 0);
    catalog_close(&ds);
    tu_rm_rf(parent);
}

Test(dataset,
     jpegs_directly_under_an_imagefolder_root_are_ignored_with_a_warning)
{
    char root[64];
    tu_tmpdir(root);
    touch(root, "stray1.jpg");
    touch(root, "stray2.JPEG");
    touch(root, "readme.txt");
    touch(root, "dog/1.jpg");
    touch(root, "cat/1.jpg");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"cat/1.jpg", "dog/1.jpg"};
    static const int32_t labels[] = {0, 1};
    assert_paths(&ds, root, want, labels, 2);
    cr_assert_eq(rec.n, 1, "one message, got %d", rec.n);
    cr_assert_eq(rec.warnings, 1, "the samples left out are a warning");
    cr_assert_not_null(strstr(rec.msgs[0], root), "%s", rec.msgs[0]);
    cr_assert_not_null(strstr(rec.msgs[0], "2 image file(s)"), "%s",
                       rec.msgs[0]);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset, symlink_loop_to_the_parent_terminates_with_a_notice,
     .timeout = 20)
{
    char root[64], link[128];
    tu_tmpdir(root);
    touch(root, "cls/1.jpg");
    touch(root, "cls/sub/2.jpg");
    snprintf(link, sizeof link, "%s/cls/loop", root);
    cr_assert_eq(symlink("..", link), 0, "symlink: %s", strerror(errno));
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    /* cls/loop is the root, whose only entry cls is already being walked. */
    static const char *const want[] = {"cls/1.jpg", "cls/sub/2.jpg"};
    static const int32_t labels[] = {0, 0};
    assert_paths(&ds, root, want, labels, 2);
    cr_assert_eq(ds.num_classes, 1);
    cr_assert_eq(rec.notices, 1, "%d notices", rec.notices);
    cr_assert_eq(log_count(&rec, "symbolic link loop"), 1, "%s", rec.msgs[0]);
    cr_assert_not_null(strstr(rec.msgs[0], "cls/loop"), "%s", rec.msgs[0]);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset, symlink_to_its_own_directory_terminates_with_a_notice,
     .timeout = 20)
{
    char root[64], link[128];
    tu_tmpdir(root);
    touch(root, "cls/1.jpg");
    snprintf(link, sizeof link, "%s/cls/self", root);
    cr_assert_eq(symlink(".", link), 0, "symlink: %s", strerror(errno));
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"cls/1.jpg"};
    static const int32_t labels[] = {0};
    assert_paths(&ds, root, want, labels, 1);
    cr_assert_eq(log_count(&rec, "symbolic link loop"), 1);
    cr_assert_not_null(strstr(rec.msgs[0], "cls/self"), "%s", rec.msgs[0]);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset, symlinked_class_directories_are_followed)
{
    char root[64], outside[64], target[128], link[128];
    tu_tmpdir(root);
    tu_tmpdir(outside);
    touch(outside, "x.jpg");
    touch(root, "a/y.jpg");
    snprintf(target, sizeof target, "%s", outside);
    snprintf(link, sizeof link, "%s/linked", root);
    cr_assert_eq(symlink(target, link), 0, "symlink: %s", strerror(errno));
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"a/y.jpg", "linked/x.jpg"};
    static const int32_t labels[] = {0, 1};
    assert_paths(&ds, root, want, labels, 2);
    cr_assert_str_eq(catalog_class(&ds, 1), "linked");
    cr_assert_eq(rec.n, 0, "%s", rec.msgs[0]);
    catalog_close(&ds);
    tu_rm_rf(root);
    tu_rm_rf(outside);
}

/* A second path to a directory already listed lists nothing: each
 * directory (device, inode) is listed once, the class keeps its label. */
Test(dataset, a_directory_reached_twice_is_listed_once_with_a_notice)
{
    char root[64], target[128], link[128];
    tu_tmpdir(root);
    touch(root, "elsewhere/x.jpg");
    snprintf(target, sizeof target, "%s/elsewhere", root);
    snprintf(link, sizeof link, "%s/linked", root);
    cr_assert_eq(symlink(target, link), 0, "symlink: %s", strerror(errno));
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"elsewhere/x.jpg"};
    static const int32_t labels[] = {0};
    assert_paths(&ds, root, want, labels, 1);
    cr_assert_eq(ds.num_classes, 2);
    cr_assert_str_eq(catalog_class(&ds, 1), "linked");
    cr_assert_eq(log_count(&rec, "already listed"), 1, "%s", rec.msgs[0]);
    cr_assert_not_null(strstr(rec.msgs[0], "/linked"), "%s", rec.msgs[0]);
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* Levels of directories each holding two links to the next level: 2^L
 * paths but L + 1 directories. Listed in linear time, each file once. */
Test(dataset, links_sharing_subdirectories_are_listed_once_not_per_path,
     .timeout = 60)
{
    enum { LEVELS = 24 };
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i <= LEVELS; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "c/l%02d/f.jpg", i);
        touch(root, rel);
    }
    for (int i = 0; i < LEVELS; i++)
        for (int k = 0; k < 2; k++) {
            char target[128], link[128];
            snprintf(target, sizeof target, "%s/c/l%02d", root, i + 1);
            snprintf(link, sizeof link, "%s/c/l%02d/%c", root, i, 'a' + k);
            cr_assert_eq(symlink(target, link), 0, "%s", strerror(errno));
        }
    const double t0 = tu_seconds();
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    const double took = tu_seconds() - t0;
    /* l00..l24 directly under c, and nothing a second time. */
    cr_assert_eq(ds.n, LEVELS + 1, "listed %lld", (long long)ds.n);
    char want[128];
    snprintf(want, sizeof want, "%s/c/l00/f.jpg", root);
    cr_assert_str_eq(name_of(&ds, 0), want);
    cr_assert_lt(took, 5.0, "2^%d paths walked? %.1f s", LEVELS, took);
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* A flat folder of JPEGs beside an (empty, hidden) directory is read as an
 * ImageFolder with no files: the error says why, not only the log. */
Test(dataset, jpegs_beside_a_subfolder_give_an_error_that_says_why)
{
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 40; i++) {
        char rel[32];
        snprintf(rel, sizeof rel, "p%02d.jpg", i);
        touch(root, rel);
    }
    mkdir_at(root, ".ipynb_checkpoints");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), PL_ENODATA);
    const char *e = pl_last_error();
    cr_assert_not_null(strstr(e, root), "%s", e);
    cr_assert_not_null(strstr(e, "40 image file(s) directly under it"), "%s",
                       e);
    cr_assert_not_null(strstr(e, "ImageFolder"), "%s", e);
    tu_rm_rf(root);
}

Test(dataset, empty_directory_is_enodata_naming_the_path)
{
    char root[64];
    tu_tmpdir(root);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), PL_ENODATA);
    cr_assert_not_null(strstr(pl_last_error(), root), "%s", pl_last_error());
    cr_assert_eq(ds.dirfd, -1, "closed on failure");

    /* Class folders with nothing usable in them are no data either. */
    touch(root, "a/notes.txt");
    mkdir_at(root, "b");
    cr_assert_eq(open_logged(&ds, root, &rec), PL_ENODATA);
    cr_assert_not_null(strstr(pl_last_error(), root), "%s", pl_last_error());
    tu_rm_rf(root);
}

Test(dataset, missing_path_is_eio_naming_it)
{
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, "/nonexistent/pinload/data", &rec), PL_EIO);
    cr_assert_not_null(strstr(pl_last_error(), "/nonexistent/pinload/data"),
                       "%s", pl_last_error());
}

/* dataset_open_path is the file's place under the root, so that workers
 * open it through the root's descriptor: renaming the root (or a chdir)
 * after the listing changes nothing. */
Test(dataset, open_path_is_relative_to_an_absolute_root)
{
    char root[64], moved[80];
    tu_tmpdir(root);
    char p[128];
    snprintf(p, sizeof p, "%s/c/d/file.jpg", root);
    tu_write_file(p, "abc", 3);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, root, &rec), 0, "%s", pl_last_error());
    cr_assert_eq(ds.n, 1);
    cr_assert_str_eq(name_of(&ds, 0), p);
    cr_assert_str_eq(open_path(&ds, 0), "c/d/file.jpg");
    snprintf(moved, sizeof moved, "%s-moved", root);
    cr_assert_eq(rename(root, moved), 0, "rename: %s", strerror(errno));
    const int fd = openat(ds.dirfd, open_path(&ds, 0), O_RDONLY);
    cr_assert_geq(fd, 0,
                  "openat(root fd, \"%s\") after the root was "
                  "renamed: %s",
                  open_path(&ds, 0), strerror(errno));
    char buf[8];
    cr_assert_eq(read(fd, buf, sizeof buf), 3);
    cr_assert_eq(memcmp(buf, "abc", 3), 0);
    close(fd);
    catalog_close(&ds);
    tu_rm_rf(moved);
}

Test(dataset, open_path_is_relative_to_a_relative_root)
{
    char parent[64];
    tu_tmpdir(parent);
    touch(parent, "data/c/x.jpg");
    cr_assert_eq(chdir(parent), 0);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, "data/", &rec), 0, "%s", pl_last_error());
    cr_assert_eq(ds.n, 1);
    cr_assert_str_eq(name_of(&ds, 0), "data/c/x.jpg");
    cr_assert_str_eq(open_path(&ds, 0), "c/x.jpg");
    cr_assert_eq(chdir("/"), 0);
    const int fd = openat(ds.dirfd, open_path(&ds, 0), O_RDONLY);
    cr_assert_geq(fd, 0, "openat after chdir: %s", strerror(errno));
    close(fd);
    catalog_close(&ds);
    tu_rm_rf(parent);
}

Test(dataset, list_file_open_paths_are_relative_to_its_folder)
{
    char root[64], list[128];
    tu_tmpdir(root);
    snprintf(list, sizeof list, "%s/l.txt", root);
    const char text[] = "sub/a b.jpg 0\n/abs/c.jpg 1\n";
    tu_write_file(list, text, sizeof text - 1);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, list, &rec), 0, "%s", pl_last_error());
    cr_assert_eq(ds.n, 2);
    cr_assert_str_eq(open_path(&ds, 0), "sub/a b.jpg");
    cr_assert_str_eq(open_path(&ds, 1), "/abs/c.jpg");
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* ---- list files ---- */

static void write_text(const char *path, const char *text)
{
    tu_write_file(path, text, strlen(text));
}

Test(dataset, list_file_lines_give_paths_relative_to_its_folder_and_labels)
{
    char root[64], list[128];
    tu_tmpdir(root);
    snprintf(list, sizeof list, "%s/train.txt", root);
    write_text(list, "# a comment\n"
                     "a.jpg 0\n"
                     "\n"
                     "sub/b.jpg\t2\n"
                     "   \t\n"
                     "  # an indented comment\n"
                     "with space/c d.jpg 1\n"
                     "/abs/elsewhere/e.jpg   3\r\n"
                     "tabs and spaces.jpg \t 0");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, list, &rec), 0, "%s", pl_last_error());
    cr_assert_eq(ds.n, 5);
    static const char *const rel[] = {
        "a.jpg", "sub/b.jpg", "with space/c d.jpg", "/abs/elsewhere/e.jpg",
        "tabs and spaces.jpg"};
    static const int32_t labels[] = {0, 2, 1, 3, 0};
    for (int i = 0; i < 5; i++) {
        char want[256];
        if (rel[i][0] == '/')
            snprintf(want, sizeof want, "%s", rel[i]);
        else
            snprintf(want, sizeof want, "%s/%s", root, rel[i]);
        cr_assert_str_eq(name_of(&ds, i), want, "line of %s", rel[i]);
        cr_assert_eq(ds.labels[i], labels[i], "label of %s", rel[i]);
    }
    /* Classes are "0" .. the largest label, even those no line uses. */
    cr_assert_eq(ds.num_classes, 4);
    for (int c = 0; c < 4; c++) {
        char name[16];
        snprintf(name, sizeof name, "%d", c);
        cr_assert_str_eq(catalog_class(&ds, c), name);
    }
    cr_assert_eq(rec.n, 0);
    catalog_close(&ds);
    tu_rm_rf(root);
}

Test(dataset, list_file_without_a_folder_is_relative_to_the_working_directory)
{
    char root[64];
    tu_tmpdir(root);
    char list[128];
    snprintf(list, sizeof list, "%s/l.txt", root);
    write_text(list, "x.jpg 5\n");
    cr_assert_eq(chdir(root), 0);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, "l.txt", &rec), 0, "%s", pl_last_error());
    cr_assert_eq(ds.n, 1);
    cr_assert_str_eq(name_of(&ds, 0), "x.jpg");
    cr_assert_str_eq(open_path(&ds, 0), "x.jpg");
    cr_assert_eq(ds.labels[0], 5);
    cr_assert_eq(ds.num_classes, 6);
    cr_assert_str_eq(catalog_class(&ds, 5), "5");
    catalog_close(&ds);
    cr_assert_eq(chdir("/"), 0);
    tu_rm_rf(root);
}

/* Opens a list file of `text` and expects PL_EINVAL naming "list:line". */
static void assert_bad_list(const char *text, int line)
{
    char root[64], list[128], where[160];
    tu_tmpdir(root);
    snprintf(list, sizeof list, "%s/bad.txt", root);
    write_text(list, text);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, list, &rec), PL_EINVAL, "for %s", text);
    snprintf(where, sizeof where, "%s:%d:", list, line);
    cr_assert_not_null(strstr(pl_last_error(), where), "want \"%s\" in \"%s\"",
                       where, pl_last_error());
    cr_assert_eq(ds.dirfd, -1, "closed on failure");
    tu_rm_rf(root);
}

Test(dataset, list_line_without_a_label_is_einval_naming_file_and_line)
{
    assert_bad_list("a.jpg 0\n# ok\nb.jpg\nc.jpg 1\n", 3);
}

Test(dataset, list_line_with_a_non_numeric_label_is_einval)
{
    assert_bad_list("a.jpg 0\nb.jpg x\n", 2);
    assert_bad_list("a.jpg 1.5\n", 1);
    assert_bad_list("\n\n\n\nmy file.jpg\n", 5);
}

Test(dataset, list_line_with_a_negative_label_is_einval)
{
    assert_bad_list("a.jpg -1\n", 1);
}

Test(dataset, list_file_with_only_comments_is_enodata)
{
    char root[64], list[128];
    tu_tmpdir(root);
    snprintf(list, sizeof list, "%s/empty.txt", root);
    write_text(list, "# nothing\n\n");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, list, &rec), PL_ENODATA);
    cr_assert_not_null(strstr(pl_last_error(), list), "%s", pl_last_error());
    tu_rm_rf(root);
}

/* Opens a list file of `len` bytes and expects PL_EINVAL naming
 * "list:line:" and `why`. */
static void assert_bad_list_bytes(const char *bytes, size_t len, int line,
                                  const char *why)
{
    char root[64], list[128], where[160];
    tu_tmpdir(root);
    snprintf(list, sizeof list, "%s/bad.txt", root);
    tu_write_file(list, bytes, len);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, list, &rec), PL_EINVAL);
    snprintf(where, sizeof where, "%s:%d:", list, line);
    cr_assert_not_null(strstr(pl_last_error(), where), "want \"%s\" in \"%s\"",
                       where, pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), why), "want \"%s\" in \"%s\"",
                       why, pl_last_error());
    tu_rm_rf(root);
}

Test(dataset, list_line_with_a_nul_byte_is_einval_not_cut_short)
{
    static const char text[] = "a.jpg 0\nb.jpg\0junk 1\n";
    assert_bad_list_bytes(text, sizeof text - 1, 2, "NUL byte at column 6");
}

Test(dataset, list_line_longer_than_the_limit_is_einval)
{
    const size_t n = 1 << 20; /* a megabyte without a newline */
    char *big = malloc(n);
    memset(big, 'x', n);
    memcpy(big, "a.jpg 0\n", 8);
    assert_bad_list_bytes(big, n, 2, "line longer than");
    free(big);
}

/* /dev/zero as the list: refused at once, in bounded memory and time. */
Test(dataset, dev_zero_as_a_list_is_refused_at_once, .timeout = 30)
{
    log_record rec = {0};
    catalog ds;
    /* Not even read: a device is not a regular file. */
    cr_assert_eq(open_logged(&ds, "/dev/zero", &rec), PL_EIO);
    cr_assert_not_null(strstr(pl_last_error(), "/dev/zero: not a regular file "
                                               "(a character device)"),
                       "%s", pl_last_error());
}

/* A byte order mark before the first line is not part of its path. */
Test(dataset, list_file_with_a_utf8_bom_keeps_its_first_entry)
{
    char root[64], list[128];
    tu_tmpdir(root);
    snprintf(list, sizeof list, "%s/list.txt", root);
    write_text(list, "\xef\xbb\xbf"
                     "a.jpg 0\nb.jpg 1\n");
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, list, &rec), 0, "%s", pl_last_error());
    static const char *const want[] = {"a.jpg", "b.jpg"};
    static const int32_t labels[] = {0, 1};
    assert_paths(&ds, root, want, labels, 2);
    catalog_close(&ds);
    tu_rm_rf(root);
}

/* The list hash as loader/state.c computed it before catalog_walk: a
 * sample at a time (rel: relative names, format 2; else full names and
 * no size, format 1). */
static uint64_t hash_one_at_a_time(const catalog *ds, int rel)
{
    uint64_t h = 0xcbf29ce484222325u;
    char buf[CATALOG_NAME_MAX];
    for (int64_t i = 0; i < catalog_size(ds); i++) {
        const char *name = rel ? catalog_rel_name_into(ds, i, buf, sizeof buf)
                               : catalog_name_into(ds, i, buf, sizeof buf);
        unsigned char b[8];
        h = fnv1a(h, name, strlen(name) + 1);
        if (rel) {
            le_put64(b, (uint64_t)catalog_stored_size(ds, i));
            h = fnv1a(h, b, 8);
        }
        le_put64(b, (uint64_t)(uint32_t)label_of(ds, i));
        h = fnv1a(h, b, 8);
    }
    return h;
}

/* catalog_walk's samples checked against the per-sample readers, and
 * hashed as hash_one_at_a_time does. */
typedef struct walked {
    const catalog *cat;
    int rel;
    int64_t n;
    uint64_t hash;
} walked;

static void check_walked(void *arg, const char *name, int64_t size,
                         int32_t label)
{
    walked *w = arg;
    char buf[CATALOG_NAME_MAX];
    const int64_t i = w->n++;
    if (i == 0)
        w->hash = 0xcbf29ce484222325u;
    cr_assert_str_eq(name, w->rel
                               ? catalog_rel_name_into(w->cat, i, buf, sizeof buf)
                               : catalog_name_into(w->cat, i, buf, sizeof buf));
    cr_assert_eq(size, w->rel ? catalog_stored_size(w->cat, i) : size);
    cr_assert_eq(label, label_of(w->cat, i));
    unsigned char b[8];
    w->hash = fnv1a(w->hash, name, strlen(name) + 1);
    if (w->rel) {
        le_put64(b, (uint64_t)size);
        w->hash = fnv1a(w->hash, b, 8);
    }
    le_put64(b, (uint64_t)(uint32_t)label);
    w->hash = fnv1a(w->hash, b, 8);
}

/* What a resume state fingerprints of each shard sample (loader/state.c):
 * a good one's name from its shard's name on and its member's stored
 * size; a bad-by-construction one's whole name and -1, as the heap
 * catalog gave them, so that states saved before the mapped index still
 * resume. And its label, from the mapped record. */
Test(dataset, shard_samples_fingerprint_as_before)
{
    char root[64], cmd[512], p[256];
    tu_tmpdir(root);
    snprintf(p, sizeof p, "%s/stage/d/k0.jpg", root);
    tu_write_file(p, "0123456789", 10);
    snprintf(p, sizeof p, "%s/stage/d/k0.cls", root);
    tu_write_file(p, "3", 1);
    snprintf(p, sizeof p, "%s/stage/k1.cls", root);
    tu_write_file(p, "2", 1);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && tar -cf ../s.tar d/k0.jpg d/k0.cls k1.cls", root);
    cr_assert_eq(system(cmd), 0);
    snprintf(p, sizeof p, "%s/s.tar", root);
    log_record rec = {0};
    catalog ds;
    cr_assert_eq(open_logged(&ds, p, &rec), 0, "%s", pl_last_error());
    cr_assert_eq(catalog_size(&ds), 2);
    char buf[CATALOG_NAME_MAX], want[256];
    cr_assert_str_eq(catalog_rel_name_into(&ds, 0, buf, sizeof buf),
                     "s.tar:d/k0.jpg");
    cr_assert_eq(catalog_stored_size(&ds, 0), 10);
    cr_assert_eq(label_of(&ds, 0), 3);
    snprintf(want, sizeof want, "%s/s.tar:k1", root);
    cr_assert_str_eq(catalog_rel_name_into(&ds, 1, buf, sizeof buf), want);
    cr_assert_eq(catalog_stored_size(&ds, 1), -1);
    cr_assert_eq(label_of(&ds, 1), 2);
    location loc;
    char why[256];
    cr_assert_eq(catalog_locate(&ds, 1, &loc, why, sizeof why), PL_ENOTIMAGE);
    cr_assert_str_eq(why, "key k1 has no jpg, jpeg, png or webp member");
    cr_assert_eq(catalog_locate(&ds, 0, &loc, why, sizeof why), 0);
    cr_assert_eq(loc.size, 10);
    cr_assert_eq(loc.offset, 512); /* after its header */
    /* catalog_walk, what create's fingerprint reads now (a table read
     * once, not each key), gives the values read a sample at a time, in
     * both name forms: the state's list hashes are unchanged. */
    for (int rel = 0; rel < 2; rel++) {
        walked w = {.cat = &ds, .rel = rel};
        cr_assert_eq(catalog_walk(&ds, rel, check_walked, &w), 0, "%s",
                     pl_last_error());
        cr_assert_eq(w.n, 2);
        cr_assert_eq(w.hash, hash_one_at_a_time(&ds, rel));
    }
    catalog_close(&ds);
    tu_rm_rf(root);
}
