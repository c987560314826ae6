"""ctc_loss: the connectionist temporal classification loss, with torch's signature and
semantics, its forward (alpha recursion) and backward (beta recursion and gradient) kernels from
cl_kernels/ctc.cl. The lengths are read on the host (they size the launch), the targets stay
on the device.
"""
from __future__ import annotations

import itertools
import numbers

import numpy as np

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.namespace import from_numpy, where
from ...ops.elementwise import common_device
from ...program import ctype_of, get_kernel, launch
from ...tensor import ClTensor
from .utils import _dense, _float_tensor, _reduction, _tensor

__all__ = ["ctc_loss"]

KERNEL_FILE = "ctc.cl"
GROUP = {"cpu": 16, "gpu": 128}  # work-group size ceiling: one group per batch element


class Problem:
    """A checked ctc_loss call in the kernels' terms: lengths as int lists, int64 targets with
    each element's offset and the labels' stride."""

    def __init__(self, log_probs, targets, input_lengths, target_lengths, blank, op="ctc_loss"):
        self.steps, self.batch, self.classes = log_probs.shape
        if log_probs.numel() == 0:
            raise ValueError(f"{op}: log_probs tensor must not be empty, got shape "
                             f"{log_probs.shape}")
        self.ilen = _lengths(input_lengths, "input_lengths", self.batch, self.steps, op)
        self.tlen = _lengths(target_lengths, "target_lengths", self.batch, None, op)
        self.max_s = max(self.tlen, default=0)
        if not isinstance(blank, numbers.Integral) or not 0 <= blank < self.classes:
            raise ValueError(f"{op}: blank must be in label range [0, {self.classes}), "
                             f"got {blank!r}")
        self.blank = int(blank)
        self.targets, self.offsets, self.stride = _targets(targets, self, op)
        self._uploaded = None

    @property
    def ext(self):
        """L: the extended label sequence's length for the longest target."""
        return 2 * self.max_s + 1

    def device_lengths(self, device):
        """The (3, N) int64 rows of offsets, input lengths and target lengths on the device,
        uploaded once for the forward and the backward."""
        if self._uploaded is None:
            rows = np.array([self.offsets, self.ilen, self.tlen], np.int64).reshape(3, -1)
            self._uploaded = from_numpy(rows, device=device)
        return self._uploaded


def _lengths(value, name, batch, most, op):
    """A per-element length argument (ints, or an integer tensor) as a list of ints, checked
    against the batch size and, for the inputs, the time steps."""
    if isinstance(value, ClTensor):
        if value.dtype.kind not in "iu":
            raise ValueError(f"{op}: {name} must be integral, got dtype {value.dtype}")
        value = value.reshape(-1).tolist()
    elif isinstance(value, numbers.Integral):
        value = [value]
    lengths = [int(v) for v in value]
    if len(lengths) != batch:
        raise ValueError(f"{op}: {name} must be of size batch_size ({batch}), got {len(lengths)}")
    for v in lengths:
        if v < 0 or (most is not None and v > most):
            bound = f"at most {most}" if v >= 0 else "at least 0"
            raise ValueError(f"{op}: expected {name} to have value {bound}, but got value {v}")
    return lengths


def _targets(targets, p, op):
    """(int64 targets, each element's first label's offset in their buffer, the labels' stride)
    of padded (N, S) or concatenated targets (1-d, their lengths summing to its size); int64
    targets are read in place, through their strides."""
    _tensor(targets, "targets", op)
    if targets.dtype.kind not in "iu":
        raise ValueError(f"{op}: targets must be an integer tensor, got dtype {targets.dtype}")
    t = targets if targets.dtype == dt.int64 else targets.to(dt.int64)
    if t.ndim == 2:
        if t.shape[0] != p.batch or t.shape[1] < p.max_s:
            raise ValueError(f"{op}: padded targets of shape {t.shape} need ({p.batch}, S) with "
                             f"S at least the longest target length {p.max_s}")
        return t, [t.offset + b * t.strides[0] for b in range(p.batch)], t.strides[1]
    if t.ndim == 1:
        if t.shape[0] != sum(p.tlen):
            raise ValueError(f"{op}: concatenated targets have size {t.shape[0]}, but the "
                             f"target lengths sum to {sum(p.tlen)}")
        starts = [0, *itertools.accumulate(p.tlen)][:p.batch]
        return t, [t.offset + k * t.strides[0] for k in starts], t.strides[0]
    raise ValueError(f"{op}: targets must be 1-d (concatenated) or 2-d (padded), got "
                     f"shape {targets.shape}")


def _kernel(device, name, dtype):
    return get_kernel(device, KERNEL_FILE, name, {"T": ctype_of(dtype)})


def _group(device, width):
    """One work-group per batch element, as wide as its rows need, up to the device's GROUP."""
    most = min(GROUP["cpu" if device.is_cpu else "gpu"], device.max_work_group)
    return min(most, 1 << max(width - 1, 0).bit_length())


def _common_args(p, lp):
    return (np.int64(p.steps), np.int64(p.batch), np.int64(p.classes), np.int64(p.ext),
            np.int64(p.blank), lp.storage.buf, p.targets.storage.buf,
            p.device_lengths(lp.device).storage.buf, np.int64(p.stride))


def ctc_forward(lp, p):
    """(nll (N,), log_alpha (N, T, L)) of float32/float64 log-probabilities lp (not empty:
    Problem refuses that)."""
    lp = _dense(lp)
    nll = ClTensor.empty_on((p.batch,), lp.dtype, lp.device)
    log_alpha = ClTensor.empty_on((p.batch, p.steps, p.ext), lp.dtype, lp.device)
    g = _group(lp.device, p.ext)
    launch(lp.device, _kernel(lp.device, "ctc_alpha", lp.dtype), (p.batch * g,), (g,),
           *_common_args(p, lp), log_alpha.storage.buf, nll.storage.buf)
    return nll, log_alpha


def ctc_backward(gout, lp, p, nll, log_alpha, zero_infinity):
    """The gradient (T, N, C) of the per-element losses' sum weighted by gout (N,) with respect
    to lp; nll and log_alpha from ctc_forward."""
    grad = ClTensor.empty_on(lp.shape, lp.dtype, lp.device)
    lp, gout, nll, log_alpha = (_dense(t) for t in (lp, gout.to(lp.dtype), nll, log_alpha))
    scratch = ClTensor.empty_on((p.batch, 3 * p.ext), lp.dtype, lp.device)
    chain_width = max(p.max_s, 1)
    chains = ClTensor.empty_on((p.batch, chain_width), dt.int64, lp.device)
    g = _group(lp.device, max(p.ext, p.classes))
    launch(lp.device, _kernel(lp.device, "ctc_grad", lp.dtype), (p.batch * g,), (g,),
           *_common_args(p, lp), log_alpha.storage.buf, nll.storage.buf, gout.storage.buf,
           np.int32(bool(zero_infinity)), scratch.storage.buf, chains.storage.buf,
           np.int64(chain_width), grad.storage.buf)
    return grad


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
