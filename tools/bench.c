/* pinload-bench: how fast does pinload feed a GPU here? Sweeps pinned
 * memory, num_workers and prefetch depth, one loader at a time, and prints
 * one row per combination: throughput, the time the consumer waited, and
 * the loader's own split of time by stage, so the bottleneck shows. Uses
 * only the public API (plus CUDA for the simulated training step). */
#define _DEFAULT_SOURCE /* gethostname */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_baseline.h"
#include "bench_cuda.h"
#include "cli.h"
#include "pinload.h"

#ifdef PL_BENCH_NO_CUDA
bench_cuda *bench_cuda_open(void)
{
    return NULL;
}
void bench_cuda_close(bench_cuda *c)
{
    (void)c;
}
struct CUstream_st *bench_cuda_stream(bench_cuda *c)
{
    (void)c;
    return NULL;
}
void bench_cuda_step(bench_cuda *c, const void *d, size_t n, double ms)
{
    (void)c;
    (void)d;
    (void)n;
    (void)ms;
}
void bench_cuda_sync(bench_cuda *c)
{
    (void)c;
}
double bench_cuda_pinned_gbs(size_t bytes)
{
    (void)bytes;
    return 0.0;
}
#endif

static const char usage[] =
    "usage: pinload-bench --data PATH [--batch B] [--size N] [--augment "
    "none|eval|train]\n"
    "       [--format u8|f32|f16] [--workers LIST] [--prefetch LIST] "
    "[--pin LIST]\n"
    "       [--batches N | --seconds S] [--warmup N] [--compute-ms X]\n"
    "       [--device " CLI_DEVICES "] [--csv FILE] [--json FILE]\n"
    "       [--plot FILE.png] [--quiet] [--baseline [--baseline-seconds S]]\n"
    "       [--wide] [--version] [--help]\n"
    "LIST is comma-separated, e.g. --workers 1,2,4 --prefetch 1,2,4 --pin "
    "on,off,managed;\n"
    "--workers 0 is the library's default (this process's share of the "
    "CPUs).\n"
    "Every combination runs in turn, one loader at a time, after a warm-up; "
    "one row\nis printed per combination as it finishes, then the best.\n"
    "--baseline first measures plain TurboJPEG full-size decoding of the same "
    "files,\nfrom memory, on as many threads as each row's workers (and at 1/8 "
    "scale, the\nceiling), and shows every row as a ratio to it.\n"
    "The table fits 100 columns: the H2D, step/overlap and ratio columns, "
    "when they\napply, replace the per-stage times; --wide shows them all "
    "(as the CSV and JSON do).\n" CLI_EXIT_CODES;

#define MAX_LIST 32

typedef struct options {
    const char *data;
    int batch, size;
    pl_augment augment;
    pl_format format;
    int workers[MAX_LIST], nworkers;
    int prefetch[MAX_LIST], nprefetch;
    int pin[MAX_LIST], npin; /* pl_memory values */
    long batches;
    double seconds;
    int warmup;
    double compute_ms;
    int device; /* from --device (tools/cli.h) */
    int want_cuda;
    int wide; /* --wide: every column of the table */
    const char *csv, *json, *plot;
    int quiet;
    int baseline;
    double baseline_seconds;
    int row_at, rows; /* the row being measured (1-based), of how many */
    double base_full[1025], base_eighth[1025]; /* by thread count */
    double memcpy_gbs; /* cudaMemcpy's pinned H2D rate, or 0 */
} options;

typedef struct row {
    int pin, workers, prefetch;
    long images, batches;
    double seconds;
    double img_s, mb_s, h2d_gbs;
    double wait_mean_ms, wait_p99_ms;
    double us_read, us_decode, us_augment, us_copy; /* per image */
    double load_ms; /* per batch, without compute */
    double vs_base; /* img_s / full-decode baseline at these threads, or -1 */
    double step_ms, overlap_pct; /* with --compute-ms; -1 otherwise */
} row;

/* ---- arguments ---- */

static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pinload-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", usage);
    va_end(ap);
    exit(2);
}

