/* The node cache of remote shards (remote/cache.c) against
 * tests/remote/httpd.py: a cache smaller than the data read by range,
 * ranks of a node sharing one cache, eviction beside a reader, destroy
 * during slow downloads. Every server is the test's own, bounded in time. */
#include <criterion/criterion.h>

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RT_TIMEOUT 120

/* A cache_limit below the data: every member read alone with a ranged
 * request, in the exact order, the epochs complete and equal to the local
 * ones, nothing cached whole. */
Test(remote_cache, a_cache_smaller_than_the_data_reads_members_by_range,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[2], got[2];
    rt_local_run(&f, 2, want);
    char p[256];
    snprintf(p, sizeof p, "%s/pack/shard-000000.tar", f.dir);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
    c.cache_limit = st.st_size * 2; /* two of the four shards */
    rt_log g = {0};
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 2, got);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(got[e].n, RT_SAMPLES);
        assert_same_run(&want[e], &got[e], "ranged reads");
    }
    cr_assert(strstr(g.text, "exceed cache_limit"), "%s", g.text);
    int ranged = 0;
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar bytes=", s);
        ranged += rt_count(&f.srv, prefix);
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar - ", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 0, "shard %d fetched whole", s);
    }
    /* One request per member per epoch, and at most the prefetched
     * batches of the third epoch (prefetch 2 x batch 5) before destroy. */
    /* Beyond the two epochs: what the workers decode of a third before
     * destroy (the ring's and the device buffers' batches: (prefetch +
     * device_buffers) x batch_size), and create's one probe that the
     * server answers ranges. */
    const int ahead = (c.prefetch + c.device_buffers) * c.batch_size + 1;
    cr_assert(ranged >= 2 * RT_SAMPLES && ranged <= 2 * RT_SAMPLES + ahead,
              "%d ranged requests for 2 epochs of %d (at most %d ahead)",
              ranged, RT_SAMPLES, ahead);
    cr_assert_eq(rt_distinct_ranges(&f.srv), RT_SAMPLES,
                 "each member is one range");
    cr_assert_eq(rt_cache_files(&f, ".tar"), 0);
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    rt_pack_down(&f);
}

/* FNV-1a of what rank `rank` of `world` delivers in epoch 0 of data. */
/* `done`/`hold` (or -1): once its epoch is read the rank writes a byte to
 * `done` and waits for one from `hold` before it destroys its loader, so
 * that no rank's destroy cuts a fetch-ahead download another rank needs
 * (that shard would then be fetched twice: the count this suite checks). */
static uint64_t rank_digest(const char *data, const char *cache, int rank,
                            int world, int order, int done, int hold)
{
    pl_config c;
    base_cfg(&c, data);
    c.order = order;
    if (order == PL_ORDER_SHARDS)
        c.shuffle_window = 1;
    c.cache_dir = cache;
    c.rank = rank;
    c.world_size = world;
    c.num_workers = 1;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l = NULL;
    if (pl_loader_create(&c, &l) != 0)
        return 0;
    uint64_t h = 0xcbf29ce484222325u;
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        const uint8_t *px = b->host;
        for (size_t i = 0; i < b->bytes; i++)
            h = (h ^ px[i]) * 0x100000001b3u;
        for (int i = 0; i < b->count; i++)
            h = (h ^ (uint64_t)b->labels[i]) * 0x100000001b3u;
        n += b->count;
        pl_loader_release(l, b, NULL);
    }
    char x = 0;
    if (done >= 0)
        (void)!write(done, &x, 1);
    if (hold >= 0)
        (void)!read(hold, &x, 1);
    pl_loader_destroy(l);
    return rc == PL_EPOCH_END && n > 0 ? h : 0;
}

/* ranks processes of one node, started together on one cache, in `order`:
 * each shard and each index requested exactly once in all, and every
 * rank's bytes those of the same rank over the local shards. */
static void ranks_of_a_node(int ranks, int order)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    int go[2], done[2], hold[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(done), 0);
    cr_assert_eq(pipe(hold), 0);
    pid_t pid[8];
    cr_assert_leq(ranks, 8);
    for (int r = 0; r < ranks; r++) {
        pid[r] = fork();
        cr_assert_geq(pid[r], 0);
        if (pid[r] == 0) {
            close(go[1]);
            close(done[0]);
            close(hold[1]);
            char x;
            (void)!read(go[0], &x, 1); /* all start at once */
            /* As a job's ranks do, all finish their epoch before any
             * tears down. */
            const uint64_t a =
                rank_digest(f.url, f.cache, r, ranks, order, done[1], hold[0]);
            const uint64_t b =
                rank_digest(f.local, NULL, r, ranks, order, -1, -1);
            _exit(a != 0 && a == b ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]);
    close(done[1]);
    close(hold[0]);
    /* Every rank's epoch read (within 60 s: a rank that fails never
     * says so, and the waits below name it), then all may destroy. */
    for (int r = 0, waited = 0; r < ranks && waited < 60000;) {
        struct pollfd p = {.fd = done[0], .events = POLLIN};
        char x;
        if (poll(&p, 1, 100) == 1 && read(done[0], &x, 1) == 1)
            r++;
        else
            waited += 100;
    }
    for (int r = 0; r < ranks; r++)
        (void)!write(hold[1], "x", 1);
    close(done[0]);
    close(hold[1]);
    for (int r = 0; r < ranks; r++) {
        int st = 0;
        for (int t = 0; t < 6000 && waitpid(pid[r], &st, WNOHANG) == 0; t++)
            usleep(10000);
        if (waitpid(pid[r], &st, WNOHANG) == 0) {
            kill(pid[r], SIGKILL);
            waitpid(pid[r], &st, 0);
            cr_assert(0, "rank %d did not finish in 60 s", r);
        }
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "rank %d: its bytes are not the local shards' (status %d)", r,
                  st);
    }
    rt_assert_each_shard_fetched(&f, 1);
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar.idx ", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 1, "shard %d's index", s);
    }
    rt_pack_down(&f);
}

