"""Volumes on the opencl device: avg_pool3d, max_pool3d_with_indices, adaptive_max_pool3d,
upsample_trilinear3d (forward and backward) and max_unpool2d / max_unpool3d, composed from
cltensor's 2-d kernels; fractional_max_pool2d and 3d on their own kernel (ops/pool.py's fractional_max_pool).

Pooling and linear interpolation are separable: a 3-d window is a 2-d window over (H, W) for
each depth, then a (kd, 1) window over (D, H_out * W_out). Averages divide by a product of
per-dimension counts (torch's divisor, with or without padding, ceil_mode's clipped windows
included), and the first maximum in (d, h, w) order is the first along d of the first in (h, w),
so both stages give torch's values and indices (adaptive windows likewise). Trilinear's gradient
runs one dim at a time, each output's gradient added to its two sources. 16-bit inputs compute
in float32.
"""
import math

import numpy as np
import torch

import cltensor.nn.functional as F

from .. import creation
from .. import dtypes as dt
from ..ops import pool, resample
from ..ops.indexing import index_add_, scatter, scatter_add
from ._backend import aten, unwrap
from .linalg_ops import _floating_pool
from .math_ops import check_devices, finish, meta_result, with_out, write_into
from .nn_ops import vjp

_aten = torch.ops.aten


def _three(v):
    """torch's int[3] argument (one int or a list of 1 or 3) as a triple."""
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return v * 3 if len(v) == 1 else v


def _planes(t, spatial):
    """opencl tensor t of spatial (2 or 3) trailing dims as a ClTensor (L, D, H, W) (D = 1
    for 2), 16-bit floats widened to float32."""
    x = unwrap(t)
    x = x.reshape(-1, *(1,) * (3 - spatial), *x.shape[-spatial:])
    return x.to(dt.float32) if x.dtype in dt.HALF_TYPES else x


def _volumes(t):
    """opencl tensor t (N, C, D, H, W) or (C, D, H, W) as a ClTensor (N * C, D, H, W), 16-bit
    floats widened to float32."""
    return _planes(t, 3)


def _zeros_like_meta(out, like):
    """Zeros of Meta result out's shape in like's computing dtype (for empty results)."""
    dtype = dt.compute_dtype(like.dtype)
    return creation.zeros(*out.shape, dtype=dtype, device=like.device)


# ---- average pooling --------------------------------------------------------------------------
def _avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """avg_pool3d of (L, D, H, W) volumes: over (H, W), then over D; a divisor_override divides
    the window sums once at the end."""
    (kd, kh, kw), (pd, ph, pw) = _three(kernel_size), _three(padding)
    sd, sh, sw = _three(stride) if stride else (kd, kh, kw)
    div = 1 if divisor_override else None
    y = F.avg_pool2d(x, (kh, kw), (sh, sw), (ph, pw), ceil_mode, count_include_pad, div)
    n, d, ho, wo = y.shape
    y = F.avg_pool2d(y.reshape(n, 1, d, ho * wo), (kd, 1), (sd, 1), (pd, 0), ceil_mode,
                     count_include_pad, div)
    y = y.reshape(n, y.shape[2], ho, wo)
    return y / divisor_override if divisor_override else y


