/* Datasets as tar shards (WebDataset layout): shards written by GNU tar in
 * its three formats and by Python's tarfile read back with bytes, labels
 * and order identical to the same files as an ImageFolder; keys, missing
 * labels, bad members, damaged shards, ranks, the sidecar index, resume.
 * The system's edges (the open-file limit, an index that cannot be written
 * beside the data, FIFOs) are test_shards_edges.c's. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinload.h"
#include "testloader.h"
#include "testutil.h"

static void run_cmd(const char *cmd)
{
    const int rc = system(cmd);
    cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
}

/* The messages of a loader, a line each, a warning's after "warning: ". */
typedef struct kept_log {
    pthread_mutex_t mu;
    char text[8192];
    size_t len;
} kept_log;

static void keep_log(void *ctx, pl_log_level level, const char *msg)
{
    kept_log *k = ctx;
    pthread_mutex_lock(&k->mu);
    const int w = snprintf(k->text + k->len, sizeof k->text - k->len, "%s%s\n",
                           level == PL_LOG_WARNING ? "warning: " : "", msg);
    if (w > 0 && (size_t)w < sizeof k->text - k->len)
        k->len += (size_t)w;
    pthread_mutex_unlock(&k->mu);
}

/* root/c<k>/f<i>.jpg: `n` JPEGs in 3 classes (the ImageFolder), and beside
 * it stage/<key>.jpg + <key>.cls for each in the folder's file order. */
static void make_folder_and_stage(const char *dir, int n)
{
    char p[512];
    for (int i = 0; i < n; i++) {
        const int c = i * 3 / n;
        snprintf(p, sizeof p, "%s/folder/c%d/f%03d.jpg", dir, c, i);
        tu_mkdirs_for(p);
        tu_write_jpeg(p, 40 + (i % 5) * 9, 36 + (i % 4) * 11, (unsigned)i + 3,
                      NULL);
        char q[512];
        snprintf(q, sizeof q, "%s/stage/k%03d.jpg", dir, i);
        tu_mkdirs_for(q);
        size_t len;
        uint8_t *b = tu_read_file(p, &len);
        tu_write_file(q, b, len);
        free(b);
        snprintf(q, sizeof q, "%s/stage/k%03d.cls", dir, i);
        char label[8];
        snprintf(label, sizeof label, "%d\n", c);
        tu_write_file(q, label, strlen(label));
    }
}

/* dir/stage/k<i>.jpg for i < n (side x side, or side + i wide when
 * widen), then dir/s.tar of them in name order; [out] data: its path. */
static void tar_of_jpegs(const char *dir, int n, int side, int widen,
                         char data[128])
{
    char p[256], cmd[512];
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", dir, i);
        tu_write_jpeg(p, side + (widen ? i : 0), side, (unsigned)i, NULL);
    }
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar $(ls | sort)",
             dir);
    run_cmd(cmd);
    snprintf(data, 128, "%s/s.tar", dir);
}

typedef struct epoch_bytes {
    uint8_t *pixels;
    int32_t labels[256];
    int n;
    size_t sample_bytes;
} epoch_bytes;

/* One epoch of `data` (shuffled, seed 5, train augment) in `order`,
 * whole. */
static void read_epoch_in(const char *data, epoch_bytes *out, int workers,
                          int32_t order)
{
    pl_config c;
    base_cfg(&c, data);
    c.order = order;
    c.batch_size = 7;
    c.width = c.height = 24;
    c.seed = 5;
    c.num_workers = workers;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s: %s", data, pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    out->sample_bytes = info.sample_bytes;
    out->pixels = malloc(info.sample_bytes * 256);
    out->n = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        memcpy(out->pixels + (size_t)out->n * info.sample_bytes, b->data,
               b->bytes);
        memcpy(out->labels + out->n, b->labels, (size_t)b->count * 4);
        out->n += b->count;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s: %s", data, pl_last_error());
    pl_loader_destroy(l);
}

static void read_epoch(const char *data, epoch_bytes *out, int workers)
{
    read_epoch_in(data, out, workers, PL_ORDER_GLOBAL);
}

static void assert_same_epoch(const epoch_bytes *a, const epoch_bytes *b,
                              const char *what)
{
    cr_assert_eq(a->n, b->n, "%s: %d samples against %d", what, b->n, a->n);
    for (int i = 0; i < a->n; i++)
        cr_assert_eq(a->labels[i], b->labels[i], "%s: sample %d's label", what,
                     i);
    cr_assert(memcmp(a->pixels, b->pixels, a->sample_bytes * (size_t)a->n) == 0,
              "%s: pixels differ from the folder's", what);
}

/* The same files as a folder, as GNU tar's ustar, gnu and pax archives
 * (two shards each, split mid-way) and as Python's tarfile's: every epoch
 * byte for byte the same, labels included, whatever the worker count. */
Test(shards, every_writer_and_format_gives_the_folders_bytes,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[1024], data[256];
    tu_tmpdir(dir);
    make_folder_and_stage(dir, 30);
    snprintf(data, sizeof data, "%s/folder", dir);
    epoch_bytes ref;
    read_epoch(data, &ref, 2);
    cr_assert_eq(ref.n, 30);

    static const char *formats[] = {"ustar", "gnu", "pax"};
    for (int f = 0; f < 3; f++) {
        snprintf(cmd, sizeof cmd,
                 "cd %s/stage && mkdir -p ../%s && ls | sort | head -24 | "
                 "xargs tar --format=%s -cf ../%s/train-000.tar && ls | sort "
                 "| tail -n +25 | xargs tar --format=%s -cf "
                 "../%s/train-001.tar",
                 dir, formats[f], formats[f], formats[f], formats[f],
                 formats[f]);
        run_cmd(cmd);
        snprintf(data, sizeof data, "%s/%s", dir, formats[f]);
        epoch_bytes got;
        read_epoch(data, &got, 1 + f);
        assert_same_epoch(&ref, &got, formats[f]);
        free(got.pixels);
    }
    /* Python's tarfile in its three formats, one shard each, named by a
     * brace pattern. */
    static const char *py[] = {"USTAR", "GNU", "PAX"};
    for (int f = 0; f < 3; f++) {
        snprintf(cmd, sizeof cmd,
                 "cd %s/stage && mkdir -p ../py%d && python3 -c 'import "
                 "tarfile, os\nwith tarfile.open(\"../py%d/s-0.tar\", "
                 "\"w\", format=tarfile.%s_FORMAT) as t:\n    for n in "
                 "sorted(os.listdir(\".\")): t.add(n)'",
                 dir, f, f, py[f]);
        run_cmd(cmd);
        snprintf(data, sizeof data, "%s/py%d/s-{0..0}.tar", dir, f);
        epoch_bytes got;
        read_epoch(data, &got, 2);
        assert_same_epoch(&ref, &got, py[f]);
        free(got.pixels);
    }
    free(ref.pixels);
    tu_rm_rf(dir);
}

