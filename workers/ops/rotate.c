/* rotate: torchvision.transforms.v2.RandomRotation(degrees, interpolation,
 * expand=False, center, fill) on the uint8 image: an angle drawn
 * uniformly from degrees, counter-clockwise, then F.rotate: the affine
 * warp of angle -a (affine.c), or, about the image's centre, the exact
 * paths torchvision takes for 0, 180 and (on a square) 90 and 270
 * degrees. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "affine.h"

/* 180 degrees: the pixels in reverse order, in place. */
static void turn_half(op_image *img)
{
    const int w = img->w, h = img->h;
    for (int y = 0; y < (h + 1) / 2; y++) {
        uint8_t *a = img->px + (size_t)y * img->stride;
        uint8_t *b = img->px + (size_t)(h - 1 - y) * img->stride;
        /* The middle row of an odd height meets itself halfway. */
        const int n = y == h - 1 - y ? w / 2 : w;
        for (int x = 0; x < n; x++) {
            uint8_t *p = a + (size_t)x * 3, *q = b + (size_t)(w - 1 - x) * 3;
            for (int c = 0; c < 3; c++) {
                const uint8_t t = p[c];
                p[c] = q[c];
                q[c] = t;
            }
        }
    }
}

/* 90 degrees counter-clockwise (torch.rot90(k=1)), or 270 (k=3), of a
 * square image: out[y][x] = in[x][n-1-y], or in[n-1-x][y]. */
static int turn_quarter(op_image *img, int k)
{
    const int n = img->w;
    const size_t row = (size_t)n * 3;
    const uint8_t *src = op_image_copy(img);
    if (!src)
        return PL_ENOMEM;
    for (int y = 0; y < n; y++) {
        uint8_t *out = img->px + (size_t)y * img->stride;
        for (int x = 0; x < n; x++, out += 3) {
            const int sy = k == 1 ? x : n - 1 - x;
            const int sx = k == 1 ? n - 1 - y : y;
            memcpy(out, src + (size_t)sy * row + (size_t)sx * 3, 3);
        }
    }
    return 0;
}

int op_rotate_image(op_image *img, double angle, int interp, const float *fill,
                    const double *center)
{
    /* Python's angle % 360: in [0, 360). */
    double a = fmod(angle, 360.0);
    if (a < 0)
        a += 360.0;
    if (!center) {
        if (a == 0.0)
            return 0;
        if (a == 180.0) {
            turn_half(img);
            return 0;
        }
        if (img->w == img->h && (a == 90.0 || a == 270.0))
            return turn_quarter(img, a == 90.0 ? 1 : 3);
    }
    /* F.rotate turns the other way from F.affine: its matrix is
     * F.affine's for -(angle % 360). */
    const op_affine_params p = {-a,
                                0.0,
                                0.0,
                                1.0,
                                0.0,
                                0.0,
                                center != NULL,
                                center ? center[0] : 0.0,
                                center ? center[1] : 0.0};
    return op_affine_image(img, &p, interp, fill);
}

/* ---- the op: RandomRotation ---- */

enum { DEGREES, INTERP, FILL, CENTER, NPARAMS };

static const op_param params[NPARAMS] = {
    [DEGREES] = {"degrees", OP_RANGE, NULL, -360, 360, 0, NULL,
                 "the angle's range, degrees counter-clockwise; d alone: "
                 "-d:d; required"},
    [INTERP] = {"interpolation", OP_WORD, "nearest", 0, 1, 0, op_warp_words,
                "nearest or bilinear (torchvision's tensor kernels)"},
    [FILL] = {"fill", OP_TRIPLE, "0", 0, 255, 0, NULL,
              "R:G:B where the source is outside the image"},
    [CENTER] = {"center", OP_PAIR, NULL, -1e6, 1e6, 0, NULL,
                "x:y in pixels from the top-left corner; default the "
                "image's centre"},
};

typedef struct drawn {
    double angle;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    if (!op->arg[DEGREES].n)
        return snprintf(why, cap,
                        "degrees: not given (RandomRotation's is required: "
                        "d for -d:d, or a:b)"),
               PL_EINVAL;
    return op_symmetric_range(&op->arg[DEGREES], "degrees", why, cap);
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)w;
    (void)h;
    const op_value *v = &op->arg[DEGREES];
    ((drawn *)out)->angle =
        v->v[0] + (v->v[1] - v->v[0]) * philox_next_double(rng);
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    const op_value *c = &op->arg[CENTER];
    const float fill[3] = {(float)op->arg[FILL].v[0], (float)op->arg[FILL].v[1],
                           (float)op->arg[FILL].v[2]};
    return op_rotate_image(img, ((const drawn *)in)->angle,
                           op_warp_interp(&op->arg[INTERP]), fill,
                           c->n ? c->v : NULL);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    return snprintf(buf, cap, "angle=%.17g", ((const drawn *)in)->angle);
}

const op_kind op_rotate = {
    .name = "rotate",
    .alias = "random_rotation",
    .stage = OP_STAGE_PIXELS,
    .doc = "a random rotation: RandomRotation(degrees, interpolation, "
           "center, fill)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
