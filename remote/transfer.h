/* The transfers of remote shards (transfer.c): one fetch of a whole
 * object into a file, or of a byte range into memory, each retried with
 * backoff, a whole object resumed with Range where the last attempt
 * stopped. What a URL's scheme does is one row of a table (scheme.h):
 * http:// and https:// through libcurl (http.c), s3:// signed with SigV4
 * from the AWS_* environment (s3.c), and pipe: commands run by /bin/sh
 * (pipe.c). The transfers own the libcurl handles (kept idle for their
 * connections, reused by the next transfer) and the S3 settings, and
 * they alone show URLs in messages, without their credentials.
 *
 * Credentials stay with their host: an http(s):// URL's redirects are
 * followed, its user:password@ sent to its own scheme, host and port
 * alone, and never from https:// to http://; an s3:// request's redirects
 * are never followed (its session token and signature would go to
 * whichever host the Location names, and that host's unsigned answer be
 * taken for the object): an answer at AWS that places the bucket in
 * another region is asked again of that region's endpoint, signed anew
 * for it; any other is an error naming where it pointed.
 *
 * Thread safety: after transfers_new, any thread may call any function
 * at once (the settings are read-only; one lock guards the idle handles,
 * another the buckets' regions a redirect said, neither held across a
 * transfer). The stop flag, which the caller owns and sets when the
 * loader closes, cuts every transfer, backoff and command. */
#ifndef PINLOAD_TRANSFER_H
#define PINLOAD_TRANSFER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct transfers transfers;

/* transfer_fetch's answer when the store has no such object (HTTP 404,
 * 410, or 403, as S3 says it without credentials to list). */
#define TRANSFER_ABSENT 1

/* Transfers that give up after timeout_ms without a byte (0: 30 s) and
 * make 1 + retries attempts (0: 5 retries; -1: none); *stop (the caller's,
 * which must outlive it) cuts them. NULL without memory. */
transfers *transfers_new(int32_t timeout_ms, int32_t retries, atomic_int *stop);

/* Frees the idle handles and the settings; NULL is accepted. No transfer
 * may be under way. */
void transfers_free(transfers *t);

/* url whole into the file open for reading and writing at fd (the
 * caller's, who opened it safely: what it holds is resumed with Range)
 * until it holds `expect` bytes (-1: what the server says the whole is),
 * then synced to disk. 0; TRANSFER_ABSENT; or PL_E*. On failure err[cap]
 * says "URL: why (after N attempts)". */
int transfer_fetch(transfers *t, const char *url, int fd, int64_t expect,
                   char *err, size_t cap);

/* Bytes [off, off + size) of url into dst (an http(s):// or s3:// URL,
 * whose server must honour Range). 0, or PL_EIO with reason[cap]. */
int transfer_range(transfers *t, const char *url, int64_t off, int64_t size,
                   void *dst, char *reason, size_t cap);

/* A URL as it may be shown: without user:password@ and without its query
 * (a presigned URL's signature), into out[cap]; a pipe: command as it
 * is. */
void transfer_display(const char *url, char *out, size_t cap);

/* What names the object at url in a cache (out[cap]): the URL as shown,
 * plus for s3:// the endpoint or region that resolves the bucket; a pipe:
 * command as it is. */
void transfer_cache_key(const transfers *t, const char *url, char *out,
                        size_t cap);

/* Whether url's scheme is one the transfers take: http://, https://,
 * s3:// or pipe:. */
int transfer_knows(const char *url);

/* Whether url is a command (pipe:): no ranges, nothing beside it (no
 * URL.idx, no classes.txt), and run only from what the user wrote. */
int transfer_is_command(const char *url);

#endif
