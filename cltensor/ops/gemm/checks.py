"""The argument checks of the matrix products (ops/matmul.py) and of gemm(): tensors, dtypes,
inner and batch dims, scalars, addends and out."""
import numbers

import numpy as np

from ... import dtypes as dt
from .. import elementwise as ew
from .kit import MAX_DIM_SIZE


def check_tensors(op, *tensors):
    """Same device, same dtype (not bool), every operand a tensor; returns (device, dtype)."""
    for t in tensors:
        if not ew.is_tensor(t):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__}"
                            f"{dt.conversion_hint(t)}")
    device = ew.common_device(list(tensors), op)
    dtypes = [t.dtype for t in tensors]
    if any(d != dtypes[0] for d in dtypes):
        names = " != ".join(f"{d}" for d in dict.fromkeys(dtypes))
        raise TypeError(f"{op}: expected all operands to have the same dtype, but got: {names}")
    if dtypes[0] == dt.bool_:
        raise TypeError(f"{op}: not implemented for bool tensors")
    return device, dtypes[0]


def check_inner(op, a, b, ka, kb):
    if ka != kb:
        raise ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                         f"multiplied ({ka} != {kb})")
    big = [n for n in tuple(a.shape) + tuple(b.shape) if n > MAX_DIM_SIZE]
    if big:
        raise ValueError(f"{op}: dims of size {big[0]} exceed the kernel's limit of {MAX_DIM_SIZE}")


def check_scalar(op, name, value, dtype):
    if isinstance(value, (bool, np.bool_)):
        return
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a real number, got {type(value).__name__}")
    if not dt.is_floating(dtype) and not isinstance(value, numbers.Integral):
        raise TypeError(f"{op}: for integer tensors {name} must be an integer, got {value!r}")


def check_out(op, out, shape, dtype, device):
    if not ew.is_tensor(out):
        raise TypeError(f"{op}: out must be a tensor, got {type(out).__name__}")
    if out.device is not device:
        raise RuntimeError(f"{op}: expected all tensors on the same device, got {device} and "
                           f"{out.device}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{op}: the result's shape {tuple(shape)} does not match out's shape "
                         f"{tuple(out.shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{op}: expected out to have dtype {dtype}, got {out.dtype}")
    ew.check_writable(out, op)


def check_addend(op, c, shape):
    """The added tensor of addmm/baddbmm must broadcast to the product's shape."""
    if not ew.broadcasts_to(c.shape, shape):
        raise ValueError(f"{op}: input of shape {tuple(c.shape)} cannot be broadcast to the "
                         f"product's shape {tuple(shape)}")


def broadcast_batch(op, a, b):
    try:
        return ew.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the batch dims of shapes {tuple(a.shape)} and {tuple(b.shape)} "
                         f"cannot be broadcast together") from None
