/* pinload-pack, the tool: shards that read back as the folder they came
 * from, the size and count limits, --max-side re-encoding, unreadable
 * samples named and left out. Runs the binary from $PINLOAD_BUILD. */
#include <criterion/criterion.h>

#include <sys/wait.h>

#include "../codecs/codec.h"
#include "pinload.h"
#include "testloader.h"
#include "testutil.h"

/* "pinload-pack ARGS"; its exit status, stderr in *err (malloc'd). */
static int pack(const char *scratch, const char *args, char **err)
{
    char tool[512], cmd[4096], errf[256];
    snprintf(tool, sizeof tool, "%s/pinload-pack", tu_build_dir());
    cr_assert_eq(access(tool, X_OK), 0, "%s is missing: run make tools", tool);
    snprintf(errf, sizeof errf, "%s/pack-stderr.txt", scratch);
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s'", tool, args, errf);
    const int st = system(cmd);
    *err = tu_slurp(errf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every sample of `data` (file order, eval crop), pixels and labels. */
static uint8_t *epoch_of(const char *data, int32_t *labels, int *n,
                         size_t *sample)
{
    pl_config c;
    base_cfg(&c, data);
    c.shuffle = 0;
    c.augment = PL_AUGMENT_EVAL;
    c.batch_size = 5;
    c.width = c.height = 20;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s: %s", data, pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    *sample = info.sample_bytes;
    uint8_t *px = malloc(info.sample_bytes * 64);
    *n = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        memcpy(px + *sample * (size_t)*n, b->data, b->bytes);
        memcpy(labels + *n, b->labels, (size_t)b->count * 4);
        *n += b->count;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    pl_loader_destroy(l);
    return px;
}

Test(pack, shards_read_back_as_the_folder_within_the_limits, .timeout = TIMEOUT)
{
    char root[64], out[128], args[512], *err;
    pl_config c;
    fx_tree(root, &c, 23, 3);
    snprintf(out, sizeof out, "%s-shards", root); /* beside the data */
    snprintf(args, sizeof args, "--data %s --out %s --shard-size 20KB --quiet",
             root, out);
    cr_assert_eq(pack(root, args, &err), 0, "%s", err);
    free(err);
    /* Each shard within 20 KB, the manifest's counts summing to 23. */
    char path[256];
    snprintf(path, sizeof path, "%s/manifest.tsv", out);
    char *m = tu_slurp(path);
    int shards = 0, samples = 0;
    for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        int k;
        long long bytes;
        if (sscanf(line, "%63s\t%d\t%lld", name, &k, &bytes) != 3)
            continue;
        cr_assert_leq(bytes, 20000, "%s: %lld bytes", name, bytes);
        shards++;
        samples += k;
    }
    free(m);
    cr_assert_gt(shards, 1);
    cr_assert_eq(samples, 23);
    int32_t la[64], lb[64];
    int na, nb;
    size_t sa, sb;
    uint8_t *a = epoch_of(root, la, &na, &sa);
    uint8_t *b = epoch_of(out, lb, &nb, &sb);
    cr_assert_eq(na, 23);
    cr_assert_eq(nb, 23);
    cr_assert(memcmp(la, lb, sizeof la[0] * 23) == 0, "labels differ");
    cr_assert(memcmp(a, b, sa * 23) == 0, "pixels differ");
    free(a);
    free(b);
    /* GNU tar reads them too. */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "tar tf %s/shard-000000.tar | head -2 | tr '\\n' ' '", out);
    FILE *p = popen(cmd, "r");
    char listing[256] = "";
    cr_assert_not_null(fgets(listing, sizeof listing, p));
    pclose(p);
    cr_assert_str_eq(listing, "000000000.jpg 000000000.cls ");
    tu_rm_rf(out);
    fx_done(NULL, root);
}

