"""Every store method on every store kind, their errors, and a Python object as a store."""
import datetime
import os
import threading
import time

import pytest
from conftest import CompareSetStore, DictStore

import distc


@pytest.fixture(params=["hash", "file", "tcp", "prefix", "custom"])
def store(request, tmp_path):
    if request.param == "hash":
        s = distc.HashStore()
    elif request.param == "file":
        s = distc.FileStore(str(tmp_path / "store"), 1)
    elif request.param == "tcp":
        s = distc.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30))
    elif request.param == "prefix":
        s = distc.PrefixStore("pre", distc.HashStore())
    else:
        s = distc.CustomStore(DictStore())
    s.kind = request.param
    yield s
    s.close()


def test_set_get_add(store):
    store.set("a", b"1\x002")
    assert store.get("a") == b"1\x002"
    store.set("s", "text é")
    assert store.get("s") == "text é".encode()
    assert store.add("n", 5) == 5
    assert store.add("n", -7) == -2
    assert store.get("n") == b"-2"


def test_check_wait_delete_num_keys(store):
    store.set("k1", b"x")
    assert store.check(["k1"]) is True
    assert store.check(["k1", "nope"]) is False
    store.wait(["k1"])
    store.wait(["k1"], timeout=1)
    assert store.delete_key("k1") is True
    assert store.delete_key("k1") is False
    store.set("k2", b"y")
    assert store.num_keys() >= 1


def test_wait_times_out_naming_the_key(store):
    t0 = time.monotonic()
    with pytest.raises(distc.DistcTimeoutError) as e:
        store.wait(["missing-key"], timeout=datetime.timedelta(milliseconds=200))
    assert time.monotonic() - t0 < 5
    assert isinstance(e.value, TimeoutError) and e.value.code == -2
    assert "missing-key" in str(e.value)


def test_get_times_out(store):
    store.set_timeout(0.2)
    assert store.timeout == datetime.timedelta(milliseconds=200)
    with pytest.raises(TimeoutError):
        store.get("never")


def test_get_waits_for_another_thread(store):
    threading.Timer(0.1, store.set, args=("late", b"v")).start()
    assert store.get("late") == b"v"


def test_compare_set_append_multi(store):
    if store.kind == "custom":  # DictStore has no compare_set/append: distc says so
        with pytest.raises(distc.DistcNotSupported):
            store.compare_set("c", b"", b"1")
        with pytest.raises(distc.DistcNotSupported):
            store.append("c", b"1")
    else:
        assert store.compare_set("c", b"", b"first") == b"first"
        assert store.compare_set("c", b"wrong", b"second") == b"first"
        assert store.compare_set("c", b"first", b"second") == b"second"
        store.append("ap", b"ab")
        store.append("ap", "cd")
        assert store.get("ap") == b"abcd"
    store.multi_set(["m1", "m2"], [b"1", "2"])
    assert store.multi_get(["m1", "m2"]) == [b"1", b"2"]
    with pytest.raises(ValueError):
        store.multi_set(["a"], [b"1", b"2"])


def test_bad_arguments(store):
    with pytest.raises(TypeError):
        store.set(1, b"x")
    with pytest.raises(TypeError):
        store.set("k", 1.5)
    with pytest.raises(TypeError):
        store.check("single-key-not-a-list")
    with pytest.raises(ValueError):
        store.multi_get(["bad\x00key"]) if store.kind != "custom" else store.set("bad\x00key", b"")
    with pytest.raises((TypeError, ValueError)):
        store.wait(["k"], timeout=-1)
    with pytest.raises(TypeError):
        store.wait(["k"], timeout="soon")


def test_add_on_non_integer_is_invalid(store):
    store.set("txt", b"abc")
    with pytest.raises((distc.DistcInvalidArgument, distc.DistcRemoteError)) as e:
        store.add("txt", 1)
    assert "txt" in str(e.value) or "add" in str(e.value)


def test_closed_store_refuses():
    s = distc.HashStore()
    s.close()
    s.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        s.set("k", b"v")


def test_prefix_store_shares_inner():
    inner = distc.HashStore()
    p = distc.PrefixStore("grp", inner)
    p.set("k", b"v")
    assert inner.get("grp/k") == b"v"
    del inner  # the prefix store holds its own reference
    assert p.get("k") == b"v"
    with pytest.raises(TypeError):
        distc.PrefixStore("x", object())


def test_tcp_store_client_and_errors(tmp_path):
    server = distc.TCPStore("127.0.0.1", 0, 2, True, timeout=10, wait_for_workers=False)
    client = distc.TCPStore("127.0.0.1", server.port, 2, False, timeout=10)
    client.set("from-client", b"1")
    assert server.get("from-client") == b"1"
    with pytest.raises(ValueError):
        distc.TCPStore("127.0.0.1", 0, protocol="nope")
    # nothing listens on the closed server's port: a clear error within the timeout
    port = server.port
    client.close()
    server.close()
    t0 = time.monotonic()
    with pytest.raises((distc.DistcTimeoutError, distc.DistcRemoteError, distc.DistcIOError)):
        distc.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(milliseconds=500))
    assert time.monotonic() - t0 < 10


def test_file_store_between_handles(tmp_path):
    path = str(tmp_path / "fs")
    a, b = distc.FileStore(path, 2), distc.FileStore(path, 2)
    a.set("k", b"v")
    assert b.get("k") == b"v"
    a.close()
    b.close()
    assert not os.path.exists(path)  # the last user removes it


class FailingStore(DictStore):
    def set(self, key, value):
        raise KeyError("disk on fire")

    def add(self, key, delta):
        raise ValueError("bad delta")

    def get(self, key, timeout):
        return 42  # not bytes


def test_python_store_exceptions_become_codes():
    s = distc.CustomStore(FailingStore())
    with pytest.raises(distc.DistcRemoteError, match="disk on fire"):
        s.set("k", b"v")
    with pytest.raises(distc.DistcInvalidArgument, match="bad delta"):
        s.add("k", 1)
    with pytest.raises(distc.DistcProtocolError, match="not bytes"):
        s.get("k")
    with pytest.raises(TypeError, match="has no set"):
        distc.CustomStore(object())


def test_python_store_serves_a_process_group():
    from conftest import run_threads  # noqa: F401 - same runner, custom store

    store = distc.CustomStore(DictStore())
    results = [None, None]

    def body(rank):
        with distc.ProcessGroup(store, rank, 2, timeout=10) as pg:
            import numpy as np
            a = np.array([rank + 1.0])
            pg.all_reduce(a)
            results[rank] = a[0]

    ts = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    [t.start() for t in ts]
    [t.join(60) for t in ts]
    assert results == [3.0, 3.0]


def test_python_store_gets_bytes_for_empty_values():
    # A group whose creation fails announces why with compare_set(key, "",
    # why): the empty value comes as b"", not None, or a c10d-style store
    # (torch's among them) refuses it and the announcement is lost.
    obj = CompareSetStore()
    with pytest.raises(distc.DistcError):
        distc.ProcessGroup(distc.CustomStore(obj), 0, 2, timeout=5, backend="no-such-backend")
    assert obj.given and all(t == (bytes, bytes) for t in obj.given), obj.given
    assert any(k.endswith("creation_failed") or b"no-such-backend" in v for k, v in obj.d.items()), obj.d
