/* cudasim's devices and contexts (see sim.h for its files): the calling
 * thread's current contexts, primary contexts, the device queries, and
 * the driver's context calls through the runtime's entry points. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

/* The calling thread's CUDA state (sim.h). */
_Thread_local int sim_t_device;
_Thread_local int sim_t_stack[CTX_STACK];
_Thread_local int sim_t_depth;

/* The device whose context the runtime uses now, without creating one. */
int sim_cur(void)
{
    return sim_t_depth ? sim_t_stack[sim_t_depth - 1] : sim_t_device;
}

/* Creates device d's primary context if it is not yet; G.mu held. Since
 * CUDA 12, cudaSetDevice "will also immediately initialize the runtime
 * state on the primary context, and the context will be current on device
 * immediately. This function will return an error if the device is in
 * cudaComputeModeExclusiveProcess and is occupied by another process"
 * (cudaSetDevice, Runtime API). So choosing a device costs it a context:
 * device memory for its state (a few hundred MB on a real GPU:
 * CUDASIM_CONTEXT_MB, 300 by default), and cudaErrorDevicesUnavailable on
 * an exclusive-process GPU another process holds (CUDASIM_EXCLUSIVE_BUSY,
 * the mask of such devices). */
static cudaError_t make_primary(int d)
{
    if (d < 0 || d >= G.cfg.devices)
        return G.cfg.devices ? cudaErrorInvalidDevice : cudaErrorNoDevice;
    sim_device *v = &G.dev[d];
    if (v->has_ctx)
        return cudaSuccess;
    if (G.cfg.exclusive_busy & (1u << d))
        return cudaErrorDevicesUnavailable;
    if (v->used + G.cfg.context_bytes > G.cfg.device_bytes)
        return cudaErrorMemoryAllocation;
    v->has_ctx = 1;
    v->used += G.cfg.context_bytes;
    G.ctxs[d].device = d;
    return cudaSuccess;
}

/* The runtime's lazy initialisation: a call that needs a context, on a
 * thread with none current, creates (or takes) the primary context of
 * sim_t_device and makes it current. G.mu held. */
cudaError_t sim_bind_ctx(void)
{
    if (sim_t_depth)
        return cudaSuccess;
    if (G.cfg.devices == 0)
        return cudaSuccess; /* the call itself says cudaErrorNoDevice */
    const cudaError_t e = make_primary(sim_t_device);
    if (e == cudaSuccess)
        sim_t_stack[sim_t_depth++] = sim_t_device;
    return e;
}

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
    cudaError_t e = sim_begin(F_cudaGetDeviceCount, 0, NULL, NULL);
    if (e == cudaSuccess && !count)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        *count = G.cfg.devices;
        if (G.cfg.devices == 0)
            e = cudaErrorNoDevice;
    } else if (count) {
        *count = 0;
    }
    return sim_end(e);
}

cudaError_t cudaSetDevice(int device)
{
    cudaError_t e = sim_begin(F_cudaSetDevice, 0, NULL, NULL);
    if (e == cudaSuccess && G.cfg.devices == 0)
        e = cudaErrorNoDevice;
    else if (e == cudaSuccess && (device < 0 || device >= G.cfg.devices))
        e = cudaErrorInvalidDevice;
    /* CUDA 12: the device's primary context is created and made current
     * at once (see make_primary), replacing the thread's current one. */
    if (e == cudaSuccess)
        e = make_primary(device);
    if (e == cudaSuccess) {
        sim_t_device = device;
        if (sim_t_depth)
            sim_t_stack[sim_t_depth - 1] = device;
        else
            sim_t_stack[sim_t_depth++] = device;
    }
    return sim_end(e);
}

cudaError_t cudaGetDevice(int *device)
{
    cudaError_t e = sim_begin(F_cudaGetDevice, 0, NULL, NULL);
    if (e == cudaSuccess && !device)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess && G.cfg.devices == 0)
        e = cudaErrorNoDevice;
    if (e == cudaSuccess)
        *device = sim_cur(); /* creates nothing */
    return sim_end(e);
}

