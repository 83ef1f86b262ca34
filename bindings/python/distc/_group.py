"""Process groups and their work handles."""
import datetime
import pickle
import threading

from . import _distc
from ._errors import error_for
from ._future import Future
from ._handle import Owned
from ._store import as_store
from ._types import ReduceOp, exports, op_args, stream_handle, tensor_arg, tensor_list, timeout_ms, timeout_opts

_INPROGRESS = 1


class _Completion:
    """Called once, from the thread that completes the work: resolves its futures."""

    __slots__ = ("lock", "status", "message", "futures", "result")

    def __init__(self, result):
        self.lock = threading.Lock()
        self.status, self.message, self.futures, self.result = None, "", [], result

    def __call__(self, status, message):
        with self.lock:
            self.status, self.message = status, message
            futures, self.futures = self.futures, []
        for f in futures:
            self.resolve(f)

    def resolve(self, f):
        if self.status == 0:
            f._settle(self.result)
        else:
            f._settle(exc=error_for(self.status, self.message))


class Work:
    """An asynchronous operation (torch's Work).

    It keeps the operation's buffers alive until the operation completes,
    even when this object goes first, and exported: a bytearray or
    array.array cannot be resized under it (BufferError)."""

    __slots__ = ("_h", "_result", "_done")

    def __init__(self, handle, keep, result=None):
        self._h = handle
        self._result = result
        self._done = _Completion(result)
        _distc.pydistc_work_keep(handle, (self._done,) + exports(keep))

    def get_future(self):
        """A distc.Future (torch's Future: wait, value, then; and a concurrent.futures.Future)
        completed with the output tensors or the operation's exception; its
        add_done_callback callbacks run on the completing thread, its then() callbacks on
        distc's continuation threads."""
        f = Future._of(_distc.distc_work_ref(True, self._h))
        with self._done.lock:
            pending = self._done.status is None
            if pending:
                self._done.futures.append(f)
        if not pending:
            self._done.resolve(f)
        return f

    def wait(self, timeout=None):
        """Waits for the operation and returns True, or raises its error. With `timeout`
        (a timedelta or seconds) it raises DistcTimeoutError if the operation is still
        running then (it goes on; is_completed() tells)."""
        ms = timeout_ms(timeout)
        _distc.distc_work_wait(self._h, -1 if ms is None else ms)
        return True

    def is_completed(self):
        """True once the operation has finished, successfully or not."""
        return _distc.distc_work_test(self._h) != _INPROGRESS

    def is_success(self):
        return _distc.distc_work_test(self._h) == 0

    def exception(self):
        """The operation's error as an exception, or None (running or successful)."""
        code, message = _distc.distc_work_error(self._h)
        return error_for(code, message) if code < 0 else None

    def source_rank(self):
        """The rank the data came from (receives from any source), the peer of other
        point-to-point operations, -1 for collectives."""
        return _distc.distc_work_source_rank(self._h)

    def wait_stream(self, stream=None):
        """Makes a device stream wait for the operation without blocking the host (nccl);
        host backends wait here instead. `stream`: an int handle, an object with
        .cuda_stream (torch) or .ptr (CuPy), or None for the default stream."""
        _distc.distc_work_wait_stream(self._h, stream_handle(stream))

    def result(self):
        """What the operation produced (torch: the output tensors), once waited for."""
        return self._result

    @property
    def duration(self):
        """How long the operation ran, as a timedelta (zero until complete)."""
        return datetime.timedelta(microseconds=_distc.distc_work_duration_ns(self._h) / 1000)

    @property
    def seq(self):
        """The group's sequence number of this collective (0 for point-to-point)."""
        return _distc.distc_work_seq(self._h)

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            _distc.distc_work_free(h)


def _listed(ts, what):
    """A list argument as a list, read once: a generator would be empty the
    second time the call went through it."""
    if ts is None or isinstance(ts, list):
        return ts
    try:
        return list(ts)
    except TypeError:
        raise TypeError(f"{what} must be a list of tensors, not {type(ts).__name__}") from None


def _rank_list(n, what):
    if n is None:
        return None
    return [int(x) for x in n]


