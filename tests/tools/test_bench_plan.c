/* pinload-bench --plan, the model of docs/SCALE.md, run as a user runs it:
 * each value against the documented formulas worked out by hand, bad
 * arguments named, the predicted peak against one measured, the table. */
#include <math.h>
#include <sys/wait.h>

#include "pinload.h"
#include "testbench.h"
#include "testutil.h"

/* The number after "key": in s, after `from` if given. */
static double json_num(const char *s, const char *from, const char *key)
{
    const char *at = from ? strstr(s, from) : s;
    cr_assert_not_null(at, "no %s in %s", from, s);
    char k[96];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(at, k);
    cr_assert_not_null(p, "no %s in %s", key, at);
    return strtod(p + strlen(k), NULL);
}

/* A constant of the model, by name, from --plan --constants. */
static double plan_const(const char *table, const char *name)
{
    char k[96];
    snprintf(k, sizeof k, "  %s ", name);
    const char *p = strstr(table, k);
    cr_assert_not_null(p, "no constant %s in %s", name, table);
    return strtod(p + strlen(k), NULL);
}

static void assert_near(double got, double want, const char *what)
{
    cr_assert(fabs(got - want) <= 1e-6 * fabs(want) + 0.5,
              "%s: %.9g, by hand %.9g", what, got, want);
}

/* 1,000 samples of 1,000 bytes in 100 shards, 2 nodes of 4 ranks, 2
 * epochs, remote at 1 MB/s with no cache_limit: each value worked out
 * here from docs/SCALE.md's formulas, with the constants the tool lists. */
