/* The GPU decoder through nvJPEG, NVIDIA's JPEG library, loaded at run
 * time (dlopen) so that neither the library nor the Python wheel needs it
 * to start: its declarations come from nvjpeg.h (the toolkit's, or the
 * nvidia-nvjpeg wheel's), its code from libnvjpeg.so.13 or the file
 * $PINLOAD_NVJPEG names.
 *
 * Why nvJPEG and not nvImageCodec: pinload needs JPEG alone (PNG and WebP
 * stay on the CPU), and nvJPEG is one self-contained library with a C API
 * whose decoupled calls split a decode into a host phase (parsing, and the
 * Huffman decode of the hybrid backend), which runs on the worker that read
 * the file, and device phases queued on a stream of pinload's choosing;
 * nvImageCodec loads nvJPEG itself behind plugins and a thread pool of its
 * own, which would sit beside pinload's workers rather than be them.
 *
 * Each worker has a state per decoder backend (the hardware decoder where
 * the GPU has one: A100, A30, Hopper, Ada, Blackwell; the GPU-hybrid one;
 * the hybrid one, whose Huffman decode runs on the CPU), tried in that
 * order for each image (nvjpegDecoderJpegSupported), sharing one device
 * buffer and two page-locked ones, a stream, its scratch (the decoded image,
 * the vertical pass, the filters) and events. Page-locked memory written
 * on the host is used by alternate samples, each parity after its last
 * upload completed (pinned_free), so the host never overwrites what a queued
 * copy still reads; the device buffers are used in stream order. Every
 * buffer grows to the largest image met and is kept: no allocation per
 * sample once warm. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include "backend.h"
#include "gpu_decode.h"
#include "gpu_resize.h"
#include "../common/error.h"

/* The library's functions pinload calls, each typed by its declaration in
 * nvjpeg.h and found by name. */
#define NVJ_FUNCS(X)                                                           \
    X(nvjpegGetProperty)                                                       \
    X(nvjpegCreateExV2)                                                        \
    X(nvjpegDestroy)                                                           \
    X(nvjpegDecoderCreate)                                                     \
    X(nvjpegDecoderDestroy)                                                    \
    X(nvjpegDecoderStateCreate)                                                \
    X(nvjpegJpegStateDestroy)                                                  \
    X(nvjpegBufferPinnedCreateV2)                                              \
    X(nvjpegBufferPinnedDestroy)                                               \
    X(nvjpegBufferDeviceCreateV2)                                              \
    X(nvjpegBufferDeviceDestroy)                                               \
    X(nvjpegStateAttachPinnedBuffer)                                           \
    X(nvjpegStateAttachDeviceBuffer)                                           \
    X(nvjpegJpegStreamCreate)                                                  \
    X(nvjpegJpegStreamDestroy)                                                 \
    X(nvjpegJpegStreamParse)                                                   \
    X(nvjpegJpegStreamGetFrameDimensions)                                      \
    X(nvjpegDecodeParamsCreate)                                                \
    X(nvjpegDecodeParamsDestroy)                                               \
    X(nvjpegDecodeParamsSetOutputFormat)                                       \
    X(nvjpegDecoderJpegSupported)                                              \
    X(nvjpegDecodeJpegHost)                                                    \
    X(nvjpegDecodeJpegTransferToDevice)                                        \
    X(nvjpegDecodeJpegDevice)

typedef struct nvj_api {
#define NVJ_FIELD_(f) __typeof__(f) *f;
    NVJ_FUNCS(NVJ_FIELD_)
#undef NVJ_FIELD_
} nvj_api;

/* The decoders, in the order each image tries them. */
static const struct {
    nvjpegBackend_t backend;
    const char *word;
} kinds[] = {
    {NVJPEG_BACKEND_HARDWARE, "hardware"},
    {NVJPEG_BACKEND_GPU_HYBRID, "GPU-hybrid"},
    {NVJPEG_BACKEND_HYBRID, "hybrid"},
};
#define NVJ_KINDS ((int)(sizeof kinds / sizeof kinds[0]))

