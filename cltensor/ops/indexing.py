"""Advanced indexing, gather/scatter, masks and nonzero (kernels: cl_kernels/indexing.cl).

Every index tensor is checked on the device before any data moves: normalize_index converts it
to int64, wraps negative values where torch does, writes it to one contiguous buffer and raises a
flag that the host reads back; an IndexError then names the index, the dim and the size, and
nothing has been written.
"""
import math
import numbers
from dataclasses import dataclass, replace

import numpy as np
import pyopencl as cl

from .. import dtypes as dt
from ..creation import from_numpy, full, tensor
from ..program import ctype_of, get_kernel, launch, sizes_1d
from ..tensor import ClTensor, _norm_dim, contiguous_strides
from . import elementwise as ew
from .elementwise import MAX_DIMS, shape_arg, view_arg

__all__ = ["index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "masked_fill",
           "masked_select", "masked_scatter", "nonzero", "one_hot", "index_put", "index_put_",
           "index_add", "index_copy", "index_fill", "put", "select_scatter", "slice_scatter",
           "diagonal_scatter"]

KERNEL_FILE = "indexing.cl"
INDEX_DTYPES = (dt.int32, dt.int64)
_BITS_T = {1: "uchar", 4: "uint", 8: "ulong"}  # gathers and scatters move bits, not values
# the reductions of the scatter_add kernels (their run-time argument `red`: see indexing.cl)
SUM, PROD, MAX, MIN = range(4)
SCATTER_REDUCTIONS = {"sum": SUM, "prod": PROD, "mean": SUM, "amax": MAX, "amin": MIN}
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
    cl.enqueue_fill_buffer(device.queue, err.storage.buf, np.int32(0), 0, 4)
    for k, (t, size) in enumerate(zip(indices, sizes)):
        sh, (_, st) = _collapsed(shape, [contiguous_strides(shape),
                                         ew.broadcast_strides(t, shape)], op)
        kernel = _get_kernel(device, "normalize_index", {"IDX_T": ctype_of(t.dtype)})
        _launch(device, kernel, nb, np.int64(nb), np.int32(len(sh)), shape_arg(sh),
                t.storage.buf, view_arg(t.offset, st), out.storage.buf, np.int64(k * nb),
                np.int64(size), np.int32(wrap), err.storage.buf)
    flag = np.zeros(1, np.int32)
    cl.enqueue_copy(device.queue, flag, err.storage.buf, is_blocking=True)
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


def _reduce_kernel(name, dtype, device):
    defines = {"ACC_T": ctype_of(dtype)}
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
    kernel = _reduce_kernel("scatter_add_per_lane", d.dtype, d.device)
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
    kernel = _reduce_kernel("scatter_add_per_output", d.dtype, d.device)
    _launch(d.device, kernel, n, np.int64(n), np.int32(len(sh)), shape_arg(sh),
            d.storage.buf, view_arg(d_off, sd), i.storage.buf, view_arg(i_off, si),
            s.storage.buf, view_arg(s_off, ss), view_arg(0, sj), np.int64(length),
            np.int64(steps[0]), np.int64(steps[1]), np.int32(red))


# ---- parsing an index key -----------------------------------------------------------------------

def _classify(k, device, op):
    """One entry of an index key as (kind, value); kinds: none, ellipsis, bool, int, slice,
    index (an integer tensor of at least one dim) and mask (a bool tensor of at least one dim)."""
    if k is None:
        return "none", None
    if k is Ellipsis:
        return "ellipsis", None
    if isinstance(k, (bool, np.bool_)):
        return "bool", bool(k)
    if isinstance(k, (int, np.integer)):
        return "int", int(k)
    if isinstance(k, slice):
        return "slice", k
    if isinstance(k, (list, tuple, np.ndarray)):
        k = _host_index(k, device, op)
    if isinstance(k, ClTensor):
        return _classify_tensor(k, device, op)
    raise TypeError(f"{op}: only ints, slices, None, Ellipsis, bools, lists of ints or bools and "
                    f"integer or bool tensors are valid indices, got {type(k).__name__}")


def _host_index(k, device, op):
    try:
        arr = np.asarray(k)
    except ValueError:
        raise IndexError(f"{op}: ragged index list {k!r}") from None
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # [] selects nothing
    if arr.dtype.kind == "b":
        return from_numpy(arr, device=device)
    if arr.dtype.kind in "iu":
        return from_numpy(arr, device=device, dtype=np.int64)  # refuses uint64 past int64
    raise TypeError(f"{op}: index lists must hold ints or bools, got {k!r}")


