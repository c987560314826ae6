"""Gradients of ops/shape.py's ops (views, cat, pad, flip, roll, repeat), of ops/ranges.py's
tril, triu and diag, and of the tensor's copies (clone, dtype and device casts)."""
from ... import dtypes as dt
from ...creation import zeros
from ...ops.shape import pad_backward
from ..engine import Function, sum_to_shape
from .common import _op


# ---- copies -----------------------------------------------------------------------------------

class Cast(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return _op("_cast")(x, dtype)

    @staticmethod
    def backward(ctx, g):
        return (g.to(ctx.dtype) if dt.is_floating(ctx.dtype) else None), None


class ToDevice(Function):
    @staticmethod
    def forward(ctx, x, device):
        ctx.device = x.device
        return _op("_move")(x, device)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.device), None


class Clone(Function):
    @staticmethod
    def forward(ctx, x, memory_format=None):
        return _op("clone")(x, memory_format)

    @staticmethod
    def backward(ctx, g):
        return g, None


# ---- views ------------------------------------------------------------------------------------

class Reshape(Function):
    """view, reshape, squeeze, unsqueeze, flatten: the gradient takes the input's shape back."""

    @staticmethod
    def forward(ctx, x, method, *args):
        ctx.shape = x.shape
        return _op(method)(x, *args)

    @staticmethod
    def backward(ctx, g):
        return (g.reshape(ctx.shape), None) + (None,) * 8


class Permute(Function):
    @staticmethod
    def forward(ctx, x, *dims):
        out = _op("permute")(x, *dims)
        ctx.order = [x.ndim and (d % x.ndim) for d in (dims[0] if len(dims) == 1 and
                                                        isinstance(dims[0], (tuple, list)) else dims)]
        return out

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.order)
        for i, d in enumerate(ctx.order):
            inverse[d] = i
        return (g.permute(inverse),) + (None,) * len(ctx.order)


class Expand(Function):
    @staticmethod
    def forward(ctx, x, *shape):
        ctx.shape = x.shape
        return _op("expand")(x, *shape)

    @staticmethod
    def backward(ctx, g):
        return (sum_to_shape(g, ctx.shape),) + (None,) * 8


class Slice(Function):
    """Any view selecting part of the input (basic indexing, narrow, select, diagonal, unfold):
    the gradient is scattered back into zeros of the input's shape (SliceScatter)."""

    @staticmethod
    def forward(ctx, x, method, *args):
        ctx.shape, ctx.method, ctx.args = x.shape, method, args
        return _op(method)(x, *args)

    @staticmethod
    def backward(ctx, g):
        return (SliceScatter.apply(g, ctx.shape, ctx.method, *ctx.args), None) + (None,) * 8


class SliceScatter(Function):
    """Slice's backward as a Function, so that create_graph=True records it: g placed in zeros
    of `shape` where view `method` took it from; its own gradient is that view of the incoming
    one."""

    @staticmethod
    def forward(ctx, g, shape, method, *args):
        ctx.method, ctx.args = method, args
        grad = zeros(shape, dtype=g.dtype, device=g.device)
        target = _op(method)(grad, *args)
        if method == "unfold":
            _unfold_accumulate(target, g)
        else:
            target.copy_(g)  # the selected elements are distinct: a plain copy
        return grad

    @staticmethod
    def backward(ctx, gg):
        return (Slice.apply(gg, ctx.method, *ctx.args), None, None) + (None,) * 8


def _unfold_accumulate(windows, g):
    """windows[..., k] overlap for k across the window: add each slice of g in turn."""
    for k in range(windows.shape[-1]):
        w = windows.select(-1, k)
        w.copy_(w + g.select(-1, k))


# ---- shape ops --------------------------------------------------------------------------------

