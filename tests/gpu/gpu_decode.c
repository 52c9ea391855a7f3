/* The CUDA-path suite (test_gpu.c): GPU decoding (issue 38), nvJPEG
 * against libjpeg-turbo. The simulator's suite (test_gpu_decode) holds the
 * GPU path to the CPU path's bytes with a fake nvJPEG that decodes with
 * libjpeg-turbo; here the real nvJPEG decodes, whose IDCT and chroma
 * upsampling are not libjpeg's, so its samples are held to a PSNR bound,
 * and destroy must give its device memory back. Every test SKIPs, naming
 * why, where no GPU decoder can be had (libnvjpeg.so.13 not found: see
 * PINLOAD_NVJPEG). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"

/* The GPU decodes at full size and nvJPEG's IDCT and chroma upsampling are
 * not libjpeg's, so its bytes are held to the CPU path's (dct_scaling 0)
 * within a bound, not equal: each sample's PSNR over its 0..255 values at
 * least GPU_DECODE_MIN_PSNR dB, and the mean over all at least
 * GPU_DECODE_MEAN_PSNR. On the simulated runtime the same path is equal
 * byte for byte (test_gpu_decode), so what this measures is nvJPEG. */
#define GPU_DECODE_MIN_PSNR 30.0
#define GPU_DECODE_MEAN_PSNR 38.0

/* Sample value k of a batch on the 0..255 scale, whatever the format. */
static double value255(const pl_config *cfg, const uint8_t *p, size_t k,
                       size_t plane)
{
    if (cfg->format == PL_FORMAT_U8_NHWC)
        return p[k];
    const int c = (int)((k / plane) % 3); /* NCHW */
    float v;
    if (cfg->format == PL_FORMAT_F32_NCHW) {
        memcpy(&v, p + k * 4, 4);
    } else { /* 16-bit: half or bfloat16 */
        uint16_t h;
        memcpy(&h, p + k * 2, 2);
        if (cfg->format == PL_FORMAT_BF16_NCHW) {
            const uint32_t x = (uint32_t)h << 16;
            memcpy(&v, &x, 4);
        } else {
            const uint32_t sign = (uint32_t)(h >> 15) << 31;
            int e = (h >> 10) & 31;
            uint32_t m = h & 1023, x;
            if (e == 0 && m == 0) {
                x = sign;
            } else if (e == 0) { /* subnormal */
                while (!(m & 1024)) {
                    m <<= 1;
                    e--;
                }
                x = sign | (uint32_t)(e + 1 + 112) << 23 | (m & 1023) << 13;
            } else {
                x = sign | (uint32_t)(e + 112) << 23 | m << 13;
            }
            memcpy(&v, &x, 4);
        }
    }
    return (v * cfg->std[c] + cfg->mean[c]) * 255.0;
}