def _classify_tensor(t, device, op):
    if t.device is not device:
        raise RuntimeError(f"{op}: the index is on {t.device} but the tensor is on {device}")
    if t.dtype == dt.bool_:
        return ("bool", bool(t.item())) if t.ndim == 0 else ("mask", t)
    if t.dtype in INDEX_DTYPES:
        return ("int", int(t.item())) if t.ndim == 0 else ("index", t)
    raise TypeError(f"{op}: tensors used as indices must be int64, int32 or bool, got {t.dtype}")


def _dims_used(kind, value):
    return value.ndim if kind == "mask" else int(kind in ("int", "slice", "index"))


def _parse_key(x, key, op):
    """Apply the key's ints, slices, None and bools to x as a view; return the view and its
    advanced indices as (dim of the view, int index tensor, dim of x)."""
    entries = [_classify(k, x.device, op) for k in key]
    kinds = [kind for kind, _ in entries]
    if kinds.count("ellipsis") > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    used = sum(_dims_used(kind, v) for kind, v in entries)
    if used > x.ndim:
        raise IndexError(f"{op}: too many indices for a tensor of dimension {x.ndim}")
    fill = [("slice", slice(None))] * (x.ndim - used)
    if "ellipsis" in kinds:
        i = kinds.index("ellipsis")
        entries = entries[:i] + fill + entries[i + 1:]
    else:
        entries = entries + fill
    return _KeyWalk(x, op).run(entries)


