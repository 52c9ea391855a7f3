/* GPU decoding (config.decode, issue 38) on the simulated runtime, with
 * the fake nvJPEG (tests/cudasim/nvjpegsim.c), which decodes with
 * libjpeg-turbo as the CPU path does: the whole path, the workers' routing,
 * nvJPEG's phases on each worker's stream, the resize kernel (the sim runs
 * gpu_resize.h's arithmetic), the copy engine's device copies after each
 * worker's event, must give the CPU path's bytes exactly (with
 * dct_scaling 0: the GPU decodes at full size); every image nvJPEG cannot
 * or will not take goes back to the workers with the CPU path's error
 * policy; what cannot be had at create is an error for decode "gpu" and one
 * notice for "auto"; destroy frees everything. Built only by `make
 * CUDA=sim`. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include <nvjpeg.h>

#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testrun.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 180

/* ---- the fake nvJPEG ---- */

static void *nvjpegsim;

/* PINLOAD_NVJPEG names the fake; the suite holds it open too, so its
 * counters outlive each loader's dlclose. */
static void use_nvjpegsim(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/libnvjpegsim.so", tu_build_dir());
    cr_assert_eq(setenv("PINLOAD_NVJPEG", path, 1), 0);
    nvjpegsim = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(nvjpegsim, "%s (make CUDA=sim builds it)", dlerror());
}

static long sim_decodes(int backend)
{
    long (*f)(int) = (long (*)(int))dlsym(nvjpegsim, "nvjpegsim_decodes");
    cr_assert_not_null(f);
    return f(backend);
}

static long sim_objects(void)
{
    long (*f)(void) = (long (*)(void))dlsym(nvjpegsim, "nvjpegsim_live");
    cr_assert_not_null(f);
    return f();
}

/* ---- the log ---- */

/* The messages a loader logs, kept to be searched. */
typedef struct log_count_t {
    pthread_mutex_t mu;
    int n;
    char msg[64][512];
} log_count_t;

static void keep_log(void *ctx, pl_log_level level, const char *m)
{
    log_count_t *lc = ctx;
    (void)level;
    pthread_mutex_lock(&lc->mu);
    if (lc->n < 64)
        snprintf(lc->msg[lc->n++], sizeof lc->msg[0], "%s", m);
    pthread_mutex_unlock(&lc->mu);
}

static void logs_of(pl_config *c, log_count_t *lc)
{
    memset(lc, 0, sizeof *lc);
    pthread_mutex_init(&lc->mu, NULL);
    c->log = keep_log;
    c->log_ctx = lc;
}

/* Messages holding `s`. */
static int log_matches(log_count_t *lc, const char *s)
{
    pthread_mutex_lock(&lc->mu);
    int k = 0;
    for (int i = 0; i < lc->n; i++)
        k += strstr(lc->msg[i], s) != NULL;
    pthread_mutex_unlock(&lc->mu);
    return k;
}

/* ---- data ---- */

/* Image i of a tree: baseline 4:2:0, progressive, grey and 4:4:4 in turn,
 * of sizes that make the filters shrink, and some enlarge, a 24 x 20
 * output. */
static void write_jpeg_kind(const char *path, int i, int kind)
{
    const int w = 18 + (i * 7) % 50, h = 14 + (i * 5) % 41;
    tu_jpeg_opts o = {.quality = 85};
    switch (kind) {
    case 1:
        o.progressive = 1;
        break;
    case 2:
        o.gray = 1;
        break;
    case 3:
        o.h_samp = o.v_samp = 1;
        break;
    }
    tu_write_jpeg(path, w, h, (unsigned)i * 3 + 1, &o);
}

static void write_kind(const char *path, int i)
{
    write_jpeg_kind(path, i, i % 4);
}

static void make_tree(char root[64], int n)
{
    tu_tmpdir(root);
    for (int i = 0; i < n; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/c%d/img%02d.jpg", root, i % 2, i);
        write_kind(p, i);
    }
}

