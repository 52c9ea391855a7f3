/* Remote shards over http:// (remote/remote.c) against tests/remote/httpd.py
 * on 127.0.0.1: the local shards' bytes and labels through the node cache,
 * indexes from URL.idx or (said first) from the shards, one request per
 * shard, atomic cache files; and the faults: a connection cut mid-body, a
 * stall, 500s, 404s, a short body. Every server is the test's own, bounded
 * in time. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../../../tools/tarwrite.h"
#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RT_TIMEOUT 120

typedef struct fx {
    char dir[64];
    char local[256];
    char url[256];
    char cache[128];
    rt_server srv;
} fx;

static void fx_up_at(fx *f, const char *const *faults, double rate)
{
    tu_tmpdir(f->dir);
    rt_make_pack(f->dir);
    snprintf(f->local, sizeof f->local, "%s/pack/shard-{000000..%06d}.tar",
             f->dir, RT_SHARDS - 1);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    char root[128];
    snprintf(root, sizeof root, "%s/pack", f->dir);
    rt_start(&f->srv, f->dir, root, faults, rate);
    rt_url(&f->srv, f->url, sizeof f->url);
}

static void fx_up(fx *f, const char *const *faults)
{
    fx_up_at(f, faults, 0);
}

static void fx_down(fx *f)
{
    rt_stop(&f->srv);
    tu_rm_rf(f->dir);
}

static void remote_cfg(const fx *f, pl_config *c, int workers)
{
    base_cfg(c, f->url);
    c->cache_dir = f->cache;
    c->num_workers = workers;
    c->remote_timeout_ms = 2000;
    c->on_error = PL_ON_ERROR_FAIL;
}

static void local_run(const fx *f, int workers, run *out)
{
    pl_config c;
    base_cfg(&c, f->local);
    c.num_workers = workers;
    run_loader(&c, 2, out);
}

/* Files in the cache whose names end in `suffix`. */
static int cache_files(const fx *f, const char *suffix)
{
    DIR *d = opendir(f->cache);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t a = strlen(e->d_name), b = strlen(suffix);
        n += a > b && strcmp(e->d_name + a - b, suffix) == 0;
    }
    closedir(d);
    return n;
}

static void assert_each_shard_fetched(const fx *f, int times)
{
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar ", s);
        cr_assert_eq(rt_count(&f->srv, prefix), times,
                     "shard %d: %d requests, want %d", s,
                     rt_count(&f->srv, prefix), times);
    }
}

/* Two epochs, workers 1 and 4: the bytes, labels and order of the local
 * shards'; the .idx and each shard fetched exactly once, the second
 * loader served from the cache alone. */
Test(remote, http_shards_give_the_local_shards_bytes_once_per_node,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[2], got[2];
    local_run(&f, 1, want);
    for (int w = 0; w < 2; w++) {
        pl_config c;
        remote_cfg(&f, &c, w ? 4 : 1);
        run_loader(&c, 2, got);
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(got[e].n, RT_SAMPLES);
            assert_same_run(&want[e], &got[e], w ? "workers 4" : "workers 1");
            run_free(&got[e]);
        }
        for (int s = 0; s < RT_SHARDS; s++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar.idx ", s);
            cr_assert_eq(rt_count(&f.srv, prefix), 1, "shard %d's index", s);
        }
        assert_each_shard_fetched(&f, 1);
    }
    cr_assert_eq(rt_count(&f.srv, "GET /classes.txt "), 1);
    cr_assert_eq(cache_files(&f, ".tar"), RT_SHARDS);
    cr_assert_eq(cache_files(&f, ".part"), 0, "a download left behind");
    /* The class names came from the store's classes.txt. */
    pl_config c;
    remote_cfg(&f, &c, 1);
    pl_loader *l = create(&c);
    pl_info in = info_of(l);
    cr_assert_eq(in.num_classes, 3);
    pl_loader_destroy(l);
    for (int e = 0; e < 2; e++)
        run_free(&want[e]);
    fx_down(&f);
}

