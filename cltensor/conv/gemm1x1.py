"""Algorithm "gemm_1x1": a 1x1 convolution with no padding is a plain GEMM per image,
out[n, g] = W[g] (Cog, Cg) @ x[n, g] (Cg, H*W), with no workspace (a strided one reads a
contiguous copy of the strided input), or on CPUs for small images one product over all
images, W[g] @ x[g] (Cg, N*H*W) (merges). Backward: gx[n, g] = W[g]^T @ gout[n, g] (merged
likewise); gW[g] = gout[g] (Cog, N*P) @ x[g]^T, read in place when the (N, H, W) dims of both merge
(channels_last); else, on the devices whose GEMM sums over a batch in one kernel
(gemm.sums_batches: CPUs), the sum over n of gout[n, g] @ x[n, g]^T read in place, and
elsewhere one product over (C, N*H*W) copies.

NOTE: the products go to gemm_into, not gemm(): the operands are built here with matching
shapes and the outputs are new tensors, so the public entry's checks and overlap tests (about
a fifth of a small layer's host time on PoCL) have nothing to find.
"""
from ..ops import elementwise as ew
from ..ops.gemm import gemm_into, gemm_sum_into, sums_batches
from . import common

# On the devices whose GEMM sums over batches (CPUs: the packed family), the forward and
# input-gradient products of images with at most this many output positions run as one
# product over (C, N*H*W) copies when the layer has at least MERGED_MIN_CHANNELS input and
# output channels per group: narrow per-image products fill few of gemm_packed's 32-column
# panels, and the copies cost a 1/C share of the product (measured: docs/performance.md).
MERGED_MAX_POSITIONS = {"forward": 14 * 14, "backward_data": 7 * 7}
MERGED_MIN_CHANNELS = 48


def eligible(p):
    if (p.kh, p.kw) != (1, 1):
        return False, "the kernel is not 1x1"
    if p.pt or p.pb or p.pl or p.pr:
        return False, "the convolution is padded"
    return True, ""


def workspace_bytes(p, backward=False, device=None):
    """Bytes of the copies this algorithm makes (at most; none of a channels_last tensor whose
    positions merge): a strided input's subsample; the (C, N*P) copies of the merged products
    (merges); in backward those of the weight gradient when its batch and spatial dims do not
    merge (none on the devices whose GEMM sums over the images: gemm.sums_batches)."""
    item = p.dtype.itemsize
    both = p.n * (p.c + p.co) * p.ho * p.wo * item
    sub = p.n * p.c * p.ho * p.wo * item if (p.sh, p.sw) != (1, 1) else 0
    if not backward:
        return both if device is not None and merges(p, device, "forward") else sub
    summed = device is not None and sums_batches(device, p.dtype)
    merged = device is not None and (p.sh, p.sw) == (1, 1) and merges(p, device, "backward_data")
    data = both if merged else 0
    return max(data, sub + (0 if summed else both))


def _positions(x, p):
    """The input positions a (strided) 1x1 convolution reads: a view."""
    return x[:, :, ::p.sh, ::p.sw] if (p.sh, p.sw) != (1, 1) else x


def _subsample(x, p):
    """The input positions a strided 1x1 convolution reads, with (H, W) merged."""
    return common.with_merged_spatial(_positions(x, p))


def _groups_view(t, p, ch_per_group):
    """A 4-d (N, C, H, W) view with mergeable (H, W) as (N, G, C/G, H*W)."""
    s0, s1 = t.strides[:2]
    return common.strided(t, (t.shape[0], p.groups, ch_per_group, t.shape[2] * t.shape[3]),
                          (s0, ch_per_group * s1, s1, common.spatial_stride(t)))


def _weight(w, p):
    wg = w.contiguous().reshape(p.groups, p.cog, p.cg)
    return wg


def merges(p, device, pass_):
    """Whether the forward or input-gradient products run over all images at once (above)."""
    return (p.n > 1 and p.ho * p.wo <= MERGED_MAX_POSITIONS[pass_]
            and min(p.cg, p.cog) >= MERGED_MIN_CHANNELS and sums_batches(device, p.dtype))


