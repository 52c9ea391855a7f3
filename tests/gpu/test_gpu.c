/* CUDA-path tests for pinload, on a real GPU. The host backend is the
 * reference: every byte a CUDA loader delivers must equal what a
 * host-backend loader delivers for the same configuration. The subjects,
 * in files of their own (this one is the runner, the dataset, the host
 * reference and the table of tests; gpu_test.h what they share):
 *
 * - the bytes (gpu_bytes.c): pinned and pageable rings, GPU normalisation
 *   to each float format, substituted samples; kernels on the caller's
 *   stream read each batch after pl_batch_wait;
 * - reuse (gpu_reuse.c): a device buffer, and keep_host's mirror, are
 *   refilled only after the work queued on the stream the batch was
 *   released on;
 * - the caller's thread (issue 29, gpu_contexts.c): a loader on another
 *   device (two GPUs), a caller on a context of its own (cuCtxCreate), a
 *   thread that never chose a device (a fresh process): waits and releases
 *   order the loader's context, and the caller's current context is left
 *   as it was;
 * - where host memory lives (gpu_reuse.c): the ring and keep_host's
 *   mirrors on the NUMA node of the GPU's PCI slot, the caller's memory
 *   policy untouched;
 * - CUDA graph capture (gpu_capture.c): a capture in each mode (global,
 *   thread-local, relaxed) on another thread while a loader delivers must
 *   end with a graph that runs, and pl_batch_wait / pl_loader_release on
 *   a capturing stream are refused without spoiling the capture;
 * - GPU decoding (issue 38, gpu_decode.c): nvJPEG's samples against the
 *   CPU path's within a PSNR bound in each format, and destroy mid-epoch
 *   leaving no device memory behind.
 *
 * Prints "PASS name", "FAIL name" (after the failed check's line and
 * values) or "SKIP name: reason" per test (one that needs two GPUs, on a
 * machine with one), then "N passed, M skipped, K failed"; exits non-zero
 * only if a test failed. `test_cuda PATTERN` runs the tests whose names
 * match the fnmatch PATTERN; `test_cuda --fresh-thread DEVICE DATA` is the
 * child process two tests start.
 *
 * Why C: these files are built by the C compiler, as every other suite,
 * and the kernels live in gpu_kernels.cu behind extern "C" launchers. nvcc
 * would compile a .cu test as C++, where a std::string or a new creeps in
 * unseen and pulls in libstdc++, which a CUDA image's gcc may have only as
 * a static non-PIC archive no PIE can link; here the compiler refuses
 * them, and the one nvcc object is a few kernels. */
#include <fnmatch.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../jpegwrite.h"
#include "gpu_test.h"

/* ---- the runner ---- */

char skip_reason[200];

static int n_passed, n_skipped, n_failed;

static const char *filter; /* fnmatch pattern, or NULL: every test */

void run(const char *name, test_fn fn, const char *data, const void *arg)
{
    if (filter && fnmatch(filter, name, 0) != 0)
        return;
    skip_reason[0] = '\0';
    (void)cudaGetLastError(); /* each test starts with no error pending */
    fflush(stdout);
    const outcome o = fn(data, arg);
    if (o == PASSED) {
        printf("PASS %s\n", name);
        n_passed++;
    } else if (o == SKIPPED) {
        printf("SKIP %s: %s\n", name, skip_reason);
        n_skipped++;
    } else {
        printf("FAIL %s\n", name);
        n_failed++;
    }
    fflush(stdout);
}

void sleep_ms(int ms)
{
    const struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* ---- a small generated dataset ---- */

static void write_jpeg(const char *path, int w, int h, unsigned seed)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    if (!rgb) {
        perror("malloc");
        exit(1);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = &rgb[((size_t)y * w + x) * 3];
            p[0] = (uint8_t)(x * 255 / w + seed * 40);
            p[1] = (uint8_t)(y * 255 / h + seed * 90);
            p[2] = (uint8_t)((x ^ y) + seed * 17);
        }
    tu_jpeg_opts o;
    memset(&o, 0, sizeof o);
    o.progressive = seed % 3 == 0;
    if (tu_jpeg_encode_file(path, rgb, w, h, &o) < 0) {
        perror(path);
        exit(1);
    }
    free(rgb);
}

/* 27 JPEGs of 120x90 to 256x112 in three class folders, in dir (a fresh
 * temporary folder). */
