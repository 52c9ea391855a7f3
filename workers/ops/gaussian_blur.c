/* gaussian_blur: torchvision.transforms.v2.GaussianBlur(kernel_size, sigma):
 * sigma drawn uniformly from its range (float32, as torch.empty(1).uniform_
 * draws it), the same for both axes; the blur is F.gaussian_blur's on a
 * uint8 tensor: the kernel exp(-d^2 / (2 sigma^2)) normalised (its
 * softmax), the image reflected at its edges (without repeating the edge
 * pixel), convolved in float and rounded half to even. pinload convolves
 * in two passes (the kernel is separable: torchvision's 2-D kernel is the
 * outer product of the two) in float32; torchvision's conv2d sums in
 * another order, so a value within float32's error of a half rounds the
 * other way now and then: one level, measured. */
#include <math.h>
#include <stdio.h>

#include "../../common/grow.h"
#include "functional.h"

enum { KERNEL_SIZE, SIGMA, P, NPARAMS };

static const op_param params[NPARAMS] = {
    [KERNEL_SIZE] = {"kernel_size", OP_SIZE, NULL, 1, 255, 0, NULL,
                     "K (K x K) or KXxKY, odd; required, as GaussianBlur's"},
    [SIGMA] = {"sigma", OP_RANGE, "0.1:2", 0, 100, 1, NULL,
               "the standard deviation, drawn uniformly (one number: "
               "fixed)"},
    [P] = {"p", OP_NUMBER, NULL, 0, 1, 0, NULL,
           "RandomApply's probability; not given: always (drawn only when "
           "given)"},
};

typedef struct drawn {
    float sigma;
    int32_t apply;
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    const op_value *k = &op->arg[KERNEL_SIZE];
    if (!k->n) {
        snprintf(why, cap,
                 "kernel_size: required (an odd size, K or "
                 "KXxKY, as GaussianBlur's)");
        return PL_EINVAL;
    }
    int kx, ky;
    op_size(k, &kx, &ky);
    if (kx % 2 == 0 || ky % 2 == 0) {
        snprintf(why, cap, "kernel_size=%dx%d: not odd", kx, ky);
        return PL_EINVAL;
    }
    /* torchvision's reflection padding needs half the kernel below the
     * image's side; the image is the output's. */
    if (kx / 2 >= s->out_w || ky / 2 >= s->out_h) {
        snprintf(why, cap,
                 "kernel_size=%dx%d: wider than the %d x %d output allows "
                 "(half of it must be below each side, to reflect)",
                 kx, ky, s->out_w, s->out_h);
        return PL_EINVAL;
    }
    return 0;
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)w;
    (void)h;
    drawn *d = out;
    /* RandomApply's coin first, where a p is given (an op without one
     * draws as it always has). */
    d->apply = op_apply_coin(op, P, rng);
    if (!d->apply)
        return;
    const double lo = op->arg[SIGMA].v[0], hi = op->arg[SIGMA].v[1];
    d->sigma = (float)(lo + (hi - lo) * philox_next_double(rng));
}

/* The normalised 1-D kernel of n (odd) taps, as _get_gaussian_kernel1d. */
static void kernel1d(int n, float sigma, float *w)
{
    const double c = (n - 1) / 2.0;
    double sum = 0.0, k[256];
    for (int i = 0; i < n; i++) {
        const double d = (i - c) / sigma;
        sum += k[i] = exp(-0.5 * d * d);
    }
    for (int i = 0; i < n; i++)
        w[i] = (float)(k[i] / sum);
}

/* Index i of a row of n reflected into [0, n) (period 2n - 2), as
 * torch's reflect padding is, repeated where the kernel is wider. */
static int reflect(int i, int n)
{
    if (n == 1)
        return 0;
    const int period = 2 * n - 2;
    i %= period;
    i = i < 0 ? i + period : i;
    return i < n ? i : period - i;
}

/* Rows [0, h) of src (uint8, `stride` apart) filtered along x into tmp
 * (float, w * 3 a row), through `row` (the padded row, (w + 2 r) * 3). */
static void pass_x(const op_image *img, const float *w, int r, float *row,
                   float *tmp)
{
    const int n = img->w * 3;
    for (int y = 0; y < img->h; y++) {
        const uint8_t *px = img->px + (size_t)y * img->stride;
        for (int x = -r; x < img->w + r; x++) {
            const uint8_t *p = px + (size_t)reflect(x, img->w) * 3;
            float *q = row + (size_t)(x + r) * 3;
            q[0] = p[0];
            q[1] = p[1];
            q[2] = p[2];
        }
        float *out = tmp + (size_t)y * n;
        for (int j = 0; j < n; j++)
            out[j] = 0.0f;
        for (int k = 0; k <= 2 * r; k++) {
            const float wk = w[k];
            const float *in = row + (size_t)k * 3;
            for (int j = 0; j < n; j++)
                out[j] += wk * in[j];
        }
    }
}

/* tmp filtered along y into the image, rounded half to even. */
static void pass_y(op_image *img, const float *w, int r, const float *tmp,
                   float *acc)
{
    const int n = img->w * 3;
    for (int y = 0; y < img->h; y++) {
        for (int j = 0; j < n; j++)
            acc[j] = 0.0f;
        for (int k = 0; k <= 2 * r; k++) {
            const float wk = w[k];
            const float *in = tmp + (size_t)reflect(y + k - r, img->h) * n;
            for (int j = 0; j < n; j++)
                acc[j] += wk * in[j];
        }
        uint8_t *px = img->px + (size_t)y * img->stride;
        for (int j = 0; j < n; j++) {
            const float v = rintf(acc[j]);
            px[j] = v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
        }
    }
}

int fn_gaussian_blur(op_image *img, int kx, int ky, float sigma_x,
                     float sigma_y)
{
    if (img->w <= 0 || img->h <= 0)
        return 0;
    const int rx = kx / 2, ry = ky / 2;
    const size_t n = (size_t)img->w * 3;
    const size_t tmp = n * (size_t)img->h;
    /* pass_x's padded row, (w + 2 rx) * 3 floats; pass_y's accumulator
     * (n floats) reuses it. */
    const size_t row = n + (size_t)rx * 6;
    op_scratch *s = img->scratch;
    if (grow_scratch(&s->buf, &s->cap, (tmp + row) * sizeof(float), 1, 0) < 0)
        return PL_ENOMEM;
    float *t = (float *)(void *)s->buf, *r = t + tmp;
    float wx[256], wy[256];
    kernel1d(2 * rx + 1, sigma_x, wx);
    kernel1d(2 * ry + 1, sigma_y, wy);
    pass_x(img, wx, rx, r, t);
    pass_y(img, wy, ry, t, r);
    return 0;
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    const drawn *d = in;
    if (!d->apply)
        return 0;
    int kx, ky;
    op_size(&op->arg[KERNEL_SIZE], &kx, &ky);
    return fn_gaussian_blur(img, kx, ky, d->sigma, d->sigma);
}

static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    const drawn *d = in;
    if (op->arg[P].n && !d->apply)
        return snprintf(buf, cap, "apply=0");
    return snprintf(buf, cap, "%ssigma=%.9g", op->arg[P].n ? "apply=1," : "",
                    (double)d->sigma);
}

const op_kind op_gaussian_blur = {
    .name = "gaussian_blur",
    .alias = NULL,
    .stage = OP_STAGE_PIXELS,
    .doc = "blurred by a Gaussian of a sigma drawn from its range: "
           "GaussianBlur(kernel_size, sigma), with p RandomApply's",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