typedef struct nvj_worker {
    int bound; /* the worker's thread is on the device */
    cudaStream_t stream;
    nvjpegJpegStream_t js;
    nvjpegDecodeParams_t params;
    nvjpegJpegState_t state[NVJ_KINDS];
    nvjpegBufferPinned_t pinned[2];
    nvjpegBufferDevice_t devbuf;
    cudaEvent_t pinned_free[2]; /* after the uploads from parity i */
    cudaEvent_t *done;          /* [slots]: after the slot's last sample */
    int parity;
    void *image; /* the decoded image */
    size_t image_cap;
    void *tmp; /* the vertical pass */
    size_t tmp_cap;
    void *coef; /* the filters, on the device */
    size_t coef_cap;
    int32_t *coef_host[2]; /* and on the host, page-locked, per parity */
    size_t coef_host_cap[2];
} nvj_worker;

typedef struct nvj {
    gpu_decoder pub; /* first: the gpu_decoder * handed out is this */
    backend *be;
    gpu_decoder_config cfg;
    void *lib;
    nvj_api api;
    nvjpegHandle_t handle;
    nvjpegJpegDecoder_t dec[NVJ_KINDS];
    int kind[NVJ_KINDS]; /* dec[i] is kinds[kind[i]] */
    int ndec;
    nvjpegDevAllocatorV2_t dev_alloc;
    nvjpegPinnedAllocatorV2_t pin_alloc;
    void *lut;              /* float formats: the table, on the device */
    _Atomic uint64_t bytes; /* device memory held */
    nvj_worker *w;
} nvj;

static const char *status_name(nvjpegStatus_t s)
{
    switch (s) {
    case NVJPEG_STATUS_SUCCESS:
        return "success";
    case NVJPEG_STATUS_NOT_INITIALIZED:
        return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
        return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
        return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
        return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
        return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
        return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
        return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
        return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
        return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
        return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default:
        return "an unknown nvJPEG status";
    }
}

/* ---- memory: nvJPEG's through these, so that pinload counts it ---- */

static int dev_malloc(void *ctx, void **p, size_t n, cudaStream_t s)
{
    nvj *g = ctx;
    (void)s;
    const cudaError_t e = cudaMalloc(p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return 1;
    }
    atomic_fetch_add(&g->bytes, (uint64_t)n);
    return 0;
}

/* Freed only once the stream it was used on is done with it. */
static int dev_free(void *ctx, void *p, size_t n, cudaStream_t s)
{
    nvj *g = ctx;
    if (!p)
        return 0;
    if (s)
        (void)cudaStreamSynchronize(s);
    const cudaError_t e = cudaFree(p);
    (void)cudaGetLastError();
    atomic_fetch_sub(&g->bytes, (uint64_t)n);
    return e != cudaSuccess;
}

static int pin_malloc(void *ctx, void **p, size_t n, cudaStream_t s)
{
    (void)ctx;
    (void)s;
    if (cudaHostAlloc(p, n, cudaHostAllocDefault) != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return 1;
    }
    return 0;
}

static int pin_free(void *ctx, void *p, size_t n, cudaStream_t s)
{
    (void)ctx;
    (void)n;
    if (!p)
        return 0;
    if (s)
        (void)cudaStreamSynchronize(s);
    const cudaError_t e = cudaFreeHost(p);
    (void)cudaGetLastError();
    return e != cudaSuccess;
}

/* Device memory of at least `need` bytes at *p, the old freed once the
 * worker's stream no longer reads it. */
static int reserve_dev(nvj *g, nvj_worker *w, void **p, size_t *cap,
                       size_t need)
{
    if (need <= *cap)
        return 0;
    if (*p) {
        (void)cudaStreamSynchronize(w->stream);
        (void)dev_free(g, *p, *cap, NULL);
        *p = NULL;
        *cap = 0;
    }
    const size_t n = (need + 65535) / 65536 * 65536;
    if (dev_malloc(g, p, n, NULL) != 0)
        return PL_ENOMEM;
    *cap = n;
    return 0;
}

