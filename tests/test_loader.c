/* The public loader API: what each epoch delivers and in which order, that
 * the bytes depend only on (seed, epoch, index) and not on the pipeline's
 * shape, sharding, the life cycle, the caller's mistakes, bad files under
 * each error policy, and the queries. Run on the host backend by `make
 * test`, and on simulated CUDA by `make test CUDA=sim`
 * (PINLOAD_TEST_DEVICE=cuda): the same expectations hold on both. */
#include <pthread.h>
#include <sched.h>

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

static void counting(void *ctx, pl_log_level level, const char *msg)
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

static void log_count_init(log_count *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

/* ---- fixtures ---- */

/* root/f<i>.jpg for i < n: a flat folder, file order f00, f01, ... */
static void make_flat(char root[64], int n)
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
static void write_not_jpeg(const char *path)
{
    static const char text[] = "this is plain text, not a JPEG\n";
    tu_write_file(path, text, sizeof text - 1);
}

static void write_empty(const char *path)
{
    tu_write_file(path, "", 0);
}

/* The first 30 bytes of a real JPEG: SOI, APP0 and a few bytes of DQT. */
static void write_truncated_header(const char *path)
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
static int32_t folder_label(const char *root, const char *path)
{
    const size_t n = strlen(root);
    cr_assert_eq(strncmp(path, root, n), 0, "%s not under %s", path, root);
    cr_assert_eq(path[n + 1], 'c', "%s", path);
    return path[n + 2] - '0';
}

static void base_cfg(pl_config *c, const char *data)
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
static int find_index(const run *r, int64_t idx)
{
    for (int k = 0; k < r->n; k++)
        if (r->idx[k] == idx)
            return k;
    return -1;
}

/* ---- what an epoch delivers ---- */

Test(loader, every_file_is_delivered_once_per_epoch_with_its_folder_label,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.dataset_size, 23);
    cr_assert_eq(in.batches_per_epoch, 5);
    for (int e = 0; e < 3; e++) {
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.nb, in.batches_per_epoch);
        static const int want[] = {5, 5, 5, 5, 3};
        for (int k = 0; k < 5; k++)
            cr_assert_eq(r.counts[k], want[k], "epoch %d batch %d", e, k);
        int seen[23] = {0};
        for (int k = 0; k < r.n; k++) {
            cr_assert(r.idx[k] >= 0 && r.idx[k] < 23);
            seen[r.idx[k]]++;
            const char *path;
            int32_t label;
            cr_assert_eq(pl_loader_sample(l, r.idx[k], &path, &label), 0);
            cr_assert_eq(r.lab[k], folder_label(root, path), "%s", path);
            cr_assert_eq(r.lab[k], label);
            cr_assert_eq(r.st[k], 0);
        }
        for (int i = 0; i < 23; i++)
            cr_assert_eq(seen[i], 1, "epoch %d: index %d seen %d times", e, i,
                         seen[i]);
        run_free(&r);
    }
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, epoch_end_comes_once_then_the_next_epoch_starts_at_batch_zero,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 12, 2);
    pl_config c;
    base_cfg(&c, root);
    c.batch_size = 4;
    pl_loader *l = create(&c);
    for (int e = 0; e < 3; e++) {
        for (int k = 0; k < 3; k++) {
            const pl_batch *b;
            cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
            cr_assert_eq(b->epoch, e);
            cr_assert_eq(b->index, k);
            cr_assert_eq(b->count, 4);
            cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        }
        const pl_batch *b = (const pl_batch *)&c; /* must be reset */
        cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END, "epoch %d", e);
        cr_assert_null(b);
    }
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, batch_indices_are_the_epoch_order_position_by_position,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    pl_loader *l = create(&c);
    int64_t *prev = NULL;
    for (int e = 0; e < 3; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.n, 23);
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.idx[k], order[k], "epoch %d position %d", e, k);
        if (prev) /* shuffled anew each epoch */
            cr_assert_neq(memcmp(prev, order, 23 * sizeof *order), 0);
        free(prev);
        prev = order;
        run_free(&r);
    }
    free(prev);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, shuffle_off_gives_file_order, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.shuffle = 0;
    pl_loader *l = create(&c);
    for (int e = 0; e < 2; e++) {
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.n, 23);
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.idx[k], k, "epoch %d position %d", e, k);
        /* File order: class c0's files, then c1's, then c2's. */
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.lab[k],
                         k < 8    ? 0
                         : k < 16 ? 1
                                  : 2,
                         "position %d", k);
        run_free(&r);
    }
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, short_last_batch_reports_its_real_count, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    run r[2];
    run_loader(&c, 2, r);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(r[e].nb, 5);
        static const int want[] = {5, 5, 5, 5, 3};
        for (int k = 0; k < 5; k++)
            cr_assert_eq(r[e].counts[k], want[k]);
        run_free(&r[e]);
    }
    tu_rm_rf(root);
}

Test(loader, drop_last_drops_the_short_batch, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.drop_last = 1;
    pl_loader *l = create(&c);
    cr_assert_eq(info_of(l).batches_per_epoch, 4);
    cr_assert_eq(info_of(l).samples_per_epoch, 23);
    for (int e = 0; e < 2; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r);
        cr_assert_eq(r.nb, 4);
        for (int k = 0; k < 4; k++)
            cr_assert_eq(r.counts[k], 5);
        for (int k = 0; k < 20; k++)
            cr_assert_eq(r.idx[k], order[k]);
        free(order);
        run_free(&r);
    }
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, first_epoch_resumes_with_that_epochs_order_and_pixels,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    run from0[5];
    run_loader(&c, 5, from0);

    c.first_epoch = 3;
    pl_loader *l = create(&c);
    for (int e = 3; e < 5; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r); /* asserts epoch fields == e */
        for (int k = 0; k < 23; k++)
            cr_assert_eq(r.idx[k], order[k], "epoch %d position %d", e, k);
        assert_same_run(&r, &from0[e], "resumed vs from epoch 0");
        free(order);
        run_free(&r);
    }
    pl_loader_destroy(l);
    for (int e = 0; e < 5; e++)
        run_free(&from0[e]);
    tu_rm_rf(root);
}

/* ---- the bytes depend on (seed, epoch, index) only ---- */

typedef void (*mutate_fn)(pl_config *c, int variant);

/* For every augment mode and format, two loaders that differ only by
 * `mutate` deliver the same batches byte for byte over two epochs. */
static void assert_invariant(mutate_fn mutate, const char *what)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    static const pl_augment augs[] = {PL_AUGMENT_NONE, PL_AUGMENT_EVAL,
                                      PL_AUGMENT_TRAIN};
    static const pl_format fmts[] = {PL_FORMAT_U8_NHWC, PL_FORMAT_F32_NCHW};
    for (int a = 0; a < 3; a++) {
        for (int f = 0; f < 2; f++) {
            pl_config c;
            base_cfg(&c, root);
            c.augment = augs[a];
            c.format = fmts[f];
            run x[2], y[2];
            mutate(&c, 0);
            run_loader(&c, 2, x);
            mutate(&c, 1);
            run_loader(&c, 2, y);
            char label[128];
            snprintf(label, sizeof label, "%s, augment %d, format %d", what,
                     augs[a], fmts[f]);
            for (int e = 0; e < 2; e++) {
                assert_same_run(&x[e], &y[e], label);
                run_free(&x[e]);
                run_free(&y[e]);
            }
        }
    }
    tu_rm_rf(root);
}

static void vary_workers(pl_config *c, int v)
{
    c->num_workers = v ? 4 : 1;
}

