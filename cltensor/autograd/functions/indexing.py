"""Gradients of ops/indexing.py's ops: advanced indexing, index_*, gather, scatter*, masked_*,
the view scatters; and as_strided's, which puts its gradient back by storage position."""
import math

import numpy as np

from ...creation import from_numpy, full, zeros
from ...ops.elementwise import broadcast_shapes
from ...ops.indexing import view_scatter
from ..engine import Function, sum_to_shape
from .common import _is_t, _op, _reduce_to, _scaled
from .pointwise import _where
from .shape import Cat, Pad, Slice


# ---- indexing ---------------------------------------------------------------------------------

def _key_tensors(key):
    """The tensors among an indexing key's entries (a key or a tuple of them)."""
    entries = key if isinstance(key, tuple) else (key,)
    return [k for k in entries if _is_t(k)]


class IndexPut(Function):
    """x with x[key] = value (or += with accumulate), out of place: in-place setitem and
    index_put_ record this."""

    @staticmethod
    def forward(ctx, x, key, value, accumulate=False):
        ctx.key, ctx.value, ctx.accumulate = key, value, accumulate
        ctx.save_indices(*_key_tensors(key))
        out = _op("clone")(x)
        if accumulate:
            _op("setitem_raw")(out, key, value, accumulate=True)
        else:
            _op("__setitem__")(out, key, value)
        return out

    @staticmethod
    def backward(ctx, g):
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g
            if not ctx.accumulate:
                gx = g.clone()
                gx[ctx.key] = 0.0
        gv = _reduce_to(g[ctx.key], ctx.value) if ctx.needs_input_grad[2] else None
        return gx, None, gv, None


class Index(Function):
    """x[key] with tensors, lists or masks in the key: the gradient is added back at the
    indexed places (repeated indices add up)."""

    @staticmethod
    def forward(ctx, x, key):
        ctx.shape, ctx.dtype, ctx.device, ctx.key = x.shape, x.dtype, x.device, key
        ctx.save_indices(*_key_tensors(key))
        return _op("getitem_raw")(x, key)

    @staticmethod
    def backward(ctx, g):
        out = zeros(ctx.shape, dtype=ctx.dtype, device=ctx.device)
        return IndexPut.apply(out, ctx.key, g, True), None


