/* A tar shard's sample table: its members (offset, size, name, the bytes
 * of the small ones) and its samples (consecutive members with one key,
 * the path up to the first dot of the last component, and the key's cls
 * label), as fixed-width records over one block of NUL-terminated names.
 * It is laid out as the shard's index file (.idx) of version 2
 * (idx_file.h), and each is a slice of the dataset table file
 * (node_tables.h) past the mapping limit.
 *
 * How a table is held: in the heap while create walks every key (its
 * labels, the notes on members left out), then, when it came from a file,
 * file-backed: only the file's descriptor, the table's place in it and
 * its counts are kept, and a sample's key is read with pread when asked
 * for (sample_table_key_view). So the pages are the page cache's, shared
 * by every process of the node that reads the file (a node's ranks), a
 * rank keeps O(shards) of its own, and a file truncated or rewritten in
 * place under a running loader (by anyone: pinload itself only ever
 * writes a new file and renames it) gives an error naming it, never a
 * signal: a mapping would give SIGBUS past a truncation, and bytes
 * rewritten after the open's checks would be read unchecked. Every key
 * read is checked again (records_check on the view) before it is used.
 * Tables with no file (none could be written) stay in the heap. Read-only
 * once opened: safe from any thread.
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

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/bytes.h"
#include "tar.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the sample table is read in place: little-endian hosts only"
#endif

#define SAMPLE_TABLE_MAGIC "PLTARIX2"
#define SAMPLE_TABLE_HEAD 64
#define SAMPLE_TABLE_MEMBER 24
#define SAMPLE_TABLE_KEY 16
#define SAMPLE_TABLE_EXTRAS 8       /* PL_EXTRAS_MAX */
#define SHARD_CLS_BAD 1u           /* a key flag */
#define SHARD_IMAGE_SCAN 0xffffffu /* a key's image: found by its members */

/* How a table's bytes are held (sample_table.mode). */
#define SAMPLE_TABLE_HEAP 0 /* in the heap (base): freed at close */
#define SAMPLE_TABLE_FILE 1 /* read from `file` at `at` through fd */

typedef struct sample_table {
    const unsigned char *base; /* the whole table in the heap, or NULL */
    size_t len;
    int malloced; /* base is malloc'd (sample_table_settle's move,
                     sample_table_whole), not sample_table_bytes' */
    int mode;     /* SAMPLE_TABLE_* */
    /* The file the table lies in at `at`, open as fd (none: file NULL):
     * closed and freed at close when owns_file, else another's (the
     * catalog's dataset table file). Set while the table is still in the
     * heap (sample_table_attach); sample_table_settle then lets the heap
     * copy go. */
    int fd;
    int owns_file;
    char *file;
    uint64_t at;
    uint64_t shard_size;
    int64_t mtime_s, mtime_ns;
    uint32_t nmembers, nkeys;
    uint64_t nnames; /* bytes of the name block */
    /* Into base while it is held; NULL once file-backed. */
    const unsigned char *members, *keys;
    const char *names;
} sample_table;

/* One key's records, read and checked (sample_table_key_view): a table of
 * one key, key 0, its members re-based to 0 and the names they use. Small
 * keys fit `room`; larger ones are malloc'd (sample_view_free). */
#define SAMPLE_VIEW_ROOM 1024
typedef struct sample_view {
    sample_table tab;
    int64_t first; /* the key's first member in its shard's table */
    unsigned char *heap;
    uint64_t room[SAMPLE_VIEW_ROOM / 8];
} sample_view;

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

/* A table's bytes: what sample_table_build makes, sample_table_open takes
 * and sample_table_close gives back. From SAMPLE_TABLE_PAGES bytes on
 * they are pages of their own (an anonymous mapping), not the heap's.
 * Create reads each table on one of its scan threads and drops it once
 * the catalog has walked its keys; from malloc, the copies stayed the
 * process's: each scan thread's glibc arena kept its high-water pages
 * (a thread arena keeps its top, and malloc_trim trims the main arena's
 * alone), and the small allocations that outlive create (an index
 * file's name) pinned the pages between freed tables. At 100,000
 * samples in 500 shards that was 7.4 to 8.8 private bytes a sample after
 * create, 14.3 to 15.4 on the create that indexes; with pages, 1.8 to
 * 2.5 and 3.9 to 5.1 (tests/system/test_memory.c), for about 14 us a
 * shard more at create (a mapping, its faults and its unmapping). Smaller
 * ones are malloc'd (a page each would cost more than they do). Zeroed;
 * NULL when out of memory. */
