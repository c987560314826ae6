"""index_select, gather, scatter, scatter_add and scatter_reduce."""
import math
from dataclasses import replace

import numpy as np

from ... import dtypes as dt
from ...creation import full
from ...tensor import ClTensor, _norm_dim, contiguous_strides
from .. import elementwise as ew
from .common import (MAX, MIN, PROD, SCATTER_REDUCTIONS, SUM, _add_per_lane, _add_per_output,
                     _advanced_plan, _check_index, _normalized, _Plan, _run_indexed)

# scatter_add runs one work-item per output element (rather than per lane) only when the scatter
# dim is at most this long and the lanes are fewer than this (see indexing.cl).
PER_OUTPUT_MAX_SIZE = 16
PER_OUTPUT_MAX_LANES = 4096
# A long index dim with few lanes is cut into segments (summed in a second pass) until about
# SCATTER_ADD_ITEMS work-items run, none adding fewer than SCATTER_ADD_SEGMENT entries, with at
# most SCATTER_ADD_PARTIALS partial sums held.
SCATTER_ADD_ITEMS = 1 << 16
SCATTER_ADD_SEGMENT = 256
SCATTER_ADD_PARTIALS = 1 << 23


# ---- index_select, gather, scatter, scatter_add -------------------------------------------------

def index_select(x, dim, index):
    """The entries of x along `dim` at the positions in a 0-d or 1-d index tensor (a copy).

    Example:
        rows = cltensor.index_select(x, 0, cltensor.tensor([2, 0]))   # rows 2 and 0 of x
    """
    _check_index(index, x, "index_select")
    if index.ndim > 1:
        raise IndexError(f"index_select: the index must be 0-d or 1-d, got a {index.ndim}-d tensor")
    xv = _at_least_1d(x)
    d = _norm_dim(dim, xv.ndim, "index_select")
    plan = _advanced_plan(xv, [(d, index.reshape(-1), d)], False, "index_select")
    out = ClTensor.empty_on(plan.shape, x.dtype, x.device)
    _run_indexed("index_gather", xv, plan, out, out.strides, "index_select")
    return out if x.ndim else out.reshape(index.shape)


def _at_least_1d(t):
    return t if t.ndim else t._view((1,), (1,))


def _check_dim_sizes(t, index, dim, name, op):
    if index.numel() == 0:  # torch checks no shapes against an empty index: nothing moves
        return
    if t.ndim != index.ndim:
        raise ValueError(f"{op}: the index has {index.ndim} dims but {name} has {t.ndim}; "
                         f"they must match")
    for k, (n, m) in enumerate(zip(index.shape, t.shape)):
        if k != dim and n > m:
            raise ValueError(f"{op}: the index's size {n} exceeds the size {m} of {name} "
                             f"in dimension {k}")


def _dim_plan(x, dim, index, src, op):
    """The plan of gather/scatter along `dim`: a walk over the index's shape (0-d seen as 1-d),
    with its checks; returns (plan, dim)."""
    _check_index(index, x, op)
    xv, iv = _at_least_1d(x), _at_least_1d(index)
    d = _norm_dim(dim, xv.ndim, op)
    _check_dim_sizes(xv, iv, d, "the tensor", op)
    if src is not None:
        _check_dim_sizes(_at_least_1d(src), iv, None, "src", op)
    idx = _normalized([iv], iv.shape, [xv.shape[d]], False, [d], op)
    base = list(xv.strides)
    base[d] = 0
    plan = _Plan(iv.shape, xv.offset, base, idx, list(contiguous_strides(iv.shape)),
                 [xv.strides[d]], 0)
    return plan, d


def gather(x, dim, index):
    """Values of x along `dim` picked by index: for dim=1, out[i][j][k] = x[i][index[i][j][k]][k].
    The index has x's number of dims and no larger sizes except along dim; out has its shape.

    Example:
        cltensor.gather(x, 1, cltensor.tensor([[0, 0], [1, 0]]))
    """
    plan, _ = _dim_plan(x, dim, index, None, "gather")
    out = ClTensor.empty_on(index.shape, x.dtype, x.device)
    _run_indexed("index_gather", x, plan, out, _at_least_1d(out).strides, "gather")
    return out