/* Without URL.idx beside the shards, create says first that it fetches
 * them whole, indexes them from the cache, and the next create reads the
 * indexes it kept there: no request at all. */
Test(remote, without_indexes_create_says_it_fetches_the_shards,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    char p[256];
    for (int s = 0; s < RT_SHARDS; s++) {
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar.idx", f.dir, s);
        cr_assert_eq(unlink(p), 0);
    }
    run want[2], got[2];
    local_run(&f, 2, want); /* writes the indexes anew: removed again */
    for (int s = 0; s < RT_SHARDS; s++) {
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar.idx", f.dir, s);
        unlink(p);
    }
    rt_log g = {0};
    pl_config c;
    remote_cfg(&f, &c, 2);
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 2, got);
    cr_assert(strstr(g.text, "4 of 4 remote shard(s) have no index beside "
                             "them"),
              "no notice: %s", g.text);
    for (int e = 0; e < 2; e++)
        assert_same_run(&want[e], &got[e], "indexed from the shards");
    assert_each_shard_fetched(&f, 1);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar.idx "), 1);
    const int before = rt_count(&f.srv, "GET ");
    pl_config c2;
    remote_cfg(&f, &c2, 2);
    run again[2];
    run_loader(&c2, 1, again);
    assert_same_run(&want[0], &again[0], "the second create");
    cr_assert_eq(rt_count(&f.srv, "GET "), before,
                 "the second create asked the server again");
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    run_free(&again[0]);
    fx_down(&f);
}

/* A connection cut mid-body and a body shorter than its Content-Length:
 * the download resumes with a Range request from the bytes it has, and
 * the epoch is the local one. */
Test(remote, a_cut_or_short_body_resumes_with_range, .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"cut:/shard-000001.tar:1",
                            "short:/shard-000002.tar:2", NULL};
    fx f;
    fx_up(&f, faults);
    run want[2], got[2];
    local_run(&f, 2, want);
    pl_config c;
    remote_cfg(&f, &c, 2);
    run_loader(&c, 2, got);
    for (int e = 0; e < 2; e++)
        assert_same_run(&want[e], &got[e], "after the faults");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000001.tar - 200"), 1);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000001.tar bytes="), 1,
                 "the cut download was not resumed with Range");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000002.tar "), 3);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000002.tar bytes="), 2);
    cr_assert_eq(cache_files(&f, ".part"), 0);
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    fx_down(&f);
}

/* A stalled transfer is cut after remote_timeout_ms and resumed; 500s are
 * retried. The same bytes, in bounded time. */
Test(remote, stalls_and_500s_are_retried_to_the_same_bytes,
     .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"stall:/shard-000003.tar:1",
                            "500:/shard-000000.tar:2", NULL};
    fx f;
    fx_up(&f, faults);
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 1, want);
    pl_config c;
    remote_cfg(&f, &c, 2);
    c.remote_timeout_ms = 1000;
    const double t0 = tu_seconds();
    run_loader(&c, 1, got);
    const double took = tu_seconds() - t0;
    assert_same_run(&want[0], &got[0], "after a stall and 500s");
    cr_assert_lt(took, 20.0, "took %.1f s", took);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar - 500"), 2);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar - 200"), 1);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000003.tar bytes="), 1,
                 "the stalled download was not resumed");
    run_free(&want[0]);
    run_free(&got[0]);
    fx_down(&f);
}

/* A shard the store no longer has (404, indexed from its .idx): its
 * samples' error under the policy, naming the URL and the status; under
 * SUBSTITUTE the epoch keeps every position, the shard's as bad ones. */
