/* cudasim's core (see sim.h for its files): the state and its lock,
 * errors, the configuration and faults, the entry of every call, the
 * control interface of cudasim.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ---- the calls it exports, counted and open to faults ---- */

static const char *const call_name[F_COUNT] = {
#define X(n) #n,
    SIM_CALLS(X)
#undef X
};

/* The one state, G for short (sim.h). */
struct sim_state sim_g = {.mu = PTHREAD_MUTEX_INITIALIZER,
                          .done = PTHREAD_COND_INITIALIZER,
                          .cb_cv = PTHREAD_COND_INITIALIZER};

/* "Returns the last error that has been produced by any of the runtime
 * calls in the same instance of the CUDA Runtime library in the host
 * thread and resets it to cudaSuccess" (cudaGetLastError): one pending
 * non-sticky error per host thread. Sticky errors belong to the context
 * (sim_device.sticky). */
static _Thread_local cudaError_t t_last;

/* ---- small things ---- */

uint64_t sim_xorshift(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15u;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- errors ---- */

static const struct {
    cudaError_t e;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError",
     "initialization error"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {cudaErrorNoDevice, "cudaErrorNoDevice",
     "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice",
     "invalid device ordinal"},
    {cudaErrorECCUncorrectable, "cudaErrorECCUncorrectable",
     "uncorrectable ECC error encountered"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout",
     "the launch timed out and was terminated"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorHardwareStackError, "cudaErrorHardwareStackError",
     "hardware stack error"},
    {cudaErrorIllegalInstruction, "cudaErrorIllegalInstruction",
     "an illegal instruction was encountered"},
    {cudaErrorMisalignedAddress, "cudaErrorMisalignedAddress",
     "misaligned address"},
    {cudaErrorInvalidAddressSpace, "cudaErrorInvalidAddressSpace",
     "operation not supported on global/shared address space"},
    {cudaErrorInvalidPc, "cudaErrorInvalidPc", "invalid program counter"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure",
     "unspecified launch failure"},
    {cudaErrorNotPermitted, "cudaErrorNotPermitted", "operation not permitted"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation cannot be performed in the present state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking "
     "stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing "
     "stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another "
     "thread"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

#define NERRORS (sizeof errors / sizeof errors[0])

const char *cudaGetErrorName(cudaError_t e)
{
    for (size_t i = 0; i < NERRORS; i++)
        if (errors[i].e == e)
            return errors[i].name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    for (size_t i = 0; i < NERRORS; i++)
        if (errors[i].e == e)
            return errors[i].text;
    return "unrecognized error code";
}

/* Errors after which the context is unusable, as after a faulting kernel:
 * "This leaves the process in an inconsistent state and any further CUDA
 * work will return the same error" (cudaErrorIllegalAddress and its kind,
 * driver_types.h). They belong to the device, for every thread; any other
 * error is pending for the failing thread's cudaGetLastError alone. */
static int is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
        return 1;
    default:
        return 0;
    }
}

static cudaError_t usual_error(int fid)
{
    switch (fid) {
    case F_cudaMalloc:
    case F_cudaMallocHost:
    case F_cudaHostAlloc:
    case F_cudaMallocManaged:
    case F_cudaStreamCreate:
    case F_cudaStreamCreateWithFlags:
    case F_cudaEventCreate:
    case F_cudaEventCreateWithFlags:
    case F_nvjpegCreateExV2:
    case F_nvjpegDecoderCreate:
    case F_nvjpegDecoderStateCreate:
    case F_nvjpegBufferPinnedCreateV2:
    case F_nvjpegBufferDeviceCreateV2:
        return cudaErrorMemoryAllocation;
    case F_cudaSetDevice:
        return cudaErrorInvalidDevice;
    case F_cudaGetDeviceCount:
        return cudaErrorNoDevice;
    default:
        return cudaErrorInvalidValue;
    }
}

/* ---- configuration ---- */

static unsigned long env_ulong(const char *name, unsigned long def)
{
    const char *v = getenv(name);
    return v && *v ? strtoul(v, NULL, 0) : def;
}

static int parse_error(const char *s, cudaError_t *e)
{
    for (size_t i = 0; i < NERRORS; i++)
        if (!strcmp(errors[i].name, s)) {
            *e = errors[i].e;
            return 0;
        }
    return -1;
}

static int add_rule(const cudasim_fault *f);

/* CUDASIM_FAULTS: comma-separated "call@N[:error][:async]" (the N-th call)
 * or "call@pP[:error][:async]" (each with probability P). */
static void parse_faults(const char *spec)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        cudasim_fault f = {0};
        char *at = strchr(item, '@');
        if (!at) {
            fprintf(stderr, "cudasim: CUDASIM_FAULTS: '%s': no '@'\n", item);
            continue;
        }
        *at = '\0';
        f.call = item;
        char *save2 = NULL;
        const char *when = strtok_r(at + 1, ":", &save2);
        if (!when)
            continue;
        if (when[0] == 'p')
            f.probability = strtod(when + 1, NULL);
        else
            f.nth = strtoul(when, NULL, 10);
        for (const char *t = strtok_r(NULL, ":", &save2); t;
             t = strtok_r(NULL, ":", &save2)) {
            if (!strcmp(t, "async"))
                f.asynchronous = 1;
            else if (parse_error(t, &f.error) < 0)
                fprintf(stderr, "cudasim: CUDASIM_FAULTS: unknown '%s'\n", t);
        }
        if (add_rule(&f) < 0)
            fprintf(stderr, "cudasim: CUDASIM_FAULTS: '%s' not added\n", item);
    }
}

