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
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO, "a certificate no CA "
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
