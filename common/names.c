/* The words of the public enums' values (pl_format_name() and its kin),
 * each function a switch written from its list in pinload.h, so a value
 * added to a list has its word here with nothing else to change. */
#include "pinload.h"

#include <stddef.h>

#define NAME_CASE_(name, value, word)                                          \
    case value:                                                                \
        return word;

/* One function per list: the word of a value the list holds, else NULL. */
#define NAME_FUNCTION_(fn, type, MAP)                                          \
    PL_EXPORT const char *fn(type v)                                           \
    {                                                                          \
        switch ((int)v) {                                                      \
            MAP(NAME_CASE_)                                                    \
        }                                                                      \
        return NULL;                                                           \
    }

NAME_FUNCTION_(pl_format_name, pl_format, PL_FORMAT_MAP)
NAME_FUNCTION_(pl_augment_name, pl_augment, PL_AUGMENT_MAP)
NAME_FUNCTION_(pl_memory_name, pl_memory, PL_MEMORY_MAP)
NAME_FUNCTION_(pl_on_error_name, pl_on_error, PL_ON_ERROR_MAP)
NAME_FUNCTION_(pl_shard_mode_name, pl_shard_mode, PL_SHARD_MODE_MAP)
NAME_FUNCTION_(pl_order_name, pl_order, PL_ORDER_MAP)
NAME_FUNCTION_(pl_backend_name, pl_backend, PL_BACKEND_MAP)
NAME_FUNCTION_(pl_log_level_name, pl_log_level, PL_LOG_LEVEL_MAP)
NAME_FUNCTION_(pl_device_name, pl_device, PL_DEVICE_MAP)
NAME_FUNCTION_(pl_decode_name, pl_decode, PL_DECODE_MAP)
