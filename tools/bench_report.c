/* pinload-bench's report: the table (fitting 100 columns unless --wide),
 * the CSV, the JSON with the whole configuration, and the gnuplot chart. */
#define _DEFAULT_SOURCE /* gmtime_r */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_rounds.h"
#include "cli.h"

const char *pin_name(int pin)
{
    return pin == PL_MEMORY_PINNED    ? "on"
           : pin == PL_MEMORY_MANAGED ? "managed"
                                      : "off";
}

/* Which columns the table shows. By default it fits 100 columns: the
 * optional ones (H2D on CUDA, step and overlap with --compute-ms, the
 * ratio with --baseline) take the place of the per-stage times, and MB/s
 * (img/s times the batch's bytes: nothing new) gives its room to img/s's
 * lowest and highest rounds; --wide shows every column (the CSV and JSON
 * always have them all). --decode adds, last, the decoder each row used
 * and the process's CPU time per image. */

columns pick_columns(const options *o, int cuda)
{
    columns c = {.mb = o->wide,
                 .h2d = o->wide || cuda,
                 .step = o->wide || o->compute_ms > 0,
                 .vs = o->wide || o->baseline,
                 .decode = o->decode_given,
                 .rounds = o->rounds};
    c.stages = o->wide || !(c.h2d || c.step || c.vs);
    return c;
}

/* Appends a header cell: " %*s" of the label, width w (w < 0: left
 * aligned, no leading space). */
static void head_cell(char *line, size_t cap, int w, const char *label)
{
    const size_t at = strlen(line);
    if (w < 0)
        snprintf(line + at, cap - at, "%-*s", -w, label);
    else
        snprintf(line + at, cap - at, " %*s", w, label);
}

void print_header(const columns *c)
{
    for (int line = 0; line < 2; line++) {
        const int top = line == 0;
        char l[256] = "";
        head_cell(l, sizeof l, -7, top ? "pin" : "");
        head_cell(l, sizeof l, 7, top ? "workers" : "");
        head_cell(l, sizeof l, 8, top ? "prefetch" : "");
        head_cell(l, sizeof l, 19,
                  top             ? "img/s"
                  : c->rounds > 1 ? "median (min-max)"
                                  : "");
        if (c->mb)
            head_cell(l, sizeof l, 8, top ? "MB/s" : "");
        if (c->h2d)
            head_cell(l, sizeof l, 8, top ? "H2D GB/s" : "");
        head_cell(l, sizeof l, 8, top ? "wait ms" : "");
        head_cell(l, sizeof l, 8, top ? "p99 ms" : "");
        if (c->stages) {
            head_cell(l, sizeof l, 7, top ? "read" : "us/img");
            head_cell(l, sizeof l, 8, top ? "decode" : "us/img");
            head_cell(l, sizeof l, 8, top ? "augment" : "us/img");
            head_cell(l, sizeof l, 7, top ? "copy" : "us/img");
        }
        if (c->step) {
            head_cell(l, sizeof l, 7, top ? "step ms" : "");
            head_cell(l, sizeof l, 7, top ? "overlap" : "");
        }
        if (c->vs)
            head_cell(l, sizeof l, 7, top ? "vs base" : "");
        if (c->decode) {
            head_cell(l, sizeof l, 8, top ? "decode" : "");
            head_cell(l, sizeof l, 7, top ? "cpu" : "us/img");
        }
        size_t end = strlen(l);
        while (end > 0 && l[end - 1] == ' ')
            end--;
        printf("%.*s\n", (int)end, l);
        if (!c->stages && !c->decode && c->rounds < 2)
            break; /* the second line only labels stage times and rounds */
    }
}

/* An img/s figure: whole above 100, one decimal below. */
static int rate(char *buf, size_t cap, double v)
{
    return snprintf(buf, cap, v >= 100 ? "%.0f" : "%.1f", v);
}

/* "median (min-max)", or the median alone from one round asked, or
 * "median (1 round)" where a signal cut a row's rounds short. */
