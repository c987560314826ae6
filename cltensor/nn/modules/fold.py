"""Unfold and Fold: im2col and col2im (F.unfold, F.fold)."""
from .. import functional as F
from .module import Module

__all__ = ["Fold", "Unfold"]


class Unfold(Module):
    """Sliding blocks of an (N, C, H, W) input as the columns of (N, C * kh * kw, L) (F.unfold).

    Example:
        nn.Unfold(3, padding=1)(cltensor.randn(2, 3, 5, 5)).shape   # (2, 27, 25)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Unfold):
    """Columns (N, C * kh * kw, L) summed back into an (N, C, H, W) image (F.fold), (H, W) =
    output_size.

    Example:
        nn.Fold((4, 4), 2)(cltensor.randn(1, 12, 9)).shape   # (1, 3, 4, 4)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return f"output_size={self.output_size}, " + super().extra_repr()