Test(remote, a_missing_shard_is_its_samples_error_naming_url_and_status,
     .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"404:/shard-000002.tar:-1", NULL};
    fx f;
    fx_up(&f, faults);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg,
             "http://127.0.0.1:%d/shard-000002.tar: HTTP 404", f.srv.port);
    pl_config c;
    remote_cfg(&f, &c, 2);
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    run got[1];
    run_loader(&c, 1, got);
    cr_assert_eq(got[0].n, RT_SAMPLES, "a silently shorter epoch");
    int bad = 0;
    for (int k = 0; k < got[0].n; k++) {
        const int in_shard2 = got[0].idx[k] / RT_PER_SHARD == 2;
        cr_assert_eq(got[0].st[k] != 0, in_shard2, "position %d (index %lld)",
                     k, (long long)got[0].idx[k]);
        bad += in_shard2;
    }
    cr_assert_eq(bad, RT_PER_SHARD);
    run_free(&got[0]);
    /* FAIL: the first of them stops the epoch, with the URL and status. */
    remote_cfg(&f, &c, 1);
    pl_loader *l = create(&c);
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0)
        pl_loader_release(l, b, NULL);
    cr_assert_eq(rc, PL_EIO, "%s", pl_err_name(rc));
    cr_assert(strstr(pl_last_error(), want_msg), "%s", pl_last_error());
    pl_failure fl[4];
    size_t n = 0;
    cr_assert_eq(pl_loader_failures(l, 0, fl, 4, &n), 0);
    cr_assert_geq(n, 1);
    cr_assert(strstr(fl[0].reason, want_msg), "%s", fl[0].reason);
    pl_loader_destroy(l);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000002.tar - 404"), 2,
                 "a 404 is not retried, and the shard's error is kept");
    fx_down(&f);
}

/* 500s that do not stop: remote_retries more attempts, then the named
 * error; and a shard cut with no retry left is never taken as whole:
 * the cache keeps only its .part, which the next loader resumes. */
Test(remote, retries_run_out_and_a_partial_shard_is_never_whole,
     .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"500:/shard-000001.tar:3",
                            "cut:/shard-000003.tar:1", NULL};
    fx f;
    fx_up(&f, faults);
    pl_config c;
    remote_cfg(&f, &c, 1);
    c.remote_retries = -1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    run got[1];
    run_loader(&c, 1, got);
    cr_assert_eq(got[0].n, RT_SAMPLES);
    for (int k = 0; k < got[0].n; k++) {
        const int64_t s = got[0].idx[k] / RT_PER_SHARD;
        cr_assert_eq(got[0].st[k] != 0, s == 1 || s == 3, "index %lld",
                     (long long)got[0].idx[k]);
    }
    run_free(&got[0]);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000001.tar "), 1);
    cr_assert_eq(cache_files(&f, ".tar"), 2, "a failed shard in the cache");
    cr_assert_eq(cache_files(&f, ".part"), 2);
    /* Two more 500s for shard 1: one retry is not enough, and the reason
     * says how many attempts were made; shard 3 resumes from its .part. */
    remote_cfg(&f, &c, 1);
    c.remote_retries = 1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    pl_loader *l = create(&c);
    run again[1];
    run_epoch(l, 0, &again[0]);
    cr_assert_eq(again[0].n, RT_SAMPLES);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg,
             "http://127.0.0.1:%d/shard-000001.tar: HTTP 500 (after 2 "
             "attempts)",
             f.srv.port);
    pl_failure fl[RT_SAMPLES];
    size_t n = 0;
    cr_assert_eq(pl_loader_failures(l, 0, fl, RT_SAMPLES, &n), 0);
    cr_assert_eq(n, RT_PER_SHARD, "only shard 1's samples fail");
    for (size_t i = 0; i < n; i++)
        cr_assert(strstr(fl[i].reason, want_msg), "%s", fl[i].reason);
    pl_loader_destroy(l);
    run_free(&again[0]);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000003.tar bytes="), 1,
                 "the .part was not resumed");
    /* The faults are spent: everything as the local shards. */
    run want[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 1, want);
    remote_cfg(&f, &c, 2);
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "once the faults are spent");
    run_free(&want[0]);
    run_free(&got[0]);
    fx_down(&f);
}

