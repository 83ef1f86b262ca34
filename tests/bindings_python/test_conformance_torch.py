"""Conformance of the `distc` Python package with torch.distributed (gloo).

One program text, `program(dist, rank, size, skip)`, written against the
functional API the two share, runs once with `dist = torch.distributed`
(backend "gloo") and once with `dist = distc`, each in its own spawned
processes, for world sizes 2 and 4, on the same deterministic torch tensors.
Every rank returns a dict {name: result}; the test compares the two dicts.

How results are compared:
  * integer and bool dtypes: byte for byte;
  * floating dtypes: byte for byte as well, because the inputs are small
    integers, so sums, products, min and max are exactly representable in
    float16/32/64 whatever the order of the reduction;
  * ReduceOp.AVG of floats: inputs are non-integer (normal samples), so the
    sum depends on the order in which the backend adds; the test allows
    |distc - torch| <= rtol * |torch| + atol with (rtol, atol) =
    (1e-2, 1e-2) for float16 (eps 2**-10 ~ 1e-3; distc accumulates fp16 in
    float, gloo rounds after each addition, up to 4 roundings apart),
    (1e-5, 1e-6) for float32 and (1e-12, 1e-14) for float64 (a few ulps of
    a sum of 4 terms). AVG of integers (truncated toward zero, as torch) is
    compared byte for byte.

torch 1.13's gloo cannot do some of what distc does: ReduceOp.AVG ("Cannot
use ReduceOp.AVG with Gloo"), collectives on bool tensors ("Invalid scalar
type"; send/recv of bool works), all_gather_into_tensor / _all_gather_base
("no support for _allgather_base in Gloo process group"), reduce_scatter
("ProcessGroupGloo does not support reduce_scatter"), reduce_scatter_tensor
("does not support _reduce_scatter_base") and all_to_all with tensor lists
("does not support alltoall"). The torch run is told to skip those
(TORCH_GLOO_CANNOT: some of these errors surface only in a later collective,
and trying them got torch's ranks out of step and hung), and the
program also computes each of them with operations torch gloo has (the
"~emul" results: all_reduce SUM then divide, all_gather then cat, all_reduce
then slice, all_to_all_single with splits, uint8 MIN/MAX for bool). distc's
result for such an operation is compared with torch's emulation.

Bad arguments every rank sees (BAND on floats, mismatched dtypes, split sizes
that do not add up, an out-of-range root) must raise on every rank in both,
as a RuntimeError, and leave the group usable.

Rendezvous: torch through init_method tcp://127.0.0.1:PORT, distc through
distc.init_process_group("gloo", init_method="tcp://127.0.0.1:PORT2", ...),
each with a free port chosen by the parent. Every process has a deadline; a
process still running past it is killed and the test fails.
"""
import datetime
import faulthandler
import multiprocessing as mp
import os
import pickle
import socket
import time
import traceback

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

SIZES = (2, 4)
TIMEOUT_S = 60  # per job (all ranks of one library at one world size); a job takes 2-7 s
DTYPES = ("int8", "uint8", "int32", "int64", "float16", "float32", "float64")
INT_DTYPES = ("int8", "uint8", "int32", "int64")
FLOAT_DTYPES = ("float16", "float32", "float64")
AVG_TOL = {"float16": (1e-2, 1e-2), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}

# What torch 1.13's gloo refuses (see the module docstring); the torch run skips these.
TORCH_GLOO_CANNOT = frozenset({"bool", "avg", "all_gather_into_tensor", "reduce_scatter",
                               "reduce_scatter_tensor", "all_to_all"})

# torch.distributed.all_to_all_single's docstring: the 4-rank example with uneven splits.
DOC_A2A_INPUT_SPLITS = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]]
DOC_A2A_OUTPUT = [[0, 1, 10, 11, 12, 20, 21, 30, 31], [2, 3, 13, 14, 22, 32, 33], [4, 15, 16, 23, 34, 35],
                  [5, 17, 18, 24, 36]]


