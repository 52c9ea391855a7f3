/* What pinload's command-line tools (and the programs in examples/) share:
 * strict integer, number and choice arguments, usage errors, mkdir -p and
 * the listing of problem files. Header-only. */
#ifndef PINLOAD_CLI_H
#define PINLOAD_CLI_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* A size or a count: a number (a fraction allowed) with an optional
 * decimal suffix K, M, G or T (1e3 to 1e12; KB, MB, GB, TB and either
 * case too), at least 0 and at most 1e18: "1GB", "500M", "5G" samples.
 * Otherwise print "PROG: FLAG: ... is not a size" and the usage to stderr
 * and exit 2. */
static inline double cli_size(const char *prog, const char *usage,
                              const char *flag, const char *v)
{
    static const char *const suffix[] = {"k", "m", "g", "t"};
    char *end;
    errno = 0;
    const double n = strtod(v, &end);
    double mult = *end ? -1 : 1;
    for (int i = 0; i < 4 && *end; i++)
        if (!strncasecmp(end, suffix[i], 1) &&
            (!end[1] || (!strcasecmp(end + 1, "b"))))
            mult = i == 0 ? 1e3 : i == 1 ? 1e6 : i == 2 ? 1e9 : 1e12;
    if (errno || end == v || mult < 0 || !(n >= 0) || n * mult > 1e18) {
        fprintf(stderr,
                "%s: %s: \"%s\" is not a size (1GB, 500MB, 5G, bytes)\n%s",
                prog, flag, v, usage);
        exit(2);
    }
    return n * mult;
}

/* The index of v in `names` (NULL-terminated); otherwise print "PROG: FLAG:
 * unknown value "V" (a, b or c)" and the usage to stderr and exit 2. */
static inline int cli_choice(const char *prog, const char *usage,
                             const char *flag, const char *v,
                             const char *const *names)
{
    int n = 0;
    for (; names[n]; n++)
        if (strcmp(v, names[n]) == 0)
            return n;
    fprintf(stderr, "%s: %s: unknown value \"%s\" (", prog, flag, v);
    for (int i = 0; i < n; i++) {
        const char *sep = i == n - 1 ? " or " : ", ";
        fprintf(stderr, "%s%s", i == 0 ? "" : sep, names[i]);
    }
    fprintf(stderr, ")\n%s", usage);
    exit(2);
}

/* The value of an enum of pinload.h whose word (its pl_*_name()) is v,
 * from the enum's own list (PL_FORMAT_MAP...): the tools take exactly the
 * words the library and Python name. Otherwise as cli_choice. Defines
 * cli_format, cli_augment, cli_memory, cli_on_error, cli_shard_mode,
 * cli_order and cli_decode. */
#define CLI_WORD_(name, value, word) word,
#define CLI_VALUE_(name, value, word) value,
#define CLI_ENUM_PARSER_(fn, type, MAP)                                        \
    static inline type fn(const char *prog, const char *usage,                 \
                          const char *flag, const char *v)                     \
    {                                                                          \
        static const char *const words[] = {MAP(CLI_WORD_) NULL};              \
        static const type values[] = {MAP(CLI_VALUE_)};                        \
        return values[cli_choice(prog, usage, flag, v, words)];                \
    }
CLI_ENUM_PARSER_(cli_format, pl_format, PL_FORMAT_MAP)
CLI_ENUM_PARSER_(cli_augment, pl_augment, PL_AUGMENT_MAP)
CLI_ENUM_PARSER_(cli_memory, pl_memory, PL_MEMORY_MAP)
CLI_ENUM_PARSER_(cli_on_error, pl_on_error, PL_ON_ERROR_MAP)
CLI_ENUM_PARSER_(cli_shard_mode, pl_shard_mode, PL_SHARD_MODE_MAP)
CLI_ENUM_PARSER_(cli_order, pl_order, PL_ORDER_MAP)
CLI_ENUM_PARSER_(cli_decode, pl_decode, PL_DECODE_MAP)

/* --augment's value: a preset's word (none, eval or train: returned, as
 * config.augment takes it, with *spec NULL), or else a spec of ops
 * (docs/transforms.md; config.transform: *spec = v, and the preset
 * returned is train, which the spec replaces). cli_check_transform checks
 * the spec once the options are read. */
#define CLI_AUGMENT_USAGE "none|eval|train|SPEC"
static inline pl_augment cli_augment_spec(const char *v, const char **spec)
{
    static const char *const words[] = {PL_AUGMENT_MAP(CLI_WORD_) NULL};
    static const pl_augment values[] = {PL_AUGMENT_MAP(CLI_VALUE_)};
    for (int i = 0; words[i]; i++)
        if (strcmp(v, words[i]) == 0) {
            *spec = NULL;
            return values[i];
        }
    *spec = v;
    return PL_AUGMENT_TRAIN;
}