/* A store that has no such data: create fails naming the URL and the
 * status (the first shard has neither an index nor a body). */
Test(remote, create_names_the_url_and_status_of_absent_data,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    char url[256];
    snprintf(url, sizeof url, "http://user:secret@127.0.0.1:%d/nope-{0..1}.tar",
             f.srv.port);
    pl_config c;
    remote_cfg(&f, &c, 1);
    c.data = url;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg,
             "http://127.0.0.1:%d/nope-0.tar: HTTP 404", f.srv.port);
    cr_assert(strstr(pl_last_error(), want_msg), "%s", pl_last_error());
    cr_assert_null(strstr(pl_last_error(), "secret"),
                   "credentials in the error: %s", pl_last_error());
    fx_down(&f);
}

/* pipe:COMMAND shards (WebDataset's convention): the command's output is
 * the shard, fetched whole at create to index it (no index can be asked
 * for), cached with its index, so the next create runs nothing. A command
 * that fails names its exit status. */
Test(remote, pipe_commands_give_the_local_shards_bytes, .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 1, want);
    char data[512];
    snprintf(data, sizeof data,
             "pipe:echo ran >> %s/runs; cat %s/pack/shard-{000000..%06d}.tar",
             f.dir, f.dir, RT_SHARDS - 1);
    for (int pass = 0; pass < 2; pass++) {
        pl_config c;
        remote_cfg(&f, &c, 2);
        c.data = data;
        run_loader(&c, 1, got);
        assert_same_run(&want[0], &got[0], pass ? "cached" : "through pipes");
        run_free(&got[0]);
        char runs[128];
        snprintf(runs, sizeof runs, "%s/runs", f.dir);
        char *text = tu_slurp(runs);
        int lines = 0;
        for (const char *p = text; (p = strchr(p, '\n')); p++)
            lines++;
        free(text);
        cr_assert_eq(lines, RT_SHARDS, "pass %d: the commands ran %d times",
                     pass, lines);
    }
    snprintf(data, sizeof data, "pipe:cat %s/absent-{0..1}.tar", f.dir);
    pl_config c;
    remote_cfg(&f, &c, 1);
    c.data = data;
    c.remote_retries = 1;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    cr_assert(strstr(pl_last_error(), "absent-0.tar: the command exited with "
                                      "status 1 (after 2 attempts)"),
              "%s", pl_last_error());
    run_free(&want[0]);
    fx_down(&f);
}

/* A cache_limit below the data: every member read alone with a ranged
 * request, in the exact order, the epochs complete and equal to the local
 * ones, nothing cached whole. */
Test(remote, a_cache_smaller_than_the_data_reads_members_by_range,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[2], got[2];
    local_run(&f, 2, want);
    char p[256];
    snprintf(p, sizeof p, "%s/pack/shard-000000.tar", f.dir);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    pl_config c;
    remote_cfg(&f, &c, 2);
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
    cr_assert(ranged >= 2 * RT_SAMPLES && ranged <= 2 * RT_SAMPLES + 10,
              "%d ranged requests for 2 epochs of %d", ranged, RT_SAMPLES);
    cr_assert_eq(rt_distinct_ranges(&f.srv), RT_SAMPLES,
                 "each member is one range");
    cr_assert_eq(cache_files(&f, ".tar"), 0);
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    fx_down(&f);
}

/* ---- the shard order: whole shards streamed in the rank's order ---- */

/* The bytes of the cache's shards, whole and under way. */
static int64_t cache_bytes(const fx *f)
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
static int64_t largest_shards(const fx *f, int k)
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

static void shards_cfg(pl_config *c, const char *data, int64_t window)
{
    c->data = data;
    c->order = PL_ORDER_SHARDS;
    c->shuffle_window = (int32_t)window;
}

