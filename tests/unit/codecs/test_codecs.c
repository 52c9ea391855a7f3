/* The table of formats (codecs/codec.c): every row whole and told apart
 * from the others, the lookups by signature and by extension, the words
 * that name the formats, and the checks the rows share. The rows' decoding
 * is tested through the decoder (tests/unit/workers/test_decode*.c). */
#include <ctype.h>

#include "../codecs/codec.h"
#include "pinload.h"
#include "testutil.h"

Test(codecs, every_row_is_whole_and_its_own)
{
    cr_assert_eq(CODEC_COUNT, 3);
    cr_assert_eq(codecs[0], &codec_jpeg, "JPEG's signature is tried first");
    cr_assert_eq(codecs[1], &codec_png);
    cr_assert_eq(codecs[2], &codec_webp);
    for (int i = 0; i < CODEC_COUNT; i++) {
        const codec *c = codecs[i];
        cr_assert(c->name && c->extensions && c->extensions[0], "row %d", i);
        cr_assert(c->sniff && c->create && c->destroy && c->open && c->start &&
                      c->skip_to && c->read_into && c->row && c->close,
                  "%s: an operation is missing", c->name);
        for (const char *const *e = c->extensions; *e; e++) {
            cr_assert(**e, "%s: an empty extension", c->name);
            for (const char *p = *e; *p; p++)
                cr_assert(islower((unsigned char)*p) || isdigit(*p),
                          "%s: \"%s\" is not lower case, without a dot",
                          c->name, *e);
            cr_assert_eq(codec_for_extension(*e), c,
                         "%s: .%s is another row's too", c->name, *e);
            cr_assert_lt(codec_unread_index(*e), 0,
                         "%s: .%s is also listed as not read", c->name, *e);
        }
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(c->name, codecs[j]->name);
    }
}

/* Each row's state: made, closed with no image open, freed; NULL freed. */
Test(codecs, a_rows_state_is_safe_with_no_image_open)
{
    for (int i = 0; i < CODEC_COUNT; i++) {
        void *st = NULL;
        cr_assert_eq(codecs[i]->create(&st), 0, "%s", codecs[i]->name);
        cr_assert_not_null(st);
        codecs[i]->close(st);
        codecs[i]->close(st);
        codecs[i]->destroy(st);
        codecs[i]->destroy(NULL);
    }
}

