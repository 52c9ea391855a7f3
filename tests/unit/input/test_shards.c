/* Datasets as tar shards (WebDataset layout): shards written by GNU tar in
 * its three formats and by Python's tarfile read back with bytes, labels
 * and order identical to the same files as an ImageFolder; keys, missing
 * labels, bad members, damaged shards, ranks, resume, PNG and WebP
 * members. The sidecar index and the dataset table file are
 * test_shards_index.c's; the system's edges (the open-file limit, an index
 * that cannot be written beside the data, FIFOs) test_shards_edges.c's. */
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
#include "testshards.h"
#include "testutil.h"

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
        tu_system(cmd);
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
        tu_system(cmd);
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
        tu_system(cmd);
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
    tu_system(cmd);
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
    tu_system(cmd);
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
    tu_system(cmd);
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
    tu_system(cmd);
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
    tu_system(cmd);
    /* Python's own reader agrees that b.tar is sound. */
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import tarfile; assert len(tarfile.open(\"%s/b.tar\")"
             ".getmembers()) == 24'",
             dir);
    tu_system(cmd);
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
    tu_system(cmd);
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
