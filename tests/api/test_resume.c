/* Resuming from a saved state, and equal steps on every rank: a loader
 * created from the state saved after batch k delivers exactly what the
 * uninterrupted run delivered after it (bytes, labels, indices, epoch and
 * batch numbers), whatever its workers, prefetch and memory, without
 * decoding what came before; a state saved for something else is refused;
 * an elastic restart starts the interrupted epoch again; every rank takes
 * the same number of steps whatever bad files it meets, and a rank with no
 * good sample at all is an error, not an empty epoch. Run on the host
 * backend by `make test` and on simulated CUDA by `make test CUDA=sim`. */
#include <pthread.h>

#include "pinload.h"
#include "testcuda.h"
#include "testrun.h"
#include "testutil.h"

#define TIMEOUT 120
#define FILES 23 /* batch 4: five full batches and one of 3 */
#define BATCH 4
#define BATCHES 6

static void cfg_for(pl_config *c, const char *data)
{
    pl_config_default(c);
    c->data = data;
    c->device = tu_device();
    c->log = quiet;
    c->batch_size = BATCH;
    c->width = 16;
    c->height = 16;
    c->num_workers = 1;
    c->prefetch = 1;
    c->device_buffers = 1;
    c->augment = PL_AUGMENT_TRAIN;
    c->seed = 11;
    c->rank = 0;
    c->world_size = 1;
}

/* The other shape of pipeline a resumed loader gets: four workers, more
 * of everything in flight, pageable memory. */
static void other_shape(pl_config *c)
{
    c->num_workers = 4;
    c->prefetch = 3;
    c->device_buffers = 3;
    c->memory = PL_MEMORY_PAGEABLE;
}

static pl_state state_of(const pl_loader *l)
{
    pl_state s;
    memset(&s, 0xA5, sizeof s);
    cr_assert_eq(pl_loader_state(l, &s), 0, "%s", pl_last_error());
    return s;
}

static void state_says(const pl_state *s, int64_t epoch, int64_t batch,
                       int64_t position)
{
    int64_t e = -1, b = -1, p = -1;
    cr_assert_eq(pl_state_get(s, &e, &b, &p), 0, "%s", pl_last_error());
    cr_assert_eq(e, epoch, "epoch %lld, want %lld", (long long)e,
                 (long long)epoch);
    cr_assert_eq(b, batch, "batch %lld, want %lld", (long long)b,
                 (long long)batch);
    cr_assert_eq(
        p, position, "position %lld, want %lld (epoch %lld batch %lld)",
        (long long)p, (long long)position, (long long)epoch, (long long)batch);
}

/* The uninterrupted run: two epochs, one batch at a time, with the state
 * before each batch of epoch 0 (states[k] is the state after k batches)
 * and the state after its PL_EPOCH_END. */
typedef struct reference {
    run epoch[2];
    pl_state states[MAXB + 1];
    pl_state after_end;
    int64_t positions[MAXB + 1]; /* pl_state_get's position of states[k] */
} reference;

static void record_reference(const pl_config *c, reference *ref)
{
    pl_loader *l = create(c);
    const pl_info in = info_of(l);
    ref->epoch[0].nb = 0;
    run whole;
    memset(&whole, 0, sizeof whole);
    whole.epoch = 0;
    whole.sample_bytes = in.sample_bytes;
    whole.bytes = malloc(in.sample_bytes * MAXS);
    for (int k = 0;; k++) {
        cr_assert_leq(k, MAXB);
        ref->states[k] = state_of(l);
        cr_assert_eq(
            pl_state_get(&ref->states[k], NULL, NULL, &ref->positions[k]), 0);
        run one;
        const int ended = run_batches(l, 0, k, 1, &one);
        if (ended) {
            run_free(&one);
            cr_assert_eq(k, in.batches_per_epoch);
            break;
        }
        memcpy(whole.bytes + (size_t)whole.n * in.sample_bytes, one.bytes,
               (size_t)one.n * in.sample_bytes);
        for (int i = 0; i < one.n; i++) {
            whole.idx[whole.n + i] = one.idx[i];
            whole.lab[whole.n + i] = one.lab[i];
            whole.st[whole.n + i] = one.st[i];
        }
        whole.n += one.n;
        whole.counts[whole.nb++] = one.counts[0];
        run_free(&one);
    }
    ref->epoch[0] = whole;
    ref->after_end = state_of(l);
    run_epoch(l, 1, &ref->epoch[1]);
    pl_loader_destroy(l);
}

