/* pinload._pinload: the CPython extension over include/pinload.h.
 *
 * Three types: Loader (one pl_loader), Batch (one pl_batch held from
 * pl_loader_next until the Batch and every DLPack view of it are gone) and
 * View (one array of a batch: images, labels, ..., exported through the
 * DLPack protocol without a copy). pinload/__init__.py builds the Pythonic
 * API on them.
 *
 * Locks and threads: the GIL is released around every call that can wait
 * (create, next, release, destroy, state). The library's log callback runs
 * on its worker threads and never touches Python: it appends to a queue
 * that the calling thread drains into Python (the `log` callable) when a
 * call returns, so a worker logging while the main thread waits in next
 * cannot deadlock on the GIL. Loader.mu guards `inflight` (threads inside a
 * library call), `held` (batches not yet released) and `closing`:
 * pl_loader_destroy runs only once nobody is inside a call and no batch is
 * held, so no DLPack view can outlive the memory it points into. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stddef.h>
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack.h"
#include "pinload.h"

/* ---------------------------------------------------------------------------
 * Errors: pinload/__init__.py registers a class per status code. */

static PyObject *error_classes; /* {code: class}, or NULL before import */

/* The exception for status `rc`, args (code, name, detail); the detail is
 * read now, before anything else can overwrite the thread's last error. */
static PyObject *error_args(int rc, const char *detail)
{
    if (!detail || !*detail)
        detail = pl_last_error();
    if (!detail || !*detail)
        detail = pl_strerror(rc);
    PyObject *msg = PyUnicode_DecodeUTF8(detail, (Py_ssize_t)strlen(detail),
                                         "backslashreplace");
    if (!msg)
        return NULL;
    PyObject *args = Py_BuildValue("(isN)", rc, pl_err_name(rc), msg);
    return args;
}

static void error_set(int rc, PyObject *args)
{
    if (!args)
        return; /* an exception is already set */
    PyObject *cls = NULL;
    if (error_classes) {
        PyObject *key = PyLong_FromLong(rc);
        if (key) {
            cls = PyDict_GetItemWithError(error_classes, key);
            Py_DECREF(key);
        }
    }
    if (!cls && !PyErr_Occurred())
        cls = PyExc_RuntimeError;
    if (cls)
        PyErr_SetObject(cls, args);
    Py_DECREF(args);
}

static PyObject *raise_status(int rc, const char *detail)
{
    error_set(rc, error_args(rc, detail));
    return NULL;
}

/* ---------------------------------------------------------------------------
 * The log queue: filled by the library's threads, drained under the GIL. */

#define LOGQ_CAP 4096 /* messages kept between two drains; more are counted */

typedef struct logmsg {
    struct logmsg *next;
    int level;
    char text[];
} logmsg;

typedef struct logq {
    pthread_mutex_t mu;
    logmsg *head, *tail;
    size_t n;
    uint64_t dropped;
} logq;

static void logq_push(void *ctx, pl_log_level level, const char *msg)
{
    logq *q = ctx;
    const size_t len = strlen(msg);
    logmsg *m = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->n < LOGQ_CAP)
        m = malloc(sizeof *m + len + 1);
    if (!m) {
        q->dropped++;
        pthread_mutex_unlock(&q->mu);
        return;
    }
    m->next = NULL;
    m->level = (int)level;
    memcpy(m->text, msg, len + 1);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->n++;
    pthread_mutex_unlock(&q->mu);
}

/* Hand every queued message to cb(level, text); with the GIL, and with no
 * exception set (one raised by cb is reported as unraisable). */
static void logq_drain(logq *q, PyObject *cb)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    logmsg *m = q->head;
    const uint64_t dropped = q->dropped;
    q->head = q->tail = NULL;
    q->n = 0;
    q->dropped = 0;
    pthread_mutex_unlock(&q->mu);
    while (m) {
        logmsg *next = m->next;
        if (cb && cb != Py_None) {
            PyObject *text = PyUnicode_DecodeUTF8(
                m->text, (Py_ssize_t)strlen(m->text), "backslashreplace");
            PyObject *r =
                text ? PyObject_CallFunction(cb, "iO", m->level, text) : NULL;
            Py_XDECREF(text);
            if (r)
                Py_DECREF(r);
            else
                PyErr_WriteUnraisable(cb);
        }
        free(m);
        m = next;
    }
    if (dropped && cb && cb != Py_None) {
        PyObject *r = PyObject_CallFunction(
            cb, "is", (int)PL_LOG_WARNING,
            "log messages were dropped: more than 4096 queued between two "
            "calls into the loader");
        if (r)
            Py_DECREF(r);
        else
            PyErr_WriteUnraisable(cb);
    }
}

static logq *logq_new(void)
{
    logq *q = calloc(1, sizeof *q);
    if (q)
        pthread_mutex_init(&q->mu, NULL);
    return q;
}

