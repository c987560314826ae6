"""Running extremes, log-cum-sum-exp, searches, counts, order statistics and uniques on the
opencl device: cummax/cummin (their aten helpers), logcumsumexp, searchsorted, bucketize,
histc, bincount, kthvalue, median, nanmedian, mode, the unique family and count_nonzero, with
their out= forms where aten has them. torch's Meta kernels check the arguments where they
exist; the checks torch makes in its CPU kernels (dtypes, data-dependent sizes) are made here
with torch's errors. cltensor's kernels compute the values."""
import contextlib

import torch
from torch._prims_common import canonicalize_dim

from ..creation import full
from ..tensor import ClTensor
from ._backend import aten, np_dtype, unwrap, wrap
from .math_ops import check_devices, finish, meta_result, operand, raw, write_into
from .sort_ops import _in, _pair, _with_outs

_aten = torch.ops.aten
_searchsorted, _histc, _bincount = raw("searchsorted"), raw("histc"), raw("bincount")
_kthvalue, _median, _nanmedian, _mode = raw("kthvalue"), raw("median"), raw("nanmedian"), raw("mode")
_unique, _unique_consecutive = raw("unique"), raw("unique_consecutive")
_count_nonzero, _logcumsumexp = raw("count_nonzero"), raw("logcumsumexp")
_NAMES = {torch.bool: "Bool", torch.int32: "Int", torch.int64: "Long", torch.float16: "Half",
          torch.bfloat16: "BFloat16", torch.float32: "Float", torch.float64: "Double"}
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _refuse(dtype, kernel, allowed):
    """torch's error for a dtype its CPU kernel `kernel` is not built for."""
    if dtype not in allowed:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_NAMES.get(dtype, dtype)}'")


_NO_BOOL = tuple(d for d in _NAMES if d != torch.bool)


@contextlib.contextmanager
def _runtime_errors():
    """cltensor's value errors (data-dependent checks) as the RuntimeError torch raises."""
    try:
        yield
    except (ValueError, IndexError) as e:
        raise RuntimeError(str(e)) from e


def _like(x):
    """A Meta stand-in for a result of x's shape and dtype."""
    return torch.empty(x.shape, dtype=x.dtype, device="meta")


# ---- cummax, cummin, logcumsumexp --------------------------------------------------------------
def _running_extreme(name):
    """cummax / cummin: the running extreme's values and int64 indices along dim; their out=
    forms and aten's helper (which writes into tensors of self's shape) share the kernel."""
    fn = raw(name)

    def functional(self, dim):
        res = fn(unwrap(self), canonicalize_dim(self.dim(), dim))
        return wrap(res.values), wrap(res.indices)

    def helper(self, values, indices, dim):
        check_devices((self, values, indices), {}, getattr(_aten, f"_{name}_helper").default)
        _expect(values, self.dtype)
        _expect(indices, torch.int64)
        for out, res in zip((values, indices), functional(self, dim)):
            write_into(out, res)

    def out_form(self, dim, *, values, indices):
        helper(self, values, indices, dim)
        return values, indices
    aten(name)(functional)
    aten(f"{name}.out")(out_form)
    aten(f"_{name}_helper")(helper)


def logcumsumexp(self, dim):
    _refuse(self.dtype, "logcumsumexp_out_cpu", _FLOATS)
    d = canonicalize_dim(self.dim(), dim)
    return finish(_logcumsumexp(unwrap(self), d), _like(self))


def _expect(out, dtype):
    """torch's CPU check of an out= tensor's dtype."""
    if out.dtype != dtype:
        raise RuntimeError(f"expected scalar_type {_NAMES.get(dtype, dtype)} but found "
                           f"{_NAMES.get(out.dtype, out.dtype)}")


def logcumsumexp_out(self, dim, *, out):
    check_devices((self, out), {}, _aten._logcumsumexp.out)
    _expect(out, self.dtype)
    return write_into(out, logcumsumexp(self, dim))


_running_extreme("cummax")
_running_extreme("cummin")
aten("_logcumsumexp")(logcumsumexp)
aten("_logcumsumexp.out")(logcumsumexp_out)


