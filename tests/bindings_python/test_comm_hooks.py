"""Communication hooks with futures: distc.Future on its own; a Python hook on
the reducer (NumPy) that chains an allreduce and an allgather; and, against
torch's DDP over gloo on the same model and data, a custom hook written both
ways, distc's ports of torch's fp16/bf16 hooks, and PowerSGD (torch's own
powerSGD_hook and PowerSGDState given to distc's DDP, and distc's
PowerSGDState), 2 and 4 ranks.

Tolerance: as test_torch_ddp.py (rtol 1e-5, atol 1e-6) for hooks that
average float32 gradients; PowerSGD multiplies and orthogonalizes the same
matrices with the same random start (the same seeds through torch's
generator), so only the allreduces' summation order differs, which
Gram-Schmidt and the low-rank products amplify a little: rtol 1e-4,
atol 1e-5. fp16/bf16: the rounding of the compressed sums (rtol 1e-3 / 1e-2)."""
import functools
import threading

import numpy as np
import pytest
import torch
import torch.distributed
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as torch_psgd

import distc
import distc.torch_ddp
from distc import ddp_comm_hooks
from conftest import run_procs, run_procs_env
from test_torch_ddp import STEPS, Net, assert_same_steps, torch_beside, train


# ---------------------------------------------------------------- futures alone

def test_future_then_chains_and_failures():
    f = distc.Future()
    doubled = f.then(lambda x: x.value() * 2)

    def chain(x):  # a distc Future returned is chained
        n = distc.Future()
        threading.Timer(0.05, n.set_result, (x.value() + 1,)).start()
        return n

    plus_one = doubled.then(chain)
    assert not doubled.done()
    with pytest.raises(RuntimeError, match="not completed"):
        doubled.value()
    f.set_result(20)
    assert doubled.wait() == 40 and plus_one.wait() == 41 and plus_one.value() == 41
    with pytest.raises(RuntimeError, match="made by the program"):
        doubled.set_result(1)
    with pytest.raises(Exception):
        f.set_result(2)  # twice
    # A failure reaches the continuation (value() raises there) and the next future.
    e = distc.Future()
    seen = []
    passed_on = e.then(lambda x: seen.append(type(x.exception()).__name__) or x.value())
    e.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        passed_on.wait()
    assert seen == ["ValueError"]

    def raises(x):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        f.then(raises).wait()
    with pytest.raises(TypeError, match="callable"):
        f.then(3)
    # Many continuations of one future; collect_all and wait_all.
    fs = [f.then(lambda x, k=k: x.value() + k) for k in range(20)]
    assert distc.wait_all(fs) == [20 + k for k in range(20)]
    assert [x.value() for x in distc.collect_all(fs).wait()] == [20 + k for k in range(20)]
    # A continuation may block on a later one's result.
    gate, later = distc.Future(), distc.Future()
    blocked = f.then(lambda x: gate.wait() + 1)
    later.then(lambda x: gate.set_result(x.value()))
    later.set_result(5)
    assert blocked.wait() == 6


# ---------------------------------------------------------------- a Python hook on the NumPy reducer

