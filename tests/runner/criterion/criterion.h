/* The suites' test runner: a small stand-in for Criterion, used by every
 * build, plain and sanitized, so that a test behaves the same under both.
 *
 * Criterion itself cannot serve the sanitizer builds: its sandbox (BoxFort)
 * maps its shared arena at random fixed addresses that ThreadSanitizer's
 * memory layout reserves, so a Criterion test program cannot even start
 * under TSan, and under AddressSanitizer its parallel runner leaks 48 bytes
 * of its own, which LeakSanitizer reports. So the Makefile compiles every
 * suite against this header (-Itests/runner puts it before any system
 * <criterion/criterion.h>), and no build links libcriterion. It implements
 * the part of Criterion's API the suites use, with the same meaning:
 *
 *   Test(suite, name, .timeout = seconds)
 *   cr_assert, cr_assert_{eq,neq,lt,leq,gt,geq,null,not_null},
 *   cr_assert_{str_eq,str_neq,arr_eq,float_eq}, each with an optional
 *   printf-style message; cr_skip_test(fmt, ...); cr_log_info(fmt, ...)
 *
 * and a main() that runs every test in a child process of its own (a
 * failed assertion ends that test; a crash, a sanitizer report or a timeout
 * fails it; the others go on), --jobs N at a time, --filter
 * suite/name-pattern, and Criterion's closing line ("[====] Synthesis:
 * Tested: N | Passing: N | Failing: N | Crashing: N", then "| Skipped: N").
 * Timeouts are multiplied by PL_TEST_TIMEOUT_SCALE (default 10 in a
 * sanitizer build, which is slow, and 1 otherwise, as with Criterion). A
 * test file is one translation unit, so main() may live here. */
#ifndef PINLOAD_TEST_RUNNER_CRITERION_H
#define PINLOAD_TEST_RUNNER_CRITERION_H

#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct crs_test {
    const char *suite, *name;
    void (*fn)(void);
    double timeout; /* seconds; 0: the runner's default */
    struct crs_test *next;
};

static struct crs_test *crs_tests, **crs_tail = &crs_tests;

#define CRS_SKIP_STATUS 77

