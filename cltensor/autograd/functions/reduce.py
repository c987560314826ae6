"""Gradients of ops/reduce.py's ops: sum, mean, prod, max/min, amax/amin, the scans, norm."""

from ... import dtypes as dt
from ...creation import ones, zeros
from ..engine import Function
from .common import _op
from .pointwise import _where
from .shape import Cat


def _reduced_dims(x, dim):
    """The dims a reduction over `dim` (None, an int or a tuple) removes, sorted."""
    if dim is None or dim == ():
        return tuple(range(x.ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(sorted(d % max(x.ndim, 1) for d in dims))


def _unreduce(g, shape, dims, keepdim):
    """A reduced gradient brought back to `shape` (reinserting dims, broadcasting)."""
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    return g.expand(shape)


class Sum(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        ctx.shape, ctx.dtype = x.shape, x.dtype
        ctx.dims, ctx.keepdim = _reduced_dims(x, dim), keepdim
        return _op("sum")(x, dim, keepdim, dtype)

    @staticmethod
    def backward(ctx, g):
        return _unreduce(g, ctx.shape, ctx.dims, ctx.keepdim).to(ctx.dtype), None, None, None


class Mean(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        ctx.shape, ctx.dtype = x.shape, x.dtype
        ctx.dims, ctx.keepdim = _reduced_dims(x, dim), keepdim
        ctx.count = 1
        for d in ctx.dims:
            ctx.count *= x.shape[d]
        return _op("mean")(x, dim, keepdim, dtype)

    @staticmethod
    def backward(ctx, g):
        g = _unreduce(g, ctx.shape, ctx.dims, ctx.keepdim) / ctx.count
        return g.to(ctx.dtype), None, None, None


class Prod(Function):
    @staticmethod
    def forward(ctx, x, dim=None, keepdim=False, dtype=None):
        ctx.save_for_backward(x)
        ctx.dim, ctx.keepdim = dim, keepdim
        return _op("prod")(x, dim, keepdim, dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.dim is None:
            flat, d = x.reshape(-1), 0
            gb = g.reshape(1).expand(flat.shape)
        else:
            flat, d = x, ctx.dim % x.ndim
            gb = _unreduce(g, x.shape, (d,), ctx.keepdim)
        # the product of all the other elements (zeros allowed): exclusive cumulative products
        # from both ends
        others = _exclusive_cumprod(flat, d) * _exclusive_cumprod(flat.flip(d), d).flip(d)
        return (gb * others).reshape(x.shape), None, None, None


def _exclusive_cumprod(x, d):
    n = x.shape[d]
    shape = list(x.shape)
    shape[d] = 1
    head = ones(shape, dtype=x.dtype, device=x.device)
    return head.expand(x.shape) if n == 1 else \
        Cat.apply(d, head, x.narrow(d, 0, n - 1)).cumprod(d)


class MaxDim(Function):
    """max/min over one dim: (values, indices); the gradient goes to the selected element."""
    op = "max"

    @classmethod
    def forward(cls, ctx, x, dim, keepdim=False):
        values, indices = _op(cls.op)(x, dim, keepdim)
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dim % x.ndim, keepdim
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g, _indices_grad=None):
        (indices,) = ctx.saved_tensors
        if not ctx.keepdim:
            g, indices = g.unsqueeze(ctx.dim), indices.unsqueeze(ctx.dim)
        out = zeros(ctx.shape, dtype=g.dtype, device=g.device)
        return out.scatter(ctx.dim, indices, g), None, None


class MinDim(MaxDim):
    op = "min"


class Amax(Function):
    """amax/amin (and max()/min() of everything): the gradient is shared evenly among tied
    extremes, as torch."""
    op = "amax"

    @classmethod
    def forward(cls, ctx, x, dim=(), keepdim=False):
        out = _op(cls.op)(x, dim, keepdim)
        ctx.dims, ctx.keepdim = _reduced_dims(x, dim), keepdim
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        hit = x == _unreduce(out, x.shape, ctx.dims, ctx.keepdim)
        count = _op("sum")(hit, ctx.dims, True)
        share = _unreduce(g, x.shape, ctx.dims, ctx.keepdim) / count
        return _where(hit, share, 0.0), None, None


class Amin(Amax):
    op = "amin"


class Cumsum(Function):
    @staticmethod
    def forward(ctx, x, dim, dtype=None):
        ctx.dim, ctx.dtype = dim, x.dtype
        return _op("cumsum")(x, dim, dtype)

    @staticmethod
    def backward(ctx, g):
        return g.flip(ctx.dim).cumsum(ctx.dim).flip(ctx.dim).to(ctx.dtype), None, None


class Cumprod(Function):
    """cumprod (and, through `op`, scans whose gradient needs their input and output)."""
    op = "cumprod"

    @classmethod
    def forward(cls, ctx, x, dim, *args):
        out = _op(cls.op)(x, dim, *args)
        ctx.save_for_backward(x, out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        if bool((x == 0).any()):
            raise RuntimeError("cumprod: the gradient of an input holding zeros is not supported")
        d = ctx.dim
        return (g * out).flip(d).cumsum(d).flip(d) / x, None, None


class Logcumsumexp(Cumprod):
    op = "logcumsumexp"

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        if x.ndim == 0 or x.numel() == 0:
            return g, None
        # torch's formula: dx_k = sum over j >= k of g_j exp(x_k - out_j), the positive and the
        # negative g_j summed apart in log space (reverse logcumsumexps), so nothing overflows
        d, lowest = ctx.dim, float(dt.finfo(x.dtype).min)
        log_g = g.abs().log()

        def reverse_sum(log_part):
            return (log_part - out).flip(d).logcumsumexp(d).flip(d)
        positive = reverse_sum(_where(g > 0, log_g, lowest))
        negative = reverse_sum(_where(g < 0, log_g, lowest))
        gx = (positive + x).exp() - (negative + x).exp()
        # NOTE: torch gives NaN where x is -inf (-inf + inf); the limit is 0
        return _where(x == float("-inf"), 0.0, gx), None


class Norm(Function):
    @staticmethod
    def forward(ctx, x, p=2, dim=None, keepdim=False):
        out = _op("norm")(x, p, dim, keepdim)
        ctx.save_for_backward(x, out)
        ctx.p, ctx.dims, ctx.keepdim = (2 if p == "fro" else p), _reduced_dims(x, dim), keepdim
        return out

    @staticmethod
    def backward(ctx, g):
        # torch's norm_backward: sign(x) |x|^(p-1) / |x|_p^(p-1), 0 where x (p < 1) or the
        # norm (p > 1) is 0; p = 0 (a count) has none; +-inf shares g among the entries that
        # reach the norm (NaN ones included)
        x, out = ctx.saved_tensors
        p = ctx.p
        if p == 0:
            return None, None, None, None
        n = _unreduce(out, x.shape, ctx.dims, ctx.keepdim)
        gb = _unreduce(g, x.shape, ctx.dims, ctx.keepdim)
        if p in (float("inf"), float("-inf")):
            hit = ((x.abs() == n) | x.isnan()).to(x.dtype)
            gx = x.sign() * hit * (gb / _op("sum")(hit, ctx.dims, True))
        elif p == 1:
            gx = gb * x.sign()
        elif p < 1:
            gx = x.sign() * _where(x == 0, 1.0, x.abs()) ** (p - 1) * gb * n ** (1 - p)
        else:
            scale = _where(n == 0, 0.0, gb / _where(n == 0, 1.0, n) ** (p - 1))
            gx = x.sign() * x.abs() ** (p - 1) * scale
        return gx, None, None, None