static void logq_free(logq *q)
{
    if (!q)
        return;
    for (logmsg *m = q->head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* ---------------------------------------------------------------------------
 * Loader */

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

static PyTypeObject LoaderType;
static PyTypeObject BatchType;
static PyTypeObject ViewType;

/* Begin a library call on self->l: 0, or -1 with ClosedError set. */
static int loader_enter(LoaderObject *self)
{
    int ok = 0;
    if (self->ready) {
        pthread_mutex_lock(&self->mu);
        ok = self->l && !self->closing;
        if (ok)
            self->inflight++;
        pthread_mutex_unlock(&self->mu);
    }
    if (!ok) {
        raise_status(PL_ECLOSED, "the loader is closed");
        return -1;
    }
    return 0;
}

static void loader_leave(LoaderObject *self)
{
    pthread_mutex_lock(&self->mu);
    self->inflight--;
    pthread_cond_broadcast(&self->cv);
    pthread_mutex_unlock(&self->mu);
}

/* Destroy l; the caller set self->destroying under mu, holds no GIL. */
static void loader_destroy_nogil(LoaderObject *self)
{
    pl_loader_destroy(self->l);
    pthread_mutex_lock(&self->mu);
    self->l = NULL;
    pthread_mutex_unlock(&self->mu);
}

/* The status as an exception, once the log is drained (a skipped file's
 * warning comes before the error that follows it). */
static PyObject *loader_fail(LoaderObject *self, int rc)
{
    PyObject *args = error_args(rc, NULL);
    logq_drain(self->q, self->log);
    error_set(rc, args);
    return NULL;
}

/* One pl_config field as a Python name. */
typedef enum { F_I32, F_I64, F_U64, F_FLOAT3, F_PATH, F_STATE } ftype;
typedef struct {
    const char *name;
    size_t offset;
    ftype type;
} field;

/* clang-format off */
#define FIELD(n, t) {#n, offsetof(pl_config, n), t}
/* clang-format on */
/* In the header's order and groups. */
static const field fields[] = {
    FIELD(data, F_PATH),
    FIELD(batch_size, F_I32),
    FIELD(width, F_I32),
    FIELD(height, F_I32),
    FIELD(format, F_I32),
    FIELD(augment, F_I32),
    FIELD(mean, F_FLOAT3),
    FIELD(std, F_FLOAT3),
    FIELD(dct_scaling, F_I32),
    FIELD(seed, F_U64),
    FIELD(shuffle, F_I32),
    FIELD(drop_last, F_I32),
    FIELD(rank, F_I32),
    FIELD(world_size, F_I32),
    FIELD(shard_mode, F_I32),
    FIELD(first_epoch, F_I64),
    FIELD(resume, F_STATE),
    FIELD(num_workers, F_I32),
    FIELD(pin_workers, F_I32),
    FIELD(readahead, F_I32),
    FIELD(prefetch, F_I32),
    FIELD(memory, F_I32),
    FIELD(pinned_fallback, F_I32),
    FIELD(device, F_I32),
    FIELD(device_buffers, F_I32),
    FIELD(keep_host, F_I32),
    FIELD(gpu_normalize, F_I32),
    FIELD(on_error, F_I32),
    FIELD(strict, F_I32),
    FIELD(max_width, F_I32),
    FIELD(max_height, F_I32),
    FIELD(max_pixels, F_I64),
    FIELD(max_file_bytes, F_I64),
    FIELD(max_decode_ms, F_I32),
    FIELD(max_scans, F_I32),
    FIELD(max_decode_memory, F_I64),
    /* log and log_ctx are the extension's own (the queue). */
    FIELD(channels_last, F_I32),
    FIELD(max_device_buffers, F_I32),
    FIELD(cache_dir, F_PATH),
    FIELD(cache_limit, F_I64),
    FIELD(remote_timeout_ms, F_I32),
    FIELD(remote_retries, F_I32),
};
#undef FIELD
/* New fields are appended after remote_retries, the header's last: one
 * must be added above too. (The struct ends with that field and its
 * padding.) */
_Static_assert(sizeof(pl_config) - offsetof(pl_config, remote_retries) -
                       sizeof(int32_t) <
                   _Alignof(pl_config),
               "pl_config grew: add the new field to python/src/_pinload.c");

static const field *field_find(const char *name)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

/* Store `value` into cfg's field f. `keep` receives objects that must live
 * until pl_loader_create returns (the path's bytes, the state's buffer). */
static int field_set(pl_config *cfg, const field *f, PyObject *value,
                     PyObject *keep, pl_state *state)
{
    char *p = (char *)cfg + f->offset;
    switch (f->type) {
    case F_I32:
    case F_I64: {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %s",
                         f->name, Py_TYPE(value)->tp_name);
            return -1;
        }
        if (overflow ||
            (f->type == F_I32 && (v < INT32_MIN || v > INT32_MAX))) {
            PyErr_Format(PyExc_ValueError, "%s: %R is out of range", f->name,
                         value);
            return -1;
        }
        if (f->type == F_I32) {
            const int32_t v32 = (int32_t)v;
            memcpy(p, &v32, sizeof v32);
        } else {
            const int64_t v64 = (int64_t)v;
            memcpy(p, &v64, sizeof v64);
        }
        return 0;
    }
    case F_U64: {
        if (!PyLong_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %s",
                         f->name, Py_TYPE(value)->tp_name);
            return -1;
        }
        const unsigned long long v = PyLong_AsUnsignedLongLong(value);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: %R is out of range [0, 2**64)",
                         f->name, value);
            return -1;
        }
        const uint64_t v64 = v;
        memcpy(p, &v64, sizeof v64);
        return 0;
    }
    case F_FLOAT3: {
        PyObject *seq = PySequence_Fast(value, "");
        if (!seq || PySequence_Fast_GET_SIZE(seq) != 3) {
            Py_XDECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: expected 3 numbers", f->name);
            return -1;
        }
        float v[3];
        for (int i = 0; i < 3; i++) {
            const double d = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
            if (d == -1.0 && PyErr_Occurred()) {
                Py_DECREF(seq);
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "%s: expected 3 numbers",
                             f->name);
                return -1;
            }
            v[i] = (float)d;
        }
        Py_DECREF(seq);
        memcpy(p, v, sizeof v);
        return 0;
    }
    case F_PATH: {
        const char *s = NULL;
        if (value != Py_None) {
            PyObject *bytes = NULL;
            if (!PyUnicode_FSConverter(value, &bytes))
                return -1;
            if (PyList_Append(keep, bytes) < 0) {
                Py_DECREF(bytes);
                return -1;
            }
            s = PyBytes_AS_STRING(bytes);
            Py_DECREF(bytes);
        }
        memcpy(p, &s, sizeof s);
        return 0;
    }
    case F_STATE: {
        const pl_state *sp = NULL;
        if (value != Py_None) {
            Py_buffer view;
            if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0)
                return -1;
            const int ok = view.len == PL_STATE_BYTES;
            if (ok)
                memcpy(state->bytes, view.buf, PL_STATE_BYTES);
            PyBuffer_Release(&view);
            if (!ok) {
                PyErr_Format(PyExc_ValueError, "%s: a loader state is %d bytes",
                             f->name, PL_STATE_BYTES);
                return -1;
            }
            sp = state;
        }
        memcpy(p, &sp, sizeof sp);
        return 0;
    }
    }
    return 0;
}

static PyObject *info_dict(const pl_info *in, PyObject *backend_name)
{
    return Py_BuildValue(
        "{sLsLsLsisisisisisisnsnsisisisisisisisisisOsisi}", "dataset_size",
        (long long)in->dataset_size, "samples_per_epoch",
        (long long)in->samples_per_epoch, "batches_per_epoch",
        (long long)in->batches_per_epoch, "num_classes", in->num_classes,
        "batch_size", in->batch_size, "width", in->width, "height", in->height,
        "channels", in->channels, "format", in->format, "sample_bytes",
        (Py_ssize_t)in->sample_bytes, "batch_bytes",
        (Py_ssize_t)in->batch_bytes, "backend", in->backend, "device",
        in->device, "num_workers", in->num_workers, "prefetch", in->prefetch,
        "device_buffers", in->device_buffers, "rank", in->rank, "world_size",
        in->world_size, "memory", in->memory, "pinned", in->pinned,
        "backend_name", backend_name, "gpu_normalize", in->gpu_normalize,
        "channels_last", in->channels_last);
}

