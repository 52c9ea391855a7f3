#include "sampler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/philox.h"
#include "pinload.h"

#define FEISTEL_ROUNDS 6

void sampler_init(sampler *s, int64_t n, uint64_t seed, int shuffle, int rank,
                  int world, int drop)
{
    s->n = n;
    s->seed = seed;
    s->shuffle = shuffle;
    s->rank = rank;
    s->world = world;
    s->nshards = 0;
    s->window = 0;
    s->first = NULL;
    s->tables = NULL;
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

/* ---- the shard order ---- */

/* The round function of bijection(): the global order's, with the domain,
 * the round and the tweak in the counter. */
static uint32_t keyed_round(uint64_t seed, uint32_t domain, int64_t epoch,
                            uint64_t tweak, int round, uint32_t x)
{
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const uint32_t ctr[4] = {x, (uint32_t)tweak, (uint32_t)epoch,
                             domain ^ ((uint32_t)round << 24) ^
                                 (uint32_t)(tweak >> 32) ^
                                 ((uint32_t)((uint64_t)epoch >> 32) << 8)};
    uint32_t out[4];
    philox4x32_10(ctr, key, out);
    return out[0];
}

int64_t sampler_bijection(uint64_t seed, uint32_t domain, int64_t epoch,
                          uint64_t tweak, int64_t m, int64_t x)
{
    if (m <= 1)
        return x;
    int bits = 2;
    while (bits < 64 && ((uint64_t)1 << bits) < (uint64_t)m)
        bits += 2;
    const int half = bits / 2;
    const uint32_t mask = (uint32_t)(((uint64_t)1 << half) - 1);
    uint64_t v = (uint64_t)x;
    do {
        uint32_t left = (uint32_t)(v >> half) & mask;
        uint32_t right = (uint32_t)v & mask;
        for (int r = 0; r < FEISTEL_ROUNDS; r++) {
            const uint32_t next =
                left ^
                (keyed_round(seed, domain, epoch, tweak, r, right) & mask);
            left = right;
            right = next;
        }
        v = ((uint64_t)left << half) | right;
    } while (v >= (uint64_t)m);
    return (int64_t)v;
}

/* One epoch's shard order: the shards laid out (perm) and where each
 * starts in the stream (start, [nshards + 1]). */
typedef struct epoch_table {
    int64_t epoch; /* -1: empty */
    uint64_t used; /* for least-recently-used replacement */
    int32_t *perm;
    int64_t *start;
} epoch_table;

/* Two epochs overlap in the ring (the next one starts while this one
 * ends), and pl_loader_epoch_order may ask for any: three tables hold
 * those without a rebuild. A rebuild (O(S) bijections, under the lock) is
 * once per epoch and table, not per sample. */
#define TABLES 3

struct sampler_tables {
    pthread_mutex_t mu;
    uint64_t clock;
    epoch_table t[TABLES];
};

/* The shard layouts and counts, freed (their mutex is the caller's). */
static void free_tables(sampler *s)
{
    for (int i = 0; s->tables && i < TABLES; i++) {
        free(s->tables->t[i].perm);
        free(s->tables->t[i].start);
    }
    free(s->tables);
    free(s->first);
    s->tables = NULL;
    s->first = NULL;
}

int sampler_use_shards(sampler *s, const int64_t *first, int nshards,
                       int64_t window)
{
    s->first = malloc(((size_t)nshards + 1) * sizeof *s->first);
    s->tables = calloc(1, sizeof *s->tables);
    if (!s->first || !s->tables)
        goto fail;
    memcpy(s->first, first, ((size_t)nshards + 1) * sizeof *s->first);
    for (int i = 0; i < TABLES; i++) {
        epoch_table *t = &s->tables->t[i];
        t->epoch = -1;
        t->perm = malloc(((size_t)nshards + 1) * sizeof *t->perm);
        t->start = malloc(((size_t)nshards + 1) * sizeof *t->start);
        if (!t->perm || !t->start)
            goto fail;
    }
    if (pthread_mutex_init(&s->tables->mu, NULL) != 0)
        goto fail;
    s->nshards = nshards;
    s->window = window;
    return 0;
fail:
    free_tables(s);
    return PL_ENOMEM;
}

void sampler_fini(sampler *s)
{
    if (!s->tables)
        return;
    pthread_mutex_destroy(&s->tables->mu);
    free_tables(s);
    s->nshards = 0;
}

static void build_table(const sampler *s, epoch_table *t, int64_t epoch)
{
    int64_t at = 0;
    for (int k = 0; k < s->nshards; k++) {
        const int32_t sh =
            s->shuffle
                ? (int32_t)sampler_bijection(s->seed, PHILOX_DOMAIN_SHARDS,
                                             epoch, 0, s->nshards, k)
                : k;
        t->perm[k] = sh;
        t->start[k] = at;
        at += s->first[sh + 1] - s->first[sh];
    }
    t->start[s->nshards] = at;
    t->epoch = epoch;
}

/* The sample at stream position q (0 <= q < n) of the epoch: the last
 * laid-out shard starting at or before q (an empty shard starts where the
 * next does, so it is passed over), and q's place in it. */
static int64_t stream_at(const sampler *s, int64_t epoch, int64_t q)
{
    sampler_tables *tb = s->tables;
    pthread_mutex_lock(&tb->mu);
    epoch_table *t = NULL, *old = &tb->t[0];
    for (int i = 0; i < TABLES && !t; i++) {
        if (tb->t[i].epoch == epoch)
            t = &tb->t[i];
        else if (tb->t[i].used < old->used)
            old = &tb->t[i];
    }
    if (!t) {
        t = old;
        build_table(s, t, epoch);
    }
    t->used = ++tb->clock;
    int lo = 0, hi = s->nshards - 1; /* start[lo] <= q < start[hi + 1] */
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (t->start[mid] <= q)
            lo = mid;
        else
            hi = mid - 1;
    }
    const int64_t idx = s->first[t->perm[lo]] + (q - t->start[lo]);
    pthread_mutex_unlock(&tb->mu);
    return idx;
}

