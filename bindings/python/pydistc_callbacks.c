/* Calls from distc's threads into Python: releasing an asynchronous
 * operation's buffers when it completes, and a store implemented by a Python
 * object (pydistc_api.h). They take the GIL themselves. */
#include "pydistc.h"

#include <pthread.h>
#include <string.h>

/* ------------------------------------------------------------------ callbacks from distc's threads */

/* At interpreter exit the GIL can no longer be taken: a thread that tries
 * once the interpreter is finalizing is ended by pthread_exit, which unwinds
 * through distc's C++ frames and aborts the process ("terminate called
 * without an active exception"). Checking first is not enough: a thread can
 * check, then wait for the GIL while finalizing starts. So completion
 * callbacks pass a gate that pydistc_at_exit closes from an atexit hook,
 * which runs before finalizing: it waits (GIL released) for those already
 * through, which are short, and later ones leave Python alone, leaking their
 * references on purpose. A store's methods may block for their timeout, so
 * exit does not wait for them: they only find the gate closed and fail. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed; /* written under gate_mu; store calls read it without */
static int gate_inside;

static int python_alive(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsInitialized() && !Py_IsFinalizing();
#else
    return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/* Takes the GIL unless the interpreter is exiting; 0 then, and nothing taken. */
static int enter_python(PyGILState_STATE *gil) {
    pthread_mutex_lock(&gate_mu);
    int open = !gate_closed && python_alive();
    if (open) ++gate_inside;
    pthread_mutex_unlock(&gate_mu);
    if (open) *gil = PyGILState_Ensure();
    return open;
}

static void leave_python(PyGILState_STATE gil) {
    PyGILState_Release(gil);
    pthread_mutex_lock(&gate_mu);
    if (--gate_inside == 0) pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

void pydistc_at_exit(void) {
    pthread_mutex_lock(&gate_mu);
    __atomic_store_n(&gate_closed, 1, __ATOMIC_RELAXED);
    while (gate_inside > 0) pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void release_ref(void *obj) {
    PyGILState_STATE s;
    if (!enter_python(&s)) return;
    Py_DECREF((PyObject *)obj);
    leave_python(s);
}

/* Completion: `payload` is (on_done, buffers...). on_done(status, message) runs
 * first (it resolves futures), then the buffers are released. */
static void keep_done(distc_work *work, void *payload) {
    PyGILState_STATE s;
    if (!enter_python(&s)) return;
    PyObject *objs = (PyObject *)payload;
    if (PyTuple_Check(objs) && PyTuple_GET_SIZE(objs) > 0 && PyCallable_Check(PyTuple_GET_ITEM(objs, 0))) {
        const char *msg = "";
        int status = distc_work_error(work, &msg);
        PyObject *r = PyObject_CallFunction(PyTuple_GET_ITEM(objs, 0), "is", status, msg ? msg : "");
        if (!r) PyErr_WriteUnraisable(PyTuple_GET_ITEM(objs, 0));
        Py_XDECREF(r);
    }
    Py_DECREF(objs);
    leave_python(s);
}

int pydistc_work_keep(distc_work *work, PyObject *objs) {
    Py_INCREF(objs);
    int rc = distc_work_on_complete(work, keep_done, objs);
    if (rc != 0) {
        Py_DECREF(objs);
        pydistc_raise(rc);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ a store in Python */

static __thread PyObject *interrupt_type, *interrupt_value, *interrupt_tb;

void pydistc_keep_interrupt(PyObject *type, PyObject *value, PyObject *tb) {
    Py_XINCREF(type);
    Py_XINCREF(value);
    Py_XINCREF(tb);
    PyObject *t = interrupt_type, *v = interrupt_value, *b = interrupt_tb;
    interrupt_type = type, interrupt_value = value, interrupt_tb = tb;
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(b);
}

int pydistc_take_interrupt(void) {
    if (!interrupt_type) return 0;
    PyErr_Restore(interrupt_type, interrupt_value, interrupt_tb); /* steals them */
    interrupt_type = interrupt_value = interrupt_tb = NULL;
    return 1;
}

/* The status code for the Python exception now set; records "<who> raised <type>: <text>" as distc's message. */
static int python_failure(const char *who) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (type && !PyErr_GivenExceptionMatches(type, PyExc_Exception)) pydistc_keep_interrupt(type, value, tb);
    int code = DISTC_EREMOTE;
    PyObject *c = value ? PyObject_GetAttrString(value, "code") : NULL;
    int overflow = 0;
    long lc = c && PyLong_Check(c) ? PyLong_AsLongAndOverflow(c, &overflow) : 0;
    if (c && PyLong_Check(c))
        code = !overflow && lc >= DISTC_EPROTO && lc < 0 ? (int)lc : DISTC_EREMOTE; /* a distc_status, or none */
    else if (type && PyErr_GivenExceptionMatches(type, PyExc_TimeoutError))
        code = DISTC_ETIMEOUT;
    else if (type && PyErr_GivenExceptionMatches(type, PyExc_NotImplementedError))
        code = DISTC_ENOTSUP;
    else if (type && PyErr_GivenExceptionMatches(type, PyExc_ValueError))
        code = DISTC_EINVAL;
    if (code >= 0) code = DISTC_EREMOTE;
    PyErr_Clear();
    Py_XDECREF(c);
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s raised %s: %s", who, type ? ((PyTypeObject *)type)->tp_name : "an exception",
             text ? text : "");
    PyErr_Clear();
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return distc_error_set(code, msg);
}

static int store_failure(const char *op) {
    char who[96];
    snprintf(who, sizeof(who), "the Python store's %s", op);
    return python_failure(who);
}

static int exiting(const char *op) {
    char msg[128];
    snprintf(msg, sizeof(msg), "the Python store's %s cannot run: the interpreter is exiting", op);
    return distc_error_set(DISTC_ESTATE, msg);
}

/* Takes the GIL for a store operation, or returns its failure at exit. */
#define STORE_ENTER(op)                                                                         \
    if (__atomic_load_n(&gate_closed, __ATOMIC_RELAXED) || !python_alive()) return exiting(op); \
    PyGILState_STATE gil_ = PyGILState_Ensure()

/* Calls obj.<name>(args...) with the GIL; NULL with the failure recorded. */
#define STORE_CALL(result, op, fmt, ...)                                               \
    STORE_ENTER(op);                                                                   \
    PyObject *result = PyObject_CallMethod((PyObject *)payload, op, fmt, __VA_ARGS__); \
    int rc_ = 0;                                                                       \
    if (!result) rc_ = store_failure(op)

#define STORE_RETURN()        \
    PyGILState_Release(gil_); \
    return rc_

static int bytes_result(PyObject *r, distc_buf *out, const char *op) {
    if (r == Py_None) return distc_error_set(DISTC_ENOTFOUND, "the Python store's get returned None");
    Py_buffer v;
    if (PyUnicode_Check(r)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(r, &n);
        if (!s) return store_failure(op);
        return distc_buf_set(out, s, (size_t)n);
    }
    if (PyObject_GetBuffer(r, &v, PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        char msg[256];
        snprintf(msg, sizeof(msg), "the Python store's %s returned a %.100s, not bytes", op, Py_TYPE(r)->tp_name);
        return distc_error_set(DISTC_EPROTO, msg);
    }
    int rc = distc_buf_set(out, v.buf, (size_t)v.len);
    PyBuffer_Release(&v);
    return rc;
}

static PyObject *keys_tuple(const char *const *keys, size_t n) {
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *k = PyUnicode_DecodeUTF8(keys[i], (Py_ssize_t)strlen(keys[i]), "surrogateescape");
        if (!k) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, k);
    }
    return t;
}

static int int_result(PyObject *r, int64_t *out, const char *op) {
    long long v = PyLong_AsLongLong(r);
    if (v == -1 && PyErr_Occurred()) return store_failure(op);
    if (out) *out = v;
    return 0;
}

/* Bytes for "y#": an empty value may come as NULL, which "y#" would make None. */
static const char *bytes_at(const void *p) { return p ? (const char *)p : ""; }

static int py_set(void *payload, const char *key, const void *value, size_t len) {
    STORE_CALL(r, "set", "sy#", key, bytes_at(value), (Py_ssize_t)len);
    Py_XDECREF(r);
    STORE_RETURN();
}

static int py_get(void *payload, const char *key, int64_t timeout_ms, distc_buf *out) {
    STORE_CALL(r, "get", "sd", key, (double)timeout_ms / 1000.0);
    if (r) rc_ = bytes_result(r, out, "get");
    Py_XDECREF(r);
    STORE_RETURN();
}

static int py_add(void *payload, const char *key, int64_t delta, int64_t *out) {
    STORE_CALL(r, "add", "sL", key, (long long)delta);
    if (r) rc_ = int_result(r, out, "add");
    Py_XDECREF(r);
    STORE_RETURN();
}

static int py_compare_set(void *payload, const char *key, const void *expected, size_t expected_len,
                          const void *desired, size_t desired_len, distc_buf *out) {
    STORE_CALL(r, "compare_set", "sy#y#", key, bytes_at(expected), (Py_ssize_t)expected_len, bytes_at(desired),
               (Py_ssize_t)desired_len);
    if (r) rc_ = bytes_result(r, out, "compare_set");
    Py_XDECREF(r);
    STORE_RETURN();
}

static int py_check(void *payload, const char *const *keys, size_t n, int32_t *out) {
    STORE_ENTER("check");
    int rc_ = 0;
    PyObject *k = keys_tuple(keys, n);
    PyObject *r = k ? PyObject_CallMethod((PyObject *)payload, "check", "(O)", k) : NULL;
    if (!r)
        rc_ = store_failure("check");
    else {
        int t = PyObject_IsTrue(r);
        if (t < 0)
            rc_ = store_failure("check");
        else
            *out = t;
    }
    Py_XDECREF(r);
    Py_XDECREF(k);
    STORE_RETURN();
}

static int py_wait(void *payload, const char *const *keys, size_t n, int64_t timeout_ms) {
    STORE_ENTER("wait");
    int rc_ = 0;
    PyObject *k = keys_tuple(keys, n);
    PyObject *r = k ? PyObject_CallMethod((PyObject *)payload, "wait", "(Od)", k, (double)timeout_ms / 1000.0) : NULL;
    if (!r) rc_ = store_failure("wait");
    Py_XDECREF(r);
    Py_XDECREF(k);
    STORE_RETURN();
}

static int py_delete_key(void *payload, const char *key, int32_t *out) {
    STORE_CALL(r, "delete_key", "(s)", key);
    if (r) {
        int t = PyObject_IsTrue(r);
        if (t < 0)
            rc_ = store_failure("delete_key");
        else if (out)
            *out = t;
    }
    Py_XDECREF(r);
    STORE_RETURN();
}

static int py_num_keys(void *payload, int64_t *out) {
    STORE_CALL(r, "num_keys", NULL, NULL);
    if (r) rc_ = int_result(r, out, "num_keys");
    Py_XDECREF(r);
    STORE_RETURN();
}

static int py_append(void *payload, const char *key, const void *value, size_t len) {
    STORE_CALL(r, "append", "sy#", key, bytes_at(value), (Py_ssize_t)len);
    Py_XDECREF(r);
    STORE_RETURN();
}

static int has_method(PyObject *obj, const char *name) {
    PyObject *m = PyObject_GetAttrString(obj, name);
    if (!m) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyCallable_Check(m);
    Py_DECREF(m);
    return ok;
}

int pydistc_store_new_object(distc_store **out, PyObject *obj) {
    for (const char *const *m = (const char *const[]){"set", "get", "add", NULL}; *m; m++)
        if (!has_method(obj, *m)) {
            PyErr_Format(PyExc_TypeError,
                         "a %.100s cannot serve as a store: it has no %s() method (set, get and add are required)",
                         Py_TYPE(obj)->tp_name, *m);
            return -1;
        }
    distc_store_vtable vt;
    memset(&vt, 0, sizeof(vt));
    vt.version = DISTC_STORE_VTABLE_VERSION;
    vt.set = py_set;
    vt.get = py_get;
    vt.add = py_add;
    vt.compare_set = has_method(obj, "compare_set") ? py_compare_set : NULL;
    vt.check = has_method(obj, "check") ? py_check : NULL;
    vt.wait = has_method(obj, "wait") ? py_wait : NULL;
    vt.delete_key = has_method(obj, "delete_key") ? py_delete_key : NULL;
    vt.num_keys = has_method(obj, "num_keys") ? py_num_keys : NULL;
    vt.append = has_method(obj, "append") ? py_append : NULL;
    vt.free = release_ref;
    Py_INCREF(obj);
    int rc = distc_store_new_custom(out, &vt, obj);
    if (rc != 0) {
        Py_DECREF(obj);
        pydistc_raise(rc);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ continuations and bucket hooks */

/* A handle of the work of `r` (a distc.Future: its _h, a work handle that `r`
 * keeps alive meanwhile), or none for None. */
static int work_result(PyObject *r, distc_work **next, const char *who) {
    if (r == Py_None) return 0;
    PyObject *h = PyObject_GetAttrString(r, "_h");
    PyObject *n = h ? PyNumber_Long(h) : NULL;
    void *addr = n ? PyLong_AsVoidPtr(n) : NULL;
    Py_XDECREF(n);
    Py_XDECREF(h);
    if (!addr) {
        if (PyErr_Occurred()) return python_failure(who);
        return distc_error_set(DISTC_EINTERNAL, "a Python future without a work handle");
    }
    return distc_work_ref(next, (distc_work *)addr);
}

/* distc_work_then's continuation: fn(status, message) -> None or a future to chain. */
static int py_continue(distc_work **next, distc_work *done, void *payload) {
    PyObject *fn = (PyObject *)payload;
    PyGILState_STATE s;
    if (!enter_python(&s))
        return distc_error_set(DISTC_ESTATE, "a Python continuation cannot run: the interpreter is exiting");
    const char *msg = "";
    int status = distc_work_error(done, &msg);
    PyObject *r = PyObject_CallFunction(fn, "is", status, msg ? msg : "");
    int rc = r ? work_result(r, next, "a continuation (Future.then)") : python_failure("a continuation (Future.then)");
    Py_XDECREF(r);
    Py_DECREF(fn);
    leave_python(s);
    return rc;
}

int pydistc_work_then(distc_work **out, distc_work *work, PyObject *fn) {
    if (!out) {
        pydistc_invalid("pydistc_work_then returns its work: pass True");
        return -1;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "the continuation must be callable");
        return -1;
    }
    Py_INCREF(fn);
    int rc = distc_work_then(out, work, py_continue, fn);
    if (rc != 0) {
        Py_DECREF(fn);
        pydistc_raise(rc);
        return -1;
    }
    return 0;
}

/* A bucket hook: fn(index, is_last, address, numel, grads, offsets) -> the bucket's future. */
static int py_bucket_hook(distc_work **out, distc_pg *pg, const distc_reducer_bucket *b, void *payload) {
    (void)pg;
    PyGILState_STATE s;
    if (!enter_python(&s))
        return distc_error_set(DISTC_ESTATE, "the Python communication hook cannot run: the interpreter is exiting");
    PyObject *grads = PyTuple_New((Py_ssize_t)b->num_grads), *offsets = PyTuple_New((Py_ssize_t)b->num_grads);
    for (size_t k = 0; grads && offsets && k < b->num_grads; ++k) {
        PyTuple_SET_ITEM(grads, (Py_ssize_t)k, PyLong_FromLong(b->grads[k]));
        PyTuple_SET_ITEM(offsets, (Py_ssize_t)k, PyLong_FromSize_t(b->offsets[k]));
    }
    PyObject *r = grads && offsets ? PyObject_CallFunction((PyObject *)payload, "niNLOO", (Py_ssize_t)b->index,
                                                           (int)b->is_last, PyLong_FromVoidPtr(b->buffer->data),
                                                           (long long)b->buffer->shape[0], grads, offsets)
                                   : NULL;
    int rc = r ? work_result(r, out, "the communication hook") : python_failure("the communication hook");
    if (rc == 0 && !*out) rc = distc_error_set(DISTC_EINVAL, "the communication hook returned no future");
    Py_XDECREF(r);
    Py_XDECREF(grads);
    Py_XDECREF(offsets);
    leave_python(s);
    return rc;
}

int pydistc_reducer_register_hook(distc_reducer *r, PyObject *fn) {
    int rc;
    if (fn == Py_None) {
        Py_BEGIN_ALLOW_THREADS rc = distc_reducer_register_bucket_hook(r, NULL, NULL, NULL);
        Py_END_ALLOW_THREADS
    } else {
        Py_INCREF(fn); /* released with the hook (release_ref), also when refused */
        /* Without the GIL: a bucket launched by a continuation holds the reducer's lock while it takes the GIL. */
        Py_BEGIN_ALLOW_THREADS rc = distc_reducer_register_bucket_hook(r, py_bucket_hook, fn, release_ref);
        Py_END_ALLOW_THREADS
    }
    if (rc != 0) {
        pydistc_raise(rc);
        return -1;
    }
    return 0;
}
