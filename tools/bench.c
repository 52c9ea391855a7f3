/* pinload-bench: how fast does pinload feed a GPU here? Sweeps pinned
 * memory, num_workers and prefetch depth, one loader at a time, each
 * combination once a round over --rounds interleaved rounds, and prints
 * one row per combination, each figure its median over the rounds:
 * throughput (with its lowest and highest round), the time the consumer
 * waited, and the loader's own split of time by stage, so the bottleneck
 * shows; then which row is fastest where the spread allows saying so, and
 * the settings to paste. Uses only the public API (plus CUDA for the
 * simulated training step). */
#define _DEFAULT_SOURCE /* gethostname */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_baseline.h"
#include "bench_cuda.h"
#include "bench.h"
#include "bench_rounds.h"
#include "cli.h"
#include "pinload.h"

/* ---- one combination ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The host stand-in for a training step: read the batch, then spin until
 * `ms` have passed. */
static void host_step(const pl_batch *b, double ms)
{
    const double end = now_s() + ms * 1e-3;
    volatile unsigned sink = 0;
    const uint8_t *p = b->data;
    for (size_t i = 0; i < b->bytes; i += 64)
        sink += p[i];
    while (now_s() < end) {
    }
    (void)sink;
}

typedef struct bench_log {
    char backend[256];
    int cuda;
    char last[512]; /* the last notice, so repeats are shown once */
    int problems_seen;
    char *problems; /* the first loader's problem files, printed at the end */
    size_t problems_len;
} bench_log;

/* The library's per-loader backend notice would repeat for every
 * combination (the header names the backend once); other notices and the
 * warnings about bad files go through. */
