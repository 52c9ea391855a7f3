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
    K_CATALOG_RANGE,    /* catalog arrays, a sample in a shard */
    K_CATALOG_FILE,     /* catalog arrays, a file sample (folder, list) */
    K_SAMPLE_EXTRA,     /* measured, a sample, beyond arrays and names */
    K_MEMBER_INDEX,     /* a tar_member and its name, while an index lives */
    K_MEMBERS,          /* members a sample: KEY.jpg + KEY.cls */
    K_SCAN_WINDOW,      /* shards whose indexes live at once */
    K_SHARD_LOCAL,      /* per local shard, resident */
    K_SHARD_REMOTE,     /* per remote shard, resident */
    K_SCAN_JOB,         /* per local shard, during create */
    K_IDX_MEMBER,       /* bytes of a member in a .idx file */
    K_CREATE_IDX,       /* create time a sample, .idx files present */
    K_CREATE_HEADERS,   /* create time a sample, headers read (no .idx) */
    K_CREATE_SHARD_IDX, /* create time a shard, .idx read */
    K_CREATE_SHARD_HEADERS, /* create time a shard, headers, .idx written */
    K_INDEX_THREADS,        /* remote .idx requests in flight at create */
    K_LATENCY,              /* a request's first byte from the store */
    K_RANGE_OVERHEAD,       /* bytes of a ranged request beyond the member */
    K_NAME,                 /* bytes of a sample's name, by default */
    K_MAX_SHARDS,           /* create refuses more shards */
    K_SHARDS_PER_SHARD,     /* --order shards: resident per shard */
    K_SHARDS_IN_HAND,       /* --order shards: shards a rank holds at once */
    K_SHARDS_CREATE,        /* --order shards: create time over the global's */
    K_COUNT
};

/* Machine A: the 2-core development VM of docs/BENCHMARKS.md. Figures
 * per sample are at 500 samples a shard (pinload-pack --per-shard 500 of
 * one 699-byte JPEG, label in KEY.cls). */
