/* SWIG interface of the low-level module `distc._distc`: the C ABI of
 * include/distc.h as it is, plus typemaps. The pure-Python package on top
 * (bindings/python/distc/) is what users import.
 *
 * Conventions the typemaps give every wrapped function:
 * - a negative status raises the exception registered for its code, with
 *   distc_error_last() as the message; a status of 0 returns None, or the
 *   outputs (a single one as is, several as a tuple);
 * - `distc_work **out` takes a bool: False blocks (NULL), True returns the work;
 * - `T **out`, `T *out` outputs become return values;
 * - DLTensor arguments take NumPy arrays, buffers and __dlpack__ objects;
 *   lists of them take Python sequences;
 * - the GIL is released around every call into the library (-threads).
 */
%module(package="distc", threads="1") _distc

%{
#include "pydistc.h"
%}

%include <stdint.i>

/* The binding's own functions need the GIL; they do not block. */
%nothread pydistc_set_error_classes;
%nothread pydistc_store_new_object;
%nothread pydistc_work_keep;
%nothread pydistc_work_then;
%nothread pydistc_reducer_register_hook;

/* ------------------------------------------------------------------ what Python does not get */

/* Plugin authors' ABI, C callbacks and memory helpers the typemaps already use. */
%rename("$ignore", regextarget=1) "^distc_(backend_|buffer|work_hooks)";
%ignore distc_dtype_size;
%ignore distc_dtype_name;
%ignore distc_buf;
%ignore distc_buf_set;
%ignore distc_buf_dispose;
%ignore distc_error_set;
%ignore distc_store_vtable;
%ignore distc_store_new_custom;     /* pydistc_store_new_object serves Python objects */
%ignore distc_work_on_complete;     /* C callbacks; pydistc_work_keep is the Python use */
%ignore distc_reducer_register_comm_hook; /* replaced below: built-in hooks only */
%ignore distc_reducer_register_bucket_hook; /* pydistc_reducer_register_hook for Python */
%ignore distc_work_then;            /* pydistc_work_then for Python */
%ignore distc_reducer_bucket;
%ignore distc_p2p_op;
/* Options structs are passed as dicts of their fields (typemaps below). */
%rename("$ignore", regextarget=1) "^distc_.*_options$";
%rename("$ignore", regextarget=1) "^distc_.*_options_init$";

/* ------------------------------------------------------------------ status codes */

%typemap(out) int {
    if ($1 < 0) {
        if (!PyErr_Occurred()) pydistc_raise($1);
        SWIG_fail;
    }
    $result = $1 == 0 ? SWIG_Py_Void() : PyLong_FromLong($1);
}
/* These return a status as data: an operation's outcome or a code. */
%typemap(out) int distc_work_test, int distc_work_error, int distc_error_last_code {
    $result = PyLong_FromLong($1);
}

/* ------------------------------------------------------------------ handles */

%typemap(in, numinputs=1) distc_work **out (distc_work *tmp = NULL) {
    int async_ = PyObject_IsTrue($input);
    if (async_ < 0) SWIG_fail;
    $1 = async_ ? &tmp : NULL;
}
%typemap(argout) distc_work **out {
    if ($1) $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(tmp$argnum, $descriptor(distc_work *), 0));
}

%define DISTC_OUT_HANDLE(T)
%typemap(in, numinputs=0) T **out (T *tmp = NULL) { $1 = &tmp; }
%typemap(argout) T **out {
    $result = SWIG_Python_AppendOutput($result, tmp$argnum ? SWIG_NewPointerObj(tmp$argnum, $descriptor(T *), 0)
                                                           : SWIG_Py_Void());
}
%enddef
DISTC_OUT_HANDLE(distc_store)
DISTC_OUT_HANDLE(distc_pg)
DISTC_OUT_HANDLE(distc_reducer)

/* ------------------------------------------------------------------ scalar outputs */