/* pl_loader_create on a thread of its own, so that Ctrl-C reaches Python
 * while a large dataset is listed: the caller's thread waits in slices of
 * 100 ms and checks for signals between them. Interrupted, it leaves: the
 * job goes on to its end, then destroys the loader and frees itself (it
 * owns copies of everything create reads, and the log queue). */
#ifdef PINLOAD_PY_CUDA
/* The CUDA runtime the library links, declared here so that the extension
 * needs no CUDA header (cudaError_t is an int-sized enum, 0 success). */
extern int cudaGetDevice(int *device);
extern int cudaSetDevice(int device);
#endif

typedef struct create_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pl_config cfg;
    pl_state state;
    char *data;
    logq *q;
    pl_loader *l;
    int rc, done, abandoned;
    /* PL_DEVICE_AUTO means the calling thread's current CUDA device
     * (torch.cuda.set_device's): the create thread is put on it first. */
    int cuda_device;
    char err[1024]; /* pl_last_error() of the create thread */
} create_job;

static void create_job_free(create_job *j)
{
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j->data);
    free(j);
}

static void *create_main(void *arg)
{
    create_job *j = arg;
#ifdef PINLOAD_PY_CUDA
    if (j->cuda_device >= 0)
        cudaSetDevice(j->cuda_device);
#endif
    j->rc = pl_loader_create(&j->cfg, &j->l);
    snprintf(j->err, sizeof j->err, "%s", pl_last_error());
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    const int abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) { /* nobody waits: what was made goes */
        pl_loader_destroy(j->l);
        logq_free(j->q);
        create_job_free(j);
    }
    return NULL;
}

/* Runs the job; 0 when it finished (j->rc, j->l, j->err hold its result),
 * -1 with Python's exception set when a signal handler raised (the job is
 * then abandoned: it is no longer the caller's to touch). */
static int create_wait(create_job *j)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int started = pthread_create(&t, &attr, create_main, j) == 0;
    pthread_attr_destroy(&attr);
    if (!started) { /* no thread to spare: create here, uninterruptible */
        Py_BEGIN_ALLOW_THREADS j->rc = pl_loader_create(&j->cfg, &j->l);
        Py_END_ALLOW_THREADS snprintf(j->err, sizeof j->err, "%s",
                                      pl_last_error());
        return 0;
    }
    for (;;) {
        int done;
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&j->mu);
        if (!j->done) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        }
        done = j->done;
        pthread_mutex_unlock(&j->mu);
        Py_END_ALLOW_THREADS if (done) return 0;
        if (PyErr_CheckSignals() < 0) {
            pthread_mutex_lock(&j->mu);
            done = j->done;
            j->abandoned = !done;
            pthread_mutex_unlock(&j->mu);
            if (done) { /* finished meanwhile: undo it here */
                Py_BEGIN_ALLOW_THREADS pl_loader_destroy(j->l);
                Py_END_ALLOW_THREADS j->l = NULL;
                return -1;
            }
            return -1;
        }
    }
}

static int Loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"config", "log", NULL};
    PyObject *config, *log = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|O", kwlist, &PyDict_Type,
                                     &config, &log))
        return -1;
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Loader.__init__ called twice");
        return -1;
    }
    if (log != Py_None && !PyCallable_Check(log)) {
        PyErr_SetString(PyExc_TypeError, "log: expected a callable or None");
        return -1;
    }

    pl_config cfg;
    pl_config_default(&cfg);
    pl_state state;
    PyObject *keep = PyList_New(0);
    if (!keep)
        return -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(config, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        const field *f = name ? field_find(name) : NULL;
        if (!f) {
            PyErr_Format(PyExc_TypeError, "unknown config field %R", key);
            Py_DECREF(keep);
            return -1;
        }
        if (field_set(&cfg, f, value, keep, &state) < 0) {
            Py_DECREF(keep);
            return -1;
        }
    }

    create_job *j = calloc(1, sizeof *j);
    j ? (void)(j->q = logq_new()) : (void)0;
    if (!j || !j->q || (cfg.data && !(j->data = strdup(cfg.data)))) {
        if (j && j->q)
            logq_free(j->q);
        free(j);
        Py_DECREF(keep);
        PyErr_NoMemory();
        return -1;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    /* The job's own copies: it may outlive this call. */
    j->cfg = cfg;
    j->cfg.data = j->data;
    if (cfg.resume) {
        j->state = *cfg.resume;
        j->cfg.resume = &j->state;
    }
    j->cfg.log = logq_push;
    j->cfg.log_ctx = j->q;
    j->cuda_device = -1;
#ifdef PINLOAD_PY_CUDA
    int dev;
    if (cfg.device == PL_DEVICE_AUTO && cudaGetDevice(&dev) == 0)
        j->cuda_device = dev;
#endif
    Py_DECREF(keep);
    self->q = j->q;
    Py_INCREF(log);
    self->log = log;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    self->ready = 1;

    if (create_wait(j) < 0) {
        /* KeyboardInterrupt, say. An abandoned job owns the queue now. */
        if (j->abandoned)
            self->q = NULL;
        else
            create_job_free(j);
        return -1;
    }
    const int rc = j->rc;
    pl_loader *l = j->l;
    char err[sizeof j->err];
    memcpy(err, j->err, sizeof err);
    create_job_free(j);
    if (rc < 0) {
        PyObject *eargs = error_args(rc, err);
        logq_drain(self->q, self->log);
        error_set(rc, eargs);
        return -1;
    }
    self->l = l;
    pl_loader_info(l, &self->info);
    self->backend_name = PyUnicode_DecodeUTF8(
        self->info.backend_name, (Py_ssize_t)strlen(self->info.backend_name),
        "backslashreplace");
    logq_drain(self->q, self->log);
    return self->backend_name ? 0 : -1;
}

