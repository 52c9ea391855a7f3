/* One fuzz input through the whole loader: a configuration and a file tree
 * built from the input's bytes, shared by the libFuzzer target
 * (fuzz_loader.c) and the seeded runs in the regular suite
 * (test_fuzz_loader.c).
 *
 * The input drives, byte by byte (missing bytes read as 0):
 * - every pl_config field: sizes down to 1x1 and ratios up to 1:64, every
 *   augment, format, policy, shard mode, ring and buffer count, limits and
 *   budgets set low enough to trip, and now and then one field set to an
 *   arbitrary 32- or 64-bit value (create must then refuse it naming the
 *   field, or accept it);
 * - a tree of up to 14 entries under up to 3 class folders: good JPEGs
 *   (baseline, progressive, gray, 1x1 to 48x48), truncated ones, bytes from
 *   the input, empty files, FIFOs, symlinks (to a sibling, to themselves,
 *   dangling, to a folder above), links to /dev/zero and /dev/null, folders
 *   named like JPEGs;
 * - what happens to files after create: deleted, grown, truncated to zero.
 * Then one epoch (and the start of the next) is delivered and destroy is
 * timed. The contract checked: create fails with a sentence or succeeds;
 * every batch has 1..batch_size samples with labels and indices in range;
 * under SKIP and SUBSTITUTE an epoch that ends has exactly
 * batches_per_epoch batches; SUBSTITUTE never stops and SKIP only with
 * PL_ENODATA (a whole pass without a good sample), every error with a
 * sentence; substituted samples are all zeros; destroy returns within the
 * decode time limit plus 2 s. A violation aborts.
 *
 * fuzz_shards_one does the same over tar shards built from the input (see
 * there), with the same contract. */
#ifndef PINLOAD_FUZZ_LOADER_HARNESS_H
#define PINLOAD_FUZZ_LOADER_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../jpegwrite.h"
#include "pinload.h"

/* Paths: the scratch folder is short (a mkdtemp name). */
#define FZ_ROOT 256
#define FZ_PATH 320

typedef struct fz_in {
    const uint8_t *p;
    size_t n, at;
} fz_in;

static inline unsigned fz_u8(fz_in *in)
{
    return in->at < in->n ? in->p[in->at++] : 0;
}

static inline uint64_t fz_u64(fz_in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)fz_u8(in) << (8 * i);
    return v;
}

static inline void fz_check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_loader: broken contract: %s (%s)\n", what,
                pl_last_error());
        abort();
    }
}

static inline double fz_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Quiet, unless PINLOAD_FUZZ_VERBOSE is set (to replay one input). */
static void fz_quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    if (getenv("PINLOAD_FUZZ_VERBOSE"))
        fprintf(stderr, "%s%s\n", level ? "warning: " : "", msg);
}

