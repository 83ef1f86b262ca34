/* Python objects to and from the C ABI's arguments (see pydistc.h): errors,
 * bytes, integers, batched p2p, options, byte results. Tensors are in
 * pydistc_tensors.c, the options' field tables (generated) in
 * pydistc_options.c, the callbacks distc makes into Python in
 * pydistc_callbacks.c. */
#include "pydistc.h"

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

static PyObject *error_classes; /* {code: class}, set by the package */

void pydistc_set_error_classes(PyObject *mapping) {
    Py_XINCREF(mapping);
    Py_XSETREF(error_classes, mapping);
}

PyObject *pydistc_raise(int code) {
    if (pydistc_take_interrupt()) return NULL; /* the KeyboardInterrupt a callback of this call raised */
    const char *msg = distc_error_last();
    if (!msg || !*msg) msg = distc_strerror(code);
    PyObject *cls = NULL;
    if (error_classes) {
        PyObject *key = PyLong_FromLong(code);
        if (key) {
            cls = PyDict_GetItemWithError(error_classes, key); /* borrowed */
            Py_DECREF(key);
        }
        if (!cls && !PyErr_Occurred()) {
            key = PyLong_FromLong(0); /* 0: the base class, for codes without their own */
            if (key) {
                cls = PyDict_GetItemWithError(error_classes, key);
                Py_DECREF(key);
            }
        }
        if (PyErr_Occurred()) return NULL;
    }
    if (!cls) {
        PyErr_Format(PyExc_RuntimeError, "%s (distc error %d)", msg, code);
        return NULL;
    }
    PyObject *exc = PyObject_CallFunction(cls, "si", msg, code);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* A bad argument found here: DistcInvalidArgument (a ValueError and a
 * DistcError, like the library's own EINVAL) with a formatted message. */
PyObject *pydistc_invalid(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
    va_end(ap);
    if (!msg) return NULL;
    distc_error_set(DISTC_EINVAL, PyUnicode_AsUTF8(msg));
    Py_DECREF(msg);
    return pydistc_raise(DISTC_EINVAL);
}

/* ------------------------------------------------------------------ bytes */

int pydistc_bytes_get(PyObject *obj, pydistc_bytes *b, const char *what) {
    memset(b, 0, sizeof(*b));
    if (obj == Py_None) return 0;
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n = 0;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &n); /* owned by the str */
        if (!s) return -1;
        b->data = s;
        b->len = (size_t)n;
        return 0;
    }
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be bytes, str or a contiguous buffer, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    b->has_view = 1;
    b->data = b->view.buf;
    b->len = (size_t)b->view.len;
    return 0;
}

void pydistc_bytes_put(pydistc_bytes *b) {
    if (b->has_view) PyBuffer_Release(&b->view);
    b->has_view = 0;
}

static int bytes_list_alloc(pydistc_bytes_list *l, size_t n, int keys) {
    l->items = PyMem_Calloc(n + 1, sizeof(pydistc_bytes));
    l->ptrs = PyMem_Calloc(n + 1, sizeof(void *));
    l->lens = PyMem_Calloc(n + 1, sizeof(size_t));
    if (keys) {
        l->keys = PyMem_Calloc(n + 1, sizeof(char *));
        l->key_items = PyMem_Calloc(n + 1, sizeof(pydistc_bytes));
    }
    if (!l->items || !l->ptrs || !l->lens || (keys && (!l->keys || !l->key_items))) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Keys are C strings: str or bytes without NUL. */
int pydistc_cstr_get(PyObject *obj, pydistc_bytes *b, const char *what) {
    if (!PyUnicode_Check(obj) && !PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyBytes_Check(obj)) {
        b->data = PyBytes_AS_STRING(obj);
        b->len = (size_t)PyBytes_GET_SIZE(obj);
    } else if (pydistc_bytes_get(obj, b, what) != 0) {
        return -1;
    }
    if (memchr(b->data, 0, b->len)) {
        pydistc_invalid("%s contains a NUL character", what);
        return -1;
    }
    return 0;
}

int pydistc_bytes_list_get(PyObject *seq, pydistc_bytes_list *l, int allow_none, int keys, const char *what) {
    memset(l, 0, sizeof(*l));
    if (seq == Py_None && allow_none) return 0;
    if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list, not a single %.100s", what, Py_TYPE(seq)->tp_name);
        return -1;
    }
    PyObject *fast = PySequence_Fast(seq, "");
    if (!fast) {
        PyErr_Format(PyExc_TypeError, "%s must be a list, not %.100s", what, Py_TYPE(seq)->tp_name);
        return -1;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(fast);
    int rc = bytes_list_alloc(l, n, 0);
    char name[256];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        snprintf(name, sizeof(name), "%s[%zu]", what, i);
        PyObject *item = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        l->n = i + 1;
        rc = keys ? pydistc_cstr_get(item, &l->items[i], name) : pydistc_bytes_get(item, &l->items[i], name);
        l->ptrs[i] = l->items[i].data ? l->items[i].data : "";
        l->lens[i] = l->items[i].len;
    }
    l->n = n;
    Py_DECREF(fast);
    return rc;
}