static void Loader_dealloc(LoaderObject *self)
{
    /* No batch is alive (each holds a reference), nobody is inside a call. */
    if (self->l) {
        Py_BEGIN_ALLOW_THREADS pl_loader_destroy(self->l);
        Py_END_ALLOW_THREADS self->l = NULL;
    }
    if (self->q) {
        if (self->log && !PyErr_Occurred())
            logq_drain(self->q, self->log);
        logq_free(self->q);
    }
    Py_XDECREF(self->log);
    Py_XDECREF(self->backend_name);
    if (self->ready) {
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->cv);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

typedef struct {
    PyObject_HEAD LoaderObject *owner;
    const pl_batch *b;
    int released;
    Py_ssize_t exports;         /* DLPack tensors made from this batch, alive */
    struct CUstream_st *stream; /* the consumer's stream (__dlpack__) */
} BatchObject;

static PyObject *Loader_next(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (loader_enter(self) < 0)
        return NULL;
    const pl_batch *b = NULL;
    int rc, closed = 0;
    Py_BEGIN_ALLOW_THREADS rc = pl_loader_next(self->l, &b);
    if (rc == 0) {
        pthread_mutex_lock(&self->mu);
        closed = self->closing;
        if (!closed)
            self->held++;
        pthread_mutex_unlock(&self->mu);
        if (closed) /* close() waits for us: give it back first */
            pl_loader_release(self->l, b, NULL);
    }
    Py_END_ALLOW_THREADS;
    if (rc < 0 || closed) {
        PyObject *args = error_args(closed ? PL_ECLOSED : rc,
                                    closed ? "the loader is closed" : NULL);
        loader_leave(self);
        logq_drain(self->q, self->log);
        error_set(closed ? PL_ECLOSED : rc, args);
        return NULL;
    }
    loader_leave(self);
    logq_drain(self->q, self->log);
    if (rc == PL_EPOCH_END)
        Py_RETURN_NONE;
    BatchObject *bo = PyObject_New(BatchObject, &BatchType);
    if (!bo) {
        /* Give it back: nothing will. */
        Py_BEGIN_ALLOW_THREADS pl_loader_release(self->l, b, NULL);
        Py_END_ALLOW_THREADS pthread_mutex_lock(&self->mu);
        self->held--;
        pthread_mutex_unlock(&self->mu);
        return NULL;
    }
    Py_INCREF(self);
    bo->owner = self;
    bo->b = b;
    bo->released = 0;
    bo->exports = 0;
    bo->stream = NULL;
    return (PyObject *)bo;
}

static PyObject *Loader_close(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->ready)
        Py_RETURN_NONE;
    int destroy = 0;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->mu);
    self->closing = 1;
    while (self->inflight > 0)
        pthread_cond_wait(&self->cv, &self->mu);
    destroy = self->l && self->held == 0 && !self->destroying;
    if (destroy)
        self->destroying = 1;
    pthread_mutex_unlock(&self->mu);
    if (destroy)
        loader_destroy_nogil(self);
    Py_END_ALLOW_THREADS;
    logq_drain(self->q, self->log);
    Py_RETURN_NONE;
}

static PyObject *Loader_info(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->backend_name)
        return raise_status(PL_ECLOSED, "the loader was not created");
    return info_dict(&self->info, self->backend_name);
}

static PyObject *Loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (loader_enter(self) < 0)
        return NULL;
    pl_stats s;
    const int rc = pl_loader_stats(self->l, &s);
    loader_leave(self);
    if (rc < 0)
        return loader_fail(self, rc);
    return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsKsKsKsKsK}", "images_decoded",
                         (unsigned long long)s.images_decoded, "images_failed",
                         (unsigned long long)s.images_failed, "batches",
                         (unsigned long long)s.batches, "bytes_read",
                         (unsigned long long)s.bytes_read, "bytes_copied",
                         (unsigned long long)s.bytes_copied, "pinned_bytes",
                         (unsigned long long)s.pinned_bytes, "ns_read",
                         (unsigned long long)s.ns_read, "ns_decode",
                         (unsigned long long)s.ns_decode, "ns_augment",
                         (unsigned long long)s.ns_augment, "ns_copy",
                         (unsigned long long)s.ns_copy, "ns_wait",
                         (unsigned long long)s.ns_wait, "ns_h2d",
                         (unsigned long long)s.ns_h2d, "bytes_h2d",
                         (unsigned long long)s.bytes_h2d, "images_warned",
                         (unsigned long long)s.images_warned, "device_buffers",
                         (unsigned long long)s.device_buffers);
}

static PyObject *Loader_class_name(LoaderObject *self, PyObject *arg)
{
    const long label = PyLong_AsLong(arg);
    if (label == -1 && PyErr_Occurred())
        return NULL;
    if (loader_enter(self) < 0)
        return NULL;
    const char *name = NULL;
    const int rc = label < INT32_MIN || label > INT32_MAX
                       ? PL_EINVAL
                       : pl_loader_class_name(self->l, (int)label, &name);
    loader_leave(self);
    if (rc < 0)
        return loader_fail(self, rc);
    return PyUnicode_DecodeFSDefault(name);
}

static PyObject *Loader_sample(LoaderObject *self, PyObject *arg)
{
    const long long index = PyLong_AsLongLong(arg);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    if (loader_enter(self) < 0)
        return NULL;
    const char *path = NULL;
    int32_t label = 0;
    const int rc = pl_loader_sample(self->l, index, &path, &label);
    loader_leave(self);
    if (rc < 0)
        return loader_fail(self, rc);
    return Py_BuildValue("(Ni)", PyUnicode_DecodeFSDefault(path), (int)label);
}

