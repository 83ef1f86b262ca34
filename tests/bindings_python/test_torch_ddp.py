"""distc's reducer driven from PyTorch's gradient hooks (distc.torch_ddp)
against torch.nn.parallel.DistributedDataParallel over gloo: the same model,
data and seed, 2 ranks, the same weights after every step (an embedding
with sparse=True gives a sparse gradient, reduced by row on both sides).

Tolerance: both average the same float32 gradients; DDP sums them in gloo's
order and divides, distc sums in rank order and divides once per bucket, so
results may differ in the last bits of a step and drift by a few ulps over
the steps: rtol 1e-5, atol 1e-6. With the fp16 hook on both sides the
gradients travel as float16 (rounded identically, then summed in float16 by
gloo and in float32 by distc): rtol 1e-3, atol 1e-4."""
import datetime
import functools
import os

import pytest
import torch
import torch.distributed
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import distc
import distc.torch_ddp
from conftest import free_port, run_procs

STEPS = 8


class Net(torch.nn.Module):
    def __init__(self, unused_branch=False, embedding=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)
        self.unused = torch.nn.Linear(4, 4) if unused_branch else None
        # a sparse gradient: only the rows looked up in this step
        self.emb = torch.nn.Embedding(50, 16, sparse=True) if embedding else None

    def forward(self, x):
        if self.emb is not None:
            x = x + self.emb((x.abs() * 10).long().clamp(0, 49)[:, 0])
        return self.fc2(torch.relu(self.fc1(x)))


def data(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train(model, rank, accumulate, adamw=False):
    # AdamW's weight decay moves a parameter whose grad is 0.0 but not one whose grad is None.
    opt = (torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1) if adamw
           else torch.optim.SGD(model.parameters(), lr=0.1))
    snapshots = []
    for step in range(STEPS):
        opt.zero_grad()
        if accumulate:
            with model.no_sync():
                x, y = data(rank + 10, step)
                torch.nn.functional.mse_loss(model(x), y).backward()
        x, y = data(rank, step)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        snapshots.append([p.detach().clone() for p in model.parameters() if p.requires_grad])
    return snapshots


def torch_beside(pg):
    """torch.distributed's default group (gloo) on the same ranks as distc's `pg`."""
    port = pg.broadcast_object(free_port() if pg.rank() == 0 else None, 0)
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=pg.rank(),
                                         world_size=pg.size(), timeout=datetime.timedelta(seconds=30))


def assert_same_steps(pg, what, want, got, rtol, atol):
    """Every step's weights match torch's within the tolerance; distc's ranks agree bit for bit."""
    for step, (w, g) in enumerate(zip(want, got)):
        for i, (a, b) in enumerate(zip(w, g)):
            assert torch.allclose(a, b, rtol=rtol, atol=atol), \
                f"{what}: step {step} parameter {i}: max diff {(a - b).abs().max().item():.3g}"
    flat = torch.cat([p.flatten() for p in got[-1]]).numpy().tobytes()
    assert len(set(pg.all_gather_object(flat))) == 1, "ranks disagree"


def compare(pg, variant):
    rank = pg.rank()
    torch.manual_seed(rank)  # ranks start different: both must broadcast rank 0's weights
    torch_beside(pg)
    unused, emb = variant in ("unused", "unused_adamw", "static"), variant == "sparse"
    adamw = variant in ("unused_adamw", "static")
    static = variant == "static"  # an unused branch, found once (without find_unused_parameters)
    ref = torch.nn.parallel.DistributedDataParallel(Net(unused, emb), find_unused_parameters=unused and not static,
                                                    static_graph=static)
    if variant in ("fp16", "fp16_hook"):
        ref.register_comm_hook(None, default_hooks.fp16_compress_hook)
    torch.manual_seed(rank)  # rank 0 starts where torch's rank 0 did; the others differ until broadcast
    net = Net(unused, emb)
    ours = distc.torch_ddp.DistributedDataParallel(
        net, group=pg, find_unused_parameters=unused and not static, gradient_as_bucket_view=variant == "view",
        static_graph=static,
        comm_hook="fp16" if variant == "fp16" else None, bucket_cap_mb=0.0002 if variant == "small" else 25,
        first_bucket_mb=0.0002 if variant == "small" else 1)
    if variant == "fp16_hook":  # torch's API and torch's hook function
        ours.register_comm_hook(None, default_hooks.fp16_compress_hook)
        with pytest.raises(RuntimeError, match="once"):
            ours.register_comm_hook(None, default_hooks.fp16_compress_hook)
    want = train(ref, rank, variant == "no_sync", adamw)
    got = train(ours, rank, variant == "no_sync", adamw)
    torch.distributed.destroy_process_group()
    # Unused parameters' grads stay None, as torch's.
    none_ref = [p.grad is None for p in ref.parameters()]
    assert [p.grad is None for p in ours.parameters()] == none_ref
    assert any(none_ref) == unused
    rtol, atol = (1e-3, 1e-4) if variant in ("fp16", "fp16_hook") else (1e-5, 1e-6)
    assert_same_steps(pg, variant, want, got, rtol, atol)
    return ours.reducer.num_buckets


