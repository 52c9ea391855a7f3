/* config.transform through the public API: a spec that uses every op
 * delivers the same bytes whatever the pipeline's shape and resumes
 * exactly; the eval and none presets are their specs byte for byte; a bad
 * spec fails create naming the op and the parameter; a state saved with
 * one transform is refused by another; pl_transform_image makes the
 * loader's own sample from the decoded file, pl_transform_params says what
 * it drew, pl_transform_check writes a spec out in full. Part of the
 * loader suites (testloader.h): host backend and simulated CUDA. */
#include "testloader.h"

/* Every op of this part: the geometric ones (crop, resize with each kind
 * of filter, centre crops with crop_pct and padding, both flips), the
 * pixel ops (grayscale, rotate and affine with each filter, fill and
 * centre; the colour, tone and blur ops with their ranges and
 * probabilities; the three policies, nearest and bilinear, with and
 * without fills), normalize, and random erasing after it on f32, f16
 * (channels last) and bf16 with each kind of value. */
static const char *const every_op[] = {
    "rrc(scale=0.3:1,ratio=1/2:2,interpolation=bicubic);vflip(0.3);hflip;"
    "grayscale(0.4)",
    "resize(20,max_size=30,interpolation=area);center_crop;hflip(0.5);"
    "grayscale(0.5);normalize(mean=0.4:0.5:0.6,std=0.2:0.3:0.4)",
    "center_crop(18,crop_pct=0.6,interpolation=nearest_exact);vflip;"
    "center_crop(16);grayscale(0.5)",
    "hflip;center_crop(70x50);resize(16x16,interpolation=nearest);"
    "grayscale(0.3)",
    "rrc(scale=0.3:1);rotate(30,fill=10:20:30);affine(degrees=10,"
    "translate=0.1:0.2,scale=0.9:1.1,shear=5,interpolation=bilinear);"
    "normalize;erase(0.7,value=random)",
    "resize;random_rotation(-90:90,bilinear,center=3:4);grayscale(0.5);"
    "erase(1,scale=0.1:0.4,value=0.5:-1:2)",
    "center_crop(crop_pct=0.9);random_affine(180,0.3:0,shear_y=-10:10);"
    "normalize(mean=0.5,std=0.25);erase(value=random_channel)",
    "rrc(scale=0.3:1);color_jitter(0.4,0.4,0.4,0.1);gaussian_blur(5);"
    "solarize(128);posterize(4);equalize;autocontrast",
    "resize;color_jitter(brightness=0.5:1.5,hue=-0.5:0.5);"
    "gaussian_blur(3x7,sigma=0.2:3);equalize(0.7);"
    "normalize(mean=0.4:0.5:0.6,std=0.2:0.3:0.4)",
    "hflip;center_crop(crop_pct=0.8);autocontrast(0.5);"
    "solarize(100,p=0.3);posterize(bits=2,p=0.6);"
    "color_jitter(saturation=0:3,contrast=0.9)",
    "rrc(scale=0.3:1);rand_augment(3,15,interpolation=bilinear);"
    "trivial_augment_wide(fill=9);auto_augment(svhn,fill=1:2:3)",
    "resize;auto_augment;rand_augment(1,30);normalize;erase(0.5)",
    "rrc(scale=0.3:1);color_jitter(0.4,0.4,0.4,0.1,p=0.8);grayscale(0.2);"
    "gaussian_blur(3,p=0.5)",
};
#define NSPECS (int)(sizeof every_op / sizeof every_op[0])

/* The format each spec runs with: floats for normalize and erasing. */
static const pl_format every_format[NSPECS] = {
    PL_FORMAT_U8_NHWC,   PL_FORMAT_F16_NCHW, PL_FORMAT_U8_NHWC,
    PL_FORMAT_U8_NHWC,   PL_FORMAT_F32_NCHW, PL_FORMAT_F16_NCHW,
    PL_FORMAT_BF16_NCHW, PL_FORMAT_U8_NHWC,  PL_FORMAT_F16_NCHW,
    PL_FORMAT_U8_NHWC,   PL_FORMAT_U8_NHWC,  PL_FORMAT_F32_NCHW,
    PL_FORMAT_U8_NHWC};

static void every_op_cfg(pl_config *c, const char *root, int k)
{
    base_cfg(c, root);
    c->transform = every_op[k];
    c->format = every_format[k];
    c->channels_last = k == 5;
}

Test(loader_transform, every_op_gives_the_same_bytes_whatever_the_pipeline,
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
            assert_same_run(&x[e], &y[e], every_op[k]);
            run_free(&x[e]);
            run_free(&y[e]);
        }
    }
    tu_rm_rf(root);
}