static long parse_long(const char *flag, const char *v, long lo, long hi)
{
    return cli_long("pinload-bench", usage, flag, v, lo, hi);
}

static double parse_double(const char *flag, const char *v, double lo,
                           double hi)
{
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (!*v || *end || errno || !(x >= lo && x <= hi))
        bad("%s: \"%s\" is not a number in [%g, %g]", flag, v, lo, hi);
    return x;
}

static int pin_value(const char *flag, const char *v)
{
    if (!strcmp(v, "on"))
        return PL_MEMORY_PINNED;
    if (!strcmp(v, "off"))
        return PL_MEMORY_PAGEABLE;
    if (!strcmp(v, "managed"))
        return PL_MEMORY_MANAGED;
    bad("%s: \"%s\" is not on, off or managed", flag, v);
    return -1;
}

/* A comma-separated list; empty items and empty lists are errors. */
static int parse_list(const char *flag, const char *v, int *out, int pin,
                      int lo)
{
    if (!*v)
        bad("%s: empty list", flag);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_LIST)
            bad("%s: more than %d values", flag, MAX_LIST);
        out[n++] =
            pin ? pin_value(flag, tok) : (int)parse_long(flag, tok, lo, 1024);
    }
    if (n == 0 || v[strlen(v) - 1] == ',' || strstr(v, ",,") || v[0] == ',')
        bad("%s: empty item in \"%s\"", flag, v);
    return n;
}

static int choice(const char *flag, const char *v, const char *const *names,
                  int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    bad("%s: unknown value \"%s\"", flag, v);
    return -1;
}

static void set_defaults(options *o)
{
    memset(o, 0, sizeof *o);
    o->batch = 64;
    o->size = 224;
    o->augment = PL_AUGMENT_TRAIN;
    o->format = PL_FORMAT_U8_NHWC;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int w = 1; w <= (cores > 1 ? cores : 1) && o->nworkers < MAX_LIST;
         w *= 2)
        o->workers[o->nworkers++] = w;
    if (o->workers[o->nworkers - 1] != cores && cores > 1 &&
        o->nworkers < MAX_LIST)
        o->workers[o->nworkers++] = (int)cores;
    o->prefetch[0] = 1;
    o->prefetch[1] = 2;
    o->prefetch[2] = 4;
    o->nprefetch = 3;
    o->pin[0] = PL_MEMORY_PINNED;
    o->pin[1] = PL_MEMORY_PAGEABLE;
    o->npin = 2;
    o->batches = 30;
    o->warmup = 4;
    o->device = PL_DEVICE_AUTO;
    o->baseline_seconds = 3.0;
}

