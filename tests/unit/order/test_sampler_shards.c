/* PL_ORDER_SHARDS' order (order/sampler.h): checked against a reference
 * written here from the header's definition (the shards' stream built as
 * an array, the windows permuted one by one), and for what the order
 * promises: equal counts per rank, whole shards in sequence, samples kept
 * in their window, every sample once per epoch, other shard orders in
 * other epochs, the same answers from many threads. */
#include <pthread.h>

#include "../common/philox.h"
#include "../order/sampler.h"
#include "pinload.h"
#include "testutil.h"

/* ---- the reference, from the definition in sampler.h ---------------- */

static uint32_t ref_round(uint64_t seed, uint32_t domain, int64_t e,
                          uint64_t tweak, int round, uint32_t x)
{
    const uint32_t key[2] = {(uint32_t)(seed & 0xffffffffu),
                             (uint32_t)(seed >> 32)};
    const uint32_t word3 = domain ^ ((uint32_t)round << 24) ^
                           (uint32_t)(tweak >> 32) ^
                           ((uint32_t)((uint64_t)e >> 32) << 8);
    const uint32_t ctr[4] = {x, (uint32_t)(tweak & 0xffffffffu),
                             (uint32_t)((uint64_t)e & 0xffffffffu), word3};
    uint32_t out[4];
    philox4x32_10(ctr, key, out);
    return out[0];
}

/* bijection(domain, tweak) over [0, m) at x: six Feistel rounds on the
 * smallest power of four >= max(m, 2), walked until inside [0, m). */
static int64_t ref_bijection(uint64_t seed, uint32_t domain, int64_t e,
                             uint64_t tweak, int64_t m, int64_t x)
{
    if (m <= 1)
        return x;
    int half = 1;
    while (((int64_t)1 << (2 * half)) < m)
        half++;
    const uint32_t mask = (1u << half) - 1;
    int64_t v = x;
    do {
        uint32_t l = (uint32_t)(v >> half), r = (uint32_t)v & mask;
        for (int k = 0; k < 6; k++) {
            const uint32_t f = ref_round(seed, domain, e, tweak, k, r) & mask;
            const uint32_t nr = l ^ f;
            l = r;
            r = nr;
        }
        v = ((int64_t)l << half) | r;
    } while (v >= m);
    return v;
}

typedef struct dataset {
    int nshards;
    const int64_t *counts;
    int64_t first[64];
    int64_t n;
} dataset;

static void dataset_make(dataset *d, const int64_t *counts, int nshards)
{
    d->nshards = nshards;
    d->counts = counts;
    d->first[0] = 0;
    for (int k = 0; k < nshards; k++)
        d->first[k + 1] = d->first[k] + counts[k];
    d->n = d->first[nshards];
}

/* Rank r's whole epoch, by the definition: malloc'd, [out] *per. */
static int64_t *ref_epoch(const dataset *d, uint64_t seed, int shuffle,
                          int64_t e, int r, int world, int drop, int64_t window,
                          int64_t *per)
{
    int64_t *stream = malloc((size_t)d->n * sizeof *stream);
    int64_t at = 0;
    for (int k = 0; k < d->nshards; k++) {
        const int sh = shuffle ? (int)ref_bijection(seed, PHILOX_DOMAIN_SHARDS,
                                                    e, 0, d->nshards, k)
                               : k;
        for (int64_t i = 0; i < d->counts[sh]; i++)
            stream[at++] = d->first[sh] + i;
    }
    cr_assert_eq(at, d->n);
    *per = drop && d->n % world ? d->n / world : (d->n + world - 1) / world;
    int64_t *out = malloc((size_t)*per * sizeof *out);
    for (int64_t j = 0; j < *per; j++) {
        const int64_t b = j / window, start = b * window;
        const int64_t len = *per - start < window ? *per - start : window;
        const int64_t from = (int64_t)r * *per + start;
        const int64_t in = shuffle
                               ? ref_bijection(seed, PHILOX_DOMAIN_WINDOW, e,
                                               (uint64_t)from, len, j - start)
                               : j - start;
        out[j] = stream[(from + in) % d->n];
    }
    free(stream);
    return out;
}

static void shards_sampler(sampler *s, const dataset *d, uint64_t seed,
                           int shuffle, int r, int world, int drop,
                           int64_t window)
{
    sampler_init(s, d->n, seed, shuffle, r, world, drop);
    cr_assert_eq(sampler_use_shards(s, d->first, d->nshards, window), 0);
}

