/* What pinload's command-line tools (and the programs in examples/) share:
 * strict integer, number and choice arguments, usage errors, mkdir -p and
 * the listing of problem files. Header-only. */
#ifndef PINLOAD_CLI_H
#define PINLOAD_CLI_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinload.h"

/* The integer in v, in [lo, hi]; otherwise print "PROG: FLAG: ..." and the
 * usage to stderr and exit 2. */
static inline long cli_long(const char *prog, const char *usage,
                            const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    const long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < lo || n > hi) {
        fprintf(stderr, "%s: %s: \"%s\" is not an integer in [%ld, %ld]\n%s",
                prog, flag, v, lo, hi, usage);
        exit(2);
    }
    return n;
}

/* A usage error: "PROG: " and the reason (printf's format) to stderr, then
 * the usage, and exit 2. */
static inline void cli_usage_error(const char *prog, const char *usage,
                                   const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static inline void cli_usage_error(const char *prog, const char *usage,
                                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage);
    exit(2);
}

/* The number in v, between lo and hi: each bound included unless `open`
 * excludes it (CLI_OPEN_LO, CLI_OPEN_HI; a learning rate must be above 0,
 * a momentum below 1); otherwise print "PROG: FLAG: ..." and the usage to
 * stderr and exit 2. */
#define CLI_OPEN_LO 1
#define CLI_OPEN_HI 2
static inline double cli_double(const char *prog, const char *usage,
                                const char *flag, const char *v, double lo,
                                double hi, int open)
{
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    const int above = open & CLI_OPEN_LO ? x > lo : x >= lo;
    const int below = open & CLI_OPEN_HI ? x < hi : x <= hi;
    if (!*v || *end || errno || !above || !below) {
        fprintf(stderr, "%s: %s: \"%s\" is not a number in %c%g, %g%c\n%s",
                prog, flag, v, open & CLI_OPEN_LO ? '(' : '[', lo, hi,
                open & CLI_OPEN_HI ? ')' : ']', usage);
        exit(2);
    }
    return x;
}

/* An unsigned 64-bit integer (decimal, 0x hexadecimal or 0 octal), such as
 * a seed; otherwise the same as cli_long. */
static inline uint64_t cli_u64(const char *prog, const char *usage,
                               const char *flag, const char *v)
{
    char *end;
    errno = 0;
    const unsigned long long n = strtoull(v, &end, 0);
    if (!*v || *end || errno || *v == '-') {
        fprintf(stderr, "%s: %s: \"%s\" is not an unsigned 64-bit integer\n%s",
                prog, flag, v, usage);
        exit(2);
    }
    return (uint64_t)n;
}

/* The index of v in `names` (NULL-terminated); otherwise print "PROG: FLAG:
 * ..." naming the choices and the usage to stderr and exit 2. */
static inline int cli_choice(const char *prog, const char *usage,
                             const char *flag, const char *v,
                             const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    fprintf(stderr, "%s: %s: unknown value \"%s\" (", prog, flag, v);
    for (int i = 0; names[i]; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", names[i]);
    fprintf(stderr, ")\n%s", usage);
    exit(2);
}

/* The exit codes every tool documents in its --help. */
#define CLI_EXIT_CODES                                                         \
    "Exit status: 0 done; 1 a run-time failure (named on stderr); 2 a usage\n" \
    "error (the reason, then this usage, on stderr); 128 + N after signal N\n" \
    "(SIGINT, SIGTERM, SIGHUP), once what was done is written.\n"

/* --version: the tool's name and the library's version, on stdout. */
static inline void cli_version(const char *prog)
{
    printf("%s (pinload %s)\n", prog, pl_version());
    exit(0);
}

/* --help and -h: the usage on stdout, exit 0. */
static inline void cli_help(const char *usage, const char *f)
{
    if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
        fputs(usage, stdout);
        exit(0);
    }
}

/* The options every tool takes alike: --help and -h (cli_help), --version
 * (exit 0) and --quiet (*quiet = 1). 1 if f was --quiet, 0 if it is none of
 * them. */
static inline int cli_common(const char *prog, const char *usage, const char *f,
                             int *quiet)
{
    cli_help(usage, f);
    if (strcmp(f, "--version") == 0)
        cli_version(prog);
    if (strcmp(f, "--quiet") != 0)
        return 0;
    *quiet = 1;
    return 1;
}

/* The value of option argv[*i] (which takes one), advancing *i. An option
 * not in `valued` is unknown, wherever it stands (even last); a known one
 * with nothing after it needs a value. Either prints "PROG: ..." and the
 * usage to stderr and exits 2. */
