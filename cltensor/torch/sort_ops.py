"""Sorting, selection, scans and triangles on the opencl device: gather and the scatters (with
their reductions), sort, topk, argmin, max/min along a dim, cumsum/cumprod, flip, roll, tril and
triu, each with its in-place and out= forms where aten has them. torch's Meta kernels check the
arguments and give the results' dtypes and shapes; cltensor's kernels check index values."""
import contextlib

import torch

from ..ops.indexing import gather_scatter
from ..tensor import ClTensor
from ._backend import aten, np_dtype, unwrap
from .math_ops import finish, meta_result, operand, raw, with_out, write_into

_aten = torch.ops.aten
_gather, _scatter, _scatter_add = raw("gather"), raw("scatter"), raw("scatter_add")
_scatter_reduce, _sort, _topk = raw("scatter_reduce"), raw("sort"), raw("topk")
_argmin, _flip, _roll, _tril, _triu = raw("argmin"), raw("flip"), raw("roll"), raw("tril"), raw("triu")


@contextlib.contextmanager
def _range_errors():
    """An index out of range raises RuntimeError, as torch's CPU and CUDA kernels do."""
    try:
        yield
    except IndexError as e:
        raise RuntimeError(str(e)) from e


def _in(x, out, op):
    """Operand x as a ClTensor in the dtype of the Meta result out."""
    return operand(x, np_dtype(out.dtype, op))


_NO_BOOL = {"topk": "topk does not support bool dtypes on CPU",
            "argmin": "argmin(): does not support bool input",
            "scatter_reduce": "\"scatter_reduce_mean\" not implemented for 'Bool'"}


def _no_bool(x, op):
    """torch's CPU kernels of topk, argmin and scatter_reduce's mean take no bool tensors."""
    if x.dtype == torch.bool:
        raise RuntimeError(_NO_BOOL[op])


def _index(index, op):
    return operand(index, np_dtype(index.dtype, op))


def _register(name, overload, functional, out=None, inplace=True, exact_out=False):
    """functional as aten name.overload, with the in-place twin (name_.overload, torch's
    in-place checks on Meta, then the result copied into self) and the out= form `out` (with
    exact_out, its out tensor must have the result's dtype)."""
    full = lambda base: base if overload == "default" else f"{base}.{overload}"
    aten(full(name))(functional)
    if inplace:
        op = getattr(getattr(_aten, name + "_"), overload)

        def in_place(self, *args, **kwargs):
            meta_result(op, (self, *args), kwargs)
            return write_into(self, functional(self, *args, **kwargs))
        aten(full(name + "_"))(in_place)
    if out:
        (_exact_out if exact_out else with_out)(f"{name}.{out}", functional)


def _with_outs(name, functional, out_args):
    """The out= overload `name` of a kernel with two results, written into the tensors passed
    as out_args (torch's out= checks on Meta first)."""
    op = getattr(getattr(_aten, name.split(".")[0]), name.split(".")[1])

    def kernel(*args, **kwargs):
        outs = [kwargs.pop(a) for a in out_args]
        meta_result(op, args, dict(kwargs, **dict(zip(out_args, outs))))
        results = functional(*args, **kwargs)
        return tuple(write_into(o, _same_dtype(o, r)) for o, r in zip(outs, results))
    aten(name)(kernel)


def _same_dtype(out, res):
    """res, once out= tensor `out` is known to have its dtype (torch's CPU kernels check it for
    the ops here without a dtype argument; not all their Meta kernels do)."""
    if out.dtype != res.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {res.dtype}, but got {out.dtype} "
                           f"instead")
    return res


def _exact_out(name, functional):
    """The out= overload `name` of functional, its out tensor of the result's dtype."""
    op = getattr(getattr(_aten, name.split(".")[0]), name.split(".")[1])

    def kernel(*args, out, **kwargs):
        meta_result(op, args, dict(kwargs, out=out))
        return write_into(out, _same_dtype(out, functional(*args, **kwargs)))
    aten(name)(kernel)


