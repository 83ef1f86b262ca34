"""Collective checks run on every rank of a group: `check_*(pg)` raises
AssertionError with a message when a result is wrong. They run with ranks as
threads (test_collectives.py, 1-4 ranks) and as spawned processes
(test_processes.py, 2 and 4 ranks): the same code, the same inputs.

Every rank can compute every rank's input (inputs() is deterministic), so
each check computes the expected result locally with NumPy."""
import numpy as np
import torch

import distc
from distc import ReduceOp

NUMPY_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64",
                "complex64", "complex128"]
OPS = [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.BAND, ReduceOp.BOR,
       ReduceOp.BXOR, ReduceOp.PREMUL_SUM]
N = 7  # elements: odd, so chunked algorithms get uneven pieces

# "numpy": arrays go to distc as they are (buffer protocol); "torch": as
# torch.from_numpy views of the same memory (DLPack), so results are read
# back from the arrays either way.
MODE = "numpy"


def T(x):
    return torch.from_numpy(x) if MODE == "torch" else x


def TL(xs):
    return None if xs is None else [T(x) for x in xs]


def inputs(rank, dtype, n=N, salt=0):
    i = np.arange(n)
    v = (rank * 7 + i * 3 + salt) % 5
    if dtype == "bool":
        return (v % 3 == 0)
    if dtype.startswith("uint"):
        return (v % 4).astype(dtype)
    if dtype.startswith("complex"):
        return (v - 2 + 1j * ((v + 1) % 3)).astype(dtype)
    return (v - 2).astype(dtype)


def supported(dtype, op):
    """The combinations torch.distributed defines (others are DistcInvalidArgument)."""
    if dtype.startswith("complex"):
        return op in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PREMUL_SUM)
    if dtype.startswith("float") or dtype == "bfloat16":
        return op not in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)
    if dtype == "bool":
        return op not in (ReduceOp.AVG, ReduceOp.PREMUL_SUM)
    return True


def factor(dtype):
    return 0.5 if dtype.startswith(("float", "complex", "bfloat")) else 3.0


def expected(dtype, op, size, salt=0):
    xs = [inputs(r, dtype, salt=salt) for r in range(size)]
    if dtype == "bool":
        if op in (ReduceOp.SUM, ReduceOp.MAX, ReduceOp.BOR):
            return np.logical_or.reduce(xs)
        if op in (ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.BAND):
            return np.logical_and.reduce(xs)
        return np.logical_xor.reduce(xs)
    wide = np.complex128 if dtype.startswith("complex") else (np.float64 if dtype.startswith("float") else np.int64)
    w = [x.astype(wide) for x in xs]
    if op == ReduceOp.SUM:
        r = sum(w)
    elif op == ReduceOp.AVG:
        s = sum(w)
        r = s / size if wide is not np.int64 else np.trunc(s / size)
    elif op == ReduceOp.PREMUL_SUM:
        r = sum(x * factor(dtype) for x in w)
    elif op == ReduceOp.PRODUCT:
        r = np.prod(w, axis=0)
    elif op == ReduceOp.MIN:
        r = np.min(w, axis=0)
    elif op == ReduceOp.MAX:
        r = np.max(w, axis=0)
    elif op == ReduceOp.BAND:
        r = np.bitwise_and.reduce(w)
    elif op == ReduceOp.BOR:
        r = np.bitwise_or.reduce(w)
    else:
        r = np.bitwise_xor.reduce(w)
    return np.asarray(r).astype(dtype)


def close(got, want, dtype, what):
    got = np.asarray(got)
    if dtype == "float16":
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-3)
    elif dtype.startswith(("float", "complex")):
        ok = np.allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        ok = np.array_equal(got, want)
    assert ok, f"{what}: got {got.tolist()}, want {want.tolist()}"


