"""DistributedDataParallel: one model replica per rank, gradients averaged in buckets that are
all-reduced while the rest of the backward pass still runs."""
import contextlib

import numpy as np

from ... import distributed as dist
from ...autograd import is_grad_enabled
from ...creation import from_numpy, zeros_like
from ...distributed import collectives as coll
from ...distributed import group as pg
from ..modules.module import Module

MB = 1024 * 1024


def make_buckets(params, cap_bytes):
    """Parameter indices in reverse order (about the order backward produces gradients), cut
    into buckets of one dtype and at most cap_bytes (a larger parameter gets its own)."""
    buckets, size = [], 0
    for i in reversed(range(len(params))):
        nbytes = params[i].numel() * np.dtype(params[i].dtype).itemsize
        same = buckets and params[buckets[-1][0]].dtype == params[i].dtype
        if not same or size + nbytes > cap_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(i)
        size += nbytes
    return buckets


def _broadcast_by_dtype(tensors, src=0):
    by_dtype = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        coll.broadcast_many(group, src)


def _used_leaves(outputs):
    """ids of the leaf tensors that the autograd graph of `outputs` reaches."""
    stack = [o.grad_fn for o in _tensors_in(outputs) if o.grad_fn is not None]
    seen, used = set(), set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if hasattr(node, "tensor"):
            used.add(id(node.tensor))
        stack.extend(e[0] for e in node.next_functions if e is not None)
    return used


def _tensors_in(obj):
    if hasattr(obj, "grad_fn"):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o)]
    return []


class DistributedDataParallel(Module):
    """Data parallelism over the default process group, as torch.nn.parallel's.

    At construction rank 0's parameters and buffers are copied to every rank. Each backward
    averages the gradients over ranks: parameters are grouped in buckets of bucket_cap_mb
    (default 25), and a bucket's all-reduce starts as soon as its last gradient is ready, so
    it overlaps the rest of the backward pass; the gradients are written back when backward
    ends. With broadcast_buffers (default) rank 0's buffers (BatchNorm statistics) are copied
    to every rank before each forward. Inside no_sync() gradients only accumulate locally.
    find_unused_parameters=True allows parameters that a forward does not use.

    Example:
        model = DistributedDataParallel(net)
        loss = F.cross_entropy(model(x), y); loss.backward(); opt.step()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module, got "
                            f"{type(module).__name__}")
        cap = 25 if bucket_cap_mb is None else bucket_cap_mb
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {cap}")
        self._group = pg.group(process_group)
        self.module = module
        self.broadcast_buffers, self.find_unused_parameters = broadcast_buffers, find_unused_parameters
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = make_buckets(self._params, cap * MB)
        self._bucket_of = {i: b for b, idx in enumerate(self._buckets) for i in idx}
        _broadcast_by_dtype(list(module.parameters()) + list(module.buffers()))
        for i, p in enumerate(self._params):
            p.register_post_accumulate_grad_hook(self._grad_hook(i))
        self._sync, self._armed, self._works, self._hooked = True, False, [], False

    def forward(self, *args, **kwargs):
        if self._armed and self._hooked:
            raise RuntimeError(
                "DistributedDataParallel: the previous backward did not finish reducing "
                "gradients: some parameters got no gradient. Pass find_unused_parameters=True "
                "if the forward does not use every parameter")
        if self.broadcast_buffers and self._group.size > 1:
            buffers = list(self.module.buffers())
            if buffers:
                _broadcast_by_dtype(buffers)
        out = self.module(*args, **kwargs)
        self._armed = self._sync and is_grad_enabled() and bool(self._params)
        if self._armed:
            self._start_step(out)
        return out

    def _start_step(self, out):
        self._missing = [len(b) for b in self._buckets]
        self._ready, self._next, self._zeros, self._hooked = set(), 0, {}, False
        if self.find_unused_parameters:
            used = _used_leaves(out)
            for i, p in enumerate(self._params):
                if id(p) not in used:
                    self._mark_ready(i)

    def _grad_hook(self, i):
        def hook(param):
            if self._armed:
                self._hooked = True
                self._mark_ready(i)
        return hook

    def _mark_ready(self, i):
        if i in self._ready:
            raise RuntimeError(f"DistributedDataParallel: parameter {i} got its gradient twice "
                               f"in one backward (call forward again before each backward)")
        self._ready.add(i)
        self._missing[self._bucket_of[i]] -= 1
        for w in self._works:
            w.is_completed()  # lets MPI progress the buckets already started
        while self._next < len(self._buckets) and not self._missing[self._next]:
            self._launch(self._buckets[self._next])
            self._next += 1
        if self._next == len(self._buckets):
            self._finish()

    def _launch(self, bucket):
        grads = []
        for i in bucket:
            p = self._params[i]
            if p.grad is None:  # unused in this forward: contributes zeros
                self._zeros[i] = zeros_like(p)
            grads.append(p.grad.detach() if p.grad is not None else self._zeros[i])
        self._works.append(coll.all_reduce_many(grads, dist.ReduceOp.AVG, async_op=True,
                                                name="DistributedDataParallel all_reduce"))

    def _finish(self):
        works, self._works, self._armed = self._works, [], False
        for w in works:
            w.wait()
        if self.find_unused_parameters:
            self._set_unused_grads()

    def _set_unused_grads(self):
        """A parameter without a local gradient gets the average if some rank had one."""
        # NOTE: one flag per parameter, so every rank's array has the same length
        flags = from_numpy(np.array([p.grad is None for p in self._params], np.int32),
                           device=self._params[0].device)
        coll.all_reduce_many([flags], dist.ReduceOp.MIN)
        for i, unused_everywhere in enumerate(flags.numpy()):
            if i in self._zeros and not unused_everywhere:
                self._params[i].grad = self._zeros[i]

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate local gradients (no communication); the first
        backward after it averages the accumulated ones."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old
