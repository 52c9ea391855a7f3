/* pinload-bench --plan: what a job over a dataset of tar shards would cost
 * each rank and each node, computed from a model of what the code does,
 * without reading an image: each rank's memory and create time, the bytes
 * each node fetches an epoch and the node cache's hit rate, for the exact
 * global order (today's) and the shard order (--order shards). The
 * formulas are docs/SCALE.md's; every number they use stands in plan_k
 * below, with where it came from, so that a re-measurement changes one
 * line. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "cli.h"

/* ---- the model's constants: the one table ---- */

typedef struct plan_const {
    const char *name;
    double value;
    const char *unit;
    const char *source; /* measured: command, machine, date; or derived */
} plan_const;

enum {
    K_TABLE_SAMPLE,     /* a sample's records and names in its shard's table */
    K_TABLE_SHARD,      /* an .idx file's page cache beyond its samples' */
    K_TABLE_HEAD,       /* a table's head and checksum */
    K_MAPPED_MAX,       /* shards with an .idx file each; the rest: joined */
    K_PRIVATE_SHARD,    /* private bytes a shard, resident (either order) */
    K_PRIVATE_SAMPLE,   /* private bytes a sample, resident (either order) */
    K_SAMPLER_SHARD,    /* --order shards: the sampler's bytes a shard */
    K_SCAN_WINDOW,      /* local shards indexed at once */
    K_SCAN_SAMPLE,      /* private bytes a window's sample, indexes written */
    K_RANK_FIXED,       /* create's own peak, beyond shards and samples */
    K_FIRST_BATCH,      /* the first batch's own, beyond create's */
    K_SHARD_REMOTE,     /* private bytes a remote shard beyond a local one */
    K_MEMBER_INDEX,     /* a tar_member and its name, while an index lives */
    K_MEMBERS,          /* members a sample: KEY.jpg + KEY.cls */
    K_CREATE_IDX,       /* create time a sample, .idx files present */
    K_CREATE_SHARD_IDX, /* create time a shard, .idx read */
    K_CREATE_HEADERS,   /* create time a sample, headers read (no .idx) */
    K_CREATE_SHARD_HEADERS, /* create time a shard, headers, .idx written */
    K_SHARDS_CREATE,        /* --order shards: create time over the global's */
    K_INDEX_THREADS,        /* remote .idx requests in flight at create */
    K_LATENCY,              /* a request's first byte from the store */
    K_RANGE_OVERHEAD,       /* bytes of a ranged request beyond the member */
    K_MAX_SHARDS,           /* create refuses more shards */
    K_SHARDS_IN_HAND,       /* --order shards: shards a rank fetches at once */
    K_COUNT
};

/* Machine B: the 2-core Intel development VM of docs/BENCHMARKS.md
 * ("2026-11-26, machine B: the model re-measured, the shard index
 * mapped"). Figures per sample are at 500 samples a shard (pinload-pack
 * --per-shard 500 of one 699-byte JPEG, label in KEY.cls), measured by a
 * program that creates a loader, takes a batch (host, 64 at 16x16, 2
 * workers) and reads /proc/self/status (RssAnon: private; RssFile: the
 * mapped indexes), each create a process of its own. Machine A, the
 * 2-core AMD VM, 2026-11-27: the tables read rather than mapped (issue
 * 34), so their pages are the page cache's and in no rank's RSS; the
 * rank's figures re-measured at 200 samples a shard the same way, and
 * through test_bench_plan's own measure (VmHWM over VmRSS before create,
 * pinload-pack's shards, PINLOAD_PLAN_SAMPLES=200, 25,000, 100,000 and
 * 200,000: 1.75-1.89, 2.23-2.33, 2.50-2.54 and 2.51 MB). */
