/* The schemes users have (issue 34): hf:// (the Hugging Face Hub's
 * datasets: their resolve URLs with HF_TOKEN as a bearer, the Hub's
 * redirect to its content host followed without the token) and gs://
 * (Google Cloud Storage's XML API, SigV4 with an HMAC key for region
 * "auto"), each against tests/remote/httpd.py answering as the service
 * does: the Hub (127.0.0.1) refuses a request without the token and sends
 * the shards to a content host on 127.0.0.2 ("another host"), which
 * refuses a request carrying an Authorization header beside its own
 * signature, as a presigned URL does; the store checks every request's
 * signature, scope and key as Cloud Storage does. Any other scheme is
 * refused at create, naming it and what to do. Each case of
 * docs/RELIABILITY.md's "Schemes users have" table is named in its
 * test. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RS_TIMEOUT 120
#define HF_SECRET "hf_pinloadTestToken123"
#define GS_KEY "GOOG1EPINLOADTESTKEY"
#define GS_SECRET "pinload-test-hmac-secret"

typedef struct sfx {
    char dir[64];
    char local[256];
    char cache[128];
    char store[128]; /* the servers' root */
} sfx;

static void sfx_up(sfx *f)
{
    tu_tmpdir(f->dir);
    rt_make_pack(f->dir);
    snprintf(f->local, sizeof f->local, "%s/pack/shard-{000000..%06d}.tar",
             f->dir, RT_SHARDS - 1);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    snprintf(f->store, sizeof f->store, "%s/store", f->dir);
}

/* store/LINK, a link to the pack (its folders made). */
static void link_pack(const sfx *f, const char *link)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p \"$(dirname %s/%s)\" && ln -s %s/pack %s/%s", f->store,
             link, f->dir, f->store, link);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void remote_cfg(const sfx *f, pl_config *c, const char *data)
{
    base_cfg(c, data);
    c->cache_dir = f->cache;
    c->remote_timeout_ms = 3000;
    c->remote_retries = -1;
    c->on_error = PL_ON_ERROR_FAIL;
}

/* One epoch of data, against the local pack's; then the same through
 * members read by Range (a cache smaller than the data). */
static void assert_reads_as_local(const sfx *f, const char *data,
                                  const char *what)
{
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f->local);
    run_loader(&c, 1, want);
    for (int ranged = 0; ranged < 2; ranged++) {
        tu_rm_rf(f->cache);
        remote_cfg(f, &c, data);
        c.cache_limit = ranged ? 1024 : 0;
        run_loader(&c, 1, got);
        cr_assert_eq(got[0].n, RT_SAMPLES, "%s", what);
        assert_same_run(&want[0], &got[0], what);
        run_free(&got[0]);
    }
    run_free(&want[0]);
}

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

/* Lines of a header log (httpd.py --header-log) holding `what`. */
static int log_lines_with(const char *path, const char *what)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, fp))
        n += strstr(line, what) != NULL;
    fclose(fp);
    return n;
}

/* ---- hf:// ---- */

/* The Hub on 127.0.0.1 (the token required; *.tar redirected, 302, to
 * the content host) and the content host on 127.0.0.2 (an Authorization
 * header refused), each logging the headers it got. */
static void hub_up(const sfx *f, rt_server *hub, rt_server *cdn,
                   char hub_log[160], char cdn_log[160])
{
    snprintf(hub_log, 160, "%s/hub.headers", f->dir);
    snprintf(cdn_log, 160, "%s/cdn.headers", f->dir);
    const char *cdn_opts[] = {"--bind",
                              "127.0.0.2",
                              "--refuse-header",
                              "Authorization",
                              "--header-log",
                              cdn_log,
                              NULL};
    rt_start_with(cdn, f->dir, "cdn", f->store, cdn_opts);
    char to[128];
    snprintf(to, sizeof to, "302:http://127.0.0.2:%d@.tar", cdn->port);
    const char *hub_opts[] = {"--require-bearer", HF_SECRET, "--redirect", to,
                              "--header-log",     hub_log,   NULL};
    rt_start_with(hub, f->dir, "hub", f->store, hub_opts);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d/", hub->port);
    setenv("HF_ENDPOINT", endpoint, 1);
}

/* hf://datasets/ORG/NAME/... read as the local pack, whole and by Range,
 * at the main revision and at @v1.0: the Hub got the token on every
 * request, the content host got the shards and never the token (it would
 * have refused them). */
