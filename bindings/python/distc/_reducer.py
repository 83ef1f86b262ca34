"""The DDP reducer: gradient bucketing with asynchronous, overlapped allreduces."""
import ctypes
import operator
import weakref

from . import _distc
from ._bucket import GradBucket
from ._future import Future
from ._group import ProcessGroup
from ._handle import Owned
from ._types import exports, stream_handle, tensor_arg, tensor_list

_HOOKS = {None: 0, "allreduce": 0, "fp16": 1, "fp16_compress": 1, "bf16": 2, "bf16_compress": 2}


class Reducer(Owned):
    """c10d's Reducer for any training loop: per step, prepare_for_backward(), then
    mark_ready(i) as gradient i is written, then finalize() (the gradients then hold
    the average over ranks). `grads` (NumPy arrays or tensors; host memory, or all on
    one device of the group's backend, e.g. CUDA tensors under nccl) are borrowed for
    the reducer's life; this object keeps them referenced. `stream` (device
    gradients): the stream the backward pass writes them on (a torch.cuda.Stream,
    CuPy stream or int handle; None: the default). `static_graph`: every iteration uses
    the same gradients; the first finds the unused ones, later ones need no search."""

    def __init__(self, group, grads, bucket_cap_mb=25, first_bucket_mb=1, bucket_of=None,
                 find_unused_parameters=False, gradient_as_bucket_view=False, comm_hook=None, expect_sparse=None,
                 stream=None, static_graph=False):
        if not isinstance(group, ProcessGroup):
            raise TypeError(f"group must be a distc.ProcessGroup, not {type(group).__name__}")
        if comm_hook not in _HOOKS:
            raise ValueError(f"comm_hook must be one of {sorted(k for k in _HOOKS if k)} or None")
        self._grads = list(grads)
        for name, mb in (("bucket_cap_mb", bucket_cap_mb), ("first_bucket_mb", first_bucket_mb)):
            if not mb >= 0:  # NaN too
                raise ValueError(f"{name} must be >= 0, not {mb!r}")
        opts = {"bucket_cap_bytes": int(bucket_cap_mb * 1024 * 1024),
                "first_bucket_bytes": int(first_bucket_mb * 1024 * 1024),
                "find_unused_parameters": int(bool(find_unused_parameters)),
                "gradient_as_bucket_view": int(bool(gradient_as_bucket_view)),
                "static_graph": int(bool(static_graph))}
        if stream is not None:
            opts["stream"] = stream_handle(stream)
        if expect_sparse is not None:
            opts["expect_sparse"] = [int(bool(x)) for x in expect_sparse]
            if len(opts["expect_sparse"]) != len(self._grads):
                raise ValueError(f"expect_sparse has {len(opts['expect_sparse'])} entries for {len(self._grads)} gradients")
        if bucket_of is not None:
            opts["bucket_of"] = [int(b) for b in bucket_of]
            if len(opts["bucket_of"]) != len(self._grads):
                raise ValueError(f"bucket_of has {len(opts['bucket_of'])} entries for {len(self._grads)} gradients")
        self._group = group
        self._own(group._call(_distc.distc_reducer_new, tensor_list(self._grads), opts), _distc.distc_reducer_free)
        # Exports of the gradients the reducer writes for its life: a bytearray
        # or array.array among them cannot be resized under it.
        self._exports = exports(self._grads)
        if _HOOKS[comm_hook]:
            self.register_builtin_hook(comm_hook)

    _what = "reducer"

    def prepare_for_backward(self, unused=()):
        """Starts an iteration; `unused` gradients will not be computed (they reduce as zeros)."""
        self._call(_distc.distc_reducer_prepare_for_backward, [operator.index(i) for i in unused])

    def mark_ready(self, index):
        """Gradient `index` holds its value: copied into its bucket; full buckets start their allreduce."""
        self._call(_distc.distc_reducer_mark_ready, operator.index(index))

    def mark_ready_sparse(self, index, indices, values):
        """Sparse gradient `index` (see expect_sparse): `values` rows at row numbers
        `indices` (int64); both are copied. Repeated indices add up."""
        self._call(_distc.distc_reducer_mark_ready_sparse, operator.index(index), tensor_arg(indices), tensor_arg(values))

    def sparse_grad(self, index):
        """After finalize: (indices, values) of sparse gradient `index` averaged over ranks,
        indices distinct and increasing, values one row each; copies, as NumPy arrays for
        NumPy gradients and tensors for torch ones."""
        idx_addr, val_addr, nnz = self._call(_distc.distc_reducer_sparse_grad, operator.index(index))
        g = self._grads[index]
        row_shape = tuple(g.shape[1:])
        idx = ctypes.string_at(idx_addr, nnz * 8) if nnz else b""
        if type(g).__module__ == "torch":
            import torch
            rows = ctypes.string_at(val_addr, nnz * (g.numel() // max(g.shape[0], 1)) * g.element_size()) if nnz else b""
            i = torch.frombuffer(bytearray(idx), dtype=torch.int64) if nnz else torch.zeros(0, dtype=torch.int64)
            v = (torch.frombuffer(bytearray(rows), dtype=g.dtype) if nnz else torch.zeros(0, dtype=g.dtype))
            return i, v.reshape((nnz,) + row_shape)
        import numpy as np
        row_bytes = (g.nbytes // g.shape[0]) if g.shape[0] else 0
        rows = ctypes.string_at(val_addr, nnz * row_bytes) if nnz else b""
        return (np.frombuffer(idx, dtype=np.int64).copy(),
                np.frombuffer(rows, dtype=g.dtype).reshape((nnz,) + row_shape).copy())

    def finalize(self):
        """Waits for every bucket and writes the averages back (raises a failed allreduce's error)."""
        self._call(_distc.distc_reducer_finalize)

    @property
    def num_buckets(self):
        return self._call(_distc.distc_reducer_num_buckets)

    def bucket_of(self, index):
        return self._call(_distc.distc_reducer_bucket_of, operator.index(index))

    def grad_view(self, index):
        """With gradient_as_bucket_view: gradient `index`'s memory inside its bucket, as an
        array (NumPy for NumPy gradients, a tensor for torch ones) of its shape and dtype.
        It stays valid as long as this reducer."""
        addr = self._call(_distc.distc_reducer_grad_view, operator.index(index))
        g = self._grads[index]
        raw = (ctypes.c_char * g.nbytes).from_address(addr) if hasattr(g, "nbytes") else None
        if type(g).__module__ == "torch":
            import torch
            raw = (ctypes.c_char * (g.numel() * g.element_size())).from_address(addr)
            raw._owner = self  # the bucket memory lives as long as the reducer
            return torch.frombuffer(raw, dtype=g.dtype).view(g.shape)
        import numpy as np
        raw._owner = self
        return np.frombuffer(raw, dtype=g.dtype).reshape(g.shape)

    def ready_ns(self, index):
        """When gradient `index` was marked in the last iteration (ns after prepare; -1: unused)."""
        return self._call(_distc.distc_reducer_ready_ns, operator.index(index))

    def register_builtin_hook(self, name):
        """How buckets are reduced, before the first iteration: "allreduce" (None),
        "fp16" or "bf16" (c10d's compression hooks)."""
        if name not in _HOOKS:
            raise ValueError(f"hook must be one of {sorted(k for k in _HOOKS if k)} or None")
        self._call(_distc.distc_reducer_register_builtin_hook, _HOOKS[name])

    def register_comm_hook(self, state, hook, _params=None):
        """torch's comm hook, before the first iteration: hook(state, bucket) gets a
        GradBucket and returns a distc.Future whose value is the bucket's result (a
        tensor or a one-tensor list; often the bucket's own buffer, reduced in place,
        from group.all_reduce(..., async_op=True).get_future() and then()). The
        reducer waits for it in finalize and writes the result back. hook None restores
        the default allreduce. The hook runs on the thread whose mark_ready completed
        the bucket, or on a continuation thread once the bucket before it completed
        (distc_reducer_register_bucket_hook(3)), so its collectives and those of
        its futures come in the same order on every rank. An exception in the hook
        fails that mark_ready or finalize."""
        if hook is None:
            self._call(_distc.pydistc_reducer_register_hook, None)
            return
        if not callable(hook):
            raise TypeError(f"hook must be callable, not {type(hook).__name__}")
        grads, ref = self._grads, weakref.ref(self)  # no cycle through C: the hook outlives no reducer

        def run(index, is_last, addr, numel, members, offsets):
            owner = ref()
            if owner is None:
                raise RuntimeError("the reducer was closed")
            bucket = GradBucket(owner, grads, _params, index, is_last, addr, numel, members, offsets)
            bucket._group = owner._group  # the group a hook with state None reduces over
            fut = hook(state, bucket)
            if not isinstance(fut, Future):
                raise TypeError(f"a communication hook returns a distc.Future (work.get_future(), Future.then, "
                                f"Future()), not {type(fut).__name__}")
            return fut.then(lambda f: bucket._write(f.value()))

        self._call(_distc.pydistc_reducer_register_hook, run)

    def register_powersgd(self, matrix_approximation_rank=1, start_powerSGD_iter=1_000, min_compression_rate=2,
                          use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0, random_seed=0):
        """distc's built-in PowerSGD, in C (distc_reducer_register_powersgd(3)), with torch's
        PowerSGDState's settings: host float32/float64 buckets, no Python on the way.
        distc.ddp_comm_hooks.powerSGD_hook is the same algorithm in Python, with torch's
        random start bit for bit; this one draws its own."""
        self._call(_distc.distc_reducer_register_powersgd, {
            "matrix_approximation_rank": int(matrix_approximation_rank),
            "start_powersgd_iter": int(start_powerSGD_iter),
            "min_compression_rate": float(min_compression_rate),
            "use_error_feedback": int(bool(use_error_feedback)), "warm_start": int(bool(warm_start)),
            "orthogonalization_epsilon": float(orthogonalization_epsilon), "random_seed": int(random_seed)})

    def powersgd_stats(self):
        """(iterations, elements before compression, after) of the built-in PowerSGD so far."""
        return tuple(self._call(_distc.distc_reducer_powersgd_stats))

    def join(self):
        """One iteration of a rank out of inputs: every gradient reduces as zeros,
        matching the active ranks' buckets (distc_reducer_join(3), distc.join)."""
        self._call(_distc.distc_reducer_join)

    def grad_used(self, index):
        """With find_unused_parameters: whether any rank used gradient `index` in the last
        iteration (False: its buffer holds zeros, and torch's DDP leaves such a grad alone)."""
        return bool(self._call(_distc.distc_reducer_grad_used, operator.index(index)))

    def bucket_stats(self, bucket):
        """(bytes, launch_ns, reduce_ns) of `bucket` in the last iteration."""
        return tuple(self._call(_distc.distc_reducer_bucket_stats, operator.index(bucket)))


def compute_bucket_assignment_by_size(tensors, bucket_size_limits, expect_sparse_gradient=None):
    """c10d's function: the bucket of each tensor, buckets numbered by their smallest index."""
    flags = None if expect_sparse_gradient is None else [int(bool(x)) for x in expect_sparse_gradient]
    result = _distc.distc_compute_bucket_assignment_by_size(tensor_list(tensors), list(bucket_size_limits), flags)
    bucket_of, n = result
    buckets = [[] for _ in range(n)]
    for i, b in enumerate(bucket_of):
        buckets[b].append(i)
    return buckets
