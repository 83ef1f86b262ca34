"""Coalesced collectives over several tensors as one operation on the wire
(torch's all_gather_coalesced, allgather_into_tensor_coalesced and
reduce_scatter_tensor_coalesced): the tensors are packed into one buffer, one
collective moves it, and the pieces are copied out. Tensors are NumPy arrays
or CPU PyTorch tensors of one dtype."""
import threading

import numpy as np


def as_array(t, what):
    """A NumPy view of `t` (no copy), writable."""
    if isinstance(t, np.ndarray):
        a = t
    elif hasattr(t, "detach") and hasattr(t, "numpy"):  # a CPU torch tensor
        a = t.detach().numpy()
    else:
        raise TypeError(f"{what}: NumPy arrays or CPU PyTorch tensors, not {type(t).__name__}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{what}: the tensor is not contiguous")
    return a


def _arrays(ts, what):
    arrays = [as_array(t, what) for t in ts]
    if not arrays:
        raise ValueError(f"{what}: no tensors")
    if len({a.dtype for a in arrays}) != 1:
        raise ValueError(f"{what}: the tensors must share one dtype, not {sorted({str(a.dtype) for a in arrays})}")
    return arrays


def _same_dtype(outs, ins, what):
    """The packed buffers take the inputs' dtype: outputs of another would be cast silently."""
    if outs[0].dtype != ins[0].dtype:
        raise ValueError(f"{what}: the outputs are {outs[0].dtype} but the inputs {ins[0].dtype}")


class Deferred:
    """The Work of a coalesced operation: the collective's Work, then the copy out."""

    def __init__(self, work, finish, result):
        self._work, self._finish, self._result, self._finished = work, finish, result, False
        self._lock = threading.Lock()

    def _finish_once(self):
        with self._lock:
            if not self._finished:
                self._finish()
                self._finished = True

    def wait(self, timeout=None):
        self._work.wait(timeout)
        self._finish_once()
        return True

    def get_future(self):
        """A distc.Future of the outputs, completed once they hold the result."""
        def done(f):
            f.value()  # raises the collective's failure
            self._finish_once()
            return self._result

        return self._work.get_future().then(done)

    def is_completed(self):
        return self._work.is_completed()

    def is_success(self):
        return self._work.is_success()

    def exception(self):
        return self._work.exception()

    def result(self):
        return self._result


def _run(go, finish, async_op, result):
    work = go(async_op)
    if not async_op:
        finish()
        return None
    return Deferred(work, finish, result)


def all_gather_coalesced(g, output_tensor_lists, input_tensor_list, async_op):
    """output_tensor_lists[r][j] = rank r's input_tensor_list[j]."""
    ins = _arrays(input_tensor_list, "all_gather_coalesced")
    if len(output_tensor_lists) != g.size():
        raise ValueError(f"all_gather_coalesced: {len(output_tensor_lists)} output lists for {g.size()} ranks")
    outs = [_arrays(lst, "all_gather_coalesced") for lst in output_tensor_lists]
    for r, lst in enumerate(outs):
        if [a.size for a in lst] != [a.size for a in ins] or lst[0].dtype != ins[0].dtype:
            raise ValueError(f"all_gather_coalesced: output list {r} does not match the inputs' sizes and dtype")
    n = sum(a.size for a in ins)
    flat_in = np.concatenate([a.ravel() for a in ins])
    flat_out = np.empty(n * g.size(), dtype=ins[0].dtype)

    def finish():
        for r, lst in enumerate(outs):
            at = r * n
            for a in lst:
                a.ravel()[:] = flat_out[at:at + a.size]
                at += a.size

    return _run(lambda a: g.all_gather_into_tensor(flat_out, flat_in, async_op=a), finish, async_op,
                output_tensor_lists)


def all_gather_into_tensor_coalesced(g, outputs, inputs, async_op):
    """outputs[j] = every rank's inputs[j], in rank order."""
    ins, outs = _arrays(inputs, "all_gather_into_tensor_coalesced"), _arrays(outputs, "all_gather_into_tensor_coalesced")
    _same_dtype(outs, ins, "all_gather_into_tensor_coalesced")
    if len(ins) != len(outs) or any(o.size != i.size * g.size() for o, i in zip(outs, ins)):
        raise ValueError("all_gather_into_tensor_coalesced: each output holds its input times the group's size")
    n = sum(a.size for a in ins)
    flat_in = np.concatenate([a.ravel() for a in ins])
    flat_out = np.empty(n * g.size(), dtype=ins[0].dtype)

    def finish():
        for r in range(g.size()):
            at = r * n
            for o, i in zip(outs, ins):
                o.ravel()[r * i.size:(r + 1) * i.size] = flat_out[at:at + i.size]
                at += i.size

    return _run(lambda a: g.all_gather_into_tensor(flat_out, flat_in, async_op=a), finish, async_op, outputs)


def reduce_scatter_tensor_coalesced(g, outputs, inputs, op, async_op):
    """outputs[j] = the reduction over ranks of this rank's chunk of inputs[j]."""
    ins, outs = _arrays(inputs, "reduce_scatter_tensor_coalesced"), _arrays(outputs, "reduce_scatter_tensor_coalesced")
    _same_dtype(outs, ins, "reduce_scatter_tensor_coalesced")
    if len(ins) != len(outs) or any(i.size != o.size * g.size() for o, i in zip(outs, ins)):
        raise ValueError("reduce_scatter_tensor_coalesced: each input holds its output times the group's size")
    # Rank r's part of the packed input: every input's r-th chunk, in order.
    flat_in = np.concatenate([i.ravel()[r * o.size:(r + 1) * o.size]
                              for r in range(g.size()) for o, i in zip(outs, ins)])
    flat_out = np.empty(sum(o.size for o in outs), dtype=ins[0].dtype)

    def finish():
        at = 0
        for o in outs:
            o.ravel()[:] = flat_out[at:at + o.size]
            at += o.size

    return _run(lambda a: g.reduce_scatter_tensor(flat_out, flat_in, op, async_op=a), finish, async_op, outputs)