class Cat(Function):
    """cat(tensors, dim), applied as Cat.apply(dim, *tensors) so every tensor gets an edge."""

    @staticmethod
    def forward(ctx, dim, *tensors):
        out = _op("cat_raw")(list(tensors), dim)
        ctx.dim = dim % out.ndim
        ctx.sizes = [t.shape[ctx.dim] if t.ndim else 0 for t in tensors]
        ctx.skipped = [t.ndim == 1 and t.shape[0] == 0 and out.ndim > 1 for t in tensors]
        ctx.dtypes = [t.dtype for t in tensors]
        return out

    @staticmethod
    def backward(ctx, g):
        grads, start = [None], 0
        for size, skipped, dtype in zip(ctx.sizes, ctx.skipped, ctx.dtypes):
            if skipped:
                grads.append(None)
                continue
            grads.append(g.narrow(ctx.dim, start, size).to(dtype))
            start += size
        return tuple(grads)


class Pad(Function):
    @staticmethod
    def forward(ctx, x, pad, mode="constant", value=0):
        ctx.pad, ctx.mode, ctx.shape = tuple(pad), mode, x.shape
        return _op("pad")(x, pad, mode, value)

    @staticmethod
    def backward(ctx, g):
        if ctx.mode == "constant":  # the negated padding crops g (and pads back with zeros)
            return Pad.apply(g, tuple(-p for p in ctx.pad)), None, None, None
        return PadScatter.apply(g, ctx.shape, ctx.pad, ctx.mode), None, None, None


class PadScatter(Function):
    """Pad's backward in reflect, replicate and circular modes as a Function, so that
    create_graph=True records it: each entry of g added to the position it was read from; its
    own gradient is the incoming one padded the same way."""

    @staticmethod
    def forward(ctx, g, shape, pad, mode):
        ctx.pad, ctx.mode = pad, mode
        return pad_backward(g, shape, pad, mode)

    @staticmethod
    def backward(ctx, gg):
        return Pad.apply(gg, ctx.pad, ctx.mode), None, None, None


class Tril(Function):
    """tril (and, through `op`, triu): the gradient is the same triangle of the output's."""
    op = "tril"

    @classmethod
    def forward(cls, ctx, x, diagonal=0):
        ctx.op, ctx.diagonal = cls.op, diagonal
        return _op(cls.op)(x, diagonal)

    @staticmethod
    def backward(ctx, g):
        return getattr(g, ctx.op)(ctx.diagonal), None


class Triu(Tril):
    op = "triu"


class Diag(Function):
    """diag: a vector's gradient is that diagonal of the matrix's gradient; a matrix's is the
    vector's gradient placed on that diagonal of zeros."""

    @staticmethod
    def forward(ctx, x, diagonal=0):
        ctx.shape, ctx.diagonal = x.shape, diagonal
        return _op("diag")(x, diagonal)

    @staticmethod
    def backward(ctx, g):
        if len(ctx.shape) == 1:
            return g.diagonal(ctx.diagonal), None
        return SliceScatter.apply(g, ctx.shape, "diagonal", ctx.diagonal), None


class Flip(Function):
    @staticmethod
    def forward(ctx, x, *dims):
        ctx.dims = dims
        return _op("flip")(x, *dims)

    @staticmethod
    def backward(ctx, g):
        return (g.flip(*ctx.dims),) + (None,) * len(ctx.dims)


class Roll(Function):
    @staticmethod
    def forward(ctx, x, shifts, dims=None):
        ctx.shifts, ctx.dims = shifts, dims
        return _op("roll")(x, shifts, dims)

    @staticmethod
    def backward(ctx, g):
        neg = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, (tuple, list)) \
            else -ctx.shifts
        return g.roll(neg, ctx.dims), None, None


class Repeat(Function):
    @staticmethod
    def forward(ctx, x, *sizes):
        sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
            else sizes
        ctx.shape, ctx.sizes = x.shape, sizes
        return _op("repeat")(x, *sizes)

    @staticmethod
    def backward(ctx, g):
        lead = len(ctx.sizes) - len(ctx.shape)
        full = (1,) * lead + tuple(ctx.shape)
        split = []
        for r, n in zip(ctx.sizes, full):
            split += [r, n]
        g = g.reshape(split).sum(tuple(range(0, len(split), 2)))
        return (g.reshape(ctx.shape),) + (None,) * len(ctx.sizes)
