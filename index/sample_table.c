/* A shard's sample table: built from a scan's index, checked when opened, and a
 * sample's members found by key (sample_table.h has the layout). */
#include "sample_table.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "../codecs/codec.h"
#include "../common/bytes.h"
#include "../common/error.h"

#define CLS_MAX TAR_SMALL_MAX /* bytes of a .cls member: a decimal label */
#define NO_SMALL 255

void shard_split_key(const char *name, size_t *klen, const char **ext)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    *klen = dot ? (size_t)(dot - name) : strlen(name);
    *ext = dot ? dot + 1 : "";
}

/* A .cls member's label: decimal digits, blanks around them. -1 if it is
 * not one (reason, when not NULL, says why). */
static int32_t read_label(const char *name, int64_t size,
                          const unsigned char *small, int small_len,
                          char *reason, size_t cap)
{
    char text[CLS_MAX + 1];
    if (size > CLS_MAX) {
        if (reason)
            snprintf(reason, cap, "%s: %lld bytes, not a decimal label", name,
                     (long long)size);
        return -1;
    }
    /* tar_read_small (or the sidecar) holds every member this small */
    const size_t got = small_len > 0 ? (size_t)small_len : 0;
    memcpy(text, small, got);
    text[got] = '\0';
    const char *p = text;
    while (isspace((unsigned char)*p))
        p++;
    long long v = 0;
    int digits = 0;
    for (; isdigit((unsigned char)*p) && v <= INT32_MAX; p++, digits++)
        v = v * 10 + (*p - '0');
    while (isspace((unsigned char)*p))
        p++;
    if (!digits || *p || v >= (1 << 20)) {
        if (reason)
            snprintf(reason, cap,
                     "%s: \"%.*s\" is not a label (a decimal number below "
                     "2^20)",
                     name, (int)strcspn(text, "\r\n"), text);
        return -1;
    }
    return (int32_t)v;
}

/* ---- building ---- */

/* The end of the key starting at member i of t. */
static size_t key_end(const tar_index *t, size_t i)
{
    size_t klen;
    const char *ext;
    shard_split_key(t->m[i].name, &klen, &ext);
    size_t j = i + 1;
    for (; j < t->n; j++) {
        size_t kj;
        const char *ej;
        shard_split_key(t->m[j].name, &kj, &ej);
        if (kj != klen || strncmp(t->m[j].name, t->m[i].name, klen) != 0)
            break;
    }
    return j;
}

/* Key [i, j)'s record: its members, its cls member's label, and its image
 * when no extras are configured (the first member of an image kind pinload
 * reads), so that a sample of the common configuration is found without
 * reading its members' names. Which kinds those are is the table of
 * formats' (codecs/codec.h): a format added there is not in the records of
 * index files written before it. */
static void put_key(unsigned char *k, const tar_index *t, size_t i, size_t j)
{
    int32_t label = 0;
    uint32_t flags = 0, image = 0;
    int cls = 0;
    for (size_t m = i; m < j; m++) {
        size_t kl;
        const char *ext;
        shard_split_key(t->m[m].name, &kl, &ext);
        if (!image && codec_extension_kind(ext) == 1)
            image = m - i + 1 < SHARD_IMAGE_SCAN ? (uint32_t)(m - i + 1)
                                                 : SHARD_IMAGE_SCAN;
        if (cls || strcasecmp(ext, "cls") != 0)
            continue;
        const tar_member *c = &t->m[m];
        cls = 1;
        label = read_label(c->name, c->size, c->small, c->small_len, NULL, 0);
        if (label < 0)
            label = 0, flags = SHARD_CLS_BAD;
    }
    le_put32(k, (uint32_t)i);
    le_put32(k + 4, (uint32_t)(j - i));
    le_put32(k + 8, (uint32_t)label);
    le_put32(k + 12, flags | image << 8);
}

/* The keys of t and the bytes of its name block. */
static int measure(const tar_index *t, size_t *keys, uint64_t *names)
{
    *keys = 0;
    *names = 0;
    for (size_t i = 0; i < t->n; i = key_end(t, i))
        ++*keys;
    for (size_t i = 0; i < t->n; i++)
        *names += strlen(t->m[i].name) + 1 +
                  (t->m[i].small_len > 0 ? (size_t)t->m[i].small_len : 0);
    if (t->n > UINT32_MAX || *names > UINT32_MAX)
        return err_set(PL_EINVAL,
                       "a shard of %zu members and %llu bytes of "
                       "names is over the index's bounds",
                       t->n, (unsigned long long)*names);
    return 0;
}