/* The devices' PCI addresses: CUDASIM_PCI_BUS_IDS's comma-separated ids
 * for the first devices, then the buses of a typical eight-GPU server,
 * in capitals as CUDA writes them. */
static void set_bus_ids(const char *spec)
{
    static const unsigned bus[CUDASIM_MAX_DEVICES] = {0x0D, 0x1B, 0x3B, 0x5E,
                                                      0x8A, 0x9C, 0xB7, 0xDB};
    for (int d = 0; d < CUDASIM_MAX_DEVICES; d++)
        snprintf(G.cfg.pci_bus_id[d], sizeof G.cfg.pci_bus_id[d],
                 "0000:%02X:00.0", bus[d]);
    for (int d = 0; spec && *spec && d < CUDASIM_MAX_DEVICES; d++) {
        const size_t n = strcspn(spec, ",");
        snprintf(G.cfg.pci_bus_id[d], sizeof G.cfg.pci_bus_id[d], "%.*s",
                 (int)n, spec);
        spec += n + (spec[n] == ',');
    }
}

/* G.mu held. */
void sim_init_locked(void)
{
    if (G.inited)
        return;
    G.inited = 1;
    G.cfg.devices = (int)env_ulong("CUDASIM_DEVICES", 2);
    if (G.cfg.devices < 0 || G.cfg.devices > CUDASIM_MAX_DEVICES)
        G.cfg.devices = 2;
    G.cfg.delay_us = (unsigned)env_ulong("CUDASIM_DELAY_US", 100);
    const char *gbs = getenv("CUDASIM_COPY_GBS");
    G.cfg.copy_gbs = gbs && *gbs ? strtod(gbs, NULL) : 0.0;
    G.cfg.seed = env_ulong("CUDASIM_SEED", 1);
    G.cfg.device_bytes = (size_t)env_ulong("CUDASIM_DEVICE_MB", 16384) << 20;
    const char *v = getenv("CUDASIM_VIOLATION");
    G.cfg.abort_on_violation = !(v && !strcmp(v, "count"));
    G.cfg.concurrent_managed = env_ulong("CUDASIM_CONCURRENT_MANAGED", 1) != 0;
    G.cfg.context_bytes = (size_t)env_ulong("CUDASIM_CONTEXT_MB", 300) << 20;
    G.cfg.exclusive_busy = (unsigned)env_ulong("CUDASIM_EXCLUSIVE_BUSY", 0);
    set_bus_ids(getenv("CUDASIM_PCI_BUS_IDS"));
    G.rng = G.cfg.seed;
    const char *faults = getenv("CUDASIM_FAULTS");
    if (faults && *faults)
        parse_faults(faults);
}

/* ---- the entry of every call ---- */

static int find_fid(const char *name)
{
    if (!name || !strcmp(name, "*"))
        return -1;
    for (int i = 0; i < F_COUNT; i++)
        if (!strcmp(call_name[i], name))
            return i;
    return -2;
}

int sim_is_legacy(cudaStream_t s)
{
    return s == NULL || s == cudaStreamLegacy;
}

/* Whether rule r fires for this call; G.mu held. */
static int rule_fires(rule *r, int fid, int has_stream, cudaStream_t stream)
{
    if (!r->used || (r->fid >= 0 && r->fid != fid))
        return 0;
    if (r->on_stream &&
        (!has_stream || (sim_is_legacy(r->stream) ? !sim_is_legacy(stream)
                                                  : r->stream != stream)))
        return 0;
    if (r->thread_only &&
        !!pthread_equal(r->thread, pthread_self()) != (r->thread_only > 0))
        return 0;
    r->seen++;
    int fire;
    if (r->nth)
        fire = r->seen >= r->nth && r->seen < r->nth + r->times;
    else
        fire = (double)(sim_xorshift(&G.rng) >> 11) / 9007199254740992.0 < r->p;
    if (!fire)
        return 0;
    r->delivered++;
    G.delivered++;
    if (r->times && r->delivered >= r->times)
        r->used = 0;
    return 1;
}

