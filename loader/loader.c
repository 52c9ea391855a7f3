/* pl_loader: the public object. It owns the catalog, the sampler, the
 * backend, the ring, the prefetcher and the worker pool, wires the pool to
 * the ring (which sample goes where), and answers the caller's queries. */
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../workers/pool.h"
#include "../device/backend.h"
#include "config.h"
#include "../delivery/copier.h"
#include "../delivery/decode_gpu.h"
#include "../input/input.h"
#include "abi.h"
#include "autotune.h"
#include "../common/clock.h"
#include "../common/defaults.h"
#include "../common/error.h"
#include "../delivery/dev_buffers.h"
#include "../delivery/failures.h"
#include "../common/log.h"
#include "../common/machine.h"
#include "../delivery/output.h"
#include "pinned.h"
#include "../order/resume.h"
#include "../delivery/ring.h"
#include "../order/sampler.h"
#include "state.h"

struct pl_loader {
    config_resolved rc;
    logger log;
    catalog cat;
    sampler smp;
    backend *be;
    failures fails;
    ring ring;
    handoff ho;
    copier cp;
    pool *pool;
    decode_gpu dg; /* config.decode: the GPU decoder, or none */
    /* What create got to, so that destroy undoes exactly that. */
    int have_log, have_fails, have_ring, have_ho, have_dg;
    output_plan out;    /* what the workers write and the caller gets */
    int64_t positions;  /* claimed per epoch before any top-up */
    int64_t samples;    /* delivered per epoch */
    int64_t batches;    /* delivered per epoch */
    resume_point start; /* where the first epoch starts */
    state_fields print; /* the fingerprint pl_loader_state writes */
    pl_info info;
    pid_t pid; /* the process that created it: its threads live there */
    /* PL_ORDER_SHARDS over remote shards: the last epoch whose shard
     * sequence the catalog was told (hint_order). */
    _Atomic int64_t hinted;
    const char *extra_names[PL_EXTRAS_MAX]; /* into rc.extras */
    /* num_workers and prefetch PL_AUTO: the decisions' state, stepped by
     * the caller's thread in pl_loader_next; tune_mu keeps two callers'
     * steps apart. */
    autotune tune;
    ringtune rtune;
    pthread_mutex_t tune_mu;
    int have_tune, have_rtune; /* either: tune_mu is made */
    uint64_t tune_said_ns, rtune_said_ns;
    int prefetch_max; /* the ring's bound: prefetch, or PL_AUTO's */
    augment_params *views; /* config.views' (out.views), or NULL */
};

/* After fork() the child has none of the loader's threads and may hold its
 * locks in whatever state the parent's threads left them: every call that
 * needs them is refused there, naming the reason. */
static int forked(const pl_loader *l, const char *fn)
{
    if (l->pid == getpid())
        return 0;
    return err_set(PL_EINVAL,
                   "%s: this loader was created in process %ld and this is "
                   "process %ld: after fork() a child has none of its "
                   "threads; create a loader in the child (destroying the "
                   "parent's there only forgets it)",
                   fn, (long)l->pid, (long)getpid());
}

/* ---- the pool's job source: the ring ---- */

/* The file `readahead` positions after j of this epoch, hinted to the
 * kernel so that cold storage is read before a worker asks. */
static void hint_ahead(pl_loader *l, const ring_slot *s, int64_t j)
{
    const int64_t ahead = j + l->rc.cfg.readahead;
    if (ahead >= l->positions)
        return;
    const int64_t idx = sampler_index(&l->smp, s->epoch, ahead);
    location loc;
    if (catalog_locate(&l->cat, idx, &loc, NULL, 0) == 0)
        fileio_hint_loc(&loc);
}

/* PL_ORDER_SHARDS: the shards this rank reads in `epoch` from position
 * `from` on, told to the catalog (remote shards are fetched in that
 * order). Once per epoch: O(shards). */
static void hint_order(pl_loader *l, int64_t epoch, int64_t from)
{
    int32_t *seq = malloc(((size_t)l->smp.nshards + 1) * sizeof *seq);
    if (!seq)
        return; /* the workers fetch the shards as they meet them */
    const int n = sampler_shard_sequence(&l->smp, epoch, from, seq);
    catalog_hint_order(&l->cat, seq, n);
    free(seq);
}

/* A claim in an epoch no sequence was told for yet: its first. */
static void hint_epoch(pl_loader *l, int64_t epoch)
{
    int64_t was = atomic_load(&l->hinted);
    while (epoch > was)
        if (atomic_compare_exchange_weak(&l->hinted, &was, epoch)) {
            hint_order(l, epoch, 0);
            return;
        }
}

/* Epoch position j: past the rank's order (a top-up), the order again. */
static int64_t position_index(const pl_loader *l, int64_t epoch, int64_t j)
{
    return sampler_index(&l->smp, epoch, j % l->smp.per_rank);
}

static int on_claim(void *ctx, pool_job *job)
{
    pl_loader *l = ctx;
    ring_slot *s;
    int i;
    if (!ring_claim(&l->ring, job->worker, &s, &i))
        return 0;
    const int64_t j = s->first + i;
    if (l->smp.nshards && catalog_takes_order(&l->cat))
        hint_epoch(l, s->epoch);
    const int64_t idx = position_index(l, s->epoch, j);
    ring_pos *pos = &s->pos[i];
    pos->index = idx;
    pos->status = 0;
    pos->on_device = 0;
    pos->worker = job->worker;
    job->epoch = s->epoch;
    job->index = idx;
    job->dst = s->pixels + (size_t)i * l->ring.sample_bytes;
    for (int v = 0; v < l->out.nviews; v++)
        job->view_dst[v] =
            s->pixels + output_view_at(&l->out, v, i, l->rc.cfg.batch_size);
    if (l->out.nviews)
        job->dst = job->view_dst[0];
    const int nx = l->ring.nextras;
    job->extras.n = nx;
    job->extras.required = l->rc.cfg.extras_required;
    job->extras.out = nx ? &s->extras[(size_t)i * (size_t)nx] : NULL;
    if (nx)
        memcpy(job->extras.name, l->extra_names, (size_t)nx * sizeof(char *));
    /* The label, the bytes and the extras from one read of the sample's
     * key: a table file changed under the loader makes the sample an
     * error (naming the file), never a label of other bytes. */
    job->preset_status = catalog_sample(
        &l->cat, idx, &job->loc, &pos->label, nx ? job->extras.loc : NULL,
        job->extras.has, job->reason, sizeof job->reason);
    job->tag = s;
    job->tag_pos = i;
    if (l->rc.cfg.readahead)
        hint_ahead(l, s, j);
    return 1;
}