static void reference_free(reference *ref)
{
    run_free(&ref->epoch[0]);
    run_free(&ref->epoch[1]);
}

/* got holds batches first.. of ref's epoch: the same batches, samples and
 * bytes as ref from that batch on. */
static void assert_same_tail(const run *ref, int first, const run *got,
                             const char *what)
{
    cr_assert_eq(got->nb, ref->nb - first, "%s: %d batches after %d, want %d",
                 what, got->nb, first, ref->nb - first);
    int from = 0;
    for (int k = 0; k < first; k++)
        from += ref->counts[k];
    for (int k = 0; k < got->nb; k++)
        cr_assert_eq(got->counts[k], ref->counts[first + k],
                     "%s: batch %d count", what, first + k);
    cr_assert_eq(got->n, ref->n - from, "%s", what);
    for (int k = 0; k < got->n; k++) {
        cr_assert_eq(got->idx[k], ref->idx[from + k], "%s: sample %d", what,
                     from + k);
        cr_assert_eq(got->lab[k], ref->lab[from + k], "%s", what);
        cr_assert_eq(got->st[k], ref->st[from + k], "%s", what);
    }
    cr_assert_eq(memcmp(got->bytes, sample_at(ref, from),
                        ref->sample_bytes * (size_t)got->n),
                 0, "%s: pixels differ after batch %d", what, first);
}

/* Creates a loader from c resumed at *s, reads the rest of epoch 0 (from
 * batch k) and epoch 1, and compares both with the reference. */
static void assert_resume_matches(const pl_config *c, const pl_state *s, int k,
                                  const reference *ref, const char *what)
{
    pl_config r = *c;
    r.resume = s;
    r.first_epoch = 5; /* ignored when resuming */
    pl_loader *l = create(&r);
    run tail, next;
    cr_assert_eq(run_batches(l, 0, k, MAXB, &tail), 1, "%s: no epoch end",
                 what);
    assert_same_tail(&ref->epoch[0], k, &tail, what);
    run_epoch(l, 1, &next);
    assert_same_run(&ref->epoch[1], &next, what);
    run_free(&tail);
    run_free(&next);
    pl_loader_destroy(l);
}

/* ---- resuming where the run stopped ---- */

Test(resume, after_batch_k_gives_the_rest_byte_for_byte_with_other_workers,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    reference ref;
    record_reference(&c, &ref);
    cr_assert_eq(ref.epoch[0].nb, BATCHES);
    cr_assert_eq(ref.epoch[0].counts[BATCHES - 1], FILES - 5 * BATCH);
    /* No bad file: the state after batch k stands at position k * BATCH,
     * the last after the short batch at the epoch's length. */
    for (int k = 0; k <= BATCHES; k++)
        state_says(&ref.states[k], 0, k, k < BATCHES ? k * BATCH : FILES);
    state_says(&ref.after_end, 1, 0, 0);
    pl_config other = c;
    other_shape(&other);
    const int ks[] = {0, 1, 3, BATCHES};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "1 worker, state after batch %d", ks[i]);
        assert_resume_matches(&c, &ref.states[ks[i]], ks[i], &ref, what);
        snprintf(what, sizeof what, "4 workers, state after batch %d", ks[i]);
        assert_resume_matches(&other, &ref.states[ks[i]], ks[i], &ref, what);
    }
    /* After PL_EPOCH_END: epoch 1 from its start. */
    pl_config r = other;
    r.resume = &ref.after_end;
    pl_loader *l = create(&r);
    run next;
    run_epoch(l, 1, &next);
    assert_same_run(&ref.epoch[1], &next, "state after the epoch's end");
    run_free(&next);
    pl_loader_destroy(l);
    reference_free(&ref);
    tu_rm_rf(root);
}

