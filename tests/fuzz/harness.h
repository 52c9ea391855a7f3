/* One fuzz input through pinload's decode and augment path, shared by the
 * libFuzzer target (fuzz_decode.c) and the regression replay in the
 * Criterion suite (test_fuzz.c).
 *
 * Input: 8 bytes of configuration, then the bytes given to the decoder as
 * a JPEG. The configuration picks the augment mode, output format and size
 * (1..64 x 1..64), DCT scaling, strict mode, epoch and index, so the crop,
 * flip, scale and writer paths are all reached. Every output byte is read;
 * a failed sample must be all zeros with a reason, float outputs must be
 * finite, and the result through a context that decoded other inputs
 * before must be the result through a fresh one. Violations abort (that is
 * what the fuzzer reports). */
#ifndef PINLOAD_FUZZ_HARNESS_H
#define PINLOAD_FUZZ_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../workers/sample.h"

#define FUZZ_HEADER 8

static inline void fuzz_check(int ok)
{
    if (!ok)
        abort();
}

/* What one input gave. */
typedef struct fuzz_result {
    int rc, warnings;
    uint8_t *dst; /* the sample, malloc'd */
    size_t n;
    char reason[SAMPLE_REASON_MAX];
} fuzz_result;

/* Runs one input through ctx into *r (free r->dst). Returns 0 if the input
 * is too short to hold a configuration (nothing run), else 1. */
static inline int fuzz_run(sample_ctx *ctx, const uint8_t *data, size_t size,
                           fuzz_result *r)
{
    memset(r, 0, sizeof *r);
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
    r->n = augment_sample_bytes(&p);
    r->dst = (uint8_t *)malloc(r->n);
    memset(r->dst, 0xA5, r->n);
    sample_times t = {0};
    r->rc =
        sample_produce_buffer(ctx, &p, data + FUZZ_HEADER, size - FUZZ_HEADER,
                              data[5], data[7], r->dst, &t, r->reason);
    r->warnings = ctx->warnings;
    return 1;
}

/* The contract of one result: every byte read; a failed sample all zeros
 * with a reason; float outputs finite. */
static inline void fuzz_check_result(const fuzz_result *r, const uint8_t *data)
{
    volatile uint64_t sum = 0;
    for (size_t i = 0; i < r->n; i++)
        sum += r->dst[i];
    if (r->rc < 0) {
        for (size_t i = 0; i < r->n; i++)
            fuzz_check(r->dst[i] == 0);
        fuzz_check(r->reason[0] != '\0');
    } else if ((pl_format)(data[1] % 3) == PL_FORMAT_F32_NCHW) {
        for (size_t i = 0; i < r->n / sizeof(float); i++) {
            float v;
            memcpy(&v, r->dst + i * sizeof v, sizeof v);
            fuzz_check(isfinite(v));
        }
    }
    (void)sum;
}

/* Returns the sample's status; aborts on a broken contract. */
static inline int fuzz_one(sample_ctx *ctx, const uint8_t *data, size_t size)
{
    fuzz_result r;
    if (!fuzz_run(ctx, data, size, &r))
        return 0;
    fuzz_check_result(&r, data);
    free(r.dst);
    return r.rc;
}

/* Whether the input gives, through ctx, which has decoded whatever came
 * before (as a worker's has), exactly what it gives a fresh context:
 * status, reason, warnings, every byte; a sample is a function of its
 * file, seed, epoch and index only. fuzz_one's contract is checked too;
 * [out] *rc, the status. */
static inline int fuzz_same_as_alone(sample_ctx *ctx, const uint8_t *data,
                                     size_t size, int *rc)
{
    fuzz_result r, alone;
    *rc = 0;
    if (!fuzz_run(ctx, data, size, &r))
        return 1;
    fuzz_check_result(&r, data);
    sample_ctx fresh;
    decode_limits lim = *decoder_limits(ctx->dec);
    fuzz_check(sample_init(&fresh, &lim) == 0);
    fuzz_run(&fresh, data, size, &alone);
    sample_fini(&fresh);
    const int same = r.rc == alone.rc && r.warnings == alone.warnings &&
                     strcmp(r.reason, alone.reason) == 0 &&
                     memcmp(r.dst, alone.dst, r.n) == 0;
    free(r.dst);
    free(alone.dst);
    *rc = r.rc;
    return same;
}

/* The same, aborting when the two differ (the fuzzer's way to report). */
static inline int fuzz_one_as_alone(sample_ctx *ctx, const uint8_t *data,
                                    size_t size)
{
    int rc;
    fuzz_check(fuzz_same_as_alone(ctx, data, size, &rc));
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
