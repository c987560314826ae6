"""Automatic mixed precision (torch.amp): autocast and GradScaler.

cltensor's root calls install() once it has bound its functions, wrapping the functions and
tensor methods of autocast's op lists (autocast_mode.OP_LISTS).
"""
import types

from .. import cuda as _cuda
from .. import nn
from . import autocast_mode, kernels  # noqa: F401
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "get_autocast_dtype", "is_autocast_enabled", "install"]


def install(namespace):
    """Wrap the op lists in `namespace` (the cltensor module), ClTensor and nn.functional, and
    give cltensor.cuda torch.cuda.amp's names for scripts written against CUDA."""
    autocast_mode.install(namespace, nn.functional)
    _cuda.amp = types.SimpleNamespace(
        GradScaler=GradScaler, autocast=lambda enabled=True, dtype=None, cache_enabled=None:
        autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled))
