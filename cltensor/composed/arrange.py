"""Arranging tensors, composed of other tensor ops (no kernels of their own), with torch's names,
signatures and errors: grids (meshgrid, broadcast_tensors, cartesian_prod), stacking (hstack,
vstack / row_stack, dstack, column_stack, atleast_1d/2d/3d, block_diag), splitting and
repeating (tensor_split, tile, repeat_interleave), turning (rot90, fliplr, flipud), diagonals
(diagonal, trace, diag_embed), diff, and the function forms of the view methods (narrow,
select, squeeze, unsqueeze, flatten, unflatten, broadcast_to, permute, reshape, transpose, t).

They call tensor methods and the cltensor functions autograd has wrapped, so they are
differentiable through those (diagonal is the view method ClTensor.diagonal, whose gradient
autograd's Slice gives, as it does narrow's).
cltensor/__init__.py exports them as functions, cltensor/composed_methods.py binds them as methods.
"""
import functools
import warnings

import numpy as np

from .. import dtypes as dt
from ..autograd.namespace import arange, cat, pad, stack, where, zeros
from ..creation import from_numpy
from ..ops import elementwise as ew
from ..ops.shape import _check_int, _dims_arg, _tensor_list
from ..tensor import ClTensor, _norm_dim
from .composed import _check_tensor, movedim

__all__ = ["meshgrid", "broadcast_tensors", "cartesian_prod", "atleast_1d", "atleast_2d",
           "atleast_3d", "hstack", "vstack", "row_stack", "dstack", "column_stack", "block_diag",
           "tensor_split", "tile", "repeat_interleave", "rot90", "fliplr", "flipud", "diagonal",
           "trace", "diag_embed", "diff", "broadcast_to", "narrow", "select", "squeeze",
           "unsqueeze", "flatten", "unflatten", "permute", "reshape", "transpose", "t"]


def _tensors(tensors, op, what="element"):
    """The tensors of f(a, b, ...) or f([a, b, ...]): checked to be tensors on one device."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, ClTensor):
            raise TypeError(f"{op}: expected a tensor as {what} {i}, got {type(t).__name__}")
    if tensors:
        ew.common_device(list(tensors), op)
    return tensors


# ---- grids ------------------------------------------------------------------------------------

def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-d or 1-d tensors (as views of them): output i holds tensors[i]
    along dim i ("ij") or, with "xy", dims 0 and 1 swapped (rows follow the second tensor).
    Without indexing it is "ij" and a warning says so, as in torch.

    Example:
        >>> x, y = cltensor.meshgrid(cltensor.arange(2), cltensor.arange(3), indexing="ij")
        >>> x.shape
        (2, 3)
    """
    tensors = _tensors(tensors, "meshgrid")
    if indexing is None:
        warnings.warn("meshgrid: pass indexing='ij' or 'xy'; without it 'ij' is used (torch "
                      "will require the argument)", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'meshgrid: indexing must be one of "xy" or "ij", but received: '
                           f'{indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid: expected 0-d or 1-d tensors, got shape {t.shape} "
                               f"at position {i}")
        if t.dtype != tensors[0].dtype:
            raise RuntimeError(f"meshgrid expects all tensors to have the same dtype, got "
                               f"{tensors[0].dtype} at position 0 and {t.dtype} at {i}")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(order) > 1:
        order[0], order[1] = 1, 0
    shape = tuple(tensors[k].numel() for k in order)
    grids = [None] * len(tensors)
    for axis, k in enumerate(order):
        along = [1] * len(shape)
        along[axis] = shape[axis]
        grids[k] = tensors[k].reshape(along).expand(shape)
    return tuple(grids)


def broadcast_tensors(*tensors):
    """The tensors expanded (as views) to their common broadcast shape.

    Example:
        >>> [t.shape for t in cltensor.broadcast_tensors(cltensor.ones(2, 1), cltensor.ones(3))]
        [(2, 3), (2, 3)]
    """
    tensors = _tensors(tensors, "broadcast_tensors")
    shape = ew.broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


