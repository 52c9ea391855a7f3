/* train_classifier: a real training loop fed by pinload. A softmax
 * classifier (one hidden ReLU layer, or linear with --hidden 0) learns the
 * classes of an ImageFolder tree from its N x N RGB pixels, which the
 * loader decodes, augments (random resized crop + flip), resizes and
 * normalises to float32 NCHW. Plain SGD with momentum on the cross-entropy.
 *
 *     build/pinload-mkdata --out /tmp/tc_data --classes 10 --per-class 60
 *     build/examples/train_classifier --data /tmp/tc_data --epochs 5
 *
 * The loader's backend decides where the maths runs. On the CUDA backend
 * the batch is device memory, and the forward and backward passes are
 * kernels (train_kernels.cu) on a stream of our own, in pinload's protocol:
 * pl_loader_next, pl_batch_wait(b, stream), kernels reading b->data on
 * stream, pl_loader_release(b, stream); the host waits once per epoch, to
 * read the loss and accuracy the kernels summed on the device. On the host
 * backend the batch is host memory and the same maths runs here, loop for
 * loop, from the same initial weights. Built with -DPL_SAMPLE_NO_CUDA, the
 * program has the host path only; built against the simulated CUDA runtime
 * (-DPL_SAMPLE_SIM_CUDA, make CUDA=sim), which runs no kernel, the CUDA
 * path keeps the protocol but copies each batch back on its stream and runs
 * the host maths on it. */
#define _DEFAULT_SOURCE /* clock_gettime; sigaction (tools/cli.h) */

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../tools/cli.h"
#include "pinload.h"
#include "train_classifier.h"

#ifdef PL_SAMPLE_SIM_CUDA
#include <cuda_runtime_api.h>
#endif

static const char usage[] =
    "usage: train_classifier --data DIR [--epochs E] [--batch B] [--size N]\n"
    "                        [--lr X] [--momentum M] [--hidden H] "
    "[--workers W]\n"
    "                        [--device auto|cuda|host] [--seed S]\n"
    "Trains a softmax classifier on the N x N RGB pixels of an ImageFolder "
    "tree\n(training augmentation), then measures its accuracy on centre "
    "crops.\n"
    "  --data DIR      ImageFolder root DIR/<class>/*.jpg, or a list file "
    "(required)\n"
    "  --epochs E      passes over the data (default 5)\n"
    "  --batch B       samples per batch (default 32)\n"
    "  --size N        images are resized to N x N (default 32)\n"
    "  --lr X          SGD learning rate (default 0.01)\n"
    "  --momentum M    SGD momentum, 0 to < 1 (default 0.9)\n"
    "  --hidden H      hidden ReLU units; 0: a linear classifier "
    "(default 128)\n"
    "  --workers W     decode threads; 0: one per CPU (default 0)\n"
    "  --device D      auto (CUDA if the loader finds a GPU, else host), cuda "
    "or host\n"
    "                  (default auto)\n"
    "  --seed S        weights, sample order and augmentation (default 0)\n";

typedef enum device_choice {
    DEVICE_AUTO,
    DEVICE_CUDA,
    DEVICE_HOST
} device_choice;

typedef struct options {
    const char *data;
    int epochs, batch, size, hidden, workers;
    double lr, momentum;
    device_choice device;
    uint64_t seed;
} options;

/* ---- command line: tools/cli.h's parser, as the tools use it ---------- */

static const char prog[] = "train_classifier";

/* Returns only to run: --help exits 0, a bad argument 2 (said, then the
 * usage). */