static void note_failure(pl_loader *l, const pool_job *job)
{
    char name[CATALOG_NAME_MAX];
    const char *path =
        catalog_name_into(&l->cat, job->index, name, sizeof name);
    const int first = failures_record(&l->fails, job->index, job->status, path,
                                      job->reason, job->warnings);
    if (first == 1 && job->status == 0) {
        log_msg(&l->log, PL_LOG_WARNING,
                "decoded despite %d libjpeg warning(s): %s: %s", job->warnings,
                path, job->reason);
        return;
    }
    if (first != 1 || l->rc.cfg.on_error == PL_ON_ERROR_FAIL)
        return;
    log_msg(&l->log, PL_LOG_WARNING, "%s %s: %s (%s)",
            l->rc.cfg.on_error == PL_ON_ERROR_SKIP ? "skipped"
                                                   : "substituted zeros for",
            path, job->reason, pl_err_name(job->status));
}

static void on_finish(void *ctx, pool_job *job)
{
    pl_loader *l = ctx;
    ring_slot *s = job->tag;
    s->pos[job->tag_pos].status = job->status;
    s->pos[job->tag_pos].on_device = job->offloaded;
    char name[CATALOG_NAME_MAX];
    if (job->process_error)
        /* Not the file's failure: it is not recorded as bad, and no policy
         * hides it (skipping would drop good files at random). The loader
         * fails, after the batches already queued. */
        handoff_fail(&l->ho, job->status, "pl_loader_next: %s: %s",
                     catalog_name_into(&l->cat, job->index, name, sizeof name),
                     job->reason);
    else if (job->status == PL_ECLOSED)
        ; /* a read cut by pl_loader_destroy: not the file's failure */
    else if (job->status != 0 || job->warnings)
        note_failure(l, job);
    ring_finish(&l->ring, s, job->status == 0);
}

/* A JPEG the worker's route lets the GPU decode (decode_gpu.h). */
static int on_offload(void *ctx, pool_job *job, const offload_sample *o)
{
    pl_loader *l = ctx;
    return decode_gpu_sample(&l->dg, job, o);
}

/* ---- create ---- */

/* What each epoch delivers (the same on every rank, whatever it meets) and
 * which positions it decodes first. Under SKIP that is the rank's whole
 * order, drop_last or not, the positions past the last full batch standing
 * in for skipped samples first; the ring tops an epoch up with the order
 * again when they are not enough. Otherwise drop_last decodes only the full
 * batches. */
static int plan_epoch(pl_loader *l)
{
    const pl_config *c = &l->rc.cfg;
    const int64_t per_rank = l->smp.per_rank;
    if (per_rank < 1)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.world_size: %d "
                       "ranks for %lld files with PL_SHARD_DROP leaves none "
                       "per rank",
                       l->rc.world, (long long)catalog_size(&l->cat));
    if (c->drop_last && per_rank < c->batch_size)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.batch_size: %d "
                       "is more than the %lld samples per epoch, and "
                       "drop_last would leave every epoch empty",
                       c->batch_size, (long long)per_rank);
    l->batches = batches_per_epoch(per_rank, c->batch_size, c->drop_last);
    l->samples = c->drop_last ? l->batches * c->batch_size : per_rank;
    l->positions = c->on_error == PL_ON_ERROR_SKIP ? per_rank : l->samples;
    return 0;
}

/* PL_ORDER_SHARDS: the sampler deals the catalog's shards (the catalog
 * knows each shard's first sample; the sampler keeps a copy, O(shards)). */
static int plan_order(pl_loader *l, const char *data)
{
    const pl_config *c = &l->rc.cfg;
    if (c->order != PL_ORDER_SHARDS)
        return 0;
    const int ns = catalog_shards(&l->cat);
    if (ns == 0)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.order: PL_ORDER_SHARDS "
                       "deals tar shards to the ranks, and %s is a folder or "
                       "a list file of images (use PL_ORDER_GLOBAL, or pack "
                       "it into shards with pinload-pack)",
                       data);
    int64_t *first = malloc(((size_t)ns + 1) * sizeof *first);
    if (!first)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    for (int k = 0; k <= ns; k++)
        first[k] = catalog_shard_first(&l->cat, k);
    const int64_t window = c->shuffle_window; /* settled by config_resolve */
    const int rc = sampler_use_shards(&l->smp, first, ns, window);
    free(first);
    if (rc < 0)
        return err_set(rc, "pl_loader_create: out of memory");
    log_msg(&l->log, PL_LOG_NOTICE,
            "order: %d shard(s) dealt to %d rank(s), %lld samples each, "
            "shuffled within windows of %lld",
            ns, l->rc.world, (long long)l->smp.per_rank, (long long)window);
    return 0;
}

/* The epochs a state may name: far past any training run, and far from
 * where an epoch's positions (epoch x order length, in the sampler and
 * the schedule) could overflow. */
#define RESUME_EPOCH_MAX ((int64_t)1 << 31)

/* A state's checksum shows damage, not forgery (anyone can compute it): every
 * field that steers the pipeline must be one this loader could have saved,
 * or create refuses it. A forged position of 2^63 - 1 made the schedule
 * top an epoch up for ever. */