/* The calls that need no active context (device queries, versions, the
 * entry points: none of them is documented to create one, and cudaGetDevice
 * only reports the choice); every other call is "a CUDA Runtime API call
 * which requires an active context" (see sim_t_device) and initialises one. */
static int needs_ctx(int fid)
{
    switch (fid) {
    case F_cudaGetDeviceCount:
    case F_cudaSetDevice:
    case F_cudaGetDevice:
    case F_cudaGetDeviceProperties:
    case F_cudaDeviceGetAttribute:
    case F_cudaDeviceGetPCIBusId:
    case F_cudaDriverGetVersion:
    case F_cudaRuntimeGetVersion:
    case F_cudaPointerGetAttributes:
    case F_cudaGetDriverEntryPointByVersion:
#define NO_CTX_(n) case F_##n:
        SIM_NVJPEG_CALLS(NO_CTX_)
#undef NO_CTX_
        return 0;
    default:
        return 1;
    }
}

/* The "potentially unsafe API calls" of stream capture
 * (cudaThreadExchangeStreamCaptureMode: "some actions, such as a call to
 * cudaMalloc, may be unsafe"): in this model, the calls that allocate or
 * free memory, and those that wait for or ask about the device's progress
 * from the host (a copy that returns only once done counts too: see
 * copy_call). A call on a capturing stream itself is judged apart
 * (sim_capture_op). */
static int unsafe_call(int fid)
{
    switch (fid) {
    case F_cudaMalloc:
    case F_cudaMallocHost:
    case F_cudaHostAlloc:
    case F_cudaMallocManaged:
    case F_cudaFree:
    case F_cudaFreeHost:
    case F_cudaMemcpy:
    case F_cudaMemset:
    case F_cudaStreamQuery:
    case F_cudaStreamSynchronize:
    case F_cudaDeviceSynchronize:
    case F_cudaEventQuery:
    case F_cudaEventSynchronize:
        return 1;
    default:
        return 0;
    }
}

/* Every exported call starts here: G.mu is taken (sim_end() gives it back).
 * Returns the error to fail with: a call from a host function, or an
 * injected fault. *async gets an asynchronous fault's error, for the
 * operation the call queues. */
cudaError_t sim_begin(int fid, int has_stream, cudaStream_t stream,
                      cudaError_t *async)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    G.calls[fid]++;
    if (async)
        *async = cudaSuccess;
    if (sim_t_in_callback)
        return cudaErrorNotPermitted;
    for (int i = 0; i < MAX_RULES; i++) {
        rule *r = &G.rules[i];
        const int async_rule = r->async;
        cudaError_t e = r->error;
        if (!rule_fires(r, fid, has_stream, stream))
            continue;
        if (async_rule && async) {
            *async = e ? e : cudaErrorIllegalAddress;
            return cudaSuccess;
        }
        if (async_rule && !e)
            e = cudaErrorIllegalAddress;
        if (!e)
            e = usual_error(fid);
        if (is_sticky(e) && sim_cur() < G.cfg.devices)
            sim_break_device(sim_cur(), e);
        return e;
    }
    if (unsafe_call(fid)) {
        const cudaError_t c = sim_capture_forbids();
        if (c != cudaSuccess)
            return c;
    }
    return needs_ctx(fid) ? sim_bind_ctx() : cudaSuccess;
}

cudaError_t sim_end(cudaError_t e)
{
    pthread_mutex_unlock(&G.mu);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        t_last = e;
    return e;
}

/* The device's sticky error, if it has one; G.mu held. */
cudaError_t sim_ctx(int d)
{
    return G.dev[d].sticky;
}

cudaError_t cudaGetLastError(void)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    const cudaError_t sticky =
        sim_cur() < G.cfg.devices ? G.dev[sim_cur()].sticky : cudaSuccess;
    pthread_mutex_unlock(&G.mu);
    const cudaError_t e = sticky ? sticky : t_last;
    t_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    const cudaError_t sticky =
        sim_cur() < G.cfg.devices ? G.dev[sim_cur()].sticky : cudaSuccess;
    pthread_mutex_unlock(&G.mu);
    return sticky ? sticky : t_last;
}

/* ---- the control interface ---- */

void cudasim_get_config(cudasim_config *c)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    *c = G.cfg;
    pthread_mutex_unlock(&G.mu);
}

static int anything_live(void)
{
    for (const struct CUstream_st *s = G.streams; s; s = s->next)
        if (!s->legacy && !s->per_thread)
            return 1;
    return G.allocs || G.events;
}

