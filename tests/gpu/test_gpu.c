/* CUDA-path tests for pinload, on a real GPU. The host backend is the
 * reference: every byte a CUDA loader delivers must equal what a
 * host-backend loader delivers for the same configuration. The subjects:
 *
 * - the bytes: pinned and pageable rings, GPU normalisation to each float
 *   format, substituted samples; kernels on the caller's stream read each
 *   batch after pl_batch_wait;
 * - reuse: a device buffer, and keep_host's mirror, are refilled only after
 *   the work queued on the stream the batch was released on;
 * - the caller's thread (issue 29): a loader on another device (two GPUs),
 *   a caller on a context of its own (cuCtxCreate), a thread that never
 *   chose a device (a fresh process): waits and releases order the
 *   loader's context, and the caller's current context is left as it was;
 * - where host memory lives: the ring and keep_host's mirrors on the NUMA
 *   node of the GPU's PCI slot, the caller's memory policy untouched;
 * - CUDA graph capture: a capture in each mode (global, thread-local,
 *   relaxed) on another thread while a loader delivers must end with a
 *   graph that runs, and pl_batch_wait / pl_loader_release on a capturing
 *   stream are refused without spoiling the capture.
 *
 * Prints "PASS name", "FAIL name" (after the failed check's line and
 * values) or "SKIP name: reason" per test (one that needs two GPUs, on a
 * machine with one), then "N passed, M skipped, K failed"; exits non-zero
 * only if a test failed. `test_cuda PATTERN` runs the tests whose names
 * match the fnmatch PATTERN; `test_cuda --fresh-thread DEVICE DATA` is the
 * child process two tests start.
 *
 * Why C: this file is built by the C compiler, as every other suite, and
 * the kernels live in gpu_kernels.cu behind extern "C" launchers. nvcc
 * would compile a .cu test as C++, where a std::string or a new creeps in
 * unseen and pulls in libstdc++, which a CUDA image's gcc may have only as
 * a static non-PIC archive no PIE can link; here the compiler refuses
 * them, and the one nvcc object is a few kernels. */
#include <cuda.h> /* the driver's types: libcuda is not linked */
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <fnmatch.h>
#include <linux/mempolicy.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../jpegwrite.h"
#include "gpu_kernels.h"
#include "pinload.h"

/* ---- the runner ---- */

typedef enum outcome { PASSED, FAILED, SKIPPED } outcome;

/* A test: the dataset's folder and its row's argument (NULL for most). */
typedef outcome (*test_fn)(const char *data, const void *arg);

static char skip_reason[200];
static int n_passed, n_skipped, n_failed;
static const char *filter; /* fnmatch pattern, or NULL: every test */

/* A failed check prints its line, its condition and the values, then
 * leaves through the function's `done` label, where what the test holds is
 * given back (a stream left capturing, a thread left running, would spoil
 * the tests after it). */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("  check failed at line %d: %s: ", __LINE__, #cond);        \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
            goto done;                                                         \
        }                                                                      \
    } while (0)

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        const cudaError_t e_ = (call);                                         \
        CHECK(e_ == cudaSuccess, "%s: %s (%s)", #call, cudaGetErrorName(e_),   \
              cudaGetErrorString(e_));                                         \
    } while (0)

#define SKIP(...)                                                              \
    do {                                                                       \
        snprintf(skip_reason, sizeof skip_reason, __VA_ARGS__);                \
        return SKIPPED;                                                        \
    } while (0)

static void run(const char *name, test_fn fn, const char *data, const void *arg)
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

static void sleep_ms(int ms)
{
    const struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int device_count(void)
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

static pl_config base_config(const char *data)
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

/* Every batch a host-backend loader delivers, in order: the reference. */
typedef struct ref_batches {
    int n, cap;
    int per_epoch;      /* batches in the first epoch */
    size_t batch_bytes; /* room per batch: pl_info.batch_bytes */
    int batch_size;
    uint8_t *bytes;   /* [cap][batch_bytes] */
    size_t *size;     /* [cap]: the batch's bytes */
    int32_t *count;   /* [cap] */
    int64_t *indices; /* [cap][batch_size] */
} ref_batches;

static const uint8_t *ref_bytes(const ref_batches *r, int k)
{
    return r->bytes + (size_t)k * r->batch_bytes;
}

static void ref_free(ref_batches *r)
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
static int host_reference(pl_config cfg, int epochs, ref_batches *out)
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
static int host_reference_repeating(pl_config cfg, ref_batches *out)
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
static size_t bytes_differing(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += a[i] != b[i];
    return d;
}

/* Clock cycles of device 0 in about ms milliseconds, for a spinning
 * kernel; 0 if the clock rate cannot be read. */
static long long cycles_in_ms(int ms)
{
    int rate_khz = 0;
    if (cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0) !=
        cudaSuccess)
        return 0;
    return (long long)rate_khz * ms;
}

/* ---- the driver's context calls, reached through the runtime as pinload
 * reaches them (libcuda is not linked) ---- */

typedef struct driver {
    PFN_cuDevicePrimaryCtxGetState_v7000 primary_state;
    PFN_cuDevicePrimaryCtxRetain_v7000 primary_retain;
    PFN_cuDevicePrimaryCtxRelease_v11000 primary_release;
    PFN_cuCtxDestroy_v4000 ctx_destroy;
    PFN_cuCtxGetCurrent_v4000 ctx_get_current;
    PFN_cuCtxPushCurrent_v4000 ctx_push;
    PFN_cuCtxPopCurrent_v4000 ctx_pop;
} driver;

