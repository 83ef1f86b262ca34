"""The torch.distributed functions distc added for parity, each against torch
(gloo, Debian's 1.13) in the same processes, 2 and 4 ranks: what torch 1.13
has is compared with torch's own result; what it lacks (send_object_list,
the tensor-coalesced forms) with the values it must give; torch's
new_subgroups, which wants CUDA, with the new_group calls it makes."""
import datetime
import os

import numpy as np
import pytest
import torch
import torch.distributed as tdist

import distc
from distc._store import as_store
from conftest import free_port, run_procs_env


def both(rank, size):
    distc.init_process_group("gloo")  # env:// from the spawned environment
    ports = [free_port() if rank == 0 else 0]
    distc.broadcast_object_list(ports, src=0)
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{ports[0]}", rank=rank, world_size=size,
                             timeout=datetime.timedelta(seconds=30))


def parity():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    both(rank, size)
    # get_process_group_ranks and new_subgroups, against torch's (whose new_subgroups
    # needs CUDA: its groups are made here with new_group, as it makes them).
    assert distc.get_process_group_ranks(None) == tdist.get_process_group_ranks(tdist.group.WORLD)
    cur, subs = distc.new_subgroups(group_size=2)
    tcur = None
    for first in range(0, size, 2):
        g = tdist.new_group(list(range(first, first + 2)))
        if rank in (first, first + 1):
            tcur = g
    assert distc.get_process_group_ranks(cur) == tdist.get_process_group_ranks(tcur)
    assert distc.get_rank(cur) == tdist.get_rank(tcur) and len(subs) == size // 2
    assert sum(g is not distc.GroupMember.NON_GROUP_MEMBER for g in subs) == 1
    x = torch.full((3,), float(rank))
    distc.all_reduce(x, group=cur)
    y = torch.full((3,), float(rank))
    tdist.all_reduce(y, group=tcur)
    assert torch.equal(x, y)
    # by enumeration: odd and even ranks
    evens, odds = list(range(0, size, 2)), list(range(1, size, 2))
    ecur, _ = distc.new_subgroups_by_enumeration([evens, odds])
    assert distc.get_process_group_ranks(ecur) == (evens if rank % 2 == 0 else odds)
    with pytest.raises(ValueError, match="more than one subgroup"):
        distc.new_subgroups_by_enumeration([[0, 1], [1]])
    with pytest.raises(ValueError, match="do not split"):
        distc.new_subgroups(group_size=3)
    # all_gather_coalesced (torch 1.13's gloo has it)
    ins = [torch.arange(4, dtype=torch.float32) + 10 * rank, torch.arange(3, dtype=torch.float32) - rank]
    outs = [[torch.empty(4), torch.empty(3)] for _ in range(size)]
    touts = [[torch.empty(4), torch.empty(3)] for _ in range(size)]
    distc.all_gather_coalesced(outs, ins)
    tdist.all_gather_coalesced(touts, ins)
    assert all(torch.equal(a, b) for o, t in zip(outs, touts) for a, b in zip(o, t))
    outs2 = [[torch.empty(4), torch.empty(3)] for _ in range(size)]
    w = distc.all_gather_coalesced(outs2, ins, async_op=True)
    assert w.wait() and all(torch.equal(a, b) for o, t in zip(outs2, touts) for a, b in zip(o, t))
    # the tensor-coalesced forms (torch 1.13's gloo has neither): against their definition
    gi = [torch.arange(2, dtype=torch.int64) + rank, torch.tensor([rank * 7], dtype=torch.int64)]
    go = [torch.empty(2 * size, dtype=torch.int64), torch.empty(size, dtype=torch.int64)]
    distc.all_gather_into_tensor_coalesced(go, gi)
    assert go[0].tolist() == [v for r in range(size) for v in (r, r + 1)]
    assert go[1].tolist() == [7 * r for r in range(size)]
    ri = [torch.arange(2 * size, dtype=torch.float64) * (rank + 1), torch.ones(size, dtype=torch.float64)]
    ro = [torch.empty(2, dtype=torch.float64), torch.empty(1, dtype=torch.float64)]
    distc.reduce_scatter_tensor_coalesced(ro, ri)
    total = sum(r + 1 for r in range(size))
    assert ro[0].tolist() == [2 * rank * total, (2 * rank + 1) * total] and ro[1].tolist() == [size]
    # what the coalesced forms refuse, on every rank alike
    with pytest.raises(ValueError, match="one dtype"):
        distc.all_gather_coalesced(outs, [ins[0], ins[1].double()])
    with pytest.raises(ValueError, match="output lists"):
        distc.all_gather_coalesced(outs[:1], ins)
    with pytest.raises(ValueError, match="times the group's size"):
        distc.reduce_scatter_tensor_coalesced(ro, [ri[0][:3], ri[1]])
    w = distc.reduce_scatter_tensor_coalesced(ro, ri, async_op=True)
    assert w.wait() and ro[1].tolist() == [size]
    # send_object_list / recv_object_list: a ring
    objs = [{"from": rank}, "x" * rank, None]
    if rank % 2 == 0:
        distc.send_object_list(objs, (rank + 1) % size)
        got = [0, 0, 0]
        sender = distc.recv_object_list(got)
    else:
        got = [0, 0, 0]
        sender = distc.recv_object_list(got, src=(rank - 1) % size)
        distc.send_object_list(objs, (rank + 1) % size)
    prev = (rank - 1) % size
    assert sender == prev and got == [{"from": prev}, "x" * prev, None]
    tdist.destroy_process_group()
    distc.destroy_process_group()