static void parse_args(int argc, char **argv, options *o)
{
    static const char *const valued[] = {
        "--data", "--epochs",   "--batch",  "--size", "--hidden", "--workers",
        "--lr",   "--momentum", "--device", "--seed", NULL};
    static const char *const devices[] = {"auto", "cuda", "host", NULL};
    *o = (options){.epochs = 5,
                   .batch = 32,
                   .size = 32,
                   .hidden = 128,
                   .lr = 0.01,
                   .momentum = 0.9,
                   .device = DEVICE_AUTO};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        cli_help(usage, f);
        const char *v = cli_value(prog, usage, valued, argc, argv, &i);
        if (!strcmp(f, "--data"))
            o->data = v;
        else if (!strcmp(f, "--epochs"))
            o->epochs = (int)cli_long(prog, usage, f, v, 1, 1000000);
        else if (!strcmp(f, "--batch"))
            o->batch = (int)cli_long(prog, usage, f, v, 1, 65536);
        else if (!strcmp(f, "--size"))
            o->size = (int)cli_long(prog, usage, f, v, 1, 1024);
        else if (!strcmp(f, "--hidden"))
            o->hidden = (int)cli_long(prog, usage, f, v, 0, 65536);
        else if (!strcmp(f, "--workers"))
            o->workers = (int)cli_long(prog, usage, f, v, 0, 1024);
        else if (!strcmp(f, "--lr"))
            o->lr = cli_double(prog, usage, f, v, 0, 100, CLI_OPEN_LO);
        else if (!strcmp(f, "--momentum"))
            o->momentum = cli_double(prog, usage, f, v, 0, 1, CLI_OPEN_HI);
        else if (!strcmp(f, "--device"))
            o->device = (device_choice)cli_choice(prog, usage, f, v, devices);
        else
            o->seed = cli_u64(prog, usage, f, v);
    }
    if (!o->data)
        cli_usage_error(prog, usage, "--data DIR is required");
#ifdef PL_SAMPLE_NO_CUDA
    if (o->device == DEVICE_CUDA)
        cli_usage_error(prog, usage,
                        "--device cuda: this build has no CUDA kernels "
                        "(PL_SAMPLE_NO_CUDA); use --device host");
#endif
}

/* ---- the model ----------------------------------------------------------- */

static void add_layer(tc_model *m, int in, int out, int relu)
{
    tc_layer *L = &m->layer[m->num_layers++];
    *L = (tc_layer){.in = in, .out = out, .relu = relu};
    L->w = m->num_params;
    L->b = L->w + (size_t)in * out;
    m->num_params = L->b + (size_t)out;
}

static void model_init(tc_model *m, int inputs, int classes, const options *o)
{
    *m = (tc_model){.inputs = inputs,
                    .classes = classes,
                    .lr = (float)o->lr,
                    .momentum = (float)o->momentum};
    if (o->hidden > 0) {
        add_layer(m, inputs, o->hidden, 1);
        add_layer(m, o->hidden, classes, 0);
    } else {
        add_layer(m, inputs, classes, 0);
    }
}

/* splitmix64: the weights depend on --seed alone, not on the platform's
 * rand(), so the host and CUDA paths start from the same bytes. */
static uint64_t next_u64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Weights uniform in +-1/sqrt(in), as PyTorch's nn.Linear draws them, so
 * each unit's pre-activation starts with a variance of about 1/3 whatever
 * the layer's width; biases zero. */
static void init_params(const tc_model *m, uint64_t seed, float *params)
{
    uint64_t state = seed;
    memset(params, 0, m->num_params * sizeof *params);
    for (int i = 0; i < m->num_layers; i++) {
        const tc_layer *L = &m->layer[i];
        const float bound = 1.0f / sqrtf((float)L->in);
        for (size_t k = 0; k < (size_t)L->in * L->out; k++) {
            const float u = (float)(next_u64(&state) >> 40) / 16777216.0f;
            params[L->w + k] = (2.0f * u - 1.0f) * bound;
        }
    }
}

/* ---- the host path: train_kernels.cu's kernels as loops ------------------ */