/* Long names (GNU 'L' and pax path records), keys with dots in folder
 * names, extensions WebDataset's way, a key without a cls (label 0, and a
 * warning that says so: its label is made up). */
Test(shards, long_names_dotted_keys_and_missing_labels, .timeout = TIMEOUT)
{
    char dir[64], cmd[2048];
    tu_tmpdir(dir);
    char longdir[256];
    snprintf(longdir, sizeof longdir,
             "a.very.long.folder.name.with.dots.that.goes.on.and.on/and.on."
             "and.on.past.one.hundred.characters.of.ustar.name.field");
    char p[512];
    snprintf(p, sizeof p, "%s/stage/%s/x1.jpg", dir, longdir);
    tu_write_jpeg(p, 30, 20, 1, NULL);
    snprintf(p, sizeof p, "%s/stage/%s/x1.cls", dir, longdir);
    tu_write_file(p, " 7\n", 3);
    snprintf(p, sizeof p, "%s/stage/%s/x2.JPEG", dir, longdir);
    tu_write_jpeg(p, 20, 30, 2, NULL); /* no cls: label 0 */
    for (int f = 0; f < 2; f++) {
        const char *fmt = f ? "pax" : "gnu";
        snprintf(cmd, sizeof cmd,
                 "cd %s/stage && tar --format=%s -cf ../%s.tar $(find . "
                 "-type f | sort)",
                 dir, fmt, fmt);
        run_cmd(cmd);
        char data[256];
        snprintf(data, sizeof data, "%s/%s.tar", dir, fmt);
        pl_config c;
        base_cfg(&c, data);
        c.shuffle = 0;
        c.batch_size = 2;
        c.on_error = PL_ON_ERROR_FAIL;
        kept_log lg = {.mu = PTHREAD_MUTEX_INITIALIZER};
        c.log = keep_log;
        c.log_ctx = &lg;
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        cr_assert_not_null(strstr(lg.text, "warning: 1 of 2 sample(s) have "
                                           "no cls member"),
                           "%s", lg.text);
        cr_assert_not_null(strstr(lg.text, "x2: they are labelled 0"), "%s",
                           lg.text);
        pl_info info;
        pl_loader_info(l, &info);
        cr_assert_eq(info.dataset_size, 2);
        cr_assert_eq(info.num_classes, 8);
        const char *path;
        int32_t label;
        cr_assert_eq(pl_loader_sample(l, 0, &path, &label), 0);
        cr_assert_eq(label, 7);
        cr_assert_not_null(strstr(path, "x1.jpg"), "%s", path);
        cr_assert_not_null(strstr(path, longdir), "%s", path);
        cr_assert_eq(pl_loader_sample(l, 1, &path, &label), 0);
        cr_assert_eq(label, 0);
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        cr_assert_eq(b->count, 2);
        pl_loader_destroy(l);
    }
    tu_rm_rf(dir);
}

/* Bad samples inside a good shard: a key with no image, a label that is
 * not one, a member over max_file_bytes; each the sample's error under
 * FAIL (named), skipped under SKIP with every good sample delivered. */
Test(shards, bad_members_are_the_samples_errors, .timeout = TIMEOUT)
{
    char dir[64], cmd[1024], p[256];
    tu_tmpdir(dir);
    for (int i = 0; i < 6; i++) {
        snprintf(p, sizeof p, "%s/stage/g%d.jpg", dir, i);
        tu_write_jpeg(p, 24, 24, (unsigned)i, NULL);
    }
    snprintf(p, sizeof p, "%s/stage/g9.jpg", dir); /* large: over the limit */
    tu_write_jpeg(p, 400, 400, 9, NULL);
    snprintf(p, sizeof p, "%s/stage/h1.txt", dir); /* no image */
    tu_write_file(p, "hello", 5);
    snprintf(p, sizeof p, "%s/stage/h2.jpg", dir); /* a bad label */
    tu_write_jpeg(p, 24, 24, 2, NULL);
    snprintf(p, sizeof p, "%s/stage/h2.cls", dir);
    tu_write_file(p, "cat\n", 4);
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar $(ls | sort)",
             dir);
    run_cmd(cmd);
    char data[128];
    snprintf(data, sizeof data, "%s/s.tar", dir);
    static const struct {
        int index;
        int code;
        const char *reason;
    } bad[] = {
        {6, PL_ELIMIT, "over the limit of 4000"},
        {7, PL_ENOTIMAGE, "key h1 has no jpg, jpeg, png or webp member"},
        {8, PL_ECORRUPT, "h2.cls: \"cat\" is not a label"},
    };
    pl_config c;
    base_cfg(&c, data);
    c.shuffle = 0;
    c.batch_size = 3;
    c.num_workers = 1;
    c.max_file_bytes = 4000;
    c.on_error = PL_ON_ERROR_SKIP;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    int delivered = 0, rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        for (int k = 0; k < b->count; k++)
            cr_assert_lt(b->indices[k], 6, "a bad sample delivered");
        delivered += b->count;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(delivered, 9); /* SKIP keeps the epoch's length */
    pl_failure f[4];
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, f, 4, &n), 0);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < 3; j++)
            if (f[i].index == bad[j].index) {
                cr_assert_eq(f[i].code, bad[j].code, "%s", f[i].reason);
                cr_assert_not_null(strstr(f[i].reason, bad[j].reason), "%s",
                                   f[i].reason);
                cr_assert_not_null(strstr(f[i].path, "s.tar:"), "%s",
                                   f[i].path);
            }
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* A shard cut short, and one with a damaged header in the middle: create
 * fails naming the shard and the byte. */