Test(remote_cache, eight_ranks_of_a_node_fetch_each_shard_once,
     .timeout = RT_TIMEOUT)
{
    ranks_of_a_node(8, PL_ORDER_GLOBAL);
}

/* In the shard order each of two ranks reads two whole shards (24 samples,
 * window 1): each streams its own, and the node fetches each once. */
Test(remote_cache, two_ranks_of_the_shard_order_fetch_each_shard_once,
     .timeout = RT_TIMEOUT)
{
    ranks_of_a_node(2, PL_ORDER_SHARDS);
}

/* Two packs through one bounded cache. While a loader reads pack A, pack
 * B finds no shard it may evict: it reads those members by range (with a
 * warning), A's shards stay. Once A's loader is gone, B's next loader
 * evicts A's shards, least recently used first, and caches its own. */
Test(remote_cache, eviction_never_takes_a_shard_a_loader_reads,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp -r %s/pack %s/b && mv %s/b %s/pack/b", f.dir,
             f.dir, f.dir, f.dir);
    cr_assert_eq(system(cmd), 0);
    int64_t total = 0;
    for (int s = 0; s < RT_SHARDS; s++) {
        char p[256];
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar", f.dir, s);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        total += st.st_size;
    }
    char url_b[256];
    snprintf(url_b, sizeof url_b,
             "http://127.0.0.1:%d/b/shard-{000000..%06d}.tar", f.srv.port,
             RT_SHARDS - 1);
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 1, want);
    pl_config ca;
    rt_remote_cfg(&f, &ca, 2);
    ca.cache_limit = total + 4096; /* one pack, not two */
    pl_loader *a = create(&ca);
    run ra;
    run_epoch(a, 0, &ra); /* A's shards all cached, held by a */
    assert_same_run(&want[0], &ra, "pack A");
    run_free(&ra);
    cr_assert_eq(rt_cache_files(&f, ".tar"), RT_SHARDS);
    rt_log g = {0};
    pl_config cb;
    rt_remote_cfg(&f, &cb, 2);
    cb.data = url_b;
    cb.cache_limit = ca.cache_limit;
    cb.log = rt_log_fn;
    cb.log_ctx = &g;
    run_loader(&cb, 1, got);
    assert_same_run(&want[0], &got[0], "pack B beside a reader of A");
    run_free(&got[0]);
    cr_assert(strstr(g.text, "read member by member"), "%s", g.text);
    cr_assert_eq(rt_cache_files(&f, ".tar"), RT_SHARDS, "A's shards evicted");
    cr_assert_eq(rt_count(&f.srv, "GET /b/shard-000000.tar - "), 0);
    pl_loader_destroy(a);
    run_loader(&cb, 1, got);
    assert_same_run(&want[0], &got[0], "pack B alone");
    run_free(&got[0]);
    cr_assert_eq(rt_cache_files(&f, ".tar"), RT_SHARDS, "%d shards cached: %s",
                 rt_cache_files(&f, ".tar"), tu_slurp(f.srv.log));
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /b/shard-%06d.tar - 200", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 1, "B's shard %d", s);
    }
    run_free(&want[0]);
    rt_pack_down(&f);
}

/* Destroy while the shards come at 4 KB/s (each takes seconds): the
 * fetcher and the workers give up at once, and no partial shard is left
 * under a shard's name. */
static void destroy_during_slow_downloads(int order)
{
    rt_pack f;
    rt_pack_up_at(&f, NULL, 4000);
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
    if (order == PL_ORDER_SHARDS)
        rt_shard_order(&c, f.url, 1);
    pl_loader *l = create(&c);
    usleep(300 * 1000); /* the downloads are under way */
    const double t0 = tu_seconds();
    pl_loader_destroy(l);
    const double took = tu_seconds() - t0;
    cr_assert_lt(took, 1.0, "destroy took %.2f s", took);
    cr_assert_eq(rt_cache_files(&f, ".tar"), 0);
    cr_assert_geq(rt_count(&f.srv, "GET /shard-"), RT_SHARDS + 1,
                  "no shard download had started");
    rt_pack_down(&f);
}

Test(remote_cache, destroy_does_not_wait_for_a_slow_download,
     .timeout = RT_TIMEOUT)
{
    destroy_during_slow_downloads(PL_ORDER_GLOBAL);
}

/* The same with the shard order's stream thread waiting on its band. */
Test(remote_cache, destroy_does_not_wait_for_a_slow_streamed_shard,
     .timeout = RT_TIMEOUT)
{
    destroy_during_slow_downloads(PL_ORDER_SHARDS);
}