static int64_t shards_index(const sampler *s, int64_t epoch, int64_t j)
{
    const int64_t b = j / s->window, at = b * s->window;
    const int64_t len =
        s->per_rank - at < s->window ? s->per_rank - at : s->window;
    const int64_t from = (int64_t)s->rank * s->per_rank + at;
    int64_t in = j - at;
    if (s->shuffle)
        in = sampler_bijection(s->seed, PHILOX_DOMAIN_WINDOW, epoch,
                               (uint64_t)from, len, in);
    return stream_at(s, epoch, (from + in) % s->n);
}

/* The shards of stream positions [lo, hi) in stream order, appended to
 * out[*n] (the last one not repeated). */
static void sequence_part(const sampler *s, int64_t epoch, int64_t lo,
                          int64_t hi, int32_t *out, int *n)
{
    int64_t at = 0;
    for (int k = 0; k < s->nshards && at < hi; k++) {
        const int32_t sh =
            s->shuffle
                ? (int32_t)sampler_bijection(s->seed, PHILOX_DOMAIN_SHARDS,
                                             epoch, 0, s->nshards, k)
                : k;
        const int64_t len = s->first[sh + 1] - s->first[sh];
        if (len > 0 && at + len > lo && (*n == 0 || out[*n - 1] != sh))
            out[(*n)++] = sh;
        at += len;
    }
}

int sampler_shard_sequence(const sampler *s, int64_t epoch, int64_t from,
                           int32_t *out)
{
    if (!s->nshards || from >= s->per_rank)
        return 0;
    from -= from % s->window;
    /* The range is per_rank - from <= n positions from q, wrapping once. */
    const int64_t q = ((int64_t)s->rank * s->per_rank + from) % s->n;
    const int64_t end = q + (s->per_rank - from);
    int n = 0;
    sequence_part(s, epoch, q, end < s->n ? end : s->n, out, &n);
    if (end > s->n)
        sequence_part(s, epoch, 0, end - s->n, out, &n);
    return n;
}

int64_t sampler_index(const sampler *s, int64_t epoch, int64_t j)
{
    if (s->nshards)
        return shards_index(s, epoch, j);
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
