"""Joining, splitting, padding and rearranging tensors: cat, stack, split, split_with_sizes,
chunk, pad, flip, repeat, roll, and as_strided's views.

Splits are views; cat copies its inputs in one launch of cl_kernels/shape.cl where it can, and
the rest write strided views into a new tensor with the elementwise copy
(cl_kernels/elementwise.cl), or gather with index_select.
"""
import functools
import math

import numpy as np

from .. import dtypes as dt
from ..creation import from_numpy, full
from ..program import ctype_of, get_kernel, launch, round_up
from ..tensor import ClTensor, _norm_dim
from . import elementwise as ew
from .indexing import index_select, setitem

__all__ = ["cat", "concat", "concatenate", "stack", "split", "chunk", "pad", "flip", "repeat",
           "roll", "split_with_sizes", "as_strided"]

PAD_MODES = ("constant", "reflect", "replicate", "circular")
KERNEL_FILE = "shape.cl"
CAT_MAX_INPUTS = 8  # cat_contig's source arguments
# cat's kernel by device kind (shape.cl's header): on PoCL a work-item that copies a run of
# memory beat one per element (4x); GPUs want neighbouring work-items on neighbouring elements
CAT_FORM = {"cpu": "cat_rows", "gpu": "cat_contig"}
CAT_GROUP = 256  # cat_contig's work-group along a row
CAT_ITEMS = 4  # cat_contig's elements per work-item
CAT_ROW_CHUNK = 1 << 14  # the elements one cat_rows work-item copies, at most
_INT_MAX = 2**31 - 1


def _tensor_list(tensors, op):
    if isinstance(tensors, ClTensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, ClTensor):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__} at position {i}"
                            f"{dt.conversion_hint(t)}")
    ew.common_device(list(tensors), op)
    return list(tensors)


def _check_int(n, what, op):
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"{op}: {what} must be an int, got {n!r}")
    return int(n)


def cat(tensors, dim=0):
    """Concatenate tensors along an existing dim; dtypes promote as in torch.

    All tensors need the same number of dims and the same sizes except along `dim`; 1-d empty
    tensors of shape (0,) are skipped (torch's legacy rule).

    Example:
        cltensor.cat([a, b], dim=1)   # (2, 3) and (2, 5) give (2, 8)
    """
    tensors = _tensor_list(tensors, "cat")
    parts = [(i, t) for i, t in enumerate(tensors) if t.shape != (0,)] or [(0, tensors[0])]
    first = parts[0][1]
    for i, t in parts:
        if t.ndim == 0:
            raise ValueError(f"cat: zero-dimensional tensor (at position {i}) cannot be "
                             f"concatenated")
    d = _norm_dim(dim, first.ndim, "cat")
    for i, t in parts:
        _check_cat_shape(first, t, d, i)
    shape = list(first.shape)
    shape[d] = sum(t.shape[d] for _, t in parts)
    dtype = functools.reduce(dt.promote_types, (t.dtype for t in tensors))
    out = ClTensor.empty_on(tuple(shape), dtype, first.device)
    if _cat_in_one_launch([t for _, t in parts if t.numel()], d, out):
        return out
    start = 0
    for _, t in parts:
        if t.numel():
            ew.launch_elementwise("OP_copy", [t], out.narrow(d, start, t.shape[d]), dtype)
        start += t.shape[d]
    return out


def _check_cat_shape(first, t, d, i):
    if t.ndim != first.ndim:
        raise ValueError(f"cat: tensors must have the same number of dims: tensor 0 has "
                         f"{first.ndim} and tensor {i} has {t.ndim}")
    for k, (a, b) in enumerate(zip(first.shape, t.shape)):
        if k != d and a != b:
            raise ValueError(f"cat: sizes of tensors must match except in dimension {d}; expected "
                             f"size {a} but got size {b} for tensor {i} in dimension {k}")


concat = concatenate = cat


