#include "sampler.h"

#include "../common/philox.h"

#define FEISTEL_ROUNDS 6

void sampler_init(sampler *s, int64_t n, uint64_t seed, int shuffle, int rank,
                  int world, int drop)
{
    s->n = n;
    s->seed = seed;
    s->shuffle = shuffle;
    s->rank = rank;
    s->world = world;
    /* DistributedSampler: with drop_last and an uneven split the tail is
     * cut (ceil((n - world) / world) == floor(n / world) then), otherwise
     * every rank gets ceil(n / world) and the list wraps to fill. */
    if (drop && n % world != 0)
        s->per_rank = n / world;
    else
        s->per_rank = (n + world - 1) / world;
    int bits = 2;
    while (bits < 64 && ((uint64_t)1 << bits) < (uint64_t)n)
        bits += 2;
    s->half_bits = bits / 2;
    s->half_mask = (uint32_t)(((uint64_t)1 << s->half_bits) - 1);
}

static uint32_t round_fn(const sampler *s, int64_t epoch, int round, uint32_t x)
{
    const uint32_t key[2] = {(uint32_t)s->seed, (uint32_t)(s->seed >> 32)};
    const uint32_t ctr[4] = {x, (uint32_t)round, (uint32_t)epoch,
                             PHILOX_DOMAIN_PERMUTE ^
                                 (uint32_t)((uint64_t)epoch >> 32)};
    uint32_t out[4];
    philox4x32_10(ctr, key, out);
    return out[0];
}

static uint64_t feistel(const sampler *s, int64_t epoch, uint64_t x)
{
    uint32_t left = (uint32_t)(x >> s->half_bits) & s->half_mask;
    uint32_t right = (uint32_t)x & s->half_mask;
    for (int r = 0; r < FEISTEL_ROUNDS; r++) {
        const uint32_t next =
            left ^ (round_fn(s, epoch, r, right) & s->half_mask);
        left = right;
        right = next;
    }
    return ((uint64_t)left << s->half_bits) | right;
}

int64_t sampler_permute(const sampler *s, int64_t epoch, int64_t p)
{
    if (!s->shuffle)
        return p;
    /* The domain is at most 4n, so the walk takes under four steps on
     * average; it ends because the network is a bijection on the domain
     * and p's cycle contains p itself. */
    uint64_t x = (uint64_t)p;
    do
        x = feistel(s, epoch, x);
    while (x >= (uint64_t)s->n);
    return (int64_t)x;
}

int64_t sampler_index(const sampler *s, int64_t epoch, int64_t j)
{
    /* Position j of rank r is position r + j * world of the padded list,
     * whose entry p is the permutation's entry p mod n (padding repeats the
     * start of the list, as DistributedSampler's indices[:padding] does). */
    const int64_t p = (int64_t)s->rank + j * (int64_t)s->world;
    return sampler_permute(s, epoch, p % s->n);
}

int64_t batches_per_epoch(int64_t n, int batch_size, int drop_last)
{
    return drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
}