def cartesian_prod(*tensors):
    """The cartesian product of 1-d tensors: one row per combination (the last tensor varying
    fastest); a single tensor is returned as it is.

    Example:
        >>> cltensor.cartesian_prod(cltensor.tensor([1, 2]), cltensor.tensor([3, 4])).tolist()
        [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    tensors = _tensors(tensors, "cartesian_prod")
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expect a 1D vector, but got shape {t.shape}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


# ---- stacking ---------------------------------------------------------------------------------

def _at_least(tensors, grow, op):
    """grow(t) of one tensor, or a tuple of them for several (or a list)."""
    if len(tensors) == 1 and isinstance(tensors[0], ClTensor):
        return grow(tensors[0])
    return tuple(grow(t) for t in _tensors(tensors, op))


def _grow_1d(t):
    return t.reshape(1) if t.ndim == 0 else t


def _grow_2d(t):
    return t.reshape((1,) * (2 - t.ndim) + t.shape) if t.ndim < 2 else t


def _grow_3d(t):
    if t.ndim >= 3:
        return t
    return t.reshape({0: (1, 1, 1), 1: (1,) + t.shape + (1,), 2: t.shape + (1,)}[t.ndim])


def atleast_1d(*tensors):
    """Each tensor with at least one dim (0-d becomes (1,)); views. One tensor gives a tensor,
    several (or a list) a tuple."""
    return _at_least(tensors, _grow_1d, "atleast_1d")


def atleast_2d(*tensors):
    """Each tensor with at least two dims: 0-d becomes (1, 1), (n,) becomes (1, n)."""
    return _at_least(tensors, _grow_2d, "atleast_2d")


def atleast_3d(*tensors):
    """Each tensor with at least three dims: 0-d becomes (1, 1, 1), (n,) becomes (1, n, 1),
    (m, n) becomes (m, n, 1)."""
    return _at_least(tensors, _grow_3d, "atleast_3d")


def _stack_inputs(tensors, grow, op):
    if isinstance(tensors, (list, tuple)) and not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    return [grow(t) for t in _tensor_list(tensors, op)]


def hstack(tensors):
    """Join tensors column-wise: along dim 0 for 1-d ones (0-d become 1-d), else along dim 1.

    Example:
        >>> cltensor.hstack([cltensor.ones(2, 1), cltensor.zeros(2, 2)]).shape
        (2, 3)
    """
    parts = _stack_inputs(tensors, _grow_1d, "hstack")
    return cat(parts, 0 if parts[0].ndim == 1 else 1)


def vstack(tensors):
    """Join tensors row-wise (along dim 0), 0-d and 1-d ones made 2-d first ((n,) is a row).

    Example:
        >>> cltensor.vstack([cltensor.ones(3), cltensor.zeros(3)]).shape
        (2, 3)
    """
    return cat(_stack_inputs(tensors, _grow_2d, "vstack"), 0)


row_stack = vstack


def dstack(tensors):
    """Join tensors depth-wise (along dim 2), each made at least 3-d (atleast_3d) first."""
    return cat(_stack_inputs(tensors, _grow_3d, "dstack"), 2)


def column_stack(tensors):
    """Join tensors as columns (along dim 1): 0-d and 1-d ones become (n, 1) columns."""
    return cat(_stack_inputs(tensors, lambda t: t.reshape(t.numel(), 1) if t.ndim < 2 else t,
                             "column_stack"), 1)


def block_diag(*tensors):
    """A matrix with the tensors (0-d, 1-d as a row, or 2-d) along its diagonal, zeros elsewhere,
    of their promoted dtype.

    Example:
        >>> cltensor.block_diag(cltensor.tensor([[1, 2]]), cltensor.tensor(3)).tolist()
        [[1, 2, 0], [0, 0, 3]]
    """
    tensors = _tensors(tensors, "block_diag")
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.ndim} dimensions")
    if not tensors:
        return zeros(1, 0)
    dtype = functools.reduce(dt.promote_types, (t.dtype for t in tensors))
    blocks = [t.reshape(1, t.numel()) if t.ndim < 2 else t for t in tensors]
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        rows.append(pad(b.to(dtype), (left, width - left - b.shape[1])))
        left += b.shape[1]
    return cat(rows, 0)


# ---- splitting and repeating ------------------------------------------------------------------

def _split_bounds(indices_or_sections, n):
    """(start, stop) of each piece of a dim of size n."""
    spec = indices_or_sections
    if isinstance(spec, ClTensor):
        if spec.dtype != dt.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {spec.dtype}")
        if spec.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                               f"zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {spec.ndim} dims")
        spec = spec.tolist()
    if isinstance(spec, (list, tuple)):
        cuts = [_check_int(i, "indices", "tensor_split") for i in spec]
        # NOTE: each piece is input[start:stop] with Python's slice rules (negatives wrap,
        # bounds clamp, stop before start gives an empty piece), as at::slice
        return [slice(a, b).indices(n)[:2] for a, b in zip([0] + cuts, cuts + [None])]
    sections = _check_int(spec, "sections", "tensor_split")
    if sections <= 0:
        raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got "
                           f"{sections}")
    size, extra = divmod(n, sections)
    stops = np.cumsum([size + 1] * extra + [size] * (sections - extra)).tolist()
    return list(zip([0] + stops[:-1], stops))


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input along dim: `sections` pieces (an int: the first n % sections one longer),
    or the pieces between the indices of a list (an int64 tensor is read as either, by its
    dims), as torch.tensor_split.

    Example:
        >>> [t.tolist() for t in cltensor.arange(5).tensor_split([1, 3])]
        [[0], [1, 2], [3, 4]]
    """
    _check_tensor(input, "input", "tensor_split")
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = _norm_dim(dim, input.ndim, "tensor_split")
    bounds = _split_bounds(indices_or_sections, input.shape[d])
    return tuple(input.narrow(d, start, max(0, stop - start)) for start, stop in bounds)


