"""Reduce ops, timeouts and the adaptation of tensor arguments."""
import datetime
import enum
import math
import sys

from . import _distc


class ReduceOp(enum.IntEnum):
    """torch.distributed.ReduceOp's members, with the C ABI's values."""
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8


class PremulSum:
    """PREMUL_SUM with its factor: every input is multiplied by `factor`, then summed."""
    __slots__ = ("factor",)

    def __init__(self, factor):
        self.factor = float(factor)

    def __repr__(self):
        return f"PremulSum({self.factor})"


def premul_sum(factor):
    """The reduce op PREMUL_SUM with `factor` (torch's _make_nccl_premul_sum)."""
    return PremulSum(factor)


def op_args(op, timeout=None):
    """(C op value, per-op options dict or None) for a reduce op argument."""
    opts = timeout_opts(timeout)
    if isinstance(op, PremulSum):
        opts = dict(opts or {}, premul_factor=op.factor)
        return int(ReduceOp.PREMUL_SUM), opts
    if isinstance(op, ReduceOp):
        return int(op), opts
    # torch.distributed.ReduceOp members (and other enums) by name.
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    if name in ReduceOp.__members__:
        return int(ReduceOp[name]), opts
    if isinstance(op, int) and not isinstance(op, bool):
        return op, opts  # the C side refuses unknown values with a message
    raise ValueError(f"op must be a distc.ReduceOp, not {op!r}")


def timeout_ms(timeout):
    """Milliseconds of a timedelta or a number of seconds; None stays None."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"timeout must be a datetime.timedelta or seconds, not {type(timeout).__name__}")
    if not seconds > 0:  # NaN too
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    if math.isinf(seconds) or seconds * 1000 >= _MAX_MS:
        return _MAX_MS  # for ever, as far as any clock goes (the library clamps it further)
    return max(1, int(seconds * 1000))


_MAX_MS = 2**63 - 1


def timeout_opts(timeout):
    ms = timeout_ms(timeout)
    return None if ms is None else {"timeout_ms": ms}


_DL_BOOL = 6


class _Reinterpreted(tuple):
    """(tensor, DLPack code, bits): the tensor's memory read as another dtype of the
    same width. A type of its own, so that a tuple the caller passes is not taken
    for one."""
    __slots__ = ()


def exports(objs):
    """What an operation in flight keeps of its tensors (nested lists flattened):
    an export (a memoryview) of each object with the buffer protocol, so that a
    bytearray or array.array cannot be resized or freed under the operation
    (BufferError); other objects (tensors passed through __dlpack__) themselves."""
    out = []
    for o in objs:
        if isinstance(o, (list, tuple)) and not isinstance(o, _Reinterpreted):
            out.extend(exports(o))
            continue
        try:
            out.append(memoryview(o))
        except (TypeError, ValueError):
            out.append(o)
    return tuple(out)


def stream_handle(stream):
    """A device stream as the C API takes it: an int handle, an object with
    .cuda_stream (torch) or .ptr (CuPy), or None for the default stream."""
    return getattr(stream, "cuda_stream", None) or getattr(stream, "ptr", None) or stream


def tensor_arg(t):
    """A tensor argument as the low-level module takes it.

    NumPy arrays and buffers go as they are. torch 1.13 cannot export bool
    tensors through DLPack, so those go as their uint8 view tagged as bool
    (same memory, no copy)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(t, torch.Tensor) and t.dtype == torch.bool:
        return _Reinterpreted((t.view(torch.uint8), _DL_BOOL, 8))
    return t


def tensor_list(ts):
    if ts is None:
        return None
    return [tensor_arg(t) for t in ts]


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _distc.distc_version()
