/* HTTP through libcurl (http.c): the requests of the http(s):// rows and
 * of s3:// (s3.c), which signs them and chooses where they go. One GET
 * into a sink, on an idle handle (its connection reused) or a new one;
 * whole objects resumed with Range; ranges. Internal to remote/. */
#ifndef PINLOAD_HTTP_H
#define PINLOAD_HTTP_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "scheme.h"

#define REGION_MAX 32 /* an AWS region's name, its NUL included */

/* Where one GET's body goes, and what its answer said. */
typedef struct sink {
    int fd;       /* a file written from `base` on, or -1 */
    int64_t base; /* the file's bytes before this transfer */
    uint8_t *buf; /* or exactly `want` bytes here */
    int64_t want;
    int64_t got;
    /* The Range asked for (ranged: one was sent), from byte `from`. */
    int ranged;
    int64_t from;
    int64_t range_start;    /* Content-Range's first byte, -1 if none */
    int64_t total;          /* the whole object's size, if said; else -1 */
    char content_range[96]; /* as the answer said it, "" if not */
    long status;
    /* What the body's first bytes found: the file's transfer restarted
     * from byte 0 (a 200 to a resume: the whole object came); the range
     * refused, nothing written (a 200 to a range read, or a 206 of other
     * bytes than asked). */
    int restarted, ignored_range, bad_range;
    int in_headers;  /* between an answer's status line and its blank line */
    int write_errno; /* why a write to fd failed */
    char errbuf[CURL_ERROR_SIZE]; /* libcurl's own words */
    /* An answer that is not data: its x-amz-bucket-region header ("" if
     * none, or not a region's name), the first bytes of its body (S3's
     * error, which may say <Region>), and (s3:// only) where its Location
     * points, as shown ("" if nowhere). */
    char bucket_region[REGION_MAX];
    char error_body[1024];
    size_t error_len;
    char location[256];
    int failed; /* a write failed */
    CURL *h;
    transfers *t;
    int64_t moved_ns; /* when the last byte came */
    curl_off_t moved; /* bytes so far */
    int stalled;
} sink;

/* One request, as its scheme makes it. */
typedef struct http_req {
    const char *target; /* the URL it goes to; NULL: not a valid one */
    int follow;         /* libcurl follows its redirects */
    const char *ca;     /* the CA bundle, or NULL: libcurl's own */
    /* Sets the scheme's own headers on h (s3://: SigV4 for `region`), or
     * NULL: the list to free after the transfer. */
    struct curl_slist *(*sign)(const transfers *t, CURL *h, const char *region);
    const char *region;
} http_req;

/* One GET of url (from byte `from`, to `to` inclusive, or to the end for
 * -1) into k, as a scheme makes its requests. */
typedef void http_get_fn(transfers *t, const char *url, int64_t from,
                         int64_t to, sink *k, attempt *a);

/* The GET rq describes into k (bytes as http_get_fn's). */
void http_once(transfers *t, const http_req *rq, int64_t from, int64_t to,
               sink *k, attempt *a);

/* A row's whole and range (scheme.h) for requests made by get. */
int http_whole(transfers *t, http_get_fn *get, const char *url, int fd,
               int64_t have, int64_t expect, attempt *a);
void http_part(transfers *t, http_get_fn *get, const char *url, int64_t off,
               int64_t size, void *dst, attempt *a);

/* The CA bundle the environment names for every URL (CURL_CA_BUNDLE, else
 * SSL_CERT_FILE), or NULL. */
const char *http_ca(const transfers *t);

/* url without user:password@ and without its query, into out[cap]. */
void http_display(const char *url, char *out, size_t cap);

#endif
