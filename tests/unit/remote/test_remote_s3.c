/* s3:// shards (remote/remote.c) against moto's S3 server on 127.0.0.1
 * (tests/remote/s3d.py, authentication on): requests signed with SigV4
 * from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, path-style at
 * AWS_ENDPOINT_URL; the local shards' bytes and labels; a wrong secret is
 * a 403 naming the s3:// URL, never the secret. Then AWS's own endpoints,
 * stood in for by s3d.py's HTTPS proxy in front of moto: S3's region
 * redirect asked again of the region's endpoint, signed anew for it with
 * an STS session's token, and a region answer that names no region not
 * followed (issue 34). moto comes from the
 * package index into a virtual environment made once in
 * $PINLOAD_BUILD/moto-venv; where it cannot be installed the suite skips,
 * saying so. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define S3_TIMEOUT 300

/* The venv's python with moto, made if missing; NULL if it cannot be. */
static const char *moto_python(char *out, size_t cap)
{
    char venv[256], cmd[1024];
    snprintf(venv, sizeof venv, "%s/moto-venv", tu_build_dir());
    snprintf(out, cap, "%s/bin/python", venv);
    snprintf(cmd, sizeof cmd, "%s -c 'import moto.server, boto3' 2>/dev/null",
             out);
    if (system(cmd) == 0)
        return out;
    snprintf(cmd, sizeof cmd,
             "(python3 -m venv %s && timeout 240 %s/bin/pip install -q "
             "'moto[server]') >/dev/null 2>&1",
             venv, venv);
    if (system(cmd) != 0)
        return NULL;
    snprintf(cmd, sizeof cmd, "%s -c 'import moto.server, boto3' 2>/dev/null",
             out);
    return system(cmd) == 0 ? out : NULL;
}

typedef struct s3fx {
    char dir[64];
    char local[256];
    char cache[128];
    char key[128], secret[128];
    char token[2048]; /* with s3d.py --session; else "" */
    int port;
    pid_t pid;
} s3fx;

/* moto on the pack, f->dir made; `more`: more of s3d.py's options
 * (NULL-terminated, at most 16), whose files may lie in f->dir. */
static void s3_up_with(s3fx *f, const char *const *more)
{
    char py[300];
    if (!moto_python(py, sizeof py))
        cr_skip_test("moto[server] could not be installed from the package "
                     "index into %s/moto-venv: skipping the S3 suite",
                     tu_build_dir());
    rt_make_pack(f->dir);
    snprintf(f->local, sizeof f->local, "%s/pack/shard-{000000..%06d}.tar",
             f->dir, RT_SHARDS - 1);
    snprintf(f->cache, sizeof f->cache, "%s/cache", f->dir);
    char root[128], port_file[128], keys[128];
    snprintf(root, sizeof root, "%s/pack", f->dir);
    snprintf(port_file, sizeof port_file, "%s/port", f->dir);
    snprintf(keys, sizeof keys, "%s/keys", f->dir);
    f->pid = fork();
    cr_assert_geq(f->pid, 0);
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        const char *argv[32] = {py,
                                "tests/remote/s3d.py",
                                "--root",
                                root,
                                "--bucket",
                                "data",
                                "--prefix",
                                "train",
                                "--port-file",
                                port_file,
                                "--keys",
                                keys,
                                "--lifetime",
                                "280"};
        int n = 14;
        for (int i = 0; more && more[i] && n < 31; i++)
            argv[n++] = more[i];
        argv[n] = NULL;
        execv(py, (char *const *)argv);
        _exit(127);
    }
    for (int t = 0; t < 6000; t++) { /* 60 s: moto takes seconds to load */
        FILE *p = fopen(port_file, "r");
        if (p) {
            const int got = fscanf(p, "%d", &f->port);
            fclose(p);
            if (got == 1)
                break;
        }
        int st;
        cr_assert_eq(waitpid(f->pid, &st, WNOHANG), 0,
                     "tests/remote/s3d.py exited before it listened");
        usleep(10000);
    }
    cr_assert_gt(f->port, 0, "moto did not listen within 60 s");
    FILE *k = fopen(keys, "r");
    cr_assert_not_null(k);
    cr_assert_geq(fscanf(k, "%127s %127s %2047s", f->key, f->secret, f->token),
                  2);
    fclose(k);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d/", f->port);
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", f->key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", f->secret, 1);
    setenv("AWS_REGION", "us-east-1", 1);
    unsetenv("AWS_SESSION_TOKEN");
}