static const plan_const plan_k[K_COUNT] = {
    [K_TABLE_SAMPLE] = {"table_bytes_per_sample", 94, "B",
                        "derived: index/sample_table.h, 2 member records of "
                        "24 + a key's 16 + names 2 x 14 (KEY.jpg, KEY.cls, "
                        "NULs) + the cls text ~2; pinload-pack's .idx: "
                        "47,024 B a 500-sample shard"},
    [K_TABLE_SHARD] = {"table_bytes_per_idx_shard", 2120, "B",
                       "measured: machine B, 2026-11-26, RssFile over 1,000 "
                       "and 4,000 shards of 500 (then mapped), less the "
                       "records: head and checksum 72 + the last page's "
                       "rest (2,048 on average); the page cache holds an "
                       ".idx read with pread in the same whole pages"},
    [K_TABLE_HEAD] = {"table_bytes_per_heap_shard", 72, "B",
                      "derived: index/sample_table.h, SAMPLE_TABLE_HEAD 64 + "
                      "the checksum 8"},
    [K_MAPPED_MAX] = {"mapped_shards_max", 32768, "shards",
                      "derived: catalog/shard_samples.h, SHARDS_MAPPED_MAX: "
                      "past it local shards' tables come from one dataset "
                      "table file (index/node_tables.h), remote ones' are "
                      "read into each rank's heap"},
    [K_PRIVATE_SHARD] = {"private_bytes_per_shard", 360, "B",
                         "measured: machine A, 2026-11-27, RssAnon after "
                         "create and a batch over 500 shards against 125 "
                         "(200 samples each, .idx present): 585 and 453 KiB "
                         "(212 on machine B with the tables mapped): "
                         "catalog, source, name, the table's handle (128) "
                         "and its .idx file's name"},
    [K_PRIVATE_SAMPLE] = {"private_bytes_per_sample", 0, "B",
                          "measured: machine B, 2026-11-26, RssAnon over 2M "
                          "samples in 1,000 shards against 500k in 1,000: "
                          "+0 KiB (noise about 100 KiB: under 0.1 B)"},
    [K_SAMPLER_SHARD] = {"shards_order_bytes_per_shard", 44, "B",
                         "derived: order/sampler.c, first 8 + TABLES 3 x "
                         "(perm 4 + start 8); measured within the noise "
                         "(about 30 B a shard)"},
    [K_SCAN_WINDOW] = {"scan_window_shards", 64, "shards",
                       "derived: input/shards.c, SCAN_WINDOW, and "
                       "remote/remote.c, INDEX_WINDOW"},
    [K_SCAN_SAMPLE] = {"scan_bytes_per_window_sample", 44, "B",
                       "measured: machine B, 2026-11-26, peak RssAnon of the "
                       "create that writes the indexes over the one that "
                       "maps them, a window's sample (42-46 at 500 and "
                       "2,000 a shard); machine A, 2026-11-27, tables read: "
                       "VmHWM of the create that writes them over the one "
                       "that reads them, 510-540 KiB a window of 12,800 "
                       "(41-43)"},
    [K_RANK_FIXED] = {"rank_fixed_bytes", 0.93e6, "B",
                      "measured: machine A, 2026-11-27, test_bench_plan's "
                      "peak at 125, 500 and 1,000 shards of 200 less the "
                      "shards, the ring and a window of tables read: "
                      "0.93, 1.03 and 0.84 MB (its threads' stacks and "
                      "arenas, the libraries' pages create touches)"},
    [K_FIRST_BATCH] = {"first_batch_bytes", 0.79e6, "B",
                       "measured: machine A, 2026-11-27, test_bench_plan's "
                       "peak over one shard of 200 (1.75-1.89 MB) less "
                       "rank_fixed_bytes and the ring: the workers' "
                       "buffers and decode state; the peak is create's "
                       "window of tables where that is larger"},
    [K_SHARD_REMOTE] = {"bytes_per_remote_shard", 900, "B",
                        "derived: remote/cache.h, cache_shard ~680 "
                        "(err[512]) + url, name, path ~200 + rshard 24"},
    [K_MEMBER_INDEX] = {"index_bytes_per_member", 96, "B",
                        "derived: index/tar.h, sizeof(tar_member) 64 + its "
                        "name's malloc chunk 32"},
    [K_MEMBERS] = {"members_per_sample", 2, "",
                   "derived: WebDataset KEY.jpg + KEY.cls, as pinload-pack "
                   "writes"},
    /* Two packs of 2M samples, in 4,000 and in 1,000 shards: t = N * a +
     * S * b through both, the fastest of three runs (docs/SCALE.md,
     * "Measured"). */
    [K_CREATE_IDX] = {"create_seconds_per_sample_idx", 0.245e-6, "s",
                      "measured: machine B, 2026-11-26, create and a batch "
                      "over 2M samples in 4,000 and 1,000 shards, .idx "
                      "mapped: 0.635 and 0.530 s (the fastest of three)"},
    [K_CREATE_SHARD_IDX] = {"create_seconds_per_shard_idx", 64e-6, "s",
                            "measured: the same two runs, a shard's open, "
                            "fstat, mapping and checksum: 35 us; reading "
                            "the table where it was mapped, 15 us more "
                            "(docs/BENCHMARKS.md, issue 34), and its copy "
                            "on pages of its own 14 us more (machine A, "
                            "2026-11-27, 500 shards of 200)"},
    [K_CREATE_HEADERS] = {"create_seconds_per_sample_headers", 1.49e-6, "s",
                          "measured: the same without .idx (a fresh "
                          "PINLOAD_INDEX_DIR): 3.75 and 3.17 s (the "
                          "fastest of five and of four: disk-bound, up to "
                          "7.9 and 6.2 s)"},
    [K_CREATE_SHARD_HEADERS] = {"create_seconds_per_shard_headers", 194e-6, "s",
                                "measured: the same without .idx, a shard's "
                                "headers read and its .idx written"},
    [K_SHARDS_CREATE] = {"shards_order_create_fraction", 1.0, "",
                         "measured: machine B, 2026-11-26, the shard order's "
                         "create over the global's at 2M samples: 0.529 / "
                         "0.530 s (1,000 shards), 0.647 / 0.635 (4,000)"},
    [K_INDEX_THREADS] = {"index_requests_in_flight", 8, "",
                         "derived: remote/remote.c, INDEX_THREADS"},
    [K_LATENCY] = {"request_latency", 0.02, "s",
                   "assumed: an object store's first byte (S3: 10-50 ms); "
                   "not measured here"},
    [K_RANGE_OVERHEAD] = {"range_request_overhead", 600, "B",
                          "assumed: HTTP request and response headers of "
                          "one ranged GET"},
    [K_MAX_SHARDS] = {"max_shards", 1 << 20, "shards",
                      "derived: common/braces.h, PATHS_MAX: a list's "
                      "shards or URLs"},
    [K_SHARDS_IN_HAND] = {"shards_order_shards_in_hand", 5, "shards",
                          "derived: remote/remote.c, choose_stream: 2 x "
                          "span + STREAM_AHEAD 1, span 2 for a window "
                          "(shuffle_window, default 4096) smaller than "
                          "every shard (more for smaller shards)"},
};

