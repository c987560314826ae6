"""Masked and indexed writes on the opencl device: masked_fill, index_add, nonzero (torch's
autograd uses them in the backwards of max/min, std, prod, index_select)."""
import torch

import cltensor

from ._backend import aten, np_dtype, unwrap, wrap
from .math_ops import check_devices, finish, meta_result, operand, with_out, write_into

_aten = torch.ops.aten


def _fill_value(value, dtype):
    """masked_fill's value (a number, or a 0-d tensor on either device) as a Python number."""
    if isinstance(value, torch.Tensor):
        value = value.item()
    return operand(value, dtype)


def _masked_fill(overload):
    op = getattr(_aten.masked_fill, overload)

    def functional(self, mask, value):
        out = meta_result(op, (self, mask, value), {})
        dtype = np_dtype(out.dtype, "masked_fill")
        return finish(cltensor.masked_fill(operand(self, dtype), operand(mask, mask_dtype()),
                                           _fill_value(value, dtype)), out)

    def in_place(self, mask, value):
        meta_result(getattr(_aten.masked_fill_, overload), (self, mask, value), {})
        return write_into(self, functional(self, mask, value))
    aten(f"masked_fill.{overload}")(functional)
    aten(f"masked_fill_.{overload}")(in_place)
    with_out(f"masked_fill.{overload}_out", functional)


def mask_dtype():
    return np_dtype(torch.bool, "mask")


_masked_fill("Scalar")
_masked_fill("Tensor")


@aten("index_add")
def index_add(self, dim, index, source, *, alpha=1):
    out = meta_result(_aten.index_add.default, (self, dim, index, source), {"alpha": alpha})
    dtype = np_dtype(out.dtype, "index_add")
    idx = operand(index, np_dtype(index.dtype, "index_add"))
    return finish(cltensor.index_add(operand(self, dtype), dim, idx, operand(source, dtype),
                                     alpha=alpha), out)


@aten("index_add_")
def index_add_(self, dim, index, source, *, alpha=1):
    meta_result(_aten.index_add_.default, (self, dim, index, source), {"alpha": alpha})
    return write_into(self, index_add(self, dim, index, source, alpha=alpha))


with_out("index_add.out", index_add)


@aten("nonzero")
def nonzero(self):
    """The indices of the non-zero elements, one row each (its shape depends on the data, so
    torch's Meta kernel cannot give it)."""
    check_devices((self,), {}, _aten.nonzero.default)
    return wrap(cltensor.nonzero(unwrap(self)).to(np_dtype(torch.int64, "nonzero")))


with_out("nonzero.out", nonzero)


@aten("where")
def where_nonzero(condition):
    """torch.where(condition): the indices of its non-zero elements, one tensor per dim."""
    return list(condition.nonzero().unbind(1))
