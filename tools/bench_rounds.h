/* pinload-bench's rounds. A row measured once is one draw of the
 * machine's noise: on the shared 2-core VM one sweep put pageable memory
 * at 1,214 img/s against 2,408 for pinned and the reverse on a rerun
 * (issue 39). So every combination is measured once a round, the rounds
 * interleaved (round 1: every row, round 2: every row...) so that a slow
 * spell of the machine falls on every row alike; a row reports each
 * figure's median over its rounds, and keeps its lowest and highest img/s
 * and each round's. One row is declared the fastest only where its lowest
 * round beats every other row's highest; and the settings to paste are
 * that row's, or where none is clearly fastest, the cheapest of the rows
 * within the spread of the highest median.
 *
 * Header-only, as tools/cli.h is, so that its suite
 * (tests/tools/test_bench_rounds.c) reaches it as the tool does. */
#ifndef PINLOAD_BENCH_ROUNDS_H
#define PINLOAD_BENCH_ROUNDS_H

#include <assert.h>
#include <math.h>
#include <stdio.h>

#include "bench.h"
#include "pinload.h"

/* The median of those of v[0..n-1] that apply (>= 0): the middle one, or
 * the mean of the middle two; -1 where none applies. v is left as it is. */
static inline double bench_median(const double *v, int n)
{
    assert(n >= 0 && n <= BENCH_ROUNDS_MAX);
    double s[BENCH_ROUNDS_MAX];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!(v[i] >= 0))
            continue;
        int j = k++;
        for (; j > 0 && s[j - 1] > v[i]; j--) /* insertion: n is small */
            s[j] = s[j - 1];
        s[j] = v[i];
    }
    if (k == 0)
        return -1;
    return k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
}

/* The reported row of one combination from its k rounds (round[0..k-1],
 * in the order measured, 1 <= k <= BENCH_ROUNDS_MAX): round[0]'s
 * settings; every figure the median of the rounds' (a figure that did not
 * apply in a round, one cut short by a signal say, is left out of it);
 * the images and batches their medians too; each round's img/s copied to
 * vals[0..k-1], which out->img_s_round then points to (vals must outlive
 * out), and their lowest and highest. */
static inline void bench_combine(const row *round, int k, double *vals,
                                 row *out)
{
    assert(k >= 1 && k <= BENCH_ROUNDS_MAX);
    double v[BENCH_ROUNDS_MAX];
    *out = round[0];
    for (size_t f = 0; f < BENCH_FIGURES; f++) {
        for (int i = 0; i < k; i++)
            v[i] = round[i].figure[f];
        out->figure[f] = bench_median(v, k);
    }
    for (int i = 0; i < k; i++)
        v[i] = (double)round[i].images;
    out->images = lround(bench_median(v, k));
    for (int i = 0; i < k; i++)
        v[i] = (double)round[i].batches;
    out->batches = lround(bench_median(v, k));
    out->rounds = k;
    out->img_s_min = out->img_s_max = round[0].img_s;
    for (int i = 0; i < k; i++) {
        vals[i] = round[i].img_s;
        out->img_s_min = fmin(out->img_s_min, vals[i]);
        out->img_s_max = fmax(out->img_s_max, vals[i]);
    }
    out->img_s_round = vals;
}

/* What the rows allow to be said of the fastest. */
typedef enum bench_judged {
    /* Its lowest round beats every other row's highest. */
    BENCH_CLEAR,
    /* Some other row's highest round reaches its lowest: the rows differ
     * by less than the noise. */
    BENCH_WITHIN_SPREAD,
    /* Some row was measured once (--rounds 1, or a sweep stopped by a
     * signal): no spread to judge by. */
    BENCH_NO_SPREAD,
    /* Nothing to compare. */
    BENCH_ONE_ROW,
} bench_judged;

typedef struct bench_verdict {
    bench_judged judged;
    int fastest; /* the row of the highest median img/s (the first of ties) */
    /* BENCH_CLEAR: the other row of the highest highest round (what the
     * fastest is clear of); BENCH_WITHIN_SPREAD: of the rows within the
     * spread, the one of the highest median; -1 otherwise. */
    int nearest;
    int within; /* the other rows whose highest round reaches its lowest */
    /* The row whose settings to paste: the fastest, except within the
     * spread: there, of the fastest and the rows within its spread, the
     * one of the fewest workers, then the least prefetch, then the lowest
     * pl_memory (pinned, the library's default, first): as fast as this
     * run can tell, for fewer threads and less pinned memory. */
    int paste;
} bench_verdict;

/* Row r's ring slots: prefetch, or what --prefetch auto grew to. */
static inline int bench_slots(const row *r)
{
    return r->prefetch == PL_AUTO ? r->prefetch_used : r->prefetch;
}