static int check_resume_fields(const pl_loader *l, const state_fields *st)
{
    const pl_config *c = &l->rc.cfg;
    const int skip = c->on_error == PL_ON_ERROR_SKIP;
    /* Without top-ups an epoch claims `positions` and no more; with them,
     * each good sample still missing may take up to a whole pass over the
     * rank's order (the schedule's bound on a dry run). */
    const int64_t order = l->smp.per_rank;
    int64_t most = l->positions;
    if (skip && order > 0) {
        const int64_t passes = l->samples;
        most = passes > (INT64_MAX - most) / order ? INT64_MAX
                                                   : most + passes * order;
    }
    if (st->epoch > RESUME_EPOCH_MAX)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.resume: epoch %lld is out "
                       "of range (at most %lld): a damaged or forged state",
                       (long long)st->epoch, (long long)RESUME_EPOCH_MAX);
    if (st->batch > l->batches)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.resume: batch %lld of an "
                       "epoch of %lld",
                       (long long)st->batch, (long long)l->batches);
    const int64_t done = st->batch * (int64_t)c->batch_size;
    const int64_t least = done < l->positions ? done : l->positions;
    if (st->world == l->rc.world &&
        (st->position < least || st->position > most))
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.resume: position %lld is "
                       "out of range for batch %lld (%lld to %lld on this "
                       "rank): a damaged or forged state",
                       (long long)st->position, (long long)st->batch,
                       (long long)least, (long long)most);
    return 0;
}

/* Where the first epoch starts: first_epoch, or config.resume's state,
 * checked against this loader's fingerprint. */
static int plan_start(pl_loader *l)
{
    const pl_config *c = &l->rc.cfg;
    int rc = state_fingerprint(&l->print, &l->cat, c,
                               l->rc.has_transform ? &l->rc.ops : NULL,
                               l->rc.view_ops, l->rc.nviews, l->rc.rank,
                               l->rc.world);
    if (rc < 0)
        return rc;
    l->start.epoch = c->first_epoch;
    if (!c->resume)
        return 0;
    state_fields st;
    char why[256];
    rc = state_decode(c->resume, &st, "pl_loader_create: config.resume");
    if (rc < 0)
        return rc;
    state_fields now = l->print;
    if (st.version == 1 && /* format 1 hashed full paths */
        (rc = state_list_hash_v1(&l->cat, &now.list_hash)) < 0)
        return rc;
    if (state_mismatch(&st, &now, why, sizeof why))
        return err_set(PL_EINVAL, "pl_loader_create: config.resume: %s", why);
    if ((rc = check_resume_fields(l, &st)) < 0)
        return rc;
    l->start.epoch = st.epoch;
    if (st.world != l->rc.world) {
        /* A warning when the epoch was under way: what the saved job had
         * of it is delivered again (an elastic restart replays it). */
        log_msg(&l->log, st.batch > 0 ? PL_LOG_WARNING : PL_LOG_NOTICE,
                "resume: the state was saved by a job of world_size %d, this "
                "one has %d: epoch %lld starts again from its beginning%s",
                st.world, l->rc.world, (long long)st.epoch,
                st.batch > 0 ? ", so the samples of it delivered before the "
                               "save are delivered again"
                             : "");
        return 0;
    }
    if (st.rank != l->rc.rank)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.resume: the state is rank "
                       "%d's, this loader is rank %d (each rank resumes from "
                       "the state it saved)",
                       st.rank, l->rc.rank);
    l->start.batch = st.batch;
    l->start.position = st.position;
    l->start.done = st.batch * c->batch_size >= l->samples;
    return 0;
}

/* The first epoch's shard sequence, from where it starts (a resumed
 * position included), told before the workers start. */
static void plan_stream(pl_loader *l)
{
    const int64_t epoch = l->start.epoch + (l->start.done ? 1 : 0);
    atomic_init(&l->hinted, epoch);
    if (l->smp.nshards && catalog_takes_order(&l->cat))
        hint_order(l, epoch, l->start.done ? 0 : l->start.position);
}

static void fill_info(pl_loader *l)
{
    const pl_config *c = &l->rc.cfg;
    pl_info *in = &l->info;
    in->dataset_size = catalog_size(&l->cat);
    in->samples_per_epoch = l->smp.per_rank;
    in->batches_per_epoch = l->batches;
    in->num_classes = catalog_classes(&l->cat);
    in->batch_size = c->batch_size;
    in->width = l->out.width;
    in->height = l->out.height;
    in->channels = 3;
    in->format = l->out.format;
    in->sample_bytes = l->out.sample_bytes;
    in->batch_bytes = in->sample_bytes * (size_t)c->batch_size;
    in->num_views = l->out.nviews ? l->out.nviews : 1;
    if (l->out.nviews) /* view 0's; batch_bytes every view's */
        in->sample_bytes = l->out.view_bytes[0];
    in->backend = l->be->kind;
    in->device = l->be->device;
    in->num_workers = l->rc.num_workers;
    in->prefetch = l->rc.auto_prefetch ? RINGTUNE_START : c->prefetch;
    in->prefetch_max = l->prefetch_max;
    in->device_buffers = c->device_buffers;
    in->rank = l->rc.rank;
    in->world_size = l->rc.world;
    in->memory = c->memory;
    ring_stats rs;
    ring_get_stats(&l->ring, &rs);
    in->pinned = rs.kind == HOSTMEM_PINNED;
    in->backend_name = l->be->name;
    in->gpu_normalize = l->out.gpu_normalize;
    in->channels_last = l->out.aug.channels_last;
    in->numa_node = rs.node;
    in->gpu_numa_node = l->be->numa_node;
    in->decode = l->dg.in_use;
    in->decoder_name = l->dg.name;
    in->gpu_decode_bytes = l->dg.create_bytes;
}

/* num_workers and prefetch PL_AUTO: the figures autotune.h decides by. */
static void tune_figures(const pl_loader *l, autotune_sample *s)
{
    pool_stats ps;
    handoff_stats hs;
    ring_stats rs;
    pool_get_stats(l->pool, &ps);
    handoff_get_stats((handoff *)&l->ho, &hs);
    ring_get_stats(&l->ring, &rs);
    *s = (autotune_sample){.now_ns = clock_now_ns(),
                           .batches = hs.batches,
                           .ns_wait = hs.ns_wait,
                           .ns_busy = ps.ns_read + ps.ns_decode + ps.ns_augment,
                           .ns_slot_wait = rs.ns_slot_wait};
}

/* num_workers PL_AUTO's window: the ring told the new count. Under
 * tune_mu. */