class _KeyWalk:
    """The view of x that a key's basic entries select, built entry by entry (torch's order: ints
    select, None and bools add a dim, index tensors and masks keep the dims they index)."""

    def __init__(self, x, op):
        self.x, self.op = x, op
        self.shape, self.strides, self.offset = [], [], x.offset
        self.adv = []  # (dim of the view, int index tensor, dim of x)
        self.d = 0  # the next dim of x

    def run(self, entries):
        for kind, value in entries:
            getattr(self, "_" + kind)(value)
        return self.x._view(self.shape, self.strides, self.offset), self.adv

    def _add_dim(self, size, stride, index=None, xdim=None):
        self.shape.append(size)
        self.strides.append(stride)
        if index is not None:
            self.adv.append((len(self.shape) - 1, index, xdim))

    def _none(self, _):
        self._add_dim(1, 0)

    def _bool(self, value):
        # as torch: a new dim of size 1, indexed by [0] when True and by [] when False
        index = from_numpy(np.zeros(int(value), np.int64), device=self.x.device)
        self._add_dim(1, 0, index, self.d)

    def _int(self, k):
        d, n = self.d, self.x.shape[self.d]
        if not -n <= k < n:
            raise IndexError(f"{self.op}: index {k} is out of bounds for dimension {d} "
                             f"with size {n}")
        self.offset += (k % n) * self.x.strides[d]
        self.d += 1

    def _slice(self, k):
        if k.step is not None and k.step <= 0:
            raise ValueError(f"{self.op}: slice step must be positive, got {k.step}")
        n, st = self.x.shape[self.d], self.x.strides[self.d]
        start, stop, step = k.indices(n)
        length = max(0, (stop - start + step - 1) // step)
        self.offset += start * st if length else 0
        self._add_dim(length, st * step)
        self.d += 1

    def _index(self, t):
        self._add_dim(self.x.shape[self.d], self.x.strides[self.d], t, self.d)
        self.d += 1

    def _mask(self, m):
        d, k = self.d, m.ndim
        if m.shape != self.x.shape[d:d + k]:
            raise IndexError(f"{self.op}: the shape of the mask {m.shape} does not match the "
                             f"shape {self.x.shape[d:d + k]} of the indexed tensor's dims "
                             f"{d} to {d + k - 1}")
        for j, column in enumerate(nonzero(m, as_tuple=True)):
            self._add_dim(self.x.shape[d + j], self.x.strides[d + j], column, d + j)
        self.d += k


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
        shapes = ", ".join(str(t.shape) for t in tensors)
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


# ---- __getitem__, __setitem__, index_put_ -------------------------------------------------------

def getitem(x, key):
    """x[key] for a tuple key holding index tensors, lists or masks (torch's advanced indexing):
    a new tensor. Called by ClTensor.__getitem__."""
    v, adv = _parse_key(x, key, "index")
    if not adv:
        return v
    plan = _advanced_plan(v, adv, True, "index")
    out = ClTensor.empty_on(plan.shape, x.dtype, x.device)
    _run_indexed("index_gather", v, plan, out, out.strides, "index")
    return out


def setitem(x, key, value, accumulate=False):
    """x[key] = value (a tensor broadcast to the indexed shape, or a number) for advanced keys;
    with accumulate, x[key] += value with repeated indices adding up. Called by __setitem__."""
    op = "index_put_"
    value = _as_value(x, value, op)
    mask = None if accumulate else _leading_mask(x, key, value)
    if mask is not None:
        masked_fill_(x, mask, value)
        return
    v, adv = _parse_key(x, key, op)
    ew.check_writable(v, op)
    if not adv:  # the key held only basic entries and 0-d integer tensors: v is the target
        if accumulate:
            ew.binary("add", v, value, out=v)
        else:
            ew.copy_into(v, value)
        return
    plan = _advanced_plan(v, adv, True, op)
    value = _value_for(x, value, plan.shape, op)
    if accumulate:
        _accumulate(x, plan, value, op)
    else:
        _run_indexed("index_scatter", x, plan, value, ew.broadcast_strides(value, plan.shape), op)


def _as_value(x, value, op):
    if isinstance(value, ClTensor):
        return value if value.device is x.device else value.to(x.device)
    if isinstance(value, (numbers.Number, np.bool_)):
        ew.check_scalar(value, op)
        return value
    return tensor(value, dtype=x.dtype, device=x.device)


def _leading_mask(x, key, value):
    """For x[mask] = scalar, mask a bool tensor over x's leading dims (torch runs it as
    masked_fill_): the mask seen over x's shape; else None."""
    if len(key) != 1 or not isinstance(key[0], ClTensor):
        return None
    m = key[0]
    if isinstance(value, ClTensor) and value.ndim:
        return None
    if m.dtype != dt.bool_ or m.ndim == 0 or m.device is not x.device:
        return None
    if m.shape != x.shape[:m.ndim]:
        return None
    extra = x.ndim - m.ndim
    return m._view(m.shape + (1,) * extra, m.strides + (0,) * extra)


def _value_for(x, value, shape, op):
    """value as a tensor of x's dtype that broadcasts to `shape` and does not share x's memory."""
    if not isinstance(value, ClTensor):
        return full((), value, dtype=x.dtype, device=x.device)
    while value.ndim > len(shape) and value.shape[0] == 1:
        value = value[0]
    try:
        fits = ew.broadcast_shapes(value.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: shape mismatch: value tensor of shape {value.shape} cannot be "
                         f"broadcast to indexing result of shape {tuple(shape)}")
    if value.dtype != x.dtype or value.storage is x.storage:
        value = value.to(x.dtype, copy=True)
    return value


def _accumulate(x, plan, value, op):
    """x[plan] += value, deterministically: one lane per point of the non-indexed dims walks the
    index positions in order."""
    vals = value.expand(plan.shape).contiguous()
    first, last = plan.b_start, plan.b_start + plan.idx.ndim - 1
    lanes = [1 if first <= k < last else n for k, n in enumerate(plan.shape)]
    val_strides = [0 if first <= k < last else s for k, s in enumerate(vals.strides)]
    _add_per_lane(lanes, (x, plan.offset, plan.base), (plan.idx, 0, [0] * len(lanes)),
                  (vals, vals.offset, val_strides), plan.nb, (1, vals.strides[last - 1]),
                  plan.adv_strides, op)


def index_put_(x, indices, values, accumulate=False):
    """x[indices] = values in place (torch.Tensor.index_put_); with accumulate, repeated indices
    add up (deterministically, in index order).

    Example:
        x.index_put_((cltensor.tensor([0, 0, 2]),), cltensor.tensor(1.0), accumulate=True)
    """
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put_: indices must be a tuple of tensors, "
                        f"got {type(indices).__name__}")
    setitem(x, tuple(indices), values, accumulate)
    return x


def index_put(x, indices, values, accumulate=False):
    """A copy of x with x[indices] = values (see index_put_)."""
    return index_put_(x.clone(), indices, values, accumulate)


