/* config.sample_fn, C's per-sample hook: called once per sample, after the
 * pixel ops and before normalize, with the output-size image, the
 * sample's dataset index, the epoch and the key of its own random stream
 * (checked against philox computed here); the bytes it makes are the same
 * for any worker count and prefetch; pl_transform_image runs it too; a
 * hook's failure is a bad file under on_error, named with the hook's
 * code, skipped or failing pl_loader_next with the file's path. Part of
 * the loader suites (testloader.h): host backend and simulated CUDA. */
#include <stdatomic.h>

#include "../common/philox.h"
#include "../workers/ops/ops.h"
#include "testloader.h"

enum { N = 23, SIDE = 16 };

enum { EPOCHS = 8 };

typedef struct hook_ctx {
    atomic_int wrong;            /* calls that saw what they should not */
    atomic_int calls[EPOCHS][N]; /* per epoch and dataset index */
    int fail_mod; /* index % 4 == 1: PL_ECORRUPT, == 3: 7; 0: never */
} hook_ctx;

static uint64_t key_of(uint64_t seed, int64_t epoch, int64_t index)
{
    philox_stream s;
    philox_stream_op(&s, seed, (uint64_t)epoch, (uint64_t)index,
                     OPS_HOOK_STREAM);
    const uint64_t lo = philox_next_u32(&s);
    return lo | (uint64_t)philox_next_u32(&s) << 32;
}

/* The hook: the image must be the output's size and gray (grayscale(1)
 * ran before it); it writes the key's two low bytes and the index into
 * pixel 0, and turns every other value by the key, as a hook drawing
 * from it would. */
static int mark(void *ctx, pl_image *img, int64_t index, int64_t epoch,
                uint64_t key)
{
    hook_ctx *h = ctx;
    if (img->width != SIDE || img->height != SIDE || index < 0 || index >= N ||
        epoch < 0 || epoch >= EPOCHS)
        atomic_fetch_add(&h->wrong, 1);
    else
        atomic_fetch_add(&h->calls[epoch][index], 1);
    uint8_t *px = img->pixels;
    for (int i = 0; i < SIDE * SIDE; i++)
        if (px[3 * i] != px[3 * i + 1] || px[3 * i] != px[3 * i + 2])
            atomic_fetch_add(&h->wrong, 1);
    if (h->fail_mod && index % 4 == 1)
        return PL_ECORRUPT;
    if (h->fail_mod && index % 4 == 3)
        return 7;
    for (int i = 3; i < SIDE * SIDE * 3; i++)
        px[i] = (uint8_t)(px[i] + (key >> (8 * (i % 8))));
    px[0] = (uint8_t)key;
    px[1] = (uint8_t)(key >> 8);
    px[2] = (uint8_t)index;
    return 0;
}

static void hook_cfg(pl_config *c, const char *root, hook_ctx *h)
{
    base_cfg(c, root);
    c->transform = "resize;grayscale(1)";
    c->sample_fn = mark;
    c->sample_ctx = h;
}

Test(loader_hook, each_sample_once_after_the_pixel_ops_with_its_key,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, N, 3);
    static hook_ctx h;
    pl_config c;
    hook_cfg(&c, root, &h);
    c.first_epoch = 2;
    run r[2];
    run_loader(&c, 2, r);
    cr_assert_eq(atomic_load(&h.wrong), 0, "the hook saw another image");
    /* Once per sample of each epoch delivered (the next epoch's first
     * samples may have been made before the loader was destroyed). */
    for (int e = 2; e < 4; e++)
        for (int i = 0; i < N; i++)
            cr_assert_eq(atomic_load(&h.calls[e][i]), 1, "epoch %d, index %d",
                         e, i);
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < N; i++)
            cr_assert_eq(atomic_load(&h.calls[e][i]), 0);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(r[e].n, N);
        for (int i = 0; i < r[e].n; i++) {
            const uint8_t *s = sample_at(&r[e], i);
            const uint64_t key = key_of(c.seed, 2 + e, r[e].idx[i]);
            cr_assert(s[0] == (uint8_t)key && s[1] == (uint8_t)(key >> 8) &&
                          s[2] == (uint8_t)r[e].idx[i],
                      "epoch %d, index %lld", 2 + e, (long long)r[e].idx[i]);
        }
    }
    run_free(&r[0]);
    run_free(&r[1]);
    tu_rm_rf(root);
}

