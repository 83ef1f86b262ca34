"""What a communication hook gets: torch's GradBucket over a reducer's bucket."""
import ctypes


def _flat_view(like, addr, numel, owner):
    """`numel` elements of `like`'s dtype at `addr`, as `like`'s kind of array (NumPy or torch)."""
    if type(like).__module__ == "torch":
        import torch
        if numel == 0:
            return torch.zeros(0, dtype=like.dtype)
        raw = (ctypes.c_char * (numel * like.element_size())).from_address(addr)
        raw._owner = owner
        return torch.frombuffer(raw, dtype=like.dtype)
    import numpy as np
    if numel == 0:
        return np.zeros(0, dtype=like.dtype)
    raw = (ctypes.c_char * (numel * like.dtype.itemsize)).from_address(addr)
    raw._owner = owner
    return np.frombuffer(raw, dtype=like.dtype)


def _numel(t):
    return t.numel() if callable(getattr(t, "numel", None)) else int(t.size)


class GradBucket:
    """torch's GradBucket: index() (its position in launch order), is_last(),
    buffer() (the flat bucket, its gradients back to back: a view of the reducer's
    memory, valid until finalize returns), gradients() (each gradient's view of
    it, shaped), parameters() (the parameters those gradients belong to, under
    torch_ddp), offsets(), lengths(), sizes_list() and set_buffer(tensor)."""

    def __init__(self, owner, grads, params, index, is_last, addr, numel, members, offsets):
        self._index, self._last = index, bool(is_last)
        self._members, self._offsets = tuple(members), tuple(offsets)
        self._grads = [grads[i] for i in self._members]
        self._params = None if params is None else [params[i] for i in self._members]
        self._buffer = _flat_view(self._grads[0], addr, numel, owner)

    def index(self):
        return self._index

    def is_last(self):
        return self._last

    def buffer(self):
        return self._buffer

    def gradients(self):
        return [self._buffer[o:o + _numel(g)].reshape(tuple(g.shape)) for g, o in zip(self._grads, self._offsets)]

    def parameters(self):
        """The parameters of the gradients (torch_ddp); a plain Reducer's gradients themselves."""
        return list(self._params if self._params is not None else self._grads)

    def offsets(self):
        return list(self._offsets)

    def lengths(self):
        return [_numel(g) for g in self._grads]

    def sizes_list(self):
        return [tuple(g.shape) for g in self._grads]

    def grad_indices(self):
        """The gradients' indices, as given to the Reducer (distc's addition)."""
        return list(self._members)

    def set_buffer(self, tensor):
        """Makes `tensor` (its values, flat) the bucket's content."""
        self._write(tensor)

    def _write(self, value):
        """A hook's result into the buffer: a tensor, or a one-tensor list (a collective's value)."""
        if isinstance(value, (list, tuple)):
            if len(value) != 1:
                raise ValueError(f"a communication hook's future gave {len(value)} tensors; it gives one, the "
                                 f"bucket's result")
            value = value[0]
        buf = self._buffer
        if type(buf).__module__ == "torch":
            if value.data_ptr() != buf.data_ptr():
                buf.copy_(value.reshape(-1))
        else:
            import numpy as np
            v = np.asarray(value).reshape(-1)
            if v.__array_interface__["data"][0] != buf.__array_interface__["data"][0]:
                np.copyto(buf, v)
