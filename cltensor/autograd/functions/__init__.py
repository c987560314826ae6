"""Gradients of the tensor ops: one Function per op, forward calling the op itself.

Backward formulas use tensor ops (so create_graph=True records second-order graphs) and bring
broadcast gradients back to each input's shape with sum_to_shape.
"""
import math

import numpy as np

from ... import dtypes as dt
from ...tensor import ClTensor
from ..engine import RAW, Function, sum_to_shape


def _is_t(x):
    return isinstance(x, ClTensor)


def _reduce_to(g, x):
    """g summed to x's shape and cast to x's dtype; None when x is not a tensor."""
    if not _is_t(x):
        return None
    return sum_to_shape(g, x.shape).to(x.dtype) if dt.is_floating(x.dtype) else None


def _op(name):
    """The raw (non-recording) op or ClTensor method of that name, as it was before autograd
    wrapped it."""
    return RAW[name]


# ---- arithmetic -------------------------------------------------------------------------------

class Add(Function):
    @staticmethod
    def forward(ctx, a, b, alpha=1):
        ctx.shapes = (a, b)
        ctx.alpha = alpha
        return _op("add")(a, b, alpha=alpha)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.shapes
        return _reduce_to(g, a), _reduce_to(g * ctx.alpha if ctx.alpha != 1 else g, b), None


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b, alpha=1):
        ctx.shapes = (a, b)
        ctx.alpha = alpha
        return _op("sub")(a, b, alpha=alpha)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.shapes
        return _reduce_to(g, a), _reduce_to(-g * ctx.alpha if ctx.alpha != 1 else -g, b), None


