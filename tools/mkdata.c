/* pinload-mkdata: write pinload's default dataset, an ImageFolder tree of
 * photo-like JPEGs (gradients, soft shapes, texture, noise) at ImageNet-like
 * sizes, where each class has a signature a small model can learn: its own
 * palette, shape kind and texture frequency. Deterministic for a seed.
 * Encoded with libjpeg-turbo: mostly 4:2:0 baseline, some progressive. */
#define _DEFAULT_SOURCE /* sigaction, clock_gettime */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "jpegenc.h"

#define PI 3.14159265358979323846

static const char usage[] =
    "usage: pinload-mkdata --out DIR [--classes C] [--per-class N] "
    "[--size-range MIN-MAX]\n"
    "                      [--quality Q] [--seed S] [--jobs J] [--quiet] "
    "[--version] [--help]\n"
    "Writes DIR/class_CC/img_NNNNN.jpg: C classes (default 10) of N images "
    "(default 100),\nthe longer side in [MIN, MAX] pixels (default 320-640), "
    "JPEG quality Q (default 90),\non J threads (default: one per CPU); the "
    "files are the same whatever J.\n" CLI_EXIT_CODES;

typedef struct options {
    const char *out;
    int classes, per_class, min_side, max_side, quality, jobs;
    uint64_t seed;
    int quiet;
} options;

/* ---- a small deterministic generator (splitmix64) ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next_u64(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double uniform(rng *r, double lo, double hi)
{
    return lo +
           (hi - lo) * (double)(next_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

static int below(rng *r, int n)
{
    return (int)(next_u64(r) % (uint64_t)n);
}

/* ---- the picture ---- */

typedef struct rgbf {
    double r, g, b;
} rgbf;

static rgbf hsv(double h, double s, double v)
{
    h = fmod(h, 1.0) * 6.0;
    if (h < 0)
        h += 6.0;
    const int i = (int)h;
    const double f = h - i, p = v * (1 - s), q = v * (1 - s * f),
                 t = v * (1 - s * (1 - f));
    switch (i) {
    case 0:
        return (rgbf){v, t, p};
    case 1:
        return (rgbf){q, v, p};
    case 2:
        return (rgbf){p, v, t};
    case 3:
        return (rgbf){p, q, v};
    case 4:
        return (rgbf){t, p, v};
    default:
        return (rgbf){v, p, q};
    }
}

/* What makes a class recognisable. */
typedef struct signature {
    double hue;      /* palette centre */
    int shape;       /* 0 discs, 1 boxes, 2 rings, 3 stripes */
    double texture;  /* cycles per 100 px */
    double gradient; /* background direction, radians */
} signature;

static signature class_signature(int c, int classes)
{
    return (signature){.hue = (double)c / classes,
                       .shape = c % 4,
                       .texture = 2.0 + 3.0 * ((c * 7) % 5),
                       .gradient = 0.6 * c};
}

typedef struct blob {
    double x, y, r, aspect;
    rgbf color;
} blob;

/* Coverage in [0, 1] of pixel (x, y) by blob b of the class's shape, with
 * a one-pixel soft edge so shapes are antialiased like photographed ones. */
static double coverage(const blob *b, int shape, double x, double y)
{
    const double dx = (x - b->x) / b->aspect, dy = y - b->y;
    double d; /* signed distance-like value, negative inside */
    switch (shape) {
    case 0:
        d = sqrt(dx * dx + dy * dy) - b->r;
        break;
    case 1:
        d = fmax(fabs(dx), fabs(dy)) - b->r;
        break;
    case 2:
        d = fabs(sqrt(dx * dx + dy * dy) - b->r) - b->r * 0.25;
        break;
    default: /* diagonal stripes inside a disc of radius 1.5 r */
        d = fmax(fabs(fmod(fabs(dx + dy), b->r / 2) - b->r / 4) - b->r / 10,
                 sqrt(dx * dx + dy * dy) - 1.5 * b->r);
        break;
    }
    return d <= -0.5 ? 1.0 : d >= 0.5 ? 0.0 : 0.5 - d;
}

