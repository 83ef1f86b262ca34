"""Exceptions: one class per distc status code, all under DistcError.

The low-level module raises these for every negative status, with the
library's message (it names the function, the argument and, where relevant,
the peer)."""
from . import _distc


class DistcError(RuntimeError):
    """A distc call failed. `code` is the C status code (negative)."""

    code = 0

    def __init__(self, message="", code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class DistcInvalidArgument(DistcError, ValueError):
    code = -1


class DistcTimeoutError(DistcError, TimeoutError):
    code = -2


class DistcNotFound(DistcError, LookupError):
    code = -3


class DistcNotSupported(DistcError, NotImplementedError):
    code = -4


class DistcRemoteError(DistcError, ConnectionError):
    """A peer or server failed or closed the connection."""
    code = -5


class DistcAborted(DistcError):
    code = -6


class DistcStateError(DistcError):
    """The object is in the wrong state for this call."""
    code = -7


class DistcOutOfMemory(DistcError, MemoryError):
    code = -8


class DistcBackendError(DistcError):
    code = -9


class DistcInternalError(DistcError):
    code = -10


class DistcIOError(DistcError, OSError):
    code = -11

    def __init__(self, message="", code=None):
        # OSError's constructor would read (errno, strerror) from the arguments.
        OSError.__init__(self, message)
        if code is not None:
            self.code = code


class DistcProtocolError(DistcError):
    code = -12


_BY_CODE = {cls.code: cls for cls in (
    DistcError, DistcInvalidArgument, DistcTimeoutError, DistcNotFound, DistcNotSupported, DistcRemoteError,
    DistcAborted, DistcStateError, DistcOutOfMemory, DistcBackendError, DistcInternalError, DistcIOError,
    DistcProtocolError)}
_distc.pydistc_set_error_classes(_BY_CODE)


def error_for(code, message):
    """The exception for a status code and message (for work that failed)."""
    return _BY_CODE.get(code, DistcError)(message, code)
