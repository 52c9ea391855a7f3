/* The pixel ops as functions of explicit parameters, torchvision's
 * functional forms: what each op's row applies after its own draw,
 * callable by any op that chooses the parameters itself (a RandAugment or
 * TrivialAugment would apply them with the magnitudes it picks). Each is
 * torchvision.transforms.v2.functional's function of the same name on a uint8
 * tensor, computed as it computes it (its float32 steps, one by one);
 * docs/transforms.md states each one's measured bound (0 levels, the blur's 1).
 *
 * Each works on img (op.h: uint8 RGB, in place) and reads nothing else;
 * only the blur needs memory (img->scratch, grown once and kept). Thread
 * safety: as an op's apply, they write only img and its scratch. A factor
 * is a float because torchvision's samplers draw float32 values
 * (torch.empty(1).uniform_) and its kernels compute with float32: a
 * caller holding a double passes (float)x, as PyTorch would. */
#ifndef PINLOAD_FUNCTIONAL_H
#define PINLOAD_FUNCTIONAL_H

#include "op.h"

/* F.adjust_brightness(img, factor): x * factor, clamped, truncated.
 * factor >= 0, as Python holds it: the multiply is float32's, as PyTorch
 * makes it ((float)factor). */
void fn_adjust_brightness(op_image *img, double factor);

/* F.adjust_contrast(img, factor): blended with the mean of the image's
 * (floored) gray levels. factor >= 0, as Python holds it: _blend
 * multiplies by (float)factor and adds with alpha (float)(1 - factor),
 * the subtraction Python's, in double (a float32 factor's callers pass it
 * widened: the same thing). */
void fn_adjust_contrast(op_image *img, double factor);

/* F.adjust_saturation(img, factor): blended with each pixel's (floored)
 * gray level; 0 makes the image gray. factor >= 0, as contrast's. */
void fn_adjust_saturation(op_image *img, double factor);

/* F.adjust_sharpness(img, factor): blended with the image smoothed by
 * [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 (rounded to whole levels), the
 * border rows and columns kept; 0 smooths, 1 is the image, above 1
 * sharpens. factor >= 0; an image of 2 pixels or fewer either way is left
 * as it is. 0, or PL_ENOMEM (scratch; img unchanged). */
int fn_adjust_sharpness(op_image *img, double factor);

/* F.invert(img): 255 - x. */
void fn_invert(op_image *img);

/* F.adjust_hue(img, factor): the hue turned by factor of a full turn,
 * through HSV in float32. factor in [-0.5, 0.5]. */
void fn_adjust_hue(op_image *img, float factor);

/* F.gaussian_blur(img, [kx, ky], [sigma_x, sigma_y]): odd kernel sizes
 * kx, ky >= 1, sigmas > 0, the image reflected at its edges (repeatedly
 * where a kernel is wider than the image, which torchvision refuses).
 * 0, or PL_ENOMEM (scratch; img unchanged). */
int fn_gaussian_blur(op_image *img, int kx, int ky, float sigma_x,
                     float sigma_y);

/* F.solarize(img, threshold): x >= threshold (compared as float32) is
 * inverted. threshold in [0, 255]. */
void fn_solarize(op_image *img, double threshold);

/* F.posterize(img, bits): the top `bits` bits of each value kept, bits in
 * [0, 8]. */
void fn_posterize(op_image *img, int bits);

/* F.equalize(img): each channel's histogram equalised, as Pillow's
 * ImageOps.equalize steps it. */
void fn_equalize(op_image *img);

/* F.autocontrast(img): each channel stretched from its [min, max] to
 * [0, 255]. */
void fn_autocontrast(op_image *img);

/* Every value v of the image as lut[v]; each channel c's as luts[c][v]
 * (the value-wise ops: brightness, contrast, solarize, posterize,
 * equalize, autocontrast). */
void fn_table(op_image *img, const uint8_t lut[256]);
void fn_tables(op_image *img, const uint8_t luts[3][256]);

/* The gray level torchvision computes from a uint8 pixel, in float32:
 * r * 0.2989 + g * 0.587 + b * 0.114, each add fused with its multiply, as
 * PyTorch's vectorised add(alpha=) is (grayscale, saturation, contrast).
 * The products of an 8-bit integer and a float are exact in a double, and
 * so are the sums (multiples of 2^-24 below 2^9), so the one rounding to
 * float is the fused one, without libm's fmaf (slow where the CPU has no
 * FMA instruction for it). */
static inline float fn_gray_level(const uint8_t *px)
{
    float l = (float)px[0] * 0.2989f;
    l = (float)((double)px[1] * 0.587f + (double)l);
    l = (float)((double)px[2] * 0.114f + (double)l);
    return l;
}

#endif
