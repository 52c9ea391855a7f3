/* config.views through the public API: each batch holds every view of
 * each sample, each view its own contiguous tensor of its own size; view
 * v of a sample is exactly what pl_transform_image makes from the decoded
 * file with transform = views[v] and seed + v; the views' bytes do not
 * depend on the workers, prefetch or a resume, and a state saved with
 * other views is refused; a bad file is zeros in every view under
 * SUBSTITUTE; what views cannot be used with is refused, naming it. Part
 * of the loader suites (testloader.h): host backend and simulated CUDA. */
#include "testloader.h"

#ifdef PL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* SimCLR-like: two views of two sizes, one with colour ops, in f32. */
static const char *const simclr[] = {
    "rrc(24x16,scale=0.3:1);hflip;color_jitter(0.4,0.4,0.4,0.1,p=0.8);"
    "grayscale(0.2);normalize",
    "rrc(8,scale=0.05:0.4);hflip;gaussian_blur(3,p=0.5);normalize;"
    "erase(0.5)",
};

/* A view's samples of batch b, copied to dst (host memory). */
static void view_pixels(const pl_batch *b, int v, void *dst)
{
    cr_assert_eq(pl_batch_wait(b, NULL), 0, "%s", pl_last_error());
    const pl_view *w = &b->views[v];
    if (!b->ready) {
        memcpy(dst, w->data, w->bytes);
        return;
    }
#ifdef PL_HAVE_CUDA
    cr_assert_eq(cudaEventSynchronize(b->ready), cudaSuccess);
    cr_assert_eq(cudaMemcpy(dst, w->data, w->bytes, cudaMemcpyDeviceToHost),
                 cudaSuccess);
#else
    cr_assert(0, "a CUDA batch in a build without CUDA");
#endif
}

/* What one epoch delivered of each view, in delivery order. */
typedef struct vrun {
    int n;
    int64_t idx[MAXS];
    int32_t lab[MAXS];
    int32_t st[MAXS];
    size_t sb[PL_VIEWS_MAX];
    uint8_t *bytes[PL_VIEWS_MAX];
} vrun;

static void vrun_free(vrun *r)
{
    for (int v = 0; v < PL_VIEWS_MAX; v++)
        free(r->bytes[v]);
}

/* One epoch of l, checking what each batch says of its views. */
static void vrun_epoch(pl_loader *l, int64_t epoch, int nviews, vrun *r)
{
    const pl_info in = info_of(l);
    memset(r, 0, sizeof *r);
    cr_assert_eq(in.num_views, nviews);
    for (;;) {
        const pl_batch *b = NULL;
        const int rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END)
            return;
        cr_assert_eq(rc, 0, "%s", pl_last_error());
        cr_assert_eq(b->epoch, epoch);
        cr_assert_eq(b->num_views, nviews);
        cr_assert_not_null(b->views);
        cr_assert_eq(b->views[0].data, b->data, "view 0 is the batch's data");
        cr_assert_eq(b->bytes, b->views[0].bytes);
        cr_assert_eq(in.sample_bytes, b->views[0].sample_bytes);
        cr_assert_eq(in.width, b->views[0].width);
        cr_assert_eq(in.height, b->views[0].height);
        size_t all = 0;
        for (int v = 0; v < nviews; v++) {
            const pl_view *w = &b->views[v];
            cr_assert_eq(w->bytes, (size_t)b->count * w->sample_bytes);
            cr_assert_eq(w->sample_bytes,
                         (size_t)w->width * (size_t)w->height * 3 *
                             (in.format == PL_FORMAT_U8_NHWC   ? 1
                              : in.format == PL_FORMAT_F32_NCHW ? 4
                                                                : 2));
            cr_assert_eq(w->host != NULL, b->host != NULL);
            all += w->sample_bytes;
            if (!r->bytes[v]) {
                r->sb[v] = w->sample_bytes;
                r->bytes[v] = malloc(w->sample_bytes * MAXS);
            }
            cr_assert_leq(r->n + b->count, MAXS);
            view_pixels(b, v, r->bytes[v] + r->sb[v] * (size_t)r->n);
        }
        cr_assert_eq(in.batch_bytes, all * (size_t)in.batch_size);
        for (int i = 0; i < b->count; i++) {
            r->idx[r->n + i] = b->indices[i];
            r->lab[r->n + i] = b->labels[i];
            r->st[r->n + i] = b->status[i];
        }
        r->n += b->count;
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
}

static void views_cfg(pl_config *c, const char *root,
                      const char *const *views, int n)
{
    base_cfg(c, root);
    c->views = views;
    c->num_views = n;
    c->format = PL_FORMAT_F32_NCHW;
}