cudaError_t sim_check_device(int device)
{
    if (G.cfg.devices == 0)
        return cudaErrorNoDevice;
    return device < 0 || device >= G.cfg.devices ? cudaErrorInvalidDevice
                                                 : cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    cudaError_t e = sim_begin(F_cudaGetDeviceProperties, 0, NULL, NULL);
    if (e == cudaSuccess && !prop)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_check_device(device);
    if (e == cudaSuccess) {
        memset(prop, 0, sizeof *prop);
        snprintf(prop->name, sizeof prop->name, "simulated");
        prop->totalGlobalMem = G.cfg.device_bytes;
        prop->warpSize = 32;
        prop->maxThreadsPerBlock = 1024;
        prop->major = 9;
        prop->minor = 0;
        prop->multiProcessorCount = 132;
        prop->asyncEngineCount = 2;
        prop->unifiedAddressing = 1;
        prop->managedMemory = 1;
        prop->concurrentManagedAccess = G.cfg.concurrent_managed;
        prop->pciDeviceID = device;
    }
    return sim_end(e);
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                   int device)
{
    cudaError_t e = sim_begin(F_cudaDeviceGetAttribute, 0, NULL, NULL);
    if (e == cudaSuccess && !value)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_check_device(device);
    if (e != cudaSuccess)
        return sim_end(e);
    switch (attr) {
    case cudaDevAttrClockRate:
        *value = 1980000; /* kHz */
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = 132;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = 9;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = 0;
        break;
    case cudaDevAttrWarpSize:
        *value = 32;
        break;
    case cudaDevAttrMaxThreadsPerBlock:
        *value = 1024;
        break;
    case cudaDevAttrAsyncEngineCount:
        *value = 2;
        break;
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrManagedMemory:
        *value = 1;
        break;
    case cudaDevAttrConcurrentManagedAccess:
        *value = G.cfg.concurrent_managed;
        break;
    default:
        fprintf(stderr,
                "cudasim: cudaDeviceGetAttribute(%d) is not "
                "simulated\n",
                (int)attr);
        e = cudaErrorNotSupported;
    }
    return sim_end(e);
}

/* "Returns an ASCII string identifying the device dev in the
 * NULL-terminated string pointed to by pciBusId. len specifies the maximum
 * length of the string that may be returned", "[domain]:[bus]:[device].
 * [function] where domain, bus, device, and function are all hexadecimal
 * values" (cudaDeviceGetPCIBusId); the device's own, from the settings. */
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    cudaError_t e = sim_begin(F_cudaDeviceGetPCIBusId, 0, NULL, NULL);
    if (e == cudaSuccess && (!pciBusId || len <= 0))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_check_device(device);
    if (e == cudaSuccess)
        snprintf(pciBusId, (size_t)len, "%s", G.cfg.pci_bus_id[device]);
    return sim_end(e);
}

cudaError_t cudaDriverGetVersion(int *v)
{
    cudaError_t e = sim_begin(F_cudaDriverGetVersion, 0, NULL, NULL);
    if (e == cudaSuccess && !v)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        *v = CUDART_VERSION;
    return sim_end(e);
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    cudaError_t e = sim_begin(F_cudaRuntimeGetVersion, 0, NULL, NULL);
    if (e == cudaSuccess && !v)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        *v = CUDART_VERSION;
    return sim_end(e);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    cudaError_t e = sim_begin(F_cudaMemGetInfo, 0, NULL, NULL);
    if (e == cudaSuccess && (!free_bytes || !total))
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = sim_check_device(sim_cur());
    if (e == cudaSuccess)
        e = sim_ctx(sim_cur());
    if (e == cudaSuccess) {
        *total = G.cfg.device_bytes;
        *free_bytes = G.cfg.device_bytes - G.dev[sim_cur()].used;
    }
    return sim_end(e);
}

/* ---- the driver's context calls, through the runtime's entry points ----
 *
 * "cudaGetDriverEntryPointByVersion ... returns the address of the driver
 * API function for the requested CUDA version" (Runtime API, Driver Entry
 * Point Access), so a program can push and pop contexts without linking
 * libcuda. The few context calls pinload needs are simulated; any other
 * symbol is cudaDriverEntryPointSymbolNotFound. */

static CUresult drv_begin(void)
{
    pthread_mutex_lock(&G.mu);
    sim_init_locked();
    return sim_t_in_callback ? CUDA_ERROR_NOT_PERMITTED : CUDA_SUCCESS;
}

static CUresult drv_end(CUresult r)
{
    pthread_mutex_unlock(&G.mu);
    return r;
}

static CUresult drv_error(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return CUDA_SUCCESS;
    case cudaErrorDevicesUnavailable:
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    case cudaErrorMemoryAllocation:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorNoDevice:
        return CUDA_ERROR_NO_DEVICE;
    default:
        return CUDA_ERROR_INVALID_DEVICE;
    }
}