static void s3_up(s3fx *f)
{
    tu_tmpdir(f->dir);
    s3_up_with(f, NULL);
}

static void s3_down(s3fx *f)
{
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
    tu_rm_rf(f->dir);
}

#define S3_DATA "s3://data/train/shard-{000000..000003}.tar"

/* Signed requests, path-style at the endpoint: the local shards' bytes
 * and labels for workers 1 and 4, over two epochs; the secret in no
 * message. */
Test(remote_s3, s3_shards_give_the_local_shards_bytes, .timeout = S3_TIMEOUT)
{
    s3fx f = {0};
    s3_up(&f);
    run want[2], got[2];
    pl_config lc;
    base_cfg(&lc, f.local);
    run_loader(&lc, 2, want);
    for (int w = 0; w < 2; w++) {
        rt_log g = {0};
        pl_config c;
        base_cfg(&c, S3_DATA);
        c.cache_dir = f.cache;
        c.num_workers = w ? 4 : 1;
        c.on_error = PL_ON_ERROR_FAIL;
        c.log = rt_log_fn;
        c.log_ctx = &g;
        run_loader(&c, 2, got);
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(got[e].n, RT_SAMPLES);
            assert_same_run(&want[e], &got[e], w ? "workers 4" : "workers 1");
            run_free(&got[e]);
        }
        cr_assert(strstr(g.text, "4 remote shard(s)"), "%s", g.text);
        cr_assert_null(strstr(g.text, "have no index"),
                       "indexed from the shards, not the .idx: %s", g.text);
        cr_assert_null(strstr(g.text, f.secret));
        cr_assert_null(strstr(g.text, f.key));
    }
    /* Whole-shard reads, then ranged ones: the exact order either way. */
    pl_config c;
    base_cfg(&c, S3_DATA);
    c.cache_dir = f.cache;
    c.cache_limit = 1; /* below any shard: members by Range */
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "ranged S3 reads");
    run_free(&got[0]);
    for (int e = 0; e < 2; e++)
        run_free(&want[e]);
    s3_down(&f);
}

/* A wrong secret: moto answers 403; create fails naming the s3:// URL and
 * the status, and neither the key's secret nor the wrong one. */
Test(remote_s3, a_wrong_secret_is_a_403_naming_the_url_alone,
     .timeout = S3_TIMEOUT)
{
    s3fx f = {0};
    s3_up(&f);
    setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-at-all", 1);
    pl_config c;
    base_cfg(&c, S3_DATA);
    c.cache_dir = f.cache;
    c.remote_retries = -1;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    const char *e = pl_last_error();
    cr_assert(strstr(e, "s3://data/train/shard-000000.tar: HTTP 403"), "%s", e);
    cr_assert_null(strstr(e, "not-the-secret"), "%s", e);
    cr_assert_null(strstr(e, f.secret), "%s", e);
    s3_down(&f);
}

/* ---- a region redirect at AWS ---- */

/* Lines of the proxy's log starting with `prefix`. */
static int proxy_count(const char *log, const char *prefix)
{
    rt_server s = {0};
    snprintf(s.log, sizeof s.log, "%s", log);
    return rt_count(&s, prefix);
}

/* moto standing in for AWS (no AWS_ENDPOINT_URL: the URLs are AWS's
 * virtual-hosted ones), reached through s3d.py's proxy (https_proxy),
 * which answers for *.s3.REGION.amazonaws.com over TLS with the test's CA
 * (AWS_CA_BUNDLE); each bucket of `answers` ("BUCKET=REGION", or
 * "BUCKET=400:REGION"; NULL-terminated, at most 3) answers from us-east-1
 * with S3's region redirect (its Location at 127.0.0.2), or its 400 to a
 * request signed for the wrong region. The proxy's log into log[cap]. */
