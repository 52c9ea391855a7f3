/* pinload-bench's parts: the options (tools/bench_args.c parses them),
 * one measured row, and the report (tools/bench_report.c: the table, CSV,
 * JSON and plot). tools/bench.c measures; tools/bench_rounds.h makes one
 * row of a combination's rounds and judges the rows. */
#ifndef PINLOAD_BENCH_H
#define PINLOAD_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "pinload.h"

#define MAX_LIST 32
#define BENCH_ROUNDS_MAX 100 /* --rounds */

typedef struct options {
    const char *data;
    int batch, size;
    pl_augment augment;
    const char *transform; /* --augment SPEC: config.transform, or NULL */
    pl_format format;
    int workers[MAX_LIST], nworkers;
    int prefetch[MAX_LIST], nprefetch;
    int pin[MAX_LIST], npin; /* pl_memory values */
    int pin_given;           /* --pin was given (else on alone on the host) */
    int rounds;              /* --rounds: each combination's measures */
    long batches;
    double seconds;
    int warmup;
    double compute_ms;
    int device; /* from --device (tools/cli.h) */
    int want_cuda;
    int wide; /* --wide: every column of the table */
    const char *csv, *json, *plot;
    const char *timeline_path; /* --timeline: every step's span, as CSV */
    FILE *timeline;
    int quiet;
    int baseline;
    double baseline_seconds;
    int row_at, rows; /* the row being measured (1-based), of how many */
    int round_at;     /* the round under way (1-based), of o->rounds */
    double base_full[1025], base_eighth[1025]; /* by thread count */
    double memcpy_gbs, memcpy_pageable_gbs;    /* cudaMemcpy's H2D, or 0 */
    int gpu_normalize; /* --gpu-normalize: pl_config.gpu_normalize */
    int decode[MAX_LIST], ndecode; /* --decode: pl_config.decode, swept */
    int decode_given;              /* --decode was given: its columns */
    long cache_limit;              /* --cache-limit: pl_config.cache_limit */
    int order;                     /* --order: pl_config.order */
    int shuffle_window; /* --shuffle-window: pl_config.shuffle_window */
} options;

/* One combination: its settings and figures. A round's row holds one
 * measure; the reported row, each figure's median over the rounds
 * (bench_combine in bench_rounds.h). */
typedef struct row {
    int pin, workers, prefetch;
    int decode;      /* the sweep's --decode: pl_config.decode (a pl_decode) */
    int decode_used; /* pl_info.decode: what auto became */
    /* --workers auto: the loader chose; workers is then the count it
     * took samples with at the end of the row, of `threads`. */
    int auto_workers, threads;
    /* The ring's slots at the end of the row: prefetch, or what --prefetch
     * auto (prefetch PL_AUTO, then -1) grew to. */
    int prefetch_used;
    long images, batches;
    /* The reported row's: how many rounds measured it, the lowest and
     * highest of their img/s, and each round's (img_s_round[rounds], in
     * the order measured). */
    int rounds;
    double img_s_min, img_s_max;
    const double *img_s_round;
    union {
        struct {
            double seconds;
            double img_s, mb_s, h2d_gbs;
            double wait_mean_ms, wait_p99_ms;
            double us_read, us_decode, us_augment, us_copy; /* per image */
            double load_ms; /* per batch, without compute */
            /* With --compute-ms: the load passes before and after the
             * step's (load_ms is their mean); -1 otherwise. */
            double load_before_ms, load_after_ms;
            /* img_s / full-decode baseline at these threads, or -1 */
            double vs_base;
            double step_ms, overlap_pct; /* with --compute-ms; -1 otherwise */
            /* With --compute-ms on a GPU: the GPU's idle time between
             * steps, and the part of it when the next batch had not
             * reached the caller yet (the rest: the step waited for the
             * batch's copy); -1 otherwise. */
            double gpu_idle_ms, late_ms;
            /* Per batch of the last pass: workers waiting for a free ring
             * slot, the prefetcher for a device buffer (pl_stats). */
            double slot_wait_ms, buffer_wait_ms;
            /* The process's CPU time (user and system, getrusage) per
             * image of the load pass: every thread's, workers, copy
             * engine and the caller's, so decoding on the GPU shows as
             * the CPU time it frees. */
            double us_cpu;
        };
        /* The same figures as a list, so that every one (a new one too:
         * doubles only, in the struct above) gets its median. A figure
         * that does not apply is negative. */
        double figure[21];
    };
} row;

#define BENCH_FIGURES (sizeof(((row *)0)->figure) / sizeof(double))
_Static_assert(sizeof(row) ==
                   offsetof(row, figure) + sizeof(((row *)0)->figure),
               "row.figure must cover every figure of row");
_Static_assert(offsetof(row, us_cpu) + sizeof(double) == sizeof(row),
               "row.figure must hold figures only (the last: us_cpu)");

/* ---- bench_args.c ---- */

/* The usage, for --help and every usage error (bench_plan.c's too). */
extern const char bench_usage[];

/* The command line into *o; prints the reason and the usage and exits 2
 * on a usage error, prints the usage and exits 0 for --help. */
void bench_parse(int argc, char **argv, options *o);

/* ---- bench_report.c ---- */

const char *pin_name(int pin);

/* Which columns the table shows (see pick_columns), and the rounds
 * asked (a row of fewer, cut short by a signal, says so). */
typedef struct columns {
    int mb, stages, h2d, step, vs;
    int decode; /* --decode given: the decoder and CPU us/img */
    int rounds;
} columns;

columns pick_columns(const options *o, int cuda);
void print_header(const columns *c);
void print_row(const columns *c, const row *r);
/* After the table: which row is fastest, if the rounds' spread allows
 * saying so (bench_judge), and last the settings to paste, in C and
 * Python. rows[0..n-1], n >= 1, from bench_combine. */
void print_verdict(const row *rows, int n);
/* The reports; each -1 with the reason in why when path cannot be
 * written. */
int write_csv(const char *path, const row *rows, int n, char *why,
              size_t whylen);
int write_json(const char *path, const options *o, const char *mach,
               const char *backend, const row *rows, int n, char *why,
               size_t whylen);
/* The gnuplot chart, as a PNG at path; -1 with the reason in why. */
int write_plot(const char *path, const options *o, const char *mach,
               const char *backend, const row *rows, int n, char *why,
               size_t whylen);

/* ---- bench_plan.c ---- */

/* Whether the command line asks for --plan. */
int bench_wants_plan(int argc, char **argv);
/* --plan: the job's costs computed (docs/SCALE.md), printed; the exit
 * status (usage errors exit 2 there). */
int bench_plan_main(int argc, char **argv);

#endif
