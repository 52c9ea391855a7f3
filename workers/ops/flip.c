/* hflip and vflip: torchvision.transforms.v2.RandomHorizontalFlip(p) and
 * RandomVerticalFlip(p): mirrored when a uniform draw in [0, 1) is below p.
 * Geometric, so they cost nothing: the resampler writes the row reversed,
 * or the rows in reverse order. The model of a geometric op. */
#include <stdio.h>

#include "op.h"

enum { P, NPARAMS };

static const op_param params[NPARAMS] = {
    [P] = {"p", OP_NUMBER, "0.5", 0, 1, 0, NULL, "the probability of the flip"},
};

typedef struct drawn {
    int32_t flip;
} drawn;

static void shape(const op_instance *op, op_shape *s)
{
    (void)op;
    (void)s; /* a flip keeps the size */
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)w;
    (void)h;
    ((drawn *)out)->flip = philox_next_double(rng) < op->arg[P].v[0];
}

static void geometry_h(const op_instance *op, const void *in, op_geometry *g)
{
    (void)op;
    if (((const drawn *)in)->flip)
        op_geometry_flip(g, 1);
}

static void geometry_v(const op_instance *op, const void *in, op_geometry *g)
{
    (void)op;
    if (((const drawn *)in)->flip)
        op_geometry_flip(g, 0);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    return snprintf(buf, cap, "flip=%d", (int)((const drawn *)in)->flip);
}

const op_kind op_hflip = {
    .name = "hflip",
    .alias = "random_horizontal_flip",
    .stage = OP_STAGE_GEOMETRY,
    .doc = "mirror left-right with probability p: RandomHorizontalFlip(p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .shape = shape,
    .draw = draw,
    .geometry = geometry_h,
    .describe = describe,
};

const op_kind op_vflip = {
    .name = "vflip",
    .alias = "random_vertical_flip",
    .stage = OP_STAGE_GEOMETRY,
    .doc = "mirror top-bottom with probability p: RandomVerticalFlip(p)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .shape = shape,
    .draw = draw,
    .geometry = geometry_v,
    .describe = describe,
};