def program(dist, rank, size, skip=frozenset()):
    """The shared program: uses only the API torch.distributed and distc have in common.
    Returns {name: result}; tensors are recorded as (dtype, shape, bytes)."""
    import warnings

    import torch

    res = {}
    dt = {name: getattr(torch, name) for name in DTYPES + ("bool",)}

    def rec(t):
        t = t.detach().contiguous()
        return (str(t.dtype).replace("torch.", ""), tuple(t.shape), t.numpy().tobytes())

    def ints(n, salt, lo=-2, hi=2):
        # deterministic, rank-dependent small integers in [lo, hi]
        i = torch.arange(n, dtype=torch.int64)
        return (i * 5 + rank * 3 + salt * 7) % (hi - lo + 1) + lo

    def data(name, n=13, salt=0, small=False):
        if name == "uint8":
            v = ints(n, salt, 0, 3)
        elif name == "bool":
            v = ints(n, salt, 0, 1)
        else:
            v = ints(n, salt, -2, 2) if small else ints(n, salt, -3, 9)
        return v.to(dt[name])

    def bits(name, n=13, salt=0):
        i = torch.arange(n, dtype=torch.int64)
        return ((i * 37 + rank * 101 + salt * 13) % 256).to(dt[name])  # wraps to negative for int8

    R = dist.ReduceOp
    ops = {"SUM": R.SUM, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX}
    bitops = {"BAND": R.BAND, "BOR": R.BOR, "BXOR": R.BXOR}
    nxt, prv = (rank + 1) % size, (rank - 1) % size

    res["rank"] = dist.get_rank()
    res["world_size"] = dist.get_world_size()

    # ---- all_reduce: every dtype and op; bitwise ops on integers
    for name in DTYPES:
        for opname, op in ops.items():
            t = data(name, salt=1, small=(opname == "PRODUCT"))
            dist.all_reduce(t, op=op)
            res[f"all_reduce/{name}/{opname}"] = rec(t)
        if name in INT_DTYPES:
            for opname, op in bitops.items():
                t = bits(name, salt=2)
                dist.all_reduce(t, op=op)
                res[f"all_reduce/{name}/{opname}"] = rec(t)
    # larger tensors: chunked / pipelined paths (odd counts)
    for name, n in (("int64", 4099), ("float32", 70001), ("float64", 1025)):
        t = data(name, n=n, salt=3)
        dist.all_reduce(t)
        res[f"all_reduce/{name}/SUM/n={n}"] = rec(t)
    # async_op
    t = data("int32", salt=4)
    w = dist.all_reduce(t, op=R.MAX, async_op=True)
    w.wait()
    res["all_reduce/async"] = rec(t)
    # a non-contiguous-free view: a slice of a bigger tensor (contiguous, offset storage)
    big = data("float32", n=40, salt=5)
    view = big[7:20]
    dist.all_reduce(view)
    res["all_reduce/offset_view"] = rec(big)

    # bool: torch gloo cannot; emulated on 0/1 uint8 (SUM/MAX/BOR: or, PRODUCT/MIN/BAND: and)
    for opname, op in dict(ops, **bitops).items():
        if "bool" not in skip:
            t = data("bool", salt=6)
            dist.all_reduce(t, op=op)
            res[f"all_reduce_bool/{opname}"] = rec(t)
        e = data("bool", salt=6).to(torch.uint8)
        eop = {"SUM": R.MAX, "MAX": R.MAX, "BOR": R.MAX, "PRODUCT": R.MIN, "MIN": R.MIN, "BAND": R.MIN,
               "BXOR": R.BXOR}[opname]
        dist.all_reduce(e, op=eop)
        res[f"all_reduce_bool/{opname}~emul"] = rec(e.to(torch.bool))

    # AVG: torch gloo cannot; emulated as SUM then one division by the group size
    g = torch.Generator().manual_seed(1234 + rank)
    for name in FLOAT_DTYPES + ("int32", "int64"):
        if name in FLOAT_DTYPES:
            x = torch.randn(37, generator=g, dtype=torch.float64).to(dt[name])
        else:
            x = torch.randint(-1000, 1000, (37,), generator=g).to(dt[name])
        if "avg" not in skip:
            t = x.clone()
            dist.all_reduce(t, op=R.AVG)
            res[f"avg/{name}"] = rec(t)
        e = x.clone()
        dist.all_reduce(e, op=R.SUM)
        e = e / size if name in FLOAT_DTYPES else torch.div(e, size, rounding_mode="trunc")
        res[f"avg/{name}~emul"] = rec(e)

    # ---- bad arguments every rank sees locally: both raise a RuntimeError on every rank,
    # and the group still works afterwards
    def raises(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 (torch raises RuntimeError, distc DistcError subclasses)
            return ("raised", isinstance(e, RuntimeError))
        return ("no error",)

    res["raises/BAND_float"] = raises(lambda: dist.all_reduce(torch.ones(3), op=R.BAND))
    res["raises/all_gather_dtype"] = raises(
        lambda: dist.all_gather([torch.zeros(3) for _ in range(size)], torch.ones(3, dtype=torch.int32)))
    res["raises/all_to_all_single_splits"] = raises(
        lambda: dist.all_to_all_single(torch.zeros(size + 1), torch.ones(size + 1), [1] * size, [1] * size))
    res["raises/broadcast_src"] = raises(lambda: dist.broadcast(torch.ones(3), size))
    # torch raises RuntimeError, distc ValueError: only "it raises" is compared here
    res["raises/all_gather_list_length"] = raises(
        lambda: dist.all_gather([torch.zeros(3) for _ in range(size + 1)], torch.ones(3)))[:1]
    t = data("int64", salt=9)
    dist.all_reduce(t)
    res["raises/then_all_reduce"] = rec(t)

    # ---- broadcast (bool: torch gloo cannot; emulated on uint8)
    for name in DTYPES + ("bool",):
        for src in sorted({0, size - 1}):
            if name != "bool" or "bool" not in skip:
                t = data(name, salt=10 + src)
                dist.broadcast(t, src)
                res[f"broadcast/{name}/src={src}"] = rec(t)
            if name == "bool":
                e = data(name, salt=10 + src).to(torch.uint8)
                dist.broadcast(e, src)
                res[f"broadcast/{name}/src={src}~emul"] = rec(e.to(torch.bool))
    t = data("float32", n=100003, salt=11)
    dist.broadcast(t, 1)
    res["broadcast/big"] = rec(t)
    t = data("int64", salt=12)
    dist.broadcast(t, size - 1, async_op=True).wait()
    res["broadcast/async"] = rec(t)

    # ---- reduce: only dst's tensor is defined afterwards
    for name in DTYPES:
        for opname in ("SUM", "MAX", "MIN", "PRODUCT"):
            dst = (size - 1) if opname in ("SUM", "MIN") else 1
            t = data(name, salt=20, small=(opname == "PRODUCT"))
            dist.reduce(t, dst, op=ops[opname])
            if rank == dst:
                res[f"reduce/{name}/{opname}/dst={dst}"] = rec(t)
    t = bits("int32", salt=21)
    dist.reduce(t, 0, op=R.BXOR)
    if rank == 0:
        res["reduce/int32/BXOR"] = rec(t)

    # ---- all_gather / all_gather_into_tensor
    for name in DTYPES + ("bool",):
        t = data(name, n=5, salt=30)
        if name != "bool" or "bool" not in skip:
            out = [torch.zeros_like(t) for _ in range(size)]
            dist.all_gather(out, t)
            res[f"all_gather/{name}"] = [rec(o) for o in out]
        if name == "bool":
            out = [torch.zeros(5, dtype=torch.uint8) for _ in range(size)]
            dist.all_gather(out, t.to(torch.uint8))
            res[f"all_gather/{name}~emul"] = [rec(o.to(torch.bool)) for o in out]
    for name in ("int8", "int64", "float16", "float32"):
        t = data(name, n=6, salt=31)
        if "all_gather_into_tensor" not in skip:
            out = torch.zeros(6 * size, dtype=t.dtype)
            agit = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
            agit(out, t)
            res[f"all_gather_into_tensor/{name}"] = rec(out)
        parts = [torch.zeros_like(t) for _ in range(size)]
        dist.all_gather(parts, t)
        res[f"all_gather_into_tensor/{name}~emul"] = rec(torch.cat(parts))

    # ---- gather / scatter
    for name in ("uint8", "int32", "float16", "float64"):
        for root in sorted({0, size - 1}):
            t = data(name, n=7, salt=40 + root)
            gl = [torch.zeros_like(t) for _ in range(size)] if rank == root else None
            dist.gather(t, gl, dst=root)
            if rank == root:
                res[f"gather/{name}/dst={root}"] = [rec(x) for x in gl]
            out = torch.zeros(7, dtype=t.dtype)
            sl = [data(name, n=7, salt=50 + i) * (i + 1) for i in range(size)] if rank == root else None
            dist.scatter(out, sl, src=root)
            res[f"scatter/{name}/src={root}"] = rec(out)

    # ---- reduce_scatter / reduce_scatter_tensor (torch gloo cannot: emulated with all_reduce)
    for name in ("int32", "int64", "float32", "float64"):
        for opname in ("SUM", "MAX"):
            ins = [data(name, n=4, salt=60 + i) for i in range(size)]
            if "reduce_scatter" not in skip:
                out = torch.zeros(4, dtype=ins[0].dtype)
                dist.reduce_scatter(out, ins, op=ops[opname])
                res[f"reduce_scatter/{name}/{opname}"] = rec(out)
            if "reduce_scatter_tensor" not in skip:
                out = torch.zeros(4, dtype=ins[0].dtype)
                dist.reduce_scatter_tensor(out, torch.cat(ins), op=ops[opname])
                res[f"reduce_scatter_tensor/{name}/{opname}"] = rec(out)
            e = torch.cat(ins)
            dist.all_reduce(e, op=ops[opname])
            res[f"reduce_scatter/{name}/{opname}~emul"] = rec(e[4 * rank:4 * rank + 4])
            res[f"reduce_scatter_tensor/{name}/{opname}~emul"] = rec(e[4 * rank:4 * rank + 4])

    # ---- all_to_all_single: even, then uneven splits
    t = torch.arange(2 * size, dtype=torch.int64) + rank * 2 * size
    out = torch.zeros(2 * size, dtype=torch.int64)
    dist.all_to_all_single(out, t)
    res["all_to_all_single/even"] = rec(out)
    if size == 4:  # the docstring's example
        in_splits = DOC_A2A_INPUT_SPLITS
    else:  # uneven, with an empty piece
        in_splits = [[(2 * r + j) % 3 for j in range(size)] for r in range(size)]
    out_splits = [in_splits[j][rank] for j in range(size)]
    for name in ("int64", "float32", "int8"):
        t = (torch.arange(sum(in_splits[rank])) + 10 * rank).to(dt[name])
        out = torch.full((sum(out_splits),), -1).to(dt[name])
        dist.all_to_all_single(out, t, out_splits, in_splits[rank])
        res[f"all_to_all_single/uneven/{name}"] = rec(out)
    # 2-d tensors: splits along dim 0
    t = torch.arange(sum(in_splits[rank]) * 3, dtype=torch.float64).reshape(-1, 3) + 100 * rank
    out = torch.zeros(sum(out_splits), 3, dtype=torch.float64)
    dist.all_to_all_single(out, t, out_splits, in_splits[rank])
    res["all_to_all_single/uneven/2d"] = rec(out)

    # ---- all_to_all with tensor lists (torch gloo cannot: emulated with all_to_all_single)
    ins = [torch.arange(in_splits[rank][j], dtype=torch.int32) + 100 * rank + 10 * j for j in range(size)]
    if "all_to_all" not in skip:
        outs = [torch.full((out_splits[j],), -1, dtype=torch.int32) for j in range(size)]
        dist.all_to_all(outs, ins)
        res["all_to_all/uneven"] = [rec(o) for o in outs]
    flat = torch.full((sum(out_splits),), -1, dtype=torch.int32)
    dist.all_to_all_single(flat, torch.cat(ins), out_splits, in_splits[rank])
    res["all_to_all/uneven~emul"] = [rec(o) for o in torch.split(flat, out_splits)]

    # ---- send / recv: a ring, even ranks send first
    for name in ("uint8", "int64", "float16", "float32", "bool"):
        s = data(name, n=9, salt=70)
        r = torch.zeros(9, dtype=s.dtype)
        if rank % 2 == 0:
            dist.send(s, nxt)
            got = dist.recv(r, prv)
        else:
            got = dist.recv(r, prv)
            dist.send(s, nxt)
        res[f"send_recv/{name}"] = (got, rec(r))
    # recv from any source, with a tag
    if rank == 0:
        seen = []
        for _ in range(size - 1):
            r = torch.zeros(3, dtype=torch.int64)
            src = dist.recv(r, tag=7)
            seen.append((src, rec(r)))
        res["recv_any_source"] = sorted(seen)
    else:
        dist.send(torch.tensor([rank, 2 * rank, 3 * rank]), 0, tag=7)
    dist.barrier()

    # ---- isend / irecv: both directions, two tags sent in the order opposite to the receives
    a = torch.zeros(4, dtype=torch.int32)
    b = torch.zeros(4, dtype=torch.int32)
    c = torch.zeros(5, dtype=torch.float64)
    works = [dist.irecv(a, prv, tag=1), dist.irecv(b, prv, tag=2), dist.irecv(c, nxt, tag=3),
             dist.isend(torch.arange(4, dtype=torch.int32) + 20 * rank, nxt, tag=2),
             dist.isend(torch.arange(4, dtype=torch.int32) - 20 * rank, nxt, tag=1),
             dist.isend(torch.arange(5, dtype=torch.float64) / 4 + rank, prv, tag=3)]
    for w in works:
        w.wait()
    res["isend_irecv"] = (rec(a), rec(b), rec(c))

    # ---- batch_isend_irecv: both neighbours, several dtypes
    sends = [data("int64", n=6, salt=80), data("float32", n=3, salt=81)]
    r1 = torch.zeros(6, dtype=torch.int64)
    r2 = torch.zeros(3, dtype=torch.float32)
    p2p = [dist.P2POp(dist.isend, sends[0], nxt), dist.P2POp(dist.irecv, r1, prv),
           dist.P2POp(dist.isend, sends[1], prv), dist.P2POp(dist.irecv, r2, nxt)]
    for w in dist.batch_isend_irecv(p2p):
        w.wait()
    res["batch_isend_irecv"] = (rec(r1), rec(r2))

    # ---- new_group: every rank creates every group, in the same order
    evens = list(range(0, size, 2))
    odds = list(range(1, size, 2))
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds[::-1])  # listed in reverse: the group's ranks are sorted
    g_all = dist.new_group()
    mine, other = (g_even, g_odd) if rank % 2 == 0 else (g_odd, g_even)
    members = evens if rank % 2 == 0 else odds
    res["new_group/rank"] = (dist.get_rank(mine), dist.get_world_size(mine), dist.get_rank(other),
                             dist.get_world_size(other), dist.get_rank(g_all), dist.get_world_size(g_all))
    t = data("int64", salt=90)
    dist.all_reduce(t, group=mine)
    res["new_group/all_reduce"] = rec(t)
    t = data("float32", salt=91)
    dist.broadcast(t, members[-1], group=mine)  # src: a global rank
    res["new_group/broadcast"] = rec(t)
    t = data("int32", salt=92)
    dist.reduce(t, members[-1], op=R.MAX, group=mine)
    if rank == members[-1]:
        res["new_group/reduce"] = rec(t)
    t = data("int8", n=3, salt=93)
    out = [torch.zeros_like(t) for _ in members]
    dist.all_gather(out, t, group=mine)
    res["new_group/all_gather"] = [rec(o) for o in out]
    t = data("int32", salt=94)
    with warnings.catch_warnings():  # both warn that this rank is not a member
        warnings.simplefilter("ignore")
        assert dist.all_reduce(t, group=other) is None  # not a member: nothing happens
    res["new_group/non_member"] = rec(t)
    t = data("float64", salt=95)
    dist.all_reduce(t, op=R.MIN, group=g_all)
    res["new_group/world"] = rec(t)
    if len(members) > 1:  # point-to-point inside a subgroup, with global ranks
        if rank == members[0]:
            dist.send(torch.tensor([rank + 0.5] * 3), members[-1], group=mine)
        elif rank == members[-1]:
            r = torch.zeros(3)
            got = dist.recv(r, members[0], group=mine)
            res["new_group/send_recv"] = (got, rec(r))
    objs = [None] * len(members)  # torch needs one slot per group rank
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank}, group=mine)
    res["new_group/all_gather_object"] = objs
    dist.barrier(group=mine)
    dist.barrier()

    # ---- object collectives
    obj = {"rank": rank, "name": f"rank-{rank}", "payload": list(range(rank * 3)), "t": (rank, 1.5, None),
           "bytes": bytes(range(rank * 7 % 256))}
    objs = [None] * size
    dist.all_gather_object(objs, obj)
    res["all_gather_object"] = objs
    dst = size - 1
    gl = [None] * size if rank == dst else None
    dist.gather_object(obj, gl, dst=dst)
    if rank == dst:
        res["gather_object"] = gl
    ol = [{"from": rank}, "text", 42, [1, 2, 3]] if rank == 1 else [None] * 4
    dist.broadcast_object_list(ol, src=1)
    res["broadcast_object_list"] = ol
    out = [None]
    inl = [{"to": i, "data": "y" * (i + 1)} for i in range(size)] if rank == 0 else None
    dist.scatter_object_list(out, inl, src=0)
    res["scatter_object_list"] = out[0]
    big = "z" * 200000 + str(rank)
    objs = [None] * size
    dist.all_gather_object(objs, big)
    res["all_gather_object/big"] = [len(o) for o in objs] + [o[-1] for o in objs]

    dist.barrier()
    return res


