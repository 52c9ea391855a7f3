#include "resample.h"

#include <math.h>
#include <stdlib.h>

#include "pinload.h"

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

static int reserve(resample_axis *a, int out_n, int taps)
{
    const size_t need_w = (size_t)out_n * (size_t)taps;
    if ((size_t)out_n > a->cap_out) {
        int *f = realloc(a->first, (size_t)out_n * sizeof *f);
        if (!f)
            return PL_ENOMEM;
        a->first = f;
        int *c = realloc(a->count, (size_t)out_n * sizeof *c);
        if (!c)
            return PL_ENOMEM;
        a->count = c;
        a->cap_out = (size_t)out_n;
    }
    if (need_w > a->cap_w) {
        float *w = realloc(a->w, need_w * sizeof *w);
        if (!w)
            return PL_ENOMEM;
        a->w = w;
        a->cap_w = need_w;
    }
    return 0;
}

/* The weights are Pillow's: output pixel x of the scaled interval is
 * centred on source coordinate (x + 0.5) * scale and reads the source
 * pixels whose centres fall within `support` of it. */
int resample_axis_plan(resample_axis *a, int in_n, int rs_n, int off, int out_n)
{
    const double scale = (double)in_n / rs_n;
    const double filterscale = scale > 1.0 ? scale : 1.0;
    const double support = filterscale; /* triangle radius 1, widened */
    const int taps = (int)ceil(support) * 2 + 1;
    if (reserve(a, out_n, taps) < 0)
        return PL_ENOMEM;
    a->out_n = out_n;
    a->taps = taps;
    a->lo = in_n;
    a->hi = 0;
    for (int i = 0; i < out_n; i++) {
        const double center = (off + i + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        int xmax = (int)(center + support + 0.5);
        if (xmin < 0)
            xmin = 0;
        if (xmax > in_n)
            xmax = in_n;
        int n = xmax - xmin;
        if (n > taps)
            n = taps;
        float *w = a->w + (size_t)i * taps;
        double sum = 0.0;
        double tmp[64];
        double *ws = n <= 64 ? tmp : NULL;
        /* Wide kernels (shrinking by more than 31x) are normalised in a
         * second pass over the floats instead of the double buffer. */
        for (int k = 0; k < n; k++) {
            const double v = triangle((k + xmin - center + 0.5) / filterscale);
            sum += v;
            if (ws)
                ws[k] = v;
            else
                w[k] = (float)v;
        }
        for (int k = 0; k < n; k++) {
            const double v = ws ? ws[k] : (double)w[k];
            w[k] = sum > 0.0 ? (float)(v / sum) : 0.0f;
        }
        a->first[i] = xmin;
        a->count[i] = n;
        if (xmin < a->lo)
            a->lo = xmin;
        if (xmin + n > a->hi)
            a->hi = xmin + n;
    }
    return 0;
}

void resample_axis_free(resample_axis *a)
{
    free(a->first);
    free(a->count);
    free(a->w);
    *a = (resample_axis){0};
}

void resample_row_h(const resample_axis *h, const uint8_t *src, float *dst)
{
    for (int i = 0; i < h->out_n; i++) {
        const uint8_t *s = src + (size_t)h->first[i] * 3;
        const float *w = h->w + (size_t)i * h->taps;
        float r = 0.0f, g = 0.0f, b = 0.0f;
        for (int k = 0; k < h->count[i]; k++, s += 3) {
            r += w[k] * s[0];
            g += w[k] * s[1];
            b += w[k] * s[2];
        }
        dst[0] = r;
        dst[1] = g;
        dst[2] = b;
        dst += 3;
    }
}

static uint8_t to_u8(float v)
{
    v += 0.5f;
    if (v <= 0.0f)
        return 0;
    if (v >= 255.0f)
        return 255;
    return (uint8_t)v;
}

void resample_col_v(const resample_axis *v, const float *rows, int width,
                    int oy, uint8_t *dst)
{
    const size_t n = (size_t)width * 3;
    const float *w = v->w + (size_t)oy * v->taps;
    const float *base = rows + (size_t)(v->first[oy] - v->lo) * n;
    const int taps = v->count[oy];
    for (size_t x = 0; x < n; x++) {
        float acc = 0.0f;
        for (int k = 0; k < taps; k++)
            acc += w[k] * base[(size_t)k * n + x];
        dst[x] = to_u8(acc);
    }
}
