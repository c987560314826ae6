"""Helpers shared by the nn.functional areas: argument checks, the reduction argument,
_Adjoint for a linear op's recorded backward; and flatten and cat.
"""
import numbers

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.namespace import cat as _cat
from ...ops import activation as act, pool
from ...ops.elementwise import common_device
from ...tensor import ClTensor

__all__ = ["cat", "flatten"]


REDUCTIONS = ("none", "mean", "sum")


def _tensor(x, name, op):
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}: {name} must be a tensor, got {type(x).__name__}")
    return x


def _float_tensor(x, name, op):
    _tensor(x, name, op)
    if not dt.is_floating(x.dtype):
        raise TypeError(f"{op}: {name} must be a floating point tensor, got {x.dtype}")
    return x


def _records(*tensors):
    return is_grad_enabled() and any(isinstance(t, ClTensor) and t.requires_grad for t in tensors)


def _no_grad_for(op, **tensors):
    """torch does not differentiate these arguments: refuse rather than drop the gradient."""
    for name, t in tensors.items():
        if _records(t):
            raise RuntimeError(f"{op}: the derivative for '{name}' is not implemented")


def _dense(t):
    """t itself when contiguous from offset 0 (kernels index it as a plain array), else a copy."""
    return t if t is None or (t.is_contiguous() and t.offset == 0) else t.clone()


def _per_channel(t, name, x, size, op, mixed=False):
    """An optional 1-d per-channel (or per-class) tensor of x's dtype and device, checked;
    `mixed` also takes float32 ones for a float16/bfloat16 x (batch norm's mixed precision)."""
    if t is None:
        return None
    _tensor(t, name, op)
    if t.shape != (size,):
        raise ValueError(f"{op}: {name} must have shape ({size},), got {t.shape}")
    if t.dtype != x.dtype and not (mixed and x.dtype in dt.HALF_TYPES and t.dtype == dt.float32):
        raise TypeError(f"{op}: {name} has dtype {t.dtype} but the input has {x.dtype}")
    common_device([x, t], op)
    return t


def _reduction(reduction, op, size_average=None, reduce=None):
    """torch's reduction argument, with the legacy size_average / reduce flags mapped onto it."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction "
                         f"(expected one of {REDUCTIONS})")
    return reduction


class _Adjoint(Function):
    """A linear op's backward (average pooling, resampling) as a Function, so that
    create_graph=True records it: forward runs the backward kernels on g; its own gradient is
    the op itself applied to the incoming one (the adjoint of a linear map's adjoint)."""

    @staticmethod
    def forward(ctx, g, backward, backward_args, op, op_args):
        ctx.op, ctx.op_args = op, op_args
        return backward(g, *backward_args)

    @staticmethod
    def backward(ctx, gg):
        return ctx.op.apply(gg, *ctx.op_args), None, None, None, None


def _linear_backward(g, backward, backward_args, op, op_args):
    """backward(g, *backward_args): the input gradient of the linear Function op, applied as
    op.apply(x, *op_args); recorded as _Adjoint under create_graph=True."""
    if not is_grad_enabled():
        return backward(g, *backward_args)
    return _Adjoint.apply(g, backward, backward_args, op, op_args)


def _number(value, name, op):
    return act.check_number(value, name, op)


def _single(value, name, op):
    """An int from an int or a 1-sequence of ints (torch's _single), checked."""
    v = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise TypeError(f"{op}: {name} must be an int or a 1-tuple of ints, got {value!r}")
    return int(v)


def _row(value, name, op, height):
    """The 2-d op's (height, value) pair of a 1-d argument; None stays None."""
    return None if value is None else (height, _single(value, name, op))


def _unit_height(input, op, name="input"):
    """A (N, C, L) or (C, L) input as (N, C, 1, L) or (C, 1, L), for the 2-d op."""
    _float_tensor(input, name, op)
    if input.ndim not in (2, 3):
        raise ValueError(f"{op}: expected a 2-d (C, L) or 3-d (N, C, L) {name}, got shape "
                         f"{input.shape}")
    return input.unsqueeze(-2)


def _drop_height(out):
    if isinstance(out, tuple):
        return tuple(o.squeeze(-2) for o in out)
    return out.squeeze(-2)


def _triple(value, name, op):
    """An int or a 1- or 3-sequence of ints as a 3-tuple (torch's _triple), checked."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(items) == 1:
        items = items * 3
    if len(items) != 3 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                  for v in items):
        raise TypeError(f"{op}: {name} must be an int or a triple of ints, got {value!r}")
    return tuple(int(v) for v in items)


def _tuple(value, n, name, op):
    if n == 3:
        return _triple(value, name, op)
    return pool.pair(value, name, op) if n == 2 else (_single(value, name, op),)


def flatten(input, start_dim=0, end_dim=-1):
    """input with dims start_dim..end_dim merged into one (a view when the strides allow)."""
    return _tensor(input, "input", "flatten").flatten(start_dim, end_dim)


def cat(tensors, dim=0):
    """cltensor.cat: tensors joined along dim (differentiable; inception blocks' concat)."""
    return _cat(tensors, dim)



def _loss_operand(t, name, x, op):
    if t is None:
        return None
    _tensor(t, name, op)
    if t.dtype != x.dtype:
        raise TypeError(f"{op}: {name} has dtype {t.dtype} but the input has {x.dtype}")
    common_device([x, t], op)
    return t


def _reduced(loss, reduction):
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _same_shapes(op, **tensors):
    """The tensors (the first floating, the rest of its dtype and device) of one shape."""
    (first, x), *rest = tensors.items()
    _float_tensor(x, first, op)
    for name, t in rest:
        if _loss_operand(t, name, x, op).shape != x.shape:
            raise ValueError(f"{op}: {name} of shape {t.shape} must have the {first}'s shape "
                             f"{x.shape}")
