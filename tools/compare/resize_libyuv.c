/* Measurement behind docs/BENCHMARKS.md's choice of resampler (not part of
 * the library): libyuv against pinload's resampler: the photo-eval shape
 * (640x427 decoded at 1/2, scaled to 384x256, centre 224x224) and a train crop
 * (350x260 to 224x224). Speed per image, and fidelity (PSNR, max error) against
 * an exact double-precision Pillow-antialias reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libyuv/scale_argb.h>
#include <libyuv/convert_argb.h>
#include <libyuv/convert_from_argb.h>
#include "../../workers/resample.h"
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static double tri(double x)
{
    x = fabs(x);
    return x < 1 ? 1 - x : 0;
}
/* exact reference: separable doubles, no intermediate rounding */
static void ref(const uint8_t *src, int sw, int sh, int rw, int rh, int ox,
                int oy, int ow, int oh, double *out)
{
    double sx = (double)sw / rw, sy = (double)sh / rh, fx = sx > 1 ? sx : 1,
           fy = sy > 1 ? sy : 1;
    double *tmp = calloc((size_t)sh * ow * 3, sizeof(double));
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < ow; x++) {
            double c = (ox + x + 0.5) * sx, s = 0, a[3] = {0};
            for (int j = 0; j < sw; j++) {
                double w = tri((j + 0.5 - c) / fx);
                if (w <= 0)
                    continue;
                s += w;
                for (int k = 0; k < 3; k++)
                    a[k] += w * src[((size_t)y * sw + j) * 3 + k];
            }
            for (int k = 0; k < 3; k++)
                tmp[((size_t)y * ow + x) * 3 + k] = a[k] / s;
        }
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            double c = (oy + y + 0.5) * sy, s = 0, a[3] = {0};
            for (int j = 0; j < sh; j++) {
                double w = tri((j + 0.5 - c) / fy);
                if (w <= 0)
                    continue;
                s += w;
                for (int k = 0; k < 3; k++)
                    a[k] += w * tmp[((size_t)j * ow + x) * 3 + k];
            }
            for (int k = 0; k < 3; k++)
                out[((size_t)y * ow + x) * 3 + k] = a[k] / s;
        }
    free(tmp);
}
static void fidelity(const char *what, const uint8_t *got, const double *want,
                     size_t n)
{
    double se = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = got[i] - want[i];
        se += d * d;
        if (fabs(d) > mx)
            mx = fabs(d);
    }
    printf("  %-26s PSNR %5.1f dB, max error %4.1f\n", what,
           10 * log10(255.0 * 255 / (se / n)), mx);
}
int main(void)
{
    struct {
        int sw, sh, rw, rh, ox, oy;
        const char *what;
    } k[] = {{640, 427, 384, 256, 80, 16, "photo eval at 1/2"},
             {350, 260, 224, 224, 0, 0, "generated train crop"}};
    for (int c = 0; c < 2; c++) {
        int sw = k[c].sw, sh = k[c].sh, ow = 224, oh = 224;
        size_t n = (size_t)ow * oh * 3;
        uint8_t *src = malloc((size_t)sw * sh * 3); /* a photo-like texture */
        for (int y = 0; y < sh; y++)
            for (int x = 0; x < sw; x++)
                for (int j = 0; j < 3; j++)
                    src[((size_t)y * sw + x) * 3 + j] =
                        (uint8_t)(128 + 60 * sin(x * 0.11 + j) +
                                  40 * cos(y * 0.07 * (j + 1)) +
                                  (((x * 7 + y * 13) * 2654435761u) >> 29));
        double *want = malloc(n * sizeof(double));
        ref(src, sw, sh, k[c].rw, k[c].rh, k[c].ox, k[c].oy, ow, oh, want);
        printf("%s (%dx%d -> %dx%d, window %dx%d)\n", k[c].what, sw, sh,
               k[c].rw, k[c].rh, ow, oh);
        /* pinload */
        uint8_t *out = malloc(n);
        resample_axis h = {0}, v = {0};
        int16_t *vrow = calloc(sw * 3 + 64, 2);
        int reps = 200;
        double t0 = now();
        for (int r = 0; r < reps; r++) {
            resample_axis_plan(&h, 0, sw, 0, sw, k[c].rw, k[c].ox, ow);
            resample_axis_plan(&v, 0, sh, 0, sh, k[c].rh, k[c].oy, oh);
            for (int y = 0; y < oh; y++) {
                resample_v(&v, src + (size_t)v.lo * sw * 3, (size_t)sw * 3, y,
                           h.lo * 3, h.hi * 3, vrow);
                resample_h(&h, vrow, 0, out + (size_t)y * ow * 3);
            }
        }
        printf("  pinload fixed point        %6.1f us\n",
               (now() - t0) / reps * 1e6);
        fidelity("pinload", out, want, n);
        /* libyuv: RGB24 -> ARGB, ARGBScale to rw x rh (box / bilinear), crop
         * window, ARGB -> RGB24 */
        uint8_t *argb = malloc((size_t)sw * sh * 4),
                *sc = malloc((size_t)k[c].rw * k[c].rh * 4), *o = malloc(n);
        enum FilterMode modes[2] = {kFilterBox, kFilterBilinear};
        const char *names[2] = {"libyuv box", "libyuv bilinear"};
        for (int m = 0; m < 2; m++) {
            t0 = now();
            for (int r = 0; r < reps; r++) {
                RGB24ToARGB(src, sw * 3, argb, sw * 4, sw, sh);
                ARGBScale(argb, sw * 4, sw, sh, sc, k[c].rw * 4, k[c].rw,
                          k[c].rh, modes[m]);
                ARGBToRGB24(sc + ((size_t)k[c].oy * k[c].rw + k[c].ox) * 4,
                            k[c].rw * 4, o, ow * 3, ow, oh);
            }
            printf("  %-26s %6.1f us (incl. RGB<->ARGB)\n", names[m],
                   (now() - t0) / reps * 1e6);
            /* libyuv's RGB24 is BGR in memory: compare channels swapped */
            fidelity(names[m], o, want, n);
        }
    }
}
