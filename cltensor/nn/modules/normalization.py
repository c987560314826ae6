"""Normalization modules: LayerNorm, RMSNorm, GroupNorm and LocalResponseNorm (batch and
instance norm are in batchnorm.py and instancenorm.py, as torch's)."""
from .. import functional as F
from .. import init
from .module import Module
from .utils import check_size, new_parameter

__all__ = ["LayerNorm", "GroupNorm", "LocalResponseNorm", "RMSNorm"]


class _AffineNorm(Module):
    """A normalization with an optional elementwise affine map of `shape` (weight 1, bias 0)."""

    def _init_affine(self, affine, bias, shape, device, dtype):
        for name, wanted in (("weight", affine), ("bias", affine and bias)):
            if wanted:
                setattr(self, name, new_parameter(shape, device, dtype, type(self).__name__))
            else:
                self.register_parameter(name, None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)


def _shape(normalized_shape, owner):
    """normalized_shape as a tuple of sizes, checked."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    for n in shape:
        check_size(n, "normalized_shape", owner)
    return shape


class LayerNorm(_AffineNorm):
    """Normalization over the last dims (normalized_shape) of each sample, then an elementwise
    affine map of that shape (elementwise_affine; bias=False drops its bias).

    Example:
        ln = nn.LayerNorm(16); y = ln(cltensor.randn(4, 10, 16))
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        shape = _shape(normalized_shape, "LayerNorm")
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self._init_affine(elementwise_affine, bias, shape, device, dtype)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(_AffineNorm):
    """Normalization of an (N, C, *) input over each sample's groups of C / num_groups channels,
    then a per-channel affine map (affine; bias=False drops its bias).

    Example:
        gn = nn.GroupNorm(4, 32); y = gn(cltensor.randn(2, 32, 8, 8))
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        check_size(num_groups, "num_groups", "GroupNorm")
        check_size(num_channels, "num_channels", "GroupNorm")
        if num_groups == 0 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                      eps, affine)
        self._init_affine(affine, bias, (num_channels,), device, dtype)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    """Normalization across nearby channels (AlexNet's LRN):
    b_c = a_c / (k + alpha / size * sum of a^2 over `size` channels around c) ** beta.
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class RMSNorm(_AffineNorm):
    """Root-mean-square normalization over the last dims (normalized_shape), then an elementwise
    scale (elementwise_affine); eps None is the dtype's machine epsilon.

    Example:
        nn.RMSNorm(16)(cltensor.randn(4, 10, 16))
    """

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        shape = _shape(normalized_shape, "RMSNorm")
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self._init_affine(elementwise_affine, False, shape, device, dtype)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
