/* A tar shard's sample table: its members (offset, size, name, the bytes
 * of the small ones) and its samples (consecutive members with one key,
 * the path up to the first dot of the last component, and the key's cls
 * label), as fixed-width records over one block of NUL-terminated names.
 * It is laid out as the shard's index file (.idx) of version 2
 * (idx_file.h), so
 * that the catalog reads a sample straight from that file mapped
 * read-only: the pages are the page cache's, shared by every process of
 * the node that maps the file (a node's ranks), and nothing per sample is
 * private. Where no index file could be written the same bytes are held
 * in the heap. Read-only once opened: safe from any thread.
 *
 * The layout, little-endian, every record 8-byte aligned:
 *   0   "PLTARIX2"
 *   8   the shard's size (u64), 16: its mtime s (i64), 24: ns (i64)
 *   32  members M (u64), 40: keys K (u64), 48: name block bytes N (u64),
 *   56  zero (u64)
 *   64  M members of 24 bytes: data offset (u64), size (u64), name's place
 *       in the block (u32: a NUL-terminated name, the member's small
 *       bytes right after its NUL), small length (u8; 255: none), zero
 *       (3 bytes)
 *       K keys of 16 bytes: first member (u32), members (u32), label
 *       (i32: the cls member's, 0 without one or when it is not a label),
 *       flags (u32: bit 0 set: the cls member is not a label; bits 8 to
 *       31: the key's first member of a kind pinload reads (jpg, jpeg,
 *       png, webp: codec_extension_kind), 1 + its place in the key; 0:
 *       none; 2^24 - 1: too far in, found by reading the names), the
 *       image when no extras are configured
 *       the name block (N bytes, zero-padded to 8)
 *   end the FNV-1a 64 of everything before. */
#ifndef PINLOAD_SAMPLE_TABLE_H
#define PINLOAD_SAMPLE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/bytes.h"
#include "tar.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the mapped sample table is read in place: little-endian hosts only"
#endif

#define SAMPLE_TABLE_MAGIC "PLTARIX2"
#define SAMPLE_TABLE_HEAD 64
#define SAMPLE_TABLE_MEMBER 24
#define SAMPLE_TABLE_KEY 16
#define SAMPLE_TABLE_EXTRAS 8       /* PL_EXTRAS_MAX */
#define SHARD_CLS_BAD 1u           /* a key flag */
#define SHARD_IMAGE_SCAN 0xffffffu /* a key's image: found by its members */

/* How a table's bytes are held (sample_table.mapped). */
#define SAMPLE_TABLE_HEAP 0   /* malloc'd: freed at close */
#define SAMPLE_TABLE_MAPPED 1 /* its own mapping: unmapped at close */
#define SAMPLE_TABLE_PART                                                       \
    2 /* a slice of a mapping another owns (the                                \
         catalog's dataset table file): left alone */

typedef struct sample_table {
    const unsigned char *base; /* the whole table */
    size_t len;
    int mapped; /* SAMPLE_TABLE_* : how close lets it go */
    uint64_t shard_size;
    int64_t mtime_s, mtime_ns;
    uint32_t nmembers, nkeys;
    const unsigned char *members, *keys;
    const char *names;
} sample_table;

/* What sample (key) k of a shard is, for a configuration's extras: its
 * image member (-1: none), each extra's member (-1: none), its cls member
 * (-1: none), its label, and the code of a sample bad by construction (0:
 * it is not). */
typedef struct shard_sample {
    int64_t image, cls;
    int64_t extra[SAMPLE_TABLE_EXTRAS];
    int32_t label;
    int code;
} shard_sample;

/* The extras a configuration names (catalog_set_extras). */
typedef struct shard_extras {
    const char *const *names;
    int n, required;
} shard_extras;

/* t's table as bytes: [out] *out (malloc'd) and *len. 0, or PL_ENOMEM, or
 * PL_EINVAL when t is too large for the format (over 2^32 members or a
 * name block over 4 GiB). */
int sample_table_build(const tar_index *t, uint64_t shard_size, int64_t mtime_s,
                      int64_t mtime_ns, unsigned char **out, size_t *len);

/* Whether p[0, len) starts like a table (its magic). */
int sample_table_is(const unsigned char *p, size_t len);

/* *tab over p[0, len) if it checks (checksum, every record in bounds and
 * the keys covering the members in order): 0, and tab holds p as `mapped`
 * says (SAMPLE_TABLE_*: freed, unmapped or left alone at close); -1, and p
 * stays the caller's. */
int sample_table_open(sample_table *tab, const unsigned char *p, size_t len,
                     int mapped);

/* Safe on a zeroed table and twice. */
void sample_table_close(sample_table *tab);

/* t's members back as a tar_index (remote readers, the packer): 0 or
 * PL_ENOMEM. */
int sample_table_members(const sample_table *tab, tar_index *t);

static inline const unsigned char *shard_member_at(const sample_table *tab,
                                                   int64_t m)
{
    return tab->members + (size_t)m * SAMPLE_TABLE_MEMBER;
}

/* The records are read here alone, through common/bytes.h's readers. */

static inline int64_t shard_member_offset(const sample_table *tab, int64_t m)
{
    return (int64_t)le_get64(shard_member_at(tab, m));
}

static inline int64_t shard_member_size(const sample_table *tab, int64_t m)
{
    return (int64_t)le_get64(shard_member_at(tab, m) + 8);
}

static inline const char *shard_member_name(const sample_table *tab, int64_t m)
{
    return tab->names + le_get32(shard_member_at(tab, m) + 16);
}

static inline const unsigned char *shard_key_at(const sample_table *tab,
                                                int64_t k)
{
    return tab->keys + (size_t)k * SAMPLE_TABLE_KEY;
}

/* Key k's members: [first, first + members). */
static inline uint32_t shard_key_first(const sample_table *tab, int64_t k)
{
    return le_get32(shard_key_at(tab, k));
}

static inline uint32_t shard_key_members(const sample_table *tab, int64_t k)
{
    return le_get32(shard_key_at(tab, k) + 4);
}

static inline int32_t shard_key_label(const sample_table *tab, int64_t k)
{
    return (int32_t)le_get32(shard_key_at(tab, k) + 8);
}

/* SHARD_CLS_BAD, and the image's place in bits 8 to 31. */
static inline uint32_t shard_key_flags(const sample_table *tab, int64_t k)
{
    return le_get32(shard_key_at(tab, k) + 12);
}

/* Sample k of the table under extras x: [out] *s; with reason non-NULL,
 * why it is bad (reason[0] '\0' when it is not). */
void sample_table_sample(const sample_table *tab, int64_t k,
                        const shard_extras *x, shard_sample *s, char *reason,
                        size_t cap);

/* The name sample k goes by after the shard's ("shard.tar:" + this): its
 * image member's, else its key (the first member's name up to its key's
 * end): [out] *len chars at the result, not NUL-terminated for a key. */
const char *sample_table_sample_name(const sample_table *tab, int64_t k,
                                    const shard_sample *s, size_t *len);

/* The extension of a member (after the first dot of its last component),
 * and the length of its key. */
void shard_split_key(const char *name, size_t *klen, const char **ext);

#endif