/* The shard (of d) holding sample i. */
static int shard_of(const dataset *d, int64_t i)
{
    int k = 0;
    while (d->first[k + 1] <= i)
        k++;
    return k;
}

/* Unequal shards, two of them empty. */
static const int64_t COUNTS[] = {7, 3, 0, 12, 5, 1, 9, 0, 4, 8, 6};
#define NCOUNTS ((int)(sizeof COUNTS / sizeof COUNTS[0]))

/* ---- the definition --------------------------------------------------- */

Test(sampler_shards, matches_the_definition_for_every_rank_window_and_mode)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    static const int64_t windows[] = {1, 2, 5, 16, 4096};
    for (int world = 1; world <= 6; world++)
        for (int drop = 0; drop < 2; drop++)
            for (int shuffle = 0; shuffle < 2; shuffle++)
                for (size_t w = 0; w < sizeof windows / sizeof *windows; w++)
                    for (int r = 0; r < world; r++) {
                        sampler s;
                        shards_sampler(&s, &d, 77, shuffle, r, world, drop,
                                       windows[w]);
                        for (int64_t e = 0; e < 3; e++) {
                            int64_t per;
                            int64_t *want =
                                ref_epoch(&d, 77, shuffle, e, r, world, drop,
                                          windows[w], &per);
                            cr_assert_eq(s.per_rank, per);
                            for (int64_t j = 0; j < per; j++)
                                cr_assert_eq(
                                    sampler_index(&s, e, j), want[j],
                                    "world %d rank %d drop %d shuffle %d "
                                    "window %lld epoch %lld j %lld",
                                    world, r, drop, shuffle,
                                    (long long)windows[w], (long long)e,
                                    (long long)j);
                            free(want);
                        }
                        sampler_fini(&s);
                    }
}

/* These pin the order across machines and versions, as the global order's
 * known answers do: a state resumed elsewhere must see the same samples.
 * Changing them is a format break. */
Test(sampler_shards, known_answer)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    sampler s;
    shards_sampler(&s, &d, 0, 1, 1, 2, 0, 4);
    static const int64_t want[12] = {48, 46, 47, 45, 49, 50,
                                     52, 51, 29, 53, 28, 54};
    for (int j = 0; j < 12; j++)
        cr_assert_eq(sampler_index(&s, 2, j), want[j], "j %d: %lld", j,
                     (long long)sampler_index(&s, 2, j));
    sampler_fini(&s);
}

Test(sampler_shards, bijection_is_a_permutation_for_every_size)
{
    for (int64_t m = 1; m <= 300; m++) {
        uint8_t seen[300] = {0};
        for (int64_t x = 0; x < m; x++) {
            const int64_t v =
                sampler_bijection(3, PHILOX_DOMAIN_WINDOW, 1, 1000 + m, m, x);
            cr_assert(v >= 0 && v < m, "m %lld: %lld", (long long)m,
                      (long long)v);
            cr_assert_eq(seen[v], 0, "m %lld: %lld twice", (long long)m,
                         (long long)v);
            seen[v] = 1;
        }
    }
}

/* ---- what the order promises ------------------------------------------ */

Test(sampler_shards, every_sample_once_per_epoch_when_the_ranks_divide_it)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS); /* 55 samples */
    static const int worlds[] = {1, 5, 11};
    for (int wi = 0; wi < 3; wi++) {
        const int world = worlds[wi];
        cr_assert_eq(d.n % world, 0);
        int seen[55] = {0};
        for (int r = 0; r < world; r++) {
            sampler s;
            shards_sampler(&s, &d, 5, 1, r, world, 0, 8);
            cr_assert_eq(s.per_rank, d.n / world);
            for (int64_t j = 0; j < s.per_rank; j++)
                seen[sampler_index(&s, 4, j)]++;
            sampler_fini(&s);
        }
        for (int i = 0; i < 55; i++)
            cr_assert_eq(seen[i], 1, "world %d sample %d: %d", world, i,
                         seen[i]);
    }
}

/* Pad repeats exactly the stream's first W * per_rank - n samples; drop
 * repeats none and leaves out n - W * per_rank; both give every rank the
 * same count. */