static void assert_same_vrun(const vrun *a, const vrun *b, int nviews,
                             const char *what)
{
    cr_assert_eq(a->n, b->n, "%s: %d samples, not %d", what, b->n, a->n);
    for (int k = 0; k < a->n; k++) {
        cr_assert_eq(a->idx[k], b->idx[k], "%s: sample %d", what, k);
        cr_assert_eq(a->lab[k], b->lab[k], "%s: sample %d's label", what, k);
    }
    for (int v = 0; v < nviews; v++)
        cr_assert_eq(memcmp(a->bytes[v], b->bytes[v], a->sb[v] * (size_t)a->n),
                     0, "%s: view %d differs", what, v);
}

Test(loader_views, each_view_is_its_specs_sample_with_seed_plus_v,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 11, 3);
    pl_config c;
    views_cfg(&c, root, simclr, 2);
    c.first_epoch = 2;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.width, 24);
    cr_assert_eq(in.height, 16);
    cr_assert_eq(in.sample_bytes, (size_t)24 * 16 * 3 * 4);
    vrun r;
    vrun_epoch(l, 2, 2, &r);
    cr_assert_eq(r.n, 11);
    cr_assert_eq(r.sb[1], (size_t)8 * 8 * 3 * 4, "view 1: 8 x 8");
    for (int v = 0; v < 2; v++) {
        pl_config one;
        base_cfg(&one, root);
        one.transform = simclr[v];
        one.format = c.format;
        one.seed = c.seed + (uint64_t)v;
        one.dct_scaling = 0;
        one.width = v == 0 ? 24 : 8;
        one.height = v == 0 ? 16 : 8;
        uint8_t *mine = malloc(r.sb[v]);
        for (int i = 0; i < r.n; i++) {
            const char *path;
            cr_assert_eq(pl_loader_sample(l, r.idx[i], &path, NULL), 0);
            pl_image img;
            cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
            cr_assert_eq(pl_transform_image(&one, img.pixels, img.width,
                                            img.height, 2, r.idx[i], mine,
                                            r.sb[v]),
                         0, "%s", pl_last_error());
            cr_assert_eq(memcmp(mine, r.bytes[v] + r.sb[v] * (size_t)i,
                                r.sb[v]),
                         0, "view %d of %s", v, path);
            pl_image_free(&img);
        }
        free(mine);
    }
    vrun_free(&r);
    fx_done(l, root);
}

Test(loader_views, the_views_bytes_do_not_depend_on_workers_or_prefetch,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    /* DINO-like: 2 global views and 4 local ones, in u8. */
    static const char *const dino[] = {
        "rrc(16,scale=0.4:1);hflip", "rrc(16,scale=0.4:1);hflip;solarize(128)",
        "rrc(6,scale=0.05:0.4);hflip", "rrc(6,scale=0.05:0.4);hflip",
        "rrc(6,scale=0.05:0.4);hflip", "rrc(6,scale=0.05:0.4);hflip"};
    pl_config a, b;
    views_cfg(&a, root, dino, 6);
    views_cfg(&b, root, dino, 6);
    a.format = b.format = PL_FORMAT_U8_NHWC;
    a.num_workers = 1;
    a.prefetch = 1;
    b.num_workers = 4;
    b.prefetch = PL_AUTO;
    b.device_buffers = 3;
    b.keep_host = 1;
    b.memory = PL_MEMORY_PAGEABLE;
    pl_loader *la = create(&a), *lb = create(&b);
    for (int e = 0; e < 2; e++) {
        vrun x, y;
        vrun_epoch(la, e, 6, &x);
        vrun_epoch(lb, e, 6, &y);
        assert_same_vrun(&x, &y, 6, "1 worker against 4");
        /* The local views draw apart: seeds 2..5 of one spec. */
        cr_assert_neq(memcmp(x.bytes[2], x.bytes[3], x.sb[2] * (size_t)x.n),
                      0, "two views of one spec drew alike");
        vrun_free(&x);
        vrun_free(&y);
    }
    pl_loader_destroy(la);
    pl_loader_destroy(lb);
    tu_rm_rf(root);
}