static PyObject *Loader_epoch_order(LoaderObject *self, PyObject *arg)
{
    const long long epoch = PyLong_AsLongLong(arg);
    if (epoch == -1 && PyErr_Occurred())
        return NULL;
    const int64_t n = self->info.samples_per_epoch;
    int64_t *order = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order)
        return PyErr_NoMemory();
    if (loader_enter(self) < 0) {
        PyMem_Free(order);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pl_loader_epoch_order(self->l, epoch, order, n);
    Py_END_ALLOW_THREADS loader_leave(self);
    if (rc < 0) {
        PyMem_Free(order);
        return loader_fail(self, rc);
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(order[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    PyMem_Free(order);
    return list;
}

static PyObject *Loader_failures(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *list = PyList_New(0);
    if (!list || loader_enter(self) < 0) {
        Py_XDECREF(list);
        return NULL;
    }
    pl_failure f[64];
    size_t first = 0, n = 0;
    int rc;
    do {
        rc = pl_loader_failures(self->l, first, f, 64, &n);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            PyObject *t = Py_BuildValue(
                "(LNisNLi)", (long long)f[i].index,
                PyUnicode_DecodeFSDefault(f[i].path), (int)f[i].code,
                f[i].code ? pl_err_name(f[i].code) : "PL_OK",
                PyUnicode_DecodeUTF8(f[i].reason,
                                     (Py_ssize_t)strlen(f[i].reason),
                                     "backslashreplace"),
                (long long)f[i].count, (int)f[i].warnings);
            if (!t || PyList_Append(list, t) < 0) {
                Py_XDECREF(t);
                loader_leave(self);
                Py_DECREF(list);
                return NULL;
            }
            Py_DECREF(t);
        }
        first += n;
    } while (rc == 0 && n == 64);
    loader_leave(self);
    if (rc < 0) {
        Py_DECREF(list);
        return loader_fail(self, rc);
    }
    return list;
}

static PyObject *Loader_state(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (loader_enter(self) < 0)
        return NULL;
    pl_state s;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pl_loader_state(self->l, &s);
    Py_END_ALLOW_THREADS loader_leave(self);
    if (rc < 0)
        return loader_fail(self, rc);
    return PyBytes_FromStringAndSize((const char *)s.bytes, PL_STATE_BYTES);
}

static PyObject *Loader_drain_log(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    logq_drain(self->q, self->log);
    Py_RETURN_NONE;
}

static PyObject *Loader_get_held(LoaderObject *self, void *closure)
{
    (void)closure;
    Py_ssize_t held = 0;
    if (self->ready) {
        pthread_mutex_lock(&self->mu);
        held = self->held;
        pthread_mutex_unlock(&self->mu);
    }
    return PyLong_FromSsize_t(held);
}

static PyObject *Loader_get_closed(LoaderObject *self, void *closure)
{
    (void)closure;
    int closed = 1;
    if (self->ready) {
        pthread_mutex_lock(&self->mu);
        closed = self->closing || !self->l;
        pthread_mutex_unlock(&self->mu);
    }
    return PyBool_FromLong(closed);
}

static PyObject *Loader_get_destroyed(LoaderObject *self, void *closure)
{
    (void)closure;
    int gone = 1;
    if (self->ready) {
        pthread_mutex_lock(&self->mu);
        gone = !self->l;
        pthread_mutex_unlock(&self->mu);
    }
    return PyBool_FromLong(gone);
}

static PyMethodDef Loader_methods[] = {
    {"next", (PyCFunction)Loader_next, METH_NOARGS,
     "next() -> Batch, or None at the end of the epoch"},
    {"close", (PyCFunction)Loader_close, METH_NOARGS,
     "close(): no further calls; the library's loader is destroyed once no "
     "batch is held"},
    {"info", (PyCFunction)Loader_info, METH_NOARGS, "pl_info as a dict"},
    {"stats", (PyCFunction)Loader_stats, METH_NOARGS, "pl_stats as a dict"},
    {"class_name", (PyCFunction)Loader_class_name, METH_O,
     "class_name(label) -> str"},
    {"sample", (PyCFunction)Loader_sample, METH_O,
     "sample(index) -> (path, label)"},
    {"epoch_order", (PyCFunction)Loader_epoch_order, METH_O,
     "epoch_order(epoch) -> list of dataset indices"},
    {"failures", (PyCFunction)Loader_failures, METH_NOARGS,
     "failures() -> [(index, path, code, name, reason, count, warnings)]"},
    {"state", (PyCFunction)Loader_state, METH_NOARGS,
     "state() -> bytes (pl_state)"},
    {"drain_log", (PyCFunction)Loader_drain_log, METH_NOARGS,
     "hand queued log messages to the log callable now"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Loader_getset[] = {
    {"held", (getter)Loader_get_held, NULL, "batches not yet released", NULL},
    {"closed", (getter)Loader_get_closed, NULL, "close() was called", NULL},
    {"destroyed", (getter)Loader_get_destroyed, NULL,
     "the library's loader is gone", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinload._pinload.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loader(config: dict, log=None): one pl_loader",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loader_init,
    .tp_dealloc = (destructor)Loader_dealloc,
    .tp_methods = Loader_methods,
    .tp_getset = Loader_getset,
};

/* ---------------------------------------------------------------------------
 * Batch */

/* Give the batch back (with the GIL held by the caller). */
static void batch_release(BatchObject *self)
{
    if (self->released)
        return;
    self->released = 1;
    LoaderObject *o = self->owner;
    const pl_batch *b = self->b;
    struct CUstream_st *stream = self->stream;
    Py_BEGIN_ALLOW_THREADS;
    /* Not counted in inflight: close() destroys only once held is 0, and
     * held drops only below, after the release returned. */
    pl_loader_release(o->l, b, stream);
    pthread_mutex_lock(&o->mu);
    o->held--;
    const int destroy = o->closing && o->held == 0 && o->inflight == 0 &&
                        o->l && !o->destroying;
    if (destroy)
        o->destroying = 1;
    pthread_mutex_unlock(&o->mu);
    if (destroy)
        loader_destroy_nogil(o);
    Py_END_ALLOW_THREADS;
}

static void Batch_dealloc(BatchObject *self)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    batch_release(self);
    logq_drain(self->owner->q, self->owner->log);
    PyErr_Restore(type, value, tb);
    Py_DECREF(self->owner);
    PyObject_Free(self);
}

static PyObject *Batch_release(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (self->exports > 0)
        return PyErr_Format(PyExc_BufferError,
                            "batch %lld of epoch %lld: %zd tensor(s) made from "
                            "it are alive; drop them first, or let the batch "
                            "go back when they are freed",
                            (long long)self->b->index,
                            (long long)self->b->epoch, self->exports);
    batch_release(self);
    logq_drain(self->owner->q, self->owner->log);
    Py_RETURN_NONE;
}

enum { V_IMAGES, V_HOST, V_LABELS, V_INDICES, V_STATUS };

typedef struct {
    PyObject_HEAD BatchObject *batch;
    int which;
} ViewObject;

static PyObject *batch_view(BatchObject *self, void *closure)
{
    const int which = (int)(intptr_t)closure;
    if (which == V_HOST && !self->b->host)
        Py_RETURN_NONE;
    ViewObject *v = PyObject_New(ViewObject, &ViewType);
    if (!v)
        return NULL;
    Py_INCREF(self);
    v->batch = self;
    v->which = which;
    return (PyObject *)v;
}

enum { B_COUNT, B_EPOCH, B_INDEX, B_RELEASED, B_EXPORTS };

static PyObject *Batch_get(BatchObject *s, void *closure)
{
    switch ((int)(intptr_t)closure) {
    case B_COUNT:
        return PyLong_FromLong(s->b->count);
    case B_EPOCH:
        return PyLong_FromLongLong(s->b->epoch);
    case B_INDEX:
        return PyLong_FromLongLong(s->b->index);
    case B_RELEASED:
        return PyBool_FromLong(s->released);
    default:
        return PyLong_FromSsize_t(s->exports);
    }
}

static PyMethodDef Batch_methods[] = {
    {"release", (PyCFunction)Batch_release, METH_NOARGS,
     "give the batch back now (BufferError while tensors made from it are "
     "alive)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Batch_getset[] = {
    {"images", (getter)batch_view, NULL, "the pixels (DLPack)",
     (void *)(intptr_t)V_IMAGES},
    {"host_images", (getter)batch_view, NULL,
     "the pixels in host memory (keep_host), or None",
     (void *)(intptr_t)V_HOST},
    {"labels", (getter)batch_view, NULL, "int32 labels (DLPack, host)",
     (void *)(intptr_t)V_LABELS},
    {"indices", (getter)batch_view, NULL,
     "int64 dataset indices (DLPack, host)", (void *)(intptr_t)V_INDICES},
    {"status", (getter)batch_view, NULL,
     "int32 per-sample status (DLPack, host)", (void *)(intptr_t)V_STATUS},
    {"count", (getter)Batch_get, NULL, "samples in the batch",
     (void *)(intptr_t)B_COUNT},
    {"epoch", (getter)Batch_get, NULL, "its epoch", (void *)(intptr_t)B_EPOCH},
    {"index", (getter)Batch_get, NULL, "its number in the epoch",
     (void *)(intptr_t)B_INDEX},
    {"released", (getter)Batch_get, NULL, "given back to the loader",
     (void *)(intptr_t)B_RELEASED},
    {"exports", (getter)Batch_get, NULL,
     "DLPack tensors made from it and alive", (void *)(intptr_t)B_EXPORTS},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinload._pinload.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch, held from Loader.next() until it and every tensor "
              "made from it are gone",
    .tp_dealloc = (destructor)Batch_dealloc,
    .tp_methods = Batch_methods,
    .tp_getset = Batch_getset,
};

/* ---------------------------------------------------------------------------
 * View: one array of a batch, through DLPack */

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

static void view_layout(const ViewObject *v, layout *out)
{
    const pl_batch *b = v->batch->b;
    const pl_info *in = &v->batch->owner->info;
    memset(out, 0, sizeof *out);
    out->device.device_type = PLDL_CPU;
    out->dtype.lanes = 1;
    const int64_t n = b->count;
    switch (v->which) {
    case V_IMAGES:
    case V_HOST:
        out->data = v->which == V_IMAGES ? b->data : b->host;
        if (v->which == V_IMAGES && in->backend == PL_BACKEND_CUDA) {
            out->device.device_type = PLDL_CUDA;
            out->device.device_id = in->device;
        }
        out->ndim = 4;
        out->shape[0] = n;
        if (in->format == PL_FORMAT_U8_NHWC) {
            out->shape[1] = in->height;
            out->shape[2] = in->width;
            out->shape[3] = in->channels;
            out->dtype = (pldl_dtype){PLDL_UINT, 8, 1};
            out->dtype_name = "uint8";
        } else {
            /* NCHW's shape; channels-last only changes the strides. */
            out->shape[1] = in->channels;
            out->shape[2] = in->height;
            out->shape[3] = in->width;
            out->channels_last = in->channels_last;
            const int f32 = in->format == PL_FORMAT_F32_NCHW;
            const int bf16 = in->format == PL_FORMAT_BF16_NCHW;
            out->dtype =
                (pldl_dtype){bf16 ? PLDL_BFLOAT : PLDL_FLOAT, f32 ? 32 : 16, 1};
            out->dtype_name = f32 ? "float32" : bf16 ? "bfloat16" : "float16";
        }
        out->nbytes = (size_t)n * in->sample_bytes;
        return;
    case V_LABELS:
    case V_STATUS:
        out->data = v->which == V_LABELS ? (const void *)b->labels
                                         : (const void *)b->status;
        out->ndim = 1;
        out->shape[0] = n;
        out->dtype = (pldl_dtype){PLDL_INT, 32, 1};
        out->dtype_name = "int32";
        out->nbytes = (size_t)n * 4;
        return;
    case V_INDICES:
        out->data = b->indices;
        out->ndim = 1;
        out->shape[0] = n;
        out->dtype = (pldl_dtype){PLDL_INT, 64, 1};
        out->dtype_name = "int64";
        out->nbytes = (size_t)n * 8;
        return;
    }
}

typedef struct export_ctx {
    union {
        pldl_managed plain;
        pldl_managed_versioned versioned;
    } t;
    int64_t shape[4];
    int64_t strides[4];
    BatchObject *batch; /* NULL for a copy */
    void *copy;
} export_ctx;

static void export_free(export_ctx *e)
{
    if (e->batch && Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        e->batch->exports--;
        Py_DECREF(e->batch);
        PyGILState_Release(g);
    }
    free(e->copy);
    free(e);
}

static void deleter_plain(pldl_managed *m)
{
    export_free(m->manager_ctx);
}

static void deleter_versioned(pldl_managed_versioned *m)
{
    export_free(m->manager_ctx);
}

/* A capsule nobody consumed frees its tensor; a consumed one was renamed
 * "used_dltensor..." and belongs to the consumer. */
static void capsule_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) {
        pldl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        pldl_managed_versioned *m =
            PyCapsule_GetPointer(cap, "dltensor_versioned");
        m->deleter(m);
    }
}

static int view_check(const ViewObject *v)
{
    if (v->batch->released) {
        PyErr_Format(PyExc_BufferError,
                     "batch %lld of epoch %lld was released: its memory "
                     "belongs to the loader again",
                     (long long)v->batch->b->index,
                     (long long)v->batch->b->epoch);
        return -1;
    }
    return 0;
}

/* DLPack's stream argument as a cudaStream_t: 0 to go on, 1 to skip the
 * wait (-1), or -1 with an exception. */
static int stream_arg(PyObject *arg, struct CUstream_st **out)
{
    *out = NULL;
    if (arg == Py_None)
        return 0; /* the legacy default stream */
    const long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v == -1)
        return 1;
    if (v == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "stream=0 is ambiguous for CUDA (DLPack): pass 1 for "
                        "the legacy default stream, 2 for the per-thread "
                        "default stream");
        return -1;
    }
    if (v == 1)
        return 0;
    *out = (struct CUstream_st *)(uintptr_t)v;
    return 0;
}

static PyObject *View_dlpack(ViewObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy",
                             NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None,
             *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwlist, &stream,
                                     &max_version, &dl_device, &copy))
        return NULL;
    if (view_check(self) < 0)
        return NULL;
    layout lay;
    view_layout(self, &lay);
    if (dl_device != Py_None) {
        int type, id;
        if (!PyArg_ParseTuple(dl_device, "ii", &type, &id))
            return NULL;
        if (type != lay.device.device_type || id != lay.device.device_id)
            return PyErr_Format(PyExc_BufferError,
                                "dl_device (%d, %d): the batch is on (%d, %d)"
                                " and pinload does not copy across devices",
                                type, id, lay.device.device_type,
                                lay.device.device_id);
    }
    const int want_copy = copy != Py_None && PyObject_IsTrue(copy);
    if (want_copy && lay.device.device_type != PLDL_CPU)
        return PyErr_Format(PyExc_BufferError,
                            "copy=True: pinload copies only host memory; "
                            "copy the tensor on the device instead");
    int versioned = 0;
    if (max_version != Py_None) {
        unsigned major = 0, minor = 0;
        if (!PyArg_ParseTuple(max_version, "II", &major, &minor))
            return NULL;
        versioned = major >= 1;
    }
    if (lay.device.device_type == PLDL_CUDA && self->which == V_IMAGES) {
        struct CUstream_st *s;
        const int r = stream_arg(stream, &s);
        if (r < 0)
            return NULL;
        if (r == 0) {
            const int rc = pl_batch_wait(self->batch->b, s);
            if (rc < 0)
                return raise_status(rc, NULL);
        }
        /* The buffer goes back after the work queued on this stream. */
        self->batch->stream = s;
    }

    export_ctx *e = calloc(1, sizeof *e);
    if (!e)
        return PyErr_NoMemory();
    void *data = (void *)lay.data;
    if (want_copy) {
        e->copy = malloc(lay.nbytes ? lay.nbytes : 1);
        if (!e->copy) {
            free(e);
            return PyErr_NoMemory();
        }
        memcpy(e->copy, lay.data, lay.nbytes);
        data = e->copy;
    }
    memcpy(e->shape, lay.shape, sizeof e->shape);
    int64_t stride = 1;
    for (int i = lay.ndim - 1; i >= 0; i--) {
        e->strides[i] = stride;
        stride *= lay.shape[i];
    }
    if (lay.channels_last) { /* [n][h][w][c] in memory, (n, c, h, w) */
        const int64_t c = lay.shape[1], h = lay.shape[2], w = lay.shape[3];
        e->strides[0] = c * h * w;
        e->strides[1] = 1;
        e->strides[2] = w * c;
        e->strides[3] = c;
    }
    pldl_tensor t = {
        .data = data,
        .device = lay.device,
        .ndim = lay.ndim,
        .dtype = lay.dtype,
        .shape = e->shape,
        .strides = e->strides,
        .byte_offset = 0,
    };
    void *ptr;
    const char *name;
    if (versioned) {
        e->t.versioned.version = (pldl_version){PLDL_MAJOR, PLDL_MINOR};
        e->t.versioned.manager_ctx = e;
        e->t.versioned.deleter = deleter_versioned;
        e->t.versioned.flags =
            want_copy ? PLDL_FLAG_IS_COPIED : PLDL_FLAG_READ_ONLY;
        e->t.versioned.dl_tensor = t;
        ptr = &e->t.versioned;
        name = "dltensor_versioned";
    } else {
        e->t.plain.dl_tensor = t;
        e->t.plain.manager_ctx = e;
        e->t.plain.deleter = deleter_plain;
        ptr = &e->t.plain;
        name = "dltensor";
    }
    if (!want_copy) {
        Py_INCREF(self->batch);
        e->batch = self->batch;
        self->batch->exports++;
    }
    PyObject *cap = PyCapsule_New(ptr, name, capsule_destructor);
    if (!cap) {
        if (e->batch) {
            e->batch->exports--;
            Py_DECREF(e->batch);
        }
        free(e->copy);
        free(e);
        return NULL;
    }
    return cap;
}

