"""Work handles, timeouts, abort, a dead peer, and bad arguments: errors, never hangs or crashes."""
import gc
import multiprocessing as mp
import os
import threading
import time
import weakref

import numpy as np
import pytest
import torch

import distc
from conftest import run_threads


def two_ranks(fn0, fn1, timeout=10.0):
    """fn0(pg) on rank 0 and fn1(pg) on rank 1, threads over one HashStore."""
    def body(pg):
        return (fn0 if pg.rank() == 0 else fn1)(pg)
    return run_threads(2, body, timeout=timeout)


def test_async_keeps_buffers_alive_after_the_work_is_dropped():
    ref = {}
    checked = threading.Event()  # rank 1 joins only after rank 0 looked: no race with a slow rank 0

    def rank0(pg):
        a = np.ones(1000, np.float64)
        ref["a"] = weakref.ref(a)
        w = pg.all_reduce(a, async_op=True)
        del a, w
        gc.collect()
        alive = ref["a"]() is not None
        checked.set()
        assert alive, "the array went while its allreduce was pending"
        pg.barrier()  # rank 1 joins the allreduce, then this barrier

    def rank1(pg):
        checked.wait(10)
        b = np.ones(1000, np.float64)
        pg.all_reduce(b)
        pg.barrier()
        assert b[0] == 2.0

    two_ranks(rank0, rank1)
    gc.collect()
    assert ref["a"]() is None, "the array was never released"


def test_wait_with_timeout_then_completion():
    checked = threading.Event()

    def rank0(pg):
        a = np.ones(3)
        w = pg.all_reduce(a, async_op=True)
        try:
            with pytest.raises(distc.DistcTimeoutError):
                w.wait(timeout=0.05)
            assert not w.is_completed() and w.exception() is None
            # The duration runs from when the group's worker started the
            # call, which under sanitizers may be milliseconds after it was
            # made (CI read 48.9 ms): hold the peer off 50 ms more, so the
            # 50 ms asserted below leave that much for the start.
            time.sleep(0.05)
        finally:
            checked.set()
        pg.barrier()
        w.wait_stream(None)  # a host backend: waits here
        assert w.wait() and w.is_success()
        assert w.duration.total_seconds() > 0.05
        assert a[0] == 2.0

    def rank1(pg):
        checked.wait(10)
        pg.all_reduce(np.ones(3))
        pg.barrier()

    two_ranks(rank0, rank1)


def test_operation_timeout_names_the_operation():
    done = threading.Event()  # rank 1 stays in the group until rank 0 has its error

    def rank0(pg):
        try:
            t0 = time.monotonic()
            with pytest.raises(distc.DistcTimeoutError) as e:
                pg.all_reduce(np.ones(2), timeout=0.3)
            assert time.monotonic() - t0 < 5
            assert "allreduce" in str(e.value)
        finally:
            done.set()

    two_ranks(rank0, lambda pg: done.wait(10))


def test_abort_wakes_pending_work():
    done = threading.Event()

    def rank0(pg):
        try:
            w = pg.all_reduce(np.ones(2), async_op=True)
            threading.Timer(0.1, pg.abort).start()
            with pytest.raises(distc.DistcAborted):
                w.wait()
            assert w.is_completed() and not w.is_success()
            assert isinstance(w.exception(), distc.DistcAborted)
            with pytest.raises(distc.DistcAborted):
                pg.barrier()
        finally:
            done.set()

    two_ranks(rank0, lambda pg: done.wait(10), timeout=3)


def _dead_peer_main(port, rank, queue):
    store = distc.TCPStore("127.0.0.1", port, 3, False, timeout=20)
    pg = distc.ProcessGroup(store, rank, 2, timeout=3)
    pg.all_reduce(np.ones(4))
    if rank == 1:
        os._exit(0)  # dies without a word
    t0 = time.monotonic()
    try:
        pg.all_reduce(np.ones(4))
        queue.put("no error")
    except distc.DistcError as e:
        queue.put((type(e).__name__, str(e), time.monotonic() - t0))
    pg.close()


def test_dead_peer_gives_an_error_within_the_timeout():
    ctx = mp.get_context("spawn")
    server = distc.TCPStore("127.0.0.1", 0, 3, True, timeout=20, wait_for_workers=False)
    q = ctx.Queue()
    ps = [ctx.Process(target=_dead_peer_main, args=(server.port, r, q)) for r in range(2)]
    [p.start() for p in ps]
    try:
        got = q.get(timeout=60)
    finally:
        for p in ps:
            p.join(20)
            if p.is_alive():
                p.kill()
        server.close()
    assert got != "no error"
    name, message, elapsed = got
    assert name in ("DistcRemoteError", "DistcTimeoutError"), got
    assert "allreduce #2" in message, message
    assert elapsed < 3 + 2, got
    assert ps[0].exitcode == 0


# ---- bad arguments: a clear exception, nothing sent (the group goes on working)