#define SAMPLE_TABLE_PAGES 4096
unsigned char *sample_table_bytes(size_t n);

/* Bytes from sample_table_bytes(n), given back; NULL is accepted. */
void sample_table_bytes_free(const unsigned char *p, size_t n);

/* t's table as bytes: [out] *out (sample_table_bytes) and *len. 0, or
 * PL_ENOMEM, or PL_EINVAL when t is too large for the format (over 2^32
 * members or a name block over 4 GiB). */
int sample_table_build(const tar_index *t, uint64_t shard_size, int64_t mtime_s,
                      int64_t mtime_ns, unsigned char **out, size_t *len);

/* Whether p[0, len) starts like a table (its magic). */
int sample_table_is(const unsigned char *p, size_t len);

/* *tab over p[0, len) if it checks (checksum, every record in bounds, the
 * names in member order and the keys covering the members in order): 0,
 * and tab holds p (from sample_table_bytes(len): given back at close);
 * -1, and p stays the caller's. */
int sample_table_open(sample_table *tab, const unsigned char *p, size_t len);

/* The file `file` (copied), open as fd, holds the heap table tab at byte
 * `at`: owned (the table closes fd at close, and the copy is its own) or
 * another's (then `file` is kept as it is and must outlive the table). 0,
 * or PL_ENOMEM (fd is then the caller's still). */
int sample_table_attach(sample_table *tab, int fd, const char *file,
                        uint64_t at, int owned);

/* Create's pass over the table's keys is done. One attached to its file:
 * the heap copy dropped, the table file-backed from now on. One that is
 * not stays in the heap, moved off its own pages into malloc'd bytes (by
 * the thread that keeps it: a page each would cost a shard of 200
 * samples about 12 bytes a sample more), or left where it is if that
 * memory cannot be had. */
void sample_table_settle(sample_table *tab);

/* Safe on a zeroed table and twice. */
void sample_table_close(sample_table *tab);

/* The whole of a table in the heap, read and checked again when it is
 * file-backed (a view of a file-backed table's keys one at a time would
 * cost a syscall a key): 0 with *out (close it), or a PL_E* code with
 * the reason naming the file in reason[0, cap). The copy is malloc'd, not
 * pages of its own: the calling thread reads a table at a time and closes
 * it (the fingerprint's walk), so the allocator hands the same bytes back
 * each time, where a mapping a table cost 30 ms more a create over 500
 * shards. */
int sample_table_whole(const sample_table *tab, sample_table *out,
                       char *reason, size_t cap);

/* t's members back as a tar_index (remote readers, the packer): 0 or
 * PL_ENOMEM, or the code of a file-backed table that no longer reads. */
int sample_table_members(const sample_table *tab, tar_index *t);

/* Key k of tab (k < nkeys) as a checked table of one key, [out] *v: its
 * key record, members and names read (pread when file-backed, a copy
 * when in the heap: one path for both) and checked as at open against the
 * shard's size. 0, or PL_ECORRUPT (the file was truncated or rewritten
 * in place), PL_EIO or PL_ENOMEM, with the reason naming the file in
 * reason[0, cap) (reason may be NULL). Free v with sample_view_free
 * either way. */
int sample_table_key_view(const sample_table *tab, int64_t k, sample_view *v,
                          char *reason, size_t cap);

/* Safe on a view that failed, and twice. */
void sample_view_free(sample_view *v);

/* The record readers below read a table in the heap (base set) or a
 * view: never a file-backed table. */

static inline const unsigned char *shard_member_at(const sample_table *tab,
                                                   int64_t m)
{
    assert(tab->members);
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
    assert(tab->keys);
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