@pytest.mark.parametrize("size", [2, 4])
def test_functions_against_torch(size):
    run_procs_env(size, parity, join_s=180)


def store_main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    port = int(os.environ["MASTER_PORT"])
    # init_process_group(store=<a torch Store>): torch's TCPStore, as a user would pass it.
    st = tdist.TCPStore("127.0.0.1", port, size, rank == 0, timeout=datetime.timedelta(seconds=30))
    distc.init_process_group("gloo", store=st, rank=rank, world_size=size)
    x = np.full(4, rank + 1, dtype=np.float32)
    distc.all_reduce(x)
    assert x.tolist() == [size * (size + 1) / 2] * 4
    # pg_options: what applies is taken, the rest refused.
    opts = tdist.ProcessGroupGloo._Options()
    opts._timeout = datetime.timedelta(seconds=7)
    g = distc.new_group(pg_options=opts)
    assert g.timeout() == datetime.timedelta(seconds=7)
    opts._threads = 8
    with pytest.raises(ValueError, match="_threads"):
        distc.new_group(pg_options=opts)
    with pytest.raises(ValueError, match="disagree"):
        distc.new_group(timeout=datetime.timedelta(seconds=3), pg_options={"timeout": datetime.timedelta(seconds=4)})
    assert distc.new_group(pg_options={"timeout": datetime.timedelta(seconds=4)}).timeout().total_seconds() == 4
    # A torch store's timeout is a TimeoutError through distc, as distc's own stores'.
    ds = as_store(tdist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30)))
    ds.set_timeout(0.2)
    with pytest.raises(TimeoutError):
        ds.get("never-set")
    distc.destroy_process_group()


def test_torch_store_and_pg_options():
    run_procs_env(2, store_main, join_s=120)


def test_torch_store_check_without_torch_check(tmp_path):
    """torch 1.13's stores have no check(), which group creation uses while it
    waits (seen as an AttributeError in a slow run): the adapter answers it
    through compare_set, changing nothing."""
    import torch.distributed as tdist
    tcp = tdist.TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=5), wait_for_workers=False)
    for torch_store in (tcp, tdist.FileStore(str(tmp_path / "fs"), 1)):
        store = distc._store.as_store(torch_store)
        assert store.check(["k"]) is False
        store.set("k", b"v")
        assert store.check(["k"]) is True
        assert store.check(["k", "other"]) is False
        assert store.get("k") == b"v" and torch_store.num_keys() == 1  # check made no key


def test_torch_store_survives_a_wait_that_times_out():
    """A torch TCPStore client whose own wait runs out reads the server's late
    answer as its next request's (CI saw group creation fail with "Socket
    Timeout" after distc's short watchful waits). Through the adapter, waits and
    gets that time out leave the client as good as new."""
    server = tdist.TCPStore("127.0.0.1", 0, 2, True, datetime.timedelta(seconds=5), wait_for_workers=False)
    client = tdist.TCPStore("127.0.0.1", server.port, 2, False, datetime.timedelta(seconds=5))
    store = as_store(client)
    store.set_timeout(0.05)
    for _ in range(3):
        with pytest.raises(TimeoutError):
            store.wait(["late"])
        with pytest.raises(TimeoutError):
            store.get("late")
    server.set("late", b"now")
    assert store.get("late") == b"now"
    assert store.check(["late"]) and not store.check(["late", "never"])
    assert store.add("n", 2) == 2 and client.add("n", 1) == 3
    store.wait(["late"], timeout=0.001)  # present: no time needed
    assert client.get("late") == b"now"


def test_register_backend():
    plugin = os.path.join(os.environ["DISTC_BUILD"], "tests", "plugins", "libdistc-looptest.so")
    with pytest.raises(TypeError, match="C plugins"):
        distc.Backend.register_backend("pyfunc", lambda *a: None)
    distc.Backend.register_backend("pyloop", plugin)
    assert distc.Backend.PYLOOP == "pyloop" and distc.Backend("GLOO") == "gloo"
    with distc.ProcessGroup(distc.HashStore(), 0, 1, backend="pyloop") as g:
        assert g.backend() == "pyloop"
        x = np.ones(3, dtype=np.float32)
        g.all_reduce(x)
        assert x.tolist() == [1, 1, 1]
    with pytest.raises(distc.DistcStateError):
        distc.Backend.register_backend("pyloop", plugin)
    with pytest.raises(distc.DistcNotFound):
        distc.Backend.register_backend("other", "/nonexistent/libx.so")
