/* pinload-bench's rounds (tools/bench_rounds.h), on figures set by hand:
 * the median of a row's rounds, its spread, the verdict on the fastest
 * row and the settings to paste. tests/tools/test_bench.c runs the tool
 * itself; here every case is exact, whatever the machine's noise. */
#include <math.h>

#include "testutil.h"
/* After testutil.h: its JPEG writer's local `row` would shadow bench.h's
 * type. */
#include "../../tools/bench_rounds.h"

Test(bench_rounds, median_is_the_middle_round_or_the_mean_of_the_middle_two)
{
    cr_assert_eq(bench_median((const double[]){5}, 1), 5);
    cr_assert_eq(bench_median((const double[]){3, 1, 2}, 3), 2);
    cr_assert_eq(bench_median((const double[]){4, 1, 3, 2}, 4), 2.5);
    cr_assert_eq(bench_median((const double[]){9, 9, 1, 9, 1}, 5), 9);
    /* a figure that does not apply (negative) is left out */
    cr_assert_eq(bench_median((const double[]){-1, 4, 2}, 3), 3);
    cr_assert_eq(bench_median((const double[]){-1, -1}, 2), -1);
    cr_assert_eq(bench_median((const double[]){0, 0, 7}, 3), 0);
    /* the values are left in their order */
    double v[3] = {3, 1, 2};
    bench_median(v, 3);
    cr_assert(v[0] == 3 && v[1] == 1 && v[2] == 2);
}

/* A row as one round measured it: its settings and img/s; every other
 * figure `other`. */
static row round_of(int pin, int workers, int prefetch, double img_s,
                    double other)
{
    row r = {.pin = pin, .workers = workers, .prefetch = prefetch};
    for (size_t f = 0; f < BENCH_FIGURES; f++)
        r.figure[f] = other;
    r.img_s = img_s;
    r.images = 12;
    r.batches = 3;
    return r;
}

Test(bench_rounds, a_row_is_each_figures_median_with_every_rounds_rate_kept)
{
    row rd[3] = {round_of(PL_MEMORY_PAGEABLE, 4, 2, 300, 1),
                 round_of(PL_MEMORY_PAGEABLE, 4, 2, 100, 3),
                 round_of(PL_MEMORY_PAGEABLE, 4, 2, 200, 2)};
    rd[0].step_ms = -1; /* the round a signal cut short */
    rd[1].step_ms = 5;
    rd[2].step_ms = 7;
    rd[2].images = 99;
    double vals[3];
    row r;
    bench_combine(rd, 3, vals, &r);
    cr_assert_eq(r.pin, PL_MEMORY_PAGEABLE);
    cr_assert(r.workers == 4 && r.prefetch == 2);
    cr_assert_eq(r.rounds, 3);
    cr_assert_eq(r.img_s, 200, "the median, not the mean or the last");
    cr_assert(r.img_s_min == 100 && r.img_s_max == 300);
    cr_assert(r.img_s_round == vals && vals[0] == 300 && vals[1] == 100 &&
                  vals[2] == 200,
              "each round's, in the order measured");
    /* every figure, the first and the last of the list too */
    cr_assert_eq(r.seconds, 2);
    cr_assert_eq(r.load_ms, 2);
    cr_assert_eq(r.load_after_ms, 2);
    cr_assert_eq(r.buffer_wait_ms, 2);
    cr_assert_eq(r.step_ms, 6, "the rounds it applied to");
    cr_assert_eq(r.images, 12);
    cr_assert_eq(r.batches, 3);
}

/* rows[i] from its rounds' img/s, three rounds each. */
static void make_rows(row *rows, double (*rates)[3], const int (*set)[3], int n,
                      double *vals)
{
    for (int i = 0; i < n; i++) {
        row rd[3];
        for (int k = 0; k < 3; k++)
            rd[k] = round_of(set[i][0], set[i][1], set[i][2], rates[i][k], 1);
        bench_combine(rd, 3, vals + 3 * i, &rows[i]);
    }
}