static void rate_cell(char *buf, size_t cap, const columns *c, const row *r)
{
    const int at = rate(buf, cap, r->img_s);
    if (at < 0 || (size_t)at >= cap || c->rounds < 2)
        return;
    if (r->rounds < 2) {
        snprintf(buf + at, cap - (size_t)at, " (1 round)");
        return;
    }
    char lo[32], hi[32];
    rate(lo, sizeof lo, r->img_s_min);
    rate(hi, sizeof hi, r->img_s_max);
    snprintf(buf + at, cap - (size_t)at, " (%s-%s)", lo, hi);
}

/* The decoder a row asked for, and for auto what it became ("auto:gpu"). */
static void decode_cell(char *buf, size_t cap, const row *r)
{
    const char *asked = pl_decode_name((pl_decode)r->decode);
    const char *used = pl_decode_name((pl_decode)r->decode_used);
    if (r->decode == PL_DECODE_AUTO)
        snprintf(buf, cap, "auto:%s", used ? used : "?");
    else
        snprintf(buf, cap, "%s", asked ? asked : "?");
}

void print_row(const columns *c, const row *r)
{
    char h2d[16] = "-", step[16] = "-", ov[16] = "-", vs[16] = "-", img[80];
    if (r->vs_base >= 0)
        snprintf(vs, sizeof vs, "%.2fx", r->vs_base);
    if (r->h2d_gbs > 0)
        snprintf(h2d, sizeof h2d, "%.2f", r->h2d_gbs);
    if (r->step_ms >= 0) {
        snprintf(step, sizeof step, "%.2f", r->step_ms);
        snprintf(ov, sizeof ov, "%.0f%%", r->overlap_pct);
    }
    rate_cell(img, sizeof img, c, r);
    char w[16], q[16];
    bench_workers_word(w, sizeof w, r);
    bench_prefetch_word(q, sizeof q, r);
    printf("%-7s %7s %8s %19s", pin_name(r->pin), w, q, img);
    if (c->mb)
        printf(" %8.1f", r->mb_s);
    if (c->h2d)
        printf(" %8s", h2d);
    printf(" %8.2f %8.2f", r->wait_mean_ms, r->wait_p99_ms);
    if (c->stages)
        printf(" %7.0f %8.0f %8.0f %7.0f", r->us_read, r->us_decode,
               r->us_augment, r->us_copy);
    if (c->step)
        printf(" %7s %7s", step, ov);
    if (c->vs)
        printf(" %7s", vs);
    if (c->decode) {
        char dec[16], cpu[16] = "-";
        decode_cell(dec, sizeof dec, r);
        if (r->us_cpu >= 0)
            snprintf(cpu, sizeof cpu, "%.0f", r->us_cpu);
        printf(" %8s %7s", dec, cpu);
    }
    printf("\n");
    fflush(stdout);
}

/* "pin on, 2 workers, prefetch 4: 1234 img/s (1100-1290)" */
static void print_named(const char *lead, const row *r)
{
    char med[32], lo[32], hi[32];
    rate(med, sizeof med, r->img_s);
    rate(lo, sizeof lo, r->img_s_min);
    rate(hi, sizeof hi, r->img_s_max);
    char dec[16] = "";
    if (r->decode != PL_DECODE_CPU) {
        memcpy(dec, ", decode ", 9);
        decode_cell(dec + 9, sizeof dec - 9, r);
    }
    char w[16], q[16];
    bench_workers_word(w, sizeof w, r);
    bench_prefetch_word(q, sizeof q, r);
    printf("%spin %s, %s workers, prefetch %s%s: %s img/s", lead,
           pin_name(r->pin), w, q, dec, med);
    if (r->rounds > 1)
        printf(" (%s-%s)", lo, hi);
}

