#include "output.h"

void output_plan_make(output_plan *o, const pl_config *c,
                      const ops_pipeline *ops, const backend *be, int rank,
                      int classes)
{
    o->format = c->format;
    o->width = c->width;
    o->height = c->height;
    /* Only a backend with the kernel can (CUDA built with nvcc), and only
     * when no op works on the floats after normalising. */
    o->gpu_normalize =
        be->ops->normalize != NULL && c->format != PL_FORMAT_U8_NHWC &&
        c->gpu_normalize && !c->keep_host &&
        !(ops && (ops->ntensor || (ops->nbatch && !be->ops->mix)));
    const pl_format ring = o->gpu_normalize ? PL_FORMAT_U8_NHWC : c->format;
    augment_params_init(&o->aug, c->augment, ring, c->width, c->height, c->seed,
                        c->mean, c->std);
    o->aug.dct_scaling = c->dct_scaling;
    o->aug.sample_fn = c->sample_fn;
    o->aug.sample_ctx = c->sample_ctx;
    o->aug.channels_last = c->channels_last && c->format != PL_FORMAT_U8_NHWC;
    /* The GPU's table is the delivered format's, whatever the ring holds. */
    if (ops)
        augment_params_set_ops(&o->aug, ops, c->format);
    else
        augment_lut16_for(&o->aug, c->format);
    o->aug.ops.rank = rank;
    o->batch_op = ops && ops->nbatch;
    o->num_classes = classes;
    if (o->batch_op) {
        /* The batch op's num_classes, where given (its last parameter). */
        const op_instance *b = &ops->op[ops->n - 1];
        const op_value *n = &b->arg[b->kind->nparams - 1];
        if (n->n)
            o->num_classes = (int)n->v[0];
    }
    o->sample_bytes = augment_format_bytes(c->format, c->width, c->height);
    o->ring_sample_bytes = augment_sample_bytes(&o->aug);
}

void output_plan_views(output_plan *o, const pl_config *c,
                       const ops_pipeline *ops, const int *w, const int *h,
                       int nviews, augment_params *views)
{
    o->gpu_normalize = 0;
    o->nviews = nviews;
    o->views = views;
    size_t total = 0;
    for (int v = 0; v < nviews; v++) {
        augment_params *p = &views[v];
        augment_params_init(p, c->augment, c->format, w[v], h[v],
                            c->seed + (uint64_t)v, c->mean, c->std);
        p->dct_scaling = 0; /* one full-size decode for every view */
        p->channels_last = o->aug.channels_last;
        augment_params_set_ops(p, &ops[v], c->format);
        p->ops.rank = o->aug.ops.rank;
        o->view_bytes[v] = augment_sample_bytes(p);
        o->view_prefix[v] = total;
        total += o->view_bytes[v];
    }
    o->aug = views[0];
    o->width = w[0];
    o->height = h[0];
    o->sample_bytes = o->ring_sample_bytes = total;
}

const void *output_lut(const output_plan *o, size_t *bytes)
{
    if (o->format == PL_FORMAT_F16_NCHW || o->format == PL_FORMAT_BF16_NCHW) {
        *bytes = sizeof o->aug.lut16;
        return o->aug.lut16;
    }
    *bytes = sizeof o->aug.lut;
    return o->aug.lut;
}

int output_mirrors(const output_plan *o, int keep_host, const backend *be)
{
    return (keep_host || (o->batch_op && !be->ops->mix)) && !be->host_visible;
}