/* cfg's transform (from --augment SPEC) checked for cfg's output as the
 * loader will check it: a usage error naming the op and the parameter
 * ("PROG: --augment: config.transform: rrc: scale=0.08:x: not a
 * number"), exit 2. */
static inline void cli_check_transform(const char *prog, const char *usage,
                                       const pl_config *cfg)
{
    if (!cfg->transform || pl_transform_check(cfg, NULL, 0) == 0)
        return;
    const char *why = pl_last_error();
    const char *fn = "pl_transform_check: ";
    if (strncmp(why, fn, strlen(fn)) == 0)
        why += strlen(fn);
    /* One bare word is more likely a preset mistyped than an op. */
    if (!strpbrk(cfg->transform, "();=,"))
        cli_usage_error(prog, usage,
                        "--augment: unknown value \"%s\" (none, eval, train "
                        "or a spec of ops; as a spec: %s)",
                        cfg->transform, why);
    cli_usage_error(prog, usage, "--augment: %s", why);
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

/* --device, the same words in every tool: those of PL_DEVICE_MAP, auto
 * (the calling thread's CUDA device, else the host), host and local_rank
 * (the launcher's local rank; local-rank too), then cuda (CUDA device 0, or
 * fail), cuda:N or N (CUDA device N, or fail). [out] *must_cuda: 1 if a
 * CUDA device was named. */
#define CLI_DEVICES "auto|host|local_rank|cuda|cuda:N"
static inline int cli_device(const char *prog, const char *usage,
                             const char *flag, const char *v, int *must_cuda)
{
    *must_cuda = 0;
#define CLI_DEVICE_(name, value, word)                                         \
    if (strcmp(v, word) == 0)                                                  \
        return value;
    PL_DEVICE_MAP(CLI_DEVICE_)
#undef CLI_DEVICE_
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

/* --pin, as the tools take it: on (pinned memory), off (pageable), or a
 * word of PL_MEMORY_MAP (pinned, pageable, managed). The pl_memory, or -1
 * for any other word. */
static inline int cli_pin(const char *v)
{
    if (strcmp(v, "on") == 0)
        return PL_MEMORY_PINNED;
    if (strcmp(v, "off") == 0)
        return PL_MEMORY_PAGEABLE;
#define CLI_MEMORY_(name, value, word)                                         \
    if (strcmp(v, word) == 0)                                                  \
        return value;
    PL_MEMORY_MAP(CLI_MEMORY_)
#undef CLI_MEMORY_
    return -1;
}

/* The options --order and --shuffle-window (usage text). */
#define CLI_ORDER_USAGE "[--order global|shards] [--shuffle-window N]"

/* When the work counted by cli_progress began (its ETA counts from
 * here); the first call of cli_progress sets it otherwise. */
static struct timespec cli_progress_t0;
static inline void cli_progress_start(void)
{
    clock_gettime(CLOCK_MONOTONIC, &cli_progress_t0);
}

/* A progress line on stderr, "\rPROG: DONE of TOTAL WHAT, ETA 3m05s", at
 * most five times a second and only when stderr is a terminal (and not
 * `quiet`); the ETA once a second of work has passed, from the mean rate
 * so far; done == total ends it with a newline-free clear, so the next
 * output starts on a clean line. */
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
    if (cli_progress_t0.tv_sec == 0 && cli_progress_t0.tv_nsec == 0)
        cli_progress_t0 = now;
    const double spent = (double)(now.tv_sec - cli_progress_t0.tv_sec) +
                         (double)(now.tv_nsec - cli_progress_t0.tv_nsec) * 1e-9;
    char eta[48] = "";
    if (done > 0 && spent > 1.0) {
        const long left = (long)(spent / (double)done * (double)(total - done));
        if (left >= 3600)
            snprintf(eta, sizeof eta, ", ETA %ldh%02ldm", left / 3600,
                     left / 60 % 60);
        else
            snprintf(eta, sizeof eta, ", ETA %ldm%02lds", left / 60, left % 60);
    }
    fprintf(stderr, "\r%s: %ld of %ld %s%s   ", prog, done, total, what, eta);
}

/* SIGINT, SIGTERM or SIGHUP received (its number), or 0. Once a tool has
 * work worth finishing it sets cli_graceful, and checks cli_signal between
 * items: the item in hand is finished, what is done is written, and it
 * exits with 128 + the signal. Before that (parsing, creating the loader,
 * opening files), and at a second signal whenever it comes, the signal
 * ends the tool at once, with 128 + the signal: no phase makes it wait. */
static volatile sig_atomic_t cli_signal;
static volatile sig_atomic_t cli_graceful;
static const char *cli_signal_prog = "pinload";

static void cli_on_signal(int sig)
{
    if (cli_graceful && !cli_signal) {
        cli_signal = sig;
        return;
    }
    /* Only async-signal-safe calls: write and _exit. */
    char msg[160];
    size_t n = 0;
    const char *name = cli_signal_prog;
    msg[n++] = '\n';
    for (; *name && n < 100; name++)
        msg[n++] = *name;
    static const char text[] = ": stopped by signal ";
    memcpy(msg + n, text, sizeof text - 1);
    n += sizeof text - 1;
    if (sig >= 10)
        msg[n++] = (char)('0' + sig / 10);
    msg[n++] = (char)('0' + sig % 10);
    msg[n++] = '\n';
    if (write(STDERR_FILENO, msg, n) < 0) {
        /* nothing more to do */
    }
    _exit(128 + sig);
}

/* prog: the tool's name, for the message of a signal that ends it. */
static inline void cli_catch_signals(const char *prog)
{
    cli_signal_prog = prog;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cli_on_signal;
    sa.sa_flags = SA_RESTART; /* a read or a wait in progress goes on */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Opens `path` as the tools open every file they name: without blocking
 * (a FIFO, a device or a socket is refused at once, never waited on) and
 * only if it is a regular file. For writing (`for_writing` 1) it is created or
 * truncated. A FILE *, or NULL with the reason in why[n] ("is a FIFO, not
 * a regular file", strerror). */
static inline FILE *cli_open_file(const char *path, int for_writing, char *why,
                                  size_t n)
{
    const int flags = (for_writing ? O_WRONLY | O_CREAT : O_RDONLY) |
                      O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    struct stat st;
    const int fd = open(path, flags, 0666);
    if (fd < 0) {
        /* O_WRONLY on a FIFO without a reader: ENXIO. */
        snprintf(why, n, "%s",
                 errno == ENXIO ? "not a regular file (a FIFO or socket)"
                                : strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, n, "%s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "not a regular file (%s)",
                 S_ISFIFO(st.st_mode)   ? "a FIFO"
                 : S_ISDIR(st.st_mode)  ? "a directory"
                 : S_ISCHR(st.st_mode)  ? "a character device"
                 : S_ISBLK(st.st_mode)  ? "a block device"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "not a file");
        close(fd);
        return NULL;
    }
    FILE *f = NULL;
    if ((for_writing && ftruncate(fd, 0) != 0) ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
        !(f = fdopen(fd, for_writing ? "w" : "r"))) {
        snprintf(why, n, "%s", strerror(errno));
        close(fd);
    }
    return f;
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

/* s written so that it stays one field of one line, whatever a file name
 * holds: a backslash, tab, newline or carriage return as \\, \t, \n or \r;
 * other control bytes and bytes that are not UTF-8 as \xHH. Unescaping
 * gives the bytes back. */
static inline void cli_escape(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int len = 1; /* a valid UTF-8 sequence's length, or 1 */
        if (*p >= 0xc2 && *p <= 0xf4) {
            const int need = *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : 2;
            int ok = 1;
            for (int k = 1; k < need && ok; k++)
                ok = (p[k] & 0xc0) == 0x80;
            len = ok ? need : 0;
        } else if (*p >= 0x80) {
            len = 0;
        }
        if (len == 0) {
            fprintf(f, "\\x%02x", *p++);
        } else if (*p == '\\' || *p == '\t' || *p == '\n' || *p == '\r') {
            fprintf(f, "\\%c",
                    *p == '\\'   ? '\\'
                    : *p == '\t' ? 't'
                    : *p == '\n' ? 'n'
                                 : 'r');
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\x%02x", *p++);
        } else {
            fwrite(p, 1, (size_t)len, f);
            p += len;
        }
    }
}

/* "PROG: MSG" and a newline on stderr, MSG escaped as cli_escape does:
 * one line, whatever the file names in it hold. */
static inline void cli_say(const char *prog, const char *msg)
{
    fprintf(stderr, "%s: ", prog);
    cli_escape(stderr, msg);
    fputc('\n', stderr);
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
                fprintf(out, "%s: bad: ", prog);
            else
                fprintf(out, "%s: decoded with %d libjpeg warning(s): ", prog,
                        f[i].warnings);
            cli_escape(out, f[i].path);
            fputs(": ", out);
            cli_escape(out, f[i].reason);
            if (f[i].code)
                fprintf(out, " (%s)", pl_err_name(f[i].code));
            fputc('\n', out);
        }
        first += n;
    }
}

#endif
