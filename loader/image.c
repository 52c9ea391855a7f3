/* pl_image_load and pl_image_decode: the loader's own decoder on one file
 * or buffer, at full size. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/defaults.h"
#include "../workers/sample.h"
#include "abi.h"
#include "../common/error.h"

/* Decode a file (path) or a buffer (buf, len) at full size into the
 * caller's pl_image of `size` bytes. */
static int decode(const char *fn, const char *path, const void *buf, size_t len,
                  pl_image *caller, size_t size)
{
    if ((!path && !buf) || !caller)
        return err_set(PL_EINVAL, "%s: NULL argument", fn);
    int rc = abi_check(fn, "pl_image", size, ABI_MIN_IMAGE);
    if (rc < 0)
        return rc;
    pl_image ours = {0}, *img = &ours;
    abi_copy_out(caller, size, &ours, sizeof ours);
    decode_limits lim;
    decode_limits_default(&lim);
    sample_ctx ctx;
    rc = sample_init(&ctx, &lim);
    if (rc < 0)
        return err_set(rc, "%s: out of memory", fn);
    char reason[SAMPLE_REASON_MAX];
    rc = path ? sample_decode_full(&ctx, AT_FDCWD, path, DEFAULT_MAX_FILE_BYTES,
                                   &img->pixels, &img->width, &img->height,
                                   reason)
              : sample_decode_buffer(&ctx, buf, len, &img->pixels, &img->width,
                                     &img->height, reason);
    sample_fini(&ctx);
    if (rc < 0)
        return path ? err_set(rc, "%s: %s: %s", fn, path, reason)
                    : err_set(rc, "%s: %s", fn, reason);
    abi_copy_out(caller, size, &ours, sizeof ours);
    return 0;
}

PL_EXPORT int pl_image_load_sized(const char *path, pl_image *caller,
                                  size_t size)
{
    if (!path)
        return err_set(PL_EINVAL, "pl_image_load: NULL argument");
    return decode("pl_image_load", path, NULL, 0, caller, size);
}

PL_EXPORT int pl_image_decode_sized(const void *buf, size_t len,
                                    pl_image *caller, size_t size)
{
    /* An empty file's bytes may come as NULL (pl_loader_read_sample with
     * no buffer yet): empty, as the decoder says, not a NULL argument. */
    static const uint8_t empty[1];
    if (!buf && len == 0)
        buf = empty;
    if (!buf)
        return err_set(PL_EINVAL, "pl_image_decode: NULL argument");
    return decode("pl_image_decode", NULL, buf, len, caller, size);
}

PL_EXPORT void pl_image_free(pl_image *img)
{
    if (!img)
        return;
    free(img->pixels);
    /* Only the fields every version has: the caller's struct may be an
     * older, smaller one. */
    img->pixels = NULL;
    img->width = img->height = 0;
}
