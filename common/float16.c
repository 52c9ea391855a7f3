/* float to the 16-bit float formats, rounded as CUDA rounds them. */
#include "float16.h"

#include <string.h>

uint16_t bfloat16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: keep it one, quiet */
        return (uint16_t)((x >> 16) | 0x40u);
    /* Round to nearest, ties to even, on the 16 bits dropped. */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

uint16_t float16_from_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7FFFFFFFu;
    if (absx >= 0x7F800000u) /* inf, NaN */
        return (uint16_t)(sign | 0x7C00u | (absx > 0x7F800000u ? 0x200u : 0));
    if (absx >= 0x477FF000u) /* rounds to beyond 65504 */
        return (uint16_t)(sign | 0x7C00u);
    if (absx < 0x38800000u) { /* below 2^-14: a subnormal half or zero */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        const uint32_t mant = (absx & 0x7FFFFFu) | 0x800000u;
        const int shift = 126 - (int)(absx >> 23); /* 14..24 */
        uint32_t h = mant >> shift;
        const uint32_t rest = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1);
        h += rest > half || (rest == half && (h & 1u));
        return (uint16_t)(sign | h);
    }
    /* Normal: rebias the exponent, round the 13 dropped mantissa bits. */
    uint32_t h = ((absx >> 13) - (112u << 10));
    const uint32_t rest = absx & 0x1FFFu;
    h += rest > 0x1000u || (rest == 0x1000u && (h & 1u));
    return (uint16_t)(sign | h);
}

float float16_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    uint32_t x;
    if (exp == 0x1Fu) { /* inf, NaN */
        x = sign | 0x7F800000u | (mant << 13);
    } else if (exp != 0) { /* normal: rebias */
        x = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        x = sign;
    } else { /* subnormal: mant * 2^-24, exact as a float */
        const float v = (float)mant * 5.9604644775390625e-8f;
        memcpy(&x, &v, sizeof x);
        x |= sign;
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

float bfloat16_to_float(uint16_t b)
{
    const uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}
