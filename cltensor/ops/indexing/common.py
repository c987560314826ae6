"""Indexing's shared parts: kernel launches, index checks and the gather/scatter plans."""
import math
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from ... import dtypes as dt
from ...program import ctype_of, get_kernel, launch, sizes_1d
from ...tensor import ClTensor, contiguous_strides
from .. import elementwise as ew
from ..elementwise import MAX_DIMS, shape_arg, view_arg

KERNEL_FILE = "indexing.cl"
INDEX_DTYPES = (dt.int32, dt.int64)
_BITS_T = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}  # gathers and scatters move bits, not values
# the reductions of the scatter_add kernels (their run-time argument `red`: see indexing.cl)
SUM, PROD, MAX, MIN = range(4)
SCATTER_REDUCTIONS = {"sum": SUM, "prod": PROD, "mean": SUM, "amax": MAX, "amin": MIN}
CHUNK_WORK_ITEMS = 65536  # nonzero and one_hot walk chunks of >= 32 elements, about this many


# ---- kernels and launches -----------------------------------------------------------------------

def _get_kernel(device, name, defines):
    return get_kernel(device, KERNEL_FILE, name, defines)



def _launch(device, kernel, n, *args):
    """n work-items (n > 0), in work-groups of up to 256 on GPUs; kernels ignore the extra ones."""
    launch(device, kernel, *sizes_1d(device, n), *args)




def _collapsed(shape, stride_lists, op):
    shape, strides = ew.collapse(shape, [list(s) for s in stride_lists])
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{op}: at most {MAX_DIMS} non-mergeable dims are supported, "
                         f"got {len(shape)}")
    return shape, strides


# ---- index tensors: checks and normalization ----------------------------------------------------

def _check_index(index, x, op):
    if not isinstance(index, ClTensor):
        raise TypeError(f"{op}: index must be a tensor, got {type(index).__name__}")
    if index.dtype not in INDEX_DTYPES:
        raise TypeError(f"{op}: index tensors must be int64 or int32, got {index.dtype}")
    ew.common_device([x, index], op)


def _normalized(indices, shape, sizes, wrap, dims, op):
    """The index tensors broadcast to `shape` as one contiguous int64 tensor (K, *shape), negative
    values wrapped when `wrap`; IndexError naming the first bad index when any is out of range."""
    device = indices[0].device
    out = ClTensor.empty_on((len(indices),) + tuple(shape), dt.int64, device)
    nb = math.prod(shape)
    if nb == 0:
        return out
    err = ClTensor.empty_on((1,), dt.int32, device)
    device.enqueue(cl.enqueue_fill_buffer, err.storage.buf, np.int32(0), 0, 4)
    for k, (t, size) in enumerate(zip(indices, sizes)):
        sh, (_, st) = _collapsed(shape, [contiguous_strides(shape),
                                         ew.broadcast_strides(t, shape)], op)
        kernel = _get_kernel(device, "normalize_index", {"IDX_T": ctype_of(t.dtype)})
        _launch(device, kernel, nb, np.int64(nb), np.int32(len(sh)), shape_arg(sh),
                t.storage.buf, view_arg(t.offset, st), out.storage.buf, np.int64(k * nb),
                np.int64(size), np.int32(wrap), err.storage.buf)
    flag = np.zeros(1, np.int32)
    device.enqueue(cl.enqueue_copy, flag, err.storage.buf, is_blocking=False).wait()
    if flag[0]:
        raise _range_error(indices, sizes, wrap, dims, op)
    return out


def _range_error(indices, sizes, wrap, dims, op):
    for t, size, d in zip(indices, sizes, dims):
        v = t.numpy().ravel()
        bad = v[(v >= size) | (v < (-size if wrap else 0))]
        if bad.size:
            return IndexError(f"{op}: index {bad[0]} is out of bounds for dimension {d} "
                              f"with size {size}")
    return IndexError(f"{op}: an index is out of range")