static void vary_prefetch(pl_config *c, int v)
{
    c->prefetch = v ? 3 : 1;
}

static void vary_memory(pl_config *c, int v)
{
    c->memory = v ? PL_MEMORY_PAGEABLE : PL_MEMORY_PINNED;
}

static void vary_device_buffers(pl_config *c, int v)
{
    c->device_buffers = v ? 3 : 1;
}

Test(loader, same_bytes_with_one_or_four_workers, .timeout = TIMEOUT)
{
    assert_invariant(vary_workers, "num_workers 1 vs 4");
}

Test(loader, same_bytes_with_prefetch_one_or_three, .timeout = TIMEOUT)
{
    assert_invariant(vary_prefetch, "prefetch 1 vs 3");
}

Test(loader, same_bytes_from_pinned_or_pageable_memory, .timeout = TIMEOUT)
{
    assert_invariant(vary_memory, "pinned vs pageable");
}

static void vary_managed(pl_config *c, int v)
{
    c->memory = v ? PL_MEMORY_MANAGED : PL_MEMORY_PINNED;
}

Test(loader, same_bytes_from_pinned_or_managed_memory, .timeout = TIMEOUT)
{
    assert_invariant(vary_managed, "pinned vs managed");
}

/* Without CUDA, managed memory is pageable: said in a notice, and no
 * memory is reported as pinned; no GPU copy time is reported either. */
Test(loader, managed_memory_on_the_host_backend_is_pageable_with_a_notice,
     .timeout = TIMEOUT)
{
    if (tu_on_cuda())
        cr_skip_test("host backend only (test_cuda covers managed memory)");
    char root[64];
    tu_make_tree(root, 9, 2);
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.memory = PL_MEMORY_MANAGED;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.memory, PL_MEMORY_MANAGED);
    cr_assert_eq(in.pinned, 0);
    cr_assert_eq(in.backend, PL_BACKEND_HOST);
    cr_assert_not_null(in.backend_name);
    cr_assert_eq(strncmp(in.backend_name, "host (", 6), 0, "%s",
                 in.backend_name);
    cr_assert_eq(lc.notices, 2,
                 "the managed notice and the backend notice, "
                 "got %d",
                 lc.notices);
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0)
        pl_loader_release(l, b, NULL);
    cr_assert_eq(rc, PL_EPOCH_END);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.pinned_bytes, 0);
    cr_assert_eq(st.ns_h2d, 0);
    cr_assert_eq(st.bytes_h2d, 0);
    cr_assert_gt(st.bytes_copied, 0);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

static void vary_readahead(pl_config *c, int v)
{
    c->readahead = v ? 5 : 0;
}

Test(loader, same_bytes_with_or_without_readahead_hints, .timeout = TIMEOUT)
{
    assert_invariant(vary_readahead, "readahead 0 vs 5");
}

static void vary_pinning(pl_config *c, int v)
{
    c->pin_workers = v;
    c->num_workers = 3;
}

Test(loader, same_bytes_with_pinned_or_free_workers, .timeout = TIMEOUT)
{
    assert_invariant(vary_pinning, "pin_workers 0 vs 1");
}

/* The CPUs a thread of this process may run on, by its name. */
static int cpus_of_thread(const char *name, char *list, size_t cap)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        if (strcmp(comm, name) != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
        f = fopen(path, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) {
                snprintf(list, cap, "%s", line + 18 + strspn(line + 18, " \t"));
                list[strcspn(list, "\n")] = '\0';
                found = 1;
            }
        if (f)
            fclose(f);
    }
    closedir(d);
    return found;
}

/* pin_workers puts worker i on the i-th CPU the process may use, modulo
 * their number; without it, workers may run anywhere. */
Test(loader, pinned_workers_each_run_on_their_own_cpu, .timeout = TIMEOUT)
{
    cpu_set_t allowed;
    cr_assert_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;
    char root[64];
    tu_make_tree(root, 6, 2);
    for (int pin = 0; pin < 2; pin++) {
        pl_config c;
        base_cfg(&c, root);
        c.num_workers = 3;
        c.pin_workers = pin;
        pl_loader *l = create(&c);
        for (int i = 0; i < 3; i++) {
            char name[32], list[256];
            snprintf(name, sizeof name, "pl-worker-%d", i);
            cr_assert(cpus_of_thread(name, list, sizeof list), "no %s", name);
            if (pin) {
                char want[16];
                snprintf(want, sizeof want, "%d", cpus[i % n]);
                cr_assert_str_eq(list, want, "%s", name);
            } else if (n > 1) {
                cr_assert(strchr(list, ',') || strchr(list, '-'),
                          "%s unpinned should allow several CPUs: %s", name,
                          list);
            }
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, same_bytes_with_one_or_three_device_buffers, .timeout = TIMEOUT)
{
    assert_invariant(vary_device_buffers, "device_buffers 1 vs 3");
}

Test(loader, same_samples_whatever_the_batch_size, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    static const pl_augment augs[] = {PL_AUGMENT_NONE, PL_AUGMENT_EVAL,
                                      PL_AUGMENT_TRAIN};
    for (int a = 0; a < 3; a++) {
        for (int f = 0; f < 2; f++) {
            pl_config c;
            base_cfg(&c, root);
            c.augment = augs[a];
            c.format = f ? PL_FORMAT_F32_NCHW : PL_FORMAT_U8_NHWC;
            run x[2], y[2];
            c.batch_size = 4;
            run_loader(&c, 2, x);
            c.batch_size = 7;
            run_loader(&c, 2, y);
            for (int e = 0; e < 2; e++) {
                cr_assert_eq(x[e].nb, 6);
                cr_assert_eq(y[e].nb, 4);
                cr_assert_eq(x[e].counts[5], 3);
                cr_assert_eq(y[e].counts[3], 2);
                cr_assert_eq(x[e].n, 23);
                cr_assert_eq(y[e].n, 23);
                for (int64_t i = 0; i < 23; i++) {
                    const int kx = find_index(&x[e], i);
                    const int ky = find_index(&y[e], i);
                    cr_assert(kx >= 0 && ky >= 0, "index %lld missing",
                              (long long)i);
                    cr_assert_eq(x[e].lab[kx], y[e].lab[ky]);
                    cr_assert_eq(memcmp(sample_at(&x[e], kx),
                                        sample_at(&y[e], ky),
                                        x[e].sample_bytes),
                                 0, "augment %d format %d epoch %d index %lld",
                                 augs[a], f, e, (long long)i);
                }
                run_free(&x[e]);
                run_free(&y[e]);
            }
        }
    }
    tu_rm_rf(root);
}

Test(loader, f32_is_the_u8_output_normalised_per_channel, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    static const pl_augment augs[] = {PL_AUGMENT_NONE, PL_AUGMENT_EVAL,
                                      PL_AUGMENT_TRAIN};
    for (int a = 0; a < 3; a++) {
        pl_config c;
        base_cfg(&c, root);
        c.augment = augs[a];
        c.width = 16;
        c.height = 12; /* not square, so planes and rows cannot be confused */
        c.mean[0] = 0.5f;
        c.std[2] = 0.3f;
        run u[2], f[2];
        c.format = PL_FORMAT_U8_NHWC;
        run_loader(&c, 2, u);
        c.format = PL_FORMAT_F32_NCHW;
        run_loader(&c, 2, f);
        float lut[3][256];
        for (int ch = 0; ch < 3; ch++)
            for (int v = 0; v < 256; v++)
                lut[ch][v] = ((float)v / 255.0f - c.mean[ch]) / c.std[ch];
        const int w = 16, h = 12;
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(u[e].sample_bytes, (size_t)w * h * 3);
            cr_assert_eq(f[e].sample_bytes, (size_t)w * h * 3 * sizeof(float));
            cr_assert_eq(u[e].n, f[e].n);
            for (int k = 0; k < u[e].n; k++) {
                cr_assert_eq(u[e].idx[k], f[e].idx[k]);
                const uint8_t *px = sample_at(&u[e], k);
                float fl[16 * 12 * 3];
                memcpy(fl, sample_at(&f[e], k), sizeof fl);
                for (int ch = 0; ch < 3; ch++)
                    for (int y = 0; y < h; y++)
                        for (int x = 0; x < w; x++) {
                            const float got = fl[(ch * h + y) * w + x];
                            const float want =
                                lut[ch][px[(y * w + x) * 3 + ch]];
                            cr_assert(got == want,
                                      "augment %d epoch %d sample %d c%d "
                                      "(%d,%d): %.9g != %.9g",
                                      augs[a], e, k, ch, x, y, (double)got,
                                      (double)want);
                        }
            }
            run_free(&u[e]);
            run_free(&f[e]);
        }
    }
    tu_rm_rf(root);
}

/* F16 delivers, bit for bit, the round-to-nearest-even halves of the F32
 * values (computed here with the compiler's own _Float16 conversion). */
Test(loader, f16_is_the_f32_output_rounded_to_half, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 11, 2);
    pl_config c;
    base_cfg(&c, root);
    c.width = 16;
    c.height = 12;
    run f[1], h[1];
    c.format = PL_FORMAT_F32_NCHW;
    run_loader(&c, 1, f);
    c.format = PL_FORMAT_F16_NCHW;
    run_loader(&c, 1, h);
    cr_assert_eq(h[0].sample_bytes, (size_t)16 * 12 * 3 * 2);
    cr_assert_eq(h[0].n, f[0].n);
    for (int k = 0; k < f[0].n; k++) {
        float fl[16 * 12 * 3];
        uint16_t hl[16 * 12 * 3];
        memcpy(fl, sample_at(&f[0], k), sizeof fl);
        memcpy(hl, sample_at(&h[0], k), sizeof hl);
        for (int i = 0; i < 16 * 12 * 3; i++) {
            const _Float16 want = (_Float16)fl[i];
            uint16_t bits;
            memcpy(&bits, &want, sizeof bits);
            cr_assert_eq(hl[i], bits, "sample %d value %d: %04x for %.9g", k, i,
                         hl[i], (double)fl[i]);
        }
    }
    run_free(&f[0]);
    run_free(&h[0]);
    tu_rm_rf(root);
}

