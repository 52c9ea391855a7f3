/* CUDA-path tests for pinload: real cudaHostAlloc, copies on the loader's
 * own streams, a kernel on the caller's stream reading each batch, and the
 * release/reuse ordering. The host backend is the reference: every byte a
 * CUDA loader delivers must equal what a host-backend loader delivers for
 * the same configuration. Needs a GPU; prints PASS/FAIL per test. */
#include <cuda.h> /* the driver's types, for cuDevicePrimaryCtxGetState */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "../jpegwrite.h"

#include "pinload.h"

static int failures = 0;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            std::printf("  check failed at line %d: %s: ", __LINE__, #cond);   \
            std::printf(__VA_ARGS__);                                          \
            std::printf("\n");                                                 \
            return false;                                                      \
        }                                                                      \
    } while (0)

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        CHECK(e_ == cudaSuccess, "%s", cudaGetErrorString(e_));                \
    } while (0)

static void run(const char *name, bool (*fn)(const char *), const char *data)
{
    const bool ok = fn(data);
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", name);
    if (!ok)
        failures++;
}

/* ---- a small generated dataset ---- */

static void write_jpeg(const std::string &path, int w, int h, unsigned seed)
{
    std::vector<uint8_t> rgb((size_t)w * h * 3);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = &rgb[((size_t)y * w + x) * 3];
            p[0] = (uint8_t)(x * 255 / w + seed * 40);
            p[1] = (uint8_t)(y * 255 / h + seed * 90);
            p[2] = (uint8_t)((x ^ y) + seed * 17);
        }
    tu_jpeg_opts o = {};
    o.progressive = seed % 3 == 0;
    if (tu_jpeg_encode_file(path.c_str(), rgb.data(), w, h, &o) < 0) {
        std::perror(path.c_str());
        std::exit(1);
    }
}

static std::string make_dataset()
{
    char dir[] = "/tmp/pinload-gpu-XXXXXX";
    if (!mkdtemp(dir)) {
        std::perror("mkdtemp");
        std::exit(1);
    }
    unsigned seed = 1;
    for (int c = 0; c < 3; c++) {
        const std::string cls = std::string(dir) + "/class" + char('a' + c);
        mkdir(cls.c_str(), 0777);
        for (int i = 0; i < 9; i++, seed++)
            write_jpeg(cls + "/" + std::to_string(i) + ".jpg", 120 + 17 * i,
                       90 + 11 * c, seed);
    }
    return dir;
}

/* ---- helpers ---- */

static void quiet(void *, pl_log_level, const char *)
{
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

/* Every batch's bytes and indices for `epochs` epochs from a host-backend
 * loader: the reference. */
struct Epochs {
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<std::vector<int64_t>> indices;
};

static bool host_reference(pl_config cfg, int epochs, Epochs *out)
{
    cfg.device = PL_DEVICE_HOST;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    for (int e = 0; e < epochs; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            const uint8_t *p = (const uint8_t *)b->host;
            out->bytes.emplace_back(p, p + b->bytes);
            out->indices.emplace_back(b->indices, b->indices + b->count);
            pl_loader_release(l, b, nullptr);
        }
        CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    }
    pl_loader_destroy(l);
    return true;
}

/* Sums of each sample's bytes, computed on the device from the batch. */
__global__ void sample_sums(const uint8_t *data, size_t sample_bytes,
                            unsigned long long *sums)
{
    const uint8_t *s = data + blockIdx.x * sample_bytes;
    unsigned long long acc = 0;
    for (size_t i = threadIdx.x; i < sample_bytes; i += blockDim.x)
        acc += s[i];
    atomicAdd(&sums[blockIdx.x], acc);
}

/* Spin for about `cycles` clock cycles, then copy n bytes: a slow reader. */
__global__ void slow_copy(const uint8_t *src, uint8_t *dst, size_t n,
                          long long cycles)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        const long long start = clock64();
        while (clock64() - start < cycles) {
        }
    }
    __syncthreads();
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

/* ---- tests ---- */

