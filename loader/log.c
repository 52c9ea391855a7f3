#include "log.h"

#include <stdarg.h>
#include <stdio.h>

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

void log_msg(logger *lg, pl_log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lg->mu);
    if (lg->fn)
        lg->fn(lg->ctx, level, line);
    else
        fprintf(stderr, "pinload: %s%s\n",
                level == PL_LOG_WARNING ? "warning: " : "", line);
    pthread_mutex_unlock(&lg->mu);
}
