/* affine: torchvision.transforms.v2.RandomAffine(degrees, translate,
 * scale, shear, interpolation, fill, center) on the uint8 image, its draws
 * as RandomAffine.make_params makes them; and the warp every affine op
 * runs (affine.h): torchvision's F.affine on a uint8 tensor, float32 grid
 * and all, so that nearest sampling picks the same source pixels.
 *
 * The float arithmetic below is written in torchvision's order and must
 * not be contracted into fused multiply-adds (which round once where
 * PyTorch rounds twice): ISO C mode (-std=c11, the Makefile's) keeps GCC
 * from contracting, and the pragma tells clang. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "affine.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

const char *const op_warp_words[] = {"nearest", "bilinear", NULL};

int op_warp_interp(const op_value *v)
{
    return v->v[0] == 1 ? OP_INTERP_BILINEAR : OP_INTERP_NEAREST;
}

int op_symmetric_range(op_value *v, const char *name, char *why, size_t cap)
{
    if (v->n != 1)
        return 0;
    const double d = v->v[0];
    if (d < 0)
        return snprintf(why, cap,
                        "%s=%g: one number d is the range -d:d, so not "
                        "below 0 (write a:b for another range)",
                        name, d),
               PL_EINVAL;
    v->v[0] = 0.0 - d; /* +0 for 0, not -0 */
    v->v[1] = d;
    v->n = 2;
    return 0;
}

void op_affine_matrix(const op_affine_params *a, int w, int h, double m[6])
{
    /* _get_inverse_affine_matrix, term for term (Python's doubles): the
     * centre from the image's middle, M^-1 = C RSS^-1 C^-1 T^-1. */
    /* math.radians: x * (pi / 180), Python's constant */
    const double deg = 3.14159265358979323846 / 180.0;
    const double cx = a->has_center ? a->cx - w * 0.5 : 0.0;
    const double cy = a->has_center ? a->cy - h * 0.5 : 0.0;
    const double rot = a->angle * deg;
    const double sx = a->shear_x * deg, sy = a->shear_y * deg;
    const double cos_sy = cos(sy), tan_sx = tan(sx);
    const double rot_minus_sy = rot - sy;
    const double cx_plus_tx = cx + a->tx, cy_plus_ty = cy + a->ty;
    const double ra = cos(rot_minus_sy) / cos_sy;
    const double rb = -(ra * tan_sx + sin(rot));
    const double rc = sin(rot_minus_sy) / cos_sy;
    const double rd = cos(rot) - rc * tan_sx;
    m[0] = rd / a->scale;
    m[1] = -rb / a->scale;
    m[3] = -rc / a->scale;
    m[4] = ra / a->scale;
    m[2] = 0.0 + (cx - m[0] * cx_plus_tx - m[1] * cy_plus_ty);
    m[5] = 0.0 + (cy - m[3] * cx_plus_tx - m[4] * cy_plus_ty);
}

/* The sampling grid as _affine_grid and grid_sample make it, in float32:
 * theta divided by half the size, applied to the output pixel's centre
 * taken from the middle ((1 - w) / 2 .. (w - 1) / 2: exact), then
 * unnormalised, (g + 1) * (w / 2) - 0.5. */
typedef struct grid {
    float r[6]; /* gx = (X r0 + Y r1) + r2; gy = (X r3 + Y r4) + r5 */
    float half_w, half_h;
    float x_mid, y_mid; /* (w - 1) / 2, (h - 1) / 2 */
} grid;

static void grid_make(grid *g, const double m[6], int w, int h)
{
    g->half_w = (float)(0.5 * w);
    g->half_h = (float)(0.5 * h);
    for (int k = 0; k < 3; k++) {
        g->r[k] = (float)m[k] / g->half_w;
        g->r[3 + k] = (float)m[3 + k] / g->half_h;
    }
    g->x_mid = (float)(w - 1) * 0.5f;
    g->y_mid = (float)(h - 1) * 0.5f;
}

