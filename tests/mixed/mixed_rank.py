"""Rank 1 of the mixed-language job (run_mixed.py): Python, with NumPy."""
import sys

import numpy as np

import distc as dist

dist.init_process_group("gloo")  # env://
rank, size = dist.get_rank(), dist.get_world_size()
s = np.full(4, rank + 1, np.int64)
dist.all_reduce(s)
b = np.array([1.5, 2.5]) if rank == 1 else np.zeros(2)
dist.broadcast(b, src=1)
allg = np.zeros(3, np.int32)
dist.all_gather_into_tensor(allg, np.array([rank * 10], np.int32))
names = dist.GroupMember.WORLD.all_gather_bytes(b"Python")  # the default group object
ok = (s.tolist() == [6] * 4 and b.tolist() == [1.5, 2.5] and allg.tolist() == [0, 10, 20]
      and names == [b"C", b"Python", b"Rust"])
print(f"MIXED {'OK' if ok else 'WRONG'} Python rank {rank} of {size}: sum {s[0]}, broadcast {b.tolist()}, "
      f"allgather {allg.tolist()}, names {names}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
