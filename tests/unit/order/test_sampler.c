/* The epoch order: a keyed Feistel permutation with cycle walking, sharded
 * as PyTorch's DistributedSampler. */
#include <math.h>

#include "../order/sampler.h"
#include "pinload.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------- */

/* The whole permutation of [0, n) for (seed, epoch), through a world-1
 * sampler. malloc'd. */
static int64_t *full_order(int64_t n, uint64_t seed, int shuffle, int64_t epoch)
{
    sampler s;
    sampler_init(&s, n, seed, shuffle, 0, 1, 0);
    cr_assert_eq(s.per_rank, n);
    int64_t *o = malloc((size_t)n * sizeof *o);
    cr_assert_not_null(o);
    for (int64_t p = 0; p < n; p++)
        o[p] = sampler_permute(&s, epoch, p);
    return o;
}

/* Asserts that o[0 .. n) holds each of 0 .. n-1 exactly once. */
static void assert_is_permutation(const int64_t *o, int64_t n, const char *what)
{
    uint8_t *seen = calloc((size_t)n, 1);
    cr_assert_not_null(seen);
    for (int64_t p = 0; p < n; p++) {
        cr_assert(o[p] >= 0 && o[p] < n,
                  "%s: position %lld holds %lld, outside [0, %lld)", what,
                  (long long)p, (long long)o[p], (long long)n);
        cr_assert_eq(seen[o[p]], 0, "%s: index %lld appears twice", what,
                     (long long)o[p]);
        seen[o[p]] = 1;
    }
    free(seen);
}

static int orders_equal(const int64_t *a, const int64_t *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* PyTorch's DistributedSampler(drop_last=False), written out as its source
 * reads, from the permuted list `perm`:
 *
 *     num_samples = math.ceil(len(dataset) / num_replicas)
 *     total_size = num_samples * num_replicas
 *     padding_size = total_size - len(indices)
 *     if padding_size <= len(indices):
 *         indices += indices[:padding_size]
 *     else:
 *         indices += (indices * math.ceil(padding_size / len(indices)))
 *                    [:padding_size]
 *
 * [out] *total; returns the padded list (malloc'd). */
static int64_t *torch_padded(const int64_t *perm, int64_t n, int world,
                             int64_t *total)
{
    const int64_t num_samples = (int64_t)ceil((double)n / world);
    const int64_t total_size = num_samples * world;
    const int64_t padding = total_size - n;
    int64_t *out = malloc((size_t)total_size * sizeof *out);
    cr_assert_not_null(out);
    memcpy(out, perm, (size_t)n * sizeof *out);
    if (padding <= n) {
        memcpy(out + n, perm, (size_t)padding * sizeof *out);
    } else {
        const int64_t reps = (int64_t)ceil((double)padding / n);
        int64_t *rep = malloc((size_t)(reps * n) * sizeof *rep);
        cr_assert_not_null(rep);
        for (int64_t k = 0; k < reps; k++)
            memcpy(rep + k * n, perm, (size_t)n * sizeof *rep);
        memcpy(out + n, rep, (size_t)padding * sizeof *out);
        free(rep);
    }
    *total = total_size;
    return out;
}

/* DistributedSampler(drop_last=True)'s per-rank count. */
static int64_t torch_drop_num_samples(int64_t n, int world)
{
    if (n % world != 0)
        return (int64_t)ceil((double)(n - world) / world);
    return (int64_t)ceil((double)n / world);
}

static const int64_t shard_ns[] = {1, 5, 10, 11, 13};
static const int shard_worlds[] = {1, 2, 3, 4, 7};
#define NSHARD_N (sizeof shard_ns / sizeof shard_ns[0])
#define NSHARD_W (sizeof shard_worlds / sizeof shard_worlds[0])

/* ---- the permutation ----------------------------------------------------- */

Test(sampler, covers_each_index_once_per_epoch)
{
    static const int64_t ns[] = {1, 2, 3, 4, 5, 17, 64, 65, 1000, 4097};
    static const uint64_t seeds[] = {0, 1, 42, 0xdeadbeefcafef00dull,
                                     (uint64_t)1 << 32};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++)
            for (int64_t epoch = 0; epoch < 3; epoch++) {
                int64_t *o = full_order(ns[i], seeds[k], 1, epoch);
                char what[96];
                snprintf(what, sizeof what, "n=%lld seed=%llu epoch=%lld",
                         (long long)ns[i], (unsigned long long)seeds[k],
                         (long long)epoch);
                assert_is_permutation(o, ns[i], what);
                free(o);
            }
}

Test(sampler, feistel_domain_is_the_smallest_power_of_four_not_below_n)
{
    /* n = 1 still gets a 2x2-bit network (domain 4): halves of 0 bits would
     * make no network at all. */
    static const struct {
        int64_t n;
        int half_bits;
    } cases[] = {{1, 1},
                 {2, 1},
                 {4, 1},
                 {5, 2},
                 {16, 2},
                 {17, 3},
                 {64, 3},
                 {65, 4},
                 {1000, 5},
                 {1024, 5},
                 {1025, 6},
                 {4097, 7},
                 {(int64_t)1 << 32, 16},
                 {((int64_t)1 << 32) + 1, 17}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sampler s;
        sampler_init(&s, cases[i].n, 0, 1, 0, 1, 0);
        cr_assert_eq(s.half_bits, cases[i].half_bits, "n=%lld: half_bits %d",
                     (long long)cases[i].n, s.half_bits);
        cr_assert_eq(s.half_mask, ((uint32_t)1 << cases[i].half_bits) - 1,
                     "n=%lld", (long long)cases[i].n);
    }
}

Test(sampler, same_seed_and_epoch_give_the_same_order_in_any_query_order)
{
    const int64_t n = 1000;
    int64_t *a = full_order(n, 7, 1, 4);
    /* A second sampler, queried backwards and with another rank/world: the
     * permutation depends on (seed, epoch, position) alone. */
    sampler s;
    sampler_init(&s, n, 7, 1, 2, 3, 1);
    for (int64_t p = n - 1; p >= 0; p--)
        cr_assert_eq(sampler_permute(&s, 4, p), a[p], "position %lld",
                     (long long)p);
    free(a);
}

Test(sampler, different_epochs_give_different_orders)
{
    const int64_t n = 1000;
    int64_t *o[6];
    const int64_t epochs[6] = {
        0, 1, 2, 3, (int64_t)1 << 32, ((int64_t)1 << 32) + 1};
    for (int i = 0; i < 6; i++)
        o[i] = full_order(n, 0, 1, epochs[i]);
    /* Epoch 2^32 must not repeat epoch 0: the high half of the epoch is
     * part of the key stream too. */
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < i; j++)
            cr_assert(!orders_equal(o[i], o[j], n),
                      "epochs %lld and %lld give the same order",
                      (long long)epochs[i], (long long)epochs[j]);
    for (int i = 0; i < 6; i++)
        free(o[i]);
}