Test(bench_rounds, best_only_where_its_lowest_beats_every_other_rows_highest)
{
    static const int set[3][3] = {{PL_MEMORY_PINNED, 1, 2},
                                  {PL_MEMORY_PINNED, 2, 2},
                                  {PL_MEMORY_PAGEABLE, 4, 1}};
    row rows[3];
    double vals[9];
    /* clear: 121 beats 120 */
    make_rows(rows, (double[][3]){{100, 110, 120}, {121, 130, 140}}, set, 2,
              vals);
    bench_verdict v = bench_judge(rows, 2);
    cr_assert_eq(v.judged, BENCH_CLEAR);
    cr_assert(v.fastest == 1 && v.paste == 1 && v.nearest == 0 &&
              v.within == 0);
    /* touching is not beating */
    make_rows(rows, (double[][3]){{100, 110, 121}, {121, 130, 140}}, set, 2,
              vals);
    v = bench_judge(rows, 2);
    cr_assert_eq(v.judged, BENCH_WITHIN_SPREAD);
    cr_assert(v.fastest == 1 && v.nearest == 0 && v.within == 1);
    /* within the spread, the fewest workers are pasted */
    cr_assert_eq(v.paste, 0);
    /* a row of a low median but a wide spread counts: its highest round
     * reaches the fastest's lowest, though the runner-up's does not */
    make_rows(rows,
              (double[][3]){{100, 110, 120}, {121, 130, 140}, {50, 60, 125}},
              set, 3, vals);
    v = bench_judge(rows, 3);
    cr_assert_eq(v.judged, BENCH_WITHIN_SPREAD);
    cr_assert(v.fastest == 1 && v.within == 1 && v.nearest == 2);
    cr_assert_eq(v.paste, 1, "4 workers cost more than 2");
    /* clear of all three: nearest is the other row of the highest round */
    make_rows(rows,
              (double[][3]){{100, 110, 118}, {121, 130, 140}, {50, 60, 119}},
              set, 3, vals);
    v = bench_judge(rows, 3);
    cr_assert_eq(v.judged, BENCH_CLEAR);
    cr_assert(v.fastest == 1 && v.nearest == 2 && v.paste == 1);
}

/* Two rows of the same settings measure the same thing. Rows that drew
 * the same rates, in any order, are never told apart; rows that drew
 * others are told apart exactly when the fastest's lowest round beats the
 * other's highest. */
Test(bench_rounds, rows_of_the_same_rates_are_never_told_apart)
{
    static const int set[2][3] = {{PL_MEMORY_PINNED, 2, 2},
                                  {PL_MEMORY_PINNED, 2, 2}};
    unsigned seed = 39;
    int clear = 0;
    for (int t = 0; t < 2000; t++) {
        double rates[2][3];
        for (int k = 0; k < 3; k++)
            rates[0][k] = 1000 + (double)(rand_r(&seed) % 2000);
        for (int k = 0; k < 3; k++)
            rates[1][k] = t % 2 ? rates[0][(k + 1 + t % 4 / 2) % 3]
                                : 1000 + (double)(rand_r(&seed) % 2000);
        row rows[2];
        double vals[6];
        make_rows(rows, rates, set, 2, vals);
        const bench_verdict v = bench_judge(rows, 2);
        const row *f = &rows[v.fastest], *o = &rows[1 - v.fastest];
        cr_assert(f->img_s >= o->img_s);
        if (t % 2)
            cr_assert_eq(v.judged, BENCH_WITHIN_SPREAD, "the same rates");
        else
            cr_assert_eq(v.judged == BENCH_CLEAR, f->img_s_min > o->img_s_max,
                         "%g-%g against %g-%g", f->img_s_min, f->img_s_max,
                         o->img_s_min, o->img_s_max);
        clear += v.judged == BENCH_CLEAR;
    }
    /* independent draws part 1 time in 10 (2 x 3!3!/6!): both cases met */
    cr_assert(clear > 20 && clear < 200, "%d of 1000 draws clear", clear);
}

