/* The transfers of remote shards (transfer.c): one fetch of a whole
 * object into a file, or of a byte range into memory, each retried with
 * backoff, a whole object resumed with Range where the last attempt
 * stopped. What a URL's scheme does is one row of a table (scheme.h):
 * http:// and https:// through libcurl (http.c), s3:// signed with SigV4
 * from the AWS_* environment (s3.c), gs:// through Google Cloud Storage's
 * XML API with an HMAC key (gs.c), hf:// from the Hugging Face Hub with
 * HF_TOKEN (hf.c), and pipe: commands run by /bin/sh (pipe.c); any other
 * scheme is refused, naming it (transfer_refusal). The transfers own the
 * libcurl handles (kept idle for their connections, reused by the next
 * transfer) and the S3 settings, and they alone show URLs in messages, without
 * their credentials.
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
/* transfer_fetch's answer when the file could not be written for want of
 * room (ENOSPC, EDQUOT, EFBIG): the cache's disk is full. */
#define TRANSFER_NO_ROOM 2
/* transfer_range's answer when the store refuses ranges: it answers one
 * with the whole object, or with other bytes than asked. */
#define TRANSFER_NO_RANGES 3

/* Transfers that give up after timeout_ms without a byte (0: 30 s) and
 * make 1 + retries attempts (0: 5 retries; -1: none); *stop (the caller's,
 * which must outlive it) cuts them. NULL without memory. */
transfers *transfers_new(int32_t timeout_ms, int32_t retries, atomic_int *stop);

/* Frees the idle handles and the settings; NULL is accepted. No transfer
 * may be under way. */
void transfers_free(transfers *t);

/* Every transfer, backoff and wait from now on ends within ms
 * milliseconds (create's deadline, config.remote_create_timeout_ms), its
 * error saying so; ms <= 0: no deadline. Called with no transfer under
 * way (before create's and after them). */
void transfer_deadline(transfers *t, int32_t ms);

/* Whether every transfer gives up now: the stop flag is set, or the
 * deadline has passed (a wait for another process's download ends). */
int transfer_stopping(const transfers *t);

/* url whole into the file open for reading and writing at fd (the
 * caller's, who opened it safely: what it holds is resumed with Range;
 * a server that answers the Range with the whole object has it written
 * from the start) until it holds `expect` bytes (-1: what the server says
 * the whole is), then synced to disk. 0; TRANSFER_ABSENT;
 * TRANSFER_NO_ROOM; or PL_E*. On failure err[cap] says "URL: why (after N
 * attempts)". */
int transfer_fetch(transfers *t, const char *url, int fd, int64_t expect,
                   char *err, size_t cap);

/* Bytes [off, off + size) of url into dst (any scheme but pipe:, whose
 * server must honour Range). 0; TRANSFER_NO_RANGES, at once, if it
 * answers with the whole object or with other bytes than asked; or
 * PL_EIO; reason[cap] says why. */
int transfer_range(transfers *t, const char *url, int64_t off, int64_t size,
                   void *dst, char *reason, size_t cap);

/* A URL as it may be shown: without user:password@ and without its query
 * (a presigned URL's signature), into out[cap]; a pipe: command as it
 * is. */
void transfer_display(const char *url, char *out, size_t cap);

/* What names the object at url in a cache (out[cap]): the URL as shown,
 * plus for s3://, gs:// and hf:// the endpoint (or region) that resolves
 * it; a pipe: command as it is. */
void transfer_cache_key(const transfers *t, const char *url, char *out,
                        size_t cap);

/* Whether url's scheme is one the transfers take: http://, https://,
 * s3://, gs://, hf:// or pipe:. */
int transfer_knows(const char *url);

/* Whether s names a scheme the transfers do not take (az://, gcs://,
 * hdfs://: SCHEME:// of letters, digits, '+', '-' and '.'): 1 with why
 * into out[cap], naming it and what to do instead (a scheme of ours, or
 * a pipe: command that writes the object to its standard output); else
 * 0. */
int transfer_refusal(const char *s, char *out, size_t cap);

/* Whether url is a command (pipe:): no ranges, nothing beside it (no
 * URL.idx, no classes.txt), and run only from what the user wrote. */
int transfer_is_command(const char *url);

#endif
