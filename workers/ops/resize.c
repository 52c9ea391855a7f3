/* resize: torchvision.transforms.v2.Resize(size, interpolation, max_size,
 * antialias): S sets the shorter side (the longer int(S * long / short),
 * at most max_size), WxH the exact size. Fused into the decode, as the
 * pipeline's one resample. */
#include <stdio.h>

#include "op.h"

enum { SIZE, INTERP, MAX_SIZE, ANTIALIAS, NPARAMS };

static const op_param params[NPARAMS] = {
    [SIZE] = {"size", OP_SIZE, NULL, 1, 65535, 0, NULL,
              "S (the shorter side) or WxH (exact); default config.width x "
              "config.height"},
    [INTERP] = {"interpolation", OP_WORD, "bilinear", 0, 4, 0, op_interp_words,
                "the resampling filter"},
    [MAX_SIZE] = {"max_size", OP_NUMBER, NULL, 1, 65535, 0, NULL,
                  "with S: the longer side's bound; default none"},
    [ANTIALIAS] = {"antialias", OP_BOOL, "true", 0, 1, 0, NULL,
                   "bilinear and bicubic widen when shrinking (torchvision "
                   "v2's default)"},
};

typedef struct drawn {
    int32_t width, height;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    op_size_default(&op->arg[SIZE], s);
    const op_value *m = &op->arg[MAX_SIZE];
    if (!m->n)
        return 0;
    if (m->v[0] != (int)m->v[0])
        return snprintf(why, cap, "max_size=%g: not a whole number", m->v[0]),
               PL_EINVAL;
    if (op->arg[SIZE].n == 2)
        return snprintf(why, cap,
                        "max_size=%g: applies to a size S (the shorter "
                        "side) only, not to WxH",
                        m->v[0]),
               PL_EINVAL;
    if (m->v[0] <= op->arg[SIZE].v[0])
        return snprintf(why, cap,
                        "max_size=%g: must be above size (%g), the shorter "
                        "side",
                        m->v[0], op->arg[SIZE].v[0]),
               PL_EINVAL;
    return 0;
}

static void shape(const op_instance *op, op_shape *s)
{
    const op_value *v = &op->arg[SIZE];
    if (v->n == 2) {
        op_size(v, &s->w, &s->h);
        s->short_side = 0;
    } else {
        s->w = s->h = 0;
        s->short_side = (int)v->v[0];
    }
    s->resamples++;
}

/* Not random: the size, from the image's, drawn so that describe says it. */
static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)rng;
    drawn *d = out;
    const op_value *v = &op->arg[SIZE];
    if (v->n == 2) {
        op_size(v, &d->width, &d->height);
        return;
    }
    const int max = op->arg[MAX_SIZE].n ? (int)op->arg[MAX_SIZE].v[0] : 0;
    int nw, nh;
    op_resize_shorter(w, h, (int)v->v[0], max, &nw, &nh);
    d->width = nw;
    d->height = nh;
}

static void geometry(const op_instance *op, const void *in, op_geometry *g)
{
    const drawn *d = in;
    op_geometry_resize(g, d->width, d->height, (int)op->arg[INTERP].v[0],
                       (int)op->arg[ANTIALIAS].v[0]);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    return snprintf(buf, cap, "width=%d,height=%d", d->width, d->height);
}

const op_kind op_resize = {
    .name = "resize",
    .alias = NULL,
    .stage = OP_STAGE_GEOMETRY,
    .doc = "resize: Resize(size, interpolation, max_size, antialias)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .shape = shape,
    .draw = draw,
    .geometry = geometry,
    .describe = describe,
};
