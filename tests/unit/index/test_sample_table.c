/* A shard's sample table (index/sample_table.c), the index file's version 2:
 * what a scan's index becomes (keys, labels), what opening refuses (a
 * table whose checksum holds but whose records do not), and what a key is
 * under a configuration's extras. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../index/sample_table.h"
#include "pinload.h"

static void add(tar_index *t, const char *name, int64_t off, int64_t size,
                const char *small)
{
    cr_assert_eq(tar_add(t, strdup(name), off, size), 0);
    tar_member *m = &t->m[t->n - 1];
    m->small_len = -1;
    if (small) {
        m->small_len = (int)strlen(small);
        memcpy(m->small, small, strlen(small));
    }
}

/* k0: jpg, png, cls 3; k1: cls "x" and jpg; k2: txt only; d/k3: jpg. */
static void index_of_four(tar_index *t)
{
    memset(t, 0, sizeof *t);
    add(t, "k0.jpg", 512, 100, NULL);
    add(t, "k0.png", 1024, 50, NULL);
    add(t, "k0.cls", 1536, 1, "3");
    add(t, "k1.cls", 2048, 1, "x");
    add(t, "k1.jpg", 2560, 10, NULL);
    add(t, "k2.txt", 3072, 2, "hi");
    add(t, "d/k3.jpg", 3584, 20, NULL);
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* The bytes of t's table, [out] *len. */
static unsigned char *built(const tar_index *t, size_t *len)
{
    unsigned char *b;
    cr_assert_eq(sample_table_build(t, 8192, 1, 2, &b, len), 0);
    return b;
}

/* Key k's record, and the checksum made good again after a change. */
static unsigned char *key_at(unsigned char *b, int k)
{
    uint64_t m;
    memcpy(&m, b + 32, 8);
    return b + SAMPLE_TABLE_HEAD + m * SAMPLE_TABLE_MEMBER +
           (size_t)k * SAMPLE_TABLE_KEY;
}

static void reseal(unsigned char *b, size_t len)
{
    const uint64_t h = fnv(b, len - 8);
    memcpy(b + len - 8, &h, 8);
}

Test(sample_table, keys_and_labels_from_a_scan)
{
    tar_index t;
    index_of_four(&t);
    size_t len;
    unsigned char *b = built(&t, &len);
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, b, len), 0);
    cr_assert_eq(tab.nmembers, 7);
    cr_assert_eq(tab.nkeys, 4);
    cr_assert_eq(tab.shard_size, 8192);
    cr_assert_eq(tab.mtime_s, 1);
    cr_assert_eq(tab.mtime_ns, 2);
    cr_assert_eq(shard_key_label(&tab, 0), 3);
    cr_assert_eq(shard_key_label(&tab, 1), 0); /* "x": not a label */
    cr_assert_str_eq(shard_member_name(&tab, 6), "d/k3.jpg");
    cr_assert_eq(shard_member_offset(&tab, 6), 3584);
    cr_assert_eq(shard_member_size(&tab, 6), 20);
    tar_index back;
    cr_assert_eq(sample_table_members(&tab, &back), 0);
    cr_assert_eq(back.n, 7);
    cr_assert_str_eq(back.m[5].name, "k2.txt");
    cr_assert_eq(back.m[5].small_len, 2);
    cr_assert_eq(memcmp(back.m[5].small, "hi", 2), 0);
    cr_assert_eq(back.m[0].small_len, -1);
    tar_index_free(&back);
    sample_table_close(&tab);
    tar_index_free(&t);
}

/* Under extras "png" (required), k0's image is its jpg and its png the
 * extra; k1 is bad by its label, k2 by having no image, d/k3 by lacking
 * the png; each says why, as the heap catalog said it. */
Test(sample_table, a_key_under_the_configured_extras)
{
    tar_index t;
    index_of_four(&t);
    size_t len;
    unsigned char *b = built(&t, &len);
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, b, len), 0);
    static const char *const names[] = {"png"};
    const shard_extras x = {.names = names, .n = 1, .required = 1};
    shard_sample s;
    char why[256];
    size_t nlen;
    sample_table_sample(&tab, 0, &x, &s, why, sizeof why);
    cr_assert_eq(s.code, 0);
    cr_assert_eq(s.image, 0);
    cr_assert_eq(s.extra[0], 1);
    cr_assert_eq(s.label, 3);
    cr_assert_str_eq(why, "");
    sample_table_sample(&tab, 1, &x, &s, why, sizeof why);
    cr_assert_eq(s.code, PL_ECORRUPT);
    cr_assert_str_eq(why, "k1.cls: \"x\" is not a label (a decimal number "
                          "below 2^20)");
    sample_table_sample(&tab, 2, &x, &s, why, sizeof why);
    cr_assert_eq(s.code, PL_ENOTIMAGE);
    cr_assert_str_eq(why, "key k2 has no jpg, jpeg, png or webp member");
    const char *name = sample_table_sample_name(&tab, 2, &s, &nlen);
    cr_assert_eq(nlen, 2);
    cr_assert_eq(strncmp(name, "k2", 2), 0);
    sample_table_sample(&tab, 3, &x, &s, why, sizeof why);
    cr_assert_eq(s.code, PL_ENOEXTRA);
    cr_assert_eq(s.extra[0], -1);
    cr_assert_str_eq(why, "key d/k3 has no png member (config.extras)");
    /* Without extras the png of k0 is no image either: the jpg is first. */
    const shard_extras none = {0};
    sample_table_sample(&tab, 3, &none, &s, NULL, 0);
    cr_assert_eq(s.code, 0);
    name = sample_table_sample_name(&tab, 3, &s, &nlen);
    cr_assert_str_eq(name, "d/k3.jpg");
    sample_table_close(&tab);
    tar_index_free(&t);
}

