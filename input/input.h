/* Where samples come from: config.data read into a catalog (catalog.h),
 * by the reader that kind of data needs. The loader's one entry into
 * input/; the catalog is what it reads after. */
#ifndef PINLOAD_INPUT_H
#define PINLOAD_INPUT_H

#include "../catalog/catalog.h"
#include "../common/log.h"
#include "../remote/remote.h"

/* Read `data` into c (catalog_init'ed, its extras set): remote shards (http(s)://,
 * s3://, pipe: URLs, a pattern or a list of them, read through the cache
 * `remote` says), tar shards (a .tar, a folder of
 * them, a brace pattern, a list of shard paths), else a folder (ImageFolder
 * tree or flat), else a list file of "path label" lines. Sets
 * pl_last_error and returns PL_ENODATA when nothing is found, PL_EIO /
 * PL_EINVAL / PL_ENOMEM otherwise; on failure c is closed. Notices (ignored
 * files, link loops, shard indexes) go to lg. */
int input_open(catalog *c, const char *data, const remote_opts *remote,
               logger *lg);

#endif
