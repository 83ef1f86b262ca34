"""Why a group broke, told to every rank (backends/host/failure_notes): the
note the first rank to break it leaves in the store, and what a slow or
blocking store must not change: a rank that failed breaks its links at once,
and its error comes within its timeout plus a bounded wait."""
import multiprocessing as mp
import os
import signal
import threading
import time

import pytest
from conftest import CompareSetStore

import distc


def _store_server(port_queue):
    server = distc.TCPStore("127.0.0.1", 0, None, True, timeout=20, wait_for_workers=False)
    port_queue.put(server.port)
    while True:
        time.sleep(1)


def _late_rank_main(port, rank, server_pid, stop_store, q):
    store = distc.TCPStore("127.0.0.1", port, None, False, timeout=20)
    pg = distc.ProcessGroup(store, rank, 2, timeout=20, group_name="notes")
    pg.barrier()
    time.sleep(0.2)
    t0 = time.monotonic()
    if rank == 0:
        if stop_store:
            os.kill(server_pid, signal.SIGSTOP)
        try:
            pg.barrier(timeout=0.3)
            got = "ok"
        except distc.DistcError as e:
            got = (type(e).__name__, str(e))
        if stop_store:
            os.kill(server_pid, signal.SIGCONT)
    else:
        time.sleep(0.45)  # 150 ms after rank 0 gave up
        try:
            pg.barrier(timeout=2)
            got = "ok"
        except distc.DistcError as e:
            got = (type(e).__name__, str(e))
    q.put((rank, got, time.monotonic() - t0))
    time.sleep(1.0)  # rank 0's process serves nothing here; the store outlives both
    pg.close()


def _late_rank(stop_store):
    ctx = mp.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=_store_server, args=(ports,), daemon=True)
    server.start()
    q = ctx.Queue()
    try:
        port = ports.get(timeout=30)
        ps = [ctx.Process(target=_late_rank_main, args=(port, r, server.pid, stop_store, q)) for r in range(2)]
        [p.start() for p in ps]
        got = dict((r, (res, took)) for r, res, took in (q.get(timeout=60) for _ in range(2)))
        for p in ps:
            p.join(20)
            if p.is_alive():
                p.kill()
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
    return got


def test_the_late_rank_names_the_first_failure():
    got = _late_rank(stop_store=False)
    (name0, _), took0 = got[0]
    assert name0 == "DistcTimeoutError", got
    (name1, message1), _ = got[1]
    assert name1 == "DistcRemoteError", got
    assert "the group's first failure: barrier #2" in message1 and "failed on rank 0" in message1, message1
    assert "timed out" in message1, message1


@pytest.mark.parametrize("shm", ["1", "0"])
def test_a_stopped_store_neither_keeps_the_links_open_nor_holds_the_error_long(shm, monkeypatch):
    # The note waits for the store (up to 0.3 s); the links must not: the
    # late rank fails rather than completing what rank 0 reported failed,
    # over shared memory and over TCP (where a FIN comes before the reset).
    monkeypatch.setenv("DISTC_SHM", shm)
    got = _late_rank(stop_store=True)
    (name0, _), took0 = got[0]
    assert name0 == "DistcTimeoutError", got
    assert took0 < 0.3 + 0.3 + 0.5, got
    res1, _ = got[1]
    assert res1 != "ok", f"rank 1 completed the barrier rank 0 failed: {got}"
    assert res1[0] == "DistcRemoteError", got


class _BlockingStore(CompareSetStore):
    """A store whose compare_set on the note's key blocks for seconds, as a
    hung etcd or Redis store would."""

    def compare_set(self, key, expected, desired):
        if key.endswith("broken"):
            time.sleep(3)
        return super().compare_set(key, expected, desired)


def test_a_custom_store_does_not_hold_the_error():
    store = distc.CustomStore(_BlockingStore())
    pgs = [None, None]

    def make(r):
        pgs[r] = distc.ProcessGroup(store, r, 2, timeout=20, group_name="blocking")

    ts = [threading.Thread(target=make, args=(r,)) for r in range(2)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]
    t0 = time.monotonic()
    try:
        pgs[0].barrier(timeout=0.3)
        raise AssertionError("the barrier without rank 1 succeeded")
    except distc.DistcTimeoutError:
        pass
    assert time.monotonic() - t0 < 2.0
    t0 = time.monotonic()
    for pg in pgs:
        pg.close()
    assert time.monotonic() - t0 < 2.0
