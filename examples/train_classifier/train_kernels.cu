/* The CUDA half of examples/train_classifier: the model's forward and
 * backward passes as kernels on a stream of our own. Written to be
 * obviously right rather than fast: each kernel is the host path's loop
 * nest (train_classifier.c, same names) with the outer loops turned into
 * one thread per output element, so the two can be read side by side. A
 * step at the defaults (32 images of 32 x 32, 128 hidden units) is about
 * 25 million multiply-adds; naive kernels do that in well under a
 * millisecond, far below the time the loader needs to decode a batch. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_classifier.h"

/* Pinned label buffers in flight. A slot is written again only after the
 * copy out of it, queued TC_STAGING steps earlier, has completed. The
 * loader lets the host run only a few batches (its prefetch slots and
 * device buffers) ahead of the GPU, so that copy has long finished and the
 * host does not stall on it. */
#define TC_STAGING 8

#define THREADS 256

/* Summed on the device by every step, read back once per epoch. */
struct tc_totals {
    double loss;
    unsigned long long correct;
};

struct tc_cuda {
    tc_model m;
    int max_batch;
    cudaStream_t stream;
    float *params, *velocity, *grads; /* device, [num_params] each */
    /* act[i + 1]: layer i's output, [max_batch][out]; act[0] is unused
     * (the batch is read in place). dact[i]: the loss's gradient with
     * respect to act[i]. Device memory. */
    float *act[TC_MAX_LAYERS + 1], *dact[TC_MAX_LAYERS + 1];
    int32_t *labels;                /* device, [max_batch] */
    int32_t *staging[TC_STAGING];   /* pinned host, [max_batch] each */
    cudaEvent_t staged[TC_STAGING]; /* the copy out of each slot */
    unsigned next_slot;
    tc_totals *totals; /* device */
    char error[256];
};

/* ---- kernels: see the host functions of the same names ------------------- */

static unsigned blocks(size_t n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

/* One thread per y[s][o]. */
static __global__ void dense_forward(const float *x, const float *w,
                                     const float *b, float *y, int count,
                                     int in, int out, int relu)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)count * out)
        return;
    const size_t s = i / out, o = i % out;
    const float *xs = x + s * in;
    const float *wo = w + o * in;
    float acc = b[o];
    for (int k = 0; k < in; k++)
        acc += xs[k] * wo[k];
    y[i] = relu && acc < 0.0f ? 0.0f : acc;
}

/* One thread per sample; the totals are summed with atomics. */
static __global__ void softmax_xent(const float *z, const int32_t *labels,
                                    float *dz, int count, int classes,
                                    tc_totals *totals)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= count)
        return;
    const float *zs = z + (size_t)s * classes;
    float *dzs = dz + (size_t)s * classes;
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (zs[c] > zs[best])
            best = c;
    float sum = 0.0f;
    for (int c = 0; c < classes; c++)
        sum += expf(zs[c] - zs[best]);
    const int y = labels[s];
    atomicAdd(&totals->loss, (double)(logf(sum) - (zs[y] - zs[best])));
    if (best == y)
        atomicAdd(&totals->correct, 1ull);
    for (int c = 0; c < classes; c++) {
        const float p = expf(zs[c] - zs[best]) / sum;
        dzs[c] = (p - (c == y ? 1.0f : 0.0f)) / (float)count;
    }
}

/* One thread per weight: gw[o][k] = sum_s dy[s][o] x[s][k]. */
static __global__ void dense_grad_weights(const float *dy, const float *x,
                                          float *gw, int count, int in, int out)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)in * out)
        return;
    const size_t o = i / in, k = i % in;
    float acc = 0.0f;
    for (int s = 0; s < count; s++)
        acc += dy[(size_t)s * out + o] * x[(size_t)s * in + k];
    gw[i] = acc;
}

/* One thread per bias: gb[o] = sum_s dy[s][o]. */
static __global__ void dense_grad_bias(const float *dy, float *gb, int count,
                                       int out)
{
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out)
        return;
    float acc = 0.0f;
    for (int s = 0; s < count; s++)
        acc += dy[(size_t)s * out + o];
    gb[o] = acc;
}

