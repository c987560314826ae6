"""Losses on the opencl device: mse_loss, smooth_l1_loss, huber_loss, binary_cross_entropy and
their backwards (torch's formulas in cltensor's elementwise ops and reductions), and nll_loss2d
(cross_entropy over images) through the N x C kernels of nn_ops."""
import numpy as np
import torch

from ..ops import pointwise
from ._backend import aten, np_dtype
from .math_ops import finish, meta_result, operand, with_out
from .nn_ops import nll_loss_backward, nll_loss_forward

_aten = torch.ops.aten
_NONE, _MEAN, _SUM = 0, 1, 2


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