static void tune_workers(pl_loader *l, const autotune_sample *now)
{
    const int said = autotune_step(&l->tune, now);
    if (said == 1)
        ring_set_active(&l->ring, l->tune.active);
    /* Said when it settles, then on a change at most every 10 s (a
     * step whose speed changes: evaluation, a larger model stage). */
    if (said == 2 || (said == 1 && l->tune.settled &&
                      now->now_ns - l->tune_said_ns >= 10000000000u)) {
        char what[256];
        autotune_describe(&l->tune, what, sizeof what);
        log_msg(&l->log, PL_LOG_NOTICE, "num_workers PL_AUTO: %s%s", what,
                said == 2 ? " (settled; it follows the step if that changes)"
                          : "");
        l->tune_said_ns = now->now_ns;
    }
}

/* prefetch PL_AUTO's window: the prefetcher told to grow the ring. Under
 * tune_mu. */
static void tune_ring(pl_loader *l, const autotune_sample *now)
{
    const int workers = l->have_tune ? l->tune.active : l->rc.num_workers;
    ring_stats rs; /* a slot the memory could not be had for ended growing */
    ring_get_stats(&l->ring, &rs);
    if (rs.max_slots < l->rtune.max) {
        l->rtune.max = rs.max_slots;
        l->rtune.slots = rs.slots;
    }
    const int said = ringtune_step(&l->rtune, now, workers);
    if (said == 1)
        ring_want_slots(&l->ring, l->rtune.slots);
    if (said == 2 || (said == 1 && l->rtune.settled &&
                      now->now_ns - l->rtune_said_ns >= 10000000000u)) {
        char what[256];
        ringtune_describe(&l->rtune, what, sizeof what);
        log_msg(&l->log, PL_LOG_NOTICE, "prefetch PL_AUTO: %s%s", what,
                said == 2 ? " (settled; it grows if that changes)" : "");
        l->rtune_said_ns = now->now_ns;
    }
}

/* After a batch: a window's steps. */
static void tune_step(pl_loader *l)
{
    if (pthread_mutex_trylock(&l->tune_mu) != 0)
        return; /* another caller's thread steps it now */
    const uint64_t last =
        l->have_tune ? l->tune.last.now_ns : l->rtune.last.now_ns;
    if (clock_now_ns() < last + AUTOTUNE_WINDOW_NS) {
        pthread_mutex_unlock(&l->tune_mu); /* mid-window: nothing to read */
        return;
    }
    autotune_sample now;
    tune_figures(l, &now);
    if (l->have_tune)
        tune_workers(l, &now);
    if (l->have_rtune)
        tune_ring(l, &now);
    pthread_mutex_unlock(&l->tune_mu);
}

/* The page-locked memory this loader will take with `slots` ring slots,
 * times its node's ranks, against the node's memory (pinned.h), before
 * any of it is taken. */
static int check_pinned(const pl_loader *l, int slots)
{
    const pl_config *c = &l->rc.cfg;
    const size_t n = (size_t)c->batch_size;
    const pinned_need need = {
        .ranks = l->rc.local_world,
        .slots = c->memory == PL_MEMORY_PINNED ? slots : 0,
        .slot_bytes = l->out.ring_sample_bytes * n,
        .mirrors = output_mirrors(&l->out, c->keep_host, l->be)
                       ? c->device_buffers
                       : 0,
        .mirror_bytes = l->out.sample_bytes * n,
    };
    machine_memory m;
    machine_memory_get(&m);
    return pinned_check(&need, &m);
}

static int start_pipeline(pl_loader *l)
{
    const pl_config *c = &l->rc.cfg;
    const int skip = c->on_error == PL_ON_ERROR_SKIP;
    const schedule_config sched = {
        .positions = l->positions,
        .batch_size = c->batch_size,
        .target = skip ? l->samples : 0,
        .order_len = l->smp.per_rank,
        .start = l->start,
    };
    const size_t sample_bytes = l->out.ring_sample_bytes;
    const int slots = l->rc.auto_prefetch ? RINGTUNE_START : c->prefetch;
    /* PL_AUTO: the bound the ring may grow to is the most slots (up to
     * RINGTUNE_MAX) whose pinned memory the node holds with every
     * rank at that bound; none fitting, the start's error. */
    l->prefetch_max = slots;
    for (int n = l->rc.auto_prefetch ? RINGTUNE_MAX : 0; n > slots; n--)
        if (check_pinned(l, n) == 0) {
            l->prefetch_max = n;
            break;
        }
    int rc = check_pinned(l, slots);
    if (rc < 0)
        return rc;
    l->have_ring = 1;
    rc = ring_init(&l->ring, slots, &sched, sample_bytes, l->be, c->memory,
                   c->pinned_fallback, &l->log);
    if (rc == 0)
        rc = ring_set_max(&l->ring, l->prefetch_max);
    if (rc == 0 && l->rc.nextras)
        rc = ring_add_extras(&l->ring, l->rc.nextras);
    if (rc < 0) {
        char why[512]; /* the detail is about to be rewritten */
        snprintf(why, sizeof why, "%s", pl_last_error());
        return err_set(rc,
                       "pl_loader_create: cannot allocate the %d x %zu "
                       "byte host ring: %s",
                       slots, sample_bytes * (size_t)c->batch_size, why);
    }
    const handoff_config hc = {
        .be = l->be,
        .nbufs = c->device_buffers,
        .max_bufs = c->max_device_buffers < 0   ? INT_MAX
                    : c->max_device_buffers > 0 ? c->max_device_buffers
                                                : c->device_buffers,
        .batch_size = c->batch_size,
        .out = &l->out,
        .keep_host = output_mirrors(&l->out, c->keep_host, l->be),
        .start = l->start,
        .log = &l->log,
        .nextras = l->rc.nextras,
        .extra_names = l->extra_names,
    };
    l->have_ho = 1;
    if ((rc = handoff_init(&l->ho, &hc)) < 0)
        return rc;
    l->have_dg = 1;
    if ((rc = decode_gpu_open(&l->dg, c, l->be, &l->out, l->rc.num_workers,
                              &l->ring, &l->cat, &l->log)) < 0)
        return rc;

    decode_limits lim;
    decode_limits_default(&lim);
    lim.max_width = c->max_width;
    lim.max_height = c->max_height;
    lim.max_pixels = c->max_pixels;
    lim.strict = c->strict;
    /* 0: the default (a field an older caller's struct lacks reads 0) */
    if (c->max_decode_ms)
        lim.max_decode_ms = c->max_decode_ms < 0 ? 0 : c->max_decode_ms;
    if (c->max_scans)
        lim.max_scans = c->max_scans;
    if (c->max_decode_memory)
        lim.max_memory = c->max_decode_memory;
    const pool_config wc = {
        .workers = l->rc.num_workers,
        .pin = c->pin_workers,
        .max_file_bytes = c->max_file_bytes,
        .limits = lim,
        .augment = &l->out.aug,
        .views = l->out.views,
        .nviews = l->out.nviews,
        .source = {.claim = on_claim,
                   .finish = on_finish,
                   .offload = l->dg.g ? on_offload : NULL,
                   .ctx = l},
        .balance = l->dg.g && c->decode == PL_DECODE_AUTO,
    };
    if ((rc = pool_create(&l->pool, &wc)) < 0)
        return err_set(rc, "pl_loader_create: out of memory for %d workers",
                       l->rc.num_workers);
    const copier_config pc = {
        .ring = &l->ring,
        .ho = &l->ho,
        .be = l->be,
        .fails = &l->fails,
        .cat = &l->cat,
        .batch_size = c->batch_size,
        .out = &l->out,
        .on_error = c->on_error,
        .samples_per_epoch = l->samples,
        .start = l->start,
        .gpu = l->dg.g,
        .workers = l->rc.num_workers,
    };
    if ((rc = copier_start(&l->cp, &pc)) < 0)
        return rc;
    if ((rc = pool_start(l->pool)) < 0)
        return err_set(rc, "pl_loader_create: cannot start %d worker threads",
                       l->rc.num_workers);
    if (l->rc.auto_workers || l->rc.auto_prefetch) {
        autotune_sample now;
        tune_figures(l, &now);
        if (l->rc.auto_workers)
            autotune_init(&l->tune, l->rc.num_workers, &now);
        if (l->rc.auto_prefetch)
            ringtune_init(&l->rtune, l->prefetch_max, &now);
        pthread_mutex_init(&l->tune_mu, NULL);
        l->have_tune = l->rc.auto_workers;
        l->have_rtune = l->rc.auto_prefetch;
    }
    return 0;
}