/* The state is plain bytes: saved to a file, read back in another loader,
 * and the same whatever pipeline saved it. */
Test(resume, the_state_is_the_same_bytes_whatever_the_pipeline,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    pl_config other = c;
    other_shape(&other);
    pl_loader *a = create(&c), *b = create(&other);
    for (int k = 0; k < 3; k++) {
        run ra, rb;
        run_batches(a, 0, k, 1, &ra);
        run_batches(b, 0, k, 1, &rb);
        run_free(&ra);
        run_free(&rb);
    }
    const pl_state sa = state_of(a), sb = state_of(b);
    cr_assert_eq(memcmp(&sa, &sb, sizeof sa), 0);
    /* Where the batch was released or not does not matter. */
    const pl_batch *held;
    cr_assert_eq(pl_loader_next(a, &held), 0, "%s", pl_last_error());
    const pl_state s_held = state_of(a);
    pl_loader_release(a, held, NULL);
    const pl_state s_released = state_of(a);
    cr_assert_eq(memcmp(&s_held, &s_released, sizeof s_held), 0);
    state_says(&s_held, 0, 4, 4 * BATCH);
    pl_loader_destroy(a);
    pl_loader_destroy(b);
    tu_rm_rf(root);
}

/* Resuming decodes nothing of what came before: the files of the batches
 * before k are made unreadable (same paths, so the same list) and the rest
 * of the epoch still comes, byte for byte, under PL_ON_ERROR_FAIL. */
Test(resume, costs_no_decoding_of_the_batches_before_k, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    c.on_error = PL_ON_ERROR_FAIL;
    reference ref;
    record_reference(&c, &ref);
    const int k = 3;
    const int before = 3 * BATCH;
    pl_loader *probe = create(&c);
    for (int i = 0; i < before; i++) {
        const char *path;
        cr_assert_eq(pl_loader_sample(probe, ref.epoch[0].idx[i], &path, NULL),
                     0);
        tu_write_file(path, "", 0); /* an empty file: PL_ENOTIMAGE */
    }
    pl_loader_destroy(probe);
    pl_config r = c;
    other_shape(&r);
    r.resume = &ref.states[k];
    pl_loader *l = create(&r);
    run tail;
    cr_assert_eq(run_batches(l, 0, k, MAXB, &tail), 1);
    assert_same_tail(&ref.epoch[0], k, &tail, "resumed over unreadable files");
    run_free(&tail);
    pl_loader_destroy(l);
    reference_free(&ref);
    tu_rm_rf(root);
}

/* ---- bad files: skipped places, wrap-around, positions ---- */

/* Three bad files among 23: where a state stands counts the positions of
 * the order it went through, bad ones included and wrapping past the end. */
Test(resume, under_skip_resumes_exactly_across_skipped_and_wrapped_samples,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES - 3, 3);
    char bad[3][256];
    for (int i = 0; i < 3; i++) {
        snprintf(bad[i], sizeof bad[i], "%s/c%d/bad%d.jpg", root, i, i);
        tu_write_file(bad[i], i == 0 ? "" : "GIF89a", i == 0 ? 0 : 6);
    }
    pl_config c;
    cfg_for(&c, root);
    c.on_error = PL_ON_ERROR_SKIP;
    reference ref;
    record_reference(&c, &ref);
    /* Equal steps: the nominal batches whatever was skipped. */
    cr_assert_eq(ref.epoch[0].nb, BATCHES);
    cr_assert_eq(ref.epoch[1].nb, BATCHES);
    cr_assert_eq(ref.epoch[0].n, FILES);
    /* Positions: after the last sample delivered, in the order extended by
     * its own start again. */
    pl_loader *l = create(&c);
    int64_t order[FILES];
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, FILES), 0);
    char is_bad[FILES] = {0};
    for (int64_t i = 0; i < FILES; i++) {
        const char *p;
        pl_loader_sample(l, i, &p, NULL);
        for (int b = 0; b < 3; b++)
            is_bad[i] |= strcmp(p, bad[b]) == 0;
    }
    pl_loader_destroy(l);
    int64_t pos = 0;
    int delivered = 0;
    for (int k = 0; k <= BATCHES; k++) {
        const int want = k < BATCHES ? k * BATCH : FILES;
        while (delivered < want) {
            if (!is_bad[order[pos % FILES]]) {
                cr_assert_eq(ref.epoch[0].idx[delivered], order[pos % FILES],
                             "sample %d", delivered);
                delivered++;
            }
            pos++;
        }
        cr_assert_eq(ref.positions[k], pos, "after batch %d", k);
    }
    cr_assert_gt(pos, FILES, "the order wrapped around");
    pl_config other = c;
    other_shape(&other);
    const int ks[] = {1, 3, BATCHES - 1, BATCHES};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "skip, state after batch %d", ks[i]);
        assert_resume_matches(&other, &ref.states[ks[i]], ks[i], &ref, what);
    }
    reference_free(&ref);
    tu_rm_rf(root);
}

