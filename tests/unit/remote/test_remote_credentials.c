/* Credentials stay with their host (issue 34): TLS verified against the
 * certificate authorities the environment names (CURL_CA_BUNDLE,
 * AWS_CA_BUNDLE); an s3:// request never follows a redirect, so its
 * session token and signature reach no other host and no unsigned answer
 * is taken for a shard; an http(s):// URL's user:password@ goes to its own
 * host alone, and a redirect from https:// never goes to http://. Every
 * server is tests/remote/httpd.py on a loopback address (127.0.0.2 being
 * "another host"), started and stopped by the test, over TLS with a CA the
 * test makes with openssl; each case of docs/RELIABILITY.md's "Credentials
 * stay with their host" table is named in its test. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RC_TIMEOUT 120

typedef struct cfx {
    char dir[64];
    char local[256];
    char cache[128];
    char ca[128];
    char tls[160];
} cfx;

/* The pack, its local run's pattern, a cache folder, and the test's CA. */
static void cfx_up(cfx *f)
{
    tu_tmpdir(f->dir);
    rt_make_pack(f->dir);
    snprintf(f->local, sizeof f->local, "%s/pack/shard-{000000..%06d}.tar",
             f->dir, RT_SHARDS - 1);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    rt_make_tls(f->dir, "");
    snprintf(f->ca, sizeof f->ca, "%s/ca.pem", f->dir);
    snprintf(f->tls, sizeof f->tls, "%s/server.pem", f->dir);
    unsetenv("CURL_CA_BUNDLE");
    unsetenv("SSL_CERT_FILE");
    unsetenv("AWS_CA_BUNDLE");
}

static void remote_cfg(const cfx *f, pl_config *c, const char *data)
{
    base_cfg(c, data);
    c->cache_dir = f->cache;
    c->remote_timeout_ms = 3000;
    c->remote_retries = -1;
    c->on_error = PL_ON_ERROR_FAIL;
}

/* One epoch of data, against the local pack's. */
static void assert_reads_as_local(const cfx *f, const char *data,
                                  const char *what)
{
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f->local);
    run_loader(&c, 1, want);
    remote_cfg(f, &c, data);
    run_loader(&c, 1, got);
    cr_assert_eq(got[0].n, RT_SAMPLES, "%s", what);
    assert_same_run(&want[0], &got[0], what);
    run_free(&want[0]);
    run_free(&got[0]);
}

/* https:// shards from a server whose certificate the test's CA signed:
 * read as the local pack once CURL_CA_BUNDLE (or SSL_CERT_FILE) names the
 * CA; without it the certificate is refused, so verification is on. */
Test(remote_credentials, tls_is_verified_against_the_ca_the_environment_names,
     .timeout = RC_TIMEOUT)
{
    cfx f;
    cfx_up(&f);
    char root[128], url[256];
    snprintf(root, sizeof root, "%s/pack", f.dir);
    rt_server srv;
    const char *opts[] = {"--tls", f.tls, NULL};
    rt_start_with(&srv, f.dir, "tls", root, opts);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/shard-{000000..%06d}.tar",
             srv.port, RT_SHARDS - 1);

    pl_config c;
    remote_cfg(&f, &c, url);
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO,
                 "a certificate no CA "
                 "the library trusts signed was accepted");
    const char *e = pl_last_error();
    cr_assert(strstr(e, "https://127.0.0.1:"), "%s", e);
    cr_assert(strstr(e, "certificate") || strstr(e, "SSL"), "%s", e);

    setenv("CURL_CA_BUNDLE", f.ca, 1);
    assert_reads_as_local(&f, url, "CURL_CA_BUNDLE");
    unsetenv("CURL_CA_BUNDLE");
    tu_rm_rf(f.cache);
    setenv("SSL_CERT_FILE", f.ca, 1);
    assert_reads_as_local(&f, url, "SSL_CERT_FILE");
    unsetenv("SSL_CERT_FILE");
    rt_stop(&srv);
    tu_rm_rf(f.dir);
}

/* ---- servers for the redirects ---- */