/* The parity's page-locked filters, of at least `need` bytes; its last
 * upload is done (pinned_free was waited for). */
static int reserve_host(nvj_worker *w, int parity, size_t need)
{
    if (need <= w->coef_host_cap[parity])
        return 0;
    (void)pin_free(NULL, w->coef_host[parity], 0, NULL);
    w->coef_host[parity] = NULL;
    w->coef_host_cap[parity] = 0;
    const size_t n = (need + 4095) / 4096 * 4096;
    void *p;
    if (pin_malloc(NULL, &p, n, NULL) != 0)
        return PL_ENOMEM;
    w->coef_host[parity] = p;
    w->coef_host_cap[parity] = n;
    return 0;
}

/* ---- one sample ---- */

static int refuse(char *reason, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refuse(char *reason, size_t cap, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, cap, fmt, ap);
    va_end(ap);
    return code;
}

/* The filters of one axis into the block, as gpu_resize.h lays them out. */
static int32_t *put_axis(int32_t *b, const gpu_axis *a)
{
    for (int i = 0; i < a->out_n; i++)
        *b++ = a->first[i];
    for (int i = 0; i < a->out_n; i++)
        *b++ = a->count[i];
    for (size_t k = 0; k < (size_t)a->out_n * (size_t)a->taps; k++)
        *b++ = a->w[k];
    return b;
}

/* Which decoder takes the parsed image: the first that says it can. */
static int choose(nvj *g, nvj_worker *w)
{
    for (int i = 0; i < g->ndec; i++) {
        int unsupported = 1;
        if (g->api.nvjpegDecoderJpegSupported(g->dec[i], w->js, w->params,
                                              &unsupported) ==
                NVJPEG_STATUS_SUCCESS &&
            unsupported == 0)
            return i;
    }
    return -1;
}

/* The host phase: parse, choose, reserve, decode on the host. Nothing is
 * queued yet when it fails. */
static int host_phase(nvj *g, nvj_worker *w, const gpu_sample *s, int *d,
                      char *reason, size_t cap)
{
    const nvj_api *a = &g->api;
    nvjpegStatus_t st =
        a->nvjpegJpegStreamParse(g->handle, s->bytes, s->len, 0, 0, w->js);
    if (st != NVJPEG_STATUS_SUCCESS)
        return refuse(reason, cap, PL_ECORRUPT, "nvjpegJpegStreamParse: %s",
                      status_name(st));
    unsigned fw = 0, fh = 0;
    st = a->nvjpegJpegStreamGetFrameDimensions(w->js, &fw, &fh);
    if (st != NVJPEG_STATUS_SUCCESS || (int)fw != s->width ||
        (int)fh != s->height)
        return refuse(reason, cap, PL_EUNSUPPORTED,
                      "nvJPEG reads a %ux%u frame where libjpeg reads %dx%d",
                      fw, fh, s->width, s->height);
    if ((*d = choose(g, w)) < 0)
        return refuse(reason, cap, PL_EUNSUPPORTED,
                      "none of nvJPEG's decoders supports this JPEG");
    const size_t span = (size_t)(s->h.hi - s->h.lo);
    const size_t coef =
        gr_block_ints(s->h.out_n, s->v.out_n, s->v.taps, s->h.taps) *
        sizeof(int32_t);
    if (reserve_dev(g, w, &w->image, &w->image_cap,
                    (size_t)s->width * (size_t)s->height * 3) < 0 ||
        reserve_dev(g, w, &w->tmp, &w->tmp_cap,
                    span * 3 * (size_t)s->v.out_n * sizeof(int16_t)) < 0 ||
        reserve_dev(g, w, &w->coef, &w->coef_cap, coef) < 0)
        return refuse(reason, cap, PL_ENOMEM,
                      "no device memory for a %dx%d image", s->width,
                      s->height);
    const int p = w->parity;
    if (cudaEventSynchronize(w->pinned_free[p]) != cudaSuccess ||
        reserve_host(w, p, coef) < 0) {
        (void)cudaGetLastError();
        return refuse(reason, cap, PL_ENOMEM,
                      "no page-locked memory for the filters");
    }
    int32_t *b = put_axis(w->coef_host[p], &s->v);
    put_axis(b, &s->h);
    const int k = *d;
    st = a->nvjpegStateAttachPinnedBuffer(w->state[k], w->pinned[p]);
    if (st == NVJPEG_STATUS_SUCCESS)
        st = a->nvjpegDecodeJpegHost(g->handle, g->dec[k], w->state[k],
                                     w->params, w->js);
    if (st != NVJPEG_STATUS_SUCCESS)
        return refuse(reason, cap,
                      st == NVJPEG_STATUS_ALLOCATOR_FAILURE ? PL_ENOMEM
                                                            : PL_ECORRUPT,
                      "nvjpegDecodeJpegHost (%s): %s", kinds[g->kind[k]].word,
                      status_name(st));
    return 0;
}