# ------------------------------------------------------------------ running the jobs

def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(lib, rank, size, port, out_path, timeout_s):
    faulthandler.dump_traceback_later(timeout_s, exit=True)  # a stack dump instead of a silent hang
    try:
        if lib == "torch":
            import torch.distributed as dist
            skip = TORCH_GLOO_CANNOT
        else:
            import distc as dist
            skip = frozenset()
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=timeout_s))
        try:
            res = program(dist, rank, size, skip)
        finally:
            dist.destroy_process_group()
        payload = {"ok": res}
    except BaseException:
        payload = {"error": traceback.format_exc()}
    with open(out_path + ".tmp", "wb") as f:
        pickle.dump(payload, f)
    os.replace(out_path + ".tmp", out_path)


class _Job:
    def __init__(self, ctx, lib, size, tmp):
        self.lib, self.size = lib, size
        port = _free_port()
        self.paths = [os.path.join(tmp, f"{lib}-{size}-{r}.pkl") for r in range(size)]
        self.procs = [ctx.Process(target=_rank_main, args=(lib, r, size, port, self.paths[r], TIMEOUT_S - 5),
                                  name=f"{lib}-{size}-rank{r}", daemon=True) for r in range(size)]
        for p in self.procs:
            p.start()

    def finish(self, deadline):
        """{rank: results}; raises AssertionError naming ranks that hung, died or raised."""
        problems = []
        for r, p in enumerate(self.procs):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join(5)
                problems.append(f"rank {r}: still running after {TIMEOUT_S} s, killed")
        results = {}
        for r, p in enumerate(self.procs):
            if not os.path.exists(self.paths[r]):
                if not any(s.startswith(f"rank {r}:") for s in problems):
                    problems.append(f"rank {r}: exited with code {p.exitcode} and no result")
                continue
            with open(self.paths[r], "rb") as f:
                payload = pickle.load(f)
            if "error" in payload:
                problems.append(f"rank {r} raised:\n{payload['error']}")
            else:
                results[r] = payload["ok"]
        if problems:
            raise AssertionError(f"{self.lib} with {self.size} ranks failed:\n" + "\n".join(problems))
        return results


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """({(lib, size): {rank: results}}, {(lib, size): error}). The four jobs run one
    after the other (on two cores, running them at once is no faster)."""
    tmp = str(tmp_path_factory.mktemp("conformance"))
    ctx = mp.get_context("spawn")
    out, errors = {}, {}
    for size in SIZES:
        for lib in ("torch", "distc"):
            job = _Job(ctx, lib, size, tmp)
            try:
                out[(lib, size)] = job.finish(time.monotonic() + TIMEOUT_S)
            except AssertionError as e:
                errors[(lib, size)] = str(e)
    return out, errors


