"""torch.nn.functional for cltensor: layer ops and losses with torch's names, signatures and
semantics, each a differentiable Function over forward and backward kernels (cltensor/ops:
activation, pool, softmax, norm, loss).

Every op supports double backward. A backward pass runs its kernels when grad mode is off (the
usual first-order backward); under create_graph=True it computes the same gradients as tensor
ops and Function.apply calls instead (torch's derivative formulas: softmax's y * (g - sum(g y)),
max pooling's scatter of g at the argmaxes, batch norm's with the statistics recomputed from x),
so that they record a graph of their own; a linear op's backward (average pooling, resampling)
is recorded as _Adjoint, whose gradient is the op itself. Ops composed of tensor ops (linear,
embedding, cat, flatten, probability-target cross_entropy) need nothing more.

Example:
    import cltensor.nn.functional as F
    logits = F.linear(F.relu(F.max_pool2d(x, 2)).flatten(1), w, b)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
"""
import functools
import math
import numbers
import warnings

import numpy as np

import cltensor

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.engine import sum_to_shape
from ...autograd.functions import _where
from ...conv import conv2d, conv_transpose2d  # re-exported: torch.nn.functional's
from ...ops import activation as act
from ...ops import loss as lo
from ...ops import norm, pool, resample
from ...ops import softmax as sm
from ...ops.elementwise import common_device
from ...ops.indexing import one_hot  # noqa: F401  (torch.nn.functional.one_hot)
from ...tensor import ClTensor, _norm_dim

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "alpha_dropout",
    "avg_pool1d",
    "avg_pool2d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cat",
    "celu",
    "celu_",
    "channel_shuffle",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "elu_",
    "embedding",
    "embedding_bag",
    "feature_alpha_dropout",
    "flatten",
    "fold",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "group_norm",
    "gumbel_softmax",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hardtanh_",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "leaky_relu_",
    "linear",
    "local_response_norm",
    "log_softmax",
    "logsigmoid",
    "lp_pool1d",
    "lp_pool2d",
    "margin_ranking_loss",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "mish",
    "mse_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "normalize",
    "pad",
    "pairwise_distance",
    "pdist",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "rms_norm",
    "rrelu",
    "rrelu_",
    "scaled_dot_product_attention",
    "selu",
    "selu_",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "threshold_",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]

REDUCTIONS = ("none", "mean", "sum")


# ---- helpers ------------------------------------------------------------------------------------

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


def _per_channel(t, name, x, size, op):
    """An optional 1-d per-channel (or per-class) tensor of x's dtype and device, checked."""
    if t is None:
        return None
    _tensor(t, name, op)
    if t.shape != (size,):
        raise ValueError(f"{op}: {name} must have shape ({size},), got {t.shape}")
    if t.dtype != x.dtype:
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


# ---- linear -------------------------------------------------------------------------------------

def linear(input, weight, bias=None):
    """y = input @ weight.T + bias over the last dim (one GEMM with the bias fused, via addmm).

    Args:
        input: (*, in_features) floating tensor.
        weight: (out_features, in_features).
        bias: optional (out_features,).

    Example:
        >>> y = F.linear(cltensor.ones(2, 3), cltensor.ones(4, 3), cltensor.zeros(4))
        >>> y.shape
        (2, 4)
    """
    _float_tensor(input, "input", "linear")
    _float_tensor(weight, "weight", "linear")
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d (out_features, in_features), got shape "
                         f"{weight.shape}")
    if input.ndim == 0:
        raise ValueError("linear: input must have at least 1 dim (the features), got a 0-d tensor")
    if input.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input of shape {input.shape} has {input.shape[-1]} features "
                         f"but weight of shape {weight.shape} expects {weight.shape[1]}")
    if bias is not None and _tensor(bias, "bias", "linear").shape != (weight.shape[0],):
        raise ValueError(f"linear: bias must have shape ({weight.shape[0]},), got {bias.shape}")
    x2 = input if input.ndim == 2 else input.reshape(-1, weight.shape[1])
    y = x2 @ weight.T if bias is None else cltensor.addmm(bias, x2, weight.T)
    return y if input.ndim == 2 else y.reshape(input.shape[:-1] + (weight.shape[0],))


# ---- activations --------------------------------------------------------------------------------

def _pointwise(name, forward, backward, saves_output, grad):
    """A Function computing forward(x, *params) whose input gradient is backward(g, saved,
    *params) (a kernel), or grad(g, saved, *params) (tensor ops, recorded) under
    create_graph=True; saved is the output (saves_output) or the input."""
    def fwd(ctx, x, *params):
        y = forward(x, *params)
        ctx.save_for_backward(y if saves_output else x)
        ctx.params = params
        return y

    def bwd(ctx, g):
        (saved,) = ctx.saved_tensors
        gx = (grad if is_grad_enabled() else backward)(g, saved, *ctx.params)
        return (gx,) + (None,) * len(ctx.params)

    return type(name, (Function,), {"forward": staticmethod(fwd), "backward": staticmethod(bwd)})


# The activations' input gradients as tensor ops, for create_graph=True: each is the kernel's
# OP_<name>_backward (cl_kernels/elementwise.cl) of g and the saved input x (or output y).
SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805
GELU_K, GELU_C = 0.7978845608028654, 0.044715  # sqrt(2 / pi), the cubic's coefficient
SQRT_HALF, INV_SQRT_2PI = 0.7071067811865476, 0.3989422804014327


def _elu_grad(g, x, alpha):
    return _where(x > 0, g, g * alpha * x.exp())


def _gelu_grad(g, x, tanh_form):
    if tanh_form:
        t = (GELU_K * (x + GELU_C * x * x * x)).tanh()
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * x * x))
    return g * (0.5 * (1 + (x * SQRT_HALF).erf()) + x * (-0.5 * x * x).exp() * INV_SQRT_2PI)


def _silu_grad(g, x):
    s = x.sigmoid()
    return g * s * (1 + x * (1 - s))


def _mish_grad(g, x):
    t = _Softplus.apply(x, 1.0, 20.0).tanh()
    return g * (t + x * x.sigmoid() * (1 - t * t))


def _softsign_grad(g, x):
    d = 1 + x.abs()
    return g / (d * d)


def _tanhshrink_grad(g, x):
    t = x.tanh()
    return g * t * t


GRADS = {
    "relu": lambda g, y: _where(y > 0, g, 0.0),
    "leaky_relu": lambda g, x, slope: _where(x > 0, g, g * slope),
    "elu": _elu_grad,
    "hardtanh": lambda g, x, lo, hi: _where((x <= lo) | (x >= hi), 0.0, g),
    "sigmoid": lambda g, y: g * y * (1 - y),
    "tanh": lambda g, y: g * (1 - y * y),
    "gelu": _gelu_grad,
    "silu": _silu_grad,
    "mish": _mish_grad,
    "softplus": lambda g, x, beta, th: _where(x * beta > th, g, g * (x * beta).sigmoid()),
    "hardswish": lambda g, x: _where(x < -3, 0.0, _where(x <= 3, g * (x / 3 + 0.5), g)),
    "hardsigmoid": lambda g, x: _where((x > -3) & (x < 3), g / 6, 0.0),
    "selu": lambda g, x: _elu_grad(g, x, SELU_ALPHA) * SELU_SCALE,
    "celu": lambda g, x, alpha: _where(x > 0, g, g * (x / alpha).exp()),
    "logsigmoid": lambda g, x: g * (-x).sigmoid(),
    "softsign": _softsign_grad,
    "tanhshrink": _tanhshrink_grad,
    "shrink": lambda g, x, lambd: _where((x >= -lambd) & (x <= lambd), 0.0, g),
    "threshold": lambda g, x, th, value: _where(x <= th, 0.0, g),
}


def _activation_fn(name, saves_output=False, grad=None):
    """The Function of activation `name` (act.<name> and act.<name>_backward)."""
    cls = "_" + name.title().replace("_", "")
    return _pointwise(cls, getattr(act, name), getattr(act, f"{grad or name}_backward"),
                      saves_output, GRADS[grad or name])


_Relu = _activation_fn("relu", saves_output=True)
_LeakyRelu = _activation_fn("leaky_relu")
_Elu = _activation_fn("elu")
_Hardtanh = _activation_fn("hardtanh")
_Sigmoid = _activation_fn("sigmoid", saves_output=True)
_Tanh = _activation_fn("tanh", saves_output=True)
_Gelu = _activation_fn("gelu")
_Silu = _activation_fn("silu")
_Mish = _activation_fn("mish")
_Softplus = _activation_fn("softplus")
_Hardswish = _activation_fn("hardswish")
_Hardsigmoid = _activation_fn("hardsigmoid")
_Selu = _activation_fn("selu")
_Celu = _activation_fn("celu")
_Logsigmoid = _activation_fn("logsigmoid")
_Softsign = _activation_fn("softsign")
_Tanhshrink = _activation_fn("tanhshrink")
_Softshrink = _activation_fn("softshrink", grad="shrink")
_Hardshrink = _activation_fn("hardshrink", grad="shrink")
_Threshold = _activation_fn("threshold")


def _activation(fn, raw, x, inplace, *params):
    """fn.apply(x, *params); in place: the result written into x (x takes its history)."""
    if not inplace:
        return fn.apply(x, *params)
    if _records(x):
        # NOTE: the Function works on a copy, so the tensors it saves survive the overwrite
        return x.copy_(fn.apply(x.clone(), *params))
    raw(x, *params, out=x)
    x.storage.version += 1
    return x


def relu(input, inplace=False):
    """max(x, 0) elementwise.

    Example:
        >>> F.relu(cltensor.tensor([-1.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    _tensor(input, "input", "relu")
    if not dt.is_floating(input.dtype):
        return input.relu_() if inplace else input.relu()
    return _activation(_Relu, act.relu, input, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x.

    Example:
        >>> F.leaky_relu(cltensor.tensor([-1.0, 2.0]), 0.1).tolist()
        [-0.1, 2.0]
    """
    _float_tensor(input, "input", "leaky_relu")
    slope = _number(negative_slope, "negative_slope", "leaky_relu")
    return _activation(_LeakyRelu, act.leaky_relu, input, inplace, slope)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1).

    Example:
        >>> F.elu(cltensor.tensor([0.0, 2.0])).tolist()
        [0.0, 2.0]
    """
    _float_tensor(input, "input", "elu")
    return _activation(_Elu, act.elu, input, inplace, _number(alpha, "alpha", "elu"))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient passes strictly inside the interval.

    Example:
        >>> F.hardtanh(cltensor.tensor([-3.0, 0.5])).tolist()
        [-1.0, 0.5]
    """
    _float_tensor(input, "input", "hardtanh")
    lo, hi = _number(min_val, "min_val", "hardtanh"), _number(max_val, "max_val", "hardtanh")
    if lo > hi:
        raise ValueError(f"hardtanh: min_val {lo} must not exceed max_val {hi}")
    return _activation(_Hardtanh, act.hardtanh, input, inplace, lo, hi)


def sigmoid(input):
    """1 / (1 + exp(-x)) elementwise.

    Example:
        >>> F.sigmoid(cltensor.tensor([0.0])).tolist()
        [0.5]
    """
    return _Sigmoid.apply(_float_tensor(input, "input", "sigmoid"))


