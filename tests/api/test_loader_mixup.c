/* A mixup op at the end of config.transform, through the public API: each
 * delivered batch is the same loader's batch without it, mixed as
 * pl_transform_params says that batch drew (lambda, the box), pairs i and
 * count - 1 - i, the soft labels timm's mixup_target makes from the
 * labels; the same bytes whatever the workers; a resumed loader mixes as
 * the whole run did; u8 and too few classes are refused at create. Part
 * of the loader suites (testloader.h): host backend and simulated CUDA,
 * where the batch is mixed on the device by the kernel's arithmetic
 * (common/blend.h) on the copy stream, or in its host mirror with
 * keep_host: every format and layout the same bytes as the host
 * backend's. */
#include "testloader.h"

enum { N = 23, SIDE = 16, CLASSES = 3 };

static const char *const plain = "resize;normalize(mean=0.5,std=0.25)";
static const char *const mixed[] = {
    "resize;normalize(mean=0.5,std=0.25);mixup(0.8,label_smoothing=0.1)",
    "resize;normalize(mean=0.5,std=0.25);mixup(0.8,1,switch_prob=0.5,"
    "label_smoothing=0)",
    "resize;normalize(mean=0.5,std=0.25);mixup(0,cutmix_minmax=0.2:0.8,"
    "prob=0.7)",
};
#define NMIXED (int)(sizeof mixed / sizeof mixed[0])

static void mix_cfg(pl_config *c, const char *root, const char *spec)
{
    base_cfg(c, root);
    c->transform = spec;
    c->format = PL_FORMAT_F32_NCHW;
    c->batch_size = 4;
}

typedef struct draw {
    double lam;
    int cutmix, top, left, height, width;
} draw;

static void draw_of(const pl_config *c, int64_t epoch, int64_t batch, draw *d)
{
    char buf[512];
    cr_assert_eq(
        pl_transform_params(c, SIDE, SIDE, epoch, batch, buf, sizeof buf, NULL),
        0, "%s", pl_last_error());
    const char *m = strstr(buf, "mixup(");
    cr_assert_not_null(m, "%s", buf);
    memset(d, 0, sizeof *d);
    const int n =
        sscanf(m,
               "mixup(lam=%lf,cutmix=%d,top=%d,left=%d,"
               "height=%d,width=%d)",
               &d->lam, &d->cutmix, &d->top, &d->left, &d->height, &d->width);
    cr_assert(n == 2 || n == 6, "%s", m); /* beta, cy, cx follow */
}

/* Batch b of the plain run (its samples' floats), mixed by hand. */
static void expect(const run *r, int first, int count, const draw *d,
                   float *out)
{
    const int nv = 3 * SIDE * SIDE;
    const float lam = (float)d->lam, rest = (float)(1.0 - d->lam);
    for (int i = 0; i < count; i++) {
        const float *x = (const float *)sample_at(r, first + i);
        const float *y = (const float *)sample_at(r, first + count - 1 - i);
        for (int k = 0; k < nv; k++) {
            const int p = k % (SIDE * SIDE), yy = p / SIDE, xx = p % SIDE;
            float v = x[k];
            if (d->lam != 1.0 && !d->cutmix)
                v = x[k] * lam + y[k] * rest;
            else if (d->cutmix && yy >= d->top && yy < d->top + d->height &&
                     xx >= d->left && xx < d->left + d->width)
                v = y[k];
            out[(size_t)i * nv + k] = v;
        }
    }
}