Test(pack, max_side_reencodes_only_the_larger_images, .timeout = TIMEOUT)
{
    char root[64], out[128], args[512], *err, p[256];
    tu_tmpdir(root);
    /* f0: 120x40 (over 64: shrunk to 64x21), f1: 50x30 (kept as it is) */
    snprintf(p, sizeof p, "%s/f0.jpg", root);
    tu_write_jpeg(p, 120, 40, 1, NULL);
    snprintf(p, sizeof p, "%s/f1.jpg", root);
    tu_write_jpeg(p, 50, 30, 2, NULL);
    snprintf(out, sizeof out, "%s-shards", root); /* beside the data */
    snprintf(args, sizeof args,
             "--data %s --out %s --per-shard 10 --max-side 64 --quality 80 "
             "--quiet",
             root, out);
    cr_assert_eq(pack(root, args, &err), 0, "%s", err);
    free(err);
    pl_config c;
    snprintf(p, sizeof p, "%s/shard-000000.tar", out);
    base_cfg(&c, p);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    static const int want[2][2] = {{64, 21}, {50, 30}};
    for (int i = 0; i < 2; i++) {
        uint8_t buf[65536];
        size_t len;
        cr_assert_eq(pl_loader_read_sample(l, i, buf, sizeof buf, &len), 0,
                     "%s", pl_last_error());
        pl_image img;
        cr_assert_eq(pl_image_decode(buf, len, &img), 0);
        cr_assert_eq(img.width, want[i][0], "sample %d: %d", i, img.width);
        cr_assert_eq(img.height, want[i][1], "sample %d: %d", i, img.height);
        pl_image_free(&img);
        if (i == 1) { /* unchanged bytes */
            snprintf(p, sizeof p, "%s/f1.jpg", root);
            size_t flen;
            uint8_t *f = tu_read_file(p, &flen);
            cr_assert_eq(flen, len);
            cr_assert(memcmp(f, buf, len) == 0);
            free(f);
        }
    }
    pl_loader_destroy(l);
    tu_rm_rf(out);
    tu_rm_rf(root);
}

/* With --max-side every image is decoded: one that does not decode is
 * named on stderr and in the manifest, and left out; the exit status says
 * so; the others are packed. */
Test(pack, samples_that_cannot_be_packed_are_named_and_left_out,
     .timeout = TIMEOUT)
{
    char root[64], out[128], args[512], *err, p[256];
    pl_config c;
    fx_flat(root, &c, 4);
    snprintf(p, sizeof p, "%s/f01.jpg", root);
    tu_write_file(p, "not a jpeg", 10);
    snprintf(out, sizeof out, "%s-shards", root);
    snprintf(args, sizeof args,
             "--data %s --out %s --per-shard 10 --max-side 8 --quiet", root,
             out);
    cr_assert_eq(pack(root, args, &err), 1, "%s", err);
    cr_assert_not_null(strstr(err, "not packed"), "%s", err);
    cr_assert_not_null(strstr(err, "not a JPEG, PNG or WebP image"), "%s",
                       err);
    free(err);
    snprintf(p, sizeof p, "%s/manifest.tsv", out);
    char *m = tu_slurp(p);
    cr_assert_not_null(strstr(m, "shard-000000.tar\t3\t"), "%s", m);
    cr_assert_not_null(strstr(m, "# not packed: "), "%s", m);
    cr_assert_not_null(strstr(m, "f01.jpg"), "%s", m);
    free(m);
    tu_rm_rf(out);
    fx_done(NULL, root);
}

/* The pack is made on --threads threads and written in order: every file
 * the same, byte for byte, with 1 and 4 threads, re-encoding included. */
