"""Pooling modules: MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d/3d,
AdaptiveMaxPool1d/2d/3d, LPPool1d/2d and MaxUnpool1d/2d/3d."""
from .. import functional as F
from .module import Module
from .utils import ntuple

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "MaxPool1d",
           "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "LPPool1d", "LPPool2d",
           "MaxUnpool1d", "MaxUnpool2d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool3d", "MaxUnpool3d"]


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
        return self.pool_relu(input, relu=False)

    def pool_relu(self, input, relu=True):
        """forward(input), then max(., 0) as it stores with relu (nn.Sequential calls it for a
        MaxPool2d followed by a ReLU: see F.max_pool2d's relu)."""
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices,
                            relu=relu)

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


class MaxPool1d(MaxPool2d):
    """The maximum over each window of an (N, C, L) or (C, L) input (MaxPool2d's arguments, as
    ints).

    Example:
        nn.MaxPool1d(2)(cltensor.randn(1, 3, 8)).shape   # (1, 3, 4)
    """

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(AvgPool2d):
    """The mean over each window of an (N, C, L) or (C, L) input.

    Example:
        nn.AvgPool1d(3, stride=2)(cltensor.randn(1, 3, 9)).shape   # (1, 3, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        del self.divisor_override  # NOTE: torch's AvgPool1d has none, and keeps 1-tuples
        for name in ("kernel_size", "stride", "padding"):
            setattr(self, name, ntuple(getattr(self, name), 1, name, "AvgPool1d"))

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Averages of an (N, C, L) or (C, L) input over windows that give length output_size."""

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Maxima of an (N, C, L) or (C, L) input over windows that give length output_size."""

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class LPPool2d(Module):
    """Power-average pooling: (sum of x^p over each window) ^ (1 / p).

    Example:
        nn.LPPool2d(2, 3, stride=2)(cltensor.randn(1, 3, 9, 9)).shape   # (1, 3, 4, 4)
    """

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input):
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(LPPool2d):
    """Power-average pooling of an (N, C, L) or (C, L) input."""

    def forward(self, input):
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class MaxUnpool2d(Module):
    """The inverse of MaxPool2d: zeros holding the input's values at the pooling's indices.

    Example:
        pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
        y, i = pool(x); unpool(y, i, output_size=x.shape)
    """

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    """The inverse of MaxPool1d."""

    def forward(self, input, indices, output_size=None):
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxPool3d(MaxPool2d):
    """The maximum over each window of an (N, C, D, H, W) or (C, D, H, W) input (MaxPool2d's
    arguments, as ints or triples).

    Example:
        nn.MaxPool3d(3, 2, 1)(cltensor.randn(1, 3, 8, 16, 16)).shape   # (1, 3, 4, 8, 8)
    """

    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(AvgPool2d):
    """The mean over each window of an (N, C, D, H, W) or (C, D, H, W) input.

    Example:
        nn.AvgPool3d(2)(cltensor.randn(1, 3, 4, 8, 8)).shape   # (1, 3, 2, 4, 4)
    """

    def forward(self, input):
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    """Averages of an (N, C, D, H, W) or (C, D, H, W) input over windows that give
    output_size (an int or (d, h, w); None keeps that input size)."""

    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """Maxima of an (N, C, D, H, W) or (C, D, H, W) input over windows that give output_size;
    return_indices: also their positions."""

    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class MaxUnpool3d(MaxUnpool2d):
    """The inverse of MaxPool3d."""

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


# torch.nn.modules.pooling's bases, for isinstance checks: the 1-d layers subclass the 2-d ones
_MaxPoolNd, _AvgPoolNd = MaxPool2d, AvgPool2d
_AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd = AdaptiveAvgPool2d, AdaptiveMaxPool2d
