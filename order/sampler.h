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

/* The shard order (PL_ORDER_SHARDS, sampler_use_shards) keeps O(shards)
 * memory and no per-sample array; its definition, for epoch e, seed, rank
 * r of W, n samples in S shards (shard k holding first[k] to
 * first[k+1] - 1), window w:
 *  1. The shards are laid out in the order pi(0), pi(1), ..., pi(S - 1),
 *     pi = bijection(SHARDS, tweak 0) over [0, S) (the identity with
 *     shuffle 0), their samples in file order: a stream of n samples.
 *  2. Rank r takes stream positions r * per_rank + j, j in [0, per_rank),
 *     each modulo n (per_rank as in the global order: padding wraps to
 *     the stream's start, PL_SHARD_DROP cuts its tail).
 *  3. Rank position j is taken from the rank's position
 *     b * w + sigma_b(j - b * w), b = j / w, sigma_b = bijection(WINDOW,
 *     tweak r * per_rank + b * w) over the window's length (w, the last
 *     window shorter; the identity with shuffle 0).
 * bijection(domain, tweak) over [0, m) is the Feistel network above, on
 * the smallest power of four >= max(m, 2), cycle walking, its round
 * function philox(key = seed, counter = (x, tweak mod 2^32, e mod 2^32,
 * domain ^ round << 24 ^ tweak >> 32 ^ (e >> 32) << 8)) masked to the half
 * width. */

#define SAMPLER_DEFAULT_WINDOW 4096

typedef struct sampler_tables sampler_tables;

typedef struct sampler {
    int64_t n; /* dataset size */
    uint64_t seed;
    int shuffle;
    int rank, world;
    int64_t per_rank; /* positions per epoch on each rank */
    int half_bits;    /* Feistel half width */
    uint32_t half_mask;
    /* PL_ORDER_SHARDS (sampler_use_shards), else nshards 0 */
    int nshards;
    int64_t window;
    int64_t *first;         /* [nshards + 1]: each shard's first sample */
    sampler_tables *tables; /* a few epochs' shard orders, locked */
} sampler;

/* drop: PL_SHARD_DROP semantics (cut instead of pad). n >= 1, world >= 1,
 * 0 <= rank < world. The global order, which holds no memory. */
void sampler_init(sampler *s, int64_t n, uint64_t seed, int shuffle, int rank,
                  int world, int drop);

/* After sampler_init: the shard order instead, for shards whose samples
 * are [first[k], first[k + 1]), k < nshards (first[0] == 0,
 * first[nshards] == n, nondecreasing; copied), window >= 1 positions.
 * PL_ENOMEM. sampler_index is then safe from any thread (a lock guards
 * the epochs' shard orders, built on first use: O(S) each). */
int sampler_use_shards(sampler *s, const int64_t *first, int nshards,
                       int64_t window);

/* Frees what sampler_use_shards made; safe on any initialised sampler and
 * on a zeroed one. */
void sampler_fini(sampler *s);

/* The shard order's keyed bijection of [0, m) at x (defined above). */
int64_t sampler_bijection(uint64_t seed, uint32_t domain, int64_t epoch,
                          uint64_t tweak, int64_t m, int64_t x);

/* The epoch's permutation of [0, n) at position p (0 <= p < n). */
int64_t sampler_permute(const sampler *s, int64_t epoch, int64_t p);

/* Dataset index at this rank's position j (0 <= j < per_rank), in the
 * global order or, after sampler_use_shards, the shard order. */
int64_t sampler_index(const sampler *s, int64_t epoch, int64_t j);

/* PL_ORDER_SHARDS: the shards this rank reads in epoch e from its position
 * `from` on (rounded down to its window's start, whose samples it may
 * read), in the order it reaches them: the shards its stream range (step
 * 2) overlaps, in stream order, empty ones passed over and a shard met
 * twice in a row (a range wrapping onto itself) named once. [out]
 * out[0 .. count), out holding nshards + 1; the count. O(shards) time, no
 * memory; safe from any thread. */
int sampler_shard_sequence(const sampler *s, int64_t epoch, int64_t from,
                           int32_t *out);

/* The batches of batch_size that n positions make: the last one short, or,
 * with drop_last, left out. The one definition behind both
 * pl_info.batches_per_epoch (n: the samples an epoch delivers) and the
 * ring's nominal batches (n: the positions an epoch claims first). */
int64_t batches_per_epoch(int64_t n, int batch_size, int drop_last);

#endif