static void on_log(void *ctx, pl_log_level level, const char *msg)
{
    bench_log *bl = ctx;
    if (level == PL_LOG_WARNING) {
        fprintf(stderr, "pinload: warning: %s\n", msg);
    } else if (strncmp(msg, "backend: ", 9) != 0 && strcmp(msg, bl->last)) {
        snprintf(bl->last, sizeof bl->last, "%s", msg);
        fprintf(stderr, "pinload: %s\n", msg);
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The progress line on a terminal: which round of how many, which row of
 * how many, the batches of this pass (of how many, or seconds of how
 * many), img/s, and the time left for the whole sweep, every round, at
 * this row's pace. */
static void progress(const options *o, const row *r, long done, long images,
                     double t0, double compute_ms)
{
    static double last;
    const double t = now_s();
    if (o->quiet || t - last < 0.2)
        return;
    last = t;
    const double el = t - t0;
    const double pass = o->seconds > 0 ? o->seconds
                        : done > 0     ? el * (double)o->batches / (double)done
                                       : 0.0;
    const int passes = o->compute_ms > 0 ? 3 : 1;
    const int rows_left =
        o->rows - o->row_at + (o->rounds - o->round_at) * o->rows;
    const double left = (pass - el) +
                        (compute_ms > 0 ? 0 : (passes - 1) * pass) +
                        (double)rows_left * passes * pass;
    char of[48];
    if (o->seconds > 0)
        snprintf(of, sizeof of, "%ld batches, %.0f of %.0f s", done, el,
                 o->seconds);
    else
        snprintf(of, sizeof of, "%ld of %ld batches", done, o->batches);
    const long secs = left > 0 ? (long)(left + 0.5) : 0;
    char pf[16];
    snprintf(pf, sizeof pf, "%d", r->prefetch);
    fprintf(stderr,
            "\r  round %d of %d, row %d of %d: pin %s, %d workers, "
            "prefetch %s, %s: %s, %.0f img/s, ETA %ld:%02ld   ",
            o->round_at, o->rounds, o->row_at, o->rows, pin_name(r->pin),
            r->workers, r->prefetch == PL_AUTO ? "auto" : pf,
            compute_ms > 0 ? "step" : "load", of,
            el > 0 ? (double)images / el : 0.0, secs / 60, secs % 60);
}

/* Take the next batch, counting epoch ends as nothing; -1 on error. */
static int next_batch(pl_loader *l, const pl_batch **b)
{
    int rc;
    while ((rc = pl_loader_next(l, b)) == PL_EPOCH_END) {
    }
    if (rc < 0) {
        fprintf(stderr, "\npinload-bench: %s\n", pl_last_error());
        return -1;
    }
    return 0;
}

static void consume(const options *o, bench_cuda *cu, const pl_batch *b,
                    pl_loader *l, long step)
{
    struct CUstream_st *stream = cu ? bench_cuda_stream(cu) : NULL;
    if (o->compute_ms > 0 && cu) {
        pl_batch_wait(b, stream);
        bench_cuda_step(cu, b->data, b->bytes, o->compute_ms, step);
    } else if (o->compute_ms > 0) {
        host_step(b, o->compute_ms);
    } else if (cu) {
        pl_batch_wait(b, stream);
    }
    pl_loader_release(l, b, stream);
}

/* The pipeline's own stalls a batch (pl_stats), over a pass of n. */
static void fill_row_waits(row *r, const pl_stats *s0, const pl_stats *s1,
                           long n)
{
    r->slot_wait_ms =
        n ? (double)(s1->ns_slot_wait - s0->ns_slot_wait) / 1e6 / n : 0;
    r->buffer_wait_ms =
        n ? (double)(s1->ns_buffer_wait - s0->ns_buffer_wait) / 1e6 / n : 0;
}

/* The process's CPU time so far, user and system, every thread's. */
static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) < 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Throughput, waits and the per-stage split of one measured pass. */
static void fill_row(row *r, const pl_stats *s0, const pl_stats *s1,
                     double *waits, long n)
{
    const double imgs = (double)r->images;
    r->img_s = imgs / r->seconds;
    r->mb_s = (double)(s1->bytes_copied - s0->bytes_copied) / 1e6 / r->seconds;
    const uint64_t h2d_ns = s1->ns_h2d - s0->ns_h2d;
    r->h2d_gbs =
        h2d_ns ? (double)(s1->bytes_h2d - s0->bytes_h2d) / (double)h2d_ns : 0.0;
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += waits[i];
    qsort(waits, (size_t)n, sizeof *waits, cmp_double);
    r->wait_mean_ms = n ? sum / n * 1e3 : 0;
    r->wait_p99_ms = n ? waits[(long)ceil(0.99 * n) - 1] * 1e3 : 0;
    r->us_read = (double)(s1->ns_read - s0->ns_read) / 1e3 / imgs;
    r->us_decode = (double)(s1->ns_decode - s0->ns_decode) / 1e3 / imgs;
    r->us_augment = (double)(s1->ns_augment - s0->ns_augment) / 1e3 / imgs;
    r->us_copy = (double)(s1->ns_copy - s0->ns_copy) / 1e3 / imgs;
    fill_row_waits(r, s0, s1, n);
}

/* Warm up, then take batches (with `compute_ms` of simulated training per
 * batch) for --batches or --seconds. [out] *seconds, *batches, *images;
 * the stats before and after, and the waits, for fill_row. */
typedef struct pass {
    double seconds;
    long batches, images;
    pl_stats s0, s1;
    double cpu_s; /* the process's CPU time (getrusage) over the pass */
    double *waits;
    double *launched; /* each step's launch, host clock (s), with a GPU */
} pass;

static int measure(const options *o, bench_cuda *cu, pl_loader *l,
                   double compute_ms, row *r, pass *ps)
{
    options oc = *o;
    oc.compute_ms = compute_ms;
    const pl_batch *b;
    for (int i = 0; i < o->warmup; i++) {
        if (next_batch(l, &b) < 0)
            return -1;
        consume(&oc, cu, b, l, -1);
    }
    if (cu)
        bench_cuda_sync(cu);
    const long cap = o->seconds > 0 ? 1 << 20 : o->batches;
    ps->waits = malloc((size_t)cap * sizeof *ps->waits);
    ps->launched = malloc((size_t)cap * sizeof *ps->launched);
    if (!ps->waits || !ps->launched)
        return -1;
    pl_loader_stats(l, &ps->s0);
    const double cpu0 = cpu_seconds();
    const double t0 = now_s();
    long n = 0, images = 0;
    while (n < cap && !cli_signal &&
           (o->seconds <= 0 || now_s() - t0 < o->seconds)) {
        const double w0 = now_s();
        if (next_batch(l, &b) < 0)
            return -1;
        ps->launched[n] = now_s();
        ps->waits[n] = ps->launched[n] - w0;
        images += b->count;
        consume(&oc, cu, b, l, n);
        n++;
        progress(o, r, n, images, t0, compute_ms);
    }
    if (cu)
        bench_cuda_sync(cu);
    ps->seconds = now_s() - t0;
    ps->cpu_s = cpu_seconds() - cpu0;
    ps->batches = n;
    ps->images = images;
    pl_loader_stats(l, &ps->s1);
    if (r->auto_workers)
        r->workers = (int)ps->s1.workers_active;
    r->prefetch_used = (int)ps->s1.prefetch_active;
    return 0;
}

/* Where the GPU waited between steps of the compute pass: each step's
 * span on the device's clock (the step kernel's block 0) against its
 * launch on the host's. The device clock is related to the host's by the
 * smallest (start - launch) over the steps: a step starts no earlier than
 * its launch, and right after it when the GPU is idle (the first step of
 * a pass, at least). A gap before step i is "late" as far as step i was
 * launched after step i - 1 had ended (the caller had no batch yet); the
 * rest of the gap the launched step waited on the device (for its batch's
 * copy). With --timeline, one line per step, every round's. */
static void step_gaps(const options *o, bench_cuda *cu, const pass *pc, row *r)
{
    r->gpu_idle_ms = r->late_ms = -1;
    long n = pc->batches < BENCH_STEPS_MAX ? pc->batches : BENCH_STEPS_MAX;
    if (!cu || n < 2)
        return;
    unsigned long long *ns = malloc(2 * sizeof *ns * (size_t)n);
    if (!ns || bench_cuda_times(cu, ns, n) != n) {
        free(ns);
        return;
    }
    double off = INFINITY;
    for (long i = 0; i < n; i++)
        off = fmin(off, (double)ns[2 * i] * 1e-9 - pc->launched[i]);
    const double base = (double)ns[0] * 1e-9;
    double idle = 0, late = 0;
    for (long i = 1; i < n; i++) {
        const double end = (double)ns[2 * i - 1] * 1e-9;
        const double start = (double)ns[2 * i] * 1e-9;
        const double launch = pc->launched[i] + off;
        const double gap = start > end ? start - end : 0;
        double lt = launch - end;
        lt = lt < 0 ? 0 : lt > gap ? gap : lt;
        idle += gap;
        late += lt;
        if (o->timeline)
            fprintf(o->timeline, "%d,%s,%d,%d,%ld,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                    o->round_at, pin_name(r->pin), r->workers,
                    r->prefetch == PL_AUTO ? -1 : r->prefetch, i,
                    (launch - base) * 1e3, (start - base) * 1e3,
                    ((double)ns[2 * i + 1] * 1e-9 - base) * 1e3, gap * 1e3,
                    lt * 1e3);
    }
    free(ns);
    r->gpu_idle_ms = idle / (double)(n - 1) * 1e3;
    r->late_ms = late / (double)(n - 1) * 1e3;
}

/* The problem files the first loader met (every bad file, and every file
 * decoded despite libjpeg warnings), kept to be printed at the end; every
 * combination reads the same files. */
static void keep_problems(pl_loader *l, bench_log *bl)
{
    if (bl->problems_seen)
        return;
    bl->problems_seen = 1;
    FILE *m = open_memstream(&bl->problems, &bl->problems_len);
    if (!m)
        return;
    cli_print_failures(m, "pinload-bench", l);
    fclose(m);
}

static void print_problems(bench_log *bl)
{
    if (bl->problems)
        fputs(bl->problems, stderr);
    free(bl->problems);
    bl->problems = NULL;
}

static pl_loader *open_loader(const options *o, bench_log *bl, row *r)
{
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = o->data;
    cfg.batch_size = o->batch;
    cfg.width = cfg.height = o->size;
    cfg.augment = o->augment;
    cfg.transform = o->transform;
    cfg.format = o->format;
    cfg.num_workers = r->workers;
    cfg.prefetch = r->prefetch;
    cfg.memory = (pl_memory)r->pin;
    cfg.device = o->device;
    cfg.gpu_normalize = o->gpu_normalize;
    cfg.decode = r->decode;
    cfg.cache_limit = o->cache_limit;
    cfg.order = o->order;
    cfg.shuffle_window = o->shuffle_window;
    cfg.log = on_log;
    cfg.log_ctx = bl;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) < 0) {
        fprintf(stderr, "pinload-bench: %s\n", pl_last_error());
        return NULL;
    }
    /* From the first loader on, a signal stops after the row in hand
     * (before it, it ends the tool at once: cli.h). */
    cli_graceful = 1;
    pl_info info;
    pl_loader_info(l, &info);
    if (r->workers == PL_AUTO) { /* measure() reads what it chose */
        r->auto_workers = 1;
        r->threads = info.num_workers;
    } else {
        r->workers = info.num_workers; /* what 0 (the default) resolved to */
    }
    r->decode_used = info.decode;  /* what auto resolved to */
    snprintf(bl->backend, sizeof bl->backend, "%s", info.backend_name);
    bl->cuda = info.backend == PL_BACKEND_CUDA;
    if (o->want_cuda && !bl->cuda) {
        fprintf(stderr,
                "pinload-bench: --device cuda: no usable CUDA device "
                "(%s)\n",
                info.backend_name);
        pl_loader_destroy(l);
        return NULL;
    }
    return l;
}

