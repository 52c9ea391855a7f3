/* The policies' shared machinery (policy.h): the transforms by name, their
 * magnitudes as torchvision's tensors hold them, and the one switch that
 * applies a transform through the functional forms (functional.h) and the
 * warps (affine.h). */
#include <math.h>
#include <stdio.h>

#include "affine.h"
#include "functional.h"
#include "policy.h"

const char *const policy_op_words[POLICY_NOPS] = {
#define POLICY_OP_WORD_(name, word, tv) word,
    POLICY_OP_MAP(POLICY_OP_WORD_)
#undef POLICY_OP_WORD_
};

/* torch.linspace(start, end, n)[i] in float32 (n >= 2): the step
 * (end - start) / (n - 1) in float32, then the first half from start and
 * the second from end, each value one fused multiply-add (PyTorch's CPU
 * kernel): the product of a float and an integer below 2^31 and its sum
 * with start or end are exact in a double, so the one rounding is the
 * cast. Checked against torch.linspace for every n to 130 over the
 * spaces' ends (python/tests/test_transforms_policy_ref.py). */
static float linspace(double start, double end, int n, int i)
{
    const float s = (float)start, e = (float)end;
    const float step = (e - s) / (float)(n - 1);
    if (i < n / 2)
        return (float)((double)step * (double)i + (double)s);
    return (float)((double)e - (double)step * (double)(n - 1 - i));
}

float policy_magnitude(const policy_entry *e, int n, int i, int w, int h)
{
    switch ((policy_bins)e->bins) {
    case POLICY_BINS_NONE:
        return 0.0f;
    case POLICY_BINS_LINEAR:
        return linspace(0.0, e->end, n, i);
    case POLICY_BINS_WIDTH:
        return linspace(0.0, e->end * w, n, i); /* 150.0 / 331.0 * width */
    case POLICY_BINS_HEIGHT:
        return linspace(0.0, e->end * h, n, i);
    case POLICY_BINS_POSTERIZE: {
        /* arange(n) / ((n - 1) / end): int64 over a Python float, in
         * float32; 8 - that, round() (halves to even), int(). */
        const float q = (float)i / (float)((n - 1) / e->end);
        return rintf(8.0f - q);
    }
    case POLICY_BINS_SOLARIZE:
        return linspace(1.0, 0.0, n, i);
    }
    return 0.0f;
}

float policy_draw_magnitude(const policy_entry *e, int n, int i, int w, int h,
                            philox_stream *rng)
{
    if (e->bins == POLICY_BINS_NONE)
        return 0.0f;
    const float m = policy_magnitude(e, n, i, w, h);
    return e->sign && philox_next_double(rng) <= 0.5 ? -m : m;
}

/* F.affine(angle=0, translate, scale=1, shear), about the centre or the
 * top-left corner. */
static int warp(op_image *img, double tx, double ty, double sx, double sy,
                int corner, int interp, const float *fill)
{
    const op_affine_params a = {0.0, tx, ty, 1.0, sx, sy, corner, 0.0, 0.0};
    return op_affine_image(img, &a, interp, fill);
}

int policy_apply(op_image *img, int op, double m, int interp, const float *fill)
{
    /* math.degrees: x * (180 / pi), Python's constant. */
    const double to_degrees = 180.0 / 3.14159265358979323846;
    switch ((policy_op)op) {
    case POLICY_IDENTITY:
    case POLICY_NOPS:
        return 0;
    case POLICY_SHEAR_X:
        return warp(img, 0, 0, atan(m) * to_degrees, 0, 1, interp, fill);
    case POLICY_SHEAR_Y:
        return warp(img, 0, 0, 0, atan(m) * to_degrees, 1, interp, fill);
    case POLICY_TRANSLATE_X: /* int(m): toward zero */
        return warp(img, (double)(int)m, 0, 0, 0, 0, interp, fill);
    case POLICY_TRANSLATE_Y:
        return warp(img, 0, (double)(int)m, 0, 0, 0, interp, fill);
    case POLICY_ROTATE:
        return op_rotate_image(img, m, interp, fill, NULL);
    case POLICY_BRIGHTNESS:
        fn_adjust_brightness(img, 1.0 + m);
        return 0;
    case POLICY_COLOR:
        fn_adjust_saturation(img, 1.0 + m);
        return 0;
    case POLICY_CONTRAST:
        fn_adjust_contrast(img, 1.0 + m);
        return 0;
    case POLICY_SHARPNESS:
        return fn_adjust_sharpness(img, 1.0 + m);
    case POLICY_POSTERIZE:
        fn_posterize(img, (int)m);
        return 0;
    case POLICY_SOLARIZE: /* the bound, 255, times the fraction */
        fn_solarize(img, 255.0 * m);
        return 0;
    case POLICY_AUTOCONTRAST:
        fn_autocontrast(img);
        return 0;
    case POLICY_EQUALIZE:
        fn_equalize(img);
        return 0;
    case POLICY_INVERT:
        fn_invert(img);
        return 0;
    }
    return 0;
}

int policy_apply_all(const op_instance *op, op_image *img, const uint8_t *ops,
                     const float *m, int n)
{
    const int np = op->kind->nparams;
    const op_value *fv = &op->arg[np - 1];
    float fill[3];
    for (int c = 0; c < 3; c++)
        fill[c] = (float)fv->v[c];
    const int interp = op_warp_interp(&op->arg[np - 2]);
    for (int k = 0; k < n; k++) {
        const int rc =
            policy_apply(img, ops[k], m[k], interp, fv->n ? fill : NULL);
        if (rc)
            return rc;
    }
    return 0;
}

int policy_describe(char *buf, size_t cap, const uint8_t *ops, const float *m,
                    int n)
{
    int len = 0;
    for (int k = 0; k < n; k++) {
        const size_t at = (size_t)len < cap ? (size_t)len : cap;
        const int op = ops[k] < POLICY_NOPS ? ops[k] : POLICY_IDENTITY;
        len += snprintf(buf + at, cap - at, "%sop%d=%s,m%d=%.9g", k ? "," : "",
                        k, policy_op_words[op], k, (double)m[k]);
    }
    return len;
}
