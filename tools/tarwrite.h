/* The project's one tar writer (ustar): pinload-pack's shards and the
 * tests that build shards in C. Header-only, like jpegenc.h. Members are
 * regular files, mode 0644, owner 0, mtime 0 (so packing is
 * reproducible). */
#ifndef PINLOAD_TARWRITE_H
#define PINLOAD_TARWRITE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static inline void tarw_octal(char *field, size_t len, uint64_t v)
{
    snprintf(field, len, "%0*llo", (int)len - 1, (unsigned long long)v);
}

/* A ustar header for a regular file `name` (under 100 bytes) of `size`
 * bytes. */
static inline void tarw_header(unsigned char h[512], const char *name,
                               uint64_t size)
{
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    tarw_octal((char *)h + 100, 8, 0644);
    tarw_octal((char *)h + 108, 8, 0);
    tarw_octal((char *)h + 116, 8, 0);
    tarw_octal((char *)h + 124, 12, size);
    tarw_octal((char *)h + 136, 12, 0);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* Member `name` holding data[0, len), padded to 512 bytes: the bytes
 * written, or -1 if a write failed. */
static inline int64_t tarw_member(FILE *f, const char *name, const void *data,
                                  size_t len)
{
    static const unsigned char zero[512];
    unsigned char h[512];
    tarw_header(h, name, len);
    const size_t pad = (512 - len % 512) % 512;
    if (fwrite(h, 1, 512, f) != 512 ||
        (len && fwrite(data, 1, len, f) != len) ||
        (pad && fwrite(zero, 1, pad, f) != pad))
        return -1;
    return 512 + (int64_t)len + (int64_t)pad;
}

/* The archive's end: two zero blocks. -1 if the write failed. */
static inline int tarw_end(FILE *f)
{
    static const unsigned char zero[1024];
    return fwrite(zero, 1, sizeof zero, f) == sizeof zero ? 0 : -1;
}

#endif
