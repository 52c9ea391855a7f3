/* The tests' one JPEG writer: RGB pixels to a baseline or progressive JPEG
 * file with libjpeg, with the quality, colour space and sampling factors
 * a fixture asks for. Plain C with no test framework, header-only, so that
 * the Criterion suites (through testutil.h), the stress program (which
 * runs under valgrind like a user's program) and the GPU suite (C++, built
 * by nvcc) share it. The tools have theirs, tools/jpegenc.h: tools/ use
 * only include/ and tools/. */
#ifndef PINLOAD_JPEGWRITE_H
#define PINLOAD_JPEGWRITE_H

#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

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
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, o && o->quality ? o->quality : 90, TRUE);
    if (o && o->gray)
        jpeg_set_colorspace(&c, JCS_GRAYSCALE);
    if (o && o->h_samp) {
        c.comp_info[0].h_samp_factor = o->h_samp;
        c.comp_info[0].v_samp_factor = o->v_samp;
    }
    if (o && o->progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
    return 0;
}

#endif
