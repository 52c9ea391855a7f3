/* A shard's sample table: built from a scan's index, checked when opened, and a
 * sample's members found by key (sample_table.h has the layout). */
#include "sample_table.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/file.h"
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

/* ---- a table's bytes ---- */

unsigned char *sample_table_bytes(size_t n)
{
    if (n < SAMPLE_TABLE_PAGES)
        return calloc(1, n ? n : 1);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

void sample_table_bytes_free(const unsigned char *p, size_t n)
{
    if (!p)
        return;
    if (n < SAMPLE_TABLE_PAGES)
        free((void *)p);
    else
        munmap((void *)p, n);
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
    unsigned char *b = sample_table_bytes(end + 8);
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

/* Every member's name and small bytes in the block, one after another in
 * member order (as sample_table_build lays them, so that a key's names
 * are one slice of the block: sample_table_key_view reads just that), its
 * range in the shard; the keys covering the members in order, each one's
 * members one key. */
static int records_check(const sample_table *t, uint64_t nnames)
{
    uint64_t next_name = 0;
    for (uint32_t i = 0; i < t->nmembers; i++) {
        const unsigned char *r = shard_member_at(t, i);
        const uint64_t off = le_get64(r), size = le_get64(r + 8), at = le_get32(r + 16);
        const unsigned sl = r[20];
        if (at >= nnames || at < next_name ||
            (sl != NO_SMALL && sl > TAR_SMALL_MAX) || off > t->shard_size ||
            size > t->shard_size - off)
            return -1;
        const char *nul = memchr(t->names + at, '\0', nnames - at);
        const size_t nl = nul ? (size_t)(nul - (t->names + at)) : nnames;
        next_name = at + nl + 1 + (sl == NO_SMALL ? 0 : sl);
        if (!nul || next_name > nnames)
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

int sample_table_open(sample_table *tab, const unsigned char *p, size_t len)
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
    tab->nnames = nn;
    tab->members = p + SAMPLE_TABLE_HEAD;
    tab->keys = tab->members + m * SAMPLE_TABLE_MEMBER;
    tab->names = (const char *)(tab->keys + k * SAMPLE_TABLE_KEY);
    if (records_check(tab, nn) < 0) {
        memset(tab, 0, sizeof *tab);
        return -1;
    }
    tab->base = p;
    tab->len = len;
    tab->mode = SAMPLE_TABLE_HEAP;
    return 0;
}

int sample_table_attach(sample_table *tab, int fd, const char *file,
                        uint64_t at, int owned)
{
    char *name = owned ? strdup(file) : (char *)file;
    if (!name)
        return PL_ENOMEM;
    tab->fd = fd;
    tab->file = name;
    tab->owns_file = owned;
    tab->at = at;
    return 0;
}

/* Bytes base[0, len) freed as they were had. */
static void base_free(const sample_table *tab)
{
    if (tab->malloced)
        free((void *)tab->base);
    else
        sample_table_bytes_free(tab->base, tab->len);
}

/* Table tab's bytes off their pages and into the heap (a table that
 * stays there: sample_table_settle). */
static void move_to_heap(sample_table *tab)
{
    unsigned char *b;
    if (tab->malloced || tab->len < SAMPLE_TABLE_PAGES ||
        !(b = malloc(tab->len)))
        return;
    memcpy(b, tab->base, tab->len);
    const ptrdiff_t at_m = tab->members - tab->base,
                    at_k = tab->keys - tab->base,
                    at_n = (const unsigned char *)tab->names - tab->base;
    base_free(tab);
    tab->base = b;
    tab->malloced = 1;
    tab->members = b + at_m;
    tab->keys = b + at_k;
    tab->names = (const char *)b + at_n;
}

void sample_table_settle(sample_table *tab)
{
    if (!tab->base)
        return;
    if (!tab->file) {
        move_to_heap(tab);
        return;
    }
    base_free(tab);
    tab->base = NULL;
    tab->members = tab->keys = NULL;
    tab->names = NULL;
    tab->mode = SAMPLE_TABLE_FILE;
}

void sample_table_close(sample_table *tab)
{
    base_free(tab);
    if (tab->owns_file && tab->file) {
        close(tab->fd);
        free(tab->file);
    }
    memset(tab, 0, sizeof *tab);
}

/* ---- reading a table back ---- */

/* A key view larger than this is refused (a table whose records claim
 * more is damaged: a real key is a handful of members). */
#define VIEW_MAX ((size_t)64 << 20)

/* Bytes [off, off + n) of the table into dst: copied from the heap, or
 * read from its file. 0; 1 if the file ends before them; -1 on a read
 * error (errno). */
static int table_read(const sample_table *tab, uint64_t off, void *dst,
                      size_t n)
{
    if (off > tab->len || n > tab->len - off)
        return 1;
    if (tab->base) {
        memcpy(dst, tab->base + off, n);
        return 0;
    }
    const ssize_t r = file_pread_full(tab->fd, dst, n, (off_t)(tab->at + off));
    return r == (ssize_t)n ? 0 : r < 0 ? -1 : 1;
}

/* The code and reason of a table that no longer reads (what: the part of
 * it; read: table_read's result, or 2 for records that do not check). */
static int table_broken(const sample_table *tab, int64_t k, const char *what,
                        int read, char *reason, size_t cap)
{
    const int code = read < 0 ? (errno == ENOMEM ? PL_ENOMEM : PL_EIO)
                              : PL_ECORRUPT;
    const char *file = tab->file ? tab->file : "a shard's sample table";
    if (reason && read < 0)
        snprintf(reason, cap, "%s: reading key %lld's %s: %s", file,
                 (long long)k, what, strerror(errno));
    else if (reason)
        snprintf(reason, cap,
                 "%s: changed under the loader (truncated or rewritten in "
                 "place): key %lld's %s: %s",
                 file, (long long)k, what,
                 read == 1 ? "past the end of the file"
                           : "not as written (they do not check)");
    return code;
}

int sample_table_whole(const sample_table *tab, sample_table *out,
                       char *reason, size_t cap)
{
    memset(out, 0, sizeof *out);
    unsigned char *b = malloc(tab->len ? tab->len : 1);
    if (!b)
        return PL_ENOMEM;
    const int rc = table_read(tab, 0, b, tab->len);
    if (rc != 0 || sample_table_open(out, b, tab->len) < 0 ||
        out->shard_size != tab->shard_size || out->nkeys != tab->nkeys ||
        out->nmembers != tab->nmembers || out->nnames != tab->nnames) {
        free(b);
        memset(out, 0, sizeof *out);
        return table_broken(tab, 0, "table (every record)", rc ? rc : 2,
                            reason, cap);
    }
    out->malloced = 1;
    return 0;
}

int sample_table_members(const sample_table *whole, tar_index *t)
{
    memset(t, 0, sizeof *t);
    sample_table copy = {0};
    const sample_table *tab = whole;
    if (!whole->base) {
        char why[512];
        const int rc = sample_table_whole(whole, &copy, why, sizeof why);
        if (rc < 0)
            return err_set(rc, "%s", why);
        tab = &copy;
    }
    int rc = 0;
    for (uint32_t i = 0; i < tab->nmembers && rc == 0; i++) {
        char *name = strdup(shard_member_name(tab, i));
        if (!name || tar_add(t, name, shard_member_offset(tab, i),
                             shard_member_size(tab, i)) < 0) {
            tar_index_free(t);
            rc = PL_ENOMEM;
            break;
        }
        const unsigned sl = shard_member_at(tab, i)[20];
        tar_member *mm = &t->m[t->n - 1];
        if (sl != NO_SMALL) {
            memcpy(mm->small, shard_member_name(tab, i) + strlen(name) + 1, sl);
            mm->small_len = (int)sl;
        }
    }
    sample_table_close(&copy);
    return rc;
}

/* Room for `n` bytes of view v, keeping its first `keep`: the view's own
 * room, or the heap. NULL when out of memory. */
static unsigned char *view_room(sample_view *v, size_t n, size_t keep)
{
    unsigned char *b = v->heap ? v->heap : (unsigned char *)v->room;
    if (n <= (v->heap ? keep : sizeof v->room))
        return b;
    unsigned char *g = malloc(n);
    if (g && keep)
        memcpy(g, b, keep);
    free(v->heap);
    v->heap = g;
    return g;
}

void sample_view_free(sample_view *v)
{
    free(v->heap);
    v->heap = NULL;
    memset(&v->tab, 0, sizeof v->tab);
}

/* The key view's layout: its members and one more (where its names end,
 * when another follows), its key record, then its slice of the names. */
int sample_table_key_view(const sample_table *tab, int64_t k, sample_view *v,
                          char *reason, size_t cap)
{
    memset(&v->tab, 0, sizeof v->tab);
    v->heap = NULL;
    v->first = 0;
    const uint64_t m = tab->nmembers,
                   at_k = SAMPLE_TABLE_HEAD + m * SAMPLE_TABLE_MEMBER,
                   at_n = at_k + (uint64_t)tab->nkeys * SAMPLE_TABLE_KEY;
    unsigned char key[SAMPLE_TABLE_KEY];
    int rc = table_read(tab, at_k + (uint64_t)k * SAMPLE_TABLE_KEY, key,
                        sizeof key);
    if (rc)
        return table_broken(tab, k, "key record", rc, reason, cap);
    const uint32_t first = le_get32(key), count = le_get32(key + 4);
    if (count == 0 || first > m || count > m - first ||
        ((uint64_t)count + 1) * SAMPLE_TABLE_MEMBER > VIEW_MAX)
        return table_broken(tab, k, "key record", 2, reason, cap);
    const int more = (uint64_t)first + count < m;
    const size_t mbytes = ((size_t)count + (size_t)more) * SAMPLE_TABLE_MEMBER,
                 head = mbytes + SAMPLE_TABLE_KEY;
    unsigned char *b = view_room(v, head, 0);
    if (!b)
        return table_broken(tab, k, "records", (errno = ENOMEM, -1), reason,
                            cap);
    if ((rc = table_read(tab, SAMPLE_TABLE_HEAD + (uint64_t)first *
                                                     SAMPLE_TABLE_MEMBER,
                         b, mbytes)))
        return table_broken(tab, k, "member records", rc, reason, cap);
    const uint64_t from = le_get32(b + 16),
                   to = more ? le_get32(b + (size_t)count * SAMPLE_TABLE_MEMBER +
                                        16)
                             : tab->nnames;
    if (to < from || to > tab->nnames || head + (to - from) > VIEW_MAX)
        return table_broken(tab, k, "member records", 2, reason, cap);
    if (!(b = view_room(v, head + (size_t)(to - from) + 1, mbytes)))
        return table_broken(tab, k, "names", (errno = ENOMEM, -1), reason,
                            cap);
    if ((rc = table_read(tab, at_n + from, b + head, (size_t)(to - from))))
        return table_broken(tab, k, "names", rc, reason, cap);
    for (uint32_t i = 0; i < count; i++) {
        unsigned char *r = b + (size_t)i * SAMPLE_TABLE_MEMBER;
        if (le_get32(r + 16) < from)
            return table_broken(tab, k, "member records", 2, reason, cap);
        le_put32(r + 16, (uint32_t)(le_get32(r + 16) - from));
    }
    memcpy(b + mbytes, key, sizeof key);
    le_put32(b + mbytes, 0); /* its first member, re-based */
    v->tab = (sample_table){.shard_size = tab->shard_size,
                            .nmembers = count,
                            .nkeys = 1,
                            .nnames = to - from,
                            .members = b,
                            .keys = b + mbytes,
                            .names = (const char *)b + head};
    v->first = first;
    if (records_check(&v->tab, to - from) < 0)
        return table_broken(tab, k, "records", 2, reason, cap);
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