Test(loader_transform, every_op_differs_by_epoch_and_seed_only,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 10, 2);
    /* Unshuffled, so that only the ops' draws can tell the epochs apart
     * (spec 8's geometry is a fixed resize: its pixel ops alone). */
    for (int k = 0; k < NSPECS; k++) {
        pl_config c;
        every_op_cfg(&c, root, k);
        c.shuffle = 0;
        run r[2], again[2];
        run_loader(&c, 2, r);
        run_loader(&c, 2, again);
        assert_same_run(&r[0], &again[0], every_op[k]);
        cr_assert_neq(
            memcmp(r[0].bytes, r[1].bytes, r[0].sample_bytes * (size_t)r[0].n),
            0, "%s: epochs 0 and 1 drew alike", every_op[k]);
        for (int e = 0; e < 2; e++) {
            run_free(&r[e]);
            run_free(&again[e]);
        }
    }
    tu_rm_rf(root);
}

static pl_state state_now(const pl_loader *l)
{
    pl_state s;
    cr_assert_eq(pl_loader_state(l, &s), 0, "%s", pl_last_error());
    return s;
}

Test(loader_transform, every_op_resumes_exactly, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int k = 0; k < NSPECS; k++) {
        pl_config c;
        every_op_cfg(&c, root, k);
        c.num_workers = 1;
        /* The uninterrupted run: 2 batches, the state, the rest of epoch
         * 0, epoch 1. */
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
        assert_same_run(&tail, &tail2, every_op[k]);
        assert_same_run(&next, &next2, every_op[k]);
        run_free(&head);
        run_free(&tail);
        run_free(&next);
        run_free(&tail2);
        run_free(&next2);
    }
    tu_rm_rf(root);
}

Test(loader_transform, the_eval_and_none_presets_are_their_specs,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 12, 2);
    /* 16 x 16: eval resizes the shorter side to 16 * 256 / 224 = 18. */
    static const struct {
        pl_augment preset;
        const char *spec;
    } same[] = {
        {PL_AUGMENT_EVAL, "resize(18);center_crop(16)"},
        {PL_AUGMENT_EVAL, "center_crop(crop_pct=0.875)"},
        {PL_AUGMENT_NONE, "resize"},
    };
    static const pl_format formats[] = {PL_FORMAT_U8_NHWC, PL_FORMAT_F32_NCHW};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        for (int f = 0; f < 2; f++) {
            pl_config a, b;
            base_cfg(&a, root);
            a.augment = same[i].preset;
            a.format = formats[f];
            b = a;
            b.augment = PL_AUGMENT_TRAIN; /* what a spec replaces */
            b.transform = same[i].spec;
            run x[2], y[2];
            run_loader(&a, 2, x);
            run_loader(&b, 2, y);
            for (int e = 0; e < 2; e++) {
                assert_same_run(&x[e], &y[e], same[i].spec);
                run_free(&x[e]);
                run_free(&y[e]);
            }
        }
    tu_rm_rf(root);
}

static void create_fails(const pl_config *c, const char *want)
{
    pl_loader *l = (pl_loader *)1;
    cr_assert_eq(pl_loader_create(c, &l), PL_EINVAL, "%s accepted",
                 c->transform);
    cr_assert_null(l);
    cr_assert_str_eq(pl_last_error(), want);
}

Test(loader_transform, a_bad_spec_fails_create_naming_the_op_and_parameter)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 3, 1);
    c.transform = "rrc(scale=0.08:x);hflip";
    create_fails(&c, "pl_loader_create: config.transform: rrc: "
                     "scale=0.08:x: not a number");
    c.transform = "random_resized_crop;hflip(p=2)";
    create_fails(&c, "pl_loader_create: config.transform: hflip: p=2: 2 is "
                     "outside [0, 1]");
    c.transform = "resize;normalize";
    create_fails(&c, "pl_loader_create: config.transform: normalize: "
                     "config.format is u8, which holds no normalised "
                     "values: use f32, f16 or bf16, or drop normalize");
    c.transform = "rrc;affine(10,translate=0.5:2)";
    create_fails(&c, "pl_loader_create: config.transform: affine: "
                     "translate=0.5:2: 2 is outside [0, 1]");
    c.transform = "rrc;color_jitter(hue=0.7)";
    create_fails(&c, "pl_loader_create: config.transform: color_jitter: "
                     "hue=0.7: 0.7 is outside [-0.5, 0.5]");
    c.transform = "rrc;gaussian_blur(33)"; /* the output is 16 x 16 */
    create_fails(&c, "pl_loader_create: config.transform: gaussian_blur: "
                     "kernel_size=33x33: wider than the 16 x 16 output "
                     "allows (half of it must be below each side, to "
                     "reflect)");
    c.transform = "rrc;erase(0.25,value=random)";
    create_fails(&c, "pl_loader_create: config.transform: erase: erases the "
                     "normalised sample (after normalize, as timm does), and "
                     "config.format is u8: use f32, f16 or bf16");
    /* A bad field before it is named first, as in the struct's order. */
    c.transform = "rotate(degrees=x)";
    c.batch_size = 0;
    create_fails(&c, "pl_loader_create: config.batch_size: 0 is outside "
                     "[1, 65536]");
    fx_done(NULL, root);
}

