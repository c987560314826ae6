"""Activations as differentiable Functions over one elementwise kernel each
(cltensor/ops/activation.py), softmax and its relatives, prelu, rrelu, gumbel_softmax
and the in-place variants.
"""
import warnings

from ... import dtypes as dt
from ...autograd import Function, is_grad_enabled
from ...autograd.functions import _where
from ...autograd.namespace import empty_like, where, zeros_like
from ...ops import activation as act, softmax as sm
from ...ops.elementwise import common_device
from ...tensor import _norm_dim
from .utils import _float_tensor, _number, _records, _tensor

__all__ = ["celu", "celu_", "elu", "elu_", "gelu", "glu", "gumbel_softmax", "hardshrink",
           "hardsigmoid", "hardswish", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_",
           "log_softmax", "logsigmoid", "mish", "prelu", "relu", "relu6", "relu_", "rrelu",
           "rrelu_", "selu", "selu_", "sigmoid", "silu", "softmax", "softmin", "softplus",
           "softshrink", "softsign", "tanh", "tanhshrink", "threshold", "threshold_"]


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
    return _where(x <= 0, g * alpha * x.exp(), g)  # torch: a NaN input passes g


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
    "relu": lambda g, y: _where(y <= 0, 0.0, g),  # torch: a NaN output passes g
    "leaky_relu": lambda g, x, slope: _where(x > 0, g, g * slope),
    "elu": _elu_grad,
    "hardtanh": lambda g, x, lo, hi: _where((x <= lo) | (x >= hi), 0.0, g),
    "sigmoid": lambda g, y: g * y * (1 - y),
    "tanh": lambda g, y: g * (1 - y * y),
    "gelu": _gelu_grad,
    "silu": _silu_grad,
    "mish": _mish_grad,
    "softplus": lambda g, x, beta, th: _where(x * beta > th, g, g * (x * beta).sigmoid()),
    "hardswish": lambda g, x: _where(x <= -3, 0.0, _where(x < 3, g * (x / 3 + 0.5), g)),
    "hardsigmoid": lambda g, x: _where((x > -3) & (x < 3), g / 6, 0.0),
    "selu": lambda g, x: _elu_grad(g, x, SELU_ALPHA) * SELU_SCALE,
    "celu": lambda g, x, alpha: _where(x <= 0, g * (x / alpha).exp(), g),
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


def relu_grad(g, y):
    """ReLU's input gradient from its output y, as _Relu's backward takes it: one kernel, or
    tensor ops (recorded) under create_graph=True. For the Functions that fuse a ReLU."""
    return (GRADS["relu"] if is_grad_enabled() else act.relu_backward)(g, y)


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
    return where(input > 0, input, w * input)


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
    slope = empty_like(input).uniform_(lo_, hi)
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
    gumbels = -empty_like(logits).exponential_().log()
    y = softmax((logits + gumbels) / _number(tau, "tau", op), dim)
    if not hard:
        return y
    index = y.detach().argmax(dim, keepdim=True)
    one_hot_ = zeros_like(y).scatter(dim, index, 1.0)
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
