/* A pipeline of augmentation ops: parsed from a spec (pl_config.transform,
 * docs/transforms.md) or made from a preset (pl_config.augment), then run
 * by every worker on each sample, stage by stage (op.h): the geometric
 * prefix into an op_geometry before the decode, the pixel ops on the
 * resized uint8 image, the tensor ops on the written float sample. Each
 * op's draws come from its own stream, keyed (seed, epoch, index, op).
 * Thread safety: made once at create, read-only after. */
#ifndef PINLOAD_OPS_H
#define PINLOAD_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"

#define OPS_MAX 32 /* ops in one pipeline */
/* The part of a sample's random stream config.sample_fn's key comes from
 * (philox_stream_op's op): past every op's place. */
#define OPS_HOOK_STREAM 255

typedef struct ops_pipeline {
    int n;
    op_instance op[OPS_MAX];
    /* The presets' draws: their geometric ops from op 0's stream, in turn
     * (crop, then flip), as pinload drew before pipelines, so that their
     * bytes stay what they were. */
    int shared_stream;
    /* Ops [0, ngeometry) are geometric, then npixels pixel ops, then
     * normalize (0 or 1 op), then ntensor tensor ops, then nbatch (0 or 1)
     * batch op. */
    int ngeometry, npixels, nnormalize, ntensor, nbatch;
    /* The rank whose batches the batch op draws for (the loader's; 0 in
     * pl_transform_params). */
    int rank;
    /* What float formats are normalised with: normalize's, else the
     * config's. */
    float mean[3], std[3];
} ops_pipeline;

/* Parse `spec` for a loader of s's output. 0, or PL_EINVAL with `why`
 * naming the op and the parameter ("rrc: scale=0.08:x: not a number"); the
 * caller puts what it checks before it ("config.transform: "). */
int ops_parse(ops_pipeline *p, const char *spec, const op_setup *s, char *why,
              size_t cap);

/* The size (*w x *h) spec's geometric ops end every image at, parsed for
 * s (its other fields; sizes left out of the spec are s's): PL_EINVAL
 * with `why` when it does not parse or ends at no one size. */
int ops_end_size(const char *spec, const op_setup *s, int *w, int *h,
                 char *why, size_t cap);

/* The preset as a pipeline, drawing as pinload always has (shared_stream):
 * PL_AUGMENT_TRAIN  random_resized_crop(WxH);hflip
 * PL_AUGMENT_EVAL   resize(S);center_crop(WxH), S = max(W, H) * 256 / 224
 * PL_AUGMENT_NONE   resize(WxH) */
void ops_preset(ops_pipeline *p, pl_augment preset, const op_setup *s);

/* The pipeline with every parameter written out, long names, numbers as
 * %.17g (what the state's fingerprint hashes): snprintf's return. */
int ops_format(const ops_pipeline *p, char *buf, size_t cap);

/* The geometric prefix for dataset index `index` of `epoch`, on an image
 * of img_w x img_h. */
void ops_geometry(const ops_pipeline *p, uint64_t seed, int64_t epoch,
                  int64_t index, int img_w, int img_h, op_geometry *g);

/* The pixel ops on img (the out_w x out_h image). 0 or PL_ENOMEM. */
int ops_pixels(const ops_pipeline *p, uint64_t seed, int64_t epoch,
               int64_t index, op_image *img);

/* The tensor ops on t. 0 or PL_ENOMEM. */
int ops_tensor(const ops_pipeline *p, uint64_t seed, int64_t epoch,
               int64_t index, op_tensor *t);

/* The batch op, if any, on batch `batch` (its number within the epoch)
 * of `epoch`: drawn from the batch's stream (seed, epoch, batch,
 * p->rank), applied to b. */
void ops_batch(const ops_pipeline *p, uint64_t seed, int64_t epoch,
               int64_t batch, op_batch *b);

/* Every op's drawn parameters for that sample, in the spec's grammar
 * (a batch op's for batch number `index`, on rank p->rank):
 * "random_resized_crop(top=3,left=10,height=200,width=150);hflip(flip=1)".
 * snprintf's return. */
int ops_describe(const ops_pipeline *p, uint64_t seed, int64_t epoch,
                 int64_t index, int img_w, int img_h, char *buf, size_t cap);

#endif
