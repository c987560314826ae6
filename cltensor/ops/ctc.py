"""CTC loss's kernels (cl_kernels/ctc.cl): a checked problem (lengths as int lists, int64
targets with each element's offset and the labels' stride), the forward's alpha recursion and
the backward's beta recursion and gradient, one work-group per batch element. The lengths are
read on the host (they size the launch), the targets stay on the device. nn.functional.ctc_loss
and the torch device's _ctc_loss build on these.
"""
import itertools
import numbers

import numpy as np

from .. import dtypes as dt
from ..creation import from_numpy
from ..program import ctype_of, get_kernel, launch
from ..tensor import ClTensor

__all__ = ["Problem", "ctc_backward", "ctc_forward"]

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
    if not isinstance(targets, ClTensor):
        raise TypeError(f"{op}: targets must be a tensor, got {type(targets).__name__}")
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


def _dense(t):
    """t itself when contiguous from offset 0 (the kernels index it as a plain array), else a
    copy."""
    return t if t.is_contiguous() and t.offset == 0 else t.clone()


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


