#!/usr/bin/python3
"""torch.distributed (gloo) measured the way bench/pg_bench.c measures distc.
With --lib distc the same script measures distc's Python package instead
(`import distc as dist`, same torch tensors, same calls): what a Python user
of either library pays per call.

    /usr/bin/python3 bench/pg_torch.py --nprocs N [--store-file PATH]
        [-o allreduce|broadcast|allgather|barrier|all[,...]] [-b 8] [-e 64M] [-f 2]
        [--iters N] [--warmup N] [--min-iters N] [--time-ms T] [--timeout-ms MS] [--json]
        [--lib torch|distc]
    torchrun --nproc_per_node N bench/pg_torch.py [options]      (one rank per process, env://)

With --nprocs the script forks N ranks itself (multiprocessing "fork", after
importing torch once); they meet through a torch.distributed.FileStore at
--store-file (default: a fresh file in a temporary directory) and call
init_process_group("gloo", store=...). Without --nprocs this process is one
rank and joins with init_method="env://" (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT). Every rank sets torch.set_num_threads(1), as torchrun does for
several ranks per node (OMP_NUM_THREADS=1).

Per (op, size), exactly as distc-pg-bench: one checked call on rank-dependent
data (a wrong element exits 3), a barrier, one probe whose rank-0 time is broadcast so
that every rank derives the same counts, min(--warmup, time-ms/4/probe)
warm-up calls (whose rank-0 mean, broadcast, then replaces the probe; with --time-ms,
as many more as fit in time-ms/8 at that estimate, whose mean replaces it again), a barrier, then min(--iters, max(--min-iters, time-ms/probe))
timed calls, back to back and blocking (async_op=False); time_us is the
slowest rank's mean per call (an all_reduce MAX). Tensors are float32;
allgather's size is the gathered output and it uses dist.all_gather into
views of one flat tensor (PyTorch 1.13's gloo has no all_gather_into_tensor);
broadcast's root is 0. Rank 0 prints the rows (JSON with --json). Timings are
printed, never judged.
"""
import argparse
import datetime
import json
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist

OPS = ("allreduce", "broadcast", "allgather", "barrier")


def LIB_VERSION():
    return torch.__version__ if dist.__name__ == "torch.distributed" else dist.__version__


def use_lib(name):
    """Makes `dist` torch.distributed or distc (PYTHONPATH=build/python) for every rank."""
    global dist
    if name == "distc":
        import distc
        dist = distc


class WrongResult(Exception):
    pass


def parse_size(s):
    """8, 64K, 64M, 1G, 64MB (K, M, G: powers of 1024)."""
    s = s.strip()
    mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    if len(s) > 2 and s[-1:] in "bB" and s[-2:-1].lower() in mult:
        s = s[:-1]
    if s[-1:].lower() in mult:
        return int(float(s[:-1]) * mult[s[-1:].lower()])
    return int(float(s))


def parse_ops(s):
    out = []
    for tok in s.split(","):
        if not tok:
            continue
        for op in (OPS if tok == "all" else (tok,)):
            if op not in OPS:
                raise argparse.ArgumentTypeError("unknown op %r" % op)
            if op not in out:
                out.append(op)
    if not out:
        raise argparse.ArgumentTypeError("no ops")
    return out