def _scatter_source(src, value, op):
    if (src is None) == (value is None):
        raise TypeError(f"{op}: give exactly one of src (a tensor or a number) and value")
    s = value if src is None else src
    if not isinstance(s, ClTensor):
        ew.check_scalar(s, op)
    return s


def _check_source(x, src, op, name="src"):
    ew.common_device([x, src], op)
    if src.dtype != x.dtype:
        raise TypeError(f"{op}: {name}'s dtype {src.dtype} must match the tensor's dtype "
                        f"{x.dtype}")


def scatter_(x, dim, index, src=None, value=None, *, reduce=None):
    """In place, for dim=0: x[index[i][j]][j] = src[i][j] (or the number `value`). With repeated
    indices one of the values wins, unspecified which (as torch). reduce="add" or "multiply"
    (torch's older API) adds or multiplies them in instead, as scatter_reduce_ with "sum" or
    "prod"."""
    op = "scatter_"
    src = _scatter_source(src, value, op)
    if reduce is not None:
        if reduce not in LEGACY_REDUCTIONS:
            raise ValueError(f"{op}: reduce must be 'add' or 'multiply', got {reduce!r}")
        return _scatter_reduced(x, dim, index, src, LEGACY_REDUCTIONS[reduce], True, op)
    ew.check_writable(x, op)
    if isinstance(src, ClTensor):
        _check_source(x, src, op)
        plan, _ = _dim_plan(x, dim, index, src, op)
        val = _unaliased(src, x)
        strides = val.strides
    else:
        plan, _ = _dim_plan(x, dim, index, None, op)
        val = full((), src, dtype=x.dtype, device=x.device)
        strides = [0] * len(plan.shape)
    _run_indexed("index_scatter", x, plan, val, strides, op)
    return x


LEGACY_REDUCTIONS = {"add": SUM, "multiply": PROD}


def scatter(x, dim, index, src=None, value=None, *, reduce=None):
    """A copy of x with scatter_ applied.

    Example:
        cltensor.scatter(cltensor.zeros(3, 2), 0, cltensor.tensor([[2, 0]]), 1.0)
    """
    return scatter_(x.clone(), dim, index, src, value, reduce=reduce)


def scatter_add_(x, dim, index, src):
    """In place, for dim=0: x[index[i][j]][j] += src[i][j], repeated indices adding up.

    Deterministic (no atomics): each lane's values are added in index order, as a sequential loop
    would, except that a long index dim with little other parallelism is cut into segments whose
    partial sums are then added in order (the same bits on every run).
    """
    if not isinstance(src, ClTensor):
        raise TypeError(f"scatter_add_: src must be a tensor, got {type(src).__name__}")
    return _scatter_reduced(x, dim, index, src, SUM, True, "scatter_add_")


def scatter_add(x, dim, index, src):
    """A copy of x with scatter_add_ applied (deterministic: see scatter_add_).

    Example:
        counts = cltensor.scatter_add(cltensor.zeros(3), 0, labels, cltensor.ones(len(labels)))
    """
    return scatter_add_(x.clone(), dim, index, src)


def scatter_reduce_(x, dim, index, src, reduce, *, include_self=True):
    """In place, for dim=0: x[index[i][j]][j] becomes the reduction of src[i][j] over the i, j
    scattered there, and of its own value when include_self; other elements keep theirs.

    Args:
        reduce: "sum", "prod", "mean", "amax" or "amin" (amax and amin propagate NaN; an
            integer mean rounds down, as torch; bool takes all but "mean").
        include_self: whether x's own values take part where something is scattered.

    Deterministic, as scatter_add_: each element's values are reduced in index order.

    Example:
        x.scatter_reduce_(0, cltensor.tensor([0, 0, 1]), cltensor.tensor([4.0, 2.0, 1.0]),
                          "amax", include_self=False)
    """
    op = "scatter_reduce_"
    if reduce not in SCATTER_REDUCTIONS:
        raise ValueError(f"{op}: reduce must be one of {', '.join(SCATTER_REDUCTIONS)}, "
                         f"got {reduce!r}")
    if not isinstance(src, ClTensor):
        raise TypeError(f"{op}: src must be a tensor, got {type(src).__name__}")
    if reduce == "mean" and x.dtype == dt.bool_:
        raise TypeError(f"{op}: reduce='mean' is not supported for bool tensors")
    red = SCATTER_REDUCTIONS[reduce]
    return _scatter_reduced(x, dim, index, src, red, include_self, op, reduce == "mean")