%define DISTC_OUT_SCALAR(T, NAME, MAKE)
%typemap(in, numinputs=0) T *NAME (T tmp = 0) { $1 = &tmp; }
%typemap(argout) T *NAME { $result = SWIG_Python_AppendOutput($result, MAKE(tmp$argnum)); }
%enddef
DISTC_OUT_SCALAR(int32_t, out, PyLong_FromLong)
DISTC_OUT_SCALAR(int32_t, rank, PyLong_FromLong)
DISTC_OUT_SCALAR(int32_t, world_size, PyLong_FromLong)
DISTC_OUT_SCALAR(int64_t, out, PyLong_FromLongLong)
DISTC_OUT_SCALAR(int64_t, launch_ns, PyLong_FromLongLong)
DISTC_OUT_SCALAR(int64_t, reduce_ns, PyLong_FromLongLong)
DISTC_OUT_SCALAR(uint64_t, out, PyLong_FromUnsignedLongLong)
DISTC_OUT_SCALAR(uint64_t, bytes, PyLong_FromUnsignedLongLong)
DISTC_OUT_SCALAR(int64_t, iterations, PyLong_FromLongLong)
DISTC_OUT_SCALAR(uint64_t, numel_before, PyLong_FromUnsignedLongLong)
DISTC_OUT_SCALAR(uint64_t, numel_after, PyLong_FromUnsignedLongLong)
DISTC_OUT_SCALAR(size_t, out, PyLong_FromSize_t)
DISTC_OUT_SCALAR(size_t, n_buckets, PyLong_FromSize_t)

%typemap(in, numinputs=0) const char **out (const char *tmp = NULL), const char **message (const char *tmp = NULL) {
    $1 = ($1_ltype)&tmp;
}
%typemap(argout) const char **out, const char **message {
    $result = SWIG_Python_AppendOutput($result, PyUnicode_DecodeUTF8(tmp$argnum ? tmp$argnum : "",
                                                                     (Py_ssize_t)strlen(tmp$argnum ? tmp$argnum : ""),
                                                                     "replace"));
}

/* distc_reducer_grad_view: the address, for the package to view as an array. */
%typemap(in, numinputs=0) void **view (void *tmp = NULL) { $1 = &tmp; }
%typemap(argout) void **view { $result = SWIG_Python_AppendOutput($result, PyLong_FromVoidPtr(tmp$argnum)); }

/* distc_mem_alloc / distc_mem_free: the memory's address as an int, for
 * the package (_memory.py) to view as an array and free when it goes. */
%typemap(in, numinputs=0) void **out (void *tmp = NULL) { $1 = &tmp; }
%typemap(argout) void **out { $result = SWIG_Python_AppendOutput($result, PyLong_FromVoidPtr(tmp$argnum)); }
%typemap(in) void *ptr {
    $1 = $input == Py_None ? NULL : PyLong_AsVoidPtr($input);
    if (PyErr_Occurred()) SWIG_fail;
}

/* distc_work_wait_stream: a stream handle as an int (torch: stream.cuda_stream); None is the default stream. */
%typemap(in) void *stream {
    $1 = $input == Py_None ? NULL : PyLong_AsVoidPtr($input);
    if (!$1 && PyErr_Occurred()) SWIG_fail;
}

/* distc_reducer_sparse_grad: addresses of the reducer's rows, for the package to copy. */
%typemap(in, numinputs=0) const int64_t **indices_out (const int64_t *tmp = NULL), const void **values_out (const void *tmp = NULL) {
    $1 = ($1_ltype)&tmp;
}
%typemap(argout) const int64_t **indices_out, const void **values_out {
    $result = SWIG_Python_AppendOutput($result, PyLong_FromVoidPtr((void *)tmp$argnum));
}
DISTC_OUT_SCALAR(size_t, nnz, PyLong_FromSize_t)

/* ------------------------------------------------------------------ bytes */

%typemap(in) (const void *value, size_t len) (pydistc_bytes b = {0}) {
    if (pydistc_bytes_get($input, &b, "$1_name") != 0) SWIG_fail;
    $1 = ($1_ltype)b.data;
    $2 = b.len;
}
%typemap(freearg) (const void *value, size_t len) { pydistc_bytes_put(&b$argnum); }
%apply (const void *value, size_t len) {
    (const void *data, size_t len), (const void *expected, size_t expected_len),
    (const void *desired, size_t desired_len)
};

/* C strings (keys, URLs, paths): a NUL inside would silently cut them short. */
%typemap(in) const char * (pydistc_bytes b = {0}) {
    if (pydistc_cstr_get($input, &b, "$1_name") != 0) SWIG_fail;
    $1 = ($1_ltype)b.data;
}
%typemap(freearg) const char * { pydistc_bytes_put(&b$argnum); }

