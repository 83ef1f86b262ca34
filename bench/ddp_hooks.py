"""DDP communication hooks, distc's torch_ddp against torch's DDP over gloo on
the same model, data and ranks: time per training step (forward, backward
with the bucket reductions, SGD step) with the default allreduce, float16
compression and PowerSGD (rank 4, compressing from step 2: `powersgd` is
distc.ddp_comm_hooks' Python port, `powersgd_c` the reducer's built-in),
rounds of each interleaved; the slowest rank's median. Run under a launcher:

    build/distc-run -n 2 /usr/bin/python3 bench/ddp_hooks.py [--width 1024] [--layers 4] [--rounds 5] [--iters 5]

or, as root, over two fake hosts (tests/netns/hosts.sh: network namespaces
joined by veth) whose links tc shapes to RATE, where compression pays:

    PYTHONPATH=build/python /usr/bin/python3 bench/ddp_hooks.py --hosts-rate 1gbit
"""
import argparse
import datetime
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as tdist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as torch_psgd

import distc
import distc.torch_ddp
from distc import ddp_comm_hooks


def model(width, layers):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--rank", type=int, default=4, help="PowerSGD's matrix_approximation_rank")
    # torch's powerSGD_hook starts its second and third allreduce from future
    # callbacks, which gloo may run in a different order on different ranks when
    # a model has several buckets: the job then dies in gloo ("op.preamble.length
    # <= op.nbytes"). distc hands a hook one bucket after another, so its PowerSGD
    # cannot; torch's row runs only when asked for.
    ap.add_argument("--torch-powersgd", action="store_true", help="also time torch's PowerSGD (may abort)")
    ap.add_argument("--hosts-rate", help="one rank on each of two fake hosts, links shaped to this tc rate")
    a = ap.parse_args()
    if a.hosts_rate:
        return on_two_hosts(a.hosts_rate)
    torch.set_num_threads(1)
    distc.init_process_group("gloo")
    pg = distc.new_group(list(range(distc.get_world_size())))
    rank, size = distc.get_rank(), distc.get_world_size()
    # torch meets through a file (its tcp:// on another port waits for an agent's store under a launcher)
    path = [tempfile.mktemp(prefix="ddp_hooks_") if rank == 0 else None]
    distc.broadcast_object_list(path, src=0)
    tdist.init_process_group("gloo", init_method="file://" + path[0], rank=rank, world_size=size,
                             timeout=datetime.timedelta(seconds=120))
    psgd = dict(matrix_approximation_rank=a.rank, start_powerSGD_iter=2, min_compression_rate=2)

    def torch_ddp(hook):
        m = torch.nn.parallel.DistributedDataParallel(model(a.width, a.layers))
        if hook == "fp16":
            m.register_comm_hook(None, default_hooks.fp16_compress_hook)
        elif hook == "powersgd":
            m.register_comm_hook(torch_psgd.PowerSGDState(None, **psgd), torch_psgd.powerSGD_hook)
        return m

    def distc_ddp(hook):
        m = distc.torch_ddp.DistributedDataParallel(model(a.width, a.layers), group=pg)
        if hook == "fp16":
            m.register_comm_hook(None, default_hooks.fp16_compress_hook)  # runs as the built-in hook
        elif hook == "powersgd":
            m._psgd = ddp_comm_hooks.PowerSGDState(pg, **psgd)
            m.register_comm_hook(m._psgd, ddp_comm_hooks.powerSGD_hook)
        elif hook == "powersgd_c":  # the built-in, in C
            m.reducer.register_powersgd(**psgd)
        return m

    hooks = ["allreduce", "fp16", "powersgd", "powersgd_c"]
    cases = [(lib, h) for h in hooks for lib in ("torch", "distc")
             if lib == "distc" or h == "allreduce" or h == "fp16" or (h == "powersgd" and a.torch_powersgd)]
    models = {(lib, h): (torch_ddp if lib == "torch" else distc_ddp)(h) for lib, h in cases}
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in models.items()}
    x = torch.randn(a.batch, a.width, generator=torch.Generator().manual_seed(rank))

    def step(k):
        opts[k].zero_grad()
        models[k](x).square().mean().backward()
        opts[k].step()

    for k in cases:  # warm up; PowerSGD compresses from its third step
        for _ in range(3):
            step(k)
    times = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k in cases:
            distc.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iters):
                step(k)
            times[k].append((time.perf_counter() - t0) / a.iters * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    slowest = [None] * size if rank == 0 else None
    distc.gather_object(med, slowest, dst=0)
    if rank == 0:
        worst = {k: max(m[k] for m in slowest) for k in cases}
        params = sum(p.numel() for p in models[cases[0]].parameters())
        rate = models[("distc", "powersgd")]._psgd.compression_stats()[0]
        print(f"# {size} ranks, {a.layers} x Linear({a.width}, {a.width}): {params / 1e6:.1f} M float32 "
              f"parameters, batch {a.batch}; PowerSGD rank {a.rank} (compression {rate:.0f}x); "
              f"ms per step, slowest rank's median of {a.rounds} rounds of {a.iters}")
        print(f"{'hook':<12} {'torch DDP':>10} {'distc DDP':>10} {'distc/torch':>12} {'vs allreduce':>13}")
        for h in hooks:
            d = worst[("distc", h)]
            t = worst.get(("torch", h))
            ts, rs = (f"{t:>10.2f}", f"{d / t:>12.2f}") if t else (f"{'-':>10}", f"{'-':>12}")
            print(f"{h:<12} {ts} {d:>10.2f} {rs} {d / worst[('distc', 'allreduce')]:>13.2f}")
    tdist.destroy_process_group()
    distc.barrier()
    if rank == 0 and os.path.exists(path[0]):
        os.unlink(path[0])
    distc.destroy_process_group()


def on_two_hosts(rate):
    """Runs this benchmark with one rank per fake host: the parent makes the hosts and
    starts a rank in each (torch's gloo told the interface: it would advertise loopback)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hosts import Hosts
    hosts = Hosts(2, rate)
    try:
        args = [a for a in sys.argv[1:] if not a.startswith("--hosts-rate")]
        if "--hosts-rate" in sys.argv:
            i = sys.argv.index("--hosts-rate")
            args = sys.argv[1:i] + sys.argv[i + 2:]
        port = random.randint(20000, 60000)  # in namespaces of their own: nothing else listens there
        env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR=hosts.addr(0), MASTER_PORT=str(port),
                   GLOO_SOCKET_IFNAME="eth0")
        procs = [subprocess.Popen(hosts.wrap(r, [sys.executable, os.path.abspath(__file__)] + args),
                                  env=dict(env, RANK=str(r), LOCAL_RANK="0")) for r in range(2)]
        rcs = [p.wait(timeout=1800) for p in procs]
        print(f"# over two fake hosts, each link shaped to {rate} (tc tbf)")
        return max(rcs)
    finally:
        hosts.close()


if __name__ == "__main__":
    sys.exit(main())
