"""What a careless or hostile Python caller gets: a clear exception, never a
crash, a hang or bytes written where they should not be. Each case was once
one of those."""
import array
import ctypes
import datetime
import math

import numpy as np
import pytest

import distc
from distc import _coalesced
from conftest import run_threads


def one_rank():
    return distc.ProcessGroup(distc.HashStore(), 0, 1, timeout=5)


def test_a_buffer_in_flight_cannot_be_resized():
    n = 1 << 16

    def fn(pg):
        if pg.rank() == 0:
            buf = bytearray(n)
            w = pg.recv(buf, src=1, async_op=True)
            with pytest.raises(BufferError):
                buf.clear()  # once allowed: the message then landed in freed memory
            pg.barrier()
            w.wait()
            assert buf == bytes([7]) * n
        else:
            pg.barrier()
            pg.send(np.full(n, 7, np.uint8), 0)
        return True

    assert run_threads(2, fn) == [True, True]


def test_a_reducers_gradient_cannot_be_resized():
    with one_rank() as pg:
        g = array.array("d", [1.0, 2.0])
        r = distc.Reducer(pg, [g])
        with pytest.raises(BufferError):
            g.extend([3.0])  # once allowed: finalize then wrote into freed memory
        r.prepare_for_backward()
        r.mark_ready(np.int64(0))  # NumPy integers index as ints do
        r.finalize()
        assert list(g) == [1.0, 2.0]
        r.close()


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _Producer:
    """A __dlpack__ producer that describes 16 float32 bytes with the ndim and shape it is given."""

    def __init__(self, ndim, shape):
        self.data = (ctypes.c_float * 4)()
        self.shape = (ctypes.c_int64 * len(shape))(*shape) if shape else None
        m = _DLManaged()
        m.dl_tensor.data = ctypes.addressof(self.data)
        m.dl_tensor.device = _DLDevice(1, 0)
        m.dl_tensor.ndim = ndim
        m.dl_tensor.dtype = _DLDataType(2, 32, 1)
        m.dl_tensor.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)) if self.shape else None
        self.m = m

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.m), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def test_a_dlpack_producer_that_lies_about_its_shape():
    with one_rank() as pg:
        pg.all_reduce(_Producer(1, [4]))  # honest: fine
        with pytest.raises(distc.DistcInvalidArgument, match="ndim -1"):
            pg.all_reduce(_Producer(-1, [4]))
        with pytest.raises(distc.DistcInvalidArgument, match="no shape"):
            pg.all_reduce(_Producer(1, None))


def test_a_tuple_is_not_a_tensor():
    with one_rank() as pg:
        with pytest.raises(distc.DistcInvalidArgument, match="a tuple is not a tensor"):
            pg.all_reduce((np.zeros(2), 1, 8))


def test_a_futures_foreign_code_still_completes_its_work():
    f = distc.Future()
    after = f.then(lambda x: "ran")
    f.set_exception(distc.DistcError("x", code=-2**40))  # once OverflowError, and the C work never completed
    assert after.result(timeout=10) == "ran"


def test_a_hook_that_calls_its_reducer_back():
    with one_rank() as pg:
        grads = [np.ones(4, np.float32), np.ones(4, np.float32)]
        r = distc.Reducer(pg, grads, bucket_cap_mb=1e-6, first_bucket_mb=1e-6)

        def hook(state, bucket):
            r.mark_ready(1)  # once waited for the reducer's lock, which the hook holds, for ever
            return pg.all_reduce(bucket.buffer(), async_op=True).get_future()

        r.register_comm_hook(None, hook)
        r.prepare_for_backward()
        with pytest.raises(distc.DistcStateError, match="communication hook"):
            r.mark_ready(0)
            r.mark_ready(1)
            r.finalize()
        r.close()


def test_one_shot_iterables_as_tensor_lists():
    with one_rank() as pg:
        ts = [np.ones(2), np.ones(3)]
        pg.all_reduce_coalesced(t for t in ts)
        out = [np.zeros(2)]
        pg.all_gather(iter(out), np.full(2, 5.0))
        assert out[0].tolist() == [5.0, 5.0]


def test_coalesced_outputs_of_another_dtype():
    with one_rank() as pg:
        with pytest.raises(ValueError, match="outputs are int32 but the inputs float64"):
            _coalesced.all_gather_into_tensor_coalesced(pg, [np.zeros(2, np.int32)], [np.array([1.75, -2.5])],
                                                        False)
        with pytest.raises(ValueError, match="outputs are uint8"):
            _coalesced.reduce_scatter_tensor_coalesced(pg, [np.zeros(2, np.uint8)], [np.ones(2)], distc.ReduceOp.SUM,
                                                       False)
        out = [np.zeros(2)]
        w = _coalesced.all_gather_into_tensor_coalesced(pg, out, [np.array([1.75, -2.5])], True)
        assert w.get_future().wait() is out
        assert out[0].tolist() == [1.75, -2.5]


def test_numbers_out_of_range():
    with one_rank() as pg:
        g = [np.ones(2)]
        with pytest.raises(ValueError, match="bucket_cap_mb must be >= 0"):
            distc.Reducer(pg, g, bucket_cap_mb=-1)
        with pytest.raises(OverflowError, match="out of range"):
            distc.Reducer(pg, g, bucket_cap_mb=2**60)
        with pytest.raises(ValueError, match="timeout must be positive"):
            pg.barrier(timeout=math.nan)
        pg.barrier(timeout=math.inf)  # for ever, as far as any clock goes
        pg.barrier(timeout=datetime.timedelta.max)
        store = distc.HashStore()
        with pytest.raises(TypeError):
            store.add("k", 1.5)  # once added 1
        with pytest.raises(TypeError, match="not None"):
            store.set("k", None)  # once stored b""


class _InterruptedStore:
    """A Python store whose counters are interrupted, as by Ctrl-C."""

    def set(self, key, value):
        pass

    def get(self, key, timeout):
        raise TimeoutError(key)

    def add(self, key, amount):
        raise KeyboardInterrupt


def test_ctrl_c_in_a_python_store_stays_a_keyboard_interrupt():
    store = distc.CustomStore(_InterruptedStore())
    with pytest.raises(KeyboardInterrupt):
        store.add("k", 1)  # once a DistcRemoteError, which `except KeyboardInterrupt` misses
    with pytest.raises(distc.DistcTimeoutError):
        store.get("k")  # the interrupt was raised once, and is gone


def test_receive_from_any_rank_alone():
    with one_rank() as pg:
        with pytest.raises(distc.DistcInvalidArgument, match="no other rank"):
            pg.recv(np.zeros(0), None)  # once a Gloo assertion's text
