/* The geometric prefix of a pipeline folded into one plan (op.h's
 * op_geometry): crops before the resample move the source rectangle,
 * crops after it move the window, a crop of a mirrored image is mirrored
 * into them, and the image is resampled once. */
#include <assert.h>
#include <string.h>

#include "op.h"

void op_geometry_init(op_geometry *g, int img_w, int img_h)
{
    memset(g, 0, sizeof *g);
    g->img_w = img_w;
    g->img_h = img_h;
    g->src_w = g->rs_w = g->win_w = img_w;
    g->src_h = g->rs_h = g->win_h = img_h;
    g->interp = OP_INTERP_BILINEAR;
    g->antialias = 1;
}

void op_geometry_size(const op_geometry *g, int *w, int *h)
{
    *w = g->win_w;
    *h = g->win_h;
}

void op_geometry_crop(op_geometry *g, int top, int left, int h, int w)
{
    /* The image now is the window mirrored: its column x is the window's
     * column win_w - 1 - x. */
    if (g->hflip)
        left = g->win_w - left - w;
    if (g->vflip)
        top = g->win_h - top - h;
    if (!g->resized) {
        /* Before the resample the window is the whole source rectangle,
         * at scale 1: crop the source (as torchvision crops, then
         * resizes the crop). */
        g->src_x += left;
        g->src_y += top;
        g->src_w = g->rs_w = w;
        g->src_h = g->rs_h = h;
        g->win_x = g->win_y = 0;
    } else {
        g->win_x += left;
        g->win_y += top;
    }
    g->win_w = w;
    g->win_h = h;
}

void op_geometry_resize(op_geometry *g, int w, int h, int interp, int antialias)
{
    /* The parser lets one op of a pipeline resample (op_shape). */
    assert(!g->resized);
    g->resized = 1;
    g->rs_w = g->win_w = w;
    g->rs_h = g->win_h = h;
    g->win_x = g->win_y = 0;
    g->interp = interp;
    g->antialias = antialias;
}

void op_geometry_flip(op_geometry *g, int horizontal)
{
    if (horizontal)
        g->hflip ^= 1;
    else
        g->vflip ^= 1;
}

void op_resize_shorter(int w, int h, int s, int max_size, int *nw, int *nh)
{
    const int shorter = w <= h ? w : h, longer = w <= h ? h : w;
    /* Python's int(s * long / short): the product is exact in a double,
     * the quotient rounded once, then truncated. */
    int new_short = s, new_long = (int)((double)s * longer / shorter);
    if (max_size > 0 && new_long > max_size) {
        new_short = (int)((double)max_size * new_short / new_long);
        new_long = max_size;
    }
    new_short = new_short > 0 ? new_short : 1; /* torchvision would fail */
    *nw = w <= h ? new_short : new_long;
    *nh = w <= h ? new_long : new_short;
}
