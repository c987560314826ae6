"""Normalization: batch, layer, group, instance, RMS and local response norm, and
normalize (rows scaled to unit p-norm).
"""
import math
import numbers


from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled, no_grad
from ...autograd.namespace import clamp, pad
from ...ops import norm
from ...tensor import _norm_dim
from .utils import _dense, _float_tensor, _loss_operand, _no_grad_for, _number, _per_channel

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "local_response_norm",
           "normalize", "rms_norm"]


class _LocalResponseNorm(Function):
    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        need = ctx.needs_input_grad[0]
        y, scale = norm.lrn(x, size, alpha, beta, k, need)
        if need:
            ctx.save_for_backward(x, y, scale)
        ctx.params, ctx.k = (size, alpha, beta), k
        return y

    @staticmethod
    def backward(ctx, g):
        x, y, scale = ctx.saved_tensors
        if is_grad_enabled():
            return _lrn_grad(g, x, *ctx.params, ctx.k), None, None, None, None
        return norm.lrn_backward(g, x, y, scale, *ctx.params), None, None, None, None


def _lrn_grad(g, x, size, alpha, beta, k):
    """Local response norm's input gradient as tensor ops: with s = k + alpha / size * W(x^2)
    (y = x s^-beta), g s^-beta - 2 alpha beta / size * x * W'(g x s^(-beta - 1)), W the sum
    over each channel's window and W' its transpose."""
    c = alpha / size
    s = k + c * _channel_window(x * x, size, False)
    back = _channel_window(g * x * s ** (-beta - 1), size, True)
    return g * s ** -beta - (2 * c * beta) * x * back