def _get(runs, lib, size):
    out, errors = runs
    if (lib, size) in errors:
        pytest.fail(errors[(lib, size)], pytrace=False)
    return out[(lib, size)]


# ------------------------------------------------------------------ comparing

def _decode(r):
    dtype, shape, data = r
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)


def _show(v):
    if isinstance(v, tuple) and len(v) == 3 and isinstance(v[2], bytes) and isinstance(v[0], str):
        return f"{v[0]}{list(v[1])} {_decode(v).tolist()}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return repr(v)


def _same(key, ours, theirs):
    if key.startswith("avg/"):
        dtype = ours[0]
        if ours[0] != theirs[0] or ours[1] != theirs[1]:
            return False
        if dtype in AVG_TOL:
            rtol, atol = AVG_TOL[dtype]
            a, b = _decode(ours).astype(np.float64), _decode(theirs).astype(np.float64)
            return bool(np.all(np.abs(a - b) <= rtol * np.abs(b) + atol))
    return ours == theirs  # tensors as (dtype, shape, bytes): byte for byte


def compare(torch_res, distc_res):
    """Mismatch messages between torch's and distc's results of one rank."""
    problems, checked = [], 0
    for key in sorted(set(torch_res) | set(distc_res)):
        if key in distc_res and key in torch_res:
            ref_key = key
        elif key in distc_res and key + "~emul" in torch_res:
            ref_key = key + "~emul"  # torch gloo cannot: its emulation is the reference
        else:
            problems.append(f"{key}: only in {'distc' if key in distc_res else 'torch'}'s results")
            continue
        checked += 1
        if not _same(key, distc_res[key], torch_res[ref_key]):
            problems.append(f"{key}:\n    distc {_show(distc_res[key])}\n    torch {_show(torch_res[ref_key])}"
                            + (" (emulated)" if ref_key != key else ""))
    return problems, checked


