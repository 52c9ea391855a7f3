/* What the augmentation policies share (rand_augment.c,
 * trivial_augment.c, auto_augment.c): torchvision's _AutoAugmentBase. A
 * policy picks transforms from its augmentation space, each with a
 * magnitude from that space's bins, and applies them to the uint8 image
 * one after another, as torchvision.transforms.v2's
 * _apply_image_or_video_transform does: ShearX is F.affine with shear
 * [degrees(atan(m)), 0] about the top-left corner, TranslateX F.affine
 * with translate [int(m), 0], Rotate F.rotate(m), Brightness
 * F.adjust_brightness(1 + m), Color F.adjust_saturation(1 + m), Contrast
 * and Sharpness alike, Posterize F.posterize(int(m)), Solarize
 * F.solarize(255 * m), and AutoContrast, Equalize, Invert and Identity
 * take none.
 *
 * A space lists, per transform, how its magnitudes are binned (the
 * lambdas of torchvision's _AUGMENTATION_SPACE) and whether a draw may
 * negate one; policy_magnitude computes bin i of n as torchvision's
 * float32 tensors hold it (torch.linspace: each value one fused multiply-
 * add from the nearer end; Posterize's round(8 - i / ((n - 1) / d))), so
 * that the same bin gives the same number to the last bit.
 *
 * Thread safety: the spaces are constant; policy_apply writes only the
 * image and its scratch. */
#ifndef PINLOAD_OP_POLICY_H
#define PINLOAD_OP_POLICY_H

#include "op.h"

/* The transforms, listed once: the word a description writes
 * ("op0=shear_x") and torchvision's name. */
#define POLICY_OP_MAP(XX)                                                      \
    XX(IDENTITY, "identity", "Identity")                                       \
    XX(SHEAR_X, "shear_x", "ShearX")                                           \
    XX(SHEAR_Y, "shear_y", "ShearY")                                           \
    XX(TRANSLATE_X, "translate_x", "TranslateX")                               \
    XX(TRANSLATE_Y, "translate_y", "TranslateY")                               \
    XX(ROTATE, "rotate", "Rotate")                                             \
    XX(BRIGHTNESS, "brightness", "Brightness")                                 \
    XX(COLOR, "color", "Color")                                                \
    XX(CONTRAST, "contrast", "Contrast")                                       \
    XX(SHARPNESS, "sharpness", "Sharpness")                                    \
    XX(POSTERIZE, "posterize", "Posterize")                                    \
    XX(SOLARIZE, "solarize", "Solarize")                                       \
    XX(AUTOCONTRAST, "autocontrast", "AutoContrast")                           \
    XX(EQUALIZE, "equalize", "Equalize")                                       \
    XX(INVERT, "invert", "Invert")

typedef enum policy_op {
#define POLICY_OP_ENUM_(name, word, tv) POLICY_##name,
    POLICY_OP_MAP(POLICY_OP_ENUM_)
#undef POLICY_OP_ENUM_
        POLICY_NOPS
} policy_op;

/* The words of POLICY_OP_MAP, in order. */
extern const char *const policy_op_words[POLICY_NOPS];

/* How a transform's magnitudes are binned, n bins:
 *   POLICY_BINS_NONE       none: its magnitude is 0
 *   POLICY_BINS_LINEAR     linspace(0, end, n)
 *   POLICY_BINS_WIDTH      linspace(0, end * the image's width, n)
 *   POLICY_BINS_HEIGHT     linspace(0, end * its height, n)
 *   POLICY_BINS_POSTERIZE  round(8 - arange(n) / ((n - 1) / end)), bits
 *   POLICY_BINS_SOLARIZE   linspace(1, 0, n): a fraction of 255 */
typedef enum policy_bins {
    POLICY_BINS_NONE,
    POLICY_BINS_LINEAR,
    POLICY_BINS_WIDTH,
    POLICY_BINS_HEIGHT,
    POLICY_BINS_POSTERIZE,
    POLICY_BINS_SOLARIZE,
} policy_bins;

/* One transform of a space: which, its bins (end as they say), and
 * whether a draw negates its magnitude half the time (torch.rand(()) <=
 * 0.5). */
typedef struct policy_entry {
    uint8_t op;   /* a policy_op */
    uint8_t bins; /* a policy_bins */
    uint8_t sign;
    double end;
} policy_entry;

/* Bin i (0 <= i < n, n >= 2) of e's magnitudes on a w x h image, the
 * float32 value torchvision's tensor holds (before any sign). */
float policy_magnitude(const policy_entry *e, int n, int i, int w, int h);

/* e's magnitude for bin i, negated when e is signed and the coin says
 * so: the coin is drawn from rng only for a signed transform with bins,
 * as torchvision draws it. */
float policy_draw_magnitude(const policy_entry *e, int n, int i, int w, int h,
                            philox_stream *rng);

/* Apply transform op with magnitude m to img: interp OP_INTERP_NEAREST or
 * OP_INTERP_BILINEAR for the warps, fill NULL (torchvision's fill=None)
 * or R, G, B. 0, or PL_ENOMEM (a warp's or sharpness's scratch). */
int policy_apply(op_image *img, int op, double m, int interp,
                 const float *fill);

/* The parameters every policy ends with (interpolation, fill), their
 * rows for a kind's table, and what apply makes of them. */
#define POLICY_INTERP_PARAM                                                    \
    {                                                                          \
        "interpolation", OP_WORD, "nearest", 0, 1, 0, op_warp_words,           \
            "nearest or bilinear, for the shears, translations and rotations"  \
    }
#define POLICY_FILL_PARAM                                                      \
    {                                                                          \
        "fill", OP_TRIPLE, NULL, 0, 255, 0, NULL,                              \
            "R:G:B where a warp's source is outside the image; not given: "    \
            "zeros, torchvision's fill=None"                                   \
    }
/* The n transforms ops[] with magnitudes m[] applied in turn by a policy
 * op, with its interpolation and fill (a policy's last two parameters,
 * POLICY_INTERP_PARAM and POLICY_FILL_PARAM). 0 or PL_ENOMEM. */
int policy_apply_all(const op_instance *op, op_image *img, const uint8_t *ops,
                     const float *m, int n);

/* The drawn transforms as "op0=shear_x,m0=-0.3,op1=..." (snprintf's
 * return): n of them, each magnitude to float32's 9 digits. */
int policy_describe(char *buf, size_t cap, const uint8_t *ops, const float *m,
                    int n);

#endif