/* The driver function `name` with its ABI as of CUDA `version`, or NULL. */
static void *driver_fn(const char *name, unsigned version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion(
        name, &fn, version, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return fn;
}

static int driver_load(driver *d)
{
    d->primary_state = (PFN_cuDevicePrimaryCtxGetState_v7000)driver_fn(
        "cuDevicePrimaryCtxGetState", 12000);
    d->primary_retain = (PFN_cuDevicePrimaryCtxRetain_v7000)driver_fn(
        "cuDevicePrimaryCtxRetain", 12000);
    d->primary_release = (PFN_cuDevicePrimaryCtxRelease_v11000)driver_fn(
        "cuDevicePrimaryCtxRelease", 12000);
    d->ctx_destroy = (PFN_cuCtxDestroy_v4000)driver_fn("cuCtxDestroy", 12000);
    d->ctx_get_current =
        (PFN_cuCtxGetCurrent_v4000)driver_fn("cuCtxGetCurrent", 12000);
    d->ctx_push =
        (PFN_cuCtxPushCurrent_v4000)driver_fn("cuCtxPushCurrent", 12000);
    d->ctx_pop = (PFN_cuCtxPopCurrent_v4000)driver_fn("cuCtxPopCurrent", 12000);
    return d->primary_state && d->primary_retain && d->primary_release &&
                   d->ctx_destroy && d->ctx_get_current && d->ctx_push &&
                   d->ctx_pop
               ? 0
               : -1;
}

/* The calling thread's current context ("If no context is bound to the
 * calling CPU thread then *pctx is set to NULL", cuCtxGetCurrent); a
 * pointer no context has if the call fails. */
static CUcontext current_context(const driver *d)
{
    CUcontext c = NULL;
    if (d->ctx_get_current(&c) != CUDA_SUCCESS)
        return (CUcontext)(uintptr_t)-1;
    return c;
}

/* Whether device dev's primary context is active in this process: 1, 0,
 * or -1 if the driver cannot say. */
static int primary_active(const driver *d, int dev)
{
    unsigned flags = 0;
    int active = -1;
    if (d->primary_state(dev, &flags, &active) != CUDA_SUCCESS)
        return -1;
    return active;
}

/* A context of our own on device 0, made current ("Creates a new CUDA
 * context and associates it with the calling thread", cuCtxCreate):
 * CUDA 12.5's form with no creation parameters, as CUDA's own samples call
 * it; the older form where a driver refuses that. */
static CUresult context_create(CUcontext *ctx)
{
    CUresult r = CUDA_ERROR_NOT_FOUND;
    PFN_cuCtxCreate_v12050 v4 =
        (PFN_cuCtxCreate_v12050)driver_fn("cuCtxCreate", 12050);
    if (v4)
        r = v4(ctx, NULL, 0, 0);
    if (r != CUDA_SUCCESS) {
        PFN_cuCtxCreate_v3020 v2 =
            (PFN_cuCtxCreate_v3020)driver_fn("cuCtxCreate", 3020);
        if (v4)
            printf("  cuCtxCreate (12.5's form): driver error %d", (int)r);
        else
            printf("  cuCtxCreate (12.5's form): not found");
        printf("; %s\n", v2 ? "trying the CUDA 3.2 form" : "no older form");
        if (v2)
            r = v2(ctx, 0, 0);
    }
    return r;
}

/* ---- the CUDA backend delivers the host backend's bytes ---- */

static outcome cuda_backend_pins_the_ring(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    pl_config cfg = base_config(data);
    cfg.device = 0;
    pl_loader *l = NULL;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    pl_stats st;
    pl_loader_stats(l, &st);
    CHECK(info.backend == PL_BACKEND_CUDA, "backend %d", (int)info.backend);
    CHECK(info.device == 0, "device %d", info.device);
    CHECK(info.pinned == 1, "ring not pinned");
    CHECK(st.pinned_bytes == (uint64_t)cfg.prefetch * info.batch_bytes,
          "pinned_bytes %llu", (unsigned long long)st.pinned_bytes);
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* The NUMA node of device 0's slot, read here as pinload should read it
 * (sysfs, from the bus id), or -1. */
static int sysfs_node_of_device0(void)
{
    char bus[32], path[128], line[16] = "";
    unsigned d, b, s, f;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess ||
        sscanf(bus, "%x:%x:%x.%x", &d, &b, &s, &f) != 4)
        return -1;
    snprintf(path, sizeof path,
             "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", d, b, s, f);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    const int ok = fgets(line, sizeof line, fp) != NULL;
    fclose(fp);
    return ok ? atoi(line) : -1;
}

/* The notices of a loader, kept for a failing check to print. */
static void keep_notices(void *ctx, pl_log_level level, const char *msg)
{
    (void)level;
    char *buf = ctx;
    const size_t n = strlen(buf);
    snprintf(buf + n, 4096 - n, "  %s\n", msg);
}

/* pl_info says the GPU's node as sysfs does; the ring and keep_host's
 * mirrors are placed on it (a mirror's page, asked with move_pages, lies
 * there where the kernel can tell), and create leaves the calling thread's
 * memory policy as it found it. On one node there is nothing to place. */
static outcome host_memory_on_the_gpus_numa_node(const char *data,
                                                 const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    static char notices[4096];
    notices[0] = '\0';
    const int want = sysfs_node_of_device0();
    pl_config cfg = base_config(data);
    cfg.device = 0;
    cfg.keep_host = 1;
    cfg.log = keep_notices;
    cfg.log_ctx = notices;
    pl_loader *l = NULL;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    printf("  sysfs: node %d; pl_info: gpu_numa_node %d, numa_node %d\n%s",
           want, info.gpu_numa_node, info.numa_node, notices);
    CHECK(info.gpu_numa_node == want, "gpu_numa_node %d, sysfs %d",
          info.gpu_numa_node, want);
    int mode = -1;
    CHECK(syscall(SYS_get_mempolicy, &mode, NULL, 0ul, NULL, 0ul) == 0 &&
              mode == MPOL_DEFAULT,
          "the caller's policy is %d after create", mode);
    if (want < 0) {
        CHECK(info.numa_node == -1, "numa_node %d", info.numa_node);
        result = SKIPPED;
        snprintf(skip_reason, sizeof skip_reason,
                 "sysfs gives device 0 no NUMA node (one node): nothing to "
                 "place");
        goto done;
    }
    CHECK(info.numa_node == want, "ring on node %d, not the GPU's %d",
          info.numa_node, want);
    const pl_batch *b;
    CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());
    void *page = (void *)((uintptr_t)b->host & ~(uintptr_t)4095);
    int status = -1;
    const long r = syscall(SYS_move_pages, 0, 1ul, &page, NULL, &status, 0);
    printf("  the mirror's first page: move_pages %ld, status %d\n", r, status);
    CHECK(r != 0 || status < 0 || status == want,
          "the mirror's page is on node %d, not %d", status, want);
    pl_loader_release(l, b, NULL);
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* Kernels on the caller's stream read each batch after pl_batch_wait; the
 * per-sample sums and the bytes copied back equal the host reference. */
static outcome device_batches_equal_host_reference(pl_config cfg)
{
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    cudaStream_t stream = NULL;
    unsigned long long *sums = NULL, *got = NULL;
    uint8_t *back = NULL;
    if (!host_reference(cfg, 2, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&sums, sizeof *sums * cfg.batch_size));
    back = malloc(info.batch_bytes);
    got = malloc(sizeof *got * cfg.batch_size);
    CHECK(back && got, "out of memory");
    int k = 0;
    for (int e = 0; e < 2; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            CHECK(k < ref.n, "more batches than the host gave");
            CHECK(b->ready != NULL, "no ready event");
            CHECK(pl_batch_wait(b, stream) == 0, "%s", pl_last_error());
            CUDA_OK(cudaMemsetAsync(sums, 0, sizeof *sums * b->count, stream));
            CUDA_OK(gk_sample_sums(stream, b->data, b->count, info.sample_bytes,
                                   sums));
            CUDA_OK(cudaMemcpyAsync(got, sums, sizeof *sums * b->count,
                                    cudaMemcpyDeviceToHost, stream));
            CUDA_OK(cudaMemcpyAsync(back, b->data, b->bytes,
                                    cudaMemcpyDeviceToHost, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            /* Checked before the release: b is the loader's again after
             * it, and may already describe the next batch. */
            CHECK(b->bytes == ref.size[k], "batch %d size %zu, host %zu", k,
                  b->bytes, ref.size[k]);
            CHECK(memcmp(back, ref_bytes(&ref, k), b->bytes) == 0,
                  "batch %d: %zu bytes differ from the host backend's", k,
                  bytes_differing(back, ref_bytes(&ref, k), b->bytes));
            for (int i = 0; i < b->count; i++) {
                unsigned long long want = 0;
                const uint8_t *s = ref_bytes(&ref, k) + i * info.sample_bytes;
                for (size_t j = 0; j < info.sample_bytes; j++)
                    want += s[j];
                CHECK(got[i] == want,
                      "batch %d sample %d: kernel sum %llu, want %llu", k, i,
                      got[i], want);
            }
            CHECK(pl_loader_release(l, b, stream) == 0, "%s", pl_last_error());
            k++;
        }
        CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    }
    CHECK(k == ref.n, "%d batches, host gave %d", k, ref.n);
    result = PASSED;
done:
    pl_loader_destroy(l);
    cudaFree(sums);
    if (stream)
        cudaStreamDestroy(stream);
    free(back);
    free(got);
    ref_free(&ref);
    return result;
}

static outcome u8_pinned(const char *data, const void *arg)
{
    (void)arg;
    return device_batches_equal_host_reference(base_config(data));
}

static outcome f32_train_pageable(const char *data, const void *arg)
{
    (void)arg;
    pl_config cfg = base_config(data);
    cfg.format = PL_FORMAT_F32_NCHW;
    cfg.gpu_normalize = 0; /* the CPU path; the GPU one is tested below */
    cfg.augment = PL_AUGMENT_TRAIN;
    cfg.memory = PL_MEMORY_PAGEABLE;
    cfg.device_buffers = 3;
    return device_batches_equal_host_reference(cfg);
}

/* Float output normalised on the GPU from uint8: the same bytes as the
 * host backend's CPU normalisation, and only uint8 crosses the bus. */
typedef struct float_case {
    pl_format format;
    int channels_last;
} float_case;

static outcome gpu_normalize_matches_host(const char *data, const void *arg)
{
    const float_case *fc = arg;
    outcome result = FAILED;
    pl_loader *l = NULL;
    pl_config cfg = base_config(data);
    cfg.format = fc->format;
    cfg.channels_last = fc->channels_last;
    cfg.augment = PL_AUGMENT_TRAIN;
    pl_config probe = cfg;
    probe.device = 0;
    CHECK(pl_loader_create(&probe, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    pl_loader_destroy(l);
    l = NULL;
    CHECK(info.gpu_normalize == 1,
          "float output not normalised on the GPU (built without nvcc?)");
    if (device_batches_equal_host_reference(cfg) != PASSED)
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    const pl_batch *b;
    uint64_t out_bytes = 0;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        out_bytes += b->bytes;
        pl_loader_release(l, b, NULL);
    }
    CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    pl_stats st;
    pl_loader_stats(l, &st);
    const uint64_t per = fc->format == PL_FORMAT_F32_NCHW ? 4 : 2;
    CHECK(st.bytes_copied * per == out_bytes,
          "copied %llu bytes for %llu delivered",
          (unsigned long long)st.bytes_copied, (unsigned long long)out_bytes);
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* channels_last: the kernel's interleaved writes, every float format. */
static outcome gpu_normalize_channels_last(const char *data, const void *arg)
{
    (void)arg;
    static const float_case cases[] = {{PL_FORMAT_F32_NCHW, 1},
                                       {PL_FORMAT_F16_NCHW, 1},
                                       {PL_FORMAT_BF16_NCHW, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (gpu_normalize_matches_host(data, &cases[i]) != PASSED)
            return FAILED;
    return PASSED;
}

/* Under SUBSTITUTE a bad sample is all zeros on the GPU path too, not the
 * LUT's -mean/std of zero bytes. */
static outcome gpu_normalize_substitutes_zeros(const char *data,
                                               const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    char bad[512];
    snprintf(bad, sizeof bad, "%s/classb/bad.jpg", data);
    FILE *f = fopen(bad, "wb");
    CHECK(f && fputs("BM not a JPEG", f) >= 0 && fclose(f) == 0,
          "cannot write %s", bad);
    pl_config cfg = base_config(data);
    cfg.format = PL_FORMAT_F32_NCHW;
    cfg.on_error = PL_ON_ERROR_SUBSTITUTE;
    result = device_batches_equal_host_reference(cfg);
done:
    remove(bad);
    return result;
}

/* ---- release orders reuse ---- */

/* With one device buffer, the next batch must not land in it before the
 * caller's slow kernel has read the current one: release is stream-ordered
 * and the host never waits. */
static outcome release_orders_buffer_reuse(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    cudaStream_t stream = NULL;
    uint8_t **copies = NULL, *h = NULL;
    int ncopies = 0;
    pl_config cfg = base_config(data);
    cfg.device_buffers = 1;
    cfg.prefetch = 3;
    if (!host_reference(cfg, 1, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const long long cycles = cycles_in_ms(20);
    CHECK(cycles > 0, "no clock rate for device 0");
    copies = calloc((size_t)ref.n, sizeof *copies);
    h = malloc(ref.batch_bytes);
    CHECK(copies && h, "out of memory");
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(ncopies < ref.n, "more batches than the host gave");
        CUDA_OK(cudaMalloc((void **)&copies[ncopies], b->bytes));
        CHECK(pl_batch_wait(b, stream) == 0, "%s", pl_last_error());
        CUDA_OK(
            gk_slow_copy(stream, b->data, copies[ncopies], b->bytes, cycles));
        ncopies++;
        CHECK(pl_loader_release(l, b, stream) == 0, "%s", pl_last_error());
    }
    CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(ncopies == ref.n, "%d batches, host gave %d", ncopies, ref.n);
    for (int k = 0; k < ncopies; k++) {
        CUDA_OK(cudaMemcpy(h, copies[k], ref.size[k], cudaMemcpyDeviceToHost));
        CHECK(memcmp(h, ref_bytes(&ref, k), ref.size[k]) == 0,
              "batch %d was overwritten before the caller's kernel read it "
              "(%zu bytes differ)",
              k, bytes_differing(h, ref_bytes(&ref, k), ref.size[k]));
    }
    result = PASSED;
done:
    if (stream)
        cudaStreamSynchronize(stream);
    pl_loader_destroy(l);
    for (int k = 0; k < ncopies; k++)
        cudaFree(copies[k]);
    free(copies);
    free(h);
    if (stream)
        cudaStreamDestroy(stream);
    ref_free(&ref);
    return result;
}

static outcome keep_host_mirrors_the_batch(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    pl_config cfg = base_config(data);
    if (!host_reference(cfg, 1, &ref))
        goto done;
    cfg.device = 0;
    cfg.keep_host = 1;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    const pl_batch *b;
    int k = 0, rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n, "more batches than the host gave");
        CHECK(b->host != NULL && b->host != b->data, "no host mirror");
        struct cudaPointerAttributes attr;
        CUDA_OK(cudaPointerGetAttributes(&attr, b->host));
        CHECK(attr.type == cudaMemoryTypeHost, "mirror is not pinned host");
        CHECK(memcmp(b->host, ref_bytes(&ref, k), b->bytes) == 0,
              "batch %d host mirror differs", k);
        pl_loader_release(l, b, NULL);
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.n, "rc %d, %d batches", rc, k);
    result = PASSED;
done:
    pl_loader_destroy(l);
    ref_free(&ref);
    return result;
}

/* keep_host's mirror is the caller's until the work queued on the release
 * stream is done, as the device buffer is: a copy out of b->host queued
 * behind a slow kernel, then pl_loader_release on that stream, must read
 * that batch's bytes even though the caller goes on at once taking and
 * releasing the next batches (on another stream) and one device buffer
 * (and so one mirror) serves them all. */
static outcome keep_host_mirror_waits_for_the_release_stream(const char *data,
                                                             const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    cudaStream_t slow = NULL, fast = NULL;
    uint8_t **copies = NULL, *h = NULL;
    pl_config cfg = base_config(data);
    cfg.keep_host = 1;
    cfg.device_buffers = 1;
    cfg.prefetch = 2;
    if (!host_reference(cfg, 2, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    CUDA_OK(cudaStreamCreateWithFlags(&slow, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&fast, cudaStreamNonBlocking));
    const long long cycles = cycles_in_ms(20);
    CHECK(cycles > 0, "no clock rate for device 0");
    copies = calloc((size_t)ref.n, sizeof *copies);
    h = malloc(ref.batch_bytes);
    CHECK(copies && h, "out of memory");
    /* Every third batch is read through the mirror, allocated beforehand
     * (cudaMalloc may synchronise, which would hide the race). */
    for (int k = 0; k < ref.n; k += 3)
        CUDA_OK(cudaMalloc((void **)&copies[k], ref.batch_bytes));
    int k = 0;
    for (int e = 0; e < 2; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            CHECK(k < ref.n, "more batches than the host gave");
            CHECK(b->host != NULL && b->host != b->data, "no host mirror");
            if (!copies[k]) {
                CHECK(pl_loader_release(l, b, fast) == 0, "%s",
                      pl_last_error());
                k++;
                continue;
            }
            /* A pageable mirror would be read at the call (staged), and
             * the test would show nothing. */
            struct cudaPointerAttributes attr;
            CUDA_OK(cudaPointerGetAttributes(&attr, b->host));
            CHECK(attr.type == cudaMemoryTypeHost,
                  "the mirror is not pinned host memory (type %d)",
                  (int)attr.type);
            CUDA_OK(gk_slow_copy(slow, NULL, NULL, 0, cycles));
            CUDA_OK(cudaMemcpyAsync(copies[k], b->host, b->bytes,
                                    cudaMemcpyHostToDevice, slow));
            CHECK(pl_loader_release(l, b, slow) == 0, "%s", pl_last_error());
            k++;
        }
        CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    }
    CHECK(k == ref.n, "%d batches, host gave %d", k, ref.n);
    CUDA_OK(cudaStreamSynchronize(slow));
    for (int i = 0; i < ref.n; i += 3) {
        CUDA_OK(cudaMemcpy(h, copies[i], ref.size[i], cudaMemcpyDeviceToHost));
        CHECK(memcmp(h, ref_bytes(&ref, i), ref.size[i]) == 0,
              "batch %d: the copy queued from b->host before its release read "
              "a refilled mirror (%zu of %zu bytes differ)",
              i, bytes_differing(h, ref_bytes(&ref, i), ref.size[i]),
              ref.size[i]);
    }
    result = PASSED;
done:
    if (slow)
        cudaStreamSynchronize(slow);
    pl_loader_destroy(l);
    for (int i = 0; copies && i < ref.n; i++)
        cudaFree(copies[i]);
    free(copies);
    free(h);
    if (slow)
        cudaStreamDestroy(slow);
    if (fast)
        cudaStreamDestroy(fast);
    ref_free(&ref);
    return result;
}

static outcome destroy_with_batches_held(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    pl_loader *l = NULL;
    pl_config cfg = base_config(data);
    cfg.device = 0;
    for (int held = 0; held <= 2; held++) {
        CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
        for (int i = 0; i < held; i++) {
            const pl_batch *b;
            CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());
        }
        pl_loader_destroy(l);
        l = NULL;
    }
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* ---- the loader's device and context, not the caller's (issue 29) ---- */

/* A loader on device 1 from a thread on device 0: pl_batch_wait(b, NULL)
 * must order device 1's legacy stream, on which a copy then reads every
 * batch; the bytes equal the host backend's, the caller's thread stays on
 * device 0 and no error is left pending. Needs two GPUs. */
static outcome second_device_wait_on_null(const char *data, const void *arg)
{
    (void)arg;
    const int n = device_count();
    if (n < 2)
        SKIP("needs two CUDA devices, %d present", n);
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    uint8_t *back = NULL;
    pl_config cfg = base_config(data);
    cfg.width = 160; /* bigger copies: a missed wait shows */
    cfg.height = 160;
    if (!host_reference(cfg, 1, &ref))
        goto done;
    CUDA_OK(cudaSetDevice(0));
    cfg.device = 1;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    back = malloc(ref.batch_bytes);
    CHECK(back, "out of memory");
    int k = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n, "more batches than the host gave");
        int dev = -1;
        CUDA_OK(cudaGetDevice(&dev));
        CHECK(dev == 0, "the caller's thread was moved to device %d", dev);
        CHECK(pl_batch_wait(b, NULL) == 0, "%s", pl_last_error());
        CUDA_OK(cudaSetDevice(1));
        uint8_t *copy = NULL;
        CUDA_OK(cudaMallocAsync((void **)&copy, b->bytes, NULL));
        CUDA_OK(cudaMemcpyAsync(copy, b->data, b->bytes,
                                cudaMemcpyDeviceToDevice, NULL));
        const cudaError_t e =
            cudaMemcpy(back, copy, b->bytes, cudaMemcpyDeviceToHost);
        CUDA_OK(cudaFreeAsync(copy, NULL));
        CUDA_OK(e);
        CUDA_OK(cudaSetDevice(0));
        CHECK(memcmp(back, ref_bytes(&ref, k), b->bytes) == 0,
              "batch %d: device 1's legacy stream read it before its copy (%zu "
              "bytes differ)",
              k, bytes_differing(back, ref_bytes(&ref, k), b->bytes));
        CHECK(pl_loader_release(l, b, NULL) == 0, "%s", pl_last_error());
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.n, "rc %d, %d batches", rc, k);
    const cudaError_t pending = cudaGetLastError();
    CHECK(pending == cudaSuccess, "an error left pending: %s",
          cudaGetErrorName(pending));
    result = PASSED;
done:
    pl_loader_destroy(l);
    cudaSetDevice(0);
    free(back);
    ref_free(&ref);
    return result;
}

/* The one-GPU form of the above: the caller's thread has a context of its
 * own on device 0 current (cuCtxCreate), not the primary one the loader
 * retains. pl_batch_wait(b, NULL) must order the legacy stream of the
 * loader's context, on which the test then reads every batch (with that
 * context pushed), and pl_loader_release(l, b, NULL) its release; every
 * call leaves the caller's context current and no error pending. */
static outcome
foreign_context_wait_and_release_order_the_loaders_context(const char *data,
                                                           const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    driver drv;
    CUcontext mine = NULL, primary = NULL, cur = NULL;
    int retained = 0;
    pl_loader *l = NULL;
    uint8_t *back = NULL;
    cudaError_t e;
    pl_config cfg = base_config(data);
    cfg.width = 160; /* bigger copies: a missed wait shows */
    cfg.height = 160;
    if (!host_reference(cfg, 1, &ref))
        goto done;
    CHECK(driver_load(&drv) == 0,
          "the driver's context calls are not available through the runtime");
    const CUresult cr = context_create(&mine);
    CHECK(cr == CUDA_SUCCESS && mine,
          "cuCtxCreate on device 0: driver error %d", (int)cr);
    CHECK(drv.primary_retain(&primary, 0) == CUDA_SUCCESS,
          "cuDevicePrimaryCtxRetain(0) failed");
    retained = 1;
    CHECK(primary != mine, "cuCtxCreate gave the primary context");
    cur = current_context(&drv);
    CHECK(cur == mine, "current %p, the created context %p", (void *)cur,
          (void *)mine);
    back = malloc(ref.batch_bytes);
    CHECK(back, "out of memory");
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    cur = current_context(&drv);
    CHECK(cur == mine, "after create: current %p, the caller's %p", (void *)cur,
          (void *)mine);
    printf("  caller's context %p, device 0's primary %p\n", (void *)mine,
           (void *)primary);
    int k = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n, "more batches than the host gave");
        CHECK(pl_batch_wait(b, NULL) == 0, "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == mine,
              "batch %d: after pl_batch_wait the current context is %p, the "
              "caller's was %p",
              k, (void *)cur, (void *)mine);
        e = cudaGetLastError();
        CHECK(e == cudaSuccess, "batch %d: pl_batch_wait left %s pending", k,
              cudaGetErrorName(e));
        /* Read on the loader's context's legacy stream: after the wait. */
        CUcontext popped = NULL;
        CHECK(drv.ctx_push(primary) == CUDA_SUCCESS, "cuCtxPushCurrent");
        e = cudaMemcpy(back, b->data, b->bytes, cudaMemcpyDeviceToHost);
        const CUresult pr = drv.ctx_pop(&popped);
        CHECK(pr == CUDA_SUCCESS && popped == primary,
              "cuCtxPopCurrent: %d, popped %p", (int)pr, (void *)popped);
        CUDA_OK(e);
        CHECK(memcmp(back, ref_bytes(&ref, k), b->bytes) == 0,
              "batch %d: the loader's legacy stream read it before its copy "
              "(%zu bytes differ)",
              k, bytes_differing(back, ref_bytes(&ref, k), b->bytes));
        CHECK(pl_loader_release(l, b, NULL) == 0, "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == mine,
              "batch %d: after pl_loader_release the current context is %p, "
              "the caller's was %p",
              k, (void *)cur, (void *)mine);
        e = cudaGetLastError();
        CHECK(e == cudaSuccess, "batch %d: pl_loader_release left %s pending",
              k, cudaGetErrorName(e));
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.n, "rc %d (%s), %d batches of %d", rc,
          pl_last_error(), k, ref.n);
    pl_loader_destroy(l);
    l = NULL;
    cur = current_context(&drv);
    CHECK(cur == mine, "after destroy: current %p, the caller's %p",
          (void *)cur, (void *)mine);
    result = PASSED;
done:
    pl_loader_destroy(l);
    free(back);
    if (retained)
        drv.primary_release(0);
    if (mine) /* popped too: the thread's previous context is current */
        drv.ctx_destroy(mine);
    ref_free(&ref);
    return result;
}

typedef struct stats_probe {
    pl_loader *l;
    const driver *drv;
    int rc;
    CUcontext after; /* the stats thread's current context afterwards */
} stats_probe;

static void *stats_thread(void *arg)
{
    stats_probe *p = arg;
    pl_stats st;
    p->rc = pl_loader_stats(p->l, &st);
    p->after = current_context(p->drv);
    return NULL;
}

/* Run in a fresh process (main's --fresh-thread): a thread that never
 * chose a device runs a loader on `device` through every call (next, wait
 * and release on NULL and the per-thread stream, stats from another
 * thread, destroy). Neither thread has a current context after any call:
 * pinload pushes its own and pops it. The loader's primary context is
 * active while it lives (it retains it); for a loader on device 1, GPU 0's
 * primary context must never be active (since CUDA 12, cudaSetDevice(0)
 * would have made it). */
static outcome fresh_thread_child(const char *data, int device)
{
    outcome result = FAILED;
    driver drv;
    pl_loader *l = NULL;
    CUcontext cur;
    CHECK(driver_load(&drv) == 0,
          "the driver's context calls are not available through the runtime");
    cur = current_context(&drv);
    CHECK(cur == NULL, "a fresh thread has context %p before any call",
          (void *)cur);
    pl_config cfg = base_config(data);
    cfg.device = device;
    CHECK(pl_loader_create(&cfg, &l) == 0, "create: %s", pl_last_error());
    cur = current_context(&drv);
    CHECK(cur == NULL, "after create: current context %p", (void *)cur);
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(pl_batch_wait(b, NULL) == 0, "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == NULL, "batch %d: after pl_batch_wait: current %p", n,
              (void *)cur);
        CHECK(pl_loader_release(l, b, n % 2 ? NULL : cudaStreamPerThread) == 0,
              "%s", pl_last_error());
        cur = current_context(&drv);
        CHECK(cur == NULL, "batch %d: after pl_loader_release: current %p", n,
              (void *)cur);
        stats_probe probe = {l, &drv, -1, (CUcontext)(uintptr_t)-1};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, stats_thread, &probe) == 0,
              "pthread_create");
        pthread_join(t, NULL);
        CHECK(probe.rc == 0, "pl_loader_stats from another thread: %d",
              probe.rc);
        CHECK(probe.after == NULL,
              "the stats thread has context %p after pl_loader_stats",
              (void *)probe.after);
        n++;
    }
    CHECK(rc == PL_EPOCH_END && n > 0, "rc %d (%s) after %d batches", rc,
          pl_last_error(), n);
    const int live = primary_active(&drv, device);
    pl_loader_destroy(l);
    l = NULL;
    cur = current_context(&drv);
    const int after = primary_active(&drv, device);
    const int gpu0 = device != 0 ? primary_active(&drv, 0) : -2;
    printf("  device %d's primary context active: %d while the loader ran, %d "
           "after destroy (either may be); current context after destroy %p",
           device, live, after, (void *)cur);
    if (device != 0)
        printf("; GPU 0's primary context active: %d", gpu0);
    printf("\n");
    CHECK(live == 1, "the loader's retained primary context not active: %d",
          live);
    CHECK(cur == NULL, "after destroy: current context %p", (void *)cur);
    CHECK(device == 0 || gpu0 == 0,
          "a loader on device %d made GPU 0's primary context active (%d)",
          device, gpu0);
    const cudaError_t e = cudaGetLastError();
    CHECK(e == cudaSuccess, "an error left pending: %s", cudaGetErrorName(e));
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* Runs fresh_thread_child in a new process: fork, then exec at once (CUDA
 * is not fork-safe). */
