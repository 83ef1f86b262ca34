"""torch.distributed's functional API over distc's groups.

Ranks given to these functions (src, dst, the ranks of new_group) are global
ranks, as in torch; they are translated into the group's ranks here."""
import atexit
import datetime
import os
import pickle
import warnings

import numpy as np

from . import _distc
from ._group import ProcessGroup
from . import _coalesced
from ._store import as_store
from ._types import ReduceOp

default_pg_timeout = datetime.timedelta(minutes=30)


class GroupMember:
    """GroupMember.WORLD: the default group; NON_GROUP_MEMBER: what new_group gives
    a rank it does not list (collectives on it do nothing and return None, as torch)."""
    WORLD = None

    class _NonMember:
        def __repr__(self):
            return "GroupMember.NON_GROUP_MEMBER"

    NON_GROUP_MEMBER = _NonMember()


_default = None
_groups = []  # groups made by new_group, closed with the default group

# Close the default group while the interpreter is whole: pending work then
# fails (and releases its buffers) before Python starts tearing down.
atexit.register(lambda: destroy_process_group())


def is_available():
    return True


def is_initialized():
    return _default is not None


class Backend(str):
    """A backend's name, lower-cased as torch's Backend("GLOO") is; register_backend
    makes a plugin library a backend of this process."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise TypeError(f"Backend name must be a string, not {type(name).__name__}")
        return super().__new__(cls, name.lower())

    @classmethod
    def register_backend(cls, name, func, extended_api=False, devices=None):
        """torch's Backend.register_backend for distc: `func` is the path of a distc plugin
        library (one exporting distc_backend_plugin_init, see distc/sys/backend.h), loaded
        as backend `name` (distc_plugin_load(3)). distc's backends are C plugins, so a
        Python creator function is refused."""
        if callable(func):
            raise TypeError("distc backends are C plugins: pass the path of the plugin library "
                            "(libdistc-NAME.so), not a creator function")
        if not isinstance(func, (str, os.PathLike)):
            raise TypeError(f"register_backend takes the plugin's path, not {type(func).__name__}")
        _distc.distc_plugin_load(name.lower(), os.fspath(func))
        setattr(cls, name.upper(), name.lower())


def _timeout_from(timeout, pg_options, what):
    """The timeout, with what of torch's pg_options applies: `_timeout` or `timeout`
    (ProcessGroupGloo.Options, ProcessGroupNCCL.Options). Any other option that is set
    is refused: distc would not honour it."""
    if pg_options is None:
        return timeout
    opts = dict(pg_options) if isinstance(pg_options, dict) else {
        k: getattr(pg_options, k) for k in dir(pg_options) if not k.startswith("__") and not callable(
            getattr(pg_options, k, None))}
    t, t2 = opts.pop("_timeout", None), opts.pop("timeout", None)
    t = t if t is not None else t2
    opts.pop("backend", None)  # the options' kind, not an option
    defaults = {"is_high_priority_stream": False, "_devices": [], "_threads": 2}  # torch's defaults
    for k, v in opts.items():
        if k in defaults and (v == defaults[k] or v is None):
            continue
        raise ValueError(f"{what}: pg_options.{k} = {v!r} is not supported by distc "
                         f"(only a timeout applies: pass it as timeout=)")
    if t is not None and timeout is not None and timeout is not default_pg_timeout and t != timeout:
        raise ValueError(f"{what}: timeout={timeout!r} and pg_options' timeout {t!r} disagree")
    return t if t is not None else timeout


def init_process_group(backend="gloo", init_method=None, timeout=default_pg_timeout, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None):
    """Creates the default group: from `store` (a distc Store, a torch.distributed Store,
    or any object with CustomStore's methods) with `rank` and `world_size`, else by
    rendezvous through `init_method` (default env://). Of pg_options only a timeout
    applies; other options that are set raise ValueError."""
    global _default
    if _default is not None:
        raise RuntimeError("init_process_group was already called; call destroy_process_group first")
    timeout = _timeout_from(timeout, pg_options, "init_process_group")
    if store is not None:
        if init_method is not None:
            raise ValueError("init_process_group takes init_method or store, not both")
        if rank < 0 or world_size <= 0:
            raise ValueError("with a store, rank and world_size are required")
        _default = ProcessGroup(as_store(store), rank, world_size, backend=backend, timeout=timeout,
                                group_name=group_name or None)
    else:
        _default = ProcessGroup.from_url(init_method or "env://", rank=rank, world_size=world_size,
                                         backend=backend, timeout=timeout, group_name=group_name or None)
    GroupMember.WORLD = _default


def destroy_process_group(group=None):
    """Closes `group`; without one, the default group and every group from new_group."""
    global _default
    if group is None or group is _default:
        for g in _groups:
            g.close()
        _groups.clear()
        if _default is not None:
            _default.close()
        _default = None
        GroupMember.WORLD = None
    elif group is not GroupMember.NON_GROUP_MEMBER:
        group.close()
        if group in _groups:
            _groups.remove(group)


def _world():
    if _default is None:
        raise RuntimeError("the default process group is not initialized: call distc.init_process_group first")
    return _default


def _group(group):
    if group is None:
        return _world()
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    return group


def _not_member(name):
    warnings.warn(f"{name}: this rank is not a member of the group; nothing was done", stacklevel=3)


def _local(g, global_rank, what):
    if g is _default:
        return global_rank
    r = g.group_rank(global_rank)
    if r < 0:
        raise ValueError(f"{what} {global_rank} is not a member of the group")
    return r


def get_rank(group=None):
    g = _group(group)
    return -1 if g is None else g.rank()


def get_world_size(group=None):
    g = _group(group)
    return -1 if g is None else g.size()


def get_backend(group=None):
    g = _group(group)
    if g is None:
        raise ValueError("this rank is not a member of the group")
    return g.backend()


def get_group_rank(group, global_rank):
    return _group(group).group_rank(global_rank)


def get_global_rank(group, group_rank):
    return _group(group).global_rank(group_rank)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A group of the listed global ranks (all ranks when None); every rank calls it.
    Ranks not listed get GroupMember.NON_GROUP_MEMBER. Of pg_options only a timeout
    applies; other options that are set raise ValueError."""
    w = _world()
    timeout = _timeout_from(timeout, pg_options, "new_group")
    ranks = list(range(w.size())) if ranks is None else sorted(int(r) for r in ranks)
    g = w.new_subgroup(ranks, timeout=timeout, backend=backend)
    if g is None:
        return GroupMember.NON_GROUP_MEMBER
    _groups.append(g)
    return g


def get_process_group_ranks(group):
    """The global ranks of `group`'s members, in group rank order."""
    g = _group(group)
    if g is None:
        raise ValueError("this rank is not a member of the group")
    return [g.global_rank(i) for i in range(g.size())]


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None, pg_options=None):
    """One group per list of global ranks (every rank calls it, with the same lists;
    no rank in two). Returns (this rank's subgroup or None, every subgroup in list
    order: GroupMember.NON_GROUP_MEMBER for those this rank is not in), as torch."""
    seen = set()
    lists = [[int(r) for r in ranks] for ranks in ranks_per_subgroup_list]
    for ranks in lists:
        if not ranks:
            raise ValueError("new_subgroups_by_enumeration: a subgroup has no ranks")
        for r in ranks:
            if r in seen:
                raise ValueError(f"new_subgroups_by_enumeration: rank {r} is in more than one subgroup")
            seen.add(r)
    cur, groups = None, []
    for ranks in lists:
        g = new_group(ranks, timeout=timeout, backend=backend, pg_options=pg_options)
        groups.append(g)
        if g is not GroupMember.NON_GROUP_MEMBER:
            cur = g
    return cur, groups


def new_subgroups(group_size=None, group=None, timeout=None, backend=None, pg_options=None):
    """Splits `group` (default: the world) into consecutive subgroups of `group_size`
    ranks (default: LOCAL_WORLD_SIZE, the ranks of one host under distc-run or
    torchrun). Returns (this rank's subgroup, every subgroup) as torch does."""
    members = get_process_group_ranks(group)
    if group_size is None:
        local = os.environ.get("LOCAL_WORLD_SIZE")
        if not local:
            raise ValueError("new_subgroups: give group_size (LOCAL_WORLD_SIZE is not set)")
        group_size = int(local)
    group_size = int(group_size)
    if group_size <= 0:
        raise ValueError(f"new_subgroups: group_size must be positive, not {group_size}")
    if len(members) % group_size:
        raise ValueError(f"new_subgroups: the group's {len(members)} ranks do not split into groups of "
                         f"{group_size}")
    chunks = [members[i:i + group_size] for i in range(0, len(members), group_size)]
    return new_subgroups_by_enumeration(chunks, timeout=timeout, backend=backend, pg_options=pg_options)


def _call(name, group, fn):
    g = _group(group)
    if g is None:
        _not_member(name)
        return None
    return fn(g)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    return _call("all_reduce", group, lambda g: g.all_reduce(tensor, op, async_op))


def all_reduce_coalesced(tensors, op=ReduceOp.SUM, group=None, async_op=False):
    return _call("all_reduce_coalesced", group, lambda g: g.all_reduce_coalesced(tensors, op, async_op))


def broadcast(tensor, src, group=None, async_op=False):
    return _call("broadcast", group, lambda g: g.broadcast(tensor, _local(g, src, "src"), async_op))


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    return _call("reduce", group, lambda g: g.reduce(tensor, _local(g, dst, "dst"), op, async_op))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    return _call("all_gather", group, lambda g: g.all_gather(tensor_list, tensor, async_op))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    return _call("all_gather_into_tensor", group,
                 lambda g: g.all_gather_into_tensor(output_tensor, input_tensor, async_op))


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    return _call("gather", group, lambda g: g.gather(tensor, gather_list, _local(g, dst, "dst"), async_op))


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    return _call("scatter", group, lambda g: g.scatter(tensor, scatter_list, _local(g, src, "src"), async_op))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    return _call("reduce_scatter", group, lambda g: g.reduce_scatter(output, input_list, op, async_op))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    return _call("reduce_scatter_tensor", group, lambda g: g.reduce_scatter_tensor(output, input, op, async_op))


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    return _call("all_to_all", group, lambda g: g.all_to_all(output_tensor_list, input_tensor_list, async_op))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    return _call("all_to_all_single", group, lambda g: g.all_to_all_single(
        output, input, output_split_sizes, input_split_sizes, async_op))


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None, async_op=False):
    """output_tensor_lists[r][j] gets rank r's input_tensor_list[j]: one gather of all
    the tensors packed together."""
    return _call("all_gather_coalesced", group, lambda g: _coalesced.all_gather_coalesced(
        g, output_tensor_lists, input_tensor_list, async_op))