Test(sampler, different_seeds_give_different_orders)
{
    const int64_t n = 1000;
    const uint64_t seeds[5] = {0, 1, 42, (uint64_t)1 << 32,
                               ((uint64_t)1 << 32) | 1};
    int64_t *o[5];
    for (int i = 0; i < 5; i++)
        o[i] = full_order(n, seeds[i], 1, 0);
    /* Seed 2^32 must not repeat seed 0: both key words are used. */
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < i; j++)
            cr_assert(!orders_equal(o[i], o[j], n),
                      "seeds %llu and %llu give the same order",
                      (unsigned long long)seeds[i],
                      (unsigned long long)seeds[j]);
    for (int i = 0; i < 5; i++)
        free(o[i]);
}

Test(sampler, shuffle_off_gives_identity_order_in_every_epoch)
{
    static const int64_t ns[] = {1, 5, 17, 1000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            int64_t *o = full_order(ns[i], 42, 0, epoch);
            for (int64_t p = 0; p < ns[i]; p++)
                cr_assert_eq(o[p], p, "n=%lld epoch=%lld position %lld",
                             (long long)ns[i], (long long)epoch, (long long)p);
            free(o);
        }
}

Test(sampler, shuffle_on_moves_most_indices)
{
    /* A permutation that left everything in place would pass the coverage
     * test; require it to actually shuffle. */
    const int64_t n = 1000;
    int64_t *o = full_order(n, 0, 1, 0);
    int64_t fixed = 0;
    for (int64_t p = 0; p < n; p++)
        fixed += o[p] == p;
    cr_assert_lt(fixed, 20, "%lld of 1000 indices stayed in place",
                 (long long)fixed);
    free(o);
}

/* Known answers. These pin the order across machines, compilers and
 * versions: a checkpoint resumed elsewhere, or by a later pinload, must see
 * the same samples in the same order. Changing them is a format break. */
