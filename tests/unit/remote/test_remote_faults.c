/* Remote faults named and survived (issue 34): a store that ignores Range
 * (a resume answered whole is taken from the start; ranged mode fails
 * create once, naming it), a wrong Content-Range, an oversized header and
 * a byte-per-second drip each in their own words, create's deadline, a
 * full cache disk (ranged reads instead, or create failing naming the
 * disk, and no .part left), a close that logs no failure for good files,
 * and the cache's files keeping the shard's name through a custom
 * endpoint. Every server is tests/remote/httpd.py on 127.0.0.1 with one of
 * its fault options, started and stopped by the test; the full disk is a
 * tmpfs mounted by the test (we are root, as in test_remote_safety). Each
 * case of docs/RELIABILITY.md's "Remote faults" table is named in its
 * test. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RF_TIMEOUT 120

typedef struct ffx {
    char dir[64];
    char local[256];
    char url[256];
    char cache[128];
    rt_server srv;
    int mounted;
} ffx;

/* The pack, and the server on it with httpd.py's options `opts`
 * (NULL-terminated). */
static void ffx_up(ffx *f, const char *const *opts)
{
    tu_tmpdir(f->dir);
    rt_make_pack(f->dir);
    snprintf(f->local, sizeof f->local, "%s/pack/shard-{000000..%06d}.tar",
             f->dir, RT_SHARDS - 1);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    char root[128];
    snprintf(root, sizeof root, "%s/pack", f->dir);
    rt_start_with(&f->srv, f->dir, "requests", root, opts);
    rt_url(&f->srv, f->url, sizeof f->url);
}

static void ffx_down(ffx *f)
{
    rt_stop(&f->srv);
    if (f->mounted)
        umount2(f->cache, MNT_DETACH);
    tu_rm_rf(f->dir);
}

static void remote_cfg(const ffx *f, pl_config *c)
{
    base_cfg(c, f->url);
    c->cache_dir = f->cache;
    c->remote_timeout_ms = 2000;
    c->on_error = PL_ON_ERROR_FAIL;
}

/* One epoch of c, against the local pack's. */
static void assert_reads_as_local(const ffx *f, const pl_config *c,
                                  const char *what)
{
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, f->local);
    lc.num_workers = c->num_workers;
    run_loader(&lc, 1, want);
    run_loader(c, 1, got);
    cr_assert_eq(got[0].n, RT_SAMPLES, "%s", what);
    assert_same_run(&want[0], &got[0], what);
    run_free(&want[0]);
    run_free(&got[0]);
}

/* Create fails: its status, pl_last_error's words into msg. */
static int create_fails(const pl_config *c, char *msg, size_t cap)
{
    pl_loader *l = NULL;
    const int rc = pl_loader_create(c, &l);
    snprintf(msg, cap, "%s", pl_last_error());
    if (rc == 0)
        pl_loader_destroy(l);
    return rc;
}

static void expect_in(const char *text, const char *needle)
{
    cr_assert(strstr(text, needle), "\"%s\" not in: %s", needle, text);
}

static int64_t shard_size(const ffx *f, int s)
{
    char p[256];
    snprintf(p, sizeof p, "%s/pack/shard-%06d.tar", f->dir, s);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    return st.st_size;
}

/* ---- a store that ignores Range, or answers other bytes ---- */

/* A download cut half-way is resumed with Range, and the store answers
 * 200 with the whole object: written from byte 0 as it comes (as wget
 * does), one request, not a second download of the whole. */
Test(remote_faults, a_resume_answered_whole_is_taken_from_the_start,
     .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--ignore-range", "--fault",
                          "cut:/shard-000000.tar:1", NULL};
    ffx_up(&f, opts);
    pl_config c;
    remote_cfg(&f, &c);
    assert_reads_as_local(&f, &c, "a resume answered whole");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar bytes="), 1,
                 "the resume asked for the rest");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar "), 2,
                 "%d requests for the shard: the cut one and the resume "
                 "answered whole, no third",
                 rt_count(&f.srv, "GET /shard-000000.tar "));
    cr_assert_eq(rt_files_ending(f.cache, ".part"), 0);
    ffx_down(&f);
}

