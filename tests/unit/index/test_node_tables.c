/* The dataset table file (index/node_tables.c): shards' tables written one
 * after another and read back one at a time, then file-backed; refused
 * when it is for other shards, cut short, or any one byte of it is
 * changed; a writer that gives up leaves nothing; the file truncated or
 * rewritten in place after the tables were read is an error naming it. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "../index/node_tables.h"
#include "pinload.h"
#include "testutil.h"

#define SHARD_SIZE 8192

/* A table of `keys` samples (k<i>.jpg + k<i>.cls), for a shard of
 * SHARD_SIZE bytes and mtime (1, 2). */
static void table_of(int keys, sample_table *tab)
{
    tar_index t = {0};
    for (int i = 0; i < keys; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%d.jpg", i);
        cr_assert_eq(tar_add(&t, strdup(name), 512 + 2048 * i, 100), 0);
        t.m[t.n - 1].small_len = -1;
        snprintf(name, sizeof name, "k%d.cls", i);
        cr_assert_eq(tar_add(&t, strdup(name), 1536 + 2048 * i, 1), 0);
        t.m[t.n - 1].small_len = 1;
        t.m[t.n - 1].small[0] = (unsigned char)('0' + i % 10);
    }
    unsigned char *b;
    size_t len;
    cr_assert_eq(sample_table_build(&t, SHARD_SIZE, 1, 2, &b, &len), 0);
    cr_assert_eq(sample_table_open(tab, b, len), 0);
    tar_index_free(&t);
}

/* Shard i's identity: its path "/data/s<i>.tar", inode 100 + i. */
static void identity(node_tables_entry *e, int i)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_size = SHARD_SIZE;
    st.st_mtim.tv_sec = 1;
    st.st_mtim.tv_nsec = 2;
    st.st_ino = (ino_t)(100 + i);
    char path[64];
    snprintf(path, sizeof path, "/data/s%d.tar", i);
    node_tables_identify(e, path, &st);
}

/* The file at path for shards e[0, n), every table read as create reads
 * them: its descriptor with tabs[0, n) attached to it (still in the
 * heap), or -1 (*stale as node_tables_open's) with none open. */