/* A table whose checksum holds but whose records do not is refused: a
 * label past 2^20 (the class table is sized by labels), flags unknown, a
 * key that skips a member, a member past the shard's end, a name without
 * its NUL; and one whose checksum fails. */
Test(sample_table, records_out_of_bounds_are_refused)
{
    tar_index t;
    index_of_four(&t);
    size_t len;
    unsigned char *good = built(&t, &len);
    for (int c = 0; c < 6; c++) {
        unsigned char *b = malloc(len);
        memcpy(b, good, len);
        uint32_t v;
        uint64_t w;
        switch (c) {
        case 0:
            v = 1u << 20;
            memcpy(key_at(b, 0) + 8, &v, 4);
            break;
        case 1:
            v = 2;
            memcpy(key_at(b, 0) + 12, &v, 4);
            break;
        case 2:
            v = 4; /* k1 starts at 4: member 3 skipped */
            memcpy(key_at(b, 1), &v, 4);
            break;
        case 3:
            w = 8180; /* d/k3.jpg's 20 bytes from 8180: past 8192 */
            memcpy(b + SAMPLE_TABLE_HEAD + 6 * SAMPLE_TABLE_MEMBER, &w, 8);
            break;
        case 4:
            memset(b + len - 8 - 8, 'z', 8); /* the last name's NUL */
            break;
        case 5:
            b[SAMPLE_TABLE_HEAD] ^= 1;
            break;
        }
        if (c != 5)
            reseal(b, len);
        sample_table tab;
        cr_assert_eq(sample_table_open(&tab, b, len), -1, "case %d", c);
        free(b);
    }
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, good, len), 0);
    sample_table_close(&tab);
    tar_index_free(&t);
}

/* Without extras a key's image comes from its record, its members' names
 * unread: the same member the scan under an extra no key has finds, for
 * every key (images after other members, keys without one, a bad cls). */
Test(sample_table, the_recorded_image_is_the_scanned_one)
{
    tar_index t;
    index_of_four(&t);
    add(&t, "k4.txt", 4096, 1, "a");
    add(&t, "k4.cls", 4608, 1, "1");
    add(&t, "k4.webp", 5120, 9, NULL);
    add(&t, "k4.jpg", 5632, 9, NULL);
    size_t len;
    unsigned char *b = built(&t, &len);
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, b, len), 0);
    static const char *const names[] = {"zzz"};
    const shard_extras none = {0}, absent = {.names = names, .n = 1};
    for (uint32_t k = 0; k < tab.nkeys; k++) {
        shard_sample fast, scanned;
        char why_fast[256], why_scanned[256];
        sample_table_sample(&tab, k, &none, &fast, why_fast, sizeof why_fast);
        sample_table_sample(&tab, k, &absent, &scanned, why_scanned,
                           sizeof why_scanned);
        cr_assert_eq(fast.image, scanned.image, "key %u", k);
        cr_assert_eq(fast.code, scanned.code, "key %u", k);
        cr_assert_eq(fast.label, scanned.label, "key %u", k);
        cr_assert_str_eq(why_fast, why_scanned, "key %u", k);
    }
    shard_sample s;
    sample_table_sample(&tab, 4, &none, &s, NULL, 0);
    cr_assert_eq(s.image, 9, "k4's webp, its first image member");
    cr_assert_eq(s.label, 1);
    sample_table_close(&tab);
    tar_index_free(&t);
}

/* A key's view is the key's records re-based to a table of one key: the
 * same members, offsets, names, small bytes, label and sample as the
 * whole table gives, for every key (one read path in every mode: a heap
 * table's view is copied as a file-backed one's is read). */