/* grid_sample's vectorised CPU kernel fuses two steps (PyTorch's x86
 * builds dispatch to its AVX2 or AVX-512 kernels, compiled with
 * contraction on): the unnormalising, (g + 1) * (size / 2) - 0.5, and
 * each weighted value added into the bilinear sum. pinload fuses the
 * same steps with fmaf, exact whatever the CPU (libm's where it has no
 * FMA instruction); the rows are compiled twice where the compiler can
 * (target_clones: an FMA build picked at load time on CPUs that have
 * one, where fmaf is one instruction). Unfused, a coordinate a float32
 * ulp above a half (0.50000006) comes out at 0.5 and rounds to the other
 * pixel. */
/* Not under ThreadSanitizer: a clone's resolver runs while the program is
 * relocated, before the sanitizer's runtime is up, and its instrumented
 * entry crashes there (every program linking the library did). */
#if defined(__SANITIZE_THREAD__)
#define WARP_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WARP_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__has_attribute) && !defined(WARP_NO_CLONES)
#if __has_attribute(target_clones)
#define WARP_ROWS __attribute__((target_clones("fma", "default")))
#endif
#endif
#ifndef WARP_ROWS
#define WARP_ROWS
#endif

static inline float unnormalize(float g, float half)
{
    return fmaf(g + 1.0f, half, -0.5f);
}

/* nearbyintf (halves to even) without a call: adding and taking away
 * 1.5 * 2^23 leaves a float of magnitude below 2^22 rounded to a whole
 * number in the default rounding mode (the compiler folds neither step:
 * ISO C, no -ffast-math). Larger values are whole already, or far outside
 * every image. */
static inline float round_even(float v)
{
    const float big = 12582912.0f;
    return fabsf(v) < 4194304.0f ? (v + big) - big : v;
}

