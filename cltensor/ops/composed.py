"""Tensor ops composed of other tensor ops, with no kernels of their own: lerp, addcmul, addcdiv,
unbind, var_mean, std_mean, kthvalue, median, unique and unique_consecutive, and torch's
shorthands (new_zeros and its kin, type_as, movedim, nansum, nanmean, isclose, allclose, equal,
count_nonzero, ...), with torch's names and semantics.

They call tensor methods, so they are differentiable through the ops they use (those that have
gradients: unique's outputs have none, as in torch). cltensor/__init__.py binds them as
functions and ClTensor methods once autograd has wrapped the methods they call.
"""
import math
import numbers

from .. import dtypes as dt
from ..tensor import ClTensor, _norm_dim, _size_args
from .reduce import return_types

__all__ = ["lerp", "addcmul", "addcdiv", "unbind", "var_mean", "std_mean", "kthvalue", "median",
           "unique", "unique_consecutive", "movedim", "moveaxis", "swapaxes", "msort", "nansum",
           "nanmean", "isclose", "allclose", "equal", "count_nonzero", "ravel", "clamp_min",
           "clamp_max"]


def _check_tensor(x, name, op):
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}: {name} must be a tensor, got {type(x).__name__}")


def lerp(input, end, weight):
    """input + weight * (end - input), as torch computes it (from the nearer end: for weight
    of at least 0.5, end - (end - input) * (1 - weight)); weight a number or a tensor.

    Example:
        >>> cltensor.lerp(cltensor.tensor([1.0]), cltensor.tensor([3.0]), 0.25).tolist()
        [1.5]
    """
    _check_tensor(input, "input", "lerp")
    _check_tensor(end, "end", "lerp")
    if not dt.is_floating(input.dtype):
        raise TypeError(f"lerp: expected a floating point input, got {input.dtype}")
    diff = end - input
    if isinstance(weight, ClTensor):
        from .. import where
        return where(weight.abs() < 0.5, input + weight * diff, end - diff * (1 - weight))
    if not isinstance(weight, numbers.Real) or isinstance(weight, bool):
        raise TypeError(f"lerp: weight must be a number or a tensor, got {type(weight).__name__}")
    return input + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2 (broadcast together).

    Example:
        >>> cltensor.addcmul(cltensor.ones(2), cltensor.ones(2), cltensor.ones(2), value=3).tolist()
        [4.0, 4.0]
    """
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _check_tensor(t, name, "addcmul")
    return input + value * (tensor1 * tensor2)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (broadcast together); floating tensor1 or tensor2.

    Example:
        >>> cltensor.addcdiv(cltensor.ones(2), cltensor.ones(2), cltensor.full((2,), 4.0)).tolist()
        [1.25, 1.25]
    """
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _check_tensor(t, name, "addcdiv")
    if not (dt.is_floating(tensor1.dtype) or dt.is_floating(tensor2.dtype)):
        raise TypeError(f"addcdiv: integer division is not supported (tensor1 {tensor1.dtype}, "
                        f"tensor2 {tensor2.dtype}); use input + value * tensor1 / tensor2")
    return input + value * (tensor1 / tensor2)


def unbind(input, dim=0):
    """The slices of input along dim, as a tuple of views.

    Example:
        >>> [t.tolist() for t in cltensor.tensor([[1, 2], [3, 4]]).unbind(1)]
        [[1, 3], [2, 4]]
    """
    _check_tensor(input, "input", "unbind")
    if input.ndim == 0:
        raise IndexError("unbind: a 0-d tensor has no dim to unbind")
    d = _norm_dim(dim, input.ndim, "unbind")
    return tuple(input.select(d, i) for i in range(input.shape[d]))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) of input over dim, with var's arguments.

    Example:
        >>> [t.tolist() for t in cltensor.var_mean(cltensor.tensor([1.0, 3.0]))]
        [2.0, 2.0]
    """
    return (input.var(dim, unbiased, keepdim, correction=correction),
            input.mean(dim, keepdim=keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) of input over dim, with std's arguments."""
    return (input.std(dim, unbiased, keepdim, correction=correction),
            input.mean(dim, keepdim=keepdim))


