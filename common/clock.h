/* The monotonic clock the counters of pl_stats are kept in. */
#ifndef PINLOAD_CLOCK_H
#define PINLOAD_CLOCK_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC: differences only, never a date. */
uint64_t clock_now_ns(void);

#endif