Test(bench_plan, plan_values_follow_the_documented_formulas)
{
    char *tab, *out, *err;
    cr_assert_eq(run_tool("--plan --constants", &tab, &err), 0, "%s", err);
    free(err);
    const double table = plan_const(tab, "table_bytes_per_sample"),
                 idx_shard = plan_const(tab, "table_bytes_per_idx_shard"),
                 fixed = plan_const(tab, "rank_fixed_bytes"),
                 first_batch = plan_const(tab, "first_batch_bytes"),
                 shard = plan_const(tab, "private_bytes_per_shard"),
                 sample = plan_const(tab, "private_bytes_per_sample"),
                 scan = plan_const(tab, "scan_bytes_per_window_sample"),
                 t_idx = plan_const(tab, "create_seconds_per_sample_idx"),
                 t_shard = plan_const(tab, "create_seconds_per_shard_idx"),
                 t_hdr = plan_const(tab, "create_seconds_per_sample_headers"),
                 t_hdr_shard =
                     plan_const(tab, "create_seconds_per_shard_headers"),
                 latency = plan_const(tab, "request_latency"),
                 shards_create =
                     plan_const(tab, "shards_order_create_fraction");
    cr_assert_eq(plan_const(tab, "table_bytes_per_heap_shard"), 72);
    cr_assert_eq(plan_const(tab, "mapped_shards_max"), 32768);
    cr_assert_eq(plan_const(tab, "shards_order_bytes_per_shard"), 44);
    cr_assert_eq(plan_const(tab, "bytes_per_remote_shard"), 900);
    cr_assert_eq(plan_const(tab, "index_bytes_per_member"), 96);
    cr_assert_eq(plan_const(tab, "shards_order_shards_in_hand"), 5);
    cr_assert_eq(plan_const(tab, "index_requests_in_flight"), 8);
    cr_assert_eq(plan_const(tab, "scan_window_shards"), 64);
    free(tab);
    cr_assert_eq(run_tool("--plan --samples 1K --shards 100 --bytes 1M "
                          "--nodes 2 --ranks-per-node 4 --batch 8 --epochs 2 "
                          "--bandwidth 1MB --size 10 --prefetch 2 --json",
                          &out, &err),
                 0, "%s", err);
    const char *g = "\"order\": \"global\"", *s = "\"order\": \"shards\"";
    const double ring = 2 * 8 * 10 * 10 * 3; /* slots x batch x 10x10 RGB */
    assert_near(json_num(out, g, "ring_bytes"), 4800, "ring");
    /* the tables' pages, the page cache's, once a node: 10 samples'
     * records and names a shard and the rest of its last page */
    const double shared = 100 * (10 * table + idx_shard);
    assert_near(json_num(out, g, "node_shared_bytes"), shared, "shared");
    assert_near(json_num(out, g, "rank_heap_table_bytes"), 0, "heap tables");
    /* private: per shard (and 900 B a remote shard), per sample, the
     * ring; create's peak adds its own and the larger of the indexes of
     * 64 shards at a time (10 samples each, 2 members of 96 B a sample)
     * and the first batch's own */
    const double resident = 100 * (shard + 900) + 1000 * sample + ring;
    const double peak = resident + fixed + fmax(64 * 10 * 2 * 96, first_batch);
    assert_near(json_num(out, g, "rank_resident_bytes"), resident, "resident");
    assert_near(json_num(out, g, "rank_peak_bytes"), peak, "peak");
    assert_near(json_num(out, g, "rank_peak_indexing_bytes"), peak,
                "remote indexing peak");
    assert_near(json_num(out, g, "node_peak_bytes"), 4 * peak + shared,
                "node peak");
    /* create: the samples and shards, 100 .idx requests 8 at a time,
     * their bytes (the table's, 72 a shard) at 1 MB/s */
    const double create = 1000 * t_idx + 100 * t_shard + 100 / 8.0 * latency +
                          (1000 * table + 100 * 72) / 1e6;
    assert_near(json_num(out, g, "create_s") * 1e6, create * 1e6, "create");
    /* no cache_limit: whole shards, the data once a node (1 MB, 1 s) */
    cr_assert_not_null(strstr(out, "\"mode\": \"whole\""), "%s", out);
    assert_near(json_num(out, g, "cache_need_bytes"), 1e6, "cache");
    assert_near(json_num(out, g, "fetch_first_bytes"), 1e6, "fetch1");
    assert_near(json_num(out, g, "fetch_mean_bytes"), 5e5, "fetch");
    /* 100 fetches for 2 epochs x 500 samples read a node */
    assert_near(json_num(out, g, "hit_rate") * 1e6, 0.9e6, "hit");
    assert_near(json_num(out, g, "epoch_first_s") * 1e6, 1e6, "epoch1 s");
    /* shards: the same and the sampler's 44 B a shard; the same tables;
     * create the global's times the measured fraction; a node reads half
     * the shards an epoch: 500 kB, then half of those again (it saw half
     * the data in epoch 1, and keeps it). */
    assert_near(json_num(out, s, "rank_resident_bytes"), resident + 100 * 44,
                "shards resident");
    assert_near(json_num(out, s, "node_shared_bytes"), shared, "shared");
    assert_near(json_num(out, s, "create_s") * 1e6,
                create * shards_create * 1e6, "shards create");
    assert_near(json_num(out, s, "cache_need_bytes"), 4 * 5 * 1e4, "cache");
    assert_near(json_num(out, s, "fetch_first_bytes"), 5e5, "fetch1");
    assert_near(json_num(out, s, "fetch_mean_bytes"), (5e5 + 2.5e5) / 2,
                "fetch");
    assert_near(json_num(out, s, "requests_mean") * 1e3, 37.5e3, "requests");
    assert_near(json_num(out, s, "hit_rate") * 1e6, (1 - 75 / 1000.0) * 1e6,
                "hit");
    free(out);
    free(err);
    /* local shards (no --bandwidth): no remote shard's 900 B; create's
     * peak adds its own and the larger of 64 shards' tables read at a
     * time (100 samples and a 72-byte head each) and the first batch's
     * own; the create that writes the indexes, 64 shards' samples at a
     * time more */
    cr_assert_eq(run_tool("--plan --samples 12800 --shards 128 --bytes 1G "
                          "--ranks-per-node 2 --batch 8 --size 10 "
                          "--order global --json",
                          &out, &err),
                 0, "%s", err);
    const double local = 128 * shard + 12800 * sample + ring;
    assert_near(json_num(out, g, "rank_resident_bytes"), local, "local");
    const double tables = fmax(64 * (100 * table + 72), first_batch);
    assert_near(json_num(out, g, "rank_peak_bytes"), local + fixed + tables,
                "local peak");
    assert_near(json_num(out, g, "rank_peak_indexing_bytes"),
                local + fixed + tables + 64 * 100 * scan, "indexing peak");
    assert_near(json_num(out, g, "node_shared_bytes"),
                128 * (100 * table + idx_shard), "local shared");
    assert_near(json_num(out, g, "create_s") * 1e6,
                (12800 * t_idx + 128 * t_shard) * 1e6, "local create");
    assert_near(json_num(out, g, "create_no_idx_s") * 1e6,
                (12800 * t_hdr + 128 * t_hdr_shard) * 1e6, "no .idx");
    assert_near(json_num(out, g, "hit_rate"), 1, "local hit");
    free(out);
    free(err);
    /* past 32,768 local shards the tables come from one dataset table
     * file, shared: 40,000 shards of 2 samples, 7,232 of them past the
     * limit (2 samples, the 72-byte head and a 64-byte directory entry
     * each), none in the heap */
    cr_assert_eq(run_tool("--plan --samples 80000 --shards 40000 --bytes 1G "
                          "--batch 8 --size 10 --order global --json",
                          &out, &err),
                 0, "%s", err);
    assert_near(json_num(out, g, "rank_heap_table_bytes"), 0, "heap");
    assert_near(json_num(out, g, "rank_resident_bytes"),
                40000 * shard + 80000 * sample + ring, "joined resident");
    assert_near(json_num(out, g, "node_shared_bytes"),
                32768 * (2 * table + idx_shard) + 7232 * (2 * table + 72 + 64),
                "joined shared");
    free(out);
    free(err);
    /* a cache_limit below the data: ranged reads, 500 a node an epoch,
     * each the sample's 1,000 bytes and 600 of request */
    cr_assert_eq(run_tool("--plan --samples 1000 --shards 100 --bytes 1e6 "
                          "--nodes 2 --bandwidth 1M --cache-limit 999999 "
                          "--order global --json",
                          &out, &err),
                 0, "%s", err);
    cr_assert_not_null(strstr(out, "\"mode\": \"ranged\""), "%s", out);
    cr_assert_null(strstr(out, s), "%s", out);
    assert_near(json_num(out, g, "fetch_mean_bytes"), 500 * 1600, "ranged");
    assert_near(json_num(out, g, "hit_rate"), 0, "ranged hit");
    free(out);
    free(err);
}

