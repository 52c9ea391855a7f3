/* The decoder (workers/decode.c) and sample_decode_full on the shared
 * photos and hard files (../shared/data: skipped where absent) and on
 * bytes that are not JPEG at all: pixels equal djpeg's bit for bit, and
 * every file the decoder refuses is named for what it is. */
#include <dirent.h>
#include <fcntl.h>
#include <strings.h>

#include "../workers/decode.h"
#include "../workers/sample.h"
#include "testdecode.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------- */

typedef struct path_list {
    char **v;
    size_t n, cap;
} path_list;

static void paths_add(path_list *l, const char *p)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        cr_assert_not_null(l->v);
    }
    l->v[l->n++] = strdup(p);
}

static void paths_free(path_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (path_list){0};
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_jpeg_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot &&
           (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

/* Every regular file under dir (into subfolders when recursive) whose name
 * ends in .jpg or .jpeg, appended to l. */
static void collect_jpegs(const char *dir, int recursive, path_list *l)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "opendir %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0, "stat %s", p);
        if (S_ISDIR(st.st_mode)) {
            if (recursive)
                collect_jpegs(p, 1, l);
        } else if (S_ISREG(st.st_mode) && has_jpeg_ext(e->d_name)) {
            paths_add(l, p);
        }
    }
    closedir(d);
}

/* Decodes every JPEG of a shared photo folder with one sample_ctx (so the
 * context is reused across files too) and compares each with djpeg. */
static void check_photos(const char *sub, int recursive, size_t expect)
{
    char dir[4096];
    TU_SHARED_OR_SKIP(dir, sub);
    path_list l = {0};
    collect_jpegs(dir, recursive, &l);
    qsort(l.v, l.n, sizeof *l.v, cmp_str);
    /* A walk that silently finds nothing (or half) must fail. */
    cr_assert_eq(l.n, expect, "%s: %zu JPEG files, expected %zu", dir, l.n,
                 expect);

    decode_limits lim;
    decode_limits_default(&lim);
    sample_ctx ctx;
    cr_assert_eq(sample_init(&ctx, &lim), 0);
    size_t checked = 0;
    for (size_t i = 0; i < l.n; i++) {
        char reason[SAMPLE_REASON_MAX] = "";
        uint8_t *rgb = NULL;
        int w = 0, h = 0;
        const int rc = sample_decode_full(&ctx, AT_FDCWD, l.v[i],
                                          MAX_FILE_BYTES, &rgb, &w, &h, reason);
        cr_assert_eq(rc, 0, "%s: %s (%s)", l.v[i], pl_err_name(rc), reason);
        assert_matches_djpeg(l.v[i], rgb, w, h);
        free(rgb);
        checked++;
    }
    cr_assert_eq(checked, expect);
    sample_fini(&ctx);
    paths_free(&l);
}

/* ---- shared photos: pixels equal djpeg's --------------------------------- */

/* 47 + 58 + 38 = 143 photos in all. */
Test(decode, imagefolder_photos_match_djpeg_exactly)
{
    check_photos("photos/imagefolder", 1, 47);
}

Test(decode, coco_photos_match_djpeg_exactly)
{
    check_photos("photos/coco", 0, 58);
}

Test(decode, mixed_subsampling_photos_match_djpeg_exactly)
{
    check_photos("photos/mixed", 0, 38);
}

/* ---- shared hard/ files -------------------------------------------------- */

/* Grayscale replicated to RGB, CMYK with an Adobe marker converted,
 * arithmetic coding, progressive with restarts, 4:1:0, 4:4:0, 4:4:1,
 * 4:1:1, float-DCT encodes, 1x1 and 2x2 images: all bit-exact with djpeg,
 * through the public pl_image_load. */
Test(decode, hard_variants_match_djpeg_exactly)
{
    char dir[4096];
    TU_SHARED_OR_SKIP(dir, "hard/variants");
    path_list l = {0};
    collect_jpegs(dir, 0, &l);
    qsort(l.v, l.n, sizeof *l.v, cmp_str);
    size_t checked = 0, gray = 0, cmyk = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (strstr(l.v[i], "8x8_420_tables.jpg"))
            continue;
        pl_image img;
        const int rc = pl_image_load(l.v[i], &img);
        cr_assert_eq(rc, 0, "%s: %s (%s)", l.v[i], pl_err_name(rc),
                     pl_last_error());
        cr_assert_not_null(img.pixels);
        assert_matches_djpeg(l.v[i], img.pixels, img.width, img.height);
        gray += strstr(l.v[i], "grayscale") != NULL;
        cmyk += strstr(l.v[i], "cmyk") != NULL;
        pl_image_free(&img);
        cr_assert_null(img.pixels, "pl_image_free zeroes the image");
        cr_assert_eq(img.width, 0);
        checked++;
    }
    cr_assert_eq(checked, 14, "%zu variant files decoded, expected 14",
                 checked);
    cr_assert_eq(gray, 1);
    cr_assert_eq(cmyk, 1);
    paths_free(&l);
}