/* A load pass (no compute) of the loader l: its time a batch, or -1. */
static double load_pass(const options *o, bench_cuda *cu, pl_loader *l, row *r)
{
    pass p = {0};
    const int rc = measure(o, cu, l, 0.0, r, &p);
    free(p.waits);
    free(p.launched);
    return rc == 0 && p.batches ? p.seconds / (double)p.batches * 1e3 : -1;
}

/* One combination, one loader: a pass without compute measures the
 * pipeline; with --compute-ms a second pass measures the training step,
 * and a third the pipeline again: the same loader's throughput moved by
 * 9% from one pass to another on an H200 (2026-11-27), more than the
 * overlap loss being measured, so the step is set against the mean of
 * the load passes around it (load_ms; load_before_ms and load_after_ms
 * keep both). Overlap is how much of the shorter of compute and load ran
 * hidden under the other (100%: step = max(compute, load); 0%: their
 * sum). */
static int run_combo(const options *o, bench_cuda *cu, bench_log *bl, row *r)
{
    pl_loader *l = open_loader(o, bl, r);
    if (!l)
        return -1;
    if (!bl->cuda)
        cu = NULL;
    pass ps = {0};
    int rc = measure(o, cu, l, 0.0, r, &ps);
    if (rc == 0) {
        r->seconds = ps.seconds;
        r->batches = ps.batches;
        r->images = ps.images;
        fill_row(r, &ps.s0, &ps.s1, ps.waits, ps.batches);
        r->load_ms = ps.seconds / (double)ps.batches * 1e3;
        r->us_cpu = ps.images ? ps.cpu_s * 1e6 / (double)ps.images : -1;
    }
    free(ps.waits);
    free(ps.launched);
    r->step_ms = r->overlap_pct = r->gpu_idle_ms = r->late_ms = -1;
    r->load_before_ms = r->load_after_ms = -1;
    if (rc == 0 && o->compute_ms > 0 && !cli_signal) {
        pass pc = {0};
        rc = measure(o, cu, l, o->compute_ms, r, &pc);
        free(pc.waits);
        if (rc == 0) {
            fill_row_waits(r, &pc.s0, &pc.s1, pc.batches);
            step_gaps(o, cu, &pc, r);
        }
        free(pc.launched);
        const double after =
            rc == 0 && !cli_signal ? load_pass(o, cu, l, r) : -1;
        if (after > 0) {
            r->load_before_ms = r->load_ms;
            r->load_after_ms = after;
            r->load_ms = (r->load_ms + after) / 2;
        }
        if (rc == 0) {
            r->step_ms = pc.seconds / (double)pc.batches * 1e3;
            const double c = o->compute_ms, ld = r->load_ms;
            double hidden = (c + ld - r->step_ms) / (c < ld ? c : ld);
            hidden = hidden < 0 ? 0 : hidden > 1 ? 1 : hidden;
            r->overlap_pct = hidden * 100;
        }
    }
    keep_problems(l, bl);
    pl_loader_destroy(l);
    if (!o->quiet)
        fprintf(stderr, "\r%*s\r", 130, "");
    return rc;
}

