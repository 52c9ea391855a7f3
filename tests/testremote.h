/* The remote suites' fixture: a pack of tar shards with their indexes, and
 * tests/remote/httpd.py serving it on 127.0.0.1 (started and stopped by
 * the test, with a lifetime of its own), its request log counted; the two
 * together (rt_pack) with a node cache's folder.
 * Header-only, like testutil.h. */
#ifndef PINLOAD_TESTREMOTE_H
#define PINLOAD_TESTREMOTE_H

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinload.h"
#include "testloader.h"
#include "testutil.h"

#define RT_SHARDS 4
#define RT_PER_SHARD 6
#define RT_SAMPLES (RT_SHARDS * RT_PER_SHARD)

typedef struct rt_server {
    pid_t pid;
    int port;
    char log[160];
} rt_server;

/* dir/pack/shard-00000K.tar (RT_SHARDS of RT_PER_SHARD JPEGs of varied
 * sizes, labels 0-2 as .cls) with classes.txt; then a local create that
 * writes each shard's .idx beside it, as a user's first local read does. */
static inline void rt_make_pack(const char *dir)
{
    char p[256], cmd[512];
    for (int s = 0; s < RT_SHARDS; s++) {
        for (int i = 0; i < RT_PER_SHARD; i++) {
            const int k = s * RT_PER_SHARD + i;
            snprintf(p, sizeof p, "%s/stage%d/k%03d.jpg", dir, s, k);
            tu_mkdirs_for(p);
            tu_write_jpeg(p, 30 + (k % 7) * 9, 28 + (k % 5) * 13,
                          (unsigned)k + 11, NULL);
            snprintf(p, sizeof p, "%s/stage%d/k%03d.cls", dir, s, k);
            char label[8];
            snprintf(label, sizeof label, "%d\n", k % 3);
            tu_write_file(p, label, strlen(label));
        }
        snprintf(cmd, sizeof cmd,
                 "mkdir -p %s/pack && cd %s/stage%d && tar --format=ustar "
                 "-cf ../pack/shard-%06d.tar $(ls | sort)",
                 dir, dir, s, s);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
    snprintf(p, sizeof p, "%s/pack/classes.txt", dir);
    tu_write_file(p, "cat\ndog\nowl\n", 12);
    /* The first local create writes the indexes beside the shards. */
    char data[256];
    snprintf(data, sizeof data, "%s/pack/shard-{000000..%06d}.tar", dir,
             RT_SHARDS - 1);
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l = create(&c);
    pl_loader_destroy(l);
    snprintf(p, sizeof p, "%s/pack/shard-000000.tar.idx", dir);
    cr_assert_eq(access(p, F_OK), 0, "the local create wrote no index");
}

/* The server on root, its port in dir/TAG.port and its log in
 * dir/TAG.log, with more of httpd.py's options (NULL-terminated, at most
 * 20: faults, a rate, --bind, --tls, --redirect...). */
static inline void rt_start_with(rt_server *s, const char *dir, const char *tag,
                                 const char *root, const char *const *opts)
{
    char port_file[160];
    snprintf(port_file, sizeof port_file, "%s/%s.port", dir, tag);
    snprintf(s->log, sizeof s->log, "%s/%s.log", dir, tag);
    unlink(port_file);
    unlink(s->log);
    const char *argv[32] = {"python3",     "tests/remote/httpd.py",
                            "--root",      root,
                            "--port-file", port_file,
                            "--log",       s->log,
                            "--lifetime",  "200"};
    int k = 10;
    for (int i = 0; opts && opts[i] && k < 31; i++)
        argv[k++] = opts[i];
    argv[k] = NULL;
    s->pid = fork();
    cr_assert_geq(s->pid, 0);
    if (s->pid == 0) {
        /* Dies with the test, even one that fails an assertion. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            close(null);
        }
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    for (int t = 0; t < 1000; t++) { /* 10 s at most */
        FILE *f = fopen(port_file, "r");
        if (f) {
            const int got = fscanf(f, "%d", &s->port);
            fclose(f);
            if (got == 1)
                return;
        }
        int st;
        cr_assert_eq(waitpid(s->pid, &st, WNOHANG), 0,
                     "tests/remote/httpd.py exited before it listened");
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    cr_assert(0, "tests/remote/httpd.py did not listen within 10 s");
}

/* The server on root, with faults ("KIND:SUBSTR:COUNT", NULL-terminated;
 * httpd.py says which) and a rate in bytes/s (0: none). */
static inline void rt_start(rt_server *s, const char *dir, const char *root,
                            const char *const *faults, double rate)
{
    char rate_s[32];
    snprintf(rate_s, sizeof rate_s, "%.0f", rate);
    const char *opts[24] = {"--rate", rate_s};
    int k = 2;
    for (int i = 0; faults && faults[i] && k < 22; i++) {
        opts[k++] = "--fault";
        opts[k++] = faults[i];
    }
    opts[k] = NULL;
    rt_start_with(s, dir, "requests", root, opts);
}

/* A certificate authority made for the test and a server certificate it
 * signed for 127.0.0.1, 127.0.0.2 and the names in `dns` (comma-separated
 * subjectAltName entries such as "DNS:x.example", or ""), by openssl:
 * dir/ca.pem (what a client trusts) and dir/server.pem (certificate and
 * key, what tests/remote/httpd.py --tls serves). Nothing of it is kept
 * beyond the test's folder. */
static inline void rt_make_tls(const char *dir, const char *dns)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && printf 'subjectAltName=IP:127.0.0.1,IP:127.0.0.2%s%s\n"
             "basicConstraints=CA:FALSE\n' > san.ext && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
             "-nodes -keyout ca.key -out ca.pem -days 2 "
             "-subj /CN=pinload-test-ca >/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
             "-keyout server.key -out server.csr -subj /CN=127.0.0.1 "
             ">/dev/null 2>&1 && "
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
             "-CAcreateserial -out server.crt -days 2 -extfile san.ext "
             ">/dev/null 2>&1 && cat server.crt server.key > server.pem",
             dir, dns && *dns ? "," : "", dns ? dns : "");
    cr_assert_eq(system(cmd), 0, "openssl could not make the test's CA: %s",
                 cmd);
}

