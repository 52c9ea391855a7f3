/* pinload._pinload: the Loader type, one pl_loader (pinload_py.h). */
#include "pinload_py.h"
#include "config_fields.h"

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
        raise_status(state_of(self), PL_ECLOSED, "the loader is closed");
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
void loader_destroy_nogil(LoaderObject *self)
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
    error_set(state_of(self), rc, args);
    return NULL;
}

static PyObject *info_dict(const pl_info *in, PyObject *backend_name)
{
    return Py_BuildValue(
        "{sLsLsLsisisisisisisnsnsisisisisisisisisisOsisisisisisssKsisi}",
        "dataset_size", (long long)in->dataset_size, "samples_per_epoch",
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
        "channels_last", in->channels_last, "numa_node", in->numa_node,
        "gpu_numa_node", in->gpu_numa_node, "decode", in->decode,
        "decoder_name", in->decoder_name, "gpu_decode_bytes",
        (unsigned long long)in->gpu_decode_bytes, "prefetch_max",
        in->prefetch_max, "num_views", in->num_views);
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
    /* The job's copies of the config's other strings and of views' array
     * (the dict's are Python's, gone once __init__ returns, and an
     * abandoned job goes on creating after that). */
    char *owned[8 + PL_VIEWS_MAX];
    int nowned;
    const char **views;
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
    for (int i = 0; i < j->nowned; i++)
        free(j->owned[i]);
    free(j->views);
    free(j);
}

/* *s, a string of the dict's, replaced by the job's own copy. -1: out of
 * memory. */
static int own(create_job *j, const char **s)
{
    if (!*s)
        return 0;
    if (j->nowned == (int)(sizeof j->owned / sizeof j->owned[0]))
        return -1;
    char *c = strdup(*s);
    if (!c)
        return -1;
    j->owned[j->nowned++] = c;
    *s = c;
    return 0;
}

/* Every string the create thread reads, the job's own: each F_PATH field
 * of config_fields.h (a field added later included), and views' array. */
#define OWN_F_PATH(n)                                                          \
    if (own(j, &c->n) < 0)                                                     \
        return -1;
#define OWN_F_I32(n)
#define OWN_F_I64(n)
#define OWN_F_U64(n)
#define OWN_F_FLOAT3(n)
#define OWN_F_STATE(n)
#define OWN_F_STRS(n)
#define OWN_FIELD(n, t) OWN_##t(n)
static int own_strings(create_job *j)
{
    pl_config *c = &j->cfg;
    PL_CONFIG_FIELDS(OWN_FIELD)
    /* More than PL_VIEWS_MAX is refused by the count, unread. */
    const int n = c->num_views < PL_VIEWS_MAX ? c->num_views : PL_VIEWS_MAX;
    if (!c->views || n <= 0)
        return 0;
    if (!(j->views = calloc((size_t)n, sizeof *j->views)))
        return -1;
    for (int i = 0; i < n; i++) {
        j->views[i] = c->views[i];
        if (own(j, &j->views[i]) < 0)
            return -1;
    }
    c->views = j->views;
    return 0;
}
#undef OWN_FIELD

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
    if (config_from_dict(config, &cfg, keep, &state) < 0) {
        Py_DECREF(keep);
        return -1;
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
    if (own_strings(j) < 0) {
        logq_free(j->q);
        create_job_free(j);
        Py_DECREF(keep);
        PyErr_NoMemory();
        return -1;
    }
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
        error_set(state_of(self), rc, eargs);
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
    /* No batch is alive (each holds a reference), nobody is inside a call.
     * Untracked first: the GIL is let go below, and the log may run. */
    PyObject_GC_UnTrack(self);
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
    free_instance(self);
}

/* The references the collector follows: the type (a heap type's instance
 * holds one) and the log callable, which may hold the pinload.Loader that
 * holds this object (a bound method, a closure). */
static int Loader_traverse(LoaderObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE((PyObject *)self));
    Py_VISIT(self->log);
    return 0;
}

/* Breaks such a cycle: the log goes (messages queued later are dropped).
 * Batches in the same garbage still hold the loader, and it is destroyed,
 * as always, after the last of them is released; a batch a tensor still
 * views is not garbage (the tensor's reference is one the collector cannot
 * see), so neither is its loader. */
