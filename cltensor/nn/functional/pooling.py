"""Max, average, adaptive, power-average pooling (1-d and 2-d) and max unpooling, over
the kernels of cltensor/ops/pool.py; a 1-d op is its 2-d form over a unit height.
"""
import math
import numbers

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.namespace import zeros
from ...ops import pool
from .activation import relu, relu_grad
from .utils import (_drop_height, _float_tensor, _linear_backward, _number, _row, _single, _tensor,
                    _tuple, _unit_height)

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d",
           "adaptive_max_pool2d_with_indices", "avg_pool1d", "avg_pool2d", "lp_pool1d",
           "lp_pool2d", "max_pool1d", "max_pool1d_with_indices", "max_pool2d",
           "max_pool2d_with_indices", "max_unpool1d", "max_unpool2d"]


class _MaxPool2d(Function):
    """forward(ctx, x, fields, out_hw, return_indices, relu): max pooling, then max(., 0)
    as it stores with relu (the output saved to mask the gradient, as ReLU's backward)."""

    @staticmethod
    def forward(ctx, x, fields, out_hw, return_indices, relu=False):
        need = ctx.needs_input_grad[0]
        y, idx = pool.max_pool2d(x, fields, out_hw, need or return_indices, relu)
        ctx.save_for_backward(idx if need else None, y if need and relu else None)
        ctx.x_shape, ctx.layout, ctx.fields = x.shape, pool.layout_of(x), fields
        if return_indices:  # torch's int64 indices from the window taps kept
            return y, pool.max_pool2d_indices(idx, x.shape, fields)
        return y

    @staticmethod
    def backward(ctx, g, _g_indices=None):
        idx, y = ctx.saved_tensors
        if y is not None:
            g = relu_grad(g, y)
        if is_grad_enabled():
            flat = pool.max_pool2d_indices(idx, ctx.x_shape, ctx.fields)
            return _scattered(g, flat, ctx.x_shape), None, None, None, None
        gx = pool.max_pool2d_backward(g, idx, ctx.x_shape, ctx.layout, ctx.fields)
        return gx, None, None, None, None


class _AdaptiveMaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, out_hw, return_indices):
        need = ctx.needs_input_grad[0]
        y, idx = pool.adaptive_max_pool2d(x, out_hw, need or return_indices)
        ctx.save_for_backward(idx if need else None)
        ctx.x_shape, ctx.layout = x.shape, pool.layout_of(x)
        return (y, idx.to(dt.int64)) if return_indices else y

    @staticmethod
    def backward(ctx, g, _g_indices=None):
        (idx,) = ctx.saved_tensors
        if is_grad_enabled():
            return _scattered(g, idx, ctx.x_shape), None, None
        return pool.adaptive_max_pool2d_backward(g, idx, ctx.x_shape, ctx.layout), None, None


def _scattered(g, idx, x_shape):
    """Max pooling's input gradient as tensor ops: g added into zeros of x_shape at the argmaxes
    idx (h * W + w in each plane); its own gradient gathers at idx."""
    n, c, h, w = x_shape
    gx = zeros((n, c, h * w), dtype=g.dtype, device=g.device)
    gx = gx.scatter_add(2, idx.to(dt.int64).reshape(n, c, -1), g.reshape(n, c, -1))
    return gx.reshape(x_shape)


class _AvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, fields, out_hw, divisor, include_pad):
        ctx.x_shape, ctx.layout = x.shape, pool.layout_of(x)
        ctx.args = (fields, out_hw, divisor, include_pad)
        return pool.avg_pool2d(x, fields, out_hw, divisor, include_pad)

    @staticmethod
    def backward(ctx, g):
        fields, _, divisor, include_pad = ctx.args
        gx = _linear_backward(g, pool.avg_pool2d_backward,
                              (ctx.x_shape, ctx.layout, fields, divisor, include_pad),
                              _AvgPool2d, ctx.args)
        return gx, None, None, None, None


class _AdaptiveAvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, out_hw):
        ctx.x_shape, ctx.layout, ctx.out_hw = x.shape, pool.layout_of(x), out_hw
        return pool.adaptive_avg_pool2d(x, out_hw)

    @staticmethod
    def backward(ctx, g):
        gx = _linear_backward(g, pool.adaptive_avg_pool2d_backward, (ctx.x_shape, ctx.layout),
                              _AdaptiveAvgPool2d, (ctx.out_hw,))
        return gx, None


def _batched(input, op):
    """input as 4-d NCHW (a 3-d CHW input gains a batch dim) and whether to drop it after."""
    pool.check_input(input, op)
    return (input, False) if input.ndim == 4 else (input.unsqueeze(0), True)


