"""Key-value stores for rendezvous, with torch.distributed's store API."""
import datetime
import operator
import time

from . import _distc
from ._handle import Owned
from ._types import timeout_ms


def _keys(keys):
    if isinstance(keys, (str, bytes)):
        raise TypeError("keys must be a list of str, not a single key")
    return list(keys)


def _value(value):
    if value is None:
        raise TypeError("value must be bytes, str or a buffer, not None")
    return value


class Store(Owned):
    """A distc store handle. Subclasses create it; every method is thread-safe.

    Values are bytes (str values are stored as UTF-8). The handle is released
    by close(), by `with`, or when the object is garbage-collected; groups
    made on a store keep their own reference, so the two may go in any order.
    """

    _what = "store"

    def __init__(self, handle):
        self._own(handle, _distc.distc_store_free)

    def set(self, key, value):
        self._call(_distc.distc_store_set, key, _value(value))

    def get(self, key):
        """The value of `key`, waiting up to the store's timeout for it (DistcTimeoutError)."""
        return self._call(_distc.distc_store_get, key)

    def add(self, key, amount):
        """Adds `amount` to the counter `key` (missing: 0) and returns the new value."""
        return self._call(_distc.distc_store_add, key, operator.index(amount))

    def compare_set(self, key, expected_value, desired_value):
        """Sets `key` to `desired_value` if it holds `expected_value` (or is missing and
        `expected_value` is empty); returns the value after the call."""
        return self._call(_distc.distc_store_compare_set, key, expected_value, desired_value)

    def check(self, keys):
        """True if every key exists (never waits)."""
        return bool(self._call(_distc.distc_store_check, _keys(keys)))

    def wait(self, keys, timeout=None):
        """Waits until every key exists, up to `timeout` (a timedelta or seconds; None: the store's)."""
        ms = timeout_ms(timeout)
        self._call(_distc.distc_store_wait, _keys(keys), -1 if ms is None else ms)

    def delete_key(self, key):
        """Deletes `key`; True if it existed."""
        return bool(self._call(_distc.distc_store_delete_key, key))

    def num_keys(self):
        return self._call(_distc.distc_store_num_keys)

    def append(self, key, value):
        self._call(_distc.distc_store_append, key, _value(value))

    def multi_get(self, keys):
        return self._call(_distc.distc_store_multi_get, _keys(keys))

    def multi_set(self, keys, values):
        keys, values = _keys(keys), list(values)
        if len(keys) != len(values):
            raise ValueError(f"multi_set got {len(keys)} keys and {len(values)} values")
        self._call(_distc.distc_store_multi_set, list(zip(keys, values)))

    def set_timeout(self, timeout):
        self._call(_distc.distc_store_set_timeout, timeout_ms(timeout))

    @property
    def timeout(self):
        return datetime.timedelta(milliseconds=self._call(_distc.distc_store_get_timeout))


class HashStore(Store):
    """An in-process store, shared by every thread that uses it."""

    def __init__(self):
        super().__init__(_distc.distc_store_new_hash())


class FileStore(Store):
    """A store in a file shared by processes on one machine (or a shared file system).
    The last of `world_size` users removes the file; -1: never removed."""

    def __init__(self, file_name, world_size=-1):
        super().__init__(_distc.distc_store_new_file(str(file_name), int(world_size)))