static const plan_const plan_k[K_COUNT] = {
    [K_CATALOG_RANGE] = {"catalog_bytes_per_sample", 32, "B",
                         "derived: input/catalog.h, name_off 8 + labels 4 + "
                         "source 4 + offset 8 + size 8"},
    [K_CATALOG_FILE] = {"catalog_bytes_per_file_sample", 12, "B",
                        "derived: input/catalog.h, name_off 8 + labels 4 "
                        "(no range tables)"},
    [K_SAMPLE_EXTRA] = {"extra_bytes_per_sample", 2.64, "B",
                        "measured: machine B, 2026-11-26, peak RSS at the "
                        "first batch over 2M samples in 4,000 shards "
                        "(docs/SCALE.md, \"Measured\"), less every derived "
                        "term, a sample"},
    [K_MEMBER_INDEX] = {"index_bytes_per_member", 96, "B",
                        "derived: input/tar.h, sizeof(tar_member) 64 + its "
                        "name's malloc chunk 32"},
    [K_MEMBERS] = {"members_per_sample", 2, "",
                   "derived: WebDataset KEY.jpg + KEY.cls, as pinload-pack "
                   "writes"},
    [K_SCAN_WINDOW] = {"scan_window_shards", 64, "shards",
                       "derived: input/shards.c, SCAN_WINDOW, and "
                       "input/remote.c, INDEX_WINDOW"},
    [K_SHARD_LOCAL] = {"bytes_per_local_shard", 12, "B",
                       "derived: input/catalog.h, source_fd 4 + "
                       "source_reader 8 (and a descriptor)"},
    [K_SHARD_REMOTE] = {"bytes_per_remote_shard", 900, "B",
                        "derived: input/remote_cache.h, cache_shard ~680 "
                        "(err[512]) + url, name, path ~200 + rshard 24"},
    [K_SCAN_JOB] = {"scan_job_bytes_per_shard", 1224, "B",
                    "derived: input/shards.c, sizeof(scan_job), calloc'd "
                    "for every shard during create"},
    [K_IDX_MEMBER] = {"idx_bytes_per_member", 36, "B",
                      "derived: input/sidecar.h, offset 8 + size 8 + name "
                      "length 2 + small length 1 + name ~14 + small ~3"},
    /* Two packs of 2M samples, in 4,000 and in 1,000 shards: t = N * a +
     * S * b through both (docs/SCALE.md, "Measured"). */
    [K_CREATE_IDX] = {"create_seconds_per_sample_idx", 0.667e-6, "s",
                      "measured: machine B, 2026-11-26, pinload-dump's "
                      "create and first batch over 2M samples in 4,000 and "
                      "1,000 shards with .idx files: 1.44 and 1.36 s"},
    [K_CREATE_HEADERS] = {"create_seconds_per_sample_headers", 1.89e-6, "s",
                          "measured: the same without .idx (a fresh "
                          "PINLOAD_INDEX_DIR): 4.56 and 3.98 s (the faster "
                          "of two runs)"},
    [K_CREATE_SHARD_IDX] = {"create_seconds_per_shard_idx", 26.7e-6, "s",
                            "measured: the same two runs, a shard's open, "
                            "fstat and .idx read"},
    [K_CREATE_SHARD_HEADERS] = {"create_seconds_per_shard_headers", 193e-6, "s",
                                "measured: the same without .idx, a shard's "
                                "open, fstat and .idx written"},
    [K_INDEX_THREADS] = {"index_requests_in_flight", 8, "",
                         "derived: input/remote.c, INDEX_THREADS"},
    [K_LATENCY] = {"request_latency", 0.02, "s",
                   "assumed: an object store's first byte (S3: 10-50 ms); "
                   "not measured here"},
    [K_RANGE_OVERHEAD] = {"range_request_overhead", 600, "B",
                          "assumed: HTTP request and response headers of "
                          "one ranged GET"},
    [K_NAME] = {"name_bytes", 48, "B",
                "assumed: \"/data/train/shard-000000.tar:000000000.jpg\" is "
                "41, a URL's longer; --name-bytes sets it"},
    [K_MAX_SHARDS] = {"max_shards", 1 << 20, "shards",
                      "derived: input/shards.c and input/remote.c, "
                      "MAX_SHARDS and MAX_URLS"},
    [K_SHARDS_PER_SHARD] = {"shards_order_bytes_per_shard", 1024, "B",
                            "assumed until --order shards is measured: a "
                            "shard's name, sample count and state"},
    [K_SHARDS_IN_HAND] = {"shards_order_shards_in_hand", 5, "shards",
                          "derived: input/remote.c, choose_stream: 2 x "
                          "span + STREAM_AHEAD 1, span 2 for a window "
                          "(shuffle_window, default 4096) smaller than "
                          "every shard (more for smaller shards)"},
    [K_SHARDS_CREATE] = {"shards_order_create_fraction", 1.0, "",
                         "assumed until measured: create still reads every "
                         "index to count the samples"},
};

#define K(i) (plan_k[i].value)

/* ---- the job ---- */

typedef struct plan_job {
    double samples, shards, bytes;
    double nodes, ranks_per_node, batch, epochs;
    double cache_limit; /* bytes a node; 0: no bound */
    double bandwidth;   /* bytes/s a node from the store; 0: local shards */
    double name_bytes, size, prefetch;
    int order; /* -1 both, 0 global, 1 shards */
    int json, constants;
} plan_job;

typedef struct plan_row {
    const char *order, *mode;
    double resident, peak, ring;        /* bytes a rank */
    double create_idx, create_headers;  /* seconds */
    double cache_need;                  /* bytes a node */
    double fetch_first, fetch_mean;     /* bytes a node an epoch */
    double requests_mean;               /* requests a node an epoch */
    double hit;                         /* 1 - fetches / reads */
    double epoch_first_s, epoch_mean_s; /* bandwidth-bound */
} plan_row;

/* Memory and create time of the global order: every rank holds the whole
 * catalog (docs/SCALE.md, "Memory"). */
static void global_memory(const plan_job *j, int remote, plan_row *r)
{
    const double n = j->samples, s = j->shards;
    const double catalog =
        n * (K(K_CATALOG_RANGE) + j->name_bytes + 1 + K(K_SAMPLE_EXTRA));
    const double shard_state =
        s * (remote ? K(K_SHARD_REMOTE) : K(K_SHARD_LOCAL));
    r->resident = catalog + shard_state + r->ring;
    /* Create's transient: shards are indexed K_SCAN_WINDOW at a time,
     * local ones beside a scan_job per shard (input/shards.c, index_shards;
     * input/remote.c, index_all). */
    const double live = s < K(K_SCAN_WINDOW) ? s : K(K_SCAN_WINDOW);
    const double indexes = live * (n / s) * K(K_MEMBERS) * K(K_MEMBER_INDEX);
    r->peak = r->resident + indexes + (remote ? 0 : s * K(K_SCAN_JOB));
    r->create_idx = n * K(K_CREATE_IDX) + s * K(K_CREATE_SHARD_IDX);
    r->create_headers = n * K(K_CREATE_HEADERS) + s * K(K_CREATE_SHARD_HEADERS);
    if (remote) { /* every .idx fetched, K_INDEX_THREADS at a time */
        const double idx_bytes = n * K(K_MEMBERS) * K(K_IDX_MEMBER);
        r->create_idx +=
            s / K(K_INDEX_THREADS) * K(K_LATENCY) + idx_bytes / j->bandwidth;
        r->create_headers = -1; /* remote shards without .idx: not modelled */
    }
}

