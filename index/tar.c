#include "tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/file.h"
#include "../common/grow.h"
#include "../common/error.h"

#define BLOCK 512

/* The ustar header's fields (offset, length). */
enum {
    NAME = 0,
    NAME_LEN = 100,
    SIZE = 124,
    SIZE_LEN = 12,
    CHKSUM = 148,
    CHKSUM_LEN = 8,
    TYPEFLAG = 156,
    MAGIC = 257,
    PREFIX = 345,
    PREFIX_LEN = 155,
};

int tar_is_name(const char *name)
{
    const size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".tar") == 0;
}

void tar_index_free(tar_index *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->m[i].name);
    free(t->m);
    memset(t, 0, sizeof *t);
}

/* pread exactly n bytes at off: 1, 0 at the end of the file (nothing
 * read), -1 with errno, or -2 for a short read (the file ends inside). */
static int read_at(int fd, void *buf, size_t n, int64_t off)
{
    const ssize_t got = file_pread_full(fd, buf, n, (off_t)off);
    return got < 0 ? -1 : (size_t)got == n ? 1 : got ? -2 : 0;
}

/* An octal field (spaces and NULs around it), or GNU's base-256 form
 * (high bit of the first byte set) for sizes past 8 GiB. -1 if malformed. */
static int64_t number(const unsigned char *f, size_t len)
{
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* negative, or too large */
        int64_t v = 0;
        for (size_t i = 1; i < len; i++) {
            if (v > (INT64_MAX >> 8))
                return -1;
            v = (v << 8) | f[i];
        }
        return v;
    }
    size_t i = 0;
    while (i < len && f[i] == ' ')
        i++;
    int64_t v = 0;
    int digits = 0;
    for (; i < len && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v > (INT64_MAX >> 3))
            return -1;
        v = v * 8 + (f[i] - '0');
    }
    for (; i < len; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    return digits ? v : -1;
}

static int all_zero(const unsigned char *b)
{
    for (int i = 0; i < BLOCK; i++)
        if (b[i])
            return 0;
    return 1;
}

/* The header's checksum: its bytes summed with the checksum field read as
 * spaces (unsigned, as POSIX says; some old writers summed signed bytes). */
static int checksum_ok(const unsigned char *b, int64_t *want, int64_t *got)
{
    int64_t u = 0, s = 0;
    for (int i = 0; i < BLOCK; i++) {
        const int in_field = i >= CHKSUM && i < CHKSUM + CHKSUM_LEN;
        u += in_field ? ' ' : b[i];
        s += in_field ? ' ' : (signed char)b[i];
    }
    *want = number(b + CHKSUM, CHKSUM_LEN);
    *got = u;
    return *want == u || *want == s;
}

int tar_is_archive(const char *path)
{
    /* Without blocking: a FIFO or a device is not read at all. */
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    unsigned char h[BLOCK];
    int64_t want, got;
    const int is = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                   read_at(fd, h, BLOCK, 0) == 1 && !all_zero(h) &&
                   (memcmp(h + MAGIC, "ustar", 5) == 0 ||
                    (h[NAME] != '\0' && checksum_ok(h, &want, &got)));
    close(fd);
    return is;
}

static char *field_str(const unsigned char *f, size_t len)
{
    size_t n = 0;
    while (n < len && f[n])
        n++;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, f, n);
        s[n] = '\0';
    }
    return s;
}

/* A pax extended header's records ("LEN key=value\n"): the path and size
 * it sets for the next member. Returns 0, or -1 if malformed. */
static int parse_pax(const char *d, size_t n, char **path, int64_t *size)
{
    size_t at = 0;
    while (at < n) {
        size_t len = 0, i = at;
        while (i < n && d[i] >= '0' && d[i] <= '9')
            len = len * 10 + (size_t)(d[i++] - '0');
        if (i >= n || d[i] != ' ' || len == 0 || len > n - at ||
            d[at + len - 1] != '\n')
            return -1;
        const char *kv = d + i + 1;
        const size_t kvlen = at + len - 1 - (i + 1);
        const char *eq = memchr(kv, '=', kvlen);
        if (!eq)
            return -1;
        const size_t klen = (size_t)(eq - kv), vlen = kvlen - klen - 1;
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            free(*path);
            *path = strndup(eq + 1, vlen);
            if (!*path)
                return -2;
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            int64_t v = 0;
            for (size_t k = 0; k < vlen; k++) {
                const char c = eq[1 + k];
                if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10)
                    return -1;
                v = v * 10 + (c - '0');
            }
            *size = v;
        }
        at += len;
    }
    return 0;
}

/* A special member's data (GNU long name, pax header), read whole; at most
 * 1 MiB. */
static int read_data(int fd, const char *path, int64_t off, int64_t size,
                     char **out)
{
    if (size > (1 << 20))
        return err_set(PL_ECORRUPT,
                       "%s: byte %lld: an extended header of %lld bytes "
                       "(more than 1 MiB)",
                       path, (long long)off - BLOCK, (long long)size);
    char *d = malloc((size_t)size + 1);
    if (!d)
        return PL_ENOMEM;
    const int r = read_at(fd, d, (size_t)size, off);
    if (r != 1 && size > 0) {
        free(d);
        if (r == -1)
            return err_set(PL_EIO, "%s: read at byte %lld: %s", path,
                           (long long)off, strerror(errno));
        return err_set(PL_ECORRUPT,
                       "%s: truncated: the extended header at byte %lld "
                       "needs %lld bytes",
                       path, (long long)off - BLOCK, (long long)size);
    }
    d[size] = '\0';
    *out = d;
    return 0;
}

