/* The CUDA-path suite (test_gpu.c): the CUDA backend delivers the host
 * backend's bytes, through kernels on the caller's stream, in each float
 * format normalised on the GPU. */
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

/* ---- the CUDA backend delivers the host backend's bytes ---- */

outcome cuda_backend_pins_the_ring(const char *data, const void *arg)
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

outcome u8_pinned(const char *data, const void *arg)
{
    (void)arg;
    return device_batches_equal_host_reference(base_config(data));
}

outcome f32_train_pageable(const char *data, const void *arg)
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

outcome gpu_normalize_matches_host(const char *data, const void *arg)
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
outcome gpu_normalize_channels_last(const char *data, const void *arg)
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
outcome gpu_normalize_substitutes_zeros(const char *data, const void *arg)
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

/* The batch op on the device: mixup and cutmix by the kernel on the copy
 * stream, after the GPU's normalising, the host backend's bytes in every
 * float format and layout (common/blend.h's arithmetic on both). */
outcome mixup_on_the_device_equals_host_bytes(const char *data,
                                              const void *arg)
{
    (void)arg;
    static const float_case cases[] = {
        {PL_FORMAT_F32_NCHW, 0}, {PL_FORMAT_F16_NCHW, 0},
        {PL_FORMAT_BF16_NCHW, 0}, {PL_FORMAT_F32_NCHW, 1}};
    static const char *const specs[] = {
        "random_resized_crop;hflip;normalize;mixup(0.8)",
        "random_resized_crop;hflip;normalize;mixup(0.8,1,switch_prob=0.5)",
        "random_resized_crop;hflip;normalize;mixup(0,cutmix_minmax=0.2:0.8)"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
            pl_config cfg = base_config(data);
            cfg.format = cases[i].format;
            cfg.channels_last = cases[i].channels_last;
            cfg.transform = specs[k];
            pl_config probe = cfg;
            probe.device = 0;
            pl_loader *l = NULL;
            if (pl_loader_create(&probe, &l) != 0) {
                fprintf(stderr, "    %s\n", pl_last_error());
                return FAILED;
            }
            pl_info info;
            pl_loader_info(l, &info);
            pl_loader_destroy(l);
            if (!info.gpu_normalize) {
                fprintf(stderr, "    %s: not normalised on the GPU\n",
                        specs[k]);
                return FAILED;
            }
            if (device_batches_equal_host_reference(cfg) != PASSED) {
                fprintf(stderr, "    %s, format %d, channels_last %d\n",
                        specs[k], (int)cases[i].format,
                        cases[i].channels_last);
                return FAILED;
            }
        }
    return PASSED;
}
