"""ctc_loss: the connectionist temporal classification loss, with torch's signature and
semantics, on cltensor/ops/ctc.py's kernels (forward: alpha recursion; backward: beta recursion
and gradient).
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.namespace import from_numpy, where
from ...ops.ctc import Problem, ctc_backward, ctc_forward
from ...ops.elementwise import common_device
from ...tensor import ClTensor
from .utils import _dense, _float_tensor, _reduction

__all__ = ["ctc_loss"]


class _CtcLoss(Function):
    @staticmethod
    def forward(ctx, lp, p, zero_infinity):
        x = _dense(lp.to(dt.compute_dtype(lp.dtype)))  # dense once for both passes
        nll, log_alpha = ctc_forward(x, p)
        ctx.save_for_backward(x, lp)
        ctx.args = (p, nll, log_alpha, zero_infinity, lp.dtype)
        if zero_infinity:
            nll = where(nll == float("inf"), 0.0, nll)
        return nll.to(lp.dtype)

    @staticmethod
    def backward(ctx, g):
        x, lp = ctx.saved_tensors
        p, nll, log_alpha, zero_infinity, dtype = ctx.args
        grad = ctc_backward(g, x, p, nll, log_alpha, zero_infinity).to(dtype)
        if is_grad_enabled():  # create_graph: recorded, but not differentiable again
            grad = _Once.apply(grad, lp, g)
        return grad, None, None


class _Once(Function):
    """ctc_loss's gradient under create_graph: torch has no second derivative of the loss, so
    differentiating the gradient raises rather than returning a wrong zero."""

    @staticmethod
    def forward(ctx, grad, lp, g):
        return grad

    @staticmethod
    def backward(ctx, gg):
        raise RuntimeError("ctc_loss: its gradient is not differentiable (double backward is "
                           "not implemented, as in torch)")


def ctc_loss(log_probs: ClTensor, targets: ClTensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> ClTensor:
    """The connectionist temporal classification loss (torch.nn.functional.ctc_loss).

    The negative log likelihood of each target sequence summed over its alignments to the input
    (labels repeated or separated by blanks), in log space; differentiable in log_probs. An
    impossible alignment (an input too short for its target) gives inf, or 0 with a zero
    gradient when zero_infinity is set. float16 and bfloat16 inputs are computed in float32.

    Args:
        log_probs: (T, N, C) or unbatched (T, C) log-probabilities (log_softmax over C).
        targets: integer labels, padded (N, S) or concatenated 1-d (the targets' total length).
        input_lengths, target_lengths: per batch element, ints or an integer tensor.
        blank: the blank class.
        reduction: 'none' (per element), 'sum', or 'mean' (each loss divided by its target
            length, at least 1, then averaged: torch's definition).
        zero_infinity: infinite losses and their gradients become 0.

    Shape:
        log_probs (T, N, C); result () reduced, (N,) with 'none' (() unbatched).

    Example:
        >>> lp = cltensor.randn(8, 2, 5).log_softmax(2)
        >>> F.ctc_loss(lp, cltensor.tensor([[1, 2], [3, 3]]), [8, 6], [2, 2]).shape
        ()
    """
    op = "ctc_loss"
    reduction = _reduction(reduction, op)
    _float_tensor(log_probs, "log_probs", op)
    if log_probs.ndim not in (2, 3):
        raise ValueError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got shape "
                         f"{log_probs.shape}")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    common_device([lp, targets] if isinstance(targets, ClTensor) else [lp], op)
    p = Problem(lp, targets, input_lengths, target_lengths, blank, op)
    loss = _CtcLoss.apply(lp, p, bool(zero_infinity))
    if reduction == "mean":
        tl = from_numpy(np.maximum(np.asarray(p.tlen, np.float64), 1), device=loss.device,
                        dtype=loss.dtype)
        return (loss / tl).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)