/* The one create notice: what runs where, and why. */
static void announce(pl_loader *l)
{
    ring_stats rs;
    ring_get_stats(&l->ring, &rs);
    const double mib = (double)rs.mem_bytes / (1 << 20);
    /* Where the ring went: the GPU's NUMA node, or why not (a node not
     * known, one node alone, says nothing). */
    char where[80] = "";
    if (rs.node >= 0)
        snprintf(where, sizeof where, " on NUMA node %d%s", rs.node,
                 rs.node == l->be->numa_node ? " (the GPU's)" : "");
    else if (l->be->numa_node >= 0)
        snprintf(where, sizeof where, ", not placed on the GPU's NUMA node %d",
                 l->be->numa_node);
    char grows[64] = "";
    if (l->rc.auto_prefetch)
        snprintf(grows, sizeof grows, ", up to %d slots as needed (PL_AUTO)",
                 l->prefetch_max);
    log_msg(&l->log, PL_LOG_NOTICE,
            "backend: %s; rank %d of %d from %s; %lld files, %d classes; "
            "%d worker%s (%s); ring %d x %.1f MiB %s%s%s",
            l->be->name, l->rc.rank, l->rc.world, l->rc.rank_source,
            (long long)catalog_size(&l->cat), catalog_classes(&l->cat),
            l->rc.num_workers, l->rc.num_workers == 1 ? "" : "s",
            l->rc.workers_why, rs.slots, mib / rs.slots,
            rs.kind == HOSTMEM_PINNED    ? "pinned"
            : rs.kind == HOSTMEM_MANAGED ? "managed"
                                         : "pageable",
            where, grows);
}

/* The ring, the device buffers and the threads, made with the backend's
 * device current on the caller's thread, and the caller's put back. */
static int start_on_device(pl_loader *l)
{
    int saved;
    int rc = l->be->ops->enter(l->be, &saved);
    if (rc < 0)
        return rc;
    output_plan_make(&l->out, &l->rc.cfg,
                     l->rc.has_transform ? &l->rc.ops : NULL, l->be, l->rc.rank,
                     catalog_classes(&l->cat));
    if (l->rc.nviews) {
        if (!(l->views = calloc((size_t)l->rc.nviews, sizeof *l->views))) {
            l->be->ops->leave(l->be, saved);
            return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
        }
        output_plan_views(&l->out, &l->rc.cfg, l->rc.view_ops, l->rc.view_w,
                          l->rc.view_h, l->rc.nviews, l->views);
    }
    if (l->out.batch_op && l->out.num_classes < catalog_classes(&l->cat)) {
        l->be->ops->leave(l->be, saved);
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.transform: mixup: "
                       "num_classes=%d, and the data has %d classes: a "
                       "label past it would have no place in the soft "
                       "labels",
                       l->out.num_classes, catalog_classes(&l->cat));
    }
    if (l->out.batch_op && l->out.num_classes < 1) {
        l->be->ops->leave(l->be, saved);
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.transform: mixup makes soft "
                       "labels, and %s has no classes: name num_classes, or "
                       "give the samples labels",
                       l->rc.cfg.data);
    }
    rc = start_pipeline(l);
    l->be->ops->leave(l->be, saved);
    return rc;
}

static int loader_create(const pl_config *cfg, pl_loader **out);

/* The caller's config of `size` bytes, as this library's pl_config: fields
 * past the caller's size are 0 (their defaults); fields past ours, from a
 * newer header, must be 0 too, or they would be ignored. */
