/* normalize (this file is normalize_op.c: device/normalize.cu is the GPU's
 * kernel): uint8 to float as torchvision.transforms.v2's
 * ToDtype(torch.float32, scale=True) then Normalize(mean, std):
 * (v / 255 - mean) / std per channel, through the table every float
 * format and the GPU's kernel are written with (workers/augment.h), so it
 * runs no code per sample. Without it a float format is normalised with
 * config.mean and config.std, as before pipelines. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "op.h"

enum { MEAN, STD, NPARAMS };

static const op_param params[NPARAMS] = {
    [MEAN] = {"mean", OP_TRIPLE, NULL, -1e6, 1e6, 0, NULL,
              "per channel, R:G:B; default config.mean"},
    [STD] = {"std", OP_TRIPLE, NULL, 0, 1e6, 1, NULL,
             "per channel, R:G:B; default config.std"},
};

static int setup(op_instance *op, const op_setup *s, char *why, size_t cap)
{
    if (s->format == PL_FORMAT_U8_NHWC)
        return snprintf(why, cap,
                        "config.format is u8, which holds no normalised "
                        "values: use f32, f16 or bf16, or drop normalize"),
               PL_EINVAL;
    for (int c = 0; c < 3; c++) {
        if (!op->arg[MEAN].n)
            op->arg[MEAN].v[c] = s->mean[c];
        if (!op->arg[STD].n)
            op->arg[STD].v[c] = s->std[c];
    }
    op->arg[MEAN].n = op->arg[STD].n = 3;
    /* As config.c checks config.mean and config.std: every value must be
     * a finite number of the format (float16 stops at 65504). */
    const double top = s->format == PL_FORMAT_F16_NCHW ? 65504.0 : FLT_MAX;
    for (int c = 0; c < 3; c++) {
        const double m = (float)op->arg[MEAN].v[c];
        const double sd = (float)op->arg[STD].v[c];
        const double far = fabs(m) > fabs(1.0 - m) ? fabs(m) : fabs(1.0 - m);
        if (!(sd > 0.0))
            return snprintf(why, cap, "std: channel %d is 0 as a float", c),
                   PL_EINVAL;
        if (far / sd > top)
            return snprintf(why, cap,
                            "std: channel %d (%g) with mean %g gives values "
                            "up to %g, beyond what the format holds (%g)",
                            c, sd, m, far / sd, top),
                   PL_EINVAL;
    }
    return 0;
}

const op_kind op_normalize = {
    .name = "normalize",
    .alias = NULL,
    .stage = OP_STAGE_NORMALIZE,
    .doc = "to float: ToDtype(float32, scale=True) + Normalize(mean, std)",
    .params = params,
    .nparams = NPARAMS,
    .setup = setup,
};