Test(shards, damaged_shards_are_refused_naming_shard_and_byte,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[1024], p[256];
    tu_tmpdir(dir);
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", dir, i);
        tu_write_jpeg(p, 64, 64, (unsigned)i, NULL);
    }
    snprintf(cmd, sizeof cmd,
             "cd %s && mkdir cut bad && cd stage && tar -cf ../cut/a.tar $(ls "
             "| sort) && cp ../cut/a.tar ../bad/a.tar && cp ../cut/a.tar "
             "../cut/b.tar",
             dir);
    run_cmd(cmd);
    /* b.tar, the last shard: cut inside its third member's data. */
    char data[128];
    snprintf(data, sizeof data, "%s/cut/b.tar", dir);
    size_t len;
    uint8_t *bytes = tu_read_file(data, &len);
    size_t member[4], m = 0;
    for (size_t off = 0; off + 512 <= len && m < 4; off += 512)
        if (memcmp(bytes + off + 257, "ustar", 5) == 0)
            member[m++] = off;
    cr_assert_eq(m, 4);
    tu_write_file(data, bytes, member[2] + 700);
    snprintf(data, sizeof data, "%s/cut", dir);
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECORRUPT);
    cr_assert_not_null(strstr(pl_last_error(), "cut/b.tar: truncated"), "%s",
                       pl_last_error());
    char at[64];
    snprintf(at, sizeof at, "k2.jpg at byte %zu", member[2]);
    cr_assert_not_null(strstr(pl_last_error(), at), "%s", pl_last_error());
    /* a.tar with its second header damaged */
    bytes[member[1] + 20] ^= 0x55;
    snprintf(data, sizeof data, "%s/bad/a.tar", dir);
    tu_write_file(data, bytes, len);
    base_cfg(&c, data);
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECORRUPT);
    snprintf(at, sizeof at, "a.tar: byte %zu: not a tar header", member[1]);
    cr_assert_not_null(strstr(pl_last_error(), at), "%s", pl_last_error());
    free(bytes);
    tu_rm_rf(dir);
}

/* 3 ranks over 5 shards: equal batches, disjoint samples covering the
 * dataset (padded as DistributedSampler pads). */
Test(shards, three_ranks_over_five_shards, .timeout = TIMEOUT)
{
    char dir[64], cmd[1024], p[256];
    tu_tmpdir(dir);
    for (int i = 0; i < 25; i++) {
        snprintf(p, sizeof p, "%s/stage/k%02d.jpg", dir, i);
        tu_write_jpeg(p, 32, 32, (unsigned)i, NULL);
    }
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && mkdir ../shards && for s in 0 1 2 3 4; do tar "
             "-cf ../shards/p-$s.tar $(ls | sort | sed -n \"$((s*5+1)),"
             "$((s*5+5))p\"); done",
             dir);
    run_cmd(cmd);
    char data[128];
    snprintf(data, sizeof data, "%s/shards", dir);
    int seen[25] = {0};
    int64_t batches[3];
    for (int r = 0; r < 3; r++) {
        pl_config c;
        base_cfg(&c, data);
        c.rank = r;
        c.world_size = 3;
        c.batch_size = 4;
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        pl_info info;
        pl_loader_info(l, &info);
        cr_assert_eq(info.dataset_size, 25);
        batches[r] = 0;
        const pl_batch *b;
        while (pl_loader_next(l, &b) == 0) {
            for (int k = 0; k < b->count; k++)
                seen[b->indices[k]]++;
            batches[r]++;
            pl_loader_release(l, b, NULL);
        }
        pl_loader_destroy(l);
    }
    cr_assert_eq(batches[0], batches[1]);
    cr_assert_eq(batches[1], batches[2]);
    int total = 0;
    for (int i = 0; i < 25; i++) {
        cr_assert_geq(seen[i], 1, "sample %d never delivered", i);
        total += seen[i];
    }
    cr_assert_eq(total, 27); /* 25 padded to 27 = 3 x 9 */
    tu_rm_rf(dir);
}

/* A shard cut after create: the members past the cut fail with the reason.
 * With one ring slot and one device buffer, epoch 1 cannot be read before
 * the caller releases epoch 0's first batch: the cut comes before that. */
