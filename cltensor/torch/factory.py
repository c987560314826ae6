"""Factory ops, copies between "opencl" and the CPU, fills and scalar reads."""
import math

import numpy as np
import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false

from .. import creation
from .. import dtypes as dt
from ..ops import ranges
from ..shapes import contiguous_strides
from ..tensor import CHANNELS_LAST, CONTIGUOUS_FORMAT, ClTensor
from ._backend import (TO_NUMPY, TO_TORCH, aten, cl_device_for, empty_wrapper, is_opencl, np_dtype, restride,
                       unwrap, wrap)


def _span(size, stride):
    """Elements a strided layout reaches: 0 when empty, else 1 + the farthest offset."""
    if any(n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride))


@aten("empty_strided")
def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    dev = cl_device_for(device, "empty_strided")
    if dtype not in TO_NUMPY and dtype is not None:
        return empty_wrapper(size, dtype)
    flat = ClTensor.empty_on((_span(size, stride),), np_dtype(dtype, "empty_strided"), dev)
    return wrap(flat._view(tuple(size), tuple(stride), 0))


@aten("empty.memory_format")
def empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dev = cl_device_for(device, "empty")
    if dtype not in TO_NUMPY and dtype is not None:
        return empty_wrapper(size, dtype)
    fmt = CHANNELS_LAST if memory_format == torch.channels_last else CONTIGUOUS_FORMAT
    return wrap(ClTensor.empty_on(tuple(size), np_dtype(dtype, "empty"), dev, memory_format=fmt))


def to_cl(src, dtype, device):
    """A ClTensor copy of a CPU torch tensor, cast to `dtype` (a numpy dtype; None: src's own,
    which must be one cltensor has) on the CPU first."""
    host = src.detach().resolve_conj().resolve_neg()
    target = np_dtype(src.dtype, "copy to opencl") if dtype is None else dtype
    host = host.to(TO_TORCH[target])
    # numpy has no bfloat16: its values travel as float32 (exact) and round to themselves
    wide = dt.float32 if target is dt.bfloat16 else target
    host = host.to(TO_TORCH[wide])
    # NOTE: np.ascontiguousarray makes 0-d arrays 1-d; np.array(order="C") keeps the shape
    return creation.from_numpy(np.array(host.numpy(), order="C"), device=device,
                               dtype=wide).to(target)


def to_cpu(t):
    """A CPU torch tensor with the values of an "opencl" tensor."""
    if t.numel() == 0:
        return torch.empty(t.shape, dtype=t.dtype)
    cl = unwrap(t)
    if cl.dtype is dt.bfloat16:  # through float32, exact both ways
        return torch.from_numpy(np.array(cl.to(dt.float32).numpy(), order="C")).to(t.dtype)
    return torch.from_numpy(np.array(cl.numpy(), order="C"))


@aten("copy_")
def copy_(self, src, non_blocking=False):
    torch.empty(self.shape, device="meta").copy_(
        torch.empty(src.shape, device="meta"))  # torch's broadcast check and message
    if self.numel() == 0:
        return self
    if self.device.type == "cpu":  # opencl -> cpu
        self.copy_(to_cpu(src))
        return self
    dst = unwrap(self)
    if is_opencl(src):
        dst.copy_(unwrap(src))
    else:
        dst.copy_(to_cl(src, dst.dtype, dst.device))
    return self


@aten("_copy_from")
def _copy_from(self, dst, non_blocking=False):
    return copy_(dst, self, non_blocking)


@aten("_copy_from_and_resize")
def _copy_from_and_resize(self, dst):
    if tuple(dst.shape) != tuple(self.shape):
        dst.resize_(self.shape)
    return copy_(dst, self)


