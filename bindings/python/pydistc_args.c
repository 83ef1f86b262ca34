/* Python objects to and from the C ABI's arguments (see pydistc.h); the
 * callbacks distc makes into Python are in pydistc_callbacks.c. */
#include "pydistc.h"

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* kDLBool arrived in DLPack 0.8; Debian's header is 0.6. The value is fixed by the spec. */
#define PYDISTC_DL_BOOL 6

/* ------------------------------------------------------------------ errors */

static PyObject *error_classes; /* {code: class}, set by the package */

void pydistc_set_error_classes(PyObject *mapping) {
    Py_XINCREF(mapping);
    Py_XSETREF(error_classes, mapping);
}

PyObject *pydistc_raise(int code) {
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

/* ------------------------------------------------------------------ tensors */

/* The DLPack dtype of a buffer-protocol format ("<f", "Zd", "?"), or -1 with ValueError. */
static int dtype_from_format(const char *fmt, Py_ssize_t itemsize, DLDataType *dt, const char *what) {
    const char *f = fmt ? fmt : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    else if (*f == '>' || *f == '!') {
        pydistc_invalid("%s: big-endian data (format '%s') is not supported", what, fmt);
        return -1;
    }
    uint8_t bits = (uint8_t)(itemsize * 8);
    dt->lanes = 1;
    dt->bits = bits;
    if (f[0] == 'Z' && (f[1] == 'f' || f[1] == 'd') && f[2] == 0) {
        dt->code = kDLComplex;
        return 0;
    }
    if (f[0] && f[1] == 0) {
        switch (f[0]) {
            case '?': dt->code = PYDISTC_DL_BOOL; return 0;
            case 'b':
            case 'h':
            case 'i':
            case 'l':
            case 'q':
            case 'n': dt->code = kDLInt; return 0;
            case 'B':
            case 'c':
            case 'H':
            case 'I':
            case 'L':
            case 'Q':
            case 'N': dt->code = kDLUInt; return 0;
            case 'e':
            case 'f':
            case 'd': dt->code = kDLFloat; return 0;
            default: break;
        }
    }
    pydistc_invalid(
        "%s: unsupported element format '%s' (supported: bool, int8, uint8, int16, int32, int64, "
        "float16, float32, float64, complex64, complex128; bfloat16 through __dlpack__)",
        what, fmt);
    return -1;
}

static int set_shape(pydistc_tensor *t, int ndim) {
    t->dl.ndim = ndim;
    t->dl.shape = t->shape_inline;
    if (ndim > PYDISTC_MAX_INLINE_DIMS) {
        t->shape_heap = PyMem_Calloc((size_t)ndim, sizeof(int64_t));
        if (!t->shape_heap) {
            PyErr_NoMemory();
            return -1;
        }
        t->dl.shape = t->shape_heap;
    }
    return 0;
}

static int from_buffer(PyObject *obj, pydistc_tensor *t, int writable, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &t->view, flags) != 0) {
        /* Say which requirement failed, in our words. */
        PyErr_Clear();
        Py_buffer probe;
        if (PyObject_GetBuffer(obj, &probe, PyBUF_FULL_RO) == 0) {
            int contiguous = PyBuffer_IsContiguous(&probe, 'C');
            PyBuffer_Release(&probe);
            if (!contiguous)
                pydistc_invalid(
                    "%s is not contiguous: distc needs C-contiguous memory (use numpy.ascontiguousarray "
                    "or .contiguous(), and copy the result back)",
                    what);
            else
                pydistc_invalid("%s is read-only, but this operation writes into it", what);
        } else {
            PyErr_Clear();
            pydistc_invalid("%s: cannot read the buffer of a %.100s", what, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    t->has_view = 1;
    if (dtype_from_format(t->view.format, t->view.itemsize, &t->dl.dtype, what) != 0) return -1;
    if (set_shape(t, t->view.ndim) != 0) return -1;
    for (int i = 0; i < t->view.ndim; i++) t->dl.shape[i] = t->view.shape ? t->view.shape[i] : 0;
    if (t->view.ndim == 1 && !t->view.shape) t->dl.shape[0] = t->view.len / t->view.itemsize;
    t->dl.data = t->view.buf;
    t->dl.device.device_type = kDLCPU;
    t->dl.device.device_id = 0;
    t->dl.strides = NULL;
    t->dl.byte_offset = 0;
    return 0;
}

static int from_dlpack(PyObject *obj, pydistc_tensor *t, const char *what) {
    t->capsule = PyObject_CallMethod(obj, "__dlpack__", NULL);
    if (!t->capsule) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        pydistc_invalid("%s: its __dlpack__() failed: %s", what, s ? PyUnicode_AsUTF8(s) : "?");
        Py_XDECREF(s);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    DLManagedTensor *m = PyCapsule_GetPointer(t->capsule, "dltensor");
    if (!m) {
        PyErr_Clear();
        pydistc_invalid("%s: __dlpack__() did not return an unused \"dltensor\" capsule", what);
        return -1;
    }
    /* The capsule keeps its name: dropping it (pydistc_tensor_put) calls the
     * producer's deleter, so nothing is consumed. The descriptor is copied. */
    t->dl = m->dl_tensor;
    if (set_shape(t, m->dl_tensor.ndim) != 0) return -1;
    memcpy(t->dl.shape, m->dl_tensor.shape, sizeof(int64_t) * (size_t)m->dl_tensor.ndim);
    if (m->dl_tensor.strides) {
        /* distc takes compact row-major memory; say so here, in Python's terms. */
        int64_t expect = 1;
        for (int i = m->dl_tensor.ndim - 1; i >= 0; i--) {
            if (m->dl_tensor.shape[i] != 1 && m->dl_tensor.strides[i] != expect) {
                pydistc_invalid(
                    "%s is not contiguous: distc needs C-contiguous memory (call .contiguous() "
                    "and copy the result back)",
                    what);
                return -1;
            }
            expect *= m->dl_tensor.shape[i];
        }
    }
    t->dl.strides = NULL;
    return 0;
}

int pydistc_tensor_get(PyObject *obj, pydistc_tensor *t, int writable, const char *what) {
    memset(t, 0, sizeof(*t));
    if (obj == NULL || obj == Py_None) {
        pydistc_invalid("%s is None; a tensor or array is needed", what);
        return -1;
    }
    /* (tensor, code, bits): the tensor's memory read as another dtype of the same width. */
    if (PyTuple_Check(obj)) {
        int code = 0, bits = 0;
        PyObject *inner = NULL;
        if (!PyArg_ParseTuple(obj, "Oii", &inner, &code, &bits)) return -1;
        if (pydistc_tensor_get(inner, t, writable, what) != 0) return -1;
        if (t->dl.dtype.bits != bits) {
            pydistc_invalid("%s: cannot read %d-bit elements as %d-bit ones", what, t->dl.dtype.bits, bits);
            return -1;
        }
        t->dl.dtype.code = (uint8_t)code;
        return 0;
    }
    if (PyObject_CheckBuffer(obj)) return from_buffer(obj, t, writable, what);
    if (PyObject_HasAttrString(obj, "__dlpack__")) return from_dlpack(obj, t, what);
    pydistc_invalid("%s: a %.100s is not a tensor (expected a NumPy array, a buffer, or an object with __dlpack__)",
                    what, Py_TYPE(obj)->tp_name);
    return -1;
}

void pydistc_tensor_put(pydistc_tensor *t) {
    if (t->has_view) PyBuffer_Release(&t->view);
    t->has_view = 0;
    Py_CLEAR(t->capsule);
    PyMem_Free(t->shape_heap);
    t->shape_heap = NULL;
}

int pydistc_tensor_list_get(PyObject *seq, pydistc_tensor_list *l, int writable, int allow_none, const char *what) {
    memset(l, 0, sizeof(*l));
    if (seq == Py_None && allow_none) {
        l->is_none = 1;
        return 0;
    }
    PyObject *fast = PySequence_Fast(seq, "");
    if (!fast) {
        pydistc_invalid("%s must be a list of tensors, not a %.100s", what, Py_TYPE(seq)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    l->items = PyMem_Calloc((size_t)n + 1, sizeof(pydistc_tensor));
    l->ptrs = PyMem_Calloc((size_t)n + 1, sizeof(DLTensor *));
    if (!l->items || !l->ptrs) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    char name[256];
    for (Py_ssize_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "%s[%zd]", what, i);
        l->n = (size_t)i + 1; /* so that put releases what was taken */
        if (pydistc_tensor_get(PySequence_Fast_GET_ITEM(fast, i), &l->items[i], writable, name) != 0) {
            Py_DECREF(fast);
            return -1;
        }
        l->ptrs[i] = &l->items[i].dl;
    }
    l->n = (size_t)n;
    Py_DECREF(fast);
    return 0;
}

void pydistc_tensor_list_put(pydistc_tensor_list *l) {
    for (size_t i = 0; l->items && i < l->n; i++) pydistc_tensor_put(&l->items[i]);
    PyMem_Free(l->items);
    PyMem_Free(l->ptrs);
    memset(l, 0, sizeof(*l));
}

int pydistc_check_list_len(const pydistc_tensor_list *l, distc_pg *pg, const char *what) {
    if (l->is_none) return 0;
    int32_t size = 0;
    if (distc_pg_size(&size, pg) != 0) return 0; /* a bad group: the call itself says so */
    if (l->n != (size_t)size) {
        pydistc_invalid("%s has %zu tensors; the group has %d ranks", what, l->n, (int)size);
        return -1;
    }
    return 0;
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

#define FIELD(T, f, k) \
    { #f, offsetof(T, f), k }
const pydistc_field pydistc_tcp_store_fields[] = {FIELD(distc_tcp_store_options, host, 's'),
                                                  FIELD(distc_tcp_store_options, port, 'i'),
                                                  FIELD(distc_tcp_store_options, is_server, 'i'),
                                                  FIELD(distc_tcp_store_options, world_size, 'i'),
                                                  FIELD(distc_tcp_store_options, wait_for_workers, 'i'),
                                                  FIELD(distc_tcp_store_options, timeout_ms, 'l'),
                                                  FIELD(distc_tcp_store_options, connect_retries, 'i'),
                                                  FIELD(distc_tcp_store_options, protocol, 'i'),
                                                  FIELD(distc_tcp_store_options, max_request_bytes, 'l'),
                                                  FIELD(distc_tcp_store_options, max_unread_reply_bytes, 'l'),
                                                  FIELD(distc_tcp_store_options, token, 's'),
                                                  FIELD(distc_tcp_store_options, allow_torch_clients, 'i'),
                                                  {NULL, 0, 0}};
const pydistc_field pydistc_rendezvous_fields[] = {FIELD(distc_rendezvous_options, timeout_ms, 'l'),
                                                   FIELD(distc_rendezvous_options, rank, 'i'),
                                                   FIELD(distc_rendezvous_options, world_size, 'i'),
                                                   {NULL, 0, 0}};
const pydistc_field pydistc_pg_fields[] = {
    FIELD(distc_pg_options, backend, 's'),    FIELD(distc_pg_options, timeout_ms, 'l'),
    FIELD(distc_pg_options, group_name, 's'), FIELD(distc_pg_options, debug, 'i'),
    FIELD(distc_pg_options, device, 'i'),     {NULL, 0, 0}};
const pydistc_field pydistc_op_fields[] = {FIELD(distc_op_options, timeout_ms, 'l'),
                                           FIELD(distc_op_options, premul_factor, 'd'),
                                           FIELD(distc_op_options, stream, 'p'),
                                           {NULL, 0, 0}};
const pydistc_field pydistc_reducer_fields[] = {FIELD(distc_reducer_options, bucket_cap_bytes, 'u'),
                                                FIELD(distc_reducer_options, first_bucket_bytes, 'u'),
                                                FIELD(distc_reducer_options, bucket_of, 'a'),
                                                FIELD(distc_reducer_options, find_unused_parameters, 'i'),
                                                FIELD(distc_reducer_options, gradient_as_bucket_view, 'i'),
                                                FIELD(distc_reducer_options, expect_sparse, 'a'),
                                                FIELD(distc_reducer_options, stream, 'p'),
                                                {NULL, 0, 0}};
#undef FIELD

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
