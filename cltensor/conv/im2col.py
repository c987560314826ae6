"""Algorithm "im2col": the classic Caffe / clnn convolution.

Forward: per chunk of images (as many as the workspace budget, backends.conv_workspace_limit,
allows), im2col (cl_kernels/conv_im2col.cl) writes the column buffer col[k][n][p] and one
batched GEMM per chunk computes out[n, g] = W[g] @ col[g, :, n] with the bias in its epilogue.
Backward: the weight gradient gW[g] += gout[g] (Cog, NB*P) @ col[g]^T; the input gradient
gcol = W^T @ gout, then col2im sums the columns back onto the input (no atomics).

float16/bfloat16 tensors are read in place: the column buffer holds the input's 16-bit values
(copied exactly), the GEMMs read them and sum in float32, and gcol is float32, so that the
input gradient is rounded once, by col2im; gcol is made for half the input channels at a time,
so that it holds no more bytes than the 16-bit columns. Their backward walks each chunk in up
to HALF_SLICES slices of images, so that its scratch (gout's copy, the columns, gcol) holds
at most a quarter of float32's bytes for the chunk, and a whole step's peak halves; the weight
gradient of several slices sums in float32 and is rounded once.
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
    """One image's column buffer (and, in backward, its gradient's (Co, P) copy)."""
    channels = p.c * p.kh * p.kw + (p.co if backward else 0)
    return channels * p.ho * p.wo * p.dtype.itemsize


def workspace_bytes(p, backward=False, device=None):
    """Scratch bytes of one chunk (in backward of 16-bit tensors, one slice) of images, and
    a 16-bit weight gradient's float32 sum over several."""
    chunks = _chunks(p, backward)
    gsum = p.co * p.k * 4 if backward and p.dtype in dt.HALF_TYPES and len(chunks) > 1 else 0
    return _per_image_bytes(p, backward) * chunks[0][1] + gsum


def _chunks(p, backward):
    """[(first image, images)] of the chunks, or of 16-bit backward's slices of them."""
    per_image = _per_image_bytes(p, backward)
    nb = common.images_per_chunk(p.n, per_image)
    if backward and p.dtype in dt.HALF_TYPES:
        nb = _slice_images(p, nb, per_image)
    return [(n0, min(nb, p.n - n0)) for n0 in range(0, p.n, nb)]


def _slice_images(p, nb, per_image):
    """The images of a slice of a 16-bit backward's chunk of nb: the count of slices (at most
    HALF_SLICES, each with SLICE_MIN_BYTES of columns) that needs the least scratch, counting
    the float32 sum of the weight gradient that several slices of one chunk add (large
    weights over small images are better left whole)."""
    cols = p.c * p.kh * p.kw * p.ho * p.wo * p.dtype.itemsize * nb
    most = max(1, min(HALF_SLICES, cols // SLICE_MIN_BYTES))
    gsum = 0 if nb < p.n else p.co * p.k * 4  # several chunks sum it anyway

    def scratch(s):
        return per_image * -(-nb // s) + (gsum if s > 1 else 0)
    return -(-nb // min(range(1, most + 1), key=scratch))


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
    """gx (a 4-d view of nb images, of all or some of p's channels: gcol's rows hold those
    channels' columns) = the sum of gcol's columns over the input."""
    defines = common.shape_defines(p)
    if gcol.dtype != gx.dtype:
        defines["TG"] = ctype_of(gcol.dtype)
    kernel = common.get_kernel(gx.device, KERNEL_FILE, "col2im", defines)
    common.launch_1d(gx.device, kernel, gx.numel(), np.int32(gx.shape[1]), np.int32(p.h),
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


def takes_relu_mask(device):
    """backward takes gout back through a fused ReLU (relu_y) as it lays gout out."""
    return True


def backward(x, w, gout, p, need_x, need_w, relu_y=None):
    """(gx, gw) of conv2d through im2col + GEMM; None for a gradient not asked for. relu_y:
    the forward's fused ReLU output, through which gout is taken back in its layout copy."""
    wg = _weight_groups(w, p)
    gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x)) if need_x else None
    gw = common.empty((p.co, p.cg, p.kh, p.kw), w) if need_w else None
    chunks = _chunks(p, True)
    # NOTE: a 16-bit weight gradient summed over several chunks sums in float32, rounded once
    gsum = gw if gw is None or len(chunks) == 1 or w.dtype not in dt.HALF_TYPES else \
        ClTensor.empty_on(gw.shape, dt.float32, gw.device)
    for i, (n0, nb) in enumerate(chunks):
        mask = None if relu_y is None else _images(relu_y, n0, nb)
        gcn = common.to_cnhw(_images(gout, n0, nb), mask).reshape(p.groups, p.cog, -1)
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
    that col2im rounds its sums once, made for half the channels (or groups) at a time."""
    if wg.dtype not in dt.HALF_TYPES:
        col2im(gemm(wg.mT, gcn), gx, p, nb)
        return
    kk = p.kh * p.kw
    for g0, g1, c0, c1 in _channel_halves(p):
        rows = wg.mT[g0:g1, c0 * kk:c1 * kk]
        gcol = ClTensor.empty_on(rows.shape[:2] + gcn.shape[-1:], dt.float32, wg.device)
        gemm_into(rows, gcn[g0:g1], gcol)
        first, count = g0 * p.cg + c0, (g1 - g0 - 1) * p.cg + c1 - c0
        col2im(gcol, common.strided(gx, (nb, count) + gx.shape[2:], gx.strides,
                                    gx.offset + first * gx.strides[1]), p, nb)
        del gcol  # before the next one is made


def _channel_halves(p):
    """[(first group, end group, first channel, end channel within each group)]: the input
    channels in runs of consecutive channels, none over half of them: runs of half the groups
    (rounded down) where there are several, else the two halves of the channels (one run
    when there is one channel)."""
    if p.groups > 1:
        run = p.groups // 2
        return [(g0, min(g0 + run, p.groups), 0, p.cg) for g0 in range(0, p.groups, run)]
    half = p.c // 2
    return [(0, 1, 0, p.c)] if half == 0 else [(0, 1, 0, half), (0, 1, half, p.c)]
