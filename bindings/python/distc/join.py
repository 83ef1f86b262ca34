"""Training on uneven inputs: torch's generic join context manager, over distc's groups.

    with distc.join.Join([model]):          # model: distc.torch_ddp's DDP, or any Joinable
        for batch in my_batches:            # ranks may have different numbers of batches
            ...

A rank whose loop ends first keeps shadowing its peers' collectives until
every rank has left the loop, so nobody waits for a rank that is gone.

The protocol, for writing a Joinable of your own (torch's, name for name):

- every iteration, before its own collectives, a joinable calls
  `Join.notify_join_context(self)`; for the first joinable of the context this
  is an allreduce (SUM) of 1 over the joinables' group, which a joined rank
  matches with 0;
- once a rank leaves the loop, `Join` allreduces 0 and, while the sum (the
  ranks still in the loop) is not 0, calls every joinable's
  `join_hook().main_hook()`, which must issue exactly the collectives one
  iteration of the active ranks issues (with neutral data);
- when every rank has joined, each hook's `post_hook(is_last_joiner)` runs
  (`is_last_joiner`: this rank was among those whose loop ended last), for
  example to copy the last joiners' state to everyone.

With `throw_on_early_termination=True` the first rank to run out raises
RuntimeError on every rank instead (for loops with collectives the hooks do
not know about).
"""
import warnings

import numpy as np

from . import _api

__all__ = ["JoinHook", "Joinable", "Join"]


class JoinHook:
    """main_hook() shadows one iteration's collectives; post_hook(is_last_joiner)
    runs once every rank has joined."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner):
        pass


class _JoinConfig:
    __slots__ = ("enable", "throw_on_early_termination", "is_first_joinable")

    def __init__(self, enable=False, throw_on_early_termination=False, is_first_joinable=False):
        self.enable = enable
        self.throw_on_early_termination = throw_on_early_termination
        self.is_first_joinable = is_first_joinable


class Joinable:
    """A class that takes part in Join: join_hook(**kwargs) -> JoinHook and the
    group the context's own collectives use (join_process_group; None: the
    default group). Call Joinable.__init__ from your constructor."""

    def __init__(self):
        self._join_config = _JoinConfig()

    def join_hook(self, **kwargs):
        raise NotImplementedError

    @property
    def join_device(self):
        return "cpu"

    @property
    def join_process_group(self):
        return None


def count_over(group, value):
    """The sum over `group` of every rank's `value` (an int): the join protocol's counts."""
    x = np.array([value], dtype=np.int64)
    _api.all_reduce(x, group=group)
    return int(x[0])


class Join:
    """torch.distributed.algorithms.join.Join: runs the joinables' hooks after this
    rank's loop ends, until every rank's has."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = enable
        self._throw = throw_on_early_termination
        groups = {id(j.join_process_group) for j in self._joinables}
        if len(groups) != 1:
            raise ValueError("Using join context manager with multiple process groups")
        self._group = self._joinables[0].join_process_group
        for i, j in enumerate(self._joinables):
            if not hasattr(j, "_join_config"):
                raise TypeError(f"{type(j).__name__} must call Joinable.__init__ in its constructor")
            j._join_config = _JoinConfig(enable, throw_on_early_termination, i == 0)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        try:
            if not self._enable or kind is not None:
                return  # an exception goes on as it is
            is_last_joiner, rounds = True, 0
            while True:
                if rounds == 1000:
                    warnings.warn(f"rank {_api.get_rank(self._group)} has at least 1000 fewer inputs than "
                                  "other ranks still active: uneven inputs this skewed slow training")
                if count_over(self._group, 0) == 0:
                    break
                if self._throw:
                    count_over(self._group, 1)  # tells the active ranks, in their notify_join_context
                    raise RuntimeError(f"Rank {_api.get_rank(self._group)} exhausted all inputs.")
                for hook in self._join_hooks:
                    hook.main_hook()
                is_last_joiner = False
                rounds += 1
            for hook in self._join_hooks:
                hook.post_hook(is_last_joiner)
        finally:
            for j in self._joinables:
                j._join_config = _JoinConfig()

    @staticmethod
    def notify_join_context(joinable):
        """Called by a joinable before each iteration's collectives: this rank has not
        joined. Raises RuntimeError on every rank, with throw_on_early_termination, once
        one has run out of inputs."""
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        count_over(joinable.join_process_group, 1)
        if config.throw_on_early_termination and count_over(joinable.join_process_group, 0):
            raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return None
