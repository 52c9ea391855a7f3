/* The GPU decoder: JPEGs decoded on the loader's GPU, then cropped,
 * resized, flipped and written in the output format by pinload's own
 * kernels (gpu_resize.h), each sample into its place in device memory. One
 * implementation today, nvJPEG loaded at run time (nvjpeg.c); the
 * backend opens it (backend_ops.gpu_decoder_open: NULL on the host
 * backend), so nothing outside device/ knows what decodes, or whether a
 * GPU exists.
 *
 * Threads: one gpu_decoder per loader, opened and closed on the caller's
 * thread (the loader's device current); each worker has its own state
 * (worker index), and only that worker calls decode with it; the copy
 * engine asks for the events (decoded) of any worker. Everything a worker
 * queues runs on that worker's own stream, never on a caller's. */
#ifndef PINLOAD_GPU_DECODE_H
#define PINLOAD_GPU_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "pinload.h"

struct CUevent_st;

/* One axis of the resize, as the workers' resampler planned it at full
 * scale (workers/resample.h): output i reads source pixels first[i] ..
 * first[i] + count[i] - 1 with Q14 weights w[i * taps ...]; every output
 * reads within [lo, hi). Source pixels are the image's own. */
typedef struct gpu_axis {
    int out_n, taps;
    int lo, hi;
    const int *first, *count;
    const int16_t *w;
} gpu_axis;

/* One sample to decode: the file's bytes (valid during the call only),
 * its size as its header gives it, the filters and the flip, and where
 * the output goes: device memory of the sample's bytes in the decoder's
 * format. */
typedef struct gpu_sample {
    const uint8_t *bytes;
    size_t len;
    int width, height;
    gpu_axis h, v;
    int flip;
    void *dst;
} gpu_sample;

typedef struct gpu_decoder_config {
    int workers; /* states: one per worker */
    int slots;   /* events per worker: one per ring slot */
    /* What decode writes: uint8 NHWC, or float32 / 16-bit float through
     * lut (host memory, 3 x 256 floats or 16-bit patterns, copied at
     * open), planar or channels_last. */
    pl_format format;
    int channels_last;
    int out_w, out_h;
    const void *lut;
    size_t lut_bytes;
    int strict; /* config.strict: refuse what does not follow the standard */
} gpu_decoder_config;

typedef struct gpu_decoder gpu_decoder;

typedef struct gpu_decoder_ops {
    /* Queue sample s on worker `worker`'s stream, into s->dst, and record
     * that worker's event for ring slot `slot` after it. 0, or an error
     * with the reason (nvJPEG's status, a header it refuses, device memory
     * it cannot have): then nothing of s is queued that could still write
     * s->dst, and the caller decodes it on the CPU. On the worker's
     * thread, which it binds to the device the first time. */
    int (*decode)(gpu_decoder *g, int worker, int slot, const gpu_sample *s,
                  char *reason, size_t cap);
    /* The event recorded after `worker`'s last sample of ring slot `slot`
     * (what a copy of that slot's samples must wait for); any thread. */
    struct CUevent_st *(*decoded)(gpu_decoder *g, int worker, int slot);
    /* Device memory held now: tables, states, buffers grown so far. */
    uint64_t (*device_bytes)(const gpu_decoder *g);
    /* Wait for every worker's stream (which runs only pinload's own work,
     * never waiting for a caller's) and free everything; on the caller's
     * thread, the device current, once no worker runs. */
    void (*close)(gpu_decoder *g);
} gpu_decoder_ops;

struct gpu_decoder {
    const gpu_decoder_ops *ops;
    char name[96]; /* "nvJPEG 13.3.2 (hardware, GPU-hybrid)" */
};

/* The nvJPEG implementation (nvjpeg.c): the library loaded from
 * $PINLOAD_NVJPEG, else libnvjpeg.so.13. PL_EUNSUPPORTED with `why` when
 * it cannot be had, PL_ENOMEM / PL_ECUDA when its memory cannot. For the
 * CUDA backend alone. */
struct backend;
int nvjpeg_decoder_open(struct backend *be, const gpu_decoder_config *cfg,
                        gpu_decoder **out, char *why, size_t cap);

#endif