/* A JPEG of the kind jpegenc makes with `o` (CMYK, RGB-coded, arithmetic),
 * which only the CPU decodes. */
static void write_special(const char *path, int w, int h, unsigned seed,
                          const jpegenc_opts *o)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    tu_pattern(rgb, w, h, seed);
    tu_mkdirs_for(path);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    jpegenc(rgb, w, h, o, f, NULL, NULL);
    fclose(f);
    free(rgb);
}

static void copy_fixture(const char *name, const char *to)
{
    char from[256];
    snprintf(from, sizeof from, "tests/fixtures/formats/%s", name);
    size_t len;
    uint8_t *b = tu_read_file(from, &len);
    tu_write_file(to, b, len);
    free(b);
}

/* A base configuration over root: simulated device 0, exact decoding (the
 * GPU decodes at full size), a 24 x 20 output. */
static void cfg_for(pl_config *c, const char *root, int decode)
{
    base_cfg(c, root);
    c->width = 24;
    c->height = 20;
    c->batch_size = 4;
    c->dct_scaling = 0;
    c->augment = PL_AUGMENT_TRAIN;
    c->decode = decode;
}

static pl_stats stats_of(const pl_loader *l)
{
    pl_stats s;
    cr_assert_eq(pl_loader_stats(l, &s), 0);
    return s;
}

/* The counters once the workers rest: after the caller's last batch they
 * go on into the next epoch until the ring is full, so a count is exact
 * only once none has moved for 300 ms. */
static pl_stats settled(const pl_loader *l)
{
    pl_stats a = stats_of(l), b;
    for (int i = 0; i < 100; i++) {
        sleep_ms(300);
        b = stats_of(l);
        if (b.images_decoded == a.images_decoded &&
            b.images_failed == a.images_failed &&
            b.images_gpu_declined == a.images_gpu_declined)
            return b;
        a = b;
    }
    cr_assert(0, "the workers never rested");
    return a;
}

/* Every image offered to nvJPEG was parsed once: taken or declined. */
static void offered_once(const pl_stats *st)
{
    const unsigned long parsed = cudasim_calls("nvjpegJpegStreamParse");
    cr_assert_eq(parsed, st->images_gpu + st->images_gpu_declined,
                 "%lu parsed, %llu on the GPU, %llu declined", parsed,
                 (unsigned long long)st->images_gpu,
                 (unsigned long long)st->images_gpu_declined);
}

/* Two epochs of c with decode cpu and with decode gpu: the same batches,
 * byte for byte. [out] *st: the GPU loader's counters, settled. */
static void same_as_cpu(pl_config c, pl_stats *st, const char *what)
{
    run cpu[2], gpu[2];
    c.decode = PL_DECODE_CPU;
    run_loader(&c, 2, cpu);
    c.decode = PL_DECODE_GPU;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.decode, PL_DECODE_GPU, "%s", what);
    cr_assert_not_null(strstr(in.decoder_name, "nvJPEG"), "%s: %s", what,
                       in.decoder_name);
    for (int e = 0; e < 2; e++)
        run_epoch(l, e, &gpu[e]);
    *st = settled(l);
    pl_loader_destroy(l);
    for (int e = 0; e < 2; e++) {
        assert_same_run(&cpu[e], &gpu[e], what);
        run_free(&cpu[e]);
        run_free(&gpu[e]);
    }
    offered_once(st);
}

/* ---- the bytes ---- */

static void bytes_equal(int format, int augment, int channels_last)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 22);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    c.format = format;
    c.augment = augment;
    c.channels_last = channels_last;
    pl_stats st;
    same_as_cpu(c, &st, "decode gpu against cpu");
    cr_assert_geq(st.images_gpu, 44, "both epochs' JPEGs on the GPU");
    cr_assert_eq(st.images_gpu, st.images_decoded, "every one of them");
    cr_assert_eq(st.images_gpu_declined, 0);
    tu_rm_rf(root);
}