Test(sampler, known_answer_n1000_seed0_epoch0)
{
    static const int64_t want[10] = {909, 841, 716, 895, 749,
                                     162, 147, 534, 762, 981};
    sampler s;
    sampler_init(&s, 1000, 0, 1, 0, 1, 0);
    for (int p = 0; p < 10; p++)
        cr_assert_eq(sampler_permute(&s, 0, p), want[p],
                     "position %d: %lld, want %lld", p,
                     (long long)sampler_permute(&s, 0, p), (long long)want[p]);
}

Test(sampler, known_answer_n1000_seed42_epoch3)
{
    static const int64_t want[10] = {539, 847, 372, 661, 239,
                                     98,  195, 628, 681, 200};
    sampler s;
    sampler_init(&s, 1000, 42, 1, 0, 1, 0);
    for (int p = 0; p < 10; p++)
        cr_assert_eq(sampler_permute(&s, 3, p), want[p],
                     "position %d: %lld, want %lld", p,
                     (long long)sampler_permute(&s, 3, p), (long long)want[p]);
}

Test(sampler, datasets_beyond_2_32_stay_in_range_without_repeats)
{
    const int64_t n = ((int64_t)1 << 33) + 3;
    sampler s;
    sampler_init(&s, n, 9, 1, 0, 1, 0);
    enum { K = 2000 };
    int64_t *o = malloc(K * sizeof *o);
    for (int64_t p = 0; p < K; p++) {
        o[p] = sampler_permute(&s, 1, p);
        cr_assert(o[p] >= 0 && o[p] < n, "position %lld: %lld", (long long)p,
                  (long long)o[p]);
        for (int64_t q = 0; q < p; q++)
            cr_assert_neq(o[q], o[p], "positions %lld and %lld collide",
                          (long long)q, (long long)p);
    }
    /* And the same positions near the end of the range. */
    for (int64_t p = n - 100; p < n; p++) {
        const int64_t v = sampler_permute(&s, 1, p);
        cr_assert(v >= 0 && v < n);
    }
    free(o);
}

/* ---- sharding: pad (DistributedSampler, drop_last=False) ----------------- */

Test(sampler, pad_mode_matches_distributed_sampler_exactly)
{
    for (size_t a = 0; a < NSHARD_N; a++)
        for (size_t b = 0; b < NSHARD_W; b++) {
            const int64_t n = shard_ns[a];
            const int world = shard_worlds[b];
            for (int shuffle = 0; shuffle <= 1; shuffle++) {
                int64_t *perm = full_order(n, 5, shuffle, 2);
                int64_t total;
                int64_t *padded = torch_padded(perm, n, world, &total);
                for (int rank = 0; rank < world; rank++) {
                    sampler s;
                    sampler_init(&s, n, 5, shuffle, rank, world, 0);
                    cr_assert_eq(s.per_rank, total / world,
                                 "n=%lld world=%d rank=%d: per_rank %lld",
                                 (long long)n, world, rank,
                                 (long long)s.per_rank);
                    /* indices[rank:total_size:num_replicas] */
                    for (int64_t j = 0; j < s.per_rank; j++)
                        cr_assert_eq(
                            sampler_index(&s, 2, j), padded[rank + j * world],
                            "n=%lld world=%d rank=%d shuffle=%d "
                            "j=%lld",
                            (long long)n, world, rank, shuffle, (long long)j);
                }
                free(padded);
                free(perm);
            }
        }
}

Test(sampler, pad_mode_gives_every_rank_ceil_n_over_world)
{
    for (size_t a = 0; a < NSHARD_N; a++)
        for (size_t b = 0; b < NSHARD_W; b++) {
            const int64_t n = shard_ns[a];
            const int world = shard_worlds[b];
            const int64_t want = (n + world - 1) / world;
            for (int rank = 0; rank < world; rank++) {
                sampler s;
                sampler_init(&s, n, 0, 1, rank, world, 0);
                cr_assert_eq(s.per_rank, want, "n=%lld world=%d rank=%d",
                             (long long)n, world, rank);
            }
        }
    /* Spelled out: 13 over 4 is 4 each (16 positions, 3 padded). */
    sampler s;
    sampler_init(&s, 13, 0, 1, 3, 4, 0);
    cr_assert_eq(s.per_rank, 4);
    /* 1 over 7: every rank gets the single index. */
    for (int rank = 0; rank < 7; rank++) {
        sampler_init(&s, 1, 0, 1, rank, 7, 0);
        cr_assert_eq(s.per_rank, 1);
        cr_assert_eq(sampler_index(&s, 0, 0), 0);
    }
}

