/* HTTP through libcurl (http.h): the handles and their reuse, one GET
 * with its redirects' policy, the CA bundle, timeouts and Range; a whole
 * object resumed, a range; and the row of the schemes' table that
 * http:// and https:// share. */
#include "http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/clock.h"
#include "pinload.h"

#define HANDLES_KEPT 16 /* idle libcurl handles (connections) kept */
/* A transfer slower than this for remote_timeout_ms is cut (libcurl's
 * low-speed check): a server that drips a byte a second never stalls. */
#define DRIP_FLOOR 1024 /* bytes/s */

typedef struct http_pool {
    /* The certificate authorities TLS trusts, from the environment at
     * create (NULL: libcurl's own bundle): CURL_CA_BUNDLE, else
     * SSL_CERT_FILE, for every URL, as the curl tool reads them (s3://
     * has its own, s3.c). */
    char *ca_file;
    /* Idle transfer handles, kept for their open connections (a ranged
     * read per sample would otherwise connect, and shake TLS hands, per
     * sample). handles_mu guards only the stack. */
    pthread_mutex_t handles_mu;
    CURL *handles[HANDLES_KEPT];
    int nhandles;
} http_pool;

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

void http_display(const char *url, char *out, size_t cap)
{
    const char *sep = strstr(url, "://");
    const char *host = sep ? sep + 3 : url;
    const char *slash = strchr(host, '/');
    const char *at = strchr(host, '@');
    if (at && (!slash || at < slash))
        host = at + 1;
    const size_t head = sep ? (size_t)(sep + 3 - url) : 0;
    const size_t body = strcspn(host, "?#");
    snprintf(out, cap, "%.*s%.*s%s", (int)head, url, (int)body, host,
             host[body] == '?' ? "?..." : "");
}

/* ---- the handles' life ---- */

/* No idle handle yet, and the bundle of certificate authorities named in
 * the environment, if any (a strdup that fails leaves libcurl's own,
 * which trusts no more). */
struct http_pool *http_pool_new(void)
{
    http_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->handles_mu, NULL);
    p->ca_file = transfer_env("CURL_CA_BUNDLE");
    if (!p->ca_file)
        p->ca_file = transfer_env("SSL_CERT_FILE");
    return p;
}

void http_pool_free(struct http_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nhandles; i++)
        curl_easy_cleanup(p->handles[i]);
    pthread_mutex_destroy(&p->handles_mu);
    free(p->ca_file);
    free(p);
}

const char *http_ca(const transfers *t)
{
    return t->http->ca_file;
}

/* ---- one HTTP transfer ---- */

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    sink *k = ctx;
    const size_t len = size * n;
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
    k->in_headers = strcspn(line, "\r\n") > 0; /* a blank line ends them */
    if (strncasecmp(line, "HTTP/", 5) == 0) {  /* a new response */
        k->range_start = -1;
        k->total = -1;
        k->content_range[0] = '\0';
        k->bucket_region[0] = '\0';
        k->error_body[0] = '\0';
        k->error_len = 0;
    } else if (strncasecmp(line, "x-amz-bucket-region:", 20) == 0) {
        const char *v = line + 20 + strspn(line + 20, " \t");
        const size_t vlen = strcspn(v, " \t\r\n");
        if (vlen < REGION_MAX) {
            memcpy(k->bucket_region, v, vlen);
            k->bucket_region[vlen] = '\0';
        }
    } else if (strncasecmp(line, "content-range:", 14) == 0) {
        const char *v = line + 14 + strspn(line + 14, " \t");
        snprintf(k->content_range, sizeof k->content_range, "%.*s",
                 (int)strcspn(v, "\r\n"), v);
        long long a, b, t;
        if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) {
            k->range_start = a;
            k->total = t;
        }
    }
    return len;
}

/* At the body's first bytes, whether they are the bytes asked for: 1 to
 * take them; 0 to refuse the answer, nothing written (a 206 of other
 * bytes than asked; a 200, the whole object, to a range read); -1 if fd
 * could not be made to take the whole object from its start. A 200 to a
 * resume is the whole object: written from byte 0, as wget does. */
