"""Tensor ops composed of other tensor ops, with no kernels of their own: lerp, addcmul, addcdiv,
unbind, var_mean, std_mean, kthvalue, median, nanmedian, mode, unique and unique_consecutive,
cov, corrcoef, multinomial, index_reduce, polygamma, mvlgamma, ldexp, float_power, and torch's
shorthands (new_zeros and its kin, type_as, movedim, nansum, nanmean, isclose, allclose, equal,
count_nonzero, sum_to_size, hsplit, ...), with torch's names and semantics. Their in-place forms
are in inplace.py.

They call tensor methods, so they are differentiable through the ops they use (those that have
gradients: unique's outputs have none, as in torch). cltensor/__init__.py exports them as
functions and cltensor/composed_methods.py binds them as ClTensor methods.
"""
import math
import numbers

from .. import creation
from .. import dtypes as dt
from ..autograd.namespace import arange, cat, rand, where
from ..device import get_device
from ..ops.elementwise import expect_tensor as _check_tensor
from ..ops.reduce import return_types
from ..ops.sort import searchsorted
from ..tensor import ClTensor, _norm_dim, _size_args

__all__ = ["lerp", "addcmul", "addcdiv", "unbind", "var_mean", "std_mean", "kthvalue", "median",
           "unique", "unique_consecutive", "movedim", "moveaxis", "swapaxes", "msort", "nansum",
           "nanmean", "isclose", "allclose", "equal", "count_nonzero", "ravel", "clamp_min",
           "clamp_max", "polygamma", "mvlgamma", "ldexp", "float_power", "angle", "diagflat",
           "narrow_copy", "hsplit", "vsplit", "dsplit", "nanmedian", "mode", "cov", "corrcoef",
           "multinomial", "index_reduce"]


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
    t = ClTensor.empty_on(shape, dtype or self.dtype,
                          self.device if device is None else get_device(device))
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


# ---- special functions composed of the kernel ops ---------------------------------------------

def polygamma(n, input):
    """The n-th derivative of digamma (n >= 0) at input's elements; integer inputs give
    float32.

    Example:
        >>> round(cltensor.polygamma(1, cltensor.tensor([1.0])).item(), 6)   # pi^2 / 6
        1.644934
    """
    _check_tensor(input, "input", "polygamma")
    return input._polygamma(n)


def _polygamma_method(self, n):
    return self._polygamma(n)


def _polygamma_in_place(self, n):
    return self._polygamma_(n)


def mvlgamma(input, p):
    """The log of the multivariate gamma function of dimension p (p >= 1):
    sum over i < p of lgamma(input - i / 2), plus p (p - 1) / 4 log(pi)."""
    _check_tensor(input, "input", "mvlgamma")
    if not isinstance(p, numbers.Integral) or isinstance(p, bool) or p < 1:
        raise ValueError(f"mvlgamma: p has to be an int greater than or equal to 1, got {p!r}")
    x = input if dt.is_floating(input.dtype) else input.float()
    halves = arange(p, dtype=x.dtype, device=x.device) * 0.5
    return (x.unsqueeze(-1) - halves).lgamma().sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def ldexp(input, other):
    """input * 2 ** other (integer inputs give float32).

    Example:
        >>> cltensor.ldexp(cltensor.tensor([1.0, 3.0]), cltensor.tensor([2, -1])).tolist()
        [4.0, 1.5]
    """
    _check_tensor(input, "input", "ldexp")
    return input * (2.0 ** other)


def float_power(input, exponent):
    """input ** exponent computed in float64, whatever the dtypes (a number may stand for
    either operand)."""
    if not isinstance(input, ClTensor) and not isinstance(exponent, ClTensor):
        raise TypeError("float_power: expected a tensor operand")
    base, power = (v.double() if isinstance(v, ClTensor) else v for v in (input, exponent))
    return base ** power


def angle(input):
    """The argument of each element as a complex number: pi where negative, else 0 (NaN stays);
    integer inputs give float32."""
    _check_tensor(input, "input", "angle")
    x = input if dt.is_floating(input.dtype) else input.float()
    return where(x.isnan(), x, where(x < 0, math.pi, 0.0))


# ---- shapes, views and copies ---------------------------------------------------------------

def diagflat(input, offset=0):
    """The square matrix with input's elements (flattened) on diagonal `offset`."""
    _check_tensor(input, "input", "diagflat")
    return input.reshape(-1).diag(offset)


def sum_to_size(self, *size):
    """self summed over the dims it was broadcast along from `size` (expandable to self's
    shape)."""
    size = _size_args(size, "sum_to_size")
    lead = self.ndim - len(size)
    if lead < 0 or any(n not in (1, m) for n, m in zip(size, self.shape[lead:])):
        raise ValueError(f"sum_to_size: size {size} is not expandable to size {self.shape}")
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size)
                                      if n == 1 and self.shape[lead + i] != 1)
    return self.sum(dims, keepdim=True).reshape(size) if dims else self


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False):
    """An uninitialized tensor of the given sizes and strides, of self's dtype and device unless
    given (its storage as large as the strides need)."""
    size = _size_args((size,), "new_empty_strided")
    stride = _size_args((stride,), "new_empty_strided")
    if len(size) != len(stride):
        raise ValueError(f"new_empty_strided: {len(stride)} strides given for {len(size)} sizes")
    need = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    base = _new_like_self(self, (need,), None, dtype, device, False)
    t = base.as_strided(size, stride, 0)
    return t.requires_grad_() if requires_grad else t