outcome gpu_decode_psnr(const char *data, const void *arg)
{
    const decode_case *dc = arg;
    outcome result = FAILED;
    pl_loader *l = NULL;
    ref_batches ref = {0};
    uint8_t *got = NULL;
    pl_config cfg = base_config(data);
    cfg.format = dc->format;
    cfg.gpu_normalize = dc->gpu_normalize;
    cfg.augment = dc->augment;
    cfg.dct_scaling = 0; /* the GPU decodes at full size */
    cfg.shuffle = 0;
    cfg.device = 0;
    cfg.decode = PL_DECODE_AUTO;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    if (info.decode != PL_DECODE_GPU) {
        pl_loader_destroy(l);
        SKIP("no GPU decoder: %s (PINLOAD_NVJPEG names libnvjpeg.so.13)",
             info.decoder_name);
    }
    printf("  decoder: %s, %.1f MiB of device memory at create\n",
           info.decoder_name, (double)info.gpu_decode_bytes / (1 << 20));
    /* Every JPEG on the GPU (auto would split them with the workers). */
    pl_loader_destroy(l);
    cfg.decode = PL_DECODE_GPU;
    l = NULL;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_config host = cfg;
    host.decode = PL_DECODE_CPU;
    if (!host_reference(host, 1, &ref))
        goto done;
    got = malloc(ref.batch_bytes);
    CHECK(got != NULL, "out of memory");
    const size_t plane = (size_t)cfg.width * cfg.height;
    const size_t values = plane * 3;
    double worst = 1e9, sum_se = 0, max_diff = 0;
    size_t n_values = 0;
    int k = 0, rc;
    const pl_batch *b;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n && (size_t)b->bytes == ref.size[k],
              "batch %d: %zu bytes", k, (size_t)b->bytes);
        CHECK(memcmp(b->indices, ref.indices + (size_t)k * ref.batch_size,
                     (size_t)b->count * sizeof *b->indices) == 0,
              "batch %d: other samples", k);
        CUDA_OK(cudaEventSynchronize(b->ready));
        CUDA_OK(cudaMemcpy(got, b->data, b->bytes, cudaMemcpyDeviceToHost));
        for (int i = 0; i < b->count; i++) {
            const uint8_t *g = got + (size_t)i * info.sample_bytes;
            const uint8_t *r =
                ref_bytes(&ref, k) + (size_t)i * info.sample_bytes;
            double se = 0;
            for (size_t v = 0; v < values; v++) {
                const double d =
                    value255(&cfg, g, v, plane) - value255(&cfg, r, v, plane);
                se += d * d;
                max_diff = fabs(d) > max_diff ? fabs(d) : max_diff;
            }
            sum_se += se;
            n_values += values;
            const double mse = se / (double)values;
            const double psnr = mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
            worst = psnr < worst ? psnr : worst;
        }
        pl_loader_release(l, b, NULL);
        k++;
    }
    CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    CHECK(k == ref.n, "%d batches, %d on the host", k, ref.n);
    const double mean_mse = sum_se / (double)n_values;
    const double mean =
        mean_mse > 0 ? 10 * log10(255.0 * 255.0 / mean_mse) : 99;
    pl_stats st;
    pl_loader_stats(l, &st);
    printf("  PSNR against the CPU path: worst sample %.1f dB, all %.1f dB; "
           "largest difference %.0f levels; %llu on the GPU, %llu declined\n",
           worst, mean, max_diff, (unsigned long long)st.images_gpu,
           (unsigned long long)st.images_gpu_declined);
    CHECK(st.images_gpu > 0, "nothing was decoded on the GPU");
    CHECK(worst >= GPU_DECODE_MIN_PSNR, "a sample at %.1f dB", worst);
    CHECK(mean >= GPU_DECODE_MEAN_PSNR, "%.1f dB over all", mean);
    result = PASSED;
done:
    free(got);
    ref_free(&ref);
    pl_loader_destroy(l);
    return result;
}

/* Loaders made and destroyed mid-epoch with GPU decoding: no device
 * memory is left behind. */
outcome gpu_decode_destroy_frees(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    pl_loader *l = NULL;
    pl_config cfg = base_config(data);
    cfg.device = 0;
    cfg.decode = PL_DECODE_AUTO;
    size_t free0 = 0, free1 = 0, total = 0;
    for (int round = 0; round < 4; round++) {
        CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
        pl_info info;
        pl_loader_info(l, &info);
        if (info.decode != PL_DECODE_GPU) {
            pl_loader_destroy(l);
            SKIP("no GPU decoder: %s", info.decoder_name);
        }
        const pl_batch *b;
        for (int k = 0; k < round; k++) {
            CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());
            pl_loader_release(l, b, NULL);
        }
        pl_loader_destroy(l);
        l = NULL;
        CUDA_OK(cudaMemGetInfo(round == 0 ? &free0 : &free1, &total));
    }
    CHECK(free1 + (8u << 20) >= free0,
          "%.1f MiB of device memory more in use after three more loaders",
          ((double)free0 - (double)free1) / (1 << 20));
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}