#define KEY_ID "AKIAPINLOADTEST0001"
#define SECRET "pinload-secret-never-sent-elsewhere"
#define TOKEN "pinload-session-token-stays-home"
#define USERINFO "pinuser:pin-secret-7"
#define USERINFO_B64 "cGludXNlcjpwaW4tc2VjcmV0LTc=" /* base64 of it */

/* dir/store/data/train: the pack where a path-style s3://data/train/...
 * request finds it. */
static void store_root(const cfx *f, char *root, size_t cap)
{
    char link[192];
    snprintf(root, cap, "%s/store", f->dir);
    snprintf(link, sizeof link, "%s/store/data/train", f->dir);
    tu_mkdirs_for(link);
    cr_assert_eq(symlink("../../pack", link), 0);
}

/* Another host: httpd.py serving root on 127.0.0.2, over TLS or not,
 * logging every request's headers to dir/other.headers. */
static void start_other(const cfx *f, rt_server *s, const char *root, int tls,
                        char *headers, size_t cap)
{
    snprintf(headers, cap, "%s/other.headers", f->dir);
    unlink(headers);
    const char *opts[] = {"--bind", "127.0.0.2",          "--header-log",
                          headers,  tls ? "--tls" : NULL, f->tls,
                          NULL};
    rt_start_with(s, f->dir, "other", root, opts);
}

/* The first host: httpd.py on 127.0.0.1 redirecting requests (those whose
 * path ends in `only`, "" for all) with `status` to `to` (a scheme, host
 * and port), adding `header` to its answers (NULL: none), logging every
 * request's headers to dir/first.headers. */
static void start_first(const cfx *f, rt_server *s, const char *root, int tls,
                        int status, const char *to, const char *only,
                        const char *header, char *headers, size_t cap)
{
    char redirect[256];
    snprintf(redirect, sizeof redirect, "%d:%s%s%s", status, to,
             *only ? "@" : "", only);
    snprintf(headers, cap, "%s/first.headers", f->dir);
    unlink(headers);
    const char *opts[12] = {"--redirect", redirect, "--header-log", headers};
    int k = 4;
    if (header) {
        opts[k++] = "--answer-header";
        opts[k++] = header;
    }
    if (tls) {
        opts[k++] = "--tls";
        opts[k++] = f->tls;
    }
    opts[k] = NULL;
    rt_start_with(s, f->dir, "first", root, opts);
}

/* The size of a file that must exist. */
static long file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    return (long)st.st_size;
}

static void expect_in(const char *text, const char *needle)
{
    cr_assert_not_null(strstr(text, needle), "no \"%s\" in:\n%s", needle, text);
}

static void expect_not_in(const char *text, const char *needle)
{
    cr_assert_null(strstr(text, needle), "\"%s\" in:\n%s", needle, text);
}

/* ---- s3:// ---- */

typedef struct s3_case {
    int tls;
    int status;
    const char *only;   /* the paths redirected: "" all, ".tar" the shards */
    int ranged;         /* cache_limit 1: every member by Range */
    const char *header; /* the redirect's extra header, or NULL */
    const char *says;   /* what the error says beside the URL */
} s3_case;

static const s3_case S3_CASES[] = {
    {0, 307, "", 0, NULL, "HTTP 307 redirects to http://127.0.0.2:"},
    {1, 307, "", 0, NULL, "HTTP 307 redirects to https://127.0.0.2:"},
    {0, 307, ".tar", 0, NULL, "HTTP 307 redirects to http://127.0.0.2:"},
    {1, 301, ".tar", 1, NULL, "HTTP 301 redirects to https://127.0.0.2:"},
    {0, 301, "", 0, "x-amz-bucket-region:eu-west-3",
     "the store says the bucket is in region eu-west-3, not us-east-1: set "
     "AWS_REGION=eu-west-3"},
};

/* Reads s3://data/train/... through the endpoint: create, and the first
 * batch when only the shards are redirected. The error into out and
 * PL_EIO, or 0 if the data was read (through the redirect). */