Test(loader, train_pixels_are_a_function_of_seed_epoch_and_index,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    run a[2], b[2], other[1];
    run_loader(&c, 2, a);
    c.num_workers = 3;
    run_loader(&c, 2, b);
    for (int e = 0; e < 2; e++)
        assert_same_run(&a[e], &b[e], "two loaders, same config");
    /* The same file is cropped and flipped anew in the next epoch. */
    for (int64_t i = 0; i < 23; i++) {
        const int k0 = find_index(&a[0], i), k1 = find_index(&a[1], i);
        cr_assert(k0 >= 0 && k1 >= 0);
        cr_assert_neq(memcmp(sample_at(&a[0], k0), sample_at(&a[1], k1),
                             a[0].sample_bytes),
                      0, "index %lld is identical in epochs 0 and 1",
                      (long long)i);
    }
    /* Another seed: other crops for the same (epoch, index). */
    c.seed = 8;
    run_loader(&c, 1, other);
    int differ = 0;
    for (int64_t i = 0; i < 23; i++) {
        const int k0 = find_index(&a[0], i), k1 = find_index(&other[0], i);
        differ += memcmp(sample_at(&a[0], k0), sample_at(&other[0], k1),
                         a[0].sample_bytes) != 0;
    }
    cr_assert_eq(differ, 23, "only %d of 23 samples changed with the seed",
                 differ);
    run_free(&other[0]);
    for (int e = 0; e < 2; e++) {
        run_free(&a[e]);
        run_free(&b[e]);
    }
    tu_rm_rf(root);
}

Test(loader, deterministic_augments_give_the_same_pixels_every_epoch,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int a = 0; a < 2; a++) {
        pl_config c;
        base_cfg(&c, root);
        c.augment = a ? PL_AUGMENT_EVAL : PL_AUGMENT_NONE;
        run r[2];
        run_loader(&c, 2, r);
        for (int64_t i = 0; i < 23; i++) {
            const int k0 = find_index(&r[0], i), k1 = find_index(&r[1], i);
            cr_assert_eq(memcmp(sample_at(&r[0], k0), sample_at(&r[1], k1),
                                r[0].sample_bytes),
                         0, "augment %d index %lld", a, (long long)i);
        }
        run_free(&r[0]);
        run_free(&r[1]);
    }
    tu_rm_rf(root);
}

/* ---- sharding ---- */

Test(loader, three_ranks_cover_every_index_with_equal_batch_counts,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    int seen[23] = {0};
    int64_t rank0_first = -1, rank2_last = -1;
    for (int rank = 0; rank < 3; rank++) {
        pl_config c;
        base_cfg(&c, root);
        c.rank = rank;
        c.world_size = 3;
        pl_loader *l = create(&c);
        const pl_info in = info_of(l);
        cr_assert_eq(in.rank, rank);
        cr_assert_eq(in.world_size, 3);
        cr_assert_eq(in.dataset_size, 23);
        cr_assert_eq(in.samples_per_epoch, 8); /* ceil(23 / 3) */
        cr_assert_eq(in.batches_per_epoch, 2);
        int64_t *order = epoch_order(l, 0);
        run r;
        run_epoch(l, 0, &r);
        cr_assert_eq(r.nb, 2, "rank %d: %d batches", rank, r.nb);
        cr_assert_eq(r.counts[0], 5);
        cr_assert_eq(r.counts[1], 3);
        for (int k = 0; k < 8; k++) {
            cr_assert_eq(r.idx[k], order[k], "rank %d position %d", rank, k);
            seen[r.idx[k]]++;
        }
        if (rank == 0)
            rank0_first = r.idx[0];
        if (rank == 2)
            rank2_last = r.idx[7];
        free(order);
        run_free(&r);
        pl_loader_destroy(l);
    }
    /* 24 positions for 23 files: the padding wraps to the epoch's start. */
    for (int i = 0; i < 23; i++)
        cr_assert_eq(seen[i], i == rank0_first ? 2 : 1, "index %d seen %d", i,
                     seen[i]);
    cr_assert_eq(rank2_last, rank0_first);
    tu_rm_rf(root);
}

Test(loader, shard_drop_mode_cuts_the_tail_without_repeats, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    int seen[23] = {0};
    for (int rank = 0; rank < 3; rank++) {
        pl_config c;
        base_cfg(&c, root);
        c.rank = rank;
        c.world_size = 3;
        c.shard_mode = PL_SHARD_DROP;
        pl_loader *l = create(&c);
        cr_assert_eq(info_of(l).samples_per_epoch, 7);
        run r;
        run_epoch(l, 0, &r);
        cr_assert_eq(r.n, 7);
        for (int k = 0; k < 7; k++)
            seen[r.idx[k]]++;
        run_free(&r);
        pl_loader_destroy(l);
    }
    int once = 0;
    for (int i = 0; i < 23; i++) {
        cr_assert_leq(seen[i], 1);
        once += seen[i];
    }
    cr_assert_eq(once, 21);
    tu_rm_rf(root);
}

