#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "pinload.h"

typedef struct worker {
    pool *pool;
    int id;
    int started;
    pthread_t thread;
    sample_ctx ctx;
    route_ctx route;
    balance bal; /* decode auto's split (pool_config.balance) */
    /* Written by this worker alone, read by pool_get_stats. */
    _Atomic uint64_t decoded, failed, warned, bytes_read;
    _Atomic uint64_t offloaded, declined;
    _Atomic uint64_t ns_read, ns_decode, ns_augment;
} worker;

struct pool {
    pool_config cfg;
    worker *workers;
};

static void add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

/* A sample that failed before its pixels: zeros, in every view. */
static void zero_job(const pool_config *cfg, pool_job *job)
{
    if (!cfg->nviews) {
        memset(job->dst, 0, augment_sample_bytes(cfg->augment));
        return;
    }
    for (int v = 0; v < cfg->nviews; v++)
        memset(job->view_dst[v], 0, augment_sample_bytes(&cfg->views[v]));
}

/* The job's bytes into the worker's file buffer, timed; a read that
 * fails leaves the sample zeros. */
static int read_job(worker *w, pool_job *job, sample_times *t)
{
    sample_ctx *c = &w->ctx;
    const uint64_t t0 = clock_now_ns();
    c->warnings = 0;
    const int rc = fileio_read_loc(&job->loc, w->pool->cfg.max_file_bytes,
                                   &c->file, job->reason, SAMPLE_REASON_MAX);
    t->ns_read += clock_now_ns() - t0;
    if (rc < 0) {
        zero_job(&w->pool->cfg, job);
        return rc;
    }
    t->bytes_read += c->file.len;
    return 0;
}

/* config.views: the bytes read, decoded once, each view made from them. */
static int produce_views(worker *w, pool_job *job, sample_times *t)
{
    const pool_config *cfg = &w->pool->cfg;
    sample_ctx *c = &w->ctx;
    const int rc = read_job(w, job, t);
    if (rc < 0)
        return rc;
    return sample_produce_views(c, cfg->views, cfg->nviews, c->file.data,
                                c->file.len, job->epoch, job->index,
                                job->view_dst, t, job->reason);
}

/* The job's extras into its buffers, before its pixels: a read that fails
 * makes the sample bad, naming the extra (and its pixels zeros). */
static int read_extras(const pool_config *cfg, pool_job *job, sample_times *t)
{
    int rc = 0;
    for (int k = 0; k < job->extras.n; k++) {
        fileio_buf *b = &job->extras.out[k];
        b->len = 0;
        if (rc != 0 || !job->extras.has[k])
            continue;
        const uint64_t t0 = clock_now_ns();
        char why[SAMPLE_REASON_MAX - 48];
        rc = fileio_read_loc(&job->extras.loc[k], cfg->max_file_bytes, b, why,
                             sizeof why);
        t->ns_read += clock_now_ns() - t0;
        if (rc == PL_ENOEXTRA && !job->extras.required)
            rc = 0, b->len = 0; /* a sidecar file not there: empty */
        if (rc < 0) {
            b->len = 0;
            snprintf(job->reason, sizeof job->reason, "its %s (config.extras): "
                     "%s", job->extras.name[k], why);
            job->process_error = b->process_error;
        } else {
            t->bytes_read += b->len;
        }
    }
    if (rc < 0)
        for (int k = 0; k < job->extras.n; k++)
            job->extras.out[k].len = 0;
    return rc;
}

/* sample_produce, with the offer to the source's other decoder between
 * the read and the decode: a sample it takes costs this worker the read
 * and the header; one it refuses is decoded here from the bytes read.
 * With cfg->balance, a JPEG the other decoder could take goes there or is
 * decoded here as the worker's balance says, and what it cost either way
 * is noted. */