static bool cuda_backend_pins_the_ring(const char *data)
{
    pl_config cfg = base_config(data);
    cfg.device = 0;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    pl_stats st;
    pl_loader_stats(l, &st);
    pl_loader_destroy(l);
    CHECK(info.backend == PL_BACKEND_CUDA, "backend %d", (int)info.backend);
    CHECK(info.device == 0, "device %d", info.device);
    CHECK(info.pinned == 1, "ring not pinned");
    CHECK(st.pinned_bytes == (uint64_t)cfg.prefetch * info.batch_bytes,
          "pinned_bytes %llu", (unsigned long long)st.pinned_bytes);
    return true;
}

/* Kernels on the caller's stream read each batch after pl_batch_wait; the
 * per-sample sums and the bytes copied back equal the host reference. */
static bool device_batches_equal_host_reference(pl_config cfg)
{
    Epochs ref;
    if (!host_reference(cfg, 2, &ref))
        return false;
    cfg.device = 0;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned long long *sums;
    CUDA_OK(cudaMalloc(&sums, sizeof *sums * cfg.batch_size));
    std::vector<uint8_t> back(info.batch_bytes);
    size_t k = 0;
    for (int e = 0; e < 2; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            CHECK(k < ref.bytes.size(), "more batches than the host gave");
            CHECK(b->ready != nullptr, "no ready event");
            CHECK(pl_batch_wait(b, stream) == 0, "%s", pl_last_error());
            CUDA_OK(cudaMemsetAsync(sums, 0, sizeof *sums * b->count, stream));
            sample_sums<<<b->count, 256, 0, stream>>>((const uint8_t *)b->data,
                                                      info.sample_bytes, sums);
            std::vector<unsigned long long> got(b->count);
            CUDA_OK(cudaMemcpyAsync(got.data(), sums, sizeof *sums * b->count,
                                    cudaMemcpyDeviceToHost, stream));
            CUDA_OK(cudaMemcpyAsync(back.data(), b->data, b->bytes,
                                    cudaMemcpyDeviceToHost, stream));
            CUDA_OK(cudaStreamSynchronize(stream));
            CHECK(pl_loader_release(l, b, stream) == 0, "%s", pl_last_error());
            CHECK(b->bytes == ref.bytes[k].size(), "batch %zu size", k);
            CHECK(std::memcmp(back.data(), ref.bytes[k].data(), b->bytes) == 0,
                  "batch %zu bytes differ from the host backend", k);
            for (int i = 0; i < b->count; i++) {
                unsigned long long want = 0;
                for (size_t j = 0; j < info.sample_bytes; j++)
                    want += ref.bytes[k][i * info.sample_bytes + j];
                CHECK(got[i] == want,
                      "batch %zu sample %d: kernel sum %llu, "
                      "want %llu",
                      k, i, got[i], want);
            }
            k++;
        }
        CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    }
    CHECK(k == ref.bytes.size(), "%zu batches, host gave %zu", k,
          ref.bytes.size());
    cudaFree(sums);
    cudaStreamDestroy(stream);
    pl_loader_destroy(l);
    return true;
}

/* Float output normalised on the GPU from uint8: the same bytes as the
 * host backend's CPU normalisation, and only uint8 crosses the bus. */
static bool gpu_normalize_matches_host(const char *data, pl_format format,
                                       int channels_last)
{
    pl_config cfg = base_config(data);
    cfg.format = format;
    cfg.channels_last = channels_last;
    cfg.augment = PL_AUGMENT_TRAIN;
    {
        pl_config probe = cfg;
        probe.device = 0;
        pl_loader *l;
        CHECK(pl_loader_create(&probe, &l) == 0, "%s", pl_last_error());
        pl_info info;
        pl_loader_info(l, &info);
        pl_loader_destroy(l);
        CHECK(info.gpu_normalize == 1, "float output not normalised on the "
                                       "GPU (built without nvcc?)");
    }
    if (!device_batches_equal_host_reference(cfg))
        return false;
    cfg.device = 0;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    const pl_batch *b;
    uint64_t out_bytes = 0;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        out_bytes += b->bytes;
        pl_loader_release(l, b, nullptr);
    }
    CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    pl_stats st;
    pl_loader_stats(l, &st);
    pl_loader_destroy(l);
    const int per = format == PL_FORMAT_F32_NCHW ? 4 : 2;
    CHECK(st.bytes_copied * per == out_bytes,
          "copied %llu bytes for %llu delivered",
          (unsigned long long)st.bytes_copied, (unsigned long long)out_bytes);
    return true;
}

