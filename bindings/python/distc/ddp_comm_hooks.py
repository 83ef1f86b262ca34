"""Communication hooks for distc's Reducer and distc.torch_ddp, as torch's
torch.distributed.algorithms.ddp_comm_hooks: allreduce_hook,
fp16_compress_hook, bf16_compress_hook, and PowerSGD (PowerSGDState,
powerSGD_hook, batched_powerSGD_hook: low-rank compression with error
feedback and warm start, arXiv:1905.13727).

A hook is hook(state, bucket) -> distc.Future (see Reducer.register_comm_hook).
For the default hooks `state` is the group to reduce over, or None for the
reducer's own; PowerSGDState carries its group the same way. They are written
against distc's groups and futures, step for step as torch's, so that the
same inputs give the same results (the compression hooks and PowerSGD need
PyTorch tensors; allreduce_hook takes NumPy arrays too)."""
import logging

import numpy as np

logger = logging.getLogger(__name__)


def _group(state, bucket):
    g = getattr(state, "process_group", state)
    return bucket._group if g is None else g


def allreduce_hook(process_group, bucket):
    """The default: a SUM allreduce of the bucket, divided by the group's size."""
    group = _group(process_group, bucket)
    buf, n = bucket.buffer(), group.size()

    def divide(fut):
        t = fut.value()[0]
        if isinstance(t, np.ndarray):
            np.divide(t, n, out=t, casting="unsafe")
            return t
        return t.div_(n)

    return group.all_reduce(buf, async_op=True).get_future().then(divide)


def _compress_hook(dtype, process_group, bucket):
    group = _group(process_group, bucket)
    buf, n = bucket.buffer(), group.size()
    compressed = buf.to(dtype).div_(n)

    def decompress(fut):
        buf.copy_(fut.value()[0])
        return buf

    return group.all_reduce(compressed, async_op=True).get_future().then(decompress)


def fp16_compress_hook(process_group, bucket):
    """The bucket travels as float16, divided by the group's size before the allreduce."""
    import torch
    return _compress_hook(torch.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """The same as bfloat16."""
    import torch
    return _compress_hook(torch.bfloat16, process_group, bucket)


# ---------------------------------------------------------------- PowerSGD

def _orthogonalize(matrices, epsilon=0):
    """Orthonormal columns for each matrix of a (batch, rows, cols) tensor, in place:
    Gram-Schmidt for rank <= 2 or half precision, QR otherwise (as torch's hook)."""
    import torch
    rank = matrices.shape[2]
    if rank <= 2 or matrices.dtype in (torch.float16, torch.bfloat16):
        for i in range(rank):
            col = matrices[:, :, i:i + 1]
            norm = torch.norm(col, dim=1, keepdim=True)
            col /= norm if epsilon == 0 else norm + epsilon
            if i + 1 < rank:
                rest = matrices[:, :, i + 1:]
                rest -= torch.sum(col * rest, dim=1, keepdim=True) * col
    else:
        torch.linalg.qr(matrices, out=(matrices, torch.empty(matrices.shape[0], rank, rank, dtype=matrices.dtype,
                                                             device=matrices.device)))


class PowerSGDState:
    """torch's PowerSGDState: the hyperparameters and, per bucket index, the error
    feedback and the P and Q memories. `process_group`: a distc group, or None for
    the reducer's. Compression starts at iteration `start_powerSGD_iter` (plain
    allreduces before, as torch), which must be at least 2 with error feedback or
    warm start: buckets are rebuilt after the first iteration."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0,
                 random_seed=0, compression_stats_logging_frequency=10_000, batch_tensors_with_same_shape=False):
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("start_powerSGD_iter must be at least 2 with error feedback or warm start: the "
                             "buckets are rebuilt after the first iteration")
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self.error_dict = {}
        self.p_memory_dict = {}
        self.q_memory_dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def maybe_increase_iter(self, bucket):
        """One iteration more once its last bucket is through."""
        if bucket.is_last():
            self.iter += 1
            if self.iter == self.start_powerSGD_iter:
                logger.info("PowerSGD starts compressing at iteration %d", self.iter)

    def compression_stats(self):
        """(compression rate, elements before, elements after) so far."""
        after = self.total_numel_after_compression
        rate = self.total_numel_before_compression / after if after > 0 else 0
        return rate, self.total_numel_before_compression, after


def _report_stats(bucket, state):
    if bucket.is_last() and state.iter >= state.next_stats_report:
        rate, before, after = state.compression_stats()
        logger.info("PowerSGD compression: %.2f (%d elements before, %d after), iteration %d", rate, before, after,
                    state.iter)
        state.next_stats_report = state.iter + state.compression_stats_logging_frequency


def _random_qs(state, qs, dtype):
    """Fresh Q matrices from the state's generator (as torch's: one seed per bucket and call)."""
    import torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(state.rng.randint(1_000_000_000))
        for q in qs:
            q.copy_(torch.randn(*q.shape, device="cpu", dtype=dtype))
            _orthogonalize(q, state.orthogonalization_epsilon)


def _plain_before_start(state, bucket):
    """The group, and before compression starts a plain allreduce's future (else None)."""
    group = _group(state, bucket)
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return group, allreduce_hook(group, bucket)
    return group, None