Test(loader, rank_and_world_size_come_from_the_environment, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.rank = 1;
    c.world_size = 3;
    pl_loader *explicit_l = create(&c);
    int64_t *want = epoch_order(explicit_l, 0);
    pl_loader_destroy(explicit_l);

    cr_assert_eq(setenv("RANK", "1", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "3", 1), 0);
    base_cfg(&c, root);
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.rank, 1);
    cr_assert_eq(in.world_size, 3);
    cr_assert_eq(in.samples_per_epoch, 8);
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(r.n, 8);
    for (int k = 0; k < 8; k++)
        cr_assert_eq(r.idx[k], want[k], "position %d", k);
    run_free(&r);
    pl_loader_destroy(l);

    /* An explicit value wins over the environment. */
    c.rank = 0;
    c.world_size = 1;
    l = create(&c);
    cr_assert_eq(info_of(l).world_size, 1);
    cr_assert_eq(info_of(l).samples_per_epoch, 23);
    pl_loader_destroy(l);
    free(want);
    tu_rm_rf(root);
}

/* ---- life cycle ---- */

Test(loader, destroy_mid_epoch_with_zero_one_or_two_batches_held,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int held = 0; held <= 2; held++) {
        pl_config c;
        base_cfg(&c, root);
        pl_loader *l = create(&c);
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0); /* now mid-epoch */
        for (int i = 0; i < held; i++)
            cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, destroy_right_after_create_and_destroy_null, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    pl_loader_destroy(create(&c));
    pl_loader_destroy(NULL);
    tu_rm_rf(root);
}

Test(loader, fifty_create_destroy_cycles, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 12, 2);
    for (int i = 0; i < 50; i++) {
        pl_config c;
        base_cfg(&c, root);
        c.batch_size = 4;
        c.num_workers = 1 + i % 3;
        pl_loader *l = create(&c);
        if (i % 2) {
            const pl_batch *b;
            cr_assert_eq(pl_loader_next(l, &b), 0, "cycle %d", i);
            cr_assert_eq(b->index, 0);
            if (i % 4 == 1)
                cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, two_loaders_at_once_each_deliver_their_own_labels,
     .timeout = TIMEOUT)
{
    char a_root[64], b_root[64], list[128];
    tu_make_tree(a_root, 23, 3);
    /* The second: a list file with labels 4 and 6 over other images. */
    tu_tmpdir(b_root);
    snprintf(list, sizeof list, "%s/list.txt", b_root);
    FILE *f = fopen(list, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 10; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/img %d.jpg", b_root, i);
        tu_write_jpeg(p, 48, 40, (unsigned)i + 100, NULL);
        fprintf(f, "img %d.jpg %d\n", i, i % 2 ? 6 : 4);
    }
    fclose(f);

    pl_config ca, cb;
    base_cfg(&ca, a_root);
    base_cfg(&cb, list);
    cb.batch_size = 3;
    pl_loader *la = create(&ca), *lb = create(&cb);
    cr_assert_eq(info_of(lb).num_classes, 7);
    for (int e = 0; e < 2; e++) {
        int seen_a[23] = {0}, seen_b[10] = {0};
        int done_a = 0, done_b = 0;
        while (!done_a || !done_b) {
            const pl_batch *b;
            if (!done_a) {
                const int rc = pl_loader_next(la, &b);
                if (rc == PL_EPOCH_END) {
                    done_a = 1;
                } else {
                    cr_assert_eq(rc, 0, "%s", pl_last_error());
                    for (int i = 0; i < b->count; i++) {
                        const char *p;
                        pl_loader_sample(la, b->indices[i], &p, NULL);
                        cr_assert_eq(b->labels[i], folder_label(a_root, p));
                        seen_a[b->indices[i]]++;
                    }
                    pl_loader_release(la, b, NULL);
                }
            }
            if (!done_b) {
                const int rc = pl_loader_next(lb, &b);
                if (rc == PL_EPOCH_END) {
                    done_b = 1;
                } else {
                    cr_assert_eq(rc, 0, "%s", pl_last_error());
                    for (int i = 0; i < b->count; i++) {
                        const int64_t k = b->indices[i];
                        cr_assert(k >= 0 && k < 10);
                        cr_assert_eq(b->labels[i], k % 2 ? 6 : 4);
                        seen_b[k]++;
                    }
                    pl_loader_release(lb, b, NULL);
                }
            }
        }
        for (int i = 0; i < 23; i++)
            cr_assert_eq(seen_a[i], 1);
        for (int i = 0; i < 10; i++)
            cr_assert_eq(seen_b[i], 1);
    }
    /* A batch of one loader is not a batch of the other. */
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(la, &b), 0);
    cr_assert_eq(pl_loader_release(lb, b, NULL), PL_EINVAL);
    cr_assert_eq(pl_loader_release(la, b, NULL), 0);
    pl_loader_destroy(la);
    pl_loader_destroy(lb);
    tu_rm_rf(a_root);
    tu_rm_rf(b_root);
}

/* ---- the caller's mistakes ---- */

Test(loader, next_while_holding_every_device_buffer_is_ebusy,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.device_buffers = 1;
    pl_loader *l = create(&c);
    int64_t *order = epoch_order(l, 0);
    const pl_batch *b0, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(b0->index, 0);
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY);
    cr_assert_not_null(strstr(pl_last_error(), "device_buffers"), "%s",
                       pl_last_error());
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY, "and again");
    /* Nothing was lost: releasing lets the epoch go on in order. */
    cr_assert_eq(pl_loader_release(l, b0, NULL), 0);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->index, 1);
    for (int i = 0; i < b->count; i++)
        cr_assert_eq(b->indices[i], order[5 + i]);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    free(order);
    pl_loader_destroy(l);

    /* With two buffers, holding two. */
    c.device_buffers = 2;
    l = create(&c);
    const pl_batch *b1;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY);
    cr_assert_eq(pl_loader_release(l, b1, NULL), 0);
    cr_assert_eq(pl_loader_next(l, &b), 0);
    cr_assert_eq(b->index, 2);
    pl_loader_destroy(l); /* with two held */
    tu_rm_rf(root);
}

Test(loader, releasing_a_batch_twice_is_einval, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    cr_assert_eq(pl_loader_release(l, b, NULL), PL_EINVAL);
    cr_assert_str_neq(pl_last_error(), "");
    /* The loader is unharmed. */
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->index, 1);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* The second release comes while the prefetcher is filling that same
 * buffer again (a skipped file makes it wait for the next ring slot, whose
 * large images take a while to decode). Still PL_EINVAL; a TSan build also
 * checks that the error path does not read the batch the prefetcher is
 * writing. */