int sample_table_build(const tar_index *t, uint64_t shard_size, int64_t mtime_s,
                      int64_t mtime_ns, unsigned char **out, size_t *len)
{
    size_t nkeys;
    uint64_t nnames;
    const int rc = measure(t, &nkeys, &nnames);
    if (rc < 0)
        return rc;
    const size_t at_m = SAMPLE_TABLE_HEAD,
                 at_k = at_m + t->n * SAMPLE_TABLE_MEMBER,
                 at_n = at_k + nkeys * SAMPLE_TABLE_KEY,
                 end = at_n + (((size_t)nnames + 7) & ~(size_t)7);
    unsigned char *b = calloc(1, end + 8);
    if (!b)
        return PL_ENOMEM;
    memcpy(b, SAMPLE_TABLE_MAGIC, 8);
    le_put64(b + 8, shard_size);
    le_put64(b + 16, (uint64_t)mtime_s);
    le_put64(b + 24, (uint64_t)mtime_ns);
    le_put64(b + 32, t->n);
    le_put64(b + 40, nkeys);
    le_put64(b + 48, nnames);
    size_t name = 0;
    for (size_t i = 0; i < t->n; i++) {
        const tar_member *m = &t->m[i];
        unsigned char *r = b + at_m + i * SAMPLE_TABLE_MEMBER;
        const size_t nl = strlen(m->name);
        le_put64(r, (uint64_t)m->offset);
        le_put64(r + 8, (uint64_t)m->size);
        le_put32(r + 16, (uint32_t)name);
        r[20] = m->small_len < 0 ? NO_SMALL : (unsigned char)m->small_len;
        memcpy(b + at_n + name, m->name, nl + 1);
        name += nl + 1;
        if (m->small_len > 0) {
            memcpy(b + at_n + name, m->small, (size_t)m->small_len);
            name += (size_t)m->small_len;
        }
    }
    size_t k = 0;
    for (size_t i = 0, j; i < t->n; i = j, k++) {
        j = key_end(t, i);
        put_key(b + at_k + k * SAMPLE_TABLE_KEY, t, i, j);
    }
    le_put64(b + end, fnv1a(FNV_SEED, b, end));
    *out = b;
    *len = end + 8;
    return 0;
}

/* ---- opening ---- */

int sample_table_is(const unsigned char *p, size_t len)
{
    return len >= 8 && memcmp(p, SAMPLE_TABLE_MAGIC, 8) == 0;
}

/* Every member's name and small bytes in the block, its range in the
 * shard; the keys covering the members in order, each one's members one
 * key. */
static int records_check(const sample_table *t, uint64_t nnames)
{
    for (uint32_t i = 0; i < t->nmembers; i++) {
        const unsigned char *r = shard_member_at(t, i);
        const uint64_t off = le_get64(r), size = le_get64(r + 8), at = le_get32(r + 16);
        const unsigned sl = r[20];
        if (at >= nnames || (sl != NO_SMALL && sl > TAR_SMALL_MAX) ||
            off > t->shard_size || size > t->shard_size - off)
            return -1;
        const char *nul = memchr(t->names + at, '\0', nnames - at);
        const size_t nl = nul ? (size_t)(nul - (t->names + at)) : nnames;
        if (!nul || at + nl + 1 + (sl == NO_SMALL ? 0 : sl) > nnames)
            return -1;
    }
    uint64_t next = 0;
    for (uint32_t k = 0; k < t->nkeys; k++) {
        const uint32_t first = shard_key_first(t, k),
                       count = shard_key_members(t, k),
                       label = (uint32_t)shard_key_label(t, k),
                       flags = shard_key_flags(t, k);
        /* A label as read_label gives them: what the class table is sized
         * by, so never trusted past that. */
        if (first != next || count == 0 || count > t->nmembers - first ||
            label >= (1u << 20) || (flags & 0xfeu) ||
            ((flags & SHARD_CLS_BAD) && label != 0) ||
            (flags >> 8 != SHARD_IMAGE_SCAN && flags >> 8 > count))
            return -1;
        next = (uint64_t)first + count;
    }
    return next == t->nmembers ? 0 : -1;
}

int sample_table_open(sample_table *tab, const unsigned char *p, size_t len,
                     int mapped)
{
    memset(tab, 0, sizeof *tab);
    if (len < SAMPLE_TABLE_HEAD + 8 || !sample_table_is(p, len) || len % 8 ||
        le_get64(p + len - 8) != fnv1a(FNV_SEED, p, len - 8))
        return -1;
    const uint64_t m = le_get64(p + 32), k = le_get64(p + 40), nn = le_get64(p + 48);
    if (m > UINT32_MAX || k > m || nn > UINT32_MAX ||
        SAMPLE_TABLE_HEAD + m * SAMPLE_TABLE_MEMBER + k * SAMPLE_TABLE_KEY +
                ((nn + 7) & ~(uint64_t)7) + 8 !=
            len ||
        le_get64(p + 8) > INT64_MAX)
        return -1;
    tab->shard_size = le_get64(p + 8);
    tab->mtime_s = (int64_t)le_get64(p + 16);
    tab->mtime_ns = (int64_t)le_get64(p + 24);
    tab->nmembers = (uint32_t)m;
    tab->nkeys = (uint32_t)k;
    tab->members = p + SAMPLE_TABLE_HEAD;
    tab->keys = tab->members + m * SAMPLE_TABLE_MEMBER;
    tab->names = (const char *)(tab->keys + k * SAMPLE_TABLE_KEY);
    if (records_check(tab, nn) < 0) {
        memset(tab, 0, sizeof *tab);
        return -1;
    }
    tab->base = p;
    tab->len = len;
    tab->mapped = mapped;
    return 0;
}

