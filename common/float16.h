/* float to the 16-bit float formats a sample may be delivered in: the
 * normalisation tables (workers/augment.c) and the ops that write floats
 * after normalising (workers/ops/, random erasing) round alike, as CUDA
 * does. Pure functions: any thread. */
#ifndef PINLOAD_FLOAT16_H
#define PINLOAD_FLOAT16_H

#include <stdint.h>

/* IEEE 754 binary16 bits of f, rounded to nearest even (as CUDA's
 * __float2half_rn): beyond 65504 is infinity, NaN stays NaN. */
uint16_t float16_from_float(float f);

/* f as a bfloat16 bit pattern, rounded to nearest even (NaN stays NaN),
 * as CUDA's __float2bfloat16_rn. */
uint16_t bfloat16_from_float(float f);

#endif