class Rsub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a, b)
        return _op("rsub")(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.shapes
        return _reduce_to(-g, a), _reduce_to(g, b)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        # each input is saved only when the other one's gradient needs it
        ctx.save_for_backward(a if _is_t(a) and ctx.needs_input_grad[1] else None,
                              b if _is_t(b) and ctx.needs_input_grad[0] else None)
        ctx.scalars = (a, b)
        return _op("mul")(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.scalars
        ga = _reduce_to(g * (b if b is not None else sb), sa) if ctx.needs_input_grad[0] else None
        gb = _reduce_to(g * (a if a is not None else sa), sb) if ctx.needs_input_grad[1] else None
        return ga, gb


class Div(Function):
    @staticmethod
    def forward(ctx, a, b, rounding_mode=None):
        out = _op("div")(a, b, rounding_mode)
        ctx.rounding = rounding_mode
        ctx.save_for_backward(b if _is_t(b) else None, out if ctx.needs_input_grad[1] else None)
        ctx.scalars = (a, b)
        return out

    @staticmethod
    def backward(ctx, g):
        b, out = ctx.saved_tensors
        sa, sb = ctx.scalars
        if ctx.rounding is not None:  # piecewise constant
            return _reduce_to(g * 0, sa), _reduce_to(g * 0, sb), None
        divisor = b if b is not None else sb
        ga = _reduce_to(g / divisor, sa) if ctx.needs_input_grad[0] else None
        gb = _reduce_to(-g * out / divisor, sb) if ctx.needs_input_grad[1] else None
        return ga, gb, None


class Rdiv(Function):
    """scalar / t."""

    @staticmethod
    def forward(ctx, t, s):
        out = _op("_rdiv")(t, s)
        ctx.save_for_backward(t, out)
        return out

    @staticmethod
    def backward(ctx, g):
        t, out = ctx.saved_tensors
        return -g * out / t, None


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = _op("pow")(a, b)
        ctx.save_for_backward(a if _is_t(a) else None, b if _is_t(b) else None, out)
        ctx.scalars = (a, b)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        sa, sb = ctx.scalars
        ga = gb = None
        if ctx.needs_input_grad[0]:
            e = b if b is not None else sb
            ga = _reduce_to(g * e * a ** (e - 1), sa) if not (not _is_t(e) and e == 0) else \
                _reduce_to(g * 0, sa)
        if ctx.needs_input_grad[1]:
            from ...ops.pointwise import where
            base = a if a is not None else sa
            logb = base.log() if _is_t(base) else _log_scalar(base)
            d = g * out * logb
            if _is_t(base):  # 0 ** e with e >= 0 has gradient 0 w.r.t. e, as in torch
                d = where((base == 0) & (b >= 0), 0.0, d)
            gb = _reduce_to(d, sb)
        return ga, gb


def _log_scalar(x):
    return math.log(x) if x > 0 else float("nan")


class Rpow(Function):
    """scalar ** t."""

    @staticmethod
    def forward(ctx, t, s):
        out = _op("_rpow")(t, s)
        ctx.save_for_backward(out)
        ctx.s = s
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return (g * out * _log_scalar(ctx.s) if ctx.s != 0 else g * 0), None


# ---- unary math -------------------------------------------------------------------------------

def _unary(name, save, grad):
    """A Function for x -> name(x) whose gradient is grad(g, x, out)."""
    def forward(ctx, x):
        out = _op(name)(x)
        ctx.save_for_backward(x if "x" in save else None, out if "out" in save else None)
        return out

    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return grad(g, x, out)

    return type(name.capitalize(), (Function,), {"forward": staticmethod(forward),
                                                 "backward": staticmethod(backward)})


def _where(c, a, b):
    # NOTE: cltensor.where, the differentiable one once autograd is installed: backward
    # formulas built on it record second-order graphs under create_graph=True
    from ... import where
    return where(c, a, b)


TWO_OVER_SQRT_PI = 1.1283791670955126
LN2, LN10 = 0.6931471805599453, 2.302585092994046
DEG2RAD = 0.017453292519943295  # pi / 180
HALF_SQRT_PI = 0.8862269254527580  # sqrt(pi) / 2


class I1(Function):
    """I1, the modified Bessel function (i0's gradient): d/dx I1 = I0 - I1 / x (1/2 at 0)."""

    @staticmethod
    def forward(ctx, x):
        from ...ops.pointwise import i1
        out = i1(x)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        return g * _where(x == 0, 0.5, x.i0() - out / x)


def _sinc_grad(g, x):
    """(cos(pi x) pi x - sin(pi x)) / (pi x^2), 0 at x = 0 (torch's)."""
    px = x * math.pi
    return g * _where(x == 0, 0.0, (px.cos() * px - px.sin()) / (px * x))


UNARY = {
    "neg": _unary("neg", "", lambda g, x, o: -g),
    "exp": _unary("exp", "out", lambda g, x, o: g * o),
    "log": _unary("log", "x", lambda g, x, o: g / x),
    "log1p": _unary("log1p", "x", lambda g, x, o: g / (x + 1)),
    "expm1": _unary("expm1", "out", lambda g, x, o: g * (o + 1)),
    "sqrt": _unary("sqrt", "out", lambda g, x, o: g / (2 * o)),
    "rsqrt": _unary("rsqrt", "out", lambda g, x, o: -0.5 * g * o * o * o),
    "sin": _unary("sin", "x", lambda g, x, o: g * x.cos()),
    "cos": _unary("cos", "x", lambda g, x, o: -g * x.sin()),
    "tan": _unary("tan", "out", lambda g, x, o: g * (1 + o * o)),
    "sinh": _unary("sinh", "x", lambda g, x, o: g * x.cosh()),
    "cosh": _unary("cosh", "x", lambda g, x, o: g * x.sinh()),
    "asin": _unary("asin", "x", lambda g, x, o: g * (1 - x * x).rsqrt()),
    "acos": _unary("acos", "x", lambda g, x, o: -g * (1 - x * x).rsqrt()),
    "atan": _unary("atan", "x", lambda g, x, o: g / (1 + x * x)),
    "erf": _unary("erf", "x", lambda g, x, o: g * (TWO_OVER_SQRT_PI * (-x * x).exp())),
    "erfc": _unary("erfc", "x", lambda g, x, o: g * (-TWO_OVER_SQRT_PI * (-x * x).exp())),
    "log2": _unary("log2", "x", lambda g, x, o: g / (x * LN2)),
    "log10": _unary("log10", "x", lambda g, x, o: g / (x * LN10)),
    "exp2": _unary("exp2", "out", lambda g, x, o: g * (o * LN2)),
    "tanh": _unary("tanh", "out", lambda g, x, o: g * (1 - o * o)),
    "sigmoid": _unary("sigmoid", "out", lambda g, x, o: g * o * (1 - o)),
    "reciprocal": _unary("reciprocal", "out", lambda g, x, o: -g * o * o),
    "square": _unary("square", "x", lambda g, x, o: 2 * g * x),
    "abs": _unary("abs", "x", lambda g, x, o: g * x.sign()),
    "relu": _unary("relu", "out", lambda g, x, o: _where(o > 0, g, 0.0)),
    # piecewise constant: zero gradient, as torch
    "sign": _unary("sign", "", lambda g, x, o: g * 0),
    "floor": _unary("floor", "", lambda g, x, o: g * 0),
    "ceil": _unary("ceil", "", lambda g, x, o: g * 0),
    "round": _unary("round", "", lambda g, x, o: g * 0),
    "trunc": _unary("trunc", "", lambda g, x, o: g * 0),
    "sgn": _unary("sgn", "", lambda g, x, o: g * 0),
    "frac": _unary("frac", "", lambda g, x, o: g),
    "deg2rad": _unary("deg2rad", "", lambda g, x, o: g * DEG2RAD),
    "rad2deg": _unary("rad2deg", "", lambda g, x, o: g * (1 / DEG2RAD)),
    "acosh": _unary("acosh", "x", lambda g, x, o: g * (x * x - 1).rsqrt()),
    "asinh": _unary("asinh", "x", lambda g, x, o: g * (x * x + 1).rsqrt()),
    "atanh": _unary("atanh", "x", lambda g, x, o: g / (1 - x * x)),
    "erfinv": _unary("erfinv", "out", lambda g, x, o: g * (HALF_SQRT_PI * (o * o).exp())),
    "lgamma": _unary("lgamma", "x", lambda g, x, o: g * x.digamma()),
    "digamma": _unary("digamma", "x", lambda g, x, o: g * x._polygamma(1)),
    "i0": _unary("i0", "x", lambda g, x, o: g * I1.apply(x)),
    "sinc": _unary("sinc", "x", lambda g, x, o: _sinc_grad(g, x)),
}


class Logit(Function):
    @staticmethod
    def forward(ctx, x, eps=None):
        ctx.save_for_backward(x)
        ctx.eps = eps
        return _op("logit")(x, eps)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = g / (x * (1 - x))
        if ctx.eps is None:  # NaN outside [0, 1]; zero outside [eps, 1 - eps] with eps (torch)
            return _where((x < 0) | (x > 1), float("nan"), d), None
        return _where((x < ctx.eps) | (x > 1 - ctx.eps), 0.0, d), None


class NanToNum(Function):
    @staticmethod
    def forward(ctx, x, nan=0.0, posinf=None, neginf=None):
        ctx.save_for_backward(x)
        return _op("nan_to_num")(x, nan, posinf, neginf)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _where(x.isfinite(), g, 0.0), None, None, None


# ---- binary math ------------------------------------------------------------------------------

def _binary(name, grad_a, grad_b):
    """A Function for (a, b) -> name(a, b); grad_a(g, a, b, out) and grad_b(...) give the
    broadcast gradients, a and b being the operands as given (tensors or numbers)."""
    def forward(ctx, a, b):
        out = _op(name)(a, b)
        ctx.save_for_backward(a if _is_t(a) else None, b if _is_t(b) else None, out)
        ctx.scalars = (a, b)
        return out

    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        sa, sb = ctx.scalars
        va, vb = (a if a is not None else sa), (b if b is not None else sb)
        ga = _reduce_to(grad_a(g, va, vb, out), sa) if ctx.needs_input_grad[0] else None
        gb = _reduce_to(grad_b(g, va, vb, out), sb) if ctx.needs_input_grad[1] else None
        return ga, gb

    return type(name.capitalize(), (Function,), {"forward": staticmethod(forward),
                                                 "backward": staticmethod(backward)})


def _copysign_grad(g, a, b, out):
    """out / a is the sign change (+-1); 0 where a == 0, as torch."""
    return g * _where(a == 0, 0.0, out / a)


def _atan2_scale(a, b):
    """1 / (a^2 + b^2), 0 where that is infinite (at a = b = 0), as torch."""
    r = 1 / (a * a + b * b)
    return _where(r.isinf(), 0.0, r)


def _xlogy_grad(g, a, b, out):
    """log(y), 0 where x == 0 and y <= 0 (torch: there x log y is 0 near x = 0)."""
    return _where((a == 0) & (b <= 0), 0.0, g.xlogy(b))


BINARY = {
    "atan2": _binary("atan2", lambda g, a, b, o: g * b * _atan2_scale(a, b),
                     lambda g, a, b, o: -g * a * _atan2_scale(a, b)),
    "hypot": _binary("hypot", lambda g, a, b, o: g * a / o, lambda g, a, b, o: g * b / o),
    "fmod": _binary("fmod", lambda g, a, b, o: g, lambda g, a, b, o: -g * (a / b).trunc()),
    "logaddexp": _binary("logaddexp", lambda g, a, b, o: g / (1 + (b - a).exp()),
                         lambda g, a, b, o: g / (1 + (a - b).exp())),
    "logaddexp2": _binary("logaddexp2", lambda g, a, b, o: g / (1 + (b - a).exp2()),
                          lambda g, a, b, o: g / (1 + (a - b).exp2())),
    "copysign": _binary("copysign", _copysign_grad, lambda g, a, b, o: g * 0),
    "xlogy": _binary("xlogy", _xlogy_grad, lambda g, a, b, o: g * a / b),
}
BINARY["arctan2"] = BINARY["atan2"]


def _no_gradient(name, operand):
    def grad(*_):
        raise NotImplementedError(f"the gradient of {name} with respect to {operand} is not "
                                  f"implemented (nor is it in torch)")
    return grad


# torch.special's own kernel ops (cltensor/special.py binds them)
INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)
SQRT_HALF_PI = 1.2533141373155003  # sqrt(pi / 2)
SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2)