class ProcessGroup(Owned):
    """A group of `size` ranks meeting in `store`, over a backend ("gloo", or a plugin:
    "mpi", "nccl"). A context manager; close() releases it (pending work fails with
    DistcAborted). Methods take group ranks; every collective takes `async_op`
    (return a Work instead of blocking) and an optional per-operation `timeout`."""

    def __init__(self, store, rank, size, backend="gloo", timeout=None, group_name=None, debug=None,
                 device=None, _handle=None):
        if _handle is None:
            store = as_store(store)
            _handle = store._call(_distc.distc_pg_new, int(rank), int(size),
                                  _pg_opts(backend, timeout, group_name, debug, device))
        self._own(_handle, _distc.distc_pg_free)
        self._store = store  # a custom store's Python object must outlive its calls

    @classmethod
    def from_url(cls, url="env://", rank=None, world_size=None, backend="gloo", timeout=None, group_name=None,
                 debug=None, device=None, store_timeout=None):
        """Rendezvous through `url` (env://, tcp://host:port, file:///path) and create the group."""
        rv = {}
        if rank is not None and rank >= 0:
            rv["rank"] = int(rank)
        if world_size is not None and world_size >= 0:
            rv["world_size"] = int(world_size)
        if store_timeout is not None:
            rv["timeout_ms"] = timeout_ms(store_timeout)
        h = _distc.distc_pg_new_from_url(url, rv or None, _pg_opts(backend, timeout, group_name, debug, device))
        return cls(None, 0, 0, _handle=h)

    _what = "process group"

    def abort(self):
        """Fails every operation in flight or queued on this rank with DistcAborted; never hangs."""
        self._call(_distc.distc_pg_abort)

    def dump_trace(self, path):
        """Writes this group's flight recorder (its recent operations) to the file `path`
        (JSON lines; distc_pg_trace_dump(3)); `distc-trace DIR` reads such files."""
        self._call(_distc.distc_pg_trace_dump, str(path))

    # ---- queries
    def rank(self):
        return self._call(_distc.distc_pg_rank)

    def size(self):
        return self._call(_distc.distc_pg_size)

    def backend(self):
        return self._call(_distc.distc_pg_backend)

    def transport(self, peer):
        """How collectives reach rank `peer`: "shm", "tcp", "gloo", "self", or the backend's name."""
        return self._call(_distc.distc_pg_transport, int(peer))

    def name(self):
        return self._call(_distc.distc_pg_name)

    def store_prefix(self):
        return self._call(_distc.distc_pg_store_prefix)

    def timeout(self):
        return datetime.timedelta(milliseconds=self._call(_distc.distc_pg_timeout))

    def global_rank(self, group_rank):
        """The root group's rank of this group's rank `group_rank`."""
        return self._call(_distc.distc_pg_global_rank, int(group_rank))

    def group_rank(self, global_rank):
        """This group's rank of the root group's rank `global_rank`; -1 when not a member."""
        return self._call(_distc.distc_pg_group_rank, int(global_rank))

    # ---- subgroups
    def new_subgroup(self, ranks, timeout=None, group_name=None, backend=None):
        """c10d's new_group over this group's `ranks`; every rank calls it. None on a
        rank that is not listed."""
        h = self._call(_distc.distc_pg_new_subgroup, _rank_list(ranks, "ranks"),
                       _pg_opts(backend, timeout, group_name, None, None))
        return None if h is None else ProcessGroup(None, 0, 0, _handle=h)

    def split(self, color, key=0, timeout=None, group_name=None):
        """MPI_Comm_split: ranks with the same color >= 0 form a group ordered by key; a
        negative color gives None."""
        h = self._call(_distc.distc_pg_split, int(color), int(key),
                       _pg_opts(None, timeout, group_name, None, None))
        return None if h is None else ProcessGroup(None, 0, 0, _handle=h)

    # ---- collectives
    def _go(self, fn, async_op, keep, result, *args):
        h = self._hold()  # see Owned._call
        if not async_op:
            fn(False, h.ptr, *args)
            return None
        return Work(fn(True, h.ptr, *args), keep, result)

    def all_reduce(self, tensor, op=ReduceOp.SUM, async_op=False, timeout=None):
        c_op, opts = op_args(op, timeout)
        return self._go(_distc.distc_allreduce, async_op, (tensor,), [tensor], tensor_arg(tensor), c_op, opts)

    def all_reduce_coalesced(self, tensors, op=ReduceOp.SUM, async_op=False, timeout=None):
        tensors = _listed(tensors, "tensors")
        c_op, opts = op_args(op, timeout)
        return self._go(_distc.distc_allreduce_coalesced, async_op, tuple(tensors), list(tensors),
                        tensor_list(tensors), c_op, opts)

    def broadcast(self, tensor, src=0, async_op=False, timeout=None):
        return self._go(_distc.distc_broadcast, async_op, (tensor,), [tensor], tensor_arg(tensor), int(src),
                        timeout_opts(timeout))

    def reduce(self, tensor, dst=0, op=ReduceOp.SUM, async_op=False, timeout=None):
        c_op, opts = op_args(op, timeout)
        return self._go(_distc.distc_reduce, async_op, (tensor,), [tensor], tensor_arg(tensor), int(dst), c_op,
                        opts)

    def all_gather(self, tensor_list_, tensor, async_op=False, timeout=None):
        tensor_list_ = _listed(tensor_list_, "tensor_list")
        return self._go(_distc.distc_allgather, async_op, (tuple(tensor_list_), tensor), list(tensor_list_),
                        tensor_list(tensor_list_), tensor_arg(tensor), timeout_opts(timeout))

    def all_gather_into_tensor(self, output_tensor, input_tensor, async_op=False, timeout=None):
        return self._go(_distc.distc_allgather_into_tensor, async_op, (output_tensor, input_tensor),
                        [output_tensor], tensor_arg(output_tensor), tensor_arg(input_tensor), timeout_opts(timeout))

    def gather(self, tensor, gather_list=None, dst=0, async_op=False, timeout=None):
        if self.rank() == dst and gather_list is None:
            raise ValueError("gather: the destination rank needs a gather_list")
        if self.rank() != dst:
            gather_list = None  # ignored off the root, as in torch
        gather_list = _listed(gather_list, "gather_list")
        keep = (tensor, tuple(gather_list or ()))
        return self._go(_distc.distc_gather, async_op, keep, gather_list, tensor_list(gather_list),
                        tensor_arg(tensor), int(dst), timeout_opts(timeout))

    def scatter(self, tensor, scatter_list=None, src=0, async_op=False, timeout=None):
        if self.rank() == src and scatter_list is None:
            raise ValueError("scatter: the source rank needs a scatter_list")
        if self.rank() != src:
            scatter_list = None
        scatter_list = _listed(scatter_list, "scatter_list")
        keep = (tensor, tuple(scatter_list or ()))
        return self._go(_distc.distc_scatter, async_op, keep, [tensor], tensor_arg(tensor),
                        tensor_list(scatter_list), int(src), timeout_opts(timeout))

    def reduce_scatter(self, output, input_list, op=ReduceOp.SUM, async_op=False, timeout=None):
        input_list = _listed(input_list, "input_list")
        c_op, opts = op_args(op, timeout)
        return self._go(_distc.distc_reduce_scatter, async_op, (output, tuple(input_list)), [output],
                        tensor_arg(output), tensor_list(input_list), c_op, opts)

    def reduce_scatter_tensor(self, output, input, op=ReduceOp.SUM, async_op=False, timeout=None):
        c_op, opts = op_args(op, timeout)
        return self._go(_distc.distc_reduce_scatter_tensor, async_op, (output, input), [output],
                        tensor_arg(output), tensor_arg(input), c_op, opts)

    def all_to_all(self, output_tensor_list, input_tensor_list, async_op=False, timeout=None):
        output_tensor_list = _listed(output_tensor_list, "output_tensor_list")
        input_tensor_list = _listed(input_tensor_list, "input_tensor_list")
        keep = (tuple(output_tensor_list), tuple(input_tensor_list))
        return self._go(_distc.distc_alltoall, async_op, keep, list(output_tensor_list),
                        tensor_list(output_tensor_list), tensor_list(input_tensor_list), timeout_opts(timeout))

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None, async_op=False,
                          timeout=None):
        return self._go(_distc.distc_alltoall_single, async_op, (output, input), [output], tensor_arg(output),
                        tensor_arg(input), _rank_list(output_split_sizes, "output_split_sizes"),
                        _rank_list(input_split_sizes, "input_split_sizes"), timeout_opts(timeout))

    def barrier(self, async_op=False, timeout=None):
        return self._go(_distc.distc_barrier, async_op, (), None, timeout_opts(timeout))

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """A barrier that names the ranks that did not arrive within `timeout` (DistcTimeoutError)."""
        ms = timeout_ms(timeout)
        self._call(_distc.distc_monitored_barrier, -1 if ms is None else ms, int(bool(wait_all_ranks)))

    # ---- point-to-point
    def send(self, tensor, dst, tag=0, async_op=False, timeout=None):
        return self._go(_distc.distc_send, async_op, (tensor,), None, tensor_arg(tensor), int(dst), int(tag),
                        timeout_opts(timeout))

    def recv(self, tensor, src=None, tag=0, async_op=False, timeout=None):
        """Receives into `tensor` from `src` (None: any rank). Blocking, it returns the
        sender's rank; with async_op, Work.source_rank() tells."""
        src = -1 if src is None else int(src)
        if async_op:
            return self._go(_distc.distc_recv, True, (tensor,), [tensor], tensor_arg(tensor), src, int(tag),
                            timeout_opts(timeout))
        if src >= 0:
            self._go(_distc.distc_recv, False, None, None, tensor_arg(tensor), src, int(tag), timeout_opts(timeout))
            return src
        w = self._go(_distc.distc_recv, True, (tensor,), [tensor], tensor_arg(tensor), src, int(tag),
                     timeout_opts(timeout))
        w.wait()
        return w.source_rank()

    def batch_isend_irecv(self, ops, timeout=None):
        """Posts every (kind, tensor, peer, tag) send and receive at once; one Work for all.
        `ops` may also hold distc.P2POp objects."""
        raw, keep = [], []
        for o in ops:
            kind, tensor, peer, tag = o if isinstance(o, tuple) else o.as_tuple(self)
            raw.append((int(kind), tensor_arg(tensor), int(peer), int(tag)))
            keep.append(tensor)
        return self._go(_distc.distc_batch_isend_irecv, True, tuple(keep), None, raw, timeout_opts(timeout))

    # ---- bytes and objects
    def all_gather_bytes(self, data, timeout=None):
        """Every rank's `data` (bytes; sizes may differ), in rank order."""
        return self._call(_distc.distc_all_gather_bytes, data, timeout_opts(timeout))

    def gather_bytes(self, data, dst=0, timeout=None):
        """Every rank's `data` on `dst` (a list); None elsewhere."""
        out = self._call(_distc.distc_gather_bytes, data, int(dst), timeout_opts(timeout))
        return out if self.rank() == dst else None

    def broadcast_bytes(self, data, src=0, timeout=None):
        """`src`'s `data` on every rank (`data` is ignored elsewhere)."""
        return self._call(_distc.distc_broadcast_bytes, data if self.rank() == src else None, int(src),
                          timeout_opts(timeout))

    def scatter_bytes(self, data_list, src=0, timeout=None):
        """`src`'s data_list[r] on rank r."""
        return self._call(_distc.distc_scatter_bytes, data_list if self.rank() == src else None, int(src),
                          timeout_opts(timeout))

    def all_gather_object(self, obj, timeout=None):
        return [pickle.loads(b) for b in self.all_gather_bytes(pickle.dumps(obj), timeout)]

    def gather_object(self, obj, dst=0, timeout=None):
        out = self.gather_bytes(pickle.dumps(obj), dst, timeout)
        return None if out is None else [pickle.loads(b) for b in out]

    def broadcast_object(self, obj, src=0, timeout=None):
        data = pickle.dumps(obj) if self.rank() == src else None
        return pickle.loads(self.broadcast_bytes(data, src, timeout))

    def scatter_object(self, objs, src=0, timeout=None):
        data = [pickle.dumps(o) for o in objs] if self.rank() == src else None
        return pickle.loads(self.scatter_bytes(data, src, timeout))

    def __repr__(self):
        if self._h is None:
            return "<distc.ProcessGroup (closed)>"
        return f"<distc.ProcessGroup {self.name()!r} rank {self.rank()} of {self.size()} over {self.backend()}>"


def _pg_opts(backend, timeout, group_name, debug, device):
    o = {}
    if backend is not None:
        o["backend"] = str(backend).lower()
    ms = timeout_ms(timeout)
    if ms is not None:
        o["timeout_ms"] = ms
    if group_name:
        o["group_name"] = str(group_name)
    if debug is not None:
        o["debug"] = int(bool(debug))
    if device is not None:
        o["device"] = int(device)
    return o or None