def numpy_hook():
    distc.init_process_group("gloo")
    rank, size = distc.get_rank(), distc.get_world_size()
    from distc import _api
    group = _api._group(None)
    shapes = [(3, 4), (50,), (7, 2), (1,)]
    grads = [np.zeros(s, dtype=np.float64) for s in shapes]
    red = distc.Reducer(group, grads, bucket_cap_mb=200 / 2**20, first_bucket_mb=200 / 2**20)
    seen = []

    def hook(state, bucket):
        assert state == "my state"
        buf = bucket.buffer()
        assert buf.dtype == np.float64 and buf.shape == (sum(int(np.prod(g.shape)) for g in bucket.gradients()),)
        for g, i in zip(bucket.gradients(), bucket.grad_indices()):  # views hold this rank's gradient
            assert g.shape == shapes[i] and np.all(g == rank + i)
        assert bucket.lengths() == [int(np.prod(shapes[i])) for i in bucket.grad_indices()]
        seen.append((bucket.index(), bucket.is_last()))
        count = np.array([buf.size], dtype=np.int64)
        counts = np.zeros(size, dtype=np.int64)

        def gather(fut):
            summed = fut.value()[0]
            assert summed is buf
            return group.all_gather_into_tensor(counts, count, async_op=True).get_future()

        def average(fut):
            assert list(counts) == [buf.size] * size
            return buf / size  # a new array: the reducer copies it into the bucket

        return group.all_reduce(buf, async_op=True).get_future().then(gather).then(average)

    red.register_comm_hook("my state", hook)
    for it in range(3):
        seen.clear()
        red.prepare_for_backward()
        for i in reversed(range(len(grads))):
            grads[i][...] = rank + i
            red.mark_ready(i)
        red.finalize()
        for i, g in enumerate(grads):
            assert np.all(g == (size - 1) / 2 + i), (it, i, g)
        n = red.num_buckets
        assert seen == [(k, k == n - 1) for k in range(n)], seen
    # A hook that raises, and one that returns no future: the call that launched the
    # bucket says so; the next iteration runs.
    for bad, says in ((lambda s, b: 1 / 0, "ZeroDivisionError"), (lambda s, b: "no future", "returns a distc.Future")):
        red.register_comm_hook(None, bad)
        red.prepare_for_backward()
        with pytest.raises(distc.DistcError, match=says):
            for i in reversed(range(len(grads))):
                red.mark_ready(i)
            red.finalize()
        try:
            red.finalize()  # ends the iteration when mark_ready failed
        except distc.DistcError:
            pass
    red.register_comm_hook(None, None)  # the default again
    red.prepare_for_backward()
    for i in reversed(range(len(grads))):
        grads[i][...] = rank
        red.mark_ready(i)
    red.finalize()
    assert all(np.all(g == (size - 1) / 2) for g in grads)
    red.close()
    distc.destroy_process_group()


@pytest.mark.parametrize("size", [2, 3])
def test_python_hook_on_reducer(size):
    run_procs_env(size, numpy_hook, join_s=120)


# ---------------------------------------------------------------- against torch's DDP

def torch_custom_hook(state, bucket):
    """allreduce, then an allgather of each rank's bucket norm (all equal after the sum), then divide."""
    group = torch.distributed.group.WORLD
    size = torch.distributed.get_world_size()
    buf = bucket.buffer()

    def gather(fut):
        norms = [torch.zeros(1) for _ in range(size)]
        torch.distributed.all_gather(norms, buf.norm().reshape(1), group=group, async_op=True).wait()
        assert all(torch.equal(n, norms[0]) for n in norms)
        return buf.div_(size)

    return torch.distributed.all_reduce(buf, group=group, async_op=True).get_future().then(gather)


def distc_custom_hook(group, bucket):
    size = group.size()
    buf = bucket.buffer()
    assert all(p.requires_grad for p in bucket.parameters())

    def gather(fut):
        norms = torch.zeros(size)
        return group.all_gather_into_tensor(norms, buf.norm().reshape(1), async_op=True).get_future().then(
            lambda f: (torch.all(norms == norms[0]) or pytest.fail("norms differ")) and buf.div_(size))

    return group.all_reduce(buf, async_op=True).get_future().then(gather)


def bf16_by_float32(state, bucket):
    buf, size = bucket.buffer(), torch.distributed.get_world_size()
    rounded = buf.to(torch.bfloat16).div_(size).to(torch.float32)
    fut = torch.distributed.all_reduce(rounded, async_op=True).get_future()
    return fut.then(lambda f: buf.copy_(f.value()[0].to(torch.bfloat16)))