Test(shards, a_shard_cut_after_create_fails_the_members_past_the_cut,
     .timeout = TIMEOUT)
{
    char dir[64], data[128];
    tu_tmpdir(dir);
    tar_of_jpegs(dir, 4, 48, 0, data);
    pl_config c;
    base_cfg(&c, data);
    c.shuffle = 0;
    c.batch_size = 2;
    c.prefetch = 1;
    c.device_buffers = 1;
    c.num_workers = 1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->status[0], 0);
    /* Epoch 0's second batch is made, and nothing more can be. */
    pl_stats st = {0};
    for (int t = 0; t < 10000 && st.images_decoded < 4; t++) {
        pl_loader_stats(l, &st);
        usleep(1000);
    }
    cr_assert_eq(st.images_decoded, 4);
    cr_assert_eq(truncate(data, 1024), 0); /* inside the first member */
    pl_loader_release(l, b, NULL);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->status[1], 0, "epoch 0 was read before the cut");
    pl_loader_release(l, b, NULL);
    cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->epoch, 1);
    cr_assert_eq(b->status[0], PL_EIO);
    cr_assert_eq(b->status[1], PL_EIO);
    pl_loader_release(l, b, NULL);
    pl_failure f;
    size_t n;
    cr_assert_eq(pl_loader_failures(l, 0, &f, 1, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(f.index, 0);
    cr_assert_not_null(strstr(f.reason, "the shard ends at byte 1024, inside "
                                        "this member"),
                       "%s", f.reason);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* pl_loader_read_sample: a member's bytes are the file's that was packed;
 * too small a buffer says how many are needed; pl_image_decode of them is
 * pl_image_load of the file. */
Test(shards, read_sample_gives_the_packed_files_bytes, .timeout = TIMEOUT)
{
    char dir[64], data[128], p[256];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k3.txt", dir);
    tu_mkdirs_for(p);
    tu_write_file(p, "no image", 8);
    tar_of_jpegs(dir, 3, 30, 1, data);
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", dir, i);
        size_t want_len;
        uint8_t *want = tu_read_file(p, &want_len);
        size_t len = 0;
        cr_assert_eq(pl_loader_read_sample(l, i, NULL, 0, &len), PL_EINVAL);
        cr_assert_eq(len, want_len);
        uint8_t *got = malloc(len);
        cr_assert_eq(pl_loader_read_sample(l, i, got, len, &len), 0, "%s",
                     pl_last_error());
        cr_assert(memcmp(got, want, len) == 0, "member %d's bytes", i);
        pl_image a, b;
        cr_assert_eq(pl_image_decode(got, len, &a), 0, "%s", pl_last_error());
        cr_assert_eq(pl_image_load(p, &b), 0, "%s", pl_last_error());
        cr_assert_eq(a.width, 30 + i);
        cr_assert_eq(a.height, b.height);
        cr_assert(memcmp(a.pixels, b.pixels, (size_t)a.width * a.height * 3) ==
                  0);
        pl_image_free(&a);
        pl_image_free(&b);
        free(got);
        free(want);
    }
    size_t len;
    uint8_t buf[16];
    memset(buf, 'x', sizeof buf);
    cr_assert_eq(pl_loader_read_sample(l, 3, buf, sizeof buf, &len),
                 PL_ENOTIMAGE);
    cr_assert_not_null(strstr(pl_last_error(), "s.tar:k3"), "%s",
                       pl_last_error());
    cr_assert_eq(pl_image_decode(buf, 4, &(pl_image){0}), PL_ENOTIMAGE);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* The sidecar index: the first create writes shard.tar.idx; a later one
 * reads it instead of the headers (shown by damaging a header while
 * keeping the shard's size and mtime: still read, same bytes); once the
 * shard's mtime changes, the stale index is refused and the damage shows. */
Test(shards, the_sidecar_index_is_reused_and_refused_when_stale,
     .timeout = TIMEOUT)
{
    char dir[64], data[128], idx[160];
    tu_tmpdir(dir);
    tar_of_jpegs(dir, 5, 40, 0, data);
    snprintf(idx, sizeof idx, "%s/s.tar.idx", dir);
    epoch_bytes first;
    read_epoch(data, &first, 2);
    cr_assert_eq(access(idx, R_OK), 0, "no sidecar index written");

    /* Damage the first header's name, keep size and mtime. */
    struct stat st;
    cr_assert_eq(stat(data, &st), 0);
    size_t len;
    uint8_t *bytes = tu_read_file(data, &len);
    bytes[0] ^= 0x20;
    tu_write_file(data, bytes, len);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    cr_assert_eq(utimensat(AT_FDCWD, data, times, 0), 0);
    epoch_bytes again;
    read_epoch(data, &again, 1);
    assert_same_epoch(&first, &again, "from the sidecar");

    /* The shard changes (its mtime): the index is stale, not used. */
    const struct timespec later[2] = {st.st_atim, {st.st_mtim.tv_sec + 10, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, data, later, 0), 0);
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECORRUPT, "%s", pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "byte 0: not a tar header"),
                       "%s", pl_last_error());
    free(bytes);
    free(first.pixels);
    free(again.pixels);
    tu_rm_rf(dir);
}

/* With PINLOAD_INDEX_DIR set, the index goes there (named by a hash of the
 * shard's absolute path), never next to the shard, and is read back. */
Test(shards, pinload_index_dir_keeps_indexes_out_of_the_data,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 40, 40, 1, NULL);
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar k0.jpg", dir);
    run_cmd(cmd);
    char cache[128], data[128];
    snprintf(cache, sizeof cache, "%s/cache/deep", dir);
    setenv("PINLOAD_INDEX_DIR", cache, 1);
    snprintf(data, sizeof data, "%s/s.tar", dir);
    epoch_bytes a, b;
    read_epoch(data, &a, 1);
    snprintf(p, sizeof p, "%s/s.tar.idx", dir);
    cr_assert_neq(access(p, F_OK), 0, "an index next to the shard");
    snprintf(cmd, sizeof cmd, "ls %s | grep -c -- '-s.tar.idx$'", cache);
    FILE *f = popen(cmd, "r");
    char count[16] = "";
    cr_assert_not_null(fgets(count, sizeof count, f));
    pclose(f);
    cr_assert_str_eq(count, "1\n");
    read_epoch(data, &b, 1);
    assert_same_epoch(&a, &b, "from the cache's index");
    free(a.pixels);
    free(b.pixels);
    tu_rm_rf(dir);
}

/* Resume on shards as on folders: the state after two batches, in a new
 * loader with other workers, delivers exactly the rest. */