Test(sampler, pad_mode_union_over_ranks_is_the_padded_list_as_a_multiset)
{
    for (size_t a = 0; a < NSHARD_N; a++)
        for (size_t b = 0; b < NSHARD_W; b++) {
            const int64_t n = shard_ns[a];
            const int world = shard_worlds[b];
            const int64_t per = (n + world - 1) / world;
            const int64_t total = per * world;
            int64_t *want = calloc((size_t)n, sizeof *want);
            int64_t *got = calloc((size_t)n, sizeof *got);
            /* Each index appears once, and the padding repeats the first
             * total - n entries of the order: index perm[k] gets one more
             * copy for each k < total - n taken mod n. */
            int64_t *perm = full_order(n, 11, 1, 0);
            for (int64_t p = 0; p < total; p++)
                want[perm[p % n]]++;
            for (int rank = 0; rank < world; rank++) {
                sampler s;
                sampler_init(&s, n, 11, 1, rank, world, 0);
                for (int64_t j = 0; j < s.per_rank; j++) {
                    const int64_t v = sampler_index(&s, 0, j);
                    cr_assert(v >= 0 && v < n);
                    got[v]++;
                }
            }
            int64_t sum = 0;
            for (int64_t i = 0; i < n; i++) {
                cr_assert_eq(got[i], want[i],
                             "n=%lld world=%d: index %lld delivered %lld "
                             "times, want %lld",
                             (long long)n, world, (long long)i,
                             (long long)got[i], (long long)want[i]);
                cr_assert_geq(got[i], 1);
                sum += got[i];
            }
            cr_assert_eq(sum, total);
            free(perm);
            free(want);
            free(got);
        }
}

Test(sampler, pad_mode_shards_are_disjoint_when_world_divides_n)
{
    static const struct {
        int64_t n;
        int world;
    } cases[] = {{10, 1}, {10, 2},   {10, 5}, {12, 3},
                 {12, 4}, {4096, 8}, {7, 7}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t n = cases[c].n;
        const int world = cases[c].world;
        int *owner = malloc((size_t)n * sizeof *owner);
        for (int64_t i = 0; i < n; i++)
            owner[i] = -1;
        for (int rank = 0; rank < world; rank++) {
            sampler s;
            sampler_init(&s, n, 3, 1, rank, world, 0);
            cr_assert_eq(s.per_rank, n / world);
            for (int64_t j = 0; j < s.per_rank; j++) {
                const int64_t v = sampler_index(&s, 1, j);
                cr_assert_eq(owner[v], -1,
                             "n=%lld world=%d: index %lld on ranks %d and %d",
                             (long long)n, world, (long long)v, owner[v], rank);
                owner[v] = rank;
            }
        }
        for (int64_t i = 0; i < n; i++)
            cr_assert_neq(owner[i], -1, "index %lld on no rank", (long long)i);
        free(owner);
    }
}

Test(sampler, pad_mode_spelled_out_for_identity_order)
{
    /* n = 5, world = 3, no shuffle: padded list 0 1 2 3 4 0, so rank 0
     * gets 0 3, rank 1 gets 1 4, rank 2 gets 2 0. */
    static const int64_t want[3][2] = {{0, 3}, {1, 4}, {2, 0}};
    for (int rank = 0; rank < 3; rank++) {
        sampler s;
        sampler_init(&s, 5, 0, 0, rank, 3, 0);
        cr_assert_eq(s.per_rank, 2);
        for (int j = 0; j < 2; j++)
            cr_assert_eq(sampler_index(&s, 0, j), want[rank][j], "rank %d j %d",
                         rank, j);
    }
    /* n = 2, world = 7: padding (5) exceeds n, so the list repeats whole:
     * 0 1 0 1 0 1 0, one each. */
    for (int rank = 0; rank < 7; rank++) {
        sampler s;
        sampler_init(&s, 2, 0, 0, rank, 7, 0);
        cr_assert_eq(s.per_rank, 1);
        cr_assert_eq(sampler_index(&s, 0, 0), rank % 2, "rank %d", rank);
    }
}

/* ---- sharding: drop (DistributedSampler, drop_last=True) ----------------- */