/* "Retains the primary context on the device. Once the user successfully
 * retains the primary context, the primary context will be active"
 * (cuDevicePrimaryCtxRetain): created if it was not. */
static CUresult CUDAAPI sim_cuDevicePrimaryCtxRetain(CUcontext *pctx,
                                                     CUdevice dev)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = drv_error(make_primary(dev));
    if (r == CUDA_SUCCESS) {
        G.dev[dev].ctx_retain++;
        *pctx = &G.ctxs[dev];
    }
    return drv_end(r);
}

/* The context stays for the runtime's own use; only the count drops. */
static CUresult CUDAAPI sim_cuDevicePrimaryCtxRelease(CUdevice dev)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS &&
        (dev < 0 || dev >= G.cfg.devices || G.dev[dev].ctx_retain == 0))
        r = CUDA_ERROR_INVALID_DEVICE;
    if (r == CUDA_SUCCESS)
        G.dev[dev].ctx_retain--;
    return drv_end(r);
}

static int is_ctx(CUcontext c)
{
    return c >= &G.ctxs[0] && c < &G.ctxs[G.cfg.devices] &&
           G.dev[c - G.ctxs].has_ctx;
}

/* "Pushes the given context ctx onto the CPU thread's stack of current
 * contexts. The specified context becomes the CPU thread's current
 * context" (cuCtxPushCurrent). */
static CUresult CUDAAPI sim_cuCtxPushCurrent(CUcontext ctx)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && !is_ctx(ctx))
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS && sim_t_depth == CTX_STACK)
        r = CUDA_ERROR_INVALID_VALUE; /* the sim's limit, not CUDA's */
    if (r == CUDA_SUCCESS)
        sim_t_stack[sim_t_depth++] = (int)(ctx - G.ctxs);
    return drv_end(r);
}

/* "Pops the current CUDA context from the CPU thread ... If a context was
 * current to the CPU thread before cuCtxCreate() or cuCtxPushCurrent() was
 * called, this function makes that context current to the CPU thread
 * again" (cuCtxPopCurrent). */
static CUresult CUDAAPI sim_cuCtxPopCurrent(CUcontext *pctx)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && sim_t_depth == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) {
        const int d = sim_t_stack[--sim_t_depth];
        if (pctx)
            *pctx = &G.ctxs[d];
    }
    return drv_end(r);
}

/* "If no context is bound to the calling CPU thread then *pctx is set to
 * NULL and CUDA_SUCCESS is returned" (cuCtxGetCurrent). */
static CUresult CUDAAPI sim_cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = drv_begin();
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *pctx = sim_t_depth ? &G.ctxs[sim_t_stack[sim_t_depth - 1]] : NULL;
    return drv_end(r);
}

static const struct {
    const char *name;
    void *fn;
} entry_points[] = {
    {"cuDevicePrimaryCtxRetain", (void *)sim_cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", (void *)sim_cuDevicePrimaryCtxRelease},
    {"cuCtxPushCurrent", (void *)sim_cuCtxPushCurrent},
    {"cuCtxPopCurrent", (void *)sim_cuCtxPopCurrent},
    {"cuCtxGetCurrent", (void *)sim_cuCtxGetCurrent},
};

cudaError_t
cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                 unsigned int version, unsigned long long flags,
                                 enum cudaDriverEntryPointQueryResult *status)
{
    (void)flags;
    cudaError_t e =
        sim_begin(F_cudaGetDriverEntryPointByVersion, 0, NULL, NULL);
    if (e == cudaSuccess && (!symbol || !fn))
        e = cudaErrorInvalidValue;
    enum cudaDriverEntryPointQueryResult found =
        cudaDriverEntryPointSymbolNotFound;
    if (e == cudaSuccess) {
        *fn = NULL;
        for (size_t i = 0; i < sizeof entry_points / sizeof *entry_points; i++)
            if (!strcmp(entry_points[i].name, symbol)) {
                found = version > CUDART_VERSION
                            ? cudaDriverEntryPointVersionNotSufficent
                            : cudaDriverEntryPointSuccess;
                if (found == cudaDriverEntryPointSuccess)
                    *fn = entry_points[i].fn;
            }
    }
    if (e == cudaSuccess && status)
        *status = found;
    return sim_end(e);
}