PL_EXPORT int pl_loader_create_sized(const pl_config *cfg, size_t size,
                                     pl_loader **out)
{
    if (out)
        *out = NULL;
    if (!cfg)
        return loader_create(NULL, out);
    int rc = abi_check("pl_loader_create", "pl_config", size, ABI_MIN_CONFIG);
    if (rc < 0)
        return rc;
    for (size_t k = sizeof(pl_config); k < size; k++)
        if (((const unsigned char *)cfg)[k])
            return err_set(PL_EINVAL,
                           "pl_loader_create: the config sets fields that "
                           "pinload %s does not know (byte %zu of %zu; "
                           "built against a newer pinload.h?)",
                           pl_version(), k, size);
    pl_config c;
    abi_copy_out(&c, sizeof c, cfg, size < sizeof c ? size : sizeof c);
    return loader_create(&c, out);
}

static int loader_create(const pl_config *cfg, pl_loader **out)
{
    if (!out)
        return err_set(PL_EINVAL, "pl_loader_create: out is NULL");
    *out = NULL;
    pl_loader *l = calloc(1, sizeof *l);
    if (!l)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    catalog_init(&l->cat);
    l->pid = getpid();
    int rc = config_resolve(cfg, &l->rc);
    if (rc < 0) {
        free(l);
        return rc;
    }
    const pl_config *c = &l->rc.cfg;
    logger_init(&l->log, c->log, c->log_ctx);
    l->have_log = 1;
    /* The shard order streams remote shards: the positions a window
     * shuffles say how many shards the reads want at once. */
    const int64_t window = c->order != PL_ORDER_SHARDS ? 0
                           : c->shuffle                ? c->shuffle_window
                                                       : 1;
    const remote_opts remote = {.cache_dir = c->cache_dir,
                                .cache_limit = c->cache_limit,
                                .timeout_ms = c->remote_timeout_ms,
                                .retries = c->remote_retries,
                                .create_timeout_ms =
                                    c->remote_create_timeout_ms,
                                .stream_window = window,
                                .ranks = l->rc.local_world};
    for (int k = 0; k < l->rc.nextras; k++)
        l->extra_names[k] = l->rc.extras[k];
    catalog_set_extras(&l->cat, l->extra_names, l->rc.nextras,
                       c->extras_required);
    if (c->label_field && c->label_field[0] &&
        (rc = catalog_set_label_field(&l->cat, c->label_field)) < 0)
        goto fail;
    if ((rc = input_open(&l->cat, c->data, &remote, &l->log)) < 0)
        goto fail;
    l->rc.cfg.label_field = NULL; /* the catalog has a copy */
    sampler_init(&l->smp, catalog_size(&l->cat), c->seed, c->shuffle,
                 l->rc.rank, l->rc.world, c->shard_mode == PL_SHARD_DROP);
    if ((rc = plan_order(l, c->data)) < 0)
        goto fail;
    l->rc.cfg.data = NULL; /* not kept: the catalog has what it needs */
    l->rc.cfg.cache_dir = NULL;
    if ((rc = plan_epoch(l)) < 0 || (rc = plan_start(l)) < 0)
        goto fail;
    plan_stream(l);
    failures_init(&l->fails, catalog_size(&l->cat));
    l->have_fails = 1;
    if ((rc = backend_open(&l->be, c->device, l->rc.local_rank, &l->log)) < 0)
        goto fail;
    if ((rc = start_on_device(l)) < 0)
        goto fail;
    fill_info(l);
    announce(l);
#ifdef __GLIBC__
    /* Create's transients (the tables read to be checked, the shards'
     * member indexes) are freed by now: hand the pages back, so that a
     * rank's private memory is what it keeps (tests/system/test_memory). */
    malloc_trim(0);
#endif
    *out = l;
    return 0;
fail : {
    /* Tear-down may overwrite the detail; keep the one that matters. */
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", pl_last_error());
    pl_loader_destroy(l);
    err_set(rc, "%s", detail);
}
    return rc;
}

/* ---- destroy ---- */

PL_EXPORT void pl_loader_destroy(pl_loader *l)
{
    if (!l)
        return;
    /* In a forked child there is nothing to join and no lock to trust:
     * its memory is left as it is (the parent frees its own). */
    if (l->pid != getpid())
        return;
    /* Stop everything that waits, join every thread, and only then free:
     * workers finish the sample in hand, the prefetcher its current step. */
    if (l->have_ring)
        ring_stop(&l->ring);
    if (l->have_ho)
        handoff_stop(&l->ho);
    copier_stop(&l->cp);   /* a no-op unless it started */
    catalog_stop(&l->cat); /* a worker fetching a remote shard gives up */
    pool_destroy(l->pool);
    int saved = 0; /* frees on the loader's device, the caller's kept */
    const int entered = l->be && l->be->ops->enter(l->be, &saved) == 0;
    /* The caller's kernels on released batches are waited for within the
     * time limit that bounds the rest of destroy (max_decode_ms). */
    const int32_t lim = l->rc.cfg.max_decode_ms;
    const int ms = lim < 0 ? -1 : lim == 0 ? DEFAULT_MAX_DECODE_MS : lim;
    int busy = 0;
    if (l->have_ho)
        busy = handoff_fini(&l->ho, ms); /* waits for in-flight copies */
    if (l->have_dg) /* its streams write the ring's device memory */
        decode_gpu_close(&l->dg);
    if (busy && l->have_log)
        log_msg(&l->log, PL_LOG_WARNING,
                "pl_loader_destroy: work on %d released batch%s still ran "
                "after %d ms (the caller's kernels on the streams given to "
                "pl_loader_release): %s device memory, streams and host "
                "ring are left allocated rather than freed under it",
                busy, busy == 1 ? "" : "es", ms, busy == 1 ? "its" : "their");
    if (l->have_ring && !busy)
        ring_fini(&l->ring);
    if (entered)
        l->be->ops->leave(l->be, saved);
    backend_close(l->be);
    if (l->have_fails)
        failures_fini(&l->fails);
    sampler_fini(&l->smp);
    catalog_close(&l->cat);
    if (l->have_log)
        logger_fini(&l->log);
    if (l->have_tune || l->have_rtune)
        pthread_mutex_destroy(&l->tune_mu);
    if (!busy) { /* else the ring inside it is still the copies' */
        free(l->views);
        free(l);
    }
}