static int open_all(const char *path, node_tables_entry *e, int n,
                    sample_table *tabs, int *stale)
{
    memset(tabs, 0, (size_t)n * sizeof *tabs);
    const int fd = node_tables_open(path, e, n, stale);
    if (fd < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (node_tables_table(fd, path, &e[i], &tabs[i]) < 0) {
            for (int j = 0; j < i; j++)
                sample_table_close(&tabs[j]);
            close(fd);
            *stale = 1;
            return -1;
        }
    return fd;
}

/* Three shards' tables (1, 3 and 2 samples) written to dir/x.tables:
 * [out] e[3], and the path. */
static void write_three(const char *dir, node_tables_entry e[3], char path[256])
{
    snprintf(path, 256, "%s/sub/x.tables", dir);
    node_tables_writer w;
    cr_assert_eq(node_tables_begin(&w, path, 3), 0, "%s", path);
    const int keys[3] = {1, 3, 2};
    for (int i = 0; i < 3; i++) {
        sample_table tab;
        table_of(keys[i], &tab);
        identity(&e[i], i);
        cr_assert_eq(node_tables_add(&w, &tab, &e[i]), 0);
        sample_table_close(&tab);
    }
    cr_assert_eq(node_tables_end(&w, e, 3, 1), 0);
}

Test(node_tables, tables_come_back_one_at_a_time_then_from_the_file)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    node_tables_entry e[3];
    write_three(dir, e, path);
    sample_table tabs[3];
    int stale = -1;
    const int fd = open_all(path, e, 3, tabs, &stale);
    cr_assert_geq(fd, 0);
    cr_assert_eq(stale, 0);
    const uint32_t keys[3] = {1, 3, 2};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tabs[i].nkeys, keys[i]);
        cr_assert_eq(tabs[i].mode, SAMPLE_TABLE_HEAP); /* create's pass */
        cr_assert_eq(tabs[i].fd, fd);
        cr_assert_eq(tabs[i].at, e[i].offset);
        cr_assert_str_eq(shard_member_name(&tabs[i], 2 * keys[i] - 1),
                         i == 0   ? "k0.cls"
                         : i == 1 ? "k2.cls"
                                  : "k1.cls");
        cr_assert_eq(shard_key_label(&tabs[i], keys[i] - 1),
                     (int32_t)keys[i] - 1);
        sample_table_settle(&tabs[i]);
        cr_assert_eq(tabs[i].mode, SAMPLE_TABLE_FILE);
        cr_assert_null(tabs[i].base);
        /* Now each key from the file, the same records */
        sample_view v;
        char why[512];
        cr_assert_eq(sample_table_key_view(&tabs[i], keys[i] - 1, &v, why,
                                           sizeof why),
                     0, "%s", why);
        cr_assert_eq(v.first, 2 * (keys[i] - 1));
        cr_assert_eq(v.tab.nmembers, 2);
        cr_assert_str_eq(shard_member_name(&v.tab, 1),
                         i == 0   ? "k0.cls"
                         : i == 1 ? "k2.cls"
                                  : "k1.cls");
        cr_assert_eq(shard_member_offset(&v.tab, 0),
                     512 + 2048 * (keys[i] - 1));
        cr_assert_eq(shard_key_label(&v.tab, 0), (int32_t)keys[i] - 1);
        sample_view_free(&v);
        sample_table_close(&tabs[i]); /* the file is the caller's */
    }
    cr_assert_eq(tabs[0].base, NULL);
    cr_assert_eq(fcntl(fd, F_GETFD), FD_CLOEXEC, "the file was closed");
    close(fd);
    tu_rm_rf(dir);
}

/* The file cut short, then rewritten in place, after its tables were
 * read: each key read after is an error naming the file, and no signal
 * (a mapping would have raised SIGBUS past the cut). */
Test(node_tables, a_file_cut_or_rewritten_under_its_reader_is_named)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    node_tables_entry e[3];
    write_three(dir, e, path);
    size_t n;
    uint8_t *good = tu_read_file(path, &n);
    sample_table tabs[3];
    int stale;
    const int fd = open_all(path, e, 3, tabs, &stale);
    cr_assert_geq(fd, 0);
    for (int i = 0; i < 3; i++)
        sample_table_settle(&tabs[i]);
    cr_assert_eq(truncate(path, 16), 0);
    sample_view v;
    char why[512];
    cr_assert_eq(sample_table_key_view(&tabs[1], 2, &v, why, sizeof why),
                 PL_ECORRUPT);
    sample_view_free(&v);
    cr_assert(strstr(why, path) &&
                  strstr(why, "changed under the loader (truncated or "
                              "rewritten in place)") &&
                  strstr(why, "key 2"),
              "%s", why);
    /* In place: the bytes back, then key 1 of shard 1's image offset
     * past the shard */
    const int w = open(path, O_WRONLY);
    cr_assert_geq(w, 0);
    const size_t rec = e[1].offset + SAMPLE_TABLE_HEAD + 2 * SAMPLE_TABLE_MEMBER;
    good[rec + 2] = 0x40; /* offset += 4 MiB: past its 8 KiB shard */
    cr_assert_eq(pwrite(w, good, n, 0), (ssize_t)n);
    close(w);
    cr_assert_eq(sample_table_key_view(&tabs[1], 0, &v, why, sizeof why), 0,
                 "%s", why);
    sample_view_free(&v);
    cr_assert_eq(sample_table_key_view(&tabs[1], 1, &v, why, sizeof why),
                 PL_ECORRUPT);
    sample_view_free(&v);
    cr_assert(strstr(why, path) && strstr(why, "key 1"), "%s", why);
    sample_table whole;
    cr_assert_eq(sample_table_whole(&tabs[1], &whole, why, sizeof why),
                 PL_ECORRUPT);
    cr_assert(strstr(why, path), "%s", why);
    for (int i = 0; i < 3; i++)
        sample_table_close(&tabs[i]);
    close(fd);
    free(good);
    tu_rm_rf(dir);
}

