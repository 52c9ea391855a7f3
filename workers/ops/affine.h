/* Affine warps of the uint8 image (a pixel op's op_image), as
 * torchvision.transforms.v2.functional's affine and rotate compute them on
 * a uint8 tensor: the inverse matrix of _get_inverse_affine_matrix (in
 * double, as Python computes it), the sampling grid of _affine_grid and
 * grid_sample's unnormalising (align_corners=False) in float32, in the
 * same order of operations, then nearest (round half to even) or bilinear
 * sampling of the pixels with zeros outside, and the fill: with a fill,
 * torchvision's mask (a fourth channel of ones sampled alike) blends it
 * in, out = (v - fill) * mask + fill, rounded half to even; without one
 * (fill=None) the zeros stay. Same-size output (expand=False).
 *
 * The ops rotate (rotate.c) and affine (affine.c) draw their parameters
 * and call these; so may any op that has its own, as the policies do
 * (AutoAugment's ShearX is F.affine with shear=[degrees(atan(m)), 0] and
 * center=[0, 0]; TranslateX translate=[m, 0]; Rotate F.rotate(m)). The
 * scratch is the image's (op_image.scratch): no allocation per sample once
 * it has grown to the image's size. Thread safety: they write only the
 * image and its scratch. */
#ifndef PINLOAD_OP_AFFINE_H
#define PINLOAD_OP_AFFINE_H

#include "op.h"

/* F.affine's parameters. */
typedef struct op_affine_params {
    double angle;            /* degrees, clockwise (F.rotate's a: -a) */
    double tx, ty;           /* translation, pixels (right, down) */
    double scale;            /* above 0 */
    double shear_x, shear_y; /* degrees */
    /* The centre of rotation, scale and shear, in pixel coordinates from
     * the image's top-left corner (F.affine's center=[cx, cy]); without
     * it, the image's centre (w / 2, h / 2). */
    int has_center;
    double cx, cy;
} op_affine_params;

/* The inverse affine matrix torchvision samples with, for a w x h image:
 * m maps an output pixel's coordinates, taken from the image's centre, to
 * the source's (torchvision's _get_inverse_affine_matrix with the centre
 * from the middle). [out] m[6], row-major 2 x 3. */
void op_affine_matrix(const op_affine_params *a, int w, int h, double m[6]);

/* Warp img in place by the inverse matrix m (op_affine_matrix's
 * convention). interp: OP_INTERP_NEAREST or OP_INTERP_BILINEAR. fill:
 * NULL for torchvision's fill=None (zeros where the source is outside the
 * image, bilinear edges not blended), else R, G, B in [0, 255] (as
 * F.affine's fill=[r, g, b]: a RandomAffine's default 0 is one). 0, or
 * PL_ENOMEM (the scratch could not grow; img is unchanged). */
int op_warp_image(op_image *img, const double m[6], int interp,
                  const float *fill);

/* F.affine(img, angle, [tx, ty], scale, [shear_x, shear_y], interp, fill,
 * center) in place. 0 or PL_ENOMEM. */
int op_affine_image(op_image *img, const op_affine_params *a, int interp,
                    const float *fill);

/* F.rotate(img, angle, interp, expand=False, center, fill) in place:
 * angle in degrees, counter-clockwise; center NULL (the image's centre) or
 * x, y as op_affine_params'. Without a centre, torchvision's exact paths: 0 and
 * 180 degrees (and 90 and 270 on a square image) move pixels without
 * sampling. 0 or PL_ENOMEM. */
int op_rotate_image(op_image *img, double angle, int interp, const float *fill,
                    const double *center);

/* The words of the warps' interpolation parameter, NULL-terminated, and
 * the op_interp each is. */
extern const char *const op_warp_words[];
int op_warp_interp(const op_value *v);

/* A range parameter where one number d means -d:d, as torchvision reads
 * RandomRotation's degrees and RandomAffine's shear: made a:b in place.
 * 0, or PL_EINVAL with `why` when d alone is below 0. */
int op_symmetric_range(op_value *v, const char *name, char *why, size_t cap);

#endif
