"""Conformance with torch.distributed (gloo): the same collectives on the same
deterministic inputs, in PyTorch and in distc, give the same results.

Integer dtypes are compared byte for byte. Floating dtypes use integer-valued
inputs and are compared byte for byte too where the result is exactly
representable (sums of small integers); AVG of floats is compared within
1 ulp-ish tolerance (rtol 1e-6 for float32, 1e-12 for float64, 1e-3 for
float16) because the one division may be applied in a different order.

Both libraries rendezvous through one distc TCP store server: PyTorch as a
client (torch.distributed.TCPStore), distc in its own group name.
"""
import multiprocessing as mp
import os
import sys
import traceback

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
import torch.distributed as dist  # noqa: E402

import distc_ctypes as dc  # noqa: E402

DTYPES = ["int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
OPS = {"SUM": (dist.ReduceOp.SUM, dc.SUM), "PRODUCT": (dist.ReduceOp.PRODUCT, dc.PRODUCT),
       "MIN": (dist.ReduceOp.MIN, dc.MIN), "MAX": (dist.ReduceOp.MAX, dc.MAX)}
BITWISE = {"BAND": (dist.ReduceOp.BAND, dc.BAND), "BOR": (dist.ReduceOp.BOR, dc.BOR),
           "BXOR": (dist.ReduceOp.BXOR, dc.BXOR)}
N = 13  # elements: odd, so chunked algorithms have uneven pieces


def inputs(rank, dtype, salt=0):
    rng = np.random.default_rng(1000 * rank + salt)
    lo = 0 if dtype.startswith("u") else -2
    a = rng.integers(lo, 4, size=N)
    return a.astype(dtype)


def same(a, b, dtype, tol=False):
    if tol and dtype.startswith("float"):
        rtol = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-12}[dtype]
        return np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=rtol)
    return a.tobytes() == b.tobytes()


def rank_main(rank, size, port, lib, q):
    try:
        os.environ["DISTC_LIB"] = lib
        store = dist.TCPStore("127.0.0.1", port, size, False)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=size)
        s = dc.Store(port=port)
        pg = dc.ProcessGroup(s, rank, size, name="conformance")
        checked, mismatches = 0, []

        def compare(label, ours, theirs, dtype, tol=False):
            nonlocal checked
            checked += 1
            if not same(ours, theirs, dtype, tol):
                mismatches.append(f"{label}: distc {ours.tolist()} torch {theirs.tolist()}")

        for dtype in DTYPES:
            ops = dict(OPS)
            if not dtype.startswith("float"):
                ops.update(BITWISE)
            for name, (top, dop) in ops.items():
                x = inputs(rank, dtype)
                t = torch.from_numpy(x.copy())
                dist.all_reduce(t, op=top)
                y = x.copy()
                pg.allreduce(y, dop)
                compare(f"allreduce {dtype} {name}", y, t.numpy(), dtype)
                for root in range(size):
                    x = inputs(rank, dtype, root + 1)
                    t = torch.from_numpy(x.copy())
                    dist.reduce(t, root, op=top)
                    y = x.copy()
                    pg.reduce(y, root, dop)
                    if rank == root:
                        compare(f"reduce {dtype} {name} root {root}", y, t.numpy(), dtype)
            for root in range(size):
                x = inputs(rank, dtype, 7)
                t = torch.from_numpy(x.copy())
                dist.broadcast(t, root)
                y = x.copy()
                pg.broadcast(y, root)
                compare(f"broadcast {dtype} root {root}", y, t.numpy(), dtype)
            x = inputs(rank, dtype, 9)
            touts = [torch.empty(N, dtype=torch.from_numpy(x).dtype) for _ in range(size)]
            dist.all_gather(touts, torch.from_numpy(x.copy()))
            outs = [np.empty(N, dtype=dtype) for _ in range(size)]
            pg.allgather(outs, x.copy())
            for r in range(size):
                compare(f"allgather {dtype} [{r}]", outs[r], touts[r].numpy(), dtype)
            for root in range(size):
                tg = [torch.empty(N, dtype=torch.from_numpy(x).dtype) for _ in range(size)] if rank == root else None
                dist.gather(torch.from_numpy(x.copy()), tg, dst=root)
                og = [np.empty(N, dtype=dtype) for _ in range(size)] if rank == root else None
                pg.gather(og, x.copy(), root)
                if rank == root:
                    for r in range(size):
                        compare(f"gather {dtype} root {root} [{r}]", og[r], tg[r].numpy(), dtype)
                ins = [inputs(r, dtype, 20 + root) for r in range(size)]
                tout = torch.empty(N, dtype=torch.from_numpy(x).dtype)
                dist.scatter(tout, [torch.from_numpy(a.copy()) for a in ins] if rank == root else None, src=root)
                oout = np.empty(N, dtype=dtype)
                pg.scatter(oout, [a.copy() for a in ins] if rank == root else None, root)
                compare(f"scatter {dtype} root {root}", oout, tout.numpy(), dtype)
            # alltoall_single with the uneven splits of the torch docstring's shape.
            in_splits = [(rank + j) % 3 + 1 for j in range(size)]
            out_splits = [(j + rank) % 3 + 1 for j in range(size)]
            x = (np.arange(sum(in_splits)) + 100 * rank).astype(dtype)
            tout = torch.empty(sum(out_splits), dtype=torch.from_numpy(x).dtype)
            dist.all_to_all_single(tout, torch.from_numpy(x.copy()), out_splits, in_splits)
            oout = np.empty(sum(out_splits), dtype=dtype)
            pg.alltoall_single(oout, x.copy(), out_splits, in_splits)
            compare(f"alltoall_single {dtype}", oout, tout.numpy(), dtype)
        # AVG: torch 1.13's gloo has none; compare with its SUM divided once.
        for dtype in ["float32", "float64"]:
            x = inputs(rank, dtype)
            t = torch.from_numpy(x.copy())
            dist.all_reduce(t)
            y = x.copy()
            pg.allreduce(y, dc.AVG)
            compare(f"allreduce {dtype} AVG", y, (t / size).numpy(), dtype, tol=True)
        pg.barrier()
        pg.close()
        s.close()
        dist.destroy_process_group()
        q.put((rank, checked, mismatches, None))
    except Exception:
        q.put((rank, 0, [], traceback.format_exc()))


@pytest.mark.parametrize("size", [2, 4])
def test_same_results_as_torch_gloo(size):
    server = dc.Store(is_server=True, timeout_ms=60000)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, size, server.port, dc.LIB, q)) for r in range(size)]
    for p in procs:
        p.start()
    results = [q.get(timeout=240) for _ in range(size)]
    for p in procs:
        p.join(timeout=30)
    server.close()
    errors = [r[3] for r in results if r[3]]
    assert not errors, "\n".join(errors)
    mismatches = [m for r in results for m in r[2]]
    total = sum(r[1] for r in results)
    assert total > 100 * size
    assert not mismatches, f"{len(mismatches)} of {total} comparisons differ:\n" + "\n".join(mismatches[:20])