/* ---- per batch ---- */

PL_EXPORT int pl_loader_next(pl_loader *l, const pl_batch **out)
{
    if (!l || !out)
        return err_set(PL_EINVAL, "pl_loader_next: NULL argument");
    *out = NULL;
    if (forked(l, "pl_loader_next"))
        return PL_EINVAL;
    const int rc = handoff_next(&l->ho, out);
    if ((l->have_tune || l->have_rtune) && rc == 0)
        tune_step(l);
    return rc;
}

PL_EXPORT int pl_loader_release(pl_loader *l, const pl_batch *b,
                                struct CUstream_st *stream)
{
    if (!l || !b)
        return err_set(PL_EINVAL, "pl_loader_release: NULL argument");
    if (forked(l, "pl_loader_release"))
        return PL_EINVAL;
    return handoff_release(&l->ho, b, &stream, 1);
}

PL_EXPORT int pl_loader_release_streams(pl_loader *l, const pl_batch *b,
                                        struct CUstream_st *const *streams,
                                        int n)
{
    if (!l || !b || !streams)
        return err_set(PL_EINVAL, "pl_loader_release_streams: NULL argument");
    if (n < 1 || n > PL_RELEASE_STREAMS_MAX)
        return err_set(PL_EINVAL,
                       "pl_loader_release_streams: n is %d, not 1 to %d", n,
                       PL_RELEASE_STREAMS_MAX);
    if (forked(l, "pl_loader_release_streams"))
        return PL_EINVAL;
    return handoff_release(&l->ho, b, streams, n);
}

PL_EXPORT int pl_batch_wait(const pl_batch *b, struct CUstream_st *stream)
{
    if (!b)
        return err_set(PL_EINVAL, "pl_batch_wait: batch is NULL");
    if (!b->ready)
        return 0; /* host backend: the data is complete already */
    /* A batch is its device buffer (dev_buffers.h): its stream knows the
     * device, whose streams NULL and cudaStreamPerThread must name. */
    return backend_stream_wait(((const dbuf *)b)->stream, stream);
}

/* ---- queries ---- */

PL_EXPORT int pl_loader_info_sized(const pl_loader *l, pl_info *out,
                                   size_t size)
{
    if (!l || !out)
        return err_set(PL_EINVAL, "pl_loader_info: NULL argument");
    const int rc = abi_check("pl_loader_info", "pl_info", size, ABI_MIN_INFO);
    if (rc < 0)
        return rc;
    abi_copy_out(out, size, &l->info, sizeof l->info);
    return 0;
}

PL_EXPORT int pl_loader_class_name(const pl_loader *l, int32_t label,
                                   const char **name)
{
    if (!l || !name)
        return err_set(PL_EINVAL, "pl_loader_class_name: NULL argument");
    if (label < 0 || label >= catalog_classes(&l->cat))
        return err_set(PL_EINVAL,
                       "pl_loader_class_name: label %d outside "
                       "[0, %d)",
                       label, catalog_classes(&l->cat));
    *name = catalog_class(&l->cat, label);
    return 0;
}

PL_EXPORT int pl_loader_sample(const pl_loader *l, int64_t index,
                               const char **path, int32_t *label)
{
    if (!l)
        return err_set(PL_EINVAL, "pl_loader_sample: loader is NULL");
    if (index < 0 || index >= catalog_size(&l->cat))
        return err_set(PL_EINVAL,
                       "pl_loader_sample: index %lld outside "
                       "[0, %lld)",
                       (long long)index, (long long)catalog_size(&l->cat));
    char why[SAMPLE_REASON_MAX];
    int rc = path ? catalog_name(&l->cat, index, path, why, sizeof why) : 0;
    if (rc == 0 && label)
        rc = catalog_label(&l->cat, index, label, why, sizeof why);
    if (rc < 0)
        return err_set(rc, "pl_loader_sample: sample %lld: %s",
                       (long long)index, why);
    return 0;
}

/* The bytes at *loc into buf[0, cap) for fn (pl_loader_read_sample or
 * _extra): *len the bytes there are, PL_EINVAL when buf cannot hold them,
 * or the read's error naming `what`. */
static int read_to_buffer(const pl_loader *l, const char *fn, const char *what,
                          const location *loc, void *buf, size_t cap,
                          size_t *len)
{
    fileio_buf fb = {0};
    char reason[SAMPLE_REASON_MAX];
    int rc = fileio_read_loc(loc, l->rc.cfg.max_file_bytes, &fb, reason,
                             sizeof reason);
    if (rc == 0) {
        *len = fb.len;
        if (fb.len > cap || (!buf && fb.len))
            rc = err_set(PL_EINVAL, "%s: %s: %zu bytes, the buffer holds %zu",
                         fn, what, fb.len, buf ? cap : 0);
        else if (fb.len)
            memcpy(buf, fb.data, fb.len);
    } else {
        rc = err_set(rc, "%s: %s: %s", fn, what, reason);
    }
    fileio_buf_free(&fb);
    return rc;
}

static int check_index(const pl_loader *l, const char *fn, int64_t index)
{
    if (index < 0 || index >= catalog_size(&l->cat))
        return err_set(PL_EINVAL, "%s: index %lld outside [0, %lld)", fn,
                       (long long)index, (long long)catalog_size(&l->cat));
    return 0;
}

PL_EXPORT int pl_loader_read_sample(const pl_loader *l, int64_t index,
                                    void *buf, size_t cap, size_t *len)
{
    static const char fn[] = "pl_loader_read_sample";
    if (!l || !len)
        return err_set(PL_EINVAL, "%s: NULL argument", fn);
    *len = 0;
    int rc = check_index(l, fn, index);
    if (rc < 0)
        return rc;
    char name[CATALOG_NAME_MAX], why[SAMPLE_REASON_MAX];
    const char *path = catalog_name_into(&l->cat, index, name, sizeof name);
    location loc;
    if ((rc = catalog_locate(&l->cat, index, &loc, why, sizeof why)) < 0)
        return err_set(rc, "%s: %s: %s", fn, path, why);
    return read_to_buffer(l, fn, path, &loc, buf, cap, len);
}

