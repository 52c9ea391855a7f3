/* pl_image_load: the loader's own decoder on one file, at full size. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/defaults.h"
#include "../workers/process.h"
#include "abi.h"
#include "error.h"

PL_EXPORT int pl_image_load_sized(const char *path, pl_image *caller,
                                  size_t size)
{
    if (!path || !caller)
        return err_set(PL_EINVAL, "pl_image_load: NULL argument");
    int rc = abi_check("pl_image_load", "pl_image", size, ABI_MIN_IMAGE);
    if (rc < 0)
        return rc;
    pl_image ours = {0}, *img = &ours;
    abi_copy_out(caller, size, &ours, sizeof ours);
    decode_limits lim;
    decode_limits_default(&lim);
    process_ctx ctx;
    rc = process_init(&ctx, &lim);
    if (rc < 0)
        return err_set(rc, "pl_image_load: out of memory");
    char reason[PROCESS_REASON_MAX];
    rc = process_decode_full(&ctx, AT_FDCWD, path, DEFAULT_MAX_FILE_BYTES,
                             &img->pixels, &img->width, &img->height, reason);
    process_fini(&ctx);
    if (rc < 0)
        return err_set(rc, "pl_image_load: %s: %s", path, reason);
    abi_copy_out(caller, size, &ours, sizeof ours);
    return 0;
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
