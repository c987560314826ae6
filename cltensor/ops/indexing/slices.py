"""index_add, index_copy and index_fill: whole slices along a dim, picked by an index."""

import numpy as np

from ... import dtypes as dt
from ...creation import full
from ...tensor import ClTensor, _norm_dim
from .. import elementwise as ew
from .common import _advanced_plan, _check_index, _run_indexed
from .keys import _accumulate
from .masks import _fill_value
from .gather_scatter import _at_least_1d, _check_source, _unaliased

# ---- index_add, index_copy, index_fill ----------------------------------------------------------

def _slices_plan(x, dim, index, source, op, int64_only, wrap):
    """The checks of index_add_ / index_copy_ / index_fill_ (source None), then the plan of x's
    slices along dim at the positions in index: a walk over x's shape with that dim's size
    replaced by the index's length (source's shape). Returns (plan, x seen as at least 1-d)."""
    _check_index(index, x, op)
    if int64_only and index.dtype != dt.int64:
        raise TypeError(f"{op}: the index must be an int64 tensor, got {index.dtype}")
    if index.ndim > 1:
        raise IndexError(f"{op}: the index must be 0-d or 1-d, got a {index.ndim}-d tensor")
    xv = _at_least_1d(x)
    d = _norm_dim(dim, xv.ndim, op)
    if source is not None:
        _check_slices(x, d, index, source, op)
    ew.check_writable(x, op)
    return _advanced_plan(xv, [(d, index.reshape(-1), d)], wrap, op), xv


def _check_slices(x, d, index, source, op):
    if not isinstance(source, ClTensor):
        raise TypeError(f"{op}: source must be a tensor, got {type(source).__name__}")
    _check_source(x, source, op, "source")
    if source.ndim != x.ndim:
        raise ValueError(f"{op}: source has {source.ndim} dims but the tensor has {x.ndim}; "
                         f"they must match")
    xs, ss = _at_least_1d(x).shape, _at_least_1d(source).shape
    if ss[d] != index.numel():
        raise ValueError(f"{op}: the number of indices ({index.numel()}) must equal source's "
                         f"size ({ss[d]}) in dimension {d}")
    if any(a != b for k, (a, b) in enumerate(zip(xs, ss)) if k != d):
        raise ValueError(f"{op}: source's shape {source.shape} must match the tensor's shape "
                         f"{x.shape} except in dimension {d}")


def index_add_(x, dim, index, source, *, alpha=1):
    """In place: the slices of x along dim at the positions in index (0-d or 1-d, int64 or
    int32, in range) get alpha times source's slices added, in index order, so that repeated
    indices add up deterministically. source has x's shape except len(index) along dim.

    Example:
        x.index_add_(0, cltensor.tensor([0, 2, 0]), cltensor.ones(3, 4))   # row 0 gets 2
    """
    op = "index_add_"
    ew.check_scalar(alpha, op)
    plan, xv = _slices_plan(x, dim, index, source, op, False, False)
    if alpha != 1:  # alpha in x's dtype first, as torch (an int tensor's alpha is truncated)
        alpha = dt.from_storage(dt.to_storage(np.asarray([alpha]), x.dtype), x.dtype)[0]
        source = ew.binary("mul", source, alpha.item()).to(x.dtype)
    _accumulate(xv, plan, _unaliased(source, x), op)
    return x


def index_add(x, dim, index, source, *, alpha=1):
    """A copy of x with index_add_ applied.

    Example:
        totals = cltensor.index_add(cltensor.zeros(3), 0, labels, values)
    """
    return index_add_(x.clone(), dim, index, source, alpha=alpha)


def index_copy_(x, dim, index, source):
    """In place: the slices of x along dim at the positions in index (0-d or 1-d int64, in range)
    become source's slices; with repeated indices one of them wins, unspecified which (as torch)."""
    op = "index_copy_"
    plan, xv = _slices_plan(x, dim, index, source, op, True, False)
    src = _unaliased(source, x)
    _run_indexed("index_scatter", xv, plan, src, src.strides, op)
    return x


def index_copy(x, dim, index, source):
    """A copy of x with index_copy_ applied.

    Example:
        cltensor.index_copy(cltensor.zeros(4, 2), 0, cltensor.tensor([3, 0]), rows)
    """
    return index_copy_(x.clone(), dim, index, source)


def index_fill_(x, dim, index, value):
    """In place: the slices of x along dim at the positions in index (0-d or 1-d int64; negative
    positions count from the end, as torch) become `value` (a number or a 0-d tensor)."""
    op = "index_fill_"
    value = _fill_value(x, value, op)
    plan, xv = _slices_plan(x, dim, index, None, op, True, True)
    if isinstance(value, ClTensor):
        val = value.to(x.dtype, copy=value.storage is x.storage)
    else:
        val = full((), value, dtype=x.dtype, device=x.device)
    _run_indexed("index_scatter", xv, plan, val, [0] * len(plan.shape), op)
    return x


def index_fill(x, dim, index, value):
    """A copy of x with index_fill_ applied.

    Example:
        cltensor.index_fill(x, 1, cltensor.tensor([0, -1]), 0.0)   # first and last columns
    """
    return index_fill_(x.clone(), dim, index, value)
