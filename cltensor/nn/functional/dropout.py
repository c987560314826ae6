"""Dropout: elementwise, of whole channels (1-d, 2-d, 3-d), and alpha dropout for
SELU networks.
"""
import math
import warnings

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.functions import _where
from ...ops import activation as act
from ...tensor import ClTensor
from .activation import SELU_ALPHA, SELU_SCALE
from .utils import _float_tensor, _number, _records

__all__ = ["alpha_dropout", "dropout", "dropout1d", "dropout2d", "dropout3d",
           "feature_alpha_dropout"]


class _Dropout(Function):
    @staticmethod
    def forward(ctx, x, mask, scale):
        ctx.mask, ctx.scale = mask, scale
        return act.dropout(x, mask, scale)

    @staticmethod
    def backward(ctx, g):
        if is_grad_enabled():
            return _where(ctx.mask, g * ctx.scale, 0.0), None, None
        return act.dropout_backward(g, ctx.mask, ctx.scale), None, None


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training only).

    The mask is drawn from cltensor.random's global generator: after cltensor.manual_seed(s)
    the same calls give the same masks, on every device.

    Example:
        >>> cltensor.manual_seed(0)
        >>> y = F.dropout(cltensor.ones(1000), p=0.2)   # about 200 zeros, the rest 1.25
    """
    return _dropout(input, p, training, inplace, input.shape, "dropout")


def _feature_dropout(input, p, training, inplace, spatial, op):
    """Dropout of whole feature maps: one draw per (N, C) (or C, unbatched) over `spatial`
    trailing dims."""
    _float_tensor(input, "input", op)
    if input.ndim in (spatial + 1, spatial + 2):
        return _dropout(input, p, training, inplace, input.shape[:-spatial] + (1,) * spatial, op)
    if spatial == 1:
        raise ValueError(f"{op}: expected a {spatial + 1}-d (C, ...) or {spatial + 2}-d "
                         f"(N, C, ...) input, got shape {input.shape}")
    if input.ndim < 2:
        raise ValueError(f"{op}: feature dropout needs at least 2 dims (N, C), got shape "
                         f"{input.shape}")
    # NOTE: as torch, other ranks warn and drop per (N, C), elementwise for a 2-d input
    warnings.warn(f"{op} got a {input.ndim}-d input; it is meant for {spatial + 1}-d (C, ...) or "
                  f"{spatial + 2}-d (N, C, ...) inputs. As torch does (a deprecated behaviour "
                  f"there), each (N, C) entry is kept or zeroed whole; use dropout for "
                  f"elementwise dropout", UserWarning, stacklevel=3)
    return _dropout(input, p, training, inplace, input.shape[:2] + (1,) * (input.ndim - 2), op)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, L) or (C, L) input with probability p, scaling the
    rest by 1 / (1 - p) (training only)."""
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) or (C, H, W) input with probability p, scaling
    the rest by 1 / (1 - p) (training only).

    Example:
        >>> y = F.dropout2d(cltensor.ones(8, 16, 4, 4), 0.25)   # each 4x4 map all 0 or 4/3
    """
    return _feature_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability p,
    scaling the rest by 1 / (1 - p) (training only)."""
    return _feature_dropout(input, p, training, inplace, 3, "dropout3d")


def _dropout(input, p, training, inplace, mask_shape, op):
    """input times a Bernoulli(1 - p) mask of mask_shape (broadcast), scaled by 1 / (1 - p)."""
    _float_tensor(input, "input", op)
    p = _number(p, "p", op)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    mask = ClTensor.empty_on(mask_shape, dt.bool_, input.device).bernoulli_(1.0 - p)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    if not inplace:
        return _Dropout.apply(input, mask, scale)
    if _records(input):
        return input.copy_(_Dropout.apply(input, mask, scale))
    act.dropout(input, mask, scale, out=input)
    input.storage.version += 1
    return input


SELU_NEG = SELU_ALPHA * SELU_SCALE  # selu's limit at -inf, negated


def _alpha_dropout(input, p, training, inplace, mask_shape, op):
    """torch's alpha dropout: dropped elements set to selu's negative saturation and an affine
    map a x + b that keeps zero mean and unit variance."""
    _float_tensor(input, "input", op)
    p = _number(p, "p", op)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0.0
    else:
        keep = ClTensor.empty_on(mask_shape, input.dtype, input.device).bernoulli_(1.0 - p)
        a = 1.0 / math.sqrt((SELU_NEG * SELU_NEG * p + 1) * (1 - p))
        out = input * (keep * a) + ((keep - 1) * (SELU_NEG * a) + SELU_NEG * a * p)
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps the input's mean and variance (training only).

    Example:
        >>> y = F.alpha_dropout(cltensor.randn(1000), 0.2, training=True)
    """
    return _alpha_dropout(input, p, training, inplace, input.shape, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels: one draw per (N, C) of an (N, C, *) input."""
    op = "feature_alpha_dropout"
    if _float_tensor(input, "input", op).ndim < 2:
        raise ValueError(f"{op}: expected an (N, C, *) input, got shape {input.shape}")
    shape = input.shape[:2] + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, inplace, shape, op)
