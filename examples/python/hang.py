"""A job that hangs, and the flight recorder that says why.

The last rank (3 of 4) skips the fourth all_reduce (a bug of the kind that stops real
jobs: a condition only one rank takes), then is busy elsewhere. The others
wait in their sixth until the timeout, write their recent operations into
DISTC_TRACE_DIR by themselves, and distc-trace names the rank and the
operation:

    mkdir -p /tmp/trace
    DISTC_TRACE_DIR=/tmp/trace PYTHONPATH=build/python \\
        build/distc-run -n 4 /usr/bin/python3 examples/python/hang.py
    tools/distc-trace /tmp/trace
"""
import datetime
import os
import time

import numpy as np

import distc as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    rank, last = dist.get_rank(), dist.get_world_size() - 1
    x = np.ones(1024, dtype=np.float32)
    try:
        for step in range(6):
            if rank == last and step == 3:
                continue  # the bug
            dist.all_reduce(x)
        if rank == last:
            time.sleep(5)  # busy elsewhere: the others wait for it in vain
            dist.dump_trace(os.environ.get("DISTC_TRACE_DIR", "."))
        print("rank %d: done" % rank)
    except dist.DistcError as e:
        print("rank %d: %s" % (rank, e))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