/* ---- output ---- */

static void machine(char *buf, size_t cap)
{
    char model[128] = "unknown CPU", line[256], host[64] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            const char *c = strchr(line, ':');
            snprintf(model, sizeof model, "%.120s", c ? c + 2 : line);
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
    gethostname(host, sizeof host - 1);
    snprintf(buf, cap, "%s, %ld cores (%s)", model,
             sysconf(_SC_NPROCESSORS_ONLN), host);
}

/* On CUDA: what cudaMemcpy itself reaches from pinned and from pageable
 * memory for copies of one batch as it crosses the bus (uint8 pixels when
 * float formats are normalised on the GPU): the ceilings for the H2D GB/s
 * column's pinned and pageable rows. */
static void print_memcpy_ceiling(options *o)
{
    const size_t px = (size_t)o->batch * (size_t)o->size * o->size * 3;
    const int on_gpu = o->gpu_normalize && o->format != PL_FORMAT_U8_NHWC;
    const size_t per = o->format == PL_FORMAT_F32_NCHW  ? 4
                       : o->format == PL_FORMAT_U8_NHWC ? 1
                                                        : 2; /* f16, bf16 */
    const size_t bytes = on_gpu ? px : px * per;
    o->memcpy_gbs = bench_cuda_memcpy_gbs(bytes, 1);
    o->memcpy_pageable_gbs = bench_cuda_memcpy_gbs(bytes, 0);
    if (o->memcpy_gbs > 0)
        printf("cudaMemcpy for %zu-byte copies: %.2f GB/s from pinned, "
               "%.2f GB/s from pageable memory (the ceilings for H2D GB/s)\n",
               bytes, o->memcpy_gbs, o->memcpy_pageable_gbs);
}

