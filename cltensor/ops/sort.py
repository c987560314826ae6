"""sort, argsort and topk along a dim (kernels: cl_kernels/sort.cl, a bitonic network per row).

The sorted dim is moved last into a contiguous copy of rows; a row whose network fits in local
memory is sorted by one work-group, a longer one in global memory, one launch per stage.
Values keep their original order among equals (the sort is always stable) and NaN sorts as
larger than every number, as in torch.
"""
import numbers

import numpy as np
import pyopencl as cl

from .. import dtypes as dt
from ..program import ctype_of, get_kernel, launch, sizes_1d
from ..tensor import ClTensor, _norm_dim
from .reduce import return_types

__all__ = ["sort", "argsort", "topk"]

KERNEL_FILE = "sort.cl"
SORT_DTYPES = (dt.float32, dt.float64, dt.int32, dt.int64, dt.bool_)
LOCAL_GROUP = 256  # work-items of sort_rows_local (at most; half the row's positions)
LOCAL_BYTES = 32768  # local memory sort_rows_local may take (values and indices of a row)


def _kernel(device, name, dtype, descending):
    defines = {"T": ctype_of(dtype), "DESCENDING": int(bool(descending))}
    if dt.is_floating(dtype):
        defines["IS_FLOAT"] = None
    return get_kernel(device, KERNEL_FILE, name, defines)


def _check(x, op):
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if x.dtype not in SORT_DTYPES:
        raise TypeError(f"{op}: unsupported dtype {x.dtype}")


def _rows_last(x, d):
    """x with dim d moved last, as a contiguous copy (or x itself when already so)."""
    order = [i for i in range(x.ndim) if i != d] + [d]
    return x.permute(*order).contiguous(), order


def _sort_rows(rows_t, descending):
    """(values, int64 indices) of each row of the contiguous tensor rows_t (last dim) sorted."""
    device, dtype = rows_t.device, rows_t.dtype
    n = rows_t.shape[-1] if rows_t.ndim else 1
    rows = rows_t.numel() // max(n, 1)
    vals = ClTensor.empty_on(rows_t.shape, dtype, device)
    idx = ClTensor.empty_on(rows_t.shape, dt.int64, device)
    if rows == 0 or n == 0:
        return vals, idx
    P = 1 << (n - 1).bit_length()
    row_bytes = P * (dtype.itemsize + 8)
    if row_bytes <= min(LOCAL_BYTES, device.local_mem // 2):
        w = min(LOCAL_GROUP, max(P // 2, 1), device.max_work_group)
        kernel = _kernel(device, "sort_rows_local", dtype, descending)
        launch(device, kernel, (rows * w,), (w,), np.int64(n), np.int64(P), rows_t.storage.buf,
               vals.storage.buf, idx.storage.buf, cl.LocalMemory(P * dtype.itemsize),
               cl.LocalMemory(P * 8))
        return vals, idx
    return _sort_global(rows_t, rows, n, P, descending, vals, idx)


def _sort_global(rows_t, rows, n, P, descending, vals, idx):
    device, dtype = rows_t.device, rows_t.dtype
    sv = ClTensor.empty_on((rows * P,), dtype, device)
    si = ClTensor.empty_on((rows * P,), dt.int64, device)
    head = (np.int64(rows), np.int64(n), np.int64(P))
    launch(device, _kernel(device, "sort_init", dtype, descending), *sizes_1d(device, rows * P),
           *head, rows_t.storage.buf, sv.storage.buf, si.storage.buf)
    stage = _kernel(device, "sort_stage", dtype, descending)
    k = 2
    while k <= P:
        j = k // 2
        while j:
            launch(device, stage, *sizes_1d(device, rows * P // 2), *head, np.int64(k),
                   np.int64(j), sv.storage.buf, si.storage.buf)
            j //= 2
        k *= 2
    launch(device, _kernel(device, "sort_final", dtype, descending), *sizes_1d(device, rows * n),
           *head, sv.storage.buf, si.storage.buf, vals.storage.buf, idx.storage.buf)
    return vals, idx


def _restored(t, order):
    """t (dims in `order`) with its dims put back where they were, as a contiguous tensor."""
    inverse = [order.index(i) for i in range(len(order))]
    return t.permute(*inverse).contiguous()


def sort(x, dim=-1, descending=False, stable=False):
    """(values, indices) of x sorted along dim; indices (int64) are positions in x along dim.

    Equal values keep their order (stable, whatever `stable` says); NaN sorts as the largest.

    Example:
        >>> cltensor.sort(cltensor.tensor([3.0, 1.0, 2.0])).indices.tolist()
        [1, 2, 0]
    """
    _check(x, "sort")
    if x.ndim == 0:
        _norm_dim(dim, 0, "sort")
        return return_types.sort(x.clone(), ClTensor.empty_on((), dt.int64, x.device).zero_())
    d = _norm_dim(dim, x.ndim, "sort")
    rows_t, order = _rows_last(x, d)
    vals, idx = _sort_rows(rows_t, descending)
    return return_types.sort(_restored(vals, order), _restored(idx, order))


def argsort(x, dim=-1, descending=False, stable=False):
    """The int64 indices that sort x along dim (sort(...).indices)."""
    return sort(x, dim, descending, stable).indices


def topk(x, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (largest=False: smallest) elements along dim, in
    order (largest first); among equal values the earlier position comes first.

    Example:
        >>> cltensor.topk(cltensor.tensor([1.0, 5.0, 3.0]), 2).indices.tolist()
        [1, 2]
    """
    _check(x, "topk")
    if not isinstance(k, (numbers.Integral, np.integer)) or isinstance(k, bool):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__}")
    if x.ndim == 0:  # as a 1-element row; k = 1 gives 0-d results, k = 0 empty ones
        _norm_dim(dim, 0, "topk")
        values, indices = topk(x.reshape(1), k, 0, largest)
        shape = () if k == 1 else (0,)
        return return_types.topk(values.reshape(shape), indices.reshape(shape))
    d = _norm_dim(dim, x.ndim, "topk")
    if not 0 <= k <= x.shape[d]:
        raise ValueError(f"topk: k ({k}) out of range for a dim of size {x.shape[d]}")
    values, indices = sort(x, d, descending=largest)
    return return_types.topk(values.narrow(d, 0, k).contiguous(),
                             indices.narrow(d, 0, k).contiguous())


TENSOR_METHODS = {"sort": sort, "argsort": argsort, "topk": topk}
