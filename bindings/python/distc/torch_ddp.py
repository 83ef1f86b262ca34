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
accumulate. `join()` (or distc.join.Join([model, ...])) trains on uneven
inputs: a rank out of data shadows the others' iterations (zeros for its
gradients) until every rank is done, then every rank takes the weights of
one that finished last. Needs PyTorch; distc itself does not.
"""
import contextlib

import numpy as np
import torch

from . import _api
from ._group import ProcessGroup
from ._reducer import Reducer
from .join import Join, JoinHook, Joinable, count_over


class _DDPJoinHook(JoinHook):
    """What a joined rank does for each iteration of the active ones (forward's
    agreement, buffer broadcast, the backward's buckets and used map), and the
    final copy of a last joiner's weights."""

    def __init__(self, ddp, divide_by_initial_world_size):
        self.ddp = ddp
        ddp._divide_by_initial_world_size = divide_by_initial_world_size

    def main_hook(self):
        ddp = self.ddp
        reducing = ddp._count(0)
        ddp._sync_buffers(active=False)
        if reducing == 0:
            return  # the active ranks' forward was in no_sync or without grad: no reduction
        ddp.reducer.join()

    def post_hook(self, is_last_joiner):
        ddp = self.ddp
        src = ddp._common_rank(is_last_joiner)
        with torch.no_grad():
            for t in list(ddp.module.parameters()) + list(ddp.module.buffers()):
                ddp.group.broadcast(t.data, src)


class DistributedDataParallel(torch.nn.Module, Joinable):
    def __init__(self, module, group=None, bucket_cap_mb=25, first_bucket_mb=1, find_unused_parameters=False,
                 gradient_as_bucket_view=False, broadcast_buffers=True, comm_hook=None, static_graph=False):
        torch.nn.Module.__init__(self)
        Joinable.__init__(self)
        self._divide_by_initial_world_size = True
        self._n_sync = None  # with join: the ranks that reduce this iteration
        self.module = module
        self.group = _api._group(group)
        if self.group is None:
            raise ValueError("this rank is not a member of the group")
        self.broadcast_buffers = broadcast_buffers
        self._find_unused = find_unused_parameters or static_graph  # both know which grads nobody used
        self._params = [p for p in module.parameters() if p.requires_grad]
        if not self._params:
            raise ValueError("the module has no parameter that requires a gradient")
        self._cuda = self._params[0].device.type == "cuda"
        if any(p.device != self._params[0].device for p in self._params):
            raise ValueError("the parameters are on several devices: one DDP takes one device, as torch's")
        if not self._cuda and self._params[0].device.type != "cpu":
            raise ValueError(f"parameters on {self._params[0].device}: distc's DDP takes CPU or CUDA parameters")
        if self._cuda:
            # The reducer's device buckets (nccl), ordered on the stream the backward pass writes on.
            # What it learns on the host, or reads through host views, is not there.
            for name, on in (("find_unused_parameters", find_unused_parameters), ("static_graph", static_graph),
                             ("gradient_as_bucket_view", gradient_as_bucket_view)):
                if on:
                    raise NotImplementedError(f"{name} with CUDA parameters: distc's reducer does this on the "
                                              f"host only")
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                self.group.broadcast(t.data, 0)
        grads = [torch.zeros_like(p, memory_format=torch.contiguous_format) for p in self._params]
        # As torch's DDP: embeddings created with sparse=True produce sparse gradients.
        sparse_params = {id(m.weight) for m in module.modules()
                         if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse}
        self._sparse = [id(p) in sparse_params for p in self._params]
        if self._cuda and any(self._sparse):
            raise NotImplementedError("sparse gradients with CUDA parameters: distc reduces sparse rows on the host")
        self.reducer = Reducer(self.group, grads, bucket_cap_mb=bucket_cap_mb, first_bucket_mb=first_bucket_mb,
                               find_unused_parameters=find_unused_parameters,
                               gradient_as_bucket_view=gradient_as_bucket_view, comm_hook=comm_hook,
                               expect_sparse=self._sparse, static_graph=static_graph,
                               stream=torch.cuda.current_stream(self._params[0].device) if self._cuda else None)
        # Where each gradient goes before mark_ready (its bucket, with views).
        self._grads = ([None if self._sparse[i] else self.reducer.grad_view(i) for i in range(len(grads))]
                       if gradient_as_bucket_view else grads)
        self._sync = True
        self._hooked = comm_hook is not None
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
        # Under join with divide_by_initial_world_size=False: averaged over the ranks
        # that took part, not the group (the reducer divided by the group's size).
        scale = (self.group.size() / self._n_sync
                 if self._n_sync and not self._divide_by_initial_world_size and self._n_sync != self.group.size()
                 else None)
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
                if scale is not None and not self._sparse[i]:
                    p.grad.mul_(scale)

    def register_comm_hook(self, state, hook):
        """torch's DDP.register_comm_hook, before the first backward pass, once.
        hook(state, bucket) gets a distc.GradBucket and returns a distc.Future of the
        bucket's average (see distc.Reducer.register_comm_hook); distc.ddp_comm_hooks
        has torch's hooks written for distc. torch's own allreduce_hook,
        fp16_compress_hook and bf16_compress_hook (state None or this DDP's group)
        run as distc's built-in hooks, and torch's powerSGD_hook and
        batched_powerSGD_hook as distc's (their PowerSGDState's process_group must
        be None or a distc group)."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as torch_psgd
        from . import ddp_comm_hooks
        if self._hooked:
            raise RuntimeError("register_comm_hook may only be called once, as torch's")
        if self._cuda:
            raise NotImplementedError("communication hooks with CUDA parameters: distc's hooks see host buckets")
        if not callable(hook):
            raise TypeError(f"hook must be callable, not {type(hook).__name__}")
        builtin = {default_hooks.allreduce_hook: "allreduce", default_hooks.fp16_compress_hook: "fp16",
                   default_hooks.bf16_compress_hook: "bf16"}
        ported = {torch_psgd.powerSGD_hook: ddp_comm_hooks.powerSGD_hook,
                  torch_psgd.batched_powerSGD_hook: ddp_comm_hooks.batched_powerSGD_hook}
        if hook in builtin:
            if state is not None and state is not self.group:
                raise ValueError("the hook's state must be None or this DDP's group: the built-in hooks reduce "
                                 "over it")
            self.reducer.register_builtin_hook(builtin[hook])
        else:
            group = getattr(state, "process_group", None)
            if hook in ported and group is not None and not isinstance(group, ProcessGroup):
                raise ValueError("PowerSGDState.process_group must be None or a distc group, not a "
                                 f"{type(group).__name__}")
            self.reducer.register_comm_hook(state, ported.get(hook, hook), _params=self._params)
        self._hooked = True

    # ---- join (uneven inputs)
    def _count(self, value):
        return count_over(self.group, value)

    def _common_rank(self, mine):
        """The highest rank for which `mine` holds on its rank."""
        x = np.array([self.group.rank() if mine else -1], dtype=np.int64)
        self.group.all_reduce(x, _api.ReduceOp.MAX)
        return int(x[0])

    def _sync_buffers(self, active=True):
        if not self.broadcast_buffers or not list(self.module.buffers()):
            return
        # Under join, from the highest rank still active (a joined one's are stale).
        src = self._common_rank(active) if self._join_config.enable else 0
        with torch.no_grad():
            for b in self.module.buffers():
                self.group.broadcast(b.data, src)

    def join_hook(self, divide_by_initial_world_size=True, **kwargs):
        if self._cuda:
            raise NotImplementedError("join with CUDA parameters: distc's join counts ranks in host memory")
        return _DDPJoinHook(self, divide_by_initial_world_size)

    @property
    def join_device(self):
        return "cpu"

    @property
    def join_process_group(self):
        return self.group

    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """torch's DDP.join(): a context manager for uneven inputs (see distc.join)."""
        if self._cuda and enable:
            raise NotImplementedError("join with CUDA parameters: distc's join counts ranks in host memory")
        return Join([self], enable, throw_on_early_termination,
                    divide_by_initial_world_size=divide_by_initial_world_size)

    def forward(self, *args, **kwargs):
        # Under join every forward is an iteration: this rank has not joined, and
        # whether it will reduce gradients (the joined ranks then shadow that).
        if self._join_config.enable:
            Join.notify_join_context(self)
            reduces = self._sync and torch.is_grad_enabled()  # its backward must follow, as in torch
            self._n_sync = self._count(1 if reduces else 0)
        else:
            self._n_sync = None  # outside join: divided by the group, whatever join said
        self._sync_buffers()
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
