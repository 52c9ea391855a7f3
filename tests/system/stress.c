/* pinload-stress: the pipeline under load, checked against a calm run.
 *
 * A generated dataset with bad files among good ones is loaded for several
 * epochs by a reference loader (1 worker, 1 slot, 1 buffer), then by
 * stressed ones: workers oversubscribed (8 on 2 cores), consumers that
 * sleep at random, two consumer threads sharing one loader, two loaders at
 * once, and destroys at random moments with batches held. Every stressed run
 * must deliver every good sample exactly once per epoch, in the same
 * batches, with the same bytes, and report every bad file.
 *
 * Plain C against the public API, like a user's program, so it also runs
 * under valgrind (make valgrind). Exit status 0 when every check passed. */
#define _DEFAULT_SOURCE /* mkdtemp, usleep */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jpegwrite.h"

#include "pinload.h"

#define EPOCHS 3
#define CLASSES 4
#define PER_CLASS 12
#define BAD_FILES 3

static int failed;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "stress: line %d: %s: ", __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failed++;                                                          \
            return -1;                                                         \
        }                                                                      \
    } while (0)

/* ---- dataset ---- */

static void write_jpeg(const char *path, int w, int h, unsigned seed,
                       int progressive)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++) {
        rgb[i * 3 + 0] = (uint8_t)(i % w * 255 / w + seed * 30);
        rgb[i * 3 + 1] = (uint8_t)(i / w * 255 / h + seed * 70);
        rgb[i * 3 + 2] = (uint8_t)(i * 2654435761u >> 27 ^ seed);
    }
    /* libjpeg's default quality, 75. */
    const tu_jpeg_opts o = {.quality = 75, .progressive = progressive};
    if (tu_jpeg_encode_file(path, rgb, w, h, &o) < 0) {
        perror(path);
        exit(2);
    }
    free(rgb);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static void make_dataset(char *dir)
{
    snprintf(dir, 64, "/tmp/pinload-stress-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
    char path[256];
    unsigned seed = 1;
    for (int c = 0; c < CLASSES; c++) {
        snprintf(path, sizeof path, "%s/c%d", dir, c);
        mkdir(path, 0777);
        for (int i = 0; i < PER_CLASS; i++, seed++) {
            snprintf(path, sizeof path, "%s/c%d/%02d.jpg", dir, c, i);
            write_jpeg(path, 40 + (int)(seed * 7 % 50), 30 + (int)(seed % 40),
                       seed, seed % 4 == 0);
        }
    }
    /* Bad files, spread over the classes. */
    snprintf(path, sizeof path, "%s/c0/05b.jpg", dir);
    write_bytes(path, "this is not a jpeg\n", 19);
    snprintf(path, sizeof path, "%s/c2/empty.jpg", dir);
    write_bytes(path, "", 0);
    static const uint8_t soi_only[] = {0xFF, 0xD8, 0xFF, 0xDB, 0x00};
    snprintf(path, sizeof path, "%s/c3/07b.jpg", dir);
    write_bytes(path, soi_only, sizeof soi_only);
}

/* ---- what a run delivered ---- */

/* Per epoch and batch: the samples' dataset indices and a hash of each
 * sample's bytes. */
typedef struct record {
    int64_t index[EPOCHS][64][8];
    uint64_t hash[EPOCHS][64][8];
    int count[EPOCHS][64];
    int batches[EPOCHS];
} record;

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static pl_config config(const char *data)
{
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = data;
    cfg.device = PL_DEVICE_HOST;
    cfg.batch_size = 5;
    cfg.width = 16;
    cfg.height = 12;
    cfg.augment = PL_AUGMENT_TRAIN;
    cfg.seed = 7;
    cfg.on_error = PL_ON_ERROR_SKIP;
    cfg.log = quiet;
    return cfg;
}

static unsigned next_rand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

/* A consumer: takes batches, sleeping at random while holding each, until
 * EPOCHS epoch ends have been seen by the consumers of its loader. Two
 * consumers may share a loader: batches are recorded by their own epoch and
 * index, so the split between the threads does not matter. */
typedef struct shared {
    pthread_mutex_t mu;
    record *rec;
    int ends;
} shared;

typedef struct consumer {
    pl_loader *l;
    shared *sh;
    size_t sample_bytes;
    unsigned seed;
    int sleep_us;
    int error;
} consumer;

static void note(consumer *c, const pl_batch *b)
{
    record *r = c->sh->rec;
    const int64_t e = b->epoch, k = b->index;
    if (e >= EPOCHS)
        return; /* the loader runs ahead into epochs nobody checks */
    if (k >= 64 || b->count > 8) {
        c->error = 1;
        return;
    }
    r->count[e][k] = b->count;
    for (int i = 0; i < b->count; i++) {
        r->index[e][k][i] = b->indices[i];
        r->hash[e][k][i] =
            fnv1a((const uint8_t *)b->host + (size_t)i * c->sample_bytes,
                  c->sample_bytes);
    }
    if (k + 1 > r->batches[e])
        r->batches[e] = (int)k + 1;
}

static void *consume(void *arg)
{
    consumer *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->sh->mu);
        const int done = c->sh->ends >= EPOCHS;
        pthread_mutex_unlock(&c->sh->mu);
        if (done)
            break;
        const pl_batch *b;
        const int rc = pl_loader_next(c->l, &b);
        if (rc == PL_EPOCH_END) {
            pthread_mutex_lock(&c->sh->mu);
            c->sh->ends++;
            pthread_mutex_unlock(&c->sh->mu);
            continue;
        }
        if (rc < 0) {
            fprintf(stderr, "stress: %s\n", pl_last_error());
            c->error = 2;
            break;
        }
        if (c->sleep_us)
            usleep(next_rand(&c->seed) % (unsigned)c->sleep_us);
        pthread_mutex_lock(&c->sh->mu);
        note(c, b);
        pthread_mutex_unlock(&c->sh->mu);
        pl_loader_release(c->l, b, NULL);
    }
    return NULL;
}

