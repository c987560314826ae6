"""Special functions on the opencl device: torch.special's i0e, i1, i1e, ndtri, entr, erfcx and
log_ndtr (cltensor's kernels, with their out= forms), polygamma (n >= 0, and its in-place form),
frexp, and poisson's sampler drawing from cltensor's generator. torch's autograd formulas for
them call other registered ops, so their gradients run on the device too."""
import torch

from .. import random as cl_random
from ..ops import pointwise
from ._backend import aten, np_dtype, unwrap
from .fallback import cpu_fallback
from .math_ops import (finish, meta_result, operand, register_pointwise, runtime_errors, with_out,
                       write_into)

_aten = torch.ops.aten

for _name in ("i0e", "i1", "i1e", "ndtri", "entr", "erfcx", "log_ndtr"):
    register_pointwise(f"special_{_name}", getattr(pointwise, _name))


def _polygamma_of(n, self, op):
    out = meta_result(op, (n, self), {})
    if n < 0:  # torch's CPU check (its Meta kernel has none)
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = operand(self, np_dtype(out.dtype, "polygamma"))
    return finish(pointwise._polygamma(x, n), out)


@aten("polygamma")
def polygamma(n, self):
    return _polygamma_of(n, self, _aten.polygamma.default)


@aten("special_polygamma")
def special_polygamma(n, self):
    return _polygamma_of(n, self, _aten.special_polygamma.default)


@aten("polygamma_")
def polygamma_(self, n):
    meta_result(_aten.polygamma_.default, (self, n), {})  # torch's in-place cast check
    return write_into(self, polygamma(n, self))


with_out("polygamma.out", polygamma)
with_out("special_polygamma.out", special_polygamma)


@aten("frexp.Tensor")
def frexp(self):
    mantissa, exponent = meta_result(_aten.frexp.Tensor, (self,), {})
    m, e = pointwise.frexp(unwrap(self))
    return finish(m, mantissa), finish(e, exponent)


@aten("frexp.Tensor_out")
def frexp_out(self, *, mantissa, exponent):
    meta_result(_aten.frexp.Tensor_out, (self,), {"mantissa": mantissa, "exponent": exponent})
    m, e = frexp(self)
    return write_into(mantissa, m), write_into(exponent, e)


# ---- poisson --------------------------------------------------------------------------------

@aten("poisson")
def poisson(self, generator=None):
    """Poisson draws of rates self from cltensor's generator (a torch.Generator: the CPU's)."""
    if generator is not None:
        return cpu_fallback(_aten.poisson.default, self, generator)
    out = meta_result(_aten.poisson.default, (self, generator), {})
    with runtime_errors():
        return finish(cl_random.poisson(unwrap(self)), out)


with_out("poisson.out", poisson)
