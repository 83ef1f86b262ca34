"""Data-parallel training of a linear regression in NumPy, with distc.

Every rank builds the same deterministic dataset (y = X @ w_true + b_true +
noise) and keeps its shard of it (rows rank, rank + size, ...). All ranks start
from rank 0's parameters (broadcast). Each step, a rank computes the gradient
of the mean squared error on a minibatch of its shard, the ranks average the
gradients with all_reduce(op=ReduceOp.AVG), and every rank applies the same
update, so the parameters stay identical everywhere. Every few steps the
loss on the whole dataset (each shard's sum of squared errors, summed with
all_reduce) is printed by every rank: the same numbers on every rank, going
down to the noise level. Run it from the build tree:

    PYTHONPATH=build/python build/distc-run -n 4 /usr/bin/python3 examples/python/train_linear.py

Options: --steps N (default 300), --lr LR (default 0.03), --batch B (per rank, default 32),
--print-every K (default 25).
"""
import argparse
import hashlib
import sys

import numpy as np

import distc as dist

SAMPLES, FEATURES, NOISE = 4096, 8, 0.01


def dataset():
    """The full dataset, the same on every rank (fixed seed)."""
    rng = np.random.default_rng(2024)
    x = rng.standard_normal((SAMPLES, FEATURES))
    w_true = np.linspace(-2.0, 2.0, FEATURES)
    b_true = 0.5
    y = x @ w_true + b_true + NOISE * rng.standard_normal(SAMPLES)
    return x, y, w_true, b_true


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.03)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--print-every", type=int, default=25)
    args = ap.parse_args()

    dist.init_process_group()  # "gloo", env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
    rank, size = dist.get_rank(), dist.get_world_size()

    x, y, w_true, b_true = dataset()
    x, y = x[rank::size], y[rank::size]  # this rank's shard
    n_total = np.array([len(y)], dtype=np.int64)
    dist.all_reduce(n_total)  # SUM: the whole dataset's size

    # params = [w..., b]: rank 0 draws them, every rank receives rank 0's
    params = np.random.default_rng(rank).standard_normal(FEATURES + 1)
    dist.broadcast(params, src=0)

    def global_loss():
        err = x @ params[:-1] + params[-1] - y
        sse = np.array([err @ err])
        dist.all_reduce(sse)  # SUM of every shard's squared errors
        return sse[0] / n_total[0]

    rng = np.random.default_rng(1000 + rank)  # each rank samples its own minibatches
    grad = np.empty_like(params)
    first = global_loss()
    print(f"rank {rank}/{size} step {0:4d} loss {first:.9e}", flush=True)
    for step in range(1, args.steps + 1):
        idx = rng.integers(0, len(y), args.batch)
        xb, yb = x[idx], y[idx]
        err = xb @ params[:-1] + params[-1] - yb
        grad[:-1] = 2.0 * xb.T @ err / len(yb)
        grad[-1] = 2.0 * err.mean()
        dist.all_reduce(grad, op=dist.ReduceOp.AVG)  # the average of the ranks' gradients
        params -= args.lr * grad
        if step % args.print_every == 0 or step == args.steps:
            print(f"rank {rank}/{size} step {step:4d} loss {global_loss():.9e}", flush=True)

    # every rank must hold exactly the same parameters
    digests = [None] * size
    dist.all_gather_object(digests, hashlib.sha256(params.tobytes()).hexdigest())
    same = all(d == digests[0] for d in digests)
    w_err = np.abs(params[:-1] - w_true).max()
    b_err = abs(params[-1] - b_true)
    final = global_loss()
    print(f"rank {rank}/{size} final loss {final:.9e} (from {first:.3e}); max |w - w_true| {w_err:.2e}, "
          f"|b - b_true| {b_err:.2e}; parameters identical on all ranks: {same}", flush=True)
    dist.destroy_process_group()
    return 0 if same and final < first else 1


if __name__ == "__main__":
    sys.exit(main())
