/* One fuzz input through pinload's decode and augment path, shared by the
 * libFuzzer target (fuzz_decode.c) and the regression replay in the
 * Criterion suite (test_fuzz.c).
 *
 * Input: 8 bytes of configuration, then the bytes given to the decoder as
 * a JPEG. The configuration picks the augment mode, output format and size
 * (1..64 x 1..64), DCT scaling, strict mode, epoch and index, so the crop,
 * flip, scale and writer paths are all reached. Every output byte is read;
 * a failed sample must be all zeros with a reason, and float outputs must
 * be finite. Violations abort (that is what the fuzzer reports). */
#ifndef PINLOAD_FUZZ_HARNESS_H
#define PINLOAD_FUZZ_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/process.h"

#define FUZZ_HEADER 8

static inline void fuzz_check(int ok)
{
    if (!ok)
        abort();
}

/* Returns the sample's status; aborts on a broken contract. */
static inline int fuzz_one(process_ctx *ctx, const uint8_t *data, size_t size)
{
    if (size < FUZZ_HEADER)
        return 0;
    static const float mean[3] = {0.485f, 0.456f, 0.406f};
    static const float std[3] = {0.229f, 0.224f, 0.225f};
    augment_params p;
    augment_params_init(&p, (pl_augment)(data[0] % 3), (pl_format)(data[1] % 3),
                        1 + data[2] % 64, 1 + data[3] % 64, data[6], mean, std);
    p.dct_scaling = data[4] & 1;
    decode_limits lim = *decoder_limits(ctx->dec);
    lim.strict = (data[4] >> 1) & 1;
    decoder_set_limits(ctx->dec, &lim);
    const size_t n = augment_sample_bytes(&p);
    uint8_t *dst = malloc(n);
    memset(dst, 0xA5, n);
    process_times t = {0};
    char reason[PROCESS_REASON_MAX] = "";
    const int rc =
        process_buffer(ctx, &p, data + FUZZ_HEADER, size - FUZZ_HEADER, data[5],
                       data[7], dst, &t, reason);
    volatile uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += dst[i];
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            fuzz_check(dst[i] == 0);
        fuzz_check(reason[0] != '\0');
    } else if (p.format == PL_FORMAT_F32_NCHW) {
        for (size_t i = 0; i < n / sizeof(float); i++) {
            float v;
            memcpy(&v, dst + i * sizeof v, sizeof v);
            fuzz_check(isfinite(v));
        }
    }
    (void)sum;
    free(dst);
    return rc;
}

/* The limits the fuzzer decodes under: small enough that no input can make
 * one run slow or large, as the loader's defaults do for real datasets. */
static inline void fuzz_limits(decode_limits *lim)
{
    decode_limits_default(lim);
    lim->max_width = 4096;
    lim->max_height = 4096;
    lim->max_pixels = (int64_t)1 << 22;
}

#endif
