"""Resampling and rearranging images: interpolate (and the deprecated upsample names),
pixel_shuffle, pixel_unshuffle, channel_shuffle, pad.
"""
import math
import numbers
import warnings

from ...autograd import Function
from ...autograd.namespace import pad as _pad
from ...ops import pool, resample
from .pooling import adaptive_avg_pool2d
from .utils import _float_tensor, _linear_backward, _tensor
from .volume import adaptive_avg_pool3d

__all__ = ["channel_shuffle", "interpolate", "pad", "pixel_shuffle", "pixel_unshuffle", "upsample",
           "upsample_bilinear", "upsample_nearest"]


class _Upsample(Function):
    @staticmethod
    def forward(ctx, x, out_hw, scale_factor, mode, align_corners):
        ctx.x_shape, ctx.layout = x.shape, pool.layout_of(x)
        ctx.args = (out_hw, scale_factor, mode, align_corners)
        return resample.upsample(x, out_hw, scale_factor, mode, align_corners)

    @staticmethod
    def backward(ctx, g):
        gx = _linear_backward(g, resample.upsample_backward,
                              (ctx.x_shape, ctx.layout, *ctx.args[1:]), _Upsample, ctx.args)
        return gx, None, None, None, None


INTERPOLATE_MODES = {3: ("nearest", "nearest-exact", "linear", "area"),
                     4: ("nearest", "nearest-exact", "bilinear", "bicubic", "area"),
                     5: ("nearest", "nearest-exact", "trilinear", "area")}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resample the spatial dims of an (N, C, L), (N, C, H, W) or (N, C, D, H, W) input to
    `size`, or to floor(size * scale_factor), as torch's interpolate.

    Args:
        mode: "nearest" (torch's legacy rounding), "nearest-exact", "linear" (3-d),
            "bilinear" or "bicubic" (4-d; Keys' cubic with a = -0.75, edges replicated),
            "trilinear" (5-d), "area" (adaptive average pooling).
        align_corners: interpolating modes only: map the corner pixels' centres onto each
            other (default False: the pixels' areas).
        recompute_scale_factor: with scale_factor, compute the sampling step from the sizes
            rather than from the scale_factor given.

    Example:
        >>> F.interpolate(cltensor.randn(1, 3, 8, 8), scale_factor=2, mode="bilinear").shape
        (1, 3, 16, 16)
    """
    op = "interpolate"
    _float_tensor(input, "input", op)
    if input.ndim not in INTERPOLATE_MODES:
        raise ValueError(f"{op}: expected a 3-d (N, C, L), 4-d (N, C, H, W) or 5-d "
                         f"(N, C, D, H, W) input, got shape {input.shape}")
    if mode not in INTERPOLATE_MODES[input.ndim]:
        raise ValueError(f"{op}: mode {mode!r} is not supported for {input.ndim}-d input "
                         f"(supported: {', '.join(INTERPOLATE_MODES[input.ndim])})")
    linear = mode in ("linear", "bilinear", "trilinear")
    if align_corners is not None and not (linear or mode == "bicubic"):
        raise ValueError(f"{op}: align_corners can only be set with the interpolating modes "
                         f"linear, bilinear, bicubic and trilinear, not {mode!r}")
    if antialias:
        raise ValueError(f"{op}: antialias is not supported")
    dims = input.ndim - 2
    out_size, factors = _interpolate_size(input, size, scale_factor, dims, op)
    if recompute_scale_factor or size is not None:
        factors = None
    if dims == 3:
        return _interpolate3d(input, out_size, factors, mode, bool(align_corners))
    x = input if dims == 2 else input.unsqueeze(2)
    if dims == 1:
        out_size, factors = (1,) + out_size, None if factors is None else (None,) + factors
    if mode == "area":
        y = adaptive_avg_pool2d(x, out_size)
    else:
        y = _Upsample.apply(x, out_size, factors, "bilinear" if linear else mode,
                            bool(align_corners))
    return y if dims == 2 else y.squeeze(2)


def _interpolate3d(x, size, factors, mode, align_corners):
    """interpolate of a 5-d x, separably: over (H, W) with the volumes as (N * C, D, H, W)
    planes, then over (D, OH * OW), whose columns map onto themselves (two launches)."""
    if mode == "area":
        return adaptive_avg_pool3d(x, size)
    n, c, d, h, w = x.shape
    (od, oh, ow), fd, fhw = size, None, None
    if factors is not None:
        fd, fhw = factors[0], factors[1:]
    mode = "bilinear" if mode == "trilinear" else mode
    y = _Upsample.apply(x.reshape(n * c, d, h, w), (oh, ow), fhw, mode, align_corners)
    y = _Upsample.apply(y.reshape(n * c, 1, d, oh * ow), (od, oh * ow), (fd, None), mode,
                        align_corners)
    return y.reshape(n, c, od, oh, ow)


def _interpolate_size(x, size, scale_factor, dims, op):
    """(output spatial size, scale factors or None), checked."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor")
    if size is not None:
        values = tuple(size) if isinstance(size, (tuple, list)) else (size,) * dims
        if len(values) != dims or not all(isinstance(v, numbers.Integral) and
                                          not isinstance(v, bool) and v > 0 for v in values):
            raise ValueError(f"{op}: size must be a positive int or {dims} of them for a "
                             f"{x.ndim}-d input, got {size!r}")
        return tuple(int(v) for v in values), None
    values = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
        (scale_factor,) * dims
    if len(values) != dims or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                      and v > 0 for v in values):
        raise ValueError(f"{op}: scale_factor must be a positive number or {dims} of them for a "
                         f"{x.ndim}-d input, got {scale_factor!r}")
    out = tuple(math.floor(n * float(f)) for n, f in zip(x.shape[2:], values))
    if min(out) <= 0:
        raise ValueError(f"{op}: scale_factor {scale_factor!r} gives an empty output {out} "
                         f"for input size {x.shape[2:]}")
    return out, tuple(float(f) for f in values)


def _shuffle_factor(input, factor, name, op):
    _tensor(input, "input", op)
    if not isinstance(factor, numbers.Integral) or isinstance(factor, bool) or factor <= 0:
        raise ValueError(f"{op}: {name} must be a positive int, got {factor!r}")
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input of at least 3 dims (*, C, H, W), got shape "
                         f"{input.shape}")
    return int(factor)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r): each channel group of r^2 spread over an
    r x r block (sub-pixel convolution's upsampling).

    Example:
        >>> F.pixel_shuffle(cltensor.zeros(1, 8, 3, 3), 2).shape
        (1, 2, 6, 6)
    """
    r = _shuffle_factor(input, upscale_factor, "upscale_factor", "pixel_shuffle")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle: the input's {c} channels are not divisible by "
                         f"upscale_factor^2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), the inverse of pixel_shuffle.

    Example:
        >>> F.pixel_unshuffle(cltensor.zeros(1, 2, 6, 6), 2).shape
        (1, 8, 3, 3)
    """
    r = _shuffle_factor(input, downscale_factor, "downscale_factor", "pixel_unshuffle")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle: the input's height {h} and width {w} must be "
                         f"divisible by downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, C, *) with its channels regrouped: channel g * (C / groups) + k moves to
    k * groups + g (ShuffleNet).

    Example:
        >>> F.channel_shuffle(cltensor.arange(6.0).reshape(1, 6, 1, 1), 2).flatten().tolist()
        [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """
    op = "channel_shuffle"
    _tensor(input, "input", op)
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if input.ndim < 3 or input.shape[1] % groups:
        raise ValueError(f"{op}: expected an (N, C, *) input with C divisible by groups "
                         f"{groups}, got shape {input.shape}")
    n, c, *rest = input.shape
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


def pad(input, pad, mode="constant", value=None):
    """cltensor.pad (torch.nn.functional.pad): pad is (left, right, top, bottom, ...) from the
    last dim backwards; mode "constant", "reflect", "replicate" or "circular"."""
    return _pad(input, pad, mode, 0 if value is None else value)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate (torch's deprecated name), with its deprecation warning."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """interpolate with mode "nearest" (torch's deprecated name)."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """interpolate with mode "bilinear" and align_corners=True (torch's deprecated name)."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
