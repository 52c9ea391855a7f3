/* The project's one JPEG encoder (pinload-mkdata writes files,
 * pinload-pack re-encodes in memory, tests/jpegwrite.h makes the tests'
 * fixtures): RGB rows to a JPEG with libjpeg-turbo's defaults (4:2:0),
 * baseline or progressive, Huffman tables optimised, one gray component or
 * other luma sampling on request; for the decoder's tests, restart markers,
 * arithmetic coding with chosen conditioning, and components stored as RGB
 * or as Adobe's inverted CMYK. Header-only, plain C that C++ (the GPU
 * suite, through nvcc) also compiles: tools/ link only the library and
 * libjpeg. */
#ifndef PINLOAD_JPEGENC_H
#define PINLOAD_JPEGENC_H

#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>

#include <jpeglib.h>

/* What the components hold (jpegenc_opts.store). */
enum {
    JPEGENC_YCC = 0,  /* YCbCr, as libjpeg's defaults */
    JPEGENC_RGB = 1,  /* R, G, B without a colour transform (Adobe
                         marker, transform 0) */
    JPEGENC_CMYK = 2, /* C, M, Y, K from the RGB (K = 0, C = 255 - R...),
                         stored inverted as Adobe writes it, with its
                         marker */
};

typedef struct jpegenc_opts {
    int quality; /* 1..100 */
    int progressive;
    int optimize;       /* optimised Huffman tables (smaller, slower) */
    int gray;           /* one component */
    int h_samp, v_samp; /* luma sampling factors; 0: libjpeg's 2x2 */
    int restart_mcus;   /* a restart marker every N MCUs; 0: none */
    int arith;          /* arithmetic coding instead of Huffman */
    int arith_ac_k;     /* its AC conditioning Kx (1..63); 0: default 5 */
    int store;          /* a JPEGENC_* above */
} jpegenc_opts;

/* Row y of the RGB image as the encoder takes it: itself, or as CMYK. */
static inline JSAMPROW jpegenc_row(const uint8_t *rgb, int w, int y,
                                   const jpegenc_opts *o, uint8_t *cmyk)
{
    const uint8_t *src = rgb + (size_t)y * w * 3;
    if (o->store != JPEGENC_CMYK)
        return (JSAMPROW)src;
    /* Adobe's inverted form: 0 is full ink, so a stored byte is 255 - C
     * = R, and K (no ink) is 255. */
    for (int x = 0; x < w; x++) {
        cmyk[x * 4 + 0] = src[x * 3 + 0];
        cmyk[x * 4 + 1] = src[x * 3 + 1];
        cmyk[x * 4 + 2] = src[x * 3 + 2];
        cmyk[x * 4 + 3] = 255;
    }
    return cmyk;
}

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
    const int cmyk = o->store == JPEGENC_CMYK;
    c.input_components = cmyk ? 4 : 3;
    c.in_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c); /* YCbCr 4:2:0 */
    jpeg_set_quality(&c, o->quality, TRUE);
    if (o->gray)
        jpeg_set_colorspace(&c, JCS_GRAYSCALE);
    else if (o->store == JPEGENC_RGB)
        jpeg_set_colorspace(&c, JCS_RGB);
    if (o->h_samp) {
        c.comp_info[0].h_samp_factor = o->h_samp;
        c.comp_info[0].v_samp_factor = o->v_samp;
    }
    c.optimize_coding = o->optimize ? TRUE : FALSE;
    c.restart_interval = (unsigned)o->restart_mcus;
    if (o->arith) {
        c.arith_code = TRUE;
        for (int i = 0; o->arith_ac_k && i < NUM_ARITH_TBLS; i++)
            c.arith_ac_K[i] = (UINT8)o->arith_ac_k;
    }
    if (o->progressive)
        jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    uint8_t *cmyk_row = cmyk ? (uint8_t *)malloc((size_t)w * 4) : NULL;
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = jpegenc_row(rgb, w, (int)c.next_scanline, o, cmyk_row);
        jpeg_write_scanlines(&c, &row, 1);
    }
    free(cmyk_row);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
}

#endif
