/* The transfers (transfer.h): the schemes' table, and what every scheme
 * shares: attempts retried with backoff, a whole object resumed where the
 * last attempt stopped and synced, and the message naming the URL. */
#include "transfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinload.h"
#include "scheme.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_RETRIES 5
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000

/* The schemes: each URL prefix and the row (scheme.h) it takes. */
static const struct {
    const char *prefix;
    const scheme *row;
} schemes[] = {
    {"http://", &scheme_http}, {"https://", &scheme_http},
    {"s3://", &scheme_s3},     {"gs://", &scheme_gs},
    {"hf://", &scheme_hf},     {"pipe:", &scheme_pipe},
};

/* The stores users name that no row takes, and what to do instead (the
 * first whose prefix matches; the last, any scheme at all). */
static const struct {
    const char *scheme; /* "az" for az://...; "" for any other */
    const char *instead;
} refusals[] = {
    {"gcs", "Google Cloud Storage is gs://BUCKET/KEY (its XML API, with an "
            "HMAC key in GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY)"},
    {"s3a", "S3 is s3://BUCKET/KEY"},
    {"s3n", "S3 is s3://BUCKET/KEY"},
    {"az", "read Azure Blob Storage through a command, as pipe:az storage "
           "blob download --account-name A --container-name C --name KEY "
           "--file /dev/stdout"},
    {"abfs", "read Azure storage through a command, as pipe:az storage "
             "blob download ... --file /dev/stdout"},
    {"abfss", "read Azure storage through a command, as pipe:az storage "
              "blob download ... --file /dev/stdout"},
    {"hdfs", "read HDFS through a command, as pipe:hdfs dfs -cat URL"},
    {"file", "name the local file without file://"},
    {"", "read it through a command that writes the shard to its standard "
         "output, as pipe:COMMAND (WebDataset's convention)"},
};

/* url's row, or NULL. */
static const scheme *scheme_find(const char *url)
{
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++)
        if (strncmp(url, schemes[i].prefix, strlen(schemes[i].prefix)) == 0)
            return schemes[i].row;
    return NULL;
}

/* The row a transfer of url takes: its scheme's; any other URL goes to
 * libcurl as an http(s):// one does, which refuses it. */
static const scheme *scheme_of(const char *url)
{
    const scheme *s = scheme_find(url);
    return s ? s : &scheme_http;
}

int transfer_knows(const char *url)
{
    return scheme_find(url) != NULL;
}

int transfer_refusal(const char *s, char *out, size_t cap)
{
    const size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz"
                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
    if (n == 0 || strncmp(s + n, "://", 3) != 0 || transfer_knows(s))
        return 0;
    size_t i = 0;
    while (refusals[i].scheme[0] &&
           !(strlen(refusals[i].scheme) == n &&
             strncasecmp(s, refusals[i].scheme, n) == 0))
        i++;
    snprintf(out, cap,
             "%.*s:// is not a scheme pinload reads (http://, https://, "
             "s3://, gs://, hf://, pipe:): %s",
             (int)(n < 32 ? n : 32), s, refusals[i].instead);
    return 1;
}

int transfer_is_command(const char *url)
{
    const scheme *s = scheme_find(url);
    return s && s->command;
}

void transfer_display(const char *url, char *out, size_t cap)
{
    scheme_of(url)->display(url, out, cap);
}

void transfer_cache_key(const transfers *t, const char *url, char *out,
                        size_t cap)
{
    scheme_of(url)->cache_key(t, url, out, cap);
}

/* ---- the transfers' life ---- */

transfers *transfers_new(int32_t timeout_ms, int32_t retries, atomic_int *stop)
{
    transfers *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->stop = stop;
    t->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    t->retries = retries != 0 ? retries : DEFAULT_RETRIES;
    atomic_init(&t->deadline_ns, 0);
    t->http = http_pool_new();
    t->s3 = s3_conf_new();
    t->gs = gs_conf_new();
    t->hf = hf_conf_new();
    if (!t->http || !t->s3 || !t->gs || !t->hf) {
        transfers_free(t);
        return NULL;
    }
    return t;
}

void transfers_free(transfers *t)
{
    if (!t)
        return;
    http_pool_free(t->http);
    s3_conf_free(t->s3);
    gs_conf_free(t->gs);
    hf_conf_free(t->hf);
    free(t);
}

void transfer_deadline(transfers *t, int32_t ms)
{
    t->deadline_ms = ms > 0 ? ms : 0;
    atomic_store(&t->deadline_ns,
                 ms > 0 ? (int64_t)clock_now_ns() + (int64_t)ms * 1000000 : 0);
}

int transfer_stopping(const transfers *t)
{
    return transfers_stopping(t);
}

/* ---- attempts ---- */

