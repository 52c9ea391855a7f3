/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11): a counter-based generator. Every random number pinload uses
 * is philox(key = seed, counter = (draw, index, epoch, domain)), so a value
 * depends on what it is for, never on which thread drew it or when. */
#ifndef PINLOAD_PHILOX_H
#define PINLOAD_PHILOX_H

#include <stdint.h>

/* Domains keep the streams of unrelated uses apart. */
enum {
    PHILOX_DOMAIN_PERMUTE = 0x5045524d, /* "PERM": epoch order */
    PHILOX_DOMAIN_AUGMENT = 0x41554746, /* "AUGF": augmentation ops */
    PHILOX_DOMAIN_SHARDS = 0x53485244,  /* "SHRD": PL_ORDER_SHARDS' shards */
    PHILOX_DOMAIN_WINDOW = 0x57494e44,  /* "WIND": and its windows */
    PHILOX_DOMAIN_BATCH = 0x4d495842,   /* "MIXB": batch ops (mixup) */
};

static inline void philox_round(uint32_t c[4], const uint32_t k[2])
{
    const uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
    const uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c[0] = hi1 ^ c[1] ^ k[0];
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k[1];
    c[3] = lo0;
}

/* out = Philox4x32-10(ctr, key). */
static inline void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                 uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k[0] += 0x9E3779B9u;
            k[1] += 0xBB67AE85u;
        }
        philox_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* A stream of draws for one (seed, domain, epoch, index): each call to
 * philox_next_u32 consumes one 32-bit word; four words per block. */
typedef struct philox_stream {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4];
    int left;
} philox_stream;

static inline void philox_stream_init(philox_stream *s, uint64_t seed,
                                      uint32_t domain, uint64_t epoch,
                                      uint64_t index)
{
    s->key[0] = (uint32_t)seed;
    s->key[1] = (uint32_t)(seed >> 32);
    s->ctr[0] = 0; /* block number within the stream */
    s->ctr[1] = (uint32_t)index;
    s->ctr[2] = (uint32_t)epoch;
    s->ctr[3] =
        domain ^ ((uint32_t)(index >> 32) << 16) ^ (uint32_t)(epoch >> 32);
    s->left = 0;
}

/* Op `op` of an augmentation pipeline (workers/ops/op.h) draws from its
 * own part of the sample's stream, from block op << 24 on: no op shifts
 * another's draws, each has 2^24 blocks (2^26 words), and op 0's stream is
 * the sample's from its start, the one crop and flip drew from before
 * pipelines. */
static inline void philox_stream_op(philox_stream *s, uint64_t seed,
                                    uint64_t epoch, uint64_t index, unsigned op)
{
    philox_stream_init(s, seed, PHILOX_DOMAIN_AUGMENT, epoch, index);
    s->ctr[0] = (uint32_t)op << 24;
}

static inline uint32_t philox_next_u32(philox_stream *s)
{
    if (s->left == 0) {
        philox4x32_10(s->ctr, s->key, s->buf);
        s->ctr[0]++;
        s->left = 4;
    }
    return s->buf[4 - s->left--];
}

/* A double in [0, 1) with 53 random bits. */
static inline double philox_next_double(philox_stream *s)
{
    const uint64_t hi = philox_next_u32(s) >> 5; /* 27 bits */
    const uint64_t lo = philox_next_u32(s) >> 6; /* 26 bits */
    return (double)((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

/* An integer uniform in [0, n), n >= 1, without modulo bias (Lemire's
 * multiply-and-reject). */
static inline uint32_t philox_next_below(philox_stream *s, uint32_t n)
{
    uint64_t m = (uint64_t)philox_next_u32(s) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        const uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)philox_next_u32(s) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

#endif
