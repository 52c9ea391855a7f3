/* float to and from the 16-bit float formats a sample may be delivered in: the
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

/* The float a binary16 or a bfloat16 bit pattern holds (exact: every such
 * value is a float), for ops that compute on delivered 16-bit samples
 * (the batch ops, as PyTorch computes a half tensor's ops in float and
 * rounds each result). */
float float16_to_float(uint16_t h);
float bfloat16_to_float(uint16_t b);

#endif