static int s3_read(const cfx *f, const s3_case *k, char *out, size_t cap)
{
    pl_config c;
    remote_cfg(f, &c, "s3://data/train/shard-{000000..000003}.tar");
    c.cache_limit = k->ranged ? 1 : 0;
    pl_loader *l = NULL;
    int rc = pl_loader_create(&c, &l);
    if (rc == 0 && *k->only) {
        const pl_batch *b = NULL;
        rc = pl_loader_next(l, &b);
    }
    snprintf(out, cap, "%s", rc ? pl_last_error() : "");
    pl_loader_destroy(l);
    return rc;
}

/* With a key, a secret and a session token set, s3:// at AWS_ENDPOINT_URL
 * (over TLS with the test's CA in AWS_CA_BUNDLE, or not) whose answers are
 * 307s or 301s to 127.0.0.2, where a server would serve the very shards:
 * the token went to the endpoint, and nothing at all, neither token nor
 * signature, to the other host, whose unsigned shards are not taken;
 * create, or the first batch when only the shards are redirected (whole
 * or by Range), fails naming the s3:// URL and where the redirect
 * pointed, or the region a region redirect from the endpoint named. No
 * message holds the key, the secret or the token. Before, libcurl
 * followed each redirect with x-amz-security-token and the epoch was
 * read from the other host. */
Test(remote_credentials, a_signed_s3_request_is_never_followed_to_another_host,
     .timeout = RC_TIMEOUT)
{
    cfx f;
    cfx_up(&f);
    char root[128];
    store_root(&f, root, sizeof root);
    for (size_t i = 0; i < sizeof S3_CASES / sizeof *S3_CASES; i++) {
        const s3_case *k = &S3_CASES[i];
        const char *scheme = k->tls ? "https" : "http";
        rt_server other, first;
        char other_log[160], first_log[160], to[64], endpoint[64];
        start_other(&f, &other, root, k->tls, other_log, sizeof other_log);
        snprintf(to, sizeof to, "%s://127.0.0.2:%d", scheme, other.port);
        start_first(&f, &first, root, k->tls, k->status, to, k->only, k->header,
                    first_log, sizeof first_log);
        snprintf(endpoint, sizeof endpoint, "%s://127.0.0.1:%d", scheme,
                 first.port);
        setenv("AWS_ENDPOINT_URL", endpoint, 1);
        setenv("AWS_ACCESS_KEY_ID", KEY_ID, 1);
        setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
        setenv("AWS_SESSION_TOKEN", TOKEN, 1);
        setenv("AWS_REGION", "us-east-1", 1);
        setenv("AWS_CA_BUNDLE", f.ca, 1);
        tu_rm_rf(f.cache);

        char e[2048];
        const int rc = s3_read(&f, k, e, sizeof e);
        rt_stop(&first);
        rt_stop(&other);
        cr_assert_eq(file_size(other_log), 0,
                     "case %zu: the other host was asked:\n%s", i,
                     tu_slurp(other_log));
        cr_assert_eq(rc, PL_EIO, "case %zu: read through the redirect", i);
        /* The index's URL at create, a shard's (any) at the first batch. */
        expect_in(e, *k->only ? "s3://data/train/shard-00000"
                              : "s3://data/train/shard-000000.tar.idx");
        expect_in(e, k->says);
        if (!k->header) {
            char named[64];
            snprintf(named, sizeof named, "127.0.0.2:%d", other.port);
            expect_in(e, named);
        }
        expect_not_in(e, KEY_ID);
        expect_not_in(e, SECRET);
        expect_not_in(e, TOKEN);
        char *sent = tu_slurp(first_log);
        expect_in(sent, "x-amz-security-token: " TOKEN);
        expect_in(sent, "Credential=" KEY_ID "/");
        free(sent);
    }
    tu_rm_rf(f.dir);
}

/* ---- http(s):// ---- */

typedef struct http_case {
    int tls;
    int same_address; /* redirected to another port of 127.0.0.1 */
} http_case;

/* https://user:password@127.0.0.1:P/ (and http://) redirected by a 307 to
 * 127.0.0.2, or to another port of 127.0.0.1, which serves the shards:
 * the epoch is the local pack's, and the user and password went to the
 * first host alone (libcurl sends a URL's credentials to its own scheme,
 * host and port only; pinload keeps CURLOPT_UNRESTRICTED_AUTH off). This
 * held before too: it guards the rule. */
