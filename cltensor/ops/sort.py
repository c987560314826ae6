"""sort, argsort and topk along a dim, and searchsorted and bucketize (kernels: cl_kernels/sort.cl,
a bitonic network per row, a selection of the k best per row, a binary search per value).

The sorted dim is moved last into a contiguous copy of rows; a row whose network fits in local
memory is sorted by one work-group, a longer one in global memory, one launch per stage.
Values keep their original order among equals (the sort is always stable) and NaN sorts as
larger than every number, as in torch.
"""
import numbers

import numpy as np
import pyopencl as cl

from .. import dtypes as dt
from ..creation import full
from ..program import ctype_of, get_kernel, launch, sizes_1d
from ..tensor import ClTensor, _norm_dim
from . import elementwise as ew
from .indexing.common import _minmax
from .reduce import return_types

__all__ = ["sort", "argsort", "topk", "searchsorted", "bucketize"]

KERNEL_FILE = "sort.cl"
SORT_DTYPES = dt.DTYPES
LOCAL_GROUP = 256  # work-items of sort_rows_local (at most; half the row's positions)
LOCAL_BYTES = 32768  # local memory sort_rows_local may take (values and indices of a row)
SELECT_MAX_K = 128  # topk selects (topk_select) up to this k; larger k sorts the rows
SELECT_GROUP = 256  # work-items of topk_select (at most)
SELECT_GROUP_CPU = 1  # on CPUs, which run a group's work-items in turn: no merge (measured)
SELECT_SEGMENT = 16384  # elements per work-group of topk_select's first pass (at least)


def _kernel(device, name, dtype, descending, **extra):
    defines = {"T": ctype_of(dtype), "DESCENDING": int(bool(descending)), **extra}
    if dt.is_floating(dtype):
        defines["IS_FLOAT"] = None
    return get_kernel(device, KERNEL_FILE, name, defines)


def _check(x, op):
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if x.dtype not in SORT_DTYPES:
        raise TypeError(f"{op}: unsupported dtype {x.dtype}")


def _at_start(t):
    """t contiguous from the start of its buffer (the kernels read from there): t itself when
    it is so already, else a copy."""
    t = t.contiguous()
    return t.clone() if t.offset else t