Test(loader_hook, the_same_bytes_whatever_the_workers, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, N, 3);
    static hook_ctx h;
    pl_config a, b;
    hook_cfg(&a, root, &h);
    hook_cfg(&b, root, &h);
    a.num_workers = 1;
    a.prefetch = 1;
    b.num_workers = 4;
    b.prefetch = 3;
    run x[2], y[2];
    run_loader(&a, 2, x);
    run_loader(&b, 2, y);
    for (int e = 0; e < 2; e++) {
        assert_same_run(&x[e], &y[e], "with a hook");
        run_free(&x[e]);
        run_free(&y[e]);
    }
    cr_assert_eq(atomic_load(&h.wrong), 0);
    tu_rm_rf(root);
}

Test(loader_hook, it_runs_before_normalize_and_in_transform_image,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, N, 3);
    static hook_ctx h;
    pl_config c;
    hook_cfg(&c, root, &h);
    c.transform = "resize;grayscale(1);normalize(mean=0,std=1)";
    c.format = PL_FORMAT_F32_NCHW;
    c.dct_scaling = 0; /* as pl_transform_image decodes */
    run r;
    pl_loader *l = create(&c);
    run_epoch(l, 0, &r);
    float *mine = malloc(r.sample_bytes);
    for (int i = 0; i < r.n; i++) {
        const float *s = (const float *)sample_at(&r, i);
        const uint64_t key = key_of(c.seed, 0, r.idx[i]);
        /* Pixel 0 of each plane: what the hook wrote, over 255. */
        cr_assert_eq(s[0], (float)(uint8_t)key / 255.0f);
        cr_assert_eq(s[SIDE * SIDE], (float)(uint8_t)(key >> 8) / 255.0f);
        cr_assert_eq(s[2 * SIDE * SIDE], (float)(uint8_t)r.idx[i] / 255.0f);
        const char *path;
        cr_assert_eq(pl_loader_sample(l, r.idx[i], &path, NULL), 0);
        pl_image img;
        cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
        cr_assert_eq(pl_transform_image(&c, img.pixels, img.width, img.height,
                                        0, r.idx[i], mine, r.sample_bytes),
                     0, "%s", pl_last_error());
        cr_assert_eq(memcmp(mine, s, r.sample_bytes), 0, "%s", path);
        pl_image_free(&img);
    }
    free(mine);
    pl_loader_destroy(l);
    run_free(&r);
    cr_assert_eq(atomic_load(&h.wrong), 0);
    tu_rm_rf(root);
}

Test(loader_hook, a_failing_hook_makes_a_bad_file, .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, N);
    static hook_ctx h;
    h.fail_mod = 1;
    pl_config c;
    hook_cfg(&c, root, &h);
    c.shuffle = 0;
    /* Skipped: indices 1, 3, 5, ... are bad, each recorded once, with the
     * hook's code or PL_EINVAL for a value no PL_E* code has; their places
     * go to the next good samples (the epoch keeps its N). */
    run r;
    pl_loader *l = create(&c);
    run_epoch(l, 0, &r);
    for (int i = 0; i < r.n; i++)
        cr_assert_eq(r.idx[i] % 2, 0, "index %lld delivered",
                     (long long)r.idx[i]);
    cr_assert_eq(r.n, N);
    pl_failure f[N];
    size_t n = 0;
    cr_assert_eq(pl_loader_failures(l, 0, f, N, &n), 0);
    cr_assert_eq(n, N / 2, "%zu failures", n);
    for (size_t k = 0; k < n; k++) {
        const char *path;
        cr_assert_eq(pl_loader_sample(l, f[k].index, &path, NULL), 0);
        cr_assert_str_eq(f[k].path, path);
        if (f[k].index % 4 == 1) {
            cr_assert_eq(f[k].code, PL_ECORRUPT);
            cr_assert_str_eq(f[k].reason,
                             "config.sample_fn returned -6 (PL_ECORRUPT)");
        } else {
            cr_assert_eq(f[k].code, PL_EINVAL);
            cr_assert_str_eq(f[k].reason, "config.sample_fn returned 7 "
                                          "(not a PL_E* code)");
        }
    }
    pl_loader_destroy(l);
    run_free(&r);
    /* on_error FAIL: the batch holding index 1 fails, naming the file. */
    c.on_error = PL_ON_ERROR_FAIL;
    l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), PL_ECORRUPT);
    const char *path;
    cr_assert_eq(pl_loader_sample(l, 1, &path, NULL), 0);
    cr_assert_not_null(strstr(pl_last_error(), path), "%s", pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "config.sample_fn"), "%s",
                       pl_last_error());
    fx_done(l, root);
}