#define K(i) (plan_k[i].value)

/* ---- the job ---- */

typedef struct plan_job {
    double samples, shards, bytes;
    double nodes, ranks_per_node, batch, epochs;
    double cache_limit; /* bytes a node; 0: no bound */
    double bandwidth;   /* bytes/s a node from the store; 0: local shards */
    double size, prefetch;
    int order; /* -1 both, 0 global, 1 shards */
    int json, constants;
} plan_job;

typedef struct plan_row {
    const char *order, *mode;
    double resident, peak, ring;        /* private bytes a rank */
    double peak_indexing;               /* the create that writes .idx */
    double shared;                      /* bytes a node: the tables' pages */
    double heap_tables;                 /* of resident: tables in the heap */
    double create_idx, create_headers;  /* seconds */
    double cache_need;                  /* bytes a node */
    double fetch_first, fetch_mean;     /* bytes a node an epoch */
    double requests_mean;               /* requests a node an epoch */
    double hit;                         /* 1 - fetches / reads */
    double epoch_first_s, epoch_mean_s; /* bandwidth-bound */
} plan_row;

/* A rank's memory and create time, either order (docs/SCALE.md,
 * "Memory"): nothing per sample is private; each shard's table is its
 * index file, read with pread a key at a time, so its pages are the page
 * cache's, once a node, and in no rank's RSS, for the first K_MAPPED_MAX
 * shards. Past them local shards' tables are slices of one dataset table
 * file, shared too (a table's head and checksum and a 64-byte directory
 * entry each, no page's rest); remote shards' are in each rank's heap. */