Test(remote_schemes, hf_datasets_come_from_the_hub_and_its_content_host,
     .timeout = RS_TIMEOUT)
{
    sfx f;
    sfx_up(&f);
    link_pack(&f, "datasets/pinload/tiny/resolve/main");
    link_pack(&f, "datasets/pinload/tiny/resolve/v1.0");
    rt_server hub, cdn;
    char hub_log[160], cdn_log[160];
    hub_up(&f, &hub, &cdn, hub_log, cdn_log);
    setenv("HF_TOKEN", HF_SECRET, 1);
    assert_reads_as_local(
        &f, "hf://datasets/pinload/tiny/shard-{000000..000003}.tar",
        "hf:// at main");
    assert_reads_as_local(
        &f, "hf://datasets/pinload/tiny@v1.0/shard-{000000..000003}.tar",
        "hf:// at @v1.0");
    cr_assert_geq(
        rt_count(
            &hub,
            "GET /datasets/pinload/tiny/resolve/main/shard-000000.tar.idx "),
        1);
    cr_assert_geq(
        rt_count(&hub,
                 "GET /datasets/pinload/tiny/resolve/v1.0/shard-000000.tar "),
        1);
    cr_assert_geq(
        rt_count(
            &cdn,
            "GET /datasets/pinload/tiny/resolve/main/shard-000000.tar bytes="),
        1, "members by Range at the content host");
    const int asked = log_lines_with(hub_log, "GET /");
    cr_assert_gt(asked, 8);
    cr_assert_eq(log_lines_with(hub_log, "Authorization: Bearer " HF_SECRET),
                 asked, "the Hub got the token on each request");
    cr_assert_gt(log_lines_with(cdn_log, "GET /"), 8);
    cr_assert_eq(log_lines_with(cdn_log, HF_SECRET), 0,
                 "the token went to the content host");
    cr_assert_eq(log_lines_with(cdn_log, "Authorization"), 0);
    cr_assert_eq(rt_files_ending(f.cache, "-shard-000000.tar") +
                     rt_files_ending(f.cache, "-shard-000001.tar"),
                 0, "ranged mode caches no shard");
    rt_stop(&hub);
    rt_stop(&cdn);
    tu_rm_rf(f.dir);
}

/* Without HF_TOKEN the Hub answers 401: create fails saying what to set;
 * with a token, a repository path that names no file is refused as
 * such. */
Test(remote_schemes, the_hub_without_a_token_says_what_to_set,
     .timeout = RS_TIMEOUT)
{
    sfx f;
    sfx_up(&f);
    link_pack(&f, "datasets/pinload/tiny/resolve/main");
    rt_server hub, cdn;
    char hub_log[160], cdn_log[160];
    hub_up(&f, &hub, &cdn, hub_log, cdn_log);
    unsetenv("HF_TOKEN");
    pl_config c;
    remote_cfg(&f, &c, "hf://datasets/pinload/tiny/shard-{000000..000003}.tar");
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "hf://datasets/pinload/tiny/shard-000000.tar.idx: HTTP "
                   "401: the Hub refuses it: set HF_TOKEN to a token that "
                   "may read this repository");
    setenv("HF_TOKEN", "hf_wrong", 1);
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "HF_TOKEN's token may not read this repository");
    cr_assert_null(strstr(msg, "hf_wrong"), "%s", msg);
    setenv("HF_TOKEN", HF_SECRET, 1);
    remote_cfg(&f, &c, "hf://datasets/pinload/shard-000000.tar");
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "not an hf:// URL of a file "
                   "(hf://datasets/ORG/NAME[@REVISION]/PATH)");
    cr_assert_eq(rt_count(&cdn, "GET /"), 0);
    rt_stop(&hub);
    rt_stop(&cdn);
    tu_rm_rf(f.dir);
}

/* ---- gs:// ---- */

/* The store on 127.0.0.1, checking SigV4 by GS_KEY for auto/s3; its
 * endpoint and the key in the environment. */
static void gcs_up(const sfx *f, rt_server *s, char log[160])
{
    snprintf(log, 160, "%s/gcs.headers", f->dir);
    const char *opts[] = {"--sigv4", GS_KEY ":" GS_SECRET ":auto:s3",
                          "--header-log", log, NULL};
    rt_start_with(s, f->dir, "gcs", f->store, opts);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d/", s->port);
    setenv("GS_ENDPOINT_URL", endpoint, 1);
    setenv("GS_ACCESS_KEY_ID", GS_KEY, 1);
    setenv("GS_SECRET_ACCESS_KEY", GS_SECRET, 1);
}

/* gs://BUCKET/KEY read as the local pack, whole and by Range, every
 * request signed for auto/s3 with the HMAC key (the store checks each,
 * its Authorization logged); the cache's files keep the shard's name. */
