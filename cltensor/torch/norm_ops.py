"""Batch, layer and group normalisation on the opencl device: native_batch_norm,
native_layer_norm, native_group_norm and their backwards, weight normalisation
(_weight_norm_interface) and renorm, in cltensor's pointwise and reduction kernels."""
import math

import torch

import cltensor

from .. import dtypes as dt
from ..ops import norm
from ._backend import aten, np_dtype, unwrap, wrap
from .math_ops import finish, meta_result, runtime_errors, with_out, write_into


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
    vectors = [None if t is None else unwrap(t) for t in (weight, bias, running_mean, running_var)]
    if _fused(x, vectors) and (vectors[2] is None) == (vectors[3] is None) and \
            (training or vectors[2] is not None):
        return _batch_norm_kernels(x, *vectors, training, momentum, eps)
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


def _fused(x, vectors):
    """Whether cltensor's batch-norm kernels (cltensor/ops/norm.py) take x with these
    per-channel vectors: float32/64 of one dtype on one device, (C,) vectors or None, each
    dense from its buffer's start (the kernels take their buffers), more than one value per
    channel."""
    if x.dtype not in (dt.float32, dt.float64) or x.ndim < 2 or x.numel() < 2 * x.shape[1]:
        return False
    return all(v is None or (v.dtype is x.dtype and v.shape == (x.shape[1],) and
                             v.strides == (1,) and v.offset == 0 and v.device is x.device)
               for v in vectors)