def all_gather_into_tensor_coalesced(output_tensors, input_tensors, group=None, async_op=False):
    """all_gather_into_tensor of each pair (outputs[j] <- every rank's inputs[j]) as one operation."""
    return _call("all_gather_into_tensor_coalesced", group, lambda g: _coalesced.all_gather_into_tensor_coalesced(
        g, output_tensors, input_tensors, async_op))


def reduce_scatter_tensor_coalesced(output_tensors, input_tensors, op=ReduceOp.SUM, group=None, async_op=False):
    """reduce_scatter_tensor of each pair as one operation."""
    return _call("reduce_scatter_tensor_coalesced", group, lambda g: _coalesced.reduce_scatter_tensor_coalesced(
        g, output_tensors, input_tensors, op, async_op))


def barrier(group=None, async_op=False, device_ids=None):
    return _call("barrier", group, lambda g: g.barrier(async_op))


def dump_trace(dir):
    """Writes every live group's flight recorder into the directory `dir`, one file
    per process (distc_trace_dump_all(3)); `distc-trace DIR` names the rank at fault."""
    _distc.distc_trace_dump_all(str(dir))


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    return _call("monitored_barrier", group, lambda g: g.monitored_barrier(timeout, wait_all_ranks))


def send(tensor, dst, group=None, tag=0):
    _call("send", group, lambda g: g.send(tensor, _local(g, dst, "dst"), tag))