class TCPStore(Store):
    """torch's TCPStore, wire-compatible with it: PyTorch processes may join as clients or serve.

    `port=0` with `is_master=True` picks a free port (read it from `.port`).
    `max_request_bytes` and `max_unread_reply_bytes` are the server's per-connection
    limits (distc_tcp_store_options; None: the defaults). `token` is the shared secret
    a server requires and a client proves (None: $DISTC_STORE_TOKEN; "": none);
    `allow_torch_clients` (True/False; None: only without a token) says whether a
    server serves PyTorch clients, which cannot prove a token."""

    PROTOCOLS = {"auto": 0, "distc": 1, "torch1": 2, "torch2": 3}

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=datetime.timedelta(seconds=300), wait_for_workers=True, protocol="auto",
                 connect_retries=-1, max_request_bytes=None, max_unread_reply_bytes=None, token=None,
                 allow_torch_clients=None):
        if protocol not in self.PROTOCOLS:
            raise ValueError(f"protocol must be one of {sorted(self.PROTOCOLS)}, not {protocol!r}")
        opts = {"host": host_name, "port": int(port), "is_server": int(bool(is_master)),
                "world_size": -1 if world_size is None else int(world_size),
                "wait_for_workers": int(bool(wait_for_workers)), "timeout_ms": timeout_ms(timeout),
                "protocol": self.PROTOCOLS[protocol], "connect_retries": int(connect_retries),
                "max_request_bytes": -1 if max_request_bytes is None else int(max_request_bytes),
                "max_unread_reply_bytes": -1 if max_unread_reply_bytes is None else int(max_unread_reply_bytes),
                "token": token,
                "allow_torch_clients": -1 if allow_torch_clients is None else int(bool(allow_torch_clients))}
        super().__init__(_distc.distc_store_new_tcp(opts))

    @property
    def port(self):
        return self._call(_distc.distc_store_tcp_port)


class PrefixStore(Store):
    """Every key of `store` under `prefix` + "/" (c10d's PrefixStore)."""

    def __init__(self, prefix, store):
        if not isinstance(store, Store):
            raise TypeError(f"store must be a distc store, not {type(store).__name__}")
        inner = store._hold()
        super().__init__(_distc.distc_store_new_prefix(prefix, inner.ptr))
        self.underlying_store = store


class CustomStore(Store):
    """A distc store backed by a Python object (a dict, etcd, Redis ...).

    The object needs set(key, value), get(key, timeout) -> bytes (waiting up to
    `timeout` seconds, else raising TimeoutError) and add(key, delta) -> int;
    compare_set, check, wait, delete_key, num_keys and append are used when it
    has them. Its methods may be called from distc's threads."""

    def __init__(self, obj):
        super().__init__(_distc.pydistc_store_new_object(obj))
        self.obj = obj


class _TorchStore:
    """A torch.distributed Store (TCPStore, FileStore, HashStore, PrefixStore ...)
    with CustomStore's methods.

    torch's get and wait take their timeout from the store, and a TCPStore client
    whose wait runs out is spoilt: the server's late answer is read as the next
    request's, which then fails ("Socket Timeout") or reads garbage. distc waits
    in short slices while it watches for a peer's failure, so this adapter never
    lets torch wait on a missing key: it polls check and gets only what exists."""

    def __init__(self, store):
        self._s = store

    def set(self, key, value):
        self._s.set(key, value)

    def get(self, key, timeout):
        self.wait([key], timeout)
        return self._s.get(key)

    def add(self, key, delta):
        return self._s.add(key, delta)

    def compare_set(self, key, expected, desired):
        return self._s.compare_set(key, expected, desired)

    _ABSENT = b"\0distc: no such key\0"

    def check(self, keys):
        if hasattr(self._s, "check"):
            return self._s.check(list(keys))
        # torch 1.13's stores have no check. c10d's compare_set with a non-empty
        # expected value changes nothing: a missing key answers with that value,
        # a present one with its own.
        return all(bytes(self._s.compare_set(k, self._ABSENT, self._ABSENT)) != self._ABSENT for k in keys)

    def wait(self, keys, timeout):
        # A growing nap, capped so that a key set late is seen soon; a negative
        # timeout waits for ever.
        deadline = None if timeout < 0 else time.monotonic() + timeout
        nap = 0.0005
        while not self.check(keys):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"the keys were not all set within {timeout:g} s")
            time.sleep(nap if left is None else min(nap, left))
            nap = min(nap * 2, 0.02)

    def delete_key(self, key):
        return self._s.delete_key(key)

    def num_keys(self):
        return self._s.num_keys()


def as_store(store):
    """A distc Store for `store`: itself, a torch.distributed Store, or a CustomStore
    around any object with its methods."""
    if isinstance(store, Store):
        return store
    if type(store).__module__.startswith("torch") and hasattr(store, "set_timeout"):
        return CustomStore(_TorchStore(store))
    return CustomStore(store)
