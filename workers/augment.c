#include "augment.h"

#include <math.h>
#include <string.h>

#include "../common/philox.h"

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
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            p->lut[c][v] = ((float)v / 255.0f - mean[c]) / std[c];
    augment_lut16_for(p, format);
}

void augment_lut16_for(augment_params *p, pl_format format)
{
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++)
            p->lut16[c][v] = format == PL_FORMAT_BF16_NCHW
                                 ? augment_bfloat16(p->lut[c][v])
                                 : augment_half(p->lut[c][v]);
}

uint16_t augment_bfloat16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it one, quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    /* Round to nearest, ties to even, on the 16 bits dropped. */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
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

uint16_t augment_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) /* inf, NaN */
        return (uint16_t)(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0));
    if (absx >= 0x477FF000u) /* rounds to beyond 65504 */
        return (uint16_t)(sign | 0x7C00u);
    if (absx < 0x38800000u) { /* below 2^-14: a subnormal half or zero */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        const uint32_t mant = (absx & 0x7FFFFFu) | 0x800000u;
        const int shift = 126 - (int)(absx >> 23); /* 14..24 */
        uint32_t h = mant >> shift;
        const uint32_t rest = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1);
        h += rest > half || (rest == half && (h & 1u));
        return (uint16_t)(sign | h);
    }
    /* Normal: rebias the exponent, round the 13 dropped mantissa bits. */
    uint32_t h = ((absx >> 13) - (112u << 10));
    const uint32_t rest = absx & 0x1FFFu;
    h += rest > 0x1000u || (rest == 0x1000u && (h & 1u));
    return (uint16_t)(sign | h);
}

/* Python's round(): halves go to the even neighbour, which rint() does in
 * the default rounding mode. torchvision's crop arithmetic relies on it. */
static int py_round(double x)
{
    return (int)rint(x);
}

/* torchvision.transforms.RandomResizedCrop.get_params with scale (0.08, 1)
 * and ratio (3/4, 4/3): ten tries at a random area and aspect ratio, then a
 * centre crop clamped to the ratio range. */
static void random_resized_crop(philox_stream *rng, int width, int height,
                                augment_plan *plan)
{
    const double area = (double)width * height;
    const double log_lo = log(3.0 / 4.0), log_hi = log(4.0 / 3.0);
    for (int attempt = 0; attempt < 10; attempt++) {
        const double target =
            area * (0.08 + (1.0 - 0.08) * philox_next_double(rng));
        const double aspect =
            exp(log_lo + (log_hi - log_lo) * philox_next_double(rng));
        const int w = py_round(sqrt(target * aspect));
        const int h = py_round(sqrt(target / aspect));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            plan->src_y =
                (int)philox_next_below(rng, (uint32_t)(height - h + 1));
            plan->src_x =
                (int)philox_next_below(rng, (uint32_t)(width - w + 1));
            plan->src_w = w;
            plan->src_h = h;
            return;
        }
    }
    const double in_ratio = (double)width / height;
    int w = width, h = height;
    if (in_ratio < 3.0 / 4.0)
        h = py_round(w / (3.0 / 4.0));
    else if (in_ratio > 4.0 / 3.0)
        w = py_round(h * (4.0 / 3.0));
    plan->src_w = w;
    plan->src_h = h;
    plan->src_x = (width - w) / 2;
    plan->src_y = (height - h) / 2;
}

/* torchvision's Resize(s) (shorter side to s, the longer truncated as
 * int(s * long / short)) followed by CenterCrop(out_h, out_w). */
static void resize_center_crop(const augment_params *p, int width, int height,
                               augment_plan *plan)
{
    const int big = p->out_w > p->out_h ? p->out_w : p->out_h;
    const int s = big * 256 / 224;
    plan->src_x = plan->src_y = 0;
    plan->src_w = width;
    plan->src_h = height;
    if (width <= height) {
        plan->rs_w = s;
        plan->rs_h = (int)((double)s * height / width);
    } else {
        plan->rs_h = s;
        plan->rs_w = (int)((double)s * width / height);
    }
    plan->out_x = py_round((plan->rs_w - p->out_w) / 2.0);
    plan->out_y = py_round((plan->rs_h - p->out_h) / 2.0);
}

void augment_plan_make(const augment_params *p, int64_t epoch, int64_t index,
                       int width, int height, augment_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->rs_w = p->out_w;
    plan->rs_h = p->out_h;
    switch (p->mode) {
    case PL_AUGMENT_TRAIN: {
        philox_stream rng;
        philox_stream_init(&rng, p->seed, PHILOX_DOMAIN_AUGMENT,
                           (uint64_t)epoch, (uint64_t)index);
        random_resized_crop(&rng, width, height, plan);
        plan->flip = philox_next_double(&rng) < 0.5;
        break;
    }
    case PL_AUGMENT_EVAL:
        resize_center_crop(p, width, height, plan);
        break;
    case PL_AUGMENT_NONE:
    default:
        plan->src_w = width;
        plan->src_h = height;
        break;
    }
    /* The largest DCT scale-down that still leaves at least one decoded
     * pixel per resized pixel, as Pillow's draft mode picks it. */
    plan->denom = 1;
    for (int d = 8; p->dct_scaling && d > 1; d /= 2) {
        if (plan->src_w >= d * plan->rs_w && plan->src_h >= d * plan->rs_h) {
            plan->denom = d;
            break;
        }
    }
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