Test(gpu_decode, u8_train_bytes_equal_the_cpu_path, .timeout = TIMEOUT)
{
    bytes_equal(PL_FORMAT_U8_NHWC, PL_AUGMENT_TRAIN, 0);
}

Test(gpu_decode, f32_eval_bytes_equal_the_cpu_path, .timeout = TIMEOUT)
{
    bytes_equal(PL_FORMAT_F32_NCHW, PL_AUGMENT_EVAL, 0);
}

Test(gpu_decode, f16_channels_last_bytes_equal_the_cpu_path, .timeout = TIMEOUT)
{
    bytes_equal(PL_FORMAT_F16_NCHW, PL_AUGMENT_TRAIN, 1);
}

Test(gpu_decode, bf16_none_bytes_equal_the_cpu_path, .timeout = TIMEOUT)
{
    bytes_equal(PL_FORMAT_BF16_NCHW, PL_AUGMENT_NONE, 0);
}

/* config.transform: a plan the GPU's kernels do (a crop inside the image,
 * the antialiased bilinear filter, a horizontal flip, normalize) goes to
 * the GPU; one they do not (vflip, a pixel op) stays on the workers,
 * sample by sample, and either way the bytes are the CPU path's. */
static void transform_as_cpu(const char *spec, pl_format format, pl_stats *st)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 22);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    c.format = format;
    c.transform = spec;
    same_as_cpu(c, st, spec);
    cr_assert_eq(st->images_gpu_declined, 0, "%s", spec);
    tu_rm_rf(root);
}

Test(gpu_decode, a_transform_the_kernels_do_runs_on_the_gpu, .timeout = TIMEOUT)
{
    pl_stats st;
    transform_as_cpu("rrc(scale=0.3:1);hflip(0.5);"
                     "normalize(mean=0.5:0.4:0.3,std=0.2:0.25:0.3)",
                     PL_FORMAT_F32_NCHW, &st);
    cr_assert_geq(st.images_gpu, 44);
    cr_assert_eq(st.images_gpu, st.images_decoded);
}

Test(gpu_decode, a_pixel_op_keeps_every_sample_on_the_workers,
     .timeout = TIMEOUT)
{
    pl_stats st;
    transform_as_cpu("rrc(scale=0.3:1);grayscale(0.5)", PL_FORMAT_U8_NHWC, &st);
    cr_assert_eq(st.images_gpu, 0);
    cr_assert_geq(st.images_decoded, 44);
}

Test(gpu_decode, a_vflipped_sample_stays_on_the_workers, .timeout = TIMEOUT)
{
    pl_stats st;
    transform_as_cpu("rrc(scale=0.3:1);vflip(0.5)", PL_FORMAT_U8_NHWC, &st);
    cr_assert_gt(st.images_gpu, 0, "the unflipped ones on the GPU");
    cr_assert_lt(st.images_gpu, st.images_decoded,
                 "the flipped ones on the workers");
}

/* Baseline images (4:2:0, grey, 4:4:4: kinds 0, 2, 3) go to the hardware
 * decoder, progressive ones (kind 1) to the GPU-hybrid one; without a
 * hardware decoder, all to the GPU-hybrid one. */
static void decoders_used(int hw, int progressive)
{
    cr_assert_eq(setenv("CUDASIM_NVJPEG_HW", hw ? "1" : "0", 1), 0);
    use_nvjpegsim();
    char root[64], p[256];
    tu_tmpdir(root);
    for (int i = 0; i < 9; i++) {
        snprintf(p, sizeof p, "%s/c%d/img%02d.jpg", root, i % 2, i);
        static const int baseline[3] = {0, 2, 3};
        write_jpeg_kind(p, i, progressive ? 1 : baseline[i % 3]);
    }
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(!!strstr(in.decoder_name, "hardware"), hw, "%s",
                 in.decoder_name);
    run r;
    run_epoch(l, 0, &r);
    const pl_stats st = settled(l);
    run_free(&r);
    pl_loader_destroy(l);
    const long hard = sim_decodes(NVJPEG_BACKEND_HARDWARE);
    const long hybrid = sim_decodes(NVJPEG_BACKEND_GPU_HYBRID);
    const long all = hw && !progressive ? hard : hybrid;
    cr_assert_eq(all, (long)st.images_gpu,
                 "%ld hardware, %ld GPU-hybrid "
                 "decodes of %llu",
                 hard, hybrid, (unsigned long long)st.images_gpu);
    cr_assert_geq(all, 9);
    tu_rm_rf(root);
}

