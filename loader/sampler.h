/* The order of samples: which dataset index sits at position j of this
 * rank's epoch e. The permutation is a keyed Feistel network over the
 * smallest power of four >= n, walked until it lands inside [0, n) (cycle
 * walking), with philox(seed, epoch) as round function: a bijection with
 * O(1) state, computed independently for any position, identical on every
 * machine. Sharding follows PyTorch's DistributedSampler: the permuted list
 * is padded by wrapping around (or cut) to a multiple of world_size, and
 * rank r takes positions r, r + world, r + 2 world, ... */
#ifndef PINLOAD_SAMPLER_H
#define PINLOAD_SAMPLER_H

#include <stdint.h>

typedef struct sampler {
    int64_t n; /* dataset size */
    uint64_t seed;
    int shuffle;
    int rank, world;
    int64_t per_rank; /* positions per epoch on each rank */
    int half_bits;    /* Feistel half width */
    uint32_t half_mask;
} sampler;

/* drop: PL_SHARD_DROP semantics (cut instead of pad). n >= 1, world >= 1,
 * 0 <= rank < world. */
void sampler_init(sampler *s, int64_t n, uint64_t seed, int shuffle, int rank,
                  int world, int drop);

/* The epoch's permutation of [0, n) at position p (0 <= p < n). */
int64_t sampler_permute(const sampler *s, int64_t epoch, int64_t p);

/* Dataset index at this rank's position j (0 <= j < per_rank). */
int64_t sampler_index(const sampler *s, int64_t epoch, int64_t j);

/* The batches of batch_size that n positions make: the last one short, or,
 * with drop_last, left out. The one definition behind both
 * pl_info.batches_per_epoch (n: the samples an epoch delivers) and the
 * ring's nominal batches (n: the positions an epoch claims first). */
int64_t batches_per_epoch(int64_t n, int batch_size, int drop_last);

#endif