Test(remote_credentials, an_urls_password_goes_to_its_own_host_alone,
     .timeout = RC_TIMEOUT)
{
    cfx f;
    cfx_up(&f);
    setenv("CURL_CA_BUNDLE", f.ca, 1);
    char root[128];
    snprintf(root, sizeof root, "%s/pack", f.dir);
    const http_case cases[] = {{0, 0}, {1, 0}, {1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *scheme = cases[i].tls ? "https" : "http";
        rt_server other, first;
        char other_log[160], first_log[160], to[64], url[256];
        if (cases[i].same_address) {
            snprintf(other_log, sizeof other_log, "%s/other.headers", f.dir);
            unlink(other_log);
            const char *opts[] = {"--header-log", other_log, "--tls", f.tls,
                                  NULL};
            rt_start_with(&other, f.dir, "other", root, opts);
        } else {
            start_other(&f, &other, root, cases[i].tls, other_log,
                        sizeof other_log);
        }
        snprintf(to, sizeof to, "%s://127.0.0.%d:%d", scheme,
                 cases[i].same_address ? 1 : 2, other.port);
        start_first(&f, &first, root, cases[i].tls, 307, to, "", NULL,
                    first_log, sizeof first_log);
        snprintf(url, sizeof url,
                 "%s://" USERINFO "@127.0.0.1:%d/shard-{000000..%06d}.tar",
                 scheme, first.port, RT_SHARDS - 1);
        tu_rm_rf(f.cache);
        assert_reads_as_local(&f, url, to);
        rt_stop(&first);
        rt_stop(&other);
        char *sent = tu_slurp(first_log);
        expect_in(sent, "Authorization: Basic " USERINFO_B64);
        free(sent);
        char *got = tu_slurp(other_log);
        cr_assert_gt(strlen(got), 0);
        expect_not_in(got, "Authorization");
        expect_not_in(got, USERINFO_B64);
        expect_not_in(got, "pin-secret-7");
        free(got);
    }
    tu_rm_rf(f.dir);
}

/* https://user:password@127.0.0.1:P/ redirected by a 307 to http://
 * 127.0.0.2, which serves the shards: refused (no plain-text request,
 * nothing read from the other host), create failing naming the shard's
 * URL (without the password) and where the redirect pointed. Before,
 * the epoch was read over http://. */
Test(remote_credentials, a_redirect_from_https_to_http_is_refused,
     .timeout = RC_TIMEOUT)
{
    cfx f;
    cfx_up(&f);
    setenv("CURL_CA_BUNDLE", f.ca, 1);
    char root[128];
    snprintf(root, sizeof root, "%s/pack", f.dir);
    rt_server other, first;
    char other_log[160], first_log[160], to[64], url[256], want[128];
    start_other(&f, &other, root, 0, other_log, sizeof other_log);
    snprintf(to, sizeof to, "http://127.0.0.2:%d", other.port);
    start_first(&f, &first, root, 1, 307, to, "", NULL, first_log,
                sizeof first_log);
    snprintf(url, sizeof url,
             "https://" USERINFO "@127.0.0.1:%d/shard-{000000..%06d}.tar",
             first.port, RT_SHARDS - 1);
    pl_config c;
    remote_cfg(&f, &c, url);
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO,
                 "create read through a redirect to http://");
    const char *e = pl_last_error();
    snprintf(want, sizeof want, "https://127.0.0.1:%d/shard-000000.tar",
             first.port);
    expect_in(e, want);
    snprintf(want, sizeof want,
             "HTTP 307 redirects to http://127.0.0.2:%d: refused", other.port);
    expect_in(e, want);
    expect_not_in(e, "pin-secret-7");
    rt_stop(&first);
    rt_stop(&other);
    cr_assert_eq(file_size(other_log), 0, "the http:// host was asked:\n%s",
                 tu_slurp(other_log));
    tu_rm_rf(f.dir);
}
