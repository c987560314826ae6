"""Special functions on the opencl device: torch.special's i0e, i1, i1e, ndtri, entr, erfcx and
log_ndtr (cltensor's kernels, with their out= forms), polygamma (n >= 0, and its in-place form),
frexp, and poisson's sampler drawing from cltensor's generator. torch's autograd formulas for
them call other registered ops, so their gradients run on the device too."""
import torch

from .. import dtypes as dt
from .. import random as cl_random
from ..ops import pointwise
from ._backend import aten, np_dtype, unwrap
from .fallback import cpu_fallback
from .math_ops import finish, meta_result, operand, register_pointwise, with_out, write_into

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
_PTRS_FROM = 10.0  # rates from here on draw by transformed rejection, below by inversion (torch's)


def _by_inversion(rate):
    """Poisson draws of rates below _PTRS_FROM (others give 0): one uniform u per element, k
    counted up while the CDF at k stays below u (a term underflowing to 0 ends the count)."""
    u = cl_random.rand(*rate.shape, dtype=rate.dtype, device=rate.device)
    p = (-rate).exp()
    cdf, k = p, rate * 0
    more = (u > cdf) & (p > 0)
    while bool(more.any()):
        k = k + more.to(k.dtype)
        p = pointwise.where(more, p * rate / k, p)
        cdf = cdf + pointwise.where(more, p, 0.0)
        more = more & (u > cdf) & (p > 0)
    return k


def _by_rejection(rate):
    """Poisson draws of rates from _PTRS_FROM on by Hormann's transformed rejection (PTRS),
    each round redrawing the elements not yet accepted."""
    slam, loglam = rate.sqrt(), rate.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_invalpha = (1.1239 + 1.1328 / (b - 3.4)).log()
    vr = 0.9277 - 3.6224 / (b - 2)
    k_out, done = rate * 0, rate != rate  # all False but NaN rates (which stay NaN below)
    k_out = pointwise.where(done, rate, k_out)
    while not bool(done.all()):
        u = cl_random.rand(*rate.shape, dtype=rate.dtype, device=rate.device) - 0.5
        v = cl_random.rand(*rate.shape, dtype=rate.dtype, device=rate.device)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + rate + 0.43).floor()
        quick = (us >= 0.07) & (v <= vr)
        refused = (k < 0) | ((us < 0.013) & (v > us))
        k_safe = k.clamp(min=0)
        bound = -rate + k_safe * loglam - (k_safe + 1).lgamma()
        slow = v.log() + log_invalpha - (a / (us * us) + b).log() <= bound
        take = ~done & (quick | (~refused & slow))
        k_out = pointwise.where(take, k, k_out)
        done = done | take
    return k_out


@aten("poisson")
def poisson(self, generator=None):
    """Poisson draws of rates self from cltensor's generator (a torch.Generator: the CPU's)."""
    if generator is not None:
        return cpu_fallback(_aten.poisson.default, self, generator)
    out = meta_result(_aten.poisson.default, (self, generator), {})
    rate = unwrap(self)
    rate = rate.to(dt.float32) if rate.dtype in dt.HALF_TYPES else rate
    if rate.numel() == 0:
        return finish(rate.clone(), out)
    if bool((rate < 0).any()):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    small = rate < _PTRS_FROM
    k = _by_inversion(pointwise.where(small, rate, 0.0))
    if not bool(small.all()):
        k = pointwise.where(small, k, _by_rejection(pointwise.where(small, _PTRS_FROM, rate)))
    return finish(k, out)


with_out("poisson.out", poisson)