def _special(name):
    """cltensor.special's (differentiable) function: backward formulas built on it record
    second-order graphs under create_graph=True."""
    from ... import special
    return getattr(special, name)


def _i1e_grad(g, x, o):
    """d/dx i1e = i0e - i1e (sign(x) + 1 / x), 1/2 at 0."""
    return g * _where(x == 0, 0.5, _special("i0e")(x) - o * (x.sign() + 1 / x))


SPECIAL_UNARY = {
    "i0e": _unary("i0e", "xout", lambda g, x, o: g * (_special("i1e")(x) - x.sign() * o)),
    "i1e": _unary("i1e", "xout", _i1e_grad),
    "erfcx": _unary("erfcx", "xout", lambda g, x, o: g * (2 * x * o - TWO_OVER_SQRT_PI)),
    "ndtr": _unary("ndtr", "x", lambda g, x, o: g * (INV_SQRT_2PI * (-0.5 * x * x).exp())),
    # phi / ndtr, without underflow: 1 / (sqrt(pi / 2) erfcx(-x / sqrt 2))
    "log_ndtr": _unary("log_ndtr", "x", lambda g, x, o: g / (
        SQRT_HALF_PI * _special("erfcx")(x * -SQRT1_2))),
    "ndtri": _unary("ndtri", "out", lambda g, x, o: g * ((0.5 * o * o).exp() / INV_SQRT_2PI)),
    "entr": _unary("entr", "x", lambda g, x, o: -g * (x.log() + 1)),
}