/* PL_ORDER_SHARDS with a cache of three shards of the four (window 1: a
 * window spans one shard, and a rank holds the one it reads, the one
 * before and the one after): the local shards' bytes and order, every
 * shard fetched whole (no ranged request), at most once per epoch (and
 * the third epoch's first shards, claimed before destroy), and the cache
 * within its limit at the end. */
Test(remote, the_shard_order_streams_whole_shards_through_a_small_cache,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[2], got[2];
    pl_config c;
    base_cfg(&c, f.local);
    shards_cfg(&c, f.local, 1);
    run_loader(&c, 2, want);
    remote_cfg(&f, &c, 2);
    shards_cfg(&c, f.url, 1);
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
    cr_assert_leq(cache_files(&f, ".tar"), 3);
    cr_assert_leq(cache_bytes(&f), c.cache_limit, "%lld bytes in the cache",
                  (long long)cache_bytes(&f));
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    fx_down(&f);
}

/* PL_ORDER_SHARDS with a cache that holds the data, shuffled windows of
 * 4: each shard fetched once for both epochs (those the stream lets go
 * stay until room is wanted), and the local shards' bytes. */
Test(remote, the_shard_order_fetches_each_shard_once_when_the_cache_holds_it,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[2], got[2];
    pl_config c;
    base_cfg(&c, f.local);
    shards_cfg(&c, f.local, 4);
    run_loader(&c, 2, want);
    remote_cfg(&f, &c, 2);
    shards_cfg(&c, f.url, 4);
    c.cache_limit = largest_shards(&f, RT_SHARDS);
    run_loader(&c, 2, got);
    for (int e = 0; e < 2; e++) {
        assert_same_run(&want[e], &got[e], "streamed shards");
        run_free(&want[e]);
        run_free(&got[e]);
    }
    assert_each_shard_fetched(&f, 1);
    fx_down(&f);
}

/* Rank 1 of 4 reads one whole shard an epoch (6 samples, window 1): it
 * fetches that one, and at most the next epoch's (claimed before
 * destroy), not every shard as the global order's fetch-ahead does. */
Test(remote, a_rank_of_the_shard_order_fetches_its_own_shards,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    shards_cfg(&c, f.local, 1);
    c.rank = 1;
    c.world_size = 4;
    run_loader(&c, 1, want);
    remote_cfg(&f, &c, 2);
    shards_cfg(&c, f.url, 1);
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
    fx_down(&f);
}

/* PL_ORDER_SHARDS with a cache of two shards, fewer than the three a rank
 * holds at once: create says so, and every member is read by range, as
 * in the global order; the same bytes. */
Test(remote, a_cache_too_small_for_the_stream_falls_back_to_ranges,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    shards_cfg(&c, f.local, 1);
    run_loader(&c, 1, want);
    remote_cfg(&f, &c, 2);
    shards_cfg(&c, f.url, 1);
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
    cr_assert_eq(cache_files(&f, ".tar"), 0);
    run_free(&want[0]);
    run_free(&got[0]);
    fx_down(&f);
}

/* The first shard request in the server's log: its shard's number, or -1. */
static int first_shard_fetched(const fx *f)
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
Test(remote, a_resumed_shard_order_streams_from_the_resumed_shard,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    run want[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    shards_cfg(&lc, f.local, 1);
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
    remote_cfg(&f, &c, 2);
    shards_cfg(&c, f.url, 1);
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
    fx_down(&f);
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
    fx f;
    fx_up(&f, NULL);
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
    assert_each_shard_fetched(&f, 1);
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar.idx ", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 1, "shard %d's index", s);
    }
    fx_down(&f);
}

Test(remote, eight_ranks_of_a_node_fetch_each_shard_once, .timeout = RT_TIMEOUT)
{
    ranks_of_a_node(8, PL_ORDER_GLOBAL);
}

/* In the shard order each of two ranks reads two whole shards (24 samples,
 * window 1): each streams its own, and the node fetches each once. */