int tar_add(tar_index *t, char *name, int64_t offset, int64_t size)
{
    if (grow(&t->m, &t->cap, t->n + 1, sizeof *t->m, 256) < 0) {
        free(name);
        return PL_ENOMEM;
    }
    t->m[t->n++] = (tar_member){
        .name = name, .offset = offset, .size = size, .small_len = -1};
    return 0;
}

int tar_read_small(int fd, const char *path, tar_index *t)
{
    for (size_t i = 0; i < t->n; i++) {
        tar_member *m = &t->m[i];
        if (m->size > TAR_SMALL_MAX)
            continue;
        const int r = read_at(fd, m->small, (size_t)m->size, m->offset);
        if (r != 1 && m->size > 0)
            return err_set(PL_EIO, "%s: reading %s at byte %lld: %s", path,
                           m->name, (long long)m->offset,
                           r == -1 ? strerror(errno) : "short read");
        m->small_len = (int)m->size;
    }
    return 0;
}

int tar_scan(int fd, const char *path, tar_index *out)
{
    memset(out, 0, sizeof *out);
    const off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0)
        return err_set(PL_EIO, "%s: %s", path, strerror(errno));
    unsigned char h[BLOCK];
    char *long_name = NULL; /* from a GNU 'L' member or a pax 'x' header */
    int64_t pax_size = -1;
    int64_t off = 0;
    int rc = 0;
    for (;;) {
        const int r = read_at(fd, h, BLOCK, off);
        if (r == 0)
            break; /* the end, without the two zero blocks: accepted */
        if (r == -1) {
            rc = err_set(PL_EIO, "%s: read at byte %lld: %s", path,
                         (long long)off, strerror(errno));
            break;
        }
        if (r == -2) {
            rc = err_set(PL_ECORRUPT,
                         "%s: truncated: a header at byte %lld, the file "
                         "ends at %lld",
                         path, (long long)off, (long long)end);
            break;
        }
        if (all_zero(h))
            break; /* the end-of-archive marker */
        int64_t want, got;
        if (!checksum_ok(h, &want, &got)) {
            rc = err_set(PL_ECORRUPT,
                         "%s: byte %lld: not a tar header (checksum %lld, "
                         "computed %lld)",
                         path, (long long)off, (long long)want, (long long)got);
            break;
        }
        int64_t size = number(h + SIZE, SIZE_LEN);
        if (size < 0) {
            rc = err_set(PL_ECORRUPT, "%s: byte %lld: a malformed size field",
                         path, (long long)off);
            break;
        }
        if (pax_size >= 0 && h[TYPEFLAG] != 'x' && h[TYPEFLAG] != 'L')
            size = pax_size;
        const int64_t data = off + BLOCK;
        const int64_t next = data + (size + BLOCK - 1) / BLOCK * BLOCK;
        if (data + size > (int64_t)end) {
            char *name = long_name ? long_name : field_str(h + NAME, NAME_LEN);
            rc = err_set(PL_ECORRUPT,
                         "%s: truncated: member %s at byte %lld needs bytes "
                         "to %lld, the file ends at %lld",
                         path, name ? name : "?", (long long)off,
                         (long long)(data + size), (long long)end);
            if (name != long_name)
                free(name);
            break;
        }
        const char type = (char)h[TYPEFLAG];
        if (type == 'L' || type == 'x') {
            char *d = NULL;
            if ((rc = read_data(fd, path, data, size, &d)) < 0)
                break;
            if (type == 'L') {
                free(long_name);
                long_name = d;
            } else {
                const int p = parse_pax(d, (size_t)size, &long_name, &pax_size);
                free(d);
                if (p == -2) {
                    rc = PL_ENOMEM;
                    break;
                }
                if (p < 0) {
                    rc = err_set(PL_ECORRUPT,
                                 "%s: byte %lld: a malformed pax header", path,
                                 (long long)off);
                    break;
                }
            }
            off = next;
            continue;
        }
        if (type == '0' || type == '\0' || type == '7') {
            char *name = long_name;
            long_name = NULL;
            if (!name) {
                const int ustar = memcmp(h + MAGIC, "ustar", 5) == 0;
                char *base = field_str(h + NAME, NAME_LEN);
                char *prefix = ustar ? field_str(h + PREFIX, PREFIX_LEN) : NULL;
                if (!base || (ustar && !prefix)) {
                    free(base);
                    free(prefix);
                    rc = PL_ENOMEM;
                    break;
                }
                if (prefix && *prefix) {
                    name = malloc(strlen(prefix) + strlen(base) + 2);
                    if (name)
                        sprintf(name, "%s/%s", prefix, base);
                    free(base);
                } else {
                    name = base;
                }
                free(prefix);
                if (!name) {
                    rc = PL_ENOMEM;
                    break;
                }
            }
            if ((rc = tar_add(out, name, data, size)) < 0)
                break;
        } else {
            /* A directory, link, global pax header...: not a sample. */
            free(long_name);
            long_name = NULL;
        }
        pax_size = -1;
        off = next;
    }
    free(long_name);
    if (rc == PL_ENOMEM)
        rc = err_set(PL_ENOMEM, "%s: out of memory indexing it", path);
    return rc;
}
