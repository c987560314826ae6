"""2-d resampling (torch's interpolate: nearest, nearest-exact, bilinear, bicubic), forward and
backward: the scales as torch computes them and the launches of cl_kernels/upsample.cl. No
autograd here (cltensor/nn/functional.py).

Inputs are 4-d NCHW views with any strides; outputs are contiguous, or channels_last when the
input is.
"""
import numpy as np

from .. import dtypes as dt
from ..program import ctype_of, get_kernel
from . import pool

KERNEL_FILE = "upsample.cl"
MODES = {"nearest": 0, "nearest-exact": 1, "bilinear": 2, "bicubic": 3}  # upsample.cl's
INTERPOLATING = ("bilinear", "bicubic")  # scales in the input's type, align_corners applies
SIZES_T = np.dtype([(f, np.int32) for f in ("N", "C", "H", "W", "OH", "OW")])


def scales(x_hw, out_hw, scale_factor, mode, align_corners, dtype):
    """Per dim, (float32 scale, scale in dtype): the source step per output as torch's kernels
    compute it, the nearest modes in float32, bilinear and bicubic in the input's type; a
    scale_factor given (None: from the sizes) counts as 1 / scale_factor."""
    out, dtype = [], dt.compute_dtype(dtype)  # 16-bit floats interpolate in float32
    for n, m, f in zip(x_hw, out_hw, scale_factor or (None, None)):
        T = dtype.type if mode in INTERPOLATING else np.float32
        if mode in INTERPOLATING and align_corners:
            s = T(n - 1) / T(m - 1) if m > 1 else T(0)
        else:
            s = T(1.0 / f) if f else T(n) / T(m)
        out.append((np.float32(s), dtype.type(s)))
    return out


def _launch(name, written, sizes, mode, align_corners, sc, src):
    device = written.device
    if written.numel() == 0:
        return
    z = np.zeros((), SIZES_T)
    for f, v in zip(SIZES_T.names, sizes):
        z[f] = v
    (fh, th), (fw, tw) = sc
    kernel = get_kernel(device, KERNEL_FILE, name, {"T": ctype_of(written.dtype)})
    N, C, Y, X = written.shape
    pool.launch_grid(device, kernel, (X, Y, N * C), pool.GROUP["cpu" if device.is_cpu else "gpu"],
                     z, np.int32(MODES[mode]), np.int32(bool(align_corners)), fh, fw, th, tw,
                     src.storage.buf, pool._view4(src, "long"), written.storage.buf,
                     pool._view4(written, "long"))


def _check_planes(shape):
    if shape[0] * shape[1] > pool._INT_MAX or max(shape[2:]) > pool._INT_MAX:
        raise ValueError(f"interpolate: {shape} is too large for 32-bit indices")


def upsample(x, out_hw, scale_factor, mode, align_corners):
    """The resampled 4-d x of spatial size out_hw."""
    y = pool._empty(x.shape[:2] + tuple(out_hw), pool.layout_of(x), x)
    _check_planes(y.shape)
    sc = scales(x.shape[2:], out_hw, scale_factor, mode, align_corners, x.dtype)
    _launch("upsample_fwd", y, x.shape + tuple(out_hw), mode, align_corners, sc, x)
    return y


def upsample_backward(g, x_shape, layout, scale_factor, mode, align_corners):
    """The gradient w.r.t. the input (of x_shape, in `layout`) of upsample, from g."""
    gx = pool._empty(tuple(x_shape), layout, g)
    _check_planes(g.shape)
    sc = scales(x_shape[2:], g.shape[2:], scale_factor, mode, align_corners, g.dtype)
    _launch("upsample_bwd", gx, tuple(x_shape) + tuple(g.shape[2:]), mode, align_corners, sc, g)
    return gx
