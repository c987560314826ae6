"""Algorithm "im2col": the classic Caffe / clnn convolution.

Forward: per chunk of images (as many as the workspace budget, backends.conv_workspace_limit,
allows), im2col (cl_kernels/conv_im2col.cl) writes the column buffer col[k][n][p] and one
batched GEMM per chunk computes out[n, g] = W[g] @ col[g, :, n] with the bias in its epilogue.
Backward: the weight gradient gW[g] += gout[g] (Cog, NB*P) @ col[g]^T; the input gradient
gcol = W^T @ gout, then col2im sums the columns back onto the input (no atomics).

float16/bfloat16 tensors are read in place: the column buffer holds the input's 16-bit values
(copied exactly), the GEMMs read them and sum in float32, and gcol is float32, so that the
input gradient is rounded once, by col2im. Their backward walks each chunk in up to
HALF_SLICES slices of images, so that its scratch (gout's copy, the columns, the float32 gcol)
holds a quarter of float32's bytes for the chunk, and a whole step's peak halves; the weight
gradient sums the slices in float32 and is rounded once.
"""
import numpy as np

from .. import dtypes as dt
from ..ops import elementwise as ew
from ..ops.gemm import gemm, gemm_into
from ..program import ctype_of, round_up
from ..tensor import ClTensor
from . import common

KERNEL_FILE = "conv_im2col.cl"
# The forward's column rows start every ROW_ALIGN elements (64 bytes of float32), so that the
# GEMM's vector loads of B do not straddle cache lines (PoCL, 2 AVX-512 cores: AlexNet conv1's
# batch-8 product 64x3025x363 x8 9.1 -> 7.0 ms with rows 3040 instead of 3025 apart)
ROW_ALIGN = 16


# 16-bit backward: each chunk in at most HALF_SLICES slices of images, none with less than
# SLICE_MIN_BYTES of 16-bit columns. NOTE: the launches of more, smaller slices cost more than
# the memory saved (PoCL, bf16 3x3 conv 3->32 of 8x64x64, 1.7 MiB of columns: step 3.7 ms in
# one slice, 4.2 in 4; 32->64 of 32x32x32, 18 MiB: 27.0 in both)
HALF_SLICES, SLICE_MIN_BYTES = 4, 2 * 2**20


def _per_image_bytes(p, backward):
    """One image's column buffer (and, in backward, its gradient's (Co, P) copy; 16-bit
    tensors' input gradient columns are float32)."""
    col_item = 4 if backward and p.dtype in dt.HALF_TYPES else p.dtype.itemsize
    return (p.c * p.kh * p.kw * col_item + (p.co * p.dtype.itemsize if backward else 0)) * \
        p.ho * p.wo


def workspace_bytes(p, backward=False, device=None):
    """Scratch bytes of one chunk (in backward of 16-bit tensors, one slice) of images."""
    return _per_image_bytes(p, backward) * _chunks(p, backward)[0][1]


