/* What the files of the CUDA-path suite share (test_gpu.c: the runner, the
 * dataset, the host reference and the suite's table; gpu_bytes.c,
 * gpu_reuse.c, gpu_contexts.c, gpu_capture.c, gpu_decode.c: the tests by
 * subject, see
 * test_gpu.c). One program, test_cuda. */
#ifndef PINLOAD_GPU_TEST_H
#define PINLOAD_GPU_TEST_H

#include <cuda_runtime_api.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpu_kernels.h"
#include "pinload.h"

/* ---- the runner ---- */

typedef enum outcome { PASSED, FAILED, SKIPPED } outcome;

/* A test: the dataset's folder and its row's argument (NULL for most). */
typedef outcome (*test_fn)(const char *data, const void *arg);

/* Why the test that returned SKIPPED skipped (test_gpu.c). */
extern char skip_reason[200];

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

void run(const char *name, test_fn fn, const char *data, const void *arg);
void sleep_ms(int ms);
int device_count(void);

/* ---- helpers (test_gpu.c) ---- */

/* The suite's config: batches of 5 images of 48 x 40, 3 workers, no log. */
pl_config base_config(const char *data);

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

const uint8_t *ref_bytes(const ref_batches *r, int k);
void ref_free(ref_batches *r);
/* The batches of `epochs` epochs from a host-backend loader with cfg. */
int host_reference(pl_config cfg, int epochs, ref_batches *out);
/* The reference for a config whose epochs are all alike: one epoch. */
int host_reference_repeating(pl_config cfg, ref_batches *out);
/* How many bytes of n differ between a and b, for the messages. */
size_t bytes_differing(const uint8_t *a, const uint8_t *b, size_t n);
/* Clock cycles of device 0 in about ms milliseconds; 0 if unknown. */
long long cycles_in_ms(int ms);

/* ---- the tests, by file ---- */

/* A row of gpu_normalize_matches_host: the float format, and whether
 * channels last. */
typedef struct float_case {
    pl_format format;
    int channels_last;
} float_case;

/* gpu_bytes.c */
outcome cuda_backend_pins_the_ring(const char *data, const void *arg);
outcome u8_pinned(const char *data, const void *arg);
outcome f32_train_pageable(const char *data, const void *arg);
outcome gpu_normalize_matches_host(const char *data, const void *arg);
outcome gpu_normalize_channels_last(const char *data, const void *arg);
outcome gpu_normalize_substitutes_zeros(const char *data, const void *arg);
outcome mixup_on_the_device_equals_host_bytes(const char *data,
                                              const void *arg);

/* gpu_reuse.c */
outcome release_orders_buffer_reuse(const char *data, const void *arg);
outcome keep_host_mirrors_the_batch(const char *data, const void *arg);
outcome keep_host_mirror_waits_for_the_release_stream(const char *data,
                                                      const void *arg);
outcome destroy_with_batches_held(const char *data, const void *arg);
outcome host_memory_on_the_gpus_numa_node(const char *data, const void *arg);

/* gpu_contexts.c; fresh_thread_child is the child process of test_cuda
 * --fresh-thread DEVICE DATA. */
outcome second_device_wait_on_null(const char *data, const void *arg);
outcome
foreign_context_wait_and_release_order_the_loaders_context(const char *data,
                                                           const void *arg);
outcome no_context_on_gpu0_for_a_loader_on_device_1(const char *data,
                                                    const void *arg);
outcome no_context_left_on_a_thread_that_never_chose_a_device(const char *data,
                                                              const void *arg);
outcome fresh_thread_child(const char *data, int device);

/* gpu_decode.c: a row of gpu_decode_psnr: the output format, whether the
 * GPU normalises, the augmentation. */
typedef struct decode_case {
    pl_format format;
    int gpu_normalize;
    pl_augment augment;
} decode_case;

outcome gpu_decode_psnr(const char *data, const void *arg);
outcome gpu_decode_destroy_frees(const char *data, const void *arg);

/* gpu_capture.c: its tests, a row per mode and loader. */
void run_capture_tests(const char *data);

#endif
