/* What the test_loader_*.c suites share: a log callback that counts, the
 * fixtures (trees, flat folders, bad files), the base configuration and
 * the fixture helper (fx_tree / fx_flat ... fx_done). The suites test the
 * public loader API; `make test` runs them on the host backend and again on
 * simulated CUDA (PINLOAD_TEST_DEVICE=cuda): the same expectations hold on
 * both. */
#ifndef PINLOAD_TESTLOADER_H
#define PINLOAD_TESTLOADER_H

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "pinload.h"
#include "testcuda.h"
#include "testrun.h"
#include "testutil.h"

#define TIMEOUT 120

/* ---- logging ---- */

/* Counts messages by level and keeps the warnings; called from the
 * loader's threads. */
typedef struct log_count {
    pthread_mutex_t mu;
    int notices, warnings;
    char warning[16][1024];
} log_count;

static inline void counting(void *ctx, pl_log_level level, const char *msg)
{
    log_count *c = ctx;
    pthread_mutex_lock(&c->mu);
    if (level == PL_LOG_WARNING) {
        if (c->warnings < 16)
            snprintf(c->warning[c->warnings], sizeof c->warning[0], "%s", msg);
        c->warnings++;
    } else {
        c->notices++;
    }
    pthread_mutex_unlock(&c->mu);
}

static inline void log_count_init(log_count *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

/* The notices holding `want` ("num_workers PL_AUTO"), counted and the last
 * kept; called from the loader's threads. */
typedef struct notice_log {
    pthread_mutex_t mu;
    const char *want;
    int said;
    char last[512];
} notice_log;

static inline void notice_log_init(notice_log *a, const char *want)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->want = want;
}

static inline void count_notice(void *ctx, pl_log_level level, const char *msg)
{
    notice_log *a = ctx;
    if (level != PL_LOG_NOTICE || !strstr(msg, a->want))
        return;
    pthread_mutex_lock(&a->mu);
    a->said++;
    snprintf(a->last, sizeof a->last, "%s", msg);
    pthread_mutex_unlock(&a->mu);
}

static inline int notices_said(notice_log *a)
{
    pthread_mutex_lock(&a->mu);
    const int n = a->said;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static inline void nap_ms(int ms)
{
    const struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Batches for up to `seconds`, napping step_ms after each (a training
 * step), until a notice came (with a step) or time ran out: pl_stats
 * after. */
static inline pl_stats run_steps(pl_loader *l, int step_ms, double seconds,
                                 notice_log *a)
{
    const double t0 = tu_seconds();
    while (tu_seconds() - t0 < seconds) {
        const pl_batch *b = NULL;
        const int rc = pl_loader_next(l, &b);
        if (rc == PL_EPOCH_END)
            continue; /* the next call starts the next epoch */
        cr_assert_eq(rc, 0, "%s", pl_last_error());
        if (step_ms)
            nap_ms(step_ms);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        if (step_ms && notices_said(a))
            break;
    }
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    return st;
}

/* ---- fixtures ---- */

/* root/f<i>.jpg for i < n: a flat folder, file order f00, f01, ... */
static inline void make_flat(char root[64], int n)
{
    tu_tmpdir(root);
    for (int i = 0; i < n; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/f%02d.jpg", root, i);
        tu_write_jpeg(p, 40 + (i % 3) * 8, 32 + (i % 2) * 16, (unsigned)i + 11,
                      NULL);
    }
}

/* The three kinds of bad file the error-policy tests use. */
static inline void write_not_jpeg(const char *path)
{
    static const char text[] = "this is plain text, not a JPEG\n";
    tu_write_file(path, text, sizeof text - 1);
}

static inline void write_empty(const char *path)
{
    tu_write_file(path, "", 0);
}

/* The first 30 bytes of a real JPEG: SOI, APP0 and a few bytes of DQT. */
static inline void write_truncated_header(const char *path)
{
    char full[300];
    snprintf(full, sizeof full, "%s.full", path);
    tu_write_jpeg(full, 32, 24, 99, NULL);
    size_t len;
    uint8_t *b = tu_read_file(full, &len);
    cr_assert_gt(len, 30);
    tu_write_file(path, b, 30);
    free(b);
    remove(full);
}

/* The label the ImageFolder convention gives a make_tree path: its class
 * folder c<k> is the k-th in sorted order (fewer than 10 classes). */
static inline int32_t folder_label(const char *root, const char *path)
{
    const size_t n = strlen(root);
    cr_assert_eq(strncmp(path, root, n), 0, "%s not under %s", path, root);
    cr_assert_eq(path[n + 1], 'c', "%s", path);
    return path[n + 2] - '0';
}

static inline void base_cfg(pl_config *c, const char *data)
{
    pl_config_default(c);
    c->data = data;
    c->device = tu_device();
    c->log = quiet;
    c->batch_size = 5;
    c->width = 16;
    c->height = 16;
    c->num_workers = 2;
    c->prefetch = 2;
    c->device_buffers = 2;
    c->augment = PL_AUGMENT_TRAIN;
    c->seed = 7;
    c->rank = 0; /* not RANK/WORLD_SIZE from a launcher's environment */
    c->world_size = 1;
}

/* Position of dataset index `idx` in r (each index once per epoch). */
static inline int find_index(const run *r, int64_t idx)
{
    for (int k = 0; k < r->n; k++)
        if (r->idx[k] == idx)
            return k;
    return -1;
}

/* The common start and end of a loader test: a tree of n JPEGs in
 * `classes` class folders under a fresh root, with the suites' base
 * configuration for it (then adjust c and call create); and, at the end,
 * the loader destroyed and the tree removed. */
static inline void fx_tree(char root[64], pl_config *c, int n, int classes)
{
    tu_make_tree(root, n, classes);
    base_cfg(c, root);
}

/* The same for a flat folder of n files. */
static inline void fx_flat(char root[64], pl_config *c, int n)
{
    make_flat(root, n);
    base_cfg(c, root);
}

static inline void fx_done(pl_loader *l, const char *root)
{
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

#endif