/* One thread per dx[s][k]. */
static __global__ void dense_grad_input(const float *dy, const float *w,
                                        const float *x, float *dx, int count,
                                        int in, int out, int relu)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)count * in)
        return;
    const size_t s = i / in, k = i % in;
    float acc = 0.0f;
    for (int o = 0; o < out; o++)
        acc += dy[s * out + o] * w[(size_t)o * in + k];
    dx[i] = relu && x[i] <= 0.0f ? 0.0f : acc;
}

/* One thread per parameter. */
static __global__ void sgd_update(float *p, float *v, const float *g, size_t n,
                                  float lr, float momentum)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    v[i] = momentum * v[i] + g[i];
    p[i] -= lr * v[i];
}

/* ---- the host side ------------------------------------------------------- */

static int failed(tc_cuda *c, const char *what, cudaError_t e)
{
    snprintf(c->error, sizeof c->error, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

/* For functions that own nothing: on error, say what and return -1. */
#define CU(c, call)                                                            \
    do {                                                                       \
        const cudaError_t e_ = (call);                                         \
        if (e_ != cudaSuccess)                                                 \
            return failed((c), #call, e_);                                     \
    } while (0)

static int alloc_buffers(tc_cuda *c)
{
    const size_t n = c->m.num_params * sizeof(float);
    CU(c, cudaMalloc((void **)&c->params, n));
    CU(c, cudaMalloc((void **)&c->velocity, n));
    CU(c, cudaMalloc((void **)&c->grads, n));
    for (int i = 0; i < c->m.num_layers; i++) {
        const size_t out =
            (size_t)c->max_batch * c->m.layer[i].out * sizeof(float);
        CU(c, cudaMalloc((void **)&c->act[i + 1], out));
        CU(c, cudaMalloc((void **)&c->dact[i + 1], out));
    }
    const size_t labels = (size_t)c->max_batch * sizeof(int32_t);
    CU(c, cudaMalloc((void **)&c->labels, labels));
    for (int i = 0; i < TC_STAGING; i++) {
        CU(c, cudaHostAlloc((void **)&c->staging[i], labels,
                            cudaHostAllocDefault));
        CU(c, cudaEventCreateWithFlags(&c->staged[i], cudaEventDisableTiming));
    }
    CU(c, cudaMalloc((void **)&c->totals, sizeof(tc_totals)));
    return 0;
}

static int setup(tc_cuda *c, const float *params, int device)
{
    CU(c, cudaSetDevice(device));
    /* Non-blocking: the stream must not wait for the legacy default
     * stream, which other code in the process may be using. */
    CU(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    if (alloc_buffers(c) < 0)
        return -1;
    const size_t n = c->m.num_params * sizeof(float);
    CU(c, cudaMemcpy(c->params, params, n, cudaMemcpyHostToDevice));
    CU(c, cudaMemset(c->velocity, 0, n));
    CU(c, cudaMemset(c->totals, 0, sizeof(tc_totals)));
    return 0;
}

extern "C" int tc_cuda_create(const tc_model *m, const float *params,
                              int max_batch, int device, tc_cuda **out,
                              char *err, size_t errlen)
{
    tc_cuda *c = (tc_cuda *)calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "tc_cuda_create: out of memory");
        return -1;
    }
    c->m = *m;
    c->max_batch = max_batch;
    if (setup(c, params, device) < 0) {
        snprintf(err, errlen, "tc_cuda_create: %s", c->error);
        tc_cuda_destroy(c);
        return -1;
    }
    *out = c;
    return 0;
}

extern "C" struct CUstream_st *tc_cuda_stream(const tc_cuda *c)
{
    return c->stream;
}

/* Labels are host memory that the loader reuses after release; copying
 * them to a pinned slot first makes the copy truly asynchronous and lets
 * the caller release the batch at once. */
static int stage_labels(tc_cuda *c, const int32_t *labels, int count)
{
    const unsigned slot = c->next_slot++ % TC_STAGING;
    const size_t bytes = (size_t)count * sizeof(int32_t);
    CU(c, cudaEventSynchronize(c->staged[slot]));
    memcpy(c->staging[slot], labels, bytes);
    CU(c, cudaMemcpyAsync(c->labels, c->staging[slot], bytes,
                          cudaMemcpyHostToDevice, c->stream));
    CU(c, cudaEventRecord(c->staged[slot], c->stream));
    return 0;
}

static void backward(tc_cuda *c, const float *x, int count)
{
    const tc_model *m = &c->m;
    for (int i = m->num_layers - 1; i >= 0; i--) {
        const tc_layer *L = &m->layer[i];
        const float *in = i ? c->act[i] : x;
        const size_t weights = (size_t)L->in * L->out;
        dense_grad_weights<<<blocks(weights), THREADS, 0, c->stream>>>(
            c->dact[i + 1], in, c->grads + L->w, count, L->in, L->out);
        dense_grad_bias<<<blocks(L->out), THREADS, 0, c->stream>>>(
            c->dact[i + 1], c->grads + L->b, count, L->out);
        if (i > 0)
            dense_grad_input<<<blocks((size_t)count * L->in), THREADS, 0,
                               c->stream>>>(c->dact[i + 1], c->params + L->w,
                                            in, c->dact[i], count, L->in,
                                            L->out, m->layer[i - 1].relu);
    }
    sgd_update<<<blocks(m->num_params), THREADS, 0, c->stream>>>(
        c->params, c->velocity, c->grads, m->num_params, m->lr, m->momentum);
}

extern "C" int tc_cuda_step(tc_cuda *c, const float *x, const int32_t *labels,
                            int count, int train)
{
    const tc_model *m = &c->m;
    const int last = m->num_layers - 1;
    if (count < 1 || count > c->max_batch) {
        snprintf(c->error, sizeof c->error,
                 "tc_cuda_step: %d samples, batches hold 1 to %d", count,
                 c->max_batch);
        return -1;
    }
    if (stage_labels(c, labels, count) < 0)
        return -1;
    for (int i = 0; i <= last; i++) {
        const tc_layer *L = &m->layer[i];
        dense_forward<<<blocks((size_t)count * L->out), THREADS, 0,
                        c->stream>>>(i ? c->act[i] : x, c->params + L->w,
                                     c->params + L->b, c->act[i + 1], count,
                                     L->in, L->out, L->relu);
    }
    softmax_xent<<<blocks(count), THREADS, 0, c->stream>>>(
        c->act[last + 1], c->labels, c->dact[last + 1], count, m->classes,
        c->totals);
    if (train)
        backward(c, x, count);
    /* Launch errors only (a bad configuration); faults in the kernels
     * surface at the next synchronisation, in tc_cuda_totals. */
    CU(c, cudaGetLastError());
    return 0;
}

extern "C" int tc_cuda_totals(tc_cuda *c, double *loss_sum, int64_t *correct)
{
    tc_totals t;
    CU(c, cudaMemcpyAsync(&t, c->totals, sizeof t, cudaMemcpyDeviceToHost,
                          c->stream));
    CU(c, cudaStreamSynchronize(c->stream));
    CU(c, cudaMemsetAsync(c->totals, 0, sizeof t, c->stream));
    *loss_sum = t.loss;
    *correct = (int64_t)t.correct;
    return 0;
}

extern "C" const char *tc_cuda_error(const tc_cuda *c)
{
    return c->error;
}

/* Frees what was allocated, whatever setup() got to. Errors are ignored:
 * there is nothing left to do about them. */
extern "C" void tc_cuda_destroy(tc_cuda *c)
{
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    cudaFree(c->totals);
    for (int i = 0; i < TC_STAGING; i++) {
        if (c->staged[i])
            cudaEventDestroy(c->staged[i]);
        cudaFreeHost(c->staging[i]);
    }
    cudaFree(c->labels);
    for (int i = 0; i <= TC_MAX_LAYERS; i++) {
        cudaFree(c->act[i]);
        cudaFree(c->dact[i]);
    }
    cudaFree(c->grads);
    cudaFree(c->velocity);
    cudaFree(c->params);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    free(c);
}
