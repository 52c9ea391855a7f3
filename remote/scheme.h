/* The transfers' one table (transfer.h): a row per URL scheme, with what
 * a fetch of that scheme does, as device/backend.h's ops table is a row
 * per backend. transfer.c holds the table (each URL prefix and its row)
 * and what every scheme shares (the attempts, their backoff, the
 * messages); http.c, s3.c and pipe.c each define their row. Internal to
 * remote/. */
#ifndef PINLOAD_SCHEME_H
#define PINLOAD_SCHEME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "transfer.h"

struct http_pool;
struct s3_conf;
struct gs_conf;
struct hf_conf;

struct transfers {
    int32_t timeout_ms, retries;
    atomic_int *stop;       /* the caller's */
    struct http_pool *http; /* http.c's: the idle handles, the CA bundle */
    struct s3_conf *s3;     /* s3.c's: its settings, the buckets' regions */
    struct gs_conf *gs;     /* gs.c's: the endpoint, the HMAC key */
    struct hf_conf *hf;     /* hf.c's: the Hub's endpoint, the token */
    /* transfer_deadline's: when every transfer ends (clock_now_ns; 0:
     * never), and the config's milliseconds, for the message. */
    _Atomic int64_t deadline_ns;
    int32_t deadline_ms;
};

/* The outcome of one attempt. */
typedef struct attempt {
    int ok;        /* the whole requested body came */
    int retry;     /* worth another attempt */
    int no_room;   /* writing the cache failed for want of room */
    int no_ranges; /* the store answered a range with other bytes */
    char why[320]; /* "HTTP 404", "Timeout was reached"... */
} attempt;

/* What a fetch of one scheme does; transfer.c lists the URL prefixes
 * that take each row (http:// and https:// share one). */
typedef struct scheme {
    /* A command (transfer_is_command): no ranges, nothing beside it. */
    int command;
    /* One attempt to make the file at fd, which holds `have` bytes of the
     * object, hold it whole (`expect` bytes; -1: what the store says the
     * whole is): 1 if it does, 0 if not (a says why, and whether another
     * attempt may do better), -1 if fd could not be truncated (none
     * can). */
    int (*whole)(transfers *t, const char *url, int fd, int64_t have,
                 int64_t expect, attempt *a);
    /* One attempt at bytes [off, off + size) of url into dst; NULL for a
     * scheme without ranges. */
    void (*range)(transfers *t, const char *url, int64_t off, int64_t size,
                  void *dst, attempt *a);
    /* url as messages show it, into out[cap]. */
    void (*display)(const char *url, char *out, size_t cap);
    /* What names url's object in a cache, into out[cap]. */
    void (*cache_key)(const transfers *t, const char *url, char *out,
                      size_t cap);
} scheme;

extern const scheme scheme_http; /* http.c: http:// and https:// */
extern const scheme scheme_s3;   /* s3.c */
extern const scheme scheme_gs;   /* gs.c */
extern const scheme scheme_hf;   /* hf.c */
extern const scheme scheme_pipe; /* pipe.c */

/* Whether transfer_deadline's deadline has passed. */
static inline int transfers_past_deadline(const transfers *t)
{
    const int64_t d = atomic_load(&t->deadline_ns);
    return d > 0 && (int64_t)clock_now_ns() >= d;
}

/* Whether every transfer gives up now: the loader closes, or the
 * deadline has passed. */
static inline int transfers_stopping(const transfers *t)
{
    return atomic_load(t->stop) || transfers_past_deadline(t);
}

/* The environment variable `name`, copied, or NULL if unset or empty. */
static inline char *transfer_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

/* An endpoint: the environment variable `name`'s URL, else `fallback`
 * (NULL: none), copied without its trailing slashes; NULL if there is
 * none, or without memory. */
static inline char *transfer_endpoint(const char *name, const char *fallback)
{
    char *e = transfer_env(name);
    if (!e && fallback)
        e = strdup(fallback);
    for (size_t k = e ? strlen(e) : 0; k > 0 && e[k - 1] == '/';)
        e[--k] = '\0';
    return e;
}

/* The schemes' own parts of the transfers, made by transfers_new from the
 * environment and freed by transfers_free (NULL accepted). NULL without
 * memory. */
struct http_pool *http_pool_new(void);
void http_pool_free(struct http_pool *p);
struct s3_conf *s3_conf_new(void);
void s3_conf_free(struct s3_conf *c);
struct gs_conf *gs_conf_new(void);
void gs_conf_free(struct gs_conf *c);
struct hf_conf *hf_conf_new(void);
void hf_conf_free(struct hf_conf *c);

#endif