def tanh(input):
    """tanh(x) elementwise.

    Example:
        >>> F.tanh(cltensor.tensor([0.0])).tolist()
        [0.0]
    """
    return _Tanh.apply(_float_tensor(input, "input", "tanh"))


def relu6(input, inplace=False):
    """min(max(x, 0), 6) elementwise (hardtanh between 0 and 6).

    Example:
        >>> F.relu6(cltensor.tensor([-1.0, 7.0])).tolist()
        [0.0, 6.0]
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def gelu(input, approximate="none"):
    """x * Phi(x), Phi the standard normal CDF; approximate="tanh": 0.5 * x * (1 + tanh(
    sqrt(2 / pi) * (x + 0.044715 * x^3))).

    Example:
        >>> F.gelu(cltensor.tensor([0.0])).tolist()
        [0.0]
    """
    _float_tensor(input, "input", "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _Gelu.apply(input, 1.0 if approximate == "tanh" else 0.0)


def silu(input, inplace=False):
    """x * sigmoid(x) elementwise (swish).

    Example:
        >>> F.silu(cltensor.tensor([0.0])).tolist()
        [0.0]
    """
    _float_tensor(input, "input", "silu")
    return _activation(_Silu, act.silu, input, inplace)


def mish(input, inplace=False):
    """x * tanh(softplus(x)) elementwise.

    Example:
        >>> F.mish(cltensor.tensor([0.0])).tolist()
        [0.0]
    """
    _float_tensor(input, "input", "mish")
    return _activation(_Mish, act.mish, input, inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.

    Example:
        >>> round(F.softplus(cltensor.tensor([0.0])).item(), 4)
        0.6931
    """
    _float_tensor(input, "input", "softplus")
    beta = _number(beta, "beta", "softplus")
    if beta == 0:
        raise ValueError("softplus: beta must be nonzero")
    return _Softplus.apply(input, beta, _number(threshold, "threshold", "softplus"))


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6 elementwise.

    Example:
        >>> F.hardswish(cltensor.tensor([-4.0, 4.0])).tolist()
        [-0.0, 4.0]
    """
    _float_tensor(input, "input", "hardswish")
    return _activation(_Hardswish, act.hardswish, input, inplace)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6 elementwise.

    Example:
        >>> F.hardsigmoid(cltensor.tensor([0.0])).tolist()
        [0.5]
    """
    _float_tensor(input, "input", "hardsigmoid")
    return _activation(_Hardsigmoid, act.hardsigmoid, input, inplace)


def selu(input, inplace=False):
    """scale * (x where x > 0, else alpha * (exp(x) - 1)), with alpha = 1.6732632423543772 and
    scale = 1.0507009873554805 (self-normalizing networks).

    Example:
        >>> F.selu(cltensor.tensor([0.0])).tolist()
        [0.0]
    """
    _float_tensor(input, "input", "selu")
    return _activation(_Selu, act.selu, input, inplace)


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x / alpha) - 1); alpha nonzero.

    Example:
        >>> F.celu(cltensor.tensor([0.0, 2.0]), alpha=0.5).tolist()
        [0.0, 2.0]
    """
    _float_tensor(input, "input", "celu")
    alpha = _number(alpha, "alpha", "celu")
    if alpha == 0:
        raise ValueError("celu: alpha must be nonzero")
    return _activation(_Celu, act.celu, input, inplace, alpha)


def logsigmoid(input):
    """log(1 / (1 + exp(-x))) elementwise, computed without overflow.

    Example:
        >>> round(F.logsigmoid(cltensor.tensor([0.0])).item(), 4)
        -0.6931
    """
    return _Logsigmoid.apply(_float_tensor(input, "input", "logsigmoid"))


def softsign(input):
    """x / (1 + |x|) elementwise.

    Example:
        >>> F.softsign(cltensor.tensor([1.0])).tolist()
        [0.5]
    """
    return _Softsign.apply(_float_tensor(input, "input", "softsign"))


def tanhshrink(input):
    """x - tanh(x) elementwise.

    Example:
        >>> F.tanhshrink(cltensor.tensor([0.0])).tolist()
        [0.0]
    """
    return _Tanhshrink.apply(_float_tensor(input, "input", "tanhshrink"))


def softshrink(input, lambd=0.5):
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0; lambd at least 0.

    Example:
        >>> F.softshrink(cltensor.tensor([-1.0, 0.2, 2.0])).tolist()
        [-0.5, 0.0, 1.5]
    """
    _float_tensor(input, "input", "softshrink")
    lambd = _number(lambd, "lambd", "softshrink")
    if not lambd >= 0:
        raise ValueError(f"softshrink: lambd must be at least 0, got {lambd}")
    return _Softshrink.apply(input, lambd)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0.

    Example:
        >>> F.hardshrink(cltensor.tensor([-1.0, 0.2, 2.0])).tolist()
        [-1.0, 0.0, 2.0]
    """
    _float_tensor(input, "input", "hardshrink")
    return _Hardshrink.apply(input, _number(lambd, "lambd", "hardshrink"))


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value (NaN stays NaN).

    Example:
        >>> F.threshold(cltensor.tensor([0.1, 2.0]), 0.5, 9.0).tolist()
        [9.0, 2.0]
    """
    _float_tensor(input, "input", "threshold")
    th, value = _number(threshold, "threshold", "threshold"), _number(value, "value", "threshold")
    return _activation(_Threshold, act.threshold, input, inplace, th, value)


def glu(input, dim=-1):
    """The gated linear unit: a * sigmoid(b), a and b the halves of input along dim (of even
    size).

    Example:
        >>> F.glu(cltensor.tensor([[1.0, 0.0]])).tolist()
        [[0.5]]
    """
    _float_tensor(input, "input", "glu")
    if input.ndim == 0:
        raise ValueError("glu: input must have at least 1 dim, got a 0-d tensor")
    d = _norm_dim(dim, input.ndim, "glu")
    if input.shape[d] % 2:
        raise ValueError(f"glu: the halved dim {dim} must have an even size, got "
                         f"{input.shape[d]} (input shape {input.shape})")
    half = input.shape[d] // 2
    return input.narrow(d, 0, half) * sigmoid(input.narrow(d, half, half))


# ---- softmax ------------------------------------------------------------------------------------

class _Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim, log):
        y = sm.softmax(x, dim, log)
        ctx.save_for_backward(y)
        ctx.dim, ctx.log = dim, log
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        if not is_grad_enabled():
            return sm.softmax_backward(g, y, ctx.dim, ctx.log), None, None
        if ctx.log:
            return g - y.exp() * g.sum(ctx.dim, keepdim=True), None, None
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None, None


def _softmax_dim(ndim, op):
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to "
                  f"include dim=X as an argument.", stacklevel=4)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax(input, dim, dtype, log, op):
    _tensor(input, "input", op)
    if dtype is not None:
        input = input.to(dtype)
    _float_tensor(input, "input", op)
    if dim is None:
        dim = _softmax_dim(input.ndim, op)
    d = _norm_dim(dim, input.ndim, op)
    if input.ndim == 0:
        return _Softmax.apply(input.reshape(1), 0, log).reshape(())
    return _Softmax.apply(input, d, log)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim, numerically stable (one fused kernel).

    Args:
        input: floating tensor.
        dim: the dim to normalize over (any, negative counts from the end).
        dtype: cast the input to this dtype first.

    Example:
        >>> F.softmax(cltensor.tensor([[1.0, 1.0]]), dim=1).tolist()
        [[0.5, 0.5]]
    """
    return _softmax(input, dim, dtype, False, "softmax")


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along dim, numerically stable (one fused kernel).

    Example:
        >>> F.log_softmax(cltensor.tensor([0.0, 0.0]), dim=0).exp().tolist()
        [0.5, 0.5]
    """
    return _softmax(input, dim, dtype, True, "log_softmax")


# ---- pooling ------------------------------------------------------------------------------------

class _MaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, fields, out_hw, return_indices):
        need = ctx.needs_input_grad[0]
        y, idx = pool.max_pool2d(x, fields, out_hw, need or return_indices)
        ctx.save_for_backward(idx if need else None)
        ctx.x_shape, ctx.layout, ctx.fields = x.shape, pool.layout_of(x), fields
        return (y, idx.to(dt.int64)) if return_indices else y

    @staticmethod
    def backward(ctx, g, _g_indices=None):
        (idx,) = ctx.saved_tensors
        if is_grad_enabled():
            return _scattered(g, idx, ctx.x_shape), None, None, None
        gx = pool.max_pool2d_backward(g, idx, ctx.x_shape, ctx.layout, ctx.fields)
        return gx, None, None, None


class _AdaptiveMaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, out_hw, return_indices):
        need = ctx.needs_input_grad[0]
        y, idx = pool.adaptive_max_pool2d(x, out_hw, need or return_indices)
        ctx.save_for_backward(idx if need else None)
        ctx.x_shape, ctx.layout = x.shape, pool.layout_of(x)
        return (y, idx.to(dt.int64)) if return_indices else y

    @staticmethod
    def backward(ctx, g, _g_indices=None):
        (idx,) = ctx.saved_tensors
        if is_grad_enabled():
            return _scattered(g, idx, ctx.x_shape), None, None
        return pool.adaptive_max_pool2d_backward(g, idx, ctx.x_shape, ctx.layout), None, None


def _scattered(g, idx, x_shape):
    """Max pooling's input gradient as tensor ops: g added into zeros of x_shape at the argmaxes
    idx (h * W + w in each plane); its own gradient gathers at idx."""
    n, c, h, w = x_shape
    gx = cltensor.zeros((n, c, h * w), dtype=g.dtype, device=g.device)
    gx = gx.scatter_add(2, idx.to(dt.int64).reshape(n, c, -1), g.reshape(n, c, -1))
    return gx.reshape(x_shape)


class _AvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, fields, out_hw, divisor, include_pad):
        ctx.x_shape, ctx.layout = x.shape, pool.layout_of(x)
        ctx.args = (fields, out_hw, divisor, include_pad)
        return pool.avg_pool2d(x, fields, out_hw, divisor, include_pad)

    @staticmethod
    def backward(ctx, g):
        fields, _, divisor, include_pad = ctx.args
        gx = _linear_backward(g, pool.avg_pool2d_backward,
                              (ctx.x_shape, ctx.layout, fields, divisor, include_pad),
                              _AvgPool2d, ctx.args)
        return gx, None, None, None, None


class _AdaptiveAvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, out_hw):
        ctx.x_shape, ctx.layout, ctx.out_hw = x.shape, pool.layout_of(x), out_hw
        return pool.adaptive_avg_pool2d(x, out_hw)

    @staticmethod
    def backward(ctx, g):
        gx = _linear_backward(g, pool.adaptive_avg_pool2d_backward, (ctx.x_shape, ctx.layout),
                              _AdaptiveAvgPool2d, (ctx.out_hw,))
        return gx, None


def _batched(input, op):
    """input as 4-d NCHW (a 3-d CHW input gains a batch dim) and whether to drop it after."""
    pool.check_input(input, op)
    return (input, False) if input.ndim == 4 else (input.unsqueeze(0), True)