@aten("_to_copy")
def _to_copy(self, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    dtype = self.dtype if dtype is None else dtype
    target = self.device if device is None else torch.device(device)
    strides = copy_strides(self, memory_format)
    if target.type == "cpu":
        return _in_memory_order(self, strides, lambda t: to_cpu(t).to(dtype)).as_strided(
            self.shape, strides)
    out_dev = cl_device_for(target, "_to_copy")
    want = np_dtype(dtype, "_to_copy")
    if not is_opencl(self):  # cpu -> opencl
        flat = _in_memory_order(self, strides, lambda t: to_cl(t, want, out_dev))
    else:
        def moved(t):
            src = unwrap(t)
            res = src.to(out_dev).to(want)
            return (res.clone() if res is src else res).contiguous()
        flat = _in_memory_order(self, strides, moved)
    if flat.offset:  # the view below indexes its buffer from the start
        flat = flat.clone()
    return wrap(flat._view(tuple(self.shape), strides, 0))


def copy_strides(t, memory_format):
    """The strides of _to_copy's result, torch's rule: a dense tensor's own (preserve_format),
    else dense strides in the order of t's (infer_dense_strides); or those of memory_format."""
    shape = tuple(t.shape)
    if memory_format in (None, torch.preserve_format):
        if is_non_overlapping_and_dense_or_false(t):
            return tuple(t.stride())
        return dense_strides_like(shape, tuple(t.stride()))
    if memory_format == torch.contiguous_format:
        return contiguous_strides(shape)
    return tuple(torch.empty(shape, device="meta", memory_format=memory_format).stride())


def dense_strides_like(shape, strides):
    """Dense strides whose dims run in the order of `strides` (an insertion sort in which a
    stride of 0 is incomparable, equal strides put the smaller size first, as torch's
    infer_dense_strides)."""
    perm = list(range(len(shape)))[::-1]  # perm[0]: the fastest dim

    def should_swap(a, b):
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] != strides[b]:
            return 1 if strides[a] > strides[b] else -1
        return 1 if shape[a] > shape[b] else 0
    for i in range(1, len(perm)):
        j = i
        for k in range(i - 1, -1, -1):
            order = should_swap(perm[k], perm[j])
            if order > 0:
                perm[k], perm[j] = perm[j], perm[k]
                j = k
            elif order < 0:
                break
    out, step = [0] * len(shape), 1
    for d in perm:
        out[d] = step
        if shape[d] > 1:  # a dim of size 0 or 1 takes no room
            step *= shape[d]
    return tuple(out)


def _in_memory_order(t, strides, copy):
    """copy() of t's dims permuted into the memory order of dense `strides`, flat: its elements
    in the order a tensor of those strides holds them."""
    order = sorted(range(t.dim()), key=lambda d: -strides[d])
    return copy(t.permute(order)).reshape(-1)


@aten("resize_")
def resize_(self, size, memory_format=None):
    """Resize in place: a new buffer when the shape changes, keeping the leading elements."""
    size = tuple(size)
    old = unwrap(self)
    if size == tuple(old.shape):
        return self
    new = ClTensor.empty_on(size, old.dtype, old.device)
    keep = min(math.prod(size), old.numel())
    if keep:
        new.reshape(-1)[:keep].copy_(old.reshape(-1)[:keep])
    restride(self, new)
    return self


@aten("fill_.Scalar")
def fill_(self, value):
    unwrap(self).fill_(value)
    return self


@aten("fill_.Tensor")
def fill_tensor_(self, value):
    """fill_ from a 0-d tensor: a CPU one by its value, an opencl one on the device (no read)."""
    if value.dim() != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.dim()} dimensions.")
    if not is_opencl(value):
        return fill_(self, value.item())
    dst = unwrap(self)
    if dst.numel():
        dst.copy_(unwrap(value).expand(dst.shape))
    return self


@aten("zero_")
def zero_(self):
    unwrap(self).fill_(0)
    return self


@aten("_local_scalar_dense")
def _local_scalar_dense(self):
    return unwrap(self).item()




# ---- ranges: the out= forms torch's factories fill (arange(..., device="opencl") reaches
# arange.start_out with an empty opencl tensor) ------------------------------------------------
def _range_kernel(name, fn):
    packet, overload = getattr(torch.ops.aten, name.split(".")[0]), name.split(".")[1]
    op = getattr(packet, overload)

    def kernel(*args, out):
        # torch's checks (a zero step, a wrong sign, ...) and the result's size, on Meta
        size = op(*args, out=torch.empty(0, dtype=out.dtype, device="meta")).shape
        if tuple(out.shape) != tuple(size):
            resize_(out, size)
        cl = unwrap(out)
        cl.copy_(fn(*args, dtype=cl.dtype, device=cl.device).reshape(cl.shape))
        return out
    aten(name)(kernel)


_range_kernel("arange.start_out", ranges.arange)
_range_kernel("arange.out", lambda end, **kw: ranges.arange(0, end, **kw))
_range_kernel("linspace.out", ranges.linspace)
_range_kernel("logspace.out", ranges.logspace)
_range_kernel("eye.out", ranges.eye)
_range_kernel("eye.m_out", ranges.eye)