static PyObject *View_dlpack_device(ViewObject *self, PyObject *unused)
{
    (void)unused;
    layout lay;
    view_layout(self, &lay);
    return Py_BuildValue("(ii)", lay.device.device_type, lay.device.device_id);
}

static PyObject *View_tobytes(ViewObject *self, PyObject *unused)
{
    (void)unused;
    if (view_check(self) < 0)
        return NULL;
    layout lay;
    view_layout(self, &lay);
    if (lay.device.device_type != PLDL_CPU)
        return PyErr_Format(PyExc_BufferError,
                            "tobytes: the images are in CUDA memory; use "
                            "torch.from_dlpack, or keep_host=True and "
                            "host_images");
    return PyBytes_FromStringAndSize(lay.data, (Py_ssize_t)lay.nbytes);
}

enum { A_SHAPE, A_DTYPE, A_DEVICE, A_NBYTES, A_PTR };

/* The view's attributes, by closure: each is read off its layout. */
static PyObject *View_get(ViewObject *self, void *closure)
{
    layout lay;
    view_layout(self, &lay);
    switch ((int)(intptr_t)closure) {
    case A_SHAPE: {
        PyObject *t = PyTuple_New(lay.ndim);
        for (int i = 0; t && i < lay.ndim; i++)
            PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(lay.shape[i]));
        return t;
    }
    case A_DTYPE:
        return PyUnicode_FromString(lay.dtype_name);
    case A_DEVICE:
        if (lay.device.device_type == PLDL_CUDA)
            return PyUnicode_FromFormat("cuda:%d", lay.device.device_id);
        return PyUnicode_FromString("cpu");
    case A_NBYTES:
        return PyLong_FromSize_t(lay.nbytes);
    default:
        return PyLong_FromVoidPtr((void *)lay.data);
    }
}

