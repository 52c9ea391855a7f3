#define _DEFAULT_SOURCE
#include "bench_baseline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <turbojpeg.h>

#include "pinload.h"

typedef struct blob {
    unsigned char *data;
    unsigned long len;
} blob;

struct baseline_files {
    blob *v;
    size_t n;
    size_t left_out; /* files TurboJPEG cannot decode to RGB */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int read_file(const char *path, blob *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b->data = n > 0 ? malloc((size_t)n) : NULL;
    b->len = (unsigned long)(n > 0 ? n : 0);
    const int ok = b->data && fread(b->data, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    return ok ? 0 : -1;
}

static void quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

baseline_files *baseline_load(const char *data)
{
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = data;
    cfg.device = PL_DEVICE_HOST;
    cfg.num_workers = 1;
    cfg.prefetch = 1;
    cfg.batch_size = 1;
    cfg.log = quiet;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) < 0) {
        fprintf(stderr, "pinload-bench: %s\n", pl_last_error());
        return NULL;
    }
    pl_info info;
    pl_loader_info(l, &info);
    baseline_files *f = calloc(1, sizeof *f);
    tjhandle tj = tjInitDecompress();
    if (f)
        f->v = calloc((size_t)info.dataset_size, sizeof *f->v);
    if (!f || !f->v || !tj) {
        fprintf(stderr,
                "pinload-bench: baseline: out of memory for %lld "
                "files\n",
                (long long)info.dataset_size);
        if (tj)
            tjDestroy(tj);
        free(f);
        pl_loader_destroy(l);
        return NULL;
    }
    for (int64_t i = 0; i < info.dataset_size; i++) {
        const char *path;
        pl_loader_sample(l, i, &path, NULL);
        blob *b = &f->v[f->n];
        int w, h, sub, cs;
        /* What TurboJPEG cannot decode to RGB (CMYK, 4:1:0 and other
         * subsamplings it cannot name, broken files) is left out, so the
         * rate counts only work it did. */
        if (read_file(path, b) == 0 &&
            tjDecompressHeader3(tj, b->data, b->len, &w, &h, &sub, &cs) == 0 &&
            cs != TJCS_CMYK && cs != TJCS_YCCK) {
            f->n++;
        } else {
            free(b->data);
            f->left_out++;
        }
    }
    tjDestroy(tj);
    pl_loader_destroy(l);
    return f;
}

void baseline_free(baseline_files *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].data);
    free(f->v);
    free(f);
}

size_t baseline_count(const baseline_files *f)
{
    return f->n;
}

size_t baseline_left_out(const baseline_files *f)
{
    return f->left_out;
}

typedef struct job {
    const baseline_files *f;
    int first, step, denom;
    double end;
    long done, skipped;
} job;

static void *decode_loop(void *arg)
{
    job *j = arg;
    tjhandle tj = tjInitDecompress();
    unsigned char *rgb = NULL;
    size_t cap = 0;
    for (size_t i = (size_t)j->first; now_s() < j->end;
         i = (i + (size_t)j->step) % j->f->n) {
        const blob *b = &j->f->v[i];
        int w, h, sub, cs;
        if (tjDecompressHeader3(tj, b->data, b->len, &w, &h, &sub, &cs) < 0) {
            j->skipped++;
            continue;
        }
        const tjscalingfactor sf = {1, j->denom};
        w = TJSCALED(w, sf);
        h = TJSCALED(h, sf);
        const size_t need = (size_t)w * (size_t)h * 3;
        if (need > cap) {
            free(rgb);
            rgb = malloc(need);
            cap = rgb ? need : 0;
        }
        if (!rgb) {
            j->skipped++;
            continue;
        }
        /* A warning (corrupt data) still decoded the image: it counts. */
        if (tjDecompress2(tj, b->data, b->len, rgb, w, 0, h, TJPF_RGB, 0) < 0 &&
            tjGetErrorCode(tj) != TJERR_WARNING)
            j->skipped++;
        else
            j->done++;
    }
    free(rgb);
    tjDestroy(tj);
    return NULL;
}

double baseline_rate(const baseline_files *f, int threads, int scale_denom,
                     double seconds, size_t *skipped)
{
    if (!f || f->n == 0 || threads < 1)
        return 0.0;
    job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    if (!jobs || !t) {
        free(jobs);
        free(t);
        return 0.0;
    }
    const double start = now_s();
    int started = 0;
    for (int i = 0; i < threads; i++) {
        jobs[i] = (job){.f = f,
                        .first = i % (int)f->n,
                        .step = threads,
                        .denom = scale_denom,
                        .end = start + seconds};
        if (pthread_create(&t[i], NULL, decode_loop, &jobs[i]) != 0)
            break; /* measured with the threads that started */
        started++;
    }
    long done = 0, bad = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        done += jobs[i].done;
        bad += jobs[i].skipped;
    }
    const double elapsed = now_s() - start;
    free(jobs);
    free(t);
    if (skipped)
        *skipped = (size_t)bad;
    return done / elapsed;
}