int pydistc_pairs_get(PyObject *seq, pydistc_bytes_list *l, const char *what) {
    memset(l, 0, sizeof(*l));
    PyObject *fast = PySequence_Fast(seq, "");
    if (!fast) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of (key, value) pairs, not %.100s", what,
                     Py_TYPE(seq)->tp_name);
        return -1;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(fast);
    int rc = bytes_list_alloc(l, n, 1);
    char name[256];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        l->n = i + 1;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError, "%s[%zu] must be a (key, value) tuple", what, i);
            rc = -1;
            break;
        }
        snprintf(name, sizeof(name), "%s[%zu] key", what, i);
        rc = pydistc_cstr_get(PyTuple_GET_ITEM(pair, 0), &l->key_items[i], name);
        if (rc != 0) break;
        snprintf(name, sizeof(name), "%s[%zu] value", what, i);
        rc = pydistc_bytes_get(PyTuple_GET_ITEM(pair, 1), &l->items[i], name);
        l->keys[i] = l->key_items[i].data;
        l->ptrs[i] = l->items[i].data ? l->items[i].data : "";
        l->lens[i] = l->items[i].len;
    }
    Py_DECREF(fast);
    return rc;
}

void pydistc_bytes_list_put(pydistc_bytes_list *l) {
    for (size_t i = 0; l->items && i < l->n; i++) pydistc_bytes_put(&l->items[i]);
    for (size_t i = 0; l->key_items && i < l->n; i++) pydistc_bytes_put(&l->key_items[i]);
    PyMem_Free(l->items);
    PyMem_Free(l->key_items);
    PyMem_Free(l->ptrs);
    PyMem_Free(l->lens);
    PyMem_Free(l->keys);
    memset(l, 0, sizeof(*l));
}

/* ------------------------------------------------------------------ integers */

int pydistc_ints_get(PyObject *seq, pydistc_ints *v, const char *what) {
    memset(v, 0, sizeof(*v));
    if (seq == Py_None) return 0;
    PyObject *fast = PySequence_Fast(seq, "");
    if (!fast) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of integers, not %.100s", what, Py_TYPE(seq)->tp_name);
        return -1;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(fast);
    v->i64 = PyMem_Calloc(n + 1, sizeof(int64_t));
    v->i32 = PyMem_Calloc(n + 1, sizeof(int32_t));
    v->u64 = PyMem_Calloc(n + 1, sizeof(uint64_t));
    if (!v->i64 || !v->i32 || !v->u64) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i));
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s[%zu] must be an integer", what, i);
            Py_DECREF(fast);
            return -1;
        }
        if (x < INT32_MIN || x > INT32_MAX)
            v->i32[i] = x < 0 ? INT32_MIN : INT32_MAX; /* refused by the C API */
        else
            v->i32[i] = (int32_t)x;
        v->i64[i] = x;
        v->u64[i] = x < 0 ? 0 : (uint64_t)x;
    }
    v->n = n;
    Py_DECREF(fast);
    return 0;
}

void pydistc_ints_put(pydistc_ints *v) {
    PyMem_Free(v->i64);
    PyMem_Free(v->i32);
    PyMem_Free(v->u64);
    memset(v, 0, sizeof(*v));
}

/* ------------------------------------------------------------------ batched p2p */

int pydistc_p2p_list_get(PyObject *seq, pydistc_p2p_list *l, const char *what) {
    memset(l, 0, sizeof(*l));
    PyObject *fast = PySequence_Fast(seq, "");
    if (!fast) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of (kind, tensor, peer, tag), not %.100s", what,
                     Py_TYPE(seq)->tp_name);
        return -1;
    }
    size_t n = (size_t)PySequence_Fast_GET_SIZE(fast);
    l->ops = PyMem_Calloc(n + 1, sizeof(distc_p2p_op));
    l->tensors = PyMem_Calloc(n + 1, sizeof(pydistc_tensor));
    if (!l->ops || !l->tensors) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    char name[256];
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)i);
        int kind = 0, peer = 0, tag = 0;
        PyObject *tensor = NULL;
        if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "iOii", &kind, &tensor, &peer, &tag)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s[%zu] must be a tuple (kind, tensor, peer, tag)", what, i);
            Py_DECREF(fast);
            return -1;
        }
        snprintf(name, sizeof(name), "%s[%zu]", what, i);
        l->n = i + 1;
        if (pydistc_tensor_get(tensor, &l->tensors[i], kind == DISTC_P2P_RECV, name) != 0) {
            Py_DECREF(fast);
            return -1;
        }
        l->ops[i].kind = kind;
        l->ops[i].tensor = &l->tensors[i].dl;
        l->ops[i].peer = peer;
        l->ops[i].tag = tag;
    }
    Py_DECREF(fast);
    return 0;
}

