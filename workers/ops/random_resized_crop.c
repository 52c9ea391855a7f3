/* random_resized_crop (rrc): torchvision.transforms.v2.RandomResizedCrop,
 * its draws as RandomResizedCrop.get_params makes them: ten tries at an
 * area drawn uniformly from scale x the image's and an aspect ratio drawn
 * log-uniformly from ratio, then the centre crop clamped to ratio. The
 * crop and the resize fuse into the decode: only the crop's rows and
 * columns are decoded, at the largest DCT scale the resize allows. */
#include <math.h>
#include <stdio.h>

#include "op.h"

enum { SIZE, SCALE, RATIO, INTERP, ANTIALIAS, NPARAMS };

static const op_param params[NPARAMS] = {
    [SIZE] = {"size", OP_SIZE, NULL, 1, 65535, 0, NULL,
              "the output, S (S x S) or WxH; default config.width x "
              "config.height"},
    [SCALE] = {"scale", OP_RANGE, "0.08:1", 0, 100, 1, NULL,
               "the crop's area over the image's, drawn uniformly"},
    [RATIO] = {"ratio", OP_RANGE, "3/4:4/3", 0, 100, 1, NULL,
               "the crop's width over its height, drawn log-uniformly"},
    [INTERP] = {"interpolation", OP_WORD, "bilinear", 0, 4, 0, op_interp_words,
                "the resampling filter"},
    [ANTIALIAS] = {"antialias", OP_BOOL, "true", 0, 1, 0, NULL,
                   "bilinear and bicubic widen when shrinking (torchvision "
                   "v2's default)"},
};

typedef struct drawn {
    int32_t top, left, height, width;
} drawn;

enum { LOG_LO, LOG_HI }; /* aux */

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)why;
    (void)cap;
    op_size_default(&op->arg[SIZE], s);
    op->aux[LOG_LO] = log(op->arg[RATIO].v[0]);
    op->aux[LOG_HI] = log(op->arg[RATIO].v[1]);
    return 0;
}

static void shape(const op_instance *op, op_shape *s)
{
    op_size(&op->arg[SIZE], &s->w, &s->h);
    s->short_side = 0;
    s->resamples++;
}

static void draw(const op_instance *op, philox_stream *rng, int width,
                 int height, void *out)
{
    drawn *d = out;
    const double area = (double)width * height;
    const double lo = op->arg[SCALE].v[0], hi = op->arg[SCALE].v[1];
    const double log_lo = op->aux[LOG_LO], log_hi = op->aux[LOG_HI];
    for (int attempt = 0; attempt < 10; attempt++) {
        const double target = area * (lo + (hi - lo) * philox_next_double(rng));
        const double aspect =
            exp(log_lo + (log_hi - log_lo) * philox_next_double(rng));
        const int w = op_round(sqrt(target * aspect));
        const int h = op_round(sqrt(target / aspect));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            d->top = (int)philox_next_below(rng, (uint32_t)(height - h + 1));
            d->left = (int)philox_next_below(rng, (uint32_t)(width - w + 1));
            d->width = w;
            d->height = h;
            return;
        }
    }
    const double in_ratio = (double)width / height;
    const double r_lo = op->arg[RATIO].v[0], r_hi = op->arg[RATIO].v[1];
    int w = width, h = height;
    if (in_ratio < r_lo)
        h = op_round(w / r_lo);
    else if (in_ratio > r_hi)
        w = op_round(h * r_hi);
    d->width = w;
    d->height = h;
    d->left = (width - w) / 2;
    d->top = (height - h) / 2;
}

static void geometry(const op_instance *op, const void *in, op_geometry *g)
{
    const drawn *d = in;
    int w, h;
    op_size(&op->arg[SIZE], &w, &h);
    op_geometry_crop(g, d->top, d->left, d->height, d->width);
    op_geometry_resize(g, w, h, (int)op->arg[INTERP].v[0],
                       (int)op->arg[ANTIALIAS].v[0]);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    return snprintf(buf, cap, "top=%d,left=%d,height=%d,width=%d", d->top,
                    d->left, d->height, d->width);
}

const op_kind op_random_resized_crop = {
    .name = "random_resized_crop",
    .alias = "rrc",
    .stage = OP_STAGE_GEOMETRY,
    .doc = "a random crop, resized: RandomResizedCrop(size, scale, ratio, "
           "interpolation, antialias)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .shape = shape,
    .draw = draw,
    .geometry = geometry,
    .describe = describe,
};
