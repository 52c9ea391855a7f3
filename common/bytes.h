/* The fields of the files pinload writes (sidecar indexes, shard tables,
 * the dataset table file, resume states): little-endian integers, and
 * FNV-1a 64, the checksum and name hash of them all. One definition, so
 * that every file reads what every other writes. */
#ifndef PINLOAD_BYTES_H
#define PINLOAD_BYTES_H

#include <stddef.h>
#include <stdint.h>

#define FNV_SEED 0xcbf29ce484222325u

/* FNV-1a 64 of p[0, n), going on from h (FNV_SEED to start). */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}

static inline uint64_t le_get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline uint32_t le_get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline void le_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline void le_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

#endif