VARIANTS = ["plain", "small", "view", "unused", "unused_adamw", "static", "no_sync", "fp16", "fp16_hook", "sparse"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_weights_as_torch_ddp(variant):
    buckets = run_procs(2, functools.partial(compare, variant=variant), join_s=120)
    if variant == "small":
        assert buckets[0] > 1


BOTH_DDPS = r'''
import os
import torch, torch.distributed as tdist
import distc
from distc.torch_ddp import DistributedDataParallel as DistcDDP
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
distc.init_process_group("gloo")
tdist.init_process_group("gloo", init_method="file://" + os.environ["TORCH_STORE"], rank=rank, world_size=size)
a = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
b = DistcDDP(torch.nn.Linear(8, 4))
for _ in range(3):
    x = torch.randn(4, 8)
    a(x).sum().backward()
    b(x).sum().backward()
print("done", rank)
'''


def test_torch_ddp_and_distc_ddp_exit_cleanly(tmp_path):
    """torch's DDP and distc's in one process, 2 ranks, 20 times: every run exits 0 and
    nothing is terminated at exit (the issue saw 'terminate called without an active
    exception' there)."""
    import subprocess
    import sys
    script = tmp_path / "both.py"
    script.write_text(BOTH_DDPS)
    run = os.path.join(os.environ["DISTC_BUILD"], "distc-run")
    for i in range(20):
        env = dict(os.environ, TORCH_STORE=str(tmp_path / f"store{i}"))
        p = subprocess.run([run, "-n", "2", sys.executable, str(script)], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0 and "terminate" not in p.stderr + p.stdout, \
            f"run {i}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        assert p.stdout.count("done") == 2


class JoinNet(torch.nn.Module):
    """With buffers (batch norm's), which DDP broadcasts before each forward. No bias
    before the batch norm: its gradient would be 0 but for rounding, which AdamW's
    normalisation blows up to whole steps of noise."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32, bias=False)
        self.bn = torch.nn.BatchNorm1d(32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def train_uneven(model, rank, size, adamw, divide):
    opt = (torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1) if adamw
           else torch.optim.SGD(model.parameters(), lr=0.1))
    steps = 6 - rank  # ranks run out of data at different steps; rank 0 has the most
    with model.join(divide_by_initial_world_size=divide):
        for step in range(steps):
            opt.zero_grad()
            x, y = data(rank, step)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    return [t.detach().clone() for t in list(model.parameters()) + list(model.buffers())]


def compare_join(pg, adamw, divide):
    rank, size = pg.rank(), pg.size()
    torch_beside(pg)
    torch.manual_seed(0)
    ref = torch.nn.parallel.DistributedDataParallel(JoinNet())
    torch.manual_seed(0)
    ours = distc.torch_ddp.DistributedDataParallel(JoinNet(), group=pg)
    want = train_uneven(ref, rank, size, adamw, divide)
    got = train_uneven(ours, rank, size, adamw, divide)
    torch.distributed.destroy_process_group()
    for i, (a, b) in enumerate(zip(want, got)):
        assert torch.allclose(a.float(), b.float(), rtol=1e-5, atol=1e-6), \
            f"tensor {i}: max diff {(a.float() - b.float()).abs().max().item():.3g}"
    flat = torch.cat([t.float().flatten() for t in got]).numpy().tobytes()
    assert len(set(pg.all_gather_object(flat))) == 1, "ranks disagree after join"


@pytest.mark.parametrize("size,adamw,divide", [(2, False, True), (2, True, False), (4, False, False),
                                               (4, True, True)])
def test_join_uneven_inputs_as_torch(size, adamw, divide):
    run_procs(size, functools.partial(compare_join, adamw=adamw, divide=divide), join_s=180)


def test_devices_refused_clearly():
    """CPU and CUDA parameters are taken (CUDA runs only where a GPU is); others, or a
    module spread over two devices, are refused with the reason."""
    with distc.ProcessGroup(distc.HashStore(), 0, 1) as pg:
        with pytest.raises(ValueError, match="CPU or CUDA"):
            distc.torch_ddp.DistributedDataParallel(torch.nn.Linear(2, 2, device="meta"), group=pg)
        two = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2, device="meta"))
        with pytest.raises(ValueError, match="several devices"):
            distc.torch_ddp.DistributedDataParallel(two, group=pg)