void print_verdict(const row *rows, int n)
{
    const bench_verdict v = bench_judge(rows, n);
    const row *f = &rows[v.fastest];
    const char *why = "the only row";
    char most[32];
    switch (v.judged) {
    case BENCH_CLEAR:
        rate(most, sizeof most, rows[v.nearest].img_s_max);
        print_named("best: ", f);
        printf("\n  clear of every other row: their highest round is %s at "
               "most\n",
               most);
        why = "the best row";
        break;
    case BENCH_WITHIN_SPREAD:
        printf("no row is clearly fastest: %d other row%s within the spread "
               "of the highest median\n",
               v.within, v.within == 1 ? " is" : "s are");
        print_named("  highest median: ", f);
        print_named("\n  nearest:        ", &rows[v.nearest]);
        printf("\n");
        why = "the fewest workers, then the least prefetch, of the rows "
              "within that spread";
        break;
    case BENCH_NO_SPREAD:
        printf("no row is clearly fastest: a row measured in one round has "
               "no spread to judge by\n");
        print_named("  highest: ", f);
        printf("\n");
        why = "the highest, not judged against the noise";
        break;
    case BENCH_ONE_ROW:
        break;
    }
    char line[256];
    printf("settings to paste (%s):\n", why);
    bench_paste_c(line, sizeof line, &rows[v.paste]);
    printf("  C:      %s\n", line);
    bench_paste_python(line, sizeof line, &rows[v.paste]);
    printf("  Python: %s\n", line);
    fflush(stdout);
}

/* A number, or empty where it does not apply (negative). */
static void csv_num(FILE *f, double v, const char *fmt)
{
    if (v >= 0)
        fprintf(f, fmt, v);
}

