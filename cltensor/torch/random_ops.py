"""Random sampling on the opencl device: the in-place fills (normal_, uniform_, bernoulli_,
random_, exponential_, geometric_, log_normal_, cauchy_), bernoulli, normal with tensor
parameters, randperm and multinomial, from cltensor's generator (seeded by
torch.opencl.manual_seed / torch.manual_seed). torch's Meta kernels check the arguments first,
so bad input gets torch's errors. An explicit torch.Generator is a CPU generator: those calls
run on the CPU, drawing from it as torch would."""
import math

import torch

import cltensor

from .. import dtypes as dt
from ..ops import elementwise as ew
from ._backend import aten, np_dtype, unwrap
from .activation_ops import _floating
from .fallback import cpu_fallback
from .math_ops import (check_devices, finish, meta_result, operand, runtime_errors, write_into)

_aten = torch.ops.aten


def _sampler(name, draw):
    """Register aten `name` (an overload whose last keyword is generator): torch's checks on
    Meta, then draw(*args) on the device; a given generator takes the CPU path."""
    base, _, overload = name.partition(".")
    op = getattr(getattr(_aten, base), overload or "default")

    def kernel(*args, generator=None, **kwargs):
        if generator is not None:
            return cpu_fallback(op, *args, generator=generator, **kwargs)
        meta_result(op, args, kwargs)
        with runtime_errors():
            return draw(*args, **kwargs)
    aten(name)(kernel)


def _in_place(fill):
    """An in-place sampler: fill(ClTensor, *args) writes the draws; returns self."""
    def draw(self, *args):
        if self.numel():
            fill(unwrap(self), *args)
        return self
    return draw


def _float_fill(fill):
    """fill on a float32 copy of a 16-bit tensor (the draws are made in float32, then rounded,
    as torch's CPU kernels make them in the accumulate type)."""
    def run(x, *args):
        if x.dtype in dt.HALF_TYPES:
            wide = cltensor.empty(x.shape, dtype=dt.float32, device=x.device)
            fill(wide, *args)
            x.copy_(wide)
        else:
            fill(x, *args)
    return run


_sampler("normal_", _in_place(lambda x, mean=0.0, std=1.0: x.normal_(mean, std)))
_sampler("uniform_", _in_place(lambda x, lo=0.0, hi=1.0: x.uniform_(lo, hi)))
_sampler("bernoulli_.float", _in_place(lambda x, p=0.5: x.bernoulli_(p)))
_sampler("bernoulli_.Tensor", _in_place(lambda x, p: x.bernoulli_(_probabilities(p))))
_sampler("exponential_", _in_place(lambda x, lambd=1.0: x.exponential_(lambd)))


def _probabilities(p):
    """bernoulli_'s probability tensor (opencl, or a CPU one of 0 dims) as a floating ClTensor."""
    return operand(p, np_dtype(p.dtype, "bernoulli_") if p.is_floating_point() else dt.float32)


_sampler("random_", _in_place(lambda x: x.random_()))
_sampler("random_.to", _in_place(lambda x, to: x.random_(to)))
# to=None: up to the dtype's largest exact integer (cltensor's random_ takes None so)
_sampler("random_.from", _in_place(lambda x, low, high=None: x.random_(low, high)))


def _geometric(x, p):
    """Trials to the first success: ceil(log(u) / log(1 - p)) for u uniform in (0, 1]."""
    u = cltensor.empty(x.shape, dtype=x.dtype, device=x.device).uniform_(0.0, 1.0)
    u = 1.0 - u  # (0, 1]: log(u) is finite
    x.copy_(cltensor.ceil(cltensor.log(u) / math.log1p(-p)).clamp(min=1.0))


def _log_normal(x, mean=1.0, std=2.0):
    x.normal_(mean, std)
    cltensor.exp(x, out=x)


def _cauchy(x, median=0.0, sigma=1.0):
    """median + sigma * tan(pi * (u - 1/2))."""
    x.uniform_(0.0, 1.0)
    ew.ternary("add_scaled", [median, cltensor.tan((x - 0.5) * math.pi), sigma], x.dtype, out=x)


_sampler("geometric_", _in_place(_float_fill(_geometric)))
_sampler("log_normal_", _in_place(_float_fill(_log_normal)))
_sampler("cauchy_", _in_place(_float_fill(_cauchy)))


def _bernoulli_like(self, p=None):
    out = meta_result(_aten.bernoulli.p if p is not None else _aten.bernoulli.default,
                      (self,) if p is None else (self, p), {})
    x = unwrap(self)
    res = cltensor.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        res.bernoulli_(p if p is not None else (x if dt.is_floating(x.dtype) else x.to(dt.float32)))
    return finish(res, out)


