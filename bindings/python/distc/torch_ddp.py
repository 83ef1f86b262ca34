"""PyTorch's DistributedDataParallel, on distc's reducer.

    from distc.torch_ddp import DistributedDataParallel as DDP
    model = DDP(model)                 # the default group, or group=...
    loss_fn(model(x), y).backward()    # gradients are averaged over ranks when backward returns
    opt.step()

A small adapter, and the way any framework drives the reducer: a gradient
hook per parameter copies the gradient into the reducer (mark_ready), whose
buckets start their allreduce while the rest of the backward pass runs; a
callback queued on autograd's engine calls finalize when backward ends and
puts the averages into `param.grad` (sparse for embeddings made with
sparse=True, reduced by row). Like torch's DDP it broadcasts rank 0's
parameters and buffers at construction (and buffers before every forward
with broadcast_buffers), and `no_sync()` skips the reduction while gradients
accumulate. Needs PyTorch; distc itself does not.
"""
import contextlib

import torch

from . import _api
from ._reducer import Reducer


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, module, group=None, bucket_cap_mb=25, first_bucket_mb=1, find_unused_parameters=False,
                 gradient_as_bucket_view=False, broadcast_buffers=True, comm_hook=None):
        super().__init__()
        self.module = module
        self.group = _api._group(group)
        if self.group is None:
            raise ValueError("this rank is not a member of the group")
        self.broadcast_buffers = broadcast_buffers
        self._find_unused = find_unused_parameters
        self._params = [p for p in module.parameters() if p.requires_grad]
        if not self._params:
            raise ValueError("the module has no parameter that requires a gradient")
        if any(p.device.type != "cpu" for p in self._params):
            raise ValueError("distc's reducer takes host memory: move the module to the CPU")
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                self.group.broadcast(t.data, 0)
        grads = [torch.zeros_like(p, memory_format=torch.contiguous_format) for p in self._params]
        # As torch's DDP: embeddings created with sparse=True produce sparse gradients.
        sparse_params = {id(m.weight) for m in module.modules()
                         if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse}
        self._sparse = [id(p) in sparse_params for p in self._params]
        self.reducer = Reducer(self.group, grads, bucket_cap_mb=bucket_cap_mb, first_bucket_mb=first_bucket_mb,
                               find_unused_parameters=find_unused_parameters,
                               gradient_as_bucket_view=gradient_as_bucket_view, comm_hook=comm_hook,
                               expect_sparse=self._sparse)
        # Where each gradient goes before mark_ready (its bucket, with views).
        self._grads = ([None if self._sparse[i] else self.reducer.grad_view(i) for i in range(len(grads))]
                       if gradient_as_bucket_view else grads)
        self._sync = True
        self._active = False   # an iteration was prepared and not finalized
        self._queued = False
        for i, p in enumerate(self._params):
            p.register_hook(self._hook(i))

    def _hook(self, i):
        def hook(grad):
            if not self._active:
                return grad
            if not self._queued:
                torch.autograd.Variable._execution_engine.queue_callback(self._finalize)
                self._queued = True
            # What param.grad will hold once autograd accumulates `grad` (no_sync sums included).
            acc = self._params[i].grad
            total = grad if acc is None else grad + acc
            if self._sparse[i]:
                total = total.coalesce()
                self.reducer.mark_ready_sparse(i, total.indices()[0].contiguous(), total.values().contiguous())
            else:
                self._grads[i].copy_(total)
                self.reducer.mark_ready(i)
            return grad
        return hook

    def _finalize(self):
        self._queued = False
        self._active = False
        self.reducer.finalize()
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(self._params, self._grads)):
                if self._find_unused and not self.reducer.grad_used(i):
                    continue  # no rank used it: as torch, its grad is left alone (None stays None)
                if self._sparse[i]:
                    idx, rows = self.reducer.sparse_grad(i)
                    p.grad = torch.sparse_coo_tensor(idx.unsqueeze(0), rows, p.shape).coalesce()
                elif p.grad is None:
                    p.grad = g.clone()
                else:
                    p.grad.copy_(g)

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers:
            with torch.no_grad():
                for b in self.module.buffers():
                    self.group.broadcast(b.data, 0)
        # A forward whose backward never ran leaves its iteration prepared: the next
        # backward uses it.
        if torch.is_grad_enabled() and self._sync and not self._active:
            self.reducer.prepare_for_backward()
            self._active = True
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally (no reduction) inside this block, as torch's no_sync."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old