# ---- searchsorted, bucketize, histc, bincount --------------------------------------------------
def _search(op, sorted_sequence, value, out_int32, right, side, sorter):
    """searchsorted's overloads: Meta checks the shapes and sides; here the dtypes torch's CPU
    kernel takes (compared in the promoted one) and the sorter's."""
    out = meta_result(op, (sorted_sequence, value),
                      {"out_int32": out_int32, "right": right, "side": side, "sorter": sorter})
    if sorter is not None and sorter.dtype != torch.int64:
        raise RuntimeError(f"torch.searchsorted(): sorter must be a tensor of long dtype but got "
                           f"dtype {_NAMES.get(sorter.dtype, sorter.dtype)}")
    common = torch.promote_types(sorted_sequence.dtype, _dtype_of(value))
    _refuse(common, "searchsorted_out_cpu", _NO_BOOL)
    dtype = np_dtype(common, "searchsorted")
    seq = operand(sorted_sequence, dtype)
    values = operand(value, dtype) if isinstance(value, torch.Tensor) else \
        full((), value, dtype=dtype, device=seq.device)
    order = None if sorter is None else operand(sorter, np_dtype(torch.int64, "searchsorted"))
    try:
        res = _searchsorted(seq, values, out_int32=out_int32, right=right, side=side,
                            sorter=order)
    except IndexError as e:
        raise RuntimeError("torch.searchsorted(): sorter index out of range") from e
    return finish(res, out)


def _dtype_of(value):
    """A value's dtype as torch's searches take it: a number as a 0-d tensor of it would be."""
    if isinstance(value, torch.Tensor):
        return value.dtype
    return {bool: torch.bool, int: torch.int64}.get(type(value), torch.float64)


def _searchsorted_kernel(overload):
    op = getattr(_aten.searchsorted, overload)

    def kernel(sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
        return _search(op, sorted_sequence, self, out_int32, right, side, sorter)
    return kernel


def _bucketize(overload):
    """bucketize.Tensor and .Scalar (self, boundaries): searchsorted in 1-d boundaries."""
    op = getattr(_aten.bucketize, overload)

    def kernel(self, boundaries, *, out_int32=False, right=False):
        if boundaries.dim() != 1:
            raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                               f"{boundaries.dim()})")
        meta_result(op, (self, boundaries), {"out_int32": out_int32, "right": right})
        search = getattr(_aten.searchsorted, overload)
        return _search(search, boundaries, self, out_int32, right, None, None)
    return kernel


def _search_out(name, functional):
    """The out= form `name` of a search: out must be int32 with out_int32, else int64."""
    op = getattr(getattr(_aten, name.split(".")[0]), name.split(".")[1])

    def kernel(*args, out, out_int32=False, **kwargs):
        check_devices((*args, out), kwargs, op)
        want = torch.int32 if out_int32 else torch.int64
        if out.dtype != want:
            raise RuntimeError(f"torch.searchsorted(): output tensor's dtype is wrong, it can "
                               f"only be Int(int32) or Long(int64) depending on whether "
                               f"out_int32 flag is True, but we got {out.dtype}")
        return write_into(out, functional(*args, out_int32=out_int32, **kwargs))
    aten(name)(kernel)


def histc(self, bins=100, min=0, max=0):
    out = meta_result(_aten.histc.default, (self, bins, min, max), {})
    _refuse(self.dtype, "histogram_cpu", _FLOATS)
    with _runtime_errors():
        return finish(_histc(unwrap(self), bins, min, max), out)


def histc_out(self, bins=100, min=0, max=0, *, out):
    check_devices((self, out), {}, _aten.histc.out)
    if out.dtype != self.dtype:
        raise RuntimeError(f"torch.histogram: input tensor and hist tensor should have the same "
                           f"dtype, but got input {self.dtype} and hist {out.dtype}")
    return write_into(out, histc(self, bins, min, max))


def bincount(self, weights=None, minlength=0):
    """torch's checks (no Meta kernel: the result's length depends on the values)."""
    _refuse(self.dtype, "bincount_cpu", (torch.int32, torch.int64))
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if self.dim() != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != self.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    w = None if weights is None else operand(weights, np_dtype(weights.dtype, "bincount"))
    try:
        res = _bincount(unwrap(self), w, minlength)
    except ValueError as e:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.") from e
    return wrap(res)


aten("searchsorted.Tensor")(_searchsorted_kernel("Tensor"))
aten("searchsorted.Scalar")(_searchsorted_kernel("Scalar"))
_search_out("searchsorted.Tensor_out", _searchsorted_kernel("Tensor"))
_search_out("searchsorted.Scalar_out", _searchsorted_kernel("Scalar"))
aten("bucketize.Tensor")(_bucketize("Tensor"))
aten("bucketize.Scalar")(_bucketize("Scalar"))
_search_out("bucketize.Tensor_out", _bucketize("Tensor"))
aten("histc")(histc)
aten("histc.out")(histc_out)
aten("bincount")(bincount)