Test(loader, releasing_twice_while_the_buffer_refills_is_einval,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_tmpdir(root);
    for (int i = 0; i < 10; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/f%d.jpg", root, i);
        if (i == 5)
            write_not_jpeg(p);
        else if (i >= 6)
            tu_write_jpeg(p, 1600, 1200, (unsigned)i, NULL);
        else
            tu_write_jpeg(p, 40, 32, (unsigned)i, NULL);
    }
    pl_config c;
    base_cfg(&c, root);
    c.batch_size = 2;
    c.shuffle = 0;
    c.num_workers = 1;
    c.prefetch = 1;
    c.device_buffers = 2;
    c.on_error = PL_ON_ERROR_SKIP;
    pl_loader *l = create(&c);
    const pl_batch *b0, *b1, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_release(l, b0, NULL), 0);
    /* Wait until f4 and f5 are done: the prefetcher then puts f4 in b0's
     * buffer and waits for f6. */
    pl_stats st;
    do {
        usleep(200);
        pl_loader_stats(l, &st);
    } while (st.images_decoded < 5 || st.images_failed < 1);
    usleep(1000);
    cr_assert_eq(pl_loader_release(l, b0, NULL), PL_EINVAL);
    cr_assert_eq(pl_loader_release(l, b1, NULL), 0);
    /* The epoch goes on: f4 and f6, f7 and f8, then f9 and f0, which takes
     * the skipped f5's place at the end (the order wraps around). */
    static const int64_t want[][2] = {{4, 6}, {7, 8}, {9, 0}};
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        cr_assert_eq(b->index, 2 + k);
        cr_assert_eq(b->count, 2);
        for (int i = 0; i < b->count; i++)
            cr_assert_eq(b->indices[i], want[k][i]);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, releasing_what_is_not_a_batch_is_einval, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0);
    pl_batch fake = *b;
    cr_assert_eq(pl_loader_release(l, &fake, NULL), PL_EINVAL);
    cr_assert_eq(pl_loader_release(l, NULL, NULL), PL_EINVAL);
    cr_assert_eq(
        pl_loader_release(l, (const pl_batch *)((const char *)b + 8), NULL),
        PL_EINVAL);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "the real one still is");
    cr_assert_eq(pl_loader_next(NULL, &b), PL_EINVAL);
    cr_assert_eq(pl_loader_next(l, NULL), PL_EINVAL);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* ---- bad files ---- */

typedef struct bad_set {
    int64_t idx[3];
    int code[3];
    char path[3][256];
} bad_set;

/* tu_make_tree(root, 22, 3) plus three bad files, one per class folder. */
static void make_tree_with_bad(char root[64], bad_set *bad)
{
    tu_make_tree(root, 22, 3);
    snprintf(bad->path[0], 256, "%s/c0/x.jpg", root);
    snprintf(bad->path[1], 256, "%s/c1/y.jpg", root);
    snprintf(bad->path[2], 256, "%s/c2/trunc.jpg", root);
    write_not_jpeg(bad->path[0]);
    write_empty(bad->path[1]);
    write_truncated_header(bad->path[2]);
    bad->code[0] = PL_ENOTJPEG;
    bad->code[1] = PL_ENOTJPEG;
    bad->code[2] = PL_ECORRUPT;
}

static void find_bad_indices(pl_loader *l, bad_set *bad)
{
    const pl_info in = info_of(l);
    for (int k = 0; k < 3; k++) {
        bad->idx[k] = -1;
        for (int64_t i = 0; i < in.dataset_size; i++) {
            const char *p;
            pl_loader_sample(l, i, &p, NULL);
            if (strcmp(p, bad->path[k]) == 0)
                bad->idx[k] = i;
        }
        cr_assert_geq(bad->idx[k], 0, "%s not listed", bad->path[k]);
    }
}

static int is_bad(const bad_set *bad, int64_t i)
{
    return i == bad->idx[0] || i == bad->idx[1] || i == bad->idx[2];
}

/* Each bad file recorded once, with its path and code, met `count` times
 * (count < 0: at least -count times). */
