/* Memory that grows with the dataset: what creating a loader over many
 * samples costs per sample, at its peak (indexing) and after, and how
 * much of it is the process's own (anonymous: RssAnon) rather than the
 * page cache's shared pages of the mapped shard indexes. The figures of
 * docs/BENCHMARKS.md ("Memory") come from the same measure at 500,000
 * and 2,000,000 samples (PINLOAD_MEMORY_SAMPLES=2000000 runs this suite
 * at that size); this suite holds them at 100,000, with a margin, so that
 * a change that doubles them fails. Criterion runs each test in its own
 * process: VmHWM is the test's own. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/tarwrite.h"
#include "pinload.h"
#include "testutil.h"

#define PER_SHARD 200
#define SAMPLES 100000 /* 500 shards; PINLOAD_MEMORY_SAMPLES for others */

static int SHARDS = SAMPLES / PER_SHARD;

/* The samples the suite measures at: PINLOAD_MEMORY_SAMPLES, or SAMPLES. */
static void size_from_env(void)
{
    const char *e = getenv("PINLOAD_MEMORY_SAMPLES");
    const long n = e ? atol(e) : 0;
    SHARDS = (int)((n > 0 ? n : SAMPLES) / PER_SHARD);
    if (SHARDS < 1)
        SHARDS = 1;
}

static void member(FILE *f, const char *name, const void *data, size_t len)
{
    cr_assert_gt(tarw_member(f, name, data, len), 0, "%s: write failed", name);
}

/* SHARDS shards of PER_SHARD samples (one small JPEG, KEY.jpg + KEY.cls)
 * under root. */
static void make_shards(const char *root)
{
    char path[256];
    snprintf(path, sizeof path, "%s/one.jpg", root);
    tu_write_jpeg(path, 16, 16, 7, NULL);
    size_t jlen;
    uint8_t *jpeg = tu_read_file(path, &jlen);
    unlink(path);
    long key = 0;
    for (int s = 0; s < SHARDS; s++) {
        snprintf(path, sizeof path, "%s/shard-%06d.tar", root, s);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        for (int k = 0; k < PER_SHARD; k++, key++) {
            char name[32], cls[16];
            snprintf(name, sizeof name, "%09ld.jpg", key);
            member(f, name, jpeg, jlen);
            snprintf(name, sizeof name, "%09ld.cls", key);
            const int n = snprintf(cls, sizeof cls, "%ld", key % 100);
            member(f, name, cls, (size_t)n);
        }
        cr_assert_eq(tarw_end(f), 0);
        fclose(f);
    }
    free(jpeg);
}

/* VmRSS, VmHWM or RssAnon of this process, in KiB. */
static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    const size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            kib = atol(line + n + 1);
            break;
        }
    if (f)
        fclose(f);
    return kib;
}

static void quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx, (void)level, (void)msg;
}

/* What create and one batch added, in bytes per sample: at the peak
 * (VmHWM), resident (VmRSS, the mapped indexes' pages included) and the
 * process's own (RssAnon). */
typedef struct cost {
    double peak, after, anon;
} cost;

/* Create over the shards (in `order`) and take one batch. */
static cost per_sample(const char *root, pl_order order)
{
    pl_config c;
    pl_config_default(&c);
    c.data = root;
    c.device = PL_DEVICE_HOST;
    c.batch_size = 64;
    c.width = c.height = 16;
    c.num_workers = 2;
    c.rank = 0;
    c.world_size = 1;
    c.log = quiet;
    c.order = order;
    const long before = status_kib("VmRSS"), anon = status_kib("RssAnon");
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    pl_loader_release(l, b, NULL);
    const double n = (double)SHARDS * PER_SHARD;
    const cost k = {
        .peak = (double)(status_kib("VmHWM") - before) * 1024.0 / n,
        .after = (double)(status_kib("VmRSS") - before) * 1024.0 / n,
        .anon = (double)(status_kib("RssAnon") - anon) * 1024.0 / n};
    pl_loader_destroy(l);
    return k;
}

/* Measured on machine A at 100,000 samples in 500 shards: 120 bytes a
 * sample resident and 132 at the peak, since the shards' indexes (about
 * 100 bytes a member while they live) are held a window of 64 shards at a
 * time; holding them all, as create did before, made the peak 315. The
 * bounds leave room for allocator noise and fail at that old peak. */
Test(memory, indexing_shards_costs_at_most_200_bytes_a_sample_at_its_peak,
     .timeout = 300)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64];
    tu_tmpdir(root);
    make_shards(root);
    const cost k = per_sample(root, PL_ORDER_GLOBAL); /* .idx written */
    cr_log_info("headers: %.0f bytes a sample at the peak, %.0f after, %.1f "
                "of them private",
                k.peak, k.after, k.anon);
    cr_assert_lt(k.peak, 200, "%.0f bytes a sample at the peak", k.peak);
    cr_assert_lt(k.after, 180, "%.0f bytes a sample resident", k.after);
    tu_rm_rf(root);
}

/* Measured on machine A at 100,000 samples in 500 shards, the indexes
 * already written: PRIVATE_GLOBAL private (anonymous) bytes a sample in
 * the exact order and PRIVATE_SHARDS in the shard order, where the heap
 * catalog kept about 110 (a name, a range and a label per sample). The
 * issue's goal is at most 16 a sample; the bound holds it with a margin
 * for allocator noise. The rest of what is resident is the mapped
 * indexes' pages: the page cache's, one copy for a node's ranks. */
Test(memory, shard_samples_cost_at_most_16_private_bytes_in_either_order,
     .timeout = 600)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64];
    tu_tmpdir(root);
    make_shards(root);
    cost k = per_sample(root, PL_ORDER_GLOBAL); /* the .idx files written */
    cr_log_info("first create (indexing): %.1f private bytes a sample", k.anon);
    cr_assert_lt(k.anon, 16, "%.1f private bytes a sample", k.anon);
    const pl_order orders[] = {PL_ORDER_GLOBAL, PL_ORDER_SHARDS};
    for (int o = 0; o < 2; o++) {
        k = per_sample(root, orders[o]);
        cr_log_info("%s order: %.1f private bytes a sample, %.0f resident",
                    o ? "shard" : "exact", k.anon, k.after);
        cr_assert_lt(k.anon, 8, "%s order: %.1f private bytes a sample",
                     o ? "shard" : "exact", k.anon);
    }
    tu_rm_rf(root);
}
