/* pinload._pinload: the module (its types, constants and functions, its
 * state) and the errors (pinload_py.h). Multi-phase initialisation: each
 * module object (one per interpreter) has its own types and error
 * classes. */
#include "pinload_py.h"

/* ---------------------------------------------------------------------------
 * Errors: pinload/__init__.py registers a class per status code. */

/* The exception for status `rc`, args (code, name, detail); the detail is
 * read now, before anything else can overwrite the thread's last error. */
PyObject *error_args(int rc, const char *detail)
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

void error_set(plpy_state *st, int rc, PyObject *args)
{
    if (!args)
        return; /* an exception is already set */
    PyObject *cls = NULL;
    if (st && st->error_classes) {
        PyObject *key = PyLong_FromLong(rc);
        if (key) {
            cls = PyDict_GetItemWithError(st->error_classes, key);
            Py_DECREF(key);
        }
    }
    if (!cls && !PyErr_Occurred())
        cls = PyExc_RuntimeError;
    if (cls)
        PyErr_SetObject(cls, args);
    Py_DECREF(args);
}

PyObject *raise_status(plpy_state *st, int rc, const char *detail)
{
    error_set(st, rc, error_args(rc, detail));
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Module functions */

static PyObject *mod_config_defaults(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return config_defaults();
}

static PyObject *mod_state_get(PyObject *m, PyObject *arg)
{
    pl_state s;
    if (state_from_object(arg, &s, "state_get") < 0)
        return NULL;
    int64_t epoch, batch, position;
    const int rc = pl_state_get(&s, &epoch, &batch, &position);
    if (rc < 0)
        return raise_status(PyModule_GetState(m), rc, NULL);
    return Py_BuildValue("(LLL)", (long long)epoch, (long long)batch,
                         (long long)position);
}

static PyObject *mod_register_errors(PyObject *m, PyObject *arg)
{
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a dict");
        return NULL;
    }
    plpy_state *st = PyModule_GetState(m);
    PyObject *old = st->error_classes;
    Py_INCREF(arg);
    st->error_classes = arg;
    Py_XDECREF(old);
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

/* A config dict (pinload._config's) as a pl_config; keep holds what its
 * strings point into. 0, or -1 with an exception. */
static int transform_config(PyObject *dict, pl_config *cfg, PyObject **keep)
{
    pl_config_default(cfg);
    pl_state state;
    *keep = PyList_New(0);
    if (!*keep)
        return -1;
    if (!PyDict_Check(dict)) {
        PyErr_SetString(PyExc_TypeError, "expected a config dict");
        return -1;
    }
    if (config_from_dict(dict, cfg, *keep, &state) < 0)
        return -1;
    cfg->resume = NULL;
    return 0;
}

/* transform_params(config, img_w, img_h, epoch, index) -> str: what
 * pl_transform_params says the ops draw for that sample. */
static PyObject *mod_transform_params(PyObject *m, PyObject *args)
{
    PyObject *dict, *keep = NULL;
    int w, h;
    long long epoch, index;
    if (!PyArg_ParseTuple(args, "OiiLL", &dict, &w, &h, &epoch, &index))
        return NULL;
    pl_config cfg;
    if (transform_config(dict, &cfg, &keep) < 0) {
        Py_XDECREF(keep);
        return NULL;
    }
    char small[1024];
    size_t len = 0;
    int rc = pl_transform_params(&cfg, w, h, epoch, index, small, sizeof small,
                                 &len);
    PyObject *out = NULL;
    if (rc == 0) {
        out = PyUnicode_FromString(small);
    } else if (len >= sizeof small) {
        char *big = malloc(len + 1);
        if (!big)
            PyErr_NoMemory();
        else if ((rc = pl_transform_params(&cfg, w, h, epoch, index, big,
                                           len + 1, &len)) == 0)
            out = PyUnicode_FromString(big);
        free(big);
    }
    if (rc < 0 && !PyErr_Occurred())
        raise_status(PyModule_GetState(m), rc, NULL);
    Py_DECREF(keep);
    return out;
}

/* transform_check(config) -> str: the config's transform as
 * pl_transform_check writes it, every parameter written out. */
static PyObject *mod_transform_check(PyObject *m, PyObject *args)
{
    PyObject *dict, *keep = NULL;
    if (!PyArg_ParseTuple(args, "O", &dict))
        return NULL;
    pl_config cfg;
    if (transform_config(dict, &cfg, &keep) < 0) {
        Py_XDECREF(keep);
        return NULL;
    }
    enum { CAP = 16384 }; /* OPS_MAX ops of some 100 characters each */
    char *text = malloc(CAP);
    PyObject *out = NULL;
    if (!text) {
        PyErr_NoMemory();
    } else {
        const int rc = pl_transform_check(&cfg, text, CAP);
        if (rc == 0)
            out = PyUnicode_FromString(text);
        else
            raise_status(PyModule_GetState(m), rc, NULL);
        free(text);
    }
    Py_DECREF(keep);
    return out;
}

/* transform_image(config, rgb bytes, img_w, img_h, epoch, index) -> bytes:
 * the sample pl_transform_image makes from those pixels. */
static PyObject *mod_transform_image(PyObject *m, PyObject *args)
{
    PyObject *dict, *pixels, *keep = NULL;
    int w, h;
    long long epoch, index;
    if (!PyArg_ParseTuple(args, "OSiiLL", &dict, &pixels, &w, &h, &epoch,
                          &index))
        return NULL;
    char *rgb;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(pixels, &rgb, &n) < 0)
        return NULL;
    if (w < 1 || h < 1 || n != (Py_ssize_t)w * h * 3) {
        PyErr_Format(PyExc_ValueError,
                     "transform_image: %zd bytes are not %d x %d RGB pixels",
                     n, w, h);
        return NULL;
    }
    pl_config cfg;
    if (transform_config(dict, &cfg, &keep) < 0) {
        Py_XDECREF(keep);
        return NULL;
    }
    const int bytes_per = cfg.format == PL_FORMAT_F32_NCHW ? 4
                          : cfg.format == PL_FORMAT_U8_NHWC ? 1
                                                            : 2;
    const size_t size = (size_t)cfg.width * (size_t)cfg.height * 3 *
                        (size_t)bytes_per;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (out) {
        int rc;
        char *dst = PyBytes_AsString(out);
        Py_BEGIN_ALLOW_THREADS
        rc = pl_transform_image(&cfg, (const uint8_t *)rgb, w, h, epoch, index,
                                dst, size);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            Py_CLEAR(out);
            raise_status(PyModule_GetState(m), rc, NULL);
        }
    }
    Py_DECREF(keep);
    return out;
}

