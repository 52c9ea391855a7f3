#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void logger_init(logger *lg, pl_log_fn fn, void *ctx)
{
    lg->fn = fn;
    lg->ctx = ctx;
    pthread_mutex_init(&lg->mu, NULL);
}

void logger_fini(logger *lg)
{
    pthread_mutex_destroy(&lg->mu);
}

/* One line, as pl_log_fn promises, whatever a file name holds: control
 * characters are written as \n, \r, \t or \xHH. */
static void one_line(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        char esc[5] = {(char)*p, 0};
        if (*p == '\n' || *p == '\r' || *p == '\t')
            snprintf(esc, sizeof esc, "\\%c",
                     *p == '\n'   ? 'n'
                     : *p == '\r' ? 'r'
                                  : 't');
        else if (*p < 0x20 || *p == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        const size_t n = strlen(esc);
        if (o + n >= cap)
            break;
        memcpy(out + o, esc, n);
        o += n;
    }
    out[o] = '\0';
}

void log_msg(logger *lg, pl_log_level level, const char *fmt, ...)
{
    char raw[1024], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    one_line(raw, line, sizeof line);
    pthread_mutex_lock(&lg->mu);
    if (lg->fn)
        lg->fn(lg->ctx, level, line);
    else
        fprintf(stderr, "pinload: %s%s\n",
                level == PL_LOG_WARNING ? "warning: " : "", line);
    pthread_mutex_unlock(&lg->mu);
}