def _channel_window(t, size, transposed):
    """Sums of an (N, C, *) t over channels c - size // 2 .. c + (size - 1) // 2 (zeros beyond
    the ends); transposed: over c - (size - 1) // 2 .. c + size // 2."""
    before, after = size // 2, (size - 1) // 2
    if transposed:
        before, after = after, before
    padded = pad(t, (0, 0) * (t.ndim - 2) + (before, after))
    out = padded.narrow(1, 0, t.shape[1])
    for j in range(1, size):
        out = out + padded.narrow(1, j, t.shape[1])
    return out


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Normalization across channels (AlexNet's LRN), as torch:
    y = x / (k + alpha / size * sum of x^2 over the size channels around c) ** beta.

    Args:
        input: (N, C, *) floating tensor, at least 3-d.
        size: channels in the window (c - size // 2 .. c + (size - 1) // 2, zero padded).

    Example:
        >>> F.local_response_norm(cltensor.ones(1, 4, 2, 2), size=3).shape
        (1, 4, 2, 2)
    """
    _float_tensor(input, "input", "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensionality input "
                         f"(got {input.ndim} dimensions)")
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 1:
        raise ValueError(f"local_response_norm: size must be a positive int, got {size!r}")
    params = [_number(v, n, "local_response_norm") for v, n in
              ((alpha, "alpha"), (beta, "beta"), (k, "k"))]
    return _LocalResponseNorm.apply(input, int(size), *params)


class _BatchNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
        if training:
            rm, rv = _dense(running_mean), _dense(running_var)
            y, mean, invstd = norm.batch_norm_train(x, _dense(weight), _dense(bias), rm, rv,
                                                    momentum, eps)
            for user, tmp in ((running_mean, rm), (running_var, rv)):
                if user is not tmp:
                    user.copy_(tmp)
        else:
            y, invstd = norm.batch_norm_eval(x, _dense(weight), _dense(bias),
                                             _dense(running_mean), _dense(running_var), eps)
            mean = running_mean.clone()
        if any(ctx.needs_input_grad[:3]):
            ctx.save_for_backward(x, weight, mean, invstd)
        ctx.training, ctx.eps = training, eps
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight, mean, invstd = ctx.saved_tensors
        if is_grad_enabled():
            gx, gw, gb = _batch_norm_grads(g, x, weight, mean, invstd, ctx.training, ctx.eps)
        else:
            gx, gw, gb = norm.batch_norm_backward(g, x, _dense(weight), mean, invstd,
                                                  ctx.training)
        need = ctx.needs_input_grad
        return (gx if need[0] else None, gw if need[1] else None, gb if need[2] else None,
                None, None, None, None, None)


def _batch_norm_grads(g, x, weight, mean, invstd, training, eps):
    """Batch norm's (gx, gw, gb) as tensor ops; in training the batch's statistics are taken
    again from x (the saved ones are constants), so that their own gradients count."""
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        centered = x - x.mean(dims, keepdim=True)
        invstd = ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
    else:
        centered, invstd = x - mean.reshape(shape), invstd.reshape(shape)
    xhat = centered * invstd
    gxhat = g if weight is None else g * weight.reshape(shape)
    if training:
        gxhat = gxhat - gxhat.mean(dims, keepdim=True) - \
            xhat * (gxhat * xhat).mean(dims, keepdim=True)
    return gxhat * invstd, (g * xhat).sum(dims), g.sum(dims)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalization over dim 1 of an (N, C, *) input, as torch.

    training: normalize with the batch's mean and biased variance per channel, and update the
    running stats in place (when given): running = (1 - momentum) * running + momentum * stat,
    with the unbiased variance. Otherwise normalize with the running stats.

    Example:
        >>> x = cltensor.randn(8, 3, 4, 4)
        >>> rm, rv = cltensor.zeros(3), cltensor.ones(3)
        >>> y = F.batch_norm(x, rm, rv, training=True)   # rm, rv updated
    """
    op = "batch_norm"
    C = _channels(input, op)
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{op}: give both running_mean and running_var, or neither")
    tensors = [_per_channel(t, name, input, C, op, mixed=True) for t, name in
               ((running_mean, "running_mean"), (running_var, "running_var"),
                (weight, "weight"), (bias, "bias"))]
    _no_grad_for(op, running_mean=running_mean, running_var=running_var)
    if not training and running_mean is None:
        raise ValueError(f"{op}: running_mean and running_var must be defined in evaluation mode")
    if training and input.numel() // max(C, 1) <= 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got "
                         f"input size {input.shape}")
    momentum = _number(momentum, "momentum", op)
    eps = _number(eps, "eps", op)
    rm, rv, w, b = tensors
    return _BatchNorm.apply(input, w, b, rm, rv, bool(training), momentum, eps)


def _channels(x, op):
    """C of a floating (N, C, *) input x, checked."""
    _float_tensor(x, "input", op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an (N, C, *) input of at least 2 dims, got shape "
                         f"{x.shape}")
    return x.shape[1]


def _normalized(x, rows, eps):
    """x with each of its `rows` (row-major, equal length) normalized to zero mean and unit
    (biased) variance: batch norm's training statistics over x seen as (1, rows, length)."""
    if x.numel() == 0:
        return x * 1.0
    flat = x.reshape(1, rows, x.numel() // rows)
    return _BatchNorm.apply(flat, None, None, None, None, True, 0.0, eps).reshape(x.shape)


def _affine(y, weight, bias, shape):
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last dims (normalized_shape) of each sample: (x - mean) /
    sqrt(var + eps), the biased variance, then * weight + bias (of normalized_shape) if given.

    Example:
        >>> y = F.layer_norm(cltensor.randn(4, 10, 16), (16,))
    """
    op = "layer_norm"
    shape = _normalized_shape(input, normalized_shape, dict(weight=weight, bias=bias), op)
    rows = math.prod(input.shape[:input.ndim - len(shape)])
    return _affine(_normalized(input, rows, _number(eps, "eps", op)), weight, bias, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize an (N, C, *) input over each sample's groups of C / num_groups channels (and
    all of their positions), then * weight + bias (per channel) if given.

    Example:
        >>> y = F.group_norm(cltensor.randn(2, 6, 5, 5), 3)
    """
    op = "group_norm"
    C = _channels(input, op)
    if not isinstance(num_groups, numbers.Integral) or isinstance(num_groups, bool) or \
            num_groups <= 0 or C % num_groups:
        raise ValueError(f"{op}: expected the number of channels in input to be divisible by "
                         f"num_groups, but got input of shape {input.shape} and num_groups="
                         f"{num_groups!r}")
    weight, bias = (_per_channel(t, name, input, C, op)
                    for t, name in ((weight, "weight"), (bias, "bias")))
    y = _normalized(input, input.shape[0] * int(num_groups), _number(eps, "eps", op))
    return _affine(y, weight, bias, (C,) + (1,) * (input.ndim - 2))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) of an (N, C, *) input over its positions, then
    * weight + bias per channel if given, as torch.

    use_input_stats: the instance's own statistics, and the running stats (when given) updated
    in place by momentum with their batch means (the variance unbiased); otherwise normalize
    with the running stats.

    Example:
        >>> y = F.instance_norm(cltensor.randn(2, 3, 8))
    """
    op = "instance_norm"
    C = _channels(input, op)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if input.ndim < 3 or math.prod(input.shape[2:]) <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element when training, got input "
                         f"size {input.shape}")
    weight, bias = (_per_channel(t, name, input, C, op)
                    for t, name in ((weight, "weight"), (bias, "bias")))
    if running_mean is not None or running_var is not None:
        _update_running_stats(input, running_mean, running_var, _number(momentum, "momentum", op),
                              op)
    y = _normalized(input, input.shape[0] * C, _number(eps, "eps", op))
    return _affine(y, weight, bias, (C,) + (1,) * (input.ndim - 2))


def _update_running_stats(x, running_mean, running_var, momentum, op):
    """running = (1 - momentum) running + momentum * (the batch mean of each instance's mean,
    unbiased variance), per channel."""
    C = x.shape[1]
    if running_mean is None or running_var is None:
        raise ValueError(f"{op}: give both running_mean and running_var, or neither")
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var")):
        _per_channel(t, name, x, C, op)
    with no_grad():
        flat = x.detach().reshape(x.shape[0], C, -1)
        for run, stat in ((running_mean, flat.mean(2)), (running_var, flat.var(2))):
            run.copy_(run * (1.0 - momentum) + stat.mean(0) * momentum)


def _normalized_shape(input, normalized_shape, weights, op):
    """normalized_shape as a tuple, checked against input and the (name -> tensor or None)
    elementwise weights."""
    _float_tensor(input, "input", op)
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else \
        tuple(normalized_shape)
    if not shape or not all(isinstance(n, numbers.Integral) and n > 0 for n in shape):
        raise ValueError(f"{op}: normalized_shape must be a positive int or a non-empty sequence "
                         f"of them, got {normalized_shape!r}")
    if input.shape[input.ndim - len(shape):] != shape or input.ndim < len(shape):
        raise ValueError(f"{op}: given normalized_shape={shape}, expected input with shape "
                         f"(*, {', '.join(map(str, shape))}), got input of shape {input.shape}")
    for name, t in weights.items():
        if _loss_operand(t, name, input, op) is not None and t.shape != shape:
            raise ValueError(f"{op}: {name} must have shape {shape}, got {t.shape}")
    return shape


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last dims (normalized_shape), then * weight if given;
    eps defaults to the dtype's machine epsilon (torch's).

    Example:
        >>> F.rms_norm(cltensor.tensor([[3.0, 4.0]]), (2,)).tolist()   # rms 3.536
    """
    op = "rms_norm"
    shape = _normalized_shape(input, normalized_shape, dict(weight=weight), op)
    eps = float(dt.finfo(input.dtype).eps) if eps is None else _number(eps, "eps", op)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return y if weight is None else y * weight


def _vector_norm(x, p, dim, keepdim=False):
    """The p-norm of x along dim as differentiable ops (p a number, inf and 0 included)."""
    a = x.abs()
    if p == math.inf:
        return a.amax(dim, keepdim=keepdim)
    if p == 0:
        return (a != 0).to(x.dtype).sum(dim, keepdim=keepdim)
    if p == 1:
        return a.sum(dim, keepdim=keepdim)
    if p == 2:
        return (x * x).sum(dim, keepdim=keepdim).sqrt()
    return a.pow(p).sum(dim, keepdim=keepdim).pow(1.0 / p)


def _norm_order(p, op):
    p = _number(p, "p", op)
    if p < 0:
        raise ValueError(f"{op}: p must be non-negative, got {p}")
    return p


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p, eps) along dim.

    Example:
        >>> F.normalize(cltensor.tensor([[3.0, 4.0]])).tolist()
        [[0.6, 0.8]]
    """
    op = "normalize"
    _float_tensor(input, "input", op)
    d = _norm_dim(dim, max(input.ndim, 1), op)
    norm_ = _vector_norm(input, _norm_order(p, op), d, keepdim=True)
    y = input / clamp(norm_, min=_number(eps, "eps", op))
    return y if out is None else out.copy_(y)
