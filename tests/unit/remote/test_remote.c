/* Remote shards over http:// (remote/remote.c) against tests/remote/httpd.py
 * on 127.0.0.1: the local shards' bytes and labels through the node cache,
 * one request per shard, atomic cache files, pipe: commands, a list file of
 * URLs, extras; and the faults: a connection cut mid-body, a stall, 500s,
 * 404s, a short body. Every server is the test's own, bounded in time. The
 * cache, the shard order and the indexes have suites of their own
 * (test_remote_cache.c, test_remote_order.c, test_remote_index.c). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RT_TIMEOUT 120

/* Two epochs, workers 1 and 4: the bytes, labels and order of the local
 * shards'; the .idx and each shard fetched exactly once, the second
 * loader served from the cache alone. */
Test(remote, http_shards_give_the_local_shards_bytes_once_per_node,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[2], got[2];
    rt_local_run(&f, 1, want);
    for (int w = 0; w < 2; w++) {
        pl_config c;
        rt_remote_cfg(&f, &c, w ? 4 : 1);
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
        rt_assert_each_shard_fetched(&f, 1);
    }
    cr_assert_eq(rt_count(&f.srv, "GET /classes.txt "), 1);
    cr_assert_eq(rt_cache_files(&f, ".tar"), RT_SHARDS);
    cr_assert_eq(rt_cache_files(&f, ".part"), 0, "a download left behind");
    /* The class names came from the store's classes.txt. */
    pl_config c;
    rt_remote_cfg(&f, &c, 1);
    pl_loader *l = create(&c);
    pl_info in = info_of(l);
    cr_assert_eq(in.num_classes, 3);
    pl_loader_destroy(l);
    for (int e = 0; e < 2; e++)
        run_free(&want[e]);
    rt_pack_down(&f);
}

/* A connection cut mid-body and a body shorter than its Content-Length:
 * the download resumes with a Range request from the bytes it has, and
 * the epoch is the local one. */
Test(remote, a_cut_or_short_body_resumes_with_range, .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"cut:/shard-000001.tar:1",
                            "short:/shard-000002.tar:2", NULL};
    rt_pack f;
    rt_pack_up(&f, faults);
    run want[2], got[2];
    rt_local_run(&f, 2, want);
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
    run_loader(&c, 2, got);
    for (int e = 0; e < 2; e++)
        assert_same_run(&want[e], &got[e], "after the faults");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000001.tar - 200"), 1);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000001.tar bytes="), 1,
                 "the cut download was not resumed with Range");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000002.tar "), 3);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000002.tar bytes="), 2);
    cr_assert_eq(rt_cache_files(&f, ".part"), 0);
    for (int e = 0; e < 2; e++) {
        run_free(&want[e]);
        run_free(&got[e]);
    }
    rt_pack_down(&f);
}

/* A stalled transfer is cut after remote_timeout_ms and resumed; 500s are
 * retried. The same bytes, in bounded time. */
Test(remote, stalls_and_500s_are_retried_to_the_same_bytes,
     .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"stall:/shard-000003.tar:1",
                            "500:/shard-000000.tar:2", NULL};
    rt_pack f;
    rt_pack_up(&f, faults);
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 1, want);
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
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
    rt_pack_down(&f);
}

/* A shard the store no longer has (404, indexed from its .idx): its
 * samples' error under the policy, naming the URL and the status; under
 * SUBSTITUTE the epoch keeps every position, the shard's as bad ones. */
Test(remote, a_missing_shard_is_its_samples_error_naming_url_and_status,
     .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"404:/shard-000002.tar:-1", NULL};
    rt_pack f;
    rt_pack_up(&f, faults);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg,
             "http://127.0.0.1:%d/shard-000002.tar: HTTP 404", f.srv.port);
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
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
    rt_remote_cfg(&f, &c, 1);
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
    rt_pack_down(&f);
}

/* 500s that do not stop: remote_retries more attempts, then the named
 * error; and a shard cut with no retry left is never taken as whole:
 * the cache keeps only its .part, which the next loader resumes. */
Test(remote, retries_run_out_and_a_partial_shard_is_never_whole,
     .timeout = RT_TIMEOUT)
{
    const char *faults[] = {"500:/shard-000001.tar:3",
                            "cut:/shard-000003.tar:1", NULL};
    rt_pack f;
    rt_pack_up(&f, faults);
    pl_config c;
    rt_remote_cfg(&f, &c, 1);
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
    cr_assert_eq(rt_cache_files(&f, ".tar"), 2, "a failed shard in the cache");
    cr_assert_eq(rt_cache_files(&f, ".part"), 2);
    /* Two more 500s for shard 1: one retry is not enough, and the reason
     * says how many attempts were made; shard 3 resumes from its .part. */
    rt_remote_cfg(&f, &c, 1);
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
    rt_remote_cfg(&f, &c, 2);
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "once the faults are spent");
    run_free(&want[0]);
    run_free(&got[0]);
    rt_pack_down(&f);
}

/* A store that has no such data: create fails naming the URL and the
 * status (the first shard has neither an index nor a body). */
Test(remote, create_names_the_url_and_status_of_absent_data,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    char url[256];
    snprintf(url, sizeof url, "http://user:secret@127.0.0.1:%d/nope-{0..1}.tar",
             f.srv.port);
    pl_config c;
    rt_remote_cfg(&f, &c, 1);
    c.data = url;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg,
             "http://127.0.0.1:%d/nope-0.tar: HTTP 404", f.srv.port);
    cr_assert(strstr(pl_last_error(), want_msg), "%s", pl_last_error());
    cr_assert_null(strstr(pl_last_error(), "secret"),
                   "credentials in the error: %s", pl_last_error());
    rt_pack_down(&f);
}

/* pipe:COMMAND shards (WebDataset's convention): the command's output is
 * the shard, fetched whole at create to index it (no index can be asked
 * for), cached with its index, so the next create runs nothing. A command
 * that fails names its exit status. */
Test(remote, pipe_commands_give_the_local_shards_bytes, .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
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
        rt_remote_cfg(&f, &c, 2);
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
    rt_remote_cfg(&f, &c, 1);
    c.data = data;
    c.remote_retries = 1;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    cr_assert(strstr(pl_last_error(), "absent-0.tar: the command exited with "
                                      "status 1 (after 2 attempts)"),
              "%s", pl_last_error());
    run_free(&want[0]);
    rt_pack_down(&f);
}

/* A local list file of URLs (comments and blank lines aside) names the
 * same shards as the pattern; a line that is no URL after URLs is refused
 * naming the file and the line. */
Test(remote, a_list_file_of_urls_names_the_shards, .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
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
    rt_remote_cfg(&f, &c, 2);
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
    rt_pack_down(&f);
}

/* config.extras through the remote readers: the cls member of every key,
 * as stored ("k % 3\n"), whether the shards are cached whole or read by
 * range (a cache too small for them). */
Test(remote, extras_come_through_whole_and_ranged_reads, .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    for (int ranged = 0; ranged < 2; ranged++) {
        pl_config c;
        rt_remote_cfg(&f, &c, 2);
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
    rt_pack_down(&f);
}

/* config.label_field reads every json member at create: local shards only,
 * remote ones refused naming the field and the shard. */
Test(remote, labels_from_json_are_refused_for_remote_shards,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    pl_config c;
    rt_remote_cfg(&f, &c, 1);
    c.label_field = "label";
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.label_field"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "remote shard"), "%s",
                       pl_last_error());
    rt_pack_down(&f);
}