def _minmax(x):
    """(min, max) of an integer tensor with at least one element."""
    n = x.numel()
    chunk = max(32, -(-n // CHUNK_WORK_ITEMS))
    m = -(-n // chunk)
    shape, (st,) = _collapsed(x.shape, [x.strides], "minmax")
    out = ClTensor.empty_on((m, 2), dt.int64, x.device)
    kernel = _get_kernel(x.device, "chunk_minmax", {"IDX_T": ctype_of(x.dtype)})
    _launch(x.device, kernel, m, np.int64(n), np.int32(len(shape)), shape_arg(shape),
            x.storage.buf, view_arg(x.offset, st), np.int64(chunk), out.storage.buf)
    host = out.numpy()
    return int(host[:, 0].min()), int(host[:, 1].max())


# ---- gather and scatter plans -------------------------------------------------------------------

@dataclass
class _Plan:
    """A walk over `shape`: the data element of coordinate c sits at
    offset + c . base + sum_k idx[k][c . idx_strides] * adv_strides[k]."""
    shape: tuple
    offset: int
    base: list
    idx: ClTensor  # (K, *B) int64, checked and wrapped
    idx_strides: list
    adv_strides: list
    b_start: int  # where the index tensors' broadcast dims start in `shape`

    @property
    def nb(self):
        return math.prod(self.idx.shape[1:])


def _run_indexed(name, data, plan, other, other_strides, op):
    """One launch of index_gather (other[c] = data[plan(c)]) or index_scatter
    (data[plan(c)] = other[c]) over plan.shape; other_strides walk `other` over that shape."""
    n = math.prod(plan.shape)
    if n == 0:
        return
    shape, (sd, so, si) = _collapsed(plan.shape, [plan.base, other_strides, plan.idx_strides], op)
    kernel = _get_kernel(data.device, name, {"T": _BITS_T[data.dtype.itemsize]})
    _launch(data.device, kernel, n, np.int64(n), np.int32(len(shape)), shape_arg(shape),
            data.storage.buf, view_arg(plan.offset, sd), other.storage.buf,
            view_arg(other.offset, so), plan.idx.storage.buf, view_arg(0, si),
            np.int32(len(plan.adv_strides)), np.int64(plan.nb), shape_arg(plan.adv_strides))


def _reduce_kernel(name, dtype, device, src_dtype):
    defines = {"ACC_T": ctype_of(dtype), "SRC_T": ctype_of(src_dtype)}
    if dtype == dt.bool_:
        defines["ACC_BOOL"] = None
    if dt.is_floating(dtype):
        defines["ACC_FLOAT"] = None
    return _get_kernel(device, name, defines)


def _add_per_lane(lanes, dst, idx, src, length, steps, adv_strides, op, red=SUM):
    """For each point of `lanes` and t = 0 .. length-1 in order: dst[lane +
    sum_k idx[k * nb + lane + t * steps[0]] * adv_strides[k]] op= src[lane + t * steps[1]], op
    the reduction `red` (+ unless given). dst, idx and src are (tensor, offset, strides over
    lanes); idx holds K index tensors of nb."""
    n = math.prod(lanes)
    if n == 0 or length == 0:
        return
    (d, d_off, d_st), (i, i_off, i_st), (s, s_off, s_st) = dst, idx, src
    shape, (sd, si, ss) = _collapsed(lanes, [d_st, i_st, s_st], op)
    kernel = _reduce_kernel("scatter_add_per_lane", d.dtype, d.device, s.dtype)
    _launch(d.device, kernel, n, np.int64(n), np.int32(len(shape)), shape_arg(shape),
            d.storage.buf, view_arg(d_off, sd), i.storage.buf, view_arg(i_off, si),
            s.storage.buf, view_arg(s_off, ss), np.int64(length), np.int64(steps[0]),
            np.int64(steps[1]), np.int32(len(adv_strides)), np.int64(math.prod(i.shape[1:])),
            shape_arg(adv_strides), np.int32(red))


def _add_per_output(shape, dst, idx, src, j_strides, length, steps, op, red):
    """For each point p of `shape`, j its coordinate along the scatter dim (from j_strides):
    dst[p] op= the src[p + t * steps[1]] with idx[p + t * steps[0]] == j, in increasing t."""
    n = math.prod(shape)
    if n == 0 or length == 0:
        return
    (d, d_off, d_st), (i, i_off, i_st), (s, s_off, s_st) = dst, idx, src
    sh, (sd, si, ss, sj) = _collapsed(shape, [d_st, i_st, s_st, j_strides], op)
    kernel = _reduce_kernel("scatter_add_per_output", d.dtype, d.device, s.dtype)
    _launch(d.device, kernel, n, np.int64(n), np.int32(len(sh)), shape_arg(sh),
            d.storage.buf, view_arg(d_off, sd), i.storage.buf, view_arg(i_off, si),
            s.storage.buf, view_arg(s_off, ss), view_arg(0, sj), np.int64(length),
            np.int64(steps[0]), np.int64(steps[1]), np.int32(red))


def _advanced_plan(v, adv, wrap, op):
    """The plan of view v indexed by its advanced indices, with torch's rules: the index tensors
    broadcast together; their dims replace the indexed dims where those are adjacent, else they
    go first."""
    if len(adv) > MAX_DIMS:
        raise ValueError(f"{op}: at most {MAX_DIMS} index tensors are supported, got {len(adv)}")
    positions = [p for p, _, _ in adv]
    tensors = [t for _, t, _ in adv]
    try:
        b = ew.broadcast_shapes(*[t.shape for t in tensors])
    except ValueError:
        shapes = ", ".join(f"{t.shape}" for t in tensors)
        raise IndexError(f"{op}: shape mismatch: indexing tensors could not be broadcast "
                         f"together with shapes {shapes}") from None
    idx = _normalized(tensors, b, [v.shape[p] for p in positions], wrap,
                      [d for _, _, d in adv], op)
    rest = [d for d in range(v.ndim) if d not in positions]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    before = [d for d in rest if d < positions[0]] if adjacent else []
    after = [d for d in rest if d not in before]
    return _Plan(tuple(v.shape[d] for d in before) + b + tuple(v.shape[d] for d in after),
                 v.offset,
                 [v.strides[d] for d in before] + [0] * len(b) + [v.strides[d] for d in after],
                 idx,
                 [0] * len(before) + list(contiguous_strides(b)) + [0] * len(after),
                 [v.strides[p] for p in positions],
                 len(before))