static void parse(int argc, char **argv, options *o)
{
    static const char *const augments[] = {"none", "eval", "train"};
    static const char *const valued[] = {"--data",     "--batch",
                                         "--size",     "--augment",
                                         "--format",   "--workers",
                                         "--prefetch", "--pin",
                                         "--batches",  "--seconds",
                                         "--warmup",   "--compute-ms",
                                         "--device",   "--baseline-seconds",
                                         "--csv",      "--json",
                                         "--plot",     NULL};
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            fputs(usage, stdout);
            exit(0);
        }
        if (!strcmp(f, "--version"))
            cli_version("pinload-bench");
        if (!strcmp(f, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!strcmp(f, "--wide")) {
            o->wide = 1;
            continue;
        }
        if (!strcmp(f, "--baseline")) {
            o->baseline = 1;
            continue;
        }
        const char *v =
            cli_value("pinload-bench", usage, valued, argc, argv, &i);
        if (!strcmp(f, "--data"))
            o->data = v;
        else if (!strcmp(f, "--batch"))
            o->batch = (int)parse_long(f, v, 1, 65536);
        else if (!strcmp(f, "--size"))
            o->size = (int)parse_long(f, v, 1, 16384);
        else if (!strcmp(f, "--augment"))
            o->augment = (pl_augment)choice(f, v, augments, 3);
        else if (!strcmp(f, "--format"))
            o->format = cli_format("pinload-bench", usage, f, v);
        else if (!strcmp(f, "--workers"))
            o->nworkers = parse_list(f, v, o->workers, 0, 0);
        else if (!strcmp(f, "--prefetch"))
            o->nprefetch = parse_list(f, v, o->prefetch, 0, 1);
        else if (!strcmp(f, "--pin"))
            o->npin = parse_list(f, v, o->pin, 1, 0);
        else if (!strcmp(f, "--batches"))
            o->batches = parse_long(f, v, 1, 100000000), o->seconds = 0;
        else if (!strcmp(f, "--seconds"))
            o->seconds = parse_double(f, v, 0.01, 1e6);
        else if (!strcmp(f, "--warmup"))
            o->warmup = (int)parse_long(f, v, 0, 1000000);
        else if (!strcmp(f, "--compute-ms"))
            o->compute_ms = parse_double(f, v, 0, 1e5);
        else if (!strcmp(f, "--device"))
            o->device = cli_device("pinload-bench", usage, f, v, &o->want_cuda);
        else if (!strcmp(f, "--baseline-seconds"))
            o->baseline_seconds = parse_double(f, v, 0.1, 3600);
        else if (!strcmp(f, "--csv"))
            o->csv = v;
        else if (!strcmp(f, "--json"))
            o->json = v;
        else if (!strcmp(f, "--plot"))
            o->plot = v;
        else
            bad("unknown option %s", f);
    }
    if (!o->data)
        bad("--data is required");
    for (int w = 0; w < o->nworkers && o->baseline; w++)
        if (o->workers[w] == 0)
            bad("--workers 0 with --baseline: give thread counts, the "
                "baseline runs as many threads as each row's workers");
    if (access(o->data, R_OK) != 0)
        bad("--data: %s: %s", o->data, strerror(errno));
    if (!isatty(2))
        o->quiet = 1; /* no progress line into logs */
}

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

static const char *pin_name(int pin)
{
    return pin == PL_MEMORY_PINNED    ? "on"
           : pin == PL_MEMORY_MANAGED ? "managed"
                                      : "off";
}

static const char *augment_name(pl_augment a)
{
    return a == PL_AUGMENT_TRAIN  ? "train"
           : a == PL_AUGMENT_EVAL ? "eval"
                                  : "none";
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The progress line on a terminal: which row of how many, the batches of
 * this pass (of how many, or seconds of how many), img/s, and the time
 * left for the whole sweep at this row's pace. */
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
    const int passes = o->compute_ms > 0 ? 2 : 1;
    const double left = (pass - el) +
                        (compute_ms > 0 ? 0 : (passes - 1) * pass) +
                        (double)(o->rows - o->row_at) * passes * pass;
    char of[48];
    if (o->seconds > 0)
        snprintf(of, sizeof of, "%ld batches, %.0f of %.0f s", done, el,
                 o->seconds);
    else
        snprintf(of, sizeof of, "%ld of %ld batches", done, o->batches);
    const long secs = left > 0 ? (long)(left + 0.5) : 0;
    fprintf(stderr,
            "\r  row %d of %d: pin %s, %d workers, prefetch %d, %s: %s, "
            "%.0f img/s, ETA %ld:%02ld   ",
            o->row_at, o->rows, pin_name(r->pin), r->workers, r->prefetch,
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
                    pl_loader *l)
{
    struct CUstream_st *stream = cu ? bench_cuda_stream(cu) : NULL;
    if (o->compute_ms > 0 && cu) {
        pl_batch_wait(b, stream);
        bench_cuda_step(cu, b->data, b->bytes, o->compute_ms);
    } else if (o->compute_ms > 0) {
        host_step(b, o->compute_ms);
    } else if (cu) {
        pl_batch_wait(b, stream);
    }
    pl_loader_release(l, b, stream);
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
}

/* Warm up, then take batches (with `compute_ms` of simulated training per
 * batch) for --batches or --seconds. [out] *seconds, *batches, *images;
 * the stats before and after, and the waits, for fill_row. */
typedef struct pass {
    double seconds;
    long batches, images;
    pl_stats s0, s1;
    double *waits;
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
        consume(&oc, cu, b, l);
    }
    if (cu)
        bench_cuda_sync(cu);
    const long cap = o->seconds > 0 ? 1 << 20 : o->batches;
    ps->waits = malloc((size_t)cap * sizeof *ps->waits);
    if (!ps->waits)
        return -1;
    pl_loader_stats(l, &ps->s0);
    const double t0 = now_s();
    long n = 0, images = 0;
    while (n < cap && !cli_signal &&
           (o->seconds <= 0 || now_s() - t0 < o->seconds)) {
        const double w0 = now_s();
        if (next_batch(l, &b) < 0)
            return -1;
        ps->waits[n++] = now_s() - w0;
        images += b->count;
        consume(&oc, cu, b, l);
        progress(o, r, n, images, t0, compute_ms);
    }
    if (cu)
        bench_cuda_sync(cu);
    ps->seconds = now_s() - t0;
    ps->batches = n;
    ps->images = images;
    pl_loader_stats(l, &ps->s1);
    return 0;
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
    cfg.format = o->format;
    cfg.num_workers = r->workers;
    cfg.prefetch = r->prefetch;
    cfg.memory = (pl_memory)r->pin;
    cfg.device = o->device;
    cfg.log = on_log;
    cfg.log_ctx = bl;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) < 0) {
        fprintf(stderr, "pinload-bench: %s\n", pl_last_error());
        return NULL;
    }
    pl_info info;
    pl_loader_info(l, &info);
    r->workers = info.num_workers; /* what 0 (the default) resolved to */
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