/* The configuration, from the input. */
static inline void fz_config(fz_in *in, pl_config *c)
{
    pl_config_default(c);
    c->log = fz_quiet;
    c->device = PL_DEVICE_HOST;
    c->batch_size = 1 + (int)(fz_u8(in) % 9);
    const unsigned shape = fz_u8(in);
    c->width = 1 + (int)(fz_u8(in) % 48);
    c->height = shape & 1 ? c->width : 1 + (int)(fz_u8(in) % 48);
    if (shape & 2) /* extreme ratios */
        c->height = shape & 4 ? 1 : 64;
    c->format = (int32_t)(fz_u8(in) % 3);
    c->augment = (int32_t)(fz_u8(in) % 3);
    c->seed = fz_u64(in, 2);
    const unsigned flags = fz_u8(in);
    c->shuffle = flags & 1;
    c->drop_last = (flags >> 1) & 1;
    c->dct_scaling = (flags >> 2) & 1;
    c->strict = (flags >> 3) & 1;
    c->pin_workers = (flags >> 4) & 1;
    c->memory = (int32_t)((flags >> 5) % 3);
    c->on_error = (int32_t)(fz_u8(in) % 3);
    c->world_size = 1 + (int32_t)(fz_u8(in) % 3);
    c->rank = (int32_t)(fz_u8(in) % (unsigned)c->world_size);
    c->shard_mode = (int32_t)(fz_u8(in) & 1);
    c->first_epoch = fz_u8(in) % 4;
    c->num_workers = 1 + (int32_t)(fz_u8(in) % 3);
    c->prefetch = 1 + (int32_t)(fz_u8(in) % 3);
    c->device_buffers = 1 + (int32_t)(fz_u8(in) % 3);
    c->readahead = (int32_t)(fz_u8(in) % 3);
    const unsigned limits = fz_u8(in);
    if (limits & 1)
        c->max_width = 1 + (int32_t)(fz_u8(in) % 64);
    if (limits & 2)
        c->max_height = 1 + (int32_t)(fz_u8(in) % 64);
    if (limits & 4)
        c->max_pixels = 1 + (int64_t)(fz_u8(in) * 16);
    if (limits & 8)
        c->max_file_bytes = 1 + (int64_t)(fz_u8(in) * 8);
    if (limits & 16)
        c->max_scans = 1 + (int32_t)(fz_u8(in) % 8);
    if (limits & 32)
        c->max_decode_memory = ((int64_t)1 << 20) + fz_u8(in);
    c->max_decode_ms = limits & 64 ? 50 + (int32_t)(fz_u8(in) % 200) : 2000;
    /* Now and then one field holds anything at all. */
    const unsigned wild = fz_u8(in);
    if (wild < 24) {
        int32_t *i32[] = {&c->batch_size,     &c->width,
                          &c->height,         &c->format,
                          &c->augment,        &c->shuffle,
                          &c->drop_last,      &c->rank,
                          &c->world_size,     &c->shard_mode,
                          &c->num_workers,    &c->prefetch,
                          &c->memory,         &c->pinned_fallback,
                          &c->device_buffers, &c->keep_host,
                          &c->on_error,       &c->strict,
                          &c->max_width,      &c->max_height,
                          &c->dct_scaling,    &c->readahead,
                          &c->max_scans,      &c->max_decode_ms};
        *i32[wild] = (int32_t)(uint32_t)fz_u64(in, 4);
        /* Valid but large sizes and counts would only test the
         * machine's memory: not this harness's subject. */
        int32_t *v = i32[wild];
        if (*v > 64 && (v == &c->num_workers || v == &c->prefetch ||
                        v == &c->device_buffers || v == &c->batch_size))
            *v = 64;
        if (*v > 1024 && *v <= 65535 && (v == &c->width || v == &c->height))
            *v = 1024;
    } else if (wild < 30) {
        int64_t *i64[] = {&c->first_epoch, &c->max_pixels, &c->max_file_bytes,
                          &c->max_decode_memory};
        *i64[wild % 4] = (int64_t)fz_u64(in, 8);
    } else if (wild < 32) {
        const float v = (float)(int32_t)(uint32_t)fz_u64(in, 4) * 1e-3f;
        c->std[wild & 1 ? 1 : 0] = wild & 1 ? v : 1e-30f;
    }
}

enum {
    FZ_GOOD,
    FZ_PROGRESSIVE,
    FZ_GRAY,
    FZ_TRUNCATED,
    FZ_BYTES,
    FZ_EMPTY,
    FZ_FIFO,
    FZ_LINK,
    FZ_DEVICE,
    FZ_DIR,
    FZ_KINDS
};

