"""Batch normalization: BatchNorm1d, BatchNorm2d and BatchNorm3d."""
from ... import dtypes as dt
from ...autograd import no_grad
from ...creation import ones, zeros
from .. import functional as F
from .. import init
from .module import Module
from .utils import check_size, new_parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


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


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) input over N, D, H and W, per channel C
    (BatchNorm2d's statistics and running averages).

    Example:
        bn = nn.BatchNorm3d(16); y = bn(cltensor.randn(2, 16, 4, 5, 5))
    """

    _ndims = (5,)


_NormBase = _BatchNorm  # torch's base of the batch and instance norms (_InstanceNorm is one here)