/* Another shard list, or one shard changed (size, mtime, inode, path):
 * stale, nothing open. An absent file is not stale. */
Test(node_tables, a_file_for_other_shards_is_stale)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    node_tables_entry e[3];
    write_three(dir, e, path);
    sample_table tabs[3];
    int stale;
    cr_assert_eq(open_all(path, e, 2, tabs, &stale), -1);
    cr_assert_eq(stale, 1, "two shards of three");
    for (int f = 0; f < 5; f++) {
        node_tables_entry other[3];
        memcpy(other, e, sizeof other);
        switch (f) {
        case 0:
            other[1].size++;
            break;
        case 1:
            other[2].mtime_s++;
            break;
        case 2:
            other[0].mtime_ns++;
            break;
        case 3:
            other[1].ino++;
            break;
        default:
            identity(&other[2], 7);
            break;
        }
        cr_assert_eq(open_all(path, other, 3, tabs, &stale), -1, "change %d",
                     f);
        cr_assert_eq(stale, 1, "change %d", f);
    }
    char absent[300];
    snprintf(absent, sizeof absent, "%s/none.tables", dir);
    cr_assert_eq(open_all(absent, e, 3, tabs, &stale), -1);
    cr_assert_eq(stale, 0);
    tu_rm_rf(dir);
}

/* Every byte of the file is checked: by the header's checksum (the head
 * and the directory) or by its table's own. Each one flipped, and the
 * file cut anywhere, is refused. */
Test(node_tables, every_changed_byte_and_every_cut_is_refused)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    node_tables_entry e[3];
    write_three(dir, e, path);
    size_t n;
    uint8_t *good = tu_read_file(path, &n);
    cr_assert_eq(n, e[2].offset + e[2].len);
    sample_table tabs[3];
    int stale;
    for (size_t at = 0; at < n; at++) {
        good[at] ^= 0x10;
        tu_write_file(path, good, n);
        cr_assert_eq(open_all(path, e, 3, tabs, &stale), -1,
                     "byte %zu changed, and the file was taken", at);
        cr_assert_eq(stale, 1);
        good[at] ^= 0x10;
    }
    for (size_t cut = 0; cut < n; cut += 8) {
        tu_write_file(path, good, cut);
        cr_assert_eq(open_all(path, e, 3, tabs, &stale), -1,
                     "cut at %zu, and the file was taken", cut);
    }
    tu_write_file(path, good, n);
    const int fd = open_all(path, e, 3, tabs, &stale);
    cr_assert_geq(fd, 0);
    for (int i = 0; i < 3; i++)
        sample_table_close(&tabs[i]);
    close(fd);
    free(good);
    tu_rm_rf(dir);
}

/* A writer that gives up (a shard failed) removes its temporary file and
 * leaves the name to whoever writes it whole. */
Test(node_tables, a_writer_that_gives_up_leaves_nothing)
{
    char dir[64], path[256], cmd[300];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/x.tables", dir);
    node_tables_writer w;
    cr_assert_eq(node_tables_begin(&w, path, 1), 0);
    sample_table tab;
    table_of(2, &tab);
    node_tables_entry e;
    identity(&e, 0);
    cr_assert_eq(node_tables_add(&w, &tab, &e), 0);
    sample_table_close(&tab);
    cr_assert_eq(node_tables_end(&w, &e, 1, 0), -1);
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\"", dir);
    cr_assert_eq(system(cmd), 0, "%s is not empty", dir);
    tu_rm_rf(dir);
}
