/* The transfers of remote shards (remote_http.h): libcurl's handles and
 * their reuse, one GET with its retries, backoff and Range resume, SigV4
 * for s3://, pipe: commands, and URLs shown without their credentials. */
#include "remote_http.h"

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
 * path-style URL (AWS_ENDPOINT_URL) or AWS's virtual-hosted one. */
static char *request_url(const remote_http *h, const char *url)
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
                h->s3_region, slash);
    return p;
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
    if (k->status >= 300)
        return len; /* an error page: not data */
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
}

/* What every transfer sets: the target, the protocols (redirects
 * followed, never to another scheme), the certificate authorities, the
 * timeouts, and k as the sink of its headers, body and progress. */
static void set_transfer(CURL *h, const remote_http *rh, const char *url,
                         const char *target, sink *k)
{
    const int32_t timeout_ms = rh->timeout_ms;
    const char *ca = is_s3(url) && rh->s3_ca_file ? rh->s3_ca_file : rh->ca_file;
    curl_easy_setopt(h, CURLOPT_URL, target);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
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

/* An s3:// request signed with SigV4 when there are credentials: the
 * headers it needs, for the caller to free after the transfer. */
static struct curl_slist *sign_s3(const remote_http *rh, CURL *h,
                                  const char *url)
{
    if (!is_s3(url) || !rh->s3_key || !rh->s3_secret)
        return NULL;
    char sigv4[160];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", rh->s3_region);
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

/* GET url (from byte `from`, to `to` inclusive, or to the end for -1)
 * into k, on an idle handle (its connection reused) or a new one. */
static void http_get(remote_http *rh, const char *url, int64_t from, int64_t to,
                     sink *k, attempt *a)
{
    memset(a, 0, sizeof *a);
    pthread_once(&curl_once, curl_start);
    char *target = request_url(rh, url);
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
    struct curl_slist *hdr = sign_s3(rh, h, url);
    const CURLcode cc = curl_easy_perform(h);
    judge(h, cc, k, rh->timeout_ms, a);
    curl_slist_free_all(hdr);
    handle_put(rh, h);
    free(target);
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
