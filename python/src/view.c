/* pinload._pinload: the View type, one array of a batch, exported through
 * DLPack without a copy (pinload_py.h). */
#include "pinload_py.h"

/* The view's layout. A released batch's pl_batch is the loader's again
 * (refilled, or freed with it): its shape and type still come from what the
 * Batch copied, its data pointer is NULL. */
static void view_layout(const ViewObject *v, layout *out)
{
    const pl_batch *b = v->batch->released ? NULL : v->batch->b;
    const pl_info *in = &v->batch->owner->info;
    memset(out, 0, sizeof *out);
    out->device.device_type = PLDL_CPU;
    out->dtype.lanes = 1;
    const int64_t n = v->batch->count;
    switch (v->which) {
    case V_IMAGES:
    case V_HOST: {
        const BatchObject *bo = v->batch;
        const int k = v->view;
        int32_t w = in->width, h = in->height;
        size_t sb = in->sample_bytes;
        out->data = !b ? NULL : v->which == V_IMAGES ? b->data : b->host;
        if (bo->nviews) { /* config.views: view k's own tensor */
            w = bo->view_w[k];
            h = bo->view_h[k];
            sb = bo->view_sb[k];
            out->data = !b                     ? NULL
                        : v->which == V_IMAGES ? b->views[k].data
                                               : b->views[k].host;
        }
        if (v->which == V_IMAGES && in->backend == PL_BACKEND_CUDA) {
            out->device.device_type = PLDL_CUDA;
            out->device.device_id = in->device;
        }
        out->ndim = 4;
        out->shape[0] = n;
        if (in->format == PL_FORMAT_U8_NHWC) {
            out->shape[1] = h;
            out->shape[2] = w;
            out->shape[3] = in->channels;
            out->dtype = (pldl_dtype){PLDL_UINT, 8, 1};
            out->dtype_name = "uint8";
        } else {
            /* NCHW's shape; channels-last only changes the strides. */
            out->shape[1] = in->channels;
            out->shape[2] = h;
            out->shape[3] = w;
            out->channels_last = in->channels_last;
            const int f32 = in->format == PL_FORMAT_F32_NCHW;
            const int bf16 = in->format == PL_FORMAT_BF16_NCHW;
            out->dtype =
                (pldl_dtype){bf16 ? PLDL_BFLOAT : PLDL_FLOAT, f32 ? 32 : 16, 1};
            out->dtype_name = f32 ? "float32" : bf16 ? "bfloat16" : "float16";
        }
        out->nbytes = (size_t)n * sb;
        return;
    }
    case V_LABELS:
    case V_STATUS:
        out->data = !b                     ? NULL
                    : v->which == V_LABELS ? (const void *)b->labels
                                           : (const void *)b->status;
        out->ndim = 1;
        out->shape[0] = n;
        out->dtype = (pldl_dtype){PLDL_INT, 32, 1};
        out->dtype_name = "int32";
        out->nbytes = (size_t)n * 4;
        return;
    case V_SOFT:
        out->data = b ? (const void *)b->soft_labels : NULL;
        out->ndim = 2;
        out->shape[0] = n;
        out->shape[1] = v->batch->num_classes;
        out->dtype = (pldl_dtype){PLDL_FLOAT, 32, 1};
        out->dtype_name = "float32";
        out->nbytes = (size_t)n * (size_t)v->batch->num_classes * 4;
        return;
    case V_INDICES:
        out->data = b ? b->indices : NULL;
        out->ndim = 1;
        out->shape[0] = n;
        out->dtype = (pldl_dtype){PLDL_INT, 64, 1};
        out->dtype_name = "int64";
        out->nbytes = (size_t)n * 8;
        return;
    }
}

static int view_check(const ViewObject *v)
{
    if (v->batch->released) {
        PyErr_Format(PyExc_BufferError,
                     "batch %lld of epoch %lld was released: its memory "
                     "belongs to the loader again",
                     (long long)v->batch->index, (long long)v->batch->epoch);
        return -1;
    }
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
    if (lay.device.device_type == PLDL_CUDA && self->which == V_IMAGES &&
        batch_stream(self->batch, stream) < 0)
        return NULL;
    return batch_export(self->batch, &lay, want_copy, versioned);
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
        for (int i = 0; t && i < lay.ndim; i++) {
            PyObject *v = PyLong_FromLongLong(lay.shape[i]);
            if (!v || PyTuple_SetItem(t, i, v) < 0) /* steals v */
                Py_CLEAR(t);
        }
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
                                  "status", "soft_labels"};
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
    PyObject_GC_UnTrack(self);
    Py_DECREF((PyObject *)self->batch);
    free_instance(self);
}

/* The type and the batch, for the collector (no tp_clear: a cycle through
 * a view runs through its loader's log; see Loader's tp_clear). */
static int View_traverse(ViewObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE((PyObject *)self));
    Py_VISIT(self->batch);
    return 0;
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

static PyType_Slot View_slots[] = {
    {Py_tp_doc, "One array of a batch, exported without a copy through DLPack"},
    {Py_tp_dealloc, View_dealloc},
    {Py_tp_traverse, View_traverse},
    {Py_tp_repr, View_repr},
    {Py_tp_methods, View_methods},
    {Py_tp_getset, View_getset},
    {0, NULL},
};

/* Made by a Batch's attributes only (no tp_new). */
PyType_Spec View_spec = {
    .name = "pinload._pinload.View",
    .basicsize = sizeof(ViewObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = View_slots,
};