/* One combination, one loader: a pass without compute measures the
 * pipeline; with --compute-ms a second pass measures the training step,
 * and overlap is how much of the shorter of compute and load ran hidden
 * under the other (100%: step = max(compute, load); 0%: their sum). */
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
    }
    free(ps.waits);
    r->step_ms = r->overlap_pct = -1;
    if (rc == 0 && o->compute_ms > 0 && !cli_signal) {
        pass pc = {0};
        rc = measure(o, cu, l, o->compute_ms, r, &pc);
        free(pc.waits);
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
        fprintf(stderr, "\r%*s\r", 110, "");
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

/* Which columns the table shows. By default it fits 100 columns: the
 * optional ones (H2D on CUDA, step and overlap with --compute-ms, the
 * ratio with --baseline) take the place of the per-stage times; --wide
 * shows every column (the CSV and JSON always have them all). */
typedef struct columns {
    int stages, h2d, step, vs;
} columns;

static columns pick_columns(const options *o, int cuda)
{
    columns c = {.h2d = o->wide || cuda,
                 .step = o->wide || o->compute_ms > 0,
                 .vs = o->wide || o->baseline};
    c.stages = o->wide || !(c.h2d || c.step || c.vs);
    return c;
}

static void print_header(const columns *c)
{
    for (int line = 0; line < 2; line++) {
        const int top = line == 0;
        printf("%-8s %7s %8s %9s %8s", top ? "pin" : "", top ? "workers" : "",
               top ? "prefetch" : "", top ? "img/s" : "", top ? "MB/s" : "");
        if (c->h2d)
            printf(" %8s", top ? "H2D GB/s" : "");
        printf(" %9s %9s", top ? "wait ms" : "", top ? "p99 ms" : "");
        if (c->stages)
            printf(" %7s %8s %8s %7s", top ? "read" : "us/img",
                   top ? "decode" : "us/img", top ? "augment" : "us/img",
                   top ? "copy" : "us/img");
        if (c->step)
            printf(" %8s %8s", top ? "step ms" : "", top ? "overlap" : "");
        if (c->vs)
            printf(" %8s", top ? "vs base" : "");
        printf("\n");
        if (!c->stages)
            break; /* the second line only labels the stage times */
    }
}

static void print_row(const columns *c, const row *r)
{
    char h2d[16] = "-", step[16] = "-", ov[16] = "-", vs[16] = "-";
    if (r->vs_base >= 0)
        snprintf(vs, sizeof vs, "%.2fx", r->vs_base);
    if (r->h2d_gbs > 0)
        snprintf(h2d, sizeof h2d, "%.2f", r->h2d_gbs);
    if (r->step_ms >= 0) {
        snprintf(step, sizeof step, "%.2f", r->step_ms);
        snprintf(ov, sizeof ov, "%.0f%%", r->overlap_pct);
    }
    printf("%-8s %7d %8d %9.1f %8.1f", pin_name(r->pin), r->workers,
           r->prefetch, r->img_s, r->mb_s);
    if (c->h2d)
        printf(" %8s", h2d);
    printf(" %9.2f %9.2f", r->wait_mean_ms, r->wait_p99_ms);
    if (c->stages)
        printf(" %7.0f %8.0f %8.0f %7.0f", r->us_read, r->us_decode,
               r->us_augment, r->us_copy);
    if (c->step)
        printf(" %8s %8s", step, ov);
    if (c->vs)
        printf(" %8s", vs);
    printf("\n");
    fflush(stdout);
}

/* A number, or empty where it does not apply (negative). */
static void csv_num(FILE *f, double v, const char *fmt)
{
    if (v >= 0)
        fprintf(f, fmt, v);
}

static int write_csv(const char *path, const row *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "pin,workers,prefetch,images,batches,seconds,images_per_s,"
               "mb_per_s,h2d_gb_per_s,wait_mean_ms,wait_p99_ms,read_us,"
               "decode_us,augment_us,copy_us,load_ms,step_ms,overlap_pct,"
               "vs_baseline\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f, "%s,%d,%d,%ld,%ld,%.9f,%.2f,%.2f,", pin_name(r->pin),
                r->workers, r->prefetch, r->images, r->batches, r->seconds,
                r->img_s, r->mb_s);
        csv_num(f, r->h2d_gbs > 0 ? r->h2d_gbs : -1, "%.3f");
        fprintf(f, ",%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,%.3f,", r->wait_mean_ms,
                r->wait_p99_ms, r->us_read, r->us_decode, r->us_augment,
                r->us_copy, r->load_ms);
        csv_num(f, r->step_ms, "%.3f");
        fputc(',', f);
        csv_num(f, r->overlap_pct, "%.1f");
        fputc(',', f);
        csv_num(f, r->vs_base, "%.3f");
        fputc('\n', f);
    }
    return fclose(f);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* A number, or null where it does not apply (negative). */
