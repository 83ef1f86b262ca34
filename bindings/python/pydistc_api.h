/* The binding's own functions, wrapped by SWIG next to the C ABI (distc.i
 * %includes this file). They exist because they need the Python C API. */
#ifndef PYDISTC_API_H
#define PYDISTC_API_H

/* Registers {code: exception class}; the status typemap raises from it. */
void pydistc_set_error_classes(PyObject *mapping);

/*
 * A distc store whose operations call methods of the Python object `obj`:
 * set(key: str, value: bytes), get(key: str, timeout: float seconds) -> bytes,
 * add(key: str, delta: int) -> int, and optionally compare_set(key, expected,
 * desired) -> bytes, check(keys) -> bool, wait(keys, timeout), delete_key(key)
 * -> bool, num_keys() -> int, append(key, value). Methods may be called from
 * distc's threads; exceptions become status codes (TimeoutError: ETIMEOUT,
 * ValueError: EINVAL, NotImplementedError: ENOTSUP, a DistcError: its code,
 * anything else: EREMOTE) with the exception's text as the message.
 */
int pydistc_store_new_object(distc_store **out, PyObject *obj);

/* Holds a reference to `objs` until `work` completes (the buffers of an
 * asynchronous operation), even if every Python reference to the work goes.
 * When `objs` is a tuple whose first item is callable, that item is called
 * first with (status, message), from the thread that completed the work. */
int pydistc_work_keep(distc_work *work, PyObject *objs);

/* distc_work_then with a Python continuation: fn(status, message) runs on a
 * continuation thread and returns None or an object whose `_h` is a work
 * handle to chain (a distc.Future). */
int pydistc_work_then(distc_work **out, distc_work *work, PyObject *fn);

/* A Python bucket hook (None: the default allreduce): fn(index, is_last,
 * address, numel, grads, offsets) returns the bucket's future, an object
 * whose `_h` is a work handle. */
int pydistc_reducer_register_hook(distc_reducer *r, PyObject *fn);

/* Interpreter exit, from an atexit hook (the GIL released): waits for the
 * completion callbacks already running, and makes later ones leave Python
 * alone (pydistc_callbacks.c says why). */
void pydistc_at_exit(void);

#endif /* PYDISTC_API_H */
