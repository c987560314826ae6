"""Lookups, running extremes, counts and quantiles with torch's names and semantics: take,
take_along_dim, argwhere, aminmax, cummax, cummin, bincount, histc, histogram, quantile and
nanquantile.

They are composed of tensor methods, so they are differentiable through the ops they use where
torch's are: take through indexing, take_along_dim through gather, aminmax through amin and
amax, cummax and cummin through a gather at their indices, quantile through sort, gather and
lerp (bincount, histc and histogram count, as torch's, without gradients).
cltensor/__init__.py and cltensor/composed_methods.py bind them as functions and methods.
Kernels of their own: the running extremes' positions (cl_kernels/scan.cl, cumext_*).
"""
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..creation import full, zeros
from ..ops import elementwise as ew
from ..ops.indexing.common import _minmax
from ..ops.pointwise import where
from ..ops.ranges import linspace
from ..ops.reduce import _launch_lines, _scan_blocks, return_types
from ..ops.sort import _restored, _rows_last, searchsorted
from ..program import ctype_of, get_kernel
from ..tensor import ClTensor, _norm_dim
from .composed import _check_tensor, lerp

__all__ = ["take", "take_along_dim", "argwhere", "aminmax", "cummax", "cummin", "bincount",
           "histc", "histogram", "quantile", "nanquantile"]

SCAN_FILE = "scan.cl"
INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _check_long(index, name, op):
    if not isinstance(index, ClTensor) or index.dtype != dt.int64:
        got = index.dtype if isinstance(index, ClTensor) else type(index).__name__
        raise TypeError(f"{op}: {name} must be an int64 tensor, got {got}")


# ---- take, take_along_dim, argwhere --------------------------------------------------------------

def take(input, index):
    """The elements of input, seen as 1-d in row-major order, at the positions in index (int64,
    any shape; negative positions count from the end), in index's shape.

    Example:
        >>> cltensor.take(cltensor.tensor([[1, 2], [3, 4]]), cltensor.tensor([0, -1])).tolist()
        [1, 4]
    """
    _check_tensor(input, "input", "take")
    _check_long(index, "index", "take")
    return input.reshape(-1)[index.reshape(-1)].reshape(index.shape)


def take_along_dim(input, indices, dim=None):
    """gather along dim with input and indices (int64, input's number of dims) broadcast against
    each other in the other dims; negative indices count from the end of dim. dim=None: both
    flattened (negative indices refused there, as torch).

    Example:
        >>> x = cltensor.tensor([[10, 30, 20], [60, 40, 50]])
        >>> cltensor.take_along_dim(x, x.argmax(1, keepdim=True), 1).tolist()
        [[30], [60]]
    """
    op = "take_along_dim"
    _check_tensor(input, "input", op)
    _check_long(indices, "indices", op)
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim or input.ndim == 0:
        raise ValueError(f"{op}: input ({input.ndim}-d) and indices ({indices.ndim}-d) must have "
                         f"the same number of dims, at least 1, to take along a dim")
    d = _norm_dim(dim, input.ndim, op)
    shape = list(input.shape)
    shape[d] = indices.shape[d]
    shape = list(ew.broadcast_shapes(shape, indices.shape))
    idx = indices.expand(shape)
    n = shape[d] = input.shape[d]
    try:
        return input.expand(shape).gather(d, where(idx < 0, idx + n, idx))
    except IndexError:
        v = indices.numpy().ravel()
        raise IndexError(f"{op}: index {v[(v < -n) | (v >= n)][0]} is out of bounds for "
                         f"dimension {d} with size {n}") from None


def argwhere(input):
    """The coordinates of input's nonzero elements in row-major order, one row each: an int64
    tensor (count, input.ndim), as nonzero(input).

    Example:
        >>> cltensor.argwhere(cltensor.tensor([[0, 1], [2, 0]])).tolist()
        [[0, 1], [1, 0]]
    """
    _check_tensor(input, "input", "argwhere")
    return input.nonzero()


# ---- aminmax, cummax, cummin ---------------------------------------------------------------------