/* y[s][o] = b[o] + sum_k x[s][k] w[o][k], then ReLU if relu. */
static void dense_forward(const float *x, const float *w, const float *b,
                          float *y, int count, int in, int out, int relu)
{
    for (int s = 0; s < count; s++)
        for (int o = 0; o < out; o++) {
            const float *xs = x + (size_t)s * in;
            const float *wo = w + (size_t)o * in;
            float acc = b[o];
            for (int k = 0; k < in; k++)
                acc += xs[k] * wo[k];
            y[(size_t)s * out + o] = relu && acc < 0.0f ? 0.0f : acc;
        }
}

/* Softmax cross-entropy of logits z against the labels: adds the summed
 * loss and the number of correct argmax predictions to the totals, and
 * writes dL/dz of the batch's mean loss, (softmax - onehot) / count. */
static void softmax_xent(const float *z, const int32_t *labels, float *dz,
                         int count, int classes, double *loss_sum,
                         int64_t *correct)
{
    for (int s = 0; s < count; s++) {
        const float *zs = z + (size_t)s * classes;
        float *dzs = dz + (size_t)s * classes;
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (zs[c] > zs[best])
                best = c;
        /* Shifting by the largest logit keeps expf from overflowing. */
        float sum = 0.0f;
        for (int c = 0; c < classes; c++)
            sum += expf(zs[c] - zs[best]);
        const int y = labels[s];
        *loss_sum += logf(sum) - (zs[y] - zs[best]);
        *correct += best == y;
        for (int c = 0; c < classes; c++) {
            const float p = expf(zs[c] - zs[best]) / sum;
            dzs[c] = (p - (c == y ? 1.0f : 0.0f)) / (float)count;
        }
    }
}

/* gw[o][k] = sum_s dy[s][o] x[s][k], gb[o] = sum_s dy[s][o]. Summed sample
 * by sample (the kernels sum per weight) so the inner loop runs over
 * contiguous memory; the same sums in another order. */
static void dense_grad_params(const float *dy, const float *x, float *gw,
                              float *gb, int count, int in, int out)
{
    memset(gw, 0, (size_t)in * out * sizeof *gw);
    memset(gb, 0, (size_t)out * sizeof *gb);
    for (int s = 0; s < count; s++)
        for (int o = 0; o < out; o++) {
            const float d = dy[(size_t)s * out + o];
            const float *xs = x + (size_t)s * in;
            float *gwo = gw + (size_t)o * in;
            for (int k = 0; k < in; k++)
                gwo[k] += d * xs[k];
            gb[o] += d;
        }
}

/* dx[s][k] = sum_o dy[s][o] w[o][k], zero where the ReLU that produced x
 * was off (x == 0: no gradient flows through it). */
static void dense_grad_input(const float *dy, const float *w, const float *x,
                             float *dx, int count, int in, int out, int relu)
{
    for (int s = 0; s < count; s++)
        for (int k = 0; k < in; k++) {
            float acc = 0.0f;
            for (int o = 0; o < out; o++)
                acc += dy[(size_t)s * out + o] * w[(size_t)o * in + k];
            const size_t i = (size_t)s * in + k;
            dx[i] = relu && x[i] <= 0.0f ? 0.0f : acc;
        }
}

/* Heavy-ball momentum, as torch.optim.SGD: v = mu v + g; p -= lr v. */
static void sgd_update(float *p, float *v, const float *g, size_t n, float lr,
                       float momentum)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = momentum * v[i] + g[i];
        p[i] -= lr * v[i];
    }
}

typedef struct host_net {
    tc_model m;
    float *params, *velocity, *grads;
    /* act[i + 1]: layer i's output, [max_batch][out] (act[0] would be the
     * batch itself, read in place). dact[i]: the loss's gradient with
     * respect to act[i]. */
    float *act[TC_MAX_LAYERS + 1], *dact[TC_MAX_LAYERS + 1];
    double loss_sum;
    int64_t correct;
} host_net;

static void host_net_free(host_net *h)
{
    for (int i = 0; i <= TC_MAX_LAYERS; i++) {
        free(h->act[i]);
        free(h->dact[i]);
    }
    free(h->grads);
    free(h->velocity);
    free(h->params);
    memset(h, 0, sizeof *h);
}

