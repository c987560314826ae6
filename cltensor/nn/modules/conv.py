"""Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d and ConvTranspose3d: the modules around
cltensor.nn.functional's convolutions."""

from ...autograd.namespace import pad as _pad
from .. import functional as F
from .module import Module
from .utils import add_weight_and_bias, check_size, ntuple, reset_kaiming

__all__ = ["Conv2d", "ConvTranspose2d", "Conv1d", "ConvTranspose1d", "Conv3d", "ConvTranspose3d"]

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What Conv1d/2d and ConvTranspose1d/2d share: their size arguments as DIMS-tuples (torch's
    attributes), named in errors by the class."""
    DIMS = 2

    def _sizes(self, **values):
        for name, value in values.items():
            keep = name == "padding" and isinstance(value, str)
            setattr(self, name, value if keep else
                    ntuple(value, self.DIMS, name, type(self).__name__))

    def _size_repr(self, names):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        for name, default in names:
            if getattr(self, name) != (default,) * self.DIMS:
                s += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-d convolution over NCHW input, with torch's arguments and default initialization.

    Args:
        in_channels, out_channels: channel counts; both divisible by groups.
        kernel_size, stride, dilation: an int or an (h, w) pair.
        padding: an int, an (h, w) pair, 'valid' (none) or 'same' (output size = input size,
            stride 1 only).
        groups: split channels into this many independent convolutions.
        bias: learn a per-output-channel bias.
        padding_mode: 'zeros', 'reflect', 'replicate' or 'circular'.

    Shape:
        input (N, in_channels, H, W) -> output (N, out_channels, H_out, W_out)

    Example:
        conv = nn.Conv2d(1, 16, 3, padding=1)
        conv(cltensor.randn(8, 1, 28, 28)).shape   # (8, 16, 28, 28)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.in_channels = check_size(in_channels, "in_channels", name)
        self.out_channels = check_size(out_channels, "out_channels", name)
        self._sizes(kernel_size=kernel_size, stride=stride, dilation=dilation, padding=padding,
                    output_padding=0)  # torch's attribute, as on the transposed layers
        self.groups = groups
        self.padding_mode = padding_mode
        self._check(name)
        self._reversed_padding_repeated_twice = self._explicit_padding()
        add_weight_and_bias(self, (out_channels, in_channels // groups) + self.kernel_size,
                            out_channels if bias else None, device, dtype, name)

    def _check(self, name):
        if not isinstance(self.groups, int) or self.groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {self.groups!r}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"{name}: in_channels ({self.in_channels}) and out_channels "
                             f"({self.out_channels}) must be divisible by groups ({self.groups})")
        if any(k <= 0 for k in self.kernel_size) or any(s <= 0 for s in self.stride) \
                or any(d <= 0 for d in self.dilation):
            raise ValueError(f"{name}: kernel_size {self.kernel_size}, stride {self.stride} and "
                             f"dilation {self.dilation} must be positive")
        if isinstance(self.padding, str):
            if self.padding not in ("valid", "same"):
                raise ValueError(f"{name}: invalid padding string {self.padding!r}, should be "
                                 f"one of 'valid', 'same'")
            if self.padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions")
        elif any(p < 0 for p in self.padding):
            raise ValueError(f"{name}: padding {self.padding} must be non-negative")
        if self.padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, got "
                             f"{self.padding_mode!r}")

    def _explicit_padding(self):
        """(left, right[, top, bottom]) amounts for cltensor.pad, used with non-zero padding
        modes: the last dim's first, as cltensor.pad reads them."""
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
        else:
            totals = [0] * self.DIMS if self.padding == "valid" else [2 * p for p in self.padding]
        return tuple(x for t in reversed(totals) for x in (t // 2, t - t // 2))

    def reset_parameters(self):
        reset_kaiming(self)

    def forward(self, input):
        return self.conv_relu(input, relu=False)

    def conv_relu(self, input, relu=True):
        """forward(input), then max(., 0) in the same pass with relu (nn.Sequential calls it
        for a Conv2d followed by a ReLU: see F.conv2d's relu)."""
        x, pad = input, self.padding
        if self.padding_mode != "zeros":
            x, pad = _pad(input, self._reversed_padding_repeated_twice,
                          mode=self.padding_mode), 0
        return self._conv(x, pad, relu)

    def _conv(self, x, padding, relu):
        """The functional convolution of x by the parameters, with this padding."""
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups, relu=relu)

    def extra_repr(self):
        s = self._size_repr((("padding", 0), ("dilation", 1)))
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class ConvTranspose2d(_ConvNd):
    """2-d transposed convolution (the input gradient of a Conv2d with the same arguments),
    with torch's arguments and default initialization.

    Args:
        in_channels, out_channels: channel counts; both divisible by groups.
        kernel_size, stride, padding, dilation: an int or an (h, w) pair.
        output_padding: added to one side of the output; smaller than the stride or the
            dilation. forward(input, output_size) picks it from the size wanted instead.
        groups: split channels into this many independent convolutions.
        bias: learn a per-output-channel bias.
        padding_mode: 'zeros' only (as torch's).

    Shape:
        input (N, in_channels, H, W) -> output (N, out_channels, H_out, W_out),
        H_out = (H - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1

    Example:
        up = nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)
        up(cltensor.randn(2, 16, 7, 7)).shape   # (2, 8, 14, 14)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        self.in_channels = check_size(in_channels, "in_channels", name)
        self.out_channels = check_size(out_channels, "out_channels", name)
        if isinstance(padding, str):
            raise TypeError(f"{name}: padding must be an int or a tuple of ints, got {padding!r}")
        self._sizes(kernel_size=kernel_size, stride=stride, padding=padding,
                    output_padding=output_padding, dilation=dilation)
        self.groups = groups
        if not isinstance(groups, int) or groups <= 0 or in_channels % groups or \
                out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups!r})")
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode 'zeros' is supported, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        add_weight_and_bias(self, (in_channels, out_channels // groups) + self.kernel_size,
                            out_channels if bias else None, device, dtype, name)

    def reset_parameters(self):
        reset_kaiming(self)

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)

    def _output_padding(self, input, output_size):
        """The output padding that gives output_size (its last DIMS entries), checked."""
        if output_size is None:
            return self.output_padding
        nd, spatial = self.DIMS, tuple(input.shape[-self.DIMS:])
        size = tuple(output_size)[-nd:]
        least = [(n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in zip(
            spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        most = [m + s - 1 for m, s in zip(least, self.stride)]
        if len(size) != nd or not all(lo <= n <= hi for n, lo, hi in zip(size, least, most)):
            raise ValueError(f"{type(self).__name__}: output_size {size} is not between "
                             f"{tuple(least)} and {tuple(most)} (for an input of spatial size "
                             f"{spatial})")
        return tuple(n - lo for n, lo in zip(size, least))

    def extra_repr(self):
        return self._size_repr((("padding", 0), ("dilation", 1), ("output_padding", 0)))


class Conv1d(Conv2d):
    """1-d convolution over (N, C, L) or (C, L) input, with torch's arguments and attributes
    (ints or 1-tuples) and default initialization; weight (out_channels, in_channels / groups,
    kernel_size).

    Example:
        nn.Conv1d(4, 8, 3, padding=1)(cltensor.randn(2, 4, 10)).shape   # (2, 8, 10)
    """
    DIMS = 1

    def _conv(self, x, padding, relu):
        y = F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)
        return F.relu(y) if relu else y


class Conv3d(Conv2d):
    """3-d convolution over (N, C, D, H, W) or (C, D, H, W) input, with torch's arguments and
    attributes (ints or triples) and default initialization; weight (out_channels,
    in_channels / groups, kd, kh, kw). padding_mode 'reflect', 'replicate' and 'circular' pad
    the input first.

    Example:
        nn.Conv3d(4, 8, 3, padding=1)(cltensor.randn(2, 4, 6, 10, 10)).shape
        # (2, 8, 6, 10, 10)
    """
    DIMS = 3

    def _conv(self, x, padding, relu):
        y = F.conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)
        return F.relu(y) if relu else y


class ConvTranspose1d(ConvTranspose2d):
    """1-d transposed convolution over (N, Cin, L) or (Cin, L) input, with torch's arguments
    and attributes (ints or 1-tuples); weight (in_channels, out_channels / groups,
    kernel_size).

    Example:
        nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1)(cltensor.randn(2, 8, 7)).shape
        # (2, 4, 14)
    """
    DIMS = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose3d(ConvTranspose2d):
    """3-d transposed convolution over (N, Cin, D, H, W) or (Cin, D, H, W) input, with torch's
    arguments and attributes (ints or triples); weight (in_channels, out_channels / groups,
    kd, kh, kw).

    Example:
        nn.ConvTranspose3d(8, 4, 4, stride=2, padding=1)(cltensor.randn(2, 8, 3, 7, 7)).shape
        # (2, 4, 6, 14, 14)
    """
    DIMS = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


_ConvTransposeNd = ConvTranspose2d  # torch's base of the transposed convolutions (1-d is a 2-d)