Test(pack, the_pack_is_the_same_whatever_the_thread_count, .timeout = TIMEOUT)
{
    char root[64], out[2][128], args[512], *err;
    pl_config c;
    fx_tree(root, &c, 23, 3);
    const int threads[2] = {1, 4};
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof out[k], "%s-t%d", root, threads[k]);
        snprintf(args, sizeof args,
                 "--data %s --out %s --per-shard 7 --max-side 40 "
                 "--threads %d --quiet",
                 root, out[k], threads[k]);
        cr_assert_eq(pack(root, args, &err), 0, "%s", err);
        free(err);
    }
    static const char *const files[] = {
        "shard-000000.tar", "shard-000001.tar", "shard-000002.tar",
        "shard-000003.tar", "manifest.tsv",     "classes.txt",
        "sources.tsv"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char pa[256], pb[256];
        snprintf(pa, sizeof pa, "%s/%s", out[0], files[f]);
        snprintf(pb, sizeof pb, "%s/%s", out[1], files[f]);
        size_t la, lb;
        char *a = (char *)tu_read_file(pa, &la);
        char *b = (char *)tu_read_file(pb, &lb);
        cr_assert_gt(la, 0, "%s is empty", pa);
        cr_assert(la == lb && memcmp(a, b, la) == 0, "%s differs", files[f]);
        free(a);
        free(b);
    }
    /* Each shard's index beside it, for remote reads (remote/remote.c). */
    for (int s = 0; s < 4; s++) {
        char idx[256];
        snprintf(idx, sizeof idx, "%s/shard-%06d.tar.idx", out[0], s);
        cr_assert_eq(access(idx, R_OK), 0, "%s is missing", idx);
    }
    for (int k = 0; k < 2; k++)
        tu_rm_rf(out[k]);
    fx_done(NULL, root);
}

/* classes.txt keeps the folder's class names, which the loader reads back;
 * sources.tsv names each key's shard and source file; a classes.txt of
 * another pack is refused naming it. */
Test(pack, class_names_and_sources_survive_the_pack, .timeout = TIMEOUT)
{
    char root[64], out[128], args[512], *err;
    pl_config c;
    fx_tree(root, &c, 23, 3);
    snprintf(out, sizeof out, "%s-shards", root);
    snprintf(args, sizeof args, "--data %s --out %s --per-shard 10 --quiet",
             root, out);
    cr_assert_eq(pack(root, args, &err), 0, "%s", err);
    free(err);
    pl_loader *src = create(&c);
    pl_config pc;
    base_cfg(&pc, out);
    pl_loader *packed = create(&pc);
    const pl_info si = info_of(src), pi = info_of(packed);
    cr_assert_eq(pi.num_classes, si.num_classes);
    for (int32_t k = 0; k < si.num_classes; k++) {
        const char *a, *b;
        cr_assert_eq(pl_loader_class_name(src, k, &a), 0);
        cr_assert_eq(pl_loader_class_name(packed, k, &b), 0);
        cr_assert_str_eq(b, a, "class %d", k);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/sources.tsv", out);
    char *t = tu_slurp(path);
    char *line = strtok(t, "\n");
    cr_assert_str_eq(line, "key\tshard\tsource");
    for (int64_t i = 0; i < si.dataset_size; i++) {
        line = strtok(NULL, "\n");
        cr_assert_not_null(line, "sources.tsv ends before sample %lld",
                           (long long)i);
        const char *name;
        int32_t label;
        cr_assert_eq(pl_loader_sample(src, i, &name, &label), 0);
        char want[512];
        snprintf(want, sizeof want, "%09lld\tshard-%06lld.tar\t%s",
                 (long long)i, (long long)(i / 10), name);
        cr_assert_str_eq(line, want);
    }
    cr_assert_null(strtok(NULL, "\n"), "more lines than samples");
    free(t);
    pl_loader_destroy(src);
    pl_loader_destroy(packed);
    /* Two names for three labels: another pack's. */
    snprintf(path, sizeof path, "%s/classes.txt", out);
    tu_write_file(path, "c0\nc1\n", 6);
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&pc, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "classes.txt names 2 classes"),
                       "%s", pl_last_error());
    tu_write_file(path, "c0\nc1\nc0\n", 9);
    cr_assert_eq(pl_loader_create(&pc, &l), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "line 3: class \"c0\" is named "
                                               "twice"),
                       "%s", pl_last_error());
    tu_rm_rf(out);
    fx_done(NULL, root);
}

/* PNG and WebP samples are packed as themselves (KEY.png, KEY.webp, by
 * their bytes, whatever their names) and read back as the folder. */