static int host_net_init(host_net *h, const tc_model *m, const float *params,
                         int max_batch)
{
    memset(h, 0, sizeof *h);
    h->m = *m;
    const size_t n = m->num_params;
    h->params = malloc(n * sizeof *h->params);
    h->velocity = calloc(n, sizeof *h->velocity);
    h->grads = calloc(n, sizeof *h->grads);
    int ok = h->params && h->velocity && h->grads;
    for (int i = 0; ok && i < m->num_layers; i++) {
        const size_t out = (size_t)max_batch * m->layer[i].out;
        h->act[i + 1] = calloc(out, sizeof(float));
        h->dact[i + 1] = calloc(out, sizeof(float));
        /* dact[i] for i > 0 is the previous layer's output gradient, so
         * every gradient buffer is allocated by the loop. */
        ok = h->act[i + 1] && h->dact[i + 1];
    }
    if (!ok) {
        fprintf(stderr,
                "train_classifier: out of memory for the model (%zu "
                "parameters)\n",
                n);
        host_net_free(h);
        return -1;
    }
    memcpy(h->params, params, n * sizeof *params);
    return 0;
}

static void host_net_step(host_net *h, const float *x, const int32_t *labels,
                          int count, int train)
{
    const tc_model *m = &h->m;
    const int last = m->num_layers - 1;
    for (int i = 0; i <= last; i++) {
        const tc_layer *L = &m->layer[i];
        dense_forward(i ? h->act[i] : x, h->params + L->w, h->params + L->b,
                      h->act[i + 1], count, L->in, L->out, L->relu);
    }
    softmax_xent(h->act[last + 1], labels, h->dact[last + 1], count, m->classes,
                 &h->loss_sum, &h->correct);
    if (!train)
        return;
    for (int i = last; i >= 0; i--) {
        const tc_layer *L = &m->layer[i];
        const float *in = i ? h->act[i] : x;
        dense_grad_params(h->dact[i + 1], in, h->grads + L->w, h->grads + L->b,
                          count, L->in, L->out);
        if (i > 0)
            dense_grad_input(h->dact[i + 1], h->params + L->w, in, h->dact[i],
                             count, L->in, L->out, m->layer[i - 1].relu);
    }
    sgd_update(h->params, h->velocity, h->grads, m->num_params, m->lr,
               m->momentum);
}

#ifdef PL_SAMPLE_SIM_CUDA
/* The CUDA half on the simulated runtime: train_kernels.cu's entry points,
 * used in the same protocol (everything on one stream, the batch read after
 * pl_batch_wait, released on that stream), with the kernels replaced by a
 * copy of the batch back to page-locked memory and the host maths. */
struct tc_cuda {
    cudaStream_t stream;
    float *x; /* [max_batch][inputs], page-locked */
    host_net net;
    char err[256];
};

static int sim_fail(char *err, size_t errlen, const char *what, cudaError_t e)
{
    snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

int tc_cuda_create(const tc_model *m, const float *params, int max_batch,
                   int device, tc_cuda **out, char *err, size_t errlen)
{
    tc_cuda *c = calloc(1, sizeof *c);
    cudaError_t e = c ? cudaSetDevice(device) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&c->x,
                          (size_t)max_batch * m->inputs * sizeof *c->x,
                          cudaHostAllocDefault);
    if (e != cudaSuccess) {
        tc_cuda_destroy(c);
        return sim_fail(err, errlen, "creating the trainer's stream", e);
    }
    if (host_net_init(&c->net, m, params, max_batch) < 0) {
        tc_cuda_destroy(c);
        snprintf(err, errlen, "out of memory for the model");
        return -1;
    }
    *out = c;
    return 0;
}

struct CUstream_st *tc_cuda_stream(const tc_cuda *c)
{
    return c->stream;
}

