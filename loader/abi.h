/* The sized-struct rule of include/pinload.h: what a caller's sizeof may
 * be, and copying in and out without touching a byte past it. */
#ifndef PINLOAD_ABI_H
#define PINLOAD_ABI_H

#include <stddef.h>
#include <string.h>

#include "../common/error.h"

/* The smallest size each caller-allocated struct may have: its size in the
 * first ABI-stable release. Until 1.0 that is today's size; from 1.0 on
 * these numbers never change, and fields are only added after them. */
/* pl_config grew at its end (decode): a caller built against the header
 * before it passes, and the fields it lacks read 0, their defaults. */
#define ABI_MIN_CONFIG offsetof(pl_config, decode)
/* pl_info grew at its end (numa_node, gpu_numa_node): likewise. */
#define ABI_MIN_INFO offsetof(pl_info, numa_node)
/* pl_stats grew at its end (ns_slot_wait, ns_buffer_wait): a caller built
 * against the header before them still passes, and gets what fits. */
#define ABI_MIN_STATS offsetof(pl_stats, ns_slot_wait)
#define ABI_MIN_FAILURE sizeof(pl_failure)
#define ABI_MIN_IMAGE sizeof(pl_image)

/* PL_EINVAL naming fn and the struct if the caller's size is below its
 * minimum (a caller built against a header older than the library can
 * accept, or a binder passing a wrong size); 0 otherwise. */
static inline int abi_check(const char *fn, const char *type, size_t size,
                            size_t min)
{
    if (size >= min)
        return 0;
    return err_set(PL_EINVAL,
                   "%s: sizeof(%s) is %zu in the caller, less than the %zu "
                   "bytes it has had since this ABI began (a wrong size "
                   "given to %s_sized?)",
                   fn, type, size, min, fn);
}

/* Copy the library's `ours` (ours_size bytes) to the caller's `out` of
 * out_size bytes: what fits, and zeros past ours (fields this library does
 * not know are 0, their default). */
static inline void abi_copy_out(void *out, size_t out_size, const void *ours,
                                size_t ours_size)
{
    memcpy(out, ours, out_size < ours_size ? out_size : ours_size);
    if (out_size > ours_size)
        memset((char *)out + ours_size, 0, out_size - ours_size);
}

#endif
