/* cudasim's memory (see sim.h for its files): device, page-locked and
 * managed allocations, copies and memsets, prefetches. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim.h"

static size_t page_round(size_t n)
{
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* G.mu held. */
static void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cudasim: violation: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    G.violations++;
    if (G.cfg.abort_on_violation)
        abort();
}

/* ---- memory registry ---- */

/* The allocation holding [p, p + n), or NULL for memory the sim did not
 * hand out (pageable); *bad when p is inside one but p + n is not. */
static alloc *find_alloc(const void *p, size_t n, int *bad)
{
    const char *c = p;
    *bad = 0;
    for (alloc *a = G.allocs; a; a = a->next)
        if (c >= a->base && c < a->base + (a->size ? a->size : 1)) {
            *bad = n > (size_t)(a->base + a->size - c);
            return a;
        }
    return NULL;
}

static void unmap(alloc *a)
{
    if (a->kind == MEM_DEVICE) {
        munmap(a->view, a->mapped);
        G.dev[a->device].used -= a->mapped;
    }
    munmap(a->base, a->mapped);
    free(a);
}

void sim_unuse(alloc *a)
{
    if (a && --a->inflight == 0 && a->freed)
        unmap(a);
}

static cudaError_t map_device(alloc *a)
{
    const int fd = memfd_create("cudasim-device", MFD_CLOEXEC);
    if (fd < 0)
        return cudaErrorMemoryAllocation;
    void *base = MAP_FAILED, *view = MAP_FAILED;
    if (ftruncate(fd, (off_t)a->mapped) == 0) {
        base = mmap(NULL, a->mapped, PROT_NONE, MAP_SHARED, fd, 0);
        view = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (base == MAP_FAILED || view == MAP_FAILED) {
        if (base != MAP_FAILED)
            munmap(base, a->mapped);
        if (view != MAP_FAILED)
            munmap(view, a->mapped);
        return cudaErrorMemoryAllocation;
    }
    memset(view, 0xCD, a->mapped); /* cudaMalloc does not clear */
    a->base = base;
    a->view = view;
    return cudaSuccess;
}

/* Page-locked memory is allocated and pinned within the call, as CUDA's
 * is (its pages faulted in: MAP_POPULATE), so the calling thread's memory
 * policy decides where they lie, as it does for cudaHostAlloc; that policy
 * is kept for cudasim_host_policy. Managed memory is faulted in as it is
 * touched. */
static cudaError_t map_host(alloc *a)
{
    a->policy_mode = a->policy_node = -1;
    if (a->kind == MEM_PINNED) {
        enum { BITS = 8 * sizeof(unsigned long) };
        unsigned long mask[1024 / BITS] = {0};
        int mode = -1;
        if (syscall(SYS_get_mempolicy, &mode, mask, 1024ul, NULL, 0ul) == 0) {
            a->policy_mode = mode;
            for (int i = 0; i < 1024 && a->policy_node < 0; i++)
                if ((mask[i / BITS] >> (i % BITS)) & 1)
                    a->policy_node = i;
        }
    }
    void *p = mmap(NULL, a->mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS |
                       (a->kind == MEM_PINNED ? MAP_POPULATE : 0),
                   -1, 0);
    if (p == MAP_FAILED)
        return cudaErrorMemoryAllocation;
    a->base = a->view = p;
    return cudaSuccess;
}

static cudaError_t new_alloc(void **out, size_t n, mem_kind kind)
{
    if (!out)
        return cudaErrorInvalidValue;
    *out = NULL;
    if (n == 0)
        return cudaSuccess;
    const int d = sim_cur();
    if (kind == MEM_DEVICE &&
        G.dev[d].used + page_round(n) > G.cfg.device_bytes)
        return cudaErrorMemoryAllocation;
    alloc *a = calloc(1, sizeof *a);
    if (!a)
        return cudaErrorMemoryAllocation;
    a->kind = kind;
    a->size = n;
    a->mapped = page_round(n);
    a->device = d;
    const cudaError_t e = kind == MEM_DEVICE ? map_device(a) : map_host(a);
    if (e != cudaSuccess) {
        free(a);
        return e;
    }
    if (kind == MEM_DEVICE)
        G.dev[d].used += a->mapped;
    a->next = G.allocs;
    G.allocs = a;
    *out = a->base;
    return cudaSuccess;
}

static cudaError_t free_alloc(void *p, int host, const char *call)
{
    if (!p)
        return cudaSuccess;
    alloc **pp = &G.allocs;
    while (*pp && (*pp)->base != (char *)p)
        pp = &(*pp)->next;
    alloc *a = *pp;
    if (!a || (host ? a->kind != MEM_PINNED : a->kind == MEM_PINNED))
        return cudaErrorInvalidValue;
    *pp = a->next;
    if (a->inflight) {
        violation("%s(%p): %d queued operation(s) still use this memory", call,
                  p, a->inflight);
        a->freed = 1; /* unmapped when they are done */
        return cudaSuccess;
    }
    unmap(a);
    return cudaSuccess;
}

/* ---- memory ---- */

/* The checks every allocating call makes; G.mu held. */
cudaError_t sim_can_allocate(void)
{
    const cudaError_t e = sim_check_device(sim_cur());
    return e != cudaSuccess ? e : sim_ctx(sim_cur());
}

cudaError_t cudaMalloc(void **p, size_t n)
{
    cudaError_t e = sim_begin(F_cudaMalloc, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = sim_can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_DEVICE);
    return sim_end(e);
}

cudaError_t cudaMallocHost(void **p, size_t n)
{
    cudaError_t e = sim_begin(F_cudaMallocHost, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = sim_can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_PINNED);
    return sim_end(e);
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags)
{
    cudaError_t e = sim_begin(F_cudaHostAlloc, 0, NULL, NULL);
    if (e == cudaSuccess && (flags & ~0xFu))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_PINNED);
    return sim_end(e);
}

cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
    cudaError_t e = sim_begin(F_cudaMallocManaged, 0, NULL, NULL);
    if (e == cudaSuccess && flags != cudaMemAttachGlobal &&
        flags != cudaMemAttachHost)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_can_allocate();
    if (e == cudaSuccess)
        e = new_alloc(p, n, MEM_MANAGED);
    return sim_end(e);
}

cudaError_t cudaFree(void *p)
{
    cudaError_t e = sim_begin(F_cudaFree, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = free_alloc(p, 0, "cudaFree");
    return sim_end(e);
}

cudaError_t cudaFreeHost(void *p)
{
    cudaError_t e = sim_begin(F_cudaFreeHost, 0, NULL, NULL);
    if (e == cudaSuccess)
        e = free_alloc(p, 1, "cudaFreeHost");
    return sim_end(e);
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *at,
                                     const void *p)
{
    cudaError_t e = sim_begin(F_cudaPointerGetAttributes, 0, NULL, NULL);
    if (e == cudaSuccess && !at)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        int bad;
        const alloc *a = find_alloc(p, 0, &bad);
        memset(at, 0, sizeof *at);
        at->device = a ? a->device : -2;
        if (!a) {
            at->type = cudaMemoryTypeUnregistered;
        } else if (a->kind == MEM_DEVICE) {
            at->type = cudaMemoryTypeDevice;
            at->devicePointer = (void *)p;
        } else {
            at->type = a->kind == MEM_PINNED ? cudaMemoryTypeHost
                                             : cudaMemoryTypeManaged;
            at->devicePointer = at->hostPointer = (void *)p;
        }
    }
    return sim_end(e);
}

