"""3-d pooling (max, average, adaptive) and max unpooling of (N, C, D, H, W) volumes, over the
2-d Functions of pooling.py.

Pooling is separable: a 3-d window is a 2-d window over (H, W) for each depth (the volumes seen
as (N * C, D, H, W) planes), then a (kd, 1) window over (D, OH * OW). Averages divide by a
product of per-dimension counts (torch's divisor, with or without padding, ceil_mode's clipped
windows included) and the first maximum in (d, h, w) order is the first along d of the first in
(h, w), so both stages give torch's values, indices and gradients, in two launches whatever the
depth.
"""
import math
import numbers

from ...ops import pool
from .pooling import (_AdaptiveAvgPool2d, _AdaptiveMaxPool2d, _AvgPool2d, _divisor, _max_unpool,
                      _MaxPool2d)
from .utils import _float_tensor, _triple

__all__ = ["adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices",
           "avg_pool3d", "max_pool3d", "max_pool3d_with_indices", "max_unpool3d"]


def _volumes(input, op):
    """input (N, C, D, H, W) or (C, D, H, W) as (N * C, D, H, W) planes, and its leading dims."""
    _float_tensor(input, "input", op)
    if input.ndim not in (4, 5) or any(n == 0 for n in input.shape[-4:]):
        raise ValueError(f"{op}: expected a 4-d (C, D, H, W) or 5-d (N, C, D, H, W) input with "
                         f"non-zero C, D, H and W, got shape {input.shape}")
    if math.prod(input.shape[-3:]) > pool._INT_MAX:
        raise ValueError(f"{op}: a {'x'.join(map(str, input.shape[-3:]))} volume is too large "
                         f"for 32-bit window positions")
    lead = input.shape[:-3]
    return input.reshape(math.prod(lead), *input.shape[-3:]), lead


def _fields(k, s, p, d):
    """POOL_T's fields of a (kh, kw) window."""
    return {"kh": k[0], "kw": k[1], "sh": s[0], "sw": s[1], "ph": p[0], "pw": p[1],
            "dh": d[0], "dw": d[1]}