/* Each delivered batch of l (epochs from e0) against the plain run's. */
static void check_epochs(const pl_config *c, pl_loader *l, int64_t e0,
                         int epochs, const run *plain_runs, double smoothing)
{
    const int nv = 3 * SIDE * SIDE;
    float *want = malloc((size_t)c->batch_size * nv * sizeof *want);
    int changed = 0; /* batches the op changed: the test means something */
    for (int e = 0; e < epochs; e++) {
        const run *r = &plain_runs[e];
        int at = 0;
        for (int64_t bi = 0;; bi++) {
            const pl_batch *b;
            const int rc = pl_loader_next(l, &b);
            if (rc == PL_EPOCH_END)
                break;
            cr_assert_eq(rc, 0, "%s", pl_last_error());
            cr_assert_eq(b->epoch, e0 + e);
            cr_assert_eq(b->num_classes, CLASSES);
            cr_assert_not_null(b->soft_labels);
            for (int i = 0; i < b->count; i++)
                cr_assert_eq(b->indices[i], r->idx[at + i], "same samples");
            draw d;
            draw_of(c, e0 + e, bi, &d);
            expect(r, at, b->count, &d, want);
            float *got = malloc((size_t)b->count * nv * 4);
            tu_batch_pixels(b, got);
            changed +=
                memcmp(got, sample_at(r, at), (size_t)b->count * nv * 4) != 0;
            cr_assert_eq(memcmp(got, want, (size_t)b->count * nv * 4), 0,
                         "epoch %lld, batch %lld (lam %g, cutmix %d)",
                         (long long)(e0 + e), (long long)bi, d.lam, d.cutmix);
            const double off_d = smoothing / CLASSES;
            const float off = (float)off_d, on = (float)(1 - smoothing + off_d);
            const float lam = (float)d.lam, rest = (float)(1.0 - d.lam);
            for (int i = 0; i < b->count; i++)
                for (int k = 0; k < CLASSES; k++) {
                    const int j = b->count - 1 - i;
                    const float y1 = k == b->labels[i] ? on : off;
                    const float y2 = k == b->labels[j] ? on : off;
                    cr_assert_eq(b->soft_labels[i * CLASSES + k],
                                 y1 * lam + y2 * rest, "row %d class %d", i, k);
                }
            free(got);
            at += b->count;
            cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        }
        cr_assert_eq(at, r->n);
    }
    /* 12 batches; prob 0.7 at worst leaves some unmixed, not all. */
    cr_assert_gt(changed, epochs * 2, "%d batches mixed", changed);
    free(want);
}

Test(loader_mixup, each_batch_is_the_plain_batch_mixed_as_drawn,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, N, CLASSES);
    pl_config p;
    mix_cfg(&p, root, plain);
    run pr[2];
    run_loader(&p, 2, pr);
    const double smoothing[NMIXED] = {0.1, 0.0, 0.1};
    for (int k = 0; k < NMIXED; k++) {
        pl_config c;
        mix_cfg(&c, root, mixed[k]);
        c.num_workers = k + 1;
        pl_loader *l = create(&c);
        check_epochs(&c, l, 0, 2, pr, smoothing[k]);
        pl_loader_destroy(l);
    }
    run_free(&pr[0]);
    run_free(&pr[1]);
    tu_rm_rf(root);
}

Test(loader_mixup, a_resumed_loader_mixes_as_the_whole_run, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, N, CLASSES);
    pl_config p;
    mix_cfg(&p, root, plain);
    p.first_epoch = 1;
    run pr[1];
    run_loader(&p, 1, pr);
    pl_config c;
    mix_cfg(&c, root, mixed[1]);
    pl_loader *l = create(&c);
    pl_state st;
    /* Epoch 0 whole, then two batches of epoch 1, then the state. */
    for (int k = 0; k < 8; k++) {
        const pl_batch *b;
        int rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END)
            rc = pl_loader_next(l, &b);
        cr_assert_eq(rc, 0, "%s", pl_last_error());
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    cr_assert_eq(pl_loader_state(l, &st), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    /* The resumed loader's batches 2.. of epoch 1 against the plain run,
     * its first samples skipped. */
    c.resume = &st;
    l = create(&c);
    run tail = pr[0];
    tail.n = pr[0].n - 8;
    memmove(tail.idx, pr[0].idx + 8, (size_t)tail.n * sizeof *tail.idx);
    tail.bytes = pr[0].bytes + 8 * pr[0].sample_bytes;
    /* check_epochs numbers batches from 0: compare by hand from batch 2. */
    const int nv = 3 * SIDE * SIDE;
    float *want = malloc(4 * (size_t)nv * sizeof *want);
    int at = 0;
    for (int64_t bi = 2;; bi++) {
        const pl_batch *b;
        const int rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END)
            break;
        cr_assert_eq(rc, 0, "%s", pl_last_error());
        cr_assert_eq(b->epoch, 1);
        cr_assert_eq(b->index, bi);
        draw d;
        draw_of(&c, 1, bi, &d);
        expect(&tail, at, b->count, &d, want);
        float *got = malloc((size_t)b->count * nv * 4);
        tu_batch_pixels(b, got);
        cr_assert_eq(memcmp(got, want, (size_t)b->count * nv * 4), 0,
                     "batch %lld", (long long)bi);
        free(got);
        at += b->count;
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    cr_assert_eq(at, tail.n);
    free(want);
    pl_loader_destroy(l);
    run_free(&pr[0]);
    tu_rm_rf(root);
}

