/* Augmentation: where each output sample's pixels come from (crop, resize,
 * flip: the geometric prefix of the ops pipeline, ops/ops.h), drawn from
 * philox keyed by (seed, epoch, dataset index, op) and the image's size
 * alone, and how resized rows are written out (u8 NHWC, or normalised f32,
 * f16 or bf16, NCHW or channels-last). */
#ifndef PINLOAD_AUGMENT_H
#define PINLOAD_AUGMENT_H

#include <stdint.h>

#include "ops/ops.h"
#include "pinload.h"

typedef struct augment_params {
    pl_augment mode; /* the preset, when ops is one */
    pl_format format;
    int out_w, out_h;
    uint64_t seed;
    /* Decode at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling) when the
     * source rectangle stays at least as large as the resize needs. */
    int dct_scaling;
    /* Float formats interleaved, [h][w][3], instead of three planes. */
    int channels_last;
    /* F32: lut[c][v] = (v / 255 - mean[c]) / std[c], so every path
     * (host, GPU) normalises with exactly these floats; lut16: the same
     * values as the 16-bit format's bit patterns (rounded to nearest
     * even): half precision, or bfloat16 for PL_FORMAT_BF16_NCHW. */
    float lut[3][256];
    uint16_t lut16[3][256];
    /* The ops every sample goes through: the preset's, or
     * config.transform's (augment_params_set_ops). */
    ops_pipeline ops;
    /* config.sample_fn and its ctx: after the pixel ops; NULL: none. */
    pl_sample_fn sample_fn;
    void *sample_ctx;
} augment_params;

/* The preset `mode`'s pipeline, and the tables of mean and std. */
void augment_params_init(augment_params *p, pl_augment mode, pl_format format,
                         int out_w, int out_h, uint64_t seed,
                         const float mean[3], const float std[3]);

/* Run `ops` instead (parsed for this output), and make the tables from its
 * mean and std (normalize's, or the config's); lut16 for `format16`, the
 * delivered 16-bit format (augment_lut16_for). */
void augment_params_set_ops(augment_params *p, const ops_pipeline *ops,
                            pl_format format16);

/* Where one sample comes from: the source rectangle of the decoded image
 * is scaled to rs_w x rs_h, and the out_w x out_h window at (out_x, out_y)
 * of that is the output, mirrored left-right when flip is set and
 * top-bottom when vflip is. The rectangle may reach past the image, and
 * the window past the scaled rectangle (a crop larger than the image):
 * those pixels are zeros (padded, denom 1). */
typedef struct augment_plan {
    int src_x, src_y, src_w, src_h;
    int rs_w, rs_h;
    int out_x, out_y;
    int flip;
    int denom; /* decode at 1/denom: 1, 2, 4 or 8 */
    int vflip;
    int interp;    /* an op_interp (ops/op.h) */
    int antialias; /* bilinear and bicubic widen when shrinking */
} augment_plan;

/* The plan for dataset index `index` in `epoch`, for an image of
 * width x height pixels. */
void augment_plan_make(const augment_params *p, int64_t epoch, int64_t index,
                       int width, int height, augment_plan *plan);

/* Bytes of one output sample. */
size_t augment_sample_bytes(const augment_params *p);
/* The same for any format and size. */
size_t augment_format_bytes(pl_format format, int width, int height);

/* Store resized row y (out_w RGB pixels, flipped already) of a float32
 * sample at dst: each channel normalised through the LUT into its plane. */
void augment_store_f32(const augment_params *p, const uint8_t *rgb, int y,
                       float *dst);

/* The same for a 16-bit float sample (F16 or BF16: lut16's patterns). */
void augment_store_f16(const augment_params *p, const uint8_t *rgb, int y,
                       uint16_t *dst);

/* lut16 made for the 16-bit format `format` (BF16, else half). */
void augment_lut16_for(augment_params *p, pl_format format);

#endif