@aten("avg_pool3d")
def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    args = (self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    out = meta_result(_aten.avg_pool3d.default, args, {})
    x = _volumes(self)
    if out.numel() == 0:
        return finish(_zeros_like_meta(out, x), out)
    return finish(_avg_pool3d(x, *args[1:]), out)


@aten("avg_pool3d_backward")
def avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    args = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    out = meta_result(_aten.avg_pool3d_backward.default, (grad_output, self, *args), {})
    x = _volumes(self)
    if out.numel() == 0 or grad_output.numel() == 0:
        return finish(_zeros_like_meta(out, x), out)
    g = _volumes(grad_output)
    (gx,) = vjp(lambda v: _avg_pool3d(v, *args), [x], [True], g)
    return finish(gx, out)


with_out("avg_pool3d.out", avg_pool3d)
with_out("avg_pool3d_backward.grad_input", avg_pool3d_backward, "grad_input")


# ---- max pooling ------------------------------------------------------------------------------
def _max_pool3d(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(maxima, int64 indices d * H * W + h * W + w) of (L, D, H, W) volumes: the first maximum
    over (H, W) per depth, then the first of those along D."""
    (kd, kh, kw), (pd, ph, pw), (dd, dh, dw) = map(_three, (kernel_size, padding, dilation))
    sd, sh, sw = _three(stride) if stride else (kd, kh, kw)
    v, hw = F.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode,
                         return_indices=True)
    n, d, ho, wo = v.shape
    v, at = F.max_pool2d(v.reshape(n, 1, d, ho * wo), (kd, 1), (sd, 1), (pd, 0), (dd, 1),
                         ceil_mode, return_indices=True)
    at = at.reshape(n, -1)  # positions in the (D, H_out * W_out) stage-1 grid
    depth = at // (ho * wo)
    idx = depth * (x.shape[2] * x.shape[3]) + hw.reshape(n, -1).gather(1, at)
    do = v.shape[2]
    return v.reshape(n, do, ho, wo), idx.reshape(n, do, ho, wo)


@aten("max_pool3d_with_indices")
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    args = (self, kernel_size, stride, padding, dilation, ceil_mode)
    out, idx = meta_result(_aten.max_pool3d_with_indices.default, args, {})
    x = _volumes(self)
    if out.numel() == 0:
        return finish(_zeros_like_meta(out, x), out), finish(_zeros_like_meta(idx, x), idx)
    v, i = _max_pool3d(x, *args[1:])
    return finish(v, out), finish(i, idx)


@aten("max_pool3d_with_indices.out")
def max_pool3d_with_indices_out(self, kernel_size, stride=(), padding=0, dilation=1,
                                ceil_mode=False, *, out, indices):
    args = (self, kernel_size, stride, padding, dilation, ceil_mode)
    meta_result(_aten.max_pool3d_with_indices.out, args, {"out": out, "indices": indices})
    v, i = max_pool3d_with_indices(*args)
    _write(out, v), _write(indices, i)
    return out, indices


def _write(dst, res):
    if dst.shape != res.shape:
        dst.resize_(res.shape)
    unwrap(dst).copy_(unwrap(res))


def _scatter_planes(values, indices, plane, op):
    """Zeros of (L, plane) with each (L, k) value added (or written) at its index."""
    v, i = values.reshape(values.shape[0], -1), indices.reshape(values.shape[0], -1)
    z = creation.zeros(v.shape[0], plane, dtype=v.dtype, device=v.device)
    return op(z, 1, i, v)


def _max_backward(grad_output, x, indices):
    """The gradient of a max pooling of (L, D, H, W) volumes x whose outputs took the elements
    indices name: each output's gradient added at its index, in x's dtype."""
    if x.numel() == 0 or grad_output.numel() == 0:
        return creation.zeros(*x.shape, dtype=x.dtype, device=x.device)
    g = unwrap(grad_output).reshape(x.shape[0], -1).to(x.dtype)
    i = unwrap(indices).reshape(x.shape[0], -1)
    return _scatter_planes(g, i, x.shape[1] * x.shape[2] * x.shape[3], scatter_add)


@aten("max_pool3d_with_indices_backward")
def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices):
    """Each output's gradient added to the input element its index names."""
    args = (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
    out = meta_result(_aten.max_pool3d_with_indices_backward.default, args, {})
    return finish(_max_backward(grad_output, _volumes(self), indices), out)


with_out("max_pool3d_with_indices_backward.grad_input", max_pool3d_with_indices_backward,
         "grad_input")


# ---- adaptive max pooling ---------------------------------------------------------------------
def _adaptive_max_pool3d(x, size):
    """(maxima, int64 indices d * H * W + h * W + w) of (L, D, H, W) volumes over adaptive
    windows: per depth over (H, W), then along D (a width of 1 per window)."""
    n, d, h, w = x.shape
    v, hw = pool.adaptive_max_pool2d(x, tuple(size[1:]), True)
    ho, wo = v.shape[2:]
    v, at = pool.adaptive_max_pool2d(v.reshape(n, 1, d, ho * wo), (size[0], ho * wo), True)
    at = at.reshape(n, -1).to(dt.int64)  # positions in the (D, H_out * W_out) stage-1 grid
    idx = (at // (ho * wo)) * (h * w) + hw.reshape(n, -1).to(dt.int64).gather(1, at)
    return v.reshape(n, *size), idx.reshape(n, *size)


@aten("adaptive_max_pool3d")
def adaptive_max_pool3d(self, output_size):
    out, idx = meta_result(_aten.adaptive_max_pool3d.default, (self, output_size), {})
    _floating_pool(self, "adaptive_max_pool3d_cpu")
    x = _volumes(self)
    if out.numel() == 0:
        return finish(_zeros_like_meta(out, x), out), finish(_zeros_like_meta(idx, x), idx)
    v, i = _adaptive_max_pool3d(x.contiguous(), tuple(out.shape[-3:]))
    return finish(v, out), finish(i, idx)


@aten("adaptive_max_pool3d.out")
def adaptive_max_pool3d_out(self, output_size, *, out, indices):
    meta_result(_aten.adaptive_max_pool3d.out, (self, output_size),
                {"out": out, "indices": indices})
    v, i = adaptive_max_pool3d(self, output_size)
    _write(out, v), _write(indices, i)
    return out, indices


@aten("adaptive_max_pool3d_backward")
def adaptive_max_pool3d_backward(grad_output, self, indices):
    """Each output's gradient added to the input element its index names."""
    out = meta_result(_aten.adaptive_max_pool3d_backward.default, (grad_output, self, indices), {})
    _floating_pool(self, "adaptive_max_pool3d_backward")
    return finish(_max_backward(grad_output, _volumes(self), indices), out)


with_out("adaptive_max_pool3d_backward.grad_input", adaptive_max_pool3d_backward, "grad_input")


# ---- fractional max pooling -------------------------------------------------------------------
# significant bits of the 16-bit floats, whose arithmetic places torch's windows for them
_KEEP_BITS = {torch.float16: 11, torch.bfloat16: 8}


def _fractional_forward(op, self, kernel_size, output_size, random_samples):
    """fractional_max_pool2d (op of 2-d sizes) or 3d: torch's Meta results and the values."""
    out, idx = meta_result(op, (self, kernel_size, output_size, random_samples), {})
    spatial = len(output_size)
    _floating_pool(self, f"fractional_max_pool{spatial}d_out_frame")
    x = _planes(self, spatial)
    samples = unwrap(random_samples).reshape(x.shape[0], -1)
    kernel = (1,) * (3 - spatial) + tuple(kernel_size)
    size = (1,) * (3 - spatial) + tuple(out.shape[-spatial:])
    v, i = pool.fractional_max_pool(x, samples, kernel, size, _KEEP_BITS.get(self.dtype))
    return finish(v, out), finish(i, idx)


@aten("fractional_max_pool2d")
def fractional_max_pool2d(self, kernel_size, output_size, random_samples):
    return _fractional_forward(_aten.fractional_max_pool2d.default, self, kernel_size,
                               output_size, random_samples)


@aten("fractional_max_pool3d")
def fractional_max_pool3d(self, kernel_size, output_size, random_samples):
    return _fractional_forward(_aten.fractional_max_pool3d.default, self, kernel_size,
                               output_size, random_samples)


def _fractional_out(op, functional):
    def kernel(self, kernel_size, output_size, random_samples, *, output, indices):
        meta_result(op, (self, kernel_size, output_size, random_samples),
                    {"output": output, "indices": indices})
        v, i = functional(self, kernel_size, output_size, random_samples)
        _write(output, v), _write(indices, i)
        return output, indices
    return kernel


aten("fractional_max_pool2d.output")(
    _fractional_out(_aten.fractional_max_pool2d.output, fractional_max_pool2d))
aten("fractional_max_pool3d.output")(
    _fractional_out(_aten.fractional_max_pool3d.output, fractional_max_pool3d))


@aten("fractional_max_pool2d_backward")
def fractional_max_pool2d_backward(grad_output, self, kernel_size, output_size, indices):
    args = (grad_output, self, kernel_size, output_size, indices)
    out = meta_result(_aten.fractional_max_pool2d_backward.default, args, {})
    _floating_pool(self, "fractional_max_pool2d_backward_out_frame")
    return finish(_max_backward(grad_output, _planes(self, 2), indices), out)


@aten("fractional_max_pool3d_backward")
def fractional_max_pool3d_backward(grad_output, self, kernel_size, output_size, indices):
    """torch has no Meta kernel for it: the gradient takes self's shape and dtype."""
    _floating_pool(self, "fractional_max_pool3d_backward_out_frame")
    return finish(_max_backward(grad_output, _planes(self, 3), indices), self)


@aten("fractional_max_pool3d_backward.grad_input")
def fractional_max_pool3d_backward_out(grad_output, self, kernel_size, output_size, indices, *,
                                       grad_input):
    check_devices((grad_output, self, indices, grad_input), {},
                  _aten.fractional_max_pool3d_backward.grad_input)
    return write_into(grad_input, fractional_max_pool3d_backward(
        grad_output, self, kernel_size, output_size, indices))


with_out("fractional_max_pool2d_backward.grad_input", fractional_max_pool2d_backward,
         "grad_input")


# ---- max unpooling ----------------------------------------------------------------------------
def _unpool(name, op, self, indices, output_size, rest):
    """Zeros of output_size per plane holding self's values at indices (torch's error for an
    index outside the plane)."""
    out = meta_result(op, (self, indices, output_size, *rest), {})
    spatial, plane = len(output_size), math.prod(output_size)
    x = unwrap(self)
    x = x.reshape(-1, *x.shape[-spatial:])
    x = x.to(dt.float32) if x.dtype in dt.HALF_TYPES else x
    if out.numel() == 0:
        return finish(_zeros_like_meta(out, x), out)
    i = unwrap(indices).reshape(x.shape[0], -1)
    wrong = (i < 0) | (i >= plane)
    if i.numel() and bool(wrong.any()):
        bad = int(i.reshape(-1)[int(wrong.reshape(-1).to(dt.int32).argmax())])
        sizes = "x".join(str(s) for s in output_size)
        raise RuntimeError(f"{name}: Found an invalid max index: {bad} (output volumes are of "
                           f"size {sizes})")
    return finish(_scatter_planes(x, i, plane, scatter), out)


@aten("max_unpool2d")
def max_unpool2d(self, indices, output_size):
    return _unpool("max_unpool2d", _aten.max_unpool2d.default, self, indices, output_size, ())


@aten("max_unpool3d")
def max_unpool3d(self, indices, output_size, stride, padding):
    return _unpool("max_unpool3d", _aten.max_unpool3d.default, self, indices, output_size,
                   (stride, padding))


with_out("max_unpool2d.out", max_unpool2d)
with_out("max_unpool3d.out", max_unpool3d)


# ---- trilinear interpolation ------------------------------------------------------------------
def _trilinear(x, size, align, scales):
    """(L, D, H, W) volumes resampled to size: bilinear over (H, W) per depth, then linear
    along D over the (D, H_out * W_out) planes (their width kept: a step of exactly 1)."""
    sd, sh, sw = scales
    y = resample.upsample(x, tuple(size[1:]), (sh, sw), "bilinear", align)
    n, d, ho, wo = y.shape
    y = resample.upsample(y.reshape(n, 1, d, ho * wo), (size[0], ho * wo), (sd, None),
                          "bilinear", align)
    return y.reshape(n, size[0], ho, wo)


def _linear_sources(n_in, n_out, scale, align, dtype):
    """torch's linear interpolation along one dim: per output, its two sources and their
    weights (numpy, computed in dtype as torch's kernels compute them)."""
    T = np.dtype(dtype).type
    if align:
        step = T(n_in - 1) / T(n_out - 1) if n_out > 1 else T(0)
    else:
        step = T(1.0 / scale) if scale else T(n_in) / T(n_out)
    dst = np.arange(n_out, dtype=dtype)
    src = dst * step if align else np.maximum((dst + T(0.5)) * step - T(0.5), T(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam = (src - i0.astype(dtype)).astype(dtype)
    return i0, np.minimum(i0 + 1, n_in - 1), (T(1) - lam).astype(dtype), lam


def _linear_backward(g, dim, n_in, scale, align):
    """The gradient of linear interpolation along dim (to n_in inputs) from g: each output's
    gradient added, weighted, to its two sources (index_add_ over whole slices)."""
    dtype = np.float64 if g.dtype is dt.float64 else np.float32
    shape = [1] * g.ndim
    shape[dim] = g.shape[dim]
    sizes = list(g.shape)
    sizes[dim] = n_in
    gx = creation.zeros(*sizes, dtype=g.dtype, device=g.device)
    i0, i1, w0, w1 = _linear_sources(n_in, g.shape[dim], scale, align, dtype)
    for index, weight in ((i0, w0), (i1, w1)):
        w = creation.from_numpy(weight.reshape(shape), device=g.device)
        index_add_(gx, dim, creation.from_numpy(index, device=g.device), g * w)
    return gx


def _trilinear_backward(g, x_shape, align, scales):
    """The gradient of _trilinear w.r.t. (L, D, H, W) volumes of x_shape, one dim at a time.
    NOTE: not upsample.cl's backward, which scans a window of outputs per input and is far
    slower on (D, H_out * W_out) planes."""
    for dim, scale in zip((1, 2, 3), scales):
        g = _linear_backward(g, dim, x_shape[dim], scale, align)
    return g


@aten("upsample_trilinear3d")
def upsample_trilinear3d(self, output_size, align_corners, scales_d=None, scales_h=None,
                         scales_w=None):
    scales = (scales_d, scales_h, scales_w)
    out = meta_result(_aten.upsample_trilinear3d.default,
                      (self, output_size, align_corners, *scales), {})
    x = _volumes(self)
    if out.numel() == 0 or x.numel() == 0:
        return finish(_zeros_like_meta(out, x), out)
    return finish(_trilinear(x, tuple(output_size), align_corners, scales), out)


@aten("upsample_trilinear3d_backward")
def upsample_trilinear3d_backward(grad_output, output_size, input_size, align_corners,
                                  scales_d=None, scales_h=None, scales_w=None):
    scales = (scales_d, scales_h, scales_w)
    args = (grad_output, output_size, input_size, align_corners, *scales)
    out = meta_result(_aten.upsample_trilinear3d_backward.default, args, {})
    g = _volumes(grad_output)
    if out.numel() == 0 or g.numel() == 0:
        return finish(creation.zeros(*out.shape, dtype=g.dtype, device=g.device), out)
    x_shape = (g.shape[0], *input_size[2:])
    return finish(_trilinear_backward(g, x_shape, align_corners, scales), out)


with_out("upsample_trilinear3d.out", upsample_trilinear3d)
with_out("upsample_trilinear3d_backward.grad_input", upsample_trilinear3d_backward, "grad_input")