def test_bad_tensor_arguments():
    def body(pg):
        with pytest.raises(ValueError, match="not contiguous"):
            pg.all_reduce(np.zeros((4, 4))[:, 0])
        with pytest.raises(ValueError, match="not contiguous"):
            pg.all_reduce(torch.zeros(4, 4).t())
        ro = np.zeros(3)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            pg.all_reduce(ro)
        with pytest.raises(ValueError, match="unsupported dtype"):
            pg.all_reduce(np.zeros(3, np.uint16))
        with pytest.raises(ValueError, match="big-endian"):
            pg.all_reduce(np.zeros(3, ">f4"))
        with pytest.raises(ValueError, match="not a tensor"):
            pg.all_reduce("abc")
        with pytest.raises(ValueError, match="None"):
            pg.all_reduce(None)
        with pytest.raises(ValueError, match="group has 2 ranks"):
            pg.all_gather([np.zeros(1)], np.zeros(1))
        with pytest.raises(distc.DistcInvalidArgument, match="root|src|rank"):
            pg.broadcast(np.zeros(1), src=5)
        with pytest.raises(distc.DistcInvalidArgument):
            pg.all_gather([np.zeros(2), np.zeros(2)], np.zeros(3))
        with pytest.raises(distc.DistcInvalidArgument):
            pg.all_to_all_single(np.zeros(4), np.zeros(4), [1, 1], [3, 3])
        with pytest.raises(ValueError, match="entries"):
            pg.all_to_all_single(np.zeros(4), np.zeros(4), [1, 1, 2], None)
        with pytest.raises(ValueError, match="op must be"):
            pg.all_reduce(np.zeros(1), op="sum")
        with pytest.raises(distc.DistcInvalidArgument, match="BAND|bitwise|float"):
            pg.all_reduce(np.zeros(1), op=distc.ReduceOp.BAND)
        with pytest.raises(TypeError):
            pg.all_reduce(np.zeros(1), timeout="x")
        # nothing was sent: the group still works
        a = np.array([pg.rank() + 1.0])
        pg.all_reduce(a)
        assert a[0] == 3.0
        return True

    assert run_threads(2, body) == [True, True]


def test_raw_module_refuses_bad_input():
    raw = distc._distc
    with pytest.raises(distc.DistcInvalidArgument, match="pg is NULL"):
        raw.distc_allreduce(False, None, np.zeros(1), 0, None)
    with pytest.raises(TypeError):
        raw.distc_store_set("not a store", "k", b"v")
    s = raw.distc_store_new_hash()
    with pytest.raises(TypeError, match="no field"):
        raw.distc_pg_new(s, 0, 1, {"nope": 1})
    with pytest.raises(TypeError, match="dict"):
        raw.distc_pg_new(s, 0, 1, [1])
    with pytest.raises(OverflowError):
        raw.distc_pg_new(s, 0, 1, {"debug": 1 << 40})
    with pytest.raises(distc.DistcInvalidArgument):
        raw.distc_pg_new(s, 3, 1, None)
    raw.distc_store_free(s)


def test_exceptions_carry_codes_and_base_classes():
    assert issubclass(distc.DistcTimeoutError, TimeoutError)
    assert issubclass(distc.DistcInvalidArgument, ValueError)
    assert issubclass(distc.DistcIOError, OSError)
    with pytest.raises(distc.DistcError) as e:
        distc.FileStore("/nonexistent-dir/x/y")
    assert e.value.code < 0 and "nonexistent-dir" in str(e.value)


def test_closed_group_and_double_close():
    pg = distc.ProcessGroup(distc.HashStore(), 0, 1)
    pg.close()
    pg.close()
    with pytest.raises(ValueError, match="closed"):
        pg.all_reduce(np.zeros(1))
    assert "closed" in repr(pg)


def test_close_while_another_thread_is_inside_a_call():
    """The handle outlives close() until calls in flight return (no use after free)."""
    for _ in range(20):
        store = distc.HashStore()
        store.set_timeout(0.2)
        errors = []

        def blocked():
            try:
                store.get("never-set")
            except distc.DistcTimeoutError:
                pass
            except Exception as e:  # noqa: B902 - reported below
                errors.append(e)

        t = threading.Thread(target=blocked)
        t.start()
        time.sleep(0.01)
        store.close()  # the waiting get keeps the handle until it returns
        t.join(10)
        assert not errors, errors
        # a watchdog's abort racing the owner's close
        pg = distc.ProcessGroup(distc.HashStore(), 0, 1)

        def watchdog():
            for _ in range(50):
                try:
                    pg.abort()
                except ValueError:  # closed: the only error allowed here
                    return

        a = threading.Thread(target=watchdog)
        a.start()
        try:
            pg.close()
        finally:
            a.join(10)


def test_futures_resolve_with_results_and_errors():
    done = threading.Event()

    def rank0(pg):
        try:
            body0(pg)
        finally:
            done.set()

    def body0(pg):
        a = np.ones(3)
        w = pg.all_reduce(a, async_op=True)
        f = w.get_future()
        seen = []
        f.add_done_callback(lambda fut: seen.append(fut.result()[0][0]))
        assert f.result(timeout=10)[0] is a and a[0] == 2.0
        assert seen == [2.0]
        assert w.get_future().result(timeout=1)[0] is a  # after completion: resolved at once
        # a failing operation: the future carries its exception
        w2 = pg.all_reduce(np.ones(2), async_op=True, timeout=0.2)
        e = w2.get_future().exception(timeout=10)
        assert isinstance(e, distc.DistcTimeoutError) and "allreduce" in str(e)

    def rank1(pg):
        pg.all_reduce(np.ones(3))
        done.wait(10)

    two_ranks(rank0, rank1)
