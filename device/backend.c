#include "backend.h"

#include "../common/error.h"

/* PL_HAVE_CUDA is set by the Makefile when the CUDA toolkit was found at
 * build time; this is the only place that asks. */
int backend_open(backend **out, int device, int local_rank, logger *lg)
{
    char why[200] = "built without CUDA";
    if (device == PL_DEVICE_HOST)
        return backend_host_open(out, lg, "config.device is PL_DEVICE_HOST");
#ifdef PL_HAVE_CUDA
    const int rc =
        backend_cuda_open(out, device, local_rank, lg, why, sizeof why);
    if (rc != PL_ECUDA || device != PL_DEVICE_AUTO)
        return rc; /* opened, or an ordinal that cannot be had */
#else
    (void)local_rank;
    if (device != PL_DEVICE_AUTO)
        return err_set(PL_ECUDA,
                       "pl_loader_create: config.device: CUDA device %d "
                       "requested, but this build of pinload has no CUDA",
                       device == PL_DEVICE_LOCAL_RANK ? local_rank : device);
#endif
    return backend_host_open(out, lg, why);
}

void backend_close(backend *b)
{
    if (b)
        b->ops->close(b);
}

int backend_stream_wait(be_stream *s, struct CUstream_st *stream)
{
#ifdef PL_HAVE_CUDA
    return backend_cuda_stream_wait(s, stream);
#else
    (void)s;
    (void)stream;
    return err_set(PL_EINVAL, "pl_batch_wait: a CUDA event in a build "
                              "without CUDA");
#endif
}
