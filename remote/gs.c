/* gs:// (the schemes' table, scheme.h): Google Cloud Storage through its
 * S3-compatible XML API, https://storage.googleapis.com/BUCKET/KEY
 * (path-style; GS_ENDPOINT_URL names another, a test's or an emulator's),
 * signed with an HMAC key (GS_ACCESS_KEY_ID, GS_SECRET_ACCESS_KEY) by
 * libcurl's SigV4 for region "auto" and service "s3", as Cloud Storage
 * takes AWS's signature; unsigned without a key (a public bucket). Never
 * redirected: the signature is for its endpoint alone. The transfer
 * itself is http.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define GS_ENDPOINT "https://storage.googleapis.com"
/* The hash of an empty payload: a GET's, signed as such. */
#define EMPTY_SHA256                                                           \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct gs_conf {
    /* Read from the environment at create. */
    char *endpoint, *key, *secret;
} gs_conf;

struct gs_conf *gs_conf_new(void)
{
    gs_conf *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (!(c->endpoint = transfer_endpoint("GS_ENDPOINT_URL", GS_ENDPOINT))) {
        free(c);
        return NULL;
    }
    c->key = transfer_env("GS_ACCESS_KEY_ID");
    c->secret = transfer_env("GS_SECRET_ACCESS_KEY");
    return c;
}

void gs_conf_free(struct gs_conf *c)
{
    if (!c)
        return;
    free(c->endpoint);
    free(c->key);
    free(c->secret);
    free(c);
}

/* gs://BUCKET/KEY as the endpoint's path-style URL; NULL for a URL
 * without a bucket and a key, or without memory. */
static char *request_url(const gs_conf *c, const char *url)
{
    const char *bk = url + 5;
    const char *slash = strchr(bk, '/');
    if (!slash || slash == bk || !slash[1])
        return NULL;
    char *p = malloc(strlen(c->endpoint) + strlen(bk) + 2);
    if (p)
        sprintf(p, "%s/%s", c->endpoint, bk);
    return p;
}

/* A request signed with the HMAC key, when there is one (http_req.sign):
 * SigV4 for region "auto", the headers to free after the transfer. */
static struct curl_slist *sign_gs(const transfers *t, CURL *h,
                                  const char *region)
{
    (void)region;
    const gs_conf *c = t->gs;
    if (!c->key || !c->secret)
        return NULL;
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:auto:s3");
    curl_easy_setopt(h, CURLOPT_USERNAME, c->key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, c->secret);
    struct curl_slist *hdr =
        curl_slist_append(NULL, "x-amz-content-sha256: " EMPTY_SHA256);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    return hdr;
}

/* GET url (bytes as http_get_fn's) into k: to its endpoint alone; a
 * redirect is an error naming where it pointed. */
static void gs_get(transfers *t, const char *url, int64_t from, int64_t to,
                   sink *k, attempt *a)
{
    char *target = request_url(t->gs, url);
    const http_req rq = {
        .target = target, .follow = 0, .ca = http_ca(t), .sign = sign_gs};
    if (!target) {
        memset(a, 0, sizeof *a);
        snprintf(a->why, sizeof a->why,
                 "not a gs:// URL of an object (gs://BUCKET/KEY)");
        return;
    }
    http_once(t, &rq, from, to, k, a);
    free(target);
    if (!a->ok && k->status >= 300 && k->status < 400)
        snprintf(a->why, sizeof a->why,
                 "HTTP %ld redirects to %.150s: not followed (a gs:// "
                 "request goes to its own endpoint only)",
                 k->status, k->location[0] ? k->location : "no Location");
}

/* ---- the gs:// row ---- */

static int gs_whole(transfers *t, const char *url, int fd, int64_t have,
                    int64_t expect, attempt *a)
{
    return http_whole(t, gs_get, url, fd, have, expect, a);
}

static void gs_range(transfers *t, const char *url, int64_t off, int64_t size,
                     void *dst, attempt *a)
{
    http_part(t, gs_get, url, off, size, dst, a);
}

/* The URL as shown, and the endpoint that resolves it. */
static void gs_key(const transfers *t, const char *url, char *out, size_t cap)
{
    char shown[4096];
    http_display(url, shown, sizeof shown);
    snprintf(out, cap, "%s@%s", shown, t->gs->endpoint);
}

const scheme scheme_gs = {
    .whole = gs_whole,
    .range = gs_range,
    .display = http_display,
    .cache_key = gs_key,
};