/* The device phases, in the worker's stream: the bitstream and the
 * filters up, the decode, the resize into s->dst, the slot's event. */
static int device_phase(nvj *g, nvj_worker *w, int d, int slot,
                        const gpu_sample *s, char *reason, size_t cap)
{
    const nvj_api *a = &g->api;
    const int p = w->parity;
    nvjpegStatus_t st = a->nvjpegDecodeJpegTransferToDevice(
        g->handle, g->dec[d], w->state[d], w->js, w->stream);
    const size_t coef =
        gr_block_ints(s->h.out_n, s->v.out_n, s->v.taps, s->h.taps) *
        sizeof(int32_t);
    cudaError_t e = cudaSuccess;
    if (st == NVJPEG_STATUS_SUCCESS)
        e = cudaMemcpyAsync(w->coef, w->coef_host[p], coef,
                            cudaMemcpyHostToDevice, w->stream);
    /* Recorded whatever happened: the host waits for it before it writes
     * this parity's buffers again. */
    const cudaError_t er = cudaEventRecord(w->pinned_free[p], w->stream);
    w->parity ^= 1;
    if (st != NVJPEG_STATUS_SUCCESS)
        return refuse(reason, cap, PL_ECORRUPT,
                      "nvjpegDecodeJpegTransferToDevice: %s", status_name(st));
    if (e != cudaSuccess || er != cudaSuccess)
        return refuse(reason, cap, PL_ECUDA, "uploading the filters: %s",
                      cudaGetErrorString(e != cudaSuccess ? e : er));
    nvjpegImage_t out;
    memset(&out, 0, sizeof out);
    out.channel[0] = w->image;
    out.pitch[0] = (size_t)s->width * 3;
    st = a->nvjpegDecodeJpegDevice(g->handle, g->dec[d], w->state[d], &out,
                                   w->stream);
    if (st != NVJPEG_STATUS_SUCCESS)
        return refuse(reason, cap, PL_ECORRUPT, "nvjpegDecodeJpegDevice: %s",
                      status_name(st));
    const gpu_resize_args r = {
        .img = w->image,
        .pitch = (size_t)s->width * 3,
        .coef = w->coef,
        .out_w = s->h.out_n,
        .out_h = s->v.out_n,
        .vtaps = s->v.taps,
        .htaps = s->h.taps,
        .x0 = s->h.lo,
        .span = s->h.hi - s->h.lo,
        .tmp = w->tmp,
        .dst = s->dst,
        .format = g->cfg.format == PL_FORMAT_U8_NHWC    ? GR_U8
                  : g->cfg.format == PL_FORMAT_F32_NCHW ? GR_F32
                                                        : GR_F16,
        .channels_last = g->cfg.channels_last,
        .flip = s->flip,
        .lut = g->lut,
    };
    e = (cudaError_t)gpu_resize(w->stream, &r);
    if (e == cudaSuccess)
        e = cudaEventRecord(w->done[slot], w->stream);
    if (e != cudaSuccess)
        return refuse(reason, cap, PL_ECUDA, "the resize kernel: %s",
                      cudaGetErrorString(e));
    return 0;
}