/* Writes entry i of the tree, from the input. */
static inline void fz_entry(fz_in *in, const char *root, int i, char *path,
                            size_t cap)
{
    const unsigned kind = fz_u8(in) % FZ_KINDS;
    const unsigned cls = fz_u8(in) % 3;
    char dir[FZ_ROOT + 8];
    snprintf(dir, sizeof dir, "%.*s/c%u", FZ_ROOT - 1, root, cls);
    mkdir(dir, 0755);
    snprintf(path, cap, "%s/e%02d.jpg", dir, i % 100);
    switch (kind) {
    case FZ_GOOD:
    case FZ_PROGRESSIVE:
    case FZ_GRAY:
    case FZ_TRUNCATED: {
        const int w = 1 + (int)(fz_u8(in) % 48), h = 1 + (int)(fz_u8(in) % 48);
        uint8_t *rgb = malloc((size_t)w * h * 3);
        const unsigned seed = fz_u8(in);
        for (int k = 0; k < w * h * 3; k++)
            rgb[k] = (uint8_t)(seed * 31 + (unsigned)k * 7);
        tu_jpeg_opts o = {.quality = 50 + (int)(seed % 50),
                          .progressive = kind == FZ_PROGRESSIVE,
                          .gray = kind == FZ_GRAY,
                          .h_samp = 1 + (int)(seed & 1),
                          .v_samp = 1 + (int)((seed >> 1) & 1)};
        fz_check(tu_jpeg_encode_file(path, rgb, w, h, &o) == 0, "write");
        free(rgb);
        if (kind == FZ_TRUNCATED) {
            struct stat st;
            if (stat(path, &st) == 0)
                fz_check(truncate(path, (off_t)(fz_u8(in) %
                                                (unsigned)(st.st_size + 1))) ==
                             0,
                         "truncate");
        }
        break;
    }
    case FZ_BYTES: {
        FILE *f = fopen(path, "wb");
        fz_check(f != NULL, "fopen");
        const unsigned n = fz_u8(in) % 64;
        if (fz_u8(in) & 1) { /* a JPEG's start, then anything */
            fputc(0xff, f);
            fputc(0xd8, f);
        }
        for (unsigned k = 0; k < n; k++)
            fputc((int)fz_u8(in), f);
        fclose(f);
        break;
    }
    case FZ_EMPTY:
        close(open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644));
        break;
    case FZ_FIFO:
        fz_check(mkfifo(path, 0644) == 0, "mkfifo");
        break;
    case FZ_LINK: {
        static const char *targets[] = {"e00.jpg",     "e01.jpg", "e02.jpg",
                                        "nowhere.jpg", "..",      "."};
        const unsigned t = fz_u8(in) % 7;
        /* 6: a link to itself */
        char self[32];
        snprintf(self, sizeof self, "e%02d.jpg", i);
        fz_check(symlink(t == 6 ? self : targets[t], path) == 0, "symlink");
        break;
    }
    case FZ_DEVICE:
        fz_check(symlink(fz_u8(in) & 1 ? "/dev/zero" : "/dev/null", path) == 0,
                 "symlink");
        break;
    case FZ_DIR: /* a folder named like a JPEG, maybe with one inside */
        mkdir(path, 0755);
        if (fz_u8(in) & 1) {
            char inner[FZ_PATH + 8];
            snprintf(inner, sizeof inner, "%.*s/x.jpg", FZ_PATH - 1, path);
            uint8_t px[3] = {1, 2, 3};
            tu_jpeg_encode_file(inner, px, 1, 1, &(tu_jpeg_opts){0});
        }
        break;
    }
}

