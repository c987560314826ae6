"""Normalization modules: BatchNorm1d, BatchNorm2d, InstanceNorm1d, InstanceNorm2d, LayerNorm,
RMSNorm, GroupNorm and LocalResponseNorm."""
from ... import dtypes as dt
from ...autograd import no_grad
from ...creation import ones, zeros
from .. import functional as F
from .. import init
from .module import Module
from .utils import check_size, new_parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "LocalResponseNorm",
           "InstanceNorm1d", "InstanceNorm2d", "RMSNorm"]


class _BatchNorm(Module):
    """Shared by BatchNorm1d and BatchNorm2d: per-channel (dim 1) normalization with batch
    statistics in training, running averages in eval."""

    _ndims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        name = type(self).__name__
        self.num_features = check_size(num_features, "num_features", name)
        self.eps, self.momentum = eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = new_parameter((num_features,), device, dtype, name)
            if bias:
                self.bias = new_parameter((num_features,), device, dtype, name)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            ft = dt.as_dtype(dtype) or dt.float32
            self.register_buffer("running_mean", zeros(num_features, dtype=ft, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=ft, device=device))
            self.register_buffer("num_batches_tracked", zeros((), dtype=dt.int64, device=device))
        else:
            for buf in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(buf, None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _check_input(self, input):
        name = type(self).__name__
        if input.ndim not in self._ndims:
            want = " or ".join(f"{n}D" for n in self._ndims)
            raise ValueError(f"{name}: expected {want} input, got {input.ndim}D input of shape "
                             f"{input.shape}")
        if input.shape[1] != self.num_features:
            raise ValueError(f"{name}: expected {self.num_features} channels in dim 1, got "
                             f"input of shape {input.shape}")

    def forward(self, input):
        self._check_input(input)
        tracking = self.training and self.track_running_stats
        factor = 0.0 if self.momentum is None else self.momentum
        if tracking and self.momentum is None:  # a cumulative moving average
            factor = 1.0 / (self.num_batches_tracked.item() + 1)
        use_batch_stats = self.training or self.running_mean is None
        keep_stats = not self.training or self.track_running_stats
        out = F.batch_norm(input, self.running_mean if keep_stats else None,
                           self.running_var if keep_stats else None, self.weight, self.bias,
                           use_batch_stats, factor, self.eps)
        if tracking:  # NOTE: counted after F.batch_norm accepted the input
            self.num_batches_tracked.add_(1)
        return out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input over all dims but C.

    Example:
        bn = nn.BatchNorm1d(16); y = bn(cltensor.randn(32, 16))
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input over N, H and W, per channel C.

    In training it normalizes with the batch's mean and biased variance and updates
    running_mean/running_var (unbiased) by `momentum` (None: a cumulative average); in eval it
    uses the running statistics.

    Example:
        bn = nn.BatchNorm2d(16); y = bn(cltensor.randn(8, 16, 5, 5))
    """

    _ndims = (4,)


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
