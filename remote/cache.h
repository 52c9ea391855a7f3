/* The node cache of remote shards (cache.c), a folder the ranks of
 * a node share (config.cache_dir) of files named after a hash of each
 * shard's URL: NAME (the whole shard, only ever renamed into place once
 * complete), NAME.idx (its index), NAME.lock (held exclusively by whoever
 * fetches it: one download per node) and NAME.part (a download under way,
 * resumed by the next holder of the lock if its fetcher died). A loader
 * holds a shared lock on every cached shard it has open; eviction, under
 * cache_limit, takes the least recently used shard (atime, set on every
 * open) that it can lock exclusively, so never one a rank reads. In the
 * shard order (cache_stream) a loader lets go of the shards its reads
 * have passed, so that a cache far smaller than the data streams them.
 *
 * No file there is opened through a symbolic link (O_NOFOLLOW), and a
 * download's file is one of the cache's own (open_part): with the checks
 * on the folder itself (cache_dir.h), another user of the machine
 * cannot make the cache write or read a file outside it.
 *
 * It owns the files it makes there, each shard's state and open
 * descriptor (until cache_free), and the fetch-ahead thread (from
 * cache_start_ahead to cache_free). It borrows the transfers
 * (transfer.h) and the stop flag, which must outlive it.
 *
 * Thread safety: cache_read may be called from any thread at once, and
 * with the fetch-ahead thread (each shard's state under its mutex, never
 * held across I/O: whoever finds a shard absent fetches it, the others
 * wait); at create, cache_index and cache_index_whole may run at once on
 * different shards. */
#ifndef PINLOAD_REMOTE_CACHE_H
#define PINLOAD_REMOTE_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/log.h"
#include "../index/tar.h"
#include "transfer.h"

typedef struct remote_cache remote_cache;

/* One shard's place in the cache. */
typedef struct cache_shard {
    /* Set by cache_new, read-only after. */
    remote_cache *cache;
    char *url;  /* as given (may carry credentials) */
    char *name; /* as shown: transfer_display's */
    char *path; /* NAME */
    /* From its index: -1 until the one thread indexing it at create sets
     * it; read-only after create. */
    int64_t size;
    /* Under mu, cache.c's alone. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state, fd; /* open, locked shared, once the shard is here */
    int readers;   /* cache_reads using fd now */
    int release;   /* close fd when the last of them is done */
    int no_room;   /* read member by member: the cache has no room */
    int err_code;
    char err[512];
    int64_t failed_ns;
    /* The shard order (cache_stream): its first place in the rank's
     * sequence, or -1; set by cache_stream_order, read by the readers. */
    atomic_int seq_pos;
} cache_shard;

/* The cache in dir (NULL or "": $PINLOAD_CACHE_DIR, else
 * $XDG_CACHE_HOME/pinload/shards, ~/.cache/pinload/shards or
 * /tmp/pinload-UID/shards), made and checked (cache_dir.h: refused
 * when another user could change its files), of at most `limit` bytes
 * (0: no limit), for the n shards at urls (copied). 0 with [out] *out;
 * PL_EIO with pl_last_error saying why the folder is refused; or
 * PL_ENOMEM. */
int cache_new(const char *dir, int64_t limit, char **urls, int n,
              transfers *xfer, atomic_int *stop, logger *lg,
              remote_cache **out);

/* Stops and joins the fetch-ahead thread, closes the shards (a cut
 * download's .part stays, for the next to resume) and frees the cache;
 * NULL is accepted. No cache_read may be under way. */
void cache_free(remote_cache *c);

/* The folder, as checked: without symbolic links. */
const char *cache_dir(const remote_cache *c);
int64_t cache_limit(const remote_cache *c);
cache_shard *cache_shard_at(remote_cache *c, int i);

/* The shard's index: NAME.idx, or else URL.idx fetched into it (once per
 * node: under the shard's lock); sets sh->size. 1 if read, 0 if the store
 * has none (or the shard is a pipe:), or PL_E* with err[cap]. */
int cache_index(cache_shard *sh, tar_index *t, char *err, size_t cap);

/* A shard without an index, fetched whole and indexed from its headers
 * into t (NAME.idx written for the next create); it stays open for
 * cache_read. 0, or PL_E* with err[cap] (PL_EIO if the cache has no room
 * for it). */
int cache_index_whole(cache_shard *sh, tar_index *t, char *err, size_t cap);

/* The small file at url (classes.txt) into the cache, unless it is
 * there: 0 with its path in out[cap]; 1 if the store has none; or PL_E*
 * with err[ecap]. */
int cache_fetch_file(remote_cache *c, const char *url, char *out, size_t cap,
                     char *err, size_t ecap);

/* Bytes [off, off + size) of the shard from its cached copy. With fetch,
 * the shard is fetched first if it is not there (once per loader, and the
 * cache makes it once per node; a failure is remembered for a minute);
 * without, only a copy already open (create indexed it whole) is read.
 * 0; 1 if there is no copy to read (ranged mode, or no room in the cache:
 * the caller reads the range from the store); or PL_E* with reason[cap]. */
int cache_read(cache_shard *sh, int fetch, int64_t off, int64_t size, void *dst,
               char *reason, size_t cap);

/* A thread that fetches the shards ahead of the workers until the stop
 * flag is set: in sorted order, or, after cache_stream, in the order
 * cache_stream_order gives. 0, or -1 if it cannot be started (the workers
 * then fetch every shard themselves). */
int cache_start_ahead(remote_cache *c);

/* Before cache_start_ahead: the shards are streamed (PL_ORDER_SHARDS).
 * The thread fetches them whole in the order cache_stream_order gives,
 * keeping at most `hold` of them open (locked shared) at once: the
 * furthest one a read has reached, the `span` before it (the reads of its
 * window, and the last of the window before, may still come) and those
 * after it up to `hold`. The shards behind are closed, so that eviction
 * may take them (a late read opens one again, or fetches it anew). 0,
 * or -1 without memory. */
int cache_stream(remote_cache *c, int span, int hold);

/* The shards (indexes) this rank reads from now on, seq[0 .. n) in that
 * order (copied): the shards of the previous sequence stay open until a
 * read reaches one of these. Safe from any thread. */
void cache_stream_order(remote_cache *c, const int32_t *seq, int n);

#endif