Test(loader_transform, a_state_of_one_transform_is_refused_by_another,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 10, 2);
    c.transform = "rrc;hflip";
    pl_loader *l = create(&c);
    const pl_state saved = state_now(l);
    pl_loader_destroy(l);
    static const char *const others[] = {"rrc;hflip(0.4)", "rrc;vflip", NULL};
    for (int i = 0; i < 3; i++) {
        pl_config d = c;
        d.transform = others[i]; /* NULL: the train preset */
        d.resume = &saved;
        l = (pl_loader *)1;
        cr_assert_eq(pl_loader_create(&d, &l), PL_EINVAL, "%s resumed",
                     others[i] ? others[i] : "the preset");
        cr_assert(strstr(pl_last_error(), "another transform"), "%s",
                  pl_last_error());
    }
    /* The same spec, written otherwise, is the same transform. */
    pl_config d = c;
    d.transform = " random_resized_crop(16x16, scale=0.08:1) ; hflip(0.5) ";
    d.resume = &saved;
    l = create(&d);
    fx_done(l, root);
}

Test(loader_transform, transform_image_makes_the_loaders_sample,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 9, 2);
    for (int k = 0; k < NSPECS; k++) {
        pl_config c;
        every_op_cfg(&c, root, k);
        c.dct_scaling = 0; /* pl_transform_image decodes nothing */
        c.first_epoch = 3;
        run r;
        pl_loader *l = create(&c);
        run_epoch(l, 3, &r);
        uint8_t *mine = malloc(r.sample_bytes);
        for (int i = 0; i < r.n; i++) {
            const char *path;
            cr_assert_eq(pl_loader_sample(l, r.idx[i], &path, NULL), 0);
            pl_image img;
            cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
            cr_assert_eq(pl_transform_image(&c, img.pixels, img.width,
                                            img.height, 3, r.idx[i], mine,
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

Test(loader_transform, transform_params_and_check_say_what_it_does)
{
    pl_config c;
    pl_config_default(&c);
    c.width = c.height = 32;
    c.seed = 4;
    char buf[512];
    size_t len = 0;
    /* The train preset's crop and flip, as the loader draws them. */
    cr_assert_eq(
        pl_transform_params(&c, 640, 480, 0, 17, buf, sizeof buf, &len), 0,
        "%s", pl_last_error());
    cr_assert_eq(len, strlen(buf));
    int top, left, h, w, flip;
    cr_assert_eq(sscanf(buf,
                        "random_resized_crop(top=%d,left=%d,height=%d,"
                        "width=%d);hflip(flip=%d)",
                        &top, &left, &h, &w, &flip),
                 5, "%s", buf);
    cr_assert(top >= 0 && left >= 0 && top + h <= 480 && left + w <= 640);
    /* Too small a buffer: PL_EINVAL and the length it needs. */
    const size_t full = len;
    cr_assert_eq(pl_transform_params(&c, 640, 480, 0, 17, buf, 8, &len),
                 PL_EINVAL);
    cr_assert_eq(len, full);
    c.transform = "resize(40);center_crop";
    cr_assert_eq(
        pl_transform_params(&c, 640, 480, 0, 17, buf, sizeof buf, NULL), 0);
    cr_assert_str_eq(buf, "resize(width=53,height=40);center_crop(top=4,"
                          "left=10)");
    cr_assert_eq(pl_transform_check(&c, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "resize(size=40,interpolation=bilinear,"
                          "antialias=true);center_crop(size=32x32,"
                          "interpolation=bilinear,antialias=true)");
    c.transform = "resize(40)";
    cr_assert_eq(pl_transform_check(&c, buf, sizeof buf), PL_EINVAL);
    cr_assert(strncmp(pl_last_error(),
                      "pl_transform_check: config.transform: the ops make "
                      "images 40 pixels",
                      60) == 0,
              "%s", pl_last_error());
    c.transform = NULL;
    c.width = 0;
    cr_assert_eq(pl_transform_check(&c, NULL, 0), PL_EINVAL);
    cr_assert_str_eq(pl_last_error(), "pl_transform_check: config.width: 0 "
                                      "is outside [1, 16384]");
    cr_assert_eq(pl_transform_check(NULL, NULL, 0), PL_EINVAL);
    c.width = 32;
    uint8_t px[3] = {1, 2, 3}, out[32 * 32 * 3];
    cr_assert_eq(pl_transform_image(&c, px, 1, 1, 0, 0, out, 5), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "out_bytes is 5"), "%s", pl_last_error());
    cr_assert_eq(pl_transform_image(&c, px, 1, 1, 0, 0, out, sizeof out), 0);
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], px[i % 3], "a 1 x 1 image, enlarged");
}
