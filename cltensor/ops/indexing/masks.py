"""Masks (masked_fill, masked_select, masked_scatter), nonzero and one_hot."""

import numpy as np

from ... import dtypes as dt
from ...creation import from_numpy, full
from ...program import ctype_of
from ...tensor import ClTensor
from .. import elementwise as ew
from ..elementwise import MAX_DIMS, shape_arg, view_arg
from .common import (_BITS_T, CHUNK_WORK_ITEMS, INDEX_DTYPES, _collapsed, _get_kernel, _launch,
                     _minmax)
from .gather_scatter import _check_source, scatter_

# ---- masks ---------------------------------------------------------------------------------------

def _check_mask(mask, x, op):
    if not isinstance(mask, ClTensor):
        raise TypeError(f"{op}: mask must be a bool tensor, got {type(mask).__name__}")
    if mask.dtype != dt.bool_:
        raise TypeError(f"{op}: mask must be a bool tensor, got {mask.dtype}")
    ew.common_device([x, mask], op)


def _fill_value(x, value, op):
    if isinstance(value, ClTensor):
        if value.ndim:
            raise ValueError(f"{op}: the value must be a number or a 0-d tensor, got a "
                             f"{value.ndim}-d tensor")
        ew.common_device([x, value], op)
    else:
        ew.check_scalar(value, op)
    return value


def masked_fill(x, mask, value):
    """x with `value` where mask (broadcast with x) is True; keeps x's dtype.

    Example:
        y = cltensor.masked_fill(x, x < 0, 0.0)
    """
    _check_mask(mask, x, "masked_fill")
    value = _fill_value(x, value, "masked_fill")
    out = ClTensor.empty_on(ew.broadcast_shapes(x.shape, mask.shape), x.dtype, x.device)
    return ew.launch_elementwise("OP_where", [mask, value, x], out, x.dtype)


def masked_fill_(x, mask, value):
    """In place: x = value where mask (broadcast to x's shape) is True."""
    op = "masked_fill_"
    _check_mask(mask, x, op)
    value = _fill_value(x, value, op)
    _check_mask_fits(mask, x, op)
    ew.check_writable(x, op)
    return ew.launch_elementwise("OP_where", [mask, value, x], x, x.dtype)


def _check_mask_fits(mask, x, op):
    if not ew.broadcasts_to(mask.shape, x.shape):
        raise ValueError(f"{op}: the mask's shape {mask.shape} does not broadcast to the "
                         f"tensor's shape {x.shape}")


