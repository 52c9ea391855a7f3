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
