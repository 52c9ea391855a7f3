/* pl_transform_check, pl_transform_params and pl_transform_image: a
 * loader's transform (config.transform, or config.augment's preset) on one
 * image, without a loader: what a spec parses to, what it draws for a
 * sample, and the sample it makes from pixels already decoded (the
 * reference tests' way in, python/tests/test_transforms_ref.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../workers/sample.h"
#include "abi.h"
#include "config.h"

/* The caller's config of `size` bytes checked as create checks its output
 * fields, into the augmentation parameters a loader's workers would get
 * (format as delivered, normalised on the host). */
static int settle(const char *fn, const pl_config *cfg, size_t size,
                  augment_params *p)
{
    if (!cfg)
        return err_set(PL_EINVAL, "%s: config is NULL", fn);
    int rc = abi_check(fn, "pl_config", size, ABI_MIN_CONFIG);
    if (rc < 0)
        return rc;
    pl_config c;
    abi_copy_out(&c, sizeof c, cfg, size < sizeof c ? size : sizeof c);
    int has = 0;
    if ((rc = config_output(&c, &has, &p->ops)) < 0) {
        /* config.c names pl_loader_create; this is fn. */
        const char *why = pl_last_error();
        const char *tail =
            strncmp(why, "pl_loader_create: ", 18) == 0 ? why + 18 : why;
        char detail[1024];
        snprintf(detail, sizeof detail, "%s", tail);
        return err_set(rc, "%s: %s", fn, detail);
    }
    ops_pipeline *ops = has ? malloc(sizeof *ops) : NULL;
    if (has && !ops)
        return err_set(PL_ENOMEM, "%s: out of memory", fn);
    if (ops)
        *ops = p->ops;
    augment_params_init(p, c.augment, c.format, c.width, c.height, c.seed,
                        c.mean, c.std);
    p->channels_last = c.channels_last && c.format != PL_FORMAT_U8_NHWC;
    p->sample_fn = c.sample_fn;
    p->sample_ctx = c.sample_ctx;
    if (ops)
        augment_params_set_ops(p, ops, c.format);
    free(ops);
    /* A batch op draws for config.rank's batches (0 where unset). */
    p->ops.rank = c.rank > 0 ? c.rank : 0;
    return 0;
}

PL_EXPORT int pl_transform_check_sized(const pl_config *cfg, size_t size,
                                       char *canonical, size_t cap)
{
    static const char fn[] = "pl_transform_check";
    augment_params *p = malloc(sizeof *p);
    if (!p)
        return err_set(PL_ENOMEM, "%s: out of memory", fn);
    const int rc = settle(fn, cfg, size, p);
    if (rc == 0 && canonical && cap)
        ops_format(&p->ops, canonical, cap);
    free(p);
    return rc;
}

PL_EXPORT int pl_transform_params_sized(const pl_config *cfg, size_t size,
                                        int32_t img_w, int32_t img_h,
                                        int64_t epoch, int64_t index, char *buf,
                                        size_t cap, size_t *len)
{
    static const char fn[] = "pl_transform_params";
    if (len)
        *len = 0;
    if (img_w < 1 || img_h < 1 || img_w > 65535 || img_h > 65535)
        return err_set(PL_EINVAL,
                       "%s: image size %d x %d is outside 1 .. "
                       "65535",
                       fn, (int)img_w, (int)img_h);
    if (!buf && cap)
        return err_set(PL_EINVAL, "%s: buf is NULL", fn);
    augment_params *p = malloc(sizeof *p);
    if (!p)
        return err_set(PL_ENOMEM, "%s: out of memory", fn);
    int rc = settle(fn, cfg, size, p);
    if (rc == 0) {
        const int n = ops_describe(&p->ops, p->seed, epoch, index, img_w, img_h,
                                   buf, cap);
        if (len)
            *len = (size_t)n;
        if ((size_t)n >= cap)
            rc = err_set(PL_EINVAL, "%s: %d bytes are needed, buf has %zu", fn,
                         n + 1, cap);
    }
    free(p);
    return rc;
}

PL_EXPORT int pl_transform_image_sized(const pl_config *cfg, size_t size,
                                       const uint8_t *rgb, int32_t img_w,
                                       int32_t img_h, int64_t epoch,
                                       int64_t index, void *out,
                                       size_t out_bytes)
{
    static const char fn[] = "pl_transform_image";
    if (!rgb || !out)
        return err_set(PL_EINVAL, "%s: NULL argument", fn);
    if (img_w < 1 || img_h < 1 || img_w > 65535 || img_h > 65535)
        return err_set(PL_EINVAL,
                       "%s: image size %d x %d is outside 1 .. "
                       "65535",
                       fn, (int)img_w, (int)img_h);
    augment_params *p = malloc(sizeof *p);
    if (!p)
        return err_set(PL_ENOMEM, "%s: out of memory", fn);
    sample_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    char reason[SAMPLE_REASON_MAX];
    int rc = settle(fn, cfg, size, p);
    if (rc == 0 && out_bytes != augment_sample_bytes(p))
        rc = err_set(PL_EINVAL,
                     "%s: out_bytes is %zu; a sample of this "
                     "config is %zu",
                     fn, out_bytes, augment_sample_bytes(p));
    /* The resampler alone: no decoder is needed. */
    if (rc == 0 &&
        (rc = sample_transform_pixels(&ctx, p, rgb, img_w, img_h, epoch, index,
                                      out, reason)) < 0)
        rc = err_set(rc, "%s: %s", fn, reason);
    sample_fini(&ctx);
    free(p);
    return rc;
}