def _picked_from_sorted(input, dim, keepdim, position, op):
    """(values, indices) at `position` (a number, or an int64 tensor of the reduced shape) of
    input sorted along dim."""
    x = input.reshape(1) if input.ndim == 0 else input
    d = _norm_dim(dim, x.ndim, op)
    s = x.sort(d)
    if isinstance(position, ClTensor):
        at = position.unsqueeze(d)
        values, indices = s.values.gather(d, at), s.indices.gather(d, at)
    else:
        values = s.values.narrow(d, position, 1)
        indices = s.indices.narrow(d, position, 1)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return values.contiguous(), indices.contiguous()


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest element along dim (k from 1; NaN the largest).

    Example:
        >>> cltensor.kthvalue(cltensor.tensor([4.0, 1.0, 3.0]), 2).values.item()
        3.0
    """
    _check_tensor(input, "input", "kthvalue")
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise TypeError(f"kthvalue: k must be an int, got {type(k).__name__}")
    size = input.shape[_norm_dim(dim, input.ndim, "kthvalue")] if input.ndim else 1
    if not 1 <= k <= size:
        raise ValueError(f"kthvalue: k ({k}) out of range for a dim of size {size}")
    return return_types.kthvalue(*_picked_from_sorted(input, dim, keepdim, k - 1, "kthvalue"))


def median(input, dim=None, keepdim=False):
    """The lower median (the smaller middle value of an even count): of all elements without
    dim (NaN for an empty floating tensor), else (values, indices) along dim. NaN propagates: a
    row with a NaN has median NaN, at the index of its first NaN.

    Example:
        >>> cltensor.median(cltensor.tensor([4.0, 1.0, 3.0, 2.0])).item()
        2.0
    """
    _check_tensor(input, "input", "median")
    if dim is None:
        if input.numel() == 0:
            if not dt.is_floating(input.dtype):
                raise ValueError(f"median: the median of an empty {input.dtype} tensor is "
                                 f"undefined")
            return ClTensor.empty_on((), input.dtype, input.device).fill_(float("nan"))
        return median(input.reshape(-1), 0).values
    d = _norm_dim(dim, input.ndim, "median") if input.ndim else 0
    n = input.shape[d] if input.ndim else 1
    if n == 0:
        raise ValueError(f"median: dim {dim} of input of shape {input.shape} is empty")
    position = (n - 1) // 2
    if dt.is_floating(input.dtype):
        # NOTE: a row with k NaNs picks position n - k, its first NaN (NaN sorts last, stably);
        # computed for every row rather than after asking whether any NaN exists (a sync)
        from .. import where
        nans = input.isnan().sum(d) if input.ndim else input.isnan().long()
        position = where(nans > 0, n - nans, position)
    return return_types.median(*_picked_from_sorted(input, d, keepdim, position, "median"))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of input, ascending (also with sorted=False, as torch's CPU and CUDA
    kernels); return_inverse: each element's position among them (input's shape);
    return_counts: how often each occurs. Every NaN is distinct, as in torch.

    With dim: the distinct slices along dim, in lexicographic order (NaN as the largest, and a
    slice holding NaN distinct from every other), as a tensor of input's dtype with dim
    shortened; the inverse and the counts then have one entry per slice.

    Example:
        >>> cltensor.unique(cltensor.tensor([3, 1, 3])).tolist()
        [1, 3]
        >>> cltensor.unique(cltensor.tensor([[1, 2], [0, 5], [1, 2]]), dim=0).tolist()
        [[0, 5], [1, 2]]
    """
    _check_tensor(input, "input", "unique")
    if dim is None:
        s = input.detach().reshape(-1).sort()
        change = _changes(s.values)
        return _grouped(s.values[change], change, s.indices, input.shape, return_inverse,
                        return_counts)
    rows, d = _slices(input, dim, "unique")
    s = _lexicographic_ranks(rows).sort()
    change = _changes(s.values)
    values = input.detach().index_select(d, s.indices[change])
    return _grouped(values, change, s.indices, (rows.shape[0],), return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """input with each run of equal consecutive elements (with dim: slices along dim) kept once;
    return_inverse: each element's (slice's) run number; return_counts: each run's length.
    Without dim, input is flattened first; every NaN is a run of its own.

    Example:
        >>> cltensor.unique_consecutive(cltensor.tensor([1, 1, 2, 1])).tolist()
        [1, 2, 1]
    """
    _check_tensor(input, "input", "unique_consecutive")
    if dim is None:
        flat = input.detach().reshape(-1)
        change = _changes(flat)
        return _grouped(flat[change], change, None, input.shape, return_inverse, return_counts)
    rows, d = _slices(input, dim, "unique_consecutive")
    change = _changes(rows)
    values = input.detach().index_select(d, change.nonzero().reshape(-1))
    return _grouped(values, change, None, (rows.shape[0],), return_inverse, return_counts)


def _slices(input, dim, op):
    """(input's slices along dim as the rows of a 2-d tensor, dim normalized)."""
    if input.ndim == 0:
        raise IndexError(f"{op}: dim {dim} given for a 0-d tensor, which has no dims")
    d = _norm_dim(dim, input.ndim, op)
    others = [n for k, n in enumerate(input.shape) if k != d]
    if 0 in others and input.shape[d]:
        raise ValueError(f"{op}: the slices along dim {d} of a tensor of shape {input.shape} "
                         f"are empty and cannot be told apart")
    return movedim(input.detach(), d, 0).reshape(input.shape[d], math.prod(others)), d


def _lexicographic_ranks(rows):
    """Each row's rank among the distinct rows of a 2-d tensor (n, m), in lexicographic order
    (int64): the ranks within each column, then the ranks of groups of adjacent columns' ranks
    read as the digits of one int64 in base n, until one column is left."""
    n, m = rows.shape
    if n == 0:
        return ClTensor.empty_on((0,), dt.int64, rows.device)
    ranks = _dense_ranks(rows.t())
    digits = max(2, 62 // max(1, (n - 1).bit_length()))  # n ** digits < 2 ** 62
    while ranks.shape[0] > 1:
        starts = range(0, ranks.shape[0], digits)
        keys = ClTensor.empty_on((len(starts), n), dt.int64, rows.device)
        for k, start in enumerate(starts):
            key = ranks[start]
            for j in range(start + 1, min(start + digits, ranks.shape[0])):
                key = key * n + ranks[j]
            keys[k] = key
        ranks = _dense_ranks(keys)
    return ranks[0]


def _dense_ranks(keys):
    """For each row of a 2-d tensor, each element's rank among the row's distinct values (0 for
    the smallest; every NaN distinct, after the numbers), as int64."""
    s = keys.sort(1)
    change = _changes(s.values.reshape(-1)).reshape(keys.shape)
    change[:, 0] = True  # each row starts afresh
    group = change.long().cumsum(1) - 1
    return ClTensor.empty_on(keys.shape, dt.int64, keys.device).scatter_(1, s.indices, group)


def _changes(t):
    """A bool tensor (t.shape[0],): True first and where t[i] differs from t[i - 1] (in any
    element, for rows)."""
    n = t.shape[0]
    change = ClTensor.empty_on((n,), dt.bool_, t.device).fill_(True)
    if n > 1:
        differ = t[1:] != t[:-1]
        change[1:] = differ.any(1) if differ.ndim > 1 else differ
    return change


def _grouped(values, change, order, inverse_shape, return_inverse, return_counts):
    """unique's results from the distinct values and `change` (True where a group starts, over
    the elements in `order`: a permutation of them, or None for their own order)."""
    out = [values]
    n = change.numel()
    if return_inverse:
        group = change.long().cumsum(0) - 1
        inverse = group
        if order is not None:
            inverse = ClTensor.empty_on((n,), dt.int64, change.device)
            inverse[order] = group
        out.append(inverse.reshape(inverse_shape))
    if return_counts:
        starts = change.nonzero().reshape(-1)
        ends = ClTensor.empty_on(starts.shape, dt.int64, change.device)
        if starts.numel():
            ends[:-1] = starts[1:]
            ends[-1] = n
        out.append(ends - starts)
    return out[0] if len(out) == 1 else tuple(out)


# ---- conveniences: torch's shorthands over the ops above and the tensor's own ------------------

def _new_like_self(self, shape, fill, dtype, device, requires_grad):
    """A new tensor of shape (filled with fill unless None), of self's dtype and device unless
    given."""
    t = ClTensor.empty_on(shape, dtype or self.dtype, device or self.device)
    if fill is not None:
        t.fill_(fill)
    return t.requires_grad_() if requires_grad else t


def _new(fill, op):
    def new(self, *size, dtype=None, device=None, requires_grad=False):
        return _new_like_self(self, _size_args(size, op), fill, dtype, device, requires_grad)
    new.__name__ = op
    return new


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor of `size` filled with fill_value, of self's dtype and device unless given."""
    return _new_like_self(self, _size_args((size,), "new_full"), fill_value, dtype, device,
                          requires_grad)


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A copy of data as a tensor of self's dtype and device unless given."""
    from .. import creation
    t = creation.tensor(data, dtype=dtype or self.dtype, device=device or self.device)
    return t.requires_grad_() if requires_grad else t


def type_as(self, other):
    """self converted to other's dtype."""
    return self.to(other.dtype)


def movedim(input, source, destination):
    """input with dims `source` moved to positions `destination` (ints or sequences of them),
    the other dims keeping their order; a view.

    Example:
        >>> cltensor.zeros(2, 3, 4).movedim(0, -1).shape
        (3, 4, 2)
    """
    src = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    dst = tuple(destination) if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} must have "
                         f"the same number of dims")
    src = [_norm_dim(d, input.ndim, "movedim") for d in src]
    dst = [_norm_dim(d, input.ndim, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dim in source {source} or destination "
                         f"{destination}")
    order = [None] * input.ndim
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(d for d in range(input.ndim) if d not in src)
    return input.permute(*[o if o is not None else next(rest) for o in order])


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    """input.transpose(axis0, axis1)."""
    return input.transpose(axis0, axis1)


def ravel(input):
    """input flattened to 1-d (a view when its memory allows, else a copy)."""
    return input.reshape(-1)


def clamp_min(input, min):
    return input.clamp(min=min)


def clamp_max(input, max):
    return input.clamp(max=max)


def msort(input):
    """input sorted along dim 0 (values only)."""
    return input.sort(0).values


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum over dim with NaN counted as zero."""
    x = input.masked_fill(input.isnan(), 0) if dt.is_floating(input.dtype) else input
    return x.sum(dim, keepdim=keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean over dim of the elements that are not NaN (NaN where all are)."""
    if not dt.is_floating(input.dtype):
        raise TypeError(f"nanmean: expected a floating point input, got {input.dtype}")
    nan = input.isnan()
    total = input.masked_fill(nan, 0).sum(dim, keepdim=keepdim, dtype=dtype)
    return total / (~nan).sum(dim, keepdim=keepdim)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise, the difference finite (equal
    infinities are close; NaN only with equal_nan), as a bool tensor."""
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    if input.dtype == dt.bool_:
        return input == other
    error = (input - other).abs()
    close = (input == other) | (error.isfinite() & (error <= atol + rtol * other.abs()))
    return close | (input.isnan() & other.isnan()) if equal_nan else close


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of input is close to other's (isclose), as a Python bool."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """True when input and other have the same shape and elements (NaN is never equal)."""
    return tuple(input.shape) == tuple(other.shape) and bool((input == other).all())


def count_nonzero(input, dim=None):
    """The number of non-zero elements (over dim), as int64."""
    return (input != 0).sum(dim)


TENSOR_METHODS = {f.__name__: f for f in (
    lerp, addcmul, addcdiv, unbind, kthvalue, median, unique, unique_consecutive, new_full,
    new_tensor, type_as, movedim, swapaxes, ravel, clamp_min, clamp_max, msort, nansum, nanmean,
    isclose, allclose, equal, count_nonzero)}
TENSOR_METHODS.update(new_zeros=_new(0, "new_zeros"), new_ones=_new(1, "new_ones"),
                      new_empty=_new(None, "new_empty"),
                      moveaxis=movedim, nelement=ClTensor.numel)
