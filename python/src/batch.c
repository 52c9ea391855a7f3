/* pinload._pinload: the Batch type, one pl_batch held from Loader.next()
 * until it and every DLPack tensor made from it are gone, and its DLPack
 * export (pinload_py.h). */
#include "pinload_py.h"

/* Give the batch back (with the GIL held by the caller). */
static void batch_release(BatchObject *self)
{
    if (self->released)
        return;
    self->released = 1;
    LoaderObject *o = self->owner;
    const pl_batch *b = self->b;
    struct CUstream_st *const *streams = self->streams;
    const int n = self->nstreams;
    Py_BEGIN_ALLOW_THREADS;
    /* Not counted in inflight: close() destroys only once held is 0, and
     * held drops only below, after the release returned. */
    if (n == 0)
        pl_loader_release(o->l, b, NULL);
    else
        pl_loader_release_streams(o->l, b, streams, n);
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
    /* Untracked first: the GIL is let go, and the log may run. */
    PyObject_GC_UnTrack(self);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    batch_release(self);
    logq_drain(self->owner->q, self->owner->log);
    PyErr_Restore(type, value, tb);
    Py_DECREF((PyObject *)self->owner);
    free_instance(self);
}

/* The type and the loader, for the collector. No tp_clear: the batch
 * needs its loader until it is given back, in dealloc, and a cycle
 * through a batch runs through its loader's log, which Loader's tp_clear
 * breaks. */
static int Batch_traverse(BatchObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE((PyObject *)self));
    Py_VISIT(self->owner);
    return 0;
}

static PyObject *Batch_release(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (self->exports > 0)
        return PyErr_Format(PyExc_BufferError,
                            "batch %lld of epoch %lld: %zd tensor(s) made from "
                            "it are alive; drop them first, or let the batch "
                            "go back when they are freed",
                            (long long)self->index, (long long)self->epoch,
                            self->exports);
    batch_release(self);
    logq_drain(self->owner->q, self->owner->log);
    Py_RETURN_NONE;
}

static PyObject *batch_view(BatchObject *self, void *closure)
{
    const int which = (int)(intptr_t)closure;
    if ((which == V_HOST && !self->has_host) ||
        (which == V_SOFT && !self->num_classes))
        Py_RETURN_NONE;
    PyTypeObject *view_type = state_of(self)->View;
    if (!view_type) /* the module was cleared (interpreter exit) */
        return PyErr_Format(PyExc_RuntimeError, "pinload is finalized");
    ViewObject *v = (ViewObject *)PyType_GenericAlloc(view_type, 0);
    if (!v)
        return NULL;
    Py_INCREF((PyObject *)self);
    v->batch = self;
    v->which = which;
    v->view = 0;
    return (PyObject *)v;
}

/* config.views: a tuple of each view's images (V_IMAGES, or V_HOST when
 * closure says so), or None without views. */
static PyObject *Batch_views(BatchObject *self, void *closure)
{
    const int which = (int)(intptr_t)closure;
    if (!self->nviews || (which == V_HOST && !self->has_host))
        Py_RETURN_NONE;
    PyObject *t = PyTuple_New(self->nviews);
    for (int k = 0; t && k < self->nviews; k++) {
        ViewObject *v = (ViewObject *)batch_view(self, closure);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        v->view = k;
        PyTuple_SetItem(t, k, (PyObject *)v);
    }
    return t;
}

enum { B_COUNT, B_EPOCH, B_INDEX, B_RELEASED, B_EXPORTS };

static PyObject *Batch_get(BatchObject *s, void *closure)
{
    switch ((int)(intptr_t)closure) {
    case B_COUNT:
        return PyLong_FromLong(s->count);
    case B_EPOCH:
        return PyLong_FromLongLong(s->epoch);
    case B_INDEX:
        return PyLong_FromLongLong(s->index);
    case B_RELEASED:
        return PyBool_FromLong(s->released);
    default:
        return PyLong_FromSsize_t(s->exports);
    }
}

/* {name: [bytes per sample]}: config.extras' entries, copied out (so they
 * outlive the batch); {} without extras. */
