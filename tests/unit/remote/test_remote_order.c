/* The shard order (PL_ORDER_SHARDS) over http:// against
 * tests/remote/httpd.py: whole shards streamed in the rank's order
 * through a small cache, each fetched once when the cache holds them, a
 * rank's own shards, the fall back to ranged reads; and states resumed on
 * the remote copy of the shards they were saved on. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RT_TIMEOUT 120

/* The bytes of the cache's shards, whole and under way. */
static int64_t cache_bytes(const rt_pack *f)
{
    DIR *d = opendir(f->cache);
    int64_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t a = strlen(e->d_name);
        struct stat st;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", f->cache, e->d_name);
        if ((strstr(e->d_name, ".tar.part") ||
             (a > 4 && strcmp(e->d_name + a - 4, ".tar") == 0)) &&
            stat(p, &st) == 0)
            n += st.st_size;
    }
    if (d)
        closedir(d);
    return n;
}

/* The bytes of the k largest shards of the pack. */
static int64_t largest_shards(const rt_pack *f, int k)
{
    int64_t size[RT_SHARDS], sum = 0;
    for (int s = 0; s < RT_SHARDS; s++) {
        char p[256];
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar", f->dir, s);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        size[s] = st.st_size;
    }
    for (int i = 0; i < k; i++) { /* k passes of a selection */
        int m = i;
        for (int j = i + 1; j < RT_SHARDS; j++)
            if (size[j] > size[m])
                m = j;
        const int64_t t = size[i];
        size[i] = size[m];
        size[m] = t;
        sum += size[i];
    }
    return sum;
}

/* PL_ORDER_SHARDS with a cache of three shards of the four (window 1: a
 * window spans one shard, and a rank holds the one it reads, the one
 * before and the one after): the local shards' bytes and order, every
 * shard fetched whole (no ranged request), at most once per epoch (and
 * the third epoch's first shards, claimed before destroy), and the cache
 * within its limit at the end. */
Test(remote_order, the_shard_order_streams_whole_shards_through_a_small_cache,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[2], got[2];
    pl_config c;
    base_cfg(&c, f.local);
    rt_shard_order(&c, f.local, 1);
    run_loader(&c, 2, want);
    rt_remote_cfg(&f, &c, 2);
    rt_shard_order(&c, f.url, 1);
    c.cache_limit = largest_shards(&f, 3);
    rt_log g = {0};
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 2, got);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(got[e].n, RT_SAMPLES);
        assert_same_run(&want[e], &got[e], "streamed shards");
    }
    cr_assert(strstr(g.text, "exceed cache_limit"), "%s", g.text);
    cr_assert(strstr(g.text, "in the shard order each rank fetches its own "
                             "whole"),
              "%s", g.text);
    int whole = 0;
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar bytes=", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 0, "shard %d read by range", s);
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar - 200", s);
        const int n = rt_count(&f.srv, prefix);
        cr_assert(n >= 1 && n <= 3, "shard %d fetched %d times", s, n);
        whole += n;
    }
    cr_assert_leq(whole, 2 * RT_SHARDS + 3, "%d whole fetches", whole);
    cr_assert_leq(rt_cache_files(&f, ".tar"), 3);
    cr_assert_leq(cache_bytes(&f), c.cache_limit, "%lld bytes in the cache",
                  (long long)cache_bytes(&f));
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    rt_pack_down(&f);
}

/* PL_ORDER_SHARDS with a cache that holds the data, shuffled windows of
 * 4: each shard fetched once for both epochs (those the stream lets go
 * stay until room is wanted), and the local shards' bytes. */
Test(remote_order,
     the_shard_order_fetches_each_shard_once_when_the_cache_holds_it,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[2], got[2];
    pl_config c;
    base_cfg(&c, f.local);
    rt_shard_order(&c, f.local, 4);
    run_loader(&c, 2, want);
    rt_remote_cfg(&f, &c, 2);
    rt_shard_order(&c, f.url, 4);
    c.cache_limit = largest_shards(&f, RT_SHARDS);
    run_loader(&c, 2, got);
    for (int e = 0; e < 2; e++) {
        assert_same_run(&want[e], &got[e], "streamed shards");
        run_free(&want[e]);
        run_free(&got[e]);
    }
    rt_assert_each_shard_fetched(&f, 1);
    rt_pack_down(&f);
}

/* Rank 1 of 4 reads one whole shard an epoch (6 samples, window 1): it
 * fetches that one, and at most the next epoch's (claimed before
 * destroy), not every shard as the global order's fetch-ahead does. */
