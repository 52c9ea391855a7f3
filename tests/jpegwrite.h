/* The tests' JPEG writer: RGB pixels to a baseline or progressive JPEG
 * file, with the quality, colour space and sampling factors a fixture asks
 * for, through the project's one encoder (tools/jpegenc.h). Plain C with
 * no test framework, header-only, so that the Criterion suites (through
 * testutil.h), the stress program (which runs under valgrind like a user's
 * program) and the GPU suite (C++, built by nvcc) share it. */
#ifndef PINLOAD_JPEGWRITE_H
#define PINLOAD_JPEGWRITE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../tools/jpegenc.h"

typedef struct tu_jpeg_opts {
    int quality; /* 0: 90 */
    int progressive;
    int gray;           /* one component */
    int h_samp, v_samp; /* luma sampling factors; 0: 2x2 (4:2:0) */
} tu_jpeg_opts;

/* Encode w x h RGB pixels (rows of w * 3 bytes) into the file at path.
 * Returns 0, or -1 (errno set) when the file cannot be created. */
static inline int tu_jpeg_encode_file(const char *path, const uint8_t *rgb,
                                      int w, int h, const tu_jpeg_opts *o)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    jpegenc_opts e;
    memset(&e, 0, sizeof e);
    e.quality = o && o->quality ? o->quality : 90;
    if (o) {
        e.progressive = o->progressive;
        e.gray = o->gray;
        e.h_samp = o->h_samp;
        e.v_samp = o->v_samp;
    }
    jpegenc(rgb, w, h, &e, f, NULL, NULL);
    fclose(f);
    return 0;
}

#endif