Test(bench_plan, plan_refuses_bad_arguments_naming_the_option)
{
    expect_usage_error("--plan --shards 10 --bytes 1G",
                       "--plan: --samples is required");
    expect_usage_error("--plan --samples 1M --bytes 1G",
                       "--plan: --shards is required");
    expect_usage_error("--plan --samples 1M --shards 10",
                       "--plan: --bytes is required");
    expect_usage_error("--plan --samples 1x --shards 10 --bytes 1G",
                       "--samples: \"1x\" is not a size");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes -5",
                       "--bytes: \"-5\" is not a size");
    expect_usage_error("--plan --samples 10 --shards 20 --bytes 1G",
                       "--shards: 20 shards for 10 samples");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G --nodes 0",
                       "--nodes: \"0\" is below 1");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G "
                       "--order random",
                       "--order: unknown value \"random\"");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G "
                       "--epochs 0",
                       "--epochs: \"0\" is not an integer");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G --wide",
                       "unknown option --wide");
    expect_usage_error("--plan --samples 1M --shards 10 --bytes 1G --bandwidth",
                       "--bandwidth needs a value");
}

static void quiet_log(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx, (void)level, (void)msg;
}

/* The peak memory a loader over data adds by its first batch (host,
 * batch 64 at 16x16, 2 workers), measured in a child process. */
static double child_peak(const char *data)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        pl_config c;
        pl_config_default(&c);
        c.data = data;
        c.device = PL_DEVICE_HOST;
        c.batch_size = 64;
        c.width = c.height = 16;
        c.num_workers = 2;
        c.rank = 0;
        c.world_size = 1;
        c.log = quiet_log;
        const long before = tu_status_kib("VmRSS");
        pl_loader *l;
        const pl_batch *b;
        double peak = -1;
        if (pl_loader_create(&c, &l) == 0) {
            if (pl_loader_next(l, &b) == 0) {
                pl_loader_release(l, b, NULL);
                peak = (double)(tu_status_kib("VmHWM") - before) * 1024.0;
            }
            pl_loader_destroy(l);
        }
        _exit(write(fd[1], &peak, sizeof peak) == sizeof peak ? 0 : 1);
    }
    close(fd[1]);
    double peak = -1;
    cr_assert_eq(read(fd[0], &peak, sizeof peak), (ssize_t)sizeof peak);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(peak > 0, "the child's create failed");
    return peak;
}