Test(gpu_decode, baseline_jpegs_go_to_the_hardware_decoder, .timeout = TIMEOUT)
{
    decoders_used(1, 0);
}

Test(gpu_decode, progressive_jpegs_go_to_the_gpu_hybrid_decoder,
     .timeout = TIMEOUT)
{
    decoders_used(1, 1);
}

Test(gpu_decode, without_a_hardware_decoder_all_go_to_gpu_hybrid,
     .timeout = TIMEOUT)
{
    decoders_used(0, 0);
}

/* ---- the CPU's share ---- */

Test(gpu_decode, png_webp_cmyk_rgb_and_arithmetic_go_to_the_workers,
     .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64], p[256];
    make_tree(root, 12);
    snprintf(p, sizeof p, "%s/c0/zpng.png", root);
    copy_fixture("rgb8.png", p);
    snprintf(p, sizeof p, "%s/c1/zwebp.webp", root);
    copy_fixture("lossy.webp", p);
    const jpegenc_opts cmyk = {.quality = 90, .store = JPEGENC_CMYK};
    const jpegenc_opts rgb = {.quality = 90, .store = JPEGENC_RGB};
    const jpegenc_opts arith = {.quality = 90, .arith = 1};
    snprintf(p, sizeof p, "%s/c0/zcmyk.jpg", root);
    write_special(p, 40, 30, 5, &cmyk);
    snprintf(p, sizeof p, "%s/c1/zrgb.jpg", root);
    write_special(p, 33, 41, 6, &rgb);
    snprintf(p, sizeof p, "%s/c1/zarith.jpg", root);
    write_special(p, 50, 28, 7, &arith);
    /* A PNG named .jpg is a PNG: the bytes route it, not the name. */
    snprintf(p, sizeof p, "%s/c0/zpng_named.jpg", root);
    copy_fixture("rgb8.png", p);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    pl_stats st;
    same_as_cpu(c, &st, "a mixed folder");
    /* The 6 others were never offered (offered_once): only the JPEGs
     * nvJPEG takes. */
    cr_assert_eq(st.images_gpu_declined, 0);
    cr_assert_geq(st.images_gpu, 24, "the 12 common JPEGs of both epochs");
    cr_assert_geq(st.images_decoded - st.images_gpu, 12,
                  "the 6 others of both epochs, on the CPU");
    tu_rm_rf(root);
}

/* A progressive JPEG cut in the middle of its last scan: libjpeg warns
 * (premature end) and decodes the rest from the scans before; nvJPEG (the
 * fake, like the real) refuses it, so the CPU decodes it, warning, as
 * without the GPU. */
static void write_cut_jpeg(const char *path)
{
    char full[300];
    snprintf(full, sizeof full, "%s.full", path);
    tu_write_jpeg(full, 48, 40, 77, &(tu_jpeg_opts){.progressive = 1});
    size_t len, sos = 0;
    uint8_t *b = tu_read_file(full, &len);
    for (size_t i = 2; i + 1 < len; i++)
        if (b[i] == 0xFF && b[i + 1] == 0xDA)
            sos = i;
    cr_assert_gt(sos, 0);
    tu_write_file(path, b, sos + (len - sos) / 2);
    free(b);
    remove(full);
}