def powerSGD_hook(state, bucket):
    """torch's powerSGD_hook: each gradient matrix M worth compressing (its rows
    and columns times the rank, times min_compression_rate, below its size)
    travels as P = MQ and Q = M^T P (rank matrix_approximation_rank, P
    orthogonalized between the two allreduces), the rest (biases, small matrices)
    as one plain allreduce; M becomes PQ^T / size. With error feedback the
    compression's error is added to the next iteration's bucket; with warm start Q
    starts from the last iteration's."""
    import torch
    group, plain_future = _plain_before_start(state, bucket)
    if plain_future is not None:
        return plain_future
    n_ranks = group.size()
    buf = bucket.buffer()
    index, dtype = bucket.index(), buf.dtype
    before = None
    if state.use_error_feedback:
        if index in state.error_dict:
            buf.add_(state.error_dict[index])
        else:
            state.error_dict[index] = torch.zeros(buf.shape[0], dtype=dtype)
        before = buf.clone().detach()

    matrices, plain = [], []
    p_size = q_size = 0
    for g in bucket.gradients():
        m = g.view(g.shape[0], -1)
        rows, cols = m.shape
        r = min(rows, cols, state.matrix_approximation_rank)
        state.total_numel_before_compression += rows * cols
        if (rows + cols) * r * state.min_compression_rate < rows * cols:
            matrices.append(m)
            p_size += rows * r
            q_size += cols * r
            state.total_numel_after_compression += (rows + cols) * r
        else:
            plain.append(g)
            state.total_numel_after_compression += rows * cols
    _report_stats(bucket, state)
    plain_flat = torch.cat([t.view(-1) for t in plain]) if plain else torch.tensor([], dtype=dtype)

    fresh = not state.warm_start or index not in state.p_memory_dict
    if fresh:
        state.p_memory_dict[index] = torch.empty(p_size, dtype=dtype)
        state.q_memory_dict[index] = torch.empty(q_size, dtype=dtype)

    # The matrices as (batch, rows, cols): one each, or stacked by shape.
    by_shape = {}
    for m in matrices:
        by_shape.setdefault(tuple(m.shape), []).append(m)
    batches = []
    for same in by_shape.values():
        if state.batch_tensors_with_same_shape and len(same) > 1:
            batches.append(torch.stack(same))
        else:
            batches.extend(m.unsqueeze(0) for m in same)
    ps, qs = [], []
    pi = qi = 0
    for t in batches:
        b, rows, cols = t.shape
        r = min(rows, cols, state.matrix_approximation_rank)
        ps.append(state.p_memory_dict[index][pi:pi + b * rows * r].view(b, rows, r))
        qs.append(state.q_memory_dict[index][qi:qi + b * cols * r].view(b, cols, r))
        pi += b * rows * r
        qi += b * cols * r
    if fresh:
        _random_qs(state, qs, dtype)
    else:
        for q in qs:
            _orthogonalize(q, state.orthogonalization_epsilon)
    for t, q, p in zip(batches, qs, ps):
        torch.bmm(t, q, out=p)

    def plain_done_then_ps(fut):
        flat = fut.value()[0].div_(n_ranks)
        at = 0
        for t in plain:
            t.copy_(flat[at:at + t.numel()].view_as(t))
            at += t.numel()
        return group.all_reduce(state.p_memory_dict[index], async_op=True).get_future().wait()[0]

    def ps_done_then_qs(fut):
        state.p_memory_dict[index] = fut.value()
        for p in ps:
            _orthogonalize(p, state.orthogonalization_epsilon)
        for t, p, q in zip(batches, ps, qs):
            torch.bmm(t.transpose(1, 2), p, out=q)
        return group.all_reduce(state.q_memory_dict[index], async_op=True).get_future().wait()[0]

    def decompress(fut):
        state.q_memory_dict[index] = fut.value().div_(n_ranks)
        for p, q, t in zip(ps, qs, batches):
            torch.bmm(p, q.transpose(1, 2), out=t)
        if state.batch_tensors_with_same_shape:  # stacked copies go back to their matrices
            for t in batches:
                if t.shape[0] > 1:
                    for i, m in enumerate(by_shape[tuple(t.shape[1:])]):
                        m.copy_(t[i])
        if state.use_error_feedback:
            state.error_dict[index] = before - buf
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        return buf

    return (group.all_reduce(plain_flat, async_op=True).get_future()
            .then(plain_done_then_ps).then(ps_done_then_qs).then(decompress))