static inline void rt_stop(rt_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* Requests logged whose line starts with `prefix` ("GET /shard-000001.tar
 * " counts that shard's requests, ranged or not). */
static inline int rt_count(const rt_server *s, const char *prefix)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    fclose(f);
    return n;
}

/* Distinct ranged requests (path and range) in the log. */
static inline int rt_distinct_ranges(const rt_server *s)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return 0;
    char line[512], seen[256][128];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, " bytes="))
            continue;
        line[strcspn(line, "\n")] = '\0';
        int dup = 0;
        for (int i = 0; i < n && !dup; i++)
            dup = strncmp(seen[i], line, 127) == 0;
        if (!dup && n < 256)
            snprintf(seen[n++], 128, "%.127s", line);
    }
    fclose(f);
    return n;
}

/* "http://127.0.0.1:PORT/shard-{000000..00000N}.tar" into out. */
static inline void rt_url(const rt_server *s, char *out, size_t cap)
{
    snprintf(out, cap, "http://127.0.0.1:%d/shard-{000000..%06d}.tar", s->port,
             RT_SHARDS - 1);
}

/* The messages a loader logs, kept for a test to look into. */
typedef struct rt_log {
    char text[16384];
    size_t len;
} rt_log;

static inline void rt_log_fn(void *ctx, pl_log_level level, const char *msg)
{
    (void)level;
    rt_log *g = ctx;
    const int k =
        snprintf(g->text + g->len, sizeof g->text - g->len, "%s\n", msg);
    if (k > 0 && g->len + (size_t)k < sizeof g->text)
        g->len += (size_t)k;
}

/* ---- a pack served over http:// ---- */

/* The pack (rt_make_pack) in a folder of its own and tests/remote/httpd.py
 * serving it: the local shards' pattern, the same shards' URLs, and a
 * node cache's folder beside them. */
typedef struct rt_pack {
    char dir[64];
    char local[256];
    char url[256];
    char cache[128];
    rt_server srv;
} rt_pack;

/* The pack made and served with faults (NULL-terminated, as rt_start
 * takes them) at `rate` bytes/s (0: no limit). */
static inline void rt_pack_up_at(rt_pack *f, const char *const *faults,
                                 double rate)
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

static inline void rt_pack_up(rt_pack *f, const char *const *faults)
{
    rt_pack_up_at(f, faults, 0);
}

static inline void rt_pack_down(rt_pack *f)
{
    rt_stop(&f->srv);
    tu_rm_rf(f->dir);
}

/* A loader of f's URLs through its cache that fails on the first error. */
static inline void rt_remote_cfg(const rt_pack *f, pl_config *c, int workers)
{
    base_cfg(c, f->url);
    c->cache_dir = f->cache;
    c->num_workers = workers;
    c->remote_timeout_ms = 2000;
    c->on_error = PL_ON_ERROR_FAIL;
}

/* Two epochs of the local shards. */
static inline void rt_local_run(const rt_pack *f, int workers, run *out)
{
    pl_config c;
    base_cfg(&c, f->local);
    c.num_workers = workers;
    run_loader(&c, 2, out);
}

/* Files in the folder `dir` whose names end in `suffix`. */
static inline int rt_files_ending(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
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

/* Files in the cache whose names end in `suffix`. */
static inline int rt_cache_files(const rt_pack *f, const char *suffix)
{
    return rt_files_ending(f->cache, suffix);
}

/* Each shard asked for `times` times in the server's log, whole or by
 * range. */
static inline void rt_assert_each_shard_fetched(const rt_pack *f, int times)
{
    for (int s = 0; s < RT_SHARDS; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "GET /shard-%06d.tar ", s);
        cr_assert_eq(rt_count(&f->srv, prefix), times,
                     "shard %d: %d requests, want %d", s,
                     rt_count(&f->srv, prefix), times);
    }
}

/* The shard order (PL_ORDER_SHARDS) of data, shuffled in windows of
 * `window`. */
static inline void rt_shard_order(pl_config *c, const char *data,
                                  int64_t window)
{
    c->data = data;
    c->order = PL_ORDER_SHARDS;
    c->shuffle_window = (int32_t)window;
}

#endif
