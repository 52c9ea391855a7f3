/* nvjpegsim: a fake nvJPEG for the simulated runtime, built as a shared
 * library (build/sim/libnvjpegsim.so, SONAME libnvjpeg.so.13) that pinload
 * loads as it loads the real one (PINLOAD_NVJPEG names it), exporting the
 * calls pinload makes with nvjpeg.h's own signatures. It decodes with
 * libjpeg-turbo, as pinload's CPU path does (codecs/jpeg.c's settings:
 * RGB, the accurate integer IDCT, libjpeg's default upsampling), so a GPU
 * decode on the sim gives the CPU path's pixels.
 *
 * It keeps nvJPEG's decoupled phases and their contract:
 * - nvjpegDecodeJpegHost decodes on the calling thread (as the hybrid
 *   backend's Huffman decode runs on the host) into the page-locked buffer
 *   attached to the state; writing it while a queued copy still reads it
 *   is a violation (cudasim_violation), as it would race on a GPU;
 * - nvjpegDecodeJpegTransferToDevice queues, on the caller's stream, the
 *   copy of that buffer into the state's device buffer;
 * - nvjpegDecodeJpegDevice queues an operation that writes the image into
 *   the destination, in stream order (the destination is garbage until it
 *   has run, as device memory is in the sim);
 * - buffers grow through the allocators the handle was made with, so
 *   pinload's accounting sees them, and a buffer is freed on its stream.
 * Any libjpeg warning (corrupt data, a premature end) makes the host phase
 * fail with NVJPEG_STATUS_BAD_JPEG, as nvJPEG fails on a stream it cannot
 * follow: such a file goes back to pinload's CPU path. Its decoders:
 * hardware (baseline only; absent with CUDASIM_NVJPEG_HW=0), GPU-hybrid
 * and hybrid (baseline and progressive), each for 8-bit Huffman JPEGs of
 * one grey or three YCbCr components. Faults: every call cudasim lists
 * (SIM_NVJPEG_CALLS) goes through cudasim_call, so cudasim_inject can make
 * it fail. nvjpegsim_decodes() and nvjpegsim_live() tell the tests what it
 * did and what it holds. */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <nvjpeg.h>

#include "cudasim.h"

#define EXPORT __attribute__((visibility("default")))

struct nvjpegHandle {
    nvjpegBackend_t backend;
    nvjpegDevAllocatorV2_t dev;
    nvjpegPinnedAllocatorV2_t pin;
};

struct nvjpegJpegDecoder {
    nvjpegBackend_t backend;
};

struct nvjpegBufferPinned {
    nvjpegPinnedAllocatorV2_t a;
    void *p;
    size_t size;
};

struct nvjpegBufferDevice {
    nvjpegDevAllocatorV2_t a;
    void *p;
    size_t size;
};

struct nvjpegJpegStream {
    const unsigned char *data;
    size_t len;
    unsigned width, height;
    int components, progressive, common;
};

struct nvjpegDecodeParams {
    nvjpegOutputFormat_t format;
};

struct nvjpegJpegState {
    nvjpegJpegDecoder_t dec;
    nvjpegBufferPinned_t pinned;
    nvjpegBufferDevice_t device;
    unsigned width, height;
    int phase; /* 1: host phase done, 2: transferred */
};

/* What the tests ask (dlsym): objects made and not destroyed, and the
 * host phases done with each backend's decoder. */
EXPORT long nvjpegsim_live(void);
EXPORT long nvjpegsim_decodes(int backend);

static atomic_long live;       /* objects made and not destroyed */
static atomic_long decodes[8]; /* host phases done, per backend */

EXPORT long nvjpegsim_live(void)
{
    return atomic_load(&live);
}

EXPORT long nvjpegsim_decodes(int backend)
{
    return backend >= 0 && backend < 8 ? atomic_load(&decodes[backend]) : 0;
}

static void *make(size_t n)
{
    void *p = calloc(1, n);
    if (p)
        atomic_fetch_add(&live, 1);
    return p;
}