static void bad_files(char root[64])
{
    make_tree(root, 14);
    char p[256];
    snprintf(p, sizeof p, "%s/c0/bad_text.jpg", root);
    tu_write_file(p, "plain text, not an image\n", 25);
    snprintf(p, sizeof p, "%s/c1/bad_cut.jpg", root);
    write_cut_jpeg(p);
    snprintf(p, sizeof p, "%s/c1/bad_empty.jpg", root);
    tu_write_file(p, "", 0);
}

static void policy_as_cpu(int on_error)
{
    use_nvjpegsim();
    char root[64];
    bad_files(root);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    c.on_error = on_error;
    pl_stats st;
    same_as_cpu(c, &st, pl_on_error_name(on_error));
    cr_assert_geq(st.images_gpu, 28, "the 14 good JPEGs of both epochs");
    /* The cut JPEG, offered and refused each time it came. */
    cr_assert_geq(st.images_gpu_declined, 2);
    cr_assert_geq(st.images_warned, 2,
                  "decoded on the CPU, warned: %llu warned, %llu declined, "
                  "%llu gpu, %llu decoded",
                  (unsigned long long)st.images_warned,
                  (unsigned long long)st.images_gpu_declined,
                  (unsigned long long)st.images_gpu,
                  (unsigned long long)st.images_decoded);
    tu_rm_rf(root);
}

Test(gpu_decode, bad_files_are_skipped_as_on_the_cpu, .timeout = TIMEOUT)
{
    policy_as_cpu(PL_ON_ERROR_SKIP);
}

Test(gpu_decode, bad_files_are_substituted_as_on_the_cpu, .timeout = TIMEOUT)
{
    policy_as_cpu(PL_ON_ERROR_SUBSTITUTE);
}

/* Under FAIL the same batches come before the same error, naming the same
 * file. */
static int run_until_error(pl_config c, char *err, size_t cap, int *batches)
{
    pl_loader *l = create(&c);
    int rc;
    const pl_batch *b;
    *batches = 0;
    for (;;) {
        rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END)
            continue;
        if (rc != 0)
            break;
        (*batches)++;
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    snprintf(err, cap, "%s", pl_last_error());
    pl_loader_destroy(l);
    return rc;
}

Test(gpu_decode, a_bad_file_fails_as_on_the_cpu, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64], p[256];
    make_tree(root, 14);
    snprintf(p, sizeof p, "%s/c0/bad_text.jpg", root);
    tu_write_file(p, "plain text, not an image\n", 25);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_CPU);
    c.on_error = PL_ON_ERROR_FAIL;
    char cpu_err[1024], gpu_err[1024];
    int nc, ng;
    const int rc_cpu = run_until_error(c, cpu_err, sizeof cpu_err, &nc);
    c.decode = PL_DECODE_GPU;
    const int rc_gpu = run_until_error(c, gpu_err, sizeof gpu_err, &ng);
    cr_assert_eq(rc_cpu, PL_ENOTIMAGE, "%s", cpu_err);
    cr_assert_eq(rc_gpu, rc_cpu, "%s", gpu_err);
    cr_assert_str_eq(gpu_err, cpu_err);
    cr_assert_eq(ng, nc);
    tu_rm_rf(root);
}

/* ---- what nvJPEG refuses ---- */

Test(gpu_decode, a_refused_decode_is_done_on_the_cpu_with_one_notice,
     .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 16);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    run cpu, gpu;
    c.decode = PL_DECODE_CPU;
    run_loader(&c, 1, &cpu);
    c.decode = PL_DECODE_GPU;
    log_count_t lc;
    logs_of(&c, &lc);
    /* The 3rd and 4th host phases fail, the 8th upload, the 10th device
     * phase: each of those samples is decoded by its worker instead. */
    const struct {
        const char *call;
        unsigned long nth, times;
    } f[] = {{"nvjpegDecodeJpegHost", 3, 2},
             {"nvjpegDecodeJpegTransferToDevice", 6, 1},
             {"nvjpegDecodeJpegDevice", 7, 1},
             {"nvjpegJpegStreamParse", 12, 1}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        cr_assert_geq(cudasim_inject(&(cudasim_fault){.call = f[i].call,
                                                      .nth = f[i].nth,
                                                      .times = f[i].times}),
                      0);
    pl_loader *l = create(&c);
    run_epoch(l, 0, &gpu);
    const pl_stats st = settled(l);
    pl_loader_destroy(l);
    assert_same_run(&cpu, &gpu, "with refusals");
    cr_assert_eq(cudasim_faults_delivered(), 5);
    cr_assert_eq(st.images_gpu_declined, 5, "%llu",
                 (unsigned long long)st.images_gpu_declined);
    cr_assert_eq(st.images_gpu + 5, st.images_decoded);
    offered_once(&st);
    cr_assert_eq(log_matches(&lc, "GPU decoding refused"), 1,
                 "one notice for the refusals");
    run_free(&cpu);
    run_free(&gpu);
    tu_rm_rf(root);
}