static int produce_routed(worker *w, pool_job *job, sample_times *t)
{
    const pool_config *cfg = &w->pool->cfg;
    sample_ctx *c = &w->ctx;
    int rc = read_job(w, job, t);
    if (rc < 0)
        return rc;
    const uint64_t t1 = clock_now_ns();
    offload_sample o;
    const int routable = route_plan(&w->route, c->dec, cfg->augment,
                                    c->file.data, c->file.len, job->epoch,
                                    job->index, &o);
    const int offer = routable && (!cfg->balance || balance_take_gpu(&w->bal));
    if (offer) {
        rc = cfg->source.offload(cfg->source.ctx, job, &o);
        const uint64_t spent = clock_now_ns() - t1;
        t->ns_decode += spent;
        if (rc == 0) {
            job->offloaded = 1;
            add(&w->offloaded, 1);
            if (cfg->balance)
                balance_note(&w->bal, 1, spent);
            return 0;
        }
        add(&w->declined, 1);
        job->reason[0] = '\0';
    } else {
        t->ns_decode += clock_now_ns() - t1; /* the header */
    }
    rc = sample_produce_buffer(c, cfg->augment, c->file.data, c->file.len,
                               job->epoch, job->index, job->dst, t,
                               job->reason);
    if (cfg->balance && routable && !offer && rc == 0)
        balance_note(&w->bal, 0, clock_now_ns() - t1); /* header too */
    return rc;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const pool_config *cfg = &w->pool->cfg;
    pool_job job;
    for (;;) {
        memset(&job, 0, sizeof job);
        job.worker = w->id;
        if (!cfg->source.claim(cfg->source.ctx, &job))
            break;
        sample_times t = {0};
        w->ctx.warnings = 0;
        w->ctx.file.process_error = 0;
        if (job.preset_status) {
            job.status = job.preset_status;
            zero_job(cfg, &job);
        } else if (job.extras.n &&
                   (job.status = read_extras(cfg, &job, &t)) != 0) {
            /* Extras first: a sample they fail is zeros under SUBSTITUTE,
             * as every bad sample is, never its pixels under an error
             * status (nor a GPU decode of them). */
            zero_job(cfg, &job);
        } else if (cfg->nviews) {
            job.status = produce_views(w, &job, &t);
        } else if (cfg->source.offload) {
            job.status = produce_routed(w, &job, &t);
        } else {
            job.status = sample_produce(&w->ctx, cfg->augment, &job.loc,
                                        cfg->max_file_bytes, job.epoch,
                                        job.index, job.dst, &t, job.reason);
        }
        /* read_extras sets it for an extra's read. */
        job.process_error |= job.status != 0 && w->ctx.file.process_error;
        if (job.status != 0) /* bad pixels: no extras either */
            for (int k = 0; k < job.extras.n; k++)
                job.extras.out[k].len = 0;
        add(job.status == 0 ? &w->decoded : &w->failed, 1);
        job.warnings = w->ctx.warnings;
        if (job.status == 0 && job.warnings) {
            add(&w->warned, 1);
            snprintf(job.reason, sizeof job.reason, "%s", w->ctx.first_warning);
        }
        add(&w->bytes_read, t.bytes_read);
        add(&w->ns_read, t.ns_read);
        add(&w->ns_decode, t.ns_decode);
        add(&w->ns_augment, t.ns_augment);
        cfg->source.finish(cfg->source.ctx, &job);
    }
    return NULL;
}

int pool_create(pool **out, const pool_config *cfg)
{
    pool *p = calloc(1, sizeof *p);
    if (!p)
        return PL_ENOMEM;
    p->cfg = *cfg;
    p->workers = calloc((size_t)cfg->workers, sizeof *p->workers);
    if (!p->workers)
        goto fail;
    for (int i = 0; i < cfg->workers; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->id = i;
        balance_init(&w->bal);
        if (sample_init(&w->ctx, &cfg->limits) < 0)
            goto fail;
    }
    *out = p;
    return 0;
fail:
    pool_destroy(p);
    return PL_ENOMEM;
}

/* Worker i on the i-th CPU of the process's affinity mask (modulo). */
static void pin_to_cpu(pthread_t t, int i)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    const int n = CPU_COUNT(&allowed);
    for (int cpu = 0, seen = 0; n > 0 && cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ == i % n) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(t, sizeof one, &one);
            return;
        }
    }
}

int pool_start(pool *p)
{
    /* Workers take no signals: they belong to the application's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    for (int i = 0; i < p->cfg.workers && rc == 0; i++) {
        worker *w = &p->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            rc = PL_ETHREAD;
            break;
        }
        w->started = 1;
        if (p->cfg.pin)
            pin_to_cpu(w->thread, i);
        char name[24]; /* the kernel keeps 15 chars: "pl-worker-9999" */
        snprintf(name, sizeof name, "pl-worker-%d", i % 10000);
        pthread_setname_np(w->thread, name);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void pool_join(pool *p)
{
    for (int i = 0; i < p->cfg.workers; i++) {
        worker *w = &p->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        w->started = 0;
    }
}

void pool_destroy(pool *p)
{
    if (!p)
        return;
    if (p->workers) {
        pool_join(p);
        for (int i = 0; i < p->cfg.workers; i++) {
            sample_fini(&p->workers[i].ctx);
            route_fini(&p->workers[i].route);
        }
        free(p->workers);
    }
    free(p);
}

void pool_get_stats(const pool *p, pool_stats *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < p->cfg.workers; i++) {
        worker *w = &p->workers[i];
        s->decoded += atomic_load_explicit(&w->decoded, memory_order_relaxed);
        s->failed += atomic_load_explicit(&w->failed, memory_order_relaxed);
        s->warned += atomic_load_explicit(&w->warned, memory_order_relaxed);
        s->bytes_read +=
            atomic_load_explicit(&w->bytes_read, memory_order_relaxed);
        s->offloaded +=
            atomic_load_explicit(&w->offloaded, memory_order_relaxed);
        s->declined += atomic_load_explicit(&w->declined, memory_order_relaxed);
        s->ns_read += atomic_load_explicit(&w->ns_read, memory_order_relaxed);
        s->ns_decode +=
            atomic_load_explicit(&w->ns_decode, memory_order_relaxed);
        s->ns_augment +=
            atomic_load_explicit(&w->ns_augment, memory_order_relaxed);
    }
}
