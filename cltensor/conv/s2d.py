"""Algorithm "s2d_winograd": a convolution of stride s > 1 (the same in both dims) rewritten as
a stride-1 one over the space-to-depth input, which Winograd F(4x4) (winograd.F4) runs.

Space to depth turns each s x s block of the padded input into s*s channels,
    xs[n][(c*s + a)*s + b][i][j] = pad(x)[n][c][i*s + a][j*s + b],
and the weight likewise, ws[o][(c*s + a)*s + b][u][v] = w[o][c][u*s + a][v*s + b] (0 past the
kernel): a stride-1 kernel of k x k blocks over C*s*s channels with the same output, k the
smallest of Winograd's sizes (3, 5) that covers the ceil(kh/s) x ceil(kw/s) blocks the kernel
spans. AlexNet's and Overfeat's first layers (11x11, stride 4, 3 channels) become 3x3
convolutions over 48 channels, whose F(4x4, 3x3) products are about a quarter of the direct
ones (the zero taps of the 12x12 kernel cost back 1.19x); GoogLeNet's (7x7, stride 2) a 5x5
one over 12.

Backward: the s2d problem's gradients, mapped back (depth to space, cropped to the input and
the kernel). Scratch: the s2d input (its gradient in backward) besides Winograd's own.
"""
from . import common
from .params import ConvParams
from .winograd import F4, KERNEL_SIZES


def _blocks(p):
    """Stride blocks a side that the kernel spans."""
    return max(-(-p.kh // p.sh), -(-p.kw // p.sw))


def kernel_side(p):
    """The s2d kernel's side: the smallest Winograd kernel that covers the blocks, or None."""
    return next((k for k in KERNEL_SIZES if k >= _blocks(p)), None)


def eligible(p):
    if p.sh != p.sw or p.sh == 1:
        return False, (f"s2d_winograd needs a stride above 1, the same in both dims, got "
                       f"{p.sh}x{p.sw}")
    if (p.dh, p.dw) != (1, 1) or p.groups != 1:
        return False, "s2d_winograd needs dilation 1 and one group"
    if kernel_side(p) is None:
        return False, (f"s2d_winograd: a {p.kh}x{p.kw} kernel of stride {p.sh} spans "
                       f"{_blocks(p)} blocks a side, more than Winograd's {KERNEL_SIZES[-1]}")
    return True, ""


def _s2d_problem(p):
    """The stride-1 problem over the s2d input: (N, C*s*s, hs, ws), hs and ws the rows and
    columns that the outputs' taps reach."""
    s, k = p.sh, kernel_side(p)
    return ConvParams(p.n, p.c * s * s, p.ho + k - 1, p.wo + k - 1, p.co, k, k, 1, 1, 0, 0,
                      0, 0, 1, 1, 1, p.dtype)


def workspace_bytes(p, backward=False, device=None):
    """The padded input and its s2d copy (or, in backward, those of the input gradient),
    plus Winograd's scratch for the s2d problem."""
    ps = _s2d_problem(p)
    s = p.sh
    copies = ps.n * p.c * (ps.h * s) * (ps.w * s) * 2 * p.dtype.itemsize
    return copies + F4.workspace_bytes(ps, backward)


def _fold(t, s):
    """(A, B, H*s, W*s) -> (A, B*s*s, H, W): each s x s block as channels (b*s + i)*s + j."""
    a, b, h, w = t.shape[0], t.shape[1], t.shape[2] // s, t.shape[3] // s
    return (t.reshape(a, b, h, s, w, s).permute(0, 1, 3, 5, 2, 4).contiguous()
            .reshape(a, b * s * s, h, w))


def _unfold(t, s):
    """The inverse of _fold: (A, B*s*s, H, W) -> (A, B, H*s, W*s)."""
    a, b, h, w = t.shape[0], t.shape[1] // (s * s), t.shape[2], t.shape[3]
    return (t.reshape(a, b, s, s, h, w).permute(0, 1, 4, 2, 5, 3).contiguous()
            .reshape(a, b, h * s, w * s))


def _input_extent(p):
    """The input rows and columns that the s2d input holds (past them no tap reads)."""
    ps = _s2d_problem(p)
    return min(p.h, ps.h * p.sh - p.pt), min(p.w, ps.w * p.sh - p.pl)


def _to_depth(x, p):
    """x (N, C, H, W) as the s2d input."""
    ps, s = _s2d_problem(p), p.sh
    padded = common.empty((p.n, p.c, ps.h * s, ps.w * s), x).zero_()
    hh, ww = _input_extent(p)
    if hh > 0 and ww > 0:  # else every tap reads padding
        padded[:, :, p.pt:p.pt + hh, p.pl:p.pl + ww] = x[:, :, :hh, :ww]
    return _fold(padded, s)


def _from_depth(gxs, p, x):
    """The input gradient (in x's layout) from the s2d input's: depth to space, cropped."""
    full = _unfold(gxs, p.sh)
    gx = common.empty((p.n, p.c, p.h, p.w), x, common.layout_of(x)).zero_()
    hh, ww = _input_extent(p)
    if hh > 0 and ww > 0:
        gx[:, :, :hh, :ww] = full[:, :, p.pt:p.pt + hh, p.pl:p.pl + ww]
    return gx


def _weight_to_depth(w, p):
    """ws (Co, C*s*s, k, k) of w, made once per weight version."""
    def make(w):
        side = kernel_side(p) * p.sh
        padded = common.empty((p.co, p.c, side, side), w).zero_()
        padded[:, :, :p.kh, :p.kw] = w
        return _fold(padded, p.sh)
    return common.per_weight(w, ("s2d", p.sh, kernel_side(p)), make)


def _weight_from_depth(gws, p):
    return _unfold(gws, p.sh)[:, :, :p.kh, :p.kw].contiguous()


FUSES_RELU = True  # forward(..., relu=True) applies max(., 0) as it stores (conv/function.py)


def forward(x, w, bias, p, out, relu=False):
    return F4.forward(_to_depth(x, p), _weight_to_depth(w, p), bias, _s2d_problem(p), out,
                      relu)


def backward(x, w, gout, p, need_x, need_w):
    # NOTE: Winograd's input gradient reads x for its dtype, device and layout alone
    xs = _to_depth(x, p) if need_w else x
    gxs, gws = F4.backward(xs, _weight_to_depth(w, p), gout, _s2d_problem(p), need_x, need_w)
    gx = _from_depth(gxs, p, x) if need_x else None
    gw = _weight_from_depth(gws, p) if need_w else None
    return gx, gw
