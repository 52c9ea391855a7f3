/* center_crop: torchvision.transforms.v2.CenterCrop(size) (a crop larger
 * than the image pads it with zeros, as torchvision does), and with
 * crop_pct timm's eval crop: first the shorter side resized to
 * floor(max(W, H) / crop_pct), then the centre W x H (crop_pct 0.875 on
 * 224 x 224 is the eval preset's Resize(256) + CenterCrop(224)). */
#include <math.h>
#include <stdio.h>

#include "op.h"

enum { SIZE, CROP_PCT, INTERP, ANTIALIAS, NPARAMS };

static const op_param params[NPARAMS] = {
    [SIZE] = {"size", OP_SIZE, NULL, 1, 65535, 0, NULL,
              "S (S x S) or WxH; default config.width x config.height"},
    [CROP_PCT] = {"crop_pct", OP_NUMBER, NULL, 0, 1, 1, NULL,
                  "resize the shorter side to floor(max(W, H) / crop_pct) "
                  "first (timm); default none"},
    [INTERP] = {"interpolation", OP_WORD, "bilinear", 0, 4, 0, op_interp_words,
                "with crop_pct: the resampling filter"},
    [ANTIALIAS] = {"antialias", OP_BOOL, "true", 0, 1, 0, NULL,
                   "with crop_pct: bilinear and bicubic widen when "
                   "shrinking"},
};

typedef struct drawn {
    int32_t rs_w, rs_h; /* with crop_pct: the resize */
    int32_t top, left;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)why;
    (void)cap;
    op_size_default(&op->arg[SIZE], s);
    return 0;
}

static void shape(const op_instance *op, op_shape *s)
{
    op_size(&op->arg[SIZE], &s->w, &s->h);
    s->short_side = 0;
    s->resamples += op->arg[CROP_PCT].n != 0;
}

/* torchvision's anchor: round((image - crop) / 2), or, where the crop is
 * larger, the image placed at (crop - image) // 2 of the zero padding. */
static int anchor(int image, int crop)
{
    return image >= crop ? op_round((image - crop) / 2.0)
                         : -((crop - image) / 2);
}

/* Not random: where the crop lies, drawn so that describe says it. */
static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)rng;
    drawn *d = out;
    int cw, ch;
    op_size(&op->arg[SIZE], &cw, &ch);
    if (op->arg[CROP_PCT].n) {
        const int big = cw > ch ? cw : ch;
        const int s = (int)floor(big / op->arg[CROP_PCT].v[0]);
        op_resize_shorter(w, h, s, 0, &w, &h);
        d->rs_w = w;
        d->rs_h = h;
    }
    d->left = anchor(w, cw);
    d->top = anchor(h, ch);
}

static void geometry(const op_instance *op, const void *in, op_geometry *g)
{
    const drawn *d = in;
    int cw, ch;
    op_size(&op->arg[SIZE], &cw, &ch);
    if (op->arg[CROP_PCT].n)
        op_geometry_resize(g, d->rs_w, d->rs_h, (int)op->arg[INTERP].v[0],
                           (int)op->arg[ANTIALIAS].v[0]);
    op_geometry_crop(g, d->top, d->left, ch, cw);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    const drawn *d = in;
    if (op->arg[CROP_PCT].n)
        return snprintf(buf, cap,
                        "resize_width=%d,resize_height=%d,top=%d,left=%d",
                        d->rs_w, d->rs_h, d->top, d->left);
    return snprintf(buf, cap, "top=%d,left=%d", d->top, d->left);
}

const op_kind op_center_crop = {
    .name = "center_crop",
    .alias = NULL,
    .stage = OP_STAGE_GEOMETRY,
    .doc = "the centre crop: CenterCrop(size), or timm's with crop_pct",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .shape = shape,
    .draw = draw,
    .geometry = geometry,
    .describe = describe,
};
