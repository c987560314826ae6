"""Special functions on the opencl device: torch.special's i0e, i1, i1e, ndtri, entr, erfcx and
log_ndtr (cltensor's kernels, with their out= forms), polygamma (n >= 0, and its in-place form),
frexp, and poisson's sampler drawing from cltensor's generator. torch's autograd formulas for
them call other registered ops, so their gradients run on the device too."""
import torch

from .. import creation
from .. import dtypes as dt
from .. import random as cl_random
from ..ops import pointwise, ranges
from ..ops.indexing import index_copy_, index_select, nonzero
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
# Rates from here on draw by transformed rejection, below by inversion (torch's own split). Both
# work on the elements still pending, gathered anew each round, so that a round costs what is
# left to draw rather than the whole tensor.
_PTRS_FROM = 10.0


def _pending(mask, *arrays):
    """The elements of 1-d arrays where mask holds (an empty tuple when none does)."""
    keep = nonzero(mask).reshape(-1)
    if keep.numel() == 0:
        return ()
    return tuple(index_select(a, 0, keep) for a in arrays)


def _by_inversion(out, idx, rate):
    """Poisson draws into out[idx] of rates in (0, _PTRS_FROM): one uniform u each, the draw
    the count of k whose CDF stays below u. The rows of `state` (u, rate, the pmf and CDF at k,
    the count) are gathered to the elements still counting once fewer than half are."""
    n = rate.shape[0]
    state = creation.zeros(5, n, dtype=rate.dtype, device=rate.device)
    state[0] = cl_random.rand(n, dtype=rate.dtype, device=rate.device)
    state[1] = rate
    state[2] = state[3] = (-rate).exp()
    k = 0
    while True:
        u, rate, p, cdf, count = state
        live = (u > cdf) & (p > 0)  # a pmf underflowing to 0 ends the tail
        count += live.to(count.dtype)
        alive = int(live.sum())
        if alive == 0 or alive <= count.shape[0] // 2:
            index_copy_(out, 0, idx, count)
            if alive == 0:
                return
            keep = nonzero(live).reshape(-1)
            idx, state = index_select(idx, 0, keep), index_select(state, 1, keep)
            u, rate, p, cdf, count = state
        k += 1
        p.mul_(rate).mul_(1.0 / k)
        cdf.add_(p)


def _by_rejection(out, idx, rate):
    """Poisson draws into out[idx] of rates from _PTRS_FROM on by Hormann's transformed
    rejection (PTRS), each round redrawing the elements not yet accepted."""
    pending = (idx, rate)
    while pending:
        idx, rate = pending
        slam, loglam = rate.sqrt(), rate.log()
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        log_invalpha = (1.1239 + 1.1328 / (b - 3.4)).log()
        vr = 0.9277 - 3.6224 / (b - 2)
        u = cl_random.rand(*rate.shape, dtype=rate.dtype, device=rate.device) - 0.5
        v = cl_random.rand(*rate.shape, dtype=rate.dtype, device=rate.device)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + rate + 0.43).floor()
        quick = (us >= 0.07) & (v <= vr)
        refused = (k < 0) | ((us < 0.013) & (v > us))
        k_safe = k.clamp(min=0)
        bound = -rate + k_safe * loglam - (k_safe + 1).lgamma()
        slow = v.log() + log_invalpha - (a / (us * us) + b).log() <= bound
        take = quick | (~refused & slow)
        accepted = _pending(take, idx, k)
        if accepted:
            index_copy_(out, 0, *accepted)
        pending = _pending(~take, idx, rate)


@aten("poisson")
def poisson(self, generator=None):
    """Poisson draws of rates self from cltensor's generator (a torch.Generator: the CPU's)."""
    if generator is not None:
        return cpu_fallback(_aten.poisson.default, self, generator)
    out = meta_result(_aten.poisson.default, (self, generator), {})
    rate = unwrap(self)
    rate = rate.to(dt.compute_dtype(rate.dtype))
    if rate.numel() == 0:
        return finish(rate.clone(), out)
    if bool((rate < 0).any()):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    # inversion sums a CDF: in float64 where the device has it, so that it reaches every u
    wide = dt.float64 if rate.device.has_fp64 else rate.dtype
    flat = rate.reshape(-1).to(wide)
    draws = creation.zeros(*flat.shape, dtype=wide, device=flat.device)
    idx = ranges.arange(flat.shape[0], dtype=dt.int64, device=flat.device)
    small = _pending((flat > 0) & (flat < _PTRS_FROM), idx, flat)  # 0 draws 0
    if small:
        _by_inversion(draws, *small)
    large = _pending(flat >= _PTRS_FROM, idx, flat)
    if large:
        _by_rejection(draws, *large)
    draws = pointwise.where(flat != flat, flat, draws)  # a NaN rate draws NaN
    return finish(draws.reshape(rate.shape), out)


with_out("poisson.out", poisson)