int write_csv(const char *path, const row *rows, int n, char *why,
              size_t whylen)
{
    FILE *f = cli_open_file(path, 1, why, whylen);
    if (!f)
        return -1;
    fprintf(f, "pin,workers,prefetch,images,batches,seconds,images_per_s,"
               "mb_per_s,h2d_gb_per_s,wait_mean_ms,wait_p99_ms,read_us,"
               "decode_us,augment_us,copy_us,load_ms,step_ms,overlap_pct,"
               "vs_baseline,gpu_idle_ms,late_ms,slot_wait_ms,buffer_wait_ms,"
               "rounds,images_per_s_min,images_per_s_max,"
               "images_per_s_rounds,decode,decode_used,cpu_us\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        char w[16], q[16];
        bench_workers_word(w, sizeof w, r);
        bench_prefetch_word(q, sizeof q, r);
        fprintf(f, "%s,%s,%s,%ld,%ld,%.9f,%.2f,%.2f,", pin_name(r->pin), w, q,
                r->images, r->batches, r->seconds, r->img_s, r->mb_s);
        csv_num(f, r->h2d_gbs > 0 ? r->h2d_gbs : -1, "%.3f");
        fprintf(f, ",%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,%.3f,", r->wait_mean_ms,
                r->wait_p99_ms, r->us_read, r->us_decode, r->us_augment,
                r->us_copy, r->load_ms);
        csv_num(f, r->step_ms, "%.3f");
        fputc(',', f);
        csv_num(f, r->overlap_pct, "%.1f");
        fputc(',', f);
        csv_num(f, r->vs_base, "%.3f");
        fputc(',', f);
        csv_num(f, r->gpu_idle_ms, "%.3f");
        fputc(',', f);
        csv_num(f, r->late_ms, "%.3f");
        fprintf(f, ",%.3f,%.3f,%d,%.2f,%.2f,", r->slot_wait_ms,
                r->buffer_wait_ms, r->rounds, r->img_s_min, r->img_s_max);
        for (int k = 0; k < r->rounds; k++)
            fprintf(f, "%s%.2f", k ? ";" : "", r->img_s_round[k]);
        const char *asked = pl_decode_name((pl_decode)r->decode);
        const char *used = pl_decode_name((pl_decode)r->decode_used);
        fprintf(f, ",%s,%s,", asked ? asked : "", used ? used : "");
        csv_num(f, r->us_cpu, "%.1f");
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

/* A row's settings as a JSON object. */
static void json_settings(FILE *f, const row *r)
{
    fprintf(f,
            "{\"pin\": \"%s\", \"workers\": %d, \"auto_workers\": %s, "
            "\"prefetch\": %d, \"auto_prefetch\": %s}",
            pin_name(r->pin), r->workers, r->auto_workers ? "true" : "false",
            r->prefetch_used, r->prefetch == PL_AUTO ? "true" : "false");
}

/* The verdict (bench_judge), as print_verdict prints it: the judgement,
 * the best row or null, and the settings pasted. */
static void write_json_verdict(FILE *f, const row *rows, int n)
{
    static const char *const judged[] = {
        [BENCH_CLEAR] = "clear",
        [BENCH_WITHIN_SPREAD] = "within_spread",
        [BENCH_NO_SPREAD] = "no_spread",
        [BENCH_ONE_ROW] = "one_row",
    };
    const bench_verdict v = bench_judge(rows, n);
    const row *p = &rows[v.paste];
    fprintf(f, "  \"judged\": \"%s\",\n  \"best\": ", judged[v.judged]);
    if (v.judged == BENCH_CLEAR)
        json_settings(f, &rows[v.fastest]);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"highest_median\": ");
    json_settings(f, &rows[v.fastest]);
    char w[16], q[16];
    snprintf(w, sizeof w, "%d", p->workers);
    snprintf(q, sizeof q, "%d", p->prefetch);
    fprintf(f,
            ",\n  \"settings\": {\"num_workers\": %s, \"prefetch\": %s, "
            "\"memory\": \"%s\"}\n",
            p->auto_workers ? "\"auto\"" : w,
            p->prefetch == PL_AUTO ? "\"auto\"" : q,
            pl_memory_name((pl_memory)p->pin));
}

int write_json(const char *path, const options *o, const char *mach,
               const char *backend, const row *rows, int n, char *why,
               size_t whylen)
{
    FILE *f = cli_open_file(path, 1, why, whylen);
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
    fprintf(f, ",\n  \"memcpy_pageable_gb_per_s\": ");
    json_num(f, o->memcpy_pageable_gbs > 0 ? o->memcpy_pageable_gbs : -1);
    fprintf(f, ",\n  \"gpu_normalize\": %s",
            o->gpu_normalize ? "true" : "false");
    char date[32];
    const time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    fprintf(f, ",\n  \"pinload_version\": ");
    json_string(f, pl_version());
    fprintf(f, ",\n  \"date\": \"%s\",\n  \"augment\": ", date);
    json_string(f, o->transform ? o->transform : pl_augment_name(o->augment));
    fprintf(f,
            ",\n  \"format\": \"%s\",\n  \"device\": %d,\n"
            "  \"warmup_batches\": %d,\n  \"batches_per_row\": %ld,\n"
            "  \"seconds_per_row\": %g,\n",
            pl_format_name(o->format), o->device, o->warmup,
            o->seconds > 0 ? -1L : o->batches, o->seconds);
    fprintf(f,
            "  \"batch\": %d,\n  \"size\": %d,\n  \"compute_ms\": %g,\n"
            "  \"rounds\": %d,\n  \"rows\": [\n",
            o->batch, o->size, o->compute_ms, o->rounds);
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f,
                "    {\"pin\": \"%s\", \"workers\": %d, \"auto_workers\": %s, "
                "\"prefetch\": %d, \"auto_prefetch\": %s, "
                "\"images\": %ld, \"batches\": %ld, \"seconds\": %.9f, "
                "\"images_per_s\": %.2f, \"mb_per_s\": %.2f, "
                "\"h2d_gb_per_s\": ",
                pin_name(r->pin), r->workers,
                r->auto_workers ? "true" : "false", r->prefetch_used,
                r->prefetch == PL_AUTO ? "true" : "false", r->images,
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
        fprintf(f, ", \"gpu_idle_ms\": ");
        json_num(f, r->gpu_idle_ms);
        fprintf(f, ", \"late_ms\": ");
        json_num(f, r->late_ms);
        fprintf(f, ", \"slot_wait_ms\": %.3f, \"buffer_wait_ms\": %.3f",
                r->slot_wait_ms, r->buffer_wait_ms);
        const char *asked = pl_decode_name((pl_decode)r->decode);
        const char *used = pl_decode_name((pl_decode)r->decode_used);
        fprintf(f,
                ", \"decode\": \"%s\", \"decode_used\": \"%s\", \"cpu_us\": ",
                asked ? asked : "", used ? used : "");
        json_num(f, r->us_cpu);
        fprintf(f, ", \"load_before_ms\": ");
        json_num(f, r->load_before_ms);
        fprintf(f, ", \"load_after_ms\": ");
        json_num(f, r->load_after_ms);
        fprintf(f,
                ", \"rounds\": %d, \"images_per_s_min\": %.2f, "
                "\"images_per_s_max\": %.2f, \"images_per_s_rounds\": [",
                r->rounds, r->img_s_min, r->img_s_max);
        for (int k = 0; k < r->rounds; k++)
            fprintf(f, "%s%.2f", k ? ", " : "", r->img_s_round[k]);
        fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "  ],\n");
    write_json_verdict(f, rows, n);
    fprintf(f, "}\n");
    return fclose(f);
}

