"""Batch normalisation on the opencl device: native_batch_norm and its backward, in cltensor's
pointwise and reduction kernels (torch.nn.LayerNorm already decomposes into registered ops)."""
import torch

import cltensor

from ._backend import aten, np_dtype, unwrap, wrap
from .math_ops import meta_result


def _shape(x):
    """Broadcast shape of a per-channel vector against x (channels on dim 1)."""
    return (1, -1) + (1,) * (x.ndim - 2)


def _per_channel(t, x):
    return unwrap(t).reshape(*_shape(x))


def _axes(x):
    return (0,) + tuple(range(2, x.ndim))


@aten("native_batch_norm")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, saved mean, saved 1/std): batch statistics when training (updating the running
    ones, the variance unbiased), else the running statistics."""
    args = (input, weight, bias, running_mean, running_var, training, momentum, eps)
    out, mean_meta, invstd_meta = meta_result(torch.ops.aten.native_batch_norm.default, args, {})
    x = unwrap(input)
    if training:
        mean = x.mean(dim=_axes(x))
        var = ((x - mean.reshape(*_shape(x))) ** 2).mean(dim=_axes(x))
        if running_mean is not None:
            n = x.numel() // x.shape[1]
            _blend(running_mean, mean, momentum)
            _blend(running_var, var * (n / max(n - 1, 1)), momentum)
    else:
        mean, var = unwrap(running_mean), unwrap(running_var)
    invstd = cltensor.rsqrt(var + eps)
    y = (x - mean.reshape(*_shape(x))) * invstd.reshape(*_shape(x))
    if weight is not None:
        y = y * _per_channel(weight, x)
    if bias is not None:
        y = y + _per_channel(bias, x)
    saved = (mean, invstd) if training else (_empty(x), _empty(x))
    return wrap(y), wrap(saved[0].contiguous()), wrap(saved[1].contiguous())


def _empty(x):
    return cltensor.empty(0, dtype=x.dtype, device=x.device)


def _blend(running, batch, momentum):
    r = unwrap(running)
    r.copy_(r * (1 - momentum) + batch * momentum)


@aten("native_batch_norm_backward")
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                               save_invstd, train, eps, output_mask):
    x, g = unwrap(input), unwrap(grad_out)
    if train:
        mean, invstd = unwrap(save_mean), unwrap(save_invstd)
    else:
        mean, invstd = unwrap(running_mean), cltensor.rsqrt(unwrap(running_var) + eps)
    xhat = (x - mean.reshape(*_shape(x))) * invstd.reshape(*_shape(x))
    gb = g.sum(dim=_axes(x))
    gw = (g * xhat).sum(dim=_axes(x))
    w = _per_channel(weight, x) if weight is not None else 1.0
    scale = invstd.reshape(*_shape(x)) * w
    if train:
        n = x.numel() // x.shape[1]
        gx = scale * (g - gb.reshape(*_shape(x)) / n - xhat * gw.reshape(*_shape(x)) / n)
    else:
        gx = g * scale
    dtype = np_dtype(input.dtype, "native_batch_norm_backward")
    results = (gx, gw.to(dtype), gb.to(dtype))
    return tuple(wrap(r.contiguous()) if need else None for r, need in zip(results, output_mask))