static void rank_memory(const plan_job *j, int remote, int order, plan_row *r)
{
    const double n = j->samples, s = j->shards, per = n / s;
    const double mapped = s < K(K_MAPPED_MAX) ? s : K(K_MAPPED_MAX);
    const double heap = remote ? s - mapped : 0;
    const double joined = s - mapped - heap;
    r->shared = mapped * (per * K(K_TABLE_SAMPLE) + K(K_TABLE_SHARD)) +
                joined * (per * K(K_TABLE_SAMPLE) + K(K_TABLE_HEAD) + 64);
    r->heap_tables = heap * (per * K(K_TABLE_SAMPLE) + K(K_TABLE_HEAD));
    r->resident = s * K(K_PRIVATE_SHARD) + n * K(K_PRIVATE_SAMPLE) +
                  r->heap_tables + r->ring;
    if (remote)
        r->resident += s * K(K_SHARD_REMOTE);
    if (order)
        r->resident += s * K(K_SAMPLER_SHARD);
    /* Create's transient: local shards' tables are read K_SCAN_WINDOW at
     * a time, whole, for its pass over their keys (input/shards.c), and
     * the create that writes the indexes holds their member indexes too;
     * remote shards' member indexes, a window of them (remote/remote.c,
     * INDEX_WINDOW), until each becomes its table. They are let go before
     * the first batch's buffers exist: the peak is the larger of the two,
     * over create's own. */
    const double window = s < K(K_SCAN_WINDOW) ? s : K(K_SCAN_WINDOW);
    const double transient =
        window * (remote ? per * K(K_MEMBERS) * K(K_MEMBER_INDEX)
                         : per * K(K_TABLE_SAMPLE) + K(K_TABLE_HEAD));
    r->peak = r->resident + K(K_RANK_FIXED) +
              (transient > K(K_FIRST_BATCH) ? transient : K(K_FIRST_BATCH));
    r->peak_indexing =
        r->peak + (remote ? 0 : window * per * K(K_SCAN_SAMPLE));
    r->create_idx = n * K(K_CREATE_IDX) + s * K(K_CREATE_SHARD_IDX);
    r->create_headers = n * K(K_CREATE_HEADERS) + s * K(K_CREATE_SHARD_HEADERS);
    if (remote) { /* every .idx fetched, K_INDEX_THREADS at a time */
        const double idx_bytes = n * K(K_TABLE_SAMPLE) + s * K(K_TABLE_HEAD);
        r->create_idx +=
            s / K(K_INDEX_THREADS) * K(K_LATENCY) + idx_bytes / j->bandwidth;
        r->create_headers = -1; /* remote shards without .idx: not modelled */
    }
    if (order) {
        r->create_idx *= K(K_SHARDS_CREATE);
        if (r->create_headers >= 0)
            r->create_headers *= K(K_SHARDS_CREATE);
    }
}

/* The node cache under the global order: whole shards while the data fits
 * cache_limit (each node fetches every shard once, in order), else every
 * sample one ranged request, every epoch (remote/remote.c, choose_mode). */
static void global_fetch(const plan_job *j, plan_row *r)
{
    const double n = j->samples, s = j->shards, e = j->epochs;
    const double reads = n / j->nodes; /* samples a node reads an epoch */
    if (j->cache_limit <= 0 || j->bytes <= j->cache_limit) {
        r->mode = "whole";
        r->cache_need = j->bytes;
        r->fetch_first = j->bytes;
        r->fetch_mean = j->bytes / e;
        r->requests_mean = s / e;
        r->hit = s < e * reads ? 1 - s / (e * reads) : 0;
    } else {
        r->mode = "ranged";
        r->cache_need = 0;
        r->fetch_first = reads * (j->bytes / n + K(K_RANGE_OVERHEAD));
        r->fetch_mean = r->fetch_first;
        r->requests_mean = reads;
        r->hit = 0;
    }
}

/* The node cache under the shard order: each epoch a node reads 1/nodes
 * of the shards, whole and in sequence (the fetch being added for
 * --order shards; not measured). A shard it read in an earlier epoch may
 * still be cached: with a permutation drawn anew each epoch, a node has
 * seen the fraction 1 - (1 - 1/nodes)^(e-1) of the data before epoch e,
 * and keeps min(cache, seen) of it. */
