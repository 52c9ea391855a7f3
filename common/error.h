/* The thread-local error detail behind pl_last_error(). The status codes,
 * their names and messages are include/pinload.h's PL_STATUS_MAP. */
#ifndef PINLOAD_ERROR_H
#define PINLOAD_ERROR_H

#include "pinload.h"

/* Set the calling thread's detail to the formatted sentence and return
 * code, so that `return err_set(PL_EINVAL, "...")` reads as one step. */
int err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Forget the calling thread's detail. */
void err_clear(void);

#endif