static void make_dataset(char *dir)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    unsigned seed = 1;
    for (int c = 0; c < 3; c++) {
        char cls[512], path[600];
        snprintf(cls, sizeof cls, "%s/class%c", dir, 'a' + c);
        if (mkdir(cls, 0777) != 0) {
            perror(cls);
            exit(1);
        }
        for (int i = 0; i < 9; i++, seed++) {
            snprintf(path, sizeof path, "%s/%d.jpg", cls, i);
            write_jpeg(path, 120 + 17 * i, 90 + 11 * c, seed);
        }
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* ---- helpers ---- */

static void quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

pl_config base_config(const char *data)
{
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = data;
    cfg.batch_size = 5;
    cfg.width = 48;
    cfg.height = 40;
    cfg.num_workers = 3;
    cfg.log = quiet;
    return cfg;
}

const uint8_t *ref_bytes(const ref_batches *r, int k)
{
    return r->bytes + (size_t)k * r->batch_bytes;
}

void ref_free(ref_batches *r)
{
    free(r->bytes);
    free(r->size);
    free(r->count);
    free(r->indices);
    memset(r, 0, sizeof *r);
}

static int ref_add(ref_batches *r, const pl_batch *b)
{
    if (r->n == r->cap) {
        const int cap = r->cap ? 2 * r->cap : 16;
        uint8_t *bytes = realloc(r->bytes, (size_t)cap * r->batch_bytes);
        if (bytes)
            r->bytes = bytes;
        size_t *size = realloc(r->size, (size_t)cap * sizeof *size);
        if (size)
            r->size = size;
        int32_t *count = realloc(r->count, (size_t)cap * sizeof *count);
        if (count)
            r->count = count;
        int64_t *indices =
            realloc(r->indices, (size_t)cap * r->batch_size * sizeof *indices);
        if (indices)
            r->indices = indices;
        if (!bytes || !size || !count || !indices)
            return -1;
        r->cap = cap;
    }
    if (b->bytes > r->batch_bytes || b->count > r->batch_size)
        return -1;
    memcpy(r->bytes + (size_t)r->n * r->batch_bytes, b->host, b->bytes);
    r->size[r->n] = b->bytes;
    r->count[r->n] = b->count;
    memcpy(r->indices + (size_t)r->n * r->batch_size, b->indices,
           (size_t)b->count * sizeof *b->indices);
    r->n++;
    return 0;
}

/* The batches of `epochs` epochs from a host-backend loader with cfg. */
int host_reference(pl_config cfg, int epochs, ref_batches *out)
{
    int ok = 0;
    pl_loader *l = NULL;
    memset(out, 0, sizeof *out);
    cfg.device = PL_DEVICE_HOST;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    out->batch_bytes = info.batch_bytes;
    out->batch_size = info.batch_size;
    for (int e = 0; e < epochs; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            const int added = ref_add(out, b);
            pl_loader_release(l, b, NULL);
            CHECK(added == 0, "out of memory for the reference");
        }
        CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
        if (e == 0)
            out->per_epoch = out->n;
    }
    ok = 1;
done:
    pl_loader_destroy(l);
    return ok;
}

/* The reference for a config whose epochs are all alike (no shuffle, no
 * random crop): two epochs are made and compared, and one is kept, so a
 * batch is checked by its index whatever its epoch. */
int host_reference_repeating(pl_config cfg, ref_batches *out)
{
    int ok = 0;
    if (!host_reference(cfg, 2, out))
        return 0;
    CHECK(out->n == 2 * out->per_epoch, "%d batches, %d in the first epoch",
          out->n, out->per_epoch);
    for (int k = 0; k < out->per_epoch; k++)
        CHECK(out->size[k] == out->size[k + out->per_epoch] &&
                  memcmp(ref_bytes(out, k), ref_bytes(out, k + out->per_epoch),
                         out->size[k]) == 0,
              "batch %d differs between the host backend's epochs 0 and 1", k);
    out->n = out->per_epoch;
    ok = 1;
done:
    return ok;
}

/* How many bytes of n differ between a and b, for the messages. */
size_t bytes_differing(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

/* Clock cycles of device 0 in about ms milliseconds, for a spinning
 * kernel; 0 if the clock rate cannot be read. */
long long cycles_in_ms(int ms)
{
    int rate_khz = 0;
    if (cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0) !=
        cudaSuccess)
        return 0;
    return (long long)rate_khz * ms;
}

/* ---- the suite ---- */

typedef struct test {
    const char *name;
    test_fn fn;
    const void *arg;
} test;

static const float_case f32 = {PL_FORMAT_F32_NCHW, 0};