void pydistc_p2p_list_put(pydistc_p2p_list *l) {
    for (size_t i = 0; l->tensors && i < l->n; i++) pydistc_tensor_put(&l->tensors[i]);
    PyMem_Free(l->tensors);
    PyMem_Free(l->ops);
    memset(l, 0, sizeof(*l));
}

/* ------------------------------------------------------------------ options */

/* The tables of fields are generated from the header: pydistc_options.c. */

static int set_field(void *opts, const pydistc_field *f, PyObject *v, pydistc_options *keep, const char *what) {
    char *p = (char *)opts + f->offset;
    if (f->kind == 's') {
        const char *s = NULL;
        if (v != Py_None && !(s = PyUnicode_AsUTF8(v))) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s.%s must be a str or None", what, f->name);
            return -1;
        }
        memcpy(p, &s, sizeof s);
        return 0;
    }
    if (f->kind == 'a') {
        const int32_t *a = NULL;
        if (v != Py_None) {
            if (keep->n_arrays >= 2) {
                PyErr_Format(PyExc_TypeError, "%s has more array fields than distc's options have", what);
                return -1;
            }
            pydistc_ints *slot = &keep->arrays[keep->n_arrays++];
            if (pydistc_ints_get(v, slot, f->name) != 0) return -1;
            a = slot->i32;
        }
        memcpy(p, &a, sizeof a);
        return 0;
    }
    if (f->kind == 'd') {
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) goto bad;
        memcpy(p, &d, sizeof d);
        return 0;
    }
    if (f->kind == 'p') {
        void *ptr = v == Py_None ? NULL : PyLong_AsVoidPtr(v);
        if (!ptr && PyErr_Occurred()) goto bad;
        memcpy(p, &ptr, sizeof ptr);
        return 0;
    }
    if (f->kind == 'u') {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) goto bad;
        uint64_t x = u;
        memcpy(p, &x, sizeof x);
        return 0;
    }
    {
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) goto bad;
        if (f->kind == 'i') {
            if (x < INT32_MIN || x > INT32_MAX) {
                PyErr_Format(PyExc_OverflowError, "%s.%s = %lld does not fit in 32 bits", what, f->name, x);
                return -1;
            }
            int32_t y = (int32_t)x;
            memcpy(p, &y, sizeof y);
        } else {
            int64_t y = x;
            memcpy(p, &y, sizeof y);
        }
        return 0;
    }
bad:
    if (PyErr_ExceptionMatches(PyExc_OverflowError) && PyLong_Check(v)) {
        /* A number, out of the field's range: say so, not that it is no number. */
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s.%s = %R is out of range for its %s field", what, f->name, v,
                     f->kind == 'u'   ? "unsigned 64-bit"
                     : f->kind == 'p' ? "pointer"
                     : f->kind == 'd' ? "double"
                                      : "signed 64-bit");
        return -1;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s.%s must be a number, not %.100s", what, f->name, Py_TYPE(v)->tp_name);
    return -1;
}

int pydistc_options_get(PyObject *dict, void *opts, const pydistc_field *fields, pydistc_options *keep,
                        const char *what) {
    if (!PyDict_Check(dict)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict of its fields or None, not %.100s", what,
                     Py_TYPE(dict)->tp_name);
        return -1;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        const pydistc_field *f = fields;
        while (name && f->name && strcmp(f->name, name) != 0) f++;
        if (!name || !f->name) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s has no field %R", what, k);
            return -1;
        }
        if (set_field(opts, f, v, keep, what) != 0) return -1;
    }
    return 0;
}

void pydistc_options_put(pydistc_options *keep) {
    for (int k = 0; k < keep->n_arrays; k++) pydistc_ints_put(&keep->arrays[k]);
    keep->n_arrays = 0;
}

/* ------------------------------------------------------------------ byte results */

PyObject *pydistc_buf_to_bytes(distc_buf *b) {
    if (!b->data) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)b->data, (Py_ssize_t)b->size);
}

PyObject *pydistc_bufs_to_list(distc_buf *b, size_t n) {
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *x = pydistc_buf_to_bytes(&b[i]);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, x);
    }
    return list;
}

void pydistc_bufs_put(distc_buf *b, size_t n) {
    for (size_t i = 0; b && i < n; i++) distc_buf_dispose(&b[i]);
    PyMem_Free(b);
}
