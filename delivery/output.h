/* The output plan: what the workers write into the ring and what the
 * caller gets, settled once at create time from the config and the
 * backend, and read by everyone after (workers, ring, copy engine,
 * pl_loader_info). The two differ only when the GPU normalises: float
 * formats on CUDA may be made on the GPU from uint8 (a quarter of the bytes
 * over the bus, and less work for the CPU), with the host's own table. */
#ifndef PINLOAD_OUTPUT_H
#define PINLOAD_OUTPUT_H

#include <stddef.h>

#include "../workers/augment.h"
#include "../device/backend.h"
#include "pinload.h"

typedef struct output_plan {
    pl_format format; /* delivered */
    int width, height;
    size_t sample_bytes;      /* one sample, delivered */
    int gpu_normalize;        /* the workers write uint8, the GPU the floats */
    size_t ring_sample_bytes; /* one sample, as the workers write it */
    augment_params aug;       /* the workers' (aug.format: the ring's) */
    /* config.transform ends in a batch op (mixup): each delivered batch is
     * mixed, and soft labels of num_classes a sample go with it; where the
     * backend has the kernel (CUDA built with nvcc), on the device, on the
     * copy stream after the batch's copies; else in host memory (the
     * device buffer itself on the host backend, a page-locked mirror on
     * CUDA), by the copier, before the copy. */
    int batch_op;
    int num_classes;
    /* config.views (nviews 0: one, aug's): each view's params (views[0] is
     * aug), its sample's bytes, and the bytes of the views before it in a
     * sample. A batch (a ring slot, a device buffer) holds each view's
     * samples together, view v from batch_size x prefix[v] on; sample_bytes
     * and ring_sample_bytes are then a sample's every view. */
    int nviews;
    const augment_params *views;
    size_t view_bytes[PL_VIEWS_MAX], view_prefix[PL_VIEWS_MAX];
} output_plan;

/* ops: config.transform's pipeline, or NULL for config.augment's preset;
 * rank: the loader's (the batch op's draws); classes: the dataset's (the
 * soft labels' width, unless the batch op names one). */
void output_plan_make(output_plan *o, const pl_config *c,
                      const ops_pipeline *ops, const backend *be, int rank,
                      int classes);

/* config.views on top of output_plan_make's plan: views[v] (the
 * caller's array of nviews, which outlives the plan) made from each
 * view's pipeline and size, drawing from seed + v, at full scale; the
 * workers write the floats (no gpu_normalize). */
void output_plan_views(output_plan *o, const pl_config *c,
                       const ops_pipeline *ops, const int *w, const int *h,
                       int nviews, augment_params *views);

/* Where view v of position i of a batch of batch_size lies, from the
 * batch's start. */
static inline size_t output_view_at(const output_plan *o, int v, int i,
                                    int batch_size)
{
    return o->view_prefix[v] * (size_t)batch_size +
           o->view_bytes[v] * (size_t)i;
}

/* Whether batches are assembled in a host mirror before their copy:
 * keep_host's, or a batch op's without the backend's kernel, where device
 * memory is not host memory. */
int output_mirrors(const output_plan *o, int keep_host, const backend *be);

/* The table the GPU normalises with (gpu_normalize): 3 x 256 floats, or
 * halves for PL_FORMAT_F16_NCHW. [out] *bytes. */
const void *output_lut(const output_plan *o, size_t *bytes);

#endif