def check_put(x, index, source, op):
    """put's operands: an int64 index and a source of x's dtype with as many elements."""
    for name, t in (("input", x), ("index", index), ("source", source)):
        if not isinstance(t, ClTensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    ew.common_device([x, index, source], op)
    if index.dtype != dt.int64:
        raise TypeError(f"{op}: expected an int64 index, got {index.dtype}")
    if source.dtype != x.dtype:
        raise TypeError(f"{op}: source ({source.dtype}) must have the tensor's dtype {x.dtype}")
    if source.numel() != index.numel():
        raise ValueError(f"{op}: index has {index.numel()} elements but source has "
                         f"{source.numel()}")


def put_(x, index, source, accumulate=False):
    """x's elements at the positions in index, counted in x flattened (row-major; negative
    from the end), set to source's (added up with accumulate), in place.

    Example:
        x.put_(cltensor.tensor([0, -1]), cltensor.tensor([9.0, 8.0]))   # first and last
    """
    check_put(x, index, source, "put_")
    target = x if x.is_contiguous() else x.contiguous()
    setitem(target.view(-1), (index.reshape(-1),), source.reshape(-1),
            accumulate)
    if target is not x:
        x.copy_(target)
    return x


def put(x, index, source, accumulate=False):
    """A copy of x with put_'s change (see put_)."""
    check_put(x, index, source, "put")
    return put_(x.clone(memory_format="contiguous_format"), index, source, accumulate)


def view_scatter(x, src, op, view, *args):
    """A copy of x with its view `view(*args)` (a ClTensor view method's name) replaced by src,
    which must have that view's shape: select_scatter, slice_scatter and diagonal_scatter."""
    for name, t in (("input", x), ("src", src)):
        if not isinstance(t, ClTensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    ew.common_device([x, src], op)
    out = x.clone()
    target = getattr(out, view)(*args)
    if target.shape != src.shape:
        raise ValueError(f"{op}: expected src to have the size of the slice of input: src size "
                         f"{src.shape}, slice size {target.shape}")
    target.copy_(src)
    return out


def slice_key(x, dim, start, end, step):
    """The basic-indexing key of x[..., start:end:step] with the slice at dim."""
    return (slice(None),) * _norm_dim(dim, x.ndim, "slice_scatter") + (slice(start, end, step),)


def select_scatter(input, src, dim, index):
    """A copy of input with input.select(dim, index) replaced by src (of that slice's shape)."""
    return view_scatter(input, src, "select_scatter", "select", dim, index)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of input with its slice start:end:step along dim replaced by src."""
    return view_scatter(input, src, "slice_scatter", "_basic_index",
                        slice_key(input, dim, start, end, step))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with input.diagonal(offset, dim1, dim2) replaced by src."""
    return view_scatter(input, src, "diagonal_scatter", "diagonal", offset, dim1, dim2)


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
    _scatter_into(list(plan.shape), d, (xv, xv.offset, list(xv.strides)), idx, src_walk, red, op)
    if mean:
        _divide_by_counts(xv, d, plan, idx, include_self, op)
    return x


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


def _unaliased(src, x):
    """src at least 1-d, copied when it shares x's memory (x is about to be written)."""
    return _at_least_1d(src.clone() if src.storage is x.storage else src)


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
        source = ew.binary("mul", source, np.dtype(x.dtype).type(alpha).item()).to(x.dtype)
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
    try:
        fits = ew.broadcast_shapes(x.shape, mask.shape) == x.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: the mask's shape {mask.shape} does not broadcast to the "
                         f"tensor's shape {x.shape}")


def masked_select(x, mask):
    """The elements of x (broadcast with mask) where mask is True, as a new 1-d tensor.

    Example:
        positives = cltensor.masked_select(x, x > 0)
    """
    _check_mask(mask, x, "masked_select")
    shape = ew.broadcast_shapes(x.shape, mask.shape)
    return getitem(x.expand(shape), (mask.expand(shape),))


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


TENSOR_METHODS = {
    "index_select": index_select, "gather": gather, "scatter": scatter, "scatter_": scatter_,
    "scatter_add": scatter_add, "scatter_add_": scatter_add_, "masked_fill": masked_fill,
    "masked_fill_": masked_fill_, "masked_select": masked_select, "nonzero": nonzero,
    "scatter_reduce": scatter_reduce, "scatter_reduce_": scatter_reduce_,
    "masked_scatter": masked_scatter, "masked_scatter_": masked_scatter_,
    "index_put": index_put, "index_put_": index_put_, "index_add": index_add,
    "index_add_": index_add_, "index_copy": index_copy, "index_copy_": index_copy_,
    "index_fill": index_fill, "index_fill_": index_fill_, "put": put, "put_": put_,
    "select_scatter": select_scatter, "slice_scatter": slice_scatter,
    "diagonal_scatter": diagonal_scatter,
}