Test(loader_views, a_resumed_loader_gives_the_rest_and_other_views_are_refused,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    views_cfg(&c, root, simclr, 2);
    vrun whole;
    pl_loader *l = create(&c);
    vrun_epoch(l, 0, 2, &whole);
    pl_loader_destroy(l);
    /* Two batches in, the state; a new loader from it gives the rest. */
    l = create(&c);
    for (int k = 0; k < 2; k++) {
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    pl_state saved;
    cr_assert_eq(pl_loader_state(l, &saved), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    pl_config d = c;
    d.resume = &saved;
    l = create(&d);
    vrun rest;
    vrun_epoch(l, 0, 2, &rest);
    pl_loader_destroy(l);
    const int skip = 2 * c.batch_size;
    cr_assert_eq(rest.n, whole.n - skip);
    for (int v = 0; v < 2; v++)
        cr_assert_eq(memcmp(rest.bytes[v], whole.bytes[v] + whole.sb[v] * skip,
                            whole.sb[v] * (size_t)rest.n),
                     0, "view %d after the resume", v);
    cr_assert_eq(memcmp(rest.idx, whole.idx + skip,
                        sizeof *rest.idx * (size_t)rest.n),
                 0);
    vrun_free(&whole);
    vrun_free(&rest);
    /* Other views, or one view of them, are another transform. */
    static const char *const other[] = {"rrc(24x16);hflip;normalize",
                                        "rrc(8,scale=0.05:0.4);normalize"};
    d.views = other;
    l = (pl_loader *)1;
    cr_assert_eq(pl_loader_create(&d, &l), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "another transform"), "%s",
              pl_last_error());
    d.views = NULL;
    d.num_views = 0;
    d.transform = simclr[0];
    d.width = 24;
    d.height = 16;
    cr_assert_eq(pl_loader_create(&d, &l), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "another transform"), "%s",
              pl_last_error());
    tu_rm_rf(root);
}

Test(loader_views, a_bad_file_is_zeros_in_every_view_under_substitute,
     .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 9);
    char bad[256];
    snprintf(bad, sizeof bad, "%s/f04.jpg", root);
    write_not_jpeg(bad);
    pl_config c;
    views_cfg(&c, root, simclr, 2);
    c.format = PL_FORMAT_U8_NHWC;
    static const char *const u8[] = {"rrc(24x16);hflip", "center_crop(8)"};
    c.views = u8;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    c.shuffle = 0;
    pl_loader *l = create(&c);
    vrun r;
    vrun_epoch(l, 0, 2, &r);
    cr_assert_eq(r.n, 9);
    cr_assert_eq(r.idx[4], 4);
    cr_assert_neq(r.st[4], 0);
    for (int v = 0; v < 2; v++) {
        const uint8_t *p = r.bytes[v] + r.sb[v] * 4;
        for (size_t k = 0; k < r.sb[v]; k++)
            cr_assert_eq(p[k], 0, "view %d byte %zu of the bad file", v, k);
        /* and a good one beside it is not all zeros */
        const uint8_t *g = r.bytes[v] + r.sb[v] * 3;
        size_t nonzero = 0;
        for (size_t k = 0; k < r.sb[v]; k++)
            nonzero += g[k] != 0;
        cr_assert_gt(nonzero, 0);
    }
    vrun_free(&r);
    fx_done(l, root);
}

/* pl_loader_create refuses c with PL_EINVAL, its message holding want. */
static void refused(const pl_config *c, const char *want)
{
    pl_loader *l = (pl_loader *)1;
    cr_assert_eq(pl_loader_create(c, &l), PL_EINVAL, "accepted (%s)", want);
    cr_assert_null(l);
    cr_assert(strstr(pl_last_error(), want), "%s, not %s", pl_last_error(),
              want);
}

Test(loader_views, what_views_cannot_be_used_with_is_refused_naming_it)
{
    pl_config c;
    views_cfg(&c, "/nonexistent", simclr, 2);
    c.num_views = 1;
    refused(&c, "config.num_views: 1: config.views gives 2 to 16 views");
    c.num_views = 17;
    refused(&c, "config.num_views: 17");
    c.num_views = 2;
    c.views = NULL;
    refused(&c, "config.views: NULL with num_views 2");
    c.views = simclr;
    c.transform = "rrc;hflip";
    refused(&c, "config.transform: set with config.views");
    c.transform = NULL;
    c.decode = PL_DECODE_GPU;
    refused(&c, "config.decode: PL_DECODE_GPU with config.views");
    c.decode = PL_DECODE_CPU;
    static const char *const shorter[] = {"rrc(16)", "resize(20)"};
    c.views = shorter;
    refused(&c, "config.views: views[1]: ends at no one size (a shorter "
                "side alone)");
    static const char *const mixing[] = {"rrc(16);normalize",
                                         "rrc(16);normalize;mixup"};
    c.views = mixing;
    refused(&c, "config.views: views[1]: mixup: a batch op");
    static const char *const bad[] = {"rrc(16)", "rrc(16,scale=2:1)"};
    c.views = bad;
    refused(&c, "config.views: views[1]: ");
    refused(&c, "scale");
    const char *holes[2] = {"rrc(16)", NULL};
    c.views = holes;
    refused(&c, "config.views: views[1] is NULL");
    /* pl_transform_* make one sample of one spec: each view is its own. */
    c.views = simclr;
    char buf[256];
    cr_assert_eq(pl_transform_check(&c, buf, sizeof buf), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "pl_transform_check: config.views: one "
                                      "sample of one spec is made here"),
              "%s", pl_last_error());
}