Test(shards, resume_mid_epoch_on_shards_delivers_exactly_the_rest,
     .timeout = TIMEOUT)
{
    char dir[64], data[128];
    tu_tmpdir(dir);
    make_folder_and_stage(dir, 20);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && mkdir ../sh && ls | sort | head -20 | xargs tar "
             "-cf ../sh/a.tar && ls | sort | tail -n +21 | xargs tar -cf "
             "../sh/b.tar",
             dir);
    run_cmd(cmd);
    snprintf(data, sizeof data, "%s/sh", dir);
    epoch_bytes whole;
    read_epoch(data, &whole, 2);
    pl_config c;
    base_cfg(&c, data);
    c.batch_size = 7;
    c.width = c.height = 24;
    c.seed = 5;
    c.num_workers = 2;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        pl_loader_release(l, b, NULL);
    }
    pl_state st;
    cr_assert_eq(pl_loader_state(l, &st), 0);
    pl_loader_destroy(l);
    c.resume = &st;
    c.num_workers = 1;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    int at = 14;
    while (pl_loader_next(l, &b) == 0) {
        cr_assert(memcmp(b->data, whole.pixels + info.sample_bytes * (size_t)at,
                         b->bytes) == 0,
                  "batch %lld differs", (long long)b->index);
        at += b->count;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(at, 20);
    pl_loader_destroy(l);
    free(whole.pixels);
    tu_rm_rf(dir);
}

/* What other writers put in a shard: a pax global header first (as `git
 * archive` and tarfile's pax_headers write; it is no member), and a size
 * in GNU's base-256 form (GNU tar's for members past 8 GiB; here every
 * member's, checksums redone): the folder's bytes all the same. */
Test(shards, pax_global_headers_and_base_256_sizes, .timeout = TIMEOUT)
{
    char dir[64], cmd[2048], data[256];
    tu_tmpdir(dir);
    make_folder_and_stage(dir, 12);
    snprintf(data, sizeof data, "%s/folder", dir);
    epoch_bytes ref;
    read_epoch(data, &ref, 2);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && python3 -c 'import tarfile, os\n"
             "with tarfile.open(\"../g.tar\", \"w\", "
             "format=tarfile.PAX_FORMAT, pax_headers={\"comment\": "
             "\"0123abcd\"}) as t:\n"
             "    for n in sorted(os.listdir(\".\")): t.add(n)\n"
             "with tarfile.open(\"../b.tar\", \"w\", "
             "format=tarfile.GNU_FORMAT) as t:\n"
             "    for n in sorted(os.listdir(\".\")): t.add(n)\n"
             "b = bytearray(open(\"../b.tar\", \"rb\").read())\n"
             "off = n = 0\n"
             "while any(b[off:off + 512]):\n"
             "    size = int(b[off + 124:off + 136].strip(b\" \\0\"), 8)\n"
             "    b[off + 124:off + 136] = b\"\\x80\" + size.to_bytes(11, "
             "\"big\")\n"
             "    b[off + 148:off + 156] = b\" \" * 8\n"
             "    b[off + 148:off + 156] = b\"%%06o\\0 \" %% sum(b[off:off + "
             "512])\n"
             "    off += 512 + (size + 511) // 512 * 512\n"
             "    n += 1\n"
             "assert n == 24, n\n"
             "open(\"../b.tar\", \"wb\").write(b)'",
             dir);
    run_cmd(cmd);
    /* Python's own reader agrees that b.tar is sound. */
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import tarfile; assert len(tarfile.open(\"%s/b.tar\")"
             ".getmembers()) == 24'",
             dir);
    run_cmd(cmd);
    static const char *const shard[] = {"g.tar", "b.tar"};
    for (int i = 0; i < 2; i++) {
        snprintf(data, sizeof data, "%s/%s", dir, shard[i]);
        epoch_bytes got;
        read_epoch(data, &got, 2);
        assert_same_epoch(&ref, &got, shard[i]);
        free(got.pixels);
    }
    /* The global header really is there, and is a 'g'. */
    size_t len;
    snprintf(data, sizeof data, "%s/g.tar", dir);
    uint8_t *g = tu_read_file(data, &len);
    cr_assert(len > 512 && g[156] == 'g', "no global header first");
    free(g);
    free(ref.pixels);
    tu_rm_rf(dir);
}

/* ---- PNG and WebP members ---- */

static void copy_fixture(const char *name, const char *to)
{
    char p[256];
    snprintf(p, sizeof p, "tests/fixtures/formats/%s", name);
    size_t len;
    uint8_t *b = tu_read_file(p, &len);
    cr_assert_not_null(b, "%s: missing", p);
    tu_mkdirs_for(to);
    tu_write_file(to, b, len);
    free(b);
}

/* png and webp members are images: a shard of JPEG, PNG and WebP keys
 * gives the bytes of the same files as a flat folder; a tif member beside
 * a key's png is named in a warning, and so is the folder's .tif file. */
Test(shards, png_and_webp_members_are_images_and_others_are_named,
     .timeout = TIMEOUT)
{
    char dir[64], p[512], cmd[512];
    tu_tmpdir(dir);
    static const char *const members[][2] = {
        {"k0.jpg", NULL},          {"k1.png", "p8_trns.png"},
        {"k2.webp", "lossy.webp"}, {"k3.png", "rgba16_adam7.png"},
        {"k3.tif", NULL},          {"k4.webp", "lossless_alpha.webp"},
    };
    for (size_t i = 0; i < sizeof members / sizeof *members; i++) {
        snprintf(p, sizeof p, "%s/stage/%s", dir, members[i][0]);
        if (members[i][1])
            copy_fixture(members[i][1], p);
        else if (strstr(p, ".jpg"))
            tu_write_jpeg(p, 45, 33, 9, NULL);
        else
            tu_write_file(p, "II*\0", 4);
    }
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar $(ls | sort)",
             dir);
    run_cmd(cmd);
    char tar[128], stage[128];
    snprintf(tar, sizeof tar, "%s/s.tar", dir);
    snprintf(stage, sizeof stage, "%s/stage", dir);
    epoch_bytes from_tar, from_folder;
    read_epoch(tar, &from_tar, 3);
    read_epoch(stage, &from_folder, 2);
    cr_assert_eq(from_tar.n, 5);
    assert_same_epoch(&from_folder, &from_tar, "png/webp shard");
    free(from_tar.pixels);
    free(from_folder.pixels);
    /* the warnings */
    const char *const data[2] = {tar, stage};
    for (int k = 0; k < 2; k++) {
        kept_log lg = {.mu = PTHREAD_MUTEX_INITIALIZER};
        pl_config c;
        base_cfg(&c, data[k]);
        c.log = keep_log;
        c.log_ctx = &lg;
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        pl_loader_destroy(l);
        char want[512];
        if (k == 0)
            snprintf(want, sizeof want,
                     "warning: 1 image member(s) of kinds not supported (bmp, "
                     "pgm, ppm, tif, tiff; JPEG, PNG and WebP are) left out: "
                     "%s:k3.tif",
                     tar);
        else
            snprintf(want, sizeof want,
                     "warning: %s: 1 .tif file not supported (JPEG, PNG and "
                     "WebP are), left out: k3.tif",
                     stage);
        cr_assert_not_null(strstr(lg.text, want), "want \"%s\" in:\n%s", want,
                           lg.text);
    }
    tu_rm_rf(dir);
}