def _xlog1py_grad(g, a, b, out):
    """log1p(y), 0 where x == 0 (unless y is NaN), as torch."""
    return g * _special("xlog1py")((a != 0).to(g.dtype) if _is_t(a) else float(a != 0), b)


SPECIAL_BINARY = {
    "xlog1py": _binary("xlog1py", _xlog1py_grad, lambda g, a, b, o: g * a / (b + 1)),
    "zeta": _binary("zeta", _no_gradient("zeta", "x"),
                    lambda g, a, b, o: -g * a * _special("zeta")(a + 1, b)),
}


def _fmax_takes_a(a, b, op):
    """Where fmax (fmin) takes a: a at least (most) b, or b NaN (torch's rule)."""
    wins = a >= b if op == "fmax" else a <= b
    return wins | (b.isnan() if _is_t(b) else math.isnan(b))


def _igamma_grad(sign):
    """d/dx of igamma(a, x) (sign 1) or igammac (-1): x^(a-1) e^-x / Gamma(a)."""
    return lambda g, a, x, o: sign * g * ((a - 1) * x.log() - x - _lgamma(a)).exp()


def _lgamma(a):
    return a.lgamma() if _is_t(a) else math.lgamma(a)


for _name in ("fmax", "fmin"):
    BINARY[_name] = _binary(
        _name, lambda g, a, b, o, n=_name: _where(_fmax_takes_a(a, b, n), g, 0.0),
        lambda g, a, b, o, n=_name: _where(_fmax_takes_a(a, b, n), 0.0, g))