def compare(pg, variant):
    rank = pg.rank()
    torch_beside(pg)
    torch.manual_seed(0)
    ref = torch.nn.parallel.DistributedDataParallel(Net())
    torch.manual_seed(0)
    ours = distc.torch_ddp.DistributedDataParallel(Net(), group=pg)
    psgd = dict(matrix_approximation_rank=2, start_powerSGD_iter=3, min_compression_rate=0.5)
    rtol, atol = 1e-5, 1e-6
    if variant == "custom":
        ref.register_comm_hook(None, torch_custom_hook)
        ours.register_comm_hook(pg, distc_custom_hook)
    elif variant in ("fp16", "bf16"):
        # torch's gloo has no bfloat16 (nor does its DDP take the bf16 hook off CUDA): there the
        # reference rounds to bfloat16 as the hook does and sums in float32.
        ref.register_comm_hook(None, default_hooks.fp16_compress_hook if variant == "fp16" else bf16_by_float32)
        ours.register_comm_hook(None, getattr(ddp_comm_hooks, f"{variant}_compress_hook"))  # the Python port
        rtol, atol = (1e-3, 1e-4) if variant == "fp16" else (2e-2, 2e-3)
    elif variant == "powersgd_builtin":
        # distc's PowerSGD in C draws its own random start, so it meets torch's where the start
        # does not matter: at full rank (16 >= every matrix's smaller side) every gradient is
        # compressed exactly, and what error feedback and warm start then do is the same.
        full = dict(matrix_approximation_rank=16, start_powerSGD_iter=3, min_compression_rate=0.5)
        ref.register_comm_hook(torch_psgd.PowerSGDState(None, **full), torch_psgd.powerSGD_hook)
        ours.reducer.register_powersgd(**full)
        rtol, atol = 1e-4, 1e-5
    elif variant.startswith("powersgd"):
        ref.register_comm_hook(torch_psgd.PowerSGDState(None, **psgd), torch_psgd.powerSGD_hook)
        if variant == "powersgd_torch_state":  # torch's hook and state, as a torch user writes them
            ours.register_comm_hook(torch_psgd.PowerSGDState(None, **psgd), torch_psgd.powerSGD_hook)
        else:
            state = ddp_comm_hooks.PowerSGDState(pg, **psgd)
            ours.register_comm_hook(state, ddp_comm_hooks.powerSGD_hook)
        rtol, atol = 1e-4, 1e-5
    want = train(ref, rank, False)
    got = train(ours, rank, False)
    torch.distributed.destroy_process_group()
    assert_same_steps(pg, variant, want, got, rtol, atol)
    if variant == "powersgd":
        rate, before, after = state.compression_stats()
        assert rate > 1 and after < before
    if variant == "powersgd_builtin":
        iterations, before, after = ours.reducer.powersgd_stats()
        assert iterations == STEPS and before > 0 and after > 0


def batched(pg):
    """torch 1.13's batched_powerSGD_hook trips its own assertion (it orthogonalizes a 2-d
    tensor), so distc's port is checked against plain averaging at rank 1 on a model whose
    gradients are rank 1 (the compression is then exact up to rounding), and for ranks agreeing."""
    torch.manual_seed(0)
    ours = distc.torch_ddp.DistributedDataParallel(torch.nn.Linear(16, 16, bias=False), group=pg)
    torch.manual_seed(0)
    plain = distc.torch_ddp.DistributedDataParallel(torch.nn.Linear(16, 16, bias=False), group=pg)
    state = ddp_comm_hooks.PowerSGDState(None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                         use_error_feedback=False, warm_start=False)
    ours.register_comm_hook(state, torch_psgd.batched_powerSGD_hook)  # torch's function: distc's port runs
    u = torch.randn(16, generator=torch.Generator().manual_seed(7))
    for step in range(5):
        for m in (ours, plain):
            m.zero_grad()
            x = u * (1 + step)  # every rank the same direction: the averaged gradient has rank 1
            (m(x.unsqueeze(0)) * (pg.rank() + 1)).sum().backward()
        for a, b in zip(ours.parameters(), plain.parameters()):
            assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-5), (step, (a.grad - b.grad).abs().max())
    assert state.iter == 5 and state.compression_stats()[0] > 1
    flat = torch.cat([p.grad.flatten() for p in ours.parameters()]).numpy().tobytes()
    assert len(set(pg.all_gather_object(flat))) == 1


@pytest.mark.parametrize("size", [2, 3])
def test_batched_powersgd(size):
    run_procs(size, batched, join_s=120)


@pytest.mark.parametrize("variant,size", [("custom", 2), ("custom", 4), ("fp16", 2), ("bf16", 2),
                                          ("powersgd", 2), ("powersgd", 4), ("powersgd_torch_state", 2),
                                          ("powersgd_builtin", 2), ("powersgd_builtin", 4)])
def test_hooks_as_torch(variant, size):
    run_procs(size, functools.partial(compare, variant=variant), join_s=180)
