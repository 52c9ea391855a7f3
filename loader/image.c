/* pl_image_load: the loader's own decoder on one file, at full size. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/defaults.h"
#include "../workers/process.h"
#include "error.h"

PL_EXPORT int pl_image_load(const char *path, pl_image *img)
{
    if (!path || !img)
        return err_set(PL_EINVAL, "pl_image_load: NULL argument");
    memset(img, 0, sizeof *img);
    decode_limits lim;
    decode_limits_default(&lim);
    process_ctx ctx;
    int rc = process_init(&ctx, &lim);
    if (rc < 0)
        return err_set(rc, "pl_image_load: out of memory");
    char reason[PROCESS_REASON_MAX];
    rc = process_decode_full(&ctx, AT_FDCWD, path, DEFAULT_MAX_FILE_BYTES,
                             &img->pixels, &img->width, &img->height, reason);
    process_fini(&ctx);
    if (rc < 0)
        return err_set(rc, "pl_image_load: %s: %s", path, reason);
    return 0;
}

PL_EXPORT void pl_image_free(pl_image *img)
{
    if (!img)
        return;
    free(img->pixels);
    memset(img, 0, sizeof *img);
}
