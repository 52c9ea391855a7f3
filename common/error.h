/* Status codes and the thread-local error detail behind pl_last_error(). */
#ifndef PINLOAD_ERROR_H
#define PINLOAD_ERROR_H

#include "pinload.h"

/* Every error code with its message, for pl_strerror and pl_err_name:
 * name, value (as pl_status in pinload.h, which test_error checks), message. */
#define PL_ERRNO_MAP(XX)                                                       \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ENOMEM, -2, "out of memory")                                            \
    XX(EIO, -3, "input/output error")                                          \
    XX(ENODATA, -4, "no images found")                                         \
    XX(ENOTJPEG, -5, "not a JPEG file")                                        \
    XX(ECORRUPT, -6, "corrupt JPEG data")                                      \
    XX(EUNSUPPORTED, -7, "unsupported JPEG feature")                           \
    XX(ELIMIT, -8, "image exceeds a configured limit")                         \
    XX(ECUDA, -9, "CUDA runtime error")                                        \
    XX(ETHREAD, -10, "cannot create thread")                                   \
    XX(EBUSY, -11, "every batch is held by the caller")                        \
    XX(ECLOSED, -12, "the loader is being destroyed")

/* The table's values are the header's. */
#define PL_ERRNO_CHECK_(name, value, msg)                                      \
    _Static_assert(PL_##name == (value), "PL_" #name " differs from "          \
                                         "pinload.h");
PL_ERRNO_MAP(PL_ERRNO_CHECK_)
#undef PL_ERRNO_CHECK_

/* Set the calling thread's detail to the formatted sentence and return
 * code, so that `return err_set(PL_EINVAL, "...")` reads as one step. */
int err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Forget the calling thread's detail. */
void err_clear(void);

#endif