static bool gpu_normalize_f32(const char *data)
{
    return gpu_normalize_matches_host(data, PL_FORMAT_F32_NCHW, 0);
}

static bool gpu_normalize_f16(const char *data)
{
    return gpu_normalize_matches_host(data, PL_FORMAT_F16_NCHW, 0);
}

static bool gpu_normalize_bf16(const char *data)
{
    return gpu_normalize_matches_host(data, PL_FORMAT_BF16_NCHW, 0);
}

/* channels_last: the kernel's interleaved writes, every float format. */
static bool gpu_normalize_channels_last(const char *data)
{
    return gpu_normalize_matches_host(data, PL_FORMAT_F32_NCHW, 1) &&
           gpu_normalize_matches_host(data, PL_FORMAT_F16_NCHW, 1) &&
           gpu_normalize_matches_host(data, PL_FORMAT_BF16_NCHW, 1);
}

/* Under SUBSTITUTE a bad sample is all zeros on the GPU path too, not the
 * LUT's -mean/std of zero bytes. */
static bool gpu_normalize_substitutes_zeros(const char *data)
{
    const std::string bad = std::string(data) + "/classb/bad.jpg";
    FILE *f = std::fopen(bad.c_str(), "wb");
    CHECK(f && std::fputs("BM not a JPEG", f) >= 0 && std::fclose(f) == 0,
          "cannot write %s", bad.c_str());
    pl_config cfg = base_config(data);
    cfg.format = PL_FORMAT_F32_NCHW;
    cfg.on_error = PL_ON_ERROR_SUBSTITUTE;
    const bool ok = device_batches_equal_host_reference(cfg);
    std::remove(bad.c_str());
    return ok;
}

static bool u8_pinned(const char *data)
{
    return device_batches_equal_host_reference(base_config(data));
}

static bool f32_train_pageable(const char *data)
{
    pl_config cfg = base_config(data);
    cfg.format = PL_FORMAT_F32_NCHW;
    cfg.gpu_normalize = 0; /* the CPU path; the GPU one is tested below */
    cfg.augment = PL_AUGMENT_TRAIN;
    cfg.memory = PL_MEMORY_PAGEABLE;
    cfg.device_buffers = 3;
    return device_batches_equal_host_reference(cfg);
}

/* With one device buffer, the next batch must not land in it before the
 * caller's slow kernel has read the current one: release is stream-ordered
 * and the host never waits. */
static bool release_orders_buffer_reuse(const char *data)
{
    pl_config cfg = base_config(data);
    cfg.device_buffers = 1;
    cfg.prefetch = 3;
    Epochs ref;
    if (!host_reference(cfg, 1, &ref))
        return false;
    cfg.device = 0;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int rate_khz = 0;
    CUDA_OK(cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0));
    const long long cycles = (long long)rate_khz * 20; /* about 20 ms */
    std::vector<uint8_t *> copies;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        uint8_t *dst;
        CUDA_OK(cudaMalloc(&dst, b->bytes));
        pl_batch_wait(b, stream);
        slow_copy<<<64, 256, 0, stream>>>((const uint8_t *)b->data, dst,
                                          b->bytes, cycles);
        CHECK(pl_loader_release(l, b, stream) == 0, "%s", pl_last_error());
        copies.push_back(dst);
    }
    CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(copies.size() == ref.bytes.size(), "%zu batches", copies.size());
    for (size_t k = 0; k < copies.size(); k++) {
        std::vector<uint8_t> h(ref.bytes[k].size());
        CUDA_OK(
            cudaMemcpy(h.data(), copies[k], h.size(), cudaMemcpyDeviceToHost));
        CHECK(std::memcmp(h.data(), ref.bytes[k].data(), h.size()) == 0,
              "batch %zu was overwritten before the caller's kernel read it",
              k);
        cudaFree(copies[k]);
    }
    cudaStreamDestroy(stream);
    pl_loader_destroy(l);
    return true;
}