/* Sanitizer builds run slower: their timeouts are scaled by default. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CRS_DEFAULT_SCALE 10.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CRS_DEFAULT_SCALE 10.0
#endif
#endif
#ifndef CRS_DEFAULT_SCALE
#define CRS_DEFAULT_SCALE 1.0
#endif

#define Test(S, N, ...)                                                        \
    static void S##_##N##_fn(void);                                            \
    static struct crs_test S##_##N##_test = {                                  \
        .suite = #S, .name = #N, .fn = S##_##N##_fn, __VA_ARGS__};             \
    __attribute__((constructor)) static void S##_##N##_reg(void)               \
    {                                                                          \
        *crs_tail = &S##_##N##_test;                                           \
        crs_tail = &S##_##N##_test.next;                                       \
    }                                                                          \
    static void S##_##N##_fn(void)

/* A failed assertion: report it and end the test. */
__attribute__((format(printf, 4, 5), noreturn)) static void
crs_fail(const char *file, int line, const char *what, const char *fmt, ...)
{
    fprintf(stderr, "%s:%d: assertion failed: %s", file, line, what);
    if (fmt[2]) { /* ": " and a message */
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    exit(1);
}

/* `": " __VA_ARGS__` turns an absent message into ": " and a present one
 * into ": " and its format string. As in Criterion, the message's
 * arguments are evaluated only when the assertion fails, after its
 * condition (which may be what sets them). */
#define CRS_CHECK_(ok, what, ...)                                              \
    ((ok) ? (void)0 : crs_fail(__FILE__, __LINE__, what, ": " __VA_ARGS__))

#define cr_assert(e, ...) CRS_CHECK_(!!(e), #e, __VA_ARGS__)
#define cr_assert_eq(a, b, ...)                                                \
    CRS_CHECK_((a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...)                                               \
    CRS_CHECK_((a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CRS_CHECK_((a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...)                                               \
    CRS_CHECK_((a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CRS_CHECK_((a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...)                                               \
    CRS_CHECK_((a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_null(p, ...)                                                 \
    CRS_CHECK_((p) == NULL, #p " is NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...)                                             \
    CRS_CHECK_((p) != NULL, #p " is not NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...)                                            \
    CRS_CHECK_(strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...)                                           \
    CRS_CHECK_(strcmp((a), (b)) != 0, #a " differs from " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, size, ...)                                      \
    CRS_CHECK_(memcmp((a), (b), (size)) == 0,                                  \
               "the " #size " bytes of " #a " equal " #b, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                     \
    CRS_CHECK_((a) - (b) <= (eps) && (b) - (a) <= (eps),                       \
               #a " == " #b " within " #eps, __VA_ARGS__)

#define cr_log_info(...)                                                       \
    (fputs("[----] ", stderr), fprintf(stderr, __VA_ARGS__),                   \
     fputc('\n', stderr))
#define cr_skip_test(...)                                                      \
    (fputs("[----] skipped:", stderr), fprintf(stderr, " " __VA_ARGS__),       \
     fputc('\n', stderr), exit(CRS_SKIP_STATUS))

static double crs_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct crs_running {
    pid_t pid;
    struct crs_test *t;
    double start;
} crs_running;

/* Reports one finished child; returns 0 pass, 1 fail, 2 crash, 3 skip. */
static int crs_report(const crs_running *r, int status)
{
    const double s = crs_now() - r->start;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        fprintf(stderr, "[PASS] %s::%s: (%.2fs)\n", r->t->suite, r->t->name, s);
        return 0;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == CRS_SKIP_STATUS) {
        fprintf(stderr, "[SKIP] %s::%s\n", r->t->suite, r->t->name);
        return 3;
    }
    if (WIFEXITED(status)) {
        fprintf(stderr, "[FAIL] %s::%s: (%.2fs)\n", r->t->suite, r->t->name, s);
        return 1;
    }
    const int sig = WTERMSIG(status);
    fprintf(stderr, "[FAIL] %s::%s: %s after %.2fs\n", r->t->suite, r->t->name,
            sig == SIGALRM ? "timed out" : strsignal(sig), s);
    return 2;
}

int main(int argc, char **argv)
{
    int jobs = 1;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (!strncmp(argv[i], "--jobs=", 7))
            jobs = atoi(argv[i] + 7);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strncmp(argv[i], "--filter=", 9))
            filter = argv[i] + 9;
    }
    if (jobs < 1)
        jobs = 1;
    const char *sc = getenv("PL_TEST_TIMEOUT_SCALE");
    const double scale = sc && atof(sc) > 0 ? atof(sc) : CRS_DEFAULT_SCALE;

    crs_running *run = calloc((size_t)jobs, sizeof *run);
    int counts[4] = {0}, tested = 0, busy = 0;
    struct crs_test *next = crs_tests;
    fflush(NULL);
    while (next || busy) {
        if (next && busy < jobs) {
            struct crs_test *t = next;
            next = next->next;
            char full[256];
            snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
            if (filter && fnmatch(filter, full, 0) != 0)
                continue;
            int slot = 0;
            while (run[slot].pid)
                slot++;
            const pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                return 2;
            }
            if (pid == 0) {
                const double limit =
                    (t->timeout > 0 ? t->timeout : 300) * scale;
                alarm((unsigned)(limit + 1));
                t->fn();
                fflush(NULL);
                exit(0);
            }
            run[slot] = (crs_running){pid, t, crs_now()};
            busy++;
            tested++;
            continue;
        }
        int status;
        const pid_t pid = wait(&status);
        if (pid < 0) {
            perror("wait");
            return 2;
        }
        for (int i = 0; i < jobs; i++)
            if (run[i].pid == pid) {
                counts[crs_report(&run[i], status)]++;
                run[i].pid = 0;
                busy--;
            }
    }
    free(run);
    fprintf(stderr,
            "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | "
            "Crashing: %d | Skipped: %d\n",
            tested, counts[0], counts[1], counts[2], counts[3]);
    return counts[1] || counts[2] ? 1 : 0;
}

#endif