/* The model against a real create: 100,000 samples (or
 * $PINLOAD_PLAN_SAMPLES) packed by pinload-pack in shards of 200 (their
 * .idx written by the packer), a loader over them (host, batch 64 at
 * 16x16), its peak memory at the first batch (VmHWM) against --plan's
 * peak for a rank, within docs/SCALE.md's 25%. The tables are read with
 * pread, not mapped (issue 34): their pages are the page cache's and in
 * no rank's VmHWM, so the node's shared tables are not compared (until
 * then this compared node_peak_bytes for one rank alone on its node,
 * which added them). Measured on machine A: 2.50 to 2.54 MB; the model
 * 2.42 MB (create's own, measured, is about 37% of it). */
Test(bench_plan, plan_predicts_the_measured_peak_at_100k_samples,
     .timeout = 300)
{
    const char *env = getenv("PINLOAD_PLAN_SAMPLES");
    const int samples = env && atoi(env) >= 200 ? atoi(env) : 100000;
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    char root[64], path[256], cmd[1024];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/one.jpg", root);
    tu_write_jpeg(path, 16, 16, 7, NULL);
    snprintf(cmd, sizeof cmd, "%s/list.txt", root);
    FILE *f = fopen(cmd, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < samples; i++)
        fprintf(f, "%s %d\n", path, i % 100);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-pack --data %s/list.txt --out %s/p --per-shard 200 "
             "--quiet",
             tu_build_dir(), root, root);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char data[128];
    snprintf(data, sizeof data, "%s/p", root);
    /* The median of three creates, each in a child process of its own
     * (VmHWM is per process): the threads' arenas move the peak by about
     * 1.5 MB from one run to the next. */
    double runs[3];
    for (int k = 0; k < 3; k++)
        runs[k] = child_peak(data);
    const double lo = fmin(runs[0], fmin(runs[1], runs[2])),
                 hi = fmax(runs[0], fmax(runs[1], runs[2]));
    const double peak = runs[0] + runs[1] + runs[2] - lo - hi;
    char args[512], *out, *err;
    snprintf(args, sizeof args,
             "--plan --samples %d --shards %d --bytes 1G --nodes 1 "
             "--ranks-per-node 1 --batch 64 --size 16 --prefetch 2 "
             "--order global --json",
             samples, samples / 200);
    cr_assert_eq(run_tool(args, &out, &err), 0, "%s", err);
    /* a rank's peak: the tables it reads are the page cache's */
    const double model = json_num(out, NULL, "rank_peak_bytes");
    cr_log_info("peak at %d samples: measured %.0f, model %.0f (%.2fx)",
                samples, peak, model, model / peak);
    cr_assert(model > 0.75 * peak && model < 1.25 * peak,
              "model %.0f bytes against %.0f measured (%.2fx), outside "
              "docs/SCALE.md's 25%%",
              model, peak, model / peak);
    free(out);
    free(err);
    tu_rm_rf(root);
}

/* The table fits 100 columns, as the sweep's does, local and remote, and
 * names both orders; --order picks one. */
Test(bench_plan, plan_table_fits_100_columns_and_order_picks_one)
{
    static const char *const jobs[] = {
        "--plan --samples 5G --shards 1M --bytes 550T --nodes 512 --epochs 10 "
        "--bandwidth 12.5G --cache-limit 2T",
        "--plan --samples 2M --shards 4000 --bytes 5G"};
    for (size_t k = 0; k < 2; k++) {
        char *out, *err;
        cr_assert_eq(run_tool(jobs[k], &out, &err), 0, "%s", err);
        cr_assert_not_null(strstr(out, "\nglobal "), "%s", out);
        cr_assert_not_null(strstr(out, "\nshards "), "%s", out);
        for (const char *l = out; *l;) {
            const char *e = strchr(l, '\n');
            const size_t len = e ? (size_t)(e - l) : strlen(l);
            cr_assert_leq(len, 100, "a line of %zu columns: %.*s", len,
                          (int)len, l);
            l += len + (e != NULL);
        }
        free(out);
        free(err);
    }
    char *out, *err;
    /* --name-bytes is accepted and changes nothing: no name is kept a
     * shard sample */
    cr_assert_eq(run_tool("--plan --samples 2M --shards 4000 --bytes 5G "
                          "--order shards --name-bytes 99",
                          &out, &err),
                 0, "%s", err);
    cr_assert_null(strstr(out, "\nglobal "), "%s", out);
    cr_assert_not_null(strstr(out, "\nshards local"), "%s", out);
    free(out);
    free(err);
}