def _bernoulli_kernel(name, with_p):
    op = _aten.bernoulli.p if with_p else _aten.bernoulli.default

    def kernel(self, *args, generator=None):
        if generator is not None:
            return cpu_fallback(op, self, *args, generator=generator)
        with runtime_errors():
            return _bernoulli_like(self, *args)
    aten(name)(kernel)


_bernoulli_kernel("bernoulli", False)
_bernoulli_kernel("bernoulli.p", True)


def _normal(name, op):
    def kernel(mean, std=1.0, *, generator=None):
        if generator is not None:
            return cpu_fallback(op, mean, std, generator=generator)
        out = meta_result(op, (mean, std), {})
        dtype = np_dtype(out.dtype, "normal")
        wide = dt.compute_dtype(dtype)
        m, s = operand(mean, wide), operand(std, wide)
        if isinstance(s, cltensor.ClTensor) and s.numel() and bool((s < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
        return finish(cltensor.normal(m, s), out)
    aten(name)(kernel)


_normal("normal.Tensor_float", _aten.normal.Tensor_float)
_normal("normal.float_Tensor", _aten.normal.float_Tensor)
_normal("normal.Tensor_Tensor", _aten.normal.Tensor_Tensor)


@aten("randperm.generator_out")
def randperm_out(n, *, generator=None, out):
    if generator is not None:
        return cpu_fallback(_aten.randperm.generator_out, n, generator=generator, out=out)
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    dst = unwrap(out)
    perm = cltensor.randperm(n, dtype=dt.int64, device=dst.device)
    if tuple(out.shape) != (n,):
        out.resize_(n)
        dst = unwrap(out)
    dst.copy_(perm)
    return out


@aten("multinomial")
def multinomial(self, num_samples, replacement=False, *, generator=None):
    if generator is not None:
        return cpu_fallback(_aten.multinomial.default, self, num_samples, replacement,
                            generator=generator)
    out = meta_result(_aten.multinomial.default, (self, num_samples, replacement), {})
    x = unwrap(self)
    if not dt.is_floating(x.dtype):
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{self.dtype}")
    probs = x if x.dtype in (dt.float32, dt.float64) else x.to(dt.float32)
    with runtime_errors():
        return finish(cltensor.multinomial(probs, num_samples, replacement), out)


# ---- distributions with tensor parameters (torch.distributions' Gamma, Beta, Dirichlet,
# Binomial): random.cl's per-element samplers ------------------------------------------------

def _floating_parameter(t, op):
    _floating(op, t)  # torch's error for integer and bool parameters
    return unwrap(t)


@aten("_standard_gamma")
def standard_gamma(self, generator=None):
    if generator is not None:
        return cpu_fallback(_aten._standard_gamma.default, self, generator)
    x = _floating_parameter(self, "gamma_cpu")
    # NOTE: not meta_result: torch builds before 2.13 have no Meta kernel for _standard_gamma
    out = torch.empty(self.shape, dtype=self.dtype, device="meta")
    with runtime_errors():
        return finish(cltensor._standard_gamma(x), out)


@aten("_sample_dirichlet")
def sample_dirichlet(self, generator=None):
    if generator is not None:
        return cpu_fallback(_aten._sample_dirichlet.default, self, generator)
    x = _floating_parameter(self, "dirichlet")
    out = torch.empty(self.shape, dtype=self.dtype, device="meta")
    with runtime_errors():
        return finish(cltensor._sample_dirichlet(x), out)


@aten("binomial")
def binomial(count, prob, generator=None):
    if generator is not None:
        return cpu_fallback(_aten.binomial.default, count, prob, generator)
    c, p = (_floating_parameter(t, "binomial_cpu") for t in (count, prob))
    with runtime_errors():
        shape = ew.broadcast_shapes(c.shape, p.shape)
        return finish(cltensor.binomial(c, p),
                      torch.empty(shape, dtype=count.dtype, device="meta"))


def _out_form(name, functional):
    """The out= overload of a sampler without a Meta kernel: the device and dtype checks of
    torch's out= forms, then the draws written into out (resized as out= is)."""
    op = getattr(getattr(_aten, name.split(".")[0]), name.split(".")[1])

    def kernel(*args, out):
        check_devices((*args, out), {}, op)
        res = functional(*args)
        if out.dtype != res.dtype:
            raise RuntimeError(f"Expected out tensor to have dtype {res.dtype}, but got "
                               f"{out.dtype} instead")
        return write_into(out, res)
    aten(name)(kernel)


_out_form("_standard_gamma.out", standard_gamma)
_out_form("_sample_dirichlet.out", sample_dirichlet)
_out_form("binomial.out", binomial)