/* Every batch of two loaders, the same config on two backends (or
 * memories), byte for byte, soft labels included. */
static void assert_same_batches(const pl_config *a, const pl_config *b,
                                int epochs, const char *what)
{
    pl_loader *la = create(a), *lb = create(b);
    const size_t sb = info_of(la).sample_bytes;
    cr_assert_eq(sb, info_of(lb).sample_bytes);
    uint8_t *x = malloc(sb * (size_t)a->batch_size);
    uint8_t *y = malloc(sb * (size_t)a->batch_size);
    int batches = 0;
    for (int e = 0; e < epochs; e++)
        for (;;) {
            const pl_batch *p, *q;
            const int rp = pl_loader_next(la, &p), rq = pl_loader_next(lb, &q);
            cr_assert_eq(rp, rq, "%s: %s", what, pl_last_error());
            if (rp == PL_EPOCH_END)
                break;
            cr_assert_eq(rp, 0, "%s: %s", what, pl_last_error());
            cr_assert_eq(p->count, q->count);
            tu_batch_pixels(p, x);
            tu_batch_pixels(q, y);
            cr_assert_eq(memcmp(x, y, sb * (size_t)p->count), 0,
                         "%s: epoch %d batch %lld", what, e,
                         (long long)p->index);
            cr_assert_eq(memcmp(p->soft_labels, q->soft_labels,
                                (size_t)p->count * CLASSES * 4),
                         0, "%s: soft labels", what);
            batches++;
            cr_assert_eq(pl_loader_release(la, p, NULL), 0);
            cr_assert_eq(pl_loader_release(lb, q, NULL), 0);
        }
    cr_assert_eq(batches, epochs * 6, "%s", what);
    free(x);
    free(y);
    pl_loader_destroy(la);
    pl_loader_destroy(lb);
}

Test(loader_mixup, the_device_mixes_every_format_as_the_host_does,
     .timeout = TIMEOUT)
{
    if (!tu_on_cuda())
        cr_skip_test("the device's mixing: the CUDA suites' (simulated in "
                     "make test)");
    char root[64];
    tu_make_tree(root, N, CLASSES);
    static const pl_format formats[] = {PL_FORMAT_F32_NCHW, PL_FORMAT_F16_NCHW,
                                        PL_FORMAT_BF16_NCHW};
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < NMIXED; k++)
            for (int last = 0; last < 2; last++) {
                pl_config host, dev;
                mix_cfg(&host, root, mixed[k]);
                host.format = formats[f];
                host.channels_last = last;
                host.device = PL_DEVICE_HOST;
                dev = host;
                dev.device = tu_device();
                char what[128];
                snprintf(what, sizeof what, "%s, mixed[%d], channels_last %d",
                         pl_format_name(formats[f]), k, last);
                assert_same_batches(&host, &dev, 2, what);
            }
    /* The device's batch has no host copy unless asked: mixed there. */
    pl_config c;
    mix_cfg(&c, root, mixed[1]);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_null(b->host, "a host mirror: the batch was mixed on the host");
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    pl_loader_destroy(l);
    /* keep_host mixes the mirror on the host: the same bytes again. */
    pl_config keep;
    mix_cfg(&keep, root, mixed[2]);
    keep.keep_host = 1;
    pl_config host = keep;
    host.device = PL_DEVICE_HOST;
    host.keep_host = 0;
    assert_same_batches(&host, &keep, 2, "keep_host's mirror");
    tu_rm_rf(root);
}

Test(loader_mixup, u8_and_too_few_classes_are_refused_at_create)
{
    char root[64];
    tu_make_tree(root, N, CLASSES);
    pl_config c;
    mix_cfg(&c, root, "resize;mixup");
    c.format = PL_FORMAT_U8_NHWC;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "config.format is u8"), "%s",
                       pl_last_error());
    mix_cfg(&c, root, "resize;mixup(num_classes=2)");
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_not_null(
        strstr(pl_last_error(), "num_classes=2, and the data has 3 classes"),
        "%s", pl_last_error());
    tu_rm_rf(root);
}