Test(codecs, signatures_pick_their_rows_and_nothing_else)
{
    static const struct {
        const char *bytes;
        size_t len;
        const codec *want;
    } cases[] = {
        {"\xff\xd8", 2, &codec_jpeg},
        {"\xff\xd8\xff\xe0", 4, &codec_jpeg},
        {"\x89PNG\r\n\x1a\n", 8, &codec_png},
        {"RIFF\0\0\0\0WEBPVP8 ", 16, &codec_webp},
        {"\xff", 1, NULL},
        {"\x89PNG\r\n\x1a", 7, NULL},   /* cut short */
        {"\x89PNG\n\x1a\n\0", 8, NULL}, /* a text-mode copy */
        {"RIFF\0\0\0\0AVI ", 12, NULL},
        {"RIFF\0\0\0\0WEB", 11, NULL},
        {"GIF89a", 6, NULL},
        {"", 0, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        cr_assert_eq(
            codec_for_bytes((const uint8_t *)cases[k].bytes, cases[k].len),
            cases[k].want, "case %zu", k);
}

/* Bytes no row takes: a format's damaged signature is that format's bad
 * file; anything else is named for what it seems to be. */
Test(codecs, bytes_no_row_takes_are_named)
{
    static const struct {
        const char *bytes;
        size_t len;
        int code;
        const char *reason;
    } cases[] = {
        {"GIF89a", 6, PL_ENOTIMAGE, "not an image pinload reads (GIF data)"},
        {"BM\0\0", 4, PL_ENOTIMAGE, "not an image pinload reads (BMP data)"},
        {"RIFF\0\0\0\0AVI ", 12, PL_ENOTIMAGE,
         "not an image pinload reads (RIFF data)"},
        {"\x01\x02\x03\x04\x05", 5, PL_ENOTIMAGE,
         "not an image pinload reads (starts with 01 02 03 04)"},
        {"", 0, PL_ENOTIMAGE, "not an image pinload reads (empty)"},
        {"\x89PNG\r\n", 6, PL_ECORRUPT,
         "PNG: truncated in its signature (6 bytes)"},
        {"\x89PNG\n\x1a\n\0", 8, PL_ECORRUPT,
         "PNG: damaged signature (89 50 4e 47 0a 1a 0a 00 where 89 50 4e 47 "
         "0d 0a 1a 0a belongs: a text-mode copy?)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char reason[DECODE_REASON_MAX] = "";
        cr_assert_eq(
            codec_refuse((const uint8_t *)cases[k].bytes, cases[k].len, reason),
            cases[k].code, "case %zu", k);
        cr_assert_str_eq(reason, cases[k].reason, "case %zu", k);
    }
}

Test(codecs, extensions_name_their_rows_in_any_case)
{
    cr_assert_eq(codec_for_extension("jpg"), &codec_jpeg);
    cr_assert_eq(codec_for_extension("JPEG"), &codec_jpeg);
    cr_assert_eq(codec_for_extension("PnG"), &codec_png);
    cr_assert_eq(codec_for_extension("webp"), &codec_webp);
    cr_assert_null(codec_for_extension(""));
    cr_assert_null(codec_for_extension(".jpg"));
    cr_assert_null(codec_for_extension("gif"));
    cr_assert_null(codec_for_extension("jp"));
    /* The name's extension is after its last dot. */
    cr_assert(codec_is_image_name("train/cat/7.JPG"));
    cr_assert(codec_is_image_name("a.tar.webp"));
    cr_assert(codec_is_image_name(".png"));
    cr_assert(!codec_is_image_name("x.jpg.txt"));
    cr_assert(!codec_is_image_name("jpg"));
    cr_assert(!codec_is_image_name("x.tif"));
    /* torchvision's other extensions: counted and named, not read. */
    cr_assert_eq(codec_unread_index("bmp"), 0);
    cr_assert_eq(codec_unread_index("TIFF"), 4);
    cr_assert_eq(codec_unread_index("gif"), -1);
    cr_assert_eq(codec_extension_kind("Jpeg"), 1);
    cr_assert_eq(codec_extension_kind("ppm"), -1);
    cr_assert_eq(codec_extension_kind("cls"), 0);
    cr_assert_eq(codec_extension_kind(""), 0);
}

Test(codecs, words_name_the_formats_from_the_table)
{
    char buf[64];
    cr_assert_eq(codec_words(buf, sizeof buf, CODEC_NAMES, " and "), 18);
    cr_assert_str_eq(buf, "JPEG, PNG and WebP");
    codec_words(buf, sizeof buf, CODEC_NAMES, " or ");
    cr_assert_str_eq(buf, "JPEG, PNG or WebP");
    codec_words(buf, sizeof buf, CODEC_EXTENSIONS, " or ");
    cr_assert_str_eq(buf, "jpg, jpeg, png or webp");
    codec_words(buf, sizeof buf, CODEC_UNREAD, ", ");
    cr_assert_str_eq(buf, "bmp, pgm, ppm, tif, tiff");
    /* Cut to the buffer, the whole length returned. */
    char small[8];
    cr_assert_eq(codec_words(small, sizeof small, CODEC_NAMES, " and "), 18);
    cr_assert_str_eq(small, "JPEG, P");
    cr_assert_eq(codec_words(NULL, 0, CODEC_EXTENSIONS, " or "), 22);
}

Test(codecs, the_shared_checks_name_the_limit)
{
    decode_limits lim;
    decode_limits_default(&lim);
    lim.max_width = 300;
    lim.max_height = 200;
    lim.max_pixels = 60000;
    char reason[DECODE_REASON_MAX] = "";
    cr_assert_eq(codec_check_size(300, 200, &lim, reason), 0);
    cr_assert_eq(codec_check_size(301, 10, &lim, reason), PL_ELIMIT);
    cr_assert_str_eq(reason,
                     "301x10 exceeds the limits (max 300x200, 60000 pixels)");
    cr_assert_eq(codec_check_size(10, 201, &lim, reason), PL_ELIMIT);
    lim.max_pixels = 59999;
    cr_assert_eq(codec_check_size(300, 200, &lim, reason), PL_ELIMIT);
    cr_assert_eq(codec_over_time(reason, 7), PL_ELIMIT);
    cr_assert_str_eq(reason, "decoding took longer than the limit of 7 ms");
    cr_assert_eq(decode_over_budget(reason, "64x48 PNG", (3 << 20) + 1,
                                    " to decode", 2 << 20),
                 PL_ELIMIT);
    cr_assert_str_eq(reason, "64x48 PNG needs 4 MiB to decode, over the "
                             "decode memory budget of 2 MiB "
                             "(config.max_decode_memory)");
    cr_assert_eq(codec_check_full_size(1, 0, 64, 64, 48, reason), 0);
    cr_assert_eq(codec_check_full_size(1, 10, 54, 64, 48, reason), 0);
    cr_assert_eq(codec_check_full_size(2, 0, 32, 64, 48, reason), PL_EINVAL);
    cr_assert_str_eq(reason,
                     "cannot decode columns 0..32 at 1/2 of a 64x48 image");
    cr_assert_eq(codec_check_full_size(1, 10, 55, 64, 48, reason), PL_EINVAL);
    cr_assert_eq(codec_check_full_size(1, -1, 8, 64, 48, reason), PL_EINVAL);
    cr_assert_eq(codec_check_full_size(1, 0, 0, 64, 48, reason), PL_EINVAL);
}
