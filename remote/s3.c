/* s3:// (the schemes' table, scheme.h): the S3 settings from the
 * environment, each request to its endpoint (AWS_ENDPOINT_URL) or to the
 * bucket's region at AWS, signed with SigV4 (libcurl's), never
 * redirected: a region redirect asked again of the region's endpoint and
 * signed anew for it, and remembered for the bucket. The transfer itself
 * is http.c's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define REGIONS_KEPT 16 /* buckets a region redirect placed, remembered */
#define BUCKET_MAX 64   /* an S3 bucket's name (3 to 63 bytes), its NUL */

/* A bucket AWS said lies in another region than AWS_REGION. */
typedef struct bucket_region {
    char bucket[BUCKET_MAX];
    char region[REGION_MAX];
} bucket_region;

typedef struct s3_conf {
    /* Read from the environment at create. */
    char *endpoint, *region, *key, *secret, *token;
    /* The certificate authorities TLS trusts for s3://: AWS_CA_BUNDLE, as
     * botocore reads it (NULL: http.c's, for every URL). */
    char *ca_file;
    /* The buckets a region redirect placed (AWS's endpoints only), so
     * that their later requests go to their region at once. regions_mu
     * guards only these. */
    pthread_mutex_t regions_mu;
    bucket_region regions[REGIONS_KEPT];
    int nregions;
} s3_conf;

/* ---- the settings' life ---- */

/* The S3 settings: AWS_ENDPOINT_URL (without its trailing slashes), the
 * region (us-east-1 without one), the credentials. -1 without memory. */
static int s3_from_env(s3_conf *c)
{
    c->endpoint = transfer_endpoint("AWS_ENDPOINT_URL", NULL);
    c->region = transfer_env("AWS_REGION");
    if (!c->region)
        c->region = transfer_env("AWS_DEFAULT_REGION");
    if (!c->region)
        c->region = strdup("us-east-1");
    c->key = transfer_env("AWS_ACCESS_KEY_ID");
    c->secret = transfer_env("AWS_SECRET_ACCESS_KEY");
    c->token = transfer_env("AWS_SESSION_TOKEN");
    c->ca_file = transfer_env("AWS_CA_BUNDLE");
    return c->region ? 0 : -1;
}

struct s3_conf *s3_conf_new(void)
{
    s3_conf *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_init(&c->regions_mu, NULL);
    if (s3_from_env(c) < 0) {
        s3_conf_free(c);
        return NULL;
    }
    return c;
}

void s3_conf_free(struct s3_conf *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->regions_mu);
    free(c->endpoint);
    free(c->region);
    free(c->key);
    free(c->secret);
    free(c->token);
    free(c->ca_file);
    free(c);
}

/* ---- where a request goes ---- */

/* The URL a request goes to: s3://bucket/key becomes the endpoint's
 * path-style URL (AWS_ENDPOINT_URL) or AWS's virtual-hosted one in
 * `region`. NULL for a URL without a key, or without memory. */
