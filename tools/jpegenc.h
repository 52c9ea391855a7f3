/* The project's one JPEG encoder (pinload-mkdata writes files,
 * pinload-pack re-encodes in memory, tests/jpegwrite.h makes the tests'
 * fixtures): RGB rows to a JPEG with libjpeg-turbo's defaults (4:2:0),
 * baseline or progressive, Huffman tables optimised, one gray component or
 * other luma sampling on request. Header-only, plain C that C++ (the GPU
 * suite, through nvcc) also compiles: tools/ link only the library and
 * libjpeg. */
#ifndef PINLOAD_JPEGENC_H
#define PINLOAD_JPEGENC_H

#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

typedef struct jpegenc_opts {
    int quality; /* 1..100 */
    int progressive;
    int optimize;       /* optimised Huffman tables (smaller, slower) */
    int gray;           /* one component */
    int h_samp, v_samp; /* luma sampling factors; 0: libjpeg's 2x2 */
} jpegenc_opts;

/* Encode w x h RGB pixels (rows of w * 3 bytes) into `f` when it is not
 * NULL, else into a buffer of libjpeg's (*out, *len; free() it). */
static inline void jpegenc(const uint8_t *rgb, int w, int h,
                           const jpegenc_opts *o, FILE *f, unsigned char **out,
                           unsigned long *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    if (f) {
        jpeg_stdio_dest(&c, f);
    } else {
        *out = NULL;
        *len = 0;
        jpeg_mem_dest(&c, out, len);
    }
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c); /* YCbCr 4:2:0 */
    jpeg_set_quality(&c, o->quality, TRUE);
    if (o->gray)
        jpeg_set_colorspace(&c, JCS_GRAYSCALE);
    if (o->h_samp) {
        c.comp_info[0].h_samp_factor = o->h_samp;
        c.comp_info[0].v_samp_factor = o->v_samp;
    }
    c.optimize_coding = o->optimize ? TRUE : FALSE;
    if (o->progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
}

#endif