Test(remote_schemes, gs_objects_are_read_signed_with_an_hmac_key,
     .timeout = RS_TIMEOUT)
{
    sfx f;
    sfx_up(&f);
    link_pack(&f, "data/train");
    rt_server gcs;
    char log[160];
    gcs_up(&f, &gcs, log);
    const char *data = "gs://data/train/shard-{000000..000003}.tar";
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    run_loader(&c, 1, want);
    remote_cfg(&f, &c, data);
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "gs:// whole");
    run_free(&got[0]);
    cr_assert_eq(rt_files_ending(f.cache, "-shard-000000.tar"), 1);
    assert_reads_as_local(&f, data, "gs://");
    run_free(&want[0]);
    const int asked = log_lines_with(log, "GET /data/train/");
    cr_assert_gt(asked, RT_SHARDS);
    cr_assert_eq(log_lines_with(log, "Credential=" GS_KEY "/"), asked);
    cr_assert_eq(log_lines_with(log, "/auto/s3/aws4_request"), asked);
    cr_assert_eq(log_lines_with(gcs.log, " 403"), 0, "a request refused");
    rt_stop(&gcs);
    tu_rm_rf(f.dir);
}

/* A wrong secret, or none: the store's 403 names the gs:// URL, never
 * the secret (the index's 403 reads as no index, as S3's does without
 * leave to list: the shard's own is the error). */
Test(remote_schemes, a_wrong_hmac_secret_is_a_403_naming_the_url,
     .timeout = RS_TIMEOUT)
{
    sfx f;
    sfx_up(&f);
    link_pack(&f, "data/train");
    rt_server gcs;
    char log[160];
    gcs_up(&f, &gcs, log);
    setenv("GS_SECRET_ACCESS_KEY", "not-the-secret", 1);
    pl_config c;
    remote_cfg(&f, &c, "gs://data/train/shard-{000000..000003}.tar");
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "gs://data/train/shard-000000.tar: HTTP 403");
    cr_assert_null(strstr(msg, "not-the-secret"), "%s", msg);
    unsetenv("GS_ACCESS_KEY_ID");
    unsetenv("GS_SECRET_ACCESS_KEY");
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EIO, "%s", msg);
    expect_in(msg, "gs://data/train/shard-000000.tar: HTTP 403");
    cr_assert_eq(log_lines_with(log, "Authorization"),
                 log_lines_with(log, "Credential=" GS_KEY "/"),
                 "the unsigned requests carried no Authorization");
    rt_stop(&gcs);
    tu_rm_rf(f.dir);
}

/* ---- other schemes ---- */

typedef struct refusal {
    const char *data;
    const char *words; /* what the message must hold */
} refusal;

static const refusal REFUSED[] = {
    {"az://container/train-{000..003}.tar",
     "az:// is not a scheme pinload reads (http://, https://, s3://, gs://, "
     "hf://, pipe:): read Azure Blob Storage through a command, as pipe:az "
     "storage blob download"},
    {"gcs://bucket/train-000.tar", "gcs:// is not a scheme pinload reads"},
    {"gcs://bucket/train-000.tar", "Google Cloud Storage is gs://BUCKET/KEY"},
    {"abfss://c@acct.dfs.core.windows.net/x.tar", "abfss:// is not a scheme"},
    {"foo://x/y.tar", "foo:// is not a scheme pinload reads"},
    {"foo://x/y.tar", "as pipe:COMMAND"},
    {"HDFS://namenode/x.tar", "pipe:hdfs dfs -cat URL"},
};

/* Each is PL_EINVAL at create naming the scheme and what to do (pipe:,
 * or the scheme pinload reads for that store), as data or as a list
 * file's line; never "no such file". */
Test(remote_schemes, other_schemes_are_refused_naming_them,
     .timeout = RS_TIMEOUT)
{
    char dir[64];
    tu_tmpdir(dir);
    for (size_t i = 0; i < sizeof REFUSED / sizeof *REFUSED; i++) {
        pl_config c;
        base_cfg(&c, REFUSED[i].data);
        char msg[2048];
        cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EINVAL, "%s: %s",
                     REFUSED[i].data, msg);
        expect_in(msg, "pl_loader_create: config.data: ");
        expect_in(msg, REFUSED[i].words);
        cr_assert_null(strstr(msg, "No such file"), "%s", msg);
    }
    char list[128];
    snprintf(list, sizeof list, "%s/urls.txt", dir);
    const char *text = "# shards\naz://container/train-000.tar\n";
    tu_write_file(list, text, strlen(text));
    pl_config c;
    base_cfg(&c, list);
    char msg[2048];
    cr_assert_eq(create_fails(&c, msg, sizeof msg), PL_EINVAL, "%s", msg);
    expect_in(msg, "urls.txt:2: az:// is not a scheme pinload reads");
    tu_rm_rf(dir);
}
