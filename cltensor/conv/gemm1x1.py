"""Algorithm "gemm_1x1": a 1x1 convolution with no padding is a plain GEMM per image,
out[n, g] = W[g] (Cog, Cg) @ x[n, g] (Cg, H*W), with no workspace (a strided one reads a
contiguous copy of the strided input). Backward: gx[n, g] = W[g]^T @ gout[n, g];
gW[g] = gout[g] (Cog, N*P) @ x[g]^T, read in place when the (N, H, W) dims of both merge
(channels_last); else, on the devices whose GEMM sums over a batch in one kernel
(gemm.sums_batches: CPUs), the sum over n of gout[n, g] @ x[n, g]^T read in place, and
elsewhere one product over (C, N*H*W) copies.

NOTE: the products go to gemm_into, not gemm(): the operands are built here with matching
shapes and the outputs are new tensors, so the public entry's checks and overlap tests (about
a fifth of a small layer's host time on PoCL) have nothing to find.
"""
from ..ops.gemm import gemm_into, gemm_sum_into, sums_batches
from . import common


def eligible(p):
    if (p.kh, p.kw) != (1, 1):
        return False, "the kernel is not 1x1"
    if p.pt or p.pb or p.pl or p.pr:
        return False, "the convolution is padded"
    return True, ""


def workspace_bytes(p, backward=False, device=None):
    """Bytes of the copies this algorithm makes: a strided input's subsample, and in backward
    the (C, N*P) copies of x and gout when their batch and spatial dims do not merge (none on
    the devices whose GEMM sums over the images: gemm.sums_batches)."""
    item = p.dtype.itemsize
    sub = p.n * p.c * p.ho * p.wo * item if (p.sh, p.sw) != (1, 1) else 0
    if backward and not (device is not None and sums_batches(device, p.dtype)):
        return sub + p.n * (p.c + p.co) * p.ho * p.wo * item
    return sub


def _subsample(x, p):
    """The input positions a strided 1x1 convolution reads, with (H, W) merged."""
    if (p.sh, p.sw) != (1, 1):
        x = x[:, :, ::p.sh, ::p.sw]
    return common.with_merged_spatial(x)


def _groups_view(t, p, ch_per_group):
    """A 4-d (N, C, H, W) view with mergeable (H, W) as (N, G, C/G, H*W)."""
    s0, s1 = t.strides[:2]
    return common.strided(t, (t.shape[0], p.groups, ch_per_group, t.shape[2] * t.shape[3]),
                          (s0, ch_per_group * s1, s1, common.spatial_stride(t)))


def _weight(w, p):
    wg = w.contiguous().reshape(p.groups, p.cog, p.cg)
    return wg


FUSES_RELU = True  # forward(..., relu=True) applies max(., 0) as it stores (conv/function.py)


def forward(x, w, bias, p, out, relu=False):
    xs = _subsample(x, p)
    wg = _weight(w, p)
    a = common.strided(wg, (p.n,) + wg.shape, (0,) + wg.strides)
    b = _groups_view(xs, p, p.cg)
    o = _groups_view(out, p, p.cog)
    if bias is None or p.groups == 1:
        gemm_into(a, b, o, row_bias=bias, relu=relu)
    else:
        c = common.strided(bias, o.shape, (0, p.cog * bias.strides[0], bias.strides[0], 0))
        gemm_into(a, b, o, c, beta=1, relu=relu)
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
        # NOTE: PoCL, 2 AVX-512 cores, GoogLeNet's 1x1 layers at batch 8, backward (input and
        # weight gradients) in ms, copies vs summed, medians of 7 interleaved rounds
        # (2026-12-02): 3a/1x1 4.28 -> 3.88, 3a/pool 3.01 -> 2.35, 3b/5x5r 3.11 -> 2.37,
        # 4a/5x5r 1.15 -> 0.96, 5a/5x5r 0.89 -> 0.78; 4e/3x3r 4.36 -> 4.68 (kernels 3.84 -> 4.09)
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
    a = common.transposed(common.strided(wg, (p.n,) + wg.shape, (0,) + wg.strides))
    gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x))
    g = _groups_view(common.with_merged_spatial(gout), p, p.cog)
    if (p.sh, p.sw) == (1, 1):
        gemm_into(a, g, _groups_view(gx, p, p.cg))
        return gx
    gx.zero_()
    part = common.empty((p.n, p.c, p.ho, p.wo), x)
    gemm_into(a, g, _groups_view(part, p, p.cg))
    gx[:, :, ::p.sh, ::p.sw] = part
    return gx