def tile(input, *dims):
    """input repeated dims[i] times along each dim; fewer dims than input's are padded with
    ones in front (torch.tile(x, (2,)) on a matrix repeats the columns).

    Example:
        >>> cltensor.tile(cltensor.tensor([[1, 2]]), (2,)).tolist()
        [[1, 2, 1, 2]]
    """
    _check_tensor(input, "input", "tile")
    dims = tuple(_check_int(n, "dims", "tile") for n in _dims_arg(dims))
    if any(n < 0 for n in dims):
        raise RuntimeError(f"tile: trying to create a tensor with a negative dimension: dims "
                           f"{dims}")
    return input.repeat((1,) * (input.ndim - len(dims)) + dims)


def _repeat_counts(repeats, n, op):
    """repeats (an integer tensor of n counts, or of one count for all) as a host list."""
    if dt.category(repeats.dtype) != 1:
        raise TypeError(f"{op}: repeats must be an integer tensor, got {repeats.dtype}")
    counts = repeats.reshape(-1).tolist()
    if len(counts) == 1 and n is not None:
        counts *= n
    if n is not None and len(counts) != n:
        raise RuntimeError(f"{op}: repeats must have the same size as input along dim, but "
                           f"got repeats.size(0) = {len(counts)} and input.size(dim) = {n}")
    if any(c < 0 for c in counts):
        raise RuntimeError(f"{op}: repeats can not be negative")
    return counts


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (slice along dim; of the flattened input without dim) repeated: `repeats`
    times (an int), or repeats[i] times for element i (an integer tensor of input.size(dim)
    counts, or of one). repeat_interleave(counts) alone gives each position i of counts,
    counts[i] times. output_size, when given, must be the result's size along dim.

    Example:
        >>> cltensor.tensor([1, 2]).repeat_interleave(cltensor.tensor([2, 1])).tolist()
        [1, 1, 2]
    """
    op = "repeat_interleave"
    _check_tensor(input, "input", op)
    if repeats is None:
        if input.ndim != 1:
            raise RuntimeError(f"{op}: only accepts a 1-d tensor of repeats, got shape "
                               f"{input.shape}")
        return _positions(_repeat_counts(input, None, op), output_size, input.device, op)
    if dim is not None and input.ndim == 0:
        raise IndexError(f"{op}: a 0-d input has no dim {dim} to repeat along; leave dim None")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _norm_dim(dim, input.ndim, op)
    if isinstance(repeats, ClTensor):
        if repeats.ndim > 1:
            raise RuntimeError(f"{op}: repeats must be 0-dim or 1-dim tensor, got shape "
                               f"{repeats.shape}")
        counts = _repeat_counts(repeats, x.shape[d], op)
        return x.index_select(d, _positions(counts, output_size, x.device, op))
    r = _check_int(repeats, "repeats", op)
    if r < 0:
        raise RuntimeError(f"{op}: repeats must be non-negative, got {r}")
    if output_size is not None and output_size != r * x.shape[d]:
        raise RuntimeError(f"{op}: output_size {output_size} does not match the required size "
                           f"{r * x.shape[d]}")
    shape = x.shape[:d + 1] + (r,) + x.shape[d + 1:]
    return x.unsqueeze(d + 1).expand(shape).flatten(d, d + 1)


def _positions(counts, output_size, device, op):
    """The int64 tensor holding each i, counts[i] times."""
    total = sum(counts)
    if output_size is not None and output_size != total:
        raise RuntimeError(f"{op}: output_size {output_size} does not match the required size "
                           f"{total} (the sum of repeats)")
    return from_numpy(np.repeat(np.arange(len(counts), dtype=np.int64), counts), device=device)


# ---- turning ----------------------------------------------------------------------------------

def rot90(input, k=1, dims=(0, 1)):
    """input rotated by k quarter turns in the plane of dims, from dims[0] towards dims[1]
    (k < 0 turns the other way); a copy.

    Example:
        >>> cltensor.tensor([[1, 2], [3, 4]]).rot90().tolist()
        [[2, 4], [1, 3]]
    """
    _check_tensor(input, "input", "rot90")
    k = _check_int(k, "k", "rot90")
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected total rotation dims == 2, but got dims = "
                           f"{len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (_norm_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise RuntimeError(f"rot90: expected rotation dims to be different, but got dim0 = "
                           f"{dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def fliplr(input):
    """input with its columns (dim 1) in reverse order; at least 2-d."""
    _check_tensor(input, "input", "fliplr")
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: input must be >= 2-d, got {input.ndim}-d")
    return input.flip(1)


def flipud(input):
    """input with its rows (dim 0) in reverse order; at least 1-d."""
    _check_tensor(input, "input", "flipud")
    if input.ndim < 1:
        raise RuntimeError("flipud: input must be >= 1-d, got a 0-d tensor")
    return input.flip(0)


# ---- diagonals and differences ----------------------------------------------------------------

def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the matrices in dims dim1 and dim2, as a view (ClTensor.diagonal).

    Example:
        >>> cltensor.diagonal(cltensor.tensor([[1, 2], [3, 4]]), 1).tolist()
        [2]
    """
    _check_tensor(input, "input", "diagonal")
    return input.diagonal(offset, dim1, dim2)