/* A cache smaller than the data reads each member with a Range request:
 * a store that ignores them fails create once, naming it, after one
 * request, rather than every sample of every epoch with libcurl's "Failed
 * writing received data". */
Test(remote_faults, a_store_that_ignores_range_fails_ranged_mode_once,
     .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--ignore-range", NULL};
    ffx_up(&f, opts);
    pl_config c;
    remote_cfg(&f, &c);
    c.on_error = PL_ON_ERROR_SKIP;
    c.cache_limit = shard_size(&f, 0) * 2; /* two of the four shards */
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "the server ignores Range requests");
    expect_in(msg, "cache_limit");
    expect_in(msg, "/shard-000000.tar");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar bytes="), 1,
                 "one ranged request, not retried");
    cr_assert_eq(rt_distinct_ranges(&f.srv), 1);
    ffx_down(&f);
}

/* A 206 whose Content-Range names other bytes than asked: in ranged mode
 * create fails naming what was asked and what the store said; a whole
 * shard's resume so answered writes none of those bytes and starts again
 * from byte 0. */
Test(remote_faults, a_wrong_content_range_is_named, .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--bad-content-range", "--fault",
                          "cut:/shard-000000.tar:1", NULL};
    ffx_up(&f, opts);
    /* Whole shards: the cut download's resume is answered with bytes from
     * 0; none is written at the resume's offset, the next attempt asks
     * for the whole (this held before too: the test guards it). */
    pl_config c;
    remote_cfg(&f, &c);
    assert_reads_as_local(&f, &c, "a resume with a wrong Content-Range");
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar "), 3);
    /* Ranged mode. */
    c.cache_limit = shard_size(&f, 0) * 2;
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "a wrong Content-Range: asked for bytes from ");
    expect_in(msg, "the server's HTTP 206 says \"bytes 0-");
    ffx_down(&f);
}

/* ---- oversized headers, drips, create's deadline ---- */

/* An answer with a 200 KB header line, over libcurl's limit: named as
 * such (not libcurl's "Out of memory"), and not retried. */
Test(remote_faults, an_oversized_header_is_named_and_not_retried,
     .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--huge-header", "200000", NULL};
    ffx_up(&f, opts);
    pl_config c;
    remote_cfg(&f, &c);
    c.remote_retries = 3;
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "/shard-000000.tar.idx: an oversized header in the "
                   "server's answer, refused by libcurl");
    cr_assert_null(strstr(msg, "attempts"), "%s", msg);
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar.idx ", s);
        cr_assert_leq(rt_count(&f.srv, prefix), 1, "%s retried", prefix);
    }
    ffx_down(&f);
}

/* A store that drips 4 bytes a second never stalls (a byte comes every
 * quarter second): the transfer is cut once it has run under 1 KiB/s for
 * remote_timeout_ms, named as a drip. Before, create took the index's
 * size / 4 seconds. */
Test(remote_faults, a_drip_is_cut_and_named, .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--drip", "4", NULL};
    ffx_up(&f, opts);
    char p[256];
    snprintf(p, sizeof p, "%s/pack/shard-000000.tar.idx", f.dir);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_gt(st.st_size, 200, "an index of %lld bytes drips for %lld s",
                 (long long)st.st_size, (long long)st.st_size / 4);
    pl_config c;
    remote_cfg(&f, &c);
    c.remote_timeout_ms = 1000;
    c.remote_retries = -1;
    const double t0 = tu_seconds();
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    const double took = tu_seconds() - t0;
    cr_assert_lt(took, 8.0, "create took %.1f s", took);
    expect_in(msg, "a drip: ");
    expect_in(msg, "under 1024 bytes/s for 1 s (config.remote_timeout_ms)");
    ffx_down(&f);
}

