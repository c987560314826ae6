"""conv1d and conv_transpose1d (the 2-d convolutions over a unit height), unfold and
fold (im2col and col2im); conv2d and conv_transpose2d are cltensor.conv's, conv3d and
conv_transpose3d cltensor.conv.volume's.
"""

from ...conv import blocks
from ...conv import conv2d, conv_transpose2d  # re-exported: torch.nn.functional's
from ...conv.volume import conv3d, conv_transpose3d  # likewise
from ...ops import pool
from .utils import _drop_height, _float_tensor, _row, _unit_height

__all__ = ["conv1d", "conv_transpose1d", "fold", "unfold", "conv2d", "conv_transpose2d",
           "conv3d", "conv_transpose3d"]


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution (cross-correlation) over an (N, C, L) or (C, L) input: conv2d over a
    unit height.

    Args:
        weight: (Co, C / groups, K).
        stride, dilation: ints; padding: an int, 'valid' or 'same' (stride 1).

    Example:
        >>> F.conv1d(cltensor.randn(2, 3, 10), cltensor.randn(4, 3, 3), padding=1).shape
        (2, 4, 10)
    """
    op = "conv1d"
    x = _unit_height(input, op)
    w = _weight1d(weight, op)
    pad = padding if isinstance(padding, str) else _row(padding, "padding", op, 0)
    return _drop_height(conv2d(x, w, bias, _row(stride, "stride", op, 1), pad,
                               _row(dilation, "dilation", op, 1), groups))


def _weight1d(weight, op):
    """A 3-d (channels, channels, K) weight as (.., .., 1, K)."""
    if _float_tensor(weight, "weight", op).ndim != 3:
        raise ValueError(f"{op}: weight must be 3-d (channels, channels / groups, kernel_size), "
                         f"got shape {weight.shape}")
    return weight.unsqueeze(-2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution over an (N, Cin, L) or (Cin, L) input (conv_transpose2d over
    a unit height); weight (Cin, Cout / groups, K).

    Example:
        >>> F.conv_transpose1d(cltensor.randn(2, 4, 5), cltensor.randn(4, 3, 4), stride=2).shape
        (2, 3, 12)
    """
    op = "conv_transpose1d"
    x = _unit_height(input, op)
    w = _weight1d(weight, op)
    return _drop_height(conv_transpose2d(
        x, w, bias, _row(stride, "stride", op, 1), _row(padding, "padding", op, 0),
        _row(output_padding, "output_padding", op, 0), groups,
        _row(dilation, "dilation", op, 1)))


def _block_args(op, c, size, kernel_size, dilation, padding, stride):
    """The Blocks of an image of c channels and spatial `size`, the arguments checked."""
    k, d, p, s = (pool.pair(v, name, op) for v, name in (
        (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
        (stride, "stride")))
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise ValueError(f"{op}: kernel_size {k}, dilation {d} and stride {s} must be positive "
                         f"and padding {p} non-negative")
    grid = tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                 for n, kk, dd, pp, ss in zip(size, k, d, p, s))
    if min(grid) < 1:
        raise ValueError(f"{op}: given input with spatial size {tuple(size)}, kernel_size={k}, "
                         f"dilation={d}, padding={p}, calculated shape of the array of sliding "
                         f"blocks as {grid}, but its components must be at least one")
    return blocks.Blocks(*k, *s, *d, *p, c, *size, *grid)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: the sliding blocks of an (N, C, H, W) or (C, H, W) input as the columns of an
    (N, C * kh * kw, L) tensor, rows ordered (c, ki, kj), L = Lh * Lw blocks in row-major order.

    Example:
        >>> F.unfold(cltensor.randn(2, 3, 5, 5), 3, padding=1).shape
        (2, 27, 25)
    """
    op = "unfold"
    _float_tensor(input, "input", op)
    if input.ndim not in (3, 4):
        raise ValueError(f"{op}: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape "
                         f"{input.shape}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    g = _block_args(op, x.shape[1], x.shape[2:], kernel_size, dilation, padding, stride)
    out = blocks.Unfold.apply(x, g)
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: the columns of an (N, C * kh * kw, L) or (C * kh * kw, L)
    input summed into an (N, C, H, W) (or (C, H, W)) image, (H, W) = output_size.

    Example:
        >>> F.fold(cltensor.ones(1, 4, 9), (4, 4), 2, stride=1).shape
        (1, 1, 4, 4)
    """
    op = "fold"
    _float_tensor(input, "input", op)
    if input.ndim not in (2, 3):
        raise ValueError(f"{op}: expected a 2-d (C * kh * kw, L) or 3-d (N, C * kh * kw, L) "
                         f"input, got shape {input.shape}")
    size = pool.pair(output_size, "output_size", op)
    x = input if input.ndim == 3 else input.unsqueeze(0)
    n, ck, length = x.shape
    g = _block_args(op, 1, size, kernel_size, dilation, padding, stride)
    taps = g.kh * g.kw
    if ck % taps or length != g.ho * g.wo:
        raise ValueError(f"{op}: expected an input of shape (N, C * {taps}, {g.ho * g.wo}) for "
                         f"kernel_size={(g.kh, g.kw)} and the {g.ho}x{g.wo} sliding blocks, "
                         f"got {input.shape}")
    out = blocks.Fold.apply(x, g._replace(c=ck // taps))
    return out if input.ndim == 3 else out.squeeze(0)
