/* pinload._pinload: every pl_config field by its name (config_fields.h,
 * which tools/config-fields.py writes from pinload.h), a dict into a
 * pl_config, and the defaults as a dict (pinload_py.h). */
#include "pinload_py.h"

#include "config_fields.h"

/* One pl_config field as a Python name. */
typedef enum { F_I32, F_I64, F_U64, F_FLOAT3, F_PATH, F_STATE, F_STRS } ftype;
typedef struct {
    const char *name;
    size_t offset;
    ftype type;
} field;

#define FIELD(n, t) {#n, offsetof(pl_config, n), t},
/* In the header's order (config_fields.h, written from pinload.h). */
static const field fields[] = {PL_CONFIG_FIELDS(FIELD)};
#undef FIELD
/* tools/config-fields.py wrote the table from the header as it was: a field
 * appended since (pl_config ends with the last field and its padding)
 * needs it run again. */
#define LAST_SIZE sizeof(((pl_config *)0)->PL_CONFIG_LAST_FIELD)
_Static_assert(sizeof(pl_config) - offsetof(pl_config, PL_CONFIG_LAST_FIELD) -
                       LAST_SIZE <
                   _Alignof(pl_config),
               "pl_config grew: run tools/config-fields.py");
#undef LAST_SIZE

static const field *field_find(const char *name)
{
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (strcmp(fields[i].name, name) == 0)
            return &fields[i];
    return NULL;
}

/* TypeError "f: expected an integer, got T", T the value's type's name
 * (tp_name is not in the limited API, nor PyType_GetName before 3.11:
 * __name__, the same for builtins). */
static int not_an_integer(const field *f, PyObject *value)
{
    PyObject *name =
        PyObject_GetAttrString((PyObject *)Py_TYPE(value), "__name__");
    if (name) {
        PyErr_Format(PyExc_TypeError, "%s: expected an integer, got %U",
                     f->name, name);
        Py_DECREF(name);
    }
    return -1;
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
        if (v == -1 && PyErr_Occurred())
            return not_an_integer(f, value);
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
        if (!PyLong_Check(value))
            return not_an_integer(f, value);
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
        PyObject *seq = PySequence_List(value); /* any iterable */
        if (!seq || PyList_Size(seq) != 3) {
            Py_XDECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: expected 3 numbers", f->name);
            return -1;
        }
        float v[3];
        for (int i = 0; i < 3; i++) {
            const double d = PyFloat_AsDouble(PyList_GetItem(seq, i));
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
            s = PyBytes_AsString(bytes);
            Py_DECREF(bytes);
        }
        memcpy(p, &s, sizeof s);
        return 0;
    }
    case F_STRS: { /* config.views: a sequence of str, and its length */
        const char **arr = NULL;
        Py_ssize_t n = 0;
        if (value != Py_None) {
            PyObject *seq = PySequence_List(value);
            if (!seq)
                return -1;
            n = PyList_Size(seq);
            PyObject *holder = PyBytes_FromStringAndSize(
                NULL, (Py_ssize_t)sizeof *arr * (n ? n : 1));
            if (!holder || PyList_Append(keep, holder) < 0) {
                Py_XDECREF(holder);
                Py_DECREF(seq);
                return -1;
            }
            arr = (const char **)PyBytes_AsString(holder);
            Py_DECREF(holder); /* keep holds it */
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *s = PyList_GetItem(seq, i);
                const char *u = PyUnicode_Check(s)
                                    ? PyUnicode_AsUTF8AndSize(s, NULL)
                                    : NULL;
                if (!u) {
                    PyErr_Clear();
                    PyErr_Format(PyExc_TypeError,
                                 "%s: item %zd: expected a spec (str), got "
                                 "%R",
                                 f->name, i, s);
                    Py_DECREF(seq);
                    return -1;
                }
                arr[i] = u; /* the str's own UTF-8, alive with seq */
            }
            if (PyList_Append(keep, seq) < 0) {
                Py_DECREF(seq);
                return -1;
            }
            Py_DECREF(seq);
        }
        const int32_t n32 = n > INT32_MAX ? INT32_MAX : (int32_t)n;
        memcpy(p, &arr, sizeof arr);
        memcpy((char *)cfg + offsetof(pl_config, num_views), &n32,
               sizeof n32);
        return 0;
    }
    case F_STATE: {
        const pl_state *sp = NULL;
        if (value != Py_None) {
            if (state_from_object(value, state, f->name) < 0)
                return -1;
            sp = state;
        }
        memcpy(p, &sp, sizeof sp);
        return 0;
    }
    }
    return 0;
}

int state_from_object(PyObject *obj, pl_state *state, const char *what)
{
    /* PyBytes_FromObject, not a Py_buffer: the buffer protocol is in the
     * limited API from 3.11 only. A bytes object is the same object. */
    PyObject *bytes = PyBytes_FromObject(obj);
    char *buf;
    Py_ssize_t len;
    if (!bytes || PyBytes_AsStringAndSize(bytes, &buf, &len) < 0) {
        Py_XDECREF(bytes);
        return -1;
    }
    const int ok = len == PL_STATE_BYTES;
    if (ok)
        memcpy(state->bytes, buf, PL_STATE_BYTES);
    Py_DECREF(bytes);
    if (!ok)
        PyErr_Format(PyExc_ValueError, "%s: a loader state is %d bytes", what,
                     PL_STATE_BYTES);
    return ok ? 0 : -1;
}

int config_from_dict(PyObject *dict, pl_config *cfg, PyObject *keep,
                     pl_state *state)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name =
            PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        const field *f = name ? field_find(name) : NULL;
        if (!f) {
            PyErr_Format(PyExc_TypeError, "unknown config field %R", key);
            return -1;
        }
        if (field_set(cfg, f, value, keep, state) < 0)
            return -1;
    }
    return 0;
}

PyObject *config_defaults(void)
{
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
        case F_STRS:
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