static void shards_fetch(const plan_job *j, plan_row *r)
{
    const double d = j->bytes, k = j->nodes, s = j->shards;
    const double shard = d / s;
    r->mode = "shards";
    r->cache_need = j->ranks_per_node * K(K_SHARDS_IN_HAND) * shard;
    if (r->cache_need > d)
        r->cache_need = d;
    const double cap =
        j->cache_limit > 0 && j->cache_limit < d ? j->cache_limit : d;
    double fetched = 0, requests = 0;
    const int epochs = (int)j->epochs;
    for (int e = 1; e <= epochs; e++) {
        const double seen = d * (1 - pow(1 - 1 / k, e - 1));
        const double kept = (seen < cap ? seen : cap) / d;
        const double f = d / k * (1 - kept);
        if (e == 1)
            r->fetch_first = f;
        fetched += f;
        requests += s / k * (1 - kept);
    }
    r->fetch_mean = fetched / j->epochs;
    r->requests_mean = requests / j->epochs;
    r->hit = 1 - requests / (j->epochs * j->samples / k);
}

static void plan_compute(const plan_job *j, int order, plan_row *r)
{
    const int remote = j->bandwidth > 0;
    memset(r, 0, sizeof *r);
    r->ring = j->prefetch * j->batch * j->size * j->size * 3;
    r->order = order ? "shards" : "global";
    r->mode = "local";
    rank_memory(j, remote, order, r);
    if (remote) {
        if (order == 0)
            global_fetch(j, r);
        else
            shards_fetch(j, r);
    }
    if (!remote)
        r->hit = 1;
    if (remote) {
        r->epoch_first_s = r->fetch_first / j->bandwidth;
        r->epoch_mean_s = r->fetch_mean / j->bandwidth;
    }
}

/* ---- the command line ---- */

/* A count or a size: digits with an optional fraction and a decimal
 * suffix K, M, G, T (1e3 ... 1e12; "KB" ... "TB" too); otherwise a usage
 * error naming the flag. */
static double plan_number(const char *flag, const char *v, double lo)
{
    const double x = cli_size("pinload-bench", bench_usage, flag, v);
    if (x < lo)
        cli_usage_error("pinload-bench", bench_usage, "%s: \"%s\" is below %g",
                        flag, v, lo);
    return x;
}

/* What the job must hold together; a usage error naming the option. */
static void plan_check(const plan_job *j)
{
    const char *missing = !j->samples  ? "--samples"
                          : !j->shards ? "--shards"
                          : !j->bytes  ? "--bytes"
                                       : NULL;
    if (missing)
        cli_usage_error("pinload-bench", bench_usage, "--plan: %s is required",
                        missing);
    if (j->shards > j->samples)
        cli_usage_error("pinload-bench", bench_usage,
                        "--shards: %.0f shards for %.0f samples: a shard "
                        "holds at least one",
                        j->shards, j->samples);
    if (j->bytes < j->samples)
        cli_usage_error("pinload-bench", bench_usage,
                        "--bytes: %.0f bytes for %.0f samples: a sample "
                        "is at least a byte",
                        j->bytes, j->samples);
}

