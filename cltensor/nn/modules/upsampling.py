"""Upsampling modules: Upsample, UpsamplingNearest2d, UpsamplingBilinear2d (F.interpolate)."""
from .. import functional as F
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resample (N, C, L), (N, C, H, W) or (N, C, D, H, W) input to `size`, or by
    `scale_factor`, with F.interpolate's modes ("trilinear" for 5-d input).

    Example:
        up = nn.Upsample(scale_factor=2, mode="bilinear")
        up(cltensor.randn(1, 3, 8, 8)).shape   # (1, 3, 16, 16)
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode = size, mode
        self.scale_factor = (tuple(float(f) for f in scale_factor)
                             if isinstance(scale_factor, (tuple, list)) else
                             None if scale_factor is None else float(scale_factor))
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        what = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else
                f"size={self.size!r}")
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest" (torch's legacy module)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True (torch's legacy module)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