/* s as a gnuplot single-quoted string, the one kind gnuplot never
 * expands (no backquote command, no @macro, no escape): a quote is
 * doubled, a control character (which would end the command) becomes '?'.
 * No user string reaches gnuplot any other way. */
static void gp_quote(FILE *g, const char *s)
{
    fputc('\'', g);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("''", g);
        else
            fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, g);
    }
    fputc('\'', g);
}

/* The chart's data: one block per (decode, pin, prefetch), its title
 * first. */
static int write_plot_data(FILE *f, const options *o, const row *rows, int n)
{
    for (int d = 0; d < o->ndecode; d++)
        for (int p = 0; p < o->npin; p++)
            for (int q = 0; q < o->nprefetch; q++) {
                char dec[32] = "";
                if (o->ndecode > 1)
                    snprintf(dec, sizeof dec, ", decode %s",
                             pl_decode_name((pl_decode)o->decode[d]));
                char pf[16];
                snprintf(pf, sizeof pf, "%d", o->prefetch[q]);
                fprintf(f, "\"pin %s, prefetch %s%s\"\n", pin_name(o->pin[p]),
                        o->prefetch[q] == PL_AUTO ? "auto" : pf, dec);
                for (int i = 0; i < n; i++)
                    if (rows[i].pin == o->pin[p] &&
                        rows[i].prefetch == o->prefetch[q] &&
                        rows[i].decode == o->decode[d])
                        fprintf(f, "%d %.2f %.2f %.2f\n", rows[i].workers,
                                rows[i].img_s, rows[i].img_s_min,
                                rows[i].img_s_max);
                fprintf(f, "\n\n");
            }
    return fflush(f);
}

/* The gnuplot script: images/s against workers, one line per (pin,
 * prefetch) through the medians, with bars from each row's lowest round
 * to its highest; the PNG on gnuplot's stdout (no output path in the
 * script). */
