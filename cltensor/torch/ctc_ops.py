"""CTC loss on the opencl device: aten's _ctc_loss (lengths as int lists or tensors) and
_ctc_loss_backward on cltensor's kernels (cltensor/ops/ctc.py). torch's ctc_loss
composes them with zero_infinity's where and the reductions, which run here too. float16 and
bfloat16 log-probabilities are computed in float32 (torch's CPU kernels refuse them)."""
import torch

from .. import dtypes as dt
from ..ops import ctc
from ._backend import NAME, aten, unwrap
from .math_ops import check_devices, finish, runtime_errors


def _lengths(v, name):
    """A lengths argument as cltensor takes it: ints, or a tensor's values (integral only)."""
    if not isinstance(v, torch.Tensor):
        return v
    if v.is_floating_point() or v.is_complex():
        raise RuntimeError(f"{name} must be integral")
    return unwrap(v).tolist() if v.device.type == NAME else v.tolist()


def _problem(op, log_probs, targets, input_lengths, target_lengths, blank, *rest):
    """(log_probs as a float32/float64 ClTensor, ctc.Problem), after torch's checks."""
    check_devices((log_probs, targets, *rest), {}, op)
    if log_probs.dim() != 3:
        raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.dim()}-dimensional "
                           f"tensor for argument #1 'log_probs'")
    lp = unwrap(log_probs)
    lp = lp.to(dt.compute_dtype(lp.dtype))
    with runtime_errors():
        p = ctc.Problem(lp, unwrap(targets), _lengths(input_lengths, "input_lengths"),
                        _lengths(target_lengths, "target_lengths"), blank, "ctc_loss")
    return lp, p


def _as(res, like):
    """res as an opencl tensor of like's dtype."""
    return finish(res, torch.empty(res.shape, dtype=like.dtype, device="meta"))


@aten("_ctc_loss", "_ctc_loss.Tensor")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    lp, p = _problem(torch.ops.aten._ctc_loss.default, log_probs, targets, input_lengths,
                     target_lengths, blank)
    nll, log_alpha = ctc.ctc_forward(lp, p)
    return _as(nll, log_probs), _as(log_alpha, log_probs)


@aten("_ctc_loss_backward", "_ctc_loss_backward.Tensor")
def ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths,
                      neg_log_likelihood, log_alpha, blank, zero_infinity=False):
    lp, p = _problem(torch.ops.aten._ctc_loss_backward.default, log_probs, targets,
                     input_lengths, target_lengths, blank, grad, neg_log_likelihood, log_alpha)
    nll, alpha = (unwrap(t).to(lp.dtype) for t in (neg_log_likelihood, log_alpha))
    if log_probs.dtype not in (torch.float32, torch.float64):  # 16-bit: alpha again in float32
        nll, alpha = ctc.ctc_forward(lp, p)
    if tuple(alpha.shape) != (p.batch, p.steps, p.ext) or tuple(nll.shape) != (p.batch,):
        raise RuntimeError(f"_ctc_loss_backward: log_alpha of shape {tuple(alpha.shape)} and "
                           f"neg_log_likelihood of shape {tuple(nll.shape)} do not match the "
                           f"problem ({p.batch}, {p.steps}, {p.ext})")
    gx = ctc.ctc_backward(unwrap(grad).reshape(-1), lp, p, nll, alpha, zero_infinity)
    return _as(gx, log_probs)