static void aws_up(s3fx *f, const char *const *answers, char *log, size_t cap)
{
    tu_tmpdir(f->dir);
    rt_make_tls(f->dir, "DNS:*.s3.us-east-1.amazonaws.com,"
                        "DNS:*.s3.us-west-2.amazonaws.com");
    char cert[128], port_file[128];
    snprintf(cert, sizeof cert, "%s/server.pem", f->dir);
    snprintf(port_file, sizeof port_file, "%s/proxy.port", f->dir);
    snprintf(log, cap, "%s/proxy.log", f->dir);
    const char *more[16] = {
        "--proxy-port-file", port_file, "--proxy-cert", cert,
        "--proxy-log",       log,       "--lure",       "https://127.0.0.2:9",
        "--session"};
    int n = 9;
    for (int i = 0; answers[i] && n < 14; i++) {
        more[n++] = "--region-answer";
        more[n++] = answers[i];
    }
    more[n] = NULL;
    s3_up_with(f, more);
    int port = 0;
    FILE *p = fopen(port_file, "r");
    cr_assert_not_null(p, "s3d.py wrote no proxy port");
    cr_assert_eq(fscanf(p, "%d", &port), 1);
    fclose(p);
    char proxy[64], ca[128];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", port);
    snprintf(ca, sizeof ca, "%s/ca.pem", f->dir);
    setenv("https_proxy", proxy, 1);
    unsetenv("HTTPS_PROXY");
    unsetenv("ALL_PROXY");
    unsetenv("all_proxy");
    unsetenv("NO_PROXY");
    unsetenv("no_proxy");
    unsetenv("AWS_ENDPOINT_URL");
    setenv("AWS_CA_BUNDLE", ca, 1);
    cr_assert_gt(strlen(f->token), 0, "s3d.py --session wrote no token");
    setenv("AWS_SESSION_TOKEN", f->token, 1);
}

/* Stops moto and its proxy, keeping f->dir (the proxy's log). */
static void aws_stop(s3fx *f)
{
    kill(f->pid, SIGKILL);
    waitpid(f->pid, NULL, 0);
}

/* Every request the proxy logged at `host_get` ("HOST GET ") was signed
 * for us-west-2 with f's token, and moto took both: their count. */
static int signed_for_west(const s3fx *f, const char *log, const char *host_get)
{
    char want[2100], line[4096];
    snprintf(want, sizeof want, " scope=us-west-2 token=%s\n", f->token);
    FILE *in = fopen(log, "r");
    cr_assert_not_null(in);
    int n = 0;
    while (fgets(line, sizeof line, in)) {
        if (strncmp(line, host_get, strlen(host_get)) != 0)
            continue;
        cr_assert(strstr(line, want), "%s", line);
        cr_assert(strstr(line, " 200 ") || strstr(line, " 206 "), "%s", line);
        n++;
    }
    fclose(in);
    return n;
}

/* The shards' requests (not their indexes') at us-east-1's endpoint. */
static int east_shard_gets(const char *log)
{
    int n = 0;
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[128];
        snprintf(prefix, sizeof prefix,
                 "data.s3.us-east-1.amazonaws.com GET /train/shard-%06d.tar ",
                 s);
        n += proxy_count(log, prefix);
    }
    return n;
}

/* A bucket in us-west-2 read with AWS_REGION us-east-1, a session token
 * set: us-east-1's endpoint answers S3's region redirect (a 301 whose
 * x-amz-bucket-region says us-west-2, its Location at 127.0.0.2; or a 400
 * whose body names the region), and pinload asks us-west-2's endpoint,
 * which it makes from the region's name, signed anew for us-west-2 (moto
 * checks the signature; the proxy logs its scope), as botocore does: the
 * epoch is the local pack's, whole and by Range. The Location's host is
 * never asked; the token goes to AWS's endpoints alone; the bucket's
 * region is remembered by the loader that met the redirect. Before, the 301 was
 * followed to the Location (with the token), and the 400 failed create. */