/* An index answered 500 for ever, with 100 retries: their backoff would
 * keep create for about 8 minutes; it ends at remote_create_timeout_ms,
 * naming the shard, the last answer and the field. The deadline is
 * create's alone: after it, shards that take longer than it to come are
 * read whole. */
Test(remote_faults, create_ends_at_its_deadline, .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--fault", "500:/shard-000001.tar.idx:-1", NULL};
    ffx_up(&f, opts);
    pl_config c;
    remote_cfg(&f, &c);
    c.remote_retries = 100;
    c.remote_create_timeout_ms = 3000;
    const double t0 = tu_seconds();
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    const double took = tu_seconds() - t0;
    cr_assert(took >= 2.5 && took < 6.0, "create took %.1f s", took);
    expect_in(msg, "/shard-000001.tar.idx: HTTP 500; then create's deadline "
                   "passed (config.remote_create_timeout_ms, 3000 ms)");
    rt_stop(&f.srv);

    /* After create: 2 s of transfers at 30 KB/s, past a 1 s deadline. */
    char root[128];
    snprintf(root, sizeof root, "%s/pack", f.dir);
    rt_start(&f.srv, f.dir, root, NULL, 30000);
    rt_url(&f.srv, f.url, sizeof f.url);
    tu_rm_rf(f.cache);
    remote_cfg(&f, &c);
    c.remote_create_timeout_ms = 1000;
    int64_t total = 0;
    for (int s = 0; s < RT_SHARDS; s++)
        total += shard_size(&f, s);
    cr_assert_gt(total, 45000, "the shards take %.1f s", total / 30000.0);
    assert_reads_as_local(&f, &c, "shards read after create's deadline");
    ffx_down(&f);
}

/* ---- a full cache disk ---- */

/* The cache folder as a tmpfs of `kb` KiB (skipped where mounting is not
 * permitted), and each shard grown past it by a 300 KB member of its last
 * key (k005.pad...: a member no sample reads), its index written anew by
 * a local create. */