def scatter_reduce(x, dim, index, src, reduce, *, include_self=True):
    """A copy of x with scatter_reduce_ applied.

    Example:
        cltensor.scatter_reduce(cltensor.zeros(2), 0, labels, values, "mean", include_self=False)
    """
    return scatter_reduce_(x.clone(), dim, index, src, reduce, include_self=include_self)


def _scatter_reduced(x, dim, index, src, red, include_self, op, mean=False):
    """The checks, then x[.., index[.., t, ..], ..] = x's value (when include_self) reduced by
    `red` with the src values (a tensor or a number) scattered there, in increasing t; divided
    by their count when `mean`."""
    ew.check_writable(x, op)
    tensor_src = isinstance(src, ClTensor)
    if tensor_src:
        _check_source(x, src, op)
    plan, d = _dim_plan(x, dim, index, src if tensor_src else None, op)
    if index.numel() == 0:
        return x
    xv = _at_least_1d(x)
    if tensor_src:
        srcv = _unaliased(src, x)
        src_walk = (srcv, srcv.offset, list(srcv.strides))
    else:
        src_walk = (full((), src, dtype=x.dtype, device=x.device), 0, [0] * len(plan.shape))
    if not include_self:
        start = full((), _identity(red, x.dtype), dtype=x.dtype, device=x.device)
        _run_indexed("index_scatter", xv, plan, start, [0] * len(plan.shape), op)
    idx = (plan.idx, 0, list(plan.idx_strides))
    acc = _accumulator(xv, red)
    _scatter_into(list(plan.shape), d, (acc, acc.offset, list(acc.strides)), idx, src_walk, red,
                  op)
    if mean:
        _divide_by_counts(acc, d, plan, idx, include_self, op)
    if acc is not xv:
        ew.copy(acc, xv)  # rounded once, as torch's float32 accumulation
    return x


def _accumulator(xv, red):
    """Where the scatter reduces: xv, or for 16-bit sums and products a float32 copy (the
    kernels read the 16-bit source values themselves), as torch accumulates them in float32."""
    if red in (SUM, PROD) and xv.dtype in dt.HALF_TYPES:
        return ew.copy(xv, ClTensor.empty_on(xv.shape, dt.float32, xv.device))
    return xv


def _identity(red, dtype):
    """The value that the reduction `red` leaves unchanged, in dtype."""
    if red in (SUM, PROD):
        return int(red == PROD)
    if dtype == dt.bool_:
        return red == MIN
    if dt.is_floating(dtype):
        return -math.inf if red == MAX else math.inf
    info = np.iinfo(dtype)
    return int(info.min if red == MAX else info.max)


def _divide_by_counts(xv, d, plan, idx, include_self, op):
    """xv (holding sums) divided where something was scattered by the number of values summed
    there (+ 1 with include_self); integers round down, as torch."""
    counts = full(xv.shape, 1, dtype=xv.dtype, device=xv.device)
    zero = full((), 0, dtype=xv.dtype, device=xv.device)
    if not include_self:  # the counts of the scattered-to elements start from 0
        base = [0 if k == d else st for k, st in enumerate(counts.strides)]
        at = replace(plan, offset=0, base=base, adv_strides=[counts.strides[d]])
        _run_indexed("index_scatter", counts, at, zero, [0] * len(plan.shape), op)
    one = (full((), 1, dtype=xv.dtype, device=xv.device), 0, [0] * len(plan.shape))
    _scatter_into(list(plan.shape), d, (counts, 0, list(counts.strides)), idx, one, SUM, op)
    ew.binary("div" if dt.is_floating(xv.dtype) else "floor_divide", xv, counts, out=xv)