static void assert_failures(pl_loader *l, const bad_set *bad, int64_t count)
{
    pl_failure f[8];
    size_t n = 99;
    cr_assert_eq(pl_loader_failures(l, 0, f, 8, &n), 0);
    cr_assert_eq(n, 3, "%zu failure records", n);
    for (int k = 0; k < 3; k++) {
        int found = 0;
        for (size_t j = 0; j < n; j++) {
            if (f[j].index != bad->idx[k])
                continue;
            found++;
            cr_assert_str_eq(f[j].path, bad->path[k]);
            cr_assert_eq(f[j].code, bad->code[k], "%s: %s, want %s",
                         bad->path[k], pl_err_name(f[j].code),
                         pl_err_name(bad->code[k]));
            cr_assert_not_null(f[j].reason);
            cr_assert_str_neq(f[j].reason, "");
            if (count > 0)
                cr_assert_eq(f[j].count, count, "%s met %lld times",
                             bad->path[k], (long long)f[j].count);
            else
                cr_assert_geq(f[j].count, -count);
        }
        cr_assert_eq(found, 1, "%s", bad->path[k]);
    }
    /* Paging: from the second record on. */
    cr_assert_eq(pl_loader_failures(l, 1, f, 8, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(pl_loader_failures(l, 3, f, 8, &n), 0);
    cr_assert_eq(n, 0);
}

/* Under SKIP: the first n samples of the epoch's order without the bad
 * files, the order repeating from its start as often as needed. */
static void expected_skip(const int64_t *order, int64_t len, const bad_set *bad,
                          int64_t n, int64_t *out)
{
    int64_t k = 0;
    for (int64_t j = 0; k < n; j++)
        if (!is_bad(bad, order[j % len]))
            out[k++] = order[j % len];
}

static void assert_one_warning_per_bad_file(log_count *lc, const bad_set *bad)
{
    pthread_mutex_lock(&lc->mu);
    cr_assert_eq(lc->warnings, 3, "%d warnings", lc->warnings);
    for (int k = 0; k < 3; k++) {
        int hits = 0;
        for (int w = 0; w < 3; w++)
            hits += strstr(lc->warning[w], bad->path[k]) != NULL;
        cr_assert_eq(hits, 1, "warnings naming %s", bad->path[k]);
    }
    pthread_mutex_unlock(&lc->mu);
}

Test(loader, skip_delivers_the_epoch_order_without_the_bad_files,
     .timeout = TIMEOUT)
{
    char root[64];
    bad_set bad;
    make_tree_with_bad(root, &bad);
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_SKIP;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    find_bad_indices(l, &bad);
    const pl_info in = info_of(l);
    cr_assert_eq(in.dataset_size, 25);
    cr_assert_eq(in.batches_per_epoch, 5);
    const int epochs = 3;
    for (int e = 0; e < epochs; e++) {
        int64_t *order = epoch_order(l, e);
        run r;
        run_epoch(l, e, &r);
        /* 22 good samples, then the first three good ones of the order
         * again for the three skipped: five full batches, as nominal. */
        cr_assert_eq(r.nb, 5, "epoch %d", e);
        for (int k = 0; k < 5; k++)
            cr_assert_eq(r.counts[k], 5, "epoch %d batch %d", e, k);
        cr_assert_eq(r.n, 25);
        int64_t want[25];
        expected_skip(order, 25, &bad, 25, want);
        for (int k = 0; k < 25; k++) {
            cr_assert_eq(r.idx[k], want[k], "epoch %d delivered %d", e, k);
            cr_assert_eq(r.st[k], 0);
            const char *p;
            pl_loader_sample(l, r.idx[k], &p, NULL);
            cr_assert_eq(r.lab[k], folder_label(root, p));
        }
        for (int k = 0; k < 3; k++)
            cr_assert_eq(r.idx[22 + k], r.idx[k], "the order wraps around");
        free(order);
        run_free(&r);
    }
    /* The pipeline may have met them once more, early in the next epoch. */
    assert_failures(l, &bad, -epochs);
    pl_loader_destroy(l);
    assert_one_warning_per_bad_file(&lc, &bad);
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

/* A flat folder f00..f23, shuffle off, bad files at f17, f19 and f22. With
 * one ring slot and one device buffer the pipeline runs at most two batches
 * of four into the next epoch, so after three epochs each bad file has been
 * met exactly three times. */
Test(loader, skip_counts_each_bad_file_once_per_epoch, .timeout = TIMEOUT)
{
    char root[64];
    make_flat(root, 24);
    bad_set bad;
    snprintf(bad.path[0], 256, "%s/f17.jpg", root);
    snprintf(bad.path[1], 256, "%s/f19.jpg", root);
    snprintf(bad.path[2], 256, "%s/f22.jpg", root);
    write_not_jpeg(bad.path[0]);
    write_empty(bad.path[1]);
    write_truncated_header(bad.path[2]);
    bad.code[0] = PL_ENOTJPEG;
    bad.code[1] = PL_ENOTJPEG;
    bad.code[2] = PL_ECORRUPT;
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_SKIP;
    c.shuffle = 0;
    c.batch_size = 4;
    c.prefetch = 1;
    c.device_buffers = 1;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    find_bad_indices(l, &bad);
    cr_assert_eq(bad.idx[0], 17);
    cr_assert_eq(bad.idx[1], 19);
    cr_assert_eq(bad.idx[2], 22);
    for (int e = 0; e < 3; e++) {
        run r;
        run_epoch(l, e, &r);
        /* 21 good and f00..f02 again: six batches of four. */
        cr_assert_eq(r.nb, 6);
        cr_assert_eq(r.counts[5], 4);
        static const int64_t want[] = {0,  1,  2,  3,  4,  5,  6,  7,
                                       8,  9,  10, 11, 12, 13, 14, 15,
                                       16, 18, 20, 21, 23, 0,  1,  2};
        cr_assert_eq(r.n, 24);
        for (int k = 0; k < 24; k++)
            cr_assert_eq(r.idx[k], want[k], "epoch %d position %d", e, k);
        run_free(&r);
    }
    assert_failures(l, &bad, 3);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.images_failed, 9);
    pl_loader_destroy(l);
    assert_one_warning_per_bad_file(&lc, &bad);
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

/* 25 files, 3 bad, batches of 4: six full batches with drop_last (24
 * samples: 22 good and two from the order's start), seven without (the
 * last of one). */
Test(loader, skip_with_drop_last_keeps_only_full_batches, .timeout = TIMEOUT)
{
    char root[64];
    bad_set bad;
    make_tree_with_bad(root, &bad);
    for (int drop = 0; drop < 2; drop++) {
        pl_config c;
        base_cfg(&c, root);
        c.on_error = PL_ON_ERROR_SKIP;
        c.batch_size = 4;
        c.drop_last = drop;
        pl_loader *l = create(&c);
        find_bad_indices(l, &bad);
        const int nb = drop ? 6 : 7, n = drop ? 24 : 25;
        cr_assert_eq(info_of(l).batches_per_epoch, nb);
        for (int e = 0; e < 2; e++) {
            int64_t *order = epoch_order(l, e);
            run r;
            run_epoch(l, e, &r);
            cr_assert_eq(r.nb, nb, "drop_last %d", drop);
            for (int k = 0; k < nb; k++)
                cr_assert_eq(r.counts[k], k < 6 ? 4 : 1);
            cr_assert_eq(r.n, n);
            int64_t want[25];
            expected_skip(order, 25, &bad, n, want);
            for (int k = 0; k < n; k++)
                cr_assert_eq(r.idx[k], want[k], "drop_last %d, sample %d", drop,
                             k);
            free(order);
            run_free(&r);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, substitute_keeps_every_position_with_zeros_and_a_status,
     .timeout = TIMEOUT)
{
    char root[64];
    bad_set bad;
    make_tree_with_bad(root, &bad);
    log_count lc;
    log_count_init(&lc);
    for (int f = 0; f < 2; f++) {
        pl_config c;
        base_cfg(&c, root);
        c.on_error = PL_ON_ERROR_SUBSTITUTE;
        c.format = f ? PL_FORMAT_F32_NCHW : PL_FORMAT_U8_NHWC;
        c.log = counting;
        c.log_ctx = &lc;
        pl_loader *l = create(&c);
        find_bad_indices(l, &bad);
        for (int e = 0; e < 2; e++) {
            int64_t *order = epoch_order(l, e);
            run r;
            run_epoch(l, e, &r);
            static const int want[] = {5, 5, 5, 5, 5};
            cr_assert_eq(r.nb, 5);
            for (int k = 0; k < 5; k++)
                cr_assert_eq(r.counts[k], want[k]);
            uint8_t *zero = calloc(1, r.sample_bytes);
            for (int k = 0; k < 25; k++) {
                cr_assert_eq(r.idx[k], order[k], "position %d", k);
                const int zeros =
                    memcmp(sample_at(&r, k), zero, r.sample_bytes) == 0;
                int want_st = 0;
                for (int b = 0; b < 3; b++)
                    if (r.idx[k] == bad.idx[b])
                        want_st = bad.code[b];
                cr_assert_eq(r.st[k], want_st, "position %d (index %lld)", k,
                             (long long)r.idx[k]);
                cr_assert_eq(zeros, want_st != 0, "position %d: zeros %d", k,
                             zeros);
                const char *p;
                pl_loader_sample(l, r.idx[k], &p, NULL);
                cr_assert_eq(r.lab[k], folder_label(root, p));
            }
            free(zero);
            free(order);
            run_free(&r);
        }
        assert_failures(l, &bad, -2);
        pl_loader_destroy(l);
        pthread_mutex_lock(&lc.mu);
        cr_assert_eq(lc.warnings, 3 * (f + 1));
        for (int w = 3 * f; w < 3 * f + 3; w++)
            cr_assert_not_null(strstr(lc.warning[w], "substituted"), "%s",
                               lc.warning[w]);
        pthread_mutex_unlock(&lc.mu);
    }
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

Test(loader, fail_delivers_the_batches_before_the_bad_file_then_sticks,
     .timeout = TIMEOUT)
{
    char root[64], badp[128];
    make_flat(root, 23);
    snprintf(badp, sizeof badp, "%s/f12.jpg", root);
    write_not_jpeg(badp);
    log_count lc;
    log_count_init(&lc);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_FAIL;
    c.shuffle = 0;
    c.log = counting;
    c.log_ctx = &lc;
    pl_loader *l = create(&c);
    for (int k = 0; k < 2; k++) {
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0, "batch %d: %s", k,
                     pl_last_error());
        cr_assert_eq(b->index, k);
        cr_assert_eq(b->count, 5);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(b->indices[i], k * 5 + i);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    for (int again = 0; again < 3; again++) {
        const pl_batch *b = NULL;
        cr_assert_eq(pl_loader_next(l, &b), PL_ENOTJPEG, "call %d", again);
        cr_assert_null(b);
        cr_assert_not_null(strstr(pl_last_error(), badp), "%s",
                           pl_last_error());
    }
    pl_failure f[4];
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(f[0].index, 12);
    cr_assert_str_eq(f[0].path, badp);
    cr_assert_eq(f[0].code, PL_ENOTJPEG);
    pl_loader_destroy(l);
    pthread_mutex_lock(&lc.mu);
    cr_assert_eq(lc.warnings, 0, "FAIL reports through pl_loader_next");
    pthread_mutex_unlock(&lc.mu);
    pthread_mutex_destroy(&lc.mu);
    tu_rm_rf(root);
}

Test(loader, fail_on_the_first_file_delivers_nothing, .timeout = TIMEOUT)
{
    char root[64], badp[128];
    make_flat(root, 8);
    snprintf(badp, sizeof badp, "%s/f00.jpg", root);
    write_empty(badp);
    pl_config c;
    base_cfg(&c, root);
    c.on_error = PL_ON_ERROR_FAIL;
    c.shuffle = 0;
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), PL_ENOTJPEG);
    cr_assert_not_null(strstr(pl_last_error(), badp), "%s", pl_last_error());
    cr_assert_eq(pl_loader_next(l, &b), PL_ENOTJPEG);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* ---- queries
 * ----------------------------------------------------------------------------
 */

Test(loader, info_describes_the_loader, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int f = 0; f < 2; f++) {
        pl_config c;
        base_cfg(&c, root);
        c.format = f ? PL_FORMAT_F32_NCHW : PL_FORMAT_U8_NHWC;
        c.width = 20;
        c.height = 12;
        c.num_workers = 3;
        c.prefetch = 3;
        c.device_buffers = 4;
        c.memory = f ? PL_MEMORY_PAGEABLE : PL_MEMORY_PINNED;
        pl_loader *l = create(&c);
        const pl_info in = info_of(l);
        cr_assert_eq(in.dataset_size, 23);
        cr_assert_eq(in.samples_per_epoch, 23);
        cr_assert_eq(in.batches_per_epoch, 5);
        cr_assert_eq(in.num_classes, 3);
        cr_assert_eq(in.batch_size, 5);
        cr_assert_eq(in.width, 20);
        cr_assert_eq(in.height, 12);
        cr_assert_eq(in.channels, 3);
        cr_assert_eq(in.format, c.format);
        cr_assert_eq(in.sample_bytes, f ? 20u * 12 * 3 * 4 : 20u * 12 * 3);
        cr_assert_eq(in.batch_bytes, 5 * in.sample_bytes);
        cr_assert_eq(in.backend,
                     tu_on_cuda() ? PL_BACKEND_CUDA : PL_BACKEND_HOST);
        cr_assert_eq(in.device, tu_on_cuda() ? 0 : -1);
        cr_assert_eq(in.num_workers, 3);
        cr_assert_eq(in.prefetch, 3);
        cr_assert_eq(in.device_buffers, 4);
        cr_assert_eq(in.rank, 0);
        cr_assert_eq(in.world_size, 1);
        cr_assert_eq(in.memory, c.memory);
        if (f)
            cr_assert_eq(in.pinned, 0, "pageable memory is never pinned");
        else
            cr_assert(in.pinned == 0 || in.pinned == 1);
        pl_loader_destroy(l);
    }
    pl_info in;
    cr_assert_eq(pl_loader_info(NULL, &in), PL_EINVAL);
    tu_rm_rf(root);
}

Test(loader, stats_count_what_the_caller_received, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.prefetch = 3;
    c.device_buffers = 2;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    run r;
    run_epoch(l, 0, &r);
    uint64_t batches = (uint64_t)r.nb, bytes = 23 * in.sample_bytes;
    uint64_t samples = (uint64_t)r.n;
    run_free(&r);
    /* Hold both buffers and wait for PL_EBUSY: the prefetcher then waits
     * for a buffer, and everything it queued is in the caller's hands. */
    const pl_batch *b0, *b1, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY);
    batches += 2;
    samples += (uint64_t)(b0->count + b1->count);
    bytes += b0->bytes + b1->bytes;
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.batches, batches, "%llu batches counted, %llu received",
                 (unsigned long long)st.batches, (unsigned long long)batches);
    cr_assert_eq(st.bytes_copied, bytes, "%llu bytes copied, %llu received",
                 (unsigned long long)st.bytes_copied,
                 (unsigned long long)bytes);
    cr_assert_geq(st.images_decoded, samples);
    cr_assert_eq(st.images_failed, 0);
    cr_assert_gt(st.bytes_read, 0);
    cr_assert_gt(st.ns_read, 0);
    cr_assert_gt(st.ns_decode, 0);
    cr_assert_gt(st.ns_augment, 0);
    cr_assert_gt(st.ns_copy, 0);
    cr_assert_gt(st.ns_wait, 0);
    if (in.pinned)
        cr_assert_eq(st.pinned_bytes, (uint64_t)c.prefetch * in.batch_bytes);
    else
        cr_assert_eq(st.pinned_bytes, 0);
    pl_loader_destroy(l);

    c.memory = PL_MEMORY_PAGEABLE;
    l = create(&c);
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.pinned_bytes, 0);
    cr_assert_eq(info_of(l).pinned, 0);
    cr_assert_eq(pl_loader_stats(NULL, &st), PL_EINVAL);
    cr_assert_eq(pl_loader_stats(l, NULL), PL_EINVAL);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* pl_stats.batches is documented as "batches handed to the caller". After
 * one epoch the pipeline runs on by itself: once it has decoded four
 * batches of the next epoch (two device buffers plus two ring slots), the
 * first two were queued, but the caller has received none of them. */
Test(loader, stats_batches_counts_only_batches_handed_to_the_caller,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.prefetch = 2;
    c.device_buffers = 2;
    pl_loader *l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    const uint64_t received = (uint64_t)r.nb;
    run_free(&r);
    pl_stats st;
    do {
        usleep(500);
        cr_assert_eq(pl_loader_stats(l, &st), 0);
    } while (st.images_decoded < 23 + 4 * 5);
    usleep(20000); /* time to run on, if it would */
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.images_decoded, 23 + 4 * 5, "the pipeline stalls there");
    cr_assert_eq(st.batches, received,
                 "stats.batches is %llu, the caller received %llu",
                 (unsigned long long)st.batches, (unsigned long long)received);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, class_names_samples_and_orders_check_their_arguments,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    pl_loader *l = create(&c);
    const char *name = NULL;
    for (int k = 0; k < 3; k++) {
        char want[16];
        snprintf(want, sizeof want, "c%d", k);
        cr_assert_eq(pl_loader_class_name(l, k, &name), 0);
        cr_assert_str_eq(name, want);
    }
    cr_assert_eq(pl_loader_class_name(l, -1, &name), PL_EINVAL);
    cr_assert_eq(pl_loader_class_name(l, 3, &name), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "3"), "%s", pl_last_error());
    cr_assert_eq(pl_loader_class_name(l, 0, NULL), PL_EINVAL);

    /* Index i of make_tree's listing: class folders in order, files sorted
     * by name within each. */
    const char *path = NULL;
    int32_t label = -1;
    cr_assert_eq(pl_loader_sample(l, 0, &path, &label), 0);
    char want[256];
    snprintf(want, sizeof want, "%s/c0/img00.jpg", root);
    cr_assert_str_eq(path, want);
    cr_assert_eq(label, 0);
    cr_assert_eq(pl_loader_sample(l, 22, &path, &label), 0);
    snprintf(want, sizeof want, "%s/c2/img20.jpg", root);
    cr_assert_str_eq(path, want);
    cr_assert_eq(label, 2);
    cr_assert_eq(pl_loader_sample(l, 8, NULL, &label), 0);
    cr_assert_eq(label, 1);
    cr_assert_eq(pl_loader_sample(l, 8, &path, NULL), 0);
    snprintf(want, sizeof want, "%s/c1/img01.jpg", root);
    cr_assert_str_eq(path, want);
    cr_assert_eq(pl_loader_sample(l, -1, &path, &label), PL_EINVAL);
    cr_assert_eq(pl_loader_sample(l, 23, &path, &label), PL_EINVAL);
    cr_assert_eq(pl_loader_sample(NULL, 0, &path, &label), PL_EINVAL);

    int64_t order[24];
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, 22), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, 24), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, -1, order, 23), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, 0, NULL, 23), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, 23), 0);
    int seen[23] = {0};
    for (int k = 0; k < 23; k++)
        seen[order[k]]++;
    for (int k = 0; k < 23; k++)
        cr_assert_eq(seen[k], 1, "the order is a permutation");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* On CUDA, keep_host 0 means no host copy at all. */