Test(pack, png_and_webp_are_packed_as_themselves, .timeout = TIMEOUT)
{
    char root[64], out[128], args[512], *err, p[256];
    pl_config c;
    fx_flat(root, &c, 3); /* f00.jpg f01.jpg f02.jpg */
    static const char *const put[][2] = {{"g8.png", "f03.png"},
                                         {"lossy.webp", "f04.webp"},
                                         {"rgb8.png", "f05.jpg"}};
    for (int k = 0; k < 3; k++) {
        char src[256];
        snprintf(src, sizeof src, "tests/fixtures/formats/%s", put[k][0]);
        size_t len;
        uint8_t *b = tu_read_file(src, &len);
        snprintf(p, sizeof p, "%s/%s", root, put[k][1]);
        tu_write_file(p, b, len);
        free(b);
    }
    snprintf(out, sizeof out, "%s-shards", root);
    snprintf(args, sizeof args, "--data %s --out %s --per-shard 10 --quiet",
             root, out);
    cr_assert_eq(pack(root, args, &err), 0, "%s", err);
    free(err);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "tar tf %s/shard-000000.tar | tr '\\n' ' '",
             out);
    FILE *f = popen(cmd, "r");
    char listing[512] = "";
    cr_assert_not_null(fgets(listing, sizeof listing, f));
    pclose(f);
    cr_assert_str_eq(listing,
                     "000000000.jpg 000000000.cls 000000001.jpg 000000001.cls "
                     "000000002.jpg 000000002.cls 000000003.png 000000003.cls "
                     "000000004.webp 000000004.cls 000000005.png "
                     "000000005.cls ");
    int32_t la[64], lb[64];
    int na, nb;
    size_t sa, sb;
    uint8_t *a = epoch_of(root, la, &na, &sa);
    uint8_t *b = epoch_of(out, lb, &nb, &sb);
    cr_assert_eq(na, 6);
    cr_assert_eq(nb, 6);
    cr_assert(memcmp(a, b, sa * 6) == 0, "pixels differ");
    free(a);
    free(b);
    tu_rm_rf(out);
    fx_done(NULL, root);
}

/* The pack sees only the public header, so its list of formats is its
 * own; it is held here against the library's table of formats
 * (codecs/codec.h): a file of each row's format is packed as KEY.<its
 * first extension>, and no row's extension can be an --extras name. A
 * format added to the table fails this test until the pack knows it. */
Test(pack, the_pack_knows_every_format_the_loader_reads, .timeout = TIMEOUT)
{
    /* A file of each format, by its first extension. */
    static const char *const sample[][2] = {
        {"jpg", NULL}, {"png", "rgb8.png"}, {"webp", "lossless.webp"}};
    char dir[64], p[512], args[1024], *err;
    tu_tmpdir(dir);
    char want[512] = "";
    for (int i = 0; i < CODEC_COUNT; i++) {
        const char *ext = codecs[i]->extensions[0];
        int k = 0;
        while (k < 3 && strcmp(sample[k][0], ext) != 0)
            k++;
        cr_assert_lt(k, 3, "no %s sample: add one to this test", ext);
        snprintf(p, sizeof p, "%s/img/f%02d.%s", dir, i, ext);
        tu_mkdirs_for(p);
        if (sample[k][1]) {
            char src[256];
            snprintf(src, sizeof src, "tests/fixtures/formats/%s",
                     sample[k][1]);
            size_t len;
            uint8_t *b = tu_read_file(src, &len);
            tu_write_file(p, b, len);
            free(b);
        } else {
            tu_write_jpeg(p, 24, 16, 3, NULL);
        }
        const size_t o = strlen(want);
        snprintf(want + o, sizeof want - o, "%09d.%s %09d.cls ", i, ext, i);
    }
    snprintf(args, sizeof args,
             "--data %s/img --out %s/out --per-shard 10 --quiet", dir, dir);
    cr_assert_eq(pack(dir, args, &err), 0, "%s", err);
    free(err);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "tar tf %s/out/shard-000000.tar | tr '\\n' ' '",
             dir);
    FILE *f = popen(cmd, "r");
    char listing[512] = "";
    cr_assert_not_null(fgets(listing, sizeof listing, f));
    pclose(f);
    cr_assert_str_eq(listing, want);
    for (int i = 0; i < CODEC_COUNT; i++)
        for (const char *const *e = codecs[i]->extensions; *e; e++) {
            snprintf(args, sizeof args,
                     "--data %s/img --out %s/x --per-shard 10 --extras txt,%s",
                     dir, dir, *e);
            cr_assert_eq(pack(dir, args, &err), 2, "--extras %s: %s", *e, err);
            cr_assert_not_null(strstr(err, "is a member the pack writes"),
                               "--extras %s: %s", *e, err);
            free(err);
        }
    tu_rm_rf(dir);
}