static void json_num(FILE *f, double v)
{
    if (v >= 0)
        fprintf(f, "%.3f", v);
    else
        fputs("null", f);
}

static int write_json(const char *path, const options *o, const char *mach,
                      const char *backend, const row *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\n  \"data\": ");
    json_string(f, o->data);
    fprintf(f, ",\n  \"machine\": ");
    json_string(f, mach);
    fprintf(f, ",\n  \"backend\": ");
    json_string(f, backend);
    fprintf(f, ",\n  \"memcpy_pinned_gb_per_s\": ");
    json_num(f, o->memcpy_gbs > 0 ? o->memcpy_gbs : -1);
    char date[32];
    const time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    fprintf(f, ",\n  \"pinload_version\": ");
    json_string(f, pl_version());
    fprintf(f,
            ",\n  \"date\": \"%s\",\n  \"augment\": \"%s\",\n"
            "  \"format\": \"%s\",\n  \"device\": %d,\n"
            "  \"warmup_batches\": %d,\n  \"batches_per_row\": %ld,\n"
            "  \"seconds_per_row\": %g,\n",
            date, augment_name(o->augment), cli_format_name(o->format),
            o->device, o->warmup, o->seconds > 0 ? -1L : o->batches,
            o->seconds);
    fprintf(f,
            "  \"batch\": %d,\n  \"size\": %d,\n  \"compute_ms\": %g,\n"
            "  \"rows\": [\n",
            o->batch, o->size, o->compute_ms);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f,
                "    {\"pin\": \"%s\", \"workers\": %d, \"prefetch\": %d, "
                "\"images\": %ld, \"batches\": %ld, \"seconds\": %.9f, "
                "\"images_per_s\": %.2f, \"mb_per_s\": %.2f, "
                "\"h2d_gb_per_s\": ",
                pin_name(r->pin), r->workers, r->prefetch, r->images,
                r->batches, r->seconds, r->img_s, r->mb_s);
        json_num(f, r->h2d_gbs > 0 ? r->h2d_gbs : -1);
        fprintf(f,
                ", \"wait_mean_ms\": %.3f, \"wait_p99_ms\": %.3f, "
                "\"read_us\": %.1f, \"decode_us\": %.1f, \"augment_us\": "
                "%.1f, \"copy_us\": %.1f, \"load_ms\": %.3f, \"step_ms\": ",
                r->wait_mean_ms, r->wait_p99_ms, r->us_read, r->us_decode,
                r->us_augment, r->us_copy, r->load_ms);
        json_num(f, r->step_ms);
        fprintf(f, ", \"overlap_pct\": ");
        json_num(f, r->overlap_pct);
        fprintf(f, ", \"vs_baseline\": ");
        json_num(f, r->vs_base);
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f);
}

