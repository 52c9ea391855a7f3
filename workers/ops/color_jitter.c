/* color_jitter: torchvision.transforms.v2.ColorJitter(brightness, contrast,
 * saturation, hue): a factor for each drawn uniformly from its range
 * (float32, as torch.empty(1).uniform_ draws), and the four adjustments
 * (functional.h) run in an order drawn per sample, as ColorJitter's
 * fn_idx = torch.randperm(4) orders them. One number b for a range is
 * torchvision's [max(0, 1 - b), 1 + b] (hue: [-h, h]); two are the range
 * itself; a range of only the identity (1:1, hue 0:0) is not applied, as
 * torchvision's None. With p, the whole is applied with that probability,
 * as RandomApply([ColorJitter(...)], p) (SimCLR's 0.8). */
#include <stdio.h>

#include "functional.h"

enum { BRIGHTNESS, CONTRAST, SATURATION, HUE, P, NPARAMS };
enum { NADJUST = P }; /* the four adjustments */

static const op_param params[NPARAMS] = {
    [BRIGHTNESS] = {"brightness", OP_RANGE, "0", 0, 100, 0, NULL,
                    "b: the factor from [max(0, 1 - b), 1 + b]; or lo:hi"},
    [CONTRAST] = {"contrast", OP_RANGE, "0", 0, 100, 0, NULL,
                  "c: the factor from [max(0, 1 - c), 1 + c]; or lo:hi"},
    [SATURATION] = {"saturation", OP_RANGE, "0", 0, 100, 0, NULL,
                    "s: the factor from [max(0, 1 - s), 1 + s]; or lo:hi"},
    [HUE] = {"hue", OP_RANGE, "0", -0.5, 0.5, 0, NULL,
             "h in [0, 0.5]: the factor from [-h, h]; or lo:hi"},
    [P] = {"p", OP_NUMBER, NULL, 0, 1, 0, NULL,
           "RandomApply's probability; not given: always (drawn only when "
           "given)"},
};

/* The words of describe, in fn_idx's numbering. */
static const char *const names[NADJUST] = {"brightness", "contrast",
                                           "saturation", "hue"};

typedef struct drawn {
    float factor[NADJUST]; /* in fn_idx's numbering */
    uint8_t order[NADJUST];
    int32_t on; /* bit k: adjustment k runs; 0: RandomApply's coin said no */
    int32_t applied; /* that coin (1 without a p) */
} drawn;

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    (void)s;
    for (int k = 0; k < NADJUST; k++) {
        op_value *v = &op->arg[k];
        if (v->n != 1)
            continue; /* lo:hi as written */
        const double x = v->v[0];
        if (k == HUE && x < 0) {
            snprintf(why, cap,
                     "hue=%g: one number is h for [-h, h], in [0, 0.5]; a "
                     "range is lo:hi",
                     x);
            return PL_EINVAL;
        }
        /* Written out as the range it means, so that the canonical spec
         * reads back the same. */
        v->v[0] = k == HUE ? (x > 0 ? -x : 0.0) : (x < 1 ? 1 - x : 0.0);
        v->v[1] = k == HUE ? x : 1 + x;
        v->n = 2;
    }
    return 0;
}

/* Whether adjustment k changes anything: torchvision's None is a range of
 * the identity alone. */
static int is_on(const op_instance *op, int k)
{
    const double id = k == HUE ? 0.0 : 1.0;
    return !(op->arg[k].v[0] == id && op->arg[k].v[1] == id);
}

static void draw(const op_instance *op, philox_stream *rng, int w, int h,
                 void *out)
{
    (void)w;
    (void)h;
    drawn *d = out;
    /* A uniform permutation (Fisher-Yates), as torch.randperm's is. */
    for (int k = 0; k < NADJUST; k++)
        d->order[k] = (uint8_t)k;
    /* RandomApply's coin first, where a p is given (an op without one
     * draws as it always has). */
    d->on = 0;
    d->applied = op_apply_coin(op, P, rng);
    if (!d->applied)
        return;
    for (int k = NADJUST - 1; k > 0; k--) {
        const int j = (int)philox_next_below(rng, (uint32_t)k + 1);
        const uint8_t t = d->order[k];
        d->order[k] = d->order[j];
        d->order[j] = t;
    }
    /* Every factor is drawn, applied or not, so each keeps its place in
     * the stream whatever the others' ranges. */
    d->on = 0;
    for (int k = 0; k < NADJUST; k++) {
        const double lo = op->arg[k].v[0], hi = op->arg[k].v[1];
        d->factor[k] = (float)(lo + (hi - lo) * philox_next_double(rng));
        d->on |= is_on(op, k) << k;
    }
}

static int apply(const op_instance *op, const void *in, op_image *img)
{
    (void)op;
    const drawn *d = in;
    for (int i = 0; i < NADJUST; i++) {
        const int k = d->order[i];
        if (!(d->on >> k & 1))
            continue;
        const float f = d->factor[k];
        switch (k) {
        case BRIGHTNESS:
            fn_adjust_brightness(img, f);
            break;
        case CONTRAST:
            fn_adjust_contrast(img, f);
            break;
        case SATURATION:
            fn_adjust_saturation(img, f);
            break;
        default:
            fn_adjust_hue(img, f);
            break;
        }
    }
    return 0;
}

/* "order=2013,brightness=1.0312,hue=-0.0421": the order as fn_idx's digits
 * (0 brightness, 1 contrast, 2 saturation, 3 hue), then the factors of
 * the adjustments that run, as float32 values written exactly. */
static int describe(const op_instance *op, const void *in, char *buf,
                    size_t cap)
{
    const drawn *d = in;
    if (op->arg[P].n && !d->applied)
        return snprintf(buf, cap, "apply=0");
    size_t len = 0;
#define AT_ (len < cap ? buf + len : NULL), (len < cap ? cap - len : 0)
    if (op->arg[P].n)
        len += (size_t)snprintf(AT_, "apply=1,");
    len += (size_t)snprintf(AT_, "order=%d%d%d%d", d->order[0], d->order[1],
                            d->order[2], d->order[3]);
    for (int k = 0; k < NADJUST; k++)
        if (d->on >> k & 1)
            len += (size_t)snprintf(AT_, ",%s=%.9g", names[k],
                                    (double)d->factor[k]);
#undef AT_
    return (int)len;
}

const op_kind op_color_jitter = {
    .name = "color_jitter",
    .alias = NULL,
    .stage = OP_STAGE_PIXELS,
    .doc = "brightness, contrast, saturation and hue by random factors, in a "
           "random order: ColorJitter(brightness, contrast, saturation, hue)",
    .params = params,
    .nparams = NPARAMS,
    .drawn_size = sizeof(drawn),
    .setup = setup,
    .draw = draw,
    .apply = apply,
    .describe = describe,
};