static char *request_url(const s3_conf *c, const char *url, const char *region)
{
    const char *bk = url + 5;
    const char *slash = strchr(bk, '/');
    if (!slash)
        return NULL;
    char *p =
        malloc(strlen(url) + 256 + (c->endpoint ? strlen(c->endpoint) : 0));
    if (!p)
        return NULL;
    if (c->endpoint)
        sprintf(p, "%s/%s", c->endpoint, bk);
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
static const char *region_of(s3_conf *c, const char *url, char buf[REGION_MAX])
{
    const char *region = c->region;
    char bucket[BUCKET_MAX];
    if (c->endpoint || !bucket_of(url, bucket))
        return region;
    pthread_mutex_lock(&c->regions_mu);
    for (int i = 0; i < c->nregions; i++)
        if (strcmp(c->regions[i].bucket, bucket) == 0) {
            snprintf(buf, REGION_MAX, "%s", c->regions[i].region);
            region = buf;
        }
    pthread_mutex_unlock(&c->regions_mu);
    return region;
}

/* Remembers that url's bucket lies in `region` (the first REGIONS_KEPT
 * buckets; the others are redirected, and signed anew, each time). */
static void region_keep(s3_conf *c, const char *url, const char *region)
{
    char bucket[BUCKET_MAX];
    if (!bucket_of(url, bucket))
        return;
    pthread_mutex_lock(&c->regions_mu);
    int i = 0;
    while (i < c->nregions && strcmp(c->regions[i].bucket, bucket) != 0)
        i++;
    if (i < REGIONS_KEPT) {
        snprintf(c->regions[i].bucket, BUCKET_MAX, "%s", bucket);
        snprintf(c->regions[i].region, REGION_MAX, "%s", region);
        if (i == c->nregions)
            c->nregions++;
    }
    pthread_mutex_unlock(&c->regions_mu);
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

/* ---- signing, and what an answer says ---- */

/* An s3:// request signed with SigV4 for `region` when there are
 * credentials: the headers it needs, for the caller to free after the
 * transfer (http_req.sign). */
static struct curl_slist *sign_s3(const transfers *t, CURL *h,
                                  const char *region)
{
    const s3_conf *c = t->s3;
    if (!c->key || !c->secret)
        return NULL;
    char sigv4[160];
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", region);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, c->key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, c->secret);
    struct curl_slist *hdr =
        curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (c->token) {
        char *line = malloc(strlen(c->token) + 32);
        if (line) {
            sprintf(line, "x-amz-security-token: %s", c->token);
            hdr = curl_slist_append(hdr, line);
            free(line);
        }
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    return hdr;
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

/* One request for url to `region`: where it goes, signed for it, never
 * redirected by libcurl, trusting AWS_CA_BUNDLE where it is set. */
static void s3_once(transfers *t, const char *url, const char *region,
                    int64_t from, int64_t to, sink *k, attempt *a)
{
    const s3_conf *c = t->s3;
    char *target = request_url(c, url, region);
    const http_req rq = {.target = target,
                         .follow = 0,
                         .ca = c->ca_file ? c->ca_file : http_ca(t),
                         .sign = sign_s3,
                         .region = region};
    http_once(t, &rq, from, to, k, a);
    free(target);
}

/* GET url (from byte `from`, to `to` inclusive, or to the end for -1)
 * into k (http_get_fn). An s3:// request is never redirected by libcurl:
 * an answer at one of AWS's endpoints that says the bucket lies in another
 * region (as S3 says with a 301, or a 400 to a request signed for the
 * wrong region) is asked again of that region's endpoint, which pinload
 * makes from the region's name (never from a Location), signed anew for
 * it, as botocore does; and that region is remembered for the bucket. Any
 * other redirect, and any region redirect from AWS_ENDPOINT_URL, is an
 * error naming where it pointed: no credential goes to another host, and
 * no answer that was not signed for is taken for the object. */
static void s3_get(transfers *t, const char *url, int64_t from, int64_t to,
                   sink *k, attempt *a)
{
    s3_conf *c = t->s3;
    char kept[REGION_MAX], there[REGION_MAX];
    const char *region = region_of(c, url, kept);
    s3_once(t, url, region, from, to, k, a);
    if (!a->ok && !c->endpoint && answer_region(k, there) &&
        strcmp(there, region) != 0 &&
        (k->status == 301 || k->status == 307 || k->status == 400)) {
        region_keep(c, url, there);
        region = there;
        s3_once(t, url, region, from, to, k, a);
    }
    if (!a->ok)
        s3_moved(k, region, a);
}

/* ---- the s3:// row ---- */

static int s3_whole(transfers *t, const char *url, int fd, int64_t have,
                    int64_t expect, attempt *a)
{
    return http_whole(t, s3_get, url, fd, have, expect, a);
}

static void s3_range(transfers *t, const char *url, int64_t off, int64_t size,
                     void *dst, attempt *a)
{
    http_part(t, s3_get, url, off, size, dst, a);
}

/* The URL as shown, and the endpoint or region that resolves its
 * bucket. */
static void s3_key(const transfers *t, const char *url, char *out, size_t cap)
{
    char shown[4096];
    http_display(url, shown, sizeof shown);
    snprintf(out, cap, "%s@%s", shown,
             t->s3->endpoint ? t->s3->endpoint : t->s3->region);
}

const scheme scheme_s3 = {
    .whole = s3_whole,
    .range = s3_range,
    .display = http_display,
    .cache_key = s3_key,
};
