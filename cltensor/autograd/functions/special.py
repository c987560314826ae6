"""Gradients of torch.special's own kernel ops (ops/pointwise.py; cltensor/special.py binds
them)."""
from ...ops import pointwise as pw
from ..engine import wrap_function
from .common import _is_t
from .pointwise import TWO_OVER_SQRT_PI, _binary, _no_gradient, _unary, _where

INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)
SQRT_HALF_PI = 1.2533141373155003  # sqrt(pi / 2)
SQRT1_2 = 0.7071067811865476  # 1 / sqrt(2)


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

# each op as cltensor.special binds it: backward formulas built on these record second-order
# graphs under create_graph=True
DIFFERENTIABLE = {name: wrap_function(name, getattr(pw, name), fn_cls)
                  for name, fn_cls in {**SPECIAL_UNARY, **SPECIAL_BINARY}.items()}


def _special(name):
    return DIFFERENTIABLE[name]
