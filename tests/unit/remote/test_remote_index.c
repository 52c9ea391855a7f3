/* The indexes of remote shards against tests/remote/httpd.py: from the
 * shards when there is no URL.idx (said first), a window of indexes at a
 * time across three windows, a damaged one named. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "../../../tools/tarwrite.h"
#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RT_TIMEOUT 120

/* Without URL.idx beside the shards, create says first that it fetches
 * them whole, indexes them from the cache, and the next create reads the
 * indexes it kept there: no request at all. */
Test(remote_index, without_indexes_create_says_it_fetches_the_shards,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    char p[256];
    for (int s = 0; s < RT_SHARDS; s++) {
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar.idx", f.dir, s);
        cr_assert_eq(unlink(p), 0);
    }
    run want[2], got[2];
    rt_local_run(&f, 2, want); /* writes the indexes anew: removed again */
    for (int s = 0; s < RT_SHARDS; s++) {
        snprintf(p, sizeof p, "%s/pack/shard-%06d.tar.idx", f.dir, s);
        unlink(p);
    }
    rt_log g = {0};
    pl_config c;
    rt_remote_cfg(&f, &c, 2);
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 2, got);
    cr_assert(strstr(g.text, "4 of 4 remote shard(s) have no index beside "
                             "them"),
              "no notice: %s", g.text);
    for (int e = 0; e < 2; e++)
        assert_same_run(&want[e], &got[e], "indexed from the shards");
    rt_assert_each_shard_fetched(&f, 1);
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar.idx "), 1);
    const int before = rt_count(&f.srv, "GET ");
    pl_config c2;
    rt_remote_cfg(&f, &c2, 2);
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
    rt_pack_down(&f);
}

#define WIN_SHARDS 150 /* three windows of indexes (remote/remote.c: 64) */

/* dir/pack/shard-%06d.tar, WIN_SHARDS shards of one JPEG and its label,
 * their .idx beside them (a local create writes them); the server on it. */
static void fx_up_many(rt_pack *f)
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

static void unlink_idx(const rt_pack *f, int s)
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
Test(remote_index, indexes_a_window_at_a_time_keep_the_order_and_one_notice,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
    fx_up_many(&f);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    run_loader(&c, 1, want);
    const int missing[] = {70, 71, 140};
    for (int i = 0; i < 3; i++)
        unlink_idx(&f, missing[i]);
    rt_log g = {0};
    rt_remote_cfg(&f, &c, 2);
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
    rt_pack_down(&f);
}

/* A damaged .idx in the second window and another in the third: create
 * fails naming the first in order, before any shard is fetched whole or
 * the notice of those without an index (the first window's) is said. */
Test(remote_index, a_damaged_index_fails_create_naming_the_first_in_order,
     .timeout = RT_TIMEOUT)
{
    rt_pack f;
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
    rt_remote_cfg(&f, &c, 1);
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
    rt_pack_down(&f);
}