Test(decode, tables_only_file_is_corrupt_with_no_image)
{
    char path[4096];
    TU_SHARED_OR_SKIP(path, "hard/variants/8x8_420_tables.jpg");
    pl_image img;
    const int rc = pl_image_load(path, &img);
    cr_assert_eq(rc, PL_ECORRUPT, "%s", pl_err_name(rc));
    cr_assert_null(img.pixels);
    cr_assert_not_null(strstr(pl_last_error(), "no image"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), path), "%s", pl_last_error());
}

/* 12-bit sequential and lossless (SOF3) files: libjpeg-turbo 2.1's 8-bit
 * API cannot decode them, so they must be refused as unsupported, never
 * turned into pixels. */
Test(decode, twelve_bit_and_lossless_files_are_unsupported)
{
    static const char *const files[] = {
        "random12_100x91_islow_4x1,2x2,1x2_Q100,99,98_rst2.jpg",
        "random12_99x92_ifast_rgb_420_Q90,80,70_smooth50.jpg",
        "cat-3449999_640_grayscale_12bit.jpg", /* 12-bit lossless */
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char sub[512], path[4096];
        snprintf(sub, sizeof sub, "hard/unsupported/%s", files[i]);
        TU_SHARED_OR_SKIP(path, sub);
        pl_image img;
        const int rc = pl_image_load(path, &img);
        cr_assert_eq(rc, PL_EUNSUPPORTED, "%s: %s (%s)", files[i],
                     pl_err_name(rc), pl_last_error());
        cr_assert_null(img.pixels, "%s: no pixels on failure", files[i]);
        cr_assert_not_null(strstr(pl_last_error(), "Unsupported"), "%s",
                           pl_last_error());
        cr_assert_not_null(strstr(pl_last_error(), path), "%s",
                           pl_last_error());
    }
}

/* The "8bit" file in hard/unsupported is 8-bit *lossless* (SOF3), not a
 * baseline file: libjpeg-turbo 2.1 (and its djpeg) refuse it, 3.x decodes
 * it. Whatever the installed library does, ours must do the same: pixels
 * equal to djpeg's, or PL_EUNSUPPORTED when djpeg refuses. */
Test(decode, eight_bit_lossless_file_follows_the_reference_decoder)
{
    char path[4096];
    TU_SHARED_OR_SKIP(path,
                      "hard/unsupported/cat-3449999_640_grayscale_8bit.jpg");
    int rw, rh;
    uint8_t *ref = tu_djpeg(path, &rw, &rh);
    pl_image img;
    const int rc = pl_image_load(path, &img);
    if (ref) {
        cr_assert_eq(rc, 0, "%s (%s)", pl_err_name(rc), pl_last_error());
        assert_matches_djpeg(path, img.pixels, img.width, img.height);
    } else {
        cr_assert_eq(rc, PL_EUNSUPPORTED, "%s (%s)", pl_err_name(rc),
                     pl_last_error());
        cr_assert_null(img.pixels);
        cr_assert_not_null(strstr(pl_last_error(), "SOF type 0xc3"), "%s",
                           pl_last_error());
    }
    free(ref);
    pl_image_free(&img);
}

/* Of hard/notjpeg's files, png.jpeg is a PNG named .jpeg: the bytes decide,
 * so it decodes; the others are named for what they are. */
Test(decode, non_jpeg_files_are_named_for_what_they_are)
{
    static const struct {
        const char *file, *what;
    } cases[] = {
        {"bmp.jpeg", "(BMP data)"}, {"empty.jpg", "(empty)"},
        {"pbm.jpeg", "(PBM data)"}, {"pgm.jpeg", "(PGM data)"},
        {"pnm.jpeg", "(PPM data)"}, /* P6 */
        {"ppm.jpeg", "(PPM data)"}, {"tiff.jpeg", "(TIFF data)"},
    };
    char dir[4096];
    TU_SHARED_OR_SKIP(dir, "hard/notjpeg");
    path_list l = {0};
    collect_jpegs(dir, 0, &l);
    const size_t n = sizeof cases / sizeof cases[0];
    cr_assert_eq(l.n, n + 1, "%zu files in hard/notjpeg, expected %zu", l.n,
                 n + 1);
    paths_free(&l);
    char png[4200];
    snprintf(png, sizeof png, "%s/png.jpeg", dir);
    pl_image im;
    cr_assert_eq(pl_image_load(png, &im), 0, "%s", pl_last_error());
    cr_assert(im.width > 0 && im.height > 0 && im.pixels);
    pl_image_free(&im);
    for (size_t i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, cases[i].file);
        pl_image img;
        const int rc = pl_image_load(path, &img);
        cr_assert_eq(rc, PL_ENOTIMAGE, "%s: %s (%s)", cases[i].file,
                     pl_err_name(rc), pl_last_error());
        cr_assert_null(img.pixels);
        char want[128];
        snprintf(want, sizeof want, "not an image pinload reads %s",
                 cases[i].what);
        cr_assert_not_null(strstr(pl_last_error(), want), "%s: \"%s\"",
                           cases[i].file, pl_last_error());
        cr_assert_not_null(strstr(pl_last_error(), path), "%s",
                           pl_last_error());
    }
}

/* ---- not-JPEG detection on generated bytes (no shared data needed) ------- */