static outcome run_fresh_child(const char *data, int device)
{
    outcome result = FAILED;
    char dev[16];
    snprintf(dev, sizeof dev, "%d", device);
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_cuda", "--fresh-thread", dev, data,
              (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0, "fork failed");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child (a loader on device %d from a thread that never chose "
          "one) failed: %s %d",
          device, WIFEXITED(status) ? "exit status" : "wait status",
          WIFEXITED(status) ? WEXITSTATUS(status) : status);
    result = PASSED;
done:
    return result;
}

static outcome no_context_on_gpu0_for_a_loader_on_device_1(const char *data,
                                                           const void *arg)
{
    (void)arg;
    const int n = device_count();
    if (n < 2)
        SKIP("needs two CUDA devices, %d present", n);
    return run_fresh_child(data, 1);
}

/* The one-GPU form: a loader on device 0 leaves a thread that never chose
 * a device with no current context. */
static outcome
no_context_left_on_a_thread_that_never_chose_a_device(const char *data,
                                                      const void *arg)
{
    (void)arg;
    return run_fresh_child(data, 0);
}

/* ---- CUDA graph capture beside a running loader ---- */

/* The loaders a capture runs beside, one row each. */
typedef struct loader_option {
    const char *name;
    int32_t memory, keep_host, format;
} loader_option;