static int body_is_asked(sink *k)
{
    if (!k->ranged)
        return 1;
    if (k->status == 206) {
        k->bad_range = k->range_start != k->from;
        return !k->bad_range;
    }
    if (k->buf) { /* the whole object: taken only if it is the range */
        curl_off_t length = -1;
        curl_easy_getinfo(k->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        k->ignored_range = !(k->from == 0 && length == k->want);
        return !k->ignored_range;
    }
    if (ftruncate(k->fd, 0) != 0) {
        k->write_errno = errno;
        k->failed = 1;
        return -1;
    }
    k->base = 0;
    k->restarted = 1;
    return 1;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    sink *k = ctx;
    const size_t len = size * n;
    if (!k->status)
        curl_easy_getinfo(k->h, CURLINFO_RESPONSE_CODE, &k->status);
    if (k->status >= 300) { /* an error page: not data */
        const size_t room = sizeof k->error_body - 1 - k->error_len;
        const size_t keep = len < room ? len : room;
        memcpy(k->error_body + k->error_len, p, keep);
        k->error_len += keep;
        k->error_body[k->error_len] = '\0';
        return len;
    }
    if (k->got == 0 && !k->restarted && body_is_asked(k) <= 0)
        return 0; /* refused: judge names why */
    if (k->buf) {
        if (k->got + (int64_t)len > k->want)
            return 0; /* more than asked: refused, and an error */
        memcpy(k->buf + k->got, p, len);
    } else {
        size_t done = 0;
        while (done < len) {
            const ssize_t w = pwrite(k->fd, p + done, len - done,
                                     (off_t)(k->base + k->got + (int64_t)done));
            if (w <= 0) {
                if (w < 0 && errno == EINTR)
                    continue;
                k->write_errno = w < 0 ? errno : ENOSPC;
                k->failed = 1;
                return 0;
            }
            done += (size_t)w;
        }
    }
    k->got += (int64_t)len;
    return len;
}

/* Cuts a transfer that moved no byte for timeout_ms (libcurl's own
 * low-speed check averages over seconds), or any when the loader closes. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal, (void)ulnow;
    sink *k = ctx;
    const int64_t now = clock_now_ns();
    if (dlnow != k->moved || !k->moved_ns) {
        k->moved = dlnow;
        k->moved_ns = now;
    } else if (now - k->moved_ns > (int64_t)k->t->timeout_ms * 1000000) {
        k->stalled = 1;
        return 1;
    }
    return atomic_load_explicit(k->t->stop, memory_order_relaxed);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static CURL *handle_take(http_pool *p)
{
    pthread_mutex_lock(&p->handles_mu);
    CURL *h = p->nhandles ? p->handles[--p->nhandles] : NULL;
    pthread_mutex_unlock(&p->handles_mu);
    return h ? h : curl_easy_init();
}

/* Back to the stack, its options cleared and its connection kept. */
static void handle_put(http_pool *p, CURL *h)
{
    curl_easy_reset(h);
    pthread_mutex_lock(&p->handles_mu);
    if (p->nhandles < HANDLES_KEPT) {
        p->handles[p->nhandles++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&p->handles_mu);
    if (h)
        curl_easy_cleanup(h);
}

/* k ready for a transfer on h. */
static void sink_start(sink *k, CURL *h, transfers *t)
{
    k->h = h;
    k->t = t;
    k->moved_ns = 0;
    k->moved = 0;
    k->stalled = 0;
    k->status = 0;
    k->got = 0;
    k->restarted = k->ignored_range = k->bad_range = k->in_headers = 0;
    k->failed = k->write_errno = 0;
    k->errbuf[0] = '\0';
    k->content_range[0] = '\0';
    k->range_start = k->total = -1;
    k->bucket_region[0] = '\0';
    k->error_body[0] = '\0';
    k->error_len = 0;
    k->location[0] = '\0';
}

/* What every transfer sets: the target, the protocols, the redirects,
 * the certificate authorities, the timeouts, and k as the sink of its
 * headers, body and progress.
 *
 * Redirects: libcurl follows an http(s):// URL's, from https:// to
 * https:// only (no downgrade), and sends the URL's user:password@ to its
 * own scheme, host and port alone (CURLOPT_UNRESTRICTED_AUTH off). An
 * s3:// request's are never followed: libcurl would send the headers set
 * here (the session token) to any host a Location names and take that
 * host's unsigned answer for the object; s3.c decides what the redirect
 * means. */
static void set_transfer(CURL *h, const transfers *t, const http_req *rq,
                         sink *k)
{
    const int32_t timeout_ms = t->timeout_ms;
    const char *target = rq->target, *ca = rq->ca;
    curl_easy_setopt(h, CURLOPT_URL, target);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, rq->follow ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR,
                     has_prefix(target, "https://") ? "https" : "http,https");
    if (ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)DRIP_FLOOR);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                     (long)((timeout_ms + 999) / 1000));
    const int64_t deadline = atomic_load(&t->deadline_ns);
    if (deadline > 0) {
        const int64_t left = (deadline - (int64_t)clock_now_ns()) / 1000000;
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(left > 1 ? left : 1));
    }
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, k->errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, k);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
}