def _unbatch(out, squeeze):
    if not squeeze:
        return out
    if isinstance(out, tuple):
        return tuple(o.squeeze(0) for o in out)
    return out.squeeze(0)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False, *, relu=False):
    """2-d max pooling over an (N, C, H, W) or (C, H, W) input.

    Args:
        kernel_size, stride, padding, dilation: ints or pairs; stride defaults to
            kernel_size; padding (implicit -inf) at most half the kernel.
        ceil_mode: round the output size up (the last window must start inside the input).
        return_indices: also return the argmax of each window as h * W + w (int64).
        relu: also apply max(., 0), NaN kept, as the result is stored (nn.Sequential fuses a
            MaxPool2d and the ReLU after it this way): relu(max_pool2d(...)), one pass fewer.

    A window wholly in the padding (possible with dilation) gives -inf and torch's index there,
    and sends the input no gradient (torch's CPU backward sends it to that index).

    Example:
        >>> F.max_pool2d(cltensor.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, relu)


def _max_pool(op, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
              relu=False):
    x, squeeze = _batched(input, op)
    fields, out_hw = pool.window(op, x, kernel_size, stride, padding, dilation, ceil_mode)
    return _unbatch(_MaxPool2d.apply(x, fields, out_hw, bool(return_indices), bool(relu)),
                    squeeze)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling over an (N, C, H, W) or (C, H, W) input.

    Args:
        kernel_size, stride, padding: ints or pairs; stride defaults to kernel_size; padding
            (zeros) at most half the kernel.
        ceil_mode: round the output size up.
        count_include_pad: divide by the window's size including padding.
        divisor_override: divide by this instead.

    Example:
        >>> F.avg_pool2d(cltensor.ones(1, 1, 4, 4), 2).shape
        (1, 1, 2, 2)
    """
    return _avg_pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _avg_pool(op, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    x, squeeze = _batched(input, op)
    fields, out_hw = pool.window(op, x, kernel_size, stride, padding, 1, ceil_mode)
    divisor = _divisor(op, divisor_override)
    out = _AvgPool2d.apply(x, fields, out_hw, divisor, int(bool(count_include_pad)))
    return _unbatch(out, squeeze)


def _divisor(op, divisor_override):
    """The checked divisor_override as an int, 0 for None."""
    if divisor_override is None:
        return 0
    if not isinstance(divisor_override, numbers.Integral) or divisor_override == 0:
        raise ValueError(f"{op}: divisor_override must be a non-zero int, got "
                         f"{divisor_override!r}")
    return int(divisor_override)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed (OH, OW): output (oh, ow) averages rows
    [floor(oh * H / OH), ceil((oh + 1) * H / OH)) and the same for columns.

    Example:
        >>> F.adaptive_avg_pool2d(cltensor.ones(2, 3, 7, 7), 1).shape
        (2, 3, 1, 1)
    """
    return _adaptive_pool("adaptive_avg_pool2d", input, output_size)


def _adaptive_pool(op, input, output_size, return_indices=None):
    """Adaptive average pooling (return_indices None) or max pooling."""
    x, squeeze = _batched(input, op)
    out_hw = pool.adaptive_size(output_size, x, op)
    if return_indices is None:
        return _unbatch(_AdaptiveAvgPool2d.apply(x, out_hw), squeeze)
    return _unbatch(_AdaptiveMaxPool2d.apply(x, out_hw, bool(return_indices)), squeeze)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed (OH, OW) over adaptive_avg_pool2d's windows; return_indices:
    also the argmax of each window as h * W + w (int64).

    Example:
        >>> F.adaptive_max_pool2d(cltensor.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
        [[[[15.0]]]]
    """
    return _adaptive_pool("adaptive_max_pool2d", input, output_size, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool2d returning (output, indices) (torch's alias)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool2d returning (output, indices) (torch's alias)."""
    return adaptive_max_pool2d(input, output_size, return_indices)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over an (N, C, L) or (C, L) input; return_indices: also each window's
    argmax (int64 positions in L).

    Example:
        >>> F.max_pool1d(cltensor.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
        [[3.0, 2.0]]
    """
    op = "max_pool1d"
    return _drop_height(_max_pool(
        op, _unit_height(input, op), _row(kernel_size, "kernel_size", op, 1),
        _row(stride, "stride", op, 1), _row(padding, "padding", op, 0),
        _row(dilation, "dilation", op, 1), ceil_mode, return_indices))


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool1d returning (output, indices) (torch's alias)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over an (N, C, L) or (C, L) input.

    Example:
        >>> F.avg_pool1d(cltensor.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
        [[2.0, 1.0]]
    """
    op = "avg_pool1d"
    return _drop_height(_avg_pool(
        op, _unit_height(input, op), _row(kernel_size, "kernel_size", op, 1),
        _row(stride, "stride", op, 1), _row(padding, "padding", op, 0), ceil_mode,
        count_include_pad, None))


def _adaptive_pool1d(op, input, output_size, return_indices=None):
    size = output_size[0] if isinstance(output_size, (tuple, list)) and \
        len(output_size) == 1 else output_size
    if isinstance(size, (tuple, list)):
        raise ValueError(f"{op}: output_size must be an int or a 1-tuple, got {output_size!r}")
    return _drop_height(_adaptive_pool(op, _unit_height(input, op), (1, size), return_indices))


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of an (N, C, L) or (C, L) input to a fixed length output_size.

    Example:
        >>> F.adaptive_avg_pool1d(cltensor.ones(2, 3, 7), 3).shape
        (2, 3, 3)
    """
    return _adaptive_pool1d("adaptive_avg_pool1d", input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling of an (N, C, L) or (C, L) input to a fixed length output_size.

    Example:
        >>> F.adaptive_max_pool1d(cltensor.arange(4.0).reshape(1, 4), 1).tolist()
        [[3.0]]
    """
    return _adaptive_pool1d("adaptive_max_pool1d", input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool1d returning (output, indices) (torch's alias)."""
    return adaptive_max_pool1d(input, output_size, return_indices)


def _lp_pool(op, input, norm_type, kernel_size, stride, ceil_mode, avg, size):
    """torch's power-average pooling: (size * avg(x^p)) ^ (1 / p), avg the average pooling."""
    p = _number(norm_type, "norm_type", op)
    if p == 0:
        raise ValueError(f"{op}: norm_type must be nonzero")
    out = avg(_float_tensor(input, "input", op).pow(p), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs())).mul(size).pow(1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over an (N, C, L) or (C, L) input: (sum of x^p over each window)
    ^ (1 / p); p = inf is max pooling, p = 1 sum pooling.

    Example:
        >>> F.lp_pool1d(cltensor.tensor([[3.0, 4.0]]), 2, 2).tolist()
        [[5.0]]
    """
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp_pool("lp_pool1d", input, norm_type, k, stride, ceil_mode, avg_pool1d, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over an (N, C, H, W) or (C, H, W) input, as lp_pool1d.

    Example:
        >>> F.lp_pool2d(cltensor.ones(1, 1, 4, 4), 2, 2).tolist()
        [[[[2.0, 2.0], [2.0, 2.0]]]]
    """
    kh, kw = pool.pair(kernel_size, "kernel_size", "lp_pool2d")
    return _lp_pool("lp_pool2d", input, norm_type, (kh, kw), stride, ceil_mode, avg_pool2d,
                    kh * kw)


def _max_unpool(op, input, indices, kernel_size, stride, padding, output_size, dims):
    """Max pooling's indices undone: zeros of the output size with input's values scattered at
    the indices within each (N, C) plane (overlapping windows repeat an index, with one value)."""
    _float_tensor(input, "input", op)
    _tensor(indices, "indices", op)
    if indices.dtype != dt.int64 or indices.shape != input.shape:
        raise ValueError(f"{op}: expected int64 indices of the input's shape {input.shape}, got "
                         f"{indices.dtype} of shape {indices.shape}")
    if input.ndim not in (dims + 1, dims + 2):
        raise ValueError(f"{op}: expected a {dims + 1}-d or {dims + 2}-d input, got shape "
                         f"{input.shape}")
    k = _tuple(kernel_size, dims, "kernel_size", op)
    s = k if stride is None else _tuple(stride, dims, "stride", op)
    p = _tuple(padding, dims, "padding", op)
    size = _unpool_size(op, input.shape[-dims:], k, s, p, output_size)
    x, idx = (input, indices) if input.ndim == dims + 2 else \
        (input.unsqueeze(0), indices.unsqueeze(0))
    n, c = x.shape[:2]
    flat = zeros((n, c, math.prod(size)), dtype=x.dtype, device=x.device)
    out = flat.scatter(2, idx.reshape(n, c, -1), x.reshape(n, c, -1))
    return out.reshape(input.shape[:-dims] + size)


def _unpool_size(op, in_size, k, s, p, output_size):
    """torch's _unpool_output_size: (L - 1) * s - 2 p + k, or output_size within a stride."""
    default = tuple((n - 1) * st - 2 * pd + kk for n, st, pd, kk in zip(in_size, s, p, k))
    if output_size is None:
        return default
    size = tuple(output_size)[-len(default):]
    if len(size) != len(default) or not all(
            d - st < n < d + st for n, d, st in zip(size, default, s)):
        raise ValueError(f"{op}: invalid output_size {tuple(output_size)} (the default is "
                         f"{default}; each size must be within a stride of it)")
    return tuple(int(n) for n in size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: an (N, C, L_out) or (C, L_out) tensor of zeros holding
    input's values at the positions in indices (max_pool1d's, return_indices=True).

    Example:
        >>> y, i = F.max_pool1d(cltensor.tensor([[1.0, 3.0, 2.0, 0.0]]), 2, return_indices=True)
        >>> F.max_unpool1d(y, i, 2).tolist()
        [[0.0, 3.0, 2.0, 0.0]]
    """
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding, output_size,
                       1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: zeros of the output size holding input's values at the
    positions in indices (max_pool2d's, return_indices=True, h * W + w in each plane).

    Example:
        >>> y, i = F.max_pool2d(cltensor.randn(1, 1, 4, 4), 2, return_indices=True)
        >>> F.max_unpool2d(y, i, 2).shape
        (1, 1, 4, 4)
    """
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding, output_size,
                       2)