static const loader_option loader_options[] = {
    {"pinned", PL_MEMORY_PINNED, 0, PL_FORMAT_U8_NHWC},
    {"pageable", PL_MEMORY_PAGEABLE, 0, PL_FORMAT_U8_NHWC},
    {"keep_host", PL_MEMORY_PINNED, 1, PL_FORMAT_U8_NHWC},
    {"gpu_f32", PL_MEMORY_PINNED, 0, PL_FORMAT_F32_NCHW},
};

typedef struct capture_mode {
    const char *name;
    enum cudaStreamCaptureMode mode;
} capture_mode;

static const capture_mode capture_modes[] = {
    {"global", cudaStreamCaptureModeGlobal},
    {"thread_local", cudaStreamCaptureModeThreadLocal},
    {"relaxed", cudaStreamCaptureModeRelaxed},
};

typedef struct capture_case {
    const loader_option *opt;
    const capture_mode *mode;
} capture_case;

#define GRAPH_N 4096u /* the captured kernels' elements */

/* What the captured sequence leaves in out[i]: iota(5), then *3 + 1, then
 * *1 + 7. */
static uint32_t graph_value(uint32_t i)
{
    return (5u + i) * 3u + 1u + 7u;
}

static cudaError_t queue_graph_work(cudaStream_t s, uint32_t *out)
{
    cudaError_t e = gk_iota(s, out, GRAPH_N, 5);
    if (e == cudaSuccess)
        e = gk_scale_add(s, out, GRAPH_N, 3, 1);
    if (e == cudaSuccess)
        e = gk_scale_add(s, out, GRAPH_N, 1, 7);
    return e;
}