def narrow_copy(input, dim, start, length):
    """A copy of input.narrow(dim, start, length)."""
    return input.narrow(dim, start, length).clone()


def _split_along(input, sections, dim, min_dims, op):
    _check_tensor(input, "input", op)
    if input.ndim < min_dims:
        raise ValueError(f"{op}: expects a tensor of at least {min_dims} dims, got "
                         f"{input.ndim}-d")
    if isinstance(sections, numbers.Integral) and (sections <= 0 or input.shape[dim] % sections):
        raise ValueError(f"{op}: cannot split dim {dim} of size {input.shape[dim]} into "
                         f"{sections} equal sections")
    return input.tensor_split(sections, dim)


def hsplit(input, sections):
    """tensor_split along dim 1 (dim 0 of a 1-d tensor); an int must divide that dim."""
    return _split_along(input, sections, 1 if input.ndim > 1 else 0, 1, "hsplit")


def vsplit(input, sections):
    """tensor_split along dim 0 of a tensor of 2 or more dims; an int must divide it."""
    return _split_along(input, sections, 0, 2, "vsplit")


def dsplit(input, sections):
    """tensor_split along dim 2 of a tensor of 3 or more dims; an int must divide it."""
    return _split_along(input, sections, 2, 3, "dsplit")


# ---- reductions and statistics ----------------------------------------------------------------

