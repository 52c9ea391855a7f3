#include "augment.h"

#include <math.h>
#include <string.h>

#include "../common/float16.h"

static void make_lut(augment_params *p, const float mean[3], const float std[3])
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            p->lut[c][v] = ((float)v / 255.0f - mean[c]) / std[c];
}

void augment_params_init(augment_params *p, pl_augment mode, pl_format format,
                         int out_w, int out_h, uint64_t seed,
                         const float mean[3], const float std[3])
{
    p->mode = mode;
    p->format = format;
    p->out_w = out_w;
    p->out_h = out_h;
    p->seed = seed;
    p->dct_scaling = 0; /* exact unless the caller asks for speed */
    p->channels_last = 0;
    p->sample_fn = NULL; /* no hook unless the caller sets one */
    p->sample_ctx = NULL;
    op_setup s = {.out_w = out_w, .out_h = out_h, .format = format};
    memcpy(s.mean, mean, sizeof s.mean);
    memcpy(s.std, std, sizeof s.std);
    ops_preset(&p->ops, mode, &s);
    make_lut(p, mean, std);
    augment_lut16_for(p, format);
}

void augment_params_set_ops(augment_params *p, const ops_pipeline *ops,
                            pl_format format16)
{
    p->ops = *ops;
    make_lut(p, ops->mean, ops->std);
    augment_lut16_for(p, format16);
}

void augment_lut16_for(augment_params *p, pl_format format)
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            p->lut16[c][v] = format == PL_FORMAT_BF16_NCHW
                                 ? bfloat16_from_float(p->lut[c][v])
                                 : float16_from_float(p->lut[c][v]);
}

size_t augment_sample_bytes(const augment_params *p)
{
    return augment_format_bytes(p->format, p->out_w, p->out_h);
}

size_t augment_format_bytes(pl_format format, int width, int height)
{
    const size_t px = (size_t)width * (size_t)height * 3;
    switch (format) {
    case PL_FORMAT_F32_NCHW:
        return px * sizeof(float);
    case PL_FORMAT_F16_NCHW:
    case PL_FORMAT_BF16_NCHW:
        return px * sizeof(uint16_t);
    default:
        return px;
    }
}

/* The largest DCT scale-down that still leaves at least one decoded pixel
 * per resized pixel, as Pillow's draft mode picks it; 1 for a rectangle
 * reaching past the image (zeros there: decoded at full size). */
static int pick_denom(const augment_params *p, const augment_plan *plan,
                      int width, int height)
{
    if (plan->src_x < 0 || plan->src_y < 0 ||
        plan->src_x + plan->src_w > width || plan->src_y + plan->src_h > height)
        return 1;
    for (int d = 8; p->dct_scaling && d > 1; d /= 2)
        if (plan->src_w >= d * plan->rs_w && plan->src_h >= d * plan->rs_h)
            return d;
    return 1;
}

void augment_plan_make(const augment_params *p, int64_t epoch, int64_t index,
                       int width, int height, augment_plan *plan)
{
    op_geometry g;
    ops_geometry(&p->ops, p->seed, epoch, index, width, height, &g);
    memset(plan, 0, sizeof *plan);
    plan->src_x = g.src_x;
    plan->src_y = g.src_y;
    plan->src_w = g.src_w;
    plan->src_h = g.src_h;
    plan->rs_w = g.rs_w;
    plan->rs_h = g.rs_h;
    plan->out_x = g.win_x;
    plan->out_y = g.win_y;
    plan->flip = g.hflip;
    plan->vflip = g.vflip;
    plan->interp = g.interp;
    plan->antialias = g.antialias;
    plan->denom = pick_denom(p, plan, width, height);
}

void augment_store_f32(const augment_params *p, const uint8_t *rgb, int y,
                       float *dst)
{
    const int w = p->out_w;
    if (p->channels_last) {
        float *out = dst + (size_t)y * w * 3;
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                out[x * 3 + c] = p->lut[c][rgb[(size_t)x * 3 + c]];
        return;
    }
    const size_t plane = (size_t)w * (size_t)p->out_h;
    float *out = dst + (size_t)y * w;
    for (int c = 0; c < 3; c++, out += plane) {
        const float *lut = p->lut[c];
        for (int x = 0; x < w; x++)
            out[x] = lut[rgb[(size_t)x * 3 + c]];
    }
}

void augment_store_f16(const augment_params *p, const uint8_t *rgb, int y,
                       uint16_t *dst)
{
    const int w = p->out_w;
    if (p->channels_last) {
        uint16_t *out = dst + (size_t)y * w * 3;
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                out[x * 3 + c] = p->lut16[c][rgb[(size_t)x * 3 + c]];
        return;
    }
    const size_t plane = (size_t)w * (size_t)p->out_h;
    uint16_t *out = dst + (size_t)y * w;
    for (int c = 0; c < 3; c++, out += plane) {
        const uint16_t *lut = p->lut16[c];
        for (int x = 0; x < w; x++)
            out[x] = lut[rgb[(size_t)x * 3 + c]];
    }
}