Test(decode, non_jpeg_buffers_are_named_or_shown_in_hex)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *reason;
    } cases[] = {
        {"GIF89a....", 10, "not an image pinload reads (GIF data)"},
        {"RIFF\0\0\0\0AVI ", 12, "not an image pinload reads (RIFF data)"},
        {"MM\0*\0\0\0\x08", 8, "not an image pinload reads (TIFF data)"},
        {"P3\n1 1\n255\n", 11, "not an image pinload reads (PPM data)"},
        {"P1\n1 1\n", 7, "not an image pinload reads (PBM data)"},
        {"\x00\x01\x02\x03\x04", 5,
         "not an image pinload reads (starts with 00 01 02 03)"},
        {"\xff", 1, "not an image pinload reads (starts with ff)"},
        {"\xff\xd9", 2, "not an image pinload reads (starts with ff d9)"},
        {"", 0, "not an image pinload reads (empty)"},
    };
    decoder *d;
    default_decoder(&d);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char reason[DECODE_REASON_MAX] = "";
        decode_info info;
        const int rc = decoder_open(d, (const uint8_t *)cases[i].bytes,
                                    cases[i].len, &info, reason);
        cr_assert_eq(rc, PL_ENOTIMAGE, "case %zu: %s", i, pl_err_name(rc));
        cr_assert_str_eq(reason, cases[i].reason, "case %zu", i);
        cr_assert_eq(decoder_is_open(d), 0, "nothing is left open");
    }
    decoder_destroy(d);
}

/* ---- cropped decodes ----------------------------------------------------- */

/* The photo at path decoded at 1/denom: whole rows, or only columns
 * [x0, x0 + w) as the workers ask (libjpeg's jpeg_crop_scanline); *xoff and
 * *width say what the rows hold. */
static uint8_t *decode_scaled(decoder *d, const uint8_t *buf, size_t len,
                              int denom, int x0, int w, int *xoff, int *width,
                              int *height)
{
    char reason[DECODE_REASON_MAX];
    decode_info info;
    cr_assert_eq(decoder_open(d, buf, len, &info, reason), 0, "%s", reason);
    int sw, sh;
    decoder_scaled_size(d, denom, &sw, &sh);
    if (w <= 0)
        w = sw - x0;
    cr_assert_eq(decoder_start(d, denom, x0, w, reason), 0, "%s", reason);
    *xoff = decoder_xoff(d);
    *width = decoder_width(d);
    *height = decoder_height(d);
    const size_t stride = (size_t)*width * 3;
    uint8_t *out = malloc(stride * (size_t)*height);
    cr_assert_not_null(out);
    cr_assert_eq(decoder_read_into(d, out, stride, *height, reason), 0, "%s",
                 reason);
    decoder_close(d);
    return out;
}

/* Every photo of the mixed set (every chroma subsampling: 4:1:1, 4:1:0,
 * 2x4, 4:4:0...), decoded at 1/2 with the right half of its columns cropped
 * as a worker crops, equals the whole-width decode's columns away from the
 * crop's left edge (fancy upsampling treats it as an image edge: the
 * workers decode CROP_MARGIN columns beyond what they read). libjpeg-turbo
 * 2.1's jpeg_crop_scanline gave uninitialised columns for sampling factors
 * above 2 (4:1:0, 2x4): the output then depended on the heap, and so on the
 * worker count. */
Test(decode, cropped_decodes_equal_the_whole_decode_for_every_subsampling)
{
    char dir[4096];
    TU_SHARED_OR_SKIP(dir, "photos/mixed");
    path_list l = {0};
    collect_jpegs(dir, 0, &l);
    cr_assert_eq(l.n, 38);
    decode_limits lim;
    decode_limits_default(&lim);
    decoder *d;
    cr_assert_eq(decoder_create(&d, &lim), 0);
    for (size_t i = 0; i < l.n; i++) {
        size_t len;
        uint8_t *buf = tu_read_file(l.v[i], &len);
        int fx, fw, fh, cx, cw, ch;
        uint8_t *full = decode_scaled(d, buf, len, 2, 0, 0, &fx, &fw, &fh);
        const int x0 = fw / 2;
        uint8_t *crop = decode_scaled(d, buf, len, 2, x0, fw - x0, &cx, &cw,
                                      &ch);
        cr_assert_eq(ch, fh);
        cr_assert_leq(cx, x0, "%s", l.v[i]);
        cr_assert_eq(cx + cw, fw, "%s: the crop reaches the right edge",
                     l.v[i]);
        for (int y = 0; y < fh; y++)
            for (int x = x0 + 8; x < fw; x++)
                for (int c = 0; c < 3; c++) {
                    const int a = full[((size_t)y * fw + x) * 3 + c];
                    const int b = crop[((size_t)y * cw + (x - cx)) * 3 + c];
                    cr_assert_eq(a, b, "%s: pixel (%d, %d) channel %d: %d "
                                       "cropped, %d whole",
                                 l.v[i], x, y, c, b, a);
                }
        free(full);
        free(crop);
        free(buf);
    }
    decoder_destroy(d);
    paths_free(&l);
}