/* ---- the sidecar index, version 2, mapped ---- */

static void le(uint8_t **p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        *(*p)++ = (uint8_t)(v >> (8 * i));
}

/* A version-1 index ("PLTARIX1") of the shard at `shard`: k0.jpg as
 * `jpeg_size` bytes at 512, and a k0.cls member the shard does not hold
 * whose small bytes say `label`, so that a sample labelled so shows that
 * the index was read, not the headers. */
static void write_v1_index(const char *shard, int64_t jpeg_size,
                           const char *label)
{
    struct stat st;
    cr_assert_eq(stat(shard, &st), 0);
    uint8_t b[512], *p = b;
    memcpy(p, "PLTARIX1", 8);
    p += 8;
    le(&p, (uint64_t)st.st_size, 8);
    le(&p, (uint64_t)st.st_mtim.tv_sec, 8);
    le(&p, (uint64_t)st.st_mtim.tv_nsec, 8);
    le(&p, 2, 8);
    le(&p, 512, 8); /* k0.jpg */
    le(&p, (uint64_t)jpeg_size, 8);
    le(&p, 6, 4);
    *p++ = 255;
    memcpy(p, "k0.jpg", 6);
    p += 6;
    le(&p, 0, 8); /* k0.cls */
    le(&p, strlen(label), 8);
    le(&p, 6, 4);
    *p++ = (uint8_t)strlen(label);
    memcpy(p, "k0.cls", 6);
    p += 6;
    memcpy(p, label, strlen(label));
    p += strlen(label);
    uint64_t h = 0xcbf29ce484222325u;
    for (const uint8_t *q = b; q < p; q++)
        h = (h ^ *q) * 0x100000001b3u;
    le(&p, h, 8);
    char idx[256];
    snprintf(idx, sizeof idx, "%s.idx", shard);
    tu_write_file(idx, b, (size_t)(p - b));
}

/* The first 8 bytes of the shard's index: its version's magic. */
static void index_magic(const char *shard, char *magic)
{
    char idx[256];
    snprintf(idx, sizeof idx, "%s.idx", shard);
    size_t len;
    uint8_t *b = tu_read_file(idx, &len);
    cr_assert_geq(len, 8);
    memcpy(magic, b, 8);
    magic[8] = '\0';
    free(b);
}

static int32_t first_label(const char *data)
{
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    int32_t label = -1;
    cr_assert_eq(pl_loader_sample(l, 0, NULL, &label), 0);
    pl_loader_destroy(l);
    return label;
}

/* An index of version 1, as earlier releases and packs wrote them, is
 * still read (its label, which the shard lacks, is the sample's), then
 * written anew as version 2, which the next create maps: same label. */
Test(shards, a_version_1_index_is_read_and_kept_as_version_2,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128], magic[9];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 20, 20, 1, NULL);
    size_t jlen;
    free(tu_read_file(p, &jlen));
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar k0.jpg", dir);
    run_cmd(cmd);
    snprintf(data, sizeof data, "%s/s.tar", dir);
    write_v1_index(data, (int64_t)jlen, "7");
    cr_assert_eq(first_label(data), 7, "the version-1 index was not read");
    index_magic(data, magic);
    cr_assert_str_eq(magic, "PLTARIX2");
    cr_assert_eq(first_label(data), 7, "the version-2 index lost the label");
    tu_rm_rf(dir);
}

/* A version-2 index that does not check (a byte flipped) is stale: the
 * shard is read anew, and the index written again. */
Test(shards, a_damaged_version_2_index_is_written_anew, .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128], idx[160], magic[9];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 20, 20, 1, NULL);
    snprintf(p, sizeof p, "%s/stage/k0.cls", dir);
    tu_write_file(p, "4", 1);
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar k0.jpg k0.cls",
             dir);
    run_cmd(cmd);
    snprintf(data, sizeof data, "%s/s.tar", dir);
    snprintf(idx, sizeof idx, "%s.idx", data);
    cr_assert_eq(first_label(data), 4);
    size_t len;
    uint8_t *b = tu_read_file(idx, &len);
    b[len - 20] ^= 0x01;
    tu_write_file(idx, b, len);
    kept_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pl_config c;
    base_cfg(&c, data);
    c.log = keep_log;
    c.log_ctx = &n;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    cr_assert_not_null(strstr(n.text, "did not match their shard"), "%s",
                       n.text);
    uint8_t *again = tu_read_file(idx, &len);
    b[len - 20] ^= 0x01;
    cr_assert_eq(memcmp(b, again, len), 0, "the index was not written anew");
    index_magic(data, magic);
    cr_assert_str_eq(magic, "PLTARIX2");
    free(b);
    free(again);
    tu_rm_rf(dir);
}

/* Where no index can be written (PINLOAD_INDEX_DIR under a file), the
 * shards' tables are held in memory instead, with a notice, and the
 * samples are the same bytes. */