/* The node cache under the global order: whole shards while the data fits
 * cache_limit (each node fetches every shard once, in order), else every
 * sample one ranged request, every epoch (input/remote.c, choose_mode). */
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

/* The shard order: a rank holds its shards' state, not the samples'. */
static void shards_memory(const plan_job *j, int remote, plan_row *r)
{
    const double n = j->samples, s = j->shards;
    const double in_hand =
        K(K_SHARDS_IN_HAND) * (n / s) * K(K_MEMBERS) * K(K_MEMBER_INDEX);
    r->resident = s * K(K_SHARDS_PER_SHARD) + in_hand + r->ring;
    r->peak = r->resident;
    plan_row g = *r;
    global_memory(j, remote, &g);
    r->create_idx = g.create_idx * K(K_SHARDS_CREATE);
    r->create_headers =
        g.create_headers < 0 ? -1 : g.create_headers * K(K_SHARDS_CREATE);
}

/* The node cache under the shard order: each epoch a node reads 1/nodes
 * of the shards, whole and in sequence. A shard it read in an earlier
 * epoch may still be cached: with a permutation drawn anew each epoch, a
 * node has seen the fraction 1 - (1 - 1/nodes)^(e-1) of the data before
 * epoch e, and keeps min(cache, seen) of it. */
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
    if (order == 0) {
        global_memory(j, remote, r);
        if (remote)
            global_fetch(j, r);
    } else {
        shards_memory(j, remote, r);
        if (remote)
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
    static const char *const orders[] = {"global", "shards", NULL};
    *j = (plan_job){.nodes = 1,
                    .ranks_per_node = 8,
                    .batch = 256,
                    .epochs = 1,
                    .name_bytes = K(K_NAME),
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
            j->order = cli_choice("pinload-bench", bench_usage, f, v, orders);
        else if (!strcmp(f, "--name-bytes"))
            j->name_bytes = plan_number(f, v, 1);
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
    printf("%-6s %-6s %9s %9s %8s %8s", "order", "mode", "rank MiB", "peak MiB",
           "node GiB", "create s");
    if (remote)
        printf(" %8s %9s %8s %7s %8s", "cache GB", "fetch1 GB", "fetch GB",
               "hit", "epoch s");
    else
        printf(" %9s", "no .idx s");
    printf("\n");
    for (int i = 0; i < n; i++) {
        printf("%-6s %-6s %9.1f %9.1f %8.1f %8.3g", r[i].order, r[i].mode,
               r[i].resident / MIB, r[i].peak / MIB,
               r[i].peak * j->ranks_per_node / (1024 * MIB), r[i].create_idx);
        if (remote)
            printf(" %8.3g %9.3g %8.3g %6.2f%% %8.3g", r[i].cache_need / GB,
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
    if (j->shards > K(K_MAX_SHARDS))
        printf("warning: %.0f shards: create refuses more than %.0f\n",
               j->shards, K(K_MAX_SHARDS));
    printf("rank MiB: private, resident after create; peak: create's; node: "
           "peak x ranks a node.\n");
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
               "\"ring_bytes\": %.0f, \"node_peak_bytes\": %.0f, "
               "\"create_s\": %.6g, \"create_no_idx_s\": %.6g, "
               "\"cache_need_bytes\": %.0f, \"fetch_first_bytes\": %.0f, "
               "\"fetch_mean_bytes\": %.0f, \"requests_mean\": %.6g, "
               "\"hit_rate\": %.6f, \"epoch_first_s\": %.6g, "
               "\"epoch_mean_s\": %.6g}",
               i ? "," : "", r[i].order, r[i].mode, r[i].resident, r[i].peak,
               r[i].ring, r[i].peak * j->ranks_per_node, r[i].create_idx,
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