static int nvj_decode(gpu_decoder *gd, int worker, int slot,
                      const gpu_sample *s, char *reason, size_t cap)
{
    nvj *g = (nvj *)gd;
    nvj_worker *w = &g->w[worker];
    if (!w->bound) {
        if (g->be->ops->bind_thread(g->be) < 0)
            return refuse(reason, cap, PL_ECUDA, "%s", pl_last_error());
        w->bound = 1;
    }
    int d = -1;
    int rc = host_phase(g, w, s, &d, reason, cap);
    if (rc == 0 && (rc = device_phase(g, w, d, slot, s, reason, cap)) < 0) {
        /* Work of this sample may be queued: done before the CPU writes
         * the sample elsewhere and anything reuses s->dst. */
        (void)cudaStreamSynchronize(w->stream);
    }
    if (rc < 0)
        (void)cudaGetLastError();
    return rc;
}

static struct CUevent_st *nvj_decoded(gpu_decoder *gd, int worker, int slot)
{
    return ((nvj *)gd)->w[worker].done[slot];
}

static uint64_t nvj_device_bytes(const gpu_decoder *gd)
{
    return atomic_load(&((nvj *)gd)->bytes);
}

/* ---- open and close ---- */

static void worker_close(nvj *g, nvj_worker *w)
{
    const nvj_api *a = &g->api;
    if (w->stream)
        (void)cudaStreamSynchronize(w->stream);
    for (int i = 0; i < NVJ_KINDS; i++)
        if (w->state[i])
            a->nvjpegJpegStateDestroy(w->state[i]);
    for (int i = 0; i < 2; i++) {
        if (w->pinned[i])
            a->nvjpegBufferPinnedDestroy(w->pinned[i]);
        if (w->pinned_free[i])
            (void)cudaEventDestroy(w->pinned_free[i]);
        (void)pin_free(NULL, w->coef_host[i], 0, NULL);
    }
    if (w->devbuf)
        a->nvjpegBufferDeviceDestroy(w->devbuf);
    if (w->params)
        a->nvjpegDecodeParamsDestroy(w->params);
    if (w->js)
        a->nvjpegJpegStreamDestroy(w->js);
    for (int i = 0; w->done && i < g->cfg.slots; i++)
        if (w->done[i])
            (void)cudaEventDestroy(w->done[i]);
    free(w->done);
    (void)dev_free(g, w->image, w->image_cap, NULL);
    (void)dev_free(g, w->tmp, w->tmp_cap, NULL);
    (void)dev_free(g, w->coef, w->coef_cap, NULL);
    if (w->stream)
        (void)cudaStreamDestroy(w->stream);
    (void)cudaGetLastError();
    memset(w, 0, sizeof *w);
}

static void nvj_close(gpu_decoder *gd)
{
    nvj *g = (nvj *)gd;
    if (!g)
        return;
    for (int i = 0; g->w && i < g->cfg.workers; i++)
        worker_close(g, &g->w[i]);
    free(g->w);
    for (int i = 0; i < g->ndec; i++)
        g->api.nvjpegDecoderDestroy(g->dec[i]);
    if (g->handle)
        g->api.nvjpegDestroy(g->handle);
    (void)dev_free(g, g->lut, g->cfg.lut_bytes, NULL);
    if (g->lib)
        dlclose(g->lib);
    free(g);
}