def _cat_in_one_launch(tensors, d, out):
    """cat's copies as one launch of shape.cl (cat_rows on CPUs, cat_contig on GPUs), when it
    takes them (2 to CAT_MAX_INPUTS contiguous inputs of out's dtype, rows of fewer than 2^31
    elements); returns whether it did."""
    if not 2 <= len(tensors) <= CAT_MAX_INPUTS or out.numel() == 0:
        return False
    if any(t.dtype != out.dtype or not t.is_contiguous() for t in tensors):
        return False
    outer = math.prod(out.shape[:d])
    slab = out.numel() // outer
    if slab > _INT_MAX or outer * CAT_MAX_INPUTS > _INT_MAX:
        return False
    inner = slab // out.shape[d]
    args = [np.int32(slab), np.int32(outer), out.storage.buf, np.int64(out.offset)]
    for t in tensors:
        args += [t.storage.buf, np.int64(t.offset), np.int32(t.shape[d] * inner)]
    args += [tensors[0].storage.buf, np.int64(0), np.int32(0)] * (CAT_MAX_INPUTS - len(tensors))
    device = out.device
    name = CAT_FORM["cpu" if device.is_cpu else "gpu"]
    # a copy: 16-bit floats travel as their bits
    ctype = "ushort" if out.dtype in dt.HALF_TYPES else ctype_of(out.dtype)
    kernel = get_kernel(device, KERNEL_FILE, name, {"T": ctype, "ITEMS": CAT_ITEMS})
    if name == "cat_rows":
        longest = max(t.shape[d] * inner for t in tensors)
        chunk = min(CAT_ROW_CHUNK, longest)
        launch(device, kernel, (-(-longest // chunk), outer * len(tensors)), (1, 1), *args[:2],
               np.int32(len(tensors)), np.int32(chunk), *args[2:])
    else:
        group = min(CAT_GROUP, device.max_work_group)
        launch(device, kernel, (round_up(-(-slab // CAT_ITEMS), group), outer), (group, 1), *args)
    return True


def stack(tensors, dim=0):
    """Join tensors of one shape along a new dim.

    Example:
        cltensor.stack([a, b], dim=0)   # two (3, 4) tensors give (2, 3, 4)
    """
    tensors = _tensor_list(tensors, "stack")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != first.shape:
            raise ValueError(f"stack: expected every tensor to have the same shape, but got "
                             f"{first.shape} at entry 0 and {t.shape} at entry {i}")
    d = _norm_dim(dim, first.ndim + 1, "stack")
    return cat([t.unsqueeze(d) for t in tensors], d)


def split(x, split_size_or_sections, dim=0):
    """Views of x along `dim`: pieces of split_size (the last one may be smaller), or of the
    sizes in a list that must add up to the dim's size.

    Example:
        a, b = cltensor.split(x, [2, 3], dim=1)   # x of shape (4, 5)
    """
    if x.ndim == 0:
        raise ValueError("split: expects a tensor of at least one dim, got a 0-d tensor")
    d = _norm_dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_check_int(s, "split sizes", "split") for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"split: split sizes {tuple(sizes)} must be non-negative and add "
                             f"up to the size {n} of dimension {d}")
    else:
        size = _check_int(split_size_or_sections, "split_size", "split")
        if size < 0 or (size == 0 and n):
            raise ValueError(f"split: split_size must be positive (0 only for an empty dim), "
                             f"got {size} for dimension {d} of size {n}")
        sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
    starts = np.cumsum([0] + sizes[:-1])
    return tuple(x.narrow(d, int(s), k) for s, k in zip(starts, sizes))


def split_with_sizes(x, split_sizes, dim=0):
    """Views of x along dim of the sizes in split_sizes, which must add up to the dim's size."""
    if not isinstance(split_sizes, (list, tuple)):
        raise TypeError(f"split_with_sizes: split_sizes must be a list of ints, got "
                        f"{type(split_sizes).__name__}")
    return split(x, split_sizes, dim)


def as_strided(x, size, stride, storage_offset=None):
    """A view of x's storage with the given sizes, strides and storage offset (by default x's
    own), as torch.as_strided: elements may repeat; the view must stay within the storage.

    Example:
        >>> cltensor.arange(6).as_strided((2, 2), (1, 2), 1).tolist()
        [[1, 3], [2, 4]]
    """
    size = tuple(_check_int(n, "size", "as_strided") for n in size)
    stride = tuple(_check_int(st, "stride", "as_strided") for st in stride)
    offset = x.offset if storage_offset is None else _check_int(storage_offset,
                                                                "storage_offset", "as_strided")
    if len(size) != len(stride):
        raise ValueError(f"as_strided: {len(stride)} strides given for {len(size)} sizes")
    if min(size + stride + (offset,), default=0) < 0:
        raise ValueError(f"as_strided: negative sizes, strides or offset are not supported: "
                         f"size {size}, stride {stride}, storage_offset {offset}")
    need = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    have = x.storage.nbytes // x.dtype.itemsize
    if need > have:
        raise ValueError(f"as_strided: size {size}, stride {stride} and storage_offset {offset} "
                         f"reach element {need - 1} of a storage of {have} elements")
    return x._view(size, stride, offset)


def chunk(x, chunks, dim=0):
    """Split x into `chunks` views of equal size along dim (the last may be smaller, and there
    may be fewer), as torch.chunk.

    Example:
        q, k, v = cltensor.chunk(qkv, 3, dim=-1)
    """
    chunks = _check_int(chunks, "chunks", "chunk")
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    if x.ndim == 0:
        raise ValueError("chunk: expects a tensor of at least one dim, got a 0-d tensor")
    d = _norm_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    if n == 0:
        return split(x, [0] * chunks, d)
    return split(x, -(-n // chunks), d)


def _pad_pairs(x, pad, mode, value):
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    if not isinstance(pad, (list, tuple)) or len(pad) % 2:
        raise ValueError(f"pad: the padding must be a tuple of an even number of ints, got {pad!r}")
    pad = [_check_int(p, "paddings", "pad") for p in pad]
    if len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: padding length {len(pad)} is too large for a {x.ndim}-d input "
                         f"(at most {2 * x.ndim})")
    if mode != "constant" and value != 0:
        raise ValueError(f"pad: mode {mode!r} takes no fill value, got {value!r}")
    ew.check_scalar(value, "pad")
    # pad lists the last dim first: (left, right) of dim -1, then of dim -2, ...
    return [(x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def pad(x, pad, mode="constant", value=0):
    """Pad (or, with negative amounts, crop) the last dims of x, as torch.nn.functional.pad.

    `pad` is (left, right) for the last dim, then for the one before, ...; modes are constant
    (fill with `value`), reflect, replicate and circular.

    Example:
        cltensor.pad(x, (1, 1, 2, 0))   # last dim +1 on each side, dim -2 +2 in front
    """
    pairs = _pad_pairs(x, pad, mode, value)
    for d, left, right in pairs:
        if x.shape[d] + left + right < 0:
            raise ValueError(f"pad: padding ({left}, {right}) of dimension {d} of size "
                             f"{x.shape[d]} gives a negative size")
    if mode == "constant":
        return _pad_constant(x, pairs, value)
    out = x
    for d, left, right in pairs:
        out = _pad_by_index(out, d, left, right, mode)
    return out


def _pad_constant(x, pairs, value):
    shape = list(x.shape)
    src, dst_starts = x, [0] * x.ndim
    for d, left, right in pairs:
        n = x.shape[d]
        shape[d] = n + left + right
        lo, hi = max(0, -left), min(n, n + right)  # the part of x that stays
        src = src.narrow(d, min(lo, n), max(0, hi - lo))
        dst_starts[d] = max(0, left)
    out = full(tuple(shape), value, dtype=x.dtype, device=x.device)
    if src.numel():
        target = out
        for d in range(x.ndim):
            target = target.narrow(d, dst_starts[d], src.shape[d])
        ew.launch_elementwise("OP_copy", [src], target, x.dtype)
    return out


def _pad_by_index(x, d, left, right, mode):
    """Pad one dim in reflect, replicate or circular mode by gathering computed positions."""
    pos = _pad_positions(x.shape[d], d, left, right, mode)
    return index_select(x, d, from_numpy(pos, device=x.device))


def pad_backward(g, shape, pad, mode):
    """The gradient w.r.t. x (of `shape`) of pad(x, pad, mode) in reflect, replicate or
    circular mode, from the result's gradient g: dim by dim in reverse, each entry of g added
    to the position it was read from (several entries add up in one position)."""
    steps, size = [], list(shape)
    for d, left, right in _pad_pairs(g, pad, mode, 0):
        steps.append((d, left, right, tuple(size)))
        size[d] += left + right
    for d, left, right, in_shape in reversed(steps):
        pos = _pad_positions(in_shape[d], d, left, right, mode)
        gx = full(in_shape, 0, dtype=g.dtype, device=g.device)
        setitem(gx, (slice(None),) * d + (from_numpy(pos, device=g.device),), g,
                accumulate=True)
        g = gx
    return g


def _pad_positions(n, d, left, right, mode):
    """The positions along dim d (of size n) that padding it by (left, right) reads."""
    if mode == "reflect" and max(left, right) >= n:
        raise ValueError(f"pad: reflect padding ({left}, {right}) must be smaller than the size "
                         f"{n} of dimension {d}")
    if mode == "replicate" and n == 0 and max(left, right) > 0:
        raise ValueError(f"pad: cannot replicate-pad the empty dimension {d}")
    if mode == "circular":
        return _circular_positions(n, d, left, right)
    pos = np.arange(-left, n + right, dtype=np.int64)
    pos = np.clip(pos, 0, n - 1) if mode == "replicate" else np.abs(pos)
    return np.where(pos >= n, 2 * (n - 1) - pos, pos)  # reflect the right edge


def _circular_positions(n, d, left, right):
    # NOTE: as torch, negative amounts crop first and the wrap-around reads the cropped dim
    lo, hi = max(0, -left), n - max(0, -right)
    if max(left, right) > hi - lo:
        raise ValueError(f"pad: circular padding ({left}, {right}) must be at most the size "
                         f"{hi - lo} of dimension {d} (after cropping)")
    pos = np.arange(-max(left, 0), hi - lo + max(right, 0), dtype=np.int64)
    return lo + pos % max(hi - lo, 1)


def _dims_arg(dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return dims


def flip(x, *dims):
    """A copy of x with the order of elements reversed along the given dims.

    Example:
        cltensor.flip(x, (0, 1))   # or x.flip(0, 1)
    """
    dims = _dims_arg(dims)
    norm = [_norm_dim(d, x.ndim, "flip") for d in dims]
    if len(set(norm)) != len(norm):
        raise ValueError(f"flip: dim appears more than once in {tuple(dims)}")
    strides, offset = list(x.strides), x.offset
    for d in norm:
        if x.ndim and x.shape[d] > 1:
            offset += (x.shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
    # NOTE: the negative-stride view never escapes: the strided copy reads it into a new tensor
    return x._view(x.shape, strides, offset).clone()


def repeat(x, *sizes):
    """Tile x: sizes[i] copies along each dim (sizes may add leading dims), as Tensor.repeat.

    Example:
        x.repeat(2, 3)   # (2, 4) gives (4, 12)
    """
    sizes = tuple(_check_int(s, "repeat sizes", "repeat") for s in _dims_arg(sizes))
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: got {len(sizes)} repeat sizes for a {x.ndim}-d tensor; give "
                         f"at least one per dim")
    if any(s < 0 for s in sizes):
        raise ValueError(f"repeat: repeat sizes must be non-negative, got {sizes}")
    lead = len(sizes) - x.ndim
    shape = (1,) * lead + x.shape
    strides = (0,) * lead + x.strides
    # view (r0, n0, r1, n1, ...) with stride 0 on the copies, then one strided copy
    tiled = x._view([v for r, n in zip(sizes, shape) for v in (r, n)],
                    [v for s in strides for v in (0, s)])
    return tiled.clone().view(tuple(r * n for r, n in zip(sizes, shape)))


def roll(x, shifts, dims=None):
    """Shift elements along dims, wrapping around; with dims=None, over the flattened tensor.

    Example:
        cltensor.roll(x, 1, 0)   # the last row comes first
    """
    shifts = tuple(shifts) if isinstance(shifts, (list, tuple)) else (shifts,)
    if dims is None:
        if len(shifts) != 1:
            raise ValueError(f"roll: without dims, shifts must be one int, got {shifts}")
        return roll(x.flatten(), shifts, 0).view(x.shape)
    dims = tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: got {len(shifts)} shifts for {len(dims)} dims")
    out = x
    for shift, dim in zip(shifts, dims):
        d = _norm_dim(dim, x.ndim, "roll")
        n = x.shape[d] if x.ndim else 1
        s = _check_int(shift, "shifts", "roll") % n if n else 0
        if s:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out if out is not x else x.clone()


TENSOR_METHODS = {"split": split, "chunk": chunk, "flip": flip, "repeat": repeat, "roll": roll,
                  "split_with_sizes": split_with_sizes, "as_strided": as_strided}