cudaError_t sim_resolve(const void *p, size_t n, endpoint *e)
{
    if (!p)
        return cudaErrorInvalidValue;
    int bad;
    e->a = find_alloc(p, n, &bad);
    if (bad)
        return cudaErrorInvalidValue;
    e->engine = e->a ? e->a->view + ((const char *)p - e->a->base) : (char *)p;
    e->device = e->a && e->a->kind == MEM_DEVICE;
    e->pageable = !e->a || e->a->kind == MEM_MANAGED;
    return cudaSuccess;
}

/* Builds the copy op; [out] *sync: the host must wait for it. */
static cudaError_t make_copy(void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind kind, op **out, int *sync)
{
    endpoint d, s;
    cudaError_t e = sim_resolve(dst, n, &d);
    if (e == cudaSuccess)
        e = sim_resolve(src, n, &s);
    if (e != cudaSuccess)
        return e;
    const int d_dev = d.device || (d.a && d.a->kind == MEM_MANAGED);
    const int s_dev = s.device || (s.a && s.a->kind == MEM_MANAGED);
    /* "Calling cudaMemcpy() with dst and src pointers that do not match the
     * direction of the copy results in an undefined behavior" (cudaMemcpy,
     * Runtime API). Managed memory last prefetched to a device is device
     * memory for that rule; "Passing cudaMemcpyDefault is recommended, in
     * which case the type of transfer is inferred from the pointer values"
     * (ibid.). */
    if (kind == cudaMemcpyHostToDevice && s.a && s.a->kind == MEM_MANAGED &&
        s.a->on_device)
        violation("cudaMemcpy*(HostToDevice) from managed memory at %p "
                  "prefetched to device %d: the direction does not match "
                  "(undefined behaviour; use cudaMemcpyDefault)",
                  src, s.a->device);
    switch (kind) {
    case cudaMemcpyHostToDevice:
        e = d_dev && !s.device ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyDeviceToHost:
        e = s_dev && !d.device ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyDeviceToDevice:
        e = d_dev && s_dev ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyHostToHost:
        e = !d.device && !s.device ? cudaSuccess : cudaErrorInvalidValue;
        break;
    case cudaMemcpyDefault:
        break;
    default:
        e = cudaErrorInvalidMemcpyDirection;
    }
    if (e != cudaSuccess)
        return e;
    op *o = sim_new_op(OP_COPY);
    if (!o)
        return cudaErrorMemoryAllocation;
    o->dst = d.engine;
    o->src = s.engine;
    o->n = n;
    o->use[0] = d.a;
    o->use[1] = s.a;
    /* Host-to-host, or through pageable or managed host memory: the call
     * returns once the copy is done. */
    *sync = (!d.device && !s.device) || (!d.device && d.pageable) ||
            (!s.device && s.pageable);
    *out = o;
    return cudaSuccess;
}

static cudaError_t copy_call(int fid, void *dst, const void *src, size_t n,
                             enum cudaMemcpyKind kind, cudaStream_t stream,
                             int force_sync)
{
    cudaError_t async;
    cudaError_t e = sim_begin(fid, 1, stream, &async);
    struct CUstream_st *s = NULL;
    op *o = NULL;
    int sync = 0;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    if (e == cudaSuccess && n == 0)
        return sim_end(cudaSuccess);
    if (e == cudaSuccess)
        e = make_copy(dst, src, n, kind, &o, &sync);
    /* An asynchronous call that returns only once its copy is done (from
     * pageable memory) waits on the host, as the unsafe calls do. */
    if (e == cudaSuccess && sync && !force_sync && s->cap == CAP_NONE &&
        (e = sim_capture_forbids()) != cudaSuccess)
        free(o);
    if (e == cudaSuccess) {
        o->fail = async;
        e = sim_submit(s, o, sync || force_sync);
    }
    return sim_end(e);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                            enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_call(F_cudaMemcpyAsync, dst, src, n, kind, stream, 0);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n,
                       enum cudaMemcpyKind kind)
{
    return copy_call(F_cudaMemcpy, dst, src, n, kind, NULL, 1);
}