static void full_disk_up(ffx *f, int kb)
{
    char cmd[1024];
    for (int s = 0; s < RT_SHARDS; s++) {
        const int last = s * RT_PER_SHARD + RT_PER_SHARD - 1;
        snprintf(cmd, sizeof cmd,
                 "cd %s/stage%d && head -c 300000 /dev/urandom > k%03d.pad && "
                 "tar --format=ustar -rf ../pack/shard-%06d.tar k%03d.pad",
                 f->dir, s, last, s, last);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
    pl_config c;
    base_cfg(&c, f->local);
    pl_loader_destroy(create(&c)); /* the indexes, anew */
    cr_assert_eq(mkdir(f->cache, 0700), 0);
    char opt[64];
    snprintf(opt, sizeof opt, "size=%dk,mode=0700", kb);
    if (mount("tmpfs", f->cache, "tmpfs", 0, opt) != 0)
        cr_skip_test("mounting a tmpfs for the cache: %s (a full disk "
                     "needs one)",
                     strerror(errno));
    f->mounted = 1;
}

/* A cache on a disk with room for the indexes but no shard: each shard's
 * download stops at ENOSPC, its .part removed, and its members are read
 * by Range, one warning naming the disk; the epoch is the local pack's.
 * Before, every sample failed ("writing the cache: No space left on
 * device") and each shard's .part filled the disk. */
Test(remote_faults, a_full_cache_disk_falls_back_to_ranged_reads,
     .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    ffx_up(&f, NULL);
    full_disk_up(&f, 160);
    pl_config c;
    remote_cfg(&f, &c);
    rt_log g = {0};
    c.log = rt_log_fn;
    c.log_ctx = &g;
    assert_reads_as_local(&f, &c, "a full cache disk");
    char words[256];
    snprintf(words, sizeof words,
             "writing the cache: No space left on device; the cache's disk "
             "is full: %s has ",
             f.cache);
    expect_in(g.text, words);
    expect_in(g.text, " bytes free, the shard needs ");
    expect_in(g.text, "are read member by member");
    cr_assert_eq(rt_files_ending(f.cache, ".part"), 0, "a .part was left");
    cr_assert_eq(rt_files_ending(f.cache, ".tar"), 0);
    cr_assert_geq(rt_count(&f.srv, "GET /shard-000000.tar bytes="),
                  RT_PER_SHARD, "members read by range");
    ffx_down(&f);
}

/* Shards without an index must be fetched whole at create: on a full
 * disk create fails naming the shard, the cache's folder and its room,
 * and leaves no .part. */
Test(remote_faults, a_full_cache_disk_fails_create_naming_it,
     .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    ffx_up(&f, NULL);
    full_disk_up(&f, 160);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm %s/pack/*.idx", f.dir);
    cr_assert_eq(system(cmd), 0);
    pl_config c;
    remote_cfg(&f, &c);
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "/shard-000000.tar has no index (.idx), and fetching it "
                   "whole to index it failed: ");
    char words[256];
    snprintf(words, sizeof words,
             "No space left on device; the cache's disk is full: %s has ",
             f.cache);
    expect_in(msg, words);
    cr_assert_eq(rt_files_ending(f.cache, ".part"), 0, "a .part was left");
    ffx_down(&f);
}

/* ---- closing, and the cache's names ---- */

/* pl_loader_destroy while the workers wait for shards coming at 4 KB/s,
 * under SKIP: the reads it cuts are no file's failure, and nothing is
 * logged as skipped. Before: "skipped http://...: ... aborted by an
 * application callback" for good files. */
Test(remote_faults, closing_mid_download_logs_no_failure, .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    const char *opts[] = {"--rate", "4000", NULL};
    ffx_up(&f, opts);
    pl_config c;
    remote_cfg(&f, &c);
    c.on_error = PL_ON_ERROR_SKIP;
    rt_log g = {0};
    c.log = rt_log_fn;
    c.log_ctx = &g;
    pl_loader *l = create(&c);
    usleep(500 * 1000); /* the workers wait for their shards */
    pl_loader_destroy(l);
    cr_assert_null(strstr(g.text, "skipped"), "%s", g.text);
    cr_assert_null(strstr(g.text, "aborted"), "%s", g.text);
    cr_assert_null(strstr(g.text, "closing"), "%s", g.text);
    ffx_down(&f);
}

/* s3:// through AWS_ENDPOINT_URL (httpd.py, unsigned requests to a
 * public bucket): the cache's files are named after the shard
 * (HASH-shard-000000.tar), as for http://, not after the endpoint's
 * host and port; so eviction, which counts *.tar files, sees them. */
Test(remote_faults, cache_files_through_a_custom_endpoint_keep_the_name,
     .timeout = RF_TIMEOUT)
{
    ffx f = {0};
    tu_tmpdir(f.dir);
    rt_make_pack(f.dir);
    snprintf(f.local, sizeof f.local, "%s/pack/shard-{000000..%06d}.tar", f.dir,
             RT_SHARDS - 1);
    snprintf(f.cache, sizeof f.cache, "%s/cache", f.dir);
    char root[128], cmd[512];
    snprintf(root, sizeof root, "%s/store", f.dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/data && ln -s ../../pack %s/data/train", root, root);
    cr_assert_eq(system(cmd), 0);
    rt_start_with(&f.srv, f.dir, "requests", root, NULL);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d/", f.srv.port);
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    snprintf(f.url, sizeof f.url, "s3://data/train/shard-{000000..%06d}.tar",
             RT_SHARDS - 1);
    pl_config c;
    remote_cfg(&f, &c);
    assert_reads_as_local(&f, &c, "s3:// through an endpoint");
    for (int s = 0; s < RT_SHARDS; s++) {
        char end[64];
        snprintf(end, sizeof end, "-shard-%06d.tar", s);
        cr_assert_eq(rt_files_ending(f.cache, end), 1, "no cache file ends in %s", end);
    }
    ffx_down(&f);
}