static int worker_open(nvj *g, nvj_worker *w, char *why, size_t cap)
{
    const nvj_api *a = &g->api;
    cudaError_t e =
        cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking);
    w->done = calloc((size_t)g->cfg.slots, sizeof *w->done);
    if (!w->done)
        return refuse(why, cap, PL_ENOMEM, "out of memory");
    for (int i = 0; i < g->cfg.slots && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&w->done[i], cudaEventDisableTiming);
    for (int i = 0; i < 2 && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&w->pinned_free[i],
                                     cudaEventDisableTiming);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return refuse(
            why, cap, e == cudaErrorMemoryAllocation ? PL_ENOMEM : PL_ECUDA,
            "a decode stream and its events: %s", cudaGetErrorString(e));
    }
    nvjpegStatus_t st = a->nvjpegJpegStreamCreate(g->handle, &w->js);
    if (st == NVJPEG_STATUS_SUCCESS)
        st = a->nvjpegDecodeParamsCreate(g->handle, &w->params);
    if (st == NVJPEG_STATUS_SUCCESS)
        st =
            a->nvjpegDecodeParamsSetOutputFormat(w->params, NVJPEG_OUTPUT_RGBI);
    for (int i = 0; i < 2 && st == NVJPEG_STATUS_SUCCESS; i++)
        st = a->nvjpegBufferPinnedCreateV2(g->handle, &g->pin_alloc,
                                           &w->pinned[i]);
    if (st == NVJPEG_STATUS_SUCCESS)
        st =
            a->nvjpegBufferDeviceCreateV2(g->handle, &g->dev_alloc, &w->devbuf);
    for (int i = 0; i < g->ndec && st == NVJPEG_STATUS_SUCCESS; i++) {
        st = a->nvjpegDecoderStateCreate(g->handle, g->dec[i], &w->state[i]);
        if (st == NVJPEG_STATUS_SUCCESS)
            st = a->nvjpegStateAttachDeviceBuffer(w->state[i], w->devbuf);
        if (st == NVJPEG_STATUS_SUCCESS)
            st = a->nvjpegStateAttachPinnedBuffer(w->state[i], w->pinned[0]);
    }
    if (st != NVJPEG_STATUS_SUCCESS)
        return refuse(why, cap,
                      st == NVJPEG_STATUS_ALLOCATOR_FAILURE ? PL_ENOMEM
                                                            : PL_ECUDA,
                      "a worker's nvJPEG state: %s", status_name(st));
    return 0;
}

static int load(nvj *g, char *why, size_t cap)
{
    const char *env = getenv("PINLOAD_NVJPEG");
    const char *path = env && *env ? env : "libnvjpeg.so.13";
    g->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g->lib) {
        const char *e = dlerror();
        return refuse(why, cap, PL_EUNSUPPORTED, "nvJPEG cannot be loaded: %s",
                      e ? e : path);
    }