/* Instantiates and launches the captured graph on s, then checks what
 * its kernels wrote to out (got: GRAPH_N host words). [out] *exec. */
static int graph_runs(cudaGraph_t graph, cudaGraphExec_t *exec, cudaStream_t s,
                      const uint32_t *out, uint32_t *got)
{
    int ok = 0;
    CUDA_OK(cudaGraphInstantiate(exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(*exec, s));
    CUDA_OK(cudaMemcpyAsync(got, out, GRAPH_N * sizeof *out,
                            cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaStreamSynchronize(s));
    for (uint32_t i = 0; i < GRAPH_N; i++)
        CHECK(got[i] == graph_value(i), "the graph wrote %u at %u, want %u",
              got[i], i, graph_value(i));
    ok = 1;
done:
    return ok;
}

/* A thread of the test taking every batch on its own stream, checking its
 * bytes (and b->host's) against the reference, until told to stop or a
 * check fails. */
typedef struct consumer {
    pl_loader *l;
    const ref_batches *ref; /* one epoch; every epoch is alike */
    cudaStream_t stream;
    uint8_t *back; /* [ref->batch_bytes] */
    atomic_int stop, done, failed;
    atomic_long delivered;
    char why[300]; /* written before failed is set */
} consumer;

/* Records why the consumer stopped (read by the main thread once `failed`
 * is set); returns -1. */
__attribute__((format(printf, 2, 3))) static int
consumer_fail(consumer *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    atomic_store(&c->failed, 1);
    return -1;
}

static int consume_one(consumer *c, const pl_batch *b)
{
    const long n = atomic_load(&c->delivered);
    const ref_batches *r = c->ref;
    const int k = (int)b->index;
    if (pl_batch_wait(b, c->stream) != 0)
        return consumer_fail(c, "batch %ld: pl_batch_wait: %s", n,
                             pl_last_error());
    /* The test's own check (a copy back and a stream synchronisation) is
     * among the "potentially unsafe API calls" a thread in the default
     * global mode may not make while another thread captures in global
     * mode: it would spoil the capture itself. Relaxed for that check
     * alone, pushed and popped as cudaThreadExchangeStreamCaptureMode
     * advises, so that pinload's calls on this thread run in the mode a
     * user's data thread has. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t e = cudaThreadExchangeStreamCaptureMode(&mode);
    if (e == cudaSuccess) {
        e = cudaMemcpyAsync(c->back, b->data, b->bytes, cudaMemcpyDeviceToHost,
                            c->stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(c->stream);
        const cudaError_t back = cudaThreadExchangeStreamCaptureMode(&mode);
        if (e == cudaSuccess)
            e = back;
    }
    if (e != cudaSuccess)
        return consumer_fail(c, "batch %ld: reading it back: %s", n,
                             cudaGetErrorName(e));
    if (k < 0 || k >= r->n || b->bytes != r->size[k] || b->count != r->count[k])
        return consumer_fail(c,
                             "batch %ld: index %d of %d, %zu bytes, %d "
                             "samples: unlike the host backend's",
                             n, k, r->n, b->bytes, (int)b->count);
    if (memcmp(c->back, ref_bytes(r, k), b->bytes) != 0)
        return consumer_fail(
            c, "batch %ld (index %d): %zu bytes differ from the host backend's",
            n, k, bytes_differing(c->back, ref_bytes(r, k), b->bytes));
    if (b->host && memcmp(b->host, ref_bytes(r, k), b->bytes) != 0)
        return consumer_fail(c,
                             "batch %ld (index %d): b->host differs from the "
                             "host backend's bytes",
                             n, k);
    if (memcmp(b->indices, r->indices + (size_t)k * r->batch_size,
               (size_t)b->count * sizeof *b->indices) != 0)
        return consumer_fail(
            c,
            "batch %ld (index %d): its samples differ from the host backend's",
            n, k);
    return 0;
}

/* Takes batches in the thread's default capture mode (global): pinload's
 * calls on a caller's thread (next, wait, release) must be safe beside
 * another thread's capture, as a user's data thread needs. */
static void *consume(void *arg)
{
    consumer *c = arg;
    while (!atomic_load(&c->failed) && !atomic_load(&c->stop)) {
        const pl_batch *b;
        const int rc = pl_loader_next(c->l, &b);
        if (rc == PL_EPOCH_END)
            continue;
        if (rc != 0) {
            consumer_fail(c, "batch %ld: pl_loader_next: %s",
                          atomic_load(&c->delivered), pl_last_error());
            break;
        }
        const int bad = consume_one(c, b);
        if (pl_loader_release(c->l, b, c->stream) != 0 && !bad)
            consumer_fail(c, "batch %ld: pl_loader_release: %s",
                          atomic_load(&c->delivered), pl_last_error());
        if (!atomic_load(&c->failed))
            atomic_fetch_add(&c->delivered, 1);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

/* The consumer's count once it reaches `want`, stops, or ms pass. */
static long wait_delivered(consumer *c, long want, int ms)
{
    for (int i = 0;
         i < ms && !atomic_load(&c->done) && atomic_load(&c->delivered) < want;
         i++)
        sleep_ms(1);
    return atomic_load(&c->delivered);
}

/* Stops and joins the consumer. One stuck in pl_loader_next for 10 s is
 * woken by destroying the loader (it returns PL_ECLOSED): *l is then
 * NULL. */
static void consumer_stop(consumer *c, pthread_t t, pl_loader **l)
{
    atomic_store(&c->stop, 1);
    for (int i = 0; i < 10000 && !atomic_load(&c->done); i++)
        sleep_ms(1);
    if (!atomic_load(&c->done)) {
        printf("  the consumer is stuck: destroying the loader\n");
        pl_loader_destroy(*l);
        *l = NULL;
    }
    pthread_join(t, NULL);
}

/* While a loader delivers batches to another thread of the test, the main
 * thread captures a few kernels on a stream of its own into a graph, in
 * the given mode, and sleeps inside the capture so that the loader's
 * prefetcher copies meanwhile. The capture must end with a graph (nothing
 * the loader's threads did invalidated it), the graph must run and write
 * what the kernels write, and the loader must deliver the host backend's
 * bytes throughout and after. */
static outcome capture_beside_a_loader(const char *data, const void *arg)
{
    const capture_case *cc = arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    consumer c;
    pthread_t thread;
    int started = 0, capturing = 0;
    cudaStream_t s = NULL;
    uint32_t *out = NULL, *got = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    memset(&c, 0, sizeof c);
    pl_config cfg = base_config(data);
    cfg.num_workers = 2;
    cfg.shuffle = 0; /* every epoch alike: checked by index, forever */
    cfg.augment = PL_AUGMENT_EVAL;
    cfg.memory = cc->opt->memory;
    cfg.keep_host = cc->opt->keep_host;
    cfg.format = cc->opt->format;
    if (!host_reference_repeating(cfg, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    CHECK(info.memory == cc->opt->memory, "ring memory %d, asked %d",
          (int)info.memory, (int)cc->opt->memory);
    CHECK(cfg.format == PL_FORMAT_U8_NHWC || info.gpu_normalize == 1,
          "float output not normalised on the GPU (built without nvcc?)");
    CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&out, GRAPH_N * sizeof *out));
    got = malloc(GRAPH_N * sizeof *got);
    c.back = malloc(ref.batch_bytes);
    CHECK(got && c.back, "out of memory");
    /* The kernels once outside the capture: loaded before it (lazy
     * loading would load them at their first launch, inside it). */
    CUDA_OK(queue_graph_work(s, out));
    CUDA_OK(cudaMemsetAsync(out, 0, GRAPH_N * sizeof *out, s));
    CUDA_OK(cudaStreamSynchronize(s));
    c.l = l;
    c.ref = &ref;
    CHECK(pthread_create(&thread, NULL, consume, &c) == 0, "pthread_create");
    started = 1;
    CHECK(wait_delivered(&c, 1, 10000) >= 1, "no batch within 10 s: %s", c.why);

    const long before = atomic_load(&c.delivered);
    CUDA_OK(cudaStreamBeginCapture(s, cc->mode->mode));
    capturing = 1;
    CUDA_OK(queue_graph_work(s, out));
    sleep_ms(80);
    const long during = wait_delivered(&c, before + 3, 3000) - before;
    capturing = 0;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    printf("  %s capture beside a %s loader: %ld batches delivered during it; "
           "cudaStreamEndCapture: %s\n",
           cc->mode->name, cc->opt->name, during, cudaGetErrorName(end));
    CHECK(!atomic_load(&c.failed), "the consumer: %s", c.why);
    CHECK(end == cudaSuccess && graph != NULL,
          "the capture was spoilt: %s (%s)", cudaGetErrorName(end),
          cudaGetErrorString(end));
    CHECK(during >= 3,
          "the loader delivered %ld batches in the capture's 80 ms and 3 s "
          "after, not 3",
          during);
    if (!graph_runs(graph, &exec, s, out, got))
        goto done;

    /* And the loader goes on: two more epochs of the host's bytes. */
    const long at_end = atomic_load(&c.delivered);
    const long want = at_end + 2L * ref.n;
    const long reached = wait_delivered(&c, want, 10000);
    CHECK(!atomic_load(&c.failed), "after the capture, the consumer: %s",
          c.why);
    CHECK(reached >= want, "after the capture: %ld batches, want %ld", reached,
          want);
    consumer_stop(&c, thread, &l);
    started = 0;
    CHECK(!atomic_load(&c.failed), "the consumer: %s", c.why);
    const cudaError_t pending = cudaGetLastError();
    CHECK(pending == cudaSuccess, "an error left pending: %s",
          cudaGetErrorName(pending));
    result = PASSED;
done:
    if (capturing) {
        cudaGraph_t g = NULL;
        (void)cudaStreamEndCapture(s, &g);
        if (g)
            cudaGraphDestroy(g);
    }
    if (started)
        consumer_stop(&c, thread, &l);
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    pl_loader_destroy(l);
    cudaFree(out);
    if (s)
        cudaStreamDestroy(s);
    if (c.stream)
        cudaStreamDestroy(c.stream);
    free(got);
    free(c.back);
    ref_free(&ref);
    (void)cudaGetLastError();
    return result;
}

/* Whether pl_last_error() mentions a capture. */
static int detail_names_capture(void)
{
    return strcasestr(pl_last_error(), "captur") != NULL;
}

/* The first batch of an epoch, b, still held, then the rest of the epoch:
 * each waited for on s, read back (into back) and compared with the
 * reference, and released on s. */
static int finish_epoch(pl_loader *l, const pl_batch *b, cudaStream_t s,
                        const ref_batches *ref, uint8_t *back)
{
    int ok = 0, k = 0, rc = 0;
    do {
        CHECK(k < ref->n, "more batches than the host gave");
        CHECK(pl_batch_wait(b, s) == 0, "batch %d: %s", k, pl_last_error());
        CUDA_OK(cudaMemcpyAsync(back, b->data, b->bytes, cudaMemcpyDeviceToHost,
                                s));
        CUDA_OK(cudaStreamSynchronize(s));
        CHECK(b->bytes == ref->size[k] &&
                  memcmp(back, ref_bytes(ref, k), b->bytes) == 0,
              "batch %d differs from the host backend's", k);
        CHECK(pl_loader_release(l, b, s) == 0, "batch %d: %s", k,
              pl_last_error());
        k++;
    } while ((rc = pl_loader_next(l, &b)) == 0);
    CHECK(rc == PL_EPOCH_END && k == ref->n, "rc %d (%s), %d batches of %d", rc,
          pl_last_error(), k, ref->n);
    ok = 1;
done:
    return ok;
}

/* pl_batch_wait and pl_loader_release on a stream that is capturing
 * cannot do what they promise (a wait or an event recorded into the
 * graph, not now), and must not spoil the capture: they return PL_EINVAL
 * naming the capture, the capture ends with a graph that runs, and the
 * batch, still held, is waited for and released on the stream once it
 * captures no more, with the host backend's bytes; the rest of the epoch
 * follows as usual. */
static outcome capturing_stream_is_refused(const char *data, const void *arg)
{
    const capture_mode *cm = arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    int capturing = 0;
    cudaStream_t s = NULL;
    uint32_t *out = NULL, *got = NULL;
    uint8_t *back = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    const pl_batch *b = NULL;
    cudaError_t e;
    pl_config cfg = base_config(data);
    if (!host_reference(cfg, 1, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc((void **)&out, GRAPH_N * sizeof *out));
    got = malloc(GRAPH_N * sizeof *got);
    back = malloc(ref.batch_bytes);
    CHECK(got && back, "out of memory");
    CUDA_OK(queue_graph_work(s, out)); /* loaded before the capture */
    CUDA_OK(cudaMemsetAsync(out, 0, GRAPH_N * sizeof *out, s));
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());

    CUDA_OK(cudaStreamBeginCapture(s, cm->mode));
    capturing = 1;
    CUDA_OK(gk_iota(s, out, GRAPH_N, 5));
    const int wait_rc = pl_batch_wait(b, s);
    const int wait_named = detail_names_capture();
    printf("  pl_batch_wait on a capturing stream (%s): %d (%s): %s\n",
           cm->name, wait_rc, pl_err_name(wait_rc), pl_last_error());
    e = cudaGetLastError();
    CHECK(e == cudaSuccess, "pl_batch_wait left %s pending",
          cudaGetErrorName(e));
    CUDA_OK(gk_scale_add(s, out, GRAPH_N, 3, 1));
    const int release_rc = pl_loader_release(l, b, s);
    const int release_named = detail_names_capture();
    printf("  pl_loader_release on it: %d (%s): %s\n", release_rc,
           pl_err_name(release_rc), pl_last_error());
    e = cudaGetLastError();
    CHECK(e == cudaSuccess, "pl_loader_release left %s pending",
          cudaGetErrorName(e));
    CUDA_OK(gk_scale_add(s, out, GRAPH_N, 1, 7));
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_OK(cudaStreamIsCapturing(s, &status));
    capturing = 0;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    printf("  capture status before its end: %d (1: active); "
           "cudaStreamEndCapture: %s\n",
           (int)status, cudaGetErrorName(end));
    CHECK(wait_rc == PL_EINVAL && wait_named,
          "pl_batch_wait on a capturing stream: %d, want PL_EINVAL naming the "
          "capture",
          wait_rc);
    CHECK(release_rc == PL_EINVAL && release_named,
          "pl_loader_release on a capturing stream: %d, want PL_EINVAL naming "
          "the capture",
          release_rc);
    CHECK(status == cudaStreamCaptureStatusActive,
          "the capture was invalidated (status %d)", (int)status);
    CHECK(end == cudaSuccess && graph != NULL, "cudaStreamEndCapture: %s",
          cudaGetErrorName(end));
    if (!graph_runs(graph, &exec, s, out, got))
        goto done;
    /* The batch is still held: waited for and released on s, which
     * captures no more, then the rest of the epoch. */
    if (finish_epoch(l, b, s, &ref, back))
        result = PASSED;
done:
    if (capturing) {
        cudaGraph_t g = NULL;
        (void)cudaStreamEndCapture(s, &g);
        if (g)
            cudaGraphDestroy(g);
    }
    if (s)
        cudaStreamSynchronize(s);
    pl_loader_destroy(l); /* a batch still held is given back with it */
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
    cudaFree(out);
    if (s)
        cudaStreamDestroy(s);
    free(got);
    free(back);
    ref_free(&ref);
    (void)cudaGetLastError();
    return result;
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
    capture_case cases[COUNT(capture_modes) * COUNT(loader_options)];
    for (size_t m = 0; m < COUNT(capture_modes); m++)
        for (size_t o = 0; o < COUNT(loader_options); o++) {
            capture_case *cc = &cases[m * COUNT(loader_options) + o];
            cc->mode = &capture_modes[m];
            cc->opt = &loader_options[o];
            char name[128];
            snprintf(name, sizeof name, "graph_capture_%s_beside_a_%s_loader",
                     cc->mode->name, cc->opt->name);
            run(name, capture_beside_a_loader, data, cc);
        }
    for (size_t m = 0; m < COUNT(capture_modes); m++) {
        char name[128];
        snprintf(name, sizeof name,
                 "wait_and_release_on_a_%s_capturing_stream_are_refused",
                 capture_modes[m].name);
        run(name, capturing_stream_is_refused, data, &capture_modes[m]);
    }

    if (nftw(data, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        printf("could not remove %s\n", data);
    printf("%d passed, %d skipped, %d failed\n", n_passed, n_skipped, n_failed);
    return n_failed ? 1 : 0;
}