Test(shards, without_a_writable_index_place_the_tables_live_in_memory,
     .timeout = TIMEOUT)
{
    char dir[64], data[128], nowhere[160];
    tu_tmpdir(dir);
    tar_of_jpegs(dir, 4, 24, 0, data);
    epoch_bytes a, b;
    read_epoch(data, &a, 1); /* indexed beside the shard */
    char idx[160];
    snprintf(idx, sizeof idx, "%s.idx", data);
    cr_assert_eq(unlink(idx), 0);
    snprintf(nowhere, sizeof nowhere, "%s/file/sub", dir);
    snprintf(idx, sizeof idx, "%s/file", dir);
    tu_write_file(idx, "", 0);
    setenv("PINLOAD_INDEX_DIR", nowhere, 1);
    kept_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pl_config c;
    base_cfg(&c, data);
    c.log = keep_log;
    c.log_ctx = &n;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    cr_assert_not_null(strstr(n.text, "1 of 1 shard(s) have no index file "
                                      "mapped"),
                       "%s", n.text);
    read_epoch(data, &b, 2);
    assert_same_epoch(&a, &b, "tables in memory");
    unsetenv("PINLOAD_INDEX_DIR");
    free(a.pixels);
    free(b.pixels);
    tu_rm_rf(dir);
}

/* A shard sample's name is made when asked for and kept until destroy:
 * the same pointer each time, still valid after many others were made;
 * a key without an image is named by its key. */
Test(shards, sample_names_are_made_once_and_kept_until_destroy,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128], want[256];
    tu_tmpdir(dir);
    for (int i = 0; i < 300; i++) {
        snprintf(p, sizeof p, "%s/stage/d/k%03d.jpg", dir, i);
        if (i == 0)
            tu_write_jpeg(p, 16, 16, 1, NULL);
        else
            tu_write_file(p, "x", 1); /* names matter here, not bytes */
    }
    snprintf(p, sizeof p, "%s/stage/d/k300.cls", dir);
    tu_write_file(p, "0", 1);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && tar -cf ../s.tar $(find d -type f | sort)", dir);
    run_cmd(cmd);
    snprintf(data, sizeof data, "%s/s.tar", dir);
    pl_config c;
    base_cfg(&c, data);
    c.on_error = PL_ON_ERROR_SKIP;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const char *first, *again, *last;
    cr_assert_eq(pl_loader_sample(l, 0, &first, NULL), 0);
    snprintf(want, sizeof want, "%s:d/k000.jpg", data);
    cr_assert_str_eq(first, want, "%s against %s", first, want);
    for (int64_t i = 1; i < 301; i++) {
        const char *name;
        cr_assert_eq(pl_loader_sample(l, i, &name, NULL), 0);
        if (i < 300)
            snprintf(want, sizeof want, "%s:d/k%03d.jpg", data, (int)i);
        else
            snprintf(want, sizeof want, "%s:d/k300", data);
        cr_assert_str_eq(name, want);
        last = name;
    }
    cr_assert_eq(pl_loader_sample(l, 0, &again, NULL), 0);
    cr_assert_eq(again, first, "a name asked twice was made twice");
    snprintf(want, sizeof want, "%s:d/k000.jpg", data);
    cr_assert_str_eq(first, want, "a kept name moved");
    snprintf(want, sizeof want, "%s:d/k300", data);
    cr_assert_str_eq(last, want);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* The dataset table file of folder idx: its path, and [out] *st. */
static void node_tables_at(const char *idx, char path[512], struct stat *st)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*.tables", idx);
    FILE *f = popen(cmd, "r");
    path[0] = '\0';
    cr_assert_not_null(fgets(path, 512, f), "no .tables file in %s", idx);
    cr_assert_null(fgets(cmd, sizeof cmd, f), "two .tables files in %s", idx);
    pclose(f);
    path[strcspn(path, "\n")] = '\0';
    cr_assert_eq(stat(path, st), 0, "%s", path);
}

/* One create of data with its notices in *n. */
static void create_logged(const char *data, kept_log *n)
{
    pl_config c;
    base_cfg(&c, data);
    c.log = keep_log;
    c.log_ctx = n;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
}

/* dir/data/t-000.tar .. t-039.tar: 40 shards of 2 samples (KEY.jpg and
 * KEY.cls, labels 0, 1, 2 in turn). */
static void make_forty_shards(const char *dir)
{
    char cmd[1024];
    for (int i = 0; i < 80; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/stage/k%03d.jpg", dir, i);
        tu_write_jpeg(p, 20 + i % 7, 22, (unsigned)i, NULL);
        snprintf(p, sizeof p, "%s/stage/k%03d.cls", dir, i);
        char label[16];
        snprintf(label, sizeof label, "%d\n", i % 3);
        tu_write_file(p, label, strlen(label));
    }
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && mkdir ../data && for s in $(seq 0 39); do "
             "a=$(printf k%%03d $((2 * s))); b=$(printf k%%03d $((2 * s + "
             "1))); tar -cf ../data/t-$(printf %%03d $s).tar $a.jpg $a.cls "
             "$b.jpg $b.cls; done",
             dir);
    run_cmd(cmd);
}

/* Past the mapped-table limit (lowered to 16 by the test hook
 * PINLOAD_MAPPED_MAX), 40 shards' tables come from one dataset table file
 * in PINLOAD_INDEX_DIR, mapped once: the same epoch as below the limit,
 * in either order; the file is found and reused by the next create
 * (same inode and mtime); a shard changed since, or a byte of the file
 * flipped, makes it written anew, never trusted. */