static PyMethodDef module_methods[] = {
    {"transform_params", mod_transform_params, METH_VARARGS,
     "transform_params(config, img_w, img_h, epoch, index) -> str"},
    {"transform_check", mod_transform_check, METH_VARARGS,
     "transform_check(config) -> str"},
    {"transform_image", mod_transform_image, METH_VARARGS,
     "transform_image(config, rgb, img_w, img_h, epoch, index) -> bytes"},
    {"config_defaults", mod_config_defaults, METH_NOARGS,
     "pl_config_default() as {field: value}"},
    {"state_get", mod_state_get, METH_O,
     "state_get(state bytes) -> (epoch, batch, position)"},
    {"register_errors", mod_register_errors, METH_O,
     "register_errors({code: exception class})"},
    {"strerror", mod_strerror, METH_O, "strerror(code) -> (name, message)"},
    {NULL, NULL, 0, NULL},
};

static int add_int(PyObject *m, const char *name, long v)
{
    return PyModule_AddIntConstant(m, name, v);
}

/* Fills the module: its types (heap types of this module), the constants,
 * the status codes. 0, or -1 with an exception. */
static int module_exec(PyObject *m)
{
    plpy_state *st = PyModule_GetState(m);
    PyType_Spec *specs[] = {&Loader_spec, &Batch_spec, &View_spec};
    PyTypeObject **types[] = {&st->Loader, &st->Batch, &st->View};
    for (int i = 0; i < 3; i++) {
        *types[i] = (PyTypeObject *)PyType_FromModuleAndSpec(m, specs[i], NULL);
        if (!*types[i] || PyModule_AddType(m, *types[i]) < 0)
            return -1;
    }
    /* The enums' values, from their lists in pinload.h (PL_FORMAT_MAP...),
     * as FORMAT_U8_NHWC and its kin, and `names`: each one's word, as the
     * library's pl_*_name() gives it ({"FORMAT_U8_NHWC": "u8", ...}): the
     * words Python's keywords take (_options.CHOICES). */
    const struct {
        const char *name;
        long value;
        const char *word;
    } ints[] = {
#define ENUM_(prefix, fn, name, value) {prefix #name, value, fn(value)},
#define FORMAT_(name, value, word) ENUM_("FORMAT_", pl_format_name, name, value)
#define AUGMENT_(name, value, word)                                            \
    ENUM_("AUGMENT_", pl_augment_name, name, value)
#define MEMORY_(name, value, word) ENUM_("MEMORY_", pl_memory_name, name, value)
#define ON_ERROR_(name, value, word)                                           \
    ENUM_("ON_ERROR_", pl_on_error_name, name, value)
#define SHARD_(name, value, word)                                              \
    ENUM_("SHARD_", pl_shard_mode_name, name, value)
#define ORDER_(name, value, word) ENUM_("ORDER_", pl_order_name, name, value)
#define BACKEND_(name, value, word)                                            \
    ENUM_("BACKEND_", pl_backend_name, name, value)
#define LOG_(name, value, word) ENUM_("LOG_", pl_log_level_name, name, value)
#define DEVICE_(name, value, word) ENUM_("DEVICE_", pl_device_name, name, value)
#define DECODE_(name, value, word) ENUM_("DECODE_", pl_decode_name, name, value)
        /* One list a line. */
        /* clang-format off */
        PL_FORMAT_MAP(FORMAT_)
        PL_AUGMENT_MAP(AUGMENT_)
        PL_MEMORY_MAP(MEMORY_)
        PL_ON_ERROR_MAP(ON_ERROR_)
        PL_SHARD_MODE_MAP(SHARD_)
        PL_ORDER_MAP(ORDER_)
        PL_BACKEND_MAP(BACKEND_)
        PL_LOG_LEVEL_MAP(LOG_)
        PL_DEVICE_MAP(DEVICE_)
        PL_DECODE_MAP(DECODE_)
        /* clang-format on */
        {"FROM_ENV", PL_FROM_ENV, NULL},
        {"AUTO", PL_AUTO, NULL},
        {"STATE_BYTES", PL_STATE_BYTES, NULL},
        {"VIEWS_MAX", PL_VIEWS_MAX, NULL},
    };
    PyObject *names = PyDict_New();
    for (size_t i = 0; names && i < sizeof ints / sizeof ints[0]; i++) {
        if (add_int(m, ints[i].name, ints[i].value) < 0)
            Py_CLEAR(names);
        else if (ints[i].word) {
            PyObject *w = PyUnicode_FromString(ints[i].word);
            if (!w || PyDict_SetItemString(names, ints[i].name, w) < 0)
                Py_CLEAR(names);
            Py_XDECREF(w);
        }
    }
    if (!names || PyModule_AddObjectRef(m, "names", names) < 0) {
        Py_XDECREF(names);
        return -1;
    }
    Py_DECREF(names);
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
    const int ok =
        codes && PyModule_AddObjectRef(m, "codes", codes) == 0 &&
        PyModule_AddStringConstant(m, "library_version", pl_version()) == 0;
    Py_XDECREF(codes);
    return ok ? 0 : -1;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    plpy_state *st = PyModule_GetState(m);
    if (st) {
        Py_VISIT(st->Loader);
        Py_VISIT(st->Batch);
        Py_VISIT(st->View);
        Py_VISIT(st->error_classes);
    }
    return 0;
}

static int module_clear(PyObject *m)
{
    plpy_state *st = PyModule_GetState(m);
    if (st) {
        Py_CLEAR(st->Loader);
        Py_CLEAR(st->Batch);
        Py_CLEAR(st->View);
        Py_CLEAR(st->error_classes);
    }
    return 0;
}

static void module_free(void *m)
{
    module_clear(m);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_pinload",
    .m_doc = "The C extension under the pinload package (include/pinload.h).",
    .m_size = sizeof(plpy_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__pinload(void)
{
    return PyModuleDef_Init(&module);
}
