"""Futures with torch.futures.Future's face over distc's work handles."""
import concurrent.futures
import threading

from . import _distc


class Future(concurrent.futures.Future):
    """torch.futures.Future over a distc work handle: wait(), value(), done(),
    then(callback), add_done_callback(callback), set_result() and set_exception(), and
    concurrent.futures' result() and exception() too.

    Future() is completed by the program (set_result / set_exception): a
    communication hook may return one. Work.get_future() completes with its
    operation, its value the output tensors (a list, as torch's). then(cb) runs
    cb(this future) on one of distc's continuation threads once this one completes,
    also when it failed (value() then raises): cb may block, wait and start
    collectives. What cb returns is the new future's value, except that a distc
    Future returned is chained: the new future completes with that one's outcome
    (torch would make the future itself the value). An exception in cb fails the
    new future with it. Futures cannot be cancelled."""

    def __init__(self):
        super().__init__()
        self.set_running_or_notify_cancel()
        self._promise = True
        self._h = _distc.distc_work_new(True)

    @classmethod
    def _of(cls, handle):
        """A future completed by distc (a work handle it owns), not by set_result."""
        f = cls.__new__(cls)
        concurrent.futures.Future.__init__(f)
        f.set_running_or_notify_cancel()
        f._promise = False
        f._h = handle
        return f

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            _distc.distc_work_free(h)

    def wait(self):
        """Waits, then returns the value or raises the failure (torch's wait)."""
        return self.result()

    def value(self):
        """The value of a completed future (raises its failure); RuntimeError before."""
        if not self.done():
            raise RuntimeError("the future has not completed yet: wait() for it")
        return self.result()

    def set_result(self, result):
        """Completes a Future() made by the program with `result`."""
        self._check_promise()
        super().set_result(result)
        _distc.distc_work_complete(self._h, 0, "")

    def set_exception(self, exception):
        """Fails a Future() made by the program with `exception`; its distc code (a
        DistcError's) or DISTC_EREMOTE goes to C waiters (the reducer's finalize)."""
        self._check_promise()
        # All that could fail first: once the Python side is settled, the C
        # work must complete too, or its waiters (finalize) would wait for ever.
        code = getattr(exception, "code", None)
        code = code if isinstance(code, int) and _distc.DISTC_EPROTO <= code < 0 else _distc.DISTC_EREMOTE
        try:
            text = f"{type(exception).__name__}: {exception}"
        except Exception:  # a __str__ that raises
            text = type(exception).__name__
        super().set_exception(exception)
        _distc.distc_work_complete(self._h, code, text)

    def _check_promise(self):
        if not self._promise:
            raise RuntimeError("this future completes with its operation; set_result and set_exception are for "
                               "a Future() made by the program")

    def _settle(self, value=None, exc=None):
        """Records the Python outcome of a future distc completes (before it does)."""
        if exc is None:
            concurrent.futures.Future.set_result(self, value)
        else:
            concurrent.futures.Future.set_exception(self, exc)

    def _settle_from(self, other):
        exc = other.exception()
        self._settle(None if exc is not None else other.result(), exc)

    def then(self, callback):
        """A future of callback(self), run once this one completes (see the class)."""
        if not callable(callback):
            raise TypeError(f"then() takes a callable, not {type(callback).__name__}")
        nf = Future._of(None)

        def run(status, message):
            try:
                v = callback(self)
            except BaseException as e:
                nf._settle(exc=e)
                raise
            if isinstance(v, Future):
                v.add_done_callback(nf._settle_from)  # settled before v's work completes, so before nf's
                return v
            nf._settle(v)
            return None

        nf._h = _distc.pydistc_work_then(True, self._h, run)
        return nf


def collect_all(futures):
    """torch.futures.collect_all: a future of the list of `futures`, once all completed."""
    futures = list(futures)
    out = Future()
    if not futures:
        out.set_result([])
        return out
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out.set_result(futures)

    for f in futures:
        f.add_done_callback(one_done)
    return out


def wait_all(futures):
    """torch.futures.wait_all: the values of `futures`, raising the first failure."""
    return [f.wait() for f in futures]
