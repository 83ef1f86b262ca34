"""distc.join: the generic join protocol with a joinable of the user's own (no
torch), ranks with different numbers of iterations, and
throw_on_early_termination."""
import os

import numpy as np
import pytest

import distc
from distc.join import Join, JoinHook, Joinable
from conftest import run_procs_env


class Counter(Joinable):
    """Sums every rank's contributions, one allreduce per iteration; a joined rank
    contributes 0 and, at the end, everyone takes a last joiner's total."""

    def __init__(self):
        super().__init__()
        self.total = 0
        self.iterations = 0

    def step(self, value):
        Join.notify_join_context(self)
        x = np.array([value], dtype=np.int64)
        distc.all_reduce(x)
        self.total += int(x[0])
        self.iterations += 1

    def join_hook(self, **kwargs):
        counter = self

        class Hook(JoinHook):
            def main_hook(self):
                x = np.zeros(1, dtype=np.int64)
                distc.all_reduce(x)
                counter.total += int(x[0])

            def post_hook(self, is_last_joiner):
                x = np.array([distc.get_rank() if is_last_joiner else -1], dtype=np.int64)
                distc.all_reduce(x, op=distc.ReduceOp.MAX)
                t = [counter.total]
                distc.broadcast_object_list(t, src=int(x[0]))
                counter.total = t[0]

        return Hook()


def uneven():
    distc.init_process_group("gloo")
    rank, size = distc.get_rank(), distc.get_world_size()
    c = Counter()
    with Join([c]):
        for i in range(3 + rank):  # rank r has 3 + r iterations
            c.step(i + 1)
    # iteration i (0-based) has the ranks r with 3 + r > i, each adding i + 1
    want = sum((i + 1) * sum(1 for r in range(size) if 3 + r > i) for i in range(3 + size - 1))
    assert c.total == want and c.iterations == 3 + rank
    # throw_on_early_termination: every rank raises once the first runs out.
    c2 = Counter()
    with pytest.raises(RuntimeError, match="exhausted"):
        with Join([c2], throw_on_early_termination=True):
            for i in range(2 + rank):
                c2.step(1)
    # the group is still in step: one more collective agrees
    x = np.ones(1, dtype=np.int64)
    distc.all_reduce(x)
    assert x[0] == size
    with pytest.raises(ValueError, match="at least one joinable"):
        Join([])
    distc.destroy_process_group()


@pytest.mark.parametrize("size", [2, 3])
def test_generic_join(size):
    run_procs_env(size, uneven, join_s=120)
