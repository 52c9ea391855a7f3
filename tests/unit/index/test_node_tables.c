/* The dataset table file (index/node_tables.c): shards' tables written one
 * after another and mapped back as slices; refused when it is for other
 * shards, cut short, or any one byte of it is changed; a writer that
 * gives up leaves nothing. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    cr_assert_eq(sample_table_open(tab, b, len, SAMPLE_TABLE_HEAP), 0);
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

Test(node_tables, tables_come_back_as_slices_of_one_mapping)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    node_tables_entry e[3];
    write_three(dir, e, path);
    sample_table tabs[3];
    void *map;
    size_t len;
    int stale = -1;
    cr_assert_eq(node_tables_map(path, e, 3, tabs, &map, &len, &stale), 1);
    cr_assert_eq(stale, 0);
    const uint32_t keys[3] = {1, 3, 2};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(tabs[i].nkeys, keys[i]);
        cr_assert_eq(tabs[i].mapped, SAMPLE_TABLE_PART);
        cr_assert(tabs[i].base >= (const unsigned char *)map &&
                  tabs[i].base + tabs[i].len <=
                      (const unsigned char *)map + len);
        cr_assert_eq(tabs[i].base, (const unsigned char *)map + e[i].offset);
        cr_assert_str_eq(shard_member_name(&tabs[i], 2 * keys[i] - 1),
                         i == 0   ? "k0.cls"
                         : i == 1 ? "k2.cls"
                                  : "k1.cls");
        cr_assert_eq(shard_key_label(&tabs[i], keys[i] - 1),
                     (int32_t)keys[i] - 1);
        sample_table_close(&tabs[i]); /* a slice: the mapping stays */
    }
    cr_assert_eq(tabs[0].base, NULL);
    cr_assert_eq(((const unsigned char *)map)[0], 'P');
    munmap(map, len);
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
    void *map = NULL;
    size_t len = 0;
    int stale;
    cr_assert_eq(node_tables_map(path, e, 2, tabs, &map, &len, &stale), 0);
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
        cr_assert_eq(node_tables_map(path, other, 3, tabs, &map, &len, &stale),
                     0, "change %d", f);
        cr_assert_eq(stale, 1, "change %d", f);
        cr_assert_eq(tabs[0].base, NULL, "change %d: a table left open", f);
    }
    char absent[300];
    snprintf(absent, sizeof absent, "%s/none.tables", dir);
    cr_assert_eq(node_tables_map(absent, e, 3, tabs, &map, &len, &stale), 0);
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
    void *map;
    size_t len;
    int stale;
    for (size_t at = 0; at < n; at++) {
        good[at] ^= 0x10;
        tu_write_file(path, good, n);
        cr_assert_eq(node_tables_map(path, e, 3, tabs, &map, &len, &stale), 0,
                     "byte %zu changed, and the file was taken", at);
        cr_assert_eq(stale, 1);
        good[at] ^= 0x10;
    }
    for (size_t cut = 0; cut < n; cut += 8) {
        tu_write_file(path, good, cut);
        cr_assert_eq(node_tables_map(path, e, 3, tabs, &map, &len, &stale), 0,
                     "cut at %zu, and the file was taken", cut);
    }
    tu_write_file(path, good, n);
    cr_assert_eq(node_tables_map(path, e, 3, tabs, &map, &len, &stale), 1);
    munmap(map, len);
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