/* s as a gnuplot double-quoted string: backslash, quote and newline
 * escaped. */
static void gp_quote(FILE *g, const char *s)
{
    fputc('"', g);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(g, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", g);
        else
            fputc(*s, g);
    }
    fputc('"', g);
}

/* A PNG chart drawn by gnuplot: images/s against workers, one line per
 * (pin, prefetch). */
static int write_plot(const char *path, const options *o, const char *mach,
                      const char *backend, const row *rows, int n)
{
    char dat[] = "/tmp/pinload-bench-XXXXXX";
    const int fd = mkstemp(dat);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f)
        return -1;
    for (int p = 0; p < o->npin; p++)
        for (int q = 0; q < o->nprefetch; q++) {
            fprintf(f, "\"pin %s, prefetch %d\"\n", pin_name(o->pin[p]),
                    o->prefetch[q]);
            for (int i = 0; i < n; i++)
                if (rows[i].pin == o->pin[p] &&
                    rows[i].prefetch == o->prefetch[q])
                    fprintf(f, "%d %.2f\n", rows[i].workers, rows[i].img_s);
            fprintf(f, "\n\n");
        }
    fclose(f);
    int lo = o->workers[0], hi = o->workers[0];
    for (int i = 1; i < o->nworkers; i++) {
        lo = o->workers[i] < lo ? o->workers[i] : lo;
        hi = o->workers[i] > hi ? o->workers[i] : hi;
    }
    char tics[512] = "";
    for (int i = 0, o_ = 0; i < o->nworkers; i++)
        o_ += snprintf(tics + o_, sizeof tics - (size_t)o_, "%s%d",
                       i ? "," : "", o->workers[i]);
    /* The script goes to gnuplot's stdin, no shell between: paths and
     * names are quoted for gnuplot alone. */
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        unlink(dat);
        return -1;
    }
    fputs("set terminal pngcairo size 960,600 font ',10'\nset output ", g);
    gp_quote(g, path);
    fprintf(g, "\nset title ");
    char title[2048];
    snprintf(title, sizeof title,
             "pinload-bench: %s, %dx%d %s, batch %d\n%s; %s", o->data, o->size,
             o->size, augment_name(o->augment), o->batch, mach, backend);
    gp_quote(g, title);
    fprintf(g,
            " noenhanced\nset xlabel 'worker threads'\n"
            "set ylabel 'images/s'\nset key outside right\nset grid\n"
            "set yrange [0:*]\nset xrange [%g:%g]\nset xtics (%s)\n"
            "plot for [i=0:%d] ",
            lo - 0.5, hi + 0.5, tics, o->npin * o->nprefetch - 1);
    gp_quote(g, dat);
    fputs(" index i using 1:2 with linespoints lw 2 title columnheader(1)\n",
          g);
    const int rc = pclose(g);
    unlink(dat);
    return rc == 0 ? 0 : -1;
}

/* On CUDA: what cudaMemcpy itself reaches from pinned memory for copies of
 * one batch's uint8 pixels (what crosses the bus, float formats included
 * when normalised on the GPU): the ceiling for the H2D GB/s column. */