def trace(input):
    """The sum of a matrix's main diagonal (int64 for integer input).

    Example:
        >>> cltensor.tensor([[1, 2], [3, 4]]).trace().item()
        5
    """
    _check_tensor(input, "input", "trace")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return diagonal(input).sum()


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with input's last dim on their diagonal `offset`, zeros elsewhere, in dims
    dim1 (rows) and dim2 (columns) of the result, which has one dim more than input.

    Example:
        >>> cltensor.diag_embed(cltensor.tensor([1, 2])).tolist()
        [[1, 0], [0, 2]]
    """
    _check_tensor(input, "input", "diag_embed")
    offset = _check_int(offset, "offset", "diag_embed")
    d1 = _norm_dim(dim1, input.ndim + 1, "diag_embed")
    d2 = _norm_dim(dim2, input.ndim + 1, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}")
    at = arange(input.shape[-1] + abs(offset), device=input.device)
    on_diagonal = at.unsqueeze(0) - at.unsqueeze(1) == offset  # column - row
    by_row = pad(input, (0, offset) if offset >= 0 else (-offset, 0))  # row i's value at i
    square = where(on_diagonal, by_row.unsqueeze(-1), input.new_zeros(()))
    return movedim(square, (-2, -1), (d1, d2))


def _check_diff_edge(input, edge, d, name):
    if not isinstance(edge, ClTensor):
        raise TypeError(f"diff: {name} must be a tensor, got {type(edge).__name__}")
    if edge.ndim != input.ndim:
        raise RuntimeError(f"diff expects prepend or append to be the same dimension as input: "
                           f"{name} has {edge.ndim} dims, input {input.ndim}")
    if any(a != b for k, (a, b) in enumerate(zip(edge.shape, input.shape)) if k != d):
        raise RuntimeError(f"diff expects the shape of {name} {edge.shape} to match that of "
                           f"input {input.shape} except along dim {d}")


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (x[i + 1] - x[i], repeated n times; != for bool),
    of input with prepend and append joined at its ends first.

    Example:
        >>> cltensor.tensor([1, 4, 9]).diff().tolist()
        [3, 5]
    """
    _check_tensor(input, "input", "diff")
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    n = _check_int(n, "n", "diff")
    if n < 0:
        raise RuntimeError(f"diff: order must be non-negative but got {n}")
    d = _norm_dim(dim, input.ndim, "diff")
    edges = [(name, t) for name, t in (("prepend", prepend), ("append", append)) if t is not None]
    for name, edge in edges:
        _check_diff_edge(input, edge, d, name)
    if n == 0:
        return input.clone()  # NOTE: as torch, without prepend and append
    x = input
    if edges:
        x = cat([t for t in (prepend, input, append) if t is not None], d)
    for _ in range(min(n, x.shape[d])):
        later, earlier = x.narrow(d, 1, x.shape[d] - 1), x.narrow(d, 0, x.shape[d] - 1)
        x = later != earlier if x.dtype == dt.bool_ else later - earlier
    return x if x is not input else input.clone()


