/* The augment suites' parameters (tests/unit/workers/test_augment*.c):
 * ImageNet's mean and std, as pl_config_default has them. */
#ifndef PINLOAD_TESTAUGMENT_H
#define PINLOAD_TESTAUGMENT_H

#include "../workers/augment.h"

static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f};
static const float imagenet_std[3] = {0.229f, 0.224f, 0.225f};

static inline void params(augment_params *p, pl_augment mode, pl_format format,
                          int w, int h, uint64_t seed)
{
    augment_params_init(p, mode, format, w, h, seed, imagenet_mean,
                        imagenet_std);
}

#endif