/* Bytes `from` to `to` inclusive (-1: to the end), unless that is the
 * whole object; k notes what was asked. libcurl copies the string. */
static void set_range(CURL *h, int64_t from, int64_t to, sink *k)
{
    k->ranged = !(from <= 0 && to < 0);
    k->from = from > 0 ? from : 0;
    if (!k->ranged)
        return;
    char range[64];
    if (to >= 0)
        snprintf(range, sizeof range, "%lld-%lld", (long long)from,
                 (long long)to);
    else
        snprintf(range, sizeof range, "%lld-", (long long)from);
    curl_easy_setopt(h, CURLOPT_RANGE, range);
}

/* url shown as scheme://host[:port] alone (no credentials, no path). */
static void url_origin(const char *url, char *out, size_t cap)
{
    transfer_display(url, out, cap);
    char *host = strstr(out, "://");
    if (host)
        host[3 + strcspn(host + 3, "/?#")] = '\0';
}

/* An http(s):// redirect libcurl would not follow (another scheme, a
 * downgrade from https://): why, naming where it pointed. */
static void refused_redirect(CURL *h, long st, attempt *a)
{
    char *to = NULL, shown[200];
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &to);
    url_origin(to ? to : "", shown, sizeof shown);
    snprintf(a->why, sizeof a->why,
             "HTTP %ld redirects to %.150s: refused (a redirect from "
             "https:// goes to https:// only)",
             st, shown);
}

/* Whether libcurl refused the answer for a header over its limit: in the
 * middle of the headers, libcurl 7's CURLE_OUT_OF_MEMORY (a header line
 * over 100 KB, said in no words), or later versions' words ("Too large
 * response headers", CURLE_TOO_LARGE from 8.6 on). */
static int huge_header(CURLcode cc, const sink *k)
{
    return (cc == CURLE_OUT_OF_MEMORY && k->in_headers) ||
           ((cc == CURLE_RECV_ERROR || cc == CURLE_WEIRD_SERVER_REPLY ||
             (int)cc == 100) &&
            strstr(k->errbuf, "header") != NULL);
}

/* Why the body was refused at its first bytes (body_is_asked): neither is
 * retried here (a whole object's next attempt starts from byte 0). */
static void refused_body(const sink *k, attempt *a)
{
    a->no_ranges = 1;
    if (k->ignored_range)
        snprintf(a->why, sizeof a->why,
                 "the server ignores Range requests (HTTP 200, the whole "
                 "object, to a request for bytes from %lld), so members "
                 "cannot be read alone: give the cache room for the whole "
                 "dataset (cache_limit)",
                 (long long)k->from);
    else
        snprintf(a->why, sizeof a->why,
                 "a wrong Content-Range: asked for bytes from %lld, the "
                 "server's HTTP 206 says \"%.60s\"",
                 (long long)k->from,
                 k->content_range[0] ? k->content_range : "(none)");
}

