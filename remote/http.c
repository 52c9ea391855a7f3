/* The transfers of remote shards (http.h): libcurl's handles and
 * their reuse, one GET with its retries, backoff and Range resume, SigV4
 * for s3:// and its redirects, pipe: commands, and URLs shown without
 * their credentials. */
#include "http.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "pinload.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_RETRIES 5
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define HANDLES_KEPT 16 /* idle libcurl handles (connections) kept */
#define REGIONS_KEPT 16 /* buckets a region redirect placed, remembered */
#define REGION_MAX 32   /* an AWS region's name, its NUL included */
#define BUCKET_MAX 64   /* an S3 bucket's name (3 to 63 bytes), its NUL */

/* A bucket AWS said lies in another region than AWS_REGION. */
typedef struct bucket_region {
    char bucket[BUCKET_MAX];
    char region[REGION_MAX];
} bucket_region;

struct remote_http {
    int32_t timeout_ms, retries;
    /* S3, read from the environment at create */
    char *s3_endpoint, *s3_region, *s3_key, *s3_secret, *s3_token;
    /* The certificate authorities TLS trusts, from the environment at
     * create (NULL: libcurl's own bundle): AWS_CA_BUNDLE for s3://, as
     * botocore reads it; CURL_CA_BUNDLE, else SSL_CERT_FILE, for every
     * URL, as the curl tool reads them. */
    char *ca_file, *s3_ca_file;
    atomic_int *stop; /* the caller's */
    /* Idle transfer handles, kept for their open connections (a ranged
     * read per sample would otherwise connect, and shake TLS hands, per
     * sample). handles_mu guards only the stack. */
    pthread_mutex_t handles_mu;
    CURL *handles[HANDLES_KEPT];
    int nhandles;
    /* The buckets a region redirect placed (AWS's endpoints only), so
     * that their later requests go to their region at once. regions_mu
     * guards only these. */
    pthread_mutex_t regions_mu;
    bucket_region regions[REGIONS_KEPT];
    int nregions;
};

static int stopping(const remote_http *h)
{
    return atomic_load(h->stop);
}

/* ---- URLs ---- */

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

int http_is_pipe(const char *url)
{
    return has_prefix(url, "pipe:");
}

static int is_s3(const char *url)
{
    return has_prefix(url, "s3://");
}

void http_display(const char *url, char *out, size_t cap)
{
    if (http_is_pipe(url)) {
        snprintf(out, cap, "%s", url);
        return;
    }
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    const char *slash = strchr(host, '/');
    const char *at = strchr(host, '@');
    if (at && (!slash || at < slash))
        host = at + 1;
    const size_t head = scheme ? (size_t)(scheme + 3 - url) : 0;
    const size_t body = strcspn(host, "?#");
    snprintf(out, cap, "%.*s%.*s%s", (int)head, url, (int)body, host,
             host[body] == '?' ? "?..." : "");
}

void http_cache_key(const remote_http *h, const char *url, char *out,
                    size_t cap)
{
    if (http_is_pipe(url)) {
        snprintf(out, cap, "%s", url);
        return;
    }
    char shown[4096];
    http_display(url, shown, sizeof shown);
    if (is_s3(url))
        snprintf(out, cap, "%s@%s", shown,
                 h->s3_endpoint ? h->s3_endpoint : h->s3_region);
    else
        snprintf(out, cap, "%s", shown);
}

/* The URL a request goes to: s3://bucket/key becomes the endpoint's
 * path-style URL (AWS_ENDPOINT_URL) or AWS's virtual-hosted one in
 * `region`. */
static char *request_url(const remote_http *h, const char *url,
                         const char *region)
{
    if (!is_s3(url))
        return strdup(url);
    const char *bk = url + 5;
    const char *slash = strchr(bk, '/');
    if (!slash)
        return NULL;
    char *p = malloc(strlen(url) + 256 +
                     (h->s3_endpoint ? strlen(h->s3_endpoint) : 0));
    if (!p)
        return NULL;
    if (h->s3_endpoint)
        sprintf(p, "%s/%s", h->s3_endpoint, bk);
    else
        sprintf(p, "https://%.*s.s3.%s.amazonaws.com%s", (int)(slash - bk), bk,
                region, slash);
    return p;
}