static void print_memcpy_ceiling(options *o)
{
    const size_t bytes = (size_t)o->batch * (size_t)o->size * o->size * 3;
    o->memcpy_gbs = bench_cuda_pinned_gbs(bytes);
    if (o->memcpy_gbs > 0)
        printf("cudaMemcpy from pinned memory: %.2f GB/s for %zu-byte "
               "copies (the ceiling for H2D GB/s)\n",
               o->memcpy_gbs, bytes);
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

int main(int argc, char **argv)
{
    options o;
    parse(argc, argv, &o);
    cli_catch_signals();
    char mach[256];
    machine(mach, sizeof mach);
    bench_log bl = {.backend = "?"};
    bench_cuda *cu = o.device == PL_DEVICE_HOST ? NULL : bench_cuda_open();
    const int total = o.npin * o.nprefetch * o.nworkers;
    row *rows = calloc((size_t)total, sizeof *rows);
    int n = 0, status = 0;
    char span[64];
    if (o.seconds > 0)
        snprintf(span, sizeof span, "%g s", o.seconds);
    else
        snprintf(span, sizeof span, "%ld batches", o.batches);
    printf("pinload-bench: %s, %dx%d %s %s, batch %d, %s after %d warm-up, "
           "compute %g ms\n",
           o.data, o.size, o.size, augment_name(o.augment),
           cli_format_name(o.format), o.batch, span, o.warmup, o.compute_ms);
    printf("machine: %s\n", mach);
    if (o.baseline && measure_baselines(&o) < 0)
        status = 1;
    int printed = 0;
    columns cols = {0};
    for (int p = 0; p < o.npin && status == 0; p++)
        for (int q = 0; q < o.nprefetch && status == 0; q++)
            for (int w = 0; w < o.nworkers && status == 0; w++) {
                row *r = &rows[n];
                *r = (row){.pin = o.pin[p],
                           .workers = o.workers[w],
                           .prefetch = o.prefetch[q]};
                o.row_at = n + 1;
                o.rows = o.npin * o.nprefetch * o.nworkers;
                if (run_combo(&o, cu, &bl, r) < 0) {
                    status = 1;
                    break;
                }
                if (cli_signal && r->batches == 0) {
                    status = 128 + cli_signal; /* nothing measured */
                    break;
                }
                r->vs_base = o.base_full[r->workers] > 0
                                 ? r->img_s / o.base_full[r->workers]
                                 : -1;
                if (!printed++) {
                    printf("backend: %s\n", bl.backend);
                    if (bl.cuda)
                        print_memcpy_ceiling(&o);
                    cols = pick_columns(&o, bl.cuda);
                    print_header(&cols);
                }
                print_row(&cols, r);
                n++;
                if (cli_signal)
                    status = 128 + cli_signal; /* this row, then stop */
            }
    if (n > 0) {
        const row *best = &rows[0];
        for (int i = 1; i < n; i++)
            if (rows[i].img_s > best->img_s)
                best = &rows[i];
        printf("best: pin %s, %d workers, prefetch %d: %.1f images/s\n",
               pin_name(best->pin), best->workers, best->prefetch, best->img_s);
    }
    print_problems(&bl);
    if (n > 0 && o.csv && write_csv(o.csv, rows, n) != 0)
        status =
            (fprintf(stderr, "pinload-bench: %s: cannot write\n", o.csv), 1);
    if (n > 0 && o.json &&
        write_json(o.json, &o, mach, bl.backend, rows, n) != 0)
        status =
            (fprintf(stderr, "pinload-bench: %s: cannot write\n", o.json), 1);
    if (n > 0 && o.plot &&
        write_plot(o.plot, &o, mach, bl.backend, rows, n) != 0)
        status = (fprintf(stderr,
                          "pinload-bench: %s: gnuplot failed (is "
                          "gnuplot installed?)\n",
                          o.plot),
                  1);
    if (cli_signal)
        fprintf(stderr,
                "pinload-bench: stopped by signal %d after %d row%s; "
                "the files have every row measured\n",
                (int)cli_signal, n, n == 1 ? "" : "s");
    free(rows);
    bench_cuda_close(cu);
    return status;
}
