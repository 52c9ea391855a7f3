/* What pinload's command-line tools share: strict integer arguments,
 * mkdir -p and the listing of problem files. Header-only. */
#ifndef PINLOAD_CLI_H
#define PINLOAD_CLI_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