static void write_plot_script(FILE *g, const options *o, const char *mach,
                              const char *backend, const char *dat)
{
    int lo = o->workers[0], hi = o->workers[0];
    for (int i = 1; i < o->nworkers; i++) {
        lo = o->workers[i] < lo ? o->workers[i] : lo;
        hi = o->workers[i] > hi ? o->workers[i] : hi;
    }
    char tics[512] = "";
    for (int i = 0, o_ = 0; i < o->nworkers; i++)
        o_ += snprintf(tics + o_, sizeof tics - (size_t)o_, "%s%d",
                       i ? "," : "", o->workers[i]);
    char line1[1200], line2[800];
    snprintf(line1, sizeof line1, "pinload-bench: %s, %dx%d %s, batch %d",
             o->data, o->size, o->size,
             o->transform ? o->transform : pl_augment_name(o->augment),
             o->batch);
    snprintf(line2, sizeof line2, "%s; %s", mach, backend);
    fputs("set terminal pngcairo size 960,600 font ',10'\nset title ", g);
    gp_quote(g, line1);
    fputs(".\"\\n\".", g);
    gp_quote(g, line2);
    const int lines = o->ndecode * o->npin * o->nprefetch;
    char ylabel[96] = "images/s";
    if (o->rounds > 1)
        snprintf(ylabel, sizeof ylabel,
                 "images/s: median of %d rounds, bars lowest to highest",
                 o->rounds);
    fprintf(g,
            " noenhanced\nset xlabel 'worker threads'\n"
            "set ylabel '%s'\nset key outside right\nset grid\n"
            "set yrange [0:*]\nset xrange [%g:%g]\nset xtics (%s)\n"
            "plot for [i=0:%d] ",
            ylabel, lo - 0.5, hi + 0.5, tics, lines - 1);
    gp_quote(g, dat);
    /* Each line a little to the side, so that bars at one worker count
     * do not hide one another. */
    fprintf(g,
            " index i using ($1 + (i - %g) * %g):2:3:4 with yerrorlines "
            "lw 2 title columnheader(1)\n",
            (lines - 1) / 2.0, (hi - lo + 1) * 0.012);
}

/* gnuplot run directly (no shell), reading `script_fd`, its PNG going to
 * `out_fd`: its exit status, or -1 with errno. */
static int run_gnuplot(int script_fd, int out_fd)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, script_fd, STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    char *argv[] = {"gnuplot", NULL};
    pid_t pid;
    const int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A temporary file of ours closed (as a FILE, or its descriptor when
 * fdopen failed) and removed; nothing when mkstemp failed (fd < 0). */
static void drop_temp(FILE *f, int fd, const char *path)
{
    if (fd < 0)
        return;
    if (f)
        fclose(f);
    else
        close(fd);
    unlink(path);
}

int write_plot(const char *path, const options *o, const char *mach,
               const char *backend, const row *rows, int n, char *why,
               size_t whylen)
{
    /* The PNG is written beside `path` and renamed onto it: a failed plot
     * leaves no half PNG behind. (bench.c checked the path before the
     * sweep; a directory put there since makes the rename fail.) */
    char png[4200], script[] = "/tmp/pinload-plot-XXXXXX";
    if (snprintf(png, sizeof png, "%s.XXXXXX", path) >= (int)sizeof png) {
        snprintf(why, whylen, "%s", strerror(ENAMETOOLONG));
        return -1;
    }
    const int out = mkstemp(png);
    if (out < 0) {
        snprintf(why, whylen, "cannot write there: %s", strerror(errno));
        return -1;
    }
    int rc = -1;
    const int sfd = mkstemp(script);
    FILE *sf = sfd >= 0 ? fdopen(sfd, "w+") : NULL;
    char dat[] = "/tmp/pinload-plot-data-XXXXXX";
    const int dfd = mkstemp(dat);
    FILE *df = dfd >= 0 ? fdopen(dfd, "w") : NULL;
    if (!sf || !df || write_plot_data(df, o, rows, n) != 0) {
        snprintf(why, whylen, "a temporary file in /tmp: %s", strerror(errno));
        goto done;
    }
    write_plot_script(sf, o, mach, backend, dat);
    if (fflush(sf) != 0 || fseek(sf, 0, SEEK_SET) != 0) {
        snprintf(why, whylen, "a temporary file in /tmp: %s", strerror(errno));
        goto done;
    }
    const int g = run_gnuplot(fileno(sf), out);
    if (g != 0) {
        snprintf(why, whylen, "%s",
                 g < 0 ? "gnuplot cannot be run (is gnuplot installed?)"
                       : "gnuplot failed (its message is above)");
        goto done;
    }
    if (fsync(out) != 0 || fchmod(out, 0644) != 0 || rename(png, path) != 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (rc != 0)
        unlink(png);
    close(out);
    drop_temp(sf, sfd, script);
    drop_temp(df, dfd, dat);
    return rc;
}