def _chunks(p, backward):
    """[(first image, images)] of the chunks, or of 16-bit backward's slices of them."""
    nb = common.images_per_chunk(p.n, _per_image_bytes(p, backward))
    if backward and p.dtype in dt.HALF_TYPES:
        cols = p.c * p.kh * p.kw * p.ho * p.wo * p.dtype.itemsize * nb
        nb = -(-nb // max(1, min(HALF_SLICES, cols // SLICE_MIN_BYTES)))
    return [(n0, min(nb, p.n - n0)) for n0 in range(0, p.n, nb)]


def _images(t, n0, nb):
    return common.strided(t, (nb,) + tuple(t.shape[1:]), t.strides,
                          t.offset + n0 * t.strides[0])


def im2col(x, p, nb, align=1):
    """The (C*KH*KW, nb, P) column buffer of the nb images of x (a 4-d view), its (k, n) rows
    a multiple of `align` elements apart."""
    P = p.ho * p.wo
    ps = round_up(P, align)
    buf = common.empty((p.c * p.kh * p.kw, nb, ps), x)
    col = common.strided(buf, (buf.shape[0], nb, P), buf.strides)
    rows = x.device.is_cpu
    # NOTE: a copy: 16-bit floats move as their bits (short; zero is all zero bits)
    bits = dt.int16 if x.dtype in dt.HALF_TYPES else None
    kernel = common.get_kernel(x.device, KERNEL_FILE, "im2col_rows" if rows else "im2col",
                               common.shape_defines(p, bits))
    items = col.numel() // p.wo if rows else col.numel()
    common.launch_1d(x.device, kernel, items, np.int32(p.c), np.int32(p.h),
                     np.int32(p.w), np.int32(p.ho), np.int32(p.wo), np.int32(nb),
                     *common.view_args(x), buf.storage.buf, np.int64(ps))
    return col


def col2im(gcol, gx, p, nb):
    """gx (a 4-d view of nb images) = the sum of gcol's columns over the input."""
    defines = common.shape_defines(p)
    if gcol.dtype != gx.dtype:
        defines["TG"] = ctype_of(gcol.dtype)
    kernel = common.get_kernel(gx.device, KERNEL_FILE, "col2im", defines)
    common.launch_1d(gx.device, kernel, gx.numel(), np.int32(p.c), np.int32(p.h),
                     np.int32(p.w), np.int32(p.ho), np.int32(p.wo), np.int32(nb),
                     gcol.storage.buf, *common.view_args(gx))


def _weight_groups(w, p):
    """The weight as (G, Cog, Kg) (contiguous)."""
    return w.contiguous().reshape(p.groups, p.cog, p.k)


def _out_groups(out, p, nb):
    """A 4-d view of nb output images as (nb, G, Cog, P) (its (H, W) dims must merge)."""
    s0, s1 = out.strides[:2]
    return common.strided(out, (nb, p.groups, p.cog, p.ho * p.wo),
                          (s0, p.cog * s1, s1, common.spatial_stride(out)))


FUSES_RELU = True  # forward(..., relu=True) applies max(., 0) as it stores (conv/function.py)


def forward(x, w, bias, p, out, relu=False):
    """out = conv2d(x, w, bias) (then max(., 0) with relu) through im2col + GEMM, chunked over
    images."""
    wg = _weight_groups(w, p)
    P = p.ho * p.wo
    for n0, nb in _chunks(p, False):
        col = im2col(_images(x, n0, nb), p, nb, ROW_ALIGN)
        ps = col.strides[1]
        a = common.strided(wg, (nb,) + wg.shape, (0,) + wg.strides)
        b = common.strided(col, (nb, p.groups, p.k, P), (ps, p.k * nb * ps, nb * ps, 1))
        o = _out_groups(_images(out, n0, nb), p, nb)
        _gemm_bias(a, b, o, bias, p, relu)
    return out


def _gemm_bias(a, b, o, bias, p, relu):
    if bias is None or p.groups == 1:
        gemm(a, b, out=o, row_bias=bias, relu=relu)
        return
    c = common.strided(bias, o.shape, (0, p.cog * bias.strides[0], bias.strides[0], 0))
    gemm(a, b, out=o, c=c, beta=1, relu=relu)


def backward(x, w, gout, p, need_x, need_w):
    """(gx, gw) of conv2d through im2col + GEMM; None for a gradient not asked for."""
    wg = _weight_groups(w, p)
    gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x)) if need_x else None
    gw = common.empty((p.co, p.cg, p.kh, p.kw), w) if need_w else None
    chunks = _chunks(p, True)
    # NOTE: a 16-bit weight gradient summed over several chunks sums in float32, rounded once
    gsum = gw if gw is None or len(chunks) == 1 or w.dtype not in dt.HALF_TYPES else \
        ClTensor.empty_on(gw.shape, dt.float32, gw.device)
    for i, (n0, nb) in enumerate(chunks):
        gcn = common.to_cnhw(_images(gout, n0, nb)).reshape(p.groups, p.cog, -1)
        if need_w:
            col = im2col(_images(x, n0, nb), p, nb).reshape(p.groups, p.k, -1)
            gw3 = gsum.view(p.groups, p.cog, p.k)
            gemm_into(gcn, col.mT, gw3, gw3 if i else None, beta=1 if i else 0)
            del col
        if need_x:
            _input_grad(wg, gcn, _images(gx, n0, nb), p, nb)
        del gcn  # before the next chunk's is made
    if gsum is not gw:
        ew.copy(gsum, gw)
    return gx, gw


def _input_grad(wg, gcn, gx, p, nb):
    """gx (a view of nb images) = col2im(W^T @ gout). For 16-bit tensors gcol is float32, so
    that col2im rounds its sums once."""
    if wg.dtype not in dt.HALF_TYPES:
        col2im(gemm(wg.mT, gcn), gx, p, nb)
        return
    gcol = ClTensor.empty_on((p.groups, p.k, gcn.shape[-1]), dt.float32, wg.device)
    gemm_into(wg.mT, gcn, gcol)
    col2im(gcol, gx, p, nb)