static void plan_parse(int argc, char **argv, plan_job *j)
{
    static const char *const valued[] = {
        "--samples",        "--shards", "--bytes",      "--nodes",
        "--ranks-per-node", "--batch",  "--epochs",     "--cache-limit",
        "--bandwidth",      "--order",  "--name-bytes", "--size",
        "--prefetch",       NULL};
    *j = (plan_job){.nodes = 1,
                    .ranks_per_node = 8,
                    .batch = 256,
                    .epochs = 1,
                    .size = 224,
                    .prefetch = 2,
                    .order = -1};
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (cli_common("pinload-bench", bench_usage, f, &quiet) ||
            !strcmp(f, "--plan"))
            continue;
        if (!strcmp(f, "--json") || !strcmp(f, "--constants")) {
            *(f[2] == 'j' ? &j->json : &j->constants) = 1;
            continue;
        }
        const char *v =
            cli_value("pinload-bench", bench_usage, valued, argc, argv, &i);
        if (!strcmp(f, "--samples"))
            j->samples = plan_number(f, v, 1);
        else if (!strcmp(f, "--shards"))
            j->shards = plan_number(f, v, 1);
        else if (!strcmp(f, "--bytes"))
            j->bytes = plan_number(f, v, 1);
        else if (!strcmp(f, "--nodes"))
            j->nodes = plan_number(f, v, 1);
        else if (!strcmp(f, "--ranks-per-node"))
            j->ranks_per_node = plan_number(f, v, 1);
        else if (!strcmp(f, "--batch"))
            j->batch = plan_number(f, v, 1);
        else if (!strcmp(f, "--epochs"))
            j->epochs =
                (double)cli_long("pinload-bench", bench_usage, f, v, 1, 100000);
        else if (!strcmp(f, "--cache-limit"))
            j->cache_limit = plan_number(f, v, 0);
        else if (!strcmp(f, "--bandwidth"))
            j->bandwidth = plan_number(f, v, 0);
        else if (!strcmp(f, "--order"))
            j->order = (int)cli_order("pinload-bench", bench_usage, f, v);
        else if (!strcmp(f, "--name-bytes")) /* no name is kept a sample */
            (void)plan_number(f, v, 1);
        else if (!strcmp(f, "--size"))
            j->size = plan_number(f, v, 1);
        else if (!strcmp(f, "--prefetch"))
            j->prefetch = plan_number(f, v, 1);
    }
    if (!j->constants)
        plan_check(j);
}

/* ---- the report ---- */

#define MIB (1024.0 * 1024.0)
#define GB 1e9

static void print_constants(void)
{
    printf("the model's constants (tools/bench_plan.c, plan_k):\n");
    for (int i = 0; i < K_COUNT; i++)
        printf("  %-36s %12g %-6s %s\n", plan_k[i].name, plan_k[i].value,
               plan_k[i].unit, plan_k[i].source);
}

/* MiB in 8 columns: one decimal below 100,000. */
static void print_mib(double bytes)
{
    const double m = bytes / MIB;
    printf(m < 1e5 ? " %8.1f" : " %8.0f", m);
}

static void print_table(const plan_job *j, const plan_row *r, int n)
{
    const int remote = j->bandwidth > 0;
    printf("plan: %.0f samples in %.0f shards, %.3g GB (%.0f B a sample, "
           "%.3g MB a shard)\n",
           j->samples, j->shards, j->bytes / GB, j->bytes / j->samples,
           j->bytes / j->shards / 1e6);
    printf("job: %.0f node(s) x %.0f ranks, batch %.0f, %.0f epoch(s), ",
           j->nodes, j->ranks_per_node, j->batch, j->epochs);
    if (remote)
        printf("remote at %.4g GB/s a node, cache_limit %.4g GB\n",
               j->bandwidth / GB, j->cache_limit / GB);
    else
        printf("local shards\n");
    /* 100 columns at most, as the sweep's table */
    printf("%-6s %-6s %8s %8s %7s %8s %8s", "order", "mode", "rank MiB",
           "peak MiB", "shr GiB", "node GiB", "create s");
    if (remote)
        printf(" %8s %8s %8s %7s %7s", "cache GB", "fetch1GB", "fetch GB",
               "hit", "epoch s");
    else
        printf(" %9s", "no .idx s");
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("%-6s %-6s", r[i].order, r[i].mode);
        print_mib(r[i].resident);
        print_mib(r[i].peak);
        printf(" %7.1f %8.1f %8.3g", r[i].shared / (1024 * MIB),
               (r[i].peak * j->ranks_per_node + r[i].shared) / (1024 * MIB),
               r[i].create_idx);
        if (remote)
            printf(" %8.3g %8.3g %8.3g %6.2f%% %7.3g", r[i].cache_need / GB,
                   r[i].fetch_first / GB, r[i].fetch_mean / GB, 100 * r[i].hit,
                   r[i].epoch_mean_s);
        else
            printf(" %9.3g", r[i].create_headers);
        printf("\n");
    }
    for (int i = 0; i < n && remote; i++)
        if (!strcmp(r[i].mode, "shards") && j->cache_limit > 0 &&
            j->cache_limit < r[i].cache_need)
            printf("warning: cache_limit is below the shard order's %.0f "
                   "shards in hand a node (%.3g GB)\n",
                   j->ranks_per_node * K(K_SHARDS_IN_HAND),
                   r[i].cache_need / GB);
    if (n > 0 && r[0].heap_tables > 0)
        printf("warning: past %.0f remote shards the tables are read into "
               "each rank's heap: %.0f shards,\n%.1f GiB a rank "
               "(catalog/shard_samples.h, SHARDS_MAPPED_MAX)\n",
               K(K_MAPPED_MAX), j->shards - K(K_MAPPED_MAX),
               r[0].heap_tables / (1024 * MIB));
    if (j->shards > K(K_MAX_SHARDS))
        printf("warning: %.0f shards: create refuses more than %.0f\n",
               j->shards, K(K_MAX_SHARDS));
    printf("rank MiB: private (heap), resident after create; peak: create's "
           "and the first batch's,\nthe indexes present (pinload-pack writes "
           "them); shr: the tables' pages, the page\ncache's, shared by a "
           "node's ranks and in no rank's RSS; node: peak x ranks + shr.\n");
    if (remote)
        printf("fetch1: the first epoch's bytes a node; fetch: the mean over "
               "the epochs;\nhit: 1 - fetches/reads; epoch s: fetch / "
               "bandwidth.\n");
    printf("Formulas: docs/SCALE.md; constants: --plan --constants.\n");
}

