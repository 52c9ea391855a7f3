/* pinload._pinload: the CPython extension over include/pinload.h; what its
 * files share.
 *
 * Three types: Loader (one pl_loader; loader.c), Batch (one pl_batch held
 * from pl_loader_next until the Batch and every DLPack view of it are gone;
 * batch.c, with the DLPack export) and View (one array of a batch: images,
 * labels, ..., exported through the DLPack protocol without a copy;
 * view.c). module.c has the module, its constants and functions and the
 * errors; config.c the pl_config fields by name; logq.c the log queue.
 * pinload/__init__.py builds the Pythonic API on them.
 *
 * Locks and threads: the GIL is released around every call that can wait
 * (create, next, release, destroy, state). The library's log callback runs
 * on its worker threads and never touches Python: it appends to a queue
 * that the calling thread drains into Python (the `log` callable) when a
 * call returns, so a worker logging while the main thread waits in next
 * cannot deadlock on the GIL. Loader.mu guards `inflight` (threads inside a
 * library call), `held` (batches not yet released) and `closing`:
 * pl_loader_destroy runs only once nobody is inside a call and no batch is
 * held, so no DLPack view can outlive the memory it points into.
 *
 * The limited API: setup.py defines Py_LIMITED_API as 0x030A0000 (CPython
 * 3.10's stable ABI: one abi3 wheel for 3.10 and every later version), so
 * these files use only what it declares (not Py_buffer, nor
 * PyType_GetName: 3.11's). The types are heap types made
 * from specs (PyType_FromModuleAndSpec) whose instances join the garbage
 * collector, and what was global is the module's state (plpy_state,
 * reached from any of our objects through its type). The same sources
 * build against the full API (a free-threaded CPython, which has no
 * limited API). */
#ifndef PINLOAD_PY_H
#define PINLOAD_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlpack.h"
#include "pinload.h"

/* The extension's own symbols stay inside it (it links libpinload.a). */
#pragma GCC visibility push(hidden)

/* ---------------------------------------------------------------------------
 * The module's state (module.c) */

typedef struct {
    PyTypeObject *Loader, *Batch, *View; /* the heap types */
    /* {code: class}, registered by pinload/__init__.py; NULL before */
    PyObject *error_classes;
} plpy_state;

/* The state of the module that made obj's type (Loader, Batch or View:
 * none of them can be subclassed, so the type is always ours). */
static inline plpy_state *state_of(void *obj)
{
    return (plpy_state *)PyType_GetModuleState(Py_TYPE((PyObject *)obj));
}

/* A heap type's instance goes: untracked by the caller first, then freed
 * by its type's tp_free, and the reference it held to its type dropped. */
static inline void free_instance(void *obj)
{
    PyTypeObject *tp = Py_TYPE((PyObject *)obj);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(obj);
    Py_DECREF((PyObject *)tp);
}

/* The types' specs, made into types by the module (module.c). */
extern PyType_Spec Loader_spec, Batch_spec, View_spec;

/* ---------------------------------------------------------------------------
 * Errors (module.c): pinload/__init__.py registers a class per status
 * code, in the module's state `st` (NULL, or none registered: RuntimeError
 * is raised). */

/* The exception's args (code, name, detail) for status `rc`; the detail is
 * read now, before anything else can overwrite the thread's last error. */
PyObject *error_args(int rc, const char *detail);
/* Raise the class registered for rc with `args` (stolen; NULL: an
 * exception is already set). */
void error_set(plpy_state *st, int rc, PyObject *args);
/* error_set(st, rc, error_args(rc, detail)); returns NULL. */
PyObject *raise_status(plpy_state *st, int rc, const char *detail);

/* ---------------------------------------------------------------------------
 * The log queue (logq.c): filled by the library's threads, drained under
 * the GIL. */