@pytest.mark.parametrize("size", SIZES)
def test_same_results_as_torch(runs, size):
    t = _get(runs, "torch", size)
    d = _get(runs, "distc", size)
    problems = []
    for r in range(size):
        p, checked = compare(t[r], d[r])
        assert checked > 150, f"rank {r}: only {checked} results compared"
        problems += [f"rank {r}: {x}" for x in p]
    if problems:
        pytest.fail(f"{len(problems)} mismatches with {size} ranks:\n" + "\n".join(problems), pytrace=False)


@pytest.mark.parametrize("lib", ["torch", "distc"])
def test_all_to_all_single_docstring_example(runs, lib):
    """torch.distributed.all_to_all_single's 4-rank example with uneven splits, as documented."""
    res = _get(runs, lib, 4)
    for r in range(4):
        got = _decode(res[r]["all_to_all_single/uneven/int64"]).tolist()
        assert got == DOC_A2A_OUTPUT[r], f"{lib} rank {r}"


@pytest.mark.parametrize("size", SIZES)
def test_distc_results_are_self_consistent(runs, size):
    """distc's native results equal distc's own emulations too (not only torch's)."""
    d = _get(runs, "distc", size)
    for r in range(size):
        for key, val in d[r].items():
            if key + "~emul" in d[r]:
                assert _same(key, val, d[r][key + "~emul"]), f"rank {r} {key}: {_show(val)} vs " \
                                                             f"{_show(d[r][key + '~emul'])}"


def test_compare_detects_a_difference():
    """The comparison is not vacuous: one flipped byte or a float off by more than the tolerance fails."""
    a = {"all_reduce/x": ("int32", (2,), np.array([1, 2], np.int32).tobytes()),
         "avg/float32": ("float32", (2,), np.array([1.0, 2.0], np.float32).tobytes())}
    b = dict(a)
    assert compare(a, b) == ([], 2)
    b["all_reduce/x"] = ("int32", (2,), np.array([1, 3], np.int32).tobytes())
    assert len(compare(a, b)[0]) == 1
    b = dict(a, **{"avg/float32": ("float32", (2,), np.array([1.0, 2.0 + 1e-7], np.float32).tobytes())})
    assert compare(a, b)[0] == []  # within tolerance
    b = dict(a, **{"avg/float32": ("float32", (2,), np.array([1.0, 2.001], np.float32).tobytes())})
    assert len(compare(a, b)[0]) == 1