# ---- kthvalue, median, nanmedian, mode ---------------------------------------------------------
def kthvalue(self, k, dim=-1, keepdim=False):
    metas = meta_result(_aten.kthvalue.default, (self, k, dim, keepdim), {})
    _refuse(self.dtype, "kthvalue_cpu", _NO_BOOL)
    return _pair(_kthvalue(_in(self, metas[0], "kthvalue"), k, dim, keepdim), metas)


def _order_statistic(name, fn):
    """median / nanmedian: over every element, and (values, indices) along a dim."""
    packet = getattr(_aten, name)

    def whole(self):
        out = meta_result(packet.default, (self,), {})
        _refuse(self.dtype, "median_cpu", _NO_BOOL)
        with _runtime_errors():
            return finish(fn(unwrap(self)), out)

    def along(self, dim, keepdim=False):
        metas = meta_result(packet.dim, (self, dim, keepdim), {})
        _nonempty(self, dim, name)
        _refuse(self.dtype, "median_out", _NO_BOOL)
        return _pair(fn(unwrap(self), dim, keepdim), metas)
    aten(name)(whole)
    aten(f"{name}.dim")(along)
    _with_outs(f"{name}.dim_values", along, ("values", "indices"))


def _nonempty(x, dim, name):
    """torch's CPU kernels refuse to reduce a dim of size 0."""
    d = canonicalize_dim(x.dim(), dim)
    if x.dim() and x.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def mode(self, dim=-1, keepdim=False):
    metas = meta_result(_aten.mode.default, (self, dim, keepdim), {})
    _nonempty(self, dim, "mode")
    return _pair(_mode(unwrap(self), dim, keepdim), metas)


aten("kthvalue")(kthvalue)
_with_outs("kthvalue.values", kthvalue, ("values", "indices"))
_order_statistic("median", _median)
_order_statistic("nanmedian", _nanmedian)
aten("mode")(mode)
_with_outs("mode.values", mode, ("values", "indices"))


# ---- unique, unique_consecutive, count_nonzero -------------------------------------------------
def _empty_long(x):
    return wrap(ClTensor.empty_on((0,), np_dtype(torch.int64, "unique"), unwrap(x).device))


def _three(x, res, return_inverse, return_counts):
    """aten's (values, inverse, counts) from cltensor's results: the ones not asked for empty."""
    res = list(res) if isinstance(res, tuple) else [res]
    values = res.pop(0)
    inverse = res.pop(0) if return_inverse else None
    counts = res.pop(0) if return_counts else None
    return (wrap(values), *(_empty_long(x) if r is None else wrap(r) for r in (inverse, counts)))


def _flat(self):
    """self, a 0-d tensor as one element (torch's unique gives 1-d values and 0-d inverses)."""
    x = unwrap(self)
    return x.reshape(1) if x.ndim == 0 else x


def _unique2(self, sorted=True, return_inverse=False, return_counts=False):
    """torch's CPU kernels sort the values whatever `sorted` says, as cltensor's unique."""
    values, *rest = _three(self, _unique(_flat(self), True, return_inverse, return_counts),
                           return_inverse, return_counts)
    if return_inverse and self.dim() == 0:
        rest[0] = rest[0].reshape(())
    return (values, *rest)


def unique_dim(self, dim, sorted=True, return_inverse=False, return_counts=False):
    d = canonicalize_dim(self.dim(), dim)
    with _runtime_errors():
        res = _unique(unwrap(self), True, return_inverse, return_counts, d)
    return _three(self, res, return_inverse, return_counts)


def unique_consecutive(self, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        return unique_dim_consecutive(self, dim, return_inverse, return_counts)
    values, *rest = _three(self, _unique_consecutive(_flat(self), return_inverse, return_counts),
                           return_inverse, return_counts)
    if return_inverse:
        rest[0] = rest[0].reshape(self.shape)
    return (values, *rest)


def unique_dim_consecutive(self, dim, return_inverse=False, return_counts=False):
    d = canonicalize_dim(self.dim(), dim)
    with _runtime_errors():
        res = _unique_consecutive(unwrap(self), return_inverse, return_counts, d)
    return _three(self, res, return_inverse, return_counts)


def count_nonzero(self, dim):
    out = meta_result(_aten.count_nonzero.dim_IntList, (self, dim), {})
    dims = tuple(canonicalize_dim(self.dim(), d) for d in dim) or None
    return finish(_count_nonzero(unwrap(self), dims), out)


aten("_unique2")(_unique2)
aten("_unique")(lambda self, sorted=True, return_inverse=False:
                _unique2(self, sorted, return_inverse)[:2])
aten("unique_dim")(unique_dim)
aten("unique_consecutive")(unique_consecutive)
aten("unique_dim_consecutive")(unique_dim_consecutive)
aten("count_nonzero.dim_IntList")(count_nonzero)