Test(loader, keep_host_off_still_sets_host_on_the_host_backend,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    pl_config c;
    base_cfg(&c, root);
    c.keep_host = 0;
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0);
    if (tu_on_cuda()) {
        cr_assert_null(b->host);
    } else {
        cr_assert_not_null(b->host);
        cr_assert_eq(b->host, b->data);
    }
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* Without a GPU (CI), asking for CUDA device 0 is an error naming it, not
 * a run on the host. */
Test(loader, an_explicit_cuda_device_without_a_gpu_is_an_error,
     .timeout = TIMEOUT)
{
    if (tu_on_cuda())
        cr_skip_test("the host suite's check (test_cuda has the sim's)");
#ifdef PL_HAVE_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
        cr_skip_test("this machine has a GPU");
#endif
    char root[64];
    tu_make_tree(root, 6, 2);
    pl_config c;
    base_cfg(&c, root);
    c.device = 0;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECUDA, "%s", pl_last_error());
    cr_assert_null(l);
    cr_assert_not_null(
        strstr(pl_last_error(), "config.device: CUDA device 0 requested, but"),
        "%s", pl_last_error());
    c.device = PL_DEVICE_AUTO;
    l = create(&c);
    cr_assert_eq(info_of(l).backend, PL_BACKEND_HOST);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(loader, create_rejects_missing_or_empty_data, .timeout = TIMEOUT)
{
    pl_config c;
    base_cfg(&c, NULL);
    pl_loader *l = (pl_loader *)&c;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.data"), "%s",
                       pl_last_error());
    char root[64];
    tu_tmpdir(root);
    c.data = root;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ENODATA);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), root), "%s", pl_last_error());
    tu_rm_rf(root);
}