#define NVJ_FIND_(f)                                                           \
    if (!(*(void **)&g->api.f = dlsym(g->lib, #f)))                            \
        return refuse(why, cap, PL_EUNSUPPORTED,                               \
                      "%s has no %s: nvJPEG 12.1 or later is needed", path,    \
                      #f);
    NVJ_FUNCS(NVJ_FIND_)
#undef NVJ_FIND_
    return 0;
}

/* The library's handle (on the hardware backend where the GPU has one),
 * and every decoder it makes. */
static int make_decoders(nvj *g, char *why, size_t cap)
{
    const nvj_api *a = &g->api;
    unsigned flags = 0;
#ifdef NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
    /* Chroma upsampled by interpolation, as libjpeg's fancy upsampling
     * does, rather than replicated. */
    flags |= NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
#endif
    if (g->cfg.strict)
        flags |= NVJPEG_FLAGS_BITSTREAM_STRICT;
    nvjpegStatus_t st = NVJPEG_STATUS_NOT_INITIALIZED;
    for (int tries = 0; tries < 4 && st != NVJPEG_STATUS_SUCCESS; tries++) {
        const nvjpegBackend_t b =
            tries & 1 ? NVJPEG_BACKEND_DEFAULT : NVJPEG_BACKEND_HARDWARE;
        /* A library that knows no such flag says so: then without it. */
        const unsigned f = tries < 2 ? flags : flags & ~32u;
        st =
            a->nvjpegCreateExV2(b, &g->dev_alloc, &g->pin_alloc, f, &g->handle);
    }
    if (st != NVJPEG_STATUS_SUCCESS) {
        g->handle = NULL;
        return refuse(why, cap,
                      st == NVJPEG_STATUS_ALLOCATOR_FAILURE ? PL_ENOMEM
                                                            : PL_EUNSUPPORTED,
                      "nvjpegCreateExV2: %s", status_name(st));
    }
    for (int i = 0; i < NVJ_KINDS; i++)
        if (a->nvjpegDecoderCreate(g->handle, kinds[i].backend,
                                   &g->dec[g->ndec]) == NVJPEG_STATUS_SUCCESS)
            g->kind[g->ndec++] = i;
    if (g->ndec == 0)
        return refuse(why, cap, PL_EUNSUPPORTED,
                      "nvJPEG makes no decoder on this GPU");
    return 0;
}

static void make_name(nvj *g)
{
    int v[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        (void)g->api.nvjpegGetProperty((libraryPropertyType)i, &v[i]);
    char list[64] = "";
    for (int i = 0; i < g->ndec; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 i ? ", " : "", kinds[g->kind[i]].word);
    snprintf(g->pub.name, sizeof g->pub.name, "nvJPEG %d.%d.%d (%s)", v[0],
             v[1], v[2], list);
}

static int upload_lut(nvj *g, char *why, size_t cap)
{
    if (g->cfg.format == PL_FORMAT_U8_NHWC)
        return 0;
    if (dev_malloc(g, &g->lut, g->cfg.lut_bytes, NULL) != 0)
        return refuse(why, cap, PL_ENOMEM, "no device memory for its table");
    const cudaError_t e = cudaMemcpy(g->lut, g->cfg.lut, g->cfg.lut_bytes,
                                     cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return refuse(why, cap, PL_ECUDA, "uploading its table: %s",
                      cudaGetErrorString(e));
    }
    return 0;
}

static const gpu_decoder_ops nvj_ops = {
    .decode = nvj_decode,
    .decoded = nvj_decoded,
    .device_bytes = nvj_device_bytes,
    .close = nvj_close,
};

int nvjpeg_decoder_open(backend *be, const gpu_decoder_config *cfg,
                        gpu_decoder **out, char *why, size_t cap)
{
    *out = NULL;
    nvj *g = calloc(1, sizeof *g);
    if (!g)
        return refuse(why, cap, PL_ENOMEM, "out of memory");
    g->pub.ops = &nvj_ops;
    g->be = be;
    g->cfg = *cfg;
    g->dev_alloc = (nvjpegDevAllocatorV2_t){dev_malloc, dev_free, g};
    g->pin_alloc = (nvjpegPinnedAllocatorV2_t){pin_malloc, pin_free, g};
    int rc = load(g, why, cap);
    if (rc == 0)
        rc = make_decoders(g, why, cap);
    if (rc == 0)
        rc = upload_lut(g, why, cap);
    if (rc == 0 && (rc = gpu_resize_load()) != 0) {
        const cudaError_t e = (cudaError_t)rc;
        (void)cudaGetLastError();
        rc = refuse(why, cap, PL_ECUDA, "loading its kernels: %s",
                    cudaGetErrorString(e));
    }
    if (rc == 0 && !(g->w = calloc((size_t)cfg->workers, sizeof *g->w)))
        rc = refuse(why, cap, PL_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < cfg->workers; i++)
        rc = worker_open(g, &g->w[i], why, cap);
    if (rc < 0) {
        nvj_close(&g->pub);
        return rc;
    }
    make_name(g);
    *out = &g->pub;
    return 0;
}