static cudaError_t memset_call(int fid, void *p, int value, size_t n,
                               cudaStream_t stream, int sync)
{
    cudaError_t async;
    cudaError_t e = sim_begin(fid, 1, stream, &async);
    struct CUstream_st *s = NULL;
    endpoint d;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    if (e == cudaSuccess && n == 0)
        return sim_end(cudaSuccess);
    if (e == cudaSuccess)
        e = sim_resolve(p, n, &d);
    if (e == cudaSuccess && !d.a)
        e = cudaErrorInvalidValue; /* not device memory */
    op *o = NULL;
    if (e == cudaSuccess && !(o = sim_new_op(OP_MEMSET)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->dst = d.engine;
        o->value = value;
        o->n = n;
        o->use[0] = d.a;
        o->fail = async;
        e = sim_submit(s, o, sync);
    }
    return sim_end(e);
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t stream)
{
    return memset_call(F_cudaMemsetAsync, p, value, n, stream, 0);
}

cudaError_t cudaMemset(void *p, int value, size_t n)
{
    return memset_call(F_cudaMemset, p, value, n, NULL, 1);
}

#if CUDART_VERSION >= 13000
cudaError_t cudaMemPrefetchAsync(const void *p, size_t n,
                                 struct cudaMemLocation loc, unsigned int flags,
                                 cudaStream_t stream)
{
    const int to_device = loc.type == cudaMemLocationTypeDevice;
    const int target = loc.id;
#else
cudaError_t cudaMemPrefetchAsync(const void *p, size_t n, int target,
                                 cudaStream_t stream)
{
    const unsigned flags = 0;
    const int to_device = target != cudaCpuDeviceId;
#endif
    cudaError_t async;
    cudaError_t e = sim_begin(F_cudaMemPrefetchAsync, 1, stream, &async);
    struct CUstream_st *s = NULL;
    int bad = 0;
    alloc *a = NULL;
    if (e == cudaSuccess)
        e = sim_get_stream(stream, &s);
    if (e == cudaSuccess)
        e = sim_ctx(s->device);
    if (e == cudaSuccess) {
        a = find_alloc(p, n, &bad);
        if (!a || a->kind != MEM_MANAGED || bad || flags != 0)
            e = cudaErrorInvalidValue;
        else if (to_device && sim_check_device(target) != cudaSuccess)
            e = cudaErrorInvalidDevice;
    }
    op *o = NULL;
    if (e == cudaSuccess && !(o = sim_new_op(OP_PREFETCH)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        o->use[0] = a;
        o->fail = async;
        e = sim_submit(s, o, 0);
    }
    if (e == cudaSuccess) /* later calls see it where stream order puts it */
        a->on_device = to_device;
    return sim_end(e);
}

/* ---- the control interface's memory queries ---- */

int cudasim_host_policy(const void *p, int *mode, int *node)
{
    pthread_mutex_lock(&G.mu);
    int bad;
    const alloc *a = find_alloc(p, 0, &bad);
    const int ok = a && a->kind == MEM_PINNED;
    if (ok) {
        *mode = a->policy_mode;
        *node = a->policy_node;
    }
    pthread_mutex_unlock(&G.mu);
    return ok ? 0 : -1;
}

void *cudasim_device_view(const void *p)
{
    pthread_mutex_lock(&G.mu);
    int bad;
    const alloc *a = find_alloc(p, 0, &bad);
    void *v = a ? a->view + ((const char *)p - a->base) : NULL;
    pthread_mutex_unlock(&G.mu);
    return v;
}

int cudasim_inflight(const void *p)
{
    pthread_mutex_lock(&G.mu);
    int bad;
    const alloc *a = find_alloc(p, 0, &bad);
    const int n = a ? a->inflight : 0;
    pthread_mutex_unlock(&G.mu);
    return n;
}

void cudasim_violation(const char *what)
{
    pthread_mutex_lock(&G.mu);
    violation("%s", what);
    pthread_mutex_unlock(&G.mu);
}
