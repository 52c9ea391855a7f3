/* The sidecar index of tar shards (index/idx_file.c): written beside the
 * shard and reused, refused when stale, kept out of the data
 * (PINLOAD_INDEX_DIR), version 1 read and kept as version 2, a damaged
 * one written anew, in memory where none can be written; the sample
 * names; past the mapping limit, the dataset table file (index/
 * node_tables.c) of many shards, and ranks racing to write it. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinload.h"
#include "testloader.h"
#include "testshards.h"
#include "testutil.h"

/* The sidecar index: the first create writes shard.tar.idx; a later one
 * reads it instead of the headers (shown by damaging a header while
 * keeping the shard's size and mtime: still read, same bytes); once the
 * shard's mtime changes, the stale index is refused and the damage shows. */
Test(shards_index, the_sidecar_index_is_reused_and_refused_when_stale,
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
Test(shards_index, pinload_index_dir_keeps_indexes_out_of_the_data,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 40, 40, 1, NULL);
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar k0.jpg", dir);
    tu_system(cmd);
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

/* ---- the sidecar index, version 2 ---- */

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
Test(shards_index, a_version_1_index_is_read_and_kept_as_version_2,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128], magic[9];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 20, 20, 1, NULL);
    size_t jlen;
    free(tu_read_file(p, &jlen));
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar k0.jpg", dir);
    tu_system(cmd);
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
Test(shards_index, a_damaged_version_2_index_is_written_anew,
     .timeout = TIMEOUT)
{
    char dir[64], cmd[512], p[256], data[128], idx[160], magic[9];
    tu_tmpdir(dir);
    snprintf(p, sizeof p, "%s/stage/k0.jpg", dir);
    tu_write_jpeg(p, 20, 20, 1, NULL);
    snprintf(p, sizeof p, "%s/stage/k0.cls", dir);
    tu_write_file(p, "4", 1);
    snprintf(cmd, sizeof cmd, "cd %s/stage && tar -cf ../s.tar k0.jpg k0.cls",
             dir);
    tu_system(cmd);
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
Test(shards_index, without_a_writable_index_place_the_tables_live_in_memory,
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
                                      "to read"),
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
Test(shards_index, sample_names_are_made_once_and_kept_until_destroy,
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
    tu_system(cmd);
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
    tu_system(cmd);
}

/* Past the mapping limit (lowered to 16 by the test hook
 * PINLOAD_MAPPED_MAX), 40 shards' tables come from one dataset table file
 * in PINLOAD_INDEX_DIR, open once: the same epoch as below the limit,
 * in either order; the file is found and reused by the next create
 * (same inode and mtime); a shard changed since, or a byte of the file
 * flipped, makes it written anew, never trusted. */
Test(shards_index, past_the_mapping_limit_tables_come_from_one_file,
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
                                      "are read from one file"),
                       "%s", n.text);
    cr_assert_not_null(strstr(n.text, "(written now)"), "%s", n.text);
    cr_assert_null(strstr(n.text, "no index file to read"), "%s", n.text);
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
Test(shards_index, ranks_racing_to_write_the_table_file_all_succeed,
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