/* The decode limit at each thread count the sweep uses. */
static int measure_baselines(options *o)
{
    baseline_files *f = baseline_load(o->data);
    if (!f)
        return -1;
    printf("baseline: plain TurboJPEG decode of the same %zu files from "
           "memory, %g s each",
           baseline_count(f), o->baseline_seconds);
    if (baseline_left_out(f))
        printf(" (%zu file(s) TurboJPEG cannot decode to RGB left out)",
               baseline_left_out(f));
    printf("\n");
    for (int i = 0; i < o->nworkers; i++) {
        const int w = o->workers[i];
        if (o->base_full[w] > 0)
            continue;
        size_t skipped = 0;
        o->base_full[w] = baseline_rate(f, w, 1, o->baseline_seconds, &skipped);
        o->base_eighth[w] = baseline_rate(f, w, 8, o->baseline_seconds, NULL);
        printf("baseline: %d thread%s: full size %.1f img/s, 1/8 scale %.1f "
               "img/s (%.2fx)%s\n",
               w, w > 1 ? "s" : "", o->base_full[w], o->base_eighth[w],
               o->base_eighth[w] / o->base_full[w],
               skipped ? " (some decodes failed and were not counted)" : "");
    }
    baseline_free(f);
    fflush(stdout);
    return 0;
}

/* "pinload-bench: --plot PATH: why" on stderr; the exit status 1. */
static int report_error(const char *flag, const char *path, const char *why)
{
    fprintf(stderr, "pinload-bench: %s %s: %s\n", flag, path, why);
    return 1;
}

/* Whether a report could be written at path, asked before the sweep so
 * that a wrong path costs nothing: an existing path must be a regular
 * file, a new one's folder writable. 0, or 1 after naming the problem. */