def _pair(res, metas):
    """cltensor's (values, indices) as opencl tensors shaped as torch's Meta results."""
    return tuple(finish(r, m) for r, m in zip(res, metas))


# ---- gather and scatter ------------------------------------------------------------------------
def gather(self, dim, index, *, sparse_grad=False):
    out = meta_result(_aten.gather.default, (self, dim, index), {"sparse_grad": sparse_grad})
    with _range_errors():
        return finish(_gather(_in(self, out, "gather"), dim, _index(index, "gather")), out)


def _scatter_kernel(overload):
    """scatter.src/value and their reduce= forms ("add", "multiply")."""
    op = getattr(_aten.scatter, overload)

    def functional(self, dim, index, src, *, reduce=None):
        out = meta_result(op, (self, dim, index, src), {} if reduce is None else {"reduce": reduce})
        x, dtype = _in(self, out, "scatter"), np_dtype(out.dtype, "scatter")
        given = {"src" if isinstance(src, torch.Tensor) else "value": operand(src, dtype)}
        with _range_errors():
            return finish(_scatter(x, dim, _index(index, "scatter"), **given, reduce=reduce), out)
    return functional


def scatter_add(self, dim, index, src):
    out = meta_result(_aten.scatter_add.default, (self, dim, index, src), {})
    dtype = np_dtype(out.dtype, "scatter_add")
    with _range_errors():
        return finish(_scatter_add(operand(self, dtype), dim, _index(index, "scatter_add"),
                                   operand(src, dtype)), out)


def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    out = meta_result(_aten.scatter_reduce.two, (self, dim, index, src, reduce),
                      {"include_self": include_self})
    if reduce == "mean":
        _no_bool(self, "scatter_reduce")
    dtype = np_dtype(out.dtype, "scatter_reduce")
    with _range_errors():
        return finish(_scatter_reduce(operand(self, dtype), dim, _index(index, "scatter_reduce"),
                                      operand(src, dtype), reduce, include_self=include_self), out)


def _in_place_scatter(name, overload, run):
    """name_.overload by cltensor's in-place kernel run(x, dim, index, src, *args, **kwargs)
    on self's own buffer, views included (cltensor checks every index before it writes)."""
    op = getattr(getattr(_aten, name + "_"), overload)

    def kernel(self, dim, index, src, *args, **kwargs):
        meta_result(op, (self, dim, index, src, *args), kwargs)
        x = unwrap(self)
        with _range_errors():
            run(x, dim, _index(index, name), operand(src, x.dtype), *args, **kwargs)
        return self
    aten(f"{name}_" if overload == "default" else f"{name}_.{overload}")(kernel)


def _scatter_(x, dim, index, src, *, reduce=None):
    given = {"src" if isinstance(src, ClTensor) else "value": src}
    gather_scatter.scatter_(x, dim, index, **given, reduce=reduce)


def _scatter_reduce_(x, dim, index, src, reduce, *, include_self=True):
    if reduce == "mean" and x.dtype == np_dtype(torch.bool, "scatter_reduce_"):
        raise RuntimeError(_NO_BOOL["scatter_reduce"])
    gather_scatter.scatter_reduce_(x, dim, index, src, reduce, include_self=include_self)


_register("gather", "default", gather, out="out", inplace=False)
for _overload in ("src", "value", "reduce", "value_reduce"):
    _register("scatter", _overload, _scatter_kernel(_overload), out=f"{_overload}_out",
              inplace=False)
    _in_place_scatter("scatter", _overload, _scatter_)
_register("scatter_add", "default", scatter_add, out="out", inplace=False)
_in_place_scatter("scatter_add", "default", gather_scatter.scatter_add_)
_register("scatter_reduce", "two", scatter_reduce, out="two_out", inplace=False, exact_out=True)
_in_place_scatter("scatter_reduce", "two", _scatter_reduce_)