static inline const char *cli_value(const char *prog, const char *usage,
                                    const char *const *valued, int argc,
                                    char **argv, int *i)
{
    const char *f = argv[*i];
    int known = 0;
    for (const char *const *v = valued; *v && !known; v++)
        known = strcmp(*v, f) == 0;
    if (!known && f[0] == '-')
        fprintf(stderr, "%s: unknown option %s\n%s", prog, f, usage);
    else if (!known)
        fprintf(stderr, "%s: unexpected argument \"%s\"\n%s", prog, f, usage);
    else if (*i + 1 >= argc)
        fprintf(stderr, "%s: %s needs a value\n%s", prog, f, usage);
    else
        return argv[++*i];
    exit(2);
}

/* --device, the same words in every tool: auto (the calling thread's CUDA
 * device, else the host), host, local-rank (the launcher's local rank),
 * cuda (CUDA device 0, or fail), cuda:N or N (CUDA device N, or fail).
 * [out] *must_cuda: 1 if a CUDA device was named. */
#define CLI_DEVICES "auto|host|local-rank|cuda|cuda:N"
static inline int cli_device(const char *prog, const char *usage,
                             const char *flag, const char *v, int *must_cuda)
{
    *must_cuda = 0;
    if (strcmp(v, "auto") == 0)
        return PL_DEVICE_AUTO;
    if (strcmp(v, "host") == 0)
        return PL_DEVICE_HOST;
    if (strcmp(v, "local-rank") == 0)
        return PL_DEVICE_LOCAL_RANK;
    *must_cuda = 1;
    if (strcmp(v, "cuda") == 0)
        return 0;
    const char *n = strncmp(v, "cuda:", 5) == 0 ? v + 5 : v;
    if (*n < '0' || *n > '9') {
        fprintf(stderr, "%s: %s: \"%s\" is not one of " CLI_DEVICES "\n%s",
                prog, flag, v, usage);
        exit(2);
    }
    return (int)cli_long(prog, usage, flag, n, 0, 65535);
}

/* --format: u8, f32 or f16. */
static inline pl_format cli_format(const char *prog, const char *usage,
                                   const char *flag, const char *v)
{
    if (strcmp(v, "u8") == 0)
        return PL_FORMAT_U8_NHWC;
    if (strcmp(v, "f32") == 0)
        return PL_FORMAT_F32_NCHW;
    if (strcmp(v, "f16") == 0)
        return PL_FORMAT_F16_NCHW;
    fprintf(stderr, "%s: %s: unknown value \"%s\" (u8, f32 or f16)\n%s", prog,
            flag, v, usage);
    exit(2);
}

static inline const char *cli_format_name(pl_format f)
{
    return f == PL_FORMAT_F32_NCHW   ? "f32"
           : f == PL_FORMAT_F16_NCHW ? "f16"
                                     : "u8";
}

/* A progress line on stderr, "\rPROG: DONE of TOTAL WHAT", at most five
 * times a second and only when stderr is a terminal (and not `quiet`);
 * done == total ends it with a newline-free clear, so the next output
 * starts on a clean line. */
static inline void cli_progress(const char *prog, int quiet, long done,
                                long total, const char *what)
{
    static struct timespec last;
    static int tty = -1;
    if (tty < 0)
        tty = isatty(2);
    if (quiet || !tty)
        return;
    if (done >= total) {
        fprintf(stderr, "\r%*s\r", 78, "");
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double since = (double)(now.tv_sec - last.tv_sec) +
                         (double)(now.tv_nsec - last.tv_nsec) * 1e-9;
    if (done > 0 && since < 0.2)
        return;
    last = now;
    fprintf(stderr, "\r%s: %ld of %ld %s", prog, done, total, what);
}

/* SIGINT, SIGTERM or SIGHUP received (its number), or 0. The tools check
 * it between items: the item in hand is finished, what is done is
 * written, and they exit with 128 + the signal. */
static volatile sig_atomic_t cli_signal;

static void cli_on_signal(int sig)
{
    cli_signal = sig;
}

static inline void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cli_on_signal;
    sa.sa_flags = SA_RESTART; /* a read or a wait in progress goes on */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* mkdir -p: the directory and any missing parents. 0, or -1 with errno. */
static inline int cli_mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* Every record of l's problem files (bad ones, and those decoded despite
 * libjpeg warnings), one line each, in the order met. */
static inline void cli_print_failures(FILE *out, const char *prog,
                                      const pl_loader *l)
{
    pl_failure f[64];
    size_t n, first = 0;
    while (pl_loader_failures(l, first, f, 64, &n) == 0 && n > 0) {
        for (size_t i = 0; i < n; i++) {
            if (f[i].code)
                fprintf(out, "%s: bad: %s: %s (%s)\n", prog, f[i].path,
                        f[i].reason, pl_err_name(f[i].code));
            else
                fprintf(out, "%s: decoded with %d libjpeg warning(s): %s: %s\n",
                        prog, f[i].warnings, f[i].path, f[i].reason);
        }
        first += n;
    }
}

#endif