/* ---- the buckets' regions ---- */

/* s3://BUCKET/key's bucket into out; 0 if it has none that fits. */
static int bucket_of(const char *url, char out[BUCKET_MAX])
{
    const char *bk = url + 5;
    const size_t n = strcspn(bk, "/");
    if (n == 0 || n >= BUCKET_MAX)
        return 0;
    memcpy(out, bk, n);
    out[n] = '\0';
    return 1;
}

/* The region an s3:// request is signed for, and at AWS sent to: the
 * one a region redirect said for its bucket (copied into buf), else
 * AWS_REGION's. */
static const char *region_of(remote_http *rh, const char *url,
                             char buf[REGION_MAX])
{
    const char *region = rh->s3_region;
    char bucket[BUCKET_MAX];
    if (rh->s3_endpoint || !bucket_of(url, bucket))
        return region;
    pthread_mutex_lock(&rh->regions_mu);
    for (int i = 0; i < rh->nregions; i++)
        if (strcmp(rh->regions[i].bucket, bucket) == 0) {
            snprintf(buf, REGION_MAX, "%s", rh->regions[i].region);
            region = buf;
        }
    pthread_mutex_unlock(&rh->regions_mu);
    return region;
}

/* Remembers that url's bucket lies in `region` (the first REGIONS_KEPT
 * buckets; the others are redirected, and signed anew, each time). */
static void region_keep(remote_http *rh, const char *url, const char *region)
{
    char bucket[BUCKET_MAX];
    if (!bucket_of(url, bucket))
        return;
    pthread_mutex_lock(&rh->regions_mu);
    int i = 0;
    while (i < rh->nregions && strcmp(rh->regions[i].bucket, bucket) != 0)
        i++;
    if (i < REGIONS_KEPT) {
        snprintf(rh->regions[i].bucket, BUCKET_MAX, "%s", bucket);
        snprintf(rh->regions[i].region, REGION_MAX, "%s", region);
        if (i == rh->nregions)
            rh->nregions++;
    }
    pthread_mutex_unlock(&rh->regions_mu);
}

/* Whether r can be an AWS region's name ("eu-west-3"): lower-case
 * letters, digits and '-', a letter first. Nothing else may go into the
 * host name made from it, so a store's answer cannot name a host outside
 * amazonaws.com. */
static int region_valid(const char *r)
{
    if (!(r[0] >= 'a' && r[0] <= 'z'))
        return 0;
    for (const char *c = r; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
              *c == '-'))
            return 0;
    return 1;
}

/* ---- the transfers' life ---- */

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

/* The S3 settings: AWS_ENDPOINT_URL (without its trailing slashes), the
 * region (us-east-1 without one), the credentials. -1 without memory. */
static int s3_from_env(remote_http *h)
{
    h->s3_endpoint = env_dup("AWS_ENDPOINT_URL");
    if (h->s3_endpoint) {
        size_t k = strlen(h->s3_endpoint);
        while (k > 0 && h->s3_endpoint[k - 1] == '/')
            h->s3_endpoint[--k] = '\0';
    }
    h->s3_region = env_dup("AWS_REGION");
    if (!h->s3_region)
        h->s3_region = env_dup("AWS_DEFAULT_REGION");
    if (!h->s3_region)
        h->s3_region = strdup("us-east-1");
    h->s3_key = env_dup("AWS_ACCESS_KEY_ID");
    h->s3_secret = env_dup("AWS_SECRET_ACCESS_KEY");
    h->s3_token = env_dup("AWS_SESSION_TOKEN");
    h->s3_ca_file = env_dup("AWS_CA_BUNDLE");
    return h->s3_region ? 0 : -1;
}