/* One value out. */
%typemap(in, numinputs=0) distc_buf *out (distc_buf tmp = {NULL, 0}) { $1 = &tmp; }
%typemap(argout) distc_buf *out {
    PyObject *o_ = pydistc_buf_to_bytes(&tmp$argnum);
    if (!o_) SWIG_fail;
    $result = SWIG_Python_AppendOutput($result, o_);
}
%typemap(freearg) distc_buf *out { distc_buf_dispose(&tmp$argnum); }

/* One value per rank (distc_all_gather_bytes, distc_gather_bytes): the group
 * is the argument after it; non-roots of a gather get an empty list. */
%typemap(in, numinputs=0) distc_buf *outs (size_t n = 0) { $1 = NULL; }
%typemap(check) distc_buf *outs {
    int32_t size_ = 0;
    if (distc_pg_size(&size_, arg2) == 0 && size_ > 0) {
        n$argnum = (size_t)size_;
        $1 = PyMem_Calloc(n$argnum, sizeof(distc_buf));
        if (!$1) { PyErr_NoMemory(); SWIG_fail; }
    }
}
%typemap(argout) distc_buf *outs {
    size_t k_ = 0;
    while (k_ < n$argnum && $1[k_].data) k_++;
    PyObject *o_ = pydistc_bufs_to_list($1, k_);
    if (!o_) SWIG_fail;
    $result = SWIG_Python_AppendOutput($result, o_);
}
%typemap(freearg) distc_buf *outs { pydistc_bufs_put($1, n$argnum); }

/* distc_store_multi_get: one value per key; the key count is its fourth argument. */
%typemap(in, numinputs=0) distc_buf *values { $1 = NULL; }
%typemap(check) distc_buf *values {
    $1 = PyMem_Calloc(arg4 + 1, sizeof(distc_buf));
    if (!$1) { PyErr_NoMemory(); SWIG_fail; }
}
%typemap(argout) distc_buf *values {
    PyObject *o_ = pydistc_bufs_to_list($1, arg4);
    if (!o_) SWIG_fail;
    $result = SWIG_Python_AppendOutput($result, o_);
}
%typemap(freearg) distc_buf *values { pydistc_bufs_put($1, $1 ? arg4 : 0); }

/* Keys. */
%typemap(in) (const char *const *keys, size_t n) (pydistc_bytes_list l = {0}) {
    if (pydistc_bytes_list_get($input, &l, 0, 1, "keys") != 0) SWIG_fail;
    $1 = ($1_ltype)l.ptrs;
    $2 = l.n;
}
%typemap(freearg) (const char *const *keys, size_t n) { pydistc_bytes_list_put(&l$argnum); }

/* distc_store_multi_set: a list of (key, value) pairs. */
%typemap(in) (const char *const *keys, const void *const *values, const size_t *lens, size_t n) (pydistc_bytes_list l = {0}) {
    if (pydistc_pairs_get($input, &l, "items") != 0) SWIG_fail;
    $1 = ($1_ltype)l.keys;
    $2 = ($2_ltype)l.ptrs;
    $3 = l.lens;
    $4 = l.n;
}
%typemap(freearg) (const char *const *keys, const void *const *values, const size_t *lens, size_t n) {
    pydistc_bytes_list_put(&l$argnum);
}

/* distc_scatter_bytes: a list of values on the root, None elsewhere. */
%typemap(in) (const void *const *data, const size_t *lens) (pydistc_bytes_list l = {0}) {
    if (pydistc_bytes_list_get($input, &l, 1, 0, "data") != 0) SWIG_fail;
    $1 = ($1_ltype)l.ptrs;
    $2 = l.lens;
}
%typemap(check) (const void *const *data, const size_t *lens) {
    if ($1) {
        int32_t size_ = 0;
        if (distc_pg_size(&size_, arg2) == 0 && l$argnum.n != (size_t)size_) {
            pydistc_invalid("data has %zu values; the group has %d ranks", l$argnum.n, (int)size_);
            SWIG_fail;
        }
    }
}
%typemap(freearg) (const void *const *data, const size_t *lens) { pydistc_bytes_list_put(&l$argnum); }