int tc_cuda_step(tc_cuda *c, const float *x, const int32_t *labels, int count,
                 int train)
{
    const size_t bytes = (size_t)count * c->net.m.inputs * sizeof *x;
    cudaError_t e =
        cudaMemcpyAsync(c->x, x, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess)
        return sim_fail(c->err, sizeof c->err, "reading the batch back", e);
    host_net_step(&c->net, c->x, labels, count, train);
    return 0;
}

int tc_cuda_totals(tc_cuda *c, double *loss_sum, int64_t *correct)
{
    *loss_sum = c->net.loss_sum;
    *correct = c->net.correct;
    c->net.loss_sum = 0.0;
    c->net.correct = 0;
    return 0;
}

const char *tc_cuda_error(const tc_cuda *c)
{
    return c->err;
}

void tc_cuda_destroy(tc_cuda *c)
{
    if (!c)
        return;
    if (c->stream) {
        cudaStreamSynchronize(c->stream);
        cudaStreamDestroy(c->stream);
    }
    cudaFreeHost(c->x);
    host_net_free(&c->net);
    free(c);
}
#endif

/* ---- one trainer, two paths ---------------------------------------------- */

typedef struct trainer {
    int cuda; /* 1: the CUDA path (the loader's backend is CUDA) */
    host_net host;
#ifndef PL_SAMPLE_NO_CUDA
    tc_cuda *dev;
#endif
} trainer;

static int trainer_create(trainer *t, const tc_model *m, const float *params,
                          const pl_info *info)
{
    memset(t, 0, sizeof *t);
    if (info->backend != PL_BACKEND_CUDA)
        return host_net_init(&t->host, m, params, info->batch_size);
#ifdef PL_SAMPLE_NO_CUDA
    fprintf(stderr,
            "train_classifier: the loader chose CUDA device %d, but "
            "this build has no CUDA kernels (PL_SAMPLE_NO_CUDA); use "
            "--device host\n",
            info->device);
    return -1;
#else
    char err[256];
    t->cuda = 1;
    if (tc_cuda_create(m, params, info->batch_size, info->device, &t->dev, err,
                       sizeof err) < 0) {
        fprintf(stderr, "train_classifier: %s\n", err);
        return -1;
    }
    return 0;
#endif
}

static void trainer_destroy(trainer *t)
{
#ifndef PL_SAMPLE_NO_CUDA
    tc_cuda_destroy(t->dev); /* waits for its kernels: before the loader */
    t->dev = NULL;
#endif
    host_net_free(&t->host);
}

/* NULL, the legacy default stream, on the host path: pinload ignores the
 * stream on the host backend. */
static struct CUstream_st *trainer_stream(const trainer *t)
{
#ifndef PL_SAMPLE_NO_CUDA
    if (t->cuda)
        return tc_cuda_stream(t->dev);
#endif
    (void)t;
    return NULL;
}

static int trainer_step(trainer *t, const pl_batch *b, int train)
{
#ifndef PL_SAMPLE_NO_CUDA
    if (t->cuda) {
        if (tc_cuda_step(t->dev, b->data, b->labels, b->count, train) < 0) {
            fprintf(stderr, "train_classifier: %s\n", tc_cuda_error(t->dev));
            return -1;
        }
        return 0;
    }
#endif
    host_net_step(&t->host, b->data, b->labels, b->count, train);
    return 0;
}

static int trainer_totals(trainer *t, double *loss_sum, int64_t *correct)
{
#ifndef PL_SAMPLE_NO_CUDA
    if (t->cuda) {
        if (tc_cuda_totals(t->dev, loss_sum, correct) < 0) {
            fprintf(stderr, "train_classifier: %s\n", tc_cuda_error(t->dev));
            return -1;
        }
        return 0;
    }
#endif
    *loss_sum = t->host.loss_sum;
    *correct = t->host.correct;
    t->host.loss_sum = 0.0;
    t->host.correct = 0;
    return 0;
}

/* ---- epochs -------------------------------------------------------------- */