Test(shards, past_the_mapping_limit_tables_come_from_one_file,
     .timeout = TIMEOUT)
{
    char dir[64], data[128], idx[128], file[512];
    tu_tmpdir(dir);
    make_forty_shards(dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(idx, sizeof idx, "%s/below", dir);
    setenv("PINLOAD_INDEX_DIR", idx, 1);
    epoch_bytes ref, ref_shards, e;
    read_epoch(data, &ref, 2);
    read_epoch_in(data, &ref_shards, 2, PL_ORDER_SHARDS);
    cr_assert_eq(ref.n, 80);

    snprintf(idx, sizeof idx, "%s/idx", dir);
    setenv("PINLOAD_INDEX_DIR", idx, 1);
    setenv("PINLOAD_MAPPED_MAX", "16", 1);
    kept_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    create_logged(data, &n);
    cr_assert_not_null(strstr(n.text, "40 tar shards (over 16): their tables "
                                      "are mapped from one file"),
                       "%s", n.text);
    cr_assert_not_null(strstr(n.text, "(written now)"), "%s", n.text);
    cr_assert_null(strstr(n.text, "no index file mapped"), "%s", n.text);
    cr_assert_null(strstr(n.text, "warning: "), "every key has its cls: %s",
                   n.text);
    struct stat first, st;
    node_tables_at(idx, file, &first);

    read_epoch(data, &e, 1);
    assert_same_epoch(&ref, &e, "tables from one file");
    free(e.pixels);
    read_epoch_in(data, &e, 2, PL_ORDER_SHARDS);
    assert_same_epoch(&ref_shards, &e, "PL_ORDER_SHARDS from one file");
    free(e.pixels);
    node_tables_at(idx, file, &st);
    cr_assert_eq(st.st_ino, first.st_ino, "the file was written again");
    cr_assert_eq(st.st_mtim.tv_nsec, first.st_mtim.tv_nsec);
    cr_assert_eq(st.st_mtim.tv_sec, first.st_mtim.tv_sec);
    n = (kept_log){.mu = PTHREAD_MUTEX_INITIALIZER};
    create_logged(data, &n);
    cr_assert_not_null(strstr(n.text, "(found)"), "%s", n.text);

    /* A shard touched since: its identity differs, the file is stale. */
    char shard[256];
    snprintf(shard, sizeof shard, "%s/t-007.tar", data);
    const struct timespec when[2] = {{.tv_sec = 1000000000},
                                     {.tv_sec = 1000000000}};
    cr_assert_eq(utimensat(AT_FDCWD, shard, when, 0), 0);
    n = (kept_log){.mu = PTHREAD_MUTEX_INITIALIZER};
    create_logged(data, &n);
    cr_assert_not_null(strstr(n.text, "written anew"), "%s", n.text);
    node_tables_at(idx, file, &st);
    cr_assert_neq(st.st_ino, first.st_ino, "a stale file was kept");
    read_epoch(data, &e, 2);
    assert_same_epoch(&ref, &e, "after a shard was touched");
    free(e.pixels);

    /* A byte flipped in the last table, then in the directory. */
    for (int at = 0; at < 2; at++) {
        FILE *f = fopen(file, "r+b");
        cr_assert_not_null(f);
        cr_assert_eq(fseek(f, at == 0 ? -20 : 32 + 5 * 64 + 16,
                           at == 0 ? SEEK_END : SEEK_SET),
                     0);
        const int c = fgetc(f);
        cr_assert_eq(fseek(f, -1, SEEK_CUR), 0);
        fputc(c ^ 0x55, f);
        fclose(f);
        struct stat flipped;
        cr_assert_eq(stat(file, &flipped), 0);
        n = (kept_log){.mu = PTHREAD_MUTEX_INITIALIZER};
        create_logged(data, &n);
        cr_assert_not_null(strstr(n.text, "written anew"), "%d: %s", at,
                           n.text);
        node_tables_at(idx, file, &st);
        cr_assert_neq(st.st_ino, flipped.st_ino, "%d: a damaged file kept", at);
        read_epoch(data, &e, 2);
        assert_same_epoch(&ref, &e, "after a damaged file");
        free(e.pixels);
    }
    unsetenv("PINLOAD_MAPPED_MAX");
    unsetenv("PINLOAD_INDEX_DIR");
    free(ref.pixels);
    free(ref_shards.pixels);
    tu_rm_rf(dir);
}

/* Ranks racing to write the dataset table file (four processes creating
 * at once, none there yet): one writes it while the others wait on its
 * lock, then they map it; each create succeeds with every sample, and
 * one file is left, no temporary one. */
Test(shards, ranks_racing_to_write_the_table_file_all_succeed,
     .timeout = TIMEOUT)
{
    char dir[64], data[128], idx[128], file[512], cmd[600];
    tu_tmpdir(dir);
    make_forty_shards(dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(idx, sizeof idx, "%s/idx", dir);
    setenv("PINLOAD_INDEX_DIR", idx, 1);
    setenv("PINLOAD_MAPPED_MAX", "16", 1);
    pid_t pid[4];
    for (int r = 0; r < 4; r++) {
        pid[r] = fork();
        cr_assert_geq(pid[r], 0);
        if (pid[r] == 0) {
            kept_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
            pl_config c;
            base_cfg(&c, data);
            c.log = keep_log;
            c.log_ctx = &n;
            pl_loader *l;
            int code = 1;
            if (pl_loader_create(&c, &l) == 0) {
                pl_info info;
                pl_loader_info(l, &info);
                if (info.dataset_size == 80)
                    code = strstr(n.text, "(written now)") ? 10
                           : strstr(n.text, "(found)")     ? 11
                                                           : 2;
                pl_loader_destroy(l);
            }
            _exit(code);
        }
    }
    int wrote = 0;
    for (int r = 0; r < 4; r++) {
        int status;
        cr_assert_eq(waitpid(pid[r], &status, 0), pid[r]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) >= 10,
                  "rank %d failed (%d)", r, WEXITSTATUS(status));
        wrote += WEXITSTATUS(status) == 10;
    }
    cr_assert_eq(wrote, 1, "%d ranks wrote the table file", wrote);
    struct stat st;
    node_tables_at(idx, file, &st);
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", idx);
    FILE *f = popen(cmd, "r");
    char count[16] = "";
    cr_assert_not_null(fgets(count, sizeof count, f));
    pclose(f);
    cr_assert_str_eq(count, "0\n", "temporary files left in %s", idx);
    unsetenv("PINLOAD_MAPPED_MAX");
    unsetenv("PINLOAD_INDEX_DIR");
    tu_rm_rf(dir);
}