Test(gpu_decode, out_of_device_memory_mid_epoch_leaves_the_sample_to_the_cpu,
     .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 12);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    run cpu, gpu;
    c.decode = PL_DECODE_CPU;
    run_loader(&c, 1, &cpu);
    c.decode = PL_DECODE_GPU;
    /* No allocation succeeds but on this thread (create's): the workers'
     * scratch for their images cannot be had. */
    cr_assert_geq(cudasim_inject(&(cudasim_fault){.call = "cudaMalloc",
                                                  .other_threads = 1}),
                  0);
    pl_loader *l = create(&c);
    run_epoch(l, 0, &gpu);
    const pl_stats st = settled(l);
    cudasim_clear_faults();
    pl_loader_destroy(l);
    assert_same_run(&cpu, &gpu, "without device memory");
    cr_assert_eq(st.images_gpu, 0);
    cr_assert_eq(st.images_gpu_declined, st.images_decoded);
    run_free(&cpu);
    run_free(&gpu);
    tu_rm_rf(root);
}

/* ---- at create ---- */

static int create_rc(const pl_config *c, char *err, size_t cap)
{
    pl_loader *l = NULL;
    const int rc = pl_loader_create(c, &l);
    snprintf(err, cap, "%s", pl_last_error());
    pl_loader_destroy(l);
    return rc;
}

/* Each reason the GPU decoder cannot be had: decode "gpu" fails create
 * naming it, "auto" runs on the CPU, saying so in one notice and in
 * pl_info. */
static void cannot_have(pl_config c, int code, const char *says)
{
    char err[1024];
    c.decode = PL_DECODE_GPU;
    const int rc = create_rc(&c, err, sizeof err);
    cr_assert_eq(rc, code, "%s: %s", pl_err_name(rc), err);
    cr_assert_not_null(strstr(err, "config.decode: gpu: "), "%s", err);
    cr_assert_not_null(strstr(err, says), "%s", err);
    c.decode = PL_DECODE_AUTO;
    log_count_t lc;
    logs_of(&c, &lc);
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.decode, PL_DECODE_CPU);
    cr_assert_eq(in.gpu_decode_bytes, 0);
    cr_assert_not_null(strstr(in.decoder_name, "cpu (decode auto: "), "%s",
                       in.decoder_name);
    cr_assert_not_null(strstr(in.decoder_name, says), "%s", in.decoder_name);
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(stats_of(l).images_gpu, 0);
    run_free(&r);
    pl_loader_destroy(l);
    cr_assert_eq(log_matches(&lc, "decode auto: JPEGs are decoded on the CPU"),
                 1, "one notice");
}

Test(gpu_decode, without_nvjpeg_gpu_fails_and_auto_uses_the_cpu,
     .timeout = TIMEOUT)
{
    char root[64];
    make_tree(root, 6);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    cr_assert_eq(setenv("PINLOAD_NVJPEG", "/nonexistent/libnvjpeg.so.13", 1),
                 0);
    cannot_have(c, PL_EUNSUPPORTED, "nvJPEG cannot be loaded");
    /* And without the variable, a machine with no libnvjpeg.so.13 on its
     * library path (this one). */
    cr_assert_eq(unsetenv("PINLOAD_NVJPEG"), 0);
    void *real = dlopen("libnvjpeg.so.13", RTLD_LAZY);
    if (real)
        dlclose(real);
    else
        cannot_have(c, PL_EUNSUPPORTED, "libnvjpeg.so.13");
    tu_rm_rf(root);
}