static inline void fz_rm_rf(const char *root)
{
    char cmd[FZ_ROOT + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        abort();
}

/* Create a loader from c over the tree at root, or check how create
 * refused (removing the tree then): NULL. */
static inline pl_loader *fz_create(const pl_config *c, const char *root)
{
    pl_loader *l = NULL;
    const int rc = pl_loader_create(c, &l);
    if (getenv("PINLOAD_FUZZ_VERBOSE"))
        fprintf(stderr, "create %s: %s%s\n", c->data, pl_err_name(rc),
                rc < 0 ? pl_last_error() : "");
    if (rc < 0) {
        fz_check(l == NULL, "no loader on failure");
        fz_check(pl_last_error()[0] != '\0', "create's reason");
        fz_check(rc != PL_EINVAL || strstr(pl_last_error(), "config.") ||
                     strstr(pl_last_error(), root),
                 "EINVAL names a field or the data");
        fz_rm_rf(root);
    }
    return l;
}

/* Two epochs' start of a created loader, checked against the contract,
 * then destroy, timed. */
static inline void fz_deliver(pl_loader *l, const pl_config *cfg)
{
    const pl_config c = *cfg;
    pl_info info;
    fz_check(pl_loader_info(l, &info) == 0, "info");
    const int tolerant = c.on_error != PL_ON_ERROR_FAIL;
    for (int epoch = 0; epoch < 2; epoch++) {
        int64_t batches = 0;
        const pl_batch *b;
        int r;
        while ((r = pl_loader_next(l, &b)) == 0) {
            fz_check(b->count >= 1 && b->count <= info.batch_size, "count");
            fz_check(b->epoch == c.first_epoch + epoch, "epoch");
            fz_check(b->index == batches, "batch index");
            for (int k = 0; k < b->count; k++) {
                fz_check(b->labels[k] >= 0 && b->labels[k] < info.num_classes,
                         "label");
                fz_check(b->indices[k] >= 0 &&
                             b->indices[k] < info.dataset_size,
                         "index");
                fz_check(b->status[k] == 0 ||
                             c.on_error == PL_ON_ERROR_SUBSTITUTE,
                         "status");
                if (b->status[k] != 0) {
                    const uint8_t *px =
                        (const uint8_t *)b->data + k * info.sample_bytes;
                    for (size_t j = 0; j < info.sample_bytes; j++)
                        fz_check(px[j] == 0, "a substitute is zeros");
                }
            }
            batches++;
            fz_check(pl_loader_release(l, b, NULL) == 0, "release");
            if (epoch == 1)
                break; /* the next epoch's start is enough */
        }
        if (getenv("PINLOAD_FUZZ_VERBOSE"))
            fprintf(stderr,
                    "epoch %d (on_error %d): %lld batches of %lld, "
                    "then %s\n",
                    epoch, (int)c.on_error, (long long)batches,
                    (long long)info.batches_per_epoch, pl_err_name(r));
        if (r == PL_EPOCH_END) {
            fz_check(!tolerant || batches == info.batches_per_epoch,
                     "an epoch that ends has batches_per_epoch batches");
        } else if (r < 0) {
            fz_check(pl_last_error()[0] != '\0', "next's reason");
            /* Only FAIL stops at a bad sample; SKIP stops only when a
             * whole pass decodes nothing; SUBSTITUTE never stops. */
            fz_check(c.on_error == PL_ON_ERROR_FAIL ||
                         (c.on_error == PL_ON_ERROR_SKIP && r == PL_ENODATA),
                     "the error policy's outcome");
            fz_check(r != PL_EBUSY, "not busy: every batch was released");
            break;
        }
    }
    const double t0 = fz_now();
    pl_loader_destroy(l);
    const double limit = c.max_decode_ms > 0 ? c.max_decode_ms / 1e3 : 5.0;
    fz_check(fz_now() - t0 < limit + 2.0, "destroy's bound");
}

/* One input, in a fresh tree under `scratch` (an existing folder). */
static inline void fuzz_loader_one(const uint8_t *data, size_t size,
                                   const char *scratch)
{
    fz_in in = {data, size, 0};
    pl_config c;
    fz_config(&in, &c);

    char root[FZ_ROOT];
    snprintf(root, sizeof root, "%.*s/tree", FZ_ROOT - 8, scratch);
    fz_rm_rf(root);
    fz_check(mkdir(root, 0755) == 0, "mkdir");
    const int entries = 1 + (int)(fz_u8(&in) % 14);
    char paths[14][FZ_PATH];
    for (int i = 0; i < entries; i++)
        fz_entry(&in, root, i, paths[i], sizeof paths[i]);
    c.data = root;

    pl_loader *l = fz_create(&c, root);
    if (!l)
        return;
    /* After create: files vanish, grow, shrink. */
    for (int i = 0; i < entries; i++) {
        const unsigned what = fz_u8(&in) % 8;
        if (getenv("PINLOAD_FUZZ_VERBOSE") && what >= 1 && what <= 3)
            fprintf(stderr, "after create: %s %s\n", paths[i],
                    what == 1   ? "deleted"
                    : what == 2 ? "grown"
                                : "emptied");
        if (what == 1)
            unlink(paths[i]);
        else if (what == 2) {
            /* (not through a FIFO or a link: opening one to write would
             * block this harness, not the loader) */
            struct stat st;
            FILE *f = lstat(paths[i], &st) == 0 && S_ISREG(st.st_mode)
                          ? fopen(paths[i], "ab")
                          : NULL;
            if (f) {
                for (int k = 0; k < 100; k++)
                    fputc(k, f);
                fclose(f);
            }
        } else if (what == 3)
            (void)truncate(paths[i], 0);
    }

    fz_deliver(l, &c);
    fz_rm_rf(root);
}

/* ---- the same over tar shards ---- */

/* One ustar member (name up to 99 bytes) of n bytes into f. */
static inline void fz_tar_member(FILE *f, const char *name, const void *data,
                                 size_t n)
{
    char h[512];
    memset(h, 0, sizeof h);
    snprintf(h, 100, "%s", name);
    snprintf(h + 100, 8, "%07o", 0644);
    snprintf(h + 108, 8, "%07o", 0);
    snprintf(h + 116, 8, "%07o", 0);
    snprintf(h + 124, 12, "%011o", (unsigned)n);
    snprintf(h + 136, 12, "%011o", 0);
    memset(h + 148, ' ', 8);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    fwrite(h, 1, sizeof h, f);
    fwrite(data, 1, n, f);
    static const char zeros[512];
    fwrite(zeros, 1, (512 - n % 512) % 512, f);
}

/* A JPEG (w x h from the input, maybe progressive or gray) in memory,
 * through a file in dir. */
static inline uint8_t *fz_jpeg_bytes(fz_in *in, const char *dir, size_t *n)
{
    const int w = 1 + (int)(fz_u8(in) % 40), h = 1 + (int)(fz_u8(in) % 40);
    const unsigned seed = fz_u8(in);
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int k = 0; k < w * h * 3; k++)
        rgb[k] = (uint8_t)(seed * 17 + (unsigned)k * 5);
    char path[FZ_PATH];
    snprintf(path, sizeof path, "%.*s/one.jpg", FZ_ROOT - 1, dir);
    tu_jpeg_opts o = {.progressive = seed & 1, .gray = (seed >> 1) & 1};
    fz_check(tu_jpeg_encode_file(path, rgb, w, h, &o) == 0, "write");
    free(rgb);
    FILE *f = fopen(path, "rb");
    fz_check(f != NULL, "reopen");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*n ? *n : 1);
    fz_check(fread(b, 1, *n, f) == *n, "read back");
    fclose(f);
    unlink(path);
    return b;
}

