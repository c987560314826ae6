"""Automatic mixed precision (torch.amp): autocast and GradScaler.

The op lists' functions and tensor methods are wrapped in cltensor/amp/wrapped.py, which the
package root imports after binding every other name (autocast_mode.OP_LISTS).
"""
from . import autocast_mode, kernels  # noqa: F401
from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "get_autocast_dtype", "is_autocast_enabled"]