BINARY.update(
    igamma=_binary("igamma", _no_gradient("igamma", "input"), _igamma_grad(1)),
    igammac=_binary("igammac", _no_gradient("igammac", "input"), _igamma_grad(-1)),
    nextafter=_binary("nextafter", _no_gradient("nextafter", "input"),
                      _no_gradient("nextafter", "other")),
    # polygamma(n, x) as the method x._polygamma(n): n is an int, so only x's gradient
    _polygamma=_binary("_polygamma", lambda g, x, n, o: g * x._polygamma(n + 1), None))


class Clamp(Function):
    @staticmethod
    def forward(ctx, x, min=None, max=None):
        ctx.save_for_backward(x, min if _is_t(min) else None, max if _is_t(max) else None)
        ctx.bounds = (min, max)
        return _op("clamp")(x, min, max)

    @staticmethod
    def backward(ctx, g):
        x, tmin, tmax = ctx.saved_tensors
        lo, hi = ctx.bounds
        lo = tmin if tmin is not None else lo
        hi = tmax if tmax is not None else hi
        inside = None
        if lo is not None:
            inside = x >= lo
        if hi is not None:
            inside = (x <= hi) if inside is None else inside & (x <= hi)
        gx = _where(inside, g, 0.0)
        glo = _reduce_to(_where(x < lo, g, 0.0), ctx.bounds[0]) if tmin is not None else None
        ghi = _reduce_to(_where(x > hi, g, 0.0), ctx.bounds[1]) if tmax is not None else None
        return _reduce_to(gx, x), glo, ghi