def _windows(op, input, kernel_size, stride, padding, dilation, ceil_mode):
    """The checked window arguments as the two stages' fields ((H, W), then (D, 1)) and the
    output size (OD, OH, OW)."""
    k = _triple(kernel_size, "kernel_size", op)
    s = k if stride is None or stride == () or stride == [] else _triple(stride, "stride", op)
    p, d = _triple(padding, "padding", op), _triple(dilation, "dilation", op)
    for name, v, low in (("kernel_size", k, 1), ("stride", s, 1), ("dilation", d, 1),
                         ("padding", p, 0)):
        if min(v) < low or max(v) > pool._INT_MAX:
            raise ValueError(f"{op}: {name} must be in [{low}, 2**31 - 1], got {v}")
    if any(pd > kk // 2 for pd, kk in zip(p, k)):
        raise ValueError(f"{op}: pad should be at most half of kernel size, but got "
                         f"padding={p} and kernel_size={k}")
    out = tuple(pool.output_size(n, *a, ceil_mode) for n, *a in zip(input.shape[-3:], k, s, p, d))
    if min(out) <= 0:
        raise ValueError(f"{op}: given input size {tuple(input.shape[-4:])}, the calculated "
                         f"output size {input.shape[-4:-3] + out} is too small (kernel_size={k}, "
                         f"stride={s}, padding={p}, dilation={d})")
    return (_fields(k[1:], s[1:], p[1:], d[1:]),
            _fields((k[0], 1), (s[0], 1), (p[0], 0), (d[0], 1)), out)


def _depths(y):
    """Stage 1's (L, D, OH, OW) planes as stage 2's (L, 1, D, OH * OW)."""
    n, d, h, w = y.shape
    return y.reshape(n, 1, d, h * w)


def _indices(first, second, x_shape):
    """torch's d * H * W + h * W + w from the stages' indices: first (L, D, OH, OW) in (H, W)
    planes, second (L, 1, OD, OH * OW) in stage 2's (D, OH * OW) grid."""
    n, d, h, w = x_shape
    plane = first.shape[2] * first.shape[3]
    at = second.reshape(n, second.shape[2] * plane)  # sizes given: n may be 0
    idx = (at // plane) * (h * w) + first.reshape(n, d * plane).gather(1, at)
    return idx.reshape(n, second.shape[2], *first.shape[2:])


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pooling over an (N, C, D, H, W) or (C, D, H, W) input.

    Args:
        kernel_size, stride, padding, dilation: ints or triples; stride defaults to
            kernel_size; padding (implicit -inf) at most half the kernel.
        ceil_mode: round the output size up (the last window must start inside the input).
        return_indices: also return each window's argmax as d * H * W + h * W + w (int64).

    Example:
        >>> F.max_pool3d(cltensor.arange(8.0).reshape(1, 1, 2, 2, 2), 2).tolist()
        [[[[[7.0]]]]]
    """
    op = "max_pool3d"
    x, lead = _volumes(input, op)
    hw, depth, out = _windows(op, input, kernel_size, stride, padding, dilation, ceil_mode)
    plane = out[1] * out[2]
    if not return_indices:
        y = _MaxPool2d.apply(x, hw, out[1:], False)
        y = _MaxPool2d.apply(_depths(y), depth, (out[0], plane), False)
        return y.reshape(*lead, *out)
    y, first = _MaxPool2d.apply(x, hw, out[1:], True)
    y, second = _MaxPool2d.apply(_depths(y), depth, (out[0], plane), True)
    return y.reshape(*lead, *out), _indices(first, second, x.shape).reshape(*lead, *out)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool3d returning (output, indices) (torch's alias)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-d average pooling over an (N, C, D, H, W) or (C, D, H, W) input.

    Args:
        kernel_size, stride, padding: ints or triples; stride defaults to kernel_size; padding
            (zeros) at most half the kernel.
        ceil_mode: round the output size up.
        count_include_pad: divide by the window's size including padding.
        divisor_override: divide the window's sum by this instead.

    Example:
        >>> F.avg_pool3d(cltensor.ones(1, 1, 4, 4, 4), 2).shape
        (1, 1, 2, 2, 2)
    """
    op = "avg_pool3d"
    x, lead = _volumes(input, op)
    hw, depth, out = _windows(op, input, kernel_size, stride, padding, 1, ceil_mode)
    # NOTE: an override divides each stage's sums by 1, then the whole sum once
    override = _divisor(op, divisor_override)
    divisor, include = (1 if override else 0), int(bool(count_include_pad))
    y = _AvgPool2d.apply(x, hw, out[1:], divisor, include)
    y = _AvgPool2d.apply(_depths(y), depth, (out[0], out[1] * out[2]), divisor, include)
    y = y.reshape(*lead, *out)
    return y / override if override else y


def _adaptive_size(output_size, input, op):
    """torch's rule: an int or a triple, None keeping the input's size."""
    items = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 3
    if len(items) != 3:
        raise ValueError(f"{op}: output_size must be an int or a triple, got {output_size!r}")
    out = tuple(n if v is None else v for v, n in zip(items, input.shape[-3:]))
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
               for v in out):
        raise ValueError(f"{op}: output_size must hold positive ints (or None), got "
                         f"{output_size!r}")
    return tuple(int(v) for v in out)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling of an (N, C, D, H, W) or (C, D, H, W) input to a fixed (OD, OH, OW):
    output (od, oh, ow) averages depths [floor(od * D / OD), ceil((od + 1) * D / OD)) and the
    same for rows and columns.

    Example:
        >>> F.adaptive_avg_pool3d(cltensor.ones(2, 3, 5, 7, 7), 1).shape
        (2, 3, 1, 1, 1)
    """
    op = "adaptive_avg_pool3d"
    x, lead = _volumes(input, op)
    out = _adaptive_size(output_size, input, op)
    y = _AdaptiveAvgPool2d.apply(x, out[1:])
    y = _AdaptiveAvgPool2d.apply(_depths(y), (out[0], out[1] * out[2]))
    return y.reshape(*lead, *out)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling of an (N, C, D, H, W) or (C, D, H, W) input to a fixed (OD, OH, OW) over
    adaptive_avg_pool3d's windows; return_indices: also each window's argmax as
    d * H * W + h * W + w (int64).

    Example:
        >>> F.adaptive_max_pool3d(cltensor.arange(8.0).reshape(1, 1, 2, 2, 2), 1).tolist()
        [[[[[7.0]]]]]
    """
    op = "adaptive_max_pool3d"
    x, lead = _volumes(input, op)
    out = _adaptive_size(output_size, input, op)
    plane = out[1] * out[2]
    if not return_indices:
        y = _AdaptiveMaxPool2d.apply(x, out[1:], False)
        return _AdaptiveMaxPool2d.apply(_depths(y), (out[0], plane), False).reshape(*lead, *out)
    y, first = _AdaptiveMaxPool2d.apply(x, out[1:], True)
    y, second = _AdaptiveMaxPool2d.apply(_depths(y), (out[0], plane), True)
    return y.reshape(*lead, *out), _indices(first, second, x.shape).reshape(*lead, *out)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool3d returning (output, indices) (torch's alias)."""
    return adaptive_max_pool3d(input, output_size, return_indices)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: zeros of the output size holding input's values at the
    positions in indices (max_pool3d's, return_indices=True, d * H * W + h * W + w).

    Example:
        >>> y, i = F.max_pool3d(cltensor.randn(1, 1, 4, 4, 4), 2, return_indices=True)
        >>> F.max_unpool3d(y, i, 2).shape
        (1, 1, 4, 4, 4)
    """
    return _max_unpool("max_unpool3d", input, indices, kernel_size, stride, padding, output_size,
                       3)