def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) of input, over everything (dim=None) or along one dim, as a named tuple; NaN
    propagates. The gradient of each is shared among tied extremes, as amin's and amax's.

    Example:
        >>> cltensor.aminmax(cltensor.tensor([[1, 5], [3, 2]]), dim=1).max.tolist()
        [5, 3]
    """
    op = "aminmax"
    _check_tensor(input, "input", op)
    if dim is None:
        if input.numel() == 0:
            raise ValueError(f"{op}: cannot reduce an empty tensor (shape {input.shape}), "
                             f"which has no min or max")
        dims = ()
    else:
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
            raise TypeError(f"{op}: dim must be an int or None, got {dim!r}")
        dims = _norm_dim(dim, input.ndim, op)
        if input.ndim and input.shape[dims] == 0:
            raise IndexError(f"{op}: the reduced dim {dims} has size 0")
    return return_types.aminmax(input.amin(dims, keepdim), input.amax(dims, keepdim))


def cummax(input, dim):
    """(values, indices) of the running maximum along dim: values[..., k, ...] is the largest of
    the first k + 1 and indices (int64) where it is, the last of equal values; a NaN, once met,
    is the maximum (at the last NaN so far), as torch. Each value's gradient goes to its index.

    Example:
        >>> cltensor.cummax(cltensor.tensor([1.0, 3.0, 2.0, 3.0]), 0).indices.tolist()
        [0, 1, 1, 3]
    """
    return _running_extreme(input, dim, False, "cummax")


def cummin(input, dim):
    """(values, indices) of the running minimum along dim, as cummax.

    Example:
        >>> cltensor.cummin(cltensor.tensor([3.0, 1.0, 2.0, 1.0]), 0).indices.tolist()
        [0, 1, 1, 3]
    """
    return _running_extreme(input, dim, True, "cummin")


def _running_extreme(x, dim, is_min, op):
    """The indices from the scan kernel; the values gathered from x at them (differentiable)."""
    _check_tensor(x, "input", op)
    xv = x.reshape(1) if x.ndim == 0 else x
    d = _norm_dim(dim, xv.ndim, op)
    indices = _running_extreme_indices(xv.detach(), d, is_min)
    values = xv.gather(d, indices)
    if x.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return getattr(return_types, op)(values, indices)


def _cumext_kernel(device, name, dtype):
    defines = {"EXT_T": ctype_of(dtype)}
    if dt.is_floating(dtype):
        defines["IS_FLOAT"] = None
    return get_kernel(device, SCAN_FILE, name, defines)


def _running_extreme_indices(x, d, is_min):
    """int64 positions along dim d of x's running extremes (cumext_* in scan.cl)."""
    rows, order = _rows_last(x, d)
    out = ClTensor.empty_on(rows.shape, dt.int64, x.device)
    n = x.shape[d]
    if out.numel():
        _launch_cumext(rows, out.numel() // n, n, is_min, out)
    return _restored(out, order)


def _launch_cumext(rows, nrows, n, is_min, out):
    device, dtype = rows.device, rows.dtype
    block = -(-n // _scan_blocks(device, nrows, n))
    blocks = -(-n // block)  # NOTE: recounted so that no block is empty
    head = (np.int64(nrows), np.int64(n), np.int64(blocks), np.int64(block), np.int32(is_min))
    carry = nrows * blocks if blocks > 1 else 1  # (unread with one block)
    cv = ClTensor.empty_on((carry,), dt.compute_dtype(dtype), device)  # REG(EXT_T) in scan.cl
    ci = ClTensor.empty_on((carry,), dt.int64, device)
    if blocks > 1:
        _launch_lines(device, _cumext_kernel(device, "cumext_totals", dtype), nrows * blocks,
                      rows.storage.buf, *head, cv.storage.buf, ci.storage.buf)
        _launch_lines(device, _cumext_kernel(device, "cumext_carry", dtype), nrows,
                      np.int64(nrows), np.int64(blocks), np.int32(is_min), cv.storage.buf,
                      ci.storage.buf)
    _launch_lines(device, _cumext_kernel(device, "cumext_blocks", dtype), nrows * blocks,
                  rows.storage.buf, *head, cv.storage.buf, ci.storage.buf, out.storage.buf)


# ---- bincount, histc -----------------------------------------------------------------------------

def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, 2, ... occurs in input (1-d, int64 or int32, non-negative), as
    int64; with weights (1-d, input's length) the sum of the weights at each value's
    occurrences instead, float32 for float32 weights and float64 for any other dtype (torch's
    rule). The result has max(input) + 1 bins, at least minlength.

    Example:
        >>> cltensor.bincount(cltensor.tensor([1, 1, 3])).tolist()
        [0, 2, 0, 1]
    """
    op = "bincount"
    if not isinstance(input, ClTensor) or input.dtype not in (dt.int32, dt.int64):
        got = input.dtype if isinstance(input, ClTensor) else type(input).__name__
        raise TypeError(f"{op}: input must be an int64 or int32 tensor, got {got}")
    if input.ndim != 1:
        raise ValueError(f"{op}: input must be 1-d, got a {input.ndim}-d tensor")
    if not isinstance(minlength, numbers.Integral) or isinstance(minlength, bool) or minlength < 0:
        raise ValueError(f"{op}: minlength must be a non-negative int, got {minlength!r}")
    src = _bincount_weights(input, weights, op)
    bins = int(minlength)
    if input.numel():
        lo, hi = _minmax(input)
        if lo < 0:
            raise ValueError(f"{op}: values must be non-negative, got {lo}")
        bins = max(bins, hi + 1)
    return zeros(bins, dtype=src.dtype, device=input.device).scatter_add_(0, input, src)


def _bincount_weights(input, weights, op):
    """What each occurrence adds: ones (int64), or the weights in the result's dtype."""
    if weights is None:
        return full(input.shape, 1, dtype=dt.int64, device=input.device)
    if not isinstance(weights, ClTensor):
        raise TypeError(f"{op}: weights must be a tensor, got {type(weights).__name__}")
    ew.common_device([input, weights], op)
    if weights.shape != input.shape:
        raise ValueError(f"{op}: weights (shape {weights.shape}) must be 1-d and as long as "
                         f"input (shape {input.shape})")
    return weights.detach().to(dt.float32 if weights.dtype == dt.float32 else dt.float64)


def histc(input, bins=100, min=0, max=0):
    """A histogram of input's elements: counts in `bins` equal bins from min to max, of input's
    (floating) dtype. Elements outside [min, max] and NaN are not counted; max falls in the last
    bin. min == max (the default) takes the data's min and max (each moved out by 1 when they
    are equal), as torch.

    Example:
        >>> cltensor.histc(cltensor.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
        [0.0, 2.0, 1.0, 0.0]
    """
    op = "histc"
    _check_tensor(input, "input", op)
    if not dt.is_floating(input.dtype):
        raise TypeError(f"{op}: the input must be float16, bfloat16, float32 or float64, "
                        f"got {input.dtype}")
    if not isinstance(bins, numbers.Integral) or isinstance(bins, bool):
        raise TypeError(f"{op}: bins must be an int, got {bins!r}")
    if bins <= 0:
        raise ValueError(f"{op}: bins must be positive, got {bins}")
    for name, v in (("min", min), ("max", max)):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"{op}: {name} must be a number, got {type(v).__name__}")
    x = input.detach().reshape(-1)
    lo, hi = _histc_range(x, float(min), float(max), op)
    # NOTE: the bin of each element as torch computes it, in the input's dtype:
    # (x - lo) * bins / (hi - lo), truncated, with max moved into the last bin
    left, right = _rounded(lo, x.dtype), _rounded(hi, x.dtype)
    width = _rounded(right - left, x.dtype).item()
    pos = ((x - left.item()) * float(bins) / width).long().clamp(max=bins - 1)
    pos = where((x >= left.item()) & (x <= right.item()), pos, bins)
    counts = zeros(bins + 1, dtype=x.dtype, device=x.device)
    counts.scatter_add_(0, pos, full(x.shape, 1, dtype=x.dtype, device=x.device))
    return counts[:bins]


def _rounded(v, dtype):
    """v rounded to dtype, as a numpy scalar (bfloat16's as a float32)."""
    return dt.from_storage(dt.to_storage(np.asarray([v]), dtype), dtype)[0]


def _histc_range(x, lo, hi, op):
    if lo == hi and x.numel():
        lo, hi = x.amin().item(), x.amax().item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{op}: the range [{lo}, {hi}] is not finite")
    if lo > hi:
        raise ValueError(f"{op}: max ({hi}) must be larger than min ({lo})")
    return lo, hi


def histogram(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the histogram of input's elements (floating) over `bins` equal bins
    from range's min to max (by default the data's, widened by 0.5 each way when equal), or
    between the increasing edges of a 1-d bins tensor. Each bin holds its left edge, the last
    its right one too; elements outside and NaN are not counted. weight (input's shape and
    dtype): each element's weight instead of 1; density: hist divided by its sum times the bin
    widths.

    Example:
        >>> cltensor.histogram(cltensor.tensor([1.0, 2.0, 1.0, 4.0]), 3).hist.tolist()
        [2.0, 1.0, 1.0]
    """
    op = "histogram"
    _check_tensor(input, "input", op)
    if not dt.is_floating(input.dtype):
        raise TypeError(f"{op}: the input must be float32 or float64, got {input.dtype}")
    edges = _histogram_edges(input, bins, range, op)
    x, n = input.detach().reshape(-1), edges.numel() - 1
    inside = (x >= edges[0]) & (x <= edges[-1])
    pos = where(inside, (searchsorted(edges, x, right=True) - 1).clamp(max=n - 1), n)
    counts = zeros(n + 1, dtype=x.dtype, device=x.device)
    hist = counts.scatter_add_(0, pos, _histogram_weights(x, weight, op))[:n]
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return return_types.histogram(hist, edges)


def _histogram_edges(x, bins, range, op):
    if isinstance(bins, ClTensor):
        if bins.ndim != 1 or bins.numel() < 2 or bins.dtype != x.dtype:
            raise ValueError(f"{op}: bins must be a 1-d tensor of at least 2 edges of the "
                             f"input's dtype {x.dtype}, got shape {bins.shape} ({bins.dtype})")
        return bins.detach()
    if not isinstance(bins, numbers.Integral) or isinstance(bins, bool) or bins <= 0:
        raise ValueError(f"{op}: bins must be a positive int or a tensor of edges, got {bins!r}")
    if range is not None:
        lo, hi = (float(v) for v in range)
    elif x.numel():
        lo, hi = (t.item() for t in aminmax(x.detach()))
    else:
        lo, hi = 0.0, 1.0
    if lo > hi or not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"{op}: the range [{lo}, {hi}] must be finite with min <= max")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return linspace(lo, hi, bins + 1, dtype=x.dtype, device=x.device)


def _histogram_weights(x, weight, op):
    if weight is None:
        return full(x.shape, 1, dtype=x.dtype, device=x.device)
    if not isinstance(weight, ClTensor) or weight.numel() != x.numel() or \
            weight.dtype != x.dtype:
        raise ValueError(f"{op}: weight must be a tensor of the input's size and dtype")
    return weight.detach().reshape(-1)


# ---- quantile, nanquantile -----------------------------------------------------------------------

def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles of input, over everything (dim=None) or along dim. q is a number in
    [0, 1] or a 0-d or 1-d tensor of them (of input's dtype; a 1-d q's quantiles come first in
    the result). Between two sorted neighbours the quantile is `interpolation`: "linear",
    "lower", "higher", "midpoint" or "nearest" (ties to even). A NaN makes its row's quantiles
    NaN. Floating inputs only; differentiable through sort, gather and lerp.

    Example:
        >>> cltensor.quantile(cltensor.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).item()
        2.5
    """
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaN: each row's quantiles among its other values (NaN when all are NaN).

    Example:
        >>> cltensor.nanquantile(cltensor.tensor([1.0, float("nan"), 3.0]), 0.5).item()
        2.0
    """
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


def _quantile(x, q, dim, keepdim, interpolation, ignore_nan, op):
    _check_tensor(x, "input", op)
    if not dt.is_floating(x.dtype):
        raise TypeError(f"{op}: the input must be float32 or float64, got {x.dtype}")
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"{op}: interpolation must be one of linear, lower, higher, midpoint "
                         f"or nearest, got {interpolation!r}")
    qs, scalar_q = _quantile_q(x, q, op)
    if x.numel() == 0:
        raise ValueError(f"{op}: the input must be non-empty, got shape {x.shape}")
    s, kept = _sorted_rows(x, dim, keepdim, op)  # s: (*rest, n)
    ranks = _ranks(s, qs, ignore_nan)  # (*rest, len(q))
    if interpolation in ("lower", "higher", "nearest"):
        ranks = {"lower": ranks.floor, "higher": ranks.ceil, "nearest": ranks.round}[
            interpolation]()
    below = ranks.long()
    values = s.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weight = ranks - below if interpolation == "linear" else 0.5
        values = lerp(values, s.gather(-1, ranks.ceil().long()), weight)
    if scalar_q:
        return values.reshape(kept)
    last = values.ndim - 1
    return values.permute(last, *range(last)).reshape((qs.numel(),) + kept).contiguous()


def _quantile_q(x, q, op):
    """q as a 1-d tensor of x's dtype, and whether it was a number or a 0-d tensor."""
    if isinstance(q, ClTensor):
        ew.common_device([x, q], op)
        if q.dtype != x.dtype:
            raise TypeError(f"{op}: q's dtype {q.dtype} must match the input's {x.dtype}")
        if q.ndim > 1:
            raise ValueError(f"{op}: q must be a number or a 0-d or 1-d tensor, got a "
                             f"{q.ndim}-d tensor")
        if q.numel() and not bool(((q >= 0) & (q <= 1)).all()):
            raise ValueError(f"{op}: q values must be in [0, 1], got {q.tolist()}")
        return q.reshape(-1), q.ndim == 0
    if not isinstance(q, numbers.Real):
        raise TypeError(f"{op}: q must be a number or a tensor, got {type(q).__name__}")
    if not 0 <= q <= 1:
        raise ValueError(f"{op}: q must be in [0, 1], got {q}")
    return full((1,), q, dtype=x.dtype, device=x.device), True


def _sorted_rows(x, dim, keepdim, op):
    """x sorted along dim moved last (all of x flattened for dim=None), and the shape of the
    result for one q."""
    if dim is None:
        return x.reshape(-1).sort().values, (1,) * x.ndim if keepdim else ()
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int or None, got {dim!r}")
    xv = x.reshape(1) if x.ndim == 0 else x
    d = _norm_dim(dim, xv.ndim, op)
    kept = list(xv.shape)
    if keepdim:
        kept[d] = 1
    else:
        del kept[d]
    rest = [i for i in range(xv.ndim) if i != d]
    return xv.permute(*rest, d).sort(-1).values, tuple(kept) if x.ndim else ()


def _ranks(s, qs, ignore_nan):
    """The fractional position in each sorted row of each q: torch's, so that its NaN rules
    hold (quantile: a row with a NaN takes its last position, where NaN sorts; nanquantile:
    positions among the row's non-NaN values, the first when all are NaN)."""
    if ignore_nan:
        ranks = qs * ((~s.isnan()).sum(-1, keepdim=True) - 1)
        return ranks.masked_fill(ranks < 0, 0)
    n = s.shape[-1]
    return (qs * (n - 1)).masked_fill(s.isnan().any(-1, keepdim=True), n - 1)


TENSOR_METHODS = {f.__name__: f for f in (take, take_along_dim, argwhere, aminmax, cummax,
                                          cummin, bincount, histc, histogram, quantile,
                                          nanquantile)}