def batched_powerSGD_hook(state, bucket):
    """torch's batched_powerSGD_hook: the whole bucket as one square matrix (zero
    padded), compressed at once; faster, usually less accurate unless the rank is 1."""
    import math

    import torch
    group, plain_future = _plain_before_start(state, bucket)
    if plain_future is not None:
        return plain_future
    n_ranks = group.size()
    buf = bucket.buffer()
    index, dtype, total = bucket.index(), buf.dtype, buf.shape[0]
    side = math.ceil(math.sqrt(total))
    state.total_numel_before_compression += total
    state.total_numel_after_compression += side * state.matrix_approximation_rank * 2
    padded = torch.zeros(side * side, dtype=dtype)  # the bucket, zero padded to a square
    padded[:total] = buf
    _report_stats(bucket, state)
    before = None
    if state.use_error_feedback:
        if index in state.error_dict:
            padded.add_(state.error_dict[index])
        else:
            state.error_dict[index] = torch.zeros(side * side, dtype=dtype)
        before = padded.clone().detach()
    matrix = padded.view(side, side)
    r = state.matrix_approximation_rank

    def low_rank(fill_random):
        if fill_random:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(state.rng.randint(1_000_000_000))
                return torch.randn((side, r), device="cpu", dtype=dtype)
        return torch.empty(side, r, dtype=dtype)

    if not state.warm_start or index not in state.p_memory_dict:
        state.p_memory_dict[index] = low_rank(False)
        state.q_memory_dict[index] = low_rank(True)
    _orthogonalize(state.q_memory_dict[index].unsqueeze(0))
    torch.matmul(matrix, state.q_memory_dict[index], out=state.p_memory_dict[index])

    def compute_q(fut):
        state.p_memory_dict[index] = fut.value()[0]
        _orthogonalize(state.p_memory_dict[index].unsqueeze(0))
        torch.matmul(matrix.t(), state.p_memory_dict[index], out=state.q_memory_dict[index])
        return group.all_reduce(state.q_memory_dict[index], async_op=True).get_future().wait()[0]

    def decompress(fut):
        state.q_memory_dict[index] = fut.value().div_(n_ranks)
        torch.matmul(state.p_memory_dict[index], state.q_memory_dict[index].t(), out=matrix)
        if state.use_error_feedback:
            state.error_dict[index] = before - padded
        buf.copy_(padded[:total])
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        return buf

    return group.all_reduce(state.p_memory_dict[index], async_op=True).get_future().then(compute_q).then(decompress)