typedef struct epoch_result {
    int64_t samples, correct;
    double loss_sum, seconds;
} epoch_result;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The kernels index the logits with the labels unchecked, so a label out
 * of range (a list file naming more classes than the model has) must stop
 * the run here. */
static int check_labels(const pl_batch *b, int classes)
{
    for (int i = 0; i < b->count; i++)
        if (b->labels[i] < 0 || b->labels[i] >= classes) {
            fprintf(stderr,
                    "train_classifier: sample %lld has label %d, "
                    "outside 0..%d\n",
                    (long long)b->indices[i], b->labels[i], classes - 1);
            return -1;
        }
    return 0;
}

/* One pass over the loader's epoch, training if train, else measuring. */
static int run_epoch(pl_loader *l, trainer *t, int classes, int train,
                     epoch_result *r)
{
    struct CUstream_st *stream = trainer_stream(t);
    const double start = now_seconds();
    const pl_batch *b;
    int rc;
    memset(r, 0, sizeof *r);
    while ((rc = pl_loader_next(l, &b)) == 0) {
        const int count = b->count;
        int step = pl_batch_wait(b, stream);
        if (step < 0)
            fprintf(stderr, "train_classifier: %s\n", pl_last_error());
        if (step == 0)
            step = check_labels(b, classes);
        if (step == 0)
            step = trainer_step(t, b, train);
        /* Released even after a failure, so the loader's buffer is never
         * lost; on CUDA it is reused once the kernels just queued end. */
        pl_loader_release(l, b, stream);
        if (step < 0)
            return -1;
        r->samples += count;
    }
    if (rc != PL_EPOCH_END) {
        fprintf(stderr, "train_classifier: %s\n", pl_last_error());
        return -1;
    }
    if (trainer_totals(t, &r->loss_sum, &r->correct) < 0)
        return -1;
    r->seconds = now_seconds() - start;
    return 0;
}

static double percent(const epoch_result *r)
{
    return r->samples ? 100.0 * (double)r->correct / (double)r->samples : 0.0;
}

/* A loader delivering float32 NCHW, normalised, at size x size. The
 * sample is one process: rank and world size are fixed rather than taken
 * from RANK and WORLD_SIZE, which would shard the data. */
static int open_loader(const options *o, pl_augment augment, int device,
                       pl_loader **l, pl_info *info)
{
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = o->data;
    cfg.batch_size = o->batch;
    cfg.width = cfg.height = o->size;
    cfg.format = PL_FORMAT_F32_NCHW;
    cfg.augment = augment;
    cfg.seed = o->seed;
    cfg.shuffle = augment == PL_AUGMENT_TRAIN;
    cfg.num_workers = o->workers;
    cfg.device = device;
    cfg.rank = 0;
    cfg.world_size = 1;
    if (pl_loader_create(&cfg, l) < 0 || pl_loader_info(*l, info) < 0) {
        fprintf(stderr, "train_classifier: %s\n", pl_last_error());
        return -1;
    }
    return 0;
}

static int loader_device(const options *o)
{
#ifdef PL_SAMPLE_NO_CUDA
    (void)o;
    return PL_DEVICE_HOST; /* no kernels to consume a device batch */
#else
    if (o->device == DEVICE_CUDA)
        return 0;
    return o->device == DEVICE_HOST ? PL_DEVICE_HOST : PL_DEVICE_AUTO;
#endif
}

/* pinload falls back to the host backend where it finds no GPU; asked for
 * CUDA, say so rather than quietly train on the CPU. */
static int check_backend(const options *o, const pl_info *info)
{
    if (o->device == DEVICE_CUDA && info->backend != PL_BACKEND_CUDA) {
        fprintf(stderr, "train_classifier: --device cuda: pinload found no "
                        "usable CUDA device (see its notice above)\n");
        return -1;
    }
    if (info->channels != 3 ||
        info->sample_bytes != (size_t)3 * o->size * o->size * sizeof(float)) {
        fprintf(stderr,
                "train_classifier: unexpected sample layout "
                "(%d channels, %zu bytes)\n",
                info->channels, info->sample_bytes);
        return -1;
    }
    return 0;
}

