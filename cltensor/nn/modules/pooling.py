"""Pooling modules: MaxPool2d, AvgPool2d and AdaptiveAvgPool2d."""
from .. import functional as F
from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]


class MaxPool2d(Module):
    """The maximum over each (possibly overlapping) window of an (N, C, H, W) or (C, H, W) input.

    stride defaults to kernel_size; padding pads with -inf; ceil_mode rounds the output size up.

    Example:
        nn.MaxPool2d(2)(cltensor.randn(1, 3, 8, 8)).shape   # (1, 3, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """The mean over each window; count_include_pad counts padded zeros in the divisor.

    Example:
        nn.AvgPool2d(3, stride=2, padding=1)(cltensor.randn(1, 3, 8, 8)).shape   # (1, 3, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Averages over windows chosen so that the output is output_size (an int or (h, w);
    None keeps that input size).

    Example:
        nn.AdaptiveAvgPool2d(1)(cltensor.randn(2, 8, 7, 7)).shape   # (2, 8, 1, 1)
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """The largest value of windows chosen so that the output is output_size (an int or (h, w);
    None keeps that input size); return_indices: also their positions.

    Example:
        nn.AdaptiveMaxPool2d((2, 2))(cltensor.randn(2, 8, 7, 7)).shape   # (2, 8, 2, 2)
    """

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"
