"""Arrays in memory that the ranks of a host share (distc_mem_alloc).

The shared-memory transport's large collectives copy and reduce straight
between such buffers with loads and stores instead of asking the kernel to
copy between processes: several times faster from a few MiB on. Any array
works with every call; this is an optimisation only, like NCCL's
ncclMemAlloc. The memory is freed when the last array viewing it goes.
"""
import ctypes
import math
import operator
import weakref

from . import _distc


def _raw(nbytes):
    n = max(int(nbytes), 1)
    addr = _distc.distc_mem_alloc(n)
    raw = (ctypes.c_char * n).from_address(addr)
    weakref.finalize(raw, _distc.distc_mem_free, addr)
    return raw


def _shape(shape):
    shape = (operator.index(shape),) if hasattr(shape, "__index__") else tuple(operator.index(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError("negative dimensions are not allowed: %r" % (shape,))
    return shape


def shared_empty(shape, dtype="float32"):
    """A NumPy array of `shape` and `dtype` in shared memory (its bytes start zeroed).
    torch.from_numpy() views it as a tensor without a copy."""
    import numpy as np
    shape, dtype = _shape(shape), np.dtype(dtype)
    count = math.prod(shape)
    return np.frombuffer(_raw(count * dtype.itemsize), dtype=dtype, count=count).reshape(shape)


def shared_zeros(shape, dtype="float32"):
    """shared_empty(): the memory comes zeroed."""
    return shared_empty(shape, dtype)
