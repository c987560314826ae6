"""Shapes, strides and dims of views: the pure-Python helpers that ClTensor and the ops share
(memoized where ops ask again and again with the same layouts)."""
import math

import numpy as np

from . import caches


def contiguous_strides(shape):
    return _contiguous_strides(tuple(shape))


# NOTE: memoized, as are the layout helpers below, which ops call with the same layouts again
# and again; they return Python ints whatever int type the key holds (2 == np.int64(2))
@caches.lru_cache(maxsize=4096)
def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def channels_last_strides(shape):
    n, c, h, w = shape
    c1, h1, w1 = max(c, 1), max(h, 1), max(w, 1)
    return (h1 * w1 * c1, 1, w1 * c1, c1)


@caches.lru_cache(maxsize=4096)
def preserved_strides(shape, strides):
    """The strides torch's preserve_format gives a new tensor like one of (shape, strides):
    those strides where that tensor is dense and non-overlapping (any order of dims),
    channels_last's where its strides are ordered so (a 4-d view), else contiguous ones.
    Memoized: every dtype cast and every pointwise op on a non-contiguous operand asks."""
    order = sorted(range(len(shape)), key=lambda d: (strides[d], -d))
    expected = 1
    for d in order:
        if shape[d] != 1 and strides[d] != expected:
            break
        expected *= shape[d]
    else:
        if 0 not in shape:
            return tuple(int(st) for st in strides)
    if len(shape) == 4 and _channels_last_order(shape, strides):
        return channels_last_strides(shape)
    return _contiguous_strides(tuple(shape))


def _channels_last_order(shape, strides):
    """Whether a 4-d view's strides run C, W, H, N from the smallest (torch's
    is_channels_last_strides_2d: the order its suggest_memory_format reads)."""
    if strides[1] == 0:
        return False
    least = 0
    for d in (1, 3, 2, 0):
        if shape[d] == 0 or strides[d] < least or (d == 0 and least == strides[1]):
            return False
        least = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def _norm_dim(dim, ndim, op="dim"):
    if type(dim) is int and -ndim <= dim < ndim:  # the common case, checked as below
        return dim % ndim
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
    if not lo <= dim <= hi:
        raise IndexError(f"{op}: dimension out of range (expected to be in range of [{lo}, {hi}], "
                         f"but got {dim})")
    return int(dim) % max(ndim, 1)


def _size_args(size, op):
    """Accept f(2, 3), f((2, 3)) and f([2, 3]); check every size is a non-negative int."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for n in size:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"{op}: sizes must be ints, got {n!r}")
        if n < 0:
            raise ValueError(f"{op}: negative dimension {n} in size {tuple(size)}")
        out.append(int(n))
    return tuple(out)


def _same_strides(shape, strides, expected):
    return all(n <= 1 or s == e for n, s, e in zip(shape, strides, expected))


@caches.lru_cache(maxsize=4096)
def _is_contiguous(shape, strides):
    return _same_strides(shape, strides, _contiguous_strides(shape))


@caches.lru_cache(maxsize=4096)
def _is_channels_last(shape, strides):
    return _same_strides(shape, strides, channels_last_strides(shape))


def _size_args_view(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for n in shape:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < -1:
            raise ValueError(f"invalid shape {tuple(shape)}")
    return tuple(int(n) for n in shape)


def _infer_shape(shape, numel):
    if shape.count(-1) > 1:
        raise ValueError(f"only one dimension can be inferred, got shape {shape}")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or numel % known:
            raise ValueError(f"shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if n == -1 else n for n in shape)
    if math.prod(shape) != numel:
        raise ValueError(f"shape {shape} is invalid for input of size {numel}")
    return shape


def _view_strides(old_shape, old_strides, new_shape):
    """Strides that let new_shape view the same elements without a copy, or None (torch's rule)."""
    return _view_strides_of(tuple(old_shape), tuple(old_strides), tuple(new_shape))


@caches.lru_cache(maxsize=4096)
def _view_strides_of(old_shape, old_strides, new_shape):
    if math.prod(old_shape) == 0 or not old_shape:
        return contiguous_strides(new_shape)
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    new_strides = [0] * len(new_shape)
    oi, ni = 0, 0
    while ni < len(new_shape):
        if new_shape[ni] == 1:
            new_strides[ni] = 1
            ni += 1
            continue
        # take a run of old dims that is contiguous within itself, and split it among new dims
        chunk = old[oi][0]
        j = oi
        while j + 1 < len(old) and old[j][1] == old[j + 1][1] * old[j + 1][0]:
            j += 1
            chunk *= old[j][0]
        run_stride = old[j][1]
        acc = 1
        dims = []
        while acc < chunk and ni < len(new_shape):
            dims.append(ni)
            acc *= new_shape[ni]
            ni += 1
        if acc != chunk:
            return None
        st = run_stride
        for d in reversed(dims):
            new_strides[d] = st
            st *= new_shape[d]
        oi = j + 1
    # size-1 dims get the stride a contiguous layout would give them
    for i, n in enumerate(new_shape):
        if n == 1:
            new_strides[i] = new_strides[i + 1] * new_shape[i + 1] if i + 1 < len(new_shape) else 1
    return tuple(int(s) for s in new_strides)


def _is_basic_key(key):
    return all(k is None or k is Ellipsis or isinstance(k, slice) or
               (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)))
               for k in key)