class IndexSelect(Function):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim, ctx.index = x.shape, dim % max(x.ndim, 1), index
        ctx.save_indices(index)
        return _op("index_select")(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        out = zeros(ctx.shape, dtype=g.dtype, device=g.device)
        key = (slice(None),) * ctx.dim + (ctx.index,)
        return IndexPut.apply(out, key, g, True), None, None


class Gather(Function):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.shape, ctx.dim, ctx.index = x.shape, dim, index
        ctx.save_indices(index)
        return _op("gather")(x, dim, index)

    @staticmethod
    def backward(ctx, g):
        out = zeros(ctx.shape, dtype=g.dtype, device=g.device)
        return out.scatter_add(ctx.dim, ctx.index, g), None, None


class Scatter(Function):
    @staticmethod
    def forward(ctx, x, dim, index, src=None, value=None, *, reduce=None):
        if reduce is not None:
            raise RuntimeError("scatter: the gradient of scatter with reduce= is not "
                               "implemented (as in torch); use scatter_reduce")
        ctx.dim, ctx.index, ctx.src = dim, index, src
        ctx.save_indices(index)
        return _op("scatter")(x, dim, index, src, value)

    @staticmethod
    def backward(ctx, g):
        gx = g.scatter(ctx.dim, ctx.index, value=0.0) if ctx.needs_input_grad[0] else None
        gs = g.gather(ctx.dim, ctx.index) if _is_t(ctx.src) and ctx.needs_input_grad[3] else None
        return gx, None, None, gs, None


class ScatterAdd(Function):
    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim, ctx.index = dim, index
        ctx.save_indices(index)
        return _op("scatter_add")(x, dim, index, src)

    @staticmethod
    def backward(ctx, g):
        gs = g.gather(ctx.dim, ctx.index) if ctx.needs_input_grad[3] else None
        return g, None, None, gs


class MaskedFill(Function):
    @staticmethod
    def forward(ctx, x, mask, value):
        ctx.mask, ctx.value, ctx.shape = mask, value, x.shape
        ctx.save_indices(mask)
        return _op("masked_fill")(x, mask, value)

    @staticmethod
    def backward(ctx, g):
        gx = g.masked_fill(ctx.mask, 0.0) if ctx.needs_input_grad[0] else None
        gv = None
        if ctx.needs_input_grad[2]:
            gv = _where(ctx.mask, g, 0.0).sum().reshape(ctx.value.shape)
        return gx, None, gv


class MaskedSelect(Function):
    @staticmethod
    def forward(ctx, x, mask):
        ctx.mask, ctx.shape, ctx.dtype, ctx.device = mask, x.shape, x.dtype, x.device
        ctx.save_indices(mask)
        return _op("masked_select")(x, mask)

    @staticmethod
    def backward(ctx, g):
        shape = broadcast_shapes(ctx.shape, ctx.mask.shape)
        out = zeros(shape, dtype=ctx.dtype, device=ctx.device)
        out[ctx.mask.expand(shape)] = g
        return sum_to_shape(out, ctx.shape), None


class ScatterReduce(Function):
    """scatter_reduce with torch's gradients: tied extremes of amax and amin share theirs
    evenly; prod handles zeros; without include_self, x's scattered-to slots get none."""

    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, *, include_self=True):
        out = _op("scatter_reduce")(x, dim, index, src, reduce, include_self=include_self)
        ctx.args = (dim, index, reduce, include_self)
        ctx.save_indices(index)
        ctx.save_for_backward(x, src, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, src, out = ctx.saved_tensors
        dim, index, reduce, include_self = ctx.args
        part = _index_part(src, index)
        gx, gs = SCATTER_REDUCE_GRADS[reduce](g, x, dim, index, part, out, include_self)
        if not include_self:
            gx = gx.scatter(dim, index, value=0.0)
        gx = gx if ctx.needs_input_grad[0] else None
        gs = _padded_to(gs, src.shape) if ctx.needs_input_grad[3] else None
        return gx, None, None, gs, None


def _index_part(t, index):
    """The part of t that a scatter along index reads (its leading index.shape), contiguous."""
    if t.shape == index.shape:
        return t
    return t[tuple(slice(0, n) for n in index.shape)].contiguous()


def _padded_to(g, shape):
    """g with zeros appended along each dim up to `shape`."""
    if g.shape == tuple(shape):
        return g
    pads = []
    for n, m in zip(reversed(shape), reversed(g.shape)):
        pads += [0, n - m]
    return Pad.apply(g, tuple(pads))


def _scatter_sum_grads(g, x, dim, index, src, out, include_self):
    return g, g.gather(dim, index)


def _scatter_mean_grads(g, x, dim, index, src, out, include_self):
    n = full(g.shape, float(include_self), dtype=g.dtype, device=g.device)
    n = n.scatter_add(dim, index, full(index.shape, 1.0, dtype=g.dtype, device=g.device))
    share = g / n.masked_fill(n == 0, 1.0)
    return share, share.gather(dim, index)


def _scatter_prod_grads(g, x, dim, index, src, out, include_self):
    # the product of the others: with a zero of x (or the only zero among a slot's src values)
    # replaced by 1 and the product taken again, else the result divided by the value
    kw = {"include_self": include_self}
    masked_x = x.masked_fill(x == 0, 1.0)
    gx = g * masked_x.scatter_reduce(dim, index, src, "prod", **kw) / masked_x
    zero = src == 0
    zeros_there = zeros(x.shape, dtype=x.dtype, device=x.device).scatter_add(
        dim, index, zero.to(x.dtype)).gather(dim, index)
    single = zero & (zeros_there == 1)
    without = x.scatter_reduce(dim, index, src.masked_fill(single, 1.0), "prod", **kw)
    gs = _where(single, (g * without).gather(dim, index),
                (g * out).gather(dim, index) / src.masked_fill(zero, 1.0))
    return gx, gs


def _scatter_extreme_grads(g, x, dim, index, src, out, include_self):
    value = out.gather(dim, index)
    x_hit, src_hit = x == out, src == value
    ties = x_hit.to(g.dtype).scatter_add(dim, index, src_hit.to(g.dtype))
    share = g / ties
    return _where(x_hit, share, 0.0), _where(src_hit, share.gather(dim, index), 0.0)


SCATTER_REDUCE_GRADS = {"sum": _scatter_sum_grads, "mean": _scatter_mean_grads,
                        "prod": _scatter_prod_grads, "amax": _scatter_extreme_grads,
                        "amin": _scatter_extreme_grads}


class MaskedScatter(Function):
    """x with source's leading elements at the True positions of mask: those positions of x get
    no gradient; source's elements get theirs in order, the unused ones zero."""

    @staticmethod
    def forward(ctx, x, mask, source):
        ctx.mask, ctx.shape, ctx.src_shape = mask, x.shape, source.shape
        ctx.save_indices(mask)
        return _op("masked_scatter")(x, mask, source)

    @staticmethod
    def backward(ctx, g):
        gx = gs = None
        if ctx.needs_input_grad[0]:
            gx = sum_to_shape(g.masked_fill(ctx.mask, 0.0), ctx.shape)
        if ctx.needs_input_grad[2]:
            picked = g.masked_select(ctx.mask)
            rest = zeros(math.prod(ctx.src_shape) - picked.numel(), dtype=g.dtype,
                         device=g.device)
            gs = Cat.apply(0, picked, rest).reshape(ctx.src_shape)
        return gx, None, gs


# ---- view scatters, as_strided ----------------------------------------------------------------

class ViewScatter(Function):
    """select_scatter, slice_scatter, diagonal_scatter: x with its view `view(*args)` replaced
    by src. src's gradient is that view of the output's; x's is the rest (the view zeroed)."""

    @staticmethod
    def forward(ctx, x, src, op, view, *args):
        ctx.op, ctx.view, ctx.args, ctx.src_dtype = op, view, args, src.dtype
        return view_scatter(x, src, op, view, *args)

    @staticmethod
    def backward(ctx, g):
        gx = gs = None
        if ctx.needs_input_grad[0]:
            hole = zeros(_op(ctx.view)(g, *ctx.args).shape, dtype=g.dtype, device=g.device)
            gx = ViewScatter.apply(g, hole, ctx.op, ctx.view, *ctx.args)
        if ctx.needs_input_grad[1]:
            gs = Slice.apply(g, ctx.view, *ctx.args).to(ctx.src_dtype)
        return (gx, gs, None, None) + (None,) * len(ctx.args)


def _storage_positions(shape, strides, offset):
    """The storage position of each element of a view, in row-major order (numpy int64)."""
    pos = np.array(offset, dtype=np.int64)
    for n, st in zip(shape, strides):
        pos = pos[..., None] + np.arange(n, dtype=np.int64) * st
    return pos.reshape(-1)


class AsStrided(Function):
    """as_strided: each output element's gradient goes to the input element at the same
    storage position (added up where the output repeats one); storage positions the input does
    not cover get none. Assumes the input's own elements do not overlap (torch handles that)."""

    @staticmethod
    def forward(ctx, x, size, stride, storage_offset=None):
        out = _op("as_strided")(x, size, stride, storage_offset)
        ctx.geometry = ((x.shape, x.strides, x.offset), (out.shape, out.strides, out.offset))
        return out

    @staticmethod
    def backward(ctx, g):
        inside, outside = (_storage_positions(*v) for v in ctx.geometry)
        lo = min(inside.min(initial=0), outside.min(initial=0))
        span = max(inside.max(initial=0), outside.max(initial=0)) + 1 - lo
        at = [from_numpy(p - lo, device=g.device) for p in (inside, outside)]
        flat = IndexPut.apply(zeros(span, dtype=g.dtype, device=g.device), (at[1],),
                              g.reshape(-1), True)
        return Index.apply(flat, (at[0],)).reshape(ctx.geometry[0][0]), None, None, None


# ---- index_add, index_copy, index_fill --------------------------------------------------------

class IndexAdd(Function):
    """x with alpha * source's slices added along dim: x's gradient passes through, source's is
    alpha times the gradient's slices at the index."""

    @staticmethod
    def forward(ctx, x, dim, index, source, alpha=1):
        ctx.dim, ctx.index, ctx.alpha, ctx.src_shape = dim, index, alpha, source.shape
        ctx.save_indices(index)
        return _op("index_add")(x, dim, index, source, alpha=alpha)

    @staticmethod
    def backward(ctx, g):
        gs = None
        if ctx.needs_input_grad[3]:
            gs = _scaled(g.index_select(ctx.dim, ctx.index), ctx.alpha).reshape(ctx.src_shape)
        return g, None, None, gs


class IndexCopy(Function):
    """x with source's slices copied in along dim: the copied-over slots of x get no gradient."""

    @staticmethod
    def forward(ctx, x, dim, index, source):
        ctx.dim, ctx.index, ctx.src_shape = dim, index, source.shape
        ctx.save_indices(index)
        return _op("index_copy")(x, dim, index, source)

    @staticmethod
    def backward(ctx, g):
        gx = g.index_fill(ctx.dim, ctx.index, 0.0) if ctx.needs_input_grad[0] else None
        gs = None
        if ctx.needs_input_grad[3]:
            gs = g.index_select(ctx.dim, ctx.index).reshape(ctx.src_shape)
        return gx, None, None, gs


class IndexFill(Function):
    """x with slices along dim set to value: they get no gradient; a tensor value gets the sum of
    theirs."""

    @staticmethod
    def forward(ctx, x, dim, index, value):
        ctx.dim, ctx.index, ctx.value = dim, index, value
        ctx.save_indices(index)
        return _op("index_fill")(x, dim, index, value)

    @staticmethod
    def backward(ctx, g):
        kept = g.index_fill(ctx.dim, ctx.index, 0.0)
        gv = None
        if _is_t(ctx.value) and ctx.needs_input_grad[3]:
            gv = (g - kept).sum().reshape(ctx.value.shape).to(ctx.value.dtype)
        return (kept if ctx.needs_input_grad[0] else None), None, None, gv