# ---- the view methods as functions ------------------------------------------------------------

def broadcast_to(input, size):
    """input.expand(size): a view."""
    _check_tensor(input, "input", "broadcast_to")
    return input.expand(size)


def narrow(input, dim, start, length):
    """input.narrow(dim, start, length): a view."""
    _check_tensor(input, "input", "narrow")
    return input.narrow(dim, start, length)


def select(input, dim, index):
    """input.select(dim, index): a view."""
    _check_tensor(input, "input", "select")
    return input.select(dim, index)


def squeeze(input, dim=None):
    """input.squeeze(dim): a view."""
    _check_tensor(input, "input", "squeeze")
    return input.squeeze(dim)


def unsqueeze(input, dim):
    """input.unsqueeze(dim): a view."""
    _check_tensor(input, "input", "unsqueeze")
    return input.unsqueeze(dim)


def flatten(input, start_dim=0, end_dim=-1):
    """input.flatten(start_dim, end_dim): a view when its memory allows."""
    _check_tensor(input, "input", "flatten")
    return input.flatten(start_dim, end_dim)


def unflatten(input, dim, sizes):
    """input.unflatten(dim, sizes)."""
    _check_tensor(input, "input", "unflatten")
    return input.unflatten(dim, sizes)


def permute(input, dims):
    """input.permute(dims): a view."""
    _check_tensor(input, "input", "permute")
    return input.permute(dims)


def reshape(input, shape):
    """input.reshape(shape): a view when its memory allows."""
    _check_tensor(input, "input", "reshape")
    return input.reshape(shape)


def transpose(input, dim0, dim1):
    """input.transpose(dim0, dim1): a view."""
    _check_tensor(input, "input", "transpose")
    return input.transpose(dim0, dim1)


def t(input):
    """input.t(): a view."""
    _check_tensor(input, "input", "t")
    return input.t()


TENSOR_METHODS = {f.__name__: f for f in (
    tensor_split, tile, repeat_interleave, rot90, fliplr, flipud, trace, diag_embed,
    diff)}