/* The bundle of certificate authorities named in the environment, if
 * any (a strdup that fails leaves libcurl's own, which trusts no more). */
static void ca_from_env(remote_http *h)
{
    h->ca_file = env_dup("CURL_CA_BUNDLE");
    if (!h->ca_file)
        h->ca_file = env_dup("SSL_CERT_FILE");
}

remote_http *http_new(int32_t timeout_ms, int32_t retries, atomic_int *stop)
{
    remote_http *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->handles_mu, NULL);
    pthread_mutex_init(&h->regions_mu, NULL);
    h->stop = stop;
    h->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    h->retries = retries != 0 ? retries : DEFAULT_RETRIES;
    ca_from_env(h);
    if (s3_from_env(h) < 0) {
        http_free(h);
        return NULL;
    }
    return h;
}

void http_free(remote_http *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->nhandles; i++)
        curl_easy_cleanup(h->handles[i]);
    pthread_mutex_destroy(&h->handles_mu);
    pthread_mutex_destroy(&h->regions_mu);
    free(h->s3_endpoint);
    free(h->s3_region);
    free(h->s3_key);
    free(h->s3_secret);
    free(h->s3_token);
    free(h->ca_file);
    free(h->s3_ca_file);
    free(h);
}

/* ---- one HTTP transfer ---- */

typedef struct sink {
    int fd;       /* a file written from `base` on, or -1 */
    int64_t base; /* the file's bytes before this transfer */
    uint8_t *buf; /* or exactly `want` bytes here */
    int64_t want;
    int64_t got;
    int64_t range_start; /* Content-Range's first byte, -1 if none */
    int64_t total;       /* the whole object's size, if said; else -1 */
    long status;
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
    remote_http *rh;
    int64_t moved_ns; /* when the last byte came */
    curl_off_t moved; /* bytes so far */
    int stalled;
} sink;

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    sink *k = ctx;
    const size_t len = size * n;
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
    if (strncasecmp(line, "HTTP/", 5) == 0) { /* a new response */
        k->range_start = -1;
        k->total = -1;
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
        long long a, b, t;
        if (sscanf(line + 14, " bytes %lld-%lld/%lld", &a, &b, &t) == 3) {
            k->range_start = a;
            k->total = t;
        }
    }
    return len;
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
    } else if (now - k->moved_ns > (int64_t)k->rh->timeout_ms * 1000000) {
        k->stalled = 1;
        return 1;
    }
    return atomic_load_explicit(k->rh->stop, memory_order_relaxed);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static CURL *handle_take(remote_http *rh)
{
    pthread_mutex_lock(&rh->handles_mu);
    CURL *h = rh->nhandles ? rh->handles[--rh->nhandles] : NULL;
    pthread_mutex_unlock(&rh->handles_mu);
    return h ? h : curl_easy_init();
}

