/* The transfers (transfer.h): the schemes' table, and what every scheme
 * shares: attempts retried with backoff, a whole object resumed where the
 * last attempt stopped and synced, and the message naming the URL. */
#include "transfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    {"http://", &scheme_http},
    {"https://", &scheme_http},
    {"s3://", &scheme_s3},
    {"pipe:", &scheme_pipe},
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
    t->http = http_pool_new();
    t->s3 = s3_conf_new();
    if (!t->http || !t->s3) {
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
    free(t);
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
        if (*attempts > 0 && !backoff(t, *attempts))
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

int transfer_fetch(transfers *t, const char *url, int fd, int64_t expect,
                   char *err, size_t cap)
{
    attempt a = {0};
    int attempts = 0;
    const int rc = download(t, url, fd, expect, &attempts, &a);
    if (rc == 0)
        return 0;
    fetch_error(url, &a, attempts, err, cap);
    return absent(&a) ? TRANSFER_ABSENT : rc;
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
        if (i > 0 && !backoff(t, i))
            break;
        i++;
        s->range(t, url, off, size, dst, &a);
        if (a.ok)
            return 0;
        if (!a.retry)
            break;
    }
    fetch_error(url, &a, i, reason, cap);
    return PL_EIO;
}