Test(remote, two_ranks_of_the_shard_order_fetch_each_shard_once,
     .timeout = RT_TIMEOUT)
{
    ranks_of_a_node(2, PL_ORDER_SHARDS);
}

/* A state saved on the local shards resumes on their URLs (a state moves
 * with a copy of the data): exactly the rest of the epoch, byte for byte. */
Test(remote, a_local_state_resumes_on_the_remote_copy, .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
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
    remote_cfg(&f, &c, 4);
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
    fx_down(&f);
}

/* Two packs through one bounded cache. While a loader reads pack A, pack
 * B finds no shard it may evict: it reads those members by range (with a
 * warning), A's shards stay. Once A's loader is gone, B's next loader
 * evicts A's shards, least recently used first, and caches its own. */
Test(remote, eviction_never_takes_a_shard_a_loader_reads, .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
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
    remote_cfg(&f, &ca, 2);
    ca.cache_limit = total + 4096; /* one pack, not two */
    pl_loader *a = create(&ca);
    run ra;
    run_epoch(a, 0, &ra); /* A's shards all cached, held by a */
    assert_same_run(&want[0], &ra, "pack A");
    run_free(&ra);
    cr_assert_eq(cache_files(&f, ".tar"), RT_SHARDS);
    rt_log g = {0};
    pl_config cb;
    remote_cfg(&f, &cb, 2);
    cb.data = url_b;
    cb.cache_limit = ca.cache_limit;
    cb.log = rt_log_fn;
    cb.log_ctx = &g;
    run_loader(&cb, 1, got);
    assert_same_run(&want[0], &got[0], "pack B beside a reader of A");
    run_free(&got[0]);
    cr_assert(strstr(g.text, "read member by member"), "%s", g.text);
    cr_assert_eq(cache_files(&f, ".tar"), RT_SHARDS, "A's shards evicted");
    cr_assert_eq(rt_count(&f.srv, "GET /b/shard-000000.tar - "), 0);
    pl_loader_destroy(a);
    run_loader(&cb, 1, got);
    assert_same_run(&want[0], &got[0], "pack B alone");
    run_free(&got[0]);
    cr_assert_eq(cache_files(&f, ".tar"), RT_SHARDS, "%d shards cached: %s",
                 cache_files(&f, ".tar"), tu_slurp(f.srv.log));
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /b/shard-%06d.tar - 200", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 1, "B's shard %d", s);
    }
    run_free(&want[0]);
    fx_down(&f);
}

/* A local list file of URLs (comments and blank lines aside) names the
 * same shards as the pattern; a line that is no URL after URLs is refused
 * naming the file and the line. */
Test(remote, a_list_file_of_urls_names_the_shards, .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    char list[128], text[1024];
    snprintf(list, sizeof list, "%s/urls.txt", f.dir);
    size_t k = (size_t)snprintf(text, sizeof text, "# the pack\n\n");
    for (int s = RT_SHARDS - 1; s >= 0; s--) /* taken in sorted order */
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "http://127.0.0.1:%d/shard-%06d.tar\n",
                              f.srv.port, s);
    tu_write_file(list, text, k);
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 1, want);
    pl_config c;
    remote_cfg(&f, &c, 2);
    c.data = list;
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "from a list of URLs");
    run_free(&want[0]);
    run_free(&got[0]);
    k += (size_t)snprintf(text + k, sizeof text - k, "local/shard.tar\n");
    tu_write_file(list, text, k);
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert(strstr(pl_last_error(), "urls.txt:7: expected a URL"), "%s",
              pl_last_error());
    fx_down(&f);
}

/* Destroy while the shards come at 4 KB/s (each takes seconds): the
 * fetcher and the workers give up at once, and no partial shard is left
 * under a shard's name. */
