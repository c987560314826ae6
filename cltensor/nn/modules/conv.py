"""Conv2d: the module around cltensor.nn.functional.conv2d."""
import math

import cltensor

from .. import functional as F
from .. import init
from .linear import check_size, init_fan_in_bias, new_parameter
from .module import Module

__all__ = ["Conv2d"]

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def pair(value, name, owner):
    """(a, a) from an int, or a 2-tuple of ints, checked."""
    v = (value, value) if isinstance(value, int) else tuple(value)
    if len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise TypeError(f"{owner}: {name} must be an int or a pair of ints, got {value!r}")
    return v


class Conv2d(Module):
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
        self.in_channels = check_size(in_channels, "in_channels", "Conv2d")
        self.out_channels = check_size(out_channels, "out_channels", "Conv2d")
        self.kernel_size = pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = pair(stride, "stride", "Conv2d")
        self.dilation = pair(dilation, "dilation", "Conv2d")
        self.padding = padding if isinstance(padding, str) else pair(padding, "padding", "Conv2d")
        self.groups = groups
        self.padding_mode = padding_mode
        self._check()
        self._reversed_padding_repeated_twice = self._explicit_padding()
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = new_parameter(shape, device, dtype, "Conv2d")
        if bias:
            self.bias = new_parameter((out_channels,), device, dtype, "Conv2d")
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _check(self):
        if not isinstance(self.groups, int) or self.groups <= 0:
            raise ValueError(f"Conv2d: groups must be a positive integer, got {self.groups!r}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"Conv2d: in_channels ({self.in_channels}) and out_channels "
                             f"({self.out_channels}) must be divisible by groups ({self.groups})")
        if any(k <= 0 for k in self.kernel_size) or any(s <= 0 for s in self.stride) \
                or any(d <= 0 for d in self.dilation):
            raise ValueError(f"Conv2d: kernel_size {self.kernel_size}, stride {self.stride} and "
                             f"dilation {self.dilation} must be positive")
        if isinstance(self.padding, str):
            if self.padding not in ("valid", "same"):
                raise ValueError(f"Conv2d: invalid padding string {self.padding!r}, should be "
                                 f"one of 'valid', 'same'")
            if self.padding == "same" and self.stride != (1, 1):
                raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
        elif any(p < 0 for p in self.padding):
            raise ValueError(f"Conv2d: padding {self.padding} must be non-negative")
        if self.padding_mode not in PADDING_MODES:
            raise ValueError(f"Conv2d: padding_mode must be one of {PADDING_MODES}, got "
                             f"{self.padding_mode!r}")

    def _explicit_padding(self):
        """(left, right, top, bottom) amounts for cltensor.pad, used with non-zero padding modes."""
        if self.padding == "valid":
            return (0, 0, 0, 0)
        if self.padding == "same":
            out = []
            for d, k in reversed(list(zip(self.dilation, self.kernel_size))):
                total = d * (k - 1)
                out += [total // 2, total - total // 2]
            return tuple(out)
        ph, pw = self.padding
        return (pw, pw, ph, ph)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            init_fan_in_bias(self.bias, self.weight)

    def forward(self, input):
        return self.conv_relu(input, relu=False)

    def conv_relu(self, input, relu=True):
        """forward(input), then max(., 0) in the same pass with relu (nn.Sequential calls it
        for a Conv2d followed by a ReLU: see F.conv2d's relu)."""
        if self.padding_mode != "zeros":
            padded = cltensor.pad(input, self._reversed_padding_repeated_twice,
                                  mode=self.padding_mode)
            return F.conv2d(padded, self.weight, self.bias, self.stride, (0, 0), self.dilation,
                            self.groups, relu=relu)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, relu=relu)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s
