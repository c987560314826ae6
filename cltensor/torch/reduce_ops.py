"""Reductions beyond sum and mean: all/any, var/std (with var_mean/std_mean), prod, nansum and
aminmax on cltensor's reduction kernels; torch's Meta kernels check the arguments and give the result."""
import torch

import cltensor

from ._backend import aten, np_dtype, unwrap
from .math_ops import check_devices, finish, meta_result, with_out

_aten = torch.ops.aten


def _dims(dim, ndim):
    """torch's dim argument (None, an int, or a list; empty: every dim) as a tuple."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return dims or tuple(range(ndim))


def _logical(name, fn):
    """all/any over every element, one dim, or a list of dims, and their out= forms."""
    packet = getattr(_aten, name)

    def over(overload, self, dim=None, keepdim=False):
        out = meta_result(getattr(packet, overload), (self,) if overload == "default"
                          else (self, dim, keepdim), {})
        return finish(fn(unwrap(self), _dims(dim, self.dim()), keepdim), out)
    aten(name)(lambda self: over("default", self))
    aten(f"{name}.dim")(lambda self, dim, keepdim=False: over("dim", self, dim, keepdim))
    aten(f"{name}.dims")(lambda self, dim=None, keepdim=False: over("dims", self, dim, keepdim))
    with_out(f"{name}.out", lambda self, dim, keepdim=False: over("dim", self, dim, keepdim))
    with_out(f"{name}.dims_out",
             lambda self, dim=None, keepdim=False: over("dims", self, dim, keepdim))
    with_out(f"{name}.all_out", lambda self: over("default", self))


_logical("all", cltensor.all)
_logical("any", cltensor.any)


def _moment(name, fn):
    """var/std with a correction (torch's other overloads decompose into it), out= form."""
    op = getattr(_aten, name).correction

    def kernel(self, dim=None, *, correction=None, keepdim=False):
        out = meta_result(op, (self, dim), {"correction": correction, "keepdim": keepdim})
        corr = 1 if correction is None else correction
        x = unwrap(self).to(np_dtype(out.dtype, name))
        return finish(fn(x, _dims(dim, self.dim()), keepdim=keepdim, correction=corr), out)
    aten(f"{name}.correction")(kernel)
    with_out(f"{name}.correction_out", kernel)
    return kernel


_var = _moment("var", cltensor.var)
_std = _moment("std", cltensor.std)


def _with_mean(name, spread):
    """var_mean / std_mean: (spread, mean) over the same dims."""
    def kernel(self, dim=None, *, correction=None, keepdim=False):
        res = spread(self, dim, correction=correction, keepdim=keepdim)
        return res, _aten.mean.dim(self, _dims(dim, self.dim()), keepdim)
    aten(f"{name}.correction")(kernel)


_with_mean("var_mean", _var)
_with_mean("std_mean", _std)


@aten("prod")
def prod(self, *, dtype=None):
    out = meta_result(_aten.prod.default, (self,), {"dtype": dtype})
    return finish(cltensor.prod(unwrap(self).to(np_dtype(out.dtype, "prod"))), out)


@aten("prod.dim_int")
def prod_dim(self, dim, keepdim=False, *, dtype=None):
    out = meta_result(_aten.prod.dim_int, (self, dim, keepdim), {"dtype": dtype})
    x = unwrap(self).to(np_dtype(out.dtype, "prod"))
    return finish(cltensor.prod(x, dim, keepdim=keepdim), out)


with_out("prod.out", prod)
with_out("prod.int_out", prod_dim)


@aten("linalg_vector_norm")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm (clip_grad_norm_'s total norm among its callers)."""
    out = meta_result(_aten.linalg_vector_norm.default, (self, ord, dim, keepdim),
                      {"dtype": dtype})
    x = unwrap(self)
    if dtype is not None:
        x = x.to(np_dtype(dtype, "linalg_vector_norm"))
    dims = None if dim is None or (not isinstance(dim, int) and not dim) else dim
    return finish(cltensor.linalg.vector_norm(x, float(ord), dims, keepdim), out)


with_out("linalg_vector_norm.out", linalg_vector_norm)


def _norm(name):
    """torch.norm's vector forms (F.normalize's x.norm(p, dim)): a None p is 2."""
    op = getattr(_aten.norm, name)

    def kernel(self, p=2, dim=None, keepdim=False):
        args = (self, p) if dim is None and name == "Scalar" else (self, p, dim, keepdim)
        out = meta_result(op, args, {})
        return finish(cltensor.linalg.vector_norm(unwrap(self), 2.0 if p is None else float(p),
                                                  dim or None, keepdim), out)
    return kernel


aten("norm.Scalar")(_norm("Scalar"))
aten("norm.ScalarOpt_dim")(_norm("ScalarOpt_dim"))
with_out("norm.Scalar_out", _norm("Scalar"))
with_out("norm.out", _norm("ScalarOpt_dim"))


@aten("equal")
def equal(self, other):
    """torch.equal: the same shape and every element equal (NaN is equal to nothing)."""
    check_devices((self, other), {}, _aten.equal.default)
    if tuple(self.shape) != tuple(other.shape):
        return False
    return bool((unwrap(self) == unwrap(other)).all().item())


@aten("nansum")
def nansum(self, dim=None, keepdim=False, *, dtype=None):
    out = meta_result(_aten.nansum.default, (self, dim, keepdim), {"dtype": dtype})
    x = unwrap(self).to(np_dtype(out.dtype, "nansum"))  # summed in the result's dtype
    return finish(cltensor.nansum(x, dim=_dims(dim, self.dim()), keepdim=keepdim), out)


with_out("nansum.out", nansum)


@aten("aminmax")
def aminmax(self, *, dim=None, keepdim=False):
    lo_meta, hi_meta = meta_result(_aten.aminmax.default, (self,),
                                   {"dim": dim, "keepdim": keepdim})
    lo, hi = cltensor.aminmax(unwrap(self), dim=dim, keepdim=keepdim)
    return finish(lo, lo_meta), finish(hi, hi_meta)