Test(gpu_decode, the_host_backend_has_no_gpu_decoder, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 6);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    c.device = PL_DEVICE_HOST;
    cr_assert_eq(setenv("PINLOAD_TEST_DEVICE", "host", 1), 0); /* run_epoch */
    cannot_have(c, PL_EINVAL, "needs the CUDA backend");
    tu_rm_rf(root);
}

Test(gpu_decode, keep_host_has_no_gpu_decoder, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 6);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    c.keep_host = 1;
    cannot_have(c, PL_EINVAL, "config.keep_host is 1");
    tu_rm_rf(root);
}

Test(gpu_decode, out_of_device_memory_at_create_is_a_clear_error,
     .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 6);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    /* The create thread's cudaMalloc calls: the two device buffers, then
     * the GPU decoder's device slots (u8: no table; the workers' buffers
     * come with their first images, on their threads). */
    cr_assert_geq(cudasim_inject(&(cudasim_fault){
                      .call = "cudaMalloc", .nth = 3, .this_thread = 1}),
                  0);
    char err[1024];
    cr_assert_eq(create_rc(&c, err, sizeof err), PL_ENOMEM, "%s", err);
    cr_assert_not_null(strstr(err, "config.decode: gpu: no device memory for "
                                   "its 2 slots"),
                       "%s", err);
    assert_nothing_live("after the failed create");
    cr_assert_eq(sim_objects(), 0, "nvJPEG's objects left: %ld", sim_objects());
    /* nvJPEG's own memory, for auto as well. */
    cudasim_clear_faults();
    cr_assert_geq(
        cudasim_inject(&(cudasim_fault){
            .call = "nvjpegBufferDeviceCreateV2", .nth = 2, .times = 2}),
        0);
    cannot_have(c, PL_ENOMEM, "NVJPEG_STATUS_ALLOCATOR_FAILURE");
    assert_nothing_live("after auto's loader");
    tu_rm_rf(root);
}

/* ---- lifetime and order ---- */

Test(gpu_decode, destroy_mid_decode_frees_everything, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 40);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    c.num_workers = 3;
    c.prefetch = 3;
    for (int delay = 0; delay <= 2000; delay += 1000) {
        sim_timing((unsigned)delay, 0);
        for (int after = 0; after < 3; after++) {
            pl_loader *l = create(&c);
            for (int k = 0; k < after; k++) {
                const pl_batch *b;
                cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
                cr_assert_eq(pl_loader_release(l, b, NULL), 0);
            }
            pl_loader_destroy(l);
            assert_nothing_live("after destroy");
            cr_assert_eq(sim_objects(), 0, "nvJPEG's objects left: %ld",
                         sim_objects());
        }
    }
    cr_assert_eq(cudasim_violations(), 0);
    tu_rm_rf(root);
}

Test(gpu_decode, bytes_do_not_depend_on_workers_or_delays, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 20);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    run one[2], many[2];
    c.num_workers = 1;
    run_loader(&c, 2, one);
    sim_timing(400, 0.05); /* slow copies: host phases run ahead */
    c.num_workers = 4;
    c.prefetch = 3;
    run_loader(&c, 2, many);
    for (int e = 0; e < 2; e++) {
        assert_same_run(&one[e], &many[e], "1 worker against 4");
        run_free(&one[e]);
        run_free(&many[e]);
    }
    tu_rm_rf(root);
}

