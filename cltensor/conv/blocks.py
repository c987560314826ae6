"""unfold (im2col) and fold (col2im) in torch's F.unfold / F.fold layout: (N, C * kh * kw, L)
columns, rows ordered (c, ki, kj), L = Lh * Lw blocks row-major. conv_im2col.cl's kernels with
COL_NK run both: unfold copies each column element once, fold gathers each output element's
taps (no atomics: deterministic, and on CPUs several times faster than a scatter_add). Each is
the other's gradient (Unfold, Fold)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import autograd
from .. import dtypes as dt
from ..tensor import ClTensor
from . import common

KERNEL_FILE = "conv_im2col.cl"


class Blocks(NamedTuple):
    """The geometry of the sliding blocks: kernel, stride, dilation, top/left padding, the
    image's channels and size, and the blocks' grid (ho, wo)."""
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    c: int
    h: int
    w: int
    ho: int
    wo: int


def _defines(g, dtype):
    return {"T": dt.as_dtype(dtype).ctype, "KH": g.kh, "KW": g.kw, "SH": g.sh, "SW": g.sw,
            "DH": g.dh, "DW": g.dw, "PT": g.pt, "PL": g.pl, "COL_NK": None}


def im2col(x: ClTensor, g: Blocks) -> ClTensor:
    """The (N, C * kh * kw, L) columns of the (N, C, H, W) view x."""
    n = x.shape[0]
    cols = ClTensor.empty_on((n, g.c * g.kh * g.kw, g.ho * g.wo), x.dtype, x.device)
    if cols.numel() == 0:
        return cols
    # NOTE: a copy: 16-bit floats move as their bits (zero is all zero bits)
    bits = dt.int16 if x.dtype in dt.HALF_TYPES else x.dtype
    rows = x.device.is_cpu  # one work-item per row of wo: the index arithmetic once per row
    kernel = common.get_kernel(x.device, KERNEL_FILE, "im2col_rows" if rows else "im2col",
                               _defines(g, bits))
    items = cols.numel() // g.wo if rows else cols.numel()
    common.launch_1d(x.device, kernel, items, *_shape_args(g, n), *common.view_args(x),
                     cols.storage.buf, np.int64(g.ho * g.wo))
    return cols


def col2im(cols: ClTensor, g: Blocks) -> ClTensor:
    """The (N, C, H, W) sums of the contiguous (N, C * kh * kw, L) columns over their blocks."""
    n = cols.shape[0]
    out = ClTensor.empty_on((n, g.c, g.h, g.w), cols.dtype, cols.device)
    if out.numel() == 0:
        return out
    kernel = common.get_kernel(cols.device, KERNEL_FILE, "col2im", _defines(g, cols.dtype))
    common.launch_1d(cols.device, kernel, out.numel(), *_shape_args(g, n), cols.storage.buf,
                     *common.view_args(out))
    return out


def _shape_args(g, n):
    return [np.int32(v) for v in (g.c, g.h, g.w, g.ho, g.wo, n)]


def _dense(t):
    """t contiguous from offset 0 (the kernels index the columns from their buffer's start)."""
    return t if t.is_contiguous() and t.offset == 0 else t.clone()


class Unfold(autograd.Function):
    """unfold's differentiable form: forward(ctx, x, g); its gradient is fold's."""

    @staticmethod
    def forward(ctx, x, g):
        ctx.g = g
        return im2col(x, g)

    @staticmethod
    def backward(ctx, gy):
        return Fold.apply(gy, ctx.g), None


class Fold(autograd.Function):
    """fold's differentiable form: forward(ctx, cols, g); its gradient is unfold's."""

    @staticmethod
    def forward(ctx, cols, g):
        ctx.g = g
        return col2im(_dense(cols), g)

    @staticmethod
    def backward(ctx, gy):
        return Unfold.apply(gy, ctx.g), None