static const float_case f16 = {PL_FORMAT_F16_NCHW, 0};

static const float_case bf16 = {PL_FORMAT_BF16_NCHW, 0};

static const decode_case dec_u8 = {PL_FORMAT_U8_NHWC, 0, PL_AUGMENT_TRAIN};
static const decode_case dec_f32 = {PL_FORMAT_F32_NCHW, 0, PL_AUGMENT_EVAL};
static const decode_case dec_f32_norm = {PL_FORMAT_F32_NCHW, 1,
                                         PL_AUGMENT_TRAIN};
static const decode_case dec_f16 = {PL_FORMAT_F16_NCHW, 1, PL_AUGMENT_NONE};

static const test tests[] = {
    {"cuda_backend_pins_the_ring", cuda_backend_pins_the_ring, NULL},
    {"u8_pinned_batches_equal_host_backend", u8_pinned, NULL},
    {"f32_train_pageable_batches_equal_host_backend", f32_train_pageable, NULL},
    {"gpu_normalize_f32_equals_host_bytes", gpu_normalize_matches_host, &f32},
    {"gpu_normalize_f16_equals_host_bytes", gpu_normalize_matches_host, &f16},
    {"gpu_normalize_bf16_equals_host_bytes", gpu_normalize_matches_host, &bf16},
    {"gpu_normalize_channels_last_equals_host_bytes",
     gpu_normalize_channels_last, NULL},
    {"gpu_normalize_substitutes_zeros", gpu_normalize_substitutes_zeros, NULL},
    {"mixup_on_the_device_equals_host_bytes",
     mixup_on_the_device_equals_host_bytes, NULL},
    {"release_orders_buffer_reuse", release_orders_buffer_reuse, NULL},
    {"keep_host_mirrors_the_batch", keep_host_mirrors_the_batch, NULL},
    {"host_memory_on_the_gpus_numa_node", host_memory_on_the_gpus_numa_node,
     NULL},
    {"keep_host_mirror_waits_for_the_release_stream",
     keep_host_mirror_waits_for_the_release_stream, NULL},
    {"destroy_with_batches_held", destroy_with_batches_held, NULL},
    {"second_device_wait_on_null", second_device_wait_on_null, NULL},
    {"foreign_context_wait_and_release_order_the_loaders_context",
     foreign_context_wait_and_release_order_the_loaders_context, NULL},
    {"no_context_on_gpu0_for_a_loader_on_device_1",
     no_context_on_gpu0_for_a_loader_on_device_1, NULL},
    {"no_context_left_on_a_thread_that_never_chose_a_device",
     no_context_left_on_a_thread_that_never_chose_a_device, NULL},
    {"gpu_decode_u8_train_psnr_against_cpu", gpu_decode_psnr, &dec_u8},
    {"gpu_decode_f32_eval_psnr_against_cpu", gpu_decode_psnr, &dec_f32},
    {"gpu_decode_f32_gpu_normalize_psnr_against_cpu", gpu_decode_psnr,
     &dec_f32_norm},
    {"gpu_decode_f16_none_psnr_against_cpu", gpu_decode_psnr, &dec_f16},
    {"gpu_decode_destroy_frees_device_memory", gpu_decode_destroy_frees, NULL},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--fresh-thread") == 0)
        return fresh_thread_child(argv[3], atoi(argv[2])) == PASSED ? 0 : 1;
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [PATTERN]  (fnmatch on test names)\n",
                argv[0]);
        return 2;
    }
    filter = argc == 2 ? argv[1] : NULL;
    const int n = device_count();
    if (n == 0) {
        printf("no CUDA device: the CUDA-path tests need a GPU\n");
        return 1;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
        snprintf(prop.name, sizeof prop.name, "(unknown)");
    int driver_version = 0, runtime_version = 0;
    cudaDriverGetVersion(&driver_version);
    cudaRuntimeGetVersion(&runtime_version);
    printf("device 0: %s (%d device%s), driver %d, runtime %d, pinload %s\n",
           prop.name, n, n == 1 ? "" : "s", driver_version, runtime_version,
           pl_version());
    char data[] = "/tmp/pinload-gpu-XXXXXX";
    make_dataset(data);

    for (size_t i = 0; i < COUNT(tests); i++)
        run(tests[i].name, tests[i].fn, data, tests[i].arg);
    run_capture_tests(data);

    if (nftw(data, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        printf("could not remove %s\n", data);
    printf("%d passed, %d skipped, %d failed\n", n_passed, n_skipped, n_failed);
    return n_failed ? 1 : 0;
}
