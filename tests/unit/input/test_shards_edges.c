/* Tar shards at the system's edges: more shards than the soft limit on
 * open files, an index that cannot be written beside the shards (the cache
 * folder), FIFOs in place of an index or a shard, and a bad sample's label
 * still counted as a class, shards beside a sub-folder. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinload.h"
#include "testloader.h"
#include "testshards.h"
#include "testutil.h"

/* Every shard stays open, so a set of more shards than the soft limit on
 * open files allows (1,024 is common; LAION-sized sets have tens of
 * thousands) raises that limit, saying so; past the hard limit, create
 * fails naming the counts and the remedies, before opening anything. */
Test(shards, more_shards_than_the_open_file_limit, .timeout = TIMEOUT)
{
    char dir[64], cmd[1024], data[128];
    tu_tmpdir(dir);
    snprintf(data, sizeof data, "%s/s.jpg", dir);
    tu_write_jpeg(data, 20, 20, 1, NULL);
    snprintf(cmd, sizeof cmd,
             "cd %s && mkdir sh && python3 -c 'import tarfile\n"
             "for i in range(300):\n"
             "    with tarfile.open(\"sh/s-%%03d.tar\" %% i, \"w\") as t:\n"
             "        t.add(\"s.jpg\", \"k%%d.jpg\" %% i)'",
             dir);
    tu_system(cmd);
    snprintf(data, sizeof data, "%s/sh", dir);
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = 128;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "%s", strerror(errno));

    tu_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pl_config c;
    base_cfg(&c, data);
    c.log = tu_keep_log;
    c.log_ctx = &n;
    c.on_error = PL_ON_ERROR_FAIL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    cr_assert_not_null(strstr(n.text, "300 tar shards stay open: raised this "
                                      "process's limit on open files from "
                                      "128 to "),
                       "%s", n.text);
    struct rlimit now;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &now), 0);
    cr_assert_geq(now.rlim_cur, 300 + 256);
    pl_info info;
    pl_loader_info(l, &info);
    cr_assert_eq(info.dataset_size, 300);
    const pl_batch *b;
    int rc, seen = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        seen += b->count;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(seen, 300);
    pl_loader_destroy(l);

    /* A hard limit too low: refused up front. */
    rl.rlim_cur = rl.rlim_max = 200;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "%s", strerror(errno));
    l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    cr_assert_null(l);
    cr_assert_not_null(
        strstr(pl_last_error(), "300 tar shards stay open, which needs "), "%s",
        pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "at most 200 (ulimit -Hn): "
                                               "raise the limit, or pack "
                                               "fewer, larger shards"),
                       "%s", pl_last_error());
    tu_rm_rf(dir);
}

/* Where the index cannot be written next to the shard (a read-only folder
 * for users; here, for root too, a folder in the way of s.tar.idx), it
 * goes to the user's cache folder ($XDG_CACHE_HOME/pinload), and the next
 * create reads it from there. */
Test(shards, the_index_falls_back_to_the_cache_folder, .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128], xdg[128];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 40, 40, 1, NULL);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && tar -cf ../s.tar k0.jpg && mkdir ../s.tar.idx",
             dir);
    tu_system(cmd);
    snprintf(xdg, sizeof xdg, "%s/xdg", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    unsetenv("PINLOAD_INDEX_DIR");
    snprintf(data, sizeof data, "%s/s.tar", dir);
    pl_config c;
    base_cfg(&c, data);
    c.log = tu_keep_log;
    for (int k = 0; k < 2; k++) {
        tu_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
        c.log_ctx = &n;
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        pl_loader_destroy(l);
        cr_assert_not_null(strstr(n.text, k == 0 ? "0 indexed from their "
                                                   ".idx file, 1 read"
                                                 : "1 indexed from their "
                                                   ".idx file, 0 read"),
                           "create %d: %s", k, n.text);
    }
    snprintf(cmd, sizeof cmd, "ls %s/pinload | grep -c -- '-s.tar.idx$'", xdg);
    FILE *f = popen(cmd, "r");
    char count[16] = "";
    cr_assert_not_null(fgets(count, sizeof count, f));
    pclose(f);
    cr_assert_str_eq(count, "1\n");
    tu_rm_rf(dir);
}

/* A FIFO where the index or a shard would be (hostile file systems) never
 * blocks create: under the index's name it counts as no index (the shard
 * is read, and nothing is called stale), named as a shard it is refused. */
Test(shards, fifos_in_place_of_an_index_or_a_shard_never_block,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 40, 40, 1, NULL);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && tar -cf ../s.tar k0.jpg && mkfifo ../s.tar.idx "
             "../f.tar",
             dir);
    tu_system(cmd);
    unsetenv("PINLOAD_INDEX_DIR");
    snprintf(data, sizeof data, "%s/s.tar", dir);
    tu_log n = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pl_config c;
    base_cfg(&c, data);
    c.log = tu_keep_log;
    c.log_ctx = &n;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    cr_assert_not_null(strstr(n.text, "0 indexed from their .idx file, 1 read"),
                       "%s", n.text);
    cr_assert_null(strstr(n.text, "did not match"), "%s", n.text);

    snprintf(p, sizeof p, "%s/f.tar", dir);
    snprintf(data, sizeof data, "%s/list", dir);
    char line[300];
    snprintf(line, sizeof line, "%s\n", p);
    tu_write_file(data, line, strlen(line));
    c.data = data;
    l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    cr_assert_not_null(strstr(pl_last_error(), "f.tar: not a regular file"),
                       "%s", pl_last_error());
    tu_rm_rf(dir);
}