def check_transport(pg):
    r, size = pg.rank(), pg.size()
    assert pg.transport(r) == "self"
    if size > 1:  # ranks on one host: shared memory
        assert pg.transport((r + 1) % size) == "shm"
    try:
        pg.transport(size)
    except distc.DistcInvalidArgument as e:
        assert "not a rank" in str(e), str(e)
    else:
        raise AssertionError("transport(size) should be refused")


def check_allreduce_every_dtype_and_op(pg):
    r, size = pg.rank(), pg.size()
    for dtype in NUMPY_DTYPES:
        for op in OPS:
            a = inputs(r, dtype)
            arg = distc.premul_sum(factor(dtype)) if op == ReduceOp.PREMUL_SUM else op
            if not supported(dtype, op):
                try:
                    pg.all_reduce(T(a), arg)
                except distc.DistcInvalidArgument as e:
                    assert "allreduce" in str(e), str(e)
                    continue
                raise AssertionError(f"allreduce {op.name} on {dtype} should be refused")
            pg.all_reduce(T(a), arg)
            close(a, expected(dtype, op, size), dtype, f"allreduce {op.name} {dtype} rank {r}")


def check_allreduce_torch_tensors(pg):
    """Through __dlpack__: torch tensors, bfloat16 and bool included."""
    r, size = pg.rank(), pg.size()
    for dtype in ["bool", "int64", "float32", "complex64"]:
        for op in (ReduceOp.SUM, ReduceOp.MAX) if dtype != "complex64" else (ReduceOp.SUM,):
            t = torch.from_numpy(inputs(r, dtype).copy())
            pg.all_reduce(t, op)
            close(t.numpy(), expected(dtype, op, size), dtype, f"torch allreduce {op.name} {dtype}")
    t = torch.from_numpy(inputs(r, "float32")).to(torch.bfloat16)
    pg.all_reduce(t, ReduceOp.SUM)
    want = expected("float32", ReduceOp.SUM, size)
    assert np.array_equal(t.float().numpy(), want), f"bfloat16 SUM: {t.tolist()} vs {want.tolist()}"
    t2 = torch.arange(12, dtype=torch.float64).reshape(3, 4) * (r + 1)
    pg.all_reduce(t2)
    assert torch.equal(t2, torch.arange(12, dtype=torch.float64).reshape(3, 4) * (size * (size + 1) / 2))


def check_allreduce_coalesced(pg):
    r, size = pg.rank(), pg.size()
    ts = [inputs(r, "float32", n) for n in (1, 5, 9)]
    pg.all_reduce_coalesced(TL(ts), ReduceOp.SUM)
    for n, t in zip((1, 5, 9), ts):
        want = sum(inputs(q, "float32", n) for q in range(size))
        close(t, want, "float32", "allreduce_coalesced")


def check_broadcast_and_reduce(pg):
    r, size = pg.rank(), pg.size()
    for root in range(size):
        for dtype in ("int8", "float64", "complex64", "bool"):
            a = inputs(r, dtype)
            pg.broadcast(T(a), root)
            close(a, inputs(root, dtype), dtype, f"broadcast from {root}")
        for op in (ReduceOp.SUM, ReduceOp.MAX):
            a = inputs(r, "int32")
            pg.reduce(T(a), root, op)
            want = expected("int32", op, size) if r == root else inputs(r, "int32")
            close(a, want, "int32", f"reduce {op.name} to {root}")


def check_gathers(pg):
    r, size = pg.rank(), pg.size()
    for dtype in ("uint8", "float32", "int64"):
        outs = [np.zeros(N, dtype) for _ in range(size)]
        pg.all_gather(TL(outs), T(inputs(r, dtype)))
        for q in range(size):
            close(outs[q], inputs(q, dtype), dtype, f"all_gather[{q}]")
        flat = np.zeros(N * size, dtype)
        pg.all_gather_into_tensor(T(flat), T(inputs(r, dtype)))
        close(flat, np.concatenate([inputs(q, dtype) for q in range(size)]), dtype, "all_gather_into_tensor")
        for root in range(size):
            outs = [np.zeros(N, dtype) for _ in range(size)] if r == root else None
            pg.gather(T(inputs(r, dtype)), TL(outs), root)
            if r == root:
                for q in range(size):
                    close(outs[q], inputs(q, dtype), dtype, f"gather to {root}")
            ins = [inputs(q, dtype, salt=root) for q in range(size)] if r == root else None
            out = np.zeros(N, dtype)
            pg.scatter(T(out), TL(ins), root)
            close(out, inputs(r, dtype, salt=root), dtype, f"scatter from {root}")


