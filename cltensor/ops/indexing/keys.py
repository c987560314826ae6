"""x[key] and x[key] = value (basic, advanced and mask keys), index_put, put and the view
scatters (select/slice/diagonal_scatter)."""
import numbers

import numpy as np

from ... import dtypes as dt
from ...creation import from_numpy, full, tensor
from ...tensor import ClTensor, _basic_index, _is_basic_key, _norm_dim
from .. import elementwise as ew
from .common import INDEX_DTYPES, _add_per_lane, _advanced_plan, _run_indexed
from .masks import _check_mask, masked_fill_, nonzero

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
    if not ew.broadcasts_to(value.shape, shape):
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


def masked_select(x, mask):
    """The elements of x (broadcast with mask) where mask is True, as a new 1-d tensor.

    Example:
        positives = cltensor.masked_select(x, x > 0)
    """
    _check_mask(mask, x, "masked_select")
    shape = ew.broadcast_shapes(x.shape, mask.shape)
    return getitem(x.expand(shape), (mask.expand(shape),))


# ---- ClTensor's [] (installed by autograd/namespace.py, listed in cltensor/methods.py) --------

def tensor_getitem(self, key):
    """self[key]: a view for ints, slices, None and Ellipsis, else advanced indexing."""
    key = key if isinstance(key, tuple) else (key,)
    if _is_basic_key(key):
        return self._basic_index(key)  # the method: autograd records it as a view
    return getitem(self, key)


def tensor_setitem(self, key, value):
    """self[key] = value: a copy into the view of a basic key, else setitem's advanced path."""
    key_t = key if isinstance(key, tuple) else (key,)
    if _is_basic_key(key_t):
        target = _basic_index(self, key_t)
        if isinstance(value, ClTensor) and value.device is not self.device:
            value = value.to(self.device)
        if not isinstance(value, ClTensor) and not isinstance(value, (numbers.Number, np.bool_)):
            value = tensor(value, dtype=self.dtype, device=self.device)
        ew.check_writable(target, "setitem")
        ew.copy_into(target, value)
        return
    setitem(self, key_t, value)
