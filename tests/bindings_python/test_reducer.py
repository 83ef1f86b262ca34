"""The DDP reducer from Python: averages over ranks, views, hooks, and
bucket assignment against PyTorch's own function."""
import numpy as np
import pytest
import torch
import torch.distributed

import distc
from conftest import run_threads

SHAPES = [(3,), (5, 2), (1,), (200,)]


def grads_of(rank, k):
    return [np.full(s, float(rank + 1 + k + i), np.float32) for i, s in enumerate(SHAPES)]


@pytest.mark.parametrize("size", [1, 2, 3])
@pytest.mark.parametrize("mode", ["copy", "view", "fp16", "explicit", "unused"])
def test_reducer_averages(size, mode):
    def body(pg):
        r = pg.rank()
        grads = [np.zeros(s, np.float32) for s in SHAPES]
        kw = {"bucket_cap_mb": 400 / 2**20, "first_bucket_mb": 16 / 2**20}
        if mode == "view":
            kw["gradient_as_bucket_view"] = True
        if mode == "fp16":
            kw["comm_hook"] = "fp16"
        if mode == "explicit":
            kw["bucket_of"] = [0, 0, 1, 1]
        if mode == "unused":
            kw["find_unused_parameters"] = True
        with distc.Reducer(pg, grads, **kw) as red:
            assert red.num_buckets >= 2
            targets = [red.grad_view(i) for i in range(4)] if mode == "view" else grads
            for k in range(3):
                red.prepare_for_backward()
                for i in reversed(range(4)):
                    if mode == "unused" and i == 2:
                        continue
                    targets[i][...] = grads_of(r, k)[i]
                    red.mark_ready(i)
                red.finalize()
                for i in range(4):
                    want = np.mean([grads_of(q, k)[i] for q in range(pg.size())], axis=0)
                    if mode == "unused" and i == 2:
                        want = np.zeros_like(want)  # reduced as zeros on every rank
                    assert np.allclose(targets[i], want, rtol=1e-3 if mode == "fp16" else 0), (mode, i, k)
            assert red.ready_ns(0) >= 0
            nbytes, launch, reduce_ns = red.bucket_stats(0)
            assert nbytes > 0 and reduce_ns >= 0
        return True

    assert run_threads(size, body) == [True] * size


def test_reducer_errors():
    def body(pg):
        red = distc.Reducer(pg, [np.zeros(3, np.float32)])
        with pytest.raises(distc.DistcStateError):
            red.mark_ready(0)  # no prepare
        red.prepare_for_backward()
        red.mark_ready(0)
        with pytest.raises(distc.DistcStateError):
            red.mark_ready(0)  # twice
        with pytest.raises(distc.DistcInvalidArgument):
            red.mark_ready(7)
        red.finalize()
        with pytest.raises(distc.DistcStateError):
            red.grad_view(0)  # not a view reducer
        red.close()
        with pytest.raises(ValueError, match="closed"):
            red.prepare_for_backward()
        with pytest.raises(ValueError, match="comm_hook"):
            distc.Reducer(pg, [np.zeros(3, np.float32)], comm_hook="zip")
        with pytest.raises(ValueError, match="bucket_of"):
            distc.Reducer(pg, [np.zeros(3, np.float32)], bucket_of=[0, 1])
        with pytest.raises(TypeError):
            distc.Reducer("not a group", [np.zeros(3, np.float32)])
        # A stream (for device gradients) travels as a handle; host buckets ignore it.
        g = np.ones(3, np.float32)
        red = distc.Reducer(pg, [g], stream=0)
        red.prepare_for_backward()
        red.mark_ready(0)
        red.finalize()
        assert g.tolist() == [1.0, 1.0, 1.0]
        with pytest.raises(TypeError):
            distc.Reducer(pg, [g], stream="not a stream")
        return True

    assert run_threads(1, body) == [True]


@pytest.mark.parametrize("limits", [[800, 2000], [400], [10**6]])
def test_bucket_assignment_matches_pytorch(limits):
    ts = [torch.zeros(100), torch.zeros(300), torch.zeros(50, dtype=torch.float64), torch.zeros(200),
          torch.zeros(7, dtype=torch.float64), torch.zeros(1000)]
    sparse = [False, False, False, True, False, False]
    want, _ = torch.distributed._compute_bucket_assignment_by_size(ts, limits, sparse)
    assert distc.compute_bucket_assignment_by_size(ts, limits, sparse) == want
    want, _ = torch.distributed._compute_bucket_assignment_by_size(ts, limits)
    assert distc.compute_bucket_assignment_by_size(ts, limits) == want


@pytest.mark.parametrize("size", [1, 2, 3])
def test_sparse_gradient_rows(size):
    """An embedding's rows: the union over ranks, repeated rows summed, divided by the size."""
    def body(pg):
        r = pg.rank()
        emb, dense = np.zeros((8, 2), np.float32), np.zeros(3, np.float32)
        with distc.Reducer(pg, [emb, dense], expect_sparse=[True, False]) as red:
            assert red.num_buckets == 2
            red.prepare_for_backward()
            red.mark_ready_sparse(0, np.array([r, 7, r], np.int64), np.full((3, 2), r + 1.0, np.float32))
            dense[:] = r
            red.mark_ready(1)
            red.finalize()
            idx, rows = red.sparse_grad(0)
            want = {}
            for q in range(pg.size()):
                for i in (q, 7, q):
                    want[i] = want.get(i, 0.0) + (q + 1.0)
            assert idx.tolist() == sorted(want)
            assert np.allclose(rows[:, 0], [want[i] / pg.size() for i in sorted(want)])
            assert np.allclose(dense, (pg.size() - 1) / 2)
            with pytest.raises(distc.DistcInvalidArgument, match="sparse"):
                red.mark_ready(0)
            red.prepare_for_backward()
            with pytest.raises(distc.DistcInvalidArgument, match="outside"):
                red.mark_ready_sparse(0, np.array([8], np.int64), np.zeros((1, 2), np.float32))
            with pytest.raises(distc.DistcInvalidArgument, match="dense"):
                red.mark_ready_sparse(1, np.array([0], np.int64), np.zeros((1, 3), np.float32))
            red.mark_ready_sparse(0, np.zeros(0, np.int64), np.zeros((0, 2), np.float32))
            red.mark_ready(1)
            red.finalize()
            assert red.sparse_grad(0)[0].tolist() == []
            with pytest.raises(ValueError, match="expect_sparse"):
                distc.Reducer(pg, [emb], expect_sparse=[True, False])
        return True

    assert run_threads(size, body) == [True] * size