Test(sample_table, a_key_view_is_the_key_as_the_table_has_it)
{
    tar_index t;
    index_of_four(&t);
    add(&t, "k4.txt", 4096, 1, "a");
    add(&t, "k4.cls", 4608, 1, "1");
    add(&t, "k4.jpg", 5632, 9, NULL);
    size_t len;
    unsigned char *b = built(&t, &len);
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, b, len), 0);
    static const char *const names[] = {"txt"};
    const shard_extras x = {.names = names, .n = 1};
    for (uint32_t k = 0; k < tab.nkeys; k++) {
        sample_view v;
        char why[256];
        cr_assert_eq(sample_table_key_view(&tab, k, &v, why, sizeof why), 0,
                     "key %u: %s", k, why);
        const uint32_t first = shard_key_first(&tab, k);
        cr_assert_eq(v.first, first);
        cr_assert_eq(v.tab.nmembers, shard_key_members(&tab, k));
        cr_assert_eq(shard_key_label(&v.tab, 0), shard_key_label(&tab, k));
        cr_assert_eq(shard_key_flags(&v.tab, 0), shard_key_flags(&tab, k));
        for (uint32_t m = 0; m < v.tab.nmembers; m++) {
            cr_assert_str_eq(shard_member_name(&v.tab, m),
                             shard_member_name(&tab, first + m));
            cr_assert_eq(shard_member_offset(&v.tab, m),
                         shard_member_offset(&tab, first + m));
            cr_assert_eq(shard_member_size(&v.tab, m),
                         shard_member_size(&tab, first + m));
        }
        shard_sample a, w;
        char why_a[256], why_w[256];
        sample_table_sample(&v.tab, 0, &x, &a, why_a, sizeof why_a);
        sample_table_sample(&tab, k, &x, &w, why_w, sizeof why_w);
        cr_assert_eq(a.code, w.code, "key %u", k);
        cr_assert_eq(a.image < 0 ? -1 : a.image + first, w.image, "key %u", k);
        cr_assert_eq(a.extra[0] < 0 ? -1 : a.extra[0] + first, w.extra[0]);
        cr_assert_str_eq(why_a, why_w, "key %u", k);
        sample_view_free(&v);
    }
    sample_table_close(&tab);
    tar_index_free(&t);
}

/* The names in member order is part of the format now checked at open:
 * a key's names are then one slice of the block. Two members' name
 * places swapped (each still NUL-terminated in the block) is refused. */
Test(sample_table, names_out_of_member_order_are_refused)
{
    tar_index t;
    index_of_four(&t);
    size_t len;
    unsigned char *b = built(&t, &len);
    unsigned char *r0 = b + SAMPLE_TABLE_HEAD, *r1 = r0 + SAMPLE_TABLE_MEMBER;
    unsigned char at0[4], at1[4];
    memcpy(at0, r0 + 16, 4);
    memcpy(at1, r1 + 16, 4);
    memcpy(r0 + 16, at1, 4);
    memcpy(r1 + 16, at0, 4);
    reseal(b, len);
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, b, len), -1);
    sample_table_bytes_free(b, len);
    tar_index_free(&t);
}

/* A table's bytes are pages of their own from SAMPLE_TABLE_PAGES on (so
 * that create's copies, read on scan threads, go back to the system when
 * dropped), zeroed either side of it. One that stays in the heap moves
 * into malloc'd bytes when it settles, and reads as it did. */
Test(sample_table, a_heap_table_settles_off_its_pages_and_reads_the_same)
{
    const size_t sizes[] = {1, SAMPLE_TABLE_PAGES - 8, SAMPLE_TABLE_PAGES,
                            3 * SAMPLE_TABLE_PAGES + 8};
    for (int i = 0; i < 4; i++) {
        unsigned char *p = sample_table_bytes(sizes[i]);
        cr_assert_not_null(p);
        for (size_t j = 0; j < sizes[i]; j++)
            cr_assert_eq(p[j], 0, "%zu bytes: byte %zu", sizes[i], j);
        memset(p, 0xa5, sizes[i]);
        sample_table_bytes_free(p, sizes[i]);
    }
    sample_table_bytes_free(NULL, SAMPLE_TABLE_PAGES);
    tar_index t;
    memset(&t, 0, sizeof t);
    char name[32], cls[8];
    for (int k = 0; k < 300; k++) { /* about 17 KiB of table */
        snprintf(name, sizeof name, "%06d.jpg", k);
        add(&t, name, 512 + 2048 * k, 100, NULL);
        snprintf(name, sizeof name, "%06d.cls", k);
        snprintf(cls, sizeof cls, "%d", k % 7);
        add(&t, name, 1536 + 2048 * k, (int64_t)strlen(cls), cls);
    }
    unsigned char *b;
    size_t len;
    cr_assert_eq(sample_table_build(&t, 2048 * 301, 1, 2, &b, &len), 0);
    cr_assert_geq(len, SAMPLE_TABLE_PAGES);
    sample_table tab;
    cr_assert_eq(sample_table_open(&tab, b, len), 0);
    sample_table_settle(&tab); /* no file: it stays in the heap */
    cr_assert_eq(tab.malloced, 1);
    cr_assert_neq(tab.base, b, "moved off its pages");
    cr_assert_eq(tab.nkeys, 300);
    for (uint32_t k = 0; k < tab.nkeys; k++) {
        sample_view v;
        char why[256];
        cr_assert_eq(sample_table_key_view(&tab, k, &v, why, sizeof why), 0,
                     "key %u: %s", k, why);
        snprintf(name, sizeof name, "%06u.jpg", k);
        cr_assert_str_eq(shard_member_name(&v.tab, 0), name);
        cr_assert_eq(shard_member_offset(&v.tab, 0), 512 + 2048 * (int64_t)k);
        cr_assert_eq(shard_key_label(&v.tab, 0), (int32_t)(k % 7));
        sample_view_free(&v);
    }
    sample_table_close(&tab);
    tar_index_free(&t);
}
