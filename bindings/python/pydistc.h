/* Conversions between Python objects and the C ABI's arguments, used by the
 * typemaps of distc.i. Every *_get returns 0, or -1 with a Python exception
 * set; every *_put releases what the matching *_get took (safe on a
 * zero-initialised or half-filled struct). */
#ifndef PYDISTC_H
#define PYDISTC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "distc.h"

/* ---- errors */

/* Raises the exception class registered for `code` (pydistc_set_error_classes)
 * with distc_error_last() as its message. Returns NULL. */
PyObject *pydistc_raise(int code);
/* A KeyboardInterrupt or SystemExit (a BaseException that is no Exception)
 * raised in a Python callback becomes a distc error on its way through the
 * library; the callback's thread keeps it (keep), and its next
 * pydistc_raise raises it as itself instead (take: 1, with it set). */
void pydistc_keep_interrupt(PyObject *type, PyObject *value, PyObject *tb);
int pydistc_take_interrupt(void);

/* Raises DistcInvalidArgument with a PyUnicode_FromFormat message. Returns NULL. */
PyObject *pydistc_invalid(const char *fmt, ...);

/* ---- tensors: anything with the buffer protocol (NumPy), anything with
 * __dlpack__ (PyTorch, CuPy), or a tuple (tensor, dlpack_code, bits) that
 * reinterprets a tensor's memory (torch 1.13 cannot export bool through
 * DLPack; the package passes a uint8 view of it tagged as bool). */

#define PYDISTC_MAX_INLINE_DIMS 8

typedef struct pydistc_tensor {
    DLTensor dl;
    int64_t shape_inline[PYDISTC_MAX_INLINE_DIMS];
    int64_t *shape_heap;
    Py_buffer view;
    int has_view;
    PyObject *capsule; /* the __dlpack__ capsule; its destructor releases the producer's tensor */
} pydistc_tensor;

int pydistc_tensor_get(PyObject *obj, pydistc_tensor *t, int writable, const char *what);
void pydistc_tensor_put(pydistc_tensor *t);

/* A Python sequence of tensors (None gives ptrs == NULL, n == 0). */
typedef struct pydistc_tensor_list {
    pydistc_tensor *items;
    DLTensor **ptrs;
    size_t n;
    int is_none;
} pydistc_tensor_list;

int pydistc_tensor_list_get(PyObject *seq, pydistc_tensor_list *l, int writable, int allow_none, const char *what);
void pydistc_tensor_list_put(pydistc_tensor_list *l);

/* A list's length must match the group's size (the C API reads `size` entries). */
int pydistc_check_list_len(const pydistc_tensor_list *l, distc_pg *pg, const char *what);

/* ---- bytes: str (UTF-8) or any buffer; None gives (NULL, 0) */

typedef struct pydistc_bytes {
    const void *data;
    size_t len;
    Py_buffer view;
    int has_view;
} pydistc_bytes;

int pydistc_bytes_get(PyObject *obj, pydistc_bytes *b, const char *what);
/* A C string argument (a key, a URL, a path): str or bytes without NUL. */
int pydistc_cstr_get(PyObject *obj, pydistc_bytes *b, const char *what);
void pydistc_bytes_put(pydistc_bytes *b);

typedef struct pydistc_bytes_list {
    pydistc_bytes *items;
    const void **ptrs;
    size_t *lens;
    const char **keys; /* for lists of (key, value) pairs */
    pydistc_bytes *key_items;
    size_t n;
} pydistc_bytes_list;

/* A sequence of keys (str or bytes, no NUL: they become C strings) or of
 * values (any buffer); None gives n == 0, ptrs NULL. */
int pydistc_bytes_list_get(PyObject *seq, pydistc_bytes_list *l, int allow_none, int keys, const char *what);
/* A sequence of (key, value) pairs, for multi_set. */
int pydistc_pairs_get(PyObject *seq, pydistc_bytes_list *l, const char *what);
void pydistc_bytes_list_put(pydistc_bytes_list *l);

/* An optional sequence of integers. */
typedef struct pydistc_ints {
    int64_t *i64;
    int32_t *i32;
    uint64_t *u64;
    size_t n;
} pydistc_ints;

int pydistc_ints_get(PyObject *seq, pydistc_ints *v, const char *what);
void pydistc_ints_put(pydistc_ints *v);

/* Batched point-to-point: a sequence of (kind, tensor, peer, tag). */
typedef struct pydistc_p2p_list {
    distc_p2p_op *ops;
    pydistc_tensor *tensors;
    size_t n;
} pydistc_p2p_list;

int pydistc_p2p_list_get(PyObject *seq, pydistc_p2p_list *l, const char *what);
void pydistc_p2p_list_put(pydistc_p2p_list *l);

/* Options structs from a dict of their fields ({"timeout_ms": 5000}); None
 * gives NULL (the defaults). Strings and arrays stay owned by the dict, which
 * outlives the call. */
typedef struct pydistc_field {
    const char *name;
    size_t offset;
    char kind; /* 'i' int32, 'l' int64, 'u' uint64, 'd' double, 's' const char *, 'a' const int32_t *, 'p' void * */
} pydistc_field;

typedef struct pydistc_options {
    pydistc_ints arrays[2]; /* the array fields an options struct may have (the reducer's two) */
    int n_arrays;
} pydistc_options;

int pydistc_options_get(PyObject *dict, void *opts, const pydistc_field *fields, pydistc_options *keep,
                        const char *what);
void pydistc_options_put(pydistc_options *keep);

extern const pydistc_field pydistc_tcp_store_fields[], pydistc_rendezvous_fields[], pydistc_pg_fields[],
    pydistc_op_fields[], pydistc_reducer_fields[], pydistc_powersgd_fields[];

/* Byte results: one distc_buf to bytes (None when it holds nothing). */
PyObject *pydistc_buf_to_bytes(distc_buf *b);
PyObject *pydistc_bufs_to_list(distc_buf *b, size_t n);
void pydistc_bufs_put(distc_buf *b, size_t n);

#include "pydistc_api.h"

#endif /* PYDISTC_H */
