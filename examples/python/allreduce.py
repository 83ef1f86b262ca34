"""All-reduce of a NumPy array with distc, started by a launcher.

Every rank fills an array with its own values, sums it over all ranks in
place with dist.all_reduce, checks the result against the formula and prints
one line. Run it from the build tree with distc's launcher (it sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which init_process_group's default
env:// rendezvous reads):

    PYTHONPATH=build/python build/distc-run -n 4 /usr/bin/python3 examples/python/allreduce.py
"""
import sys
import time

import numpy as np

import distc as dist


def main():
    t0 = time.perf_counter()
    dist.init_process_group()  # "gloo", env://
    rank, size = dist.get_rank(), dist.get_world_size()
    joined = time.perf_counter()

    n = 1 << 20
    x = np.arange(n, dtype=np.float64) + rank  # rank r holds i + r
    dist.all_reduce(x, op=dist.ReduceOp.SUM)  # in place: x[i] = size * i + (0 + 1 + ... + size-1)
    done = time.perf_counter()

    expected = size * np.arange(n, dtype=np.float64) + size * (size - 1) / 2
    ok = np.array_equal(x, expected)
    print(f"rank {rank} of {size}: allreduce(SUM) of {n} float64 values "
          f"{'ok' if ok else 'WRONG'}: x[:3] = {x[:3].tolist()}, x[-1] = {x[-1]:.0f} "
          f"(joined in {1e3 * (joined - t0):.0f} ms, allreduce {1e3 * (done - joined):.1f} ms)", flush=True)

    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