int cudasim_set_config(const cudasim_config *c)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    int rc = 0;
    if (c->devices != G.cfg.devices || c->device_bytes != G.cfg.device_bytes) {
        if (anything_live() || c->devices < 0 ||
            c->devices > CUDASIM_MAX_DEVICES)
            rc = -1;
    }
    if (rc == 0) {
        G.cfg = *c;
        G.rng = c->seed;
        if (sim_t_device >= G.cfg.devices)
            sim_t_device = 0;
        for (int i = 0; i < sim_t_depth; i++)
            if (sim_t_stack[i] >= G.cfg.devices)
                sim_t_stack[i] = 0;
    }
    pthread_mutex_unlock(&G.mu);
    return rc;
}

static int add_rule(const cudasim_fault *f)
{
    const int fid = find_fid(f->call);
    if (fid == -2)
        return -1;
    for (int i = 0; i < MAX_RULES; i++) {
        rule *r = &G.rules[i];
        if (r->used)
            continue;
        *r = (rule){.used = 1,
                    .fid = fid,
                    .nth = f->nth,
                    .times = f->times ? f->times
                             : f->nth ? 1
                                      : 0,
                    .p = f->probability > 0 ? f->probability : 1.0,
                    .error = f->error,
                    .on_stream = f->on_stream,
                    .stream = f->stream,
                    .thread_only = f->this_thread     ? 1
                                   : f->other_threads ? -1
                                                      : 0,
                    .thread = pthread_self(),
                    .async = f->asynchronous};
        return i;
    }
    return -1;
}

int cudasim_inject(const cudasim_fault *f)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    const int rc = f ? add_rule(f) : -1;
    pthread_mutex_unlock(&G.mu);
    return rc;
}

void cudasim_clear_faults(void)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    memset(G.rules, 0, sizeof G.rules);
    for (int d = 0; d < CUDASIM_MAX_DEVICES; d++)
        G.dev[d].sticky = cudaSuccess;
    pthread_mutex_unlock(&G.mu);
}

unsigned long cudasim_faults_delivered(void)
{
    pthread_mutex_lock(&G.mu);
    const unsigned long n = G.delivered;
    pthread_mutex_unlock(&G.mu);
    return n;
}

unsigned long cudasim_calls(const char *call)
{
    pthread_mutex_lock(&G.mu);
    unsigned long n = 0;
    const int fid = find_fid(call);
    for (int i = 0; i < F_COUNT; i++)
        if (fid == -1 || fid == i)
            n += G.calls[i];
    pthread_mutex_unlock(&G.mu);
    return n;
}

void cudasim_pause(int on)
{
    pthread_mutex_lock(&G.mu);
    G.paused = on;
    if (!on)
        for (struct CUstream_st *s = G.streams; s; s = s->next)
            pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&G.mu);
}

int cudasim_blocked_threads(void)
{
    pthread_mutex_lock(&G.mu);
    const int n = G.blocked;
    pthread_mutex_unlock(&G.mu);
    return n;
}

void cudasim_get_live(cudasim_live *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&G.mu);
    for (const alloc *a = G.allocs; a; a = a->next) {
        if (a->kind == MEM_DEVICE) {
            out->device_allocs++;
            out->device_bytes += a->size;
        } else if (a->kind == MEM_PINNED) {
            out->pinned_allocs++;
            out->pinned_bytes += a->size;
        } else {
            out->managed_allocs++;
            out->managed_bytes += a->size;
        }
    }
    for (const struct CUstream_st *s = G.streams; s; s = s->next)
        out->streams += !s->legacy && !s->per_thread && !s->destroyed;
    for (int d = 0; d < CUDASIM_MAX_DEVICES; d++)
        if (G.dev[d].has_ctx) {
            out->contexts++;
            out->context_mask |= 1u << d;
            out->context_bytes += G.cfg.context_bytes;
        }
    for (const struct CUevent_st *v = G.events; v; v = v->next)
        out->events++;
    pthread_mutex_unlock(&G.mu);
}

unsigned long cudasim_violations(void)
{
    pthread_mutex_lock(&G.mu);
    const unsigned long n = G.violations;
    pthread_mutex_unlock(&G.mu);
    return n;
}

cudaError_t cudasim_call(const char *name)
{
    const int fid = find_fid(name);
    if (fid < 0)
        return cudaErrorInvalidValue;
    /* sim_begin counts it and delivers a rule's fault; the error is the
     * caller's to report in its own terms, not a runtime error left
     * pending on the thread. */
    const cudaError_t e = sim_begin(fid, 0, NULL, NULL);
    pthread_mutex_unlock(&G.mu);
    return e;
}
