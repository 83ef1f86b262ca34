"""Ownership of the C handles behind stores, groups and reducers."""


class Handle:
    """Owns one C handle and frees it when the last reference goes.

    Every call into the library holds a reference for its duration
    (Owned._call), so close() on one thread while another thread is inside a
    call (abort from a watchdog, say) defers the free until that call returns
    instead of freeing memory still in use."""

    __slots__ = ("ptr", "_free")

    def __init__(self, ptr, free):
        self.ptr = ptr
        self._free = free

    def __del__(self):
        ptr, self.ptr = self.ptr, None
        if ptr is not None:
            self._free(ptr)


class Owned:
    """Base of the Python objects that own a Handle: close(), `with`, and calls."""

    _what = "object"
    _h = None

    def _own(self, ptr, free):
        self._h = Handle(ptr, free)

    def _hold(self):
        h = self._h
        if h is None:
            raise ValueError(f"the {self._what} was closed")
        return h

    def _call(self, fn, *args):
        h = self._hold()  # a local: the handle outlives this call even if closed meanwhile
        return fn(h.ptr, *args)

    def close(self):
        """Releases the handle (once no call on another thread still uses it). Idempotent."""
        self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
