/* Python objects to DLTensors and back: the buffer protocol, __dlpack__, lists of tensors. */
#include "pydistc.h"

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* kDLBool arrived in DLPack 0.8; Debian's header is 0.6. The value is fixed by the spec. */
#define PYDISTC_DL_BOOL 6

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
     * producer's deleter, so nothing is consumed. The descriptor is copied,
     * once its shape can be read: the C checks come only after the copy. */
    if (m->dl_tensor.ndim < 0) {
        pydistc_invalid("%s: its __dlpack__() gave ndim %d", what, m->dl_tensor.ndim);
        return -1;
    }
    if (m->dl_tensor.ndim > 0 && !m->dl_tensor.shape) {
        pydistc_invalid("%s: its __dlpack__() gave ndim %d but no shape", what, m->dl_tensor.ndim);
        return -1;
    }
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
    /* (tensor, code, bits): the tensor's memory read as another dtype of the same
     * width, as distc's own code builds it (_types._Reinterpreted, a tuple
     * subclass); a plain tuple from the caller is not a tensor. */
    if (PyTuple_CheckExact(obj)) {
        pydistc_invalid("%s: a tuple is not a tensor (expected a NumPy array, a buffer, or an object with __dlpack__)",
                        what);
        return -1;
    }
    if (PyTuple_Check(obj)) {
        int code = 0, bits = 0;
        PyObject *inner = NULL;
        if (!PyArg_ParseTuple(obj, "Oii", &inner, &code, &bits)) return -1;
        if (code < 0 || code > 255 || bits <= 0 || bits > 255) {
            pydistc_invalid("%s: DLPack code %d with %d bits is not a dtype", what, code, bits);
            return -1;
        }
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
