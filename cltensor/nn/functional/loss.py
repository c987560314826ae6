"""Losses of class scores, probabilities and regression: cross_entropy, nll_loss, the
binary cross entropies, kl_div, the squared, absolute and smooth L1 errors, and the
Poisson and Gaussian negative log likelihoods.
"""
import math
import numbers
import warnings

import numpy as np

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.engine import sum_to_shape
from ...autograd.functions import _where
from ...autograd.namespace import clamp, full as _full, where, zeros
from ...ops import loss as lo, softmax as sm
from ...ops.elementwise import broadcasts_to, common_device
from .activation import _Logsigmoid, _Softmax, log_softmax
from .utils import (_dense, _float_tensor, _loss_operand, _no_grad_for, _number,
                    _per_channel, _reduced, _reduction, _same_shapes, _tensor)

__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy",
           "gaussian_nll_loss", "huber_loss", "kl_div", "l1_loss", "mse_loss", "nll_loss",
           "poisson_nll_loss", "smooth_l1_loss"]


def _reduce_rows(loss, wt, reduction):
    """(the reduced loss, the mean's denominator or None)."""
    if reduction == "none":
        return loss, None
    total = loss.sum()
    if reduction == "sum":
        return total, None
    denom = wt.sum()
    return total / denom, denom


def _row_scale(g, denom, reduction):
    return g / denom if reduction == "mean" else g


class _CrossEntropy(Function):
    @staticmethod
    def forward(ctx, x, target, weight, cdim, ignore_index, reduction, eps):
        loss, wt, lse = sm.xent_forward(x, cdim, target, weight, ignore_index, eps)
        out, denom = _reduce_rows(loss, wt, reduction)
        ctx.save_for_backward(x, lse)
        ctx.args = (cdim, target, weight, ignore_index, eps, reduction, denom)
        return out

    @staticmethod
    def backward(ctx, g):
        x, lse = ctx.saved_tensors
        cdim, target, weight, ignore_index, eps, reduction, denom = ctx.args
        if is_grad_enabled():
            q = _target_weights(x.shape, x.dtype, cdim, target, weight, ignore_index, eps)
            p = _Softmax.apply(x, cdim, False)
            gx = _class_scale(g, denom, reduction, cdim) * (p * q.sum(cdim, keepdim=True) - q)
            return gx, None, None, None, None, None, None
        wsum = weight.sum() if weight is not None else None
        scale = _row_scale(g, denom, reduction)
        gx = sm.xent_backward(x, cdim, target, weight, wsum, ignore_index, eps, lse, scale)
        return gx, None, None, None, None, None, None


class _NllLoss(Function):
    @staticmethod
    def forward(ctx, x, target, weight, cdim, ignore_index, reduction):
        loss, wt = lo.nll_forward(x, cdim, target, weight, ignore_index)
        out, denom = _reduce_rows(loss, wt, reduction)
        ctx.args = (x.shape, cdim, target, weight, ignore_index, reduction, denom)
        return out

    @staticmethod
    def backward(ctx, g):
        x_shape, cdim, target, weight, ignore_index, reduction, denom = ctx.args
        if is_grad_enabled():
            q = _target_weights(x_shape, g.dtype, cdim, target, weight, ignore_index, 0.0)
            return -_class_scale(g, denom, reduction, cdim) * q, None, None, None, None, None
        scale = _row_scale(g, denom, reduction)
        gx = lo.nll_backward(x_shape, cdim, target, weight, ignore_index, scale)
        return gx, None, None, None, None, None


def _target_weights(shape, dtype, cdim, target, weight, ignore_index, eps):
    """The weights (constants, of the input's shape) that class-index targets t give the
    classes c of each row: w_c ((1 - eps) [c == t] + eps / C), 0 in the rows whose target is
    ignore_index. The input gradient of nll_loss is -scale times them, that of cross_entropy
    scale * (softmax(x) * their sum - them) (xent_bwd in cl_kernels/softmax.cl)."""
    C = shape[cdim]
    ignored = (target == ignore_index).unsqueeze(cdim)
    index = target.unsqueeze(cdim).masked_fill(ignored, 0)
    q = zeros(shape, dtype=dtype, device=target.device)
    q = q.scatter(cdim, index, value=1.0 - eps) + eps / C
    if weight is not None:
        q = q * weight.reshape((C,) + (1,) * (len(shape) - cdim - 1))
    return where(ignored, 0.0, q)