static void print_header(const options *o, const tc_model *m,
                         const pl_info *info, int cuda)
{
    printf("train_classifier: %lld images, %d classes, %dx%d, ",
           (long long)info->dataset_size, info->num_classes, o->size, o->size);
    if (o->hidden > 0)
        printf("MLP %d-%d-%d", m->inputs, o->hidden, m->classes);
    else
        printf("linear %d-%d", m->inputs, m->classes);
    printf(" (%zu parameters), %s, batch %d, lr %g, momentum %g\n",
           m->num_params, cuda ? "CUDA" : "host", o->batch, o->lr, o->momentum);
}

static double mean_loss(const epoch_result *r)
{
    return r->samples ? r->loss_sum / (double)r->samples : 0.0;
}

static int train_epochs(const options *o, pl_loader *l, trainer *t, int classes)
{
    for (int e = 1; e <= o->epochs; e++) {
        epoch_result r;
        if (run_epoch(l, t, classes, 1, &r) < 0)
            return -1;
        const double rate = r.seconds > 0 ? (double)r.samples / r.seconds : 0;
        printf("epoch %d: loss %.4f accuracy %.1f%% (%lld samples, %.2f s, "
               "%.0f img/s)\n",
               e, mean_loss(&r), percent(&r), (long long)r.samples, r.seconds,
               rate);
        fflush(stdout); /* progress shows as it happens, even in a pipe */
    }
    return 0;
}

/* The final accuracy: one pass over the same images without random
 * augmentation (resize and centre crop), weights fixed. [out] *l, which
 * the caller destroys after the trainer, as its kernels may read it. */
static int evaluate(const options *o, const pl_info *train_info, trainer *t,
                    pl_loader **l)
{
    pl_info info;
    epoch_result r;
    /* The device the training ran on, where the trainer's buffers are. */
    const int device = train_info->backend == PL_BACKEND_CUDA
                           ? train_info->device
                           : PL_DEVICE_HOST;
    if (open_loader(o, PL_AUGMENT_EVAL, device, l, &info) < 0)
        return -1;
    if (info.backend != train_info->backend) {
        fprintf(stderr, "train_classifier: the evaluation loader chose "
                        "another backend\n");
        return -1;
    }
    if (run_epoch(*l, t, train_info->num_classes, 0, &r) < 0)
        return -1;
    printf("final accuracy %.1f%% (%lld samples, centre crops, loss %.4f)\n",
           percent(&r), (long long)r.samples, mean_loss(&r));
    return 0;
}

static int train(const options *o)
{
    int rc = -1;
    pl_loader *l = NULL;
    trainer t = {0};
    float *init = NULL;
    pl_info info;
    tc_model m;

    if (open_loader(o, PL_AUGMENT_TRAIN, loader_device(o), &l, &info) < 0 ||
        check_backend(o, &info) < 0)
        goto fail;
    model_init(&m, 3 * o->size * o->size, info.num_classes, o);
    init = malloc(m.num_params * sizeof *init);
    if (!init) {
        fprintf(stderr, "train_classifier: out of memory for %zu parameters\n",
                m.num_params);
        goto fail;
    }
    init_params(&m, o->seed, init);
    if (trainer_create(&t, &m, init, &info) < 0)
        goto fail;
    print_header(o, &m, &info, t.cuda);
    if (train_epochs(o, l, &t, info.num_classes) < 0)
        goto fail;
    /* The last epoch's totals waited for every kernel, so the training
     * loader's buffers are free to go before the evaluation makes its own. */
    pl_loader_destroy(l);
    l = NULL;
    if (evaluate(o, &info, &t, &l) < 0)
        goto fail;
    rc = 0;
fail:
    trainer_destroy(&t); /* first: CUDA kernels may still read l's buffers */
    pl_loader_destroy(l);
    free(init);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);
    return train(&o) == 0 ? 0 : 1;
}
