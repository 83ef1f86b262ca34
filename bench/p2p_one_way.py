"""One-way point-to-point over distc's Python binding: rank 0 sends each size
to rank 1, which answers with 4 bytes (as osu_latency's pong, but one-way for
the payload), so a send's single copy in place meets a receiver that copies
alone, where sendrecv (distc-pg-bench) has both ranks copy at once.

    build/distc-run -n 2 /usr/bin/python3 bench/p2p_one_way.py [BUILD_DIR]

Prints, from rank 0, each size's best per-message time of 5 runs and its rate.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build", "python"))
import distc as dist  # noqa: E402

dist.init_process_group("gloo")
rank = dist.get_rank()
if dist.get_world_size() != 2:
    sys.exit("p2p_one_way.py: run it with 2 ranks")
ack = np.zeros(1, np.int32)
for n in [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]:
    buf = np.full(n // 4, rank, np.float32)

    def once():
        if rank == 0:
            dist.send(buf, 1)
            dist.recv(ack, 1)
        else:
            dist.recv(buf, 0)
            dist.send(ack, 0)

    for _ in range(5):
        once()
    iters = max(5, int(0.3 / (n / 5e9)))
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(iters):
            once()
        best = min(best, (time.perf_counter() - t) / iters)
    if rank == 1 and not (buf == 0).all():
        sys.exit("p2p_one_way.py: rank 1 received wrong bytes")
    if rank == 0:
        print("%9d B %9.1f us %6.2f GB/s" % (n, best * 1e6, n / best / 1e9), flush=True)
dist.destroy_process_group()