void sample_table_close(sample_table *tab)
{
    if (tab->base && tab->mapped == SAMPLE_TABLE_MAPPED)
        munmap((void *)tab->base, tab->len);
    else if (tab->mapped == SAMPLE_TABLE_HEAP)
        free((void *)tab->base);
    memset(tab, 0, sizeof *tab);
}

int sample_table_members(const sample_table *tab, tar_index *t)
{
    memset(t, 0, sizeof *t);
    for (uint32_t i = 0; i < tab->nmembers; i++) {
        char *name = strdup(shard_member_name(tab, i));
        if (!name || tar_add(t, name, shard_member_offset(tab, i),
                             shard_member_size(tab, i)) < 0) {
            tar_index_free(t);
            return PL_ENOMEM;
        }
        const unsigned sl = shard_member_at(tab, i)[20];
        tar_member *mm = &t->m[t->n - 1];
        if (sl != NO_SMALL) {
            memcpy(mm->small, shard_member_name(tab, i) + strlen(name) + 1, sl);
            mm->small_len = (int)sl;
        }
    }
    return 0;
}

/* ---- a sample ---- */

/* Which of the extras `ext` is (the first member of a key with it
 * counts), or -1. */
static int extra_of(const shard_extras *x, const char *ext,
                    const int64_t *extra)
{
    for (int k = 0; k < x->n; k++)
        if (extra[k] < 0 && strcasecmp(ext, x->names[k]) == 0)
            return k;
    return -1;
}

void sample_table_sample(const sample_table *tab, int64_t k,
                        const shard_extras *x, shard_sample *s, char *reason,
                        size_t cap)
{
    const int64_t first = shard_key_first(tab, k),
                  end = first + shard_key_members(tab, k);
    const uint32_t flags = shard_key_flags(tab, k);
    s->image = s->cls = -1;
    for (int e = 0; e < SAMPLE_TABLE_EXTRAS; e++)
        s->extra[e] = -1;
    s->label = shard_key_label(tab, k);
    const uint32_t image = flags >> 8;
    if (x->n == 0 && !(flags & SHARD_CLS_BAD) && image != SHARD_IMAGE_SCAN) {
        /* The common case: the image as the record has it, no names read */
        s->image = image ? first + image - 1 : -1;
        s->code = image ? 0 : PL_ENOTIMAGE;
        if (reason && image) {
            reason[0] = '\0';
            return;
        }
        if (!reason)
            return;
    }
    for (int64_t j = first; j < end; j++) {
        size_t kl;
        const char *ext;
        shard_split_key(shard_member_name(tab, j), &kl, &ext);
        const int kind = codec_extension_kind(ext),
                  e = extra_of(x, ext, s->extra);
        if (e >= 0) /* an extra (a cls one still gives the label) */
            s->extra[e] = j;
        if (s->cls < 0 && strcasecmp(ext, "cls") == 0)
            s->cls = j;
        else if (e < 0 && s->image < 0 && kind == 1)
            s->image = j;
    }
    if (reason)
        reason[0] = '\0';
    int missing = -1;
    for (int e = 0; x->required && e < x->n && missing < 0; e++)
        if (s->extra[e] < 0)
            missing = e;
    const int cls_bad = (flags & SHARD_CLS_BAD) && s->cls >= 0;
    if (cls_bad)
        s->code = s->image >= 0 ? PL_ECORRUPT : PL_ENOTIMAGE;
    else if (s->image < 0)
        s->code = PL_ENOTIMAGE;
    else if (missing >= 0)
        s->code = PL_ENOEXTRA;
    else
        s->code = 0;
    if (s->code)
        for (int e = 0; e < SAMPLE_TABLE_EXTRAS; e++)
            s->extra[e] = -1;
    if (!reason || !s->code)
        return;
    size_t klen;
    const char *ext, *key = shard_member_name(tab, first);
    shard_split_key(key, &klen, &ext);
    if (cls_bad) {
        const unsigned char *m = shard_member_at(tab, s->cls);
        const char *name = shard_member_name(tab, s->cls);
        read_label(name, shard_member_size(tab, s->cls),
                   (const unsigned char *)name + strlen(name) + 1,
                   m[20] == NO_SMALL ? -1 : m[20], reason, cap);
    } else if (s->image < 0) {
        char exts[64];
        codec_words(exts, sizeof exts, CODEC_EXTENSIONS, " or ");
        snprintf(reason, cap, "key %.*s has no %s member", (int)klen, key,
                 exts);
    } else {
        snprintf(reason, cap, "key %.*s has no %s member (config.extras)",
                 (int)klen, key, x->names[missing]);
    }
}

const char *sample_table_sample_name(const sample_table *tab, int64_t k,
                                    const shard_sample *s, size_t *len)
{
    if (s->image >= 0) {
        const char *name = shard_member_name(tab, s->image);
        *len = strlen(name);
        return name;
    }
    const char *key = shard_member_name(tab, shard_key_first(tab, k));
    const char *ext;
    shard_split_key(key, len, &ext);
    return key;
}