/* Why a transfer that libcurl ended with cc (no HTTP error, nothing
 * refused) failed, and whether another attempt may do better. */
static void transport_error(const transfers *t, CURLcode cc, const sink *k,
                            attempt *a)
{
    const int timed_out = cc == CURLE_OPERATION_TIMEDOUT;
    if (atomic_load(t->stop)) {
        snprintf(a->why, sizeof a->why, "the loader is closing");
    } else if (timed_out && transfers_past_deadline(t)) {
        snprintf(a->why, sizeof a->why,
                 "create's deadline passed (config.remote_create_timeout_ms, "
                 "%d ms)",
                 (int)t->deadline_ms);
    } else if (timed_out && k->moved > 0) {
        curl_off_t us = 0;
        curl_easy_getinfo(k->h, CURLINFO_TOTAL_TIME_T, &us);
        snprintf(a->why, sizeof a->why,
                 "a drip: %lld bytes in %.1f s, under %d bytes/s for %d s "
                 "(config.remote_timeout_ms)",
                 (long long)k->moved, (double)us / 1e6, DRIP_FLOOR,
                 (int)((t->timeout_ms + 999) / 1000));
        a->retry = 1;
    } else if (huge_header(cc, k)) {
        snprintf(a->why, sizeof a->why,
                 "an oversized header in the server's answer, refused by "
                 "libcurl (%.120s)",
                 k->errbuf[0] ? k->errbuf : "a header line over 100 KB");
    } else {
        snprintf(a->why, sizeof a->why, "%s",
                 k->errbuf[0] ? k->errbuf : curl_easy_strerror(cc));
        a->retry = cc != CURLE_ABORTED_BY_CALLBACK &&
                   cc != CURLE_UNSUPPORTED_PROTOCOL &&
                   cc != CURLE_URL_MALFORMAT && cc != CURLE_WRITE_ERROR;
    }
}

/* The attempt's outcome from libcurl's code and the response: whether the
 * body came whole, else why not and whether another attempt may do
 * better. */
static void judge(const transfers *t, CURL *h, CURLcode cc, sink *k, attempt *a)
{
    if (!k->status)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &k->status);
    curl_off_t length = -1;
    curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    if (k->status == 200 && k->total < 0)
        k->total = length;
    const long st = k->status;
    if (cc == CURLE_OK && (st == 200 || st == 206)) {
        a->ok = 1;
    } else if (cc == CURLE_UNSUPPORTED_PROTOCOL && st >= 300 && st < 400) {
        refused_redirect(h, st, a);
    } else if (st >= 300 || (cc == CURLE_OK && st != 200 && st != 206)) {
        snprintf(a->why, sizeof a->why, "HTTP %ld", st);
        a->retry = st == 408 || st == 429 || st >= 500;
    } else if (k->ignored_range || k->bad_range) {
        refused_body(k, a);
    } else if (k->stalled) {
        snprintf(a->why, sizeof a->why, "no byte for %d ms (a stall)",
                 (int)t->timeout_ms);
        a->retry = 1;
    } else if (k->failed) {
        const int e = k->write_errno;
        snprintf(a->why, sizeof a->why, "writing the cache: %s", strerror(e));
        a->no_room = e == ENOSPC || e == EDQUOT || e == EFBIG;
    } else {
        transport_error(t, cc, k, a);
    }
}

/* One GET of rq's target (from byte `from`, to `to` inclusive, or to the
 * end for -1) into k, on an idle handle (its connection reused) or a new
 * one. */