/* Sleeps before attempt `i` (1, 2...): 100 ms doubling, at most 5 s; 0 if
 * the loader is closing. */
static int backoff(const transfers *t, int i)
{
    long ms = BACKOFF_FIRST_MS;
    for (int k = 1; k < i && ms < BACKOFF_MAX_MS; k++)
        ms *= 2;
    if (ms > BACKOFF_MAX_MS)
        ms = BACKOFF_MAX_MS;
    for (long slept = 0; slept < ms; slept += 20) {
        if (transfers_stopping(t))
            return 0;
        const struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* After the attempts: if the loader's closing or the deadline cut them,
 * a->why says so (after the last attempt's why, if one was made). */
static void say_cut(const transfers *t, attempt *a, int attempts)
{
    if (atomic_load(t->stop)) {
        if (attempts == 0)
            snprintf(a->why, sizeof a->why, "the loader is closing");
        return;
    }
    if (!transfers_past_deadline(t) ||
        strstr(a->why, "remote_create_timeout_ms"))
        return;
    char last[sizeof a->why];
    snprintf(last, sizeof last, "%s", attempts > 0 ? a->why : "");
    snprintf(a->why, sizeof a->why,
             "%.220s%screate's deadline passed "
             "(config.remote_create_timeout_ms, %d ms)",
             last, last[0] ? "; then " : "", (int)t->deadline_ms);
}

/* "URL: why (after N attempts)" into out. */
static void fetch_error(const char *url, const attempt *a, int attempts,
                        char *out, size_t cap)
{
    char shown[1024];
    transfer_display(url, shown, sizeof shown);
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

/* Fetch url whole into the file open at fd (resuming what it holds, with
 * Range), until it holds `expect` bytes (or, for -1, what the server says
 * the whole is). 0, or PL_EIO with *a saying why (a->why: the last
 * attempt's). */
static int download(transfers *t, const char *url, int fd, int64_t expect,
                    int *attempts, attempt *a)
{
    const scheme *s = scheme_of(url);
    int rc = PL_EIO;
    const int tries = 1 + (t->retries < 0 ? 0 : t->retries);
    for (*attempts = 0; *attempts < tries;) {
        if (transfers_stopping(t) || (*attempts > 0 && !backoff(t, *attempts)))
            break;
        ++*attempts;
        const int64_t have = resume_at(fd, expect);
        if (have < 0)
            break;
        const int done = expect >= 0 && have == expect
                             ? 1
                             : s->whole(t, url, fd, have, expect, a);
        if (done != 0 || !a->retry) {
            rc = done > 0 ? 0 : PL_EIO;
            break;
        }
    }
    if (rc == 0 && fsync(fd) != 0) {
        const int e = errno;
        snprintf(a->why, sizeof a->why, "fsync: %s", strerror(e));
        a->no_room = e == ENOSPC || e == EDQUOT || e == EFBIG;
        rc = PL_EIO;
    }
    if (rc != 0)
        say_cut(t, a, *attempts);
    return rc;
}

/* Whether the store said it has no such object. */
static int absent(const attempt *a)
{
    return strcmp(a->why, "HTTP 404") == 0 || strcmp(a->why, "HTTP 403") == 0 ||
           strcmp(a->why, "HTTP 410") == 0;
}

int transfer_fetch(transfers *t, const char *url, int fd, int64_t expect,
                   char *err, size_t cap)
{
    attempt a = {0};
    int attempts = 0;
    const int rc = download(t, url, fd, expect, &attempts, &a);
    if (rc == 0)
        return 0;
    fetch_error(url, &a, attempts, err, cap);
    return absent(&a) ? TRANSFER_ABSENT : a.no_room ? TRANSFER_NO_ROOM : rc;
}

/* ---- ranges: one member of a shard ---- */

int transfer_range(transfers *t, const char *url, int64_t off, int64_t size,
                   void *dst, char *reason, size_t cap)
{
    /* A scheme without ranges (pipe:, asked for one when a full cache
     * leaves no room for its shard) is handed to libcurl, which refuses
     * the URL, as it always was. */
    const scheme *s = scheme_of(url)->range ? scheme_of(url) : &scheme_http;
    const int tries = 1 + (t->retries < 0 ? 0 : t->retries);
    attempt a = {0};
    int i = 0;
    while (i < tries) {
        if (transfers_stopping(t) || (i > 0 && !backoff(t, i)))
            break;
        i++;
        s->range(t, url, off, size, dst, &a);
        if (a.ok)
            return 0;
        if (!a.retry)
            break;
    }
    say_cut(t, &a, i);
    fetch_error(url, &a, i, reason, cap);
    return a.no_ranges ? TRANSFER_NO_RANGES : PL_EIO;
}