static uint8_t to_u8(float v)
{
    v = round_even(v); /* round_(): half to even */
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

/* One output row by nearest sampling: the source pixel at the rounded
 * coordinates, or `outside` (the fill, or zeros). */
WARP_ROWS static void row_nearest(const grid *g, const uint8_t *src, int w,
                                  int h, int y, const uint8_t outside[3],
                                  uint8_t *out)
{
    const float yc = (float)y - g->y_mid;
    const float yx = yc * g->r[1], yy = yc * g->r[4];
    const size_t row = (size_t)w * 3;
    for (int x = 0; x < w; x++, out += 3) {
        const float xc = (float)x - g->x_mid;
        const float gx = (xc * g->r[0] + yx) + g->r[2];
        const float gy = (xc * g->r[3] + yy) + g->r[5];
        const float fx = round_even(unnormalize(gx, g->half_w));
        const float fy = round_even(unnormalize(gy, g->half_h));
        /* NaN and the far outside fail these before any conversion. */
        if (fx >= 0.0f && fx < (float)w && fy >= 0.0f && fy < (float)h) {
            const uint8_t *p = src + (size_t)fy * row + (size_t)fx * 3;
            out[0] = p[0];
            out[1] = p[1];
            out[2] = p[2];
        } else {
            out[0] = outside[0];
            out[1] = outside[1];
            out[2] = outside[2];
        }
    }
}

/* One output row by bilinear sampling: the four neighbours weighed as
 * grid_sample weighs them (zeros outside), summed in its order; with a
 * fill, blended by the weights that fell inside (torchvision's mask). */
WARP_ROWS static void row_bilinear(const grid *g, const uint8_t *src, int w,
                                   int h, int y, const float *fill,
                                   uint8_t *out)
{
    const float yc = (float)y - g->y_mid;
    const float yx = yc * g->r[1], yy = yc * g->r[4];
    const size_t row = (size_t)w * 3;
    for (int x = 0; x < w; x++, out += 3) {
        const float xc = (float)x - g->x_mid;
        const float gx = (xc * g->r[0] + yx) + g->r[2];
        const float gy = (xc * g->r[3] + yy) + g->r[5];
        const float ix = unnormalize(gx, g->half_w);
        const float iy = unnormalize(gy, g->half_h);
        float v[3] = {0.0f, 0.0f, 0.0f}, mask = 0.0f;
        if (ix > -1.0f && ix < (float)w && iy > -1.0f && iy < (float)h) {
            /* floor: ix and iy are above -1, so truncation, or -1. */
            const int x0 = ix < 0.0f ? -1 : (int)ix;
            const int y0 = iy < 0.0f ? -1 : (int)iy;
            const float xw = (float)x0, yn = (float)y0;
            const float we = ix - xw, ea = 1.0f - we;
            const float no = iy - yn, so = 1.0f - no;
            const float wt[4] = {so * ea, so * we, no * ea, no * we};
            /* grid_sample's vectorised sum, in its order (north-west,
             * north-east, south-west, south-east), each product fused
             * into the running sum. A neighbour outside adds PyTorch's
             * 0 * weight: nothing. */
            if (x0 >= 0 && x0 + 1 < w && y0 >= 0 && y0 + 1 < h) {
                const uint8_t *n = src + (size_t)y0 * row + (size_t)x0 * 3;
                const uint8_t *s = n + row;
                for (int c = 0; c < 3; c++) {
                    float t = (float)n[c] * wt[0];
                    t = fmaf((float)n[c + 3], wt[1], t);
                    t = fmaf((float)s[c], wt[2], t);
                    v[c] = fmaf((float)s[c + 3], wt[3], t);
                }
                mask = ((wt[0] + wt[1]) + wt[2]) + wt[3];
            } else {
                const int in_x[2] = {x0 >= 0, x0 + 1 < w};
                const int in_y[2] = {y0 >= 0, y0 + 1 < h};
                for (int k = 0; k < 4; k++) {
                    const int dx = k & 1, dy = k >> 1;
                    if (!in_x[dx] || !in_y[dy])
                        continue;
                    const uint8_t *p =
                        src + (size_t)(y0 + dy) * row + (size_t)(x0 + dx) * 3;
                    for (int c = 0; c < 3; c++)
                        v[c] = fmaf((float)p[c], wt[k], v[c]);
                    mask = mask + wt[k];
                }
            }
        }
        for (int c = 0; c < 3; c++)
            out[c] = to_u8(fill ? (v[c] - fill[c]) * mask + fill[c] : v[c]);
    }
}

int op_warp_image(op_image *img, const double m[6], int interp,
                  const float *fill)
{
    /* The identity samples every pixel at itself, give or take float32's
     * 1e-5 of a pixel, which rounds back to the pixel: nothing to do. */
    if (m[0] == 1.0 && m[1] == 0.0 && m[2] == 0.0 && m[3] == 0.0 &&
        m[4] == 1.0 && m[5] == 0.0)
        return 0;
    const int w = img->w, h = img->h;
    const uint8_t *src = op_image_copy(img);
    if (!src)
        return PL_ENOMEM;
    grid g;
    grid_make(&g, m, w, h);
    uint8_t outside[3] = {0, 0, 0};
    for (int c = 0; fill && c < 3; c++)
        outside[c] = to_u8(fill[c]);
    for (int y = 0; y < h; y++) {
        uint8_t *out = img->px + (size_t)y * img->stride;
        if (interp == OP_INTERP_BILINEAR)
            row_bilinear(&g, src, w, h, y, fill, out);
        else
            row_nearest(&g, src, w, h, y, outside, out);
    }
    return 0;
}

int op_affine_image(op_image *img, const op_affine_params *a, int interp,
                    const float *fill)
{
    double m[6];
    op_affine_matrix(a, img->w, img->h, m);
    return op_warp_image(img, m, interp, fill);
}

/* ---- the op: RandomAffine ---- */

enum {
    DEGREES,
    TRANSLATE,
    SCALE,
    SHEAR,
    SHEAR_Y,
    INTERP,
    FILL,
    CENTER,
    NPARAMS
};

static const op_param params[NPARAMS] = {
    [DEGREES] = {"degrees", OP_RANGE, NULL, -360, 360, 0, NULL,
                 "the angle's range, degrees clockwise; d alone: -d:d; "
                 "required"},
    [TRANSLATE] = {"translate", OP_PAIR, "0", 0, 1, 0, NULL,
                   "the largest shift, x:y, as fractions of the width and "
                   "height"},
    [SCALE] = {"scale", OP_RANGE, "1", 0, 100, 1, NULL,
               "the scale's range, drawn uniformly"},
    [SHEAR] = {"shear", OP_RANGE, "0", -89, 89, 0, NULL,
               "the x shear's range, degrees; s alone: -s:s"},
    [SHEAR_Y] = {"shear_y", OP_RANGE, "0", -89, 89, 0, NULL,
                 "the y shear's range, degrees; s alone: -s:s"},
    [INTERP] = {"interpolation", OP_WORD, "nearest", 0, 1, 0, op_warp_words,
                "nearest or bilinear (torchvision's tensor kernels)"},
    [FILL] = {"fill", OP_TRIPLE, "0", 0, 255, 0, NULL,
              "R:G:B where the source is outside the image"},
    [CENTER] = {"center", OP_PAIR, NULL, -1e6, 1e6, 0, NULL,
                "x:y in pixels from the top-left corner; default the "
                "image's centre"},
};

typedef struct drawn {
    double angle, scale, shear_x, shear_y;
    int32_t tx, ty;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    if (!op->arg[DEGREES].n)
        return snprintf(why, cap,
                        "degrees: not given (RandomAffine's is required: d "
                        "for -d:d, a:b, or 0 for none)"),
               PL_EINVAL;
    int rc = op_symmetric_range(&op->arg[DEGREES], "degrees", why, cap);
    if (rc == 0)
        rc = op_symmetric_range(&op->arg[SHEAR], "shear", why, cap);
    if (rc == 0)
        rc = op_symmetric_range(&op->arg[SHEAR_Y], "shear_y", why, cap);
    return rc;
}

static double uniform(philox_stream *rng, const op_value *v)
{
    return v->v[0] + (v->v[1] - v->v[0]) * philox_next_double(rng);
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    drawn *d = out;
    d->angle = uniform(rng, &op->arg[DEGREES]);
    const double max_dx = op->arg[TRANSLATE].v[0] * w;
    const double max_dy = op->arg[TRANSLATE].v[1] * h;
    d->tx = op_round(-max_dx + 2.0 * max_dx * philox_next_double(rng));
    d->ty = op_round(-max_dy + 2.0 * max_dy * philox_next_double(rng));
    d->scale = uniform(rng, &op->arg[SCALE]);
    d->shear_x = uniform(rng, &op->arg[SHEAR]);
    d->shear_y = uniform(rng, &op->arg[SHEAR_Y]);
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    const drawn *d = in;
    const op_value *c = &op->arg[CENTER];
    const op_affine_params a = {d->angle, d->tx,      d->ty,
                                d->scale, d->shear_x, d->shear_y,
                                c->n > 0, c->v[0],    c->v[1]};
    const float fill[3] = {(float)op->arg[FILL].v[0], (float)op->arg[FILL].v[1],
                           (float)op->arg[FILL].v[2]};
    return op_affine_image(img, &a, op_warp_interp(&op->arg[INTERP]), fill);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    (void)op;
    const drawn *d = in;
    return snprintf(buf, cap,
                    "angle=%.17g,translate_x=%d,translate_y=%d,scale=%.17g,"
                    "shear_x=%.17g,shear_y=%.17g",
                    d->angle, d->tx, d->ty, d->scale, d->shear_x, d->shear_y);
}

const op_kind op_affine = {
    .name = "affine",
    .alias = "random_affine",
    .stage = OP_STAGE_PIXELS,
    .doc = "a random rotation, shift, scale and shear: RandomAffine(degrees, "
           "translate, scale, shear, interpolation, fill, center)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
