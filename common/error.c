#include "error.h"

#include <stdarg.h>
#include <stdio.h>

/* Long enough for a function name, a path of a few directories and a
 * libjpeg message; longer details are cut, not lost: the code remains. */
static _Thread_local char last_error[1024];

int err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

void err_clear(void)
{
    last_error[0] = '\0';
}

PL_EXPORT const char *pl_last_error(void)
{
    return last_error;
}

PL_EXPORT const char *pl_strerror(int status)
{
    switch (status) {
#define PL_STRERROR_CASE_(name, value, msg)                                    \
    case PL_##name:                                                            \
        return msg;
        PL_STATUS_MAP(PL_STRERROR_CASE_)
#undef PL_STRERROR_CASE_
    }
    return "unknown status";
}

PL_EXPORT const char *pl_err_name(int status)
{
    switch (status) {
#define PL_ERR_NAME_CASE_(name, value, msg)                                    \
    case PL_##name:                                                            \
        return "PL_" #name;
        PL_STATUS_MAP(PL_ERR_NAME_CASE_)
#undef PL_ERR_NAME_CASE_
    }
    return "PL_UNKNOWN";
}

PL_EXPORT const char *pl_version(void)
{
    return PL_VERSION_STRING;
}

PL_EXPORT unsigned pl_version_number(void)
{
    return PL_VERSION_HEX;
}
