/* The host backend: "device" memory is ordinary memory, a copy is a
 * memcpy done before copy() returns, so events are completion flags that
 * are always set and callbacks run at once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "../common/error.h"

struct be_stream {
    int unused;
};

#define HOST_ALIGN 4096

static size_t round_up(size_t n)
{
    return (n + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
}

/* No device, so no node to be near: the memory stays where the kernel's
 * first touch puts it. */
static int host_alloc(backend *b, size_t n, pl_memory want, void **p,
                      hostmem *kind, int *node)
{
    *kind = HOSTMEM_PAGEABLE;
    *node = -1;
    *p = aligned_alloc(HOST_ALIGN, round_up(n));
    if (!*p)
        return err_set(PL_ENOMEM, "out of memory for %zu bytes", round_up(n));
    if (want == PL_MEMORY_MANAGED)
        log_msg(b->log, PL_LOG_NOTICE,
                "managed memory needs CUDA: the host "
                "ring is pageable on the host backend");
    if (want != PL_MEMORY_PINNED)
        return 0;
    if (mlock(*p, round_up(n)) == 0) {
        *kind = HOSTMEM_PINNED;
        return 0;
    }
    /* The caller decides between pageable memory and failing. */
    const int err = errno;
    free(*p);
    *p = NULL;
    return err_set(PL_ENOMEM,
                   "mlock of %zu bytes failed: %s (raise "
                   "RLIMIT_MEMLOCK, ulimit -l, to pin it)",
                   round_up(n), strerror(err));
}

static void host_free(backend *b, void *p, size_t n, hostmem kind)
{
    (void)b;
    if (p && kind == HOSTMEM_PINNED)
        munlock(p, round_up(n));
    free(p);
}

static int dev_alloc(backend *b, size_t n, void **p)
{
    (void)b;
    *p = aligned_alloc(HOST_ALIGN, round_up(n));
    return *p ? 0 : PL_ENOMEM;
}

static void dev_free(backend *b, void *p)
{
    (void)b;
    free(p);
}

static int stream_create(backend *b, be_stream **s)
{
    (void)b;
    *s = calloc(1, sizeof **s);
    return *s ? 0 : PL_ENOMEM;
}

static void stream_destroy(backend *b, be_stream *s)
{
    (void)b;
    free(s);
}

static int nothing(backend *b)
{
    (void)b;
    return 0;
}

static int enter(backend *b, int *saved)
{
    (void)b;
    *saved = -1;
    return 0;
}

static void leave(backend *b, int saved)
{
    (void)b;
    (void)saved;
}

static int copy(backend *b, be_stream *s, void *dst, const void *src, size_t n,
                hostmem from)
{
    (void)b;
    (void)s;
    (void)from;
    memcpy(dst, src, n);
    return 0;
}

static int copy_device(backend *b, be_stream *s, void *dst, const void *src,
                       size_t n)
{
    return copy(b, s, dst, src, n, HOSTMEM_PAGEABLE);
}

/* There is no event on the host backend, and no GPU decoder to record
 * one. */
static int wait_event(backend *b, be_stream *s, struct CUevent_st *ev)
{
    (void)b;
    (void)s;
    (void)ev;
    return 0;
}

/* The host backend's copies are memcpy: their time is pl_stats.ns_copy. */
static void copy_time(backend *b, be_stream *s, uint64_t *ns, uint64_t *bytes)
{
    (void)b;
    (void)s;
    (void)ns;
    (void)bytes;
}

static int after(backend *b, be_stream *s, void (*fn)(void *), void *arg)
{
    (void)b;
    (void)s;
    fn(arg);
    return 0;
}

static int stream_nothing(backend *b, be_stream *s)
{
    (void)b;
    (void)s;
    return 0;
}

static int user_nothing(backend *b, struct CUstream_st *user)
{
    (void)b;
    (void)user;
    return 0;
}

static struct CUevent_st *ready_event(be_stream *s)
{
    (void)s;
    return NULL;
}

static int drain(backend *b, be_stream *s, int ms)
{
    (void)b;
    (void)s;
    (void)ms;
    return 0;
}

static int record_release(backend *b, be_stream *s, int slot,
                          struct CUstream_st *user)
{
    (void)b;
    (void)s;
    (void)slot;
    (void)user;
    return 0;
}

static void host_close(backend *b)
{
    free(b);
}

static const backend_ops host_ops = {
    .host_alloc = host_alloc,
    .host_free = host_free,
    .dev_alloc = dev_alloc,
    .dev_free = dev_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .bind_thread = nothing,
    .enter = enter,
    .leave = leave,
    .copy = copy,
    .copy_time = copy_time,
    .after = after,
    .record_ready = stream_nothing,
    .sync_ready = stream_nothing,
    .ready_event = ready_event,
    .record_release = record_release,
    .wait_released = stream_nothing,
    .sync_released = stream_nothing,
    .capturing = user_nothing,
    .sync = stream_nothing,
    .drain = drain,
    .sync_user = user_nothing,
    .query = stream_nothing,
    .copy_device = copy_device,
    .wait_event = wait_event,
    .close = host_close, /* no GPU decoder: gpu_decoder_open NULL */
};

int backend_host_open(backend **out, logger *lg, const char *why)
{
    backend *b = calloc(1, sizeof *b);
    if (!b)
        return err_set(PL_ENOMEM, "pl_loader_create: out of memory");
    b->ops = &host_ops;
    b->kind = PL_BACKEND_HOST;
    b->device = -1;
    b->numa_node = -1;
    b->host_visible = 1;
    b->log = lg;
    snprintf(b->name, sizeof b->name, "host (%s)", why);
    *out = b;
    return 0;
}