static PyObject *Batch_extras(BatchObject *self, void *closure)
{
    (void)closure;
    const pl_batch *b = self->b;
    if (self->released)
        return PyErr_Format(PyExc_ValueError,
                            "batch %lld of epoch %lld was released: read its "
                            "extras before",
                            (long long)self->index, (long long)self->epoch);
    PyObject *d = PyDict_New();
    for (int k = 0; d && k < b->num_extras; k++) {
        const pl_extra *x = &b->extras[k];
        PyObject *list = PyList_New(b->count);
        for (int i = 0; list && i < b->count; i++) {
            PyObject *e = PyBytes_FromStringAndSize(
                (const char *)x->data + x->offsets[i],
                (Py_ssize_t)(x->offsets[i + 1] - x->offsets[i]));
            if (!e || PyList_SetItem(list, i, e) < 0)
                Py_CLEAR(list);
        }
        if (!list || PyDict_SetItemString(d, x->name, list) < 0)
            Py_CLEAR(d);
        Py_XDECREF(list);
    }
    return d;
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
    {"soft_labels", (getter)batch_view, NULL,
     "float32 [count, classes] soft labels of a mixup op (DLPack, host), "
     "or None",
     (void *)(intptr_t)V_SOFT},
    {"status", (getter)batch_view, NULL,
     "int32 per-sample status (DLPack, host)", (void *)(intptr_t)V_STATUS},
    {"views", (getter)Batch_views, NULL,
     "config.views: a tuple of each view's images (DLPack), or None",
     (void *)(intptr_t)V_IMAGES},
    {"host_views", (getter)Batch_views, NULL,
     "each view's images in host memory (keep_host), or None",
     (void *)(intptr_t)V_HOST},
    {"extras", (getter)Batch_extras, NULL,
     "{extra: [bytes of each sample]} (config.extras), copied", NULL},
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

static PyType_Slot Batch_slots[] = {
    {Py_tp_doc, "One batch, held from Loader.next() until it and every "
                "tensor made from it are gone"},
    {Py_tp_dealloc, Batch_dealloc},
    {Py_tp_traverse, Batch_traverse},
    {Py_tp_methods, Batch_methods},
    {Py_tp_getset, Batch_getset},
    {0, NULL},
};

/* Made by Loader.next() only, as the static type was (no tp_new). */
PyType_Spec Batch_spec = {
    .name = "pinload._pinload.Batch",
    .basicsize = sizeof(BatchObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Batch_slots,
};

/* ---------------------------------------------------------------------------
 * The DLPack export: a capsule holds the batch until its deleter runs */

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
        Py_DECREF((PyObject *)e->batch);
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

/* Notes a consumer's stream, for the release. The batch goes back when its
 * last tensor dies, on whichever thread runs the deleter (the garbage
 * collector, autograd's): the per-thread default stream (2) of the
 * consumer's thread cannot be named from there, so the release is
 * recorded on the legacy default stream instead, which "synchronizes with
 * ... the per-thread default stream" of every thread (CUDA Runtime API,
 * Stream synchronization behavior). Every consumer's stream is ordered,
 * not only the last: two consumers on two streams each get theirs. 0, or
 * -1 with BufferError when a batch has had too many consumer streams. */
static int consumer_stream(BatchObject *b, struct CUstream_st *s)
{
    if (s == (struct CUstream_st *)(uintptr_t)2) /* cudaStreamPerThread */
        s = NULL;
    for (int i = 0; i < b->nstreams; i++)
        if (b->streams[i] == s)
            return 0;
    if (b->nstreams == PL_RELEASE_STREAMS_MAX) {
        PyErr_Format(PyExc_BufferError,
                     "this batch was exported to %d streams already, the "
                     "most pinload can order its release after; export "
                     "on one of them",
                     PL_RELEASE_STREAMS_MAX);
        return -1;
    }
    b->streams[b->nstreams++] = s;
    return 0;
}

int batch_stream(BatchObject *b, PyObject *stream)
{
    struct CUstream_st *s;
    const int r = stream_arg(stream, &s);
    if (r < 0)
        return -1;
    if (consumer_stream(b, s) < 0)
        return -1;
    /* On the consumer's thread, so cudaStreamPerThread (2) is its
     * per-thread stream (of the loader's device: pinload makes it
     * current for the call). */
    if (r == 0) {
        const int rc = pl_batch_wait(b->b, s);
        if (rc < 0) {
            raise_status(state_of(b), rc, NULL);
            return -1;
        }
    }
    return 0;
}

PyObject *batch_export(BatchObject *b, const layout *lay, int want_copy,
                       int versioned)
{
    export_ctx *e = calloc(1, sizeof *e);
    if (!e)
        return PyErr_NoMemory();
    void *data = (void *)lay->data;
    if (want_copy) {
        e->copy = malloc(lay->nbytes ? lay->nbytes : 1);
        if (!e->copy) {
            free(e);
            return PyErr_NoMemory();
        }
        memcpy(e->copy, lay->data, lay->nbytes);
        data = e->copy;
    }
    memcpy(e->shape, lay->shape, sizeof e->shape);
    int64_t stride = 1;
    for (int i = lay->ndim - 1; i >= 0; i--) {
        e->strides[i] = stride;
        stride *= lay->shape[i];
    }
    if (lay->channels_last) { /* [n][h][w][c] in memory, (n, c, h, w) */
        const int64_t c = lay->shape[1], h = lay->shape[2], w = lay->shape[3];
        e->strides[0] = c * h * w;
        e->strides[1] = 1;
        e->strides[2] = w * c;
        e->strides[3] = c;
    }
    pldl_tensor t = {
        .data = data,
        .device = lay->device,
        .ndim = lay->ndim,
        .dtype = lay->dtype,
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
        Py_INCREF((PyObject *)b);
        e->batch = b;
        b->exports++;
    }
    PyObject *cap = PyCapsule_New(ptr, name, capsule_destructor);
    if (!cap) {
        if (e->batch) {
            e->batch->exports--;
            Py_DECREF((PyObject *)e->batch);
        }
        free(e->copy);
        free(e);
        return NULL;
    }
    return cap;
}
