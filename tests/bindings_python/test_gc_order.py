"""Stores, groups, subgroups, reducers and works dropped in every order, with
and without pending work, and left alive at interpreter exit: never a crash
or a hang. Each scenario runs in a fresh interpreter so that a crash shows
as an exit code instead of taking pytest down."""
import subprocess
import sys

SCRIPT = r'''
import gc, itertools, sys, threading, time
import numpy as np
import distc

def drop(objs, order):
    for name in order:
        objs.pop(name)
        gc.collect()

def completed(order):
    s = distc.HashStore()
    g = distc.ProcessGroup(s, 0, 1)
    a = np.ones(8)
    w = g.all_reduce(a, async_op=True)
    w.wait()
    sub = g.new_subgroup([0])
    r = distc.Reducer(g, [np.zeros(4)])
    drop({"store": s, "group": g, "work": w, "array": a, "sub": sub, "reducer": r}, order)

def pending(order):
    # rank 1 joins the group and never calls the allreduce, so rank 0's work stays pending.
    s = distc.HashStore()
    ready, done = threading.Event(), threading.Event()
    def rank1():
        g1 = distc.ProcessGroup(s, 1, 2, timeout=30)
        ready.set()
        done.wait(30)
        g1.close()
    t = threading.Thread(target=rank1)
    t.start()
    g = distc.ProcessGroup(s, 0, 2, timeout=30)
    ready.wait(30)
    a = np.ones(1 << 16)
    w = g.all_reduce(a, async_op=True)
    w2 = g.barrier(async_op=True)
    objs = {"store": s, "group": g, "work": w, "array": a, "work2": w2}
    drop(objs, order)
    done.set()
    t.join(30)
    assert not t.is_alive()

mode = sys.argv[1]
names = ["store", "group", "work", "array", "sub", "reducer"] if mode == "completed" else \
        ["store", "group", "work", "array", "work2"]
n = 0
for order in itertools.permutations(names):
    if mode == "completed" and n > 200:
        break
    (completed if mode == "completed" else pending)(order)
    n += 1
print("ok", n)
'''


# Two ranks in one interpreter: g is rank 0, g0[0] rank 1 (made on a thread).
def two_ranks(timeout):
    return f'''
import sys, threading, time, numpy as np, distc
s = distc.HashStore()
g0 = []
t = threading.Thread(target=lambda: g0.append(distc.ProcessGroup(s, 1, 2, timeout={timeout})))
t.start()
g = distc.ProcessGroup(s, 0, 2, timeout={timeout})
t.join()
'''


AT_EXIT = two_ranks(60) + r'''
w = g.all_reduce(np.ones(1000), async_op=True)   # never completes: rank 1 does not call it
w2 = g0[0].barrier(async_op=True)                   # pending too
r = distc.Reducer(g, [np.zeros(3)])
print("exiting with pending work")
'''


def run(code, *args, timeout=120):
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr[-3000:]}"
    return p.stdout


def test_completed_work_every_order():
    assert run(SCRIPT, "completed").startswith("ok")


def test_pending_work_every_order():
    out = run(SCRIPT, "pending")
    assert out.startswith("ok 120"), out


def test_interpreter_exit_with_pending_work():
    assert "exiting" in run(AT_EXIT, timeout=60)


# A completion callback that waits for the GIL while the interpreter starts to
# exit: rank 1 never calls, so the work fails on distc's worker after 1 s
# while the main thread keeps the GIL (a long switch interval, no I/O) until
# the script ends. Taking the GIL once finalizing has begun would end the
# worker with pthread_exit, through C++ frames: "terminate called without an
# active exception". The exit hook lets the callback through first.
CALLBACK_AT_EXIT = two_ranks(60) + r'''
w = g.all_reduce(np.ones(4), async_op=True, timeout=1)
sys.setswitchinterval(100)
end = time.monotonic() + 2
while time.monotonic() < end:
    pass
'''


def test_interpreter_exit_while_a_callback_waits_for_the_gil():
    run(CALLBACK_AT_EXIT, timeout=60)


# Once the exit hook has run, a store written in Python answers with an error
# instead of taking the GIL.
STORE_AFTER_EXIT_HOOK = r'''
import distc
from distc import _distc
class D:
    def __init__(self): self.d = {}
    def set(self, k, v): self.d[k] = v
    def get(self, k, timeout): return self.d[k]
    def add(self, k, n): return n
st = distc.CustomStore(D())
st.set("a", b"1")
_distc.pydistc_at_exit()
try:
    st.get("a")
except distc.DistcStateError as e:
    print("refused:", e)
'''


def test_python_store_after_the_exit_hook():
    out = run(STORE_AFTER_EXIT_HOOK, timeout=60)
    assert "refused:" in out and "interpreter is exiting" in out, out