static void destroy_during_slow_downloads(int order)
{
    fx f;
    fx_up_at(&f, NULL, 4000);
    pl_config c;
    remote_cfg(&f, &c, 2);
    if (order == PL_ORDER_SHARDS)
        shards_cfg(&c, f.url, 1);
    pl_loader *l = create(&c);
    usleep(300 * 1000); /* the downloads are under way */
    const double t0 = tu_seconds();
    pl_loader_destroy(l);
    const double took = tu_seconds() - t0;
    cr_assert_lt(took, 1.0, "destroy took %.2f s", took);
    cr_assert_eq(cache_files(&f, ".tar"), 0);
    cr_assert_geq(rt_count(&f.srv, "GET /shard-"), RT_SHARDS + 1,
                  "no shard download had started");
    fx_down(&f);
}

Test(remote, destroy_does_not_wait_for_a_slow_download, .timeout = RT_TIMEOUT)
{
    destroy_during_slow_downloads(PL_ORDER_GLOBAL);
}

/* The same with the shard order's stream thread waiting on its band. */
Test(remote, destroy_does_not_wait_for_a_slow_streamed_shard,
     .timeout = RT_TIMEOUT)
{
    destroy_during_slow_downloads(PL_ORDER_SHARDS);
}

/* config.extras through the remote readers: the cls member of every key,
 * as stored ("k % 3\n"), whether the shards are cached whole or read by
 * range (a cache too small for them). */
Test(remote, extras_come_through_whole_and_ranged_reads, .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    for (int ranged = 0; ranged < 2; ranged++) {
        pl_config c;
        remote_cfg(&f, &c, 2);
        c.extras = "cls";
        c.cache_limit = ranged; /* one byte: nothing fits */
        pl_loader *l = create(&c);
        const pl_batch *b;
        int n = 0, rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            cr_assert_eq(b->num_extras, 1);
            cr_assert_str_eq(b->extras[0].name, "cls");
            for (int i = 0; i < b->count; i++, n++) {
                const char *path;
                cr_assert_eq(pl_loader_sample(l, b->indices[i], &path, NULL),
                             0);
                const int k = atoi(strstr(path, ":k") + 2);
                char want[16];
                snprintf(want, sizeof want, "%d\n", k % 3);
                const uint64_t *o = b->extras[0].offsets;
                cr_assert_eq(o[i + 1] - o[i], strlen(want), "%s", path);
                cr_assert(
                    memcmp(b->extras[0].data + o[i], want, strlen(want)) == 0,
                    "%s", path);
            }
            pl_loader_release(l, b, NULL);
        }
        cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
        cr_assert_eq(n, RT_SAMPLES);
        pl_loader_destroy(l);
    }
    fx_down(&f);
}

/* config.label_field reads every json member at create: local shards only,
 * remote ones refused naming the field and the shard. */
Test(remote, labels_from_json_are_refused_for_remote_shards,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up(&f, NULL);
    pl_config c;
    remote_cfg(&f, &c, 1);
    c.label_field = "label";
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.label_field"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "remote shard"), "%s",
                       pl_last_error());
    fx_down(&f);
}

#define WIN_SHARDS 150 /* three windows of indexes (remote/remote.c: 64) */

/* dir/pack/shard-%06d.tar, WIN_SHARDS shards of one JPEG and its label,
 * their .idx beside them (a local create writes them); the server on it. */