def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaN: the lower median of each row's numbers; NaN only where a row has
    none (then at the row's first position).

    Example:
        >>> cltensor.nanmedian(cltensor.tensor([1.0, float("nan"), 3.0, 2.0])).item()
        2.0
    """
    _check_tensor(input, "input", "nanmedian")
    if dim is None:
        if input.numel() == 0 or not dt.is_floating(input.dtype):
            return median(input)
        return nanmedian(input.reshape(-1), 0).values
    if not dt.is_floating(input.dtype):
        return return_types.nanmedian(*median(input, dim, keepdim))
    d = _norm_dim(dim, input.ndim, "nanmedian") if input.ndim else 0
    if input.ndim and input.shape[d] == 0:
        raise ValueError(f"nanmedian: dim {dim} of input of shape {input.shape} is empty")
    numbers_ = (~input.isnan()).sum(d) if input.ndim else (~input.isnan()).long()
    position = where(numbers_ > 0, (numbers_ - 1) // 2, 0)
    return return_types.nanmedian(*_picked_from_sorted(input, d, keepdim, position, "nanmedian"))


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along dim (the smallest of equally frequent
    ones) and the position of its last occurrence, as torch's CPU kernel.

    Example:
        >>> cltensor.mode(cltensor.tensor([3, 1, 3, 1, 2])).values.item()
        1
    """
    _check_tensor(input, "input", "mode")
    x = input.reshape(1) if input.ndim == 0 else input
    d = _norm_dim(dim, x.ndim, "mode")
    n = x.shape[d]
    if n == 0:
        raise ValueError(f"mode: dim {dim} of input of shape {input.shape} is empty")
    s = x.sort(d, stable=True)
    pos = arange(n, device=x.device).reshape([n if k == d else 1 for k in range(x.ndim)])
    v = s.values.detach()
    first = ClTensor.empty_on(v.narrow(d, 0, 1).shape, dt.bool_, v.device).fill_(True)
    starts = cat([first, v.narrow(d, 1, n - 1) != v.narrow(d, 0, n - 1)], d)
    run = pos - where(starts, pos, 0).cummax(d).values  # each element's place in its run
    best = run.argmax(d, keepdim=True)  # the end of the first longest run
    values, indices = s.values.gather(d, best), s.indices.gather(d, best)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return return_types.mode(values, indices)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (a 1-d input is one variable),
    observations in its columns; fweights (integer) and aweights weigh each observation, as
    torch.cov.

    Example:
        >>> cltensor.cov(cltensor.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    _check_tensor(input, "input", "cov")
    if input.ndim > 2:
        raise ValueError(f"cov: expected input to have two or fewer dims, got {input.ndim}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    x = x if dt.is_floating(x.dtype) else x.float()
    w = _cov_weights(x, fweights, aweights)
    w_sum = w.sum() if w is not None else x.shape[1]
    mean = (x * w).sum(1, keepdim=True) / w_sum if w is not None else x.mean(1, keepdim=True)
    norm = w_sum - correction
    if w is not None and correction != 0 and aweights is not None:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    centered = x - mean
    c = centered.matmul((centered * w if w is not None else centered).t())
    c = c / (norm.clamp(min=0) if isinstance(norm, ClTensor) else max(norm, 0))
    return c.squeeze() if input.ndim < 2 else c


def _cov_weights(x, fweights, aweights):
    """The observations' weights: fweights * aweights (either alone), or None."""
    w = None
    for name, t, kinds in (("fweights", fweights, "iu"), ("aweights", aweights, "f")):
        if t is None:
            continue
        _check_tensor(t, name, "cov")
        if t.ndim > 1 or t.numel() != x.shape[1]:
            raise ValueError(f"cov: expected {name} to be 1-d with {x.shape[1]} elements, got "
                             f"shape {t.shape}")
        if t.dtype.kind not in kinds:
            raise TypeError(f"cov: expected {name} of {'integral' if kinds == 'iu' else 'floating'}"
                            f" dtype, got {t.dtype}")
        if bool((t < 0).any()):
            raise ValueError(f"cov: {name} cannot be negative")
        w = t if w is None else w * t
    return None if w is None else w.to(x.dtype)


def corrcoef(input):
    """The Pearson correlation coefficients of the variables in input's rows (cov normalized by
    the standard deviations, clipped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples category indices per row of input (1-d or 2-d: non-negative weights, not
    all zero), drawn with probabilities proportional to the weights; without replacement each
    row's indices are distinct (as many as there are categories at most).

    Example:
        >>> cltensor.multinomial(cltensor.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
        [1, 1]
    """
    p = _multinomial_rows(input, num_samples, replacement)
    rows, n = p.shape
    if replacement:  # inverse CDF: the first category whose cumulative weight exceeds u
        cdf = p.cumsum(1)
        u = rand(rows, num_samples, dtype=p.dtype, device=p.device, generator=generator)
        picked = searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=n - 1)
    else:  # the order in which exponential clocks of rates p ring: sequential sampling
        clocks = ClTensor.empty_on(p.shape, p.dtype, p.device).exponential_(generator=generator)
        picked = (clocks / p).topk(num_samples, 1, largest=False).indices
    return picked.reshape(-1) if input.ndim == 1 else picked


def _multinomial_rows(input, num_samples, replacement):
    """input's weights as rows (checked), and num_samples checked against them."""
    _check_tensor(input, "input", "multinomial")
    if not dt.is_floating(input.dtype):
        raise TypeError(f"multinomial: expected a floating point input, got {input.dtype}")
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise ValueError(f"multinomial: expected a 1-d or 2-d input with categories, got shape "
                         f"{input.shape}")
    if not isinstance(num_samples, numbers.Integral) or num_samples <= 0:
        raise ValueError(f"multinomial: cannot sample n_sample <= 0 samples, got {num_samples!r}")
    if not replacement and num_samples > input.shape[-1]:
        raise ValueError(f"multinomial: cannot sample {num_samples} > {input.shape[-1]} "
                         f"categories without replacement")
    p = input.detach().reshape(-1, input.shape[-1])
    if bool(((p < 0) | ~p.isfinite()).any()):
        raise ValueError("multinomial: probabilities must be finite and non-negative")
    if bool((p.sum(1) <= 0).any()):
        raise ValueError("multinomial: invalid distribution (sum of probabilities <= 0)")
    return p


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """input with source's slices along dim combined into the slices at index by `reduce`
    ("prod", "mean", "amax" or "amin"; with include_self, input's own values take part), as
    torch.Tensor.index_reduce.

    Example:
        >>> x = cltensor.ones(3)
        >>> x.index_reduce(0, cltensor.tensor([0, 0]), cltensor.tensor([2.0, 3.0]), "prod").tolist()
        [6.0, 1.0, 1.0]
    """
    op = "index_reduce"
    for name, t in (("input", input), ("index", index), ("source", source)):
        _check_tensor(t, name, op)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ValueError(f"{op}: reduce must be one of prod, mean, amax or amin, got {reduce!r}")
    if index.ndim > 1 or index.dtype.kind != "i":
        raise TypeError(f"{op}: index must be a 0-d or 1-d integer tensor, got {index.ndim}-d "
                        f"{index.dtype}")
    d = _norm_dim(dim, max(input.ndim, 1), op)
    x, src = input.reshape(1) if input.ndim == 0 else input, source.reshape(-1) \
        if source.ndim == 0 else source
    expect = x.shape[:d] + (index.numel(),) + x.shape[d + 1:]
    if src.shape != expect:
        raise ValueError(f"{op}: source of shape {source.shape} must match input's shape "
                         f"{input.shape} but along dim {d}, where it needs index's "
                         f"{index.numel()} entries")
    at = index.long().reshape([-1 if k == d else 1 for k in range(x.ndim)]).expand(expect)
    out = x.scatter_reduce(d, at.contiguous(), src, reduce, include_self=include_self)
    return out.reshape(input.shape)


TENSOR_METHODS.update({f.__name__: f for f in (
    mvlgamma, ldexp, float_power, angle, diagflat, sum_to_size, new_empty_strided, narrow_copy,
    hsplit, vsplit, dsplit, nanmedian, mode, cov, corrcoef, multinomial, index_reduce)})
TENSOR_METHODS.update(polygamma=_polygamma_method, polygamma_=_polygamma_in_place)