# ---- sort, topk, argmin, max/min along a dim ---------------------------------------------------
def sort(self, dim=-1, descending=False):
    metas = meta_result(_aten.sort.default, (self, dim, descending), {})
    return _pair(_sort(_in(self, metas[0], "sort"), dim, descending), metas)


def sort_stable(self, *, stable=None, dim=-1, descending=False):
    """cltensor's sort keeps the order of equal values whatever `stable` says (torch's
    unstable sort may give any order of them)."""
    metas = meta_result(_aten.sort.stable, (self,),
                        {"stable": stable, "dim": dim, "descending": descending})
    return _pair(_sort(_in(self, metas[0], "sort"), dim, descending), metas)


def topk(self, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) along dim, always in order; ties give the earlier position."""
    metas = meta_result(_aten.topk.default, (self, k, dim, largest, sorted), {})
    _no_bool(self, "topk")
    return _pair(_topk(_in(self, metas[0], "topk"), k, dim, largest), metas)


def argmin(self, dim=None, keepdim=False):
    if dim is None and self.numel() == 0:  # torch's Meta kernel raises this as RuntimeError
        raise IndexError("argmin(): Expected reduction dim to be specified for input.numel() == 0.")
    out = meta_result(_aten.argmin.default, (self, dim, keepdim), {})
    _no_bool(self, "argmin")
    return finish(_argmin(operand(self, np_dtype(self.dtype, "argmin")), dim, keepdim), out)


def _extreme_dim(name):
    """max.dim / min.dim: (values, indices) along dim, ties giving the first index."""
    op, fn = getattr(_aten, name).dim, raw(name)

    def kernel(self, dim, keepdim=False):
        metas = meta_result(op, (self, dim, keepdim), {})
        return _pair(fn(_in(self, metas[0], name), dim, keepdim), metas)
    aten(f"{name}.dim")(kernel)
    return kernel


aten("sort")(sort)
aten("sort.stable")(sort_stable)
_with_outs("sort.values", sort, ("values", "indices"))
_with_outs("sort.values_stable", sort_stable, ("values", "indices"))
aten("topk")(topk)
_with_outs("topk.values", topk, ("values", "indices"))
aten("argmin")(argmin)
with_out("argmin.out", argmin)
_with_outs("max.dim_max", _extreme_dim("max"), ("max", "max_values"))
_with_outs("min.dim_min", _extreme_dim("min"), ("min", "min_indices"))


# ---- scans, flip, roll, triangles --------------------------------------------------------------
def _scan(name):
    """cumsum / cumprod, computed in the result's dtype (torch's dtype= argument)."""
    op, fn = getattr(_aten, name).default, raw(name)

    def functional(self, dim, *, dtype=None):
        out = meta_result(op, (self, dim), {"dtype": dtype})
        return finish(fn(_in(self, out, name), dim), out)
    return functional


def flip(self, dims):
    out = meta_result(_aten.flip.default, (self, dims), {})
    return finish(_flip(_in(self, out, "flip"), tuple(dims)), out)


def roll(self, shifts, dims=()):
    """Empty dims: roll the flattened tensor."""
    out = meta_result(_aten.roll.default, (self, shifts, dims), {})
    return finish(_roll(_in(self, out, "roll"), tuple(shifts), tuple(dims) or None), out)


def _triangle(name, fn):
    op = getattr(_aten, name).default

    def functional(self, diagonal=0):
        out = meta_result(op, (self, diagonal), {})
        return finish(fn(_in(self, out, name), diagonal), out)
    return functional


_register("cumsum", "default", _scan("cumsum"), out="out")
_register("cumprod", "default", _scan("cumprod"), out="out")
_register("flip", "default", flip, out="out", inplace=False, exact_out=True)
_register("roll", "default", roll, out="out", inplace=False, exact_out=True)
_register("tril", "default", _triangle("tril", _tril), out="out", exact_out=True)
_register("triu", "default", _triangle("triu", _triu), out="out", exact_out=True)