def _class_scale(g, denom, reduction, cdim):
    """The factor of each row's gradient, with reduction "none" a size-1 class dim added."""
    scale = _row_scale(g, denom, reduction)
    return scale.unsqueeze(cdim) if reduction == "none" else scale


def _class_dim(input, op):
    _float_tensor(input, "input", op)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class dim: (C,), (N, C) or (N, C, d1, ...), "
                         f"got a 0-d tensor")
    return 0 if input.ndim == 1 else 1


def _check_class_target(input, target, cdim, op):
    if target.dtype != dt.int64:
        raise TypeError(f"{op}: expected target dtype to be int64 (class indices), got "
                        f"{target.dtype}")
    expected = input.shape[:cdim] + input.shape[cdim + 1:]
    if input.ndim >= 2 and (target.ndim == 0 or target.shape[0] != input.shape[0]):
        raise ValueError(f"{op}: Expected input batch_size ({input.shape[0]}) to match target "
                         f"batch_size ({target.shape[0] if target.ndim else 'none: 0-d'}).")
    if target.shape != expected:
        raise ValueError(f"{op}: Expected target size {list(expected)}, got {list(target.shape)}")
    common_device([input, target], op)


def _class_args(input, target, weight, ignore_index, op):
    cdim = _class_dim(input, op)
    _tensor(target, "target", op)
    weight = _per_channel(weight, "weight", input, input.shape[cdim], op)
    _no_grad_for(op, weight=weight)
    if not isinstance(ignore_index, numbers.Integral) or isinstance(ignore_index, bool):
        raise TypeError(f"{op}: ignore_index must be an int, got {ignore_index!r}")
    return cdim, _dense(weight)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy between the softmax of input's logits and the target, as torch.

    Args:
        input: (C,), (N, C) or (N, C, d1, ...) logits.
        target: int64 class indices of shape (), (N,) or (N, d1, ...); or class probabilities of
            input's shape.
        weight: optional (C,) class weights.
        ignore_index: class-index targets equal to it add nothing (and leave the mean's count).
        reduction: 'none', 'mean' (weighted mean over the targets) or 'sum'.
        label_smoothing: in [0, 1]: the target mixes with the uniform distribution.

    Class-index targets run one fused kernel each way (softmax, loss and gradient together).

    Example:
        >>> logits = cltensor.tensor([[2.0, 0.0], [0.0, 2.0]])
        >>> round(F.cross_entropy(logits, cltensor.tensor([0, 1])).item(), 4)
        0.1269
    """
    op = "cross_entropy"
    reduction = _reduction(reduction, op, size_average, reduce)
    cdim, weight = _class_args(input, target, weight, ignore_index, op)
    eps = _number(label_smoothing, "label_smoothing", op)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0. Got: {eps}")
    if dt.is_floating(target.dtype) and target.shape == input.shape:
        return _cross_entropy_probs(input, target, weight, cdim, reduction, eps)
    _check_class_target(input, target, cdim, op)
    if input.shape[cdim] == 0:
        raise ValueError(f"{op}: the input has no classes (shape {input.shape})")
    if input.dtype in dt.HALF_TYPES:  # the fused kernels read float32/64: widened copies
        weight = weight if weight is None else weight.to(dt.float32)
        return _CrossEntropy.apply(input.to(dt.float32), target, weight, cdim,
                                   int(ignore_index), reduction, eps).to(input.dtype)
    return _CrossEntropy.apply(input, target, weight, cdim, int(ignore_index), reduction, eps)


def _cross_entropy_probs(input, target, weight, cdim, reduction, eps):
    """Probability targets, composed of differentiable ops (the target gets a gradient too)."""
    if target.dtype != input.dtype:
        raise TypeError(f"cross_entropy: probability targets must have the input's dtype "
                        f"{input.dtype}, got {target.dtype}")
    common_device([input, target], "cross_entropy")
    C = input.shape[cdim]
    logp = log_softmax(input, cdim)
    if eps > 0:
        target = target * (1 - eps) + eps / C
    prod = logp * target
    if weight is not None:
        prod = prod * weight.reshape((C,) + (1,) * (input.ndim - cdim - 1))
    if reduction == "none":
        return -prod.sum(cdim)
    if reduction == "sum":
        return -prod.sum()
    count = input.numel() // C
    return -prod.sum() / count if count else -prod.sum() * float("nan")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class-index targets given log-probabilities, as torch.

    Args:
        input: (C,), (N, C) or (N, C, d1, ...) log-probabilities.
        target: int64 class indices of shape (), (N,) or (N, d1, ...).
        weight, ignore_index, reduction: as cross_entropy.

    Example:
        >>> logp = F.log_softmax(cltensor.tensor([[2.0, 0.0]]), dim=1)
        >>> round(F.nll_loss(logp, cltensor.tensor([0])).item(), 4)
        0.1269
    """
    op = "nll_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    cdim, weight = _class_args(input, target, weight, ignore_index, op)
    _check_class_target(input, target, cdim, op)
    return _NllLoss.apply(input, target, weight, cdim, int(ignore_index), reduction)


class _PointwiseLoss(Function):
    @staticmethod
    def forward(ctx, x, t, weight, pos_weight, kind, reduction):
        loss = lo.pointwise_forward(kind, x, t, weight, pos_weight)
        ctx.save_for_backward(x, t, weight, pos_weight)
        ctx.kind, ctx.reduction, ctx.count = kind, reduction, loss.numel()
        if reduction == "none":
            return loss
        return loss.sum() if reduction == "sum" else loss.mean()

    @staticmethod
    def backward(ctx, g):
        x, t, weight, pos_weight = ctx.saved_tensors
        mult = 1.0 / ctx.count if ctx.reduction == "mean" and ctx.count else 1.0
        if is_grad_enabled():
            gx, gt = _pointwise_loss_grads(ctx.kind, g * mult, x, t, weight, pos_weight)
            gt = gt if ctx.needs_input_grad[1] else None
        else:
            gx, gt = lo.pointwise_backward(ctx.kind, g, mult, x, t, weight, pos_weight,
                                           grad_target=ctx.needs_input_grad[1])
        gx = sum_to_shape(gx, x.shape) if ctx.needs_input_grad[0] else None
        gt = sum_to_shape(gt, t.shape) if gt is not None else None
        return gx, gt, None, None, None, None


def _pointwise_loss_grads(kind, g, x, t, weight, pos_weight):
    """(d/dx, d/dt) of the unreduced loss times g and weight, as tensor ops (pw_loss_bwd in
    cl_kernels/loss.cl): MSE 2 (x - t); BCE (1 - t) - lw sigmoid(-x) and -x + (pw - 1)
    softplus(-x), lw = (pw - 1) t + 1."""
    s = g if weight is None else g * weight
    if kind == "MSE":
        d = 2 * (x - t)
        return s * d, -s * d
    if pos_weight is None:
        return s * ((1 - t) - (-x).sigmoid()), -s * x
    pw1 = pos_weight - 1
    gx = s * ((1 - t) - (pw1 * t + 1) * (-x).sigmoid())
    return gx, -s * (x + pw1 * _Logsigmoid.apply(x))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Squared error (input - target)^2, reduced; the operands broadcast (with a warning when
    their shapes differ, as torch).

    Example:
        >>> F.mse_loss(cltensor.tensor([1.0, 3.0]), cltensor.tensor([0.0, 0.0])).item()
        5.0
    """
    reduction = _regression_operands(input, target, "mse_loss", size_average, reduce, reduction)
    return _PointwiseLoss.apply(input, target, None, None, "MSE", reduction)


def _regression_operands(input, target, op, size_average, reduce, reduction):
    """The reduction of a regression loss, its operands checked (they broadcast, with a
    warning when their shapes differ, as torch)."""
    reduction = _reduction(reduction, op, size_average, reduce)
    _float_tensor(input, "input", op)
    _loss_operand(target, "target", input, op)
    if target.shape != input.shape:
        warnings.warn(f"{op}: using a target size ({target.shape}) that is different to the "
                      f"input size ({input.shape}); they will be broadcast", stacklevel=3)
    return reduction


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Absolute error |input - target|, reduced (the gradient at 0 is 0, as torch's).

    Example:
        >>> F.l1_loss(cltensor.tensor([1.0, -3.0]), cltensor.tensor([0.0, 0.0])).item()
        2.0
    """
    reduction = _regression_operands(input, target, "l1_loss", size_average, reduce, reduction)
    return _reduced((input - target).abs(), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target), reduced;
    beta 0 is the L1 loss.

    Example:
        >>> F.smooth_l1_loss(cltensor.tensor([0.5, 3.0]), cltensor.tensor([0.0, 0.0])).item()
        1.3125
    """
    op = "smooth_l1_loss"
    reduction = _regression_operands(input, target, op, size_average, reduce, reduction)
    return _reduced(_smooth_l1(input - target, _number(beta, "beta", op), op), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta) (d = input - target), reduced:
    delta times the smooth L1 loss with beta = delta.

    Example:
        >>> F.huber_loss(cltensor.tensor([0.5, 3.0]), cltensor.tensor([0.0, 0.0])).item()
        1.3125
    """
    op = "huber_loss"
    reduction = _regression_operands(input, target, op, None, None, reduction)
    delta = _number(delta, "delta", op)
    if delta <= 0:
        raise ValueError(f"{op}: delta must be positive, got {delta}")
    return _reduced(_smooth_l1(input - target, delta, op) * delta, reduction)


def _smooth_l1(d, beta, op):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta; |d| for beta 0."""
    if beta < 0:
        raise ValueError(f"{op}: beta must be non-negative, got {beta}")
    a = d.abs()
    if beta == 0:
        return a
    return where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)


def _bce_operands(input, target, weights, op, size_average, reduce, reduction):
    """The reduction of a binary cross entropy, its operands checked: a target of the input's
    shape, weights (name -> tensor or None) that broadcast to it."""
    reduction = _reduction(reduction, op, size_average, reduce)
    _float_tensor(input, "input", op)
    _loss_operand(target, "target", input, op)
    if target.shape != input.shape:
        raise ValueError(f"{op}: Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    for name, t in weights.items():
        _loss_operand(t, name, input, op)
        if t is not None and not broadcasts_to(t.shape, input.shape):
            raise ValueError(f"{op}: {name} of shape {t.shape} does not broadcast to the "
                             f"input's shape {input.shape}")
    return reduction


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-weight (t log(x) + (1 - t) log(1 - x)) of probabilities x in [0, 1], each log at least
    -100 (torch's clamp), reduced.

    Example:
        >>> x = cltensor.tensor([0.5]); t = cltensor.tensor([1.0])
        >>> round(F.binary_cross_entropy(x, t).item(), 4)
        0.6931
    """
    op = "binary_cross_entropy"
    reduction = _bce_operands(input, target, dict(weight=weight), op, size_average, reduce,
                              reduction)
    if input.numel() and ((input.detach() < 0) | (input.detach() > 1)).any().item():
        raise ValueError(f"{op}: all elements of input should be between 0 and 1")
    loss = _BinaryCrossEntropy.apply(input, target)
    return _reduced(loss if weight is None else loss * weight, reduction)


# torch's floor on x (1 - x) in binary_cross_entropy's input gradient: 1e-12 rounded to float32
BCE_EPS = float(np.float32(1e-12))


class _BinaryCrossEntropy(Function):
    """torch's unreduced binary cross entropy: each log clamped at -100, and the input
    gradient g (x - t) / max(x (1 - x), 1e-12), so loss and gradient stay finite at 0 and 1."""

    @staticmethod
    def forward(ctx, x, t):
        ctx.save_for_backward(x, t)
        log_x = clamp(x.log(), min=-100.0)
        log_1mx = clamp((-x).log1p(), min=-100.0)
        return (t - 1) * log_1mx - t * log_x

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        gx = g * (x - t) / clamp(x * (1 - x), min=BCE_EPS)
        # the target's gradient is -logit(x), unclamped (infinite at 0 and 1), as torch's
        gt = g * ((-x).log1p() - x.log()) if ctx.needs_input_grad[1] else None
        return gx if ctx.needs_input_grad[0] else None, gt


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log(target) - input) pointwise (input: log-probabilities; log_target: target
    as log-probabilities too), 0 where target is 0, reduced; reduction "batchmean" divides the
    sum by the batch size (the mathematically proper KL divergence).

    Example:
        >>> p = cltensor.tensor([[0.5, 0.5]])
        >>> F.kl_div(p.log(), p, reduction="batchmean").item()
        0.0
    """
    op = "kl_div"
    batchmean = reduction == "batchmean"
    if reduction == "mean" and size_average is None and reduce is None:
        warnings.warn("kl_div: reduction 'mean' divides the total by the number of elements; "
                      "'batchmean' divides it by the batch size alone, as the KL divergence's "
                      "definition does", UserWarning, stacklevel=2)
    reduction = _reduction("sum" if batchmean else reduction, op, size_average, reduce)
    _float_tensor(input, "input", op)
    _loss_operand(target, "target", input, op)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        tiny = float(dt.finfo(input.dtype).tiny)  # NOTE: 0 * log(tiny) = 0 where target is 0
        loss = target * (clamp(target, min=tiny).log() - input)
    out = _reduced(loss, reduction)
    return out / input.shape[0] if batchmean and input.ndim else out


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross entropy of sigmoid(input) against target in [0, 1], in torch's stable form:
    (1 - t) x + (1 + (pos_weight - 1) t) log(1 + exp(-x)), times weight, reduced.

    Args:
        input, target: logits and targets of one shape.
        weight: optional, broadcast to the input's shape.
        pos_weight: optional weight of the positive term, broadcast (usually (C,)).

    Example:
        >>> x = cltensor.tensor([0.0]); t = cltensor.tensor([1.0])
        >>> round(F.binary_cross_entropy_with_logits(x, t).item(), 4)
        0.6931
    """
    op = "binary_cross_entropy_with_logits"
    reduction = _bce_operands(input, target, dict(weight=weight, pos_weight=pos_weight), op,
                              size_average, reduce, reduction)
    _no_grad_for(op, weight=weight, pos_weight=pos_weight)
    return _PointwiseLoss.apply(input, target, weight, pos_weight, "BCE", reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """The negative log-likelihood of target ~ Poisson(rate): exp(x) - t x with log_input (x the
    log rate), else x - t log(x + eps); full adds Stirling's t log t - t + log(2 pi t) / 2
    where t > 1. Reduced.

    Example:
        >>> F.poisson_nll_loss(cltensor.tensor([0.0]), cltensor.tensor([1.0])).item()
        1.0
    """
    op = "poisson_nll_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + _number(eps, "eps", op)).log()
    if full:
        t = clamp(target, min=1.0)  # NOTE: the term is 0 where target <= 1
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + _where(target > 1, stirling, 0.0)
    return _reduced(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The negative log-likelihood of target ~ N(input, var): (log(max(var, eps)) +
    (input - target)^2 / max(var, eps)) / 2 (+ log(2 pi) / 2 with full), reduced; var has the
    input's shape, or one dim less (or a last dim of 1) for one variance per sample, or is a
    number. The clamp at eps does not stop var's gradient (as torch).

    Example:
        >>> F.gaussian_nll_loss(cltensor.zeros(2), cltensor.zeros(2), cltensor.ones(2)).item()
        0.0
    """
    op = "gaussian_nll_loss"
    reduction = _reduction(reduction, op)
    _same_shapes(op, input=input, target=target)
    var = _gaussian_var(input, var, op)
    if var.numel() and (var.detach() < 0).any().item():
        raise ValueError(f"{op}: var has negative entry/entries")
    var = var + (clamp(var.detach(), min=_number(eps, "eps", op)) - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    return _reduced(loss + 0.5 * math.log(2 * math.pi) if full else loss, reduction)


def _gaussian_var(input, var, op):
    """var as a tensor that broadcasts to input's shape, checked."""
    if isinstance(var, numbers.Real) and not isinstance(var, bool):
        return _full((), float(var), dtype=input.dtype, device=input.device)
    _loss_operand(var, "var", input, op)
    if var.shape == input.shape or (var.shape[:-1] == input.shape[:-1] and var.shape[-1:] == (1,)):
        return var
    if var.shape == input.shape[:-1]:
        return var.unsqueeze(-1)
    raise ValueError(f"{op}: var of shape {var.shape} is of incorrect size for input of shape "
                     f"{input.shape}")
