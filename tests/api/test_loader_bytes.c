/* The public loader API, the bytes depend only on (seed, epoch, index), not
 * on the pipeline's shape (workers, prefetch, memory, device buffers,
 * pinning, readahead, batch size), and the float formats are the u8 output
 * normalised, and each sample is its file decoded alone, whatever the
 * worker decoded before it. Part of the loader suites (testloader.h), run on
 * the host backend and on simulated CUDA. */
#include <math.h>

#include "jpegquirks.h"
#include "testloader.h"

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
    fx_done(l, root);
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
/* One epoch of the same 16x12 tree in F32 (*f) and in the 16-bit format
 * `other` (*h), the same samples in both. */
static void f32_and_16_bit(char root[64], pl_format other, run *f, run *h)
{
    pl_config c;
    fx_tree(root, &c, 11, 2);
    c.width = 16;
    c.height = 12;
    c.format = PL_FORMAT_F32_NCHW;
    run_loader(&c, 1, f);
    c.format = other;
    run_loader(&c, 1, h);
    cr_assert_eq(h->sample_bytes, (size_t)16 * 12 * 3 * 2);
    cr_assert_eq(h->n, f->n);
}

Test(loader, f16_is_the_f32_output_rounded_to_half, .timeout = TIMEOUT)
{
    char root[64];
    run f[1], h[1];
    f32_and_16_bit(root, PL_FORMAT_F16_NCHW, f, h);
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

/* The bfloat16 nearest to f, ties to the even pattern, found by comparing
 * the two candidates in double precision (independent of the library's
 * bit arithmetic). */
static uint16_t nearest_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t lo = (uint16_t)(x >> 16), hi = (uint16_t)(lo + 1);
    float a, b;
    const uint32_t xa = (uint32_t)lo << 16, xb = (uint32_t)hi << 16;
    memcpy(&a, &xa, sizeof a);
    memcpy(&b, &xb, sizeof b);
    const double da = fabs((double)f - a), db = fabs((double)f - b);
    return da < db ? lo : db < da ? hi : (lo & 1) ? hi : lo;
}

/* BF16 delivers, bit for bit, the nearest bfloat16 of each F32 value. */
Test(loader, bf16_is_the_f32_output_rounded_to_bfloat16, .timeout = TIMEOUT)
{
    char root[64];
    run f[1], h[1];
    f32_and_16_bit(root, PL_FORMAT_BF16_NCHW, f, h);
    int inexact = 0;
    for (int k = 0; k < f[0].n; k++) {
        float fl[16 * 12 * 3];
        uint16_t hl[16 * 12 * 3];
        memcpy(fl, sample_at(&f[0], k), sizeof fl);
        memcpy(hl, sample_at(&h[0], k), sizeof hl);
        for (int i = 0; i < 16 * 12 * 3; i++) {
            const uint16_t want = nearest_bf16(fl[i]);
            cr_assert_eq(hl[i], want, "sample %d value %d: %04x for %.9g", k, i,
                         hl[i], (double)fl[i]);
            uint32_t x;
            memcpy(&x, &fl[i], sizeof x);
            inexact += (x & 0xFFFFu) != 0;
        }
    }
    cr_assert_gt(inexact, 100, "the values tried need rounding");
    run_free(&f[0]);
    run_free(&h[0]);
    tu_rm_rf(root);
}

/* channels_last: every float format's values are the NCHW run's,
 * interleaved [h][w][3]; u8 (always NHWC) is unchanged by it. */
Test(loader, channels_last_is_the_nchw_output_interleaved, .timeout = TIMEOUT)
{
    static const pl_format formats[] = {PL_FORMAT_F32_NCHW, PL_FORMAT_F16_NCHW,
                                        PL_FORMAT_BF16_NCHW, PL_FORMAT_U8_NHWC};
    enum { W = 16, H = 12 };
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        char root[64];
        pl_config c;
        fx_tree(root, &c, 9, 2);
        c.width = W;
        c.height = H;
        c.format = formats[f];
        run planar[1], last[1];
        run_loader(&c, 1, planar);
        c.channels_last = 1;
        run_loader(&c, 1, last);
        cr_assert_eq(last[0].n, planar[0].n);
        cr_assert_eq(last[0].sample_bytes, planar[0].sample_bytes);
        const size_t value = planar[0].sample_bytes / ((size_t)W * H * 3);
        for (int k = 0; k < planar[0].n; k++) {
            const uint8_t *p = sample_at(&planar[0], k);
            const uint8_t *q = sample_at(&last[0], k);
            if (formats[f] == PL_FORMAT_U8_NHWC) {
                cr_assert(memcmp(p, q, planar[0].sample_bytes) == 0,
                          "u8 sample %d changed", k);
                continue;
            }
            for (int ch = 0; ch < 3; ch++)
                for (int i = 0; i < W * H; i++)
                    cr_assert(memcmp(p + ((size_t)ch * W * H + i) * value,
                                     q + ((size_t)i * 3 + ch) * value,
                                     value) == 0,
                              "format %d sample %d channel %d pixel %d",
                              (int)formats[f], k, ch, i);
        }
        run_free(&planar[0]);
        run_free(&last[0]);
        tu_rm_rf(root);
    }
}