/* ---- files libjpeg decodes with warnings ---- */

/* A JPEG cut short (its bottom rows missing) decodes with libjpeg's
 * "premature end" warning: accepted, but recorded with code 0 and its count,
 * logged once and counted in the stats; under strict it is a bad file. */
Test(loader, files_decoded_with_warnings_are_recorded_and_strict_refuses_them,
     .timeout = TIMEOUT)
{
    char root[64], path[256];
    tu_make_tree(root, 6, 2);
    snprintf(path, sizeof path, "%s/c1/cut.jpg", root);
    tu_write_jpeg(path, 64, 200, 3, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    tu_write_file(path, bytes, len * 2 / 3);
    free(bytes);
    for (int strict = 0; strict < 2; strict++) {
        log_count lc;
        log_count_init(&lc);
        pl_config c;
        base_cfg(&c, root);
        c.augment = PL_AUGMENT_NONE; /* every row, so the cut is met */
        c.strict = strict;
        c.log = counting;
        c.log_ctx = &lc;
        pl_loader *l = create(&c);
        const pl_batch *b;
        int rc, delivered = 0;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            delivered += b->count;
            pl_loader_release(l, b, NULL);
        }
        cr_assert_eq(rc, PL_EPOCH_END);
        pl_failure f[4];
        size_t n;
        cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
        cr_assert_eq(n, 1, "strict %d: %zu records", strict, n);
        cr_assert_str_eq(f[0].path, path);
        cr_assert_geq(f[0].warnings, 1);
        cr_assert_not_null(strstr(f[0].reason, "Premature end"), "%s",
                           f[0].reason);
        pl_stats st;
        pl_loader_stats(l, &st);
        if (!strict) {
            cr_assert_eq(f[0].code, 0, "accepted");
            cr_assert_eq(delivered, 7, "the cut file is delivered");
            cr_assert_geq(st.images_warned, 1);
            cr_assert_eq(st.images_failed, 0);
            cr_assert_eq(lc.warnings, 1, "logged once");
            cr_assert_not_null(strstr(lc.warning[0], "libjpeg warning"), "%s",
                               lc.warning[0]);
        } else {
            cr_assert_eq(f[0].code, PL_ECORRUPT);
            cr_assert_eq(delivered, 7,
                         "skipped under strict, its place "
                         "taken by the order's first sample");
            cr_assert_eq(st.images_warned, 0);
            cr_assert_geq(st.images_failed, 1);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

/* Each record carries its own file's warning count: a file that cannot be
 * read, or is not a JPEG, right after one decoded with warnings has none. */
Test(loader, warning_counts_do_not_carry_over_to_the_next_file,
     .timeout = TIMEOUT)
{
    char root[64], path[256], list[256];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/cut.jpg", root);
    tu_write_jpeg(path, 64, 200, 3, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    tu_write_file(path, bytes, len * 2 / 3);
    free(bytes);
    snprintf(path, sizeof path, "%s/bmp.jpg", root);
    tu_write_file(path, "BM not really", 13);
    snprintf(list, sizeof list, "%s/list.txt", root);
    tu_write_file(list, "cut.jpg 0\nbmp.jpg 0\ngone.jpg 0\n", 31);
    pl_config c;
    base_cfg(&c, list);
    c.augment = PL_AUGMENT_NONE;
    c.shuffle = 0;
    c.num_workers = 1; /* one decoder meets the files in order */
    pl_loader *l = create(&c);
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0)
        pl_loader_release(l, b, NULL);
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    pl_failure f[4];
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(f[0].code, 0);
    cr_assert_geq(f[0].warnings, 1);
    cr_assert_eq(f[1].code, PL_ENOTJPEG);
    cr_assert_eq(f[1].warnings, 0, "bmp.jpg: %d warnings", f[1].warnings);
    cr_assert_eq(f[2].code, PL_EIO);
    cr_assert_eq(f[2].warnings, 0, "gone.jpg: %d warnings", f[2].warnings);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* Damage below the rows a crop needs: unseen (and unrecorded) normally,
 * found by strict mode, which judges the whole file. */
Test(loader, strict_mode_finds_damage_outside_the_crop, .timeout = TIMEOUT)
{
    char root[64], path[256];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/tall.jpg", root);
    tu_write_jpeg(path, 64, 400, 5, NULL);
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    tu_write_file(path, bytes, len * 9 / 10);
    free(bytes);
    for (int strict = 0; strict < 2; strict++) {
        pl_config c;
        base_cfg(&c, root);
        c.augment = PL_AUGMENT_EVAL; /* the centre rows, ~172..228 of 400 */
        c.strict = strict;
        pl_loader *l = create(&c);
        const pl_batch *b;
        int rc, delivered = 0;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            delivered += b->count;
            pl_loader_release(l, b, NULL);
        }
        /* Strict: the one file is bad, so the epoch has nothing at all. */
        cr_assert_eq(rc, strict ? PL_ENODATA : PL_EPOCH_END, "%s",
                     pl_last_error());
        pl_failure f[2];
        size_t n;
        cr_assert_eq(pl_loader_failures(l, 0, f, 2, &n), 0);
        if (!strict) {
            cr_assert_eq(delivered, 1);
            cr_assert_eq(n, 0, "the crop never reached the cut");
        } else {
            cr_assert_not_null(strstr(pl_last_error(), "epoch 0: none of the "
                                                       "1 samples"),
                               "%s", pl_last_error());
            cr_assert_eq(delivered, 0);
            cr_assert_eq(n, 1);
            cr_assert_eq(f[0].code, PL_ECORRUPT);
            cr_assert_not_null(strstr(f[0].reason, "Premature end"), "%s",
                               f[0].reason);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}
