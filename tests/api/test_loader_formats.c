/* PNG and WebP through the public loader: a folder mixing JPEG, PNG, WebP
 * and a kind pinload does not read delivers every file it reads, each
 * sample equal to Pillow's convert("RGB") where the output is the image's
 * own size, and names what it leaves out; the format comes from the bytes,
 * not the name; the bytes are the same whatever the worker count. Part of
 * the loader suites (testloader.h), run on the host backend and on
 * simulated CUDA. */
#include "testloader.h"

#define FIXTURES "tests/fixtures/formats/"

/* Copies fixture `name` to dir/as. */
static void put_fixture(const char *dir, const char *name, const char *as)
{
    char p[256];
    snprintf(p, sizeof p, FIXTURES "%s", name);
    size_t len;
    uint8_t *b = tu_read_file(p, &len);
    cr_assert_not_null(b, "%s: missing", p);
    snprintf(p, sizeof p, "%s/%s", dir, as);
    tu_mkdirs_for(p);
    tu_write_file(p, b, len);
    free(b);
}

static uint8_t *expected_rgb(const char *stem, size_t *len)
{
    char p[256];
    snprintf(p, sizeof p, FIXTURES "%s.rgb", stem);
    uint8_t *b = tu_read_file(p, len);
    cr_assert_not_null(b, "%s: missing", p);
    return b;
}

/* The notices of a loader's create, kept. */
typedef struct notices {
    pthread_mutex_t mu;
    char text[8192];
    size_t len;
} notices;

static void keep_notice(void *ctx, pl_log_level level, const char *msg)
{
    notices *n = ctx;
    (void)level;
    pthread_mutex_lock(&n->mu);
    const int w =
        snprintf(n->text + n->len, sizeof n->text - n->len, "%s\n", msg);
    if (w > 0 && (size_t)w < sizeof n->text - n->len)
        n->len += (size_t)w;
    pthread_mutex_unlock(&n->mu);
}

/* Files in file order (flat folder): what each is, and its stem in the
 * fixtures (NULL: a JPEG written here, or a file not read). */
static const struct {
    const char *name, *fixture, *stem;
} mixed[] = {
    {"a.jpg", NULL, NULL},
    {"b.png", "rgb8.png", "rgb8"},
    {"c.PNG", "p4_trns.png", "p4_trns"},
    {"d.jpg", "g16.png", "g16"}, /* a PNG named .jpg */
    {"e.png", "rgba16_adam7.png", "rgba16_adam7"},
    {"f.tif", NULL, NULL}, /* not read: named in a notice */
    {"g.jpeg", "ga8.png", "ga8"},
};

Test(loader_formats, mixed_folder_delivers_every_file_equal_to_pillow,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_tmpdir(root);
    for (size_t i = 0; i < sizeof mixed / sizeof *mixed; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", root, mixed[i].name);
        if (mixed[i].fixture)
            put_fixture(root, mixed[i].fixture, mixed[i].name);
        else if (strstr(mixed[i].name, ".jpg"))
            tu_write_jpeg(p, 37, 29, 3, NULL);
        else
            tu_write_file(p, "II*\0", 4);
    }
    pl_config c;
    base_cfg(&c, root);
    notices n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    c.log = keep_notice;
    c.log_ctx = &n;
    c.width = 37; /* the fixtures' size: the resize is the identity */
    c.height = 29;
    c.augment = PL_AUGMENT_NONE;
    c.shuffle = 0;
    c.batch_size = 8;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(r.n, 6, "6 of the 7 files are read, got %d", r.n);
    for (int k = 0, f = 0; k < r.n; k++, f++) {
        if (strstr(mixed[f].name, ".tif"))
            f++;
        cr_assert_eq(r.idx[k], k);
        cr_assert_eq(r.st[k], 0, "%s: status %d", mixed[f].name, r.st[k]);
        if (!mixed[f].stem)
            continue;
        size_t len;
        uint8_t *want = expected_rgb(mixed[f].stem, &len);
        cr_assert_eq(len, r.sample_bytes);
        cr_assert(memcmp(sample_at(&r, k), want, len) == 0,
                  "%s (%s): sample differs from Pillow's convert(\"RGB\")",
                  mixed[f].name, mixed[f].fixture);
        free(want);
    }
    char want[256];
    snprintf(want, sizeof want,
             "%s: 1 .tif file not supported (JPEG, PNG and WebP are), left "
             "out: f.tif",
             root);
    cr_assert_not_null(strstr(n.text, want), "notices:\n%s", n.text);
    run_free(&r);
    fx_done(l, root);
}