Test(loader, train_pixels_are_a_function_of_seed_epoch_and_index,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
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

/* ---- each sample is its file decoded alone ---- */

/* Files that lean on what a decoder could keep from the file before
 * (tests/jpegquirks.h), each right after one that sets it. */
static const jq_kind quirk_files[] = {
    JQ_OPTIMISED,   JQ_NO_DHT,        JQ_ARITH_K2,    JQ_ARITH_NO_DAC,
    JQ_CMYK_ADOBE,  JQ_CMYK_NO_ADOBE, JQ_RGB_ADOBE,   JQ_YCC_NO_JFIF,
    JQ_TABLES_ONLY, JQ_ABBREVIATED,   JQ_PROGRESSIVE, JQ_NO_DQT,
};
#define NQ ((int)(sizeof quirk_files / sizeof quirk_files[0]))

/* root/q<i>.jpg, root/list.txt naming them in order, and root/alone<i>.txt
 * naming q<i>.jpg NQ times: in that list, dataset index i is the same
 * (seed, epoch, index) as in list.txt, and every decode before it in any
 * worker is of the same file. */
static void write_quirk_lists(const char *root)
{
    char path[256], line[64];
    FILE *lists[NQ + 1];
    snprintf(path, sizeof path, "%s/list.txt", root);
    lists[NQ] = fopen(path, "w");
    for (int i = 0; i < NQ; i++) {
        const int w = 40 + i * 4, h = 36 + (i % 3) * 8;
        uint8_t *rgb = malloc((size_t)w * h * 3);
        tu_pattern(rgb, w, h, (unsigned)i + 5);
        size_t len;
        uint8_t *b = jq_make(quirk_files[i], rgb, w, h, &len);
        snprintf(path, sizeof path, "%s/q%02d.jpg", root, i);
        tu_write_file(path, b, len);
        free(b);
        free(rgb);
        snprintf(path, sizeof path, "%s/alone%02d.txt", root, i);
        lists[i] = fopen(path, "w");
        cr_assert_not_null(lists[i]);
    }
    for (int i = 0; i < NQ; i++) {
        snprintf(line, sizeof line, "q%02d.jpg %d\n", i, i % 3);
        fputs(line, lists[NQ]);
        for (int k = 0; k < NQ; k++) {
            snprintf(line, sizeof line, "q%02d.jpg %d\n", k, k % 3);
            fputs(line, lists[k]);
        }
    }
    for (int i = 0; i <= NQ; i++)
        cr_assert_eq(fclose(lists[i]), 0);
}

static void quirk_cfg(pl_config *c, const char *list, int workers)
{
    base_cfg(c, list);
    c->on_error = PL_ON_ERROR_SUBSTITUTE;
    c->batch_size = 4;
    c->num_workers = workers;
}

/* Every sample of r is dataset index i decoded alone: the sample with
 * index i in alone[i] of the same epoch, bytes and status. */
static void assert_each_alone(const run *r, run alone[][2], const char *what)
{
    for (int k = 0; k < r->n; k++) {
        const int i = (int)r->idx[k];
        const run *a = &alone[i][r->epoch];
        const int at = find_index(a, i);
        cr_assert_geq(at, 0);
        cr_assert_eq(r->st[k], a->st[at], "%s: %s: status %d, alone %d", what,
                     jq_name(quirk_files[i]), r->st[k], a->st[at]);
        cr_assert_eq(memcmp(sample_at(r, k), sample_at(a, at), r->sample_bytes),
                     0,
                     "%s: epoch %lld: %s after another file differs from "
                     "the file alone",
                     what, (long long)r->epoch, jq_name(quirk_files[i]));
    }
}

Test(loader, each_sample_is_its_file_alone_whatever_the_worker_decoded_before,
     .timeout = TIMEOUT)
{
    char root[64], path[256];
    tu_tmpdir(root);
    write_quirk_lists(root);
    pl_config c;
    run alone[NQ][2];
    for (int i = 0; i < NQ; i++) {
        snprintf(path, sizeof path, "%s/alone%02d.txt", root, i);
        quirk_cfg(&c, path, 1);
        run_loader(&c, 2, alone[i]);
    }
    /* The files that cannot be decoded alone are bad, the others good. */
    for (int i = 0; i < NQ; i++) {
        const jq_kind k = quirk_files[i];
        const int bad =
            k == JQ_NO_DQT || k == JQ_ABBREVIATED || k == JQ_TABLES_ONLY;
        const int at = find_index(&alone[i][0], i);
        cr_assert_eq(alone[i][0].st[at] != 0, bad, "%s: status %d", jq_name(k),
                     alone[i][0].st[at]);
    }
    snprintf(path, sizeof path, "%s/list.txt", root);
    run r[2];
    /* One worker in file order: every file right after the one that sets
     * what it leans on. Then four, shuffled. */
    for (int pass = 0; pass < 2; pass++) {
        quirk_cfg(&c, path, pass ? 4 : 1);
        c.shuffle = pass;
        run_loader(&c, 2, r);
        for (int e = 0; e < 2; e++) {
            assert_each_alone(&r[e], alone, pass ? "4 workers" : "1 worker");
            run_free(&r[e]);
        }
    }
    /* Resumed after one batch, on two workers. */
    quirk_cfg(&c, path, 3);
    pl_loader *l = create(&c);
    run_batches(l, 0, 0, 1, &r[0]);
    run_free(&r[0]);
    pl_state s;
    cr_assert_eq(pl_loader_state(l, &s), 0);
    pl_loader_destroy(l);
    quirk_cfg(&c, path, 2);
    c.resume = &s;
    l = create(&c);
    cr_assert_eq(run_batches(l, 0, 1, MAXB + 1, &r[0]), 1);
    run_epoch(l, 1, &r[1]);
    pl_loader_destroy(l);
    cr_assert_eq(r[0].n, NQ - 4);
    for (int e = 0; e < 2; e++) {
        assert_each_alone(&r[e], alone, "resumed");
        run_free(&r[e]);
    }
    for (int i = 0; i < NQ; i++) {
        run_free(&alone[i][0]);
        run_free(&alone[i][1]);
    }
    tu_rm_rf(root);
}
