/* The readers: each adds one kind of data's samples and classes to a
 * catalog, in the order it defines, and names what it cannot read.
 * input.c's dispatcher picks one for config.data. Errors set pl_last_error
 * ("pl_loader_create: <path>: <why>") and return PL_E*; notices (files
 * ignored, link loops) go to lg. */
#ifndef PINLOAD_READERS_H
#define PINLOAD_READERS_H

#include "../catalog/catalog.h"
#include "../common/log.h"

/* An ImageFolder tree, or a flat folder of images (one class named after
 * it): folder.c. Files named with an extension of the table of formats
 * (.jpg, .jpeg, .png, .webp) are samples; the other kinds torchvision's
 * ImageFolder reads are named in a notice. */
int folder_read(catalog *c, const char *dir, logger *lg);

/* A list file of "path label" lines, paths relative to its folder:
 * list.c. */
int list_read(catalog *c, const char *path);

/* Tar shards in the WebDataset layout (shards.c): whether `path` names
 * shards (one .tar, or a file that is a tar by its bytes, tar_is_archive;
 * a folder of *.tar and no sub-folder, a brace pattern
 * "train-{000000..000146}.tar", or a list file whose lines are shard
 * paths): 1 with [out] their paths (*paths, *n: the caller frees each and
 * the array), 0 if not, or an error. */
int shards_detect(const char *path, char ***paths, int *n);

/* Index the shards and add their samples: shards in sorted order, members
 * in file order; consecutive members with one key (the path up to the
 * first dot of its last component) make one sample, its image the jpg,
 * jpeg, png or webp member (other image members are named in a notice),
 * its label the cls member (decimal text), 0 without one. */
int shards_read(catalog *c, char **paths, int n, logger *lg);

#endif