typedef struct logq logq;
logq *logq_new(void);
void logq_free(logq *q);
/* The library's log callback (pl_config.log), ctx the queue. */
void logq_push(void *ctx, pl_log_level level, const char *msg);
/* Hand every queued message to cb(level, text); with the GIL, and with no
 * exception set (one raised by cb is reported as unraisable). */
void logq_drain(logq *q, PyObject *cb);

/* ---------------------------------------------------------------------------
 * pl_config by name (config.c) */

/* Fill cfg (pl_config_default'ed by the caller) from {name: value}. `keep`
 * (a list) receives objects that must live until pl_loader_create returns
 * (the path's bytes); `state` holds the resume state's bytes. 0, or -1 with
 * an exception (TypeError for an unknown name). */
int config_from_dict(PyObject *dict, pl_config *cfg, PyObject *keep,
                     pl_state *state);
/* pl_config_default() as {field: value}. */
PyObject *config_defaults(void);
/* A state's PL_STATE_BYTES bytes from bytes, bytearray or memoryview `obj`
 * into *state: 0, or -1 with an exception (ValueError naming `what` for
 * another length). */
int state_from_object(PyObject *obj, pl_state *state, const char *what);

/* ---------------------------------------------------------------------------
 * The types */

typedef struct {
    PyObject_HEAD pl_loader *l;
    pl_info info;
    PyObject *backend_name;
    logq *q;
    PyObject *log; /* callable(level, text), or None */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int inflight;    /* threads inside a library call on l */
    Py_ssize_t held; /* batches handed out and not released */
    int closing;     /* close() was called: no new call may start */
    int destroying;  /* one thread is destroying l */
    int ready;       /* mu and cv are initialised */
} LoaderObject;

typedef struct {
    PyObject_HEAD LoaderObject *owner;
    const pl_batch *b; /* the loader's: read it only while not released */
    int released;
    /* What the batch is, copied at next(): once released, the pl_batch is
     * the loader's again (refilled by its threads, or freed with it), and
     * a Batch object may outlive both. */
    int32_t count;
    int64_t epoch, index;
    int has_host;
    int32_t num_classes; /* soft labels' width (a mixup op), or 0 */
    /* config.views: each view's size (0: none, the loader's info) */
    int nviews;
    int32_t view_w[PL_VIEWS_MAX], view_h[PL_VIEWS_MAX];
    size_t view_sb[PL_VIEWS_MAX];
    Py_ssize_t exports; /* DLPack tensors made from this batch, alive */
    /* The consumers' streams (__dlpack__), each once: the batch goes back
     * after the work queued on all of them. */
    struct CUstream_st *streams[PL_RELEASE_STREAMS_MAX];
    int nstreams;
} BatchObject;

enum { V_IMAGES, V_HOST, V_LABELS, V_INDICES, V_STATUS, V_SOFT };

typedef struct {
    PyObject_HEAD BatchObject *batch;
    int which;
    int view; /* V_IMAGES, V_HOST: which of config.views (0: the batch) */
} ViewObject;

/* Destroy l; the caller set self->destroying under mu, holds no GIL
 * (loader.c). */
void loader_destroy_nogil(LoaderObject *self);

/* One array of a batch as DLPack lays it out (view.c). */
typedef struct {
    const void *data;
    pldl_device device;
    pldl_dtype dtype;
    int ndim;
    int64_t shape[4];
    size_t nbytes;
    const char *dtype_name;
    int channels_last; /* images: NCHW's shape, NHWC's strides */
} layout;

/* The batch's DLPack export (batch.c). batch_stream: __dlpack__'s stream
 * argument for CUDA images: notes the consumer's stream for the release
 * and makes it wait for the batch's copy; 0, or -1 with an exception.
 * batch_export: a capsule of `lay` (a copy of host memory with want_copy),
 * versioned (DLPack 1.0) or not; the batch is held until its deleter
 * runs. */
int batch_stream(BatchObject *b, PyObject *stream);
PyObject *batch_export(BatchObject *b, const layout *lay, int want_copy,
                       int versioned);

#pragma GCC visibility pop

#endif
