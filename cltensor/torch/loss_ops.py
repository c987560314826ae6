"""Losses on the opencl device: mse_loss, smooth_l1_loss, huber_loss, binary_cross_entropy and
their backwards (torch's formulas in cltensor's elementwise ops and reductions), nll_loss2d
(cross_entropy over images) through the N x C kernels of nn_ops, and multi_margin_loss and
multilabel_margin_loss through cltensor's functional forms (backwards by its autograd)."""
import numpy as np
import torch

import cltensor.nn.functional as F

from .. import creation
from .. import dtypes as dt
from ..ops import pointwise
from ._backend import aten, np_dtype, unwrap
from .math_ops import (check_devices, finish, meta_result, operand, to_meta, with_out,
                       write_into)
from .nn_ops import nll_loss_backward, nll_loss_forward, vjp

_aten = torch.ops.aten
_NONE, _MEAN, _SUM = 0, 1, 2
_NAMES = {_NONE: "none", _MEAN: "mean", _SUM: "sum"}


def _reduce(losses, reduction):
    if reduction == _MEAN:
        return losses.mean()
    return losses.sum() if reduction == _SUM else losses


def _grad_scale(g, x, reduction):
    """The output gradient as it reaches each element: divided by the count for a mean."""
    return g / x.numel() if reduction == _MEAN and x.numel() else g


def _operands(name, out, *tensors):
    dtype = np_dtype(out.dtype, name)
    return [None if t is None else operand(t, dtype) for t in tensors]


def _loss(name, elementwise):
    """The kernel of loss `name`: elementwise(x, target, *params) reduced as asked."""
    op = getattr(_aten, name).default

    def kernel(self, target, reduction=_MEAN, *params):
        out = meta_result(op, (self, target, reduction, *params), {})
        x, t = _operands(name, out, self, target)
        return finish(_reduce(elementwise(x, t, *params), reduction), out)
    aten(name)(kernel)
    with_out(f"{name}.out", kernel)
    return kernel


def _loss_backward(name, grad_of, out_overload="grad_input"):
    """The kernel of `name` (a loss's backward): the output gradient times grad_of(x, target,
    *params)."""
    op = getattr(_aten, name).default

    def kernel(grad_output, self, target, reduction, *params):
        out = meta_result(op, (grad_output, self, target, reduction, *params), {})
        g, x, t = _operands(name, out, grad_output, self, target)
        return finish(_grad_scale(g, x, reduction) * grad_of(x, t, *params), out)
    aten(name)(kernel)
    with_out(f"{name}.{out_overload}", kernel, "grad_input")
    return kernel


def _mse(x, t):
    d = x - t
    return d * d


def _smooth_l1(x, t, beta=1.0):
    z = (x - t).abs()
    if beta == 0:
        return z
    return pointwise.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)


def _smooth_l1_grad(x, t, beta=1.0):
    d = x - t
    if beta == 0:
        return d.sign()
    return pointwise.where(d.abs() < beta, d / beta, d.sign())


def _huber(x, t, delta=1.0):
    z = (x - t).abs()
    return pointwise.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))


def _huber_grad(x, t, delta=1.0):
    return (x - t).clamp(-delta, delta)


_loss("mse_loss", _mse)
_loss_backward("mse_loss_backward", lambda x, t: 2 * (x - t))
_loss("smooth_l1_loss", _smooth_l1)
_loss_backward("smooth_l1_loss_backward", _smooth_l1_grad)
_loss("huber_loss", _huber)
_loss_backward("huber_loss_backward", _huber_grad, "out")


# ---- binary cross entropy --------------------------------------------------------------------
_BCE_EPSILON = float(np.float32(1e-12))  # torch's floor of x * (1 - x) in the gradient: a float
def _check_probabilities(x):
    """torch's check (CPU): every input in [0, 1], NaN refused."""
    if x.numel() and bool((~((x >= 0) & (x <= 1))).any()):
        raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1")


