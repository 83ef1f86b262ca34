"""A minimal ctypes view of libdistc's store API, for tests that run against
PyTorch before the SWIG bindings exist. Not a user-facing binding."""
import ctypes
import os

LIB = os.environ.get("DISTC_LIB", os.path.join(os.path.dirname(__file__), "../../build/libdistc.so"))
L = ctypes.CDLL(LIB)
L.distc_error_last.restype = ctypes.c_char_p

PROTOCOL_AUTO, PROTOCOL_DISTC, PROTOCOL_TORCH1, PROTOCOL_TORCH2 = 0, 1, 2, 3
ETIMEOUT, EREMOTE = -2, -5


class TcpOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("host", ctypes.c_char_p), ("port", ctypes.c_int32),
                ("is_server", ctypes.c_int32), ("world_size", ctypes.c_int32),
                ("wait_for_workers", ctypes.c_int32), ("timeout_ms", ctypes.c_int64),
                ("connect_retries", ctypes.c_int32), ("protocol", ctypes.c_int32),
                ("max_request_bytes", ctypes.c_int64), ("max_unread_reply_bytes", ctypes.c_int64),
                ("token", ctypes.c_char_p), ("allow_torch_clients", ctypes.c_int32),
                ("server_log", ctypes.c_void_p), ("server_log_payload", ctypes.c_void_p)]


class Buf(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_uint8)), ("size", ctypes.c_size_t)]


class DistcError(RuntimeError):
    def __init__(self, code, msg):
        super().__init__(f"{code}: {msg}")
        self.code = code


def _check(rc):
    if rc != 0:
        raise DistcError(rc, L.distc_error_last().decode())


def _take(buf):
    v = ctypes.string_at(buf.data, buf.size)
    L.distc_buf_dispose(ctypes.byref(buf))
    return v


def _keys(keys):
    arr = (ctypes.c_char_p * len(keys))(*[k.encode() for k in keys])
    return arr, len(keys)


class Store:
    def __init__(self, host="127.0.0.1", port=0, is_server=False, world_size=-1, wait_for_workers=True,
                 timeout_ms=10000, protocol=PROTOCOL_AUTO, connect_retries=-1, token=None,
                 allow_torch_clients=-1):
        o = TcpOptions()
        _check(L.distc_tcp_store_options_init(ctypes.byref(o), 3))
        o.host, o.port, o.is_server = host.encode(), port, int(is_server)
        o.world_size, o.wait_for_workers, o.timeout_ms = world_size, int(wait_for_workers), timeout_ms
        o.protocol, o.connect_retries = protocol, connect_retries
        o.token = None if token is None else token.encode()
        o.allow_torch_clients = allow_torch_clients
        self.h = ctypes.c_void_p()
        _check(L.distc_store_new_tcp(ctypes.byref(self.h), ctypes.byref(o)))

    def close(self):
        if self.h:
            L.distc_store_free(self.h)
            self.h = None

    @property
    def port(self):
        p = ctypes.c_int32()
        _check(L.distc_store_tcp_port(ctypes.byref(p), self.h))
        return p.value

    def set(self, key, value):
        value = value.encode() if isinstance(value, str) else bytes(value)
        _check(L.distc_store_set(self.h, key.encode(), value, ctypes.c_size_t(len(value))))

    def get(self, key):
        b = Buf()
        _check(L.distc_store_get(ctypes.byref(b), self.h, key.encode()))
        return _take(b)

    def add(self, key, delta):
        v = ctypes.c_int64()
        _check(L.distc_store_add(ctypes.byref(v), self.h, key.encode(), ctypes.c_int64(delta)))
        return v.value

    def compare_set(self, key, expected, desired):
        b = Buf()
        _check(L.distc_store_compare_set(ctypes.byref(b), self.h, key.encode(), expected, ctypes.c_size_t(len(expected)),
                                         desired, ctypes.c_size_t(len(desired))))
        return _take(b)

    def check(self, keys):
        out = ctypes.c_int32()
        arr, n = _keys(keys)
        _check(L.distc_store_check(ctypes.byref(out), self.h, arr, ctypes.c_size_t(n)))
        return bool(out.value)

    def wait(self, keys, timeout_ms=-1):
        arr, n = _keys(keys)
        _check(L.distc_store_wait(self.h, arr, ctypes.c_size_t(n), ctypes.c_int64(timeout_ms)))

    def delete_key(self, key):
        out = ctypes.c_int32()
        _check(L.distc_store_delete_key(ctypes.byref(out), self.h, key.encode()))
        return bool(out.value)

    def num_keys(self):
        out = ctypes.c_int64()
        _check(L.distc_store_num_keys(ctypes.byref(out), self.h))
        return out.value

    def append(self, key, value):
        _check(L.distc_store_append(self.h, key.encode(), value, ctypes.c_size_t(len(value))))

    def multi_get(self, keys):
        bufs = (Buf * len(keys))()
        arr, n = _keys(keys)
        _check(L.distc_store_multi_get(bufs, self.h, arr, ctypes.c_size_t(n)))
        return [_take(b) for b in bufs]

    def multi_set(self, keys, values):
        arr, n = _keys(keys)
        vals = (ctypes.c_char_p * n)(*values)
        lens = (ctypes.c_size_t * n)(*[len(v) for v in values])
        _check(L.distc_store_multi_set(self.h, arr, ctypes.cast(vals, ctypes.POINTER(ctypes.c_void_p)), lens,
                                       ctypes.c_size_t(n)))

    def set_timeout(self, ms):
        _check(L.distc_store_set_timeout(self.h, ctypes.c_int64(ms)))