/* ------------------------------------------------------------------ integer lists */

%typemap(in) (const int32_t *ranks, size_t n) (pydistc_ints v = {0}), (const int32_t *unused, size_t n_unused) (pydistc_ints v = {0}) {
    if (pydistc_ints_get($input, &v, "$1_name") != 0) SWIG_fail;
    $1 = v.i32;
    $2 = v.n;
}
%typemap(freearg) (const int32_t *ranks, size_t n), (const int32_t *unused, size_t n_unused) { pydistc_ints_put(&v$argnum); }

%typemap(in) (const uint64_t *limits, size_t n_limits) (pydistc_ints v = {0}) {
    if (pydistc_ints_get($input, &v, "limits") != 0) SWIG_fail;
    $1 = v.u64;
    $2 = v.n;
}
%typemap(freearg) (const uint64_t *limits, size_t n_limits) { pydistc_ints_put(&v$argnum); }

/* Optional per-rank lists (None: NULL). Lengths are checked against the group size. */
%typemap(in) const int64_t *output_splits (pydistc_ints v = {0}), const int64_t *input_splits (pydistc_ints v = {0}) {
    if (pydistc_ints_get($input, &v, "$1_name") != 0) SWIG_fail;
    $1 = $input == Py_None ? NULL : ($1_ltype)v.i64;
}
%typemap(check) const int64_t *output_splits, const int64_t *input_splits {
    int32_t size_ = 0;
    if ($1 && distc_pg_size(&size_, arg2) == 0 && v$argnum.n != (size_t)size_) {
        pydistc_invalid("$1_name has %zu entries; the group has %d ranks", v$argnum.n, (int)size_);
        SWIG_fail;
    }
}
%typemap(freearg) const int64_t *output_splits, const int64_t *input_splits { pydistc_ints_put(&v$argnum); }

/* distc_compute_bucket_assignment_by_size: the results, and the optional sparse flags. */
%typemap(in, numinputs=0) int32_t *bucket_of { $1 = NULL; }
%typemap(check) int32_t *bucket_of {
    $1 = PyMem_Calloc(arg4 + 1, sizeof(int32_t));
    if (!$1) { PyErr_NoMemory(); SWIG_fail; }
}
%typemap(argout) int32_t *bucket_of {
    /* A tuple: SWIG would append the next output into a list. */
    PyObject *o_ = PyTuple_New((Py_ssize_t)arg4);
    for (size_t i_ = 0; o_ && i_ < arg4; i_++) PyTuple_SET_ITEM(o_, (Py_ssize_t)i_, PyLong_FromLong($1[i_]));
    if (!o_) SWIG_fail;
    $result = SWIG_Python_AppendOutput($result, o_);
}
%typemap(freearg) int32_t *bucket_of { PyMem_Free($1); }

%typemap(in) const int32_t *expect_sparse (pydistc_ints v = {0}) {
    if (pydistc_ints_get($input, &v, "expect_sparse") != 0) SWIG_fail;
    $1 = $input == Py_None ? NULL : ($1_ltype)v.i32;
}
%typemap(check) const int32_t *expect_sparse {
    if ($1 && v$argnum.n != arg4) {
        pydistc_invalid("expect_sparse has %zu entries for %zu tensors", v$argnum.n, (size_t)arg4);
        SWIG_fail;
    }
}
%typemap(freearg) const int32_t *expect_sparse { pydistc_ints_put(&v$argnum); }

/* ------------------------------------------------------------------ tensors */

%typemap(in) DLTensor * (pydistc_tensor t = {0}) {
    if (pydistc_tensor_get($input, &t, 1, "$1_name") != 0) SWIG_fail;
    $1 = &t.dl;
}
%typemap(in) const DLTensor * (pydistc_tensor t = {0}) {
    if (pydistc_tensor_get($input, &t, 0, "$1_name") != 0) SWIG_fail;
    $1 = &t.dl;
}
%typemap(freearg) DLTensor *, const DLTensor * { pydistc_tensor_put(&t$argnum); }