/* One input over tar shards: up to 3 shards of up to 14 keys, written by
 * this harness's ustar writer from the input: good JPEGs, truncated ones,
 * bytes, keys without an image, labels that are not labels, extra
 * members, a key that comes back later, keys in folders; the shards maybe
 * without their end blocks, cut short, with a damaged header or trailing
 * bytes; something in place of the first shard's index (bytes, an empty
 * file, a folder, a FIFO); named as one shard, the folder, a brace pattern
 * or a list (maybe naming a shard that is not there); after create shards
 * cut, deleted or grown. The contract is fuzz_loader_one's. */
static inline void fuzz_shards_one(const uint8_t *data, size_t size,
                                   const char *scratch)
{
    fz_in in = {data, size, 0};
    pl_config c;
    fz_config(&in, &c);
    char root[FZ_ROOT], xdg[FZ_PATH];
    snprintf(root, sizeof root, "%.*s/tree", FZ_ROOT - 8, scratch);
    fz_rm_rf(root);
    fz_check(mkdir(root, 0755) == 0, "mkdir");
    /* An index that cannot go next to its shard goes here, not to ~. */
    snprintf(xdg, sizeof xdg, "%s/xdg", root);
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("PINLOAD_INDEX_DIR");

    const int nshards = 1 + (int)(fz_u8(&in) % 3);
    char paths[3][FZ_PATH];
    FILE *f[3];
    for (int s = 0; s < nshards; s++) {
        snprintf(paths[s], sizeof paths[s], "%s/s-%d.tar", root, s);
        f[s] = fopen(paths[s], "wb");
        fz_check(f[s] != NULL, "fopen shard");
    }
    const int keys = 1 + (int)(fz_u8(&in) % 14);
    for (int i = 0; i < keys; i++) {
        FILE *t = f[fz_u8(&in) % (unsigned)nshards];
        const unsigned kind = fz_u8(&in) % 8, how = fz_u8(&in);
        char key[64], name[80];
        if (how % 8 == 0 && i > 0)
            snprintf(key, sizeof key, "k00"); /* back, not adjacent */
        else
            snprintf(key, sizeof key, "%sk%02d", how & 8 ? "d/" : "", i);
        size_t n = 0;
        uint8_t *b = NULL;
        if (kind <= 3 || kind >= 6) {
            b = fz_jpeg_bytes(&in, root, &n);
            if (kind == 3)
                n = fz_u8(&in) % (unsigned)(n + 1); /* truncated */
        } else if (kind == 4) {
            n = fz_u8(&in) % 64;
            b = malloc(n + 1);
            for (size_t k = 0; k < n; k++)
                b[k] = (uint8_t)fz_u8(&in);
        }
        if (b) {
            snprintf(name, sizeof name, "%s.%s", key,
                     how & 16 ? "jpeg" : "jpg");
            fz_tar_member(t, name, b, n);
            free(b);
        }
        if (how & 32 || kind == 5 || kind == 6) {
            static const char *const bad[] = {
                "cat", "", "1048576", "-1", "99999999999", "2 3"};
            char label[32];
            if (kind == 6)
                snprintf(label, sizeof label, "%s", bad[fz_u8(&in) % 6]);
            else
                snprintf(label, sizeof label, "%u\n", fz_u8(&in) % 5);
            snprintf(name, sizeof name, "%s.cls", key);
            fz_tar_member(t, name, label, strlen(label));
        }
        if (kind == 7) {
            snprintf(name, sizeof name, "%s.txt", key);
            fz_tar_member(t, name, "caption", 7);
        }
    }
    for (int s = 0; s < nshards; s++) {
        static const char end[1024];
        if (!(fz_u8(&in) & 1))
            fwrite(end, 1, sizeof end, f[s]);
        fclose(f[s]);
    }
    /* Damage to the first shard. */
    const unsigned damage = fz_u8(&in) % 10;
    struct stat st;
    fz_check(stat(paths[0], &st) == 0, "stat");
    if (damage == 0) {
        fz_check(truncate(paths[0], (off_t)(fz_u64(&in, 2) %
                                            (uint64_t)(st.st_size + 1))) == 0,
                 "truncate");
    } else if (damage == 1 || damage == 2) {
        FILE *g = fopen(paths[0], damage == 1 ? "r+b" : "ab");
        fz_check(g != NULL, "reopen shard");
        if (damage == 1) { /* one byte of the first header */
            fseek(g, (long)(fz_u8(&in) % 512), SEEK_SET);
            fputc((int)fz_u8(&in), g);
        } else {
            for (int k = 0; k < 100; k++)
                fputc((int)fz_u8(&in), g);
        }
        fclose(g);
    }
    /* Something in place of the first shard's index. */
    char idx[FZ_PATH + 8];
    snprintf(idx, sizeof idx, "%s.idx", paths[0]);
    const unsigned sidecar = fz_u8(&in) % 5;
    if (sidecar == 0 || sidecar == 1) {
        FILE *g = fopen(idx, "wb");
        fz_check(g != NULL, "write idx");
        for (int k = 0; sidecar == 0 && k < 64; k++)
            fputc((int)fz_u8(&in), g);
        fclose(g);
    } else if (sidecar == 2) {
        mkdir(idx, 0755);
    } else if (sidecar == 3) {
        fz_check(mkfifo(idx, 0644) == 0, "mkfifo");
    }
    /* How the data is named. */
    char where[FZ_PATH + 32];
    switch (fz_u8(&in) % 4) {
    case 0:
        snprintf(where, sizeof where, "%s", paths[0]);
        break;
    case 1:
        snprintf(where, sizeof where, "%s", root);
        break;
    case 2:
        snprintf(where, sizeof where, "%s/s-{0..%d}.tar", root, nshards - 1);
        break;
    default: {
        snprintf(where, sizeof where, "%s/list.txt", root);
        FILE *g = fopen(where, "w");
        fz_check(g != NULL, "write list");
        for (int s = 0; s < nshards; s++)
            fprintf(g, "%s\n", paths[s]);
        if (fz_u8(&in) % 4 == 0)
            fprintf(g, "%s/missing.tar\n", root);
        fclose(g);
    }
    }
    c.data = where;

    pl_loader *l = fz_create(&c, root);
    if (!l)
        return;
    /* After create: shards cut, deleted, grown. */
    for (int s = 0; s < nshards; s++) {
        const unsigned what = fz_u8(&in) % 6;
        if (what == 1 && stat(paths[s], &st) == 0)
            (void)truncate(
                paths[s], (off_t)(fz_u64(&in, 2) % (uint64_t)(st.st_size + 1)));
        else if (what == 2)
            unlink(paths[s]);
        else if (what == 3) {
            FILE *g = fopen(paths[s], "ab");
            if (g) {
                fputs("grown after create", g);
                fclose(g);
            }
        }
    }
    fz_deliver(l, &c);
    fz_rm_rf(root);
}

#endif