# ---------------------------------------------------------------- process groups
SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM = range(9)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class PgOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("backend", ctypes.c_char_p), ("timeout_ms", ctypes.c_int64),
                ("group_name", ctypes.c_char_p), ("debug", ctypes.c_int32)]


class OpOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("timeout_ms", ctypes.c_int64), ("premul_factor", ctypes.c_double)]


def _dl_dtype(arr):
    import numpy as np
    kind = arr.dtype.kind
    code = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}[kind]
    if arr.dtype == np.dtype("V2"):  # bfloat16 carried as raw 2-byte values
        code = 4
    return DLDataType(code, arr.dtype.itemsize * 8, 1)


def tensor(arr, dtype_code=None):
    """A DLTensor over a C-contiguous numpy array (kept alive by the caller)."""
    assert arr.flags["C_CONTIGUOUS"]
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    dt = _dl_dtype(arr)
    if dtype_code is not None:
        dt = DLDataType(dtype_code, arr.dtype.itemsize * 8, 1)
    t = DLTensor(arr.ctypes.data, DLDevice(1, 0), arr.ndim, dt, shape, None, 0)
    t._keep = (arr, shape)
    return t


def _tensor_array(arrs):
    ts = [tensor(a) for a in arrs]
    arr = (ctypes.POINTER(DLTensor) * len(ts))(*[ctypes.pointer(t) for t in ts])
    arr._keep = ts
    return arr


class ProcessGroup:
    def __init__(self, store, rank, size, name="default_pg", timeout_ms=30000):
        o = PgOptions(1, None, timeout_ms, name.encode(), -1)
        self.h = ctypes.c_void_p()
        _check(L.distc_pg_new(ctypes.byref(self.h), store.h, rank, size, ctypes.byref(o)))

    def close(self):
        if self.h:
            L.distc_pg_free(self.h)
            self.h = None

    def _o(self, factor=1.0):
        return ctypes.byref(OpOptions(1, -1, factor))

    def allreduce(self, arr, op=SUM, factor=1.0):
        t = tensor(arr)
        _check(L.distc_allreduce(None, self.h, ctypes.byref(t), op, self._o(factor)))

    def broadcast(self, arr, root):
        t = tensor(arr)
        _check(L.distc_broadcast(None, self.h, ctypes.byref(t), root, self._o()))

    def reduce(self, arr, root, op=SUM):
        t = tensor(arr)
        _check(L.distc_reduce(None, self.h, ctypes.byref(t), root, op, self._o()))

    def allgather(self, outs, arr):
        t = tensor(arr)
        _check(L.distc_allgather(None, self.h, _tensor_array(outs), ctypes.byref(t), self._o()))

    def gather(self, outs, arr, root):
        t = tensor(arr)
        _check(L.distc_gather(None, self.h, _tensor_array(outs) if outs else None, ctypes.byref(t), root, self._o()))

    def scatter(self, out, ins, root):
        t = tensor(out)
        _check(L.distc_scatter(None, self.h, ctypes.byref(t), _tensor_array(ins) if ins else None, root, self._o()))

    def alltoall_single(self, out, arr, out_splits=None, in_splits=None):
        to, ti = tensor(out), tensor(arr)
        os_ = (ctypes.c_int64 * len(out_splits))(*out_splits) if out_splits else None
        is_ = (ctypes.c_int64 * len(in_splits))(*in_splits) if in_splits else None
        _check(L.distc_alltoall_single(None, self.h, ctypes.byref(to), ctypes.byref(ti), os_, is_, self._o()))

    def reduce_scatter(self, out, ins, op=SUM):
        t = tensor(out)
        _check(L.distc_reduce_scatter(None, self.h, ctypes.byref(t), _tensor_array(ins), op, self._o()))

    def barrier(self):
        _check(L.distc_barrier(None, self.h, self._o()))