/* Three ranks, bad files spread over them: every rank delivers exactly
 * batches_per_epoch batches of the nominal sizes, its own order without
 * the bad files, wrapped around as far as needed. */
Test(resume, every_rank_takes_the_same_steps_whatever_its_bad_files,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 25, 2);
    /* Four bad files: the ranks meet different numbers of them. */
    for (int i = 0; i < 4; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/c%d/zz%d.jpg", root, i % 2, i);
        tu_write_file(p, "not a jpeg", 10);
    }
    const pl_on_error policies[] = {PL_ON_ERROR_SKIP, PL_ON_ERROR_SUBSTITUTE};
    for (int p = 0; p < 2; p++)
        for (int drop = 0; drop < 2; drop++) {
            int64_t batches = -1;
            for (int rank = 0; rank < 3; rank++) {
                pl_config c;
                cfg_for(&c, root);
                c.on_error = policies[p];
                c.drop_last = drop;
                c.rank = rank;
                c.world_size = 3;
                c.num_workers = 2;
                pl_loader *l = create(&c);
                const pl_info in = info_of(l);
                cr_assert_eq(in.samples_per_epoch, 10, "29 files, 3 ranks");
                cr_assert_eq(in.batches_per_epoch, drop ? 2 : 3);
                if (batches < 0)
                    batches = in.batches_per_epoch;
                cr_assert_eq(in.batches_per_epoch, batches);
                int64_t order[10];
                pl_loader_epoch_order(l, 0, order, 10);
                char bad[29] = {0};
                for (int64_t i = 0; i < 29; i++) {
                    const char *path;
                    pl_loader_sample(l, i, &path, NULL);
                    bad[i] = strstr(path, "/zz") != NULL;
                }
                run r;
                run_epoch(l, 0, &r);
                cr_assert_eq(r.nb, batches, "rank %d policy %d drop %d", rank,
                             p, drop);
                for (int k = 0; k < r.nb; k++)
                    cr_assert_eq(r.counts[k], k < 2 ? BATCH : 10 - 2 * BATCH);
                int64_t j = 0;
                for (int k = 0; k < r.n; k++) {
                    if (policies[p] == PL_ON_ERROR_SKIP)
                        while (bad[order[j % 10]])
                            j++;
                    cr_assert_eq(r.idx[k], order[j % 10], "rank %d sample %d",
                                 rank, k);
                    cr_assert_eq(r.st[k] != 0, bad[order[j % 10]]);
                    j++;
                }
                run_free(&r);
                pl_loader_destroy(l);
            }
        }
    tu_rm_rf(root);
}

/* Every file of rank 1's share is bad (shuffle off: rank 1 has the odd
 * positions): rank 1 gets PL_ENODATA naming the epoch and the count, from
 * then on, never an empty epoch; rank 0 its full epoch. */
