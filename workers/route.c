#include "route.h"

#include "pinload.h"

/* Whether the GPU's kernels do what the workers would for this plan: a
 * horizontal flip and the antialiased bilinear filter over a crop inside
 * the image and a window inside the resized one, and no pixel or tensor
 * op after the resize (config.transform's vflip, other filters, padded
 * crops, grayscale... stay on the workers, whose bytes they are), and no
 * config.sample_fn (which sees the image on the host). */
static int gpu_can_plan(const augment_params *p, const augment_plan *plan,
                        int width, int height)
{
    return !plan->vflip && plan->interp == OP_INTERP_BILINEAR &&
           plan->antialias && p->ops.npixels == 0 && p->ops.ntensor == 0 &&
           !p->sample_fn &&
           plan->src_x >= 0 && plan->src_y >= 0 &&
           plan->src_x + plan->src_w <= width &&
           plan->src_y + plan->src_h <= height && plan->out_x >= 0 &&
           plan->out_y >= 0 && plan->out_x + p->out_w <= plan->rs_w &&
           plan->out_y + p->out_h <= plan->rs_h;
}

void route_fini(route_ctx *r)
{
    resample_axis_free(&r->h);
    resample_axis_free(&r->v);
}

int route_plan(route_ctx *r, decoder *dec, const augment_params *p,
               const uint8_t *buf, size_t len, int64_t epoch, int64_t index,
               offload_sample *o)
{
    char reason[DECODE_REASON_MAX];
    decode_info info;
    const int rc = decoder_open(dec, buf, len, &info, reason);
    decoder_close(dec);
    if (rc < 0 || info.codec != &codec_jpeg || !info.common_jpeg)
        return 0;
    augment_plan plan;
    augment_plan_make(p, epoch, index, info.width, info.height, &plan);
    if (!gpu_can_plan(p, &plan, info.width, info.height))
        return 0;
    /* The filters as sample.c plans them at scale 1 (plan_filters): the
     * source rectangle, taps kept inside it and the image. */
    const int x1 = plan.src_x + plan.src_w, y1 = plan.src_y + plan.src_h;
    if (resample_axis_plan(&r->h, plan.src_x, x1, plan.src_x,
                           x1 < info.width ? x1 : info.width, plan.rs_w,
                           plan.out_x, p->out_w) < 0 ||
        resample_axis_plan(&r->v, plan.src_y, y1, plan.src_y,
                           y1 < info.height ? y1 : info.height, plan.rs_h,
                           plan.out_y, p->out_h) < 0)
        return 0;
    *o = (offload_sample){
        .bytes = buf,
        .len = len,
        .width = info.width,
        .height = info.height,
        .h = &r->h,
        .v = &r->v,
        .flip = plan.flip,
    };
    return 1;
}