static void fx_up_many(fx *f)
{
    tu_tmpdir(f->dir);
    char p[256];
    snprintf(p, sizeof p, "%s/pack/k.jpg", f->dir);
    tu_mkdirs_for(p);
    for (int s = 0; s < WIN_SHARDS; s++) {
        tu_write_jpeg(p, 20 + s % 9, 18 + s % 7, (unsigned)s + 3, NULL);
        size_t len;
        uint8_t *jpeg = tu_read_file(p, &len);
        char shard[256], name[32], cls[8];
        snprintf(shard, sizeof shard, "%s/pack/shard-%06d.tar", f->dir, s);
        FILE *t = fopen(shard, "wb");
        cr_assert_not_null(t);
        snprintf(name, sizeof name, "%09d.jpg", s);
        cr_assert_gt(tarw_member(t, name, jpeg, len), 0);
        snprintf(name, sizeof name, "%09d.cls", s);
        const int n = snprintf(cls, sizeof cls, "%d", s % 5);
        cr_assert_gt(tarw_member(t, name, cls, (size_t)n), 0);
        cr_assert_eq(tarw_end(t), 0);
        fclose(t);
        free(jpeg);
    }
    unlink(p);
    snprintf(f->local, sizeof f->local, "%s/pack/shard-{000000..%06d}.tar",
             f->dir, WIN_SHARDS - 1);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    pl_config c;
    base_cfg(&c, f->local);
    pl_loader_destroy(create(&c)); /* writes the .idx files */
    snprintf(p, sizeof p, "%s/pack", f->dir);
    rt_start(&f->srv, f->dir, p, NULL, 0);
    snprintf(f->url, sizeof f->url,
             "http://127.0.0.1:%d/shard-{000000..%06d}.tar", f->srv.port,
             WIN_SHARDS - 1);
}

static void unlink_idx(const fx *f, int s)
{
    char p[256];
    snprintf(p, sizeof p, "%s/pack/shard-%06d.tar.idx", f->dir, s);
    cr_assert_eq(unlink(p), 0, "%s", p);
}

static int occurrences(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* Create indexes the shards a window at a time: across three windows,
 * with shards lacking an index in the second and third, the samples are
 * the local shards' in their order, the notice counts every shard without
 * one and names the first, once, and each .idx and shard is asked for
 * once. */
Test(remote, indexes_a_window_at_a_time_keep_the_order_and_one_notice,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up_many(&f);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    run_loader(&c, 1, want);
    const int missing[] = {70, 71, 140};
    for (int i = 0; i < 3; i++)
        unlink_idx(&f, missing[i]);
    rt_log g = {0};
    remote_cfg(&f, &c, 2);
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 1, got);
    cr_assert_eq(got[0].n, WIN_SHARDS);
    assert_same_run(&want[0], &got[0], "remote, three windows");
    char notice[256];
    snprintf(notice, sizeof notice,
             "3 of %d remote shard(s) have no index beside them", WIN_SHARDS);
    cr_assert(strstr(g.text, notice), "no notice: %s", g.text);
    cr_assert_eq(occurrences(g.text, "have no index beside"), 1, "%s", g.text);
    cr_assert(strstr(g.text, "first http://127.0.0.1:"), "%s", g.text);
    cr_assert(strstr(g.text, "/shard-000070.tar\n"), "%s", g.text);
    for (int s = 0; s < WIN_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar.idx ", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 1, "shard %d's index", s);
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar ", s);
        cr_assert_eq(rt_count(&f.srv, prefix), 1, "shard %d", s);
    }
    run_free(&want[0]);
    run_free(&got[0]);
    fx_down(&f);
}

/* A damaged .idx in the second window and another in the third: create
 * fails naming the first in order, before any shard is fetched whole or
 * the notice of those without an index (the first window's) is said. */
Test(remote, a_damaged_index_fails_create_naming_the_first_in_order,
     .timeout = RT_TIMEOUT)
{
    fx f;
    fx_up_many(&f);
    unlink_idx(&f, 10);
    const int damaged[] = {100, 130};
    for (int i = 0; i < 2; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar.idx", f.dir, damaged[i]);
        tu_write_file(p, "not an index", 12);
    }
    rt_log g = {0};
    pl_config c;
    remote_cfg(&f, &c, 1);
    c.log = rt_log_fn;
    c.log_ctx = &g;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECORRUPT, "%s", pl_last_error());
    cr_assert(strstr(pl_last_error(), "/shard-000100.tar.idx: not a pinload "
                                      "shard index"),
              "%s", pl_last_error());
    cr_assert_null(strstr(g.text, "have no index beside"), "%s", g.text);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000010.tar "), 0,
                 "a shard fetched whole before the indexes were all read");
    fx_down(&f);
}