/* Lists with their length. */
%typemap(in) (DLTensor *const *tensors, size_t n) (pydistc_tensor_list l = {0}),
             (DLTensor *const *grads, size_t n) (pydistc_tensor_list l = {0}) {
    if (pydistc_tensor_list_get($input, &l, 1, 0, "$1_name") != 0) SWIG_fail;
    $1 = l.ptrs;
    $2 = l.n;
}
%typemap(in) (const DLTensor *const *tensors, size_t n) (pydistc_tensor_list l = {0}) {
    if (pydistc_tensor_list_get($input, &l, 0, 0, "tensors") != 0) SWIG_fail;
    $1 = ($1_ltype)l.ptrs;
    $2 = l.n;
}
%typemap(freearg) (DLTensor *const *tensors, size_t n), (DLTensor *const *grads, size_t n),
                  (const DLTensor *const *tensors, size_t n) {
    pydistc_tensor_list_put(&l$argnum);
}

/* One tensor per rank: the group is the second argument of every such call;
 * None (NULL) where the call ignores the list (gather and scatter off the root). */
%typemap(in) DLTensor *const *outputs (pydistc_tensor_list l = {0}) {
    if (pydistc_tensor_list_get($input, &l, 1, 1, "outputs") != 0) SWIG_fail;
    $1 = l.ptrs;
}
%typemap(in) const DLTensor *const *inputs (pydistc_tensor_list l = {0}) {
    if (pydistc_tensor_list_get($input, &l, 0, 1, "inputs") != 0) SWIG_fail;
    $1 = ($1_ltype)l.ptrs;
}
%typemap(check) DLTensor *const *outputs, const DLTensor *const *inputs {
    if (pydistc_check_list_len(&l$argnum, arg2, "$1_name") != 0) SWIG_fail;
}
%typemap(freearg) DLTensor *const *outputs, const DLTensor *const *inputs { pydistc_tensor_list_put(&l$argnum); }

/* distc_batch_isend_irecv: a list of (kind, tensor, peer, tag). */
%typemap(in) (const distc_p2p_op *ops, size_t n) (pydistc_p2p_list l = {0}) {
    if (pydistc_p2p_list_get($input, &l, "ops") != 0) SWIG_fail;
    $1 = l.ops;
    $2 = l.n;
}
%typemap(freearg) (const distc_p2p_op *ops, size_t n) { pydistc_p2p_list_put(&l$argnum); }

/* ------------------------------------------------------------------ options */

/* None: NULL, the defaults. A dict: the defaults with its fields set. */
%define DISTC_OPTIONS(T, FIELDS, VERSION)
%typemap(in) const T * (T o, pydistc_options keep = {0}) {
    memset(&keep, 0, sizeof keep);
    $1 = NULL;
    if ($input != Py_None) {
        T##_init(&o, VERSION);
        if (pydistc_options_get($input, &o, FIELDS, &keep, "$1_name") != 0) SWIG_fail;
        $1 = &o;
    }
}
%typemap(freearg) const T * { pydistc_options_put(&keep$argnum); }
%enddef
DISTC_OPTIONS(distc_tcp_store_options, pydistc_tcp_store_fields, DISTC_TCP_STORE_OPTIONS_VERSION)
DISTC_OPTIONS(distc_rendezvous_options, pydistc_rendezvous_fields, DISTC_RENDEZVOUS_OPTIONS_VERSION)
DISTC_OPTIONS(distc_pg_options, pydistc_pg_fields, DISTC_PG_OPTIONS_VERSION)
DISTC_OPTIONS(distc_op_options, pydistc_op_fields, DISTC_OP_OPTIONS_VERSION)
DISTC_OPTIONS(distc_reducer_options, pydistc_reducer_fields, DISTC_REDUCER_OPTIONS_VERSION)
DISTC_OPTIONS(distc_powersgd_options, pydistc_powersgd_fields, DISTC_POWERSGD_OPTIONS_VERSION)

/* ------------------------------------------------------------------ the header */

/* Follow distc.h's own #includes (the area headers); system and DLPack
 * headers are left to the C compiler. */
%include "distc.h"

/* The built-in communication hooks (C callbacks are for C callers). */
%inline %{
int distc_reducer_register_builtin_hook(distc_reducer *r, int32_t builtin) {
    return distc_reducer_register_comm_hook(r, NULL, NULL, builtin);
}
%}

%include "pydistc_api.h"