Test(sampler_shards, pad_and_drop_give_equal_counts)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS); /* 55 samples */
    for (int world = 2; world <= 8; world++) {
        if (d.n % world == 0)
            continue;
        for (int drop = 0; drop < 2; drop++) {
            int seen[55] = {0};
            int64_t per = -1, total = 0;
            for (int r = 0; r < world; r++) {
                sampler s;
                shards_sampler(&s, &d, 9, 1, r, world, drop, 6);
                cr_assert(per < 0 || s.per_rank == per);
                per = s.per_rank;
                for (int64_t j = 0; j < per; j++)
                    seen[sampler_index(&s, 0, j)]++;
                total += per;
                sampler_fini(&s);
            }
            int twice = 0, never = 0;
            for (int i = 0; i < 55; i++) {
                cr_assert_leq(seen[i], 2);
                twice += seen[i] == 2;
                never += seen[i] == 0;
            }
            if (drop) {
                cr_assert_eq(per, d.n / world);
                cr_assert_eq(twice, 0);
                cr_assert_eq(never, d.n - total);
            } else {
                cr_assert_eq(per, (d.n + world - 1) / world);
                cr_assert_eq(never, 0);
                cr_assert_eq(twice, total - d.n);
            }
        }
    }
}

/* With window 1, a rank's samples are consecutive stretches of whole
 * shards: each shard entered at its first sample (but the rank's first)
 * and left at its last (but the rank's last), none met twice. */
Test(sampler_shards, each_rank_reads_its_shards_in_sequence)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    for (int world = 1; world <= 5; world++)
        for (int r = 0; r < world; r++) {
            sampler s;
            shards_sampler(&s, &d, 13, 1, r, world, 1, 1);
            int met[NCOUNTS] = {0};
            int64_t prev = -1;
            for (int64_t j = 0; j < s.per_rank; j++) {
                const int64_t i = sampler_index(&s, 3, j);
                const int k = shard_of(&d, i);
                if (prev >= 0 && shard_of(&d, prev) == k) {
                    cr_assert_eq(i, prev + 1, "world %d rank %d j %lld", world,
                                 r, (long long)j);
                } else {
                    cr_assert_eq(met[k], 0, "shard %d met twice", k);
                    met[k] = 1;
                    if (j > 0)
                        cr_assert_eq(i, d.first[k], "entered mid-shard");
                    if (prev >= 0)
                        cr_assert_eq(prev, d.first[shard_of(&d, prev) + 1] - 1,
                                     "left mid-shard");
                }
                prev = i;
            }
            sampler_fini(&s);
        }
}

/* A window's samples are the window's positions of the unshuffled rank
 * order (shuffle 0), permuted among themselves, and not all in place. */
Test(sampler_shards, samples_stay_in_their_window)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    const int64_t w = 8;
    sampler s, plain;
    shards_sampler(&s, &d, 21, 1, 1, 2, 0, w);
    shards_sampler(&plain, &d, 21, 1, 1, 2, 0, 1);
    int moved = 0;
    for (int64_t start = 0; start < s.per_rank; start += w) {
        const int64_t end = start + w < s.per_rank ? start + w : s.per_rank;
        for (int64_t j = start; j < end; j++) {
            const int64_t i = sampler_index(&s, 1, j);
            int64_t found = -1;
            for (int64_t k = start; k < end; k++)
                if (sampler_index(&plain, 1, k) == i)
                    found = k;
            cr_assert_geq(found, 0, "position %lld left its window",
                          (long long)j);
            moved += found != j;
        }
    }
    cr_assert_gt(moved, s.per_rank / 2);
    sampler_fini(&s);
    sampler_fini(&plain);
}

Test(sampler_shards, epochs_lay_the_shards_out_differently)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    sampler s;
    shards_sampler(&s, &d, 0, 1, 0, 1, 0, 1);
    int firsts[6], distinct = 0;
    for (int e = 0; e < 6; e++) {
        firsts[e] = shard_of(&d, sampler_index(&s, e, 0));
        int seen_before = 0;
        for (int k = 0; k < e; k++)
            seen_before |= firsts[k] == firsts[e];
        distinct += !seen_before;
    }
    cr_assert_geq(distinct, 3, "6 epochs started in %d shards", distinct);
    /* and the whole order differs between two epochs */
    int differ = 0;
    for (int64_t j = 0; j < s.per_rank; j++)
        differ += sampler_index(&s, 0, j) != sampler_index(&s, 1, j);
    cr_assert_gt(differ, 0);
    sampler_fini(&s);
}

