/* Remote shards: config.data of http(s)://, s3://, gs://, hf:// or pipe:
 * URLs (a brace pattern of them, or a list file of them), indexed at
 * create from the sidecar indexes beside them (URL.idx) and read through a
 * node cache that the ranks of a node share (docs/DATA.md has the rules).
 * remote.c is the set of shards and their readers; cache.h the node
 * cache, http.h the transfers, both internal to it. */
#ifndef PINLOAD_REMOTE_H
#define PINLOAD_REMOTE_H

#include <stdint.h>

#include "../catalog/catalog.h"
#include "../common/log.h"

/* The config's remote fields (0 / NULL: their defaults). */
typedef struct remote_opts {
    const char *cache_dir;
    int64_t cache_limit;
    int32_t timeout_ms;
    int32_t retries;
    /* create's deadline (0: 10 minutes; -1: none) */
    int32_t create_timeout_ms;
    /* PL_ORDER_SHARDS: the positions a window shuffles (1: none), and the
     * ranks of this node sharing the cache; 0: the global order. The
     * shards are then streamed: fetched whole in the order
     * catalog_hint_order gives, a few at a time (docs/DATA.md). */
    int64_t stream_window;
    int32_t ranks;
} remote_opts;

/* Whether s is a URL pinload fetches: http://, https://, s3://, gs://,
 * hf:// or pipe:. */
int remote_is_url(const char *s);

/* Whether data names remote shards: a URL (with a brace pattern or not),
 * or a local list file whose first line is one: a file of text (no NUL
 * byte, UTF-8) that is not a tar, every line a URL, and no pipe: line
 * unless $PINLOAD_ALLOW_PIPE_LISTS is 1 (a command runs only from what
 * the user wrote in config.data). 1 with [out] the URLs (the caller frees
 * each and the array), 0 if not, or an error naming file and line. A
 * scheme no transfer takes (az://, gcs://), as data or a list's line, is
 * PL_EINVAL naming it and what to do instead, never a missing file. */
int remote_detect(const char *data, char ***urls, int *n);

/* Index the remote shards and add their samples to c, as shards_read does
 * local ones: from each URL.idx, or (saying so first) from the shard
 * fetched whole. The catalog adopts what the readers need; the next shards
 * are fetched ahead on a thread of its own until it closes. */
int remote_read(catalog *c, char **urls, int n, const remote_opts *o,
                logger *lg);

#endif
