"""torch.distributed's functional API: init_process_group by every init method,
queries, new_group with global ranks, p2p and object collectives, destroy."""
import datetime
import os
import warnings

import numpy as np
import pytest
import torch

import distc as dist
from conftest import free_port, run_procs_env


def program():
    """What a torch.distributed user writes, with distc."""
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    r, n = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and dist.get_backend() == "gloo"
    t = torch.tensor([float(r + 1)])
    dist.all_reduce(t)
    assert t.item() == n * (n + 1) / 2
    avg = np.array([r * 2.0])
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    assert avg[0] == n - 1
    pre = np.array([1.0])
    dist.all_reduce(pre, op=dist.premul_sum(0.5))
    assert pre[0] == n / 2
    b = np.array([r])
    dist.broadcast(b, src=n - 1)
    assert b[0] == n - 1
    # new_group with global ranks; src/dst are global ranks too
    odd = dist.new_group([q for q in range(n) if q % 2])
    if r % 2:
        assert dist.get_rank(odd) == r // 2
        x = np.array([r])
        dist.broadcast(x, src=n - 1 if (n - 1) % 2 else n - 2, group=odd)
        assert x[0] % 2 == 1
        assert dist.get_global_rank(odd, 0) == 1 and dist.get_group_rank(odd, 1) == 0
    else:
        assert odd is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(odd) == -1
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert dist.all_reduce(np.zeros(1), group=odd) is None
        assert "not a member" in str(w[0].message)
    # p2p: a ring with isend/irecv, and P2POp batches
    nxt, prv = (r + 1) % n, (r - 1) % n
    got = np.zeros(2)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, np.full(2, float(r)), nxt),
                                   dist.P2POp(dist.irecv, got, prv)])
    for q in reqs:
        q.wait()
    assert got.tolist() == [prv, prv]
    # tags keep the any-source receives apart from the ring's messages
    if r == 0:
        srcs = sorted(dist.recv(np.zeros(1), tag=2) for _ in range(n - 1))
        assert srcs == list(range(1, n))
    else:
        dist.send(np.ones(1), dst=0, tag=2)
    req = dist.isend(np.full(3, 7), dst=nxt, tag=1) if n > 1 else None
    if n > 1:
        buf = np.zeros(3, dtype=np.int64)
        dist.irecv(buf, src=prv, tag=1).wait()
        req.wait()
        assert buf.tolist() == [7, 7, 7]
    # object collectives
    objs = [None] * n
    dist.all_gather_object(objs, {"r": r})
    assert objs == [{"r": q} for q in range(n)]
    gathered = [None] * n if r == 0 else None
    dist.gather_object(("x", r), gathered, dst=0)
    if r == 0:
        assert gathered == [("x", q) for q in range(n)]
    lst = [r, "a", None] if r == 0 else [None, None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "a", None]
    out = [None]
    dist.scatter_object_list(out, [{"to": q} for q in range(n)] if r == 0 else None, src=0)
    assert out == [{"to": r}]
    dist.barrier()
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
    work = dist.all_reduce(np.ones(4), async_op=True)
    assert work.wait()
    dist.destroy_process_group()
    assert not dist.is_initialized()
    return r


@pytest.mark.parametrize("size", [2, 4])
def test_torch_style_program(size):
    assert run_procs_env(size, program) == list(range(size))


def test_init_methods_single_rank(tmp_path):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    assert dist.get_world_size() == 1
    with pytest.raises(RuntimeError, match="already"):
        dist.init_process_group("gloo", init_method="env://")
    dist.destroy_process_group()
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rv", rank=0, world_size=1)
    dist.destroy_process_group()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    a = np.ones(2)
    dist.all_reduce(a)
    dist.destroy_process_group()


def test_errors_without_a_group():
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(np.zeros(1))
    with pytest.raises(ValueError, match="rank and world_size"):
        dist.init_process_group("gloo", store=dist.HashStore())
    with pytest.raises(ValueError, match="not both"):
        dist.init_process_group("gloo", store=dist.HashStore(), init_method="env://", rank=0, world_size=1)
    with pytest.raises(dist.DistcInvalidArgument):
        dist.init_process_group("gloo", init_method="bogus://x", rank=0, world_size=1)
    env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k in os.environ}
    try:
        with pytest.raises(dist.DistcInvalidArgument, match="RANK|WORLD_SIZE|MASTER"):
            dist.init_process_group("gloo")
    finally:
        os.environ.update(env)
    with pytest.raises(dist.DistcError, match="backend|nope"):
        dist.init_process_group("nope", store=dist.HashStore(), rank=0, world_size=1)
    assert not dist.is_initialized()


def test_not_a_member_of_a_global_rank():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    with pytest.raises(ValueError):
        dist.P2POp(print, np.zeros(1), 0)
    g = dist.new_group([0])
    with pytest.raises(ValueError, match="not a member"):
        dist.broadcast(np.zeros(1), src=3, group=g)
    dist.destroy_process_group()