static int check_output(const char *flag, const char *path)
{
    if (!path)
        return 0;
    struct stat st;
    if (stat(path, &st) == 0)
        return S_ISREG(st.st_mode)
                   ? 0
                   : report_error(flag, path, "not a regular file");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = '\0';
    if (access(dir, W_OK) != 0) {
        fprintf(stderr, "pinload-bench: %s %s: cannot write in %s: %s\n", flag,
                path, dir, strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- the rounds ---- */

/* The sweep: every combination (pin outermost, then prefetch, then
 * workers), measured once a round, the rounds interleaved (all rows in
 * round 1, then all in round 2...), each measure a fresh loader. */
typedef struct sweep {
    row *plan;   /* [total]: each row's settings */
    row *meas;   /* [total x rounds]: row i's round k at i * rounds + k */
    int *done;   /* [total]: the rounds measured of each row */
    double *img; /* [total x rounds]: the reported rows' img_s_round */
    row *rows;   /* [total]: the reported rows, the first n */
    int total, n;
    int in_round; /* rows measured in the round under way */
} sweep;

static int sweep_open(sweep *sw, const options *o)
{
    memset(sw, 0, sizeof *sw);
    sw->total = o->ndecode * o->npin * o->nprefetch * o->nworkers;
    const size_t all = (size_t)sw->total * (size_t)o->rounds;
    sw->plan = calloc((size_t)sw->total, sizeof *sw->plan);
    sw->meas = calloc(all, sizeof *sw->meas);
    sw->done = calloc((size_t)sw->total, sizeof *sw->done);
    sw->img = calloc(all, sizeof *sw->img);
    sw->rows = calloc((size_t)sw->total, sizeof *sw->rows);
    if (!sw->plan || !sw->meas || !sw->done || !sw->img || !sw->rows) {
        fprintf(stderr,
                "pinload-bench: out of memory for %d rows of %d "
                "rounds\n",
                sw->total, o->rounds);
        return -1;
    }
    int i = 0;
    for (int d = 0; d < o->ndecode; d++)
        for (int p = 0; p < o->npin; p++)
            for (int q = 0; q < o->nprefetch; q++)
                for (int w = 0; w < o->nworkers; w++)
                    sw->plan[i++] = (row){.pin = o->pin[p],
                                          .workers = o->workers[w],
                                          .prefetch = o->prefetch[q],
                                          .decode = o->decode[d]};
    return 0;
}

static void sweep_close(sweep *sw)
{
    free(sw->plan);
    free(sw->meas);
    free(sw->done);
    free(sw->img);
    free(sw->rows);
}

/* Without a GPU pinned and pageable memory differ only by noise (the
 * host backend's "copy" is a memcpy from either): say so, and unless
 * --pin was given, drop the pageable rows, so the rounds cost no more
 * than one round of both did. Called once the first row (pinned: the
 * default list's first) is measured, when the backend is known. */
static void host_pin(options *o, sweep *sw)
{
    if (o->pin_given) {
        if (o->npin > 1)
            printf("note: no GPU (host backend): pinned and pageable memory "
                   "differ only in copies\n  to a GPU; the pin rows here "
                   "differ by noise\n");
        return;
    }
    printf("note: no GPU (host backend): pinned and pageable memory differ "
           "only in copies\n  to a GPU, so --pin is on alone here (--pin "
           "on,off measures both)\n");
    assert(sw->plan[0].pin == PL_MEMORY_PINNED && sw->done[0] == 1);
    int keep = 0;
    for (int i = 0; i < sw->total; i++)
        if (sw->plan[i].pin == PL_MEMORY_PINNED)
            sw->plan[keep++] = sw->plan[i];
    sw->total = keep;
    o->pin[0] = PL_MEMORY_PINNED;
    o->npin = 1;
}

/* What the first measured row tells: the backend, cudaMemcpy's ceilings
 * on CUDA, the pin note without a GPU; the table's columns. */
static void first_row(options *o, bench_log *bl, sweep *sw, columns *cols)
{
    printf("backend: %s\n", bl->backend);
    if (bl->cuda)
        print_memcpy_ceiling(o);
    else
        host_pin(o, sw);
    *cols = pick_columns(o, bl->cuda);
    fflush(stdout);
}

/* Every round of every row, until done, an error (1) or a signal (128 +
 * it, after the row in hand); the exit status. */
static int sweep_run(options *o, bench_cuda *cu, bench_log *bl, sweep *sw,
                     columns *cols)
{
    for (int k = 0; k < o->rounds; k++) {
        o->round_at = k + 1;
        sw->in_round = 0;
        for (int i = 0; i < sw->total; i++) {
            row *r = &sw->meas[(size_t)i * (size_t)o->rounds + (size_t)k];
            *r = sw->plan[i];
            o->row_at = i + 1;
            o->rows = sw->total;
            if (run_combo(o, cu, bl, r) < 0)
                return 1;
            if (cli_signal && r->batches == 0)
                return 128 + cli_signal; /* nothing measured */
            sw->done[i]++;
            sw->in_round++;
            if (k == 0 && i == 0)
                first_row(o, bl, sw, cols);
            if (cli_signal)
                return 128 + cli_signal; /* this row, then stop */
        }
    }
    return 0;
}

/* The reported rows: each measured row's rounds combined (bench_combine),
 * in the plan's order, and set against the baseline. */
static void sweep_combine(const options *o, sweep *sw)
{
    sw->n = 0;
    for (int i = 0; i < sw->total; i++) {
        if (sw->done[i] == 0)
            continue;
        const size_t at = (size_t)i * (size_t)o->rounds;
        row *r = &sw->rows[sw->n++];
        bench_combine(&sw->meas[at], sw->done[i], &sw->img[at], r);
        r->vs_base = o->base_full[r->workers] > 0
                         ? r->img_s / o->base_full[r->workers]
                         : -1;
    }
}

/* The run's first line: the data, the batch and the length of a row. */
static void print_title(const options *o)
{
    char span[64];
    if (o->seconds > 0)
        snprintf(span, sizeof span, "%g s", o->seconds);
    else
        snprintf(span, sizeof span, "%ld batches", o->batches);
    printf("pinload-bench: %s, %dx%d %s %s%s, batch %d, %s after %d warm-up, "
           "compute %g ms%s, %d round%s\n",
           o->data, o->size, o->size,
           o->transform ? o->transform : pl_augment_name(o->augment),
           pl_format_name(o->format),
           o->format == PL_FORMAT_U8_NHWC ? ""
           : o->gpu_normalize             ? " (gpu-normalize on)"
                                          : " (gpu-normalize off)",
           o->batch, span, o->warmup, o->compute_ms,
           o->order == PL_ORDER_SHARDS ? ", order shards" : "", o->rounds,
           o->rounds == 1 ? "" : "s");
}

int main(int argc, char **argv)
{
    if (bench_wants_plan(argc, argv))
        return bench_plan_main(argc, argv);
    options o;
    bench_parse(argc, argv, &o);
    cli_catch_signals("pinload-bench");
    if (check_output("--csv", o.csv) | check_output("--json", o.json) |
        check_output("--plot", o.plot) |
        check_output("--timeline", o.timeline_path))
        return 1;
    if (o.timeline_path) {
        char why[256];
        o.timeline = cli_open_file(o.timeline_path, 1, why, sizeof why);
        if (!o.timeline)
            return report_error("--timeline", o.timeline_path, why);
        fprintf(o.timeline, "round,pin,workers,prefetch,step,launch_ms,"
                            "start_ms,end_ms,gap_ms,late_ms\n");
    }
    sweep sw;
    if (sweep_open(&sw, &o) < 0) {
        sweep_close(&sw);
        return 1;
    }
    char mach[256];
    machine(mach, sizeof mach);
    bench_log bl = {.backend = "?"};
    bench_cuda *cu = o.device == PL_DEVICE_HOST ? NULL : bench_cuda_open();
    int status = 0;
    print_title(&o);
    printf("machine: %s\n", mach);
    if (o.baseline && measure_baselines(&o) < 0)
        status = 1;
    columns cols = {0};
    if (status == 0)
        status = sweep_run(&o, cu, &bl, &sw, &cols);
    sweep_combine(&o, &sw);
    const int n = sw.n;
    if (n > 0) {
        print_header(&cols);
        for (int i = 0; i < n; i++)
            print_row(&cols, &sw.rows[i]);
        print_verdict(sw.rows, n);
    }
    print_problems(&bl);
    char why[256];
    if (n > 0 && o.csv && write_csv(o.csv, sw.rows, n, why, sizeof why) != 0)
        status = report_error("--csv", o.csv, why);
    if (n > 0 && o.json &&
        write_json(o.json, &o, mach, bl.backend, sw.rows, n, why, sizeof why) !=
            0)
        status = report_error("--json", o.json, why);
    if (n > 0 && o.plot &&
        write_plot(o.plot, &o, mach, bl.backend, sw.rows, n, why, sizeof why) !=
            0)
        status = report_error("--plot", o.plot, why);
    if (cli_signal)
        fprintf(stderr,
                "pinload-bench: stopped by signal %d after %d row%s (round "
                "%d of %d); the files have every row measured, each the "
                "median of its rounds so far\n",
                (int)cli_signal, sw.in_round, sw.in_round == 1 ? "" : "s",
                o.round_at, o.rounds);
    if (o.timeline && fclose(o.timeline) != 0)
        status = report_error("--timeline", o.timeline_path, strerror(errno));
    sweep_close(&sw);
    bench_cuda_close(cu);
    return status;
}
