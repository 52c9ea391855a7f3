/* Remote shards (remote.h): URLs, the transfers (libcurl, which also signs
 * S3's SigV4), the node cache and its locks, the readers the workers call.
 *
 * The cache is a folder of files named after a hash of the shard's URL:
 * NAME (the whole shard, only ever renamed into place once complete),
 * NAME.idx (its index), NAME.lock (held exclusively by whoever fetches it:
 * one download per node) and NAME.part (a download under way, resumed by
 * the next holder of the lock if its fetcher died). A loader holds a
 * shared lock on every cached shard it has open; eviction takes the
 * least recently used shard (atime, set on every open) that it can lock
 * exclusively, so never one a rank reads. */
#include "remote.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/error.h"
#include "../common/grow.h"
#include "readers.h"
#include "sidecar.h"
#include "tar.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_RETRIES 5
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define FAILED_RETRY_NS (60 * 1000000000LL) /* a failed shard: asked again */
#define MAX_URLS (1 << 20)
#define INDEX_THREADS 8 /* threads fetching indexes at create */
#define HANDLES_KEPT 16 /* idle libcurl handles (connections) kept */

enum { SH_NONE, SH_FETCHING, SH_READY, SH_FAILED };

typedef struct remote_set remote_set;

typedef struct rshard {
    location_reader reader; /* first: the workers' handle is the shard */
    remote_set *set;
    char *url;    /* as given (may carry credentials) */
    char *name;   /* as shown: remote_display's */
    char *cache;  /* the cached shard's path */
    int64_t size; /* from its index */
    int ranged;   /* read member by member (no room in the cache) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state, fd; /* SH_READY: fd open, locked shared */
    int err_code;
    char err[512];
    int64_t failed_ns;
} rshard;

struct remote_set {
    rshard *s;
    int n;
    char *dir;
    int64_t limit;
    int32_t timeout_ms, retries;
    int ranged; /* the data is larger than the cache: ranged reads */
    /* S3, read from the environment at create */
    char *s3_endpoint, *s3_region, *s3_key, *s3_secret, *s3_token;
    atomic_int stop;
    pthread_t ahead;
    int ahead_started;
    logger *lg;
    atomic_int warned_full;
    /* Idle transfer handles, kept for their open connections (a ranged
     * read per sample would otherwise connect, and shake TLS hands, per
     * sample). handles_mu guards only the stack. */
    pthread_mutex_t handles_mu;
    CURL *handles[HANDLES_KEPT];
    int nhandles;
};

/* ---- URLs ---- */

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

int remote_is_url(const char *s)
{
    return has_prefix(s, "http://") || has_prefix(s, "https://") ||
           has_prefix(s, "s3://") || has_prefix(s, "pipe:");
}

static int is_pipe(const char *url)
{
    return has_prefix(url, "pipe:");
}

static int is_s3(const char *url)
{
    return has_prefix(url, "s3://");
}