static int Loader_clear(LoaderObject *self)
{
    Py_CLEAR(self->log);
    return 0;
}
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
        error_set(state_of(self), closed ? PL_ECLOSED : rc, args);
        return NULL;
    }
    loader_leave(self);
    logq_drain(self->q, self->log);
    if (rc == PL_EPOCH_END)
        Py_RETURN_NONE;
    PyTypeObject *batch_type = state_of(self)->Batch;
    BatchObject *bo =
        batch_type ? (BatchObject *)PyType_GenericAlloc(batch_type, 0) : NULL;
    if (!bo) {
        if (!batch_type) /* the module was cleared (interpreter exit) */
            PyErr_SetString(PyExc_RuntimeError, "pinload is finalized");
        /* Give it back: nothing will. */
        Py_BEGIN_ALLOW_THREADS pl_loader_release(self->l, b, NULL);
        Py_END_ALLOW_THREADS pthread_mutex_lock(&self->mu);
        self->held--;
        pthread_mutex_unlock(&self->mu);
        return NULL;
    }
    Py_INCREF((PyObject *)self);
    bo->owner = self;
    bo->b = b;
    bo->released = 0;
    bo->count = b->count;
    bo->epoch = b->epoch;
    bo->index = b->index;
    bo->has_host = b->host != NULL;
    bo->num_classes = b->soft_labels ? b->num_classes : 0;
    bo->nviews = b->views ? b->num_views : 0;
    for (int v = 0; v < bo->nviews; v++) {
        bo->view_w[v] = b->views[v].width;
        bo->view_h[v] = b->views[v].height;
        bo->view_sb[v] = b->views[v].sample_bytes;
    }
    bo->exports = 0;
    bo->nstreams = 0;
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
        return raise_status(state_of(self), PL_ECLOSED,
                            "the loader was not created");
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
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsK}", "images_decoded",
        (unsigned long long)s.images_decoded, "images_failed",
        (unsigned long long)s.images_failed, "batches",
        (unsigned long long)s.batches, "bytes_read",
        (unsigned long long)s.bytes_read, "bytes_copied",
        (unsigned long long)s.bytes_copied, "pinned_bytes",
        (unsigned long long)s.pinned_bytes, "ns_read",
        (unsigned long long)s.ns_read, "ns_decode",
        (unsigned long long)s.ns_decode, "ns_augment",
        (unsigned long long)s.ns_augment, "ns_copy",
        (unsigned long long)s.ns_copy, "ns_wait", (unsigned long long)s.ns_wait,
        "ns_h2d", (unsigned long long)s.ns_h2d, "bytes_h2d",
        (unsigned long long)s.bytes_h2d, "images_warned",
        (unsigned long long)s.images_warned, "device_buffers",
        (unsigned long long)s.device_buffers, "ns_slot_wait",
        (unsigned long long)s.ns_slot_wait, "ns_buffer_wait",
        (unsigned long long)s.ns_buffer_wait, "images_gpu",
        (unsigned long long)s.images_gpu, "images_gpu_declined",
        (unsigned long long)s.images_gpu_declined, "gpu_decode_bytes",
        (unsigned long long)s.gpu_decode_bytes, "workers_active",
        (unsigned long long)s.workers_active, "prefetch_active",
        (unsigned long long)s.prefetch_active);
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
        if (PyList_SetItem(list, (Py_ssize_t)i, v) < 0) { /* steals v */
            Py_CLEAR(list);
            break;
        }
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

static PyType_Slot Loader_slots[] = {
    {Py_tp_doc, "Loader(config: dict, log=None): one pl_loader"},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Loader_init},
    {Py_tp_dealloc, Loader_dealloc},
    {Py_tp_traverse, Loader_traverse},
    {Py_tp_clear, Loader_clear},
    {Py_tp_methods, Loader_methods},
    {Py_tp_getset, Loader_getset},
    {0, NULL},
};

PyType_Spec Loader_spec = {
    .name = "pinload._pinload.Loader",
    .basicsize = sizeof(LoaderObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Loader_slots,
};