Test(resume, a_rank_without_one_good_sample_gets_enodata, .timeout = TIMEOUT)
{
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 8; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/f%d.jpg", root, i);
        if (i % 2)
            tu_write_file(p, "GIF89a", 6);
        else
            tu_write_jpeg(p, 24, 24, (unsigned)i + 1, NULL);
    }
    for (int rank = 0; rank < 2; rank++) {
        pl_config c;
        cfg_for(&c, root);
        c.shuffle = 0;
        c.rank = rank;
        c.world_size = 2;
        c.batch_size = 3;
        pl_loader *l = create(&c);
        if (rank == 0) {
            run r;
            run_epoch(l, 0, &r);
            cr_assert_eq(r.nb, 2);
            cr_assert_eq(r.n, 4);
            const int64_t want[] = {0, 2, 4, 6};
            for (int k = 0; k < 4; k++)
                cr_assert_eq(r.idx[k], want[k]);
            run_free(&r);
        } else {
            for (int tries = 0; tries < 3; tries++) {
                const pl_batch *b = NULL;
                const int rc = pl_loader_next(l, &b);
                cr_assert_eq(rc, PL_ENODATA, "%s: %s", pl_err_name(rc),
                             pl_last_error());
                cr_assert_null(b);
                cr_assert_not_null(strstr(pl_last_error(), "epoch 0"), "%s",
                                   pl_last_error());
                cr_assert_not_null(strstr(pl_last_error(), "4"), "%s",
                                   pl_last_error());
            }
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

/* ---- states that do not fit ---- */

static uint64_t fnv64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* The format is documented: little-endian, the checksum in the last eight
 * bytes over the others. */
static void reseal(pl_state *s)
{
    const uint64_t h = fnv64(s->bytes, PL_STATE_BYTES - 8);
    for (int i = 0; i < 8; i++)
        s->bytes[PL_STATE_BYTES - 8 + i] = (uint8_t)(h >> (8 * i));
}

static void assert_refused(const pl_config *c, const pl_state *s,
                           const char *why)
{
    pl_config r = *c;
    r.resume = s;
    pl_loader *l = (pl_loader *)0x1;
    const int rc = pl_loader_create(&r, &l);
    cr_assert_eq(rc, PL_EINVAL, "%s: %s (%s)", why, pl_err_name(rc),
                 pl_last_error());
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.resume"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), why), "want \"%s\" in: %s", why,
                       pl_last_error());
}

Test(resume, a_damaged_or_mismatched_state_is_refused_naming_what_differs,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    pl_loader *l = create(&c);
    run one;
    run_batches(l, 0, 0, 2, &one);
    run_free(&one);
    const pl_state good = state_of(l);
    pl_loader_destroy(l);

    pl_state s = good;
    s.bytes[20] ^= 1;
    assert_refused(&c, &s, "damaged");
    cr_assert_eq(pl_state_get(&s, NULL, NULL, NULL), PL_EINVAL);
    s = good;
    memcpy(s.bytes, "PNG!", 4);
    assert_refused(&c, &s, "not a pinload state");
    s = good;
    s.bytes[4] = 3; /* a later format */
    reseal(&s);
    assert_refused(&c, &s, "format 3");
    s = good;
    s.bytes[16] = 99; /* batch 99 of an epoch of 6 */
    reseal(&s);
    assert_refused(&c, &s, "batch 99");
    /* Forged, the checksum made anew: every field is checked against what
     * this loader could have saved (a position of 2^63 - 1 made the
     * schedule top the epoch up for ever). */
    s = good; /* after batch 2 of 4 samples: position 8 */
    memset(s.bytes + 24, 0xff, 7);
    s.bytes[31] = 0x7f;
    reseal(&s);
    assert_refused(&c, &s, "position 9223372036854775807 is out of range");
    s = good;
    s.bytes[24] = 3; /* fewer positions than the samples of 2 batches */
    reseal(&s);
    assert_refused(&c, &s, "position 3 is out of range for batch 2");
    s = good;
    s.bytes[24] = 0x58; /* 600: past the 23 positions and one top-up pass */
    s.bytes[25] = 0x02; /* for each of the 23 samples (on_error SKIP) */
    reseal(&s);
    assert_refused(&c, &s, "position 600 is out of range");
    s = good;
    memset(s.bytes + 8, 0, 8);
    s.bytes[14] = 0x10; /* epoch 2^52 */
    reseal(&s);
    assert_refused(&c, &s, "epoch 4503599627370496 is out of range");
    memset(&s, 0, sizeof s);
    cr_assert_eq(pl_state_get(&s, NULL, NULL, NULL), PL_EINVAL);
    cr_assert_eq(pl_state_get(NULL, NULL, NULL, NULL), PL_EINVAL);

    pl_config m = c;
    m.batch_size = 5;
    assert_refused(&m, &good, "batch_size 4");
    m = c;
    m.width = 24;
    assert_refused(&m, &good, "16x16");
    m = c;
    m.seed = 12;
    assert_refused(&m, &good, "seed 11");
    m = c;
    m.augment = PL_AUGMENT_EVAL;
    assert_refused(&m, &good, "augment");
    m = c;
    m.on_error = PL_ON_ERROR_SUBSTITUTE;
    assert_refused(&m, &good, "on_error");
    m = c;
    m.shuffle = 0;
    assert_refused(&m, &good, "shuffle");
    m = c;
    m.mean[0] = 0.5f;
    assert_refused(&m, &good, "mean");
    /* Another file list: one more file; then the same count, one renamed. */
    char p[256], q[256];
    snprintf(p, sizeof p, "%s/c0/extra.jpg", root);
    tu_write_jpeg(p, 24, 24, 5, NULL);
    assert_refused(&c, &good, "23 files");
    remove(p);
    snprintf(p, sizeof p, "%s/c0/img00.jpg", root);
    snprintf(q, sizeof q, "%s/c0/img00b.jpg", root);
    cr_assert_eq(rename(p, q), 0);
    assert_refused(&c, &good, "another file list");
    cr_assert_eq(rename(q, p), 0);
    /* And the untouched state still works. */
    pl_config r = c;
    r.resume = &good;
    l = create(&r);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* ---- ranks ---- */

Test(resume,
     each_rank_resumes_its_own_state_and_an_elastic_restart_repeats_the_epoch,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 31, 3);
    pl_config c;
    cfg_for(&c, root);
    c.world_size = 2;
    c.rank = 0;
    pl_loader *l = create(&c);
    run skip;
    run_epoch(l, 0, &skip);
    run_free(&skip);
    run_batches(l, 1, 0, 2, &skip);
    run_free(&skip);
    const pl_state s0 = state_of(l);
    pl_loader_destroy(l);
    state_says(&s0, 1, 2, 2 * BATCH);

    /* Rank 1 of the same job may not take rank 0's state. */
    pl_config r1 = c;
    r1.rank = 1;
    assert_refused(&r1, &s0, "rank 0's");

    /* Three ranks now: epoch 1 from its start, with a notice, exactly as a
     * three-rank job's epoch 1. */
    for (int rank = 0; rank < 3; rank++) {
        pl_config e = c;
        e.world_size = 3;
        e.rank = rank;
        e.first_epoch = 1;
        run want, got;
        pl_loader *fresh = create(&e);
        run_epoch(fresh, 1, &want);
        pl_loader_destroy(fresh);
        tu_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
        e.first_epoch = 0;
        e.resume = &s0;
        e.log = tu_keep_log;
        e.log_ctx = &n;
        pl_loader *el = create(&e);
        run_epoch(el, 1, &got);
        pl_loader_destroy(el);
        assert_same_run(&want, &got, "elastic restart");
        cr_assert_not_null(strstr(n.text, "world_size 2"), "%s", n.text);
        cr_assert_not_null(strstr(n.text, "epoch 1 starts again"), "%s",
                           n.text);
        run_free(&want);
        run_free(&got);
    }
    tu_rm_rf(root);
}

/* The state identifies the data by what it is (names relative to the data
 * root, labels), not by where it is mounted: a state saved on one copy
 * resumes on another (node-local scratch, say) and on the same folder
 * spelled another way, byte for byte; a copy that differs is refused. */
Test(resume, a_state_moves_with_a_copy_of_the_dataset, .timeout = TIMEOUT)
{
    char root[64], copy[128], cmd[512];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    reference ref;
    record_reference(&c, &ref);
    snprintf(copy, sizeof copy, "%s-copy", root);
    snprintf(cmd, sizeof cmd, "cp -r %s %s", root, copy);
    cr_assert_eq(system(cmd), 0);
    pl_config moved = c;
    moved.data = copy;
    assert_resume_matches(&moved, &ref.states[3], 3, &ref, "a copy elsewhere");
    char spelled[192];
    snprintf(spelled, sizeof spelled, "%s/../%s/.", root,
             strrchr(root, '/') + 1);
    moved.data = spelled;
    assert_resume_matches(&moved, &ref.states[2], 2, &ref, "root/../root/.");
    /* A copy with one file renamed is another dataset. */
    snprintf(cmd, sizeof cmd,
             "cd %s/c0 && mv \"$(ls | head -1)\" zz_renamed.jpg", copy);
    cr_assert_eq(system(cmd), 0);
    moved.data = copy;
    assert_refused(&moved, &ref.states[3], "another file list");
    reference_free(&ref);
    tu_rm_rf(copy);
    tu_rm_rf(root);
}

/* FNV-1a over bytes, as format 1 hashed its file list. */
static uint64_t fnv_more(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}

/* A state of format 1 (pinload 0.1: the list hashed by full paths) still
 * resumes: a checkpoint made before an upgrade is not lost. */
Test(resume, a_state_of_format_1_still_resumes, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    reference ref;
    record_reference(&c, &ref);
    /* Format 1's list hash: every full path and label, in order. */
    pl_loader *l = create(&c);
    uint64_t h = 0xcbf29ce484222325u;
    for (int64_t i = 0; i < FILES; i++) {
        const char *path;
        int32_t label;
        cr_assert_eq(pl_loader_sample(l, i, &path, &label), 0);
        h = fnv_more(h, path, strlen(path) + 1);
        uint8_t b[8];
        for (int k = 0; k < 8; k++)
            b[k] = (uint8_t)((uint64_t)(uint32_t)label >> (8 * k));
        h = fnv_more(h, b, 8);
    }
    pl_loader_destroy(l);
    pl_state s = ref.states[3];
    s.bytes[4] = 1;
    for (int k = 0; k < 8; k++)
        s.bytes[72 + k] = (uint8_t)(h >> (8 * k));
    reseal(&s);
    assert_resume_matches(&c, &s, 3, &ref, "a format 1 state");
    /* And format 1 with another list is still refused. */
    s.bytes[72] ^= 1;
    reseal(&s);
    assert_refused(&c, &s, "another file list");
    reference_free(&ref);
    tu_rm_rf(root);
}

/* The float layout is part of what a state stands for: a channels-last
 * state is refused by a planar loader, naming it; the u8 layout cannot
 * change, so there the flag is no difference. */
Test(resume, a_state_names_a_channels_last_mismatch, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, FILES, 3);
    pl_config c;
    cfg_for(&c, root);
    c.format = PL_FORMAT_F32_NCHW;
    c.channels_last = 1;
    pl_loader *l = create(&c);
    run one;
    run_batches(l, 0, 0, 2, &one);
    run_free(&one);
    const pl_state s = state_of(l);
    pl_loader_destroy(l);
    pl_config planar = c;
    planar.channels_last = 0;
    assert_refused(&planar, &s, "channels_last");
    /* u8: the flag changes nothing, so nothing is refused. */
    c.format = PL_FORMAT_U8_NHWC;
    l = create(&c);
    run_batches(l, 0, 0, 1, &one);
    run_free(&one);
    const pl_state u8 = state_of(l);
    pl_loader_destroy(l);
    planar = c;
    planar.channels_last = 0;
    planar.resume = &u8;
    l = create(&planar);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}
