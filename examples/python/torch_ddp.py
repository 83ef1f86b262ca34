"""A PyTorch model trained data-parallel with distc instead of torch's DDP.

distc.torch_ddp.DistributedDataParallel wraps the model as torch's DDP does:
rank 0's weights are broadcast, and gradients are averaged over ranks by
distc's reducer while backward runs. Each rank trains on its own shard;
they end with the same weights. Run from the build tree:

    PYTHONPATH=build/python build/distc-run -n 2 /usr/bin/python3 examples/python/torch_ddp.py
"""
import hashlib

import torch

import distc as dist
from distc.torch_ddp import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")  # env://, as distc-run or torchrun provide
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # different starts: DDP broadcasts rank 0's weights
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = (x[:, :1] * 2 - x[:, 1:2]).tanh()  # the function to learn
    shard = slice(rank, None, size)
    for step in range(201):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
        loss.backward()  # gradients are averaged over ranks when this returns
        opt.step()
        if step % 50 == 0:
            print(f"rank {rank}/{size} step {step:3d} loss {loss.item():.5f}", flush=True)
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
    same = len(set(dist.GroupMember.WORLD.all_gather_object(digest))) == 1
    print(f"rank {rank}/{size} weights {digest}; identical on all ranks: {same}", flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