static bool keep_host_mirrors_the_batch(const char *data)
{
    pl_config cfg = base_config(data);
    Epochs ref;
    if (!host_reference(cfg, 1, &ref))
        return false;
    cfg.device = 0;
    cfg.keep_host = 1;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    const pl_batch *b;
    size_t k = 0;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(b->host != nullptr && b->host != b->data, "no host mirror");
        cudaPointerAttributes attr;
        CUDA_OK(cudaPointerGetAttributes(&attr, b->host));
        CHECK(attr.type == cudaMemoryTypeHost, "mirror is not pinned host");
        CHECK(std::memcmp(b->host, ref.bytes[k].data(), b->bytes) == 0,
              "batch %zu host mirror differs", k);
        pl_loader_release(l, b, nullptr);
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.bytes.size(), "%zu batches", k);
    pl_loader_destroy(l);
    return true;
}

static bool destroy_with_batches_held(const char *data)
{
    pl_config cfg = base_config(data);
    cfg.device = 0;
    for (int held = 0; held <= 2; held++) {
        pl_loader *l;
        CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
        for (int i = 0; i < held; i++) {
            const pl_batch *b;
            CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());
        }
        pl_loader_destroy(l);
    }
    return true;
}

/* ---- the loader's device, not the caller's (issue 29) ---- */

static int device_count()
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

/* A loader on device 1 from a thread on device 0: pl_batch_wait(b, NULL)
 * must order device 1's legacy stream, on which a kernel then reads every
 * sample; the bytes and sums equal the host backend's, the caller's thread
 * stays on device 0 and no error is left pending. One device: skipped. */
static bool second_device_wait_on_null(const char *data)
{
    if (device_count() < 2) {
        std::printf("  skipped: one CUDA device\n");
        return true;
    }
    pl_config cfg = base_config(data);
    cfg.width = 160; /* bigger copies: a missed wait shows */
    cfg.height = 160;
    Epochs ref;
    if (!host_reference(cfg, 1, &ref))
        return false;
    CUDA_OK(cudaSetDevice(0));
    cfg.device = 1;
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    std::vector<uint8_t> back(info.batch_bytes);
    size_t k = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        int dev = -1;
        CUDA_OK(cudaGetDevice(&dev));
        CHECK(dev == 0, "the caller's thread was moved to device %d", dev);
        CHECK(pl_batch_wait(b, nullptr) == 0, "%s", pl_last_error());
        CUDA_OK(cudaSetDevice(1));
        uint8_t *copy;
        CUDA_OK(cudaMallocAsync((void **)&copy, b->bytes, nullptr));
        CUDA_OK(cudaMemcpyAsync(copy, b->data, b->bytes,
                                cudaMemcpyDeviceToDevice, nullptr));
        CUDA_OK(
            cudaMemcpy(back.data(), copy, b->bytes, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaFreeAsync(copy, nullptr));
        CUDA_OK(cudaSetDevice(0));
        CHECK(std::memcmp(back.data(), ref.bytes[k].data(), b->bytes) == 0,
              "batch %zu: device 1's legacy stream read it before its copy", k);
        CHECK(pl_loader_release(l, b, nullptr) == 0, "%s", pl_last_error());
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.bytes.size(), "%zu batches", k);
    CHECK(cudaGetLastError() == cudaSuccess, "an error left pending");
    pl_loader_destroy(l);
    return true;
}

/* Whether device d's primary context is active in this process, from the
 * driver (through the runtime, as pinload reaches it). */