/* Run `cfg` for EPOCHS epochs with `consumers` threads sharing the loader. */
static int run(pl_config cfg, int consumers, int sleep_us, record *rec)
{
    pl_loader *l;
    memset(rec, 0, sizeof *rec);
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    shared sh = {.mu = PTHREAD_MUTEX_INITIALIZER, .rec = rec};
    consumer c[2];
    pthread_t t[2];
    for (int i = 0; i < consumers; i++) {
        c[i] = (consumer){.l = l,
                          .sh = &sh,
                          .sample_bytes = info.sample_bytes,
                          .seed = (unsigned)i + 1,
                          .sleep_us = sleep_us};
        pthread_create(&t[i], NULL, consume, &c[i]);
    }
    int errors = 0;
    for (int i = 0; i < consumers; i++) {
        pthread_join(t[i], NULL);
        errors += c[i].error != 0;
    }
    size_t nf = 0;
    pl_failure f[8];
    pl_loader_failures(l, 0, f, 8, &nf);
    int counts_ok = 1;
    for (size_t i = 0; i < nf; i++)
        counts_ok &= f[i].count >= EPOCHS;
    pl_loader_destroy(l);
    CHECK(errors == 0, "%d consumer(s) failed", errors);
    CHECK(nf == BAD_FILES, "%zu failures recorded, want %d", nf, BAD_FILES);
    CHECK(counts_ok, "a bad file was met fewer than %d times", EPOCHS);
    return 0;
}

static int same(const record *a, const record *b, int epochs, const char *what)
{
    for (int e = 0; e < epochs; e++) {
        CHECK(a->batches[e] == b->batches[e], "%s: epoch %d: %d vs %d batches",
              what, e, a->batches[e], b->batches[e]);
        for (int k = 0; k < a->batches[e]; k++) {
            CHECK(a->count[e][k] == b->count[e][k], "%s: e%d b%d count", what,
                  e, k);
            for (int i = 0; i < a->count[e][k]; i++) {
                CHECK(a->index[e][k][i] == b->index[e][k][i],
                      "%s: e%d b%d s%d: index %lld vs %lld", what, e, k, i,
                      (long long)a->index[e][k][i],
                      (long long)b->index[e][k][i]);
                CHECK(a->hash[e][k][i] == b->hash[e][k][i],
                      "%s: e%d b%d s%d: bytes differ", what, e, k, i);
            }
        }
    }
    return 0;
}

/* Every good sample once per epoch, no bad one, and the bad files' places
 * given to the first good samples of the order, wrapped around: the epoch
 * has its nominal length (equal steps on every rank). */
static int exactly_once(const record *r, const char *data)
{
    pl_config cfg = config(data);
    pl_loader *l;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    const int64_t n = info.dataset_size;
    CHECK(n == CLASSES * PER_CLASS + BAD_FILES, "%lld files", (long long)n);
    for (int e = 0; e < EPOCHS; e++) {
        int seen[64] = {0};
        int64_t order[64];
        int delivered = 0;
        for (int k = 0; k < r->batches[e]; k++)
            for (int i = 0; i < r->count[e][k]; i++) {
                CHECK(delivered < 64, "epoch %d: too many samples", e);
                order[delivered++] = r->index[e][k][i];
                seen[r->index[e][k][i]]++;
            }
        CHECK(delivered == n, "epoch %d: %d samples, want %lld", e, delivered,
              (long long)n);
        int good = 0;
        for (int64_t i = 0; i < n; i++) {
            const char *path;
            pl_loader_sample(l, i, &path, NULL);
            const int bad = strstr(path, "b.jpg") || strstr(path, "empty");
            CHECK(bad ? seen[i] == 0 : seen[i] >= 1,
                  "epoch %d: %s delivered %d times", e, path, seen[i]);
            good += !bad;
        }
        CHECK(good == CLASSES * PER_CLASS, "%d good files", good);
        for (int i = 0; i < BAD_FILES; i++)
            CHECK(order[good + i] == order[i],
                  "epoch %d: padding %d is %lld, want the order's %lld", e, i,
                  (long long)order[good + i], (long long)order[i]);
    }
    pl_loader_destroy(l);
    return 0;
}