void remote_display(const char *url, char *out, size_t cap)
{
    if (is_pipe(url)) {
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

static uint64_t fnv(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

/* The cache's name for `key` (a URL without credentials): a hash, then
 * its last component made safe for a file name. */
static char *cache_name(const char *dir, const char *key)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    char safe[96];
    size_t k = 0;
    for (; *base && k < sizeof safe - 1; base++)
        safe[k++] = isalnum((unsigned char)*base) || *base == '.' ||
                            *base == '-' || *base == '_'
                        ? *base
                        : '_';
    safe[k] = '\0';
    char *p = malloc(strlen(dir) + sizeof safe + 24);
    if (p)
        sprintf(p, "%s/%016llx-%s", dir, (unsigned long long)fnv(key), safe);
    return p;
}

/* The URL a request goes to: s3://bucket/key becomes the endpoint's
 * path-style URL (AWS_ENDPOINT_URL) or AWS's virtual-hosted one. */
static char *request_url(const remote_set *rs, const char *url)
{
    if (!is_s3(url))
        return strdup(url);
    const char *bk = url + 5;
    const char *slash = strchr(bk, '/');
    if (!slash)
        return NULL;
    char *p = malloc(strlen(url) + 256 +
                     (rs->s3_endpoint ? strlen(rs->s3_endpoint) : 0));
    if (!p)
        return NULL;
    if (rs->s3_endpoint)
        sprintf(p, "%s/%s", rs->s3_endpoint, bk);
    else
        sprintf(p, "https://%.*s.s3.%s.amazonaws.com%s", (int)(slash - bk), bk,
                rs->s3_region, slash);
    return p;
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
    remote_set *rs;
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
    } else if (now - k->moved_ns > (int64_t)k->rs->timeout_ms * 1000000) {
        k->stalled = 1;
        return 1;
    }
    return atomic_load_explicit(&k->rs->stop, memory_order_relaxed);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_start(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static CURL *handle_take(remote_set *rs)
{
    pthread_mutex_lock(&rs->handles_mu);
    CURL *h = rs->nhandles ? rs->handles[--rs->nhandles] : NULL;
    pthread_mutex_unlock(&rs->handles_mu);
    return h ? h : curl_easy_init();
}

/* Back to the stack, its options cleared and its connection kept. */
static void handle_put(remote_set *rs, CURL *h)
{
    curl_easy_reset(h);
    pthread_mutex_lock(&rs->handles_mu);
    if (rs->nhandles < HANDLES_KEPT) {
        rs->handles[rs->nhandles++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&rs->handles_mu);
    if (h)
        curl_easy_cleanup(h);
}

/* The outcome of one attempt. */
typedef struct attempt {
    int ok;        /* the whole requested body came */
    int retry;     /* worth another attempt */
    char why[256]; /* "HTTP 404", "Timeout was reached"... */
} attempt;

/* GET url (from byte `from`, to `to` inclusive, or to the end for -1)
 * into k. */
static void http_get(remote_set *rs, const char *url, int64_t from, int64_t to,
                     sink *k, attempt *a)
{
    memset(a, 0, sizeof *a);
    pthread_once(&curl_once, curl_start);
    char *target = request_url(rs, url);
    CURL *h = curl_ready && target ? handle_take(rs) : NULL;
    if (!h) {
        snprintf(a->why, sizeof a->why, "%s",
                 target ? "libcurl could not start" : "not a valid URL");
        free(target);
        return;
    }
    k->h = h;
    k->rs = rs;
    k->moved_ns = 0;
    k->moved = 0;
    k->stalled = 0;
    k->status = 0;
    k->got = 0;
    k->range_start = k->total = -1;
    char range[64];
    struct curl_slist *hdr = NULL;
    curl_easy_setopt(h, CURLOPT_URL, target);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)rs->timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                     (long)((rs->timeout_ms + 999) / 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, k);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
    if (from > 0 || to >= 0) {
        if (to >= 0)
            snprintf(range, sizeof range, "%lld-%lld", (long long)from,
                     (long long)to);
        else
            snprintf(range, sizeof range, "%lld-", (long long)from);
        curl_easy_setopt(h, CURLOPT_RANGE, range);
    }
    char sigv4[160];
    if (is_s3(url) && rs->s3_key && rs->s3_secret) {
        snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", rs->s3_region);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
        curl_easy_setopt(h, CURLOPT_USERNAME, rs->s3_key);
        curl_easy_setopt(h, CURLOPT_PASSWORD, rs->s3_secret);
        hdr = curl_slist_append(hdr, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (rs->s3_token) {
            char *t = malloc(strlen(rs->s3_token) + 32);
            if (t) {
                sprintf(t, "x-amz-security-token: %s", rs->s3_token);
                hdr = curl_slist_append(hdr, t);
                free(t);
            }
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    }
    const CURLcode cc = curl_easy_perform(h);
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
                 (int)rs->timeout_ms);
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
    curl_slist_free_all(hdr);
    handle_put(rs, h);
    free(target);
}

/* Sleeps before attempt `i` (1, 2...): 100 ms doubling, at most 5 s; 0 if
 * the loader is closing. */
static int backoff(remote_set *rs, int i)
{
    long ms = BACKOFF_FIRST_MS;
    for (int k = 1; k < i && ms < BACKOFF_MAX_MS; k++)
        ms *= 2;
    if (ms > BACKOFF_MAX_MS)
        ms = BACKOFF_MAX_MS;
    for (long slept = 0; slept < ms; slept += 20) {
        if (atomic_load(&rs->stop))
            return 0;
        const struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* ---- whole files: a shard, an index, classes.txt ---- */

/* The command's standard output into fd, from byte 0; a stall of
 * timeout_ms (no byte written) kills it. */
static void pipe_get(remote_set *rs, const char *cmd, int fd, attempt *a)
{
    memset(a, 0, sizeof *a);
    if (ftruncate(fd, 0) != 0) {
        snprintf(a->why, sizeof a->why, "ftruncate: %s", strerror(errno));
        return;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        snprintf(a->why, sizeof a->why, "fork: %s", strerror(errno));
        a->retry = 1;
        return;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (dup2(fd, 1) < 0)
            _exit(127);
        lseek(1, 0, SEEK_SET);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int64_t last_size = -1, still_ns = 0;
    int status = 0;
    for (;;) {
        const pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        struct stat st;
        const int64_t now = clock_now_ns();
        if (fstat(fd, &st) == 0 && st.st_size != last_size) {
            last_size = st.st_size;
            still_ns = now;
        }
        if (atomic_load(&rs->stop) ||
            now - still_ns > (int64_t)rs->timeout_ms * 1000000) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            snprintf(a->why, sizeof a->why, "%s",
                     atomic_load(&rs->stop) ? "closing"
                                            : "the command stalled");
            a->retry = !atomic_load(&rs->stop);
            return;
        }
        const struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
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

/* Fetch url whole into the file `part` (resuming what it holds, with
 * Range), until it holds `expect` bytes (or, for -1, what the server says
 * the whole is). 0, or PL_EIO with *a saying why (a->why: the last
 * attempt's). */
static int download(remote_set *rs, const char *url, const char *part,
                    int64_t expect, int *attempts, attempt *a)
{
    const int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(a->why, sizeof a->why, "%s: %s", part, strerror(errno));
        return PL_EIO;
    }
    int rc = PL_EIO;
    const int tries = 1 + (rs->retries < 0 ? 0 : rs->retries);
    for (*attempts = 0; *attempts < tries;) {
        if (*attempts > 0 && !backoff(rs, *attempts))
            break;
        ++*attempts;
        struct stat st;
        int64_t have = fstat(fd, &st) == 0 ? st.st_size : 0;
        if (expect >= 0 && have > expect) {
            if (ftruncate(fd, 0) != 0)
                break;
            have = 0;
        }
        if (expect >= 0 && have == expect) {
            rc = 0;
            break;
        }
        if (is_pipe(url)) {
            pipe_get(rs, url + 5, fd, a);
            if (a->ok) {
                const int64_t got = fstat(fd, &st) == 0 ? st.st_size : -1;
                if (expect < 0 || got == expect) {
                    rc = 0;
                    break;
                }
                snprintf(a->why, sizeof a->why,
                         "the command wrote %lld bytes, its index says %lld",
                         (long long)got, (long long)expect);
                a->ok = 0;
                a->retry = 1;
            }
        } else {
            sink k = {.fd = fd, .base = have};
            http_get(rs, url, have, -1, &k, a);
            if (a->ok && have > 0 && k.status == 200) {
                /* The Range was ignored: the whole object came from 0. */
                if (ftruncate(fd, 0) != 0)
                    break;
                sink k2 = {.fd = fd, .base = 0};
                k = k2;
                http_get(rs, url, 0, -1, &k, a);
                have = 0;
            }
            if (a->ok && k.status == 206 && k.range_start != have) {
                snprintf(a->why, sizeof a->why,
                         "asked for bytes from %lld, got them from %lld",
                         (long long)have, (long long)k.range_start);
                a->ok = 0;
                a->retry = 1;
                if (ftruncate(fd, 0) != 0)
                    break;
            }
            if (a->ok) {
                const int64_t whole = expect >= 0 ? expect : k.total;
                const int64_t now = have + k.got;
                if (whole < 0 || now == whole) {
                    rc = 0;
                    break;
                }
                snprintf(a->why, sizeof a->why,
                         "a short body: %lld of %lld bytes", (long long)now,
                         (long long)whole);
                a->ok = 0;
                a->retry = now < whole;
                if (now > whole && ftruncate(fd, 0) != 0)
                    break;
            }
        }
        if (!a->retry)
            break;
    }
    if (rc == 0 && fsync(fd) != 0) {
        snprintf(a->why, sizeof a->why, "fsync: %s", strerror(errno));
        rc = PL_EIO;
    }
    close(fd);
    return rc;
}

/* "URL: why (after N attempts)" into out. */
static void fetch_error(const char *url, const attempt *a, int attempts,
                        char *out, size_t cap)
{
    char shown[1024];
    remote_display(url, shown, sizeof shown);
    const int k = snprintf(out, cap, "%s", shown);
    if (k < 0 || (size_t)k >= cap)
        return;
    if (attempts > 1)
        snprintf(out + k, cap - (size_t)k, ": %s (after %d attempts)", a->why,
                 attempts);
    else
        snprintf(out + k, cap - (size_t)k, ": %s", a->why);
}

/* ---- the cache ---- */

/* PATH.lock, locked exclusively: waited for in 20 ms steps, so that a
 * closing loader does not wait for another process's download. -1 (errno
 * ECANCELED when closing). */
static int lock_file(remote_set *rs, const char *path)
{
    char *lk = malloc(strlen(path) + 8);
    if (!lk)
        return -1;
    sprintf(lk, "%s.lock", path);
    const int fd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    free(lk);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) ||
            atomic_load(&rs->stop)) {
            const int err = errno == EWOULDBLOCK ? ECANCELED : errno;
            close(fd);
            errno = err;
            return -1;
        }
        const struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return fd;
}

/* The cached shard at `path`, open and locked shared, if it is there
 * whole (`size` bytes; -1: any); else -1. Its atime says it was used. */
static int open_cached(const char *path, int64_t size)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (flock(fd, LOCK_SH) != 0 || fstat(fd, &st) != 0 || st.st_nlink == 0 ||
        (size >= 0 && st.st_size != size)) {
        close(fd);
        return -1;
    }
    const struct timespec t[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    futimens(fd, t);
    return fd;
}

typedef struct entry {
    char *name;
    int64_t size;
    int64_t used; /* atime, ns */
} entry;

static int by_use(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return x->used < y->used ? -1 : x->used > y->used;
}

static int ends_with(const char *name, const char *end)
{
    const size_t n = strlen(name), k = strlen(end);
    return name[0] != '.' && n > k && strcmp(name + n - k, end) == 0;
}

/* The size of the shard whose index is the file `idx` (under dirfd d),
 * from its header; 0 if there is none. */
static int64_t size_from_index(int d, const char *idx)
{
    const int fd = openat(d, idx, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned char b[16];
    int64_t v = 0;
    if (pread(fd, b, sizeof b, 0) == (ssize_t)sizeof b)
        for (int i = 0; i < 8; i++)
            v |= (int64_t)b[8 + i] << (8 * i);
    close(fd);
    return v > 0 ? v : 0;
}

/* Evict least recently used shards no rank holds until `need` more bytes
 * fit under the limit, counting the downloads under way at their whole
 * size (from their index). 0, or -1 if they cannot be made to fit. The
 * caller holds the cache's eviction lock, and creates its own .part before
 * it lets go, so that two fetchers never count the same room. */
static int make_room(remote_set *rs, int64_t need)
{
    if (rs->limit <= 0)
        return 0;
    if (need > rs->limit)
        return -1;
    DIR *d = opendir(rs->dir);
    if (!d)
        return -1;
    entry *e = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        const int part = ends_with(de->d_name, ".tar.part");
        if ((!part && !ends_with(de->d_name, ".tar")) ||
            fstatat(dirfd(d), de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (part) { /* a download under way: what it will be */
            char idx[NAME_MAX + 8];
            snprintf(idx, sizeof idx, "%.*s.idx", (int)(strlen(de->d_name) - 5),
                     de->d_name);
            const int64_t whole = size_from_index(dirfd(d), idx);
            total += whole > st.st_size ? whole : st.st_size;
            continue;
        }
        total += st.st_size;
        if (grow(&e, &cap, n + 1, sizeof *e, 64) < 0)
            break;
        e[n].name = strdup(de->d_name);
        e[n].size = st.st_size;
        e[n].used =
            (int64_t)st.st_atim.tv_sec * 1000000000 + st.st_atim.tv_nsec;
        if (e[n].name)
            n++;
    }
    if (n > 0)
        qsort(e, n, sizeof *e, by_use);
    for (size_t i = 0; i < n && total + need > rs->limit; i++) {
        const int fd = openat(dirfd(d), e[i].name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            unlinkat(dirfd(d), e[i].name, 0) == 0)
            total -= e[i].size;
        close(fd); /* a rank holding it shared kept it */
    }
    for (size_t i = 0; i < n; i++)
        free(e[i].name);
    free(e);
    closedir(d);
    return total + need <= rs->limit ? 0 : -1;
}

/* With the shard's lock held: the shard fetched into its cache file
 * (through NAME.part, renamed once whole). 0, or an error in err. */
static int fetch_locked(rshard *sh, char *err, size_t cap)
{
    remote_set *rs = sh->set;
    char *part = malloc(strlen(sh->cache) + 8);
    if (!part)
        return PL_ENOMEM;
    sprintf(part, "%s.part", sh->cache);
    attempt a;
    int attempts = 0;
    int rc = download(rs, sh->url, part, sh->size, &attempts, &a);
    if (rc == 0 && rename(part, sh->cache) != 0) {
        snprintf(a.why, sizeof a.why, "rename into the cache: %s",
                 strerror(errno));
        rc = PL_EIO;
    }
    if (rc < 0)
        fetch_error(sh->url, &a, attempts, err, cap);
    free(part);
    return rc;
}

/* Room for the shard, and its .part made, under the cache's eviction lock
 * (dir/.evict.lock). 0, or -1 if it cannot be had. */
static int reserve(rshard *sh)
{
    remote_set *rs = sh->set;
    if (rs->limit <= 0)
        return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.evict", rs->dir);
    const int ev = lock_file(rs, path);
    if (ev < 0)
        return -1;
    const int rc = make_room(rs, sh->size);
    if (rc == 0) {
        char *part = malloc(strlen(sh->cache) + 8);
        int fd = -1;
        if (part) {
            sprintf(part, "%s.part", sh->cache);
            fd = open(part, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        }
        if (fd >= 0)
            close(fd);
        free(part);
    }
    close(ev);
    return rc;
}

/* The shard, whole in the node's cache: [out] *fd open and locked shared.
 * Whoever takes the lock first fetches it; the others find it there. */
static int cache_get(rshard *sh, int *fd, char *err, size_t cap)
{
    if ((*fd = open_cached(sh->cache, sh->size)) >= 0)
        return 0;
    const int lk = lock_file(sh->set, sh->cache);
    if (lk < 0) {
        snprintf(err, cap, "%s: cannot lock it in the cache %s: %s", sh->name,
                 sh->set->dir, strerror(errno));
        return PL_EIO;
    }
    int rc = 0;
    if ((*fd = open_cached(sh->cache, sh->size)) < 0) {
        if (reserve(sh) < 0) {
            rc = 1; /* no room: read it member by member */
        } else if ((rc = fetch_locked(sh, err, cap)) == 0 &&
                   (*fd = open_cached(sh->cache, sh->size)) < 0) {
            snprintf(err, cap, "%s: evicted from the cache as it came",
                     sh->name);
            rc = PL_EIO;
        }
    }
    close(lk);
    return rc;
}

/* ---- the workers' reader ---- */

static int ranged_read(rshard *sh, int64_t off, int64_t size, void *dst,
                       char *reason, size_t cap)
{
    remote_set *rs = sh->set;
    const int tries = 1 + (rs->retries < 0 ? 0 : rs->retries);
    attempt a = {0};
    int i = 0;
    while (i < tries) {
        if (i > 0 && !backoff(rs, i))
            break;
        i++;
        sink k = {.fd = -1, .buf = dst, .want = size};
        http_get(rs, sh->url, off, off + size - 1, &k, &a);
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
    fetch_error(sh->url, &a, i, reason, cap);
    return PL_EIO;
}

/* The shard ready to read: fetched (once per loader; the cache makes it
 * once per node), or its error, kept for FAILED_RETRY_NS. 1: read it
 * member by member instead. */
static int shard_ready(rshard *sh, int *fd, char *reason, size_t cap)
{
    pthread_mutex_lock(&sh->mu);
    while (sh->state == SH_FETCHING)
        pthread_cond_wait(&sh->cv, &sh->mu);
    if (sh->state == SH_FAILED &&
        clock_now_ns() - sh->failed_ns < FAILED_RETRY_NS) {
        snprintf(reason, cap, "%s", sh->err);
        const int code = sh->err_code;
        pthread_mutex_unlock(&sh->mu);
        return code;
    }
    if (sh->state == SH_READY || sh->ranged) {
        *fd = sh->fd;
        pthread_mutex_unlock(&sh->mu);
        return sh->ranged ? 1 : 0;
    }
    sh->state = SH_FETCHING;
    pthread_mutex_unlock(&sh->mu);
    char err[512] = "";
    int got = -1;
    const int rc = cache_get(sh, &got, err, sizeof err);
    pthread_mutex_lock(&sh->mu);
    if (rc == 0) {
        sh->fd = got;
        sh->state = SH_READY;
    } else if (rc == 1) {
        sh->ranged = 1;
        sh->state = SH_NONE;
    } else {
        sh->state = SH_FAILED;
        sh->err_code = rc;
        sh->failed_ns = clock_now_ns();
        snprintf(sh->err, sizeof sh->err, "%s", err);
    }
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
    if (rc == 1 && atomic_exchange(&sh->set->warned_full, 1) == 0)
        log_msg(sh->set->lg, PL_LOG_WARNING,
                "the cache %s is full of shards other ranks read: %s and "
                "any other that does not fit are read member by member",
                sh->set->dir, sh->name);
    if (rc < 0)
        snprintf(reason, cap, "%s", err);
    *fd = got;
    return rc;
}

static int shard_read(const location_reader *r, int64_t off, int64_t size,
                      void *dst, char *reason, size_t cap)
{
    rshard *sh = (rshard *)r;
    if (size == 0) /* nothing to fetch: the decoder says what is wrong */
        return 0;
    int fd = -1;
    int rc;
    if (sh->set->ranged) { /* whole only if create fetched it to index it */
        pthread_mutex_lock(&sh->mu);
        rc = sh->state == SH_READY ? 0 : 1;
        fd = sh->fd;
        pthread_mutex_unlock(&sh->mu);
    } else {
        rc = shard_ready(sh, &fd, reason, cap);
    }
    if (rc == 1)
        return ranged_read(sh, off, size, dst, reason, cap);
    if (rc < 0)
        return rc;
    int64_t got = 0;
    while (got < size) {
        const ssize_t n =
            pread(fd, (uint8_t *)dst + got, (size_t)(size - got), off + got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(reason, cap, "%s: the cached copy %s %s", sh->name,
                     sh->cache, n < 0 ? strerror(errno) : "ends early");
            return PL_EIO;
        }
        got += n;
    }
    return 0;
}

/* The thread that fetches the shards ahead of the workers, in order. */
static void *fetch_ahead(void *arg)
{
    remote_set *rs = arg;
    for (int i = 0; i < rs->n && !atomic_load(&rs->stop); i++) {
        int fd;
        char why[512];
        shard_ready(&rs->s[i], &fd, why, sizeof why);
    }
    return NULL;
}

static void set_stop(void *p)
{
    atomic_store(&((remote_set *)p)->stop, 1);
}

static void set_free(void *p)
{
    remote_set *rs = p;
    if (!rs)
        return;
    atomic_store(&rs->stop, 1);
    if (rs->ahead_started)
        pthread_join(rs->ahead, NULL);
    for (int i = 0; i < rs->n; i++) {
        rshard *sh = &rs->s[i];
        if (sh->fd >= 0)
            close(sh->fd);
        pthread_mutex_destroy(&sh->mu);
        pthread_cond_destroy(&sh->cv);
        free(sh->url);
        free(sh->name);
        free(sh->cache);
    }
    for (int i = 0; i < rs->nhandles; i++)
        curl_easy_cleanup(rs->handles[i]);
    pthread_mutex_destroy(&rs->handles_mu);
    free(rs->s);
    free(rs->dir);
    free(rs->s3_endpoint);
    free(rs->s3_region);
    free(rs->s3_key);
    free(rs->s3_secret);
    free(rs->s3_token);
    free(rs);
}

/* ---- create: the set, the cache folder, the indexes ---- */

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

static int mkdirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return -1;
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = '\0';
            mkdir(p, 0755);
            *c = '/';
        }
    mkdir(p, 0755);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static char *default_cache_dir(void)
{
    const char *env = getenv("PINLOAD_CACHE_DIR");
    if (env && *env)
        return strdup(env);
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[PATH_MAX];
    if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/pinload/shards", xdg);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.cache/pinload/shards", home);
    else
        snprintf(buf, sizeof buf, "/tmp/pinload-%ld/shards", (long)getuid());
    return strdup(buf);
}

static remote_set *set_new(char **urls, int n, const remote_opts *o, logger *lg)
{
    remote_set *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    pthread_mutex_init(&rs->handles_mu, NULL);
    rs->lg = lg;
    rs->limit = o->cache_limit;
    rs->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    rs->retries = o->retries != 0 ? o->retries : DEFAULT_RETRIES;
    rs->dir = o->cache_dir && *o->cache_dir ? strdup(o->cache_dir)
                                            : default_cache_dir();
    rs->s3_endpoint = env_dup("AWS_ENDPOINT_URL");
    if (rs->s3_endpoint) {
        size_t k = strlen(rs->s3_endpoint);
        while (k > 0 && rs->s3_endpoint[k - 1] == '/')
            rs->s3_endpoint[--k] = '\0';
    }
    rs->s3_region = env_dup("AWS_REGION");
    if (!rs->s3_region)
        rs->s3_region = env_dup("AWS_DEFAULT_REGION");
    if (!rs->s3_region)
        rs->s3_region = strdup("us-east-1");
    rs->s3_key = env_dup("AWS_ACCESS_KEY_ID");
    rs->s3_secret = env_dup("AWS_SECRET_ACCESS_KEY");
    rs->s3_token = env_dup("AWS_SESSION_TOKEN");
    rs->s = calloc((size_t)n, sizeof *rs->s);
    if (!rs->dir || !rs->s || !rs->s3_region) {
        set_free(rs);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        rshard *sh = &rs->s[i];
        pthread_mutex_init(&sh->mu, NULL);
        pthread_cond_init(&sh->cv, NULL);
        rs->n++;
        sh->reader.read = shard_read;
        sh->set = rs;
        sh->fd = -1;
        sh->size = -1;
        char shown[2048], key[2200];
        remote_display(urls[i], shown, sizeof shown);
        if (is_s3(urls[i]))
            snprintf(key, sizeof key, "%s@%s", shown,
                     rs->s3_endpoint ? rs->s3_endpoint : rs->s3_region);
        else
            snprintf(key, sizeof key, "%s", is_pipe(urls[i]) ? urls[i] : shown);
        sh->url = strdup(urls[i]);
        sh->name = strdup(shown);
        sh->cache = cache_name(rs->dir, key);
        if (!sh->url || !sh->name || !sh->cache) {
            set_free(rs);
            return NULL;
        }
    }
    return rs;
}

/* A small file at url into `path` (tmp + rename), unless it is there
 * already. 0; 1 if the server has none (404, 403 without credentials, or
 * the command failed); or an error naming the URL. */
static int fetch_small(remote_set *rs, const char *url, const char *path,
                       char *err, size_t cap)
{
    struct stat st;
    if (stat(path, &st) == 0)
        return 0;
    char part[PATH_MAX + 32];
    snprintf(part, sizeof part, "%s.part.%ld", path, (long)getpid());
    unlink(part);
    attempt a;
    int attempts = 0;
    int rc = download(rs, url, part, -1, &attempts, &a);
    if (rc == 0 && rename(part, path) != 0)
        rc = PL_EIO;
    if (rc < 0) {
        unlink(part);
        if (strcmp(a.why, "HTTP 404") == 0 || strcmp(a.why, "HTTP 403") == 0 ||
            strcmp(a.why, "HTTP 410") == 0)
            return 1;
        fetch_error(url, &a, attempts, err, cap);
    }
    return rc;
}

/* Shard i's index from URL.idx, fetched into the cache beside where the
 * shard goes (once per node: under the shard's lock). 1 if read, 0 if the
 * store has none, or an error. */
static int index_from_idx(rshard *sh, tar_index *t, char *err, size_t cap)
{
    char idx[PATH_MAX + 16];
    snprintf(idx, sizeof idx, "%s.idx", sh->cache);
    if (sidecar_read_any(idx, t, &sh->size))
        return 1;
    if (is_pipe(sh->url))
        return 0;
    const int lk = lock_file(sh->set, sh->cache);
    if (lk < 0) {
        snprintf(err, cap, "%s: cannot lock it in the cache %s: %s", sh->name,
                 sh->set->dir, strerror(errno));
        return PL_EIO;
    }
    int rc = 1;
    if (!sidecar_read_any(idx, t, &sh->size)) {
        unlink(idx); /* damaged: fetched anew */
        char *url = malloc(strlen(sh->url) + 8);
        if (!url) {
            close(lk);
            return PL_ENOMEM;
        }
        sprintf(url, "%s.idx", sh->url);
        rc = fetch_small(sh->set, url, idx, err, cap);
        free(url);
        if (rc == 0 && !sidecar_read_any(idx, t, &sh->size)) {
            snprintf(err, cap, "%s.idx: not a pinload shard index", sh->name);
            rc = PL_ECORRUPT;
        } else if (rc == 0) {
            rc = 1;
        } else if (rc == 1) {
            rc = 0;
        }
    }
    close(lk);
    return rc;
}

/* Shard i fetched whole (create needs its headers) and indexed; its index
 * kept in the cache for the next create. */
static int index_from_shard(rshard *sh, tar_index *t, char *err, size_t cap)
{
    int fd = -1;
    int rc = cache_get(sh, &fd, err, cap);
    if (rc == 1) {
        snprintf(err, cap,
                 "%s has no index (.idx) and the cache %s has no room to "
                 "fetch it whole and index it (cache_limit)",
                 sh->name, sh->set->dir);
        return PL_EIO;
    }
    if (rc < 0)
        return rc;
    struct stat st;
    rc = fstat(fd, &st) == 0 ? 0 : PL_EIO;
    if (rc == 0)
        rc = tar_scan(fd, sh->name, t);
    if (rc == 0)
        rc = tar_read_small(fd, sh->name, t);
    if (rc < 0) {
        snprintf(err, cap, "%s", pl_last_error());
        close(fd);
        return rc;
    }
    char idx[PATH_MAX + 16];
    snprintf(idx, sizeof idx, "%s.idx", sh->cache);
    sidecar_write_at(idx, &st, t);
    sh->size = st.st_size;
    pthread_mutex_lock(&sh->mu);
    sh->fd = fd;
    sh->state = SH_READY;
    pthread_mutex_unlock(&sh->mu);
    return 0;
}

/* classes.txt beside the first shard, into the cache: its path in out, or
 * "" if the store has none. */
static int fetch_classes(remote_set *rs, const char *first, char *out,
                         size_t cap)
{
    out[0] = '\0';
    if (is_pipe(first))
        return 0;
    const char *slash = strrchr(first, '/');
    if (!slash || slash < strstr(first, "://") + 3)
        return 0;
    char url[4096], shown[4096], key[4200];
    snprintf(url, sizeof url, "%.*sclasses.txt", (int)(slash - first + 1),
             first);
    remote_display(url, shown, sizeof shown);
    if (is_s3(url))
        snprintf(key, sizeof key, "%s@%s", shown,
                 rs->s3_endpoint ? rs->s3_endpoint : rs->s3_region);
    else
        snprintf(key, sizeof key, "%s", shown);
    char *path = cache_name(rs->dir, key);
    if (!path)
        return PL_ENOMEM;
    char err[1024];
    const int rc = fetch_small(rs, url, path, err, sizeof err);
    if (rc == 0)
        snprintf(out, cap, "%s", path);
    free(path);
    if (rc < 0)
        return err_set(rc, "pl_loader_create: %s", err);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Indexing on a few threads: the requests are latency, not CPU. */
typedef struct index_pool {
    remote_set *rs;
    tar_index *t;
    int *rc;
    char (*err)[512];
    int whole; /* 0: the .idx files; 1: the shards without one, whole */
    atomic_int next;
} index_pool;

static void *index_main(void *arg)
{
    index_pool *p = arg;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->rs->n;) {
        rshard *sh = &p->rs->s[i];
        if (!p->whole)
            p->rc[i] =
                index_from_idx(sh, &p->t[i], p->err[i], sizeof p->err[i]);
        else if (sh->size < 0)
            p->rc[i] =
                index_from_shard(sh, &p->t[i], p->err[i], sizeof p->err[i]);
    }
    return NULL;
}

/* One pass of the pool; the first shard's error in order, if any. */
static int index_pass(index_pool *p)
{
    atomic_init(&p->next, 0);
    pthread_t th[INDEX_THREADS];
    int started = 0;
    for (; started < INDEX_THREADS && started < p->rs->n - 1; started++)
        if (pthread_create(&th[started], NULL, index_main, p) != 0)
            break;
    index_main(p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < p->rs->n; i++)
        if (p->rc[i] < 0)
            return err_set(p->rc[i], "pl_loader_create: %s", p->err[i]);
    return 0;
}

/* Every shard's index: from the .idx files first; then, said beforehand,
 * the shards without one fetched whole. */
static int index_all(remote_set *rs, tar_index *t, logger *lg)
{
    index_pool p = {.rs = rs, .t = t};
    p.rc = calloc((size_t)rs->n, sizeof *p.rc);
    p.err = calloc((size_t)rs->n, sizeof *p.err);
    int rc = p.rc && p.err ? index_pass(&p) : PL_ENOMEM;
    int missing = 0, first = -1;
    for (int i = 0; rc == 0 && i < rs->n; i++)
        if (rs->s[i].size < 0 && !missing++)
            first = i;
    if (missing)
        log_msg(lg, PL_LOG_NOTICE,
                "%d of %d remote shard(s) have no index beside them "
                "(SHARD.idx, as pinload-pack writes it): create fetches "
                "those %d shard(s) whole into %s to index them, first %s",
                missing, rs->n, missing, rs->dir, rs->s[first].name);
    if (missing) {
        p.whole = 1;
        rc = index_pass(&p);
    }
    free(p.rc);
    free(p.err);
    if (rc == PL_ENOMEM)
        return err_set(rc, "pl_loader_create: out of memory");
    return rc;
}

/* Whole shards when the cache holds the data, else members by ranged
 * requests (the exact order reads any member at any time). */
static int choose_mode(remote_set *rs, logger *lg)
{
    int64_t total = 0;
    int pipes = 0;
    for (int i = 0; i < rs->n; i++) {
        total += rs->s[i].size;
        pipes += is_pipe(rs->s[i].url);
    }
    if (rs->limit <= 0 || total <= rs->limit)
        return 0;
    if (pipes)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.cache_limit: %lld bytes is "
                       "less than the %lld bytes of the %d shards, and a "
                       "pipe: shard cannot be read member by member: raise "
                       "the limit, or use http(s):// or s3:// URLs",
                       (long long)rs->limit, (long long)total, rs->n);
    rs->ranged = 1;
    log_msg(lg, PL_LOG_NOTICE,
            "the %d remote shards (%lld bytes) exceed cache_limit (%lld "
            "bytes): each member is read alone with a ranged request, in the "
            "exact order, and no shard is cached whole",
            rs->n, (long long)total, (long long)rs->limit);
    return 0;
}

int remote_read(catalog *c, char **urls, int n, const remote_opts *o,
                logger *lg)
{
    qsort(urls, (size_t)n, sizeof *urls, cmp_str);
    remote_set *rs = set_new(urls, n, o, lg);
    if (!rs)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    if (mkdirs(rs->dir) < 0) {
        const int rc = err_set(PL_EIO,
                               "pl_loader_create: config.cache_dir: %s: "
                               "cannot make or use it: %s",
                               rs->dir, strerror(errno));
        set_free(rs);
        return rc;
    }
    catalog_adopt(c, rs, set_stop, set_free);
    tar_index *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    int rc = index_all(rs, t, lg);
    if (rc == 0)
        rc = choose_mode(rs, lg);
    int32_t max_label = 0;
    unread_members unread = {0};
    for (int i = 0; i < n && rc == 0; i++) {
        int id;
        rc = catalog_add_reader(c, &rs->s[i].reader, &id);
        if (rc == 0)
            rc = shards_add_indexed(c, id, rs->s[i].name, &t[i], &max_label,
                                    &unread);
    }
    if (rc == 0)
        shards_say_unread(&unread, lg);
    for (int i = 0; i < n; i++)
        tar_index_free(&t[i]);
    free(t);
    char classes[PATH_MAX + 64];
    if (rc == 0)
        rc = fetch_classes(rs, urls[0], classes, sizeof classes);
    if (rc == 0)
        rc = shards_add_classes(c, classes, max_label, lg);
    if (rc == 0)
        log_msg(lg, PL_LOG_NOTICE, "%d remote shard(s) through the cache %s", n,
                rs->dir);
    if (rc == 0 && !rs->ranged &&
        pthread_create(&rs->ahead, NULL, fetch_ahead, rs) == 0)
        rs->ahead_started = 1;
    return rc;
}

/* ---- which data is remote ---- */

static int push(char ***p, int *n, size_t *cap, char *s)
{
    if (!s || *n >= MAX_URLS ||
        grow(p, cap, (size_t)*n + 1, sizeof **p, 64) < 0) {
        free(s);
        return PL_ENOMEM;
    }
    (*p)[(*n)++] = s;
    return 0;
}

static void urls_free(char **p, int n)
{
    for (int i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

/* A local file whose lines (blank and # lines aside) are URLs. */
static int list_of_urls(const char *path, char ***out, int *n)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    /* Lines of a bounded length: a shard or an image named as data is
     * not read whole looking for a newline. */
    char line[8192];
    size_t cap = 0;
    ssize_t len;
    int rc = 1, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        len = (ssize_t)strlen(line);
        if (len == (ssize_t)sizeof line - 1 && line[len - 1] != '\n') {
            rc = *n ? err_set(PL_EINVAL,
                              "pl_loader_create: %s:%d: a line over %d bytes "
                              "in a list of URLs",
                              path, lineno + 1, (int)sizeof line - 2)
                    : 0;
            break;
        }
        lineno++;
        while (len > 0 && isspace((unsigned char)line[len - 1]))
            line[--len] = '\0';
        char *s = line;
        if (lineno == 1 && strncmp(s, "\xef\xbb\xbf", 3) == 0)
            s += 3;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s || *s == '#')
            continue;
        if (!remote_is_url(s)) {
            if (*n)
                rc = err_set(PL_EINVAL,
                             "pl_loader_create: %s:%d: expected a URL "
                             "(http(s)://, s3://, pipe:), as on the lines "
                             "before",
                             path, lineno);
            else
                rc = 0;
            break;
        }
        if ((rc = push(out, n, &cap, strdup(s))) < 0)
            break;
        rc = 1;
    }
    fclose(f);
    if (rc <= 0 || *n == 0) {
        urls_free(*out, *n);
        *out = NULL;
        *n = 0;
        return rc < 0 ? rc : 0;
    }
    return 1;
}

int remote_detect(const char *data, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!remote_is_url(data))
        return list_of_urls(data, out, n);
    const int rc = shards_expand_braces(data, out, n);
    if (rc != 0)
        return rc;
    size_t cap = 0;
    const int p = push(out, n, &cap, strdup(data));
    return p < 0 ? p : 1;
}
