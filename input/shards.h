/* Datasets as tar shards in the WebDataset layout (input/shards.c):
 * config.data names one .tar, a folder of *.tar (and no sub-folder), a
 * brace pattern ("train-{000000..000146}.tar") or a list file whose lines
 * are shard paths. Shards are taken in sorted order, members in file order;
 * consecutive members with one key (the path up to the first dot of its
 * last component) make one sample: the image is its jpg/jpeg member, the
 * label its cls member (decimal text), 0 without one. */
#ifndef PINLOAD_SHARDS_H
#define PINLOAD_SHARDS_H

#include "dataset.h"
#include "../common/log.h"

/* Whether `path` names shards: 1 with [out] their paths (*paths, *n: the
 * caller frees each and the array), 0 if not, or an error. */
int shards_detect(const char *path, char ***paths, int *n);

/* Index the shards and add their samples to ds (whose root is "."). */
int shards_open(dataset *ds, char **paths, int n, logger *lg);

#endif