def _merged(a, src, dst, p, bias=None, relu=False):
    """dst[n, g] = a[g] @ src[n, g] for (N, C, H, W) src and dst with a (G, R, Cs): one
    product (G, R, Cs) @ (G, Cs, N*H*W), each operand read or written in place where its
    (N, H, W) dims merge (channels_last), else through a (C, N, H, W) copy."""
    g, rows = a.shape[0], a.shape[1]
    out = dst
    if _positions_stride(dst) is None:
        (n, c, h, w) = dst.shape
        out = common.strided(common.empty((c, n, h, w), dst), dst.shape, (h * w, n * h * w, w, 1))
    _product(a, _rows(src, p, src.shape[1] // g), _rows(out, p, rows), bias, relu)
    if out is not dst:
        ew.copy(out, dst)
    return dst


def _product(a, b, o, bias, relu):
    """gemm_into(a, b, o) for o (..., G, R, P), plus a bias per output channel (G * R): the
    GEMM's row bias with one group, else an addend broadcast over the positions."""
    if bias is None or o.shape[-3] == 1:
        gemm_into(a, b, o, row_bias=bias, relu=relu)
    else:
        rows, bs = o.shape[-2], bias.strides[0]
        c = common.strided(bias, o.shape, (0,) * (o.ndim - 3) + (rows * bs, bs, 0))
        gemm_into(a, b, o, c, beta=1, relu=relu)


FUSES_RELU = True  # forward(..., relu=True) applies max(., 0) as it stores (conv/function.py)


def forward(x, w, bias, p, out, relu=False):
    wg = _weight(w, p)
    if merges(p, x.device, "forward"):
        return _merged(wg, _positions(x, p), out, p, bias, relu)
    a = common.strided(wg, (p.n,) + wg.shape, (0,) + wg.strides)
    _product(a, _groups_view(_subsample(x, p), p, p.cg), _groups_view(out, p, p.cog), bias, relu)
    return out


def _rows(t, p, ch_per_group):
    """t (N, C, H, W) as (G, C/G, N*H*W): in place when (N, H, W) merge, else from a copy."""
    npos = t.shape[0] * t.shape[2] * t.shape[3]
    st = _positions_stride(t)
    if st is not None:
        s1 = t.strides[1]
    else:
        t = common.to_cnhw(t)
        st, s1 = 1, t.strides[0]
    return common.strided(t, (p.groups, ch_per_group, npos), (ch_per_group * s1, s1, st))


def backward(x, w, gout, p, need_x, need_w):
    gx = gw = None
    if need_x:
        gx = _grad_input(gout, w, p, x)
    if need_w:
        gw = common.empty((p.co, p.cg, 1, 1), x)
        _grad_weight(_subsample(x, p), gout, p,
                     common.strided(gw, (p.groups, p.cog, p.cg), (p.cog * p.cg, p.cg, 1)))
    return gx, gw


def _grad_weight(xs, gout, p, gw):
    """gw (G, Cog, Cg) = the weight gradient, from xs (_subsample's) and gout."""
    merge = all(_positions_stride(t) is not None for t in (xs, gout))
    if not merge and sums_batches(xs.device, xs.dtype):
        # NOTE: summed over the batch in the kernel rather than over merged copies: faster on
        # GoogLeNet's 1x1 weight gradients on PoCL (docs/performance.md)
        go = _groups_view(common.with_merged_spatial(gout), p, p.cog)
        gemm_sum_into(go, common.transposed(_groups_view(xs, p, p.cg)), gw)
    else:
        gemm_into(_rows(gout, p, p.cog), common.transposed(_rows(xs, p, p.cg)), gw)


def _positions_stride(t):
    """The one stride of t's (N, H, W) dims when they merge (channels_last), else None."""
    return common.merged_stride((t.shape[0],) + tuple(t.shape[2:]),
                                (t.strides[0],) + tuple(t.strides[2:]))


def _grad_input(gout, w, p, x):
    wg = _weight(w, p)
    gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x))
    if (p.sh, p.sw) == (1, 1) and merges(p, x.device, "backward_data"):
        return _merged(common.transposed(wg), gout, gx, p)
    a = common.transposed(common.strided(wg, (p.n,) + wg.shape, (0,) + wg.strides))
    g = _groups_view(common.with_merged_spatial(gout), p, p.cog)
    if (p.sh, p.sw) == (1, 1):
        gemm_into(a, g, _groups_view(gx, p, p.cg))
        return gx
    gx.zero_()
    part = common.empty((p.n, p.c, p.ho, p.wo), x)
    gemm_into(a, g, _groups_view(part, p, p.cg))
    gx[:, :, ::p.sh, ::p.sw] = part
    return gx