static int primary_active(int d)
{
    typedef CUresult (*get_state_fn)(CUdevice, unsigned *, int *);
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn,
                                         12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        !fn)
        return -1;
    unsigned flags = 0;
    int active = -1;
    if (((get_state_fn)fn)(d, &flags, &active) != CUDA_SUCCESS)
        return -1;
    return active;
}

static void *stats_thread(void *arg)
{
    pl_stats st;
    *(int *)((void **)arg)[1] =
        pl_loader_stats((pl_loader *)((void **)arg)[0], &st);
    return nullptr;
}

/* Run in a fresh process (main's --no-gpu0-context): a thread that never
 * chose a device runs a loader on device 1 through every call (next, wait
 * and release on NULL, stats from another thread, destroy); GPU 0 must have
 * no primary context (since CUDA 12, cudaSetDevice would have made one). */
static int child_no_gpu0_context(const char *data)
{
    pl_config cfg = base_config(data);
    cfg.device = 1;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) != 0) {
        std::printf("  create: %s\n", pl_last_error());
        return 1;
    }
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        pl_batch_wait(b, nullptr);
        pl_loader_release(l, b, n++ % 2 ? nullptr : cudaStreamPerThread);
        int stats_rc = -1;
        void *args[2] = {l, &stats_rc};
        pthread_t t;
        pthread_create(&t, nullptr, stats_thread, args);
        pthread_join(t, nullptr);
        if (stats_rc != 0)
            return 1;
    }
    const int a1 = primary_active(1); /* the probe works: the loader's */
    pl_loader_destroy(l);
    const int a0 = primary_active(0);
    std::printf("  primary contexts active: device 0 %d, device 1 %d\n", a0,
                a1);
    return rc == PL_EPOCH_END && a0 == 0 && a1 == 1 ? 0 : 1;
}

static const char *self_path;

static bool no_context_on_gpu0_for_a_loader_on_device_1(const char *data)
{
    if (device_count() < 2) {
        std::printf("  skipped: one CUDA device\n");
        return true;
    }
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) { /* exec at once: CUDA is not fork-safe */
        execl(self_path, self_path, "--no-gpu0-context", data, (char *)nullptr);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child (a loader on device 1) made a context on GPU 0, or "
          "failed: status %d",
          status);
    return true;
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc == 3 && !std::strcmp(argv[1], "--no-gpu0-context"))
        return child_no_gpu0_context(argv[2]);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("no CUDA device: the CUDA-path tests need a GPU\n");
        return 1;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    std::printf("device 0: %s, pinload %s\n", prop.name, pl_version());
    const std::string data = make_dataset();
    run("cuda_backend_pins_the_ring", cuda_backend_pins_the_ring, data.c_str());
    run("u8_pinned_batches_equal_host_backend", u8_pinned, data.c_str());
    run("f32_train_pageable_batches_equal_host_backend", f32_train_pageable,
        data.c_str());
    run("gpu_normalize_f32_equals_host_bytes", gpu_normalize_f32, data.c_str());
    run("gpu_normalize_f16_equals_host_bytes", gpu_normalize_f16, data.c_str());
    run("gpu_normalize_bf16_equals_host_bytes", gpu_normalize_bf16,
        data.c_str());
    run("gpu_normalize_channels_last_equals_host_bytes",
        gpu_normalize_channels_last, data.c_str());
    run("gpu_normalize_substitutes_zeros", gpu_normalize_substitutes_zeros,
        data.c_str());
    run("release_orders_buffer_reuse", release_orders_buffer_reuse,
        data.c_str());
    run("keep_host_mirrors_the_batch", keep_host_mirrors_the_batch,
        data.c_str());
    run("destroy_with_batches_held", destroy_with_batches_held, data.c_str());
    run("second_device_wait_on_null", second_device_wait_on_null, data.c_str());
    run("no_context_on_gpu0_for_a_loader_on_device_1",
        no_context_on_gpu0_for_a_loader_on_device_1, data.c_str());
    std::string rm = "rm -rf '" + data + "'";
    if (std::system(rm.c_str()) != 0)
        std::printf("could not remove %s\n", data.c_str());
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