static void unmake(void *p)
{
    if (p) {
        atomic_fetch_sub(&live, 1);
        free(p);
    }
}

/* An injected fault's status: the allocation kind, or `usual`. */
static nvjpegStatus_t fault(const char *call, nvjpegStatus_t usual)
{
    const cudaError_t e = cudasim_call(call);
    if (e == cudaSuccess)
        return NVJPEG_STATUS_SUCCESS;
    return e == cudaErrorMemoryAllocation ? NVJPEG_STATUS_ALLOCATOR_FAILURE
                                          : usual;
}

static int hw_present(void)
{
    const char *v = getenv("CUDASIM_NVJPEG_HW");
    return !v || strcmp(v, "0") != 0;
}

/* ---- the library, handles, decoders, states ---- */

EXPORT nvjpegStatus_t nvjpegGetProperty(libraryPropertyType type, int *value)
{
    static const int version[3] = {13, 0, 0};
    if (!value || (int)type < 0 || (int)type > 2)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    *value = version[(int)type];
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegCreateExV2(nvjpegBackend_t backend,
                                       nvjpegDevAllocatorV2_t *dev,
                                       nvjpegPinnedAllocatorV2_t *pin,
                                       unsigned int flags,
                                       nvjpegHandle_t *handle)
{
    (void)flags;
    if (!handle || !dev || !pin)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    if (backend == NVJPEG_BACKEND_HARDWARE && !hw_present())
        return NVJPEG_STATUS_ARCH_MISMATCH;
    const nvjpegStatus_t st =
        fault("nvjpegCreateExV2", NVJPEG_STATUS_INTERNAL_ERROR);
    if (st)
        return st;
    nvjpegHandle_t h = make(sizeof *h);
    if (!h)
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    h->backend = backend;
    h->dev = *dev;
    h->pin = *pin;
    *handle = h;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDestroy(nvjpegHandle_t handle)
{
    unmake(handle);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecoderCreate(nvjpegHandle_t handle,
                                          nvjpegBackend_t backend,
                                          nvjpegJpegDecoder_t *out)
{
    if (!handle || !out)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    if (backend == NVJPEG_BACKEND_HARDWARE && !hw_present())
        return NVJPEG_STATUS_ARCH_MISMATCH;
    if (backend != NVJPEG_BACKEND_HARDWARE &&
        backend != NVJPEG_BACKEND_GPU_HYBRID &&
        backend != NVJPEG_BACKEND_HYBRID)
        return NVJPEG_STATUS_JPEG_NOT_SUPPORTED;
    const nvjpegStatus_t st =
        fault("nvjpegDecoderCreate", NVJPEG_STATUS_INTERNAL_ERROR);
    if (st)
        return st;
    nvjpegJpegDecoder_t d = make(sizeof *d);
    if (!d)
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    d->backend = backend;
    *out = d;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecoderDestroy(nvjpegJpegDecoder_t d)
{
    unmake(d);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecoderStateCreate(nvjpegHandle_t handle,
                                               nvjpegJpegDecoder_t dec,
                                               nvjpegJpegState_t *out)
{
    if (!handle || !dec || !out)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    const nvjpegStatus_t st =
        fault("nvjpegDecoderStateCreate", NVJPEG_STATUS_INTERNAL_ERROR);
    if (st)
        return st;
    nvjpegJpegState_t s = make(sizeof *s);
    if (!s)
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    s->dec = dec;
    *out = s;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegJpegStateDestroy(nvjpegJpegState_t s)
{
    unmake(s);
    return NVJPEG_STATUS_SUCCESS;
}

/* ---- buffers ---- */

EXPORT nvjpegStatus_t nvjpegBufferPinnedCreateV2(nvjpegHandle_t handle,
                                                 nvjpegPinnedAllocatorV2_t *a,
                                                 nvjpegBufferPinned_t *out)
{
    if (!handle || !a || !out)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    const nvjpegStatus_t st =
        fault("nvjpegBufferPinnedCreateV2", NVJPEG_STATUS_INTERNAL_ERROR);
    if (st)
        return st;
    nvjpegBufferPinned_t b = make(sizeof *b);
    if (!b)
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    b->a = *a;
    *out = b;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegBufferPinnedDestroy(nvjpegBufferPinned_t b)
{
    if (b && b->p)
        b->a.pinned_free(b->a.pinned_ctx, b->p, b->size, NULL);
    unmake(b);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegBufferDeviceCreateV2(nvjpegHandle_t handle,
                                                 nvjpegDevAllocatorV2_t *a,
                                                 nvjpegBufferDevice_t *out)
{
    if (!handle || !a || !out)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    const nvjpegStatus_t st =
        fault("nvjpegBufferDeviceCreateV2", NVJPEG_STATUS_INTERNAL_ERROR);
    if (st)
        return st;
    nvjpegBufferDevice_t b = make(sizeof *b);
    if (!b)
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    b->a = *a;
    *out = b;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegBufferDeviceDestroy(nvjpegBufferDevice_t b)
{
    if (b && b->p)
        b->a.dev_free(b->a.dev_ctx, b->p, b->size, NULL);
    unmake(b);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegStateAttachPinnedBuffer(nvjpegJpegState_t s,
                                                    nvjpegBufferPinned_t b)
{
    if (!s || !b)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    s->pinned = b;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegStateAttachDeviceBuffer(nvjpegJpegState_t s,
                                                    nvjpegBufferDevice_t b)
{
    if (!s || !b)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    s->device = b;
    return NVJPEG_STATUS_SUCCESS;
}

/* ---- streams and parameters ---- */

EXPORT nvjpegStatus_t nvjpegJpegStreamCreate(nvjpegHandle_t handle,
                                             nvjpegJpegStream_t *out)
{
    if (!handle || !out)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    return (*out = make(sizeof **out)) ? NVJPEG_STATUS_SUCCESS
                                       : NVJPEG_STATUS_ALLOCATOR_FAILURE;
}

EXPORT nvjpegStatus_t nvjpegJpegStreamDestroy(nvjpegJpegStream_t js)
{
    unmake(js);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecodeParamsCreate(nvjpegHandle_t handle,
                                               nvjpegDecodeParams_t *out)
{
    if (!handle || !out)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    return (*out = make(sizeof **out)) ? NVJPEG_STATUS_SUCCESS
                                       : NVJPEG_STATUS_ALLOCATOR_FAILURE;
}

EXPORT nvjpegStatus_t nvjpegDecodeParamsDestroy(nvjpegDecodeParams_t p)
{
    unmake(p);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecodeParamsSetOutputFormat(
    nvjpegDecodeParams_t p, nvjpegOutputFormat_t format)
{
    if (!p || format != NVJPEG_OUTPUT_RGBI)
        return NVJPEG_STATUS_INVALID_PARAMETER; /* the one pinload asks */
    p->format = format;
    return NVJPEG_STATUS_SUCCESS;
}

/* ---- libjpeg ---- */

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int warnings;
} jerr;

static void on_error(j_common_ptr c)
{
    longjmp(((jerr *)c->err)->jump, 1);
}

static void on_message(j_common_ptr c, int level)
{
    if (level < 0)
        ((jerr *)c->err)->warnings++;
}

static void setup(struct jpeg_decompress_struct *ci, jerr *e)
{
    ci->err = jpeg_std_error(&e->pub);
    e->pub.error_exit = on_error;
    e->pub.emit_message = on_message;
    e->warnings = 0;
}

/* The header, into js; 0, or -1 for a stream libjpeg refuses. */
static int parse(nvjpegJpegStream_t js)
{
    struct jpeg_decompress_struct ci;
    jerr e;
    setup(&ci, &e);
    jpeg_create_decompress(&ci);
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    jpeg_mem_src(&ci, js->data, (unsigned long)js->len);
    jpeg_read_header(&ci, TRUE);
    js->width = ci.image_width;
    js->height = ci.image_height;
    js->components = ci.num_components;
    js->progressive = ci.progressive_mode ? 1 : 0;
    js->common =
        !ci.arith_code && ci.data_precision == 8 &&
        ((ci.jpeg_color_space == JCS_GRAYSCALE && ci.num_components == 1) ||
         (ci.jpeg_color_space == JCS_YCbCr && ci.num_components == 3));
    jpeg_destroy_decompress(&ci);
    return 0;
}

/* The whole image as RGB into rgb (width x height x 3), as pinload's CPU
 * path decodes it; 0, or -1 on an error or any warning. */
static int decode_rgb(const nvjpegJpegStream_t js, unsigned char *rgb)
{
    struct jpeg_decompress_struct ci;
    jerr e;
    setup(&ci, &e);
    jpeg_create_decompress(&ci);
    if (setjmp(e.jump)) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    jpeg_mem_src(&ci, js->data, (unsigned long)js->len);
    jpeg_read_header(&ci, TRUE);
    ci.out_color_space = JCS_RGB;
    ci.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&ci);
    const size_t stride = (size_t)ci.output_width * 3;
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = rgb + (size_t)ci.output_scanline * stride;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    jpeg_finish_decompress(&ci);
    const int warned = e.warnings;
    jpeg_destroy_decompress(&ci);
    return warned ? -1 : 0;
}

EXPORT nvjpegStatus_t nvjpegJpegStreamParse(nvjpegHandle_t handle,
                                            const unsigned char *data,
                                            size_t length, int save_metadata,
                                            int save_stream,
                                            nvjpegJpegStream_t js)
{
    (void)save_metadata;
    (void)save_stream; /* 0 from pinload: the bytes stay the caller's */
    if (!handle || !data || !js)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    const nvjpegStatus_t st =
        fault("nvjpegJpegStreamParse", NVJPEG_STATUS_BAD_JPEG);
    if (st)
        return st;
    memset(js, 0, sizeof *js);
    js->data = data;
    js->len = length;
    return parse(js) == 0 ? NVJPEG_STATUS_SUCCESS : NVJPEG_STATUS_BAD_JPEG;
}

EXPORT nvjpegStatus_t nvjpegJpegStreamGetFrameDimensions(nvjpegJpegStream_t js,
                                                         unsigned int *width,
                                                         unsigned int *height)
{
    if (!js || !width || !height || !js->data)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    *width = js->width;
    *height = js->height;
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecoderJpegSupported(nvjpegJpegDecoder_t dec,
                                                 nvjpegJpegStream_t js,
                                                 nvjpegDecodeParams_t params,
                                                 int *is_supported)
{
    if (!dec || !js || !params || !is_supported)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    int ok = js->common;
    if (dec->backend == NVJPEG_BACKEND_HARDWARE)
        ok = ok && !js->progressive;
    *is_supported = ok ? 0 : 1; /* 0: it can */
    return NVJPEG_STATUS_SUCCESS;
}

/* ---- the phases ---- */

EXPORT nvjpegStatus_t nvjpegDecodeJpegHost(nvjpegHandle_t handle,
                                           nvjpegJpegDecoder_t dec,
                                           nvjpegJpegState_t s,
                                           nvjpegDecodeParams_t params,
                                           nvjpegJpegStream_t js)
{
    if (!handle || !dec || !s || !params || !js || !js->data || !s->pinned ||
        s->dec != dec)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    s->phase = 0;
    nvjpegStatus_t st = fault("nvjpegDecodeJpegHost", NVJPEG_STATUS_BAD_JPEG);
    if (st)
        return st;
    nvjpegBufferPinned_t b = s->pinned;
    if (b->p && cudasim_inflight(b->p))
        cudasim_violation("nvjpegDecodeJpegHost: the page-locked buffer "
                          "attached to the state is still read by a queued "
                          "copy, and the host phase overwrites it");
    const size_t n = (size_t)js->width * js->height * 3;
    if (n > b->size) {
        if (b->p)
            b->a.pinned_free(b->a.pinned_ctx, b->p, b->size, NULL);
        b->p = NULL;
        b->size = 0;
        if (b->a.pinned_malloc(b->a.pinned_ctx, &b->p, n, NULL) != 0)
            return NVJPEG_STATUS_ALLOCATOR_FAILURE;
        b->size = n;
    }
    if (decode_rgb(js, b->p) < 0)
        return NVJPEG_STATUS_BAD_JPEG;
    s->width = js->width;
    s->height = js->height;
    s->phase = 1;
    if ((int)dec->backend >= 0 && (int)dec->backend < 8)
        atomic_fetch_add(&decodes[dec->backend], 1);
    return NVJPEG_STATUS_SUCCESS;
}

EXPORT nvjpegStatus_t nvjpegDecodeJpegTransferToDevice(nvjpegHandle_t handle,
                                                       nvjpegJpegDecoder_t dec,
                                                       nvjpegJpegState_t s,
                                                       nvjpegJpegStream_t js,
                                                       cudaStream_t stream)
{
    if (!handle || !dec || !s || !js || s->phase != 1 || !s->device)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    const nvjpegStatus_t st = fault("nvjpegDecodeJpegTransferToDevice",
                                    NVJPEG_STATUS_EXECUTION_FAILED);
    if (st)
        return st;
    nvjpegBufferDevice_t b = s->device;
    const size_t n = (size_t)s->width * s->height * 3;
    if (n > b->size) {
        if (b->p)
            b->a.dev_free(b->a.dev_ctx, b->p, b->size, stream);
        b->p = NULL;
        b->size = 0;
        if (b->a.dev_malloc(b->a.dev_ctx, &b->p, n, stream) != 0)
            return NVJPEG_STATUS_ALLOCATOR_FAILURE;
        b->size = n;
    }
    if (cudaMemcpyAsync(b->p, s->pinned->p, n, cudaMemcpyHostToDevice,
                        stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return NVJPEG_STATUS_EXECUTION_FAILED;
    }
    s->phase = 2;
    return NVJPEG_STATUS_SUCCESS;
}

/* The device phase's operation: the decoded rows into the destination. */
typedef struct put {
    const unsigned char *src; /* engine views */
    unsigned char *dst;
    size_t pitch, row;
    unsigned height;
} put;

static void put_rows(void *arg)
{
    put *p = arg;
    for (unsigned y = 0; y < p->height; y++)
        memcpy(p->dst + (size_t)y * p->pitch, p->src + (size_t)y * p->row,
               p->row);
    free(p);
}

EXPORT nvjpegStatus_t nvjpegDecodeJpegDevice(nvjpegHandle_t handle,
                                             nvjpegJpegDecoder_t dec,
                                             nvjpegJpegState_t s,
                                             nvjpegImage_t *dest,
                                             cudaStream_t stream)
{
    if (!handle || !dec || !s || !dest || s->phase != 2 || !dest->channel[0] ||
        dest->pitch[0] < (size_t)s->width * 3)
        return NVJPEG_STATUS_INVALID_PARAMETER;
    const nvjpegStatus_t st =
        fault("nvjpegDecodeJpegDevice", NVJPEG_STATUS_EXECUTION_FAILED);
    if (st)
        return st;
    put *p = malloc(sizeof *p);
    if (!p)
        return NVJPEG_STATUS_ALLOCATOR_FAILURE;
    p->src = cudasim_device_view(s->device->p);
    p->dst = cudasim_device_view(dest->channel[0]);
    p->pitch = dest->pitch[0];
    p->row = (size_t)s->width * 3;
    p->height = s->height;
    if (!p->src || !p->dst) {
        free(p);
        return NVJPEG_STATUS_INVALID_PARAMETER;
    }
    const void *mem[2] = {s->device->p, dest->channel[0]};
    const size_t n[2] = {p->row * s->height,
                         p->pitch * (s->height - 1) + p->row};
    if (cudasim_launch_n(stream, put_rows, p, free, mem, n, 2) != cudaSuccess) {
        free(p);
        (void)cudaGetLastError();
        return NVJPEG_STATUS_EXECUTION_FAILED;
    }
    s->phase = 0;
    return NVJPEG_STATUS_SUCCESS;
}
