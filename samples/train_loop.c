/* The training loop to copy: pinload feeding a CUDA stream epoch after
 * epoch, its state saved every N batches so that a job killed at any point
 * goes on from the last save with exactly the batches it would have had.
 * Without a GPU (or a build without CUDA) the loop runs on the host backend.
 *
 *     build/samples/train_loop DATA_DIR [--epochs E] [--save FILE
 *         [--every N]] [--resume FILE] [--stop-after K]
 *
 * Each batch prints "epoch E batch I: N samples, labels HASH"; --stop-after
 * K ends the run after K batches as a kill would: only saves survive. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"

#ifdef PL_SAMPLE_CUDA
#include <cuda_runtime_api.h>
#else
typedef struct CUstream_st *cudaStream_t; /* no CUDA: the host backend */
#endif

typedef struct options {
    const char *data, *save, *resume;
    long epochs, every, stop_after;
} options;

/* One training step on batch b: the stream waits for the batch's copy to
 * the GPU (the host does not), the step's work is queued on it, and the
 * batch goes back to the loader, which reuses its buffer once that work
 * is done. The step's stand-in reads the whole batch where it lives: on
 * CUDA a copy (your kernels go here); on the host backend the pixels' sum.
 * 0, or -1 (said). */
static int step(pl_loader *l, const pl_batch *b, cudaStream_t stream,
                void *scratch, uint64_t *sum)
{
    int rc = pl_batch_wait(b, stream);
#ifdef PL_SAMPLE_CUDA
    if (rc == 0 && stream &&
        cudaMemcpyAsync(scratch, b->data, b->bytes, cudaMemcpyDeviceToDevice,
                        stream) != cudaSuccess)
        rc = -1;
#else
    (void)scratch;
#endif
    for (size_t i = 0; !stream && i < b->bytes; i++)
        *sum += ((const uint8_t *)b->data)[i];
    uint64_t h = 14695981039346656037u; /* FNV-1a of labels and indices */
    for (int i = 0; i < b->count; i++)
        h = (h ^ (uint64_t)b->indices[i] << 8 ^ (uint64_t)b->labels[i]) *
            1099511628211u;
    printf("epoch %lld batch %lld: %d samples, labels %016llx\n",
           (long long)b->epoch, (long long)b->index, b->count,
           (unsigned long long)h);
    const int released = pl_loader_release(l, b, stream); /* b is gone */
    if (released < 0 || rc < 0) {
        fprintf(stderr, "train_loop: %s\n",
                released < 0 ? pl_last_error() : "the step failed");
        return -1;
    }
    return 0;
}

/* The state is 128 plain bytes (save the model's weights beside them, from
 * the same step), written beside the old file and renamed over it: a kill
 * mid-write leaves the previous state whole. */
static int save_state(const pl_loader *l, const char *path)
{
    pl_state st;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    int ok = f && pl_loader_state(l, &st) == 0 &&
             fwrite(st.bytes, sizeof st.bytes, 1, f) == 1;
    ok = f && fclose(f) == 0 && ok && rename(tmp, path) == 0;
    return ok ? 0 : -1;
}

/* Epochs up to o->epochs from where the loader stands: 0, or -1 (said). */
static int train(pl_loader *l, const options *o, int64_t epoch,
                 cudaStream_t stream, void *scratch)
{
    long batches = 0;
    uint64_t sum = 0;
    for (; epoch < o->epochs; epoch++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            if (step(l, b, stream, scratch, &sum) < 0)
                return -1;
            batches++;
            if (o->save && batches % o->every == 0 &&
                save_state(l, o->save) < 0)
                return fprintf(stderr, "%s: cannot write\n", o->save), -1;
            if (batches == o->stop_after) /* as if killed here */
                return 0;
        }
        if (rc != PL_EPOCH_END)
            return fprintf(stderr, "train_loop: %s\n", pl_last_error()), -1;
    }
    printf("done: %ld batches", batches);
    if (!stream) /* the host backend's step summed the pixels */
        printf(", pixel sum %llu", (unsigned long long)sum);
    return printf("\n"), 0;
}

/* DATA_DIR, then "--name value" pairs. */
static int parse(int argc, char **argv, options *o)
{
    *o = (options){.data = argv[1], .epochs = 2, .every = 100};
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (!strcmp(f, "--save"))
            o->save = v;
        else if (!strcmp(f, "--resume"))
            o->resume = v;
        else if (!strcmp(f, "--epochs"))
            o->epochs = atol(v);
        else if (!strcmp(f, "--every"))
            o->every = atol(v);
        else if (!strcmp(f, "--stop-after"))
            o->stop_after = atol(v);
        else
            return -1;
    }
    const int ok = argc % 2 == 0 && o->data[0] != '-';
    return ok && o->epochs > 0 && o->every > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: train_loop DATA_DIR [--epochs E] "
                        "[--save FILE [--every N]] [--resume FILE] "
                        "[--stop-after K]\n");
        return 2;
    }
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = o.data;
    cfg.batch_size = 32;
    cfg.width = cfg.height = 64;
    /* The launcher's local rank picks this process's GPU (0 without a
     * launcher); only PL_DEVICE_AUTO falls back to the host, so ask first. */
    cfg.device = PL_DEVICE_HOST;
#ifdef PL_SAMPLE_CUDA
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 0)
        cfg.device = PL_DEVICE_LOCAL_RANK;
    cudaGetLastError(); /* "no driver" is no error of ours */
#endif
    /* Resuming: the batches the saved run would have had next, from the
     * epoch it was in. */
    pl_state state;
    int64_t epoch = 0;
    FILE *f = o.resume ? fopen(o.resume, "rb") : NULL;
    const int got = f && fread(state.bytes, sizeof state.bytes, 1, f) == 1;
    if (f)
        fclose(f);
    if (o.resume && (!got || pl_state_get(&state, &epoch, NULL, NULL) < 0))
        return fprintf(stderr, "%s: no loader state\n", o.resume), 1;
    cfg.resume = o.resume ? &state : NULL;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) < 0)
        return fprintf(stderr, "train_loop: %s\n", pl_last_error()), 1;
    cudaStream_t stream = NULL;
    void *scratch = NULL;
    int rc = 0;
#ifdef PL_SAMPLE_CUDA
    pl_info in;
    pl_loader_info(l, &in);
    /* Our stream and buffers, on the loader's device. */
    if (in.backend == PL_BACKEND_CUDA &&
        (cudaSetDevice(in.device) || cudaStreamCreate(&stream) ||
         cudaMalloc(&scratch, in.batch_bytes))) {
        fprintf(stderr, "train_loop: no stream on CUDA device %d\n", in.device);
        rc = -1;
    }
#endif
    if (rc == 0)
        rc = train(l, &o, epoch, stream, scratch);
#ifdef PL_SAMPLE_CUDA
    if (stream) /* our work queued on it reads the loader's buffers */
        cudaStreamSynchronize(stream), cudaStreamDestroy(stream);
    cudaFree(scratch);
#endif
    pl_loader_destroy(l);
    return rc < 0 ? 1 : 0;
}