static void paint(uint8_t *rgb, int w, int h, const signature *sig, rng *r)
{
    const double hue = sig->hue + uniform(r, -0.04, 0.04);
    const rgbf c0 = hsv(hue, uniform(r, 0.35, 0.7), uniform(r, 0.35, 0.6));
    const rgbf c1 = hsv(hue + 0.5, uniform(r, 0.2, 0.5), uniform(r, 0.6, 0.9));
    const double ang = sig->gradient + uniform(r, -0.5, 0.5);
    const double gx = cos(ang) / w, gy = sin(ang) / h;
    blob blobs[8];
    const int nb = 3 + below(r, 6);
    for (int i = 0; i < nb; i++)
        blobs[i] =
            (blob){.x = uniform(r, 0, w),
                   .y = uniform(r, 0, h),
                   .r = uniform(r, 0.06, 0.22) * (w < h ? w : h),
                   .aspect = uniform(r, 0.7, 1.4),
                   .color = hsv(hue + uniform(r, -0.08, 0.08),
                                uniform(r, 0.6, 1.0), uniform(r, 0.5, 1.0))};
    const double freq = sig->texture * 2 * PI / 100.0;
    const double phase = uniform(r, 0, 2 * PI);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double t = (x - w / 2.0) * gx + (y - h / 2.0) * gy + 0.5;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            rgbf p = {c0.r + (c1.r - c0.r) * t, c0.g + (c1.g - c0.g) * t,
                      c0.b + (c1.b - c0.b) * t};
            for (int i = 0; i < nb; i++) {
                const double a = coverage(&blobs[i], sig->shape, x, y);
                if (a > 0) {
                    p.r += (blobs[i].color.r - p.r) * a;
                    p.g += (blobs[i].color.g - p.g) * a;
                    p.b += (blobs[i].color.b - p.b) * a;
                }
            }
            const double tex = 0.06 * sin(freq * x + phase) * cos(freq * y);
            uint8_t *o = rgb + ((size_t)y * w + x) * 3;
            const double n = uniform(r, -0.025, 0.025);
            const double v[3] = {p.r + tex + n, p.g + tex + n, p.b + tex + n};
            for (int k = 0; k < 3; k++)
                o[k] = (uint8_t)(v[k] <= 0   ? 0
                                 : v[k] >= 1 ? 255
                                             : v[k] * 255 + 0.5);
        }
    }
}

/* ---- JPEG out ---- */

