#include "decode_gpu.h"

#include <stdio.h>
#include <string.h>

#include "../common/error.h"

static int open_decoder(decode_gpu *d, const pl_config *c, backend *be,
                        const output_plan *out, int workers, char *why,
                        size_t cap)
{
    if (out->nviews) {
        snprintf(why, cap,
                 "config.views: each sample's views are made from one "
                 "decode on the CPU");
        return PL_EINVAL;
    }
    if (out->batch_op && !be->ops->mix) {
        snprintf(why, cap,
                 "config.transform ends in mixup, which this build mixes "
                 "in host memory (no kernel for it: built without nvcc), "
                 "and the GPU decodes into device memory");
        return PL_EINVAL;
    }
    if (c->keep_host) {
        snprintf(why, cap,
                 "config.keep_host is 1: batches are assembled in "
                 "host memory first, and the GPU decodes into "
                 "device memory");
        return PL_EINVAL;
    }
    if (!be->ops->gpu_decoder_open) {
        snprintf(why, cap,
                 "it needs the CUDA backend, and this loader runs "
                 "on %s",
                 be->name);
        return PL_EINVAL;
    }
    const pl_format f = out->aug.format; /* what the workers write */
    const gpu_decoder_config gc = {
        .workers = workers,
        .slots = d->ring->max_slots, /* prefetch PL_AUTO may grow it */
        .format = f,
        .channels_last = out->aug.channels_last,
        .out_w = out->width,
        .out_h = out->height,
        .lut = f == PL_FORMAT_F32_NCHW ? (const void *)out->aug.lut
                                       : (const void *)out->aug.lut16,
        .lut_bytes = f == PL_FORMAT_F32_NCHW ? sizeof out->aug.lut
                                             : sizeof out->aug.lut16,
        .strict = c->strict,
    };
    int rc = be->ops->gpu_decoder_open(be, &gc, &d->g, why, cap);
    if (rc < 0)
        return rc;
    if ((rc = ring_add_device(d->ring)) < 0) {
        snprintf(why, cap,
                 "no device memory for its %d slots of %.1f MiB: "
                 "%s",
                 d->ring->nslots,
                 (double)d->ring->sample_bytes *
                     (double)d->ring->sched.cfg.batch_size / (1 << 20),
                 pl_last_error());
        d->g->ops->close(d->g);
        d->g = NULL;
        rc = PL_ENOMEM;
    }
    return rc;
}

int decode_gpu_open(decode_gpu *d, const pl_config *c, backend *be,
                    const output_plan *out, int workers, ring *r,
                    const catalog *cat, logger *lg)
{
    memset(d, 0, sizeof *d);
    d->ring = r;
    d->log = lg;
    d->cat = cat;
    d->in_use = PL_DECODE_CPU;
    snprintf(d->name, sizeof d->name, "cpu");
    if (c->decode == PL_DECODE_CPU)
        return 0;
    char why[256];
    const int rc = open_decoder(d, c, be, out, workers, why, sizeof why);
    if (rc < 0 && c->decode == PL_DECODE_GPU)
        return err_set(rc, "pl_loader_create: config.decode: gpu: %s", why);
    if (rc < 0) {
        snprintf(d->name, sizeof d->name, "cpu (decode auto: %s)", why);
        log_msg(lg, PL_LOG_NOTICE,
                "decode auto: JPEGs are decoded on the "
                "CPU: %s",
                why);
        return 0;
    }
    d->in_use = PL_DECODE_GPU;
    snprintf(d->name, sizeof d->name, "%s", d->g->name);
    d->create_bytes = decode_gpu_bytes(d);
    log_msg(lg, PL_LOG_NOTICE,
            "decode %s: JPEGs on the GPU with %s, into %d device slots of "
            "%.1f MiB; other images on the CPU",
            pl_decode_name((pl_decode)c->decode), d->g->name, r->nslots,
            (double)r->dev_bytes / r->nslots / (1 << 20));
    return 0;
}

void decode_gpu_close(decode_gpu *d)
{
    if (d->g)
        d->g->ops->close(d->g);
    d->g = NULL;
}

uint64_t decode_gpu_bytes(const decode_gpu *d)
{
    if (!d->g)
        return 0;
    ring_stats rs; /* the ring's slots may grow (prefetch PL_AUTO) */
    ring_get_stats(d->ring, &rs);
    return d->g->ops->device_bytes(d->g) + rs.dev_bytes;
}

static gpu_axis axis_of(const resample_axis *a)
{
    return (gpu_axis){
        .out_n = a->out_n,
        .taps = a->taps,
        .lo = a->lo,
        .hi = a->hi,
        .first = a->first,
        .count = a->count,
        .w = a->w,
    };
}

int decode_gpu_sample(decode_gpu *d, pool_job *job, const offload_sample *o)
{
    const ring_slot *s = job->tag;
    const gpu_sample gs = {
        .bytes = o->bytes,
        .len = o->len,
        .width = o->width,
        .height = o->height,
        .h = axis_of(o->h),
        .v = axis_of(o->v),
        .flip = o->flip,
        .dst = s->dev + d->ring->sample_bytes * (size_t)job->tag_pos,
    };
    char why[256];
    const int rc = d->g->ops->decode(
        d->g, job->worker, (int)(s - d->ring->slots), &gs, why, sizeof why);
    if (rc < 0 && !atomic_exchange(&d->told_refusal, 1)) {
        char name[CATALOG_NAME_MAX];
        log_msg(d->log, PL_LOG_NOTICE,
                "GPU decoding refused %s (%s): the workers decode it, and "
                "any other the GPU refuses (pl_stats.images_gpu_declined)",
                catalog_name_into(d->cat, job->index, name, sizeof name), why);
    }
    return rc;
}