static PyObject *View_repr(ViewObject *self)
{
    layout lay;
    view_layout(self, &lay);
    static const char *names[] = {"images", "host_images", "labels", "indices",
                                  "status"};
    PyObject *shape = View_get(self, (void *)(intptr_t)A_SHAPE);
    if (!shape)
        return NULL;
    PyObject *r = PyUnicode_FromFormat(
        "<pinload view %s %R %s on %s>", names[self->which], shape,
        lay.dtype_name, lay.device.device_type == PLDL_CUDA ? "cuda" : "cpu");
    Py_DECREF(shape);
    return r;
}

static void View_dealloc(ViewObject *self)
{
    Py_DECREF(self->batch);
    PyObject_Free(self);
}

static PyMethodDef View_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))View_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, "
     "copy=None): a DLPack capsule viewing the batch's memory"},
    {"__dlpack_device__", (PyCFunction)View_dlpack_device, METH_NOARGS,
     "(device_type, device_id) as DLPack numbers them"},
    {"tobytes", (PyCFunction)View_tobytes, METH_NOARGS,
     "a copy of the bytes (host memory only)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef View_getset[] = {
    {"shape", (getter)View_get, NULL, "shape", (void *)(intptr_t)A_SHAPE},
    {"dtype", (getter)View_get, NULL, "element type name",
     (void *)(intptr_t)A_DTYPE},
    {"device", (getter)View_get, NULL, "'cpu' or 'cuda:N'",
     (void *)(intptr_t)A_DEVICE},
    {"nbytes", (getter)View_get, NULL, "size in bytes",
     (void *)(intptr_t)A_NBYTES},
    {"ptr", (getter)View_get, NULL, "address of the first byte",
     (void *)(intptr_t)A_PTR},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pinload._pinload.View",
    .tp_basicsize = sizeof(ViewObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One array of a batch, exported without a copy through DLPack",
    .tp_dealloc = (destructor)View_dealloc,
    .tp_repr = (reprfunc)View_repr,
    .tp_methods = View_methods,
    .tp_getset = View_getset,
};

/* ---------------------------------------------------------------------------
 * Module functions */

static PyObject *mod_config_defaults(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    pl_config c;
    pl_config_default(&c);
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < sizeof fields / sizeof fields[0]; i++) {
        const field *f = &fields[i];
        const char *p = (const char *)&c + f->offset;
        PyObject *v = NULL;
        switch (f->type) {
        case F_I32: {
            int32_t x;
            memcpy(&x, p, sizeof x);
            v = PyLong_FromLong(x);
            break;
        }
        case F_I64: {
            int64_t x;
            memcpy(&x, p, sizeof x);
            v = PyLong_FromLongLong(x);
            break;
        }
        case F_U64: {
            uint64_t x;
            memcpy(&x, p, sizeof x);
            v = PyLong_FromUnsignedLongLong(x);
            break;
        }
        case F_FLOAT3: {
            float x[3];
            memcpy(x, p, sizeof x);
            v = Py_BuildValue("(ddd)", (double)x[0], (double)x[1],
                              (double)x[2]);
            break;
        }
        case F_PATH:
        case F_STATE:
            Py_INCREF(Py_None);
            v = Py_None;
            break;
        }
        if (!v || PyDict_SetItemString(d, f->name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(v);
    }
    return d;
}

static PyObject *mod_state_get(PyObject *m, PyObject *arg)
{
    (void)m;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    pl_state s;
    const int ok = view.len == PL_STATE_BYTES;
    if (ok)
        memcpy(s.bytes, view.buf, PL_STATE_BYTES);
    PyBuffer_Release(&view);
    if (!ok)
        return PyErr_Format(PyExc_ValueError, "a loader state is %d bytes",
                            PL_STATE_BYTES);
    int64_t epoch, batch, position;
    const int rc = pl_state_get(&s, &epoch, &batch, &position);
    if (rc < 0)
        return raise_status(rc, NULL);
    return Py_BuildValue("(LLL)", (long long)epoch, (long long)batch,
                         (long long)position);
}

static PyObject *mod_register_errors(PyObject *m, PyObject *arg)
{
    (void)m;
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict");
        return NULL;
    }
    Py_INCREF(arg);
    Py_XSETREF(error_classes, arg);
    Py_RETURN_NONE;
}

static PyObject *mod_strerror(PyObject *m, PyObject *arg)
{
    (void)m;
    const long rc = PyLong_AsLong(arg);
    if (rc == -1 && PyErr_Occurred())
        return NULL;
    return Py_BuildValue("(ss)", pl_err_name((int)rc), pl_strerror((int)rc));
}

static PyMethodDef module_methods[] = {
    {"config_defaults", mod_config_defaults, METH_NOARGS,
     "pl_config_default() as {field: value}"},
    {"state_get", mod_state_get, METH_O,
     "state_get(state bytes) -> (epoch, batch, position)"},
    {"register_errors", mod_register_errors, METH_O,
     "register_errors({code: exception class})"},
    {"strerror", mod_strerror, METH_O, "strerror(code) -> (name, message)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_pinload",
    "The C extension under the pinload package (include/pinload.h).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int add_int(PyObject *m, const char *name, long v)
{
    return PyModule_AddIntConstant(m, name, v);
}

PyMODINIT_FUNC PyInit__pinload(void)
{
    if (PyType_Ready(&LoaderType) < 0 || PyType_Ready(&BatchType) < 0 ||
        PyType_Ready(&ViewType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    PyTypeObject *types[] = {&LoaderType, &BatchType, &ViewType};
    const char *type_names[] = {"Loader", "Batch", "View"};
    for (int i = 0; i < 3; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, type_names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    static const struct {
        const char *name;
        long value;
    } ints[] = {
        {"FORMAT_U8_NHWC", PL_FORMAT_U8_NHWC},
        {"FORMAT_F32_NCHW", PL_FORMAT_F32_NCHW},
        {"FORMAT_F16_NCHW", PL_FORMAT_F16_NCHW},
        {"FORMAT_BF16_NCHW", PL_FORMAT_BF16_NCHW},
        {"AUGMENT_NONE", PL_AUGMENT_NONE},
        {"AUGMENT_EVAL", PL_AUGMENT_EVAL},
        {"AUGMENT_TRAIN", PL_AUGMENT_TRAIN},
        {"MEMORY_PINNED", PL_MEMORY_PINNED},
        {"MEMORY_PAGEABLE", PL_MEMORY_PAGEABLE},
        {"MEMORY_MANAGED", PL_MEMORY_MANAGED},
        {"ON_ERROR_FAIL", PL_ON_ERROR_FAIL},
        {"ON_ERROR_SKIP", PL_ON_ERROR_SKIP},
        {"ON_ERROR_SUBSTITUTE", PL_ON_ERROR_SUBSTITUTE},
        {"SHARD_PAD", PL_SHARD_PAD},
        {"SHARD_DROP", PL_SHARD_DROP},
        {"BACKEND_HOST", PL_BACKEND_HOST},
        {"BACKEND_CUDA", PL_BACKEND_CUDA},
        {"LOG_NOTICE", PL_LOG_NOTICE},
        {"LOG_WARNING", PL_LOG_WARNING},
        {"DEVICE_AUTO", PL_DEVICE_AUTO},
        {"DEVICE_HOST", PL_DEVICE_HOST},
        {"DEVICE_LOCAL_RANK", PL_DEVICE_LOCAL_RANK},
        {"FROM_ENV", PL_FROM_ENV},
        {"STATE_BYTES", PL_STATE_BYTES},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (add_int(m, ints[i].name, ints[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    /* Every status code the library defines, by name. */
    PyObject *codes = PyDict_New();
    for (int rc = 1; codes && rc >= -64; rc--) {
        const char *name = pl_err_name(rc);
        if (rc != 0 && strcmp(name, "PL_UNKNOWN") == 0)
            continue;
        PyObject *v = PyLong_FromLong(rc);
        if (!v || PyDict_SetItemString(codes, name, v) < 0)
            Py_CLEAR(codes);
        Py_XDECREF(v);
    }
    if (!codes || PyModule_AddObject(m, "codes", codes) < 0 ||
        PyModule_AddStringConstant(m, "library_version", pl_version()) < 0) {
        Py_XDECREF(codes);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