def recv(tensor, src=None, group=None, tag=0):
    """Receives into `tensor`; returns the sender's global rank."""
    def run(g):
        r = g.recv(tensor, None if src is None else _local(g, src, "src"), tag)
        return r if g is _default else g.global_rank(r)
    return _call("recv", group, run)


def isend(tensor, dst, group=None, tag=0):
    return _call("isend", group, lambda g: g.send(tensor, _local(g, dst, "dst"), tag, async_op=True))


def irecv(tensor, src=None, group=None, tag=0):
    return _call("irecv", group, lambda g: g.recv(tensor, None if src is None else _local(g, src, "src"), tag,
                                                  async_op=True))


class P2POp:
    """One send or receive for batch_isend_irecv: P2POp(distc.isend, tensor, peer)."""

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if op not in (isend, irecv):
            raise ValueError("P2POp's op must be distc.isend or distc.irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag

    def as_tuple(self, g):
        return (0 if self.op is isend else 1, self.tensor, _local(g, self.peer, "peer"), self.tag)


def batch_isend_irecv(p2p_op_list):
    """Posts all sends and receives at once; returns a list with one Work covering them."""
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv needs at least one P2POp")
    groups = {id(_group(o.group)) for o in p2p_op_list}
    if len(groups) != 1:
        raise ValueError("batch_isend_irecv: every P2POp must use the same group")
    g = _group(p2p_op_list[0].group)
    if g is None:
        _not_member("batch_isend_irecv")
        return []
    return [g.batch_isend_irecv(p2p_op_list)]


def _fill(lst, values, name):
    # As torch: one slot per rank, filled in place; slots past the world size are left alone.
    if len(lst) < len(values):
        raise ValueError(f"{name}: the list has {len(lst)} slots for {len(values)} ranks")
    lst[:len(values)] = values


# ---- object collectives (pickle: unpickling data from untrusted peers can run arbitrary code)

def all_gather_object(object_list, obj, group=None):
    """Fills object_list with every rank's `obj`. Uses pickle: only for trusted peers."""
    g = _group(group)
    if g is None:
        return _not_member("all_gather_object")
    _fill(object_list, g.all_gather_object(obj), "all_gather_object")


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """Fills object_gather_list on `dst` with every rank's `obj`. Uses pickle: only for trusted peers."""
    g = _group(group)
    if g is None:
        return _not_member("gather_object")
    d = _local(g, dst, "dst")
    if g.rank() == d and object_gather_list is None:
        raise ValueError("gather_object: the destination rank needs an object_gather_list")
    out = g.gather_object(obj, d)
    if out is not None:
        _fill(object_gather_list, out, "gather_object")


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Replaces object_list's items with `src`'s. Uses pickle: only for trusted peers."""
    g = _group(group)
    if g is None:
        return _not_member("broadcast_object_list")
    s = _local(g, src, "src")
    out = g.broadcast_object(list(object_list) if g.rank() == s else None, s)
    if len(out) != len(object_list):
        raise ValueError(f"broadcast_object_list: rank {src} sent {len(out)} objects, this rank's list "
                         f"has {len(object_list)}")
    object_list[:] = out


def scatter_object_list(scatter_object_output_list, scatter_object_input_list, src=0, group=None):
    """scatter_object_output_list[0] gets `src`'s input list item for this rank.
    Uses pickle: only for trusted peers."""
    g = _group(group)
    if g is None:
        return _not_member("scatter_object_list")
    s = _local(g, src, "src")
    if not scatter_object_output_list:
        raise ValueError("scatter_object_list needs an output list of at least one element")
    scatter_object_output_list[0] = g.scatter_object(
        list(scatter_object_input_list) if g.rank() == s else None, s)


def send_object_list(object_list, dst, group=None, device=None):
    """Sends the objects of `object_list` to global rank `dst` (a recv_object_list there
    receives them): their sizes, then their bytes. Uses pickle: only for trusted peers."""
    g = _group(group)
    if g is None:
        return _not_member("send_object_list")
    d = _local(g, dst, "dst")
    blobs = [pickle.dumps(o) for o in object_list]
    sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    g.send(sizes, d)
    if sizes.sum():
        g.send(np.frombuffer(b"".join(blobs), dtype=np.uint8).copy(), d)


def recv_object_list(object_list, src=None, group=None, device=None):
    """Fills `object_list` in place with the objects a send_object_list of as many
    objects sent (from global rank `src`, or any rank); returns the sender's global
    rank. Uses pickle: only for trusted peers."""
    g = _group(group)
    if g is None:
        _not_member("recv_object_list")
        return -1
    sizes = np.zeros(len(object_list), dtype=np.int64)
    sender = g.recv(sizes, None if src is None else _local(g, src, "src"))
    data = np.empty(int(sizes.sum()), dtype=np.uint8)
    if data.size:
        g.recv(data, sender)
    at = 0
    for i, n in enumerate(sizes):
        object_list[i] = pickle.loads(data[at:at + int(n)].tobytes())
        at += int(n)
    return sender if g is _default else g.global_rank(sender)