PL_EXPORT int pl_loader_read_extra(const pl_loader *l, int64_t index,
                                   int32_t extra, void *buf, size_t cap,
                                   size_t *len)
{
    static const char fn[] = "pl_loader_read_extra";
    if (!l || !len)
        return err_set(PL_EINVAL, "%s: NULL argument", fn);
    *len = 0;
    int rc = check_index(l, fn, index);
    if (rc < 0)
        return rc;
    if (extra < 0 || extra >= l->rc.nextras)
        return err_set(PL_EINVAL,
                       "%s: extra %d outside [0, %d) (config.extras)", fn,
                       (int)extra, l->rc.nextras);
    char name[CATALOG_NAME_MAX];
    const char *path = catalog_name_into(&l->cat, index, name, sizeof name);
    location loc[PL_EXTRAS_MAX];
    int has[PL_EXTRAS_MAX];
    char why[SAMPLE_REASON_MAX];
    if ((rc = catalog_locate_extras(&l->cat, index, loc, has, why,
                                    sizeof why)) < 0)
        return err_set(rc, "%s: %s: %s", fn, path, why);
    if (!has[extra])
        return err_set(PL_ENOEXTRA, "%s: %s: no %s extra", fn, path,
                       l->extra_names[extra]);
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "%s's %s", path, l->extra_names[extra]);
    return read_to_buffer(l, fn, what, &loc[extra], buf, cap, len);
}

PL_EXPORT int pl_loader_epoch_order(const pl_loader *l, int64_t epoch,
                                    int64_t *order, int64_t n)
{
    if (!l || !order)
        return err_set(PL_EINVAL, "pl_loader_epoch_order: NULL argument");
    if (epoch < 0 || n != l->smp.per_rank)
        return err_set(PL_EINVAL,
                       "pl_loader_epoch_order: want epoch >= 0 "
                       "and n == samples_per_epoch (%lld), got %lld and %lld",
                       (long long)l->smp.per_rank, (long long)epoch,
                       (long long)n);
    for (int64_t j = 0; j < n; j++)
        order[j] = sampler_index(&l->smp, epoch, j);
    return 0;
}

PL_EXPORT int pl_loader_state(const pl_loader *l, pl_state *state)
{
    if (!l || !state)
        return err_set(PL_EINVAL, "pl_loader_state: NULL argument");
    if (forked(l, "pl_loader_state"))
        return PL_EINVAL;
    state_fields f = l->print;
    handoff_position((handoff *)&l->ho, &f.epoch, &f.batch, &f.position);
    state_encode(&f, state);
    return 0;
}

PL_EXPORT int pl_loader_stats_sized(const pl_loader *l, pl_stats *caller,
                                    size_t size)
{
    if (!l || !caller)
        return err_set(PL_EINVAL, "pl_loader_stats: NULL argument");
    int rc = abi_check("pl_loader_stats", "pl_stats", size, ABI_MIN_STATS);
    if (rc < 0)
        return rc;
    pl_stats ours, *out = &ours;
    if (forked(l, "pl_loader_stats"))
        return PL_EINVAL;
    pool_stats ps;
    handoff_stats hs;
    copier_stats fs;
    ring_stats rs;
    pool_get_stats(l->pool, &ps);
    handoff_get_stats(&l->ho, &hs);
    copier_get_stats((copier *)&l->cp, &fs); /* harvests: atomics */
    ring_get_stats(&l->ring, &rs);
    memset(out, 0, sizeof *out);
    out->images_decoded = ps.decoded;
    out->images_failed = ps.failed;
    out->images_warned = ps.warned;
    out->bytes_read = ps.bytes_read;
    out->ns_read = ps.ns_read;
    out->ns_decode = ps.ns_decode;
    out->ns_augment = ps.ns_augment;
    out->batches = hs.batches;
    out->bytes_copied = fs.bytes_copied;
    out->ns_copy = fs.ns_copy;
    out->ns_wait = hs.ns_wait;
    out->pinned_bytes = rs.pinned_bytes + hs.mirror_bytes_locked;
    out->ns_h2d = fs.ns_h2d;
    out->bytes_h2d = fs.bytes_h2d;
    out->device_buffers = (uint64_t)hs.buffers;
    out->ns_slot_wait = rs.ns_slot_wait;
    out->ns_buffer_wait = hs.ns_buffer_wait;
    out->images_gpu = ps.offloaded;
    out->images_gpu_declined = ps.declined;
    out->gpu_decode_bytes = decode_gpu_bytes(&l->dg);
    if (l->have_tune) {
        pthread_mutex_lock((pthread_mutex_t *)&l->tune_mu);
        out->workers_active = (uint64_t)l->tune.active;
        pthread_mutex_unlock((pthread_mutex_t *)&l->tune_mu);
    } else {
        out->workers_active = (uint64_t)l->rc.num_workers;
    }
    out->prefetch_active = (uint64_t)rs.slots;
    abi_copy_out(caller, size, &ours, sizeof ours);
    return 0;
}

/* out[] is an array of the caller's pl_failure, `size` bytes apart. */
PL_EXPORT int pl_loader_failures_sized(const pl_loader *l, size_t first,
                                       pl_failure *out, size_t cap, size_t *n,
                                       size_t size)
{
    if (!l || !n || (cap && !out))
        return err_set(PL_EINVAL, "pl_loader_failures: NULL argument");
    if (forked(l, "pl_loader_failures"))
        return PL_EINVAL;
    const int rc =
        abi_check("pl_loader_failures", "pl_failure", size, ABI_MIN_FAILURE);
    if (rc < 0)
        return rc;
    *n = 0;
    pl_failure chunk[32];
    while (*n < cap) {
        const size_t want = cap - *n < 32 ? cap - *n : 32;
        const size_t got =
            failures_copy((failures *)&l->fails, first + *n, chunk, want);
        for (size_t i = 0; i < got; i++)
            abi_copy_out((char *)out + (*n + i) * size, size, &chunk[i],
                         sizeof chunk[i]);
        *n += got;
        if (got < want)
            break;
    }
    return 0;
}
