"""Instance normalization: InstanceNorm1d, InstanceNorm2d and InstanceNorm3d."""
from .. import functional as F
from .batchnorm import _BatchNorm

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_BatchNorm):
    """Per-(sample, channel) normalization over the positions, with torch's InstanceNorm
    defaults (no affine map, no running stats)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        name, batched = type(self).__name__, self._ndims[-1]
        if input.ndim not in self._ndims:
            raise ValueError(f"{name}: expected {batched - 1}D (unbatched) or {batched}D input, "
                             f"got {input.ndim}D input of shape {input.shape}")
        x = input if input.ndim == batched else input.unsqueeze(0)
        if x.shape[1] != self.num_features:
            raise ValueError(f"{name}: expected input's size at dim={input.ndim - batched + 1} "
                             f"to match num_features ({self.num_features}), got {input.shape}")
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps)
        return y if input.ndim == batched else y.squeeze(0)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L) input.

    Example:
        nn.InstanceNorm1d(16, affine=True)(cltensor.randn(4, 16, 32))
    """

    _ndims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W) input.

    Example:
        nn.InstanceNorm2d(16)(cltensor.randn(4, 16, 8, 8))
    """

    _ndims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W) input.

    Example:
        nn.InstanceNorm3d(16)(cltensor.randn(2, 16, 4, 8, 8))
    """

    _ndims = (4, 5)