def masked_scatter_(x, mask, source):
    """In place: the elements of x where mask (broadcast to x's shape) is True become source's
    first elements, taken in row-major order; source (x's dtype, any shape) needs at least as
    many elements as the mask has True ones.

    Example:
        x.masked_scatter_(x < 0, cltensor.zeros(x.numel()))   # the negative entries become 0
    """
    op = "masked_scatter_"
    _check_mask(mask, x, op)
    if not isinstance(source, ClTensor):
        raise TypeError(f"{op}: source must be a tensor, got {type(source).__name__}")
    _check_source(x, source, op, "source")
    _check_mask_fits(mask, x, op)
    ew.check_writable(x, op)
    n = x.numel()
    if n == 0:
        return x
    if mask.storage is x.storage:
        mask = mask.clone()
    shape, (sm, sd) = _collapsed(x.shape, [ew.broadcast_strides(mask, x.shape), x.strides], op)
    chunk = max(32, -(-n // CHUNK_WORK_ITEMS))
    starts, total = _nonzero_starts(mask._view(shape, sm, mask.offset), chunk)
    if total > source.numel():
        raise ValueError(f"{op}: the mask has {total} True elements but source has only "
                         f"{source.numel()}")
    if total:
        src = source.reshape(-1)
        src = src.clone() if src.storage is x.storage else src.contiguous()
        kernel = _get_kernel(x.device, "masked_scatter_chunks", {"T": _BITS_T[x.dtype.itemsize]})
        _launch(x.device, kernel, starts.numel(), np.int64(n), np.int32(len(shape)),
                shape_arg(shape), mask.storage.buf, view_arg(mask.offset, sm), x.storage.buf,
                view_arg(x.offset, sd), src.storage.buf, np.int64(src.offset), np.int64(chunk),
                starts.storage.buf)
    return x


def masked_scatter(x, mask, source):
    """x (broadcast with mask) with masked_scatter_ applied, as a new tensor.

    Example:
        cltensor.masked_scatter(cltensor.zeros(2, 2), cltensor.tensor([True, False]),
                                cltensor.tensor([1.0, 2.0]))   # [[1, 0], [2, 0]]
    """
    _check_mask(mask, x, "masked_scatter")
    out = ClTensor.empty_on(ew.broadcast_shapes(x.shape, mask.shape), x.dtype, x.device)
    ew.copy_into(out, x)
    return masked_scatter_(out, mask, source)


def nonzero(x, as_tuple=False):
    """The coordinates of x's nonzero elements in row-major order: an int64 tensor (n, x.ndim),
    or with as_tuple one 1-d int64 tensor per dim.

    Example:
        cltensor.nonzero(cltensor.tensor([[0, 1], [2, 0]]))   # [[0, 1], [1, 0]]
    """
    if not isinstance(x, ClTensor):
        raise TypeError(f"nonzero: expected a tensor, got {type(x).__name__}")
    if x.ndim == 0:
        found = int(x.item() != 0)
        if as_tuple:
            return (from_numpy(np.zeros(found, np.int64), device=x.device),)
        return ClTensor.empty_on((found, 0), dt.int64, x.device)
    if x.ndim > MAX_DIMS:
        raise ValueError(f"nonzero: at most {MAX_DIMS} dims are supported, got {x.ndim}")
    n, nd = x.numel(), x.ndim
    chunk = max(32, -(-n // CHUNK_WORK_ITEMS))
    starts, total = _nonzero_starts(x, chunk)
    out = ClTensor.empty_on((nd, total) if as_tuple else (total, nd), dt.int64, x.device)
    if total:
        rows, cols = (1, total) if as_tuple else (nd, 1)
        kernel = _get_kernel(x.device, "write_nonzero", {"NZ_T": ctype_of(x.dtype)})
        _launch(x.device, kernel, starts.numel(), *_nonzero_args(x, chunk), starts.storage.buf,
                out.storage.buf, np.int64(rows), np.int64(cols))
    return tuple(out[k] for k in range(nd)) if as_tuple else out


def _nonzero_args(x, chunk):
    return (np.int64(x.numel()), np.int32(x.ndim), shape_arg(x.shape), x.storage.buf,
            view_arg(x.offset, x.strides), np.int64(chunk))


def _nonzero_starts(x, chunk):
    """Count the nonzeros of each chunk; return where each chunk's rows start, and the total."""
    n = x.numel()
    if n == 0:
        return None, 0
    m = -(-n // chunk)
    counts = ClTensor.empty_on((m,), dt.int64, x.device)
    kernel = _get_kernel(x.device, "count_nonzero_chunks", {"NZ_T": ctype_of(x.dtype)})
    _launch(x.device, kernel, m, *_nonzero_args(x, chunk), counts.storage.buf)
    c = counts.numpy()
    starts = np.concatenate(([0], np.cumsum(c)[:-1])).astype(np.int64)
    return from_numpy(starts, device=x.device), int(c.sum())


def one_hot(x, num_classes=-1):
    """int64 one-hot encoding: out[..., c] = 1 where x[...] == c; num_classes=-1 takes max + 1.

    Example:
        cltensor.one_hot(cltensor.tensor([0, 2]))   # [[1, 0, 0], [0, 0, 1]]
    """
    if not isinstance(x, ClTensor) or x.dtype not in INDEX_DTYPES:
        got = x.dtype if isinstance(x, ClTensor) else type(x).__name__
        raise TypeError(f"one_hot: expected an int64 or int32 tensor of class indices, got {got}")
    if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool) \
            or num_classes < -1:
        raise ValueError(f"one_hot: num_classes must be -1 or a non-negative int, "
                         f"got {num_classes!r}")
    if num_classes == -1 and x.numel() == 0:
        raise ValueError("one_hot: cannot infer the number of classes from an empty tensor")
    if x.numel():
        lo, hi = _minmax(x)
        if lo < 0:
            raise ValueError(f"one_hot: class values must be non-negative, got {lo}")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise ValueError(f"one_hot: class values must be smaller than num_classes "
                             f"({num_classes}), got {hi}")
    out = full(x.shape + (int(num_classes),), 0, dtype=dt.int64, device=x.device)
    return scatter_(out, -1, x.unsqueeze(-1), 1) if x.numel() else out
