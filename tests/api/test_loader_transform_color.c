/* config.transform with the colour, tone and blur ops (color_jitter,
 * gaussian_blur, solarize, posterize, equalize, autocontrast) through the
 * public API: specs that use every one deliver the same bytes whatever
 * the pipeline's shape (workers, prefetch, memory), differ by epoch,
 * resume exactly from a state, and pl_transform_image makes the loader's
 * own sample from the decoded file. Part of the loader suites
 * (testloader.h): host backend and simulated CUDA. */
#include "testloader.h"

static const char *const every_op[] = {
    "rrc(scale=0.3:1);color_jitter(0.4,0.4,0.4,0.1);gaussian_blur(5);"
    "solarize(128);posterize(4);equalize;autocontrast",
    "resize;color_jitter(brightness=0.5:1.5,hue=-0.5:0.5);"
    "gaussian_blur(3x7,sigma=0.2:3);equalize(0.7);"
    "normalize(mean=0.4:0.5:0.6,std=0.2:0.3:0.4)",
    "hflip;center_crop(crop_pct=0.8);autocontrast(0.5);"
    "solarize(100,p=0.3);posterize(bits=2,p=0.6);"
    "color_jitter(saturation=0:3,contrast=0.9)",
};
#define NSPECS (int)(sizeof every_op / sizeof every_op[0])

static void every_op_cfg(pl_config *c, const char *root, int k)
{
    base_cfg(c, root);
    c->transform = every_op[k];
    c->format = k == 1 ? PL_FORMAT_F16_NCHW : PL_FORMAT_U8_NHWC;
}

Test(loader_transform_color, every_op_gives_the_same_bytes_whatever_the_pipeline,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int k = 0; k < NSPECS; k++) {
        pl_config a, b;
        every_op_cfg(&a, root, k);
        every_op_cfg(&b, root, k);
        a.num_workers = 1;
        a.prefetch = 1;
        b.num_workers = 4;
        b.prefetch = 3;
        b.device_buffers = 3;
        b.memory = PL_MEMORY_PAGEABLE;
        run x[2], y[2];
        run_loader(&a, 2, x);
        run_loader(&b, 2, y);
        for (int e = 0; e < 2; e++) {
            assert_same_run(&x[e], &y[e], a.transform);
            run_free(&x[e]);
            run_free(&y[e]);
        }
    }
    tu_rm_rf(root);
}

/* Spec 1's geometry is a fixed resize: there only the pixel ops' draws
 * can tell the epochs apart. */
Test(loader_transform_color, every_op_differs_by_epoch, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 10, 2);
    for (int k = 0; k < NSPECS; k++) {
        pl_config c;
        every_op_cfg(&c, root, k);
        c.shuffle = 0;
        run r[2];
        run_loader(&c, 2, r);
        cr_assert_neq(memcmp(r[0].bytes, r[1].bytes,
                             r[0].sample_bytes * (size_t)r[0].n),
                      0, "%s: epochs 0 and 1 drew alike", every_op[k]);
        run_free(&r[0]);
        run_free(&r[1]);
    }
    tu_rm_rf(root);
}

static pl_state state_now(const pl_loader *l)
{
    pl_state s;
    cr_assert_eq(pl_loader_state(l, &s), 0, "%s", pl_last_error());
    return s;
}

Test(loader_transform_color, every_op_resumes_exactly, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int k = 0; k < NSPECS; k++) {
        pl_config c;
        every_op_cfg(&c, root, k);
        c.num_workers = 1;
        pl_loader *l = create(&c);
        run head, tail, next;
        run_batches(l, 0, 0, 2, &head);
        const pl_state saved = state_now(l);
        run_batches(l, 0, 2, MAXB + 1, &tail);
        run_epoch(l, 1, &next);
        pl_loader_destroy(l);
        /* From the state, with another shape of pipeline. */
        c.resume = &saved;
        c.num_workers = 3;
        c.prefetch = 3;
        l = create(&c);
        run tail2, next2;
        run_batches(l, 0, 2, MAXB + 1, &tail2);
        run_epoch(l, 1, &next2);
        pl_loader_destroy(l);
        assert_same_run(&tail, &tail2, c.transform);
        assert_same_run(&next, &next2, c.transform);
        run_free(&head);
        run_free(&tail);
        run_free(&next);
        run_free(&tail2);
        run_free(&next2);
    }
    tu_rm_rf(root);
}

Test(loader_transform_color, transform_image_makes_the_loaders_sample,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 9, 2);
    for (int k = 0; k < NSPECS; k++) {
        pl_config c;
        every_op_cfg(&c, root, k);
        c.dct_scaling = 0; /* pl_transform_image decodes nothing */
        c.first_epoch = 2;
        run r;
        pl_loader *l = create(&c);
        run_epoch(l, 2, &r);
        uint8_t *mine = malloc(r.sample_bytes);
        for (int i = 0; i < r.n; i++) {
            const char *path;
            cr_assert_eq(pl_loader_sample(l, r.idx[i], &path, NULL), 0);
            pl_image img;
            cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
            cr_assert_eq(pl_transform_image(&c, img.pixels, img.width,
                                            img.height, 2, r.idx[i], mine,
                                            r.sample_bytes),
                         0, "%s", pl_last_error());
            cr_assert_eq(memcmp(mine, sample_at(&r, i), r.sample_bytes), 0,
                         "%s: %s", every_op[k], path);
            pl_image_free(&img);
        }
        free(mine);
        pl_loader_destroy(l);
        run_free(&r);
    }
    tu_rm_rf(root);
}

Test(loader_transform_color, a_bad_parameter_fails_create_naming_it)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 3, 1);
    c.transform = "rrc;color_jitter(hue=0.7)";
    pl_loader *l = (pl_loader *)1;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_str_eq(pl_last_error(), "pl_loader_create: config.transform: "
                                      "color_jitter: hue=0.7: 0.7 is outside "
                                      "[-0.5, 0.5]");
    c.transform = "rrc;gaussian_blur(33)"; /* the output is 16 x 16 */
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "gaussian_blur: kernel_size=33x33: "
                                      "wider than the 16 x 16 output"),
              "%s", pl_last_error());
    fx_done(NULL, root);
}