/* Back to the stack, its options cleared and its connection kept. */
static void handle_put(remote_http *rh, CURL *h)
{
    curl_easy_reset(h);
    pthread_mutex_lock(&rh->handles_mu);
    if (rh->nhandles < HANDLES_KEPT) {
        rh->handles[rh->nhandles++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&rh->handles_mu);
    if (h)
        curl_easy_cleanup(h);
}

/* The outcome of one attempt. */
typedef struct attempt {
    int ok;        /* the whole requested body came */
    int retry;     /* worth another attempt */
    char why[256]; /* "HTTP 404", "Timeout was reached"... */
} attempt;

/* k ready for a transfer on h. */
static void sink_start(sink *k, CURL *h, remote_http *rh)
{
    k->h = h;
    k->rh = rh;
    k->moved_ns = 0;
    k->moved = 0;
    k->stalled = 0;
    k->status = 0;
    k->got = 0;
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
 * host's unsigned answer for the object; http_get decides what the
 * redirect means. */
static void set_transfer(CURL *h, const remote_http *rh, const char *url,
                         const char *target, sink *k)
{
    const int32_t timeout_ms = rh->timeout_ms;
    const int s3 = is_s3(url);
    const char *ca = s3 && rh->s3_ca_file ? rh->s3_ca_file : rh->ca_file;
    curl_easy_setopt(h, CURLOPT_URL, target);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, s3 ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR,
                     has_prefix(target, "https://") ? "https" : "http,https");
    if (ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                     (long)((timeout_ms + 999) / 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, k);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
}

/* Bytes `from` to `to` inclusive (-1: to the end), unless that is the
 * whole object. libcurl copies the string. */
static void set_range(CURL *h, int64_t from, int64_t to)
{
    if (from <= 0 && to < 0)
        return;
    char range[64];
    if (to >= 0)
        snprintf(range, sizeof range, "%lld-%lld", (long long)from,
                 (long long)to);
    else
        snprintf(range, sizeof range, "%lld-", (long long)from);
    curl_easy_setopt(h, CURLOPT_RANGE, range);
}

/* An s3:// request signed with SigV4 for `region` when there are
 * credentials: the headers it needs, for the caller to free after the
 * transfer. */
static struct curl_slist *sign_s3(const remote_http *rh, CURL *h,
                                  const char *url, const char *region)
{
    if (!is_s3(url) || !rh->s3_key || !rh->s3_secret)
        return NULL;
    char sigv4[160];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", region);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, rh->s3_key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, rh->s3_secret);
    struct curl_slist *hdr =
        curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (rh->s3_token) {
        char *t = malloc(strlen(rh->s3_token) + 32);
        if (t) {
            sprintf(t, "x-amz-security-token: %s", rh->s3_token);
            hdr = curl_slist_append(hdr, t);
            free(t);
        }
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    return hdr;
}

/* url shown as scheme://host[:port] alone (no credentials, no path). */
static void url_origin(const char *url, char *out, size_t cap)
{
    http_display(url, out, cap);
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

/* The attempt's outcome from libcurl's code and the response: whether the
 * body came whole, else why not and whether another attempt may do
 * better. */
static void judge(CURL *h, CURLcode cc, sink *k, int32_t timeout_ms, attempt *a)
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
    } else if (k->stalled) {
        snprintf(a->why, sizeof a->why, "no byte for %d ms (a stall)",
                 (int)timeout_ms);
        a->retry = 1;
    } else if (k->failed) {
        snprintf(a->why, sizeof a->why, "writing the cache: %s",
                 strerror(errno));
    } else {
        snprintf(a->why, sizeof a->why, "%s", curl_easy_strerror(cc));
        a->retry = cc != CURLE_ABORTED_BY_CALLBACK &&
                   cc != CURLE_UNSUPPORTED_PROTOCOL &&
                   cc != CURLE_URL_MALFORMAT && cc != CURLE_WRITE_ERROR;
    }
}

/* One GET of url (from byte `from`, to `to` inclusive, or to the end for
 * -1) into k, an s3:// one signed for `region`, on an idle handle (its
 * connection reused) or a new one. */
static void http_once(remote_http *rh, const char *url, const char *region,
                      int64_t from, int64_t to, sink *k, attempt *a)
{
    memset(a, 0, sizeof *a);
    pthread_once(&curl_once, curl_start);
    char *target = request_url(rh, url, region);
    CURL *h = curl_ready && target ? handle_take(rh) : NULL;
    if (!h) {
        snprintf(a->why, sizeof a->why, "%s",
                 target ? "libcurl could not start" : "not a valid URL");
        free(target);
        return;
    }
    sink_start(k, h, rh);
    set_transfer(h, rh, url, target, k);
    set_range(h, from, to);
    struct curl_slist *hdr = sign_s3(rh, h, url, region);
    const CURLcode cc = curl_easy_perform(h);
    judge(h, cc, k, rh->timeout_ms, a);
    char *loc = NULL;
    if (!a->ok &&
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
        url_origin(loc, k->location, sizeof k->location);
    curl_slist_free_all(hdr);
    handle_put(rh, h);
    free(target);
}

/* The region an S3 answer that is not data says the bucket lies in (its
 * x-amz-bucket-region header, else its error's <Region>), into out; 0 if
 * it says none that is a region's name. */
static int answer_region(const sink *k, char out[REGION_MAX])
{
    if (k->bucket_region[0]) {
        snprintf(out, REGION_MAX, "%s", k->bucket_region);
    } else {
        const char *r = strstr(k->error_body, "<Region>");
        const size_t n = r ? strcspn(r + 8, "<") : 0;
        if (!r || n == 0 || n >= REGION_MAX || r[8 + n] != '<')
            return 0;
        memcpy(out, r + 8, n);
        out[n] = '\0';
    }
    return region_valid(out);
}

/* Why an s3:// request's answer signed for `region` was a redirect, or
 * named another region, into a (neither is followed, nor retried). */
static void s3_moved(const sink *k, const char *region, attempt *a)
{
    char there[REGION_MAX];
    const long st = k->status;
    if (answer_region(k, there) && strcmp(there, region) != 0) {
        snprintf(a->why, sizeof a->why,
                 "HTTP %ld: the store says the bucket is in region %s, not "
                 "%s: set AWS_REGION=%s",
                 st, there, region, there);
        a->retry = 0;
    } else if (st >= 300 && st < 400) {
        snprintf(a->why, sizeof a->why,
                 "HTTP %ld redirects to %.150s: not followed (an s3:// "
                 "request goes to its own endpoint only)",
                 st, k->location[0] ? k->location : "no Location");
        a->retry = 0;
    }
}

/* GET url (from byte `from`, to `to` inclusive, or to the end for -1)
 * into k. An s3:// request is never redirected by libcurl: an answer at
 * one of AWS's endpoints that says the bucket lies in another region (as
 * S3 says with a 301, or a 400 to a request signed for the wrong region)
 * is asked again of that region's endpoint, which pinload makes from the
 * region's name (never from a Location), signed anew for it, as botocore
 * does; and that region is remembered for the bucket. Any other redirect,
 * and any region redirect from AWS_ENDPOINT_URL, is an error naming where
 * it pointed: no credential goes to another host, and no answer that was
 * not signed for is taken for the object. */
static void http_get(remote_http *rh, const char *url, int64_t from, int64_t to,
                     sink *k, attempt *a)
{
    if (!is_s3(url)) {
        http_once(rh, url, "", from, to, k, a);
        return;
    }
    char kept[REGION_MAX], there[REGION_MAX];
    const char *region = region_of(rh, url, kept);
    http_once(rh, url, region, from, to, k, a);
    if (!a->ok && !rh->s3_endpoint && answer_region(k, there) &&
        strcmp(there, region) != 0 &&
        (k->status == 301 || k->status == 307 || k->status == 400)) {
        region_keep(rh, url, there);
        region = there;
        http_once(rh, url, region, from, to, k, a);
    }
    if (!a->ok)
        s3_moved(k, region, a);
}

/* Sleeps before attempt `i` (1, 2...): 100 ms doubling, at most 5 s; 0 if
 * the loader is closing. */
static int backoff(const remote_http *rh, int i)
{
    long ms = BACKOFF_FIRST_MS;
    for (int k = 1; k < i && ms < BACKOFF_MAX_MS; k++)
        ms *= 2;
    if (ms > BACKOFF_MAX_MS)
        ms = BACKOFF_MAX_MS;
    for (long slept = 0; slept < ms; slept += 20) {
        if (stopping(rh))
            return 0;
        const struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* "URL: why (after N attempts)" into out. */
static void fetch_error(const char *url, const attempt *a, int attempts,
                        char *out, size_t cap)
{
    char shown[1024];
    http_display(url, shown, sizeof shown);
    const int k = snprintf(out, cap, "%s", shown);
    if (k < 0 || (size_t)k >= cap)
        return;
    if (attempts > 1)
        snprintf(out + k, cap - (size_t)k, ": %s (after %d attempts)", a->why,
                 attempts);
    else
        snprintf(out + k, cap - (size_t)k, ": %s", a->why);
}

/* ---- whole objects: a shard, an index, classes.txt ---- */

/* The command, run by /bin/sh in a process group of its own, writing its
 * standard output into fd from byte 0: the child's pid, or -1. */
static pid_t spawn(const char *cmd, int fd)
{
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (dup2(fd, 1) < 0)
            _exit(127);
        lseek(1, 0, SEEK_SET);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for the child: 0 with its *status; or -1, a saying why, once it
 * was killed (with its group) for writing no byte to fd for timeout_ms,
 * or because the loader closes. */
static int watch(const remote_http *rh, pid_t pid, int fd, int *status,
                 attempt *a)
{
    int64_t last_size = -1, still_ns = 0;
    while (waitpid(pid, status, WNOHANG) != pid) {
        struct stat st;
        const int64_t now = clock_now_ns();
        if (fstat(fd, &st) == 0 && st.st_size != last_size) {
            last_size = st.st_size;
            still_ns = now;
        }
        if (stopping(rh) ||
            now - still_ns > (int64_t)rh->timeout_ms * 1000000) {
            kill(-pid, SIGKILL);
            waitpid(pid, status, 0);
            snprintf(a->why, sizeof a->why, "%s",
                     stopping(rh) ? "closing" : "the command stalled");
            a->retry = !stopping(rh);
            return -1;
        }
        const struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The command's standard output into fd, from byte 0; a stall of
 * timeout_ms (no byte written) kills it. */
static void pipe_get(const remote_http *rh, const char *cmd, int fd, attempt *a)
{
    memset(a, 0, sizeof *a);
    if (ftruncate(fd, 0) != 0) {
        snprintf(a->why, sizeof a->why, "ftruncate: %s", strerror(errno));
        return;
    }
    const pid_t pid = spawn(cmd, fd);
    if (pid < 0) {
        snprintf(a->why, sizeof a->why, "fork: %s", strerror(errno));
        a->retry = 1;
        return;
    }
    int status = 0;
    if (watch(rh, pid, fd, &status, a) < 0)
        return;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        a->ok = 1;
        return;
    }
    if (WIFEXITED(status))
        snprintf(a->why, sizeof a->why, "the command exited with status %d",
                 WEXITSTATUS(status));
    else
        snprintf(a->why, sizeof a->why, "the command was killed by signal %d",
                 WTERMSIG(status));
    a->retry = 1;
}

/* Where the next attempt resumes: the bytes fd holds, unless they are
 * more than expected (then none). -1 if it cannot be truncated. */
static int64_t resume_at(int fd, int64_t expect)
{
    struct stat st;
    const int64_t have = fstat(fd, &st) == 0 ? st.st_size : 0;
    if (expect >= 0 && have > expect)
        return ftruncate(fd, 0) == 0 ? 0 : -1;
    return have;
}

/* One run of a pipe: command into fd: 1 if it wrote the whole, else 0
 * (a says why, and whether to try again). */
static int pipe_attempt(remote_http *rh, const char *url, int fd,
                        int64_t expect, attempt *a)
{
    pipe_get(rh, url + 5, fd, a);
    if (!a->ok)
        return 0;
    struct stat st;
    const int64_t got = fstat(fd, &st) == 0 ? st.st_size : -1;
    if (expect < 0 || got == expect)
        return 1;
    snprintf(a->why, sizeof a->why,
             "the command wrote %lld bytes, its index says %lld",
             (long long)got, (long long)expect);
    a->ok = 0;
    a->retry = 1;
    return 0;
}

/* One GET into fd from byte `have` on: 1 if fd now holds the whole, 0 if
 * not (a says why, and whether to try again), -1 if fd could not be
 * truncated (no attempt can help). */
static int http_attempt(remote_http *rh, const char *url, int fd, int64_t have,
                        int64_t expect, attempt *a)
{
    sink k = {.fd = fd, .base = have};
    http_get(rh, url, have, -1, &k, a);
    if (a->ok && have > 0 && k.status == 200) {
        /* The Range was ignored: the whole object came from 0. */
        if (ftruncate(fd, 0) != 0)
            return -1;
        k = (sink){.fd = fd, .base = 0};
        http_get(rh, url, 0, -1, &k, a);
        have = 0;
    }
    if (a->ok && k.status == 206 && k.range_start != have) {
        snprintf(a->why, sizeof a->why,
                 "asked for bytes from %lld, got them from %lld",
                 (long long)have, (long long)k.range_start);
        a->ok = 0;
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

/* Fetch url whole into the file open at fd (resuming what it holds, with
 * Range), until it holds `expect` bytes (or, for -1, what the server says
 * the whole is). 0, or PL_EIO with *a saying why (a->why: the last
 * attempt's). */
static int download(remote_http *rh, const char *url, int fd, int64_t expect,
                    int *attempts, attempt *a)
{
    int rc = PL_EIO;
    const int tries = 1 + (rh->retries < 0 ? 0 : rh->retries);
    for (*attempts = 0; *attempts < tries;) {
        if (*attempts > 0 && !backoff(rh, *attempts))
            break;
        ++*attempts;
        const int64_t have = resume_at(fd, expect);
        if (have < 0)
            break;
        const int done = expect >= 0 && have == expect ? 1
                         : http_is_pipe(url)
                             ? pipe_attempt(rh, url, fd, expect, a)
                             : http_attempt(rh, url, fd, have, expect, a);
        if (done != 0 || !a->retry) {
            rc = done > 0 ? 0 : PL_EIO;
            break;
        }
    }
    if (rc == 0 && fsync(fd) != 0) {
        snprintf(a->why, sizeof a->why, "fsync: %s", strerror(errno));
        rc = PL_EIO;
    }
    return rc;
}

/* Whether the store said it has no such object. */
static int absent(const attempt *a)
{
    return strcmp(a->why, "HTTP 404") == 0 || strcmp(a->why, "HTTP 403") == 0 ||
           strcmp(a->why, "HTTP 410") == 0;
}

int http_fetch(remote_http *h, const char *url, int fd, int64_t expect,
               char *err, size_t cap)
{
    attempt a = {0};
    int attempts = 0;
    const int rc = download(h, url, fd, expect, &attempts, &a);
    if (rc == 0)
        return 0;
    fetch_error(url, &a, attempts, err, cap);
    return absent(&a) ? HTTP_ABSENT : rc;
}

/* ---- ranges: one member of a shard ---- */

int http_range(remote_http *h, const char *url, int64_t off, int64_t size,
               void *dst, char *reason, size_t cap)
{
    const int tries = 1 + (h->retries < 0 ? 0 : h->retries);
    attempt a = {0};
    int i = 0;
    while (i < tries) {
        if (i > 0 && !backoff(h, i))
            break;
        i++;
        sink k = {.fd = -1, .buf = dst, .want = size};
        http_get(h, url, off, off + size - 1, &k, &a);
        if (a.ok && k.status == 200) {
            snprintf(a.why, sizeof a.why,
                     "the server ignores Range requests (HTTP 200 to one), "
                     "so members cannot be read alone: give the cache room "
                     "for the whole dataset (cache_limit)");
            a.ok = a.retry = 0;
        } else if (a.ok && (k.got != size || k.range_start != off)) {
            snprintf(a.why, sizeof a.why,
                     "a short body: %lld of %lld bytes from byte %lld",
                     (long long)k.got, (long long)size, (long long)off);
            a.ok = 0;
            a.retry = 1;
        }
        if (a.ok)
            return 0;
        if (!a.retry)
            break;
    }
    fetch_error(url, &a, i, reason, cap);
    return PL_EIO;
}