def sizes(args, op, n):
    """(count per rank, size in bytes) of each row, as distc-pg-bench."""
    out, last, s = [], -1, args.minbytes
    while True:
        if op == "barrier":
            count, size = 0, 0
        elif op == "allgather":
            count = max(1, s // (4 * n))
            size = count * 4 * n
        else:
            count = max(1, s // 4)
            size = count * 4
        if size != last:
            out.append((count, size))
            last = size
        if op == "barrier" or s >= args.maxbytes:
            return out
        s = args.maxbytes if s > args.maxbytes // args.stepfactor else s * args.stepfactor


class Bench:
    def __init__(self, args, rank, n):
        self.args, self.rank, self.n = args, rank, n

    def setup(self, op, count):
        n = self.n
        self.buf = torch.empty(count, dtype=torch.float32) if op != "barrier" else None
        if op == "allgather":
            self.out = torch.empty(count * n, dtype=torch.float32)
            self.outs = list(self.out.chunk(n))
        if op == "allreduce":
            self.call = lambda: dist.all_reduce(self.buf, op=dist.ReduceOp.SUM)
        elif op == "broadcast":
            self.call = lambda: dist.broadcast(self.buf, 0)
        elif op == "allgather":
            self.call = lambda: dist.all_gather(self.outs, self.buf)
        else:
            self.call = dist.barrier

    @staticmethod
    def pattern(count, period, offset):
        """float32 offset + (i % period) for i < count: what the C workers write, built in few passes."""
        reps = (count + period - 1) // period
        return torch.arange(period, dtype=torch.float32).repeat(reps)[:count].add_(offset)

    def fill_check(self, op, count):
        if op == "allreduce":
            self.buf.copy_(self.pattern(count, 7, float(self.rank + 1)))
        elif op == "broadcast":
            if self.rank == 0:
                self.buf.copy_(self.pattern(count, 251, 1.0))
            else:
                self.buf.fill_(-1.0)
        elif op == "allgather":
            self.buf.copy_(self.pattern(count, 13, float(self.rank * 1000)))
            self.out.fill_(-1.0)

    def verify(self, op, count, size):
        n = self.n
        if op == "barrier":
            return
        if op == "allreduce":
            checks = [(self.buf, self.pattern(count, 7, 0.0).mul_(n).add_(float(n * (n + 1) // 2)), 0)]
        elif op == "broadcast":
            checks = [(self.buf, self.pattern(count, 251, 1.0), 0)]
        else:
            checks = [(self.outs[r], self.pattern(count, 13, float(r * 1000)), r * count) for r in range(n)]
        for got, want, base in checks:
            if not torch.equal(got, want):
                k = int((got != want).nonzero()[0][0])
                raise WrongResult("%s of %d B over %d ranks: element %d is %g, expected %g" %
                                  (op, size, n, base + k, float(got[k]), float(want[k])))

    def run(self, op, count, size):
        args, n = self.args, self.n
        self.setup(op, count)
        # 1. check
        self.fill_check(op, count)
        self.call()
        self.verify(op, count, size)
        if self.buf is not None:
            self.buf.zero_()
        if op == "allgather":
            self.out.zero_()
        # 2. probe (after a barrier: rank 0 must not time its peers' checking)
        dist.barrier()
        t0 = time.perf_counter()
        self.call()
        p = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.broadcast(p, 0)
        probe = max(float(p[0]), 1e-7)
        # 3. warm-up, 4. timed loop
        box = args.time_ms / 1e3
        if args.time_ms > 0:
            warmup = int(min(max(box / 4 / probe, 0), args.warmup))
            iters = int(min(max(box / probe, args.min_iters), args.iters))
        else:
            warmup, iters = args.warmup, args.iters
        call = self.call
        if warmup > 0:  # the warm-up's mean (rank 0's) is a better estimate than one call
            t0 = time.perf_counter()
            for _ in range(warmup):
                call()
            e = torch.tensor([(time.perf_counter() - t0) / warmup], dtype=torch.float64)
            dist.broadcast(e, 0)
            if args.time_ms > 0:
                iters = int(min(max(box / max(float(e[0]), 1e-7), args.min_iters), args.iters))
                # A few first calls can be far slower than the rest: calls for an
                # eighth of the box at that estimate, then their mean, so that the
                # timed window fills the box.
                settle = int(min(max(box / 8 / max(float(e[0]), 1e-7), 0), args.iters))
                if settle > warmup:
                    t0 = time.perf_counter()
                    for _ in range(settle):
                        call()
                    e = torch.tensor([(time.perf_counter() - t0) / settle], dtype=torch.float64)
                    dist.broadcast(e, 0)
                    iters = int(min(max(box / max(float(e[0]), 1e-7), args.min_iters), args.iters))
                    warmup += settle
        # --reps windows; the median window's mean resists this VM's bimodal latency.
        wins = []
        for _ in range(args.reps):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                call()
            wins.append((time.perf_counter() - t0) / iters)
        avg = sorted(wins)[len(wins) // 2]
        # 5. slowest and fastest rank
        mm = torch.tensor([avg, -avg], dtype=torch.float64)
        dist.all_reduce(mm, op=dist.ReduceOp.MAX)
        factor = {"allreduce": 2.0 * (n - 1) / n, "allgather": (n - 1) / n}.get(op, 1.0)
        algbw = 0.0 if op == "barrier" else size / float(mm[0]) / 1e9
        return {"impl": "torch", "op": op, "size_bytes": size,
                "count": count * n if op == "allgather" else count, "dtype": "float32", "ranks": n,
                "root": 0 if op == "broadcast" else -1, "iters": iters, "warmup": warmup,
                "time_us": round(float(mm[0]) * 1e6, 3), "time_us_min": round(-float(mm[1]) * 1e6, 3),
                "algbw_gbps": round(algbw, 6), "busbw_gbps": round(algbw * factor, 6),
                "nproc": os.cpu_count(), "version": LIB_VERSION(), "lib": dist.__name__}


def rank_main(args, rank, n, store_file):
    """Runs one rank; returns its exit status."""
    torch.set_num_threads(1)
    timeout = datetime.timedelta(milliseconds=args.timeout_ms)
    t0 = time.perf_counter()
    try:
        if store_file:
            store = dist.FileStore(store_file, n)
            dist.init_process_group("gloo", store=store, rank=rank, world_size=n, timeout=timeout)
        else:
            dist.init_process_group("gloo", init_method="env://", timeout=timeout)
            rank, n = dist.get_rank(), dist.get_world_size()
    except Exception as e:
        print("pg_torch.py: rank %d: cannot join the group: %s" % (rank, e), file=sys.stderr, flush=True)
        return 1
    joined_ms = (time.perf_counter() - t0) * 1e3
    b = Bench(args, rank, n)
    leader = rank == 0
    if leader and not args.json:
        print("# pg_torch.py: %s %s, %d ranks over gloo (%s), joined in %.0f ms; nproc %d" %
              (dist.__name__, LIB_VERSION(), n, "FileStore" if store_file else "env://", joined_ms,
               os.cpu_count()))
        print("%-9s %12s %12s %8s %11s %11s %9s %9s" % ("op", "size(B)", "count", "iters", "time(us)", "min(us)",
                                                        "algbw", "busbw"))
        print("%-9s %12s %12s %8s %11s %11s %9s %9s" % ("", "", "(elements)", "", "slowest", "fastest", "(GB/s)",
                                                        "(GB/s)"), flush=True)
    rc = 0
    try:
        for op in args.ops:
            for count, size in sizes(args, op, n):
                r = b.run(op, count, size)
                if leader and args.json:
                    print(json.dumps(r), flush=True)
                elif leader:
                    print("%-9s %12d %12d %8d %11.2f %11.2f %9.4f %9.4f" %
                          (op, r["size_bytes"], r["count"], r["iters"], r["time_us"], r["time_us_min"],
                           r["algbw_gbps"], r["busbw_gbps"]), flush=True)
    except WrongResult as e:
        print("pg_torch.py: rank %d: WRONG RESULT: %s" % (rank, e), file=sys.stderr, flush=True)
        rc = 3
    except Exception as e:
        print("pg_torch.py: rank %d: %s: %s" % (rank, type(e).__name__, e), file=sys.stderr, flush=True)
        rc = 1
    if rc == 0:
        dist.destroy_process_group()
    return rc


def child(args, rank, n, store_file):
    sys.stdout.flush()
    os._exit(rank_main(args, rank, n, store_file))


def main():
    ap = argparse.ArgumentParser(description="torch.distributed gloo collectives, as distc-pg-bench measures them")
    ap.add_argument("--nprocs", type=int, default=0, help="fork this many ranks here (default: be one rank, env://)")
    ap.add_argument("--store-file", help="with --nprocs: the FileStore path (default: in a fresh temp dir)")
    ap.add_argument("-o", "--op", "--ops", dest="ops", type=parse_ops, default=list(OPS))
    ap.add_argument("-b", "--minbytes", type=parse_size, default=8)
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=64 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=1000, help="most timed calls per size (default 1000)")
    ap.add_argument("-w", "--warmup", type=int, default=5, help="most warm-up calls per size (default 5)")
    ap.add_argument("--min-iters", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="timed windows per size; the median one is reported")
    ap.add_argument("--time-ms", type=float, default=100.0, help="time box per size (default 100; 0: none)")
    ap.add_argument("--timeout-ms", type=int, default=120000)
    ap.add_argument("--json", action="store_true", help="one JSON object per row")
    ap.add_argument("--lib", choices=("torch", "distc"), default="torch",
                    help="torch: torch.distributed (default); distc: distc's Python package, same calls")
    args = ap.parse_args()
    use_lib(args.lib)
    if (args.minbytes < 1 or args.maxbytes < args.minbytes or args.stepfactor < 2 or args.iters < 1
            or args.warmup < 0 or args.min_iters < 1 or args.time_ms < 0 or args.timeout_ms < 1):
        ap.error("bad sizes, counts or times")
    if not args.nprocs:
        return rank_main(args, -1, -1, None)

    tmp = None
    store_file = args.store_file
    if not store_file:
        tmp = tempfile.mkdtemp(prefix="distc-pg-torch.")
        store_file = os.path.join(tmp, "store")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=child, args=(args, r, args.nprocs, store_file)) for r in range(args.nprocs)]
    stopping = []
    signal.signal(signal.SIGTERM, lambda *a: stopping.append(1))
    rc = 0
    try:
        for p in procs:
            p.start()
        # Wait for every rank; the first failure stops the others.
        while any(p.is_alive() for p in procs) and not stopping:
            for p in procs:
                if p.exitcode not in (None, 0) and not rc:
                    rc = p.exitcode if p.exitcode > 0 else 1
            if rc:
                break
            time.sleep(0.05)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
            if p.exitcode and not rc:
                rc = p.exitcode if p.exitcode > 0 else 1
        if stopping and not rc:
            rc = 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