Test(remote_order, a_rank_of_the_shard_order_fetches_its_own_shards,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    rt_shard_order(&c, f.local, 1);
    c.rank = 1;
    c.world_size = 4;
    run_loader(&c, 1, want);
    rt_remote_cfg(&f, &c, 2);
    rt_shard_order(&c, f.url, 1);
    c.rank = 1;
    c.world_size = 4;
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "rank 1 of 4");
    cr_assert_eq(got[0].n, RT_PER_SHARD);
    const int mine = (int)(got[0].idx[0] / RT_PER_SHARD);
    for (int k = 0; k < got[0].n; k++)
        cr_assert_eq(got[0].idx[k] / RT_PER_SHARD, mine, "one shard");
    char prefix[64];
    snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar - 200", mine);
    cr_assert_eq(rt_count(&f.srv, prefix), 1, "its shard %d", mine);
    const int all = rt_count(&f.srv, "GET /shard-") -
                    rt_count(&f.srv, "GET /shard-000000.tar.idx") -
                    rt_count(&f.srv, "GET /shard-000001.tar.idx") -
                    rt_count(&f.srv, "GET /shard-000002.tar.idx") -
                    rt_count(&f.srv, "GET /shard-000003.tar.idx");
    if (all > 2) { /* which, to tell a fetch-ahead from a retry */
        char seen[2048] = "";
        FILE *lf = fopen(f.srv.log, "r");
        char line[256];
        while (lf && fgets(line, sizeof line, lf))
            if (!strncmp(line, "GET /shard-", 11) && !strstr(line, ".idx"))
                strncat(seen, line, sizeof seen - strlen(seen) - 1);
        if (lf)
            fclose(lf);
        cr_assert_leq(all, 2, "%d shard requests for one shard an epoch:\n%s",
                      all, seen);
    }
    run_free(&want[0]);
    run_free(&got[0]);
    rt_pack_down(&f);
}

/* PL_ORDER_SHARDS with a cache of two shards, fewer than the three a rank
 * holds at once: create says so, and every member is read by range, as
 * in the global order; the same bytes. */
Test(remote_order, a_cache_too_small_for_the_stream_falls_back_to_ranges,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    rt_shard_order(&c, f.local, 1);
    run_loader(&c, 1, want);
    rt_remote_cfg(&f, &c, 2);
    rt_shard_order(&c, f.url, 1);
    c.cache_limit = largest_shards(&f, 2);
    rt_log g = {0};
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "ranged reads");
    cr_assert(strstr(g.text, "so they are not streamed"), "%s", g.text);
    cr_assert(strstr(g.text, "each member is read alone"), "%s", g.text);
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar - ", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 0, "shard %d fetched whole", s);
    }
    cr_assert_eq(rt_cache_files(&f, ".tar"), 0);
    run_free(&want[0]);
    run_free(&got[0]);
    rt_pack_down(&f);
}

/* ---- resume ---- */

/* The first shard request in the server's log: its shard's number, or -1. */
static int first_shard_fetched(const rt_pack *f)
{
    FILE *log = fopen(f->srv.log, "r");
    char line[512];
    int s = -1;
    while (log && s < 0 && fgets(line, sizeof line, log))
        if (sscanf(line, "GET /shard-%d.tar -", &s) != 1 ||
            strstr(line, ".idx"))
            s = -1;
    if (log)
        fclose(log);
    return s;
}

/* A state saved mid-epoch on the local shards, resumed on their URLs in
 * the shard order through a cache of three shards: the rest of the epoch
 * byte for byte, no ranged request, and the stream starts at the shard
 * the resumed position reads, not at the epoch's first. */
Test(remote_order, a_resumed_shard_order_streams_from_the_resumed_shard,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    rt_shard_order(&lc, f.local, 1);
    lc.on_error = PL_ON_ERROR_FAIL;
    run_loader(&lc, 1, want);
    pl_loader *l = create(&lc);
    const pl_batch *b;
    for (int i = 0; i < 3; i++) { /* 15 of 24: into the third shard */
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        pl_loader_release(l, b, NULL);
    }
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
    rt_shard_order(&c, f.url, 1);
    c.cache_limit = largest_shards(&f, 3);
    c.resume = &st;
    l = create(&c);
    run rest;
    cr_assert_eq(run_batches(l, 0, 3, MAXB, &rest), 1, "no epoch end");
    pl_loader_destroy(l);
    const int done = 15;
    cr_assert_eq(rest.n, RT_SAMPLES - done);
    for (int k = 0; k < rest.n; k++)
        cr_assert_eq(rest.idx[k], want[0].idx[done + k]);
    cr_assert_eq(memcmp(rest.bytes, sample_at(&want[0], done),
                        rest.sample_bytes * (size_t)rest.n),
                 0, "the resumed samples' pixels differ");
    cr_assert_eq(first_shard_fetched(&f),
                 (int)(want[0].idx[done] / RT_PER_SHARD));
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar bytes=", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 0, "shard %d read by range", s);
    }
    run_free(&rest);
    run_free(&want[0]);
    rt_pack_down(&f);
}

/* A state saved on the local shards resumes on their URLs (a state moves
 * with a copy of the data): exactly the rest of the epoch, byte for byte. */
Test(remote_order, a_local_state_resumes_on_the_remote_copy,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    lc.on_error = PL_ON_ERROR_FAIL;
    run_loader(&lc, 1, want);
    pl_loader *l = create(&lc);
    const pl_batch *b;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        pl_loader_release(l, b, NULL);
    }
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    pl_config c;
    rt_remote_cfg(&f, &c, 4);
    c.resume = &st;
    l = create(&c);
    run rest;
    cr_assert_eq(run_batches(l, 0, 2, MAXB, &rest), 1, "no epoch end");
    pl_loader_destroy(l);
    const int done = want[0].counts[0] + want[0].counts[1];
    cr_assert_eq(rest.n, RT_SAMPLES - done);
    for (int k = 0; k < rest.n; k++) {
        cr_assert_eq(rest.idx[k], want[0].idx[done + k]);
        cr_assert_eq(rest.lab[k], want[0].lab[done + k]);
    }
    cr_assert_eq(memcmp(rest.bytes, sample_at(&want[0], done),
                        rest.sample_bytes * (size_t)rest.n),
                 0, "the resumed samples' pixels differ");
    run_free(&rest);
    run_free(&want[0]);
    rt_pack_down(&f);
}