Test(remote_s3, a_region_redirect_is_signed_anew_for_the_regional_endpoint,
     .timeout = S3_TIMEOUT)
{
    const char *forms[] = {"data=us-west-2", "data=400:us-west-2"};
    for (int form = 0; form < 2; form++) {
        s3fx f = {0};
        char log[160];
        const char *answers[] = {forms[form], NULL};
        aws_up(&f, answers, log, sizeof log);
        run want[1], got[1];
        pl_config lc;
        base_cfg(&lc, f.local);
        run_loader(&lc, 1, want);
        for (int ranged = 0; ranged < 2; ranged++) {
            rt_log g = {0};
            pl_config c;
            base_cfg(&c, S3_DATA);
            c.cache_dir = f.cache;
            c.cache_limit = ranged ? 1 : 0;
            c.on_error = PL_ON_ERROR_FAIL;
            c.log = rt_log_fn;
            c.log_ctx = &g;
            run_loader(&c, 1, got);
            assert_same_run(&want[0], &got[0], forms[form]);
            run_free(&got[0]);
            cr_assert_null(strstr(g.text, f.token), "%s", g.text);
            cr_assert_null(strstr(g.text, f.secret), "%s", g.text);
            /* The region is remembered for the bucket: in the first
             * loader, placed by create's index requests, no shard is
             * asked of us-east-1; in the second (its indexes cached), at
             * most each worker's first read. */
            cr_assert_leq(east_shard_gets(log), ranged ? c.num_workers : 0,
                          "%s", tu_slurp(log));
        }
        run_free(&want[0]);
        aws_stop(&f);
        char *text = tu_slurp(log);
        const char *east = "data.s3.us-east-1.amazonaws.com GET ";
        const char *west = "data.s3.us-west-2.amazonaws.com GET ";
        cr_assert_gt(proxy_count(log, east), 0, "no region redirect:\n%s",
                     text);
        cr_assert_gt(signed_for_west(&f, log, west), RT_SHARDS, "%s", text);
        cr_assert_eq(proxy_count(log, "CONNECT data.s3.us-east-1.amazonaws.com"
                                      ":443") +
                         proxy_count(log, "CONNECT data.s3.us-west-2."
                                          "amazonaws.com:443"),
                     proxy_count(log, "CONNECT "),
                     "a CONNECT elsewhere than AWS's endpoints:\n%s", text);
        free(text);
        tu_rm_rf(f.dir);
    }
}

/* A region redirect whose x-amz-bucket-region is not a region's name (an
 * address, a host, a path) is not followed, neither to a host made from
 * it nor to its Location: create fails naming the s3:// URL and the
 * Location's host, and the proxy saw a CONNECT to us-east-1's endpoint
 * alone. */
Test(remote_s3, a_region_redirect_naming_no_region_is_not_followed,
     .timeout = S3_TIMEOUT)
{
    s3fx f = {0};
    char log[160];
    const char *answers[] = {"evil1=127.0.0.2", "evil2=us-west-2.evil.example",
                             "evil3=us-west-2/../x", NULL};
    aws_up(&f, answers, log, sizeof log);
    for (int i = 1; i <= 3; i++) {
        char data[96], want[192];
        snprintf(data, sizeof data, "s3://evil%d/train/shard-000000.tar", i);
        pl_config c;
        base_cfg(&c, data);
        c.cache_dir = f.cache;
        c.remote_retries = -1;
        pl_loader *l = NULL;
        cr_assert_eq(pl_loader_create(&c, &l), PL_EIO, "%s", answers[i - 1]);
        const char *e = pl_last_error();
        snprintf(want, sizeof want,
                 "%s.idx: HTTP 301 redirects to "
                 "https://127.0.0.2:9: not followed",
                 data);
        cr_assert(strstr(e, want), "%s", e);
        cr_assert_null(strstr(e, f.token), "%s", e);
    }
    aws_stop(&f);
    char *text = tu_slurp(log);
    int east = 0;
    for (int i = 1; i <= 3; i++) {
        char connect[96];
        snprintf(connect, sizeof connect,
                 "CONNECT evil%d.s3.us-east-1.amazonaws.com:443", i);
        east += proxy_count(log, connect);
    }
    cr_assert_gt(east, 0, "%s", text);
    cr_assert_eq(east, proxy_count(log, "CONNECT "), "%s", text);
    free(text);
    tu_rm_rf(f.dir);
}