static void print_json(const plan_job *j, const plan_row *r, int n)
{
    printf("{\"samples\": %.0f, \"shards\": %.0f, \"bytes\": %.0f, "
           "\"nodes\": %.0f, \"ranks_per_node\": %.0f, \"batch\": %.0f, "
           "\"epochs\": %.0f, \"cache_limit\": %.0f, \"bandwidth\": %.0f,\n"
           " \"plans\": [",
           j->samples, j->shards, j->bytes, j->nodes, j->ranks_per_node,
           j->batch, j->epochs, j->cache_limit, j->bandwidth);
    for (int i = 0; i < n; i++)
        printf("%s\n  {\"order\": \"%s\", \"mode\": \"%s\", "
               "\"rank_resident_bytes\": %.0f, \"rank_peak_bytes\": %.0f, "
               "\"rank_peak_indexing_bytes\": %.0f, "
               "\"rank_heap_table_bytes\": %.0f, "
               "\"ring_bytes\": %.0f, \"node_shared_bytes\": %.0f, "
               "\"node_peak_bytes\": %.0f, "
               "\"create_s\": %.6g, \"create_no_idx_s\": %.6g, "
               "\"cache_need_bytes\": %.0f, \"fetch_first_bytes\": %.0f, "
               "\"fetch_mean_bytes\": %.0f, \"requests_mean\": %.6g, "
               "\"hit_rate\": %.6f, \"epoch_first_s\": %.6g, "
               "\"epoch_mean_s\": %.6g}",
               i ? "," : "", r[i].order, r[i].mode, r[i].resident, r[i].peak,
               r[i].peak_indexing, r[i].heap_tables, r[i].ring, r[i].shared,
               r[i].peak * j->ranks_per_node + r[i].shared, r[i].create_idx,
               r[i].create_headers, r[i].cache_need, r[i].fetch_first,
               r[i].fetch_mean, r[i].requests_mean, r[i].hit,
               r[i].epoch_first_s, r[i].epoch_mean_s);
    printf("\n]}\n");
}

int bench_plan_main(int argc, char **argv)
{
    plan_job j;
    plan_parse(argc, argv, &j);
    if (j.constants) {
        print_constants();
        return 0;
    }
    plan_row r[2];
    int n = 0;
    for (int order = 0; order < 2; order++)
        if (j.order < 0 || j.order == order)
            plan_compute(&j, order, &r[n++]);
    if (j.json)
        print_json(&j, r, n);
    else
        print_table(&j, r, n);
    return 0;
}

int bench_wants_plan(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--plan"))
            return 1;
    return 0;
}