def _rows_last(x, d):
    """x with dim d moved last, contiguous from its buffer's start (a copy unless x is so)."""
    order = [i for i in range(x.ndim) if i != d] + [d]
    return _at_start(x.permute(*order)), order


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
    key = dt.compute_dtype(dtype)  # K in sort.cl: 16-bit floats sort as floats
    row_bytes = P * (key.itemsize + 8)
    if row_bytes <= min(LOCAL_BYTES, device.local_mem // 2):
        w = min(LOCAL_GROUP, max(P // 2, 1), device.max_work_group)
        kernel = _kernel(device, "sort_rows_local", dtype, descending)
        launch(device, kernel, (rows * w,), (w,), np.int64(n), np.int64(P), rows_t.storage.buf,
               vals.storage.buf, idx.storage.buf, cl.LocalMemory(P * key.itemsize),
               cl.LocalMemory(P * 8))
        return vals, idx
    return _sort_global(rows_t, rows, n, P, descending, vals, idx)


def _sort_global(rows_t, rows, n, P, descending, vals, idx):
    device, dtype = rows_t.device, rows_t.dtype
    sv = ClTensor.empty_on((rows * P,), dt.compute_dtype(dtype), device)
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
    order (largest first); among equal values the earlier position comes first. k up to
    SELECT_MAX_K is selected without sorting the rows; a larger k sorts them.

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
    if 0 < k <= SELECT_MAX_K:
        rows_t, order = _rows_last(x, d)
        values, indices = _select_rows(rows_t, k, largest)
        return return_types.topk(_restored(values, order), _restored(indices, order))
    values, indices = sort(x, d, descending=largest)
    return return_types.topk(values.narrow(d, 0, k).contiguous(),
                             indices.narrow(d, 0, k).contiguous())


def _select_rows(rows_t, k, largest):
    """(values, int64 indices) of the k best of each row of the contiguous rows_t, in order,
    by topk_select: one pass, or for few long rows a pass over segments of each row and a
    second over the segments' candidates."""
    device, dtype = rows_t.device, rows_t.dtype
    n = rows_t.shape[-1]
    rows = rows_t.numel() // n
    vals = ClTensor.empty_on(rows_t.shape[:-1] + (k,), dtype, device)
    idx = ClTensor.empty_on(vals.shape, dt.int64, device)
    if rows == 0:
        return vals, idx
    kernel = _kernel(device, "topk_select", dtype, largest, TOPK_CAP=1 << (k - 1).bit_length())
    chunks = _select_chunks(device, rows, n)
    if chunks == 1:
        _launch_select(device, kernel, rows_t, None, rows, n, n, 1, k, vals, idx)
        return vals, idx
    cand_v = ClTensor.empty_on((rows * chunks * k,), dtype, device)
    cand_i = ClTensor.empty_on((rows * chunks * k,), dt.int64, device)
    _launch_select(device, kernel, rows_t, None, rows, n, n, chunks, k, cand_v, cand_i)
    _launch_select(device, kernel, cand_v, cand_i, rows, n, chunks * k, 1, k, vals, idx)
    return vals, idx


def _select_chunks(device, rows, n):
    """Segments per row: enough work-groups to fill the device when the rows are few, each of
    at least SELECT_SEGMENT elements."""
    want = -(-2 * device.cl_device.max_compute_units // rows)
    return max(1, min(want, n // SELECT_SEGMENT))


def _launch_select(device, kernel, src, src_idx, rows, n, row_len, chunks, k, vals, idx):
    """topk_select over rows * chunks segments of src (row_len per row, positions in src_idx
    when given); its work-items a power of two the kernel, the device's local memory and the
    segments' length allow."""
    key = dt.compute_dtype(src.dtype).itemsize
    length = -(-row_len // chunks)
    local_cap = min(LOCAL_BYTES, device.local_mem // 2) // (k * (key + 8))
    limit = kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                       device.cl_device)
    most = SELECT_GROUP_CPU if device.is_cpu else SELECT_GROUP
    w = min(most, limit, max(local_cap, 1), max(-(-length // k), 1))
    w = 1 << (w.bit_length() - 1)
    order = src_idx if src_idx is not None else src  # an unread buffer without positions
    launch(device, kernel, (rows * chunks * w,), (w,), np.int64(n), np.int64(row_len),
           np.int64(length), np.int64(chunks), np.int64(k), src.storage.buf, order.storage.buf,
           np.int32(src_idx is not None), vals.storage.buf, idx.storage.buf,
           cl.LocalMemory(w * k * key), cl.LocalMemory(w * k * 8))


# ---- searchsorted, bucketize ---------------------------------------------------------------------

def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value of input would go in sorted_sequence (ascending along its last dim) to
    keep it sorted: the first position whose element is >= the value, or with right=True (or
    side="right") > the value. A 1-d sequence serves values of any shape; an N-d one holds one
    sequence per row, input's leading dims matching its own. sorter: the int64 positions that
    sort an unsorted sequence along its last dim (its argsort). Both sides are compared in their
    promoted dtype. The result is int64 (int32 with out_int32) of input's shape (0-d for a number).

    Example:
        >>> seq = cltensor.tensor([1.0, 2.0, 3.0])
        >>> cltensor.searchsorted(seq, cltensor.tensor([2.0, 9.0])).tolist()
        [1, 3]
    """
    op = "searchsorted"
    _check_sequence(sorted_sequence, op)
    right = _side(right, side, op)
    dtype = dt.result_type(sorted_sequence, input)
    if dtype == dt.bool_:
        raise TypeError(f"{op}: bool sequences and values are not supported")
    values = _search_values(sorted_sequence, input, dtype, op)
    seq = sorted_sequence
    if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
        raise ValueError(f"{op}: the values' leading dims {values.shape[:-1]} must match the "
                         f"sorted sequence's {seq.shape[:-1]} (or the sequence must be 1-d)")
    if out_int32 and seq.shape[-1] >= 2 ** 31 - 1:
        raise ValueError(f"{op}: a sequence of {seq.shape[-1]} elements is too long for "
                         f"out_int32")
    order = _check_sorter(sorter, seq, op)
    out = _search(_at_start(seq.to(dtype)), _at_start(values), order, right)
    return out.to(dt.int32) if out_int32 else out


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The index of the bucket of each value of input, the buckets cut at the ascending 1-d
    `boundaries`: boundaries[i-1] < x <= boundaries[i] (right=True: boundaries[i-1] <= x <
    boundaries[i]). It is searchsorted(boundaries, input, right=right).

    Example:
        >>> edges = cltensor.tensor([1.0, 5.0])
        >>> cltensor.bucketize(cltensor.tensor([0.5, 1.0, 7.0]), edges).tolist()
        [0, 0, 2]
    """
    _check_sequence(boundaries, "bucketize")
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-d, got a {boundaries.ndim}-d tensor")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _check_sequence(seq, op):
    if not isinstance(seq, ClTensor):
        raise TypeError(f"{op}: the sorted sequence must be a tensor, got {type(seq).__name__}")
    if seq.ndim == 0:
        raise ValueError(f"{op}: the sorted sequence must have at least 1 dim, got a 0-d tensor")


def _side(right, side, op):
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise ValueError(f"{op}: side must be 'left' or 'right', got {side!r}")
    if right and side == "left":
        raise ValueError(f"{op}: side='left' contradicts right=True")
    return side == "right"


def _search_values(seq, values, dtype, op):
    """The values as a tensor of the promoted dtype (a number as a 0-d one)."""
    if isinstance(values, ClTensor):
        ew.common_device([seq, values], op)
        return values.to(dtype)
    ew.check_scalar(values, op)
    if seq.ndim != 1:
        raise ValueError(f"{op}: a number can only be searched in a 1-d sequence, got a "
                         f"{seq.ndim}-d one")
    return full((), values, dtype=dtype, device=seq.device)


def _check_sorter(sorter, seq, op):
    """sorter, checked, as int64 rows from the start of a buffer; None when not given."""
    if sorter is None:
        return None
    if not isinstance(sorter, ClTensor) or sorter.dtype != dt.int64:
        got = sorter.dtype if isinstance(sorter, ClTensor) else type(sorter).__name__
        raise TypeError(f"{op}: sorter must be an int64 tensor, got {got}")
    ew.common_device([seq, sorter], op)
    if sorter.shape != seq.shape:
        raise ValueError(f"{op}: sorter's shape {sorter.shape} must equal the sorted "
                         f"sequence's {seq.shape}")
    n = seq.shape[-1]
    if sorter.numel():
        lo, hi = _minmax(sorter)
        if lo < 0 or hi >= n:
            raise IndexError(f"{op}: sorter index {lo if lo < 0 else hi} is out of range for a "
                             f"sequence of {n} elements")
    return _at_start(sorter)


def _search(seq, values, sorter, right):
    """int64 insertion points of `values` in the rows of `seq` (both contiguous from the start
    of their buffers, of one dtype), through `sorter` when not None."""
    out = ClTensor.empty_on(values.shape, dt.int64, seq.device)
    count = values.numel()
    if count == 0:
        return out
    per_row = count if seq.ndim == 1 else values.shape[-1]
    device = seq.device
    order = sorter if sorter is not None else seq  # an unread buffer when there is no sorter
    launch(device, _kernel(device, "search_sorted", seq.dtype, False), *sizes_1d(device, count),
           np.int64(count), np.int64(seq.shape[-1]), np.int64(per_row), seq.storage.buf,
           order.storage.buf, np.int32(sorter is not None), values.storage.buf,
           np.int32(right), out.storage.buf)
    return out


TENSOR_METHODS = {"sort": sort, "argsort": argsort, "topk": topk}
