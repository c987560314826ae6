"""conv_transpose2d: the transposed convolution (torch's), as the passes of the convolution it
transposes. With x (N, Cin, H, W) and weight (Cin, Cout / groups, Kh, Kw), the output y
(N, Cout, Ho, Wo), Ho = (H - 1) * stride - 2 * padding + dilation * (Kh - 1) + output_padding
+ 1, is the input gradient of conv2d(y, weight) (same stride, padding, dilation, groups) at
output gradient x (zero-padded where an output_padding of at least the stride makes that
convolution's output larger); so its input gradient is that convolution's forward of gy, and
its weight gradient that convolution's weight gradient with y's place taken by gy and the
output gradient's by x. Each pass goes to the algorithm conv2d's dispatch picks for it. Its
Function, ConvTranspose2dFunction, lives beside conv2d's in function.py (each is the other's
input gradient); under create_graph=True the gradients come from Functions (recorded_grads).
"""
from __future__ import annotations

from ..autograd.namespace import pad
from ..ops import elementwise as ew
from ..tensor import ClTensor
from . import common, dispatch
from .function import ConvTranspose2dFunction
from .params import Pair, _pair, make_params


def conv_transpose2d(input: ClTensor, weight: ClTensor, bias: ClTensor | None = None,
                     stride: Pair = 1, padding: Pair = 0, output_padding: Pair = 0, groups: int = 1,
                     dilation: Pair = 1, algo: str = "auto") -> ClTensor:
    """2-d transposed convolution (torch.nn.functional.conv_transpose2d), sometimes called
    deconvolution: the input gradient of the matching conv2d.

    Args:
        input: (N, Cin, H, W) or unbatched (Cin, H, W) float32/float64 tensor.
        weight: (Cin, Cout / groups, Kh, Kw) tensor.
        bias: optional (Cout,) tensor.
        stride, dilation: an int or a pair, positive.
        padding: an int or a pair, non-negative: dilation * (K - 1) - padding zeros around
            the input, in effect.
        output_padding: an int or a pair added to one side of the output, smaller than the
            stride or the dilation (it picks among the output sizes a strided conv2d maps to
            the input's size).
        groups: split the channels into this many independent convolutions.
        algo: as conv2d's, for each pass.

    Returns:
        (N, Cout, Ho, Wo), Ho = (H - 1) * stride - 2 * padding + dilation * (Kh - 1)
        + output_padding + 1.

    Example:
        >>> x = cltensor.randn(2, 8, 7, 7)
        >>> w = cltensor.randn(8, 4, 3, 3)
        >>> conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).shape
        (2, 4, 14, 14)
    """
    if common.is_half(input) and not dispatch.reads_half(algo):  # float32 copies: docs/half.md
        return common.half_fallback(conv_transpose2d, input, weight, bias, stride, padding,
                                    output_padding, groups, dilation, algo)
    unbatched = isinstance(input, ClTensor) and input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    p = transposed_params(input, weight, bias, stride, padding, output_padding, groups, dilation)
    dispatch.check_algo(algo, input.device)
    out = ConvTranspose2dFunction.apply(padded_input(input, p), weight, bias, p, algo)
    return out.squeeze(0) if unbatched else out


def transposed_params(x, w, bias, stride, padding, output_padding, groups, dilation):
    """The ConvParams of the convolution that conv_transpose2d's arguments transpose, checked."""
    op = "conv_transpose2d"
    for name, t in (("input", x), ("weight", w), ("bias", bias)):
        if t is not None and not ew.is_tensor(t):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op}: expected a 4-d (or unbatched 3-d) input and a 4-d weight "
                         f"(Cin, Cout / groups, Kh, Kw), got shapes {x.shape} and {w.shape}")
    if 0 in w.shape or 0 in x.shape[1:]:
        raise ValueError(f"{op}: expected a weight and input (C, H, W) dims without zeros, got "
                         f"shapes {w.shape} and {x.shape}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if x.shape[1] != w.shape[0] or w.shape[0] % groups:
        raise ValueError(f"{op}: input has {x.shape[1]} channels, weight of shape {w.shape} "
                         f"expects {w.shape[0]} (divisible by groups={groups})")
    s, d = _pair(stride, "stride", 1), _pair(dilation, "dilation", 1)
    pad, extra = _pair(padding, "padding", 0), _pair(output_padding, "output_padding", 0)
    size = output_size(op, x, w, s, pad, extra, d)
    cout = w.shape[1] * groups
    if bias is not None and bias.shape != (cout,):
        raise ValueError(f"{op}: bias must have shape ({cout},), got {bias.shape}")
    shape = (x.shape[0], cout, *size)
    # NOTE: make_params reads its input's shape, dtype and device alone: a stride-0 view
    p = make_params(x._view(shape, (0, 0, 0, 0)), w, None, s, pad, d, groups)
    if bias is not None and bias.dtype != x.dtype:
        raise TypeError(f"{op}: input is {x.dtype} but bias is {bias.dtype}")
    ew.common_device([t for t in (x, bias) if t is not None], op)
    assert p.out_shape[:2] == x.shape[:2] and p.ho >= x.shape[2] and p.wo >= x.shape[3], \
        (p, x.shape)
    return p


def output_size(op, x, w, s, pad, extra, d):
    """The transposed convolution's spatial output size, (n - 1) * stride - 2 * padding +
    dilation * (k - 1) + output_padding + 1 per dim, checked positive, with each
    output_padding smaller than the stride or the dilation."""
    if any(e >= max(si, di) for e, si, di in zip(extra, s, d)):
        raise ValueError(f"{op}: output_padding {extra} must be smaller than either the stride "
                         f"{s} or the dilation {d}")
    size = [(n - 1) * si - 2 * pi + di * (k - 1) + e + 1
            for n, si, pi, di, k, e in zip(x.shape[2:], s, pad, d, w.shape[2:], extra)]
    if min(size) <= 0:
        raise ValueError(f"{op}: the output size {tuple(size)} is not positive (input "
                         f"{x.shape}, weight {w.shape}, stride {s}, padding {pad}, dilation {d})")
    return size


def padded_input(x, p):
    """x with zero rows and columns appended up to the output size of the convolution p that
    the transposed one transposes. NOTE: an output_padding of at least the stride (allowed
    where the dilation is larger) makes p's output larger than x; the rows beyond x take no
    part in the transposed convolution, and its gradient drops them."""
    grow_h, grow_w = p.ho - x.shape[2], p.wo - x.shape[3]
    return pad(x, (0, grow_w, 0, grow_h)) if grow_h or grow_w else x