@aten("binary_cross_entropy")
def binary_cross_entropy(self, target, weight=None, reduction=_MEAN):
    out = meta_result(_aten.binary_cross_entropy.default, (self, target, weight, reduction), {})
    x, t, w = _operands("binary_cross_entropy", out, self, target, weight)
    _check_probabilities(x)
    # torch clamps each log at -100, so that an input of exactly 0 or 1 gives a finite loss
    losses = -(t * x.log().clamp(min=-100) + (1 - t) * (1 - x).log().clamp(min=-100))
    return finish(_reduce(losses if w is None else losses * w, reduction), out)


@aten("binary_cross_entropy_backward")
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=_MEAN):
    args = (grad_output, self, target, weight, reduction)
    out = meta_result(_aten.binary_cross_entropy_backward.default, args, {})
    g, x, t, w = _operands("binary_cross_entropy_backward", out, grad_output, self, target, weight)
    grad = _grad_scale(g, x, reduction) * (x - t) / ((1 - x) * x).clamp(min=_BCE_EPSILON)
    return finish(grad if w is None else grad * w, out)


with_out("binary_cross_entropy.out", binary_cross_entropy)
with_out("binary_cross_entropy_backward.grad_input", binary_cross_entropy_backward, "grad_input")


# ---- nll_loss2d: cross_entropy over (N, C, H, W) ------------------------------------------------
def _rows(self, target):
    """(N*H*W x C scores, N*H*W targets) of an image-shaped nll_loss2d."""
    c = self.shape[1]
    return self.permute(0, 2, 3, 1).reshape(-1, c), target.reshape(-1)


@aten("nll_loss2d_forward")
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    out, total = meta_result(_aten.nll_loss2d_forward.default,
                             (self, target, weight, reduction, ignore_index), {})
    loss, total_weight = nll_loss_forward(*_rows(self, target), weight, reduction, ignore_index)
    return loss.reshape(tuple(out.shape)), total_weight


@aten("nll_loss2d_backward")
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index,
                        total_weight):
    meta_result(_aten.nll_loss2d_backward.default,
                (grad_output, self, target, weight, reduction, ignore_index, total_weight), {})
    x, t = _rows(self, target)
    g = grad_output.reshape(-1) if reduction == _NONE else grad_output
    grad = nll_loss_backward(g, x, t, weight, reduction, ignore_index, total_weight)
    n, c, h, w = self.shape
    return grad.reshape(n, h, w, c).permute(0, 3, 1, 2).contiguous()


# ---- multi_margin_loss and multilabel_margin_loss: cltensor's F, backwards by its autograd ------
def _class_scores(self, target, name):
    """(self as a ClTensor, 16-bit widened to float32; target), with torch's error for a class
    outside the input's last dimension."""
    x, t = unwrap(self), unwrap(target)
    if x.dtype in dt.HALF_TYPES:
        x = x.to(dt.float32)
    classes = x.shape[-1] if x.ndim else 1
    if name == "multi_margin_loss" and t.numel() and bool(((t < 0) | (t >= classes)).any()):
        raise RuntimeError("target out of range")
    if name == "multilabel_margin_loss" and t.numel() and bool((t >= classes).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    return x, t


def _like_input(op, args):
    """The Meta result of a margin loss's backward (torch has no Meta kernel for them): the
    input's shape and dtype, after torch's device check."""
    check_devices(args, {}, op)
    return to_meta(args[1])


def _grad_input_form(name, backward):
    """name.grad_input: the backward written into grad_input (resized as out= is)."""
    def kernel(*args, grad_input):
        return write_into(grad_input, backward(*args))
    aten(f"{name}.grad_input")(kernel)


def _multi_margin(x, t, p, margin, w, reduction):
    if x.shape[0:1] == (0,) and x.ndim == 2:  # no samples: torch's sum, and nothing per sample
        return _reduce(x.sum(1), _SUM if reduction == _MEAN else reduction)
    return F.multi_margin_loss(x, t, p, margin, w, reduction=_NAMES[reduction])


@aten("multi_margin_loss")
def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=_MEAN):
    out = meta_result(_aten.multi_margin_loss.default, (self, target, p, margin, weight,
                                                        reduction), {})
    if target.dim() == 0 and reduction == _NONE:  # one sample: torch's CPU kernel gives 0-d
        out = torch.empty((), dtype=out.dtype, device="meta")
    x, t = _class_scores(self, target, "multi_margin_loss")
    w = None if weight is None else unwrap(weight).to(x.dtype)
    return finish(_multi_margin(x, t, p, margin, w, reduction), out)


