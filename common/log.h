/* The loader's notices and warnings, sent to the user's pl_log_fn (or
 * stderr), one whole line at a time. */
#ifndef PINLOAD_LOG_H
#define PINLOAD_LOG_H

#include <pthread.h>

#include "pinload.h"

typedef struct logger {
    pl_log_fn fn; /* NULL: "pinload: <msg>" on stderr */
    void *ctx;
    pthread_mutex_t mu; /* one message at a time, from any thread */
} logger;

void logger_init(logger *lg, pl_log_fn fn, void *ctx);
void logger_fini(logger *lg);
void log_msg(logger *lg, pl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