def _scatter_into(shape, d, out, idx, src, red, op):
    """out[.., idx[.., t, ..], ..] op= src[.., t, ..] over `shape` (the index's), op the
    reduction `red`. out, idx and src are (tensor, offset, strides over shape); out's stride at d
    steps along its own dim."""
    size = out[0].shape[d]
    segments = _segments(shape, d, size)
    if segments == 1:
        _scatter_lanes(shape, d, size, out, idx, src, op, red)
    else:
        _scatter_segmented(shape, d, size, out, idx, src, segments, op, red)


def _is_per_output(shape, d, size):
    lanes = math.prod(shape) // max(shape[d], 1)
    return size <= PER_OUTPUT_MAX_SIZE and lanes < PER_OUTPUT_MAX_LANES


def _segments(shape, d, size):
    """Into how many segments to cut each lane's index entries (1: none), so that about
    SCATTER_ADD_ITEMS work-items run, each adding at least SCATTER_ADD_SEGMENT entries."""
    lanes = math.prod(shape) // max(shape[d], 1)
    items = lanes * size if _is_per_output(shape, d, size) else lanes
    p = min(shape[d] // SCATTER_ADD_SEGMENT, SCATTER_ADD_ITEMS // max(items, 1),
            SCATTER_ADD_PARTIALS // max(lanes * size, 1))
    return max(p, 1)


def _scatter_lanes(shape, d, size, out, idx, src, op, red):
    """out[.., idx[.., t, ..], ..] op= src[.., t, ..] over `shape` (the index's), each lane in
    increasing t (see _scatter_into); out's size along d is `size`."""
    steps = (idx[2][d], src[2][d])
    if _is_per_output(shape, d, size):
        full_shape = list(shape)
        full_shape[d] = size
        idx, src = ((t, off, [0 if k == d else s for k, s in enumerate(st)])
                    for t, off, st in (idx, src))
        _add_per_output(full_shape, out, idx, src, [int(k == d) for k in range(len(shape))],
                        shape[d], steps, op, red)
    else:
        lane_shape = list(shape)
        lane_shape[d] = 1
        _add_per_lane(lane_shape, out, idx, src, shape[d], steps, [out[2][d]], op, red)


def _scatter_segmented(shape, d, size, out, idx, src, segments, op, red):
    """_scatter_lanes with each lane's entries cut into `segments` runs of equal length: the
    runs reduce into partials that start from the reduction's identity (a leading dim of
    segments), which are then reduced into out in order, followed by the entries left over."""
    run = shape[d] // segments
    seg_shape = [segments] + shape[:d] + [run] + shape[d + 1:]
    region = shape[:d] + [size] + shape[d + 1:]
    dtype = out[0].dtype
    part = full([segments] + region, _identity(red, dtype), dtype=dtype, device=out[0].device)
    _scatter_lanes(seg_shape, d + 1, size, (part, 0, list(part.strides)),
                   *[(t, off, [run * st[d]] + st) for t, off, st in (idx, src)], op, red)
    zeros = (idx[0], 0, [0] * len(region))  # read but multiplied by a stride of 0
    _add_per_lane(region, out, zeros, (part, 0, list(part.strides[1:])), segments,
                  (0, part.strides[0]), [0], op, red)
    done = segments * run
    if done < shape[d]:
        tail = list(shape)
        tail[d] -= done
        _scatter_lanes(tail, d, size, out,
                       *[(t, off + done * st[d], st) for t, off, st in (idx, src)], op, red)


def _unaliased(src, x):
    """src at least 1-d, copied when it shares x's memory (x is about to be written)."""
    return _at_least_1d(src.clone() if src.storage is x.storage else src)
