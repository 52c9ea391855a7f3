/* s3:// shards (input/remote.c) against moto's S3 server on 127.0.0.1
 * (tests/remote/s3d.py, authentication on): requests signed with SigV4
 * from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, path-style at
 * AWS_ENDPOINT_URL; the local shards' bytes and labels; a wrong secret is
 * a 403 naming the s3:// URL, never the secret. moto comes from the
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
    int port;
    pid_t pid;
} s3fx;

static void s3_up(s3fx *f)
{
    char py[300];
    if (!moto_python(py, sizeof py))
        cr_skip_test("moto[server] could not be installed from the package "
                     "index into %s/moto-venv: skipping the S3 suite",
                     tu_build_dir());
    tu_tmpdir(f->dir);
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
        execl(py, py, "tests/remote/s3d.py", "--root", root, "--bucket", "data",
              "--prefix", "train", "--port-file", port_file, "--keys", keys,
              "--lifetime", "280", (char *)NULL);
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
    cr_assert_eq(fscanf(k, "%127s %127s", f->key, f->secret), 2);
    fclose(k);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d/", f->port);
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", f->key, 1);
    setenv("AWS_SECRET_ACCESS_KEY", f->secret, 1);
    setenv("AWS_REGION", "us-east-1", 1);
    unsetenv("AWS_SESSION_TOKEN");
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