class _MaxMin(Function):
    """maximum/minimum: the gradient goes to the selected input, split in half on ties."""
    op = None

    @classmethod
    def forward(cls, ctx, a, b):
        ctx.save_for_backward(a if _is_t(a) else None, b if _is_t(b) else None)
        ctx.scalars = (a, b)
        ctx.op = cls.op
        return _op(cls.op)(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.scalars
        va, vb = (a if a is not None else sa), (b if b is not None else sb)
        wins = (va > vb) if ctx.op == "maximum" else (va < vb)
        tie = va == vb
        share = _where(tie, g * 0.5, _where(wins, g, 0.0))
        other = _where(tie, g * 0.5, _where(wins, 0.0, g))
        return _reduce_to(share, sa), _reduce_to(other, sb)


class Maximum(_MaxMin):
    op = "maximum"


class Minimum(_MaxMin):
    op = "minimum"


class Where(Function):
    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.save_for_backward(cond)
        ctx.scalars = (x, y)
        return _op("where")(cond, x, y)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        x, y = ctx.scalars
        gx = _reduce_to(_where(cond, g, 0.0), x) if ctx.needs_input_grad[1] else None
        gy = _reduce_to(_where(cond, 0.0, g), y) if ctx.needs_input_grad[2] else None
        return None, gx, gy


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
        from ...creation import zeros
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


class ViewScatter(Function):
    """select_scatter, slice_scatter, diagonal_scatter: x with its view `view(*args)` replaced
    by src. src's gradient is that view of the output's; x's is the rest (the view zeroed)."""

    @staticmethod
    def forward(ctx, x, src, op, view, *args):
        from ...ops.indexing import view_scatter
        ctx.op, ctx.view, ctx.args, ctx.src_dtype = op, view, args, src.dtype
        return view_scatter(x, src, op, view, *args)

    @staticmethod
    def backward(ctx, g):
        from ...creation import zeros
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
        from ...creation import from_numpy, zeros
        inside, outside = (_storage_positions(*v) for v in ctx.geometry)
        lo = min(inside.min(initial=0), outside.min(initial=0))
        span = max(inside.max(initial=0), outside.max(initial=0)) + 1 - lo
        at = [from_numpy(p - lo, device=g.device) for p in (inside, outside)]
        flat = IndexPut.apply(zeros(span, dtype=g.dtype, device=g.device), (at[1],),
                              g.reshape(-1), True)
        return Index.apply(flat, (at[0],)).reshape(ctx.geometry[0][0]), None, None, None


class Frexp(Function):
    """frexp's mantissa = x / 2^exponent: its gradient divided by 2^exponent, as torch."""

    @staticmethod
    def forward(ctx, x):
        out = _op("frexp")(x)
        ctx.exponent = out.exponent
        return out

    @staticmethod
    def backward(ctx, g, _exponent_grad=None):
        return g / ctx.exponent.exp2().to(g.dtype)


def _put(x, index, source, accumulate=False):
    """put as IndexPut on x flattened (its checks first)."""
    from ...ops.indexing import check_put
    check_put(x, index, source, "put")
    flat = IndexPut.apply(x.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(x.shape)


# ---- matmul -----------------------------------------------------------------------------------

class Matmul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _op("matmul")(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        from ...ops.elementwise import broadcast_shapes
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        out2 = broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1])
        g2 = g.reshape(out2)  # 1-d operands: the dims matmul removed come back as size 1
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = sum_to_shape(g2 @ b2.mT, a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = sum_to_shape(a2.mT @ g2, b2.shape).reshape(b.shape)
        return ga, gb


def _is_transposed(t):
    """A matrix (or batch) stored column-major: its last two dims are a transposed view."""
    return t.ndim >= 2 and t.strides[-2] == 1 and t.strides[-1] != 1 and t.shape[-2] > 1


def _mm_like(a, b, transposed):
    """a @ b, computed transposed when the input it is the gradient of was a transposed view
    (a linear layer's weight.T), so that the gradient reaches the leaf without a copy."""
    return (b.mT @ a.mT).mT if transposed else a @ b


def _scaled(t, factor):
    return t if factor == 1 else t * factor


class Addmm(Function):
    """beta * input + alpha * (m1 @ m2), also for baddbmm's batched form."""

    @staticmethod
    def forward(ctx, inp, m1, m2, beta=1, alpha=1, batched=False):
        ctx.save_for_backward(m1 if ctx.needs_input_grad[2] else None,
                              m2 if ctx.needs_input_grad[1] else None)
        ctx.inp, ctx.beta, ctx.alpha = inp, beta, alpha
        ctx.transposed = (_is_transposed(m1), _is_transposed(m2))
        fn = _op("baddbmm" if batched else "addmm")
        return fn(inp, m1, m2, beta=beta, alpha=alpha)

    @staticmethod
    def backward(ctx, g):
        m1, m2 = ctx.saved_tensors
        gi = _reduce_to(_scaled(g, ctx.beta), ctx.inp) if ctx.needs_input_grad[0] else None
        t1, t2 = ctx.transposed
        g1 = _scaled(_mm_like(g, m2.mT, t1), ctx.alpha) if ctx.needs_input_grad[1] else None
        g2 = _scaled(_mm_like(m1.mT, g, t2), ctx.alpha) if ctx.needs_input_grad[2] else None
        return gi, g1, g2, None, None, None


class Baddbmm(Addmm):
    @staticmethod
    def forward(ctx, inp, b1, b2, beta=1, alpha=1):
        return Addmm.forward(ctx, inp, b1, b2, beta, alpha, batched=True)


# ---- reductions -------------------------------------------------------------------------------

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
    from ...creation import ones
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
        from ...creation import zeros
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


def _extreme_composite(name, ns):
    """max/min: of everything, over a dim (values, indices), or against another tensor."""
    from ...ops.reduce import return_types
    all_cls, dim_cls = (Amax, MaxDim) if name == "max" else (Amin, MinDim)

    def op(x, dim=None, keepdim=False):
        if isinstance(dim, ClTensor):
            return ns["maximum" if name == "max" else "minimum"](x, dim)
        if dim is None:
            return all_cls.apply(x, None, False)
        return getattr(return_types, name)(*dim_cls.apply(x, dim, keepdim))
    return op


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
        d, lowest = ctx.dim, float(np.finfo(x.dtype).min)
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


def _var_composite(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    c = 1 if correction is None and unbiased in (None, True) else (correction or 0)
    dims = _reduced_dims(x, dim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    centered = x - x.mean(dims, keepdim=True)
    return (centered * centered).sum(dims, keepdim=keepdim) / max(count - c, 0)


def _std_composite(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _var_composite(x, dim, unbiased, keepdim, correction=correction).sqrt()


def _logsumexp_composite(x, dim, keepdim=False):
    dims = _reduced_dims(x, dim)
    m = x.detach().amax(dims, keepdim=True)
    m = _where(m.isinf(), 0.0, m)
    out = (x - m).exp().sum(dims, keepdim=True).log() + m
    return out if keepdim else out.squeeze(dims)


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


def _cat_composite(tensors, dim=0):
    return Cat.apply(dim, *tensors)


def _stack_composite(tensors, dim=0):
    nd = tensors[0].ndim + 1 if tensors else 1
    return Cat.apply(dim % nd, *[t.unsqueeze(dim % nd) for t in tensors])


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
        from ...ops.shape import pad_backward
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
        from ...creation import zeros
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
        from ...creation import zeros
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
        from ...creation import zeros
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
        from ...creation import zeros
        from ...ops.elementwise import broadcast_shapes
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
    from ...creation import full
    n = full(g.shape, float(include_self), dtype=g.dtype, device=g.device)
    n = n.scatter_add(dim, index, full(index.shape, 1.0, dtype=g.dtype, device=g.device))
    share = g / n.masked_fill(n == 0, 1.0)
    return share, share.gather(dim, index)


def _scatter_prod_grads(g, x, dim, index, src, out, include_self):
    # the product of the others: with a zero of x (or the only zero among a slot's src values)
    # replaced by 1 and the product taken again, else the result divided by the value
    from ...creation import zeros
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
        from ...creation import zeros
        gx = gs = None
        if ctx.needs_input_grad[0]:
            gx = sum_to_shape(g.masked_fill(ctx.mask, 0.0), ctx.shape)
        if ctx.needs_input_grad[2]:
            picked = g.masked_select(ctx.mask)
            rest = zeros(math.prod(ctx.src_shape) - picked.numel(), dtype=g.dtype,
                         device=g.device)
            gs = Cat.apply(0, picked, rest).reshape(ctx.src_shape)
        return gx, None, gs


# ---- ops whose gradient comes from composing differentiable ops ------------------------------

def composites(ns, cls):
    """name -> (raw op, differentiable composition) for ops that need no Function of their own."""
    def outer(a, b):
        return a.unsqueeze(1) * b.unsqueeze(0)

    return {"outer": (ns["outer"], outer), "ger": (ns["ger"], outer),
            "var": (ns["var"], _var_composite), "std": (ns["std"], _std_composite),
            "logsumexp": (ns["logsumexp"], _logsumexp_composite),
            "cat": (ns["cat"], _cat_composite), "concat": (ns["concat"], _cat_composite),
            "concatenate": (ns["concatenate"], _cat_composite),
            "stack": (ns["stack"], _stack_composite),
            "max": (ns["max"], _extreme_composite("max", ns)),
            "min": (ns["min"], _extreme_composite("min", ns)),
            "index_put": (ns["index_put"], lambda x, indices, values, accumulate=False:
                          IndexPut.apply(x, tuple(indices), values, accumulate)),
            "sort": (ns["sort"], _picked(ns["sort"], "sort", 0)),
            "topk": (ns["topk"], _picked(ns["topk"], "topk", 1)),
            "as_strided": (ns["as_strided"], AsStrided.apply), "put": (ns["put"], _put),
            "frexp": (ns["frexp"], Frexp.apply), **_view_scatters(ns)}


def _view_scatters(ns):
    from ...ops.indexing import slice_key

    def select(x, src, dim, index):
        return ViewScatter.apply(x, src, "select_scatter", "select", dim, index)

    def slices(x, src, dim=0, start=None, end=None, step=1):
        return ViewScatter.apply(x, src, "slice_scatter", "_basic_index",
                                 slice_key(x, dim, start, end, step))

    def diagonal(x, src, offset=0, dim1=0, dim2=1):
        return ViewScatter.apply(x, src, "diagonal_scatter", "diagonal", offset, dim1, dim2)

    return {"select_scatter": (ns["select_scatter"], select),
            "slice_scatter": (ns["slice_scatter"], slices),
            "diagonal_scatter": (ns["diagonal_scatter"], diagonal)}


def _picked(raw, name, dim_at):
    """sort / topk made differentiable: the indices from raw on the detached input, the values
    gathered from the input along the op's dim (argument dim_at after x, default -1), so that
    Gather's backward sends each value's gradient to where it came from."""
    from ...ops.reduce import return_types

    def op(x, *args, **kwargs):
        indices = raw(x.detach(), *args, **kwargs).indices
        dim = kwargs.get("dim", args[dim_at] if len(args) > dim_at else -1)
        if x.ndim == 0:
            values = x.reshape(1).gather(0, indices.reshape(-1)).reshape(indices.shape)
        else:
            values = x.gather(dim, indices)
        return getattr(return_types, name)(values, indices)
    return op


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