static int write_jpeg(const char *path, const uint8_t *rgb, int w, int h,
                      int quality, int progressive)
{
    char why[128];
    FILE *f = cli_open_file(path, 1, why, sizeof why);
    if (!f) {
        fprintf(stderr, "pinload-mkdata: %s: %s\n", path, why);
        return -1;
    }
    const jpegenc_opts o = {.quality = quality, .progressive = progressive};
    jpegenc(rgb, w, h, &o, f, NULL, NULL);
    if (ferror(f) | (fclose(f) != 0)) {
        fprintf(stderr, "pinload-mkdata: %s: %s\n", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

/* ---- command line ---- */

static int parse_int(const char *flag, const char *v, int lo, int hi)
{
    return (int)cli_long("pinload-mkdata", usage, flag, v, lo, hi);
}

static void parse(int argc, char **argv, options *o)
{
    *o = (options){.classes = 10,
                   .per_class = 100,
                   .min_side = 320,
                   .max_side = 640,
                   .quality = 90,
                   .seed = 1};
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    o->jobs = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (cli_common("pinload-mkdata", usage, f, &o->quiet))
            continue;
        static const char *const valued[] = {
            "--out",  "--classes",    "--per-class", "--quality",
            "--seed", "--size-range", "--jobs",      NULL};
        const char *v =
            cli_value("pinload-mkdata", usage, valued, argc, argv, &i);
        if (!strcmp(f, "--out")) {
            o->out = v;
        } else if (!strcmp(f, "--classes")) {
            o->classes = parse_int(f, v, 1, 1000);
        } else if (!strcmp(f, "--per-class")) {
            o->per_class = parse_int(f, v, 1, 1000000);
        } else if (!strcmp(f, "--quality")) {
            o->quality = parse_int(f, v, 1, 100);
        } else if (!strcmp(f, "--jobs")) {
            o->jobs = parse_int(f, v, 1, 256);
        } else if (!strcmp(f, "--seed")) {
            o->seed = (uint64_t)parse_int(f, v, 0, 2147483647);
        } else if (!strcmp(f, "--size-range")) {
            if (sscanf(v, "%d-%d", &o->min_side, &o->max_side) != 2 ||
                o->min_side < 8 || o->max_side < o->min_side ||
                o->max_side > 8192) {
                fprintf(stderr,
                        "pinload-mkdata: --size-range: \"%s\" is not "
                        "MIN-MAX with 8 <= MIN <= MAX <= 8192\n%s",
                        v, usage);
                exit(2);
            }
        } else {
            fprintf(stderr, "pinload-mkdata: unknown option %s\n%s", f, usage);
            exit(2);
        }
    }
    if (!o->out) {
        fprintf(stderr, "pinload-mkdata: --out is required\n%s", usage);
        exit(2);
    }
}

static int make_dir(const char *path)
{
    if (cli_mkdir_p(path) == 0)
        return 0;
    fprintf(stderr, "pinload-mkdata: %s: %s\n", path, strerror(errno));
    return -1;
}

/* The aspect ratios photographs come in, landscape and portrait. */
static const double aspects[] = {4.0 / 3, 3.0 / 4,  3.0 / 2, 2.0 / 3,
                                 1.0,     16.0 / 9, 5.0 / 4, 4.0 / 3};

/* The work shared by the writer threads: images are numbered class by
 * class, and each thread takes the next number; every image is a function
 * of (seed, class, index) alone, so the files do not depend on the
 * threads. */
typedef struct job {
    const options *o;
    const signature *sigs;
    pthread_mutex_t mu;
    long next, done, total;
    long bytes;
    int failed;
} job;

/* Image k: class k / per_class, index k % per_class. */
static int write_image(const options *o, const signature *sig, int c, int i,
                       uint8_t *rgb, long *bytes)
{
    rng r = {o->seed * 0x100000001B3ull ^ ((uint64_t)c << 40) ^ (uint64_t)i};
    next_u64(&r);
    const int side = o->min_side + below(&r, o->max_side - o->min_side + 1);
    const double a = aspects[below(&r, 8)];
    int w = a >= 1 ? side : (int)lround(side * a);
    int h = a >= 1 ? (int)lround(side / a) : side;
    w = w < 8 ? 8 : w;
    h = h < 8 ? 8 : h;
    const int progressive = below(&r, 4) == 0;
    paint(rgb, w, h, sig, &r);
    char path[8192];
    snprintf(path, sizeof path, "%s/class_%02d/img_%05d.jpg", o->out, c, i);
    if (write_jpeg(path, rgb, w, h, o->quality, progressive) < 0)
        return -1;
    struct stat st;
    *bytes = stat(path, &st) == 0 ? (long)st.st_size : 0;
    return 0;
}

static void *writer(void *arg)
{
    job *j = arg;
    const options *o = j->o;
    uint8_t *rgb = malloc((size_t)o->max_side * o->max_side * 3);
    pthread_mutex_lock(&j->mu);
    if (!rgb) {
        fprintf(stderr, "pinload-mkdata: out of memory\n");
        j->failed = 1;
    }
    /* A signal stops the taking of new images: every file is whole. */
    while (!j->failed && !cli_signal && j->next < j->total) {
        const long k = j->next++;
        pthread_mutex_unlock(&j->mu);
        const int c = (int)(k / o->per_class), i = (int)(k % o->per_class);
        long bytes = 0;
        const int rc = write_image(o, &j->sigs[c], c, i, rgb, &bytes);
        pthread_mutex_lock(&j->mu);
        if (rc < 0) {
            j->failed = 1;
            break;
        }
        j->bytes += bytes;
        j->done++;
        cli_progress("pinload-mkdata", o->quiet, j->done, j->total,
                     "files written");
    }
    pthread_mutex_unlock(&j->mu);
    free(rgb);
    return NULL;
}

int main(int argc, char **argv)
{
    options o;
    parse(argc, argv, &o);
    cli_catch_signals("pinload-mkdata");
    if (make_dir(o.out) < 0)
        return 1;
    signature *sigs = calloc((size_t)o.classes, sizeof *sigs);
    if (!sigs)
        return 1;
    for (int c = 0; c < o.classes; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/class_%02d", o.out, c);
        if (make_dir(dir) < 0)
            return 1;
        sigs[c] = class_signature(c, o.classes);
    }
    job j = {.o = &o,
             .sigs = sigs,
             .mu = PTHREAD_MUTEX_INITIALIZER,
             .total = (long)o.classes * o.per_class};
    const int n = o.jobs < j.total ? o.jobs : (int)j.total;
    cli_graceful = 1; /* a signal now stops after the images in hand */
    pthread_t *t = calloc((size_t)n, sizeof *t);
    int started = 0;
    while (t && started < n &&
           pthread_create(&t[started], NULL, writer, &j) == 0)
        started++;
    if (started == 0)
        writer(&j); /* no thread could start: this one writes them all */
    for (int k = 0; k < started; k++)
        pthread_join(t[k], NULL);
    free(t);
    free(sigs);
    if (j.failed)
        return 1;
    if (cli_signal) {
        cli_progress("pinload-mkdata", o.quiet, 1, 1, "");
        fprintf(stderr,
                "pinload-mkdata: stopped by signal %d after %ld files\n",
                (int)cli_signal, j.done);
        return 128 + cli_signal;
    }
    printf("pinload-mkdata: wrote %d images in %d classes to %s (%.1f MB)\n",
           o.classes * o.per_class, o.classes, o.out, j.bytes / 1e6);
    return 0;
}