def check_reduce_scatter(pg):
    r, size = pg.rank(), pg.size()
    ins = [inputs(r, "int32", salt=q) for q in range(size)]
    out = np.zeros(N, np.int32)
    pg.reduce_scatter(T(out), TL(ins), ReduceOp.SUM)
    want = sum(inputs(q, "int32", salt=r).astype(np.int64) for q in range(size)).astype(np.int32)
    close(out, want, "int32", "reduce_scatter")
    flat = np.concatenate(ins)
    out2 = np.zeros(N, np.int32)
    pg.reduce_scatter_tensor(T(out2), T(flat), ReduceOp.SUM)
    close(out2, want, "int32", "reduce_scatter_tensor")


def check_alltoall(pg):
    r, size = pg.rank(), pg.size()
    ins = [np.full(3, 10 * r + j, np.int64) for j in range(size)]
    outs = [np.zeros(3, np.int64) for _ in range(size)]
    pg.all_to_all(TL(outs), TL(ins))
    for j in range(size):
        close(outs[j], np.full(3, 10 * j + r, np.int64), "int64", "all_to_all")
    # even splits
    inp = np.arange(2 * size, dtype=np.float32) + 100 * r
    out = np.zeros(2 * size, np.float32)
    pg.all_to_all_single(T(out), T(inp))
    want = np.concatenate([np.arange(2 * r, 2 * r + 2, dtype=np.float32) + 100 * j for j in range(size)])
    close(out, want, "float32", "all_to_all_single even")
    # uneven: rank r sends j+1 rows to rank j
    in_splits = [j + 1 for j in range(size)]
    out_splits = [r + 1] * size
    inp = np.concatenate([np.full(j + 1, 10 * r + j, np.int32) for j in range(size)])
    out = np.zeros(sum(out_splits), np.int32)
    pg.all_to_all_single(T(out), T(inp), out_splits, in_splits)
    want = np.concatenate([np.full(r + 1, 10 * j + r, np.int32) for j in range(size)])
    close(out, want, "int32", "all_to_all_single uneven")


def check_all_to_all_single_torch_example(pg):
    """The 4-rank example of torch.distributed.all_to_all_single's docstring."""
    if pg.size() != 4:
        return
    r = pg.rank()
    input_splits = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]][r]
    output_splits = [[2, 3, 2, 2], [2, 2, 1, 2], [1, 2, 1, 2], [1, 2, 1, 1]][r]
    inp = torch.tensor([[0, 1, 2, 3, 4, 5], [10, 11, 12, 13, 14, 15, 16, 17, 18], [20, 21, 22, 23, 24],
                        [30, 31, 32, 33, 34, 35, 36]][r])
    out = torch.empty(sum(output_splits), dtype=torch.int64)
    pg.all_to_all_single(out, inp, output_splits, input_splits)
    want = [[0, 1, 10, 11, 12, 20, 21, 30, 31], [2, 3, 13, 14, 22, 32, 33], [4, 15, 16, 23, 34, 35],
            [5, 17, 18, 24, 36]][r]
    assert out.tolist() == want, f"rank {r}: {out.tolist()} != {want}"


