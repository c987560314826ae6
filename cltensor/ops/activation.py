"""Activations of cltensor.nn.functional and their gradients, as one elementwise kernel each
(the OP_* macros at the end of the op table in cl_kernels/elementwise.cl).

No autograd here: cltensor/nn/functional.py wraps these in Functions. Every op accepts `out`
(which may be the input itself, for the in-place forms).
"""
import numbers

from .. import dtypes as dt
from ..tensor import ClTensor
from . import elementwise as ew


def check_float(x, op):
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if not dt.is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating point tensor, got {x.dtype}")


def check_number(value, name, op):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be a real number, got {type(value).__name__}")
    return float(value)


def _run(name, operands, out):
    return ew.ternary(name, operands, operands[0].dtype, out=out)


def relu(x, out=None):
    return ew.unary("relu", x, out=out)


def leaky_relu(x, negative_slope, out=None):
    return _run("leaky_relu", [x, negative_slope], out)


def elu(x, alpha, out=None):
    return _run("elu", [x, alpha], out)


def hardtanh(x, min_val, max_val, out=None):
    return ew.ternary("clamp", [x, min_val, max_val], x.dtype, out=out)


def sigmoid(x, out=None):
    return ew.unary("sigmoid", x, out=out)


def tanh(x, out=None):
    return ew.unary("tanh", x, out=out)


def gelu(x, tanh_form, out=None):
    return _run("gelu", [x, tanh_form], out)


def silu(x, out=None):
    return ew.unary("silu", x, out=out)


def mish(x, out=None):
    return ew.unary("mish", x, out=out)


def softplus(x, beta, threshold, out=None):
    return _run("softplus", [x, beta, threshold], out)


def hardswish(x, out=None):
    return ew.unary("hardswish", x, out=out)


def hardsigmoid(x, out=None):
    return ew.unary("hardsigmoid", x, out=out)


def selu(x, out=None):
    return ew.unary("selu", x, out=out)


def celu(x, alpha, out=None):
    return _run("celu", [x, alpha], out)


def logsigmoid(x, out=None):
    return ew.unary("logsigmoid", x, out=out)


def softsign(x, out=None):
    return ew.unary("softsign", x, out=out)


def tanhshrink(x, out=None):
    return ew.unary("tanhshrink", x, out=out)


def softshrink(x, lambd, out=None):
    return _run("softshrink", [x, lambd], out)


def hardshrink(x, lambd, out=None):
    return _run("hardshrink", [x, lambd], out)


def threshold(x, threshold, value, out=None):
    return _run("threshold", [x, threshold, value], out)


def dropout(x, mask, scale, out=None):
    """x * scale where mask is true, else 0 (mask a bool tensor broadcast to x)."""
    return _run("dropout", [x, mask, scale], out)


# ---- gradients: g is the output's gradient, broadcast to the saved tensor's shape -------------

def _backward(name, g, saved, *params):
    out = ClTensor.empty_on(saved.shape, saved.dtype, saved.device)
    return ew.ternary(name, [g, saved, *params], saved.dtype, out=out)


def relu_backward(g, y):
    return _backward("relu_backward", g, y)


def relu_backward_into(g, y, out):
    """out = g taken back through the ReLU whose output is y (any views of one shape)."""
    return ew.ternary("relu_backward", [g, y], y.dtype, out=out)


def leaky_relu_backward(g, x, negative_slope):
    return _backward("leaky_relu_backward", g, x, negative_slope)


def elu_backward(g, x, alpha):
    return _backward("elu_backward", g, x, alpha)


def hardtanh_backward(g, x, min_val, max_val):
    return _backward("hardtanh_backward", g, x, min_val, max_val)


def sigmoid_backward(g, y):
    return _backward("sigmoid_backward", g, y)


def tanh_backward(g, y):
    return _backward("tanh_backward", g, y)


def gelu_backward(g, x, tanh_form):
    return _backward("gelu_backward", g, x, tanh_form)


def silu_backward(g, x):
    return _backward("silu_backward", g, x)


def mish_backward(g, x):
    return _backward("mish_backward", g, x)


def softplus_backward(g, x, beta, threshold):
    return _backward("softplus_backward", g, x, beta, threshold)


def hardswish_backward(g, x):
    return _backward("hardswish_backward", g, x)


def hardsigmoid_backward(g, x):
    return _backward("hardsigmoid_backward", g, x)


def selu_backward(g, x):
    return _backward("selu_backward", g, x)


def celu_backward(g, x, alpha):
    return _backward("celu_backward", g, x, alpha)


def logsigmoid_backward(g, x):
    return _backward("logsigmoid_backward", g, x)


def softsign_backward(g, x):
    return _backward("softsign_backward", g, x)


def tanhshrink_backward(g, x):
    return _backward("tanhshrink_backward", g, x)


def shrink_backward(g, x, lambd):
    """softshrink's and hardshrink's gradient: g outside [-lambd, lambd], else 0."""
    return _backward("shrink_backward", g, x, lambd)


def threshold_backward(g, x, threshold, value):
    return _backward("threshold_backward", g, x, threshold)


def dropout_backward(g, mask, scale):
    out = ClTensor.empty_on(g.shape, g.dtype, g.device)
    return ew.ternary("dropout", [g, mask, scale], g.dtype, out=out)