Test(bench_rounds, one_round_or_one_row_has_nothing_to_judge_by)
{
    row one[2], rd;
    double vals[2];
    rd = round_of(PL_MEMORY_PINNED, 1, 1, 100, 1);
    bench_combine(&rd, 1, &vals[0], &one[0]);
    rd = round_of(PL_MEMORY_PINNED, 2, 1, 900, 1);
    bench_combine(&rd, 1, &vals[1], &one[1]);
    cr_assert_eq(one[1].rounds, 1);
    cr_assert(one[1].img_s_min == 900 && one[1].img_s_max == 900);
    bench_verdict v = bench_judge(one, 2);
    cr_assert_eq(v.judged, BENCH_NO_SPREAD, "9x apart, but measured once");
    cr_assert(v.fastest == 1 && v.paste == 1 && v.nearest == -1);
    v = bench_judge(one, 1);
    cr_assert_eq(v.judged, BENCH_ONE_ROW);
    cr_assert(v.fastest == 0 && v.paste == 0);
}

/* The cheapest within the spread: fewest workers, then least prefetch,
 * then pinned (the library's default) before pageable and managed. */
Test(bench_rounds, the_paste_within_the_spread_is_the_cheapest_row)
{
    static const int set[4][3] = {{PL_MEMORY_MANAGED, 2, 1},
                                  {PL_MEMORY_PAGEABLE, 2, 1},
                                  {PL_MEMORY_PINNED, 2, 4},
                                  {PL_MEMORY_PINNED, 8, 1}};
    row rows[4];
    double vals[12];
    make_rows(
        rows,
        (double[][3]){
            {90, 100, 110}, {95, 100, 105}, {99, 101, 103}, {98, 102, 104}},
        set, 4, vals);
    const bench_verdict v = bench_judge(rows, 4);
    cr_assert_eq(v.judged, BENCH_WITHIN_SPREAD);
    cr_assert_eq(v.fastest, 3);
    cr_assert_eq(v.within, 3);
    cr_assert_eq(v.nearest, 2, "the highest median of the others");
    cr_assert_eq(v.paste, 1, "2 workers, prefetch 1, pageable before managed");
}

Test(bench_rounds, the_settings_to_paste_are_c_and_python)
{
    row r = round_of(PL_MEMORY_PINNED, 4, 2, 1, 1);
    char buf[256];
    bench_paste_c(buf, sizeof buf, &r);
    cr_assert_str_eq(buf, "cfg.num_workers = 4; cfg.prefetch = 2; "
                          "cfg.memory = PL_MEMORY_PINNED;");
    bench_paste_python(buf, sizeof buf, &r);
    cr_assert_str_eq(buf, "pinload.Loader(..., num_workers=4, prefetch=2, "
                          "memory=\"pinned\")");
    /* --workers auto: the row shows the count it settled on; the
     * settings say PL_AUTO, since that is what the row measured */
    r.auto_workers = 1;
    r.threads = 4;
    r.workers = 3;
    bench_workers_word(buf, sizeof buf, &r);
    cr_assert_str_eq(buf, "auto:3");
    bench_paste_c(buf, sizeof buf, &r);
    cr_assert_str_eq(buf, "cfg.num_workers = PL_AUTO; cfg.prefetch = 2; "
                          "cfg.memory = PL_MEMORY_PINNED;");
    bench_paste_python(buf, sizeof buf, &r);
    cr_assert_str_eq(buf, "pinload.Loader(..., num_workers=\"auto\", "
                          "prefetch=2, memory=\"pinned\")");
    r.auto_workers = 0;
    bench_workers_word(buf, sizeof buf, &r);
    cr_assert_str_eq(buf, "3");
    /* every memory of the header's list, by its enumerator's name */
#define CHECK_(name, value, word)                                              \
    cr_assert_str_eq(bench_memory_enum(value), "PL_MEMORY_" #name);            \
    r.pin = value;                                                             \
    bench_paste_python(buf, sizeof buf, &r);                                   \
    cr_assert_not_null(strstr(buf, "memory=\"" word "\")"), "%s", buf);
    PL_MEMORY_MAP(CHECK_)
#undef CHECK_
}