def check_point_to_point(pg):
    r, size = pg.rank(), pg.size()
    if size == 1:
        return
    nxt, prv = (r + 1) % size, (r - 1) % size
    # a ring with isend/irecv
    buf = np.zeros(4, np.float64)
    ws = pg.send(T(np.full(4, float(r))), nxt, tag=3, async_op=True)
    wr = pg.recv(T(buf), prv, tag=3, async_op=True)
    wr.wait()
    ws.wait()
    close(buf, np.full(4, float(prv)), "float64", "isend/irecv ring")
    assert wr.source_rank() == prv
    # any source: every rank sends to rank 0
    if r == 0:
        seen = set()
        for _ in range(size - 1):
            x = np.zeros(1, np.int32)
            src = pg.recv(T(x), None, tag=5)
            assert x[0] == 100 + src, f"any-source recv from {src} got {x[0]}"
            seen.add(src)
        assert seen == set(range(1, size))
    else:
        pg.send(T(np.array([100 + r], np.int32)), 0, tag=5)
    # batched ring
    got = np.zeros(2, np.int16)
    w = pg.batch_isend_irecv([(1, T(got), prv, 0), (0, T(np.full(2, r, np.int16)), nxt, 0)])
    w.wait()
    close(got, np.full(2, prv, np.int16), "int16", "batch_isend_irecv")


def check_async_collectives(pg):
    r, size = pg.rank(), pg.size()
    works, arrays = [], []
    for k in range(5):
        a = np.full(3, r + k, np.float32)
        works.append(pg.all_reduce(T(a), async_op=True))
        arrays.append(a)
    w = pg.barrier(async_op=True)
    for k, (wk, a) in enumerate(zip(works, arrays)):
        assert wk.wait() is True
        assert wk.is_completed() and wk.is_success() and wk.exception() is None
        assert wk.source_rank() == -1
        assert wk.result()[0] is a or MODE == "torch"
        close(a, np.full(3, sum(q + k for q in range(size)), np.float32), "float32", f"async allreduce {k}")
    w.wait()
    seqs = [wk.seq for wk in works]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5, seqs


def check_bytes_and_objects(pg):
    r, size = pg.rank(), pg.size()
    assert pg.all_gather_bytes(b"x" * r) == [b"x" * q for q in range(size)]
    for root in range(size):
        got = pg.gather_bytes(bytes([r]) * (r + 1), root)
        assert got == ([bytes([q]) * (q + 1) for q in range(size)] if r == root else None)
        assert pg.broadcast_bytes(b"from %d" % root if r == root else None, root) == b"from %d" % root
        data = [b"%d->%d" % (root, q) for q in range(size)] if r == root else None
        assert pg.scatter_bytes(data, root) == b"%d->%d" % (root, r)
    assert pg.all_gather_object({"rank": r, "l": [r] * r}) == [{"rank": q, "l": [q] * q} for q in range(size)]
    assert pg.broadcast_object(("hi", r), 0) == ("hi", 0)


def check_subgroups(pg):
    r, size = pg.rank(), pg.size()
    evens = [q for q in range(size) if q % 2 == 0]
    sub = pg.new_subgroup(evens)
    if r % 2:
        assert sub is None
    else:
        with sub:
            assert sub.size() == len(evens) and sub.rank() == evens.index(r)
            assert sub.global_rank(sub.rank()) == r
            a = np.array([r], np.int64)
            sub.all_reduce(T(a))
            assert a[0] == sum(evens)
    half = pg.split(r % 2, key=-r)
    with half:
        members = [q for q in range(size) if q % 2 == r % 2]
        assert half.size() == len(members)
        assert half.rank() == sorted(members, reverse=True).index(r)  # ordered by key = -rank
    none = pg.split(-1 if r == 0 else 0)
    if r == 0:
        assert none is None
    elif none is not None:
        none.close()


ALL = [check_transport, check_allreduce_every_dtype_and_op, check_allreduce_torch_tensors, check_allreduce_coalesced,
       check_broadcast_and_reduce, check_gathers, check_reduce_scatter, check_alltoall,
       check_all_to_all_single_torch_example, check_point_to_point, check_async_collectives,
       check_bytes_and_objects, check_subgroups]