void http_once(transfers *t, const http_req *rq, int64_t from, int64_t to,
               sink *k, attempt *a)
{
    memset(a, 0, sizeof *a);
    pthread_once(&curl_once, curl_start);
    CURL *h = curl_ready && rq->target ? handle_take(t->http) : NULL;
    if (!h) {
        snprintf(a->why, sizeof a->why, "%s",
                 rq->target ? "libcurl could not start" : "not a valid URL");
        return;
    }
    sink_start(k, h, t);
    set_transfer(h, t, rq, k);
    set_range(h, from, to, k);
    struct curl_slist *hdr = rq->sign ? rq->sign(t, h, rq->region) : NULL;
    const CURLcode cc = curl_easy_perform(h);
    judge(t, h, cc, k, a);
    char *loc = NULL;
    if (!a->ok &&
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
        url_origin(loc, k->location, sizeof k->location);
    curl_slist_free_all(hdr);
    handle_put(t->http, h);
}

/* An http(s):// GET: to the URL as it is, its redirects followed. */
static void plain_get(transfers *t, const char *url, int64_t from, int64_t to,
                      sink *k, attempt *a)
{
    char *target = strdup(url);
    const http_req rq = {.target = target, .follow = 1, .ca = http_ca(t)};
    http_once(t, &rq, from, to, k, a);
    free(target);
}

/* One GET by get into fd from byte `have` on: 1 if fd now holds the
 * whole, 0 if not (a says why, and whether to try again), -1 if fd could
 * not be truncated (no attempt can help). A server that answers the
 * Range with the whole object (HTTP 200) has it written from byte 0, in
 * the same answer; one that answers with other bytes than asked has none
 * written, and the next attempt starts from byte 0. */
int http_whole(transfers *t, http_get_fn *get, const char *url, int fd,
               int64_t have, int64_t expect, attempt *a)
{
    sink k = {.fd = fd, .base = have};
    get(t, url, have, -1, &k, a);
    if (k.restarted)
        have = 0; /* the whole object came, from byte 0 */
    if (k.bad_range) {
        a->retry = 1;
        return ftruncate(fd, 0) == 0 ? 0 : -1;
    }
    if (!a->ok)
        return 0;
    const int64_t whole = expect >= 0 ? expect : k.total;
    const int64_t now = have + k.got;
    if (whole < 0 || now == whole)
        return 1;
    snprintf(a->why, sizeof a->why, "a short body: %lld of %lld bytes",
             (long long)now, (long long)whole);
    a->ok = 0;
    a->retry = now < whole;
    return now > whole && ftruncate(fd, 0) != 0 ? -1 : 0;
}

/* One ranged GET by get of bytes [off, off + size) into dst: a server
 * that ignores the Range, or answers with other bytes, is refused at its
 * first bytes (body_is_asked), naming it, and not retried. */
void http_part(transfers *t, http_get_fn *get, const char *url, int64_t off,
               int64_t size, void *dst, attempt *a)
{
    sink k = {.fd = -1, .buf = dst, .want = size};
    get(t, url, off, off + size - 1, &k, a);
    if (a->ok && k.got != size) {
        snprintf(a->why, sizeof a->why,
                 "a short body: %lld of %lld bytes from byte %lld",
                 (long long)k.got, (long long)size, (long long)off);
        a->ok = 0;
        a->retry = 1;
    }
}

/* ---- the http:// and https:// row ---- */

static int plain_whole(transfers *t, const char *url, int fd, int64_t have,
                       int64_t expect, attempt *a)
{
    return http_whole(t, plain_get, url, fd, have, expect, a);
}

static void plain_range(transfers *t, const char *url, int64_t off,
                        int64_t size, void *dst, attempt *a)
{
    http_part(t, plain_get, url, off, size, dst, a);
}

static void plain_key(const transfers *t, const char *url, char *out,
                      size_t cap)
{
    (void)t;
    char shown[4096];
    http_display(url, shown, sizeof shown);
    snprintf(out, cap, "%s", shown);
}

const scheme scheme_http = {
    .whole = plain_whole,
    .range = plain_range,
    .display = http_display,
    .cache_key = plain_key,
};