Test(sampler, drop_mode_per_rank_matches_distributed_sampler)
{
    for (size_t a = 0; a < NSHARD_N; a++)
        for (size_t b = 0; b < NSHARD_W; b++) {
            const int64_t n = shard_ns[a];
            const int world = shard_worlds[b];
            const int64_t want = torch_drop_num_samples(n, world);
            cr_assert_eq(want, n / world);
            for (int rank = 0; rank < world; rank++) {
                sampler s;
                sampler_init(&s, n, 0, 1, rank, world, 1);
                cr_assert_eq(s.per_rank, want,
                             "n=%lld world=%d rank=%d: %lld, want %lld",
                             (long long)n, world, rank, (long long)s.per_rank,
                             (long long)want);
            }
        }
    /* Spelled out: 13 over 4 drops 1 (3 each); 10 over 7 drops 3 (1 each);
     * 5 over 7 leaves none. */
    sampler s;
    sampler_init(&s, 13, 0, 1, 0, 4, 1);
    cr_assert_eq(s.per_rank, 3);
    sampler_init(&s, 10, 0, 1, 6, 7, 1);
    cr_assert_eq(s.per_rank, 1);
    sampler_init(&s, 5, 0, 1, 0, 7, 1);
    cr_assert_eq(s.per_rank, 0);
}

Test(sampler, drop_mode_matches_distributed_sampler_exactly)
{
    /* indices = indices[:total_size]; indices[rank:total_size:world] */
    for (size_t a = 0; a < NSHARD_N; a++)
        for (size_t b = 0; b < NSHARD_W; b++) {
            const int64_t n = shard_ns[a];
            const int world = shard_worlds[b];
            const int64_t per = torch_drop_num_samples(n, world);
            int64_t *perm = full_order(n, 8, 1, 6);
            for (int rank = 0; rank < world; rank++) {
                sampler s;
                sampler_init(&s, n, 8, 1, rank, world, 1);
                cr_assert_eq(s.per_rank, per);
                for (int64_t j = 0; j < per; j++)
                    cr_assert_eq(sampler_index(&s, 6, j),
                                 perm[rank + j * world],
                                 "n=%lld world=%d rank=%d j=%lld", (long long)n,
                                 world, rank, (long long)j);
            }
            free(perm);
        }
}

Test(sampler, drop_mode_shards_are_disjoint_and_cover_the_order_head)
{
    for (size_t a = 0; a < NSHARD_N; a++)
        for (size_t b = 0; b < NSHARD_W; b++) {
            const int64_t n = shard_ns[a];
            const int world = shard_worlds[b];
            const int64_t per = n / world;
            int64_t *perm = full_order(n, 21, 1, 1);
            int *owner = malloc((size_t)n * sizeof *owner);
            for (int64_t i = 0; i < n; i++)
                owner[i] = -1;
            int64_t delivered = 0;
            for (int rank = 0; rank < world; rank++) {
                sampler s;
                sampler_init(&s, n, 21, 1, rank, world, 1);
                for (int64_t j = 0; j < s.per_rank; j++) {
                    const int64_t v = sampler_index(&s, 1, j);
                    cr_assert(v >= 0 && v < n);
                    cr_assert_eq(owner[v], -1,
                                 "n=%lld world=%d: index %lld on ranks %d "
                                 "and %d",
                                 (long long)n, world, (long long)v, owner[v],
                                 rank);
                    owner[v] = rank;
                    delivered++;
                }
            }
            cr_assert_eq(delivered, per * world);
            /* The union is exactly the first world * per_rank entries of
             * the permutation; the tail is what was cut. */
            for (int64_t p = 0; p < n; p++) {
                if (p < per * world)
                    cr_assert_neq(owner[perm[p]], -1,
                                  "n=%lld world=%d: head entry %lld missing",
                                  (long long)n, world, (long long)p);
                else
                    cr_assert_eq(owner[perm[p]], -1,
                                 "n=%lld world=%d: tail entry %lld delivered",
                                 (long long)n, world, (long long)p);
            }
            free(owner);
            free(perm);
        }
}

Test(sampler, drop_mode_equals_pad_mode_when_world_divides_n)
{
    for (int world = 1; world <= 6; world++) {
        const int64_t n = 60;
        for (int rank = 0; rank < world; rank++) {
            sampler pad, drop;
            sampler_init(&pad, n, 4, 1, rank, world, 0);
            sampler_init(&drop, n, 4, 1, rank, world, 1);
            cr_assert_eq(pad.per_rank, n / world);
            cr_assert_eq(drop.per_rank, n / world);
            for (int64_t j = 0; j < n / world; j++)
                cr_assert_eq(sampler_index(&pad, 0, j),
                             sampler_index(&drop, 0, j));
        }
    }
}
