/* pl_image_load (loader/image.c): one file decoded at full size through
 * the public API, leniently, and its errors (a missing file, a directory,
 * NULL arguments). Its pixels on every generated kind are checked with the
 * decoder's in tests/unit/workers/test_decode.c. */
#include "pinload.h"
#include "testdecode.h"
#include "testutil.h"

Test(decode, pl_image_load_decodes_a_truncated_file_leniently)
{
    char dir[64], path[256];
    tu_tmpdir(dir);
    size_t len;
    uint8_t *buf =
        make_jpeg(dir, "t.jpg", 120, 90, 4, NULL, &len, path, sizeof path);
    tu_write_file(path, buf, len * 6 / 10);
    pl_image img;
    cr_assert_eq(pl_image_load(path, &img), 0, "%s", pl_last_error());
    cr_assert(img.width == 120 && img.height == 90);
    /* The same pixels as djpeg, which also decodes it with a warning. */
    int w, h;
    uint8_t *want = tu_djpeg_ex(path, &w, &h, 1);
    cr_assert_not_null(want, "djpeg failed on the truncated file");
    cr_assert(w == 120 && h == 90);
    cr_assert_arr_eq(img.pixels, want, (size_t)w * h * 3);
    free(want);
    pl_image_free(&img);
    free(buf);
    tu_rm_rf(dir);
}

/* ---- pl_image_load errors ------------------------------------------------ */

Test(decode, pl_image_load_of_a_missing_file_is_an_io_error_naming_the_path)
{
    const char *path = "/nonexistent-pinload-dir/no such.jpg";
    pl_image img = {.width = 5, .height = 5, .pixels = (uint8_t *)&img};
    const int rc = pl_image_load(path, &img);
    cr_assert_eq(rc, PL_EIO, "%s", pl_err_name(rc));
    cr_assert_not_null(strstr(pl_last_error(), path), "%s", pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "pl_image_load"), "%s",
                       pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "No such file"), "%s",
                       pl_last_error());
    cr_assert_null(img.pixels, "the image is zeroed on failure");
    cr_assert_eq(img.width, 0);
    cr_assert_eq(img.height, 0);
}

Test(decode, pl_image_load_of_a_directory_is_an_io_error)
{
    char dir[64];
    tu_tmpdir(dir);
    pl_image img;
    cr_assert_eq(pl_image_load(dir, &img), PL_EIO);
    cr_assert_not_null(strstr(pl_last_error(), "a directory"), "%s",
                       pl_last_error());
    tu_rm_rf(dir);
}

Test(decode, pl_image_load_rejects_null_arguments)
{
    pl_image img;
    cr_assert_eq(pl_image_load(NULL, &img), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "NULL"), "%s", pl_last_error());
    cr_assert_eq(pl_image_load("x.jpg", NULL), PL_EINVAL);
    pl_image_free(NULL); /* no-op */
    pl_image zero = {0};
    pl_image_free(&zero);
    cr_assert_null(zero.pixels);
}

/* An empty file is empty, however its bytes arrive: pl_loader_read_sample
 * gives an empty sample as len 0 and, with no buffer yet, NULL; that was
 * "pl_image_decode: NULL argument" (PL_EINVAL). NULL with bytes to read is
 * still a NULL argument. */
Test(decode, pl_image_decode_of_no_bytes_says_empty)
{
    pl_image img = {.width = 5};
    static const uint8_t none[1];
    const void *bufs[] = {NULL, none};
    for (int i = 0; i < 2; i++) {
        const int rc = pl_image_decode(bufs[i], 0, &img);
        cr_assert_eq(rc, PL_ENOTIMAGE, "%s: %s", pl_err_name(rc),
                     pl_last_error());
        cr_assert_str_eq(pl_last_error(),
                         "pl_image_decode: not an image pinload reads (empty)");
        cr_assert_null(img.pixels);
    }
    cr_assert_eq(pl_image_decode(NULL, 5, &img), PL_EINVAL);
    cr_assert_str_eq(pl_last_error(), "pl_image_decode: NULL argument");
    char dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/empty.jpg", dir);
    tu_write_file(path, "", 0);
    cr_assert_eq(pl_image_load(path, &img), PL_ENOTIMAGE);
    cr_assert_not_null(
        strstr(pl_last_error(), "not an image pinload reads (empty)"), "%s",
        pl_last_error());
    tu_rm_rf(dir);
}