Test(sampler_shards, shuffle_0_is_the_file_order_cut_in_ranges)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    for (int r = 0; r < 4; r++) {
        sampler s;
        shards_sampler(&s, &d, 99, 0, r, 4, 0, 4096);
        cr_assert_eq(s.per_rank, 14);
        for (int64_t j = 0; j < 14; j++)
            cr_assert_eq(sampler_index(&s, 7, j), (r * 14 + j) % 55);
        sampler_fini(&s);
    }
}

/* ---- threads ---------------------------------------------------------- */

typedef struct walker {
    const sampler *s;
    int64_t *got; /* [6][per_rank] */
} walker;

static void *walk(void *arg)
{
    walker *w = arg;
    for (int round = 0; round < 20; round++)
        for (int64_t e = 0; e < 6; e++)
            for (int64_t j = 0; j < w->s->per_rank; j++)
                w->got[e * w->s->per_rank + j] = sampler_index(w->s, e, j);
    return NULL;
}

/* Six epochs asked for at once by four threads (more than the tables
 * kept): the answers are those of one thread. */
Test(sampler_shards, threads_get_the_same_answers)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    sampler s;
    shards_sampler(&s, &d, 4, 1, 1, 3, 0, 5);
    const int64_t per = s.per_rank;
    walker w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (walker){&s, malloc((size_t)(6 * per) * sizeof(int64_t))};
        cr_assert_eq(pthread_create(&t[i], NULL, walk, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int64_t e = 0; e < 6; e++) {
        int64_t pr;
        int64_t *want = ref_epoch(&d, 4, 1, e, 1, 3, 0, 5, &pr);
        for (int i = 0; i < 4; i++)
            for (int64_t j = 0; j < per; j++)
                cr_assert_eq(w[i].got[e * per + j], want[j]);
        free(want);
    }
    for (int i = 0; i < 4; i++)
        free(w[i].got);
    sampler_fini(&s);
}

Test(sampler_shards, fini_is_safe_on_a_global_or_zeroed_sampler)
{
    sampler s;
    sampler_init(&s, 10, 0, 1, 0, 1, 0);
    sampler_fini(&s);
    sampler_fini(&s);
    sampler z = {0};
    sampler_fini(&z);
}

/* The shards a rank reaches, in order (what remote shards are fetched
 * by): those of its stream range from the window holding `from` on, each
 * run of one shard named once, empty shards never; every shard a position
 * from `from` on reads is among them. The stream range is read with
 * window 1 (the same shard layout, no shuffle within windows). */
Test(sampler_shards, shard_sequence_is_the_shards_the_rank_reaches_in_order)
{
    dataset d;
    dataset_make(&d, COUNTS, NCOUNTS);
    const int64_t windows[] = {1, 4, 16};
    for (int world = 1; world <= 5; world++)
        for (int r = 0; r < world; r++)
            for (int w = 0; w < 3; w++)
                for (int mode = 0; mode < 4; mode++) {
                    const int shuffle = mode & 1, drop = mode >> 1;
                    sampler s, one;
                    shards_sampler(&s, &d, 13, shuffle, r, world, drop,
                                   windows[w]);
                    shards_sampler(&one, &d, 13, shuffle, r, world, drop, 1);
                    for (int64_t from = 0; from < s.per_rank; from += 5) {
                        int32_t seq[NCOUNTS + 1], want[NCOUNTS + 1];
                        const int n = sampler_shard_sequence(&s, 2, from, seq);
                        int m = 0;
                        for (int64_t j = from - from % windows[w];
                             j < s.per_rank; j++) {
                            const int k =
                                shard_of(&d, sampler_index(&one, 2, j));
                            if (m == 0 || want[m - 1] != k)
                                want[m++] = k;
                        }
                        cr_assert_eq(n, m,
                                     "world %d rank %d w %lld mode %d "
                                     "from %lld: %d shards, want %d",
                                     world, r, (long long)windows[w], mode,
                                     (long long)from, n, m);
                        for (int k = 0; k < n; k++) {
                            cr_assert_eq(seq[k], want[k], "entry %d", k);
                            cr_assert_gt(COUNTS[seq[k]], 0, "an empty shard");
                        }
                        for (int64_t j = from; j < s.per_rank; j++) {
                            const int k = shard_of(&d, sampler_index(&s, 2, j));
                            int in = 0;
                            for (int q = 0; q < n && !in; q++)
                                in = seq[q] == k;
                            cr_assert(in, "position %lld's shard %d missing",
                                      (long long)j, k);
                        }
                    }
                    sampler_fini(&s);
                    sampler_fini(&one);
                }
}