@aten("multi_margin_loss_backward")
def multi_margin_loss_backward(grad_output, self, target, p, margin, weight=None,
                               reduction=_MEAN):
    args = (grad_output, self, target, p, margin, weight, reduction)
    out = _like_input(_aten.multi_margin_loss_backward.default, args)
    x, t = _class_scores(self, target, "multi_margin_loss")
    w = None if weight is None else unwrap(weight).to(x.dtype)
    if x.numel() == 0:
        return finish(creation.zeros(*x.shape, dtype=x.dtype, device=x.device), out)
    g = unwrap(grad_output).to(x.dtype)
    loss = lambda v: _multi_margin(v, t, p, margin, w, reduction).reshape(g.shape)  # (1,) or ()
    (gx,) = vjp(loss, [x], [True], g)
    return finish(gx, out)


with_out("multi_margin_loss.out", multi_margin_loss)
_grad_input_form("multi_margin_loss_backward", multi_margin_loss_backward)


def _multilabel(x, t, reduction):
    if x.numel() == 0:  # torch's mean over no samples is 0
        return _reduce(x.sum(-1), _SUM if reduction == _MEAN else reduction)
    return F.multilabel_margin_loss(x, t, reduction=_NAMES[reduction])


def _is_target(t, like):
    """torch's is_target: 1 at each class listed before a row's first -1, in like's dtype."""
    rows = t.reshape(-1, t.shape[-1] if t.ndim else 1).numpy()
    listed = np.cumprod(rows >= 0, axis=1).astype(bool)
    marks = np.zeros(rows.shape, like.dtype)
    marks[np.nonzero(listed)[0], rows[listed]] = 1
    return creation.from_numpy(marks.reshape(t.shape), device=like.device)


@aten("multilabel_margin_loss_forward")
def multilabel_margin_loss_forward(self, target, reduction):
    out, is_target = meta_result(_aten.multilabel_margin_loss_forward.default,
                                 (self, target, reduction), {})
    if self.dim() <= 1 and reduction == _NONE:  # one sample: torch's CPU kernel gives 0-d
        out = torch.empty((), dtype=out.dtype, device="meta")
    x, t = _class_scores(self, target, "multilabel_margin_loss")
    return finish(_multilabel(x, t, reduction), out), finish(_is_target(t, x), is_target)


@aten("multilabel_margin_loss_forward.output")
def multilabel_margin_loss_forward_out(self, target, reduction, *, output, is_target):
    meta_result(_aten.multilabel_margin_loss_forward.output, (self, target, reduction),
                {"output": output, "is_target": is_target})
    loss, marks = multilabel_margin_loss_forward(self, target, reduction)
    return write_into(output, loss), write_into(is_target, marks)


@aten("multilabel_margin_loss_backward")
def multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target):
    args = (grad_output, self, target, reduction, is_target)
    out = _like_input(_aten.multilabel_margin_loss_backward.default, args)
    x, t = _class_scores(self, target, "multilabel_margin_loss")
    if x.numel() == 0:
        return finish(creation.zeros(*x.shape, dtype=x.dtype, device=x.device), out)
    g = unwrap(grad_output).to(x.dtype)
    (gx,) = vjp(lambda v: _multilabel(v, t, reduction).reshape(g.shape), [x], [True], g)
    return finish(gx, out)


_grad_input_form("multilabel_margin_loss_backward", multilabel_margin_loss_backward)