/* Whether row a costs less than row b, as bench_verdict.paste orders. */
static inline int bench_cheaper(const row *a, const row *b)
{
    if (a->workers != b->workers)
        return a->workers < b->workers;
    if (bench_slots(a) != bench_slots(b))
        return bench_slots(a) < bench_slots(b);
    return a->pin < b->pin;
}

/* The verdict on rows[0..n-1], n >= 1, each from bench_combine. */
static inline bench_verdict bench_judge(const row *rows, int n)
{
    assert(n >= 1);
    bench_verdict v = {.fastest = 0, .nearest = -1, .paste = 0};
    int once = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].img_s > rows[v.fastest].img_s)
            v.fastest = i;
        once |= rows[i].rounds < 2;
    }
    const row *f = &rows[v.fastest];
    v.paste = v.fastest;
    if (n == 1) {
        v.judged = BENCH_ONE_ROW;
        return v;
    }
    if (once) {
        v.judged = BENCH_NO_SPREAD;
        return v;
    }
    int top = -1; /* the other row of the highest highest round */
    for (int i = 0; i < n; i++) {
        if (i == v.fastest)
            continue;
        if (top < 0 || rows[i].img_s_max > rows[top].img_s_max)
            top = i;
        if (rows[i].img_s_max < f->img_s_min)
            continue;
        v.within++;
        if (v.nearest < 0 || rows[i].img_s > rows[v.nearest].img_s)
            v.nearest = i;
        if (bench_cheaper(&rows[i], &rows[v.paste]))
            v.paste = i;
    }
    if (v.within == 0) {
        v.judged = BENCH_CLEAR;
        v.nearest = top;
    } else {
        v.judged = BENCH_WITHIN_SPREAD;
    }
    return v;
}

/* The C enumerator of a pl_memory ("PL_MEMORY_PINNED"), from the
 * header's list. */
static inline const char *bench_memory_enum(int memory)
{
    switch (memory) {
#define BENCH_MEMORY_ENUM_(name, value, word)                                  \
    case value:                                                                \
        return "PL_MEMORY_" #name;
        PL_MEMORY_MAP(BENCH_MEMORY_ENUM_)
#undef BENCH_MEMORY_ENUM_
    }
    return "?";
}

/* Row r's settings as C statements on a pl_config named cfg. */
/* Row r's workers as the table and the CSV show them: "2", or "auto:2"
 * (the count --workers auto settled on). */
static inline void bench_workers_word(char *buf, size_t cap, const row *r)
{
    snprintf(buf, cap, r->auto_workers ? "auto:%d" : "%d", r->workers);
}

/* Row r's prefetch likewise: "2", or "auto:3" (the slots --prefetch auto
 * grew to). */
static inline void bench_prefetch_word(char *buf, size_t cap, const row *r)
{
    if (r->prefetch == PL_AUTO)
        snprintf(buf, cap, "auto:%d", r->prefetch_used);
    else
        snprintf(buf, cap, "%d", r->prefetch);
}

static inline void bench_paste_c(char *buf, size_t cap, const row *r)
{
    const char *decode = r->decode == PL_DECODE_GPU    ? " cfg.decode = "
                                                         "PL_DECODE_GPU;"
                         : r->decode == PL_DECODE_AUTO ? " cfg.decode = "
                                                         "PL_DECODE_AUTO;"
                                                       : "";
    char w[16], q[16];
    snprintf(w, sizeof w, "%d", r->workers);
    snprintf(q, sizeof q, "%d", r->prefetch);
    snprintf(buf, cap,
             "cfg.num_workers = %s; cfg.prefetch = %s; cfg.memory = %s;%s",
             r->auto_workers ? "PL_AUTO" : w,
             r->prefetch == PL_AUTO ? "PL_AUTO" : q, bench_memory_enum(r->pin),
             decode);
}

/* Row r's settings as the keywords of Python's pinload.Loader
 * (python/pinload/_options.py: num_workers, prefetch, memory). */
static inline void bench_paste_python(char *buf, size_t cap, const row *r)
{
    const char *word = pl_memory_name((pl_memory)r->pin);
    char decode[32] = "";
    if (r->decode != PL_DECODE_CPU)
        snprintf(decode, sizeof decode, ", decode=\"%s\"",
                 pl_decode_name((pl_decode)r->decode));
    char w[16], q[16];
    snprintf(w, sizeof w, "%d", r->workers);
    snprintf(q, sizeof q, "%d", r->prefetch);
    snprintf(buf, cap,
             "pinload.Loader(..., num_workers=%s, prefetch=%s, "
             "memory=\"%s\"%s)",
             r->auto_workers ? "\"auto\"" : w,
             r->prefetch == PL_AUTO ? "\"auto\"" : q, word ? word : "?",
             decode);
}

#endif
