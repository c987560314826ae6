"""Masked and indexed writes on the opencl device: masked_fill, index_add, nonzero (torch's
autograd uses them in the backwards of max/min, std, prod, index_select), index_copy,
masked_scatter, repeat_interleave, isin and the triangles' indices."""
import numpy as np
import torch

import cltensor

from ._backend import aten, cl_device_for, np_dtype, unwrap, wrap
from .math_ops import (check_devices, finish, meta_result, operand, runtime_errors, with_out,
                       write_into)

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


# ---- index_copy, masked_scatter, repeat_interleave, isin, tril/triu_indices ----------------
@aten("index_copy")
def index_copy(self, dim, index, source):
    out = meta_result(_aten.index_copy.default, (self, dim, index, source), {})
    if index.dtype != torch.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{index.dtype}")
    dtype = np_dtype(out.dtype, "index_copy")
    with runtime_errors():
        return finish(cltensor.index_copy(operand(self, dtype), dim,
                                          operand(index, np_dtype(torch.int64, "index")),
                                          operand(source, dtype)), out)


@aten("index_copy_")
def index_copy_(self, dim, index, source):
    meta_result(_aten.index_copy_.default, (self, dim, index, source), {})
    return write_into(self, index_copy(self, dim, index, source))


with_out("index_copy.out", index_copy)


@aten("masked_scatter")
def masked_scatter(self, mask, source):
    out = meta_result(_aten.masked_scatter.default, (self, mask, source), {})
    dtype = np_dtype(out.dtype, "masked_scatter")
    if mask.dtype != torch.bool:
        raise RuntimeError(f"masked_scatter_: expected BoolTensor for mask, got {mask.dtype}")
    m = operand(mask, mask_dtype())
    ones = int(m.expand(*out.shape).sum().item()) if out.numel() else 0  # torch's check
    if ones > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    with runtime_errors():
        return finish(cltensor.masked_scatter(operand(self, dtype), m, operand(source, dtype)),
                      out)


@aten("masked_scatter_")
def masked_scatter_(self, mask, source):
    meta_result(_aten.masked_scatter_.default, (self, mask, source), {})
    return write_into(self, masked_scatter(self, mask, source))


@aten("repeat_interleave.Tensor")
def repeat_interleave(repeats, *, output_size=None):
    """The indices 0, 1, ... each repeated repeats[i] times (the data decide the size)."""
    if repeats.dim() > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats.dtype not in (torch.int32, torch.int64):
        raise RuntimeError("repeats has to be Long or Int tensor")
    r = unwrap(repeats).reshape(-1)
    if r.numel() and int(r.min().item()) < 0:
        raise RuntimeError("repeats can not be negative")
    with runtime_errors():
        res = cltensor.repeat_interleave(r.to(np_dtype(torch.int64, "repeats")))
    if output_size is not None and res.numel() != output_size:
        raise RuntimeError(f"allocated size does not match required size: output_size "
                           f"{output_size}, but the repeats sum to {res.numel()}")
    return wrap(res.to(np_dtype(repeats.dtype, "repeats")))


def _isin(elements, test, invert):
    """Whether each element is among test's values (NaN never is), as a bool ClTensor."""
    dtype = np_dtype(torch.result_type(elements, test), "isin")
    e = operand(elements, dtype)
    t = operand(test, dtype).reshape(-1)
    if t.numel() == 0:
        hit = cltensor.zeros(e.shape, dtype=mask_dtype(), device=e.device)
    else:
        t = cltensor.sort(t).values
        pos = cltensor.searchsorted(t, e.reshape(-1)).clamp(max=t.numel() - 1)
        hit = (t[pos] == e.reshape(-1)).reshape(*e.shape)
    return ~hit if invert else hit


@aten("isin.Tensor_Tensor")
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    out = meta_result(_aten.isin.Tensor_Tensor, (elements, test_elements),
                      {"assume_unique": assume_unique, "invert": invert})
    return finish(_isin(elements, test_elements, invert), out)


@aten("isin.Tensor_Scalar")
def isin_scalar(elements, test_element, *, assume_unique=False, invert=False):
    out = meta_result(_aten.isin.Tensor_Scalar, (elements, test_element),
                      {"assume_unique": assume_unique, "invert": invert})
    return finish(_isin(elements, torch.tensor([test_element]), invert), out)


@aten("isin.Scalar_Tensor")
def isin_scalar_tensor(element, test_elements, *, assume_unique=False, invert=False):
    out = meta_result(_aten.isin.Scalar_Tensor, (element, test_elements),
                      {"assume_unique": assume_unique, "invert": invert})
    hit = _isin(torch.tensor(element, dtype=torch.result_type(element, test_elements)),
                test_elements, invert)
    return finish(hit, out)


with_out("isin.Tensor_Tensor_out", isin)
with_out("isin.Tensor_Scalar_out", isin_scalar)
with_out("isin.Scalar_Tensor_out", isin_scalar_tensor)


def _triangle_indices(name, lower):
    def kernel(row, col, offset=0, *, dtype=None, layout=None, device=None, pin_memory=None):
        if row < 0 or col < 0:
            raise RuntimeError(f"{name}: row and col must be non-negative, got {row} and {col}")
        rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
        values = np.stack([rows, cols]).astype(np.int64).reshape(2, -1)
        want = np_dtype(torch.int64 if dtype is None else dtype, name)
        return wrap(cltensor.tensor(values, dtype=want, device=cl_device_for(device, name)))
    aten(name)(kernel)


_triangle_indices("tril_indices", True)
_triangle_indices("triu_indices", False)