def _unbatch(out, squeeze):
    if not squeeze:
        return out
    if isinstance(out, tuple):
        return tuple(o.squeeze(0) for o in out)
    return out.squeeze(0)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling over an (N, C, H, W) or (C, H, W) input.

    Args:
        kernel_size, stride (default kernel_size), padding, dilation: ints or pairs; padding
            (implicit -inf) at most half the kernel.
        ceil_mode: round the output size up (the last window must start inside the input).
        return_indices: also return the argmax of each window as h * W + w (int64).

    A window wholly in the padding (possible with dilation) gives -inf and torch's index there,
    and sends the input no gradient (torch's CPU backward sends it to that index).

    Example:
        >>> F.max_pool2d(cltensor.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _max_pool(op, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, squeeze = _batched(input, op)
    fields, out_hw = pool.window(op, x, kernel_size, stride, padding, dilation, ceil_mode)
    return _unbatch(_MaxPool2d.apply(x, fields, out_hw, bool(return_indices)), squeeze)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling over an (N, C, H, W) or (C, H, W) input.

    Args:
        kernel_size, stride (default kernel_size), padding: ints or pairs; padding (zeros) at
            most half the kernel.
        ceil_mode: round the output size up.
        count_include_pad: divide by the window's size including padding.
        divisor_override: divide by this instead.

    Example:
        >>> F.avg_pool2d(cltensor.ones(1, 1, 4, 4), 2).shape
        (1, 1, 2, 2)
    """
    return _avg_pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _avg_pool(op, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    x, squeeze = _batched(input, op)
    fields, out_hw = pool.window(op, x, kernel_size, stride, padding, 1, ceil_mode)
    divisor = 0
    if divisor_override is not None:
        if not isinstance(divisor_override, numbers.Integral) or divisor_override == 0:
            raise ValueError(f"{op}: divisor_override must be a non-zero int, got "
                             f"{divisor_override!r}")
        divisor = int(divisor_override)
    out = _AvgPool2d.apply(x, fields, out_hw, divisor, int(bool(count_include_pad)))
    return _unbatch(out, squeeze)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed (OH, OW): output (oh, ow) averages rows
    [floor(oh * H / OH), ceil((oh + 1) * H / OH)) and the same for columns.

    Example:
        >>> F.adaptive_avg_pool2d(cltensor.ones(2, 3, 7, 7), 1).shape
        (2, 3, 1, 1)
    """
    return _adaptive_pool("adaptive_avg_pool2d", input, output_size)


def _adaptive_pool(op, input, output_size, return_indices=None):
    """Adaptive average pooling (return_indices None) or max pooling."""
    x, squeeze = _batched(input, op)
    out_hw = pool.adaptive_size(output_size, x, op)
    if return_indices is None:
        return _unbatch(_AdaptiveAvgPool2d.apply(x, out_hw), squeeze)
    return _unbatch(_AdaptiveMaxPool2d.apply(x, out_hw, bool(return_indices)), squeeze)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to a fixed (OH, OW) over adaptive_avg_pool2d's windows; return_indices:
    also the argmax of each window as h * W + w (int64).

    Example:
        >>> F.adaptive_max_pool2d(cltensor.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
        [[[[15.0]]]]
    """
    return _adaptive_pool("adaptive_max_pool2d", input, output_size, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool2d returning (output, indices) (torch's alias)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool2d returning (output, indices) (torch's alias)."""
    return adaptive_max_pool2d(input, output_size, return_indices)


# ---- 1-d layers: the 2-d ones over a unit height ------------------------------------------------

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


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution (cross-correlation) over an (N, C, L) or (C, L) input: conv2d over a
    unit height.

    Args:
        weight: (Co, C / groups, K).
        stride, dilation: ints; padding: an int, 'valid' or 'same' (stride 1).

    Example:
        >>> F.conv1d(cltensor.randn(2, 3, 10), cltensor.randn(4, 3, 3), padding=1).shape
        (2, 4, 10)
    """
    op = "conv1d"
    x = _unit_height(input, op)
    w = _weight1d(weight, op)
    pad = padding if isinstance(padding, str) else _row(padding, "padding", op, 0)
    return _drop_height(conv2d(x, w, bias, _row(stride, "stride", op, 1), pad,
                               _row(dilation, "dilation", op, 1), groups))


def _weight1d(weight, op):
    """A 3-d (channels, channels, K) weight as (.., .., 1, K)."""
    if _float_tensor(weight, "weight", op).ndim != 3:
        raise ValueError(f"{op}: weight must be 3-d (channels, channels / groups, kernel_size), "
                         f"got shape {weight.shape}")
    return weight.unsqueeze(-2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution over an (N, Cin, L) or (Cin, L) input (conv_transpose2d over
    a unit height); weight (Cin, Cout / groups, K).

    Example:
        >>> F.conv_transpose1d(cltensor.randn(2, 4, 5), cltensor.randn(4, 3, 4), stride=2).shape
        (2, 3, 12)
    """
    op = "conv_transpose1d"
    x = _unit_height(input, op)
    w = _weight1d(weight, op)
    return _drop_height(conv_transpose2d(
        x, w, bias, _row(stride, "stride", op, 1), _row(padding, "padding", op, 0),
        _row(output_padding, "output_padding", op, 0), groups,
        _row(dilation, "dilation", op, 1)))


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over an (N, C, L) or (C, L) input; return_indices: also each window's
    argmax (int64 positions in L).

    Example:
        >>> F.max_pool1d(cltensor.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
        [[3.0, 2.0]]
    """
    op = "max_pool1d"
    return _drop_height(_max_pool(
        op, _unit_height(input, op), _row(kernel_size, "kernel_size", op, 1),
        _row(stride, "stride", op, 1), _row(padding, "padding", op, 0),
        _row(dilation, "dilation", op, 1), ceil_mode, return_indices))


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """max_pool1d returning (output, indices) (torch's alias)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over an (N, C, L) or (C, L) input.

    Example:
        >>> F.avg_pool1d(cltensor.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
        [[2.0, 1.0]]
    """
    op = "avg_pool1d"
    return _drop_height(_avg_pool(
        op, _unit_height(input, op), _row(kernel_size, "kernel_size", op, 1),
        _row(stride, "stride", op, 1), _row(padding, "padding", op, 0), ceil_mode,
        count_include_pad, None))


def _adaptive_pool1d(op, input, output_size, return_indices=None):
    size = output_size[0] if isinstance(output_size, (tuple, list)) and \
        len(output_size) == 1 else output_size
    if isinstance(size, (tuple, list)):
        raise ValueError(f"{op}: output_size must be an int or a 1-tuple, got {output_size!r}")
    return _drop_height(_adaptive_pool(op, _unit_height(input, op), (1, size), return_indices))


def adaptive_avg_pool1d(input, output_size):
    """Average pooling of an (N, C, L) or (C, L) input to a fixed length output_size.

    Example:
        >>> F.adaptive_avg_pool1d(cltensor.ones(2, 3, 7), 3).shape
        (2, 3, 3)
    """
    return _adaptive_pool1d("adaptive_avg_pool1d", input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling of an (N, C, L) or (C, L) input to a fixed length output_size.

    Example:
        >>> F.adaptive_max_pool1d(cltensor.arange(4.0).reshape(1, 4), 1).tolist()
        [[3.0]]
    """
    return _adaptive_pool1d("adaptive_max_pool1d", input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """adaptive_max_pool1d returning (output, indices) (torch's alias)."""
    return adaptive_max_pool1d(input, output_size, return_indices)


def _lp_pool(op, input, norm_type, kernel_size, stride, ceil_mode, avg, size):
    """torch's power-average pooling: (size * avg(x^p)) ^ (1 / p), avg the average pooling."""
    p = _number(norm_type, "norm_type", op)
    if p == 0:
        raise ValueError(f"{op}: norm_type must be nonzero")
    out = avg(_float_tensor(input, "input", op).pow(p), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs())).mul(size).pow(1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over an (N, C, L) or (C, L) input: (sum of x^p over each window)
    ^ (1 / p); p = inf is max pooling, p = 1 sum pooling.

    Example:
        >>> F.lp_pool1d(cltensor.tensor([[3.0, 4.0]]), 2, 2).tolist()
        [[5.0]]
    """
    k = _single(kernel_size, "kernel_size", "lp_pool1d")
    return _lp_pool("lp_pool1d", input, norm_type, k, stride, ceil_mode, avg_pool1d, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """Power-average pooling over an (N, C, H, W) or (C, H, W) input, as lp_pool1d.

    Example:
        >>> F.lp_pool2d(cltensor.ones(1, 1, 4, 4), 2, 2).tolist()
        [[[[2.0, 2.0], [2.0, 2.0]]]]
    """
    kh, kw = pool.pair(kernel_size, "kernel_size", "lp_pool2d")
    return _lp_pool("lp_pool2d", input, norm_type, (kh, kw), stride, ceil_mode, avg_pool2d,
                    kh * kw)


def _tuple(value, n, name, op):
    return pool.pair(value, name, op) if n == 2 else (_single(value, name, op),)


def _max_unpool(op, input, indices, kernel_size, stride, padding, output_size, dims):
    """Max pooling's indices undone: zeros of the output size with input's values scattered at
    the indices within each (N, C) plane (overlapping windows repeat an index, with one value)."""
    _float_tensor(input, "input", op)
    _tensor(indices, "indices", op)
    if indices.dtype != dt.int64 or indices.shape != input.shape:
        raise ValueError(f"{op}: expected int64 indices of the input's shape {input.shape}, got "
                         f"{indices.dtype} of shape {indices.shape}")
    if input.ndim not in (dims + 1, dims + 2):
        raise ValueError(f"{op}: expected a {dims + 1}-d or {dims + 2}-d input, got shape "
                         f"{input.shape}")
    k = _tuple(kernel_size, dims, "kernel_size", op)
    s = k if stride is None else _tuple(stride, dims, "stride", op)
    p = _tuple(padding, dims, "padding", op)
    size = _unpool_size(op, input.shape[-dims:], k, s, p, output_size)
    x, idx = (input, indices) if input.ndim == dims + 2 else \
        (input.unsqueeze(0), indices.unsqueeze(0))
    n, c = x.shape[:2]
    flat = cltensor.zeros((n, c, math.prod(size)), dtype=x.dtype, device=x.device)
    out = flat.scatter(2, idx.reshape(n, c, -1), x.reshape(n, c, -1))
    return out.reshape(input.shape[:-dims] + size)


def _unpool_size(op, in_size, k, s, p, output_size):
    """torch's _unpool_output_size: (L - 1) * s - 2 p + k, or output_size within a stride."""
    default = tuple((n - 1) * st - 2 * pd + kk for n, st, pd, kk in zip(in_size, s, p, k))
    if output_size is None:
        return default
    size = tuple(output_size)[-len(default):]
    if len(size) != len(default) or not all(
            d - st < n < d + st for n, d, st in zip(size, default, s)):
        raise ValueError(f"{op}: invalid output_size {tuple(output_size)} (the default is "
                         f"{default}; each size must be within a stride of it)")
    return tuple(int(n) for n in size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: an (N, C, L_out) or (C, L_out) tensor of zeros holding
    input's values at the positions in indices (max_pool1d's, return_indices=True).

    Example:
        >>> y, i = F.max_pool1d(cltensor.tensor([[1.0, 3.0, 2.0, 0.0]]), 2, return_indices=True)
        >>> F.max_unpool1d(y, i, 2).tolist()
        [[0.0, 3.0, 2.0, 0.0]]
    """
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding, output_size,
                       1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: zeros of the output size holding input's values at the
    positions in indices (max_pool2d's, return_indices=True, h * W + w in each plane).

    Example:
        >>> y, i = F.max_pool2d(cltensor.randn(1, 1, 4, 4), 2, return_indices=True)
        >>> F.max_unpool2d(y, i, 2).shape
        (1, 1, 4, 4)
    """
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding, output_size,
                       2)


# ---- unfold / fold ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _block_index(size, k, d, p, s):
    """For an image of spatial `size` padded by p: the position (h * Wp + w in the padded plane)
    of each block element, as a (kh * kw * Lh * Lw,) array ordered (ki, kj, lh, lw), and
    (Lh, Lw), the number of blocks along each dim."""
    (hp, wp) = (size[0] + 2 * p[0], size[1] + 2 * p[1])
    blocks = tuple((n - dd * (kk - 1) - 1) // ss + 1 for n, kk, dd, ss in zip((hp, wp), k, d, s))
    rows = np.arange(k[0])[:, None] * d[0] + np.arange(blocks[0])[None, :] * s[0]
    cols = np.arange(k[1])[:, None] * d[1] + np.arange(blocks[1])[None, :] * s[1]
    index = rows[:, None, :, None] * wp + cols[None, :, None, :]
    return index.reshape(-1).astype(np.int64), blocks


def _block_args(op, size, kernel_size, dilation, padding, stride):
    """(the block index tensor's numpy array, (Lh, Lw), k, p), the arguments checked."""
    k, d, p, s = (pool.pair(v, name, op) for v, name in (
        (kernel_size, "kernel_size"), (dilation, "dilation"), (padding, "padding"),
        (stride, "stride")))
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise ValueError(f"{op}: kernel_size {k}, dilation {d} and stride {s} must be positive "
                         f"and padding {p} non-negative")
    index, blocks = _block_index(tuple(size), k, d, p, s)
    if min(blocks) < 1:
        raise ValueError(f"{op}: given input with spatial size {tuple(size)}, kernel_size={k}, "
                         f"dilation={d}, padding={p}, calculated shape of the array of sliding "
                         f"blocks as {blocks}, but its components must be at least one")
    return index, blocks, k, p


def _index_tensor(index, n, c, device):
    return cltensor.from_numpy(index, device=device).expand(n, c, index.shape[0])


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: the sliding blocks of an (N, C, H, W) or (C, H, W) input as the columns of an
    (N, C * kh * kw, L) tensor, rows ordered (c, ki, kj), L = Lh * Lw blocks in row-major order.

    Example:
        >>> F.unfold(cltensor.randn(2, 3, 5, 5), 3, padding=1).shape
        (2, 27, 25)
    """
    op = "unfold"
    _float_tensor(input, "input", op)
    if input.ndim not in (3, 4):
        raise ValueError(f"{op}: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape "
                         f"{input.shape}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    index, blocks, k, p = _block_args(op, x.shape[2:], kernel_size, dilation, padding, stride)
    n, c = x.shape[:2]
    if any(p):
        x = cltensor.pad(x, (p[1], p[1], p[0], p[0]))
    cols = x.reshape(n, c, -1).gather(2, _index_tensor(index, n, c, x.device))
    out = cols.reshape(n, c * k[0] * k[1], blocks[0] * blocks[1])
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: the columns of an (N, C * kh * kw, L) or (C * kh * kw, L)
    input summed into an (N, C, H, W) (or (C, H, W)) image, (H, W) = output_size.

    Example:
        >>> F.fold(cltensor.ones(1, 4, 9), (4, 4), 2, stride=1).shape
        (1, 1, 4, 4)
    """
    op = "fold"
    _float_tensor(input, "input", op)
    if input.ndim not in (2, 3):
        raise ValueError(f"{op}: expected a 2-d (C * kh * kw, L) or 3-d (N, C * kh * kw, L) "
                         f"input, got shape {input.shape}")
    size = pool.pair(output_size, "output_size", op)
    index, blocks, k, p = _block_args(op, size, kernel_size, dilation, padding, stride)
    x = input if input.ndim == 3 else input.unsqueeze(0)
    n, ck, length = x.shape
    if ck % (k[0] * k[1]) or length != blocks[0] * blocks[1]:
        raise ValueError(f"{op}: expected an input of shape (N, C * {k[0] * k[1]}, "
                         f"{blocks[0] * blocks[1]}) for kernel_size={k} and the "
                         f"{blocks[0]}x{blocks[1]} sliding blocks, got {input.shape}")
    c = ck // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    plane = cltensor.zeros((n, c, hp * wp), dtype=x.dtype, device=x.device)
    out = plane.scatter_add(2, _index_tensor(index, n, c, x.device), x.reshape(n, c, -1))
    out = out.reshape(n, c, hp, wp).narrow(2, p[0], size[0]).narrow(3, p[1], size[1])
    return out if input.ndim == 3 else out.squeeze(0)


# ---- interpolation ------------------------------------------------------------------------------

class _Upsample(Function):
    @staticmethod
    def forward(ctx, x, out_hw, scale_factor, mode, align_corners):
        ctx.x_shape, ctx.layout = x.shape, pool.layout_of(x)
        ctx.args = (out_hw, scale_factor, mode, align_corners)
        return resample.upsample(x, out_hw, scale_factor, mode, align_corners)

    @staticmethod
    def backward(ctx, g):
        gx = _linear_backward(g, resample.upsample_backward,
                              (ctx.x_shape, ctx.layout, *ctx.args[1:]), _Upsample, ctx.args)
        return gx, None, None, None, None


INTERPOLATE_MODES = {3: ("nearest", "nearest-exact", "linear", "area"),
                     4: ("nearest", "nearest-exact", "bilinear", "bicubic", "area")}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resample the spatial dims of an (N, C, L) or (N, C, H, W) input to `size`, or to
    floor(size * scale_factor), as torch's interpolate.

    Args:
        mode: "nearest" (torch's legacy rounding), "nearest-exact", "linear" (3-d),
            "bilinear" or "bicubic" (4-d; Keys' cubic with a = -0.75, edges replicated),
            "area" (adaptive average pooling).
        align_corners: interpolating modes only: map the corner pixels' centres onto each
            other (default False: the pixels' areas).
        recompute_scale_factor: with scale_factor, compute the sampling step from the sizes
            rather than from the scale_factor given.

    Example:
        >>> F.interpolate(cltensor.randn(1, 3, 8, 8), scale_factor=2, mode="bilinear").shape
        (1, 3, 16, 16)
    """
    op = "interpolate"
    _float_tensor(input, "input", op)
    if input.ndim not in INTERPOLATE_MODES:
        raise ValueError(f"{op}: expected a 3-d (N, C, L) or 4-d (N, C, H, W) input, got shape "
                         f"{input.shape}")
    if mode not in INTERPOLATE_MODES[input.ndim]:
        raise ValueError(f"{op}: mode {mode!r} is not supported for {input.ndim}-d input "
                         f"(supported: {', '.join(INTERPOLATE_MODES[input.ndim])})")
    linear = mode in ("linear", "bilinear")
    if align_corners is not None and not (linear or mode == "bicubic"):
        raise ValueError(f"{op}: align_corners can only be set with the interpolating modes "
                         f"linear, bilinear and bicubic, not {mode!r}")
    if antialias:
        raise ValueError(f"{op}: antialias is not supported")
    dims = input.ndim - 2
    out_size, factors = _interpolate_size(input, size, scale_factor, dims, op)
    if recompute_scale_factor or size is not None:
        factors = None
    x = input if dims == 2 else input.unsqueeze(2)
    if dims == 1:
        out_size, factors = (1,) + out_size, None if factors is None else (None,) + factors
    if mode == "area":
        y = adaptive_avg_pool2d(x, out_size)
    else:
        y = _Upsample.apply(x, out_size, factors, "bilinear" if linear else mode,
                            bool(align_corners))
    return y if dims == 2 else y.squeeze(2)


def _interpolate_size(x, size, scale_factor, dims, op):
    """(output spatial size, scale factors or None), checked."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor")
    if size is not None:
        values = tuple(size) if isinstance(size, (tuple, list)) else (size,) * dims
        if len(values) != dims or not all(isinstance(v, numbers.Integral) and
                                          not isinstance(v, bool) and v > 0 for v in values):
            raise ValueError(f"{op}: size must be a positive int or {dims} of them for a "
                             f"{x.ndim}-d input, got {size!r}")
        return tuple(int(v) for v in values), None
    values = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
        (scale_factor,) * dims
    if len(values) != dims or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                      and v > 0 for v in values):
        raise ValueError(f"{op}: scale_factor must be a positive number or {dims} of them for a "
                         f"{x.ndim}-d input, got {scale_factor!r}")
    out = tuple(math.floor(n * float(f)) for n, f in zip(x.shape[2:], values))
    if min(out) <= 0:
        raise ValueError(f"{op}: scale_factor {scale_factor!r} gives an empty output {out} "
                         f"for input size {x.shape[2:]}")
    return out, tuple(float(f) for f in values)


# ---- normalization ------------------------------------------------------------------------------

class _LocalResponseNorm(Function):
    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        need = ctx.needs_input_grad[0]
        y, scale = norm.lrn(x, size, alpha, beta, k, need)
        if need:
            ctx.save_for_backward(x, y, scale)
        ctx.params, ctx.k = (size, alpha, beta), k
        return y

    @staticmethod
    def backward(ctx, g):
        x, y, scale = ctx.saved_tensors
        if is_grad_enabled():
            return _lrn_grad(g, x, *ctx.params, ctx.k), None, None, None, None
        return norm.lrn_backward(g, x, y, scale, *ctx.params), None, None, None, None


def _lrn_grad(g, x, size, alpha, beta, k):
    """Local response norm's input gradient as tensor ops: with s = k + alpha / size * W(x^2)
    (y = x s^-beta), g s^-beta - 2 alpha beta / size * x * W'(g x s^(-beta - 1)), W the sum
    over each channel's window and W' its transpose."""
    c = alpha / size
    s = k + c * _channel_window(x * x, size, False)
    back = _channel_window(g * x * s ** (-beta - 1), size, True)
    return g * s ** -beta - (2 * c * beta) * x * back


def _channel_window(t, size, transposed):
    """Sums of an (N, C, *) t over channels c - size // 2 .. c + (size - 1) // 2 (zeros beyond
    the ends); transposed: over c - (size - 1) // 2 .. c + size // 2."""
    before, after = size // 2, (size - 1) // 2
    if transposed:
        before, after = after, before
    padded = cltensor.pad(t, (0, 0) * (t.ndim - 2) + (before, after))
    out = padded.narrow(1, 0, t.shape[1])
    for j in range(1, size):
        out = out + padded.narrow(1, j, t.shape[1])
    return out


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Normalization across channels (AlexNet's LRN), as torch:
    y = x / (k + alpha / size * sum of x^2 over the size channels around c) ** beta.

    Args:
        input: (N, C, *) floating tensor, at least 3-d.
        size: channels in the window (c - size // 2 .. c + (size - 1) // 2, zero padded).

    Example:
        >>> F.local_response_norm(cltensor.ones(1, 4, 2, 2), size=3).shape
        (1, 4, 2, 2)
    """
    _float_tensor(input, "input", "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensionality input "
                         f"(got {input.ndim} dimensions)")
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 1:
        raise ValueError(f"local_response_norm: size must be a positive int, got {size!r}")
    params = [_number(v, n, "local_response_norm") for v, n in
              ((alpha, "alpha"), (beta, "beta"), (k, "k"))]
    return _LocalResponseNorm.apply(input, int(size), *params)


class _BatchNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
        if training:
            rm, rv = _dense(running_mean), _dense(running_var)
            y, mean, invstd = norm.batch_norm_train(x, _dense(weight), _dense(bias), rm, rv,
                                                    momentum, eps)
            for user, tmp in ((running_mean, rm), (running_var, rv)):
                if user is not tmp:
                    user.copy_(tmp)
        else:
            y, invstd = norm.batch_norm_eval(x, _dense(weight), _dense(bias),
                                             _dense(running_mean), _dense(running_var), eps)
            mean = running_mean.clone()
        if any(ctx.needs_input_grad[:3]):
            ctx.save_for_backward(x, weight, mean, invstd)
        ctx.training, ctx.eps = training, eps
        return y

    @staticmethod
    def backward(ctx, g):
        x, weight, mean, invstd = ctx.saved_tensors
        if is_grad_enabled():
            gx, gw, gb = _batch_norm_grads(g, x, weight, mean, invstd, ctx.training, ctx.eps)
        else:
            gx, gw, gb = norm.batch_norm_backward(g, x, _dense(weight), mean, invstd,
                                                  ctx.training)
        need = ctx.needs_input_grad
        return (gx if need[0] else None, gw if need[1] else None, gb if need[2] else None,
                None, None, None, None, None)


def _batch_norm_grads(g, x, weight, mean, invstd, training, eps):
    """Batch norm's (gx, gw, gb) as tensor ops; in training the batch's statistics are taken
    again from x (the saved ones are constants), so that their own gradients count."""
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        centered = x - x.mean(dims, keepdim=True)
        invstd = ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
    else:
        centered, invstd = x - mean.reshape(shape), invstd.reshape(shape)
    xhat = centered * invstd
    gxhat = g if weight is None else g * weight.reshape(shape)
    if training:
        gxhat = gxhat - gxhat.mean(dims, keepdim=True) - \
            xhat * (gxhat * xhat).mean(dims, keepdim=True)
    return gxhat * invstd, (g * xhat).sum(dims), g.sum(dims)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalization over dim 1 of an (N, C, *) input, as torch.

    training: normalize with the batch's mean and biased variance per channel, and update the
    running stats in place (when given): running = (1 - momentum) * running + momentum * stat,
    with the unbiased variance. Otherwise normalize with the running stats.

    Example:
        >>> x = cltensor.randn(8, 3, 4, 4)
        >>> rm, rv = cltensor.zeros(3), cltensor.ones(3)
        >>> y = F.batch_norm(x, rm, rv, training=True)   # rm, rv updated
    """
    op = "batch_norm"
    C = _channels(input, op)
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{op}: give both running_mean and running_var, or neither")
    tensors = [_per_channel(t, name, input, C, op) for t, name in
               ((running_mean, "running_mean"), (running_var, "running_var"),
                (weight, "weight"), (bias, "bias"))]
    _no_grad_for(op, running_mean=running_mean, running_var=running_var)
    if not training and running_mean is None:
        raise ValueError(f"{op}: running_mean and running_var must be defined in evaluation mode")
    if training and input.numel() // max(C, 1) <= 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got "
                         f"input size {input.shape}")
    momentum = _number(momentum, "momentum", op)
    eps = _number(eps, "eps", op)
    rm, rv, w, b = tensors
    return _BatchNorm.apply(input, w, b, rm, rv, bool(training), momentum, eps)


def _channels(x, op):
    """C of a floating (N, C, *) input x, checked."""
    _float_tensor(x, "input", op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an (N, C, *) input of at least 2 dims, got shape "
                         f"{x.shape}")
    return x.shape[1]


def _normalized(x, rows, eps):
    """x with each of its `rows` (row-major, equal length) normalized to zero mean and unit
    (biased) variance: batch norm's training statistics over x seen as (1, rows, length)."""
    if x.numel() == 0:
        return x * 1.0
    flat = x.reshape(1, rows, x.numel() // rows)
    return _BatchNorm.apply(flat, None, None, None, None, True, 0.0, eps).reshape(x.shape)


def _affine(y, weight, bias, shape):
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last dims (normalized_shape) of each sample: (x - mean) /
    sqrt(var + eps), the biased variance, then * weight + bias (of normalized_shape) if given.

    Example:
        >>> y = F.layer_norm(cltensor.randn(4, 10, 16), (16,))
    """
    op = "layer_norm"
    shape = _normalized_shape(input, normalized_shape, dict(weight=weight, bias=bias), op)
    rows = math.prod(input.shape[:input.ndim - len(shape)])
    return _affine(_normalized(input, rows, _number(eps, "eps", op)), weight, bias, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize an (N, C, *) input over each sample's groups of C / num_groups channels (and
    all of their positions), then * weight + bias (per channel) if given.

    Example:
        >>> y = F.group_norm(cltensor.randn(2, 6, 5, 5), 3)
    """
    op = "group_norm"
    C = _channels(input, op)
    if not isinstance(num_groups, numbers.Integral) or isinstance(num_groups, bool) or \
            num_groups <= 0 or C % num_groups:
        raise ValueError(f"{op}: expected the number of channels in input to be divisible by "
                         f"num_groups, but got input of shape {input.shape} and num_groups="
                         f"{num_groups!r}")
    weight, bias = (_per_channel(t, name, input, C, op)
                    for t, name in ((weight, "weight"), (bias, "bias")))
    y = _normalized(input, input.shape[0] * int(num_groups), _number(eps, "eps", op))
    return _affine(y, weight, bias, (C,) + (1,) * (input.ndim - 2))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) of an (N, C, *) input over its positions, then
    * weight + bias per channel if given, as torch.

    use_input_stats: the instance's own statistics, and the running stats (when given) updated
    in place by momentum with their batch means (the variance unbiased); otherwise normalize
    with the running stats.

    Example:
        >>> y = F.instance_norm(cltensor.randn(2, 3, 8))
    """
    op = "instance_norm"
    C = _channels(input, op)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if input.ndim < 3 or math.prod(input.shape[2:]) <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element when training, got input "
                         f"size {input.shape}")
    weight, bias = (_per_channel(t, name, input, C, op)
                    for t, name in ((weight, "weight"), (bias, "bias")))
    if running_mean is not None or running_var is not None:
        _update_running_stats(input, running_mean, running_var, _number(momentum, "momentum", op),
                              op)
    y = _normalized(input, input.shape[0] * C, _number(eps, "eps", op))
    return _affine(y, weight, bias, (C,) + (1,) * (input.ndim - 2))


def _update_running_stats(x, running_mean, running_var, momentum, op):
    """running = (1 - momentum) running + momentum * (the batch mean of each instance's mean,
    unbiased variance), per channel."""
    C = x.shape[1]
    if running_mean is None or running_var is None:
        raise ValueError(f"{op}: give both running_mean and running_var, or neither")
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var")):
        _per_channel(t, name, x, C, op)
    with cltensor.no_grad():
        flat = x.detach().reshape(x.shape[0], C, -1)
        for run, stat in ((running_mean, flat.mean(2)), (running_var, flat.var(2))):
            run.copy_(run * (1.0 - momentum) + stat.mean(0) * momentum)


def _normalized_shape(input, normalized_shape, weights, op):
    """normalized_shape as a tuple, checked against input and the (name -> tensor or None)
    elementwise weights."""
    _float_tensor(input, "input", op)
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else \
        tuple(normalized_shape)
    if not shape or not all(isinstance(n, numbers.Integral) and n > 0 for n in shape):
        raise ValueError(f"{op}: normalized_shape must be a positive int or a non-empty sequence "
                         f"of them, got {normalized_shape!r}")
    if input.shape[input.ndim - len(shape):] != shape or input.ndim < len(shape):
        raise ValueError(f"{op}: given normalized_shape={shape}, expected input with shape "
                         f"(*, {', '.join(map(str, shape))}), got input of shape {input.shape}")
    for name, t in weights.items():
        if _loss_operand(t, name, input, op) is not None and t.shape != shape:
            raise ValueError(f"{op}: {name} must have shape {shape}, got {t.shape}")
    return shape


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last dims (normalized_shape), then * weight if given;
    eps defaults to the dtype's machine epsilon (torch's).

    Example:
        >>> F.rms_norm(cltensor.tensor([[3.0, 4.0]]), (2,)).tolist()   # rms 3.536
    """
    op = "rms_norm"
    shape = _normalized_shape(input, normalized_shape, dict(weight=weight), op)
    eps = float(np.finfo(input.dtype).eps) if eps is None else _number(eps, "eps", op)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return y if weight is None else y * weight


# ---- distances ----------------------------------------------------------------------------------

def _vector_norm(x, p, dim, keepdim=False):
    """The p-norm of x along dim as differentiable ops (p a number, inf and 0 included)."""
    a = x.abs()
    if p == math.inf:
        return a.amax(dim, keepdim=keepdim)
    if p == 0:
        return (a != 0).to(x.dtype).sum(dim, keepdim=keepdim)
    if p == 1:
        return a.sum(dim, keepdim=keepdim)
    if p == 2:
        return (x * x).sum(dim, keepdim=keepdim).sqrt()
    return a.pow(p).sum(dim, keepdim=keepdim).pow(1.0 / p)


def _norm_order(p, op):
    p = _number(p, "p", op)
    if p < 0:
        raise ValueError(f"{op}: p must be non-negative, got {p}")
    return p


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p, eps) along dim.

    Example:
        >>> F.normalize(cltensor.tensor([[3.0, 4.0]])).tolist()
        [[0.6, 0.8]]
    """
    op = "normalize"
    _float_tensor(input, "input", op)
    d = _norm_dim(dim, max(input.ndim, 1), op)
    norm_ = _vector_norm(input, _norm_order(p, op), d, keepdim=True)
    y = input / cltensor.clamp(norm_, min=_number(eps, "eps", op))
    return y if out is None else out.copy_(y)


def _operand_pair(x1, x2, op):
    """x1 and x2 (floating, of one dtype and device) expanded to their broadcast shape."""
    _float_tensor(x1, "x1", op)
    _loss_operand(x2, "x2", x1, op)
    try:
        shape = cltensor.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ValueError(f"{op}: x1 of shape {x1.shape} and x2 of shape {x2.shape} do not "
                         f"broadcast") from None
    return x1.expand(shape), x2.expand(shape)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (max(||x1||, eps) max(||x2||, eps)) along dim (the operands broadcast).

    Example:
        >>> F.cosine_similarity(cltensor.tensor([[1.0, 0.0]]), cltensor.tensor([[1.0, 1.0]]))
    """
    op = "cosine_similarity"
    x1, x2 = _operand_pair(x1, x2, op)
    d = _norm_dim(dim, max(x1.ndim, 1), op)
    eps = _number(eps, "eps", op)
    n1, n2 = (cltensor.clamp(_vector_norm(x, 2, d, keepdim=True), min=eps) for x in (x1, x2))
    return ((x1 / n1) * (x2 / n2)).sum(d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (the operands broadcast).

    Example:
        >>> F.pairwise_distance(cltensor.tensor([[3.0, 4.0]]), cltensor.zeros(1, 2), eps=0.0)
    """
    op = "pairwise_distance"
    x1, x2 = _operand_pair(x1, x2, op)
    diff = x1 - x2 + _number(eps, "eps", op)
    if not diff.ndim:
        diff = diff.reshape(1)
    return _vector_norm(diff, _norm_order(p, op), -1, keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of an (N, M) input, pairs i < j in row-major
    order: N (N - 1) / 2 of them.

    Example:
        >>> F.pdist(cltensor.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
        [5.0, 1.0, 4.242640687119285]
    """
    op = "pdist"
    if _float_tensor(input, "input", op).ndim != 2:
        raise ValueError(f"{op}: expected a 2-d (N, M) input, got shape {input.shape}")
    i, j = np.triu_indices(input.shape[0], 1)
    rows = [cltensor.from_numpy(a.astype(np.int64), device=input.device) for a in (i, j)]
    diff = input.index_select(0, rows[0]) - input.index_select(0, rows[1])
    return _vector_norm(diff, _norm_order(p, op), 1)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) along dim.

    Example:
        >>> F.softmin(cltensor.tensor([0.0, 0.0]), dim=0).tolist()
        [0.5, 0.5]
    """
    _tensor(input, "input", "softmin")
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = _softmax_dim(input.ndim, "softmin")
    return _softmax(-_float_tensor(input, "input", "softmin"), dim, None, False, "softmin")


# ---- dropout, embedding, shapes -----------------------------------------------------------------

class _Dropout(Function):
    @staticmethod
    def forward(ctx, x, mask, scale):
        ctx.mask, ctx.scale = mask, scale
        return act.dropout(x, mask, scale)

    @staticmethod
    def backward(ctx, g):
        if is_grad_enabled():
            return _where(ctx.mask, g * ctx.scale, 0.0), None, None
        return act.dropout_backward(g, ctx.mask, ctx.scale), None, None


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training only).

    The mask is drawn from cltensor.random's global generator: after cltensor.manual_seed(s)
    the same calls give the same masks, on every device.

    Example:
        >>> cltensor.manual_seed(0)
        >>> y = F.dropout(cltensor.ones(1000), p=0.2)   # about 200 zeros, the rest 1.25
    """
    return _dropout(input, p, training, inplace, input.shape, "dropout")


def _feature_dropout(input, p, training, inplace, spatial, op):
    """Dropout of whole feature maps: one draw per (N, C) (or C, unbatched) over `spatial`
    trailing dims."""
    _float_tensor(input, "input", op)
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{op}: expected a {spatial + 1}-d (C, ...) or {spatial + 2}-d "
                         f"(N, C, ...) input, got shape {input.shape}")
    return _dropout(input, p, training, inplace, input.shape[:-spatial] + (1,) * spatial, op)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, L) or (C, L) input with probability p, scaling the
    rest by 1 / (1 - p) (training only)."""
    return _feature_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) or (C, H, W) input with probability p, scaling
    the rest by 1 / (1 - p) (training only).

    Example:
        >>> y = F.dropout2d(cltensor.ones(8, 16, 4, 4), 0.25)   # each 4x4 map all 0 or 4/3
    """
    return _feature_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability p,
    scaling the rest by 1 / (1 - p) (training only)."""
    return _feature_dropout(input, p, training, inplace, 3, "dropout3d")


def _dropout(input, p, training, inplace, mask_shape, op):
    """input times a Bernoulli(1 - p) mask of mask_shape (broadcast), scaled by 1 / (1 - p)."""
    _float_tensor(input, "input", op)
    p = _number(p, "p", op)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    mask = ClTensor.empty_on(mask_shape, dt.bool_, input.device).bernoulli_(1.0 - p)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    if not inplace:
        return _Dropout.apply(input, mask, scale)
    if _records(input):
        return input.copy_(_Dropout.apply(input, mask, scale))
    act.dropout(input, mask, scale, out=input)
    input.storage.version += 1
    return input


class _Embedding(Function):
    @staticmethod
    def forward(ctx, weight, index, padding_idx, by_freq):
        ctx.index, ctx.padding_idx, ctx.by_freq = index, padding_idx, by_freq
        ctx.shape = weight.shape
        rows = weight.index_select(0, index.reshape(-1))
        return rows.reshape(index.shape + (weight.shape[1],))

    @staticmethod
    def backward(ctx, g):
        n, width = ctx.shape
        g2 = g.reshape(-1, width)
        flat = ctx.index.reshape(-1).to(dt.int64)
        gw = cltensor.zeros(ctx.shape, dtype=g.dtype, device=g.device).scatter_add(
            0, flat.reshape(-1, 1).expand(g2.shape), g2)
        if ctx.by_freq:  # each row's gradient over the number of times the input picked it
            gw = gw / cltensor.bincount(flat, minlength=n).to(g.dtype).clamp(min=1).reshape(-1, 1)
        if ctx.padding_idx is not None:
            gw[ctx.padding_idx] = 0.0
        return gw, None, None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight picked by the integer tensor input: output shape input.shape + (dim,).

    Args:
        input: int32/int64 indices in [0, num_embeddings).
        weight: (num_embeddings, embedding_dim).
        padding_idx: a row whose gradient stays zero (negative counts from the end).
        max_norm: if given, the rows that input picks and whose norm_type-norm exceeds it are
            first scaled in place, in weight itself, to that norm (as torch).
        scale_grad_by_freq: each row's gradient divided by the number of times input picks it.
        sparse: sparse gradients are not supported (NotImplementedError).

    Example:
        >>> w = cltensor.arange(6.0).reshape(3, 2)
        >>> F.embedding(cltensor.tensor([2, 0]), w).tolist()
        [[4.0, 5.0], [0.0, 1.0]]
    """
    op = "embedding"
    padding_idx = _table_inputs(input, weight, padding_idx, op, [input, weight])
    _table_options(max_norm, sparse, op)
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    return _Embedding.apply(weight, input, padding_idx, bool(scale_grad_by_freq))


def _table_options(max_norm, sparse, op):
    """Checks embedding's and embedding_bag's max_norm and sparse."""
    if sparse:
        raise NotImplementedError(f"{op}: sparse gradients are not supported (sparse=True)")
    if max_norm is not None and (isinstance(max_norm, bool) or
                                 not isinstance(max_norm, numbers.Real) or not max_norm >= 0):
        raise ValueError(f"{op}: max_norm must be a non-negative number or None, got "
                         f"{max_norm!r}")


def _renorm_rows(weight, input, max_norm, norm_type):
    """In place, without autograd: the rows of weight that input picks and whose norm_type-norm
    exceeds max_norm, scaled by max_norm / (norm + 1e-7) (torch's embedding_renorm_)."""
    flat = input.reshape(-1).to(dt.int64)
    with cltensor.no_grad():
        rows = weight.index_select(0, flat)
        norms = cltensor.linalg.vector_norm(rows, norm_type, dim=1, keepdim=True)
        scale = cltensor.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        # NOTE: a row picked twice is written twice with the same values
        weight.index_copy_(0, flat, rows * scale)


def _table_inputs(input, weight, padding_idx, op, on_device):
    """Checks embedding's and embedding_bag's indices, weight, the devices of the tensors
    `on_device` and padding_idx; returns padding_idx as a row (or None)."""
    _tensor(input, "input", op)
    _float_tensor(weight, "weight", op)
    if input.dtype not in (dt.int32, dt.int64):
        raise TypeError(f"{op}: indices must be int32 or int64, got {input.dtype}")
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight must be 2-d (num_embeddings, embedding_dim), got shape "
                         f"{weight.shape}")
    common_device(on_device, op)
    if padding_idx is None:
        return None
    n = weight.shape[0]
    if not isinstance(padding_idx, numbers.Integral) or not -n <= padding_idx < n:
        raise ValueError(f"{op}: padding_idx must be within num_embeddings ({n}), got "
                         f"{padding_idx!r}")
    return int(padding_idx) % n


EMBEDDING_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """The sums, means or maxima of bags of weight's rows, without the (bags, length, dim)
    intermediate of embedding().

    Args:
        input: int32/int64 indices: (B, L) for B bags of L, or 1-d with `offsets`.
        weight: (num_embeddings, embedding_dim), floating point.
        offsets: with a 1-d input, the start of each bag in it (starting at 0, non-decreasing);
            with include_last_offset, one more: the input's length, where the last bag ends.
        mode: "sum", "mean" or "max"; an empty bag gives zeros.
        per_sample_weights: (mode "sum") a weight per index, input's shape and weight's dtype;
            differentiable.
        padding_idx: entries with this index belong to no bag (nor to mean's counts).
        max_norm, norm_type, scale_grad_by_freq, sparse: as embedding()'s (scale_grad_by_freq
            not in mode "max", as in torch).

    Shape:
        output (B, embedding_dim)

    In mode "max" ties between different rows share the gradient (torch gives it to one).

    Example:
        >>> w = cltensor.arange(6.0).reshape(3, 2)
        >>> F.embedding_bag(cltensor.tensor([0, 2, 1]), w, cltensor.tensor([0, 2]),
        ...                 mode="sum").tolist()
        [[4.0, 6.0], [2.0, 3.0]]
    """
    op = "embedding_bag"
    if mode not in EMBEDDING_BAG_MODES:
        raise ValueError(f"{op}: mode must be one of {EMBEDDING_BAG_MODES}, got {mode!r}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError(f"{op}: mode 'max' cannot scale gradients by frequency "
                         "(scale_grad_by_freq), as in torch")
    _table_options(max_norm, sparse, op)
    padding_idx = _table_inputs(input, weight, padding_idx, op, [
        t for t in (input, weight, offsets, per_sample_weights) if t is not None])
    if per_sample_weights is not None:
        _sample_weights(per_sample_weights, input, weight, mode, op)
    idx = input.reshape(-1)
    bags, bag = _bags(input, offsets, include_last_offset, op)
    if max_norm is not None:
        _renorm_rows(weight, idx, max_norm, norm_type)
    rows = embedding(idx, weight, scale_grad_by_freq=scale_grad_by_freq)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if padding_idx is not None:
        # NOTE: padding entries go to a spare bag (row `bags`) that is dropped at the end
        bag = cltensor.where(idx == padding_idx, bags, bag)
    out = cltensor.zeros((bags + 1, weight.shape[1]), dtype=weight.dtype, device=weight.device)
    if mode == "max":
        out = out.scatter_reduce(0, bag.reshape(-1, 1).expand(rows.shape), rows, "amax",
                                 include_self=False)
    else:
        out = out.index_add(0, bag, rows)
    if mode == "mean":
        counts = cltensor.bincount(bag, minlength=bags + 1).to(weight.dtype).clamp(min=1)
        out = out / counts.reshape(-1, 1)
    return out[:bags]


def _bags(input, offsets, include_last_offset, op):
    """(number of bags, the int64 bag of each of input's entries, flattened)."""
    n = input.numel()
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None for a 2-d input (each row is a bag)")
        length = max(input.shape[1], 1)
        return input.shape[0], cltensor.arange(n, device=input.device) // length
    if input.ndim != 1:
        raise ValueError(f"{op}: input must be 1-d (with offsets) or 2-d (bags, length), got "
                         f"shape {input.shape}")
    if offsets is None:
        raise ValueError(f"{op}: a 1-d input needs offsets (the start of each bag)")
    _tensor(offsets, "offsets", op)
    if offsets.ndim != 1 or offsets.dtype not in (dt.int32, dt.int64):
        raise ValueError(f"{op}: offsets must be a 1-d int32/int64 tensor, got shape "
                         f"{offsets.shape} of {offsets.dtype}")
    # NOTE: the offsets are checked on the host (one small read): a bad one would put entries
    # in the wrong bags without any error
    starts = offsets.numpy().astype(np.int64)
    if include_last_offset:
        if starts.size == 0 or starts[-1] != n:
            raise ValueError(f"{op}: with include_last_offset the last offset must be the "
                             f"input's length {n}, got {starts[-1:].tolist()}")
        starts = starts[:-1]
    if starts.size and starts[0] != 0:
        raise ValueError(f"{op}: offsets[0] must be 0 (the first bag starts the input), got "
                         f"{starts[0]}")
    if (np.diff(starts) < 0).any() or (starts.size and starts[-1] > n):
        raise ValueError(f"{op}: offsets must be non-decreasing and at most the input's length "
                         f"{n}, got {offsets.tolist()}")
    if starts.size == 0:
        if n:
            raise ValueError(f"{op}: offsets hold no bag for an input of {n} indices")
        return 0, cltensor.zeros(0, dtype=dt.int64, device=input.device)
    found = offsets[:starts.size].to(dt.int64)
    bag = cltensor.searchsorted(found, cltensor.arange(n, device=input.device), right=True) - 1
    return starts.size, bag


def _sample_weights(psw, input, weight, mode, op):
    """Checks per_sample_weights against the input, weight and mode."""
    _tensor(psw, "per_sample_weights", op)
    if mode != "sum":
        raise ValueError(f"{op}: per_sample_weights needs mode='sum', got mode={mode!r}")
    if psw.shape != input.shape:
        raise ValueError(f"{op}: per_sample_weights must have the input's shape {input.shape}, "
                         f"got {psw.shape}")
    if psw.dtype != weight.dtype:
        raise TypeError(f"{op}: per_sample_weights must have weight's dtype {weight.dtype}, got "
                        f"{psw.dtype}")


def flatten(input, start_dim=0, end_dim=-1):
    """input with dims start_dim..end_dim merged into one (a view when the strides allow)."""
    return _tensor(input, "input", "flatten").flatten(start_dim, end_dim)


def cat(tensors, dim=0):
    """cltensor.cat: tensors joined along dim (differentiable; inception blocks' concat)."""
    return cltensor.cat(tensors, dim)


def _shuffle_factor(input, factor, name, op):
    _tensor(input, "input", op)
    if not isinstance(factor, numbers.Integral) or isinstance(factor, bool) or factor <= 0:
        raise ValueError(f"{op}: {name} must be a positive int, got {factor!r}")
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input of at least 3 dims (*, C, H, W), got shape "
                         f"{input.shape}")
    return int(factor)


def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r): each channel group of r^2 spread over an
    r x r block (sub-pixel convolution's upsampling).

    Example:
        >>> F.pixel_shuffle(cltensor.zeros(1, 8, 3, 3), 2).shape
        (1, 2, 6, 6)
    """
    r = _shuffle_factor(input, upscale_factor, "upscale_factor", "pixel_shuffle")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle: the input's {c} channels are not divisible by "
                         f"upscale_factor^2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), the inverse of pixel_shuffle.

    Example:
        >>> F.pixel_unshuffle(cltensor.zeros(1, 2, 6, 6), 2).shape
        (1, 8, 3, 3)
    """
    r = _shuffle_factor(input, downscale_factor, "downscale_factor", "pixel_unshuffle")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle: the input's height {h} and width {w} must be "
                         f"divisible by downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, C, *) with its channels regrouped: channel g * (C / groups) + k moves to
    k * groups + g (ShuffleNet).

    Example:
        >>> F.channel_shuffle(cltensor.arange(6.0).reshape(1, 6, 1, 1), 2).flatten().tolist()
        [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    """
    op = "channel_shuffle"
    _tensor(input, "input", op)
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if input.ndim < 3 or input.shape[1] % groups:
        raise ValueError(f"{op}: expected an (N, C, *) input with C divisible by groups "
                         f"{groups}, got shape {input.shape}")
    n, c, *rest = input.shape
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)


def prelu(input, weight):
    """x where x > 0, else weight * x; weight has one entry, or one per channel (dim 1).

    Example:
        >>> F.prelu(cltensor.tensor([-2.0, 3.0]), cltensor.tensor([0.25])).tolist()
        [-0.5, 3.0]
    """
    op = "prelu"
    _float_tensor(input, "input", op)
    _tensor(weight, "weight", op)
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.ndim != 1 or weight.shape[0] not in (1, channels):
        raise ValueError(f"{op}: weight must have 1 or {channels} (the channels) entries, got "
                         f"shape {weight.shape}")
    if weight.dtype != input.dtype:
        raise TypeError(f"{op}: weight has dtype {weight.dtype} but the input has {input.dtype}")
    common_device([input, weight], op)
    w = weight.reshape((-1,) + (1,) * (input.ndim - 2)) if input.ndim >= 2 else weight
    return cltensor.where(input > 0, input, w * input)


def pad(input, pad, mode="constant", value=None):
    """cltensor.pad (torch.nn.functional.pad): pad is (left, right, top, bottom, ...) from the
    last dim backwards; mode "constant", "reflect", "replicate" or "circular"."""
    return cltensor.pad(input, pad, mode, 0 if value is None else value)


# ---- losses -------------------------------------------------------------------------------------

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
    q = cltensor.zeros(shape, dtype=dtype, device=target.device)
    q = q.scatter(cdim, index, value=1.0 - eps) + eps / C
    if weight is not None:
        q = q * weight.reshape((C,) + (1,) * (len(shape) - cdim - 1))
    return cltensor.where(ignored, 0.0, q)


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


def _broadcasts_to(shape, target):
    try:
        return cltensor.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _loss_operand(t, name, x, op):
    if t is None:
        return None
    _tensor(t, name, op)
    if t.dtype != x.dtype:
        raise TypeError(f"{op}: {name} has dtype {t.dtype} but the input has {x.dtype}")
    common_device([x, t], op)
    return t


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Squared error (input - target)^2, reduced; the operands broadcast (with a warning when
    their shapes differ, as torch).

    Example:
        >>> F.mse_loss(cltensor.tensor([1.0, 3.0]), cltensor.tensor([0.0, 0.0])).item()
        5.0
    """
    reduction = _regression_operands(input, target, "mse_loss", size_average, reduce, reduction)
    return _PointwiseLoss.apply(input, target, None, None, "MSE", reduction)


def _reduced(loss, reduction):
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


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
    return cltensor.where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta)


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
        if t is not None and not _broadcasts_to(t.shape, input.shape):
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
        log_x = cltensor.clamp(x.log(), min=-100.0)
        log_1mx = cltensor.clamp((-x).log1p(), min=-100.0)
        return (t - 1) * log_1mx - t * log_x

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        gx = g * (x - t) / cltensor.clamp(x * (1 - x), min=BCE_EPS)
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
        tiny = float(np.finfo(input.dtype).tiny)  # NOTE: 0 * log(tiny) = 0 where target is 0
        loss = target * (cltensor.clamp(target, min=tiny).log() - input)
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


def _same_shapes(op, **tensors):
    """The tensors (the first floating, the rest of its dtype and device) of one shape."""
    (first, x), *rest = tensors.items()
    _float_tensor(x, first, op)
    for name, t in rest:
        if _loss_operand(t, name, x, op).shape != x.shape:
            raise ValueError(f"{op}: {name} of shape {t.shape} must have the {first}'s shape "
                             f"{x.shape}")


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), reduced; target holds 1 or -1.

    Example:
        >>> F.margin_ranking_loss(cltensor.tensor([1.0]), cltensor.tensor([2.0]),
        ...                       cltensor.tensor([1.0])).item()
        1.0
    """
    op = "margin_ranking_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input1=input1, input2=input2, target=target)
    loss = relu(-target * (input1 - input2) + _number(margin, "margin", op))
    return _reduced(loss, reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1, reduced.

    Example:
        >>> F.hinge_embedding_loss(cltensor.tensor([0.3, 2.0]), cltensor.tensor([-1.0, 1.0]),
        ...                        reduction="sum").item()
        2.7
    """
    op = "hinge_embedding_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    hinge = relu(_number(margin, "margin", op) - input)
    loss = _where(target != 1, hinge, 0.0) + _where(target != -1, input, 0.0)
    return _reduced(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), reduced (target 1 or -1).

    Example:
        >>> round(F.soft_margin_loss(cltensor.tensor([0.0]), cltensor.tensor([1.0])).item(), 4)
        0.6931
    """
    op = "soft_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    return _reduced(-logsigmoid(target * input), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The mean over the C classes of -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) (times
    weight, (C,)), per sample of an (N, C) input, reduced over the samples.

    Example:
        >>> x = cltensor.zeros(1, 2); t = cltensor.tensor([[1.0, 0.0]])
        >>> round(F.multilabel_soft_margin_loss(x, t).item(), 4)
        0.6931
    """
    op = "multilabel_soft_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input=input, target=target)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have a class dim, got a 0-d tensor")
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        _loss_operand(weight, "weight", input, op)
        loss = loss * weight
    return _reduced(loss.mean(input.ndim - 1), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1, cos along
    the feature dim of (N, D) (or (D,)) inputs, reduced.

    Example:
        >>> a = cltensor.tensor([[1.0, 0.0]])
        >>> F.cosine_embedding_loss(a, a, cltensor.tensor([1.0])).item()
        0.0
    """
    op = "cosine_embedding_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _same_shapes(op, input1=input1, input2=input2)
    _tensor(target, "target", op)
    if input1.ndim not in (1, 2) or target.shape != input1.shape[:-1]:
        raise ValueError(f"{op}: expected (N, D) or (D,) inputs and an (N,) or () target, got "
                         f"inputs of shape {input1.shape} and target of shape {target.shape}")
    d, tiny = input1.ndim - 1, 1e-12  # NOTE: torch's EPSILON, added to each squared magnitude
    dot = (input1 * input2).sum(d)
    cos = dot / (((input1 * input1).sum(d) + tiny) * ((input2 * input2).sum(d) + tiny)).sqrt()
    loss = _where(target == 1, 1 - cos, 0.0) + \
        _where(target == -1, relu(cos - _number(margin, "margin", op)), 0.0)
    return _reduced(loss, reduction)


def _class_rows(input, target, op):
    """An (N, C) or (C,) input with its int64 class targets (N,) or (), as (N, C) and (N,)."""
    _float_tensor(input, "input", op)
    _tensor(target, "target", op)
    if input.ndim not in (1, 2) or target.dtype != dt.int64 or target.shape != input.shape[:-1]:
        raise ValueError(f"{op}: expected an (N, C) or (C,) input and int64 targets of shape "
                         f"(N,) or (), got input {input.shape} and target {target.dtype} "
                         f"{target.shape}")
    common_device([input, target], op)
    if target.numel() and not ((target >= 0) & (target < input.shape[-1])).all().item():
        raise IndexError(f"{op}: target out of bounds for {input.shape[-1]} classes")
    return input.reshape(-1, input.shape[-1]), target.reshape(-1)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss: per sample, the sum over classes i != y of
    w_y max(0, margin - x[y] + x[i])^p, divided by C, reduced; p is 1 or 2.

    Example:
        >>> F.multi_margin_loss(cltensor.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                     cltensor.tensor([3])).item()   # (0.3 + 0.4 + 0.6) / 4
    """
    op = "multi_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 are supported, got {p!r}")
    x, t = _class_rows(input, target, op)
    weight = _per_channel(weight, "weight", input, input.shape[-1], op)
    picked = t.unsqueeze(1)
    z = relu(_number(margin, "margin", op) - x.gather(1, picked) + x)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.index_select(0, t).unsqueeze(1)
    z = z.scatter(1, picked, 0.0)
    return _reduced(z.sum(1).reshape(input.shape[:-1]) / input.shape[-1], reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample, the sum over its target classes j and the other classes i of
    max(0, 1 - (x[j] - x[i])), divided by C, reduced; target (int64, the input's shape) lists
    the target classes, ended by the first -1.

    Example:
        >>> F.multilabel_margin_loss(cltensor.tensor([[0.1, 0.2, 0.4, 0.8]]),
        ...                          cltensor.tensor([[3, 0, -1, 1]])).item()   # 0.85
    """
    op = "multilabel_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)
    _float_tensor(input, "input", op)
    _tensor(target, "target", op)
    if input.ndim not in (1, 2) or target.dtype != dt.int64 or target.shape != input.shape:
        raise ValueError(f"{op}: expected an (N, C) or (C,) input and int64 targets of its "
                         f"shape, got input {input.shape} and target {target.dtype} "
                         f"{target.shape}")
    common_device([input, target], op)
    x = input.reshape(-1, input.shape[-1])
    slots, pairs = _multilabel_pairs(target.reshape(x.shape).numpy(), op)
    xj = x.gather(1, cltensor.from_numpy(slots, device=x.device))
    hinge = relu(1 - xj.unsqueeze(2) + x.unsqueeze(1))
    mask = cltensor.from_numpy(pairs.astype(np.dtype(input.dtype)), device=x.device)
    loss = (hinge * mask).sum((1, 2)) / input.shape[-1]
    return _reduced(loss.reshape(input.shape[:-1]), reduction)


def _multilabel_pairs(target, op):
    """(the target class of each slot (0 past the list), the (N, slot, class) 0/1 mask of the
    pairs counted: a listed slot and a class not listed)."""
    n, c = target.shape
    listed = np.cumprod(target >= 0, axis=1).astype(bool)
    if (target[listed] >= c).any():
        raise IndexError(f"{op}: target out of bounds for {c} classes")
    slots = np.where(listed, target, 0)
    is_target = np.zeros((n, c), bool)
    rows = np.broadcast_to(np.arange(n)[:, None], (n, c))
    is_target[rows[listed], slots[listed]] = True
    return slots, listed[:, :, None] & ~is_target[:, None, :]


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin), d the pairwise_distance of order p; swap: d(a, n)
    replaced by d(p, n) where smaller. Reduced.

    Example:
        >>> a = cltensor.randn(8, 16)
        >>> F.triplet_margin_loss(a, a + 0.1, -a).item()
    """
    op = "triplet_margin_loss"
    reduction = _reduction(reduction, op, size_average, reduce)

    def distance(x1, x2):
        return pairwise_distance(x1, x2, p, eps)

    return _triplet(op, anchor, positive, negative, distance, margin, swap, reduction)


def _triplet(op, anchor, positive, negative, distance, margin, swap, reduction):
    _float_tensor(anchor, "anchor", op)
    shapes = {n: _tensor(t, n, op).ndim for n, t in
              (("anchor", anchor), ("positive", positive), ("negative", negative))}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"{op}: the anchor, positive and negative tensors are expected to have "
                         f"the same number of dimensions, got {shapes}")
    d_an = distance(anchor, negative)
    if swap:
        d_an = cltensor.minimum(d_an, distance(positive, negative))
    loss = relu(distance(anchor, positive) - d_an + _number(margin, "margin", op))
    return _reduced(loss, reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with a distance of one's own (default pairwise_distance); margin
    must be positive.

    Example:
        >>> F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda x, y:
        ...     1 - F.cosine_similarity(x, y))
    """
    op = "triplet_margin_with_distance_loss"
    reduction = _reduction(reduction, op)
    if not _number(margin, "margin", op) > 0:
        raise ValueError(f"{op}: expected margin to be greater than 0, got {margin} instead")
    distance = pairwise_distance if distance_function is None else distance_function
    return _triplet(op, anchor, positive, negative, distance, margin, swap, reduction)


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
        t = cltensor.clamp(target, min=1.0)  # NOTE: the term is 0 where target <= 1
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
    var = var + (cltensor.clamp(var.detach(), min=_number(eps, "eps", op)) - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    return _reduced(loss + 0.5 * math.log(2 * math.pi) if full else loss, reduction)


def _gaussian_var(input, var, op):
    """var as a tensor that broadcasts to input's shape, checked."""
    if isinstance(var, numbers.Real) and not isinstance(var, bool):
        return cltensor.full((), float(var), dtype=input.dtype, device=input.device)
    _loss_operand(var, "var", input, op)
    if var.shape == input.shape or (var.shape[:-1] == input.shape[:-1] and var.shape[-1:] == (1,)):
        return var
    if var.shape == input.shape[:-1]:
        return var.unsqueeze(-1)
    raise ValueError(f"{op}: var of shape {var.shape} is of incorrect size for input of shape "
                     f"{input.shape}")


# ---- others -------------------------------------------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    """y_k = input1^T weight[k] input2 + bias[k] over the last dims.

    Args:
        input1: (*, in1); input2: (*, in2) of the same leading shape.
        weight: (out, in1, in2); bias: optional (out,).

    Example:
        >>> F.bilinear(cltensor.ones(4, 2), cltensor.ones(4, 3), cltensor.ones(5, 2, 3)).shape
        (4, 5)
    """
    op = "bilinear"
    _float_tensor(input1, "input1", op)
    for name, t in (("input2", input2), ("weight", weight)):
        _loss_operand(t, name, input1, op)
    if weight.ndim != 3 or input1.ndim == 0 or input2.shape[:-1] != input1.shape[:-1] or \
            (input1.shape[-1], input2.shape[-1]) != weight.shape[1:]:
        raise ValueError(f"{op}: expected inputs (*, in1) and (*, in2) and a weight (out, in1, "
                         f"in2), got {input1.shape}, {input2.shape} and {weight.shape}")
    out, in1, in2 = weight.shape
    w = weight.permute(1, 0, 2).reshape(in1, out * in2)
    left = linear(input1, w.T).reshape(input1.shape[:-1] + (out, in2))
    y = (left * input2.unsqueeze(-2)).sum(-1)
    if bias is not None:
        y = y + _per_channel(bias, "bias", input1, out, op)
    return y


SELU_NEG = SELU_ALPHA * SELU_SCALE  # selu's limit at -inf, negated


def _alpha_dropout(input, p, training, inplace, mask_shape, op):
    """torch's alpha dropout: dropped elements set to selu's negative saturation and an affine
    map a x + b that keeps zero mean and unit variance."""
    _float_tensor(input, "input", op)
    p = _number(p, "p", op)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0.0
    else:
        keep = ClTensor.empty_on(mask_shape, input.dtype, input.device).bernoulli_(1.0 - p)
        a = 1.0 / math.sqrt((SELU_NEG * SELU_NEG * p + 1) * (1 - p))
        out = input * (keep * a) + ((keep - 1) * (SELU_NEG * a) + SELU_NEG * a * p)
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps the input's mean and variance (training only).

    Example:
        >>> y = F.alpha_dropout(cltensor.randn(1000), 0.2, training=True)
    """
    return _alpha_dropout(input, p, training, inplace, input.shape, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels: one draw per (N, C) of an (N, C, *) input."""
    op = "feature_alpha_dropout"
    if _float_tensor(input, "input", op).ndim < 2:
        raise ValueError(f"{op}: expected an (N, C, *) input, got shape {input.shape}")
    shape = input.shape[:2] + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, inplace, shape, op)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: x where x >= 0, else a x with a ~ U(lower, upper) per element in
    training, a = (lower + upper) / 2 otherwise.

    Example:
        >>> F.rrelu(cltensor.tensor([-1.0, 2.0])).tolist()
        [-0.22916666666666666, 2.0]
    """
    op = "rrelu"
    _float_tensor(input, "input", op)
    lo_, hi = _number(lower, "lower", op), _number(upper, "upper", op)
    if lo_ > hi:
        raise ValueError(f"{op}: lower bound {lo_} must not exceed upper bound {hi}")
    if not training:
        return leaky_relu(input, (lo_ + hi) / 2, inplace)
    slope = cltensor.empty_like(input).uniform_(lo_, hi)
    out = _where(input >= 0, input, input * slope)
    return input.copy_(out) if inplace else out


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax distribution: softmax((logits + g) / tau) along dim, g
    Gumbel(0, 1) noise; hard: the one-hot of its argmax, with the soft sample's gradient
    (straight-through).

    Example:
        >>> y = F.gumbel_softmax(cltensor.randn(4, 10), tau=0.5, hard=True)   # one-hot rows
    """
    op = "gumbel_softmax"
    _float_tensor(logits, "logits", op)
    gumbels = -cltensor.empty_like(logits).exponential_().log()
    y = softmax((logits + gumbels) / _number(tau, "tau", op), dim)
    if not hard:
        return y
    index = y.detach().argmax(dim, keepdim=True)
    one_hot_ = cltensor.zeros_like(y).scatter(dim, index, 1.0)
    return one_hot_ - y.detach() + y


def relu_(input):
    """relu in place."""
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):
    """elu in place."""
    return elu(input, alpha, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """leaky_relu in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """hardtanh in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def selu_(input):
    """selu in place."""
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):
    """celu in place."""
    return celu(input, alpha, inplace=True)


_threshold = threshold  # NOTE: threshold_'s argument of that name hides the function


def threshold_(input, threshold, value):
    """threshold in place."""
    return _threshold(input, threshold, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """rrelu in place."""
    return rrelu(input, lower, upper, training, inplace=True)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate (torch's deprecated name), with its deprecation warning."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """interpolate with mode "nearest" (torch's deprecated name)."""
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """interpolate with mode "bilinear" and align_corners=True (torch's deprecated name)."""
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# NOTE: at the end: attention.py builds on this module
from ..modules.attention import scaled_dot_product_attention  # noqa: E402,F401
