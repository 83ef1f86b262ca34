"""Runners for multi-rank tests: ranks as threads of this process (cheap; the
GIL is released in every blocking call), or as spawned processes."""
import multiprocessing as mp
import os
import sys
import threading
import traceback

import pytest

import distc

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("DISTC_BUILD", os.path.join(HERE, "../../build"))


def run_threads(size, fn, timeout=10.0, join_s=120):
    """fn(pg) on `size` ranks, each a thread with its group over one HashStore.
    Returns the results in rank order; re-raises the first failure with its rank."""
    store = distc.HashStore()
    results, errors = [None] * size, [None] * size

    def body(rank):
        try:
            with distc.ProcessGroup(store, rank, size, timeout=timeout) as pg:
                results[rank] = fn(pg)
        except BaseException as e:  # noqa: B902 - reported below
            errors[rank] = (e, traceback.format_exc())

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_s)
    if any(t.is_alive() for t in threads):
        pytest.fail(f"ranks still running after {join_s} s (a hang)")
    for rank, err in enumerate(errors):
        if err:
            raise AssertionError(f"rank {rank} of {size} failed:\n{err[1]}") from err[0]
    return results


def _spawn(size, target, args_of, join_s):
    """Runs target(*args_of(rank), queue) in `size` spawned processes; each puts
    (rank, ok, value). Returns the values in rank order, or raises with every failure."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_of(r), queue)) for r in range(size)]
    for p in procs:
        p.start()
    out, failures = [None] * size, []
    try:
        for _ in range(size):
            rank, ok, value = queue.get(timeout=join_s)
            if ok:
                out[rank] = value
            else:
                failures.append(f"rank {rank} of {size} failed:\n{value}")
    except Exception as e:  # queue.Empty: a rank hung or died without reporting
        failures.append(f"not every rank reported within {join_s} s: {e!r}")
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                failures.append(f"pid {p.pid} had to be killed")
    if failures:
        raise AssertionError("\n".join(failures))
    return out


def _proc_main(port, rank, size, fn, timeout, queue):
    try:
        store = distc.TCPStore("127.0.0.1", port, size + 1, False, timeout=30)
        with distc.ProcessGroup(store, rank, size, timeout=timeout) as pg:
            queue.put((rank, True, fn(pg)))
    except BaseException:  # noqa: B902 - sent to the parent
        queue.put((rank, False, traceback.format_exc()))


def run_procs(size, fn, timeout=20.0, join_s=120):
    """fn(pg) on `size` spawned processes meeting in a TCP store served here.
    `fn` must be a module-level function (it is pickled by name)."""
    server = distc.TCPStore("127.0.0.1", 0, size + 1, True, timeout=30, wait_for_workers=False)
    try:
        return _spawn(size, _proc_main, lambda r: (server.port, r, size, fn, timeout), join_s)
    finally:
        server.close()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env_main(env, rank, fn, queue):
    try:
        os.environ.update(env, RANK=str(rank))
        queue.put((rank, True, fn()))
    except BaseException:  # noqa: B902 - sent to the parent
        queue.put((rank, False, traceback.format_exc()))


def run_procs_env(size, fn, join_s=120):
    """fn() in `size` spawned processes with torchrun's environment (RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT), for the functional API's env://."""
    env = {"WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    return _spawn(size, _env_main, lambda r: (env, r, fn), join_s)


@pytest.fixture(autouse=True)
def _no_default_group():
    """Every test starts and ends without a default group."""
    yield
    distc.destroy_process_group()


class DictStore:
    """A store in a Python dict: the minimum a custom store needs, plus wait."""

    def __init__(self):
        self.d, self.cv = {}, threading.Condition()

    def set(self, key, value):
        with self.cv:
            self.d[key] = bytes(value)
            self.cv.notify_all()

    def get(self, key, timeout):
        with self.cv:
            if not self.cv.wait_for(lambda: key in self.d, timeout):
                raise TimeoutError(f"no key {key!r} after {timeout} s")
            return self.d[key]

    def add(self, key, delta):
        with self.cv:
            v = int(self.d.get(key, b"0")) + delta
            self.d[key] = str(v).encode()
            self.cv.notify_all()
            return v

    def check(self, keys):
        with self.cv:
            return all(k in self.d for k in keys)

    def delete_key(self, key):
        with self.cv:
            return self.d.pop(key, None) is not None

    def num_keys(self):
        return len(self.d)


class CompareSetStore(DictStore):
    """c10d's compare_set, bytes in and out, noting what it was given."""

    def __init__(self):
        super().__init__()
        self.given = []

    def compare_set(self, key, expected, desired):
        self.given.append((type(expected), type(desired)))
        with self.cv:
            cur = self.d.get(key)
            if (cur is None and not expected) or cur == bytes(expected):
                self.d[key] = bytes(desired)
                return bytes(desired)
            return cur if cur is not None else bytes(expected)
