/* The tools' one JPEG encoder (pinload-mkdata writes files, pinload-pack
 * re-encodes in memory): RGB rows to a 4:2:0 JPEG with libjpeg-turbo's
 * defaults, baseline or progressive, Huffman tables optimised on request.
 * Header-only: tools/ link only the library and libjpeg. */
#ifndef PINLOAD_JPEGENC_H
#define PINLOAD_JPEGENC_H

#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

typedef struct jpegenc_opts {
    int quality; /* 1..100 */
    int progressive;
    int optimize; /* optimised Huffman tables (smaller, slower) */
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