/* WebP's own size is 83 x 61: a folder of them alone, the same check. */
Test(loader_formats, webp_samples_equal_pillow, .timeout = TIMEOUT)
{
    static const char *const stems[] = {"lossless", "lossless_alpha", "lossy",
                                        "lossy_alpha"};
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 4; i++) {
        char name[64], as[64];
        snprintf(name, sizeof name, "%s.webp", stems[i]);
        /* the last named .jpg: the bytes decide */
        snprintf(as, sizeof as, "%d.%s", i, i == 3 ? "jpg" : "webp");
        put_fixture(root, name, as);
    }
    pl_config c;
    base_cfg(&c, root);
    c.width = 83;
    c.height = 61;
    c.augment = PL_AUGMENT_NONE;
    c.shuffle = 0;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(r.n, 4);
    for (int k = 0; k < 4; k++) {
        size_t len;
        uint8_t *want = expected_rgb(stems[k], &len);
        cr_assert_eq(len, r.sample_bytes);
        cr_assert(memcmp(sample_at(&r, k), want, len) == 0,
                  "%s.webp: sample differs from Pillow's convert(\"RGB\")",
                  stems[k]);
        free(want);
    }
    run_free(&r);
    fx_done(l, root);
}

static void make_mixed_tree(char root[64])
{
    static const char *const fixtures[] = {"rgb8.png",
                                           "g16.png",
                                           "p8_trns.png",
                                           "rgba16.png",
                                           "g1.png",
                                           "lossy.webp",
                                           "lossless_alpha.webp",
                                           "rgb8_adam7.png",
                                           "lossy_alpha.webp"};
    tu_tmpdir(root);
    for (int i = 0; i < 18; i++) {
        char as[64], p[256];
        const char *fx = fixtures[i % 9];
        snprintf(as, sizeof as, "c%d/%02d%s", i % 3, i, strrchr(fx, '.'));
        put_fixture(root, fx, as);
        snprintf(p, sizeof p, "%s/c%d/%02dj.jpg", root, i % 3, i);
        if (i % 4 == 0)
            tu_write_jpeg(p, 50 + i, 40, (unsigned)i, NULL);
    }
}

/* Training crops and flips of PNG and WebP (cropped decodes, skipped rows)
 * give the same bytes on 1 and 4 workers, two epochs, u8 and f32. */
Test(loader_formats, png_and_webp_bytes_do_not_depend_on_workers,
     .timeout = TIMEOUT)
{
    char root[64];
    make_mixed_tree(root);
    static const pl_format fmts[] = {PL_FORMAT_U8_NHWC, PL_FORMAT_F32_NCHW};
    for (int f = 0; f < 2; f++) {
        run a[2], b[2];
        pl_config c;
        base_cfg(&c, root);
        c.format = fmts[f];
        c.width = c.height = 20;
        c.on_error = PL_ON_ERROR_FAIL;
        c.num_workers = 1;
        run_loader(&c, 2, a);
        c.num_workers = 4;
        c.prefetch = 3;
        run_loader(&c, 2, b);
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(a[e].n, 23, "every file a sample, got %d", a[e].n);
            for (int k = 0; k < a[e].n; k++)
                cr_assert_eq(a[e].st[k], 0);
            assert_same_run(&a[e], &b[e], "workers 1 vs 4");
            run_free(&a[e]);
            run_free(&b[e]);
        }
    }
    tu_rm_rf(root);
}

/* The error policy holds for PNG and WebP: under SUBSTITUTE a damaged
 * PNG and a WebP bomb are zeros with their status, and the failure record
 * names the file and the decoder's reason. */
Test(loader_formats, damaged_png_and_webp_bomb_follow_the_error_policy,
     .timeout = TIMEOUT)
{
    char root[64], p[256];
    tu_tmpdir(root);
    put_fixture(root, "rgb8.png", "a.png");
    put_fixture(root, "lossy.webp", "d.webp");
    size_t len;
    uint8_t *b = tu_read_file(FIXTURES "rgb8.png", &len);
    snprintf(p, sizeof p, "%s/b.png", root);
    tu_write_file(p, b, len / 2); /* cut in its image data */
    free(b);
    /* a lossless WebP header saying 16384 x 16384 */
    static const uint8_t bomb[26] = {
        'R', 'I', 'F', 'F', 18, 0, 0, 0,    'W',  'E',  'B',  'P',  'V',
        'P', '8', 'L', 6,   0,  0, 0, 0x2F, 0xFF, 0xFF, 0xFF, 0x0F, 0};
    snprintf(p, sizeof p, "%s/c.webp", root);
    tu_write_file(p, bomb, sizeof bomb);
    pl_config c;
    base_cfg(&c, root);
    c.shuffle = 0;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    pl_loader *l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(r.n, 4);
    static const int32_t want_st[4] = {0, PL_ECORRUPT, PL_ELIMIT, 0};
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(r.st[k], want_st[k], "sample %d: %s", k,
                     pl_err_name(r.st[k]));
        int zeros = 1;
        for (size_t i = 0; i < r.sample_bytes; i++)
            zeros &= sample_at(&r, k)[i] == 0;
        cr_assert_eq(zeros, want_st[k] != 0, "sample %d", k);
    }
    pl_failure f[4];
    size_t n = 0;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        const int png = f[i].index == 1;
        cr_assert_not_null(strstr(f[i].path, png ? "b.png" : "c.webp"), "%s",
                           f[i].path);
        if (png)
            cr_assert_eq(strncmp(f[i].reason, "PNG: ", 5), 0, "%s",
                         f[i].reason);
        else
            cr_assert_str_eq(f[i].reason, "16384x16384 exceeds the limits (max "
                                          "32768x32768, 178956970 pixels)");
    }
    run_free(&r);
    fx_done(l, root);
}