Test(gpu_decode, a_resumed_loader_delivers_the_same_bytes, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 21);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU);
    run whole, head, tail;
    pl_loader *l = create(&c);
    run_epoch(l, 0, &whole);
    pl_loader_destroy(l);
    l = create(&c);
    run_batches(l, 0, 0, 2, &head);
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    c.resume = &st;
    c.num_workers = 3;
    l = create(&c);
    run_batches(l, 0, 2, MAXB, &tail);
    pl_loader_destroy(l);
    cr_assert_eq(head.n + tail.n, whole.n);
    cr_assert_eq(memcmp(head.bytes, whole.bytes, head.sample_bytes * head.n),
                 0);
    cr_assert_eq(memcmp(tail.bytes, sample_at(&whole, head.n),
                        tail.sample_bytes * tail.n),
                 0, "the resumed batches differ");
    run_free(&whole);
    run_free(&head);
    run_free(&tail);
    tu_rm_rf(root);
}

Test(gpu_decode, info_and_stats_count_the_gpu_memory, .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 8);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_GPU); /* every JPEG: auto would split them */
    c.format = PL_FORMAT_F32_NCHW;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.decode, PL_DECODE_GPU);
    const uint64_t slots =
        (uint64_t)c.prefetch * c.batch_size * in.sample_bytes;
    cr_assert_geq(in.gpu_decode_bytes, slots + 3 * 256 * 4, "%llu",
                  (unsigned long long)in.gpu_decode_bytes);
    run r;
    run_epoch(l, 0, &r);
    const pl_stats st = settled(l);
    cr_assert_eq(st.images_gpu, st.images_decoded);
    cr_assert_geq(st.images_gpu, 8);
    /* Each worker's image, filters and nvJPEG's buffers since. */
    cr_assert_gt(st.gpu_decode_bytes, in.gpu_decode_bytes);
    cudasim_live lv;
    cudasim_get_live(&lv);
    cr_assert_geq(lv.device_bytes, st.gpu_decode_bytes);
    run_free(&r);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* decode auto splits the JPEGs the GPU could take between it and the
 * workers by what each way costs a worker (workers/balance.h): half each
 * way at first, then, with the GPU's operations slowed so that an offer
 * waits for the buffers its queued samples hold, fewer to the GPU. The
 * bytes are decode cpu's whoever took a sample (the sim decodes with
 * libjpeg-turbo, and at full size so does the CPU path here); decode gpu
 * under the same delays still sends every one. */
Test(gpu_decode, auto_splits_by_cost_and_keeps_the_cpu_paths_bytes,
     .timeout = TIMEOUT)
{
    use_nvjpegsim();
    char root[64];
    make_tree(root, 24);
    pl_config c;
    cfg_for(&c, root, PL_DECODE_CPU);
    c.num_workers = 1;
    enum { EPOCHS = 4 };
    run cpu[EPOCHS], split[EPOCHS];
    run_loader(&c, EPOCHS, cpu);
    sim_timing(3000, 0.01); /* up to 3 ms an operation, 10 MB/s copies */
    c.decode = PL_DECODE_AUTO;
    pl_loader *l = create(&c);
    cr_assert_eq(info_of(l).decode, PL_DECODE_GPU);
    for (int e = 0; e < EPOCHS; e++)
        run_epoch(l, e, &split[e]);
    const pl_stats st = settled(l);
    pl_loader_destroy(l);
    for (int e = 0; e < EPOCHS; e++) {
        assert_same_run(&cpu[e], &split[e], "decode auto against cpu");
        run_free(&cpu[e]);
        run_free(&split[e]);
    }
    cr_assert_gt(st.images_gpu, 0, "the GPU took none");
    cr_assert_lt(st.images_gpu * 2, st.images_decoded,
                 "%llu of %llu on the slowed GPU: the split did not follow "
                 "the cost",
                 (unsigned long long)st.images_gpu,
                 (unsigned long long)st.images_decoded);
    c.decode = PL_DECODE_GPU;
    l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    const pl_stats g = settled(l);
    cr_assert_eq(g.images_gpu, g.images_decoded, "decode gpu sends them all");
    run_free(&r);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}