/* Destroy at random moments: right away, mid-epoch with batches held, at
 * an epoch's end, after an error, with the pool grown or growing (every
 * other round lets it grow, and those keep more batches than the first
 * buffers). Sanitizers check the rest. */
static int destroy_anytime(const char *data, unsigned seed)
{
    for (int round = 0; round < 24; round++) {
        pl_config cfg = config(data);
        cfg.num_workers = 1 + (int)(next_rand(&seed) % 8);
        cfg.prefetch = 1 + (int)(next_rand(&seed) % 3);
        cfg.device_buffers = 1 + (int)(next_rand(&seed) % 3);
        cfg.on_error = round % 3 == 2 ? PL_ON_ERROR_FAIL : PL_ON_ERROR_SKIP;
        const int grows = round % 2;
        cfg.max_device_buffers = grows ? -1 : 0;
        const int keep_max = grows ? cfg.device_buffers + 4 : cfg.device_buffers;
        pl_loader *l;
        CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
        const int take = (int)(next_rand(&seed) % 12);
        int held = 0;
        for (int i = 0; i < take; i++) {
            const pl_batch *b;
            const int rc = pl_loader_next(l, &b);
            if (rc < 0 && (rc != PL_EBUSY || grows) &&
                cfg.on_error != PL_ON_ERROR_FAIL)
                CHECK(0, "round %d: %s", round, pl_last_error());
            if (rc != 0)
                continue;
            if (held + 1 < keep_max && next_rand(&seed) % 2)
                held++; /* keep it: destroy frees it */
            else
                pl_loader_release(l, b, NULL);
        }
        if (next_rand(&seed) % 2)
            usleep(next_rand(&seed) % 3000);
        pl_loader_destroy(l);
    }
    return 0;
}

typedef struct twin {
    pl_config cfg;
    record rec;
    int rc;
} twin;

static void *run_twin(void *arg)
{
    twin *t = arg;
    t->rc = run(t->cfg, 1, 200, &t->rec);
    return NULL;
}

int main(void)
{
    char dir[64];
    make_dataset(dir);
    record *ref = malloc(sizeof *ref), *got = malloc(sizeof *got);

    pl_config calm = config(dir);
    calm.num_workers = 1;
    calm.prefetch = 1;
    calm.device_buffers = 1;
    if (run(calm, 1, 0, ref) == 0 && exactly_once(ref, dir) == 0)
        printf("stress: reference: %d, %d, %d batches\n", ref->batches[0],
               ref->batches[1], ref->batches[2]);

    static const struct {
        int workers, prefetch, buffers, consumers, sleep_us;
        pl_memory memory;
    } runs[] = {
        {8, 2, 2, 1, 0, PL_MEMORY_PINNED},
        {8, 1, 1, 1, 2000, PL_MEMORY_PAGEABLE},
        {3, 4, 3, 1, 500, PL_MEMORY_PINNED},
        {8, 3, 3, 2, 1000, PL_MEMORY_PINNED},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        pl_config cfg = config(dir);
        cfg.num_workers = runs[i].workers;
        cfg.prefetch = runs[i].prefetch;
        cfg.device_buffers = runs[i].buffers;
        cfg.memory = runs[i].memory;
        char what[96];
        snprintf(what, sizeof what,
                 "workers %d prefetch %d buffers %d "
                 "consumers %d",
                 runs[i].workers, runs[i].prefetch, runs[i].buffers,
                 runs[i].consumers);
        if (run(cfg, runs[i].consumers, runs[i].sleep_us, got) == 0 &&
            same(ref, got, EPOCHS, what) == 0)
            printf("stress: %s: same bytes as the reference\n", what);
    }

    twin *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    a->cfg = config(dir);
    a->cfg.num_workers = 4;
    b->cfg = a->cfg;
    b->cfg.prefetch = 3;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_twin, a);
    pthread_create(&tb, NULL, run_twin, b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (a->rc == 0 && b->rc == 0 && same(ref, &a->rec, EPOCHS, "twin a") == 0 &&
        same(ref, &b->rec, EPOCHS, "twin b") == 0)
        printf("stress: two loaders at once: same bytes as the reference\n");

    if (destroy_anytime(dir, 12345) == 0)
        printf("stress: 24 destroys at random moments: clean\n");

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "stress: could not remove %s\n", dir);
    free(ref);
    free(got);
    free(a);
    free(b);
    printf("stress: %s\n", failed ? "FAILED" : "all checks passed");
    return failed ? 1 : 0;
}