/* A key without an image keeps its cls label, and that label counts among
 * the classes: under SUBSTITUTE its zeros are delivered with it, and it
 * must be a valid class (it was beyond num_classes, found by the loader
 * fuzzer over shards). */
Test(shards, a_bad_samples_label_is_a_class_too, .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/a.jpg", dir);
    tu_write_jpeg(p, 24, 24, 1, NULL);
    snprintf(p, sizeof p, "%s/stage/a.cls", dir);
    tu_write_file(p, "1\n", 2);
    snprintf(p, sizeof p, "%s/stage/b.cls", dir); /* no image, label 7 */
    tu_write_file(p, "7\n", 2);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && tar -cf ../s.tar a.jpg a.cls b.cls", dir);
    tu_system(cmd);
    snprintf(data, sizeof data, "%s/s.tar", dir);
    pl_config c;
    base_cfg(&c, data);
    c.shuffle = 0;
    c.batch_size = 2;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    cr_assert_eq(info.num_classes, 8);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->count, 2);
    cr_assert_eq(b->labels[0], 1);
    cr_assert_eq(b->status[0], 0);
    cr_assert_eq(b->labels[1], 7);
    cr_assert_eq(b->status[1], PL_ENOTIMAGE);
    pl_loader_release(l, b, NULL);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* A folder of shards beside a visible sub-folder (a "preview/" of a few
 * images) is refused, naming both readings and how to pick each: it used
 * to be read as a one-image ImageFolder, the shards ignored. A hidden
 * sub-folder (".cache") is no reading of its own; a brace pattern names
 * the shards alone. */
Test(shards, shards_beside_a_sub_folder_are_refused_naming_both_readings,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[1024], p[256], data[128];
    tu_tmpdir(dir);
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/stage/k%d.jpg", dir, k);
        tu_write_jpeg(p, 40, 40, (unsigned)k, NULL);
    }
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && mkdir ../d && tar -cf ../d/s-000000.tar k0.jpg "
             "k1.jpg && tar -cf ../d/s-000001.tar k2.jpg && mkdir ../d/.cache "
             "../d/preview && cp k0.jpg ../d/preview/look.jpg",
             dir);
    tu_system(cmd);
    snprintf(data, sizeof data, "%s/d", dir);
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL, "%s", pl_last_error());
    cr_assert_null(l);
    const char *e = pl_last_error();
    cr_assert_not_null(strstr(e, "/d holds 2 tar shards and 1 sub-folder "
                                 "(preview): as shards the sub-folders would "
                                 "be ignored, as an image folder the shards "
                                 "would"),
                       "%s", e);
    cr_assert_not_null(strstr(e, "brace pattern"), "%s", e);
    /* The brace pattern reads the shards: 3 samples. */
    snprintf(data, sizeof data, "%s/d/s-{000000..000001}.tar", dir);
    c.data = data;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    cr_assert_eq(info.dataset_size, 3);
    pl_loader_destroy(l);
    /* Without the visible sub-folder, the hidden one changes nothing. */
    snprintf(cmd, sizeof cmd, "rm -r %s/d/preview", dir);
    tu_system(cmd);
    snprintf(data, sizeof data, "%s/d", dir);
    c.data = data;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_loader_info(l, &info);
    cr_assert_eq(info.dataset_size, 3);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}

/* A shard cut short after create (a copy still running, a full disk):
 * the member past its end is an error that says where the shard ends and
 * which bytes the member needed, never bytes of another read. */
Test(shards, a_shard_truncated_after_create_names_where_it_ends,
     .timeout = TIMEOUT)
{
    char dir[64], data[128];
    tu_tmpdir(dir);
    tar_of_jpegs(dir, 6, 40, 0, data);
    pl_config c;
    base_cfg(&c, data);
    pl_loader *l = create(&c);
    struct stat st;
    cr_assert_eq(stat(data, &st), 0);
    const off_t half = st.st_size / 2;
    cr_assert_eq(truncate(data, half), 0);
    const int64_t last = info_of(l).dataset_size - 1;
    size_t len = 0;
    static uint8_t buf[1 << 16];
    cr_assert_eq(pl_loader_read_sample(l, last, buf, sizeof buf, &len), PL_EIO,
                 "%s", pl_last_error());
    char want[96];
    snprintf(want, sizeof want, "the shard ends at byte %lld, inside this member",
             (long long)half);
    cr_assert(strstr(pl_last_error(), want), "%s", pl_last_error());
    cr_assert(strstr(pl_last_error(), "truncated since it was indexed"), "%s",
              pl_last_error());
    /* The first member lies before the cut: still read whole. */
    cr_assert_eq(pl_loader_read_sample(l, 0, buf, sizeof buf, &len), 0, "%s",
                 pl_last_error());
    cr_assert_gt(len, 0);
    pl_loader_destroy(l);
    tu_rm_rf(dir);
}