def _batch_norm_kernels(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """native_batch_norm's results from cltensor's statistics and apply kernels (three
    launches), running statistics updated in place (the variance unbiased)."""
    if training:
        y, mean, invstd = norm.batch_norm_train(x, weight, bias, running_mean, running_var,
                                                momentum, eps)
        return wrap(y), wrap(mean), wrap(invstd)
    y, _ = norm.batch_norm_eval(x, weight, bias, running_mean, running_var, eps)
    return wrap(y), wrap(_empty(x)), wrap(_empty(x))


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
    w = None if weight is None else unwrap(weight)
    if _fused(x, (w, mean, invstd)) and g.shape == x.shape and g.dtype is x.dtype:
        # cltensor's gradient kernels: sums, coefficients, apply
        grads = norm.batch_norm_backward(g, x, w, mean, invstd, train)
        return tuple(wrap(r.contiguous()) if need else None for r, need in zip(grads, output_mask))
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


# ---- layer normalisation ----------------------------------------------------------------------
def _rows(input, normalized_shape):
    """input as (rows, features) over its last len(normalized_shape) dims, and the shape torch
    gives the saved mean and rstd (the leading dims, then ones)."""
    k = len(normalized_shape)
    lead = tuple(input.shape[:input.dim() - k])
    x = unwrap(input).reshape(math.prod(lead), math.prod(normalized_shape))
    return x, lead + (1,) * k


@aten("native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(output, mean, 1/std) over the trailing normalized_shape dims, the variance biased."""
    args = (input, normalized_shape, weight, bias, eps)
    out, mean_meta, rstd_meta = meta_result(torch.ops.aten.native_layer_norm.default, args, {})
    x, saved_shape = _rows(input, normalized_shape)
    mean = x.mean(dim=1, keepdim=True)
    centred = x - mean
    rstd = cltensor.rsqrt((centred * centred).mean(dim=1, keepdim=True) + eps)
    y = centred * rstd
    if weight is not None:
        y = y * unwrap(weight).reshape(1, -1)
    if bias is not None:
        y = y + unwrap(bias).reshape(1, -1)
    return (finish(y, out), finish(mean.reshape(*saved_shape), mean_meta),
            finish(rstd.reshape(*saved_shape), rstd_meta))


@aten("native_layer_norm_backward")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask):
    x, _ = _rows(input, normalized_shape)
    g = unwrap(grad_out).reshape(*x.shape)
    m, r = unwrap(mean).reshape(-1, 1), unwrap(rstd).reshape(-1, 1)
    xhat = (x - m) * r
    gxhat = g * unwrap(weight).reshape(1, -1) if weight is not None else g
    results = [None, None, None]
    if output_mask[0]:
        gx = r * (gxhat - gxhat.mean(dim=1, keepdim=True)
                  - xhat * (gxhat * xhat).mean(dim=1, keepdim=True))
        results[0] = wrap(gx.reshape(tuple(input.shape)).contiguous())
    shape = tuple(normalized_shape)
    if output_mask[1] and weight is not None:
        results[1] = wrap((g * xhat).sum(dim=0).reshape(*shape).contiguous())
    if output_mask[2] and bias is not None:
        results[2] = wrap(g.sum(dim=0).reshape(*shape).contiguous())
    return tuple(results)


# ---- group normalisation ----------------------------------------------------------------------
def _groups(t, n, c, hxw, group, wide):
    """t (N, C, *) as rows of one image's group each, (N * group, C / group * spatial), in the
    computing dtype (float32 for 16-bit tensors)."""
    x = unwrap(t)
    x = x if x.dtype is wide else x.to(wide)
    return x.reshape(n * group, c // group * hxw)


@aten("native_group_norm")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(output, mean, 1/std) over each image's channel groups, the variance biased; mean and
    1/std of shape (N, group)."""
    args = (input, weight, bias, N, C, HxW, group, eps)
    out, mean_meta, rstd_meta = meta_result(torch.ops.aten.native_group_norm.default, args, {})
    wide = dt.compute_dtype(np_dtype(input.dtype, "native_group_norm"))
    x = _groups(input, N, C, HxW, group, wide)
    if x.shape[1] == 0:  # no elements in a group: nothing to normalise
        mean = cltensor.zeros(x.shape[0], 1, dtype=wide, device=x.device)
    else:
        mean = x.mean(dim=1, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(dim=1, keepdim=True) if x.shape[1] else mean
    rstd = cltensor.rsqrt(var + eps)
    y = (centred * rstd).reshape(N, C, HxW)
    if weight is not None:
        y = y * unwrap(weight).reshape(1, C, 1)
    if bias is not None:
        y = y + unwrap(bias).reshape(1, C, 1)
    return (finish(y.reshape(*input.shape), out), finish(mean.reshape(N, group), mean_meta),
            finish(rstd.reshape(N, group), rstd_meta))


@aten("native_group_norm_backward")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
                               output_mask):
    wide = dt.compute_dtype(np_dtype(input.dtype, "native_group_norm_backward"))
    x, g = _groups(input, N, C, HxW, group, wide), _groups(grad_out, N, C, HxW, group, wide)
    m = unwrap(mean).reshape(-1, 1).to(wide)
    r = unwrap(rstd).reshape(-1, 1).to(wide)
    xhat = (x - m) * r
    results = [None, None, None]
    if output_mask[0]:
        gxhat = g
        if weight is not None:
            w = unwrap(weight).to(wide).reshape(1, C, 1)
            gxhat = (g.reshape(N, C, HxW) * w).reshape(*g.shape)
        if x.shape[1]:
            gx = r * (gxhat - gxhat.mean(dim=1, keepdim=True)
                      - xhat * (gxhat * xhat).mean(dim=1, keepdim=True))
        else:
            gx = gxhat
        results[0] = wrap(gx.reshape(*input.shape).to(unwrap(input).dtype).contiguous())
    per_channel = lambda t: t.reshape(N, C, HxW).sum(dim=(0, 2))  # noqa: E731
    dtype = unwrap(weight).dtype if weight is not None else unwrap(input).dtype
    if output_mask[1]:
        results[1] = wrap(per_channel(g * xhat).to(dtype).contiguous())
    if output_mask[2]:
        results[2] = wrap(per_channel(g).to(dtype).contiguous())
    return tuple(results)


# ---- weight normalisation and renorm ----------------------------------------------------------
def _others(v, dim):
    """The dims of v other than dim (every dim when dim is -1, as torch's weight norm takes it)."""
    return tuple(d for d in range(v.ndim) if d != dim or dim == -1)


@aten("_weight_norm_interface")
def weight_norm_interface(v, g, dim=0):
    """(w, norms): w = v * g / ||v||, the norms taken over every dim but dim (kept as ones)."""
    w_meta, n_meta = meta_result(torch.ops.aten._weight_norm_interface.default, (v, g, dim), {})
    wide = dt.compute_dtype(np_dtype(v.dtype, "_weight_norm_interface"))
    x, gain = unwrap(v).to(wide), unwrap(g).to(wide)
    norms = cltensor.sqrt((x * x).sum(dim=_others(x, dim), keepdim=True))
    return finish(x * (gain / norms), w_meta), finish(norms, n_meta)


@aten("_weight_norm_interface_backward")
def weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    """(grad_v, grad_g) of w = v * g / n: grad_g = sum(grad_w * v) / n, and
    grad_v = (g / n) * grad_w - (g * sum(grad_w * v) / n^3) * v."""
    wide = dt.compute_dtype(np_dtype(saved_v.dtype, "_weight_norm_interface_backward"))
    gw, v = unwrap(grad_w).to(wide), unwrap(saved_v).to(wide)
    g, n = unwrap(saved_g).to(wide), unwrap(saved_norms).to(wide)
    s = (gw * v).sum(dim=_others(v, dim), keepdim=True)
    grad_g = s / n
    grad_v = gw * (g / n) - v * (g * s / (n * n * n))
    return (wrap(grad_v.to(unwrap(saved_v).dtype).contiguous()),
            wrap(grad_g.to(unwrap(saved_g).dtype).contiguous()))


@aten("renorm")
def renorm(self, p, dim, maxnorm):
    """Each slice along dim scaled down to p-norm maxnorm where its norm exceeds it."""
    out = meta_result(torch.ops.aten.renorm.default, (self, p, dim, maxnorm), {})
    x = unwrap(self)
    wide = dt.compute_dtype(x.dtype)
    with runtime_errors():
        return finish(cltensor.renorm(x.to(wide), p, dim, maxnorm), out)


@aten("renorm_")
def renorm_(self, p, dim, maxnorm):
    meta_result(torch.ops.aten.renorm_.default, (self, p, dim, maxnorm), {})
    return write_into(self, renorm(self, p, dim, maxnorm))


with_out("renorm.out", renorm)
