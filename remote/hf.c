/* hf:// (the schemes' table, scheme.h): files of the Hugging Face Hub's
 * repositories, as huggingface_hub's HfFileSystem names them:
 * hf://datasets/ORG/NAME[@REVISION]/PATH (a dataset), hf://ORG/NAME/PATH
 * (a model) or hf://spaces/ORG/NAME/PATH, fetched from their resolve URL,
 * ENDPOINT[/datasets]/ORG/NAME/resolve/REVISION/PATH (REVISION main by
 * default; one with a '/' written encoded, refs%2Fpr%2F1, as the Hub
 * takes it). The endpoint is https://huggingface.co, or HF_ENDPOINT's.
 * With HF_TOKEN set, the request carries it as a bearer token, libcurl's
 * own authentication: sent to the Hub's host alone, never to the content
 * host the Hub redirects a large file to (whose presigned URL refuses a
 * second credential), as huggingface_hub drops it. The transfer itself is
 * http.c's, redirects followed as for https:// (never to http://). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define HF_ENDPOINT "https://huggingface.co"

typedef struct hf_conf {
    /* Read from the environment at create. */
    char *endpoint, *token;
} hf_conf;

struct hf_conf *hf_conf_new(void)
{
    hf_conf *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (!(c->endpoint = transfer_endpoint("HF_ENDPOINT", HF_ENDPOINT))) {
        free(c);
        return NULL;
    }
    c->token = transfer_env("HF_TOKEN");
    return c;
}

void hf_conf_free(struct hf_conf *c)
{
    if (!c)
        return;
    free(c->endpoint);
    free(c->token);
    free(c);
}

/* The resolve URL of hf://[datasets/|spaces/]ORG/NAME[@REVISION]/PATH;
 * NULL for one without an owner, a name and a path, or without memory. */
static char *request_url(const hf_conf *c, const char *url)
{
    const char *s = url + 5;
    const char *kind = "";
    if (strncmp(s, "datasets/", 9) == 0)
        kind = "datasets/", s += 9;
    else if (strncmp(s, "spaces/", 7) == 0)
        kind = "spaces/", s += 7;
    const size_t org = strcspn(s, "/");
    if (org == 0 || s[org] != '/')
        return NULL;
    const char *name = s + org + 1;
    const size_t nlen = strcspn(name, "/");
    const char *path = name + nlen;
    if (nlen == 0 || path[0] != '/' || !path[1])
        return NULL;
    const char *at = memchr(name, '@', nlen);
    const size_t repo = (size_t)((at ? at : path) - s);
    const char *rev = at ? at + 1 : "main";
    const size_t rlen = at ? (size_t)(path - rev) : 4;
    if (repo == org + 1 || rlen == 0)
        return NULL;
    char *p = malloc(strlen(c->endpoint) + strlen(url) + 32);
    if (p)
        sprintf(p, "%s/%s%.*s/resolve/%.*s%s", c->endpoint, kind, (int)repo, s,
                (int)rlen, rev, path);
    return p;
}

/* The token as a bearer (http_req.sign): libcurl's own authentication,
 * which it sends to the request's host alone, not to a redirect's. */
static struct curl_slist *sign_hf(const transfers *t, CURL *h,
                                  const char *region)
{
    (void)region;
    if (t->hf->token) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, t->hf->token);
    }
    return NULL;
}

/* GET url (bytes as http_get_fn's) into k, from its resolve URL, the
 * Hub's redirects followed; a 401 says what the Hub wants. */
static void hf_get(transfers *t, const char *url, int64_t from, int64_t to,
                   sink *k, attempt *a)
{
    char *target = request_url(t->hf, url);
    const http_req rq = {
        .target = target, .follow = 1, .ca = http_ca(t), .sign = sign_hf};
    if (!target) {
        memset(a, 0, sizeof *a);
        snprintf(a->why, sizeof a->why,
                 "not an hf:// URL of a file "
                 "(hf://datasets/ORG/NAME[@REVISION]/PATH)");
        return;
    }
    http_once(t, &rq, from, to, k, a);
    free(target);
    if (!a->ok && k->status == 401)
        snprintf(a->why, sizeof a->why,
                 "HTTP 401: the Hub refuses it: %s (a gated dataset's terms "
                 "are accepted on its page first)",
                 t->hf->token ? "HF_TOKEN's token may not read this "
                                "repository"
                              : "set HF_TOKEN to a token that may read this "
                                "repository");
}

/* ---- the hf:// row ---- */

static int hf_whole(transfers *t, const char *url, int fd, int64_t have,
                    int64_t expect, attempt *a)
{
    return http_whole(t, hf_get, url, fd, have, expect, a);
}

static void hf_range(transfers *t, const char *url, int64_t off, int64_t size,
                     void *dst, attempt *a)
{
    http_part(t, hf_get, url, off, size, dst, a);
}

/* The URL as shown, and the endpoint that resolves it. */
static void hf_key(const transfers *t, const char *url, char *out, size_t cap)
{
    char shown[4096];
    http_display(url, shown, sizeof shown);
    snprintf(out, cap, "%s@%s", shown, t->hf->endpoint);
}

const scheme scheme_hf = {
    .whole = hf_whole,
    .range = hf_range,
    .display = http_display,
    .cache_key = hf_key,
};