/* --extras carries a source's side data into the shards: a list file's
 * caption column as KEY.caption, a folder's sidecar x.txt as KEY.txt; a
 * sample without one has no such member (the loader then gives an empty
 * entry); the shards are the same for 1 and 3 threads. */
Test(pack, extras_are_carried_into_the_shards, .timeout = TIMEOUT)
{
    char dir[64], p[512];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/list.tsv", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 9; i++) {
        char img[512];
        snprintf(img, sizeof img, "%s/img/i%d.jpg", dir, i);
        tu_mkdirs_for(img);
        tu_write_jpeg(img, 20 + i, 20, (unsigned)i, NULL);
        if (i == 4)
            fprintf(f, "img/i%d.jpg\t%d\n", i, i % 2);
        else
            fprintf(f, "img/i%d.jpg\t%d\tcaption %d %.*s\n", i, i % 2, i, i,
                    "+++++++++");
        if (i != 6) { /* the folder's sidecars */
            char txt[512], text[32];
            snprintf(txt, sizeof txt, "%s/img/i%d.txt", dir, i);
            const int n = snprintf(text, sizeof text, "side %d", i);
            tu_write_file(txt, text, (size_t)n);
        }
    }
    fclose(f);
    char args[1024], *err;
    const char *source[] = {"list.tsv", "img"};
    const char *name[] = {"caption", "txt"};
    for (int s = 0; s < 2; s++) {
        for (int t = 0; t < 2; t++) {
            snprintf(args, sizeof args,
                     "--data %s/%s --out %s/pack%d%d --per-shard 4 --extras %s "
                     "--threads %d --quiet",
                     dir, source[s], dir, s, t, name[s], t ? 3 : 1);
            cr_assert_eq(pack(dir, args, &err), 0, "%s", err);
            free(err);
        }
        for (int k = 0; k < 3; k++) {
            char a[512], b[512];
            snprintf(a, sizeof a, "%s/pack%d0/shard-%06d.tar", dir, s, k);
            snprintf(b, sizeof b, "%s/pack%d1/shard-%06d.tar", dir, s, k);
            size_t la, lb;
            uint8_t *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
            cr_assert(la == lb && memcmp(x, y, la) == 0, "%s differs", b);
            free(x);
            free(y);
        }
        char data[256];
        snprintf(data, sizeof data, "%s/pack%d0", dir, s);
        pl_config c;
        base_cfg(&c, data);
        c.extras = name[s];
        pl_loader *l = create(&c);
        for (int i = 0; i < 9; i++) {
            char want[64] = "", got[64];
            if (s == 0 && i != 4)
                snprintf(want, sizeof want, "caption %d %.*s", i, i,
                         "+++++++++");
            if (s == 1 && i != 6)
                snprintf(want, sizeof want, "side %d", i);
            size_t len = 0;
            const int rc = pl_loader_read_extra(l, i, 0, got, sizeof got, &len);
            const int none = (s == 0 && i == 4) || (s == 1 && i == 6);
            cr_assert_eq(rc, none ? PL_ENOEXTRA : 0, "%s sample %d: %s",
                         source[s], i, pl_last_error());
            cr_assert_eq(len, strlen(want), "%s sample %d", source[s], i);
            cr_assert(memcmp(got, want, len) == 0, "%s sample %d", source[s],
                      i);
        }
        pl_loader_destroy(l);
    }
    snprintf(args, sizeof args,
             "--data %s/img --out %s/bad --per-shard 4 --extras txt,cls", dir,
             dir);
    cr_assert_eq(pack(dir, args, &err), 2);
    cr_assert_not_null(strstr(err, "\"cls\" is a member the pack writes"),
                       "%s", err);
    free(err);
    tu_rm_rf(dir);
}
