"""Activations and clamps on the opencl device: SiLU, Mish, Hardswish, Hardsigmoid, LeakyReLU,
ELU (which SELU and CELU reach), Hardtanh, Softplus and LogSigmoid with their backwards, in
place and out= forms; clamp_min, clamp_max, nan_to_num, xlogy and logit.

torch's Meta kernels check the operands and give the result's dtype and shape; cltensor's
elementwise kernels (cltensor/ops/activation.py) compute, float16 and bfloat16 in float32.
"""
import numpy as np
import torch

from .. import dtypes as dt
from ..ops import activation, pointwise
from ..tensor import ClTensor
from ._backend import aten, np_dtype, unwrap, wrap
from .math_ops import (finish, meta_result, operand, raw, register_pointwise, with_out,
                       write_into)

_aten = torch.ops.aten
_SIXTH_F32 = float(np.float32(1.0) / np.float32(6.0))  # torch's hardsigmoid gradient constant
# torch's names of the scalar types in its "not implemented for" errors
_TYPE_NAMES = {torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short",
               torch.int32: "Int", torch.int64: "Long"}


def _floating(name, t):
    """torch's error for a floating-only activation of a bool or integer tensor."""
    if not t.is_floating_point():
        kind = _TYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix("torch."))
        raise NotImplementedError(f"\"{name}\" not implemented for '{kind}'")


def _wide(x):
    """x in float32 when it is 16-bit (compositions round once, at the end, as torch)."""
    return x.to(dt.float32) if x.dtype in (dt.float16, dt.bfloat16) else x


# ---- compositions where cltensor's kernels differ from torch ----------------------------------
def _hardsigmoid_backward(g, x):
    """torch's gradient: g times 1/6 rounded to float32 (its constant) inside (-3, 3), else 0."""
    return pointwise.elementwise("x > -3 && x < 3 ? g * c : 0", g=g, x=x, c=_SIXTH_F32)


def _elu(x, alpha, scale, input_scale, out=None):
    """torch's elu: x * scale where x > 0, else alpha * scale * expm1(x * input_scale)."""
    alpha, scale, input_scale = float(alpha), float(scale), float(input_scale)
    if scale == 1 and input_scale == 1:
        return activation.elu(x, alpha, out=out)
    res = pointwise.elementwise("x <= 0 ? expm1(x * b) * a : x * s", x=x, a=alpha * scale,
                                b=input_scale, s=scale)
    return res if out is None else out.copy_(res)


# elu_backward in one pass where scale or input_scale is 1 (ELU, SELU, CELU), keyed by
# (is_result, scale == 1): g, the saved value v, the negative side's factor a and the other
# scale k (torch: g * scale where v > 0, so NaN passes g * scale)
_ELU_GRADS = {
    (False, True): "v <= 0 ? g * a * exp(v * k) : g",
    (False, False): "v <= 0 ? g * a * exp(v) : g * k",
    (True, True): "v <= 0 ? g * k * (v + a) : g",
    (True, False): "v <= 0 ? g * (v + a) : g * k",
}


def _elu_backward(g, v, alpha, scale, input_scale, is_result):
    """torch's elu_backward: g * scale where the saved value v > 0, else g * input_scale times
    (v + alpha * scale) for a saved result, alpha * scale * exp(v * input_scale) for an input."""
    alpha, scale, input_scale = float(alpha), float(scale), float(input_scale)
    if scale == 1 or input_scale == 1:
        a = alpha * scale * (1.0 if is_result else input_scale)
        k = input_scale if scale == 1 else scale
        return pointwise.elementwise(_ELU_GRADS[bool(is_result), scale == 1], g=g, v=v, a=a, k=k)
    gw, vw = _wide(g), _wide(v)
    if is_result:
        neg = gw * (vw + alpha * scale) * input_scale
    else:
        neg = gw * (vw * input_scale).exp() * (input_scale * alpha * scale)
    return pointwise.where(vw <= 0, neg, gw * scale).to(v.dtype)


# ---- registration -----------------------------------------------------------------------------
def _activation(name, fn, floating=True, inplace=True):
    """Register aten `name` (self and scalar parameters), its out= form and `name_`."""
    op = getattr(_aten, name).default
    defaults = _defaults(op)

    def functional(self, *params):
        if floating:
            _floating(name, self)
        params = (*params, *defaults[len(params):])
        out = meta_result(op, (self, *params), {})
        return finish(fn(unwrap(self), *_numbers(params, out.dtype, name)), out)
    aten(name)(functional)
    with_out(f"{name}.out", functional)
    if inplace:
        _inplace(name, fn, floating)


def _inplace(name, fn, floating):
    op = getattr(_aten, name + "_").default
    defaults = _defaults(op)

    def kernel(self, *params):
        if floating:
            _floating(name + "_", self)
        params = (*params, *defaults[len(params):])
        meta_result(op, (self, *params), {})  # torch's checks (bool hardtanh_, overlaps)
        x = unwrap(self)
        fn(x, *_numbers(params, self.dtype, name), out=x)
        return self
    aten(name + "_")(kernel)


def _defaults(op):
    """The default values of op's scalar parameters (torch passes only those given)."""
    return [a.default_value for a in op._schema.arguments[1:] if not a.kwarg_only]


def _numbers(params, dtype, name):
    """Scalar parameters as Python numbers of the result dtype's kind."""
    return [operand(p, np_dtype(dtype, name)) for p in params]


def _backward(name, fn, out_name="grad_input"):
    """Register aten `name`(grad_output, self, *scalars) and its out= form."""
    op = getattr(_aten, name).default

    def kernel(grad_output, self, *params):
        out = meta_result(op, (grad_output, self, *params), {})
        dtype = np_dtype(out.dtype, name)
        g, x = operand(grad_output, dtype), operand(self, dtype)
        scalars = [p if isinstance(p, torch.Tensor) else float(p) for p in params]
        return finish(fn(g, x, *scalars), out)
    aten(name)(kernel)
    if out_name:
        with_out(f"{name}.{out_name}", kernel, out_name)


_activation("silu", activation.silu)
_activation("mish", activation.mish)
_activation("hardswish", activation.hardswish)
_activation("hardsigmoid", activation.hardsigmoid)
_activation("leaky_relu", activation.leaky_relu)
_activation("hardtanh", activation.hardtanh, floating=False)  # integers clamp; bool: Meta
_activation("softplus", activation.softplus, inplace=False)
_activation("elu", _elu)

_backward("silu_backward", activation.silu_backward)
_backward("mish_backward", activation.mish_backward, out_name=None)
_backward("hardswish_backward", activation.hardswish_backward, out_name="out")
_backward("hardsigmoid_backward", _hardsigmoid_backward)
_backward("hardtanh_backward", activation.hardtanh_backward)
_backward("softplus_backward", activation.softplus_backward)
_backward("log_sigmoid_backward", lambda g, x, buffer: activation.logsigmoid_backward(g, x))


def _leaky_relu_backward(g, x, slope, is_result):
    """From the input or, after leaky_relu_, from the result: y > 0 exactly where x > 0 for a
    slope >= 0; torch refuses a negative one."""
    _result_slope("leakyReLu", is_result, slope)
    return activation.leaky_relu_backward(g, x, slope)


def _result_slope(name, is_result, slope):
    """torch's error for a backward from an in-place result with a negative slope (its Meta
    kernels do not check it)."""
    if is_result and slope < 0:
        raise RuntimeError(f"In-place {name} backward calculation is triggered with a negative "
                           f"slope which is not supported. This is caused by calling in-place "
                           f"forward function with a negative slope, please call out-of-place "
                           f"version instead.")


_backward("leaky_relu_backward", _leaky_relu_backward)


@aten("elu_backward")
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    args = (grad_output, alpha, scale, input_scale, is_result, self_or_result)
    out = meta_result(_aten.elu_backward.default, args, {})
    _result_slope("elu", is_result, float(alpha))
    dtype = np_dtype(out.dtype, "elu_backward")
    g, v = operand(grad_output, dtype), operand(self_or_result, dtype)
    return finish(_elu_backward(g, v, alpha, scale, input_scale, is_result), out)


with_out("elu_backward.grad_input", elu_backward, "grad_input")


@aten("log_sigmoid_forward")
def log_sigmoid_forward(self):
    """(output, buffer): the buffer is empty, as torch's CUDA kernel leaves it (the backward
    needs only self)."""
    _floating("log_sigmoid_forward", self)
    out, _ = meta_result(_aten.log_sigmoid_forward.default, (self,), {})
    x = unwrap(self)
    buffer = ClTensor.empty_on((0,), x.dtype, x.device)
    return finish(activation.logsigmoid(x), out), wrap(buffer)


@aten("log_sigmoid_forward.output")
def log_sigmoid_forward_out(self, *, output, buffer):
    meta_result(_aten.log_sigmoid_forward.output, (self,), {"output": output, "buffer": buffer})
    return write_into(output, log_sigmoid_forward(self)[0]), buffer  # buffer left as CUDA's


# ---- clamps and special values ----------------------------------------------------------------
# torch's clamp_min and clamp_max are maximum and minimum (a NaN bound gives NaN)
register_pointwise("clamp_min", raw("maximum"))
register_pointwise("clamp_max", raw("minimum"))
register_pointwise("xlogy", raw("xlogy"))


@aten("nan_to_num")
def nan_to_num(self, nan=None, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default with 0 and the dtype's extremes, 16-bit ones
    included); integer and bool tensors copied."""
    out = meta_result(_aten.nan_to_num.default, (self, nan, posinf, neginf), {})
    return finish(pointwise.nan_to_num(unwrap(self), nan, posinf, neginf), out)


@aten("nan_to_num_")
def nan_to_num_(self, nan=None, posinf=None, neginf=None):
    meta_result(_aten.nan_to_num_.default, (self, nan, posinf, neginf), {})
    x = unwrap(self)
    if dt.is_floating(x.dtype):
        pointwise.nan_to_num(x, nan, posinf, neginf, out=x)
    return self


with_out("nan_to_num.out", nan_to_num)


@aten("logit")
def logit(self, eps=None):
    """log(z / (1 - z)), z being self clamped to [eps, 1 - eps] when eps is given."""
    out = meta_result(_aten.logit.default, (self, eps), {})
    return finish(pointwise.logit(operand(self, np_dtype(out.dtype, "logit")), eps), out)


@aten("logit_backward")
def logit_backward(grad_output, self, eps=None):
    """g / (x (1 - x)); outside [0, 1] NaN, or outside [eps, 1 - eps] zero when eps is given."""
    out = meta_result(_aten.logit_backward.default, (grad_output, self, eps), {})
    dtype = np_dtype(out.dtype, "logit_backward")
    g, x = operand(grad_output, dtype), operand(self, dtype)
    if eps is None:
        expr = "x < 0 || x > 1 ? (x - x) / 0 : g / (x * (1 - x))"  # NaN outside
        return finish(pointwise.elementwise(expr, g=g, x=x), out)
    expr = "x < e || x > 1 - e ? 0 : g / (x * (1 - x))"
    return finish(pointwise.elementwise(expr, g=g, x=x, e=float(eps)), out)


with_out("logit.out", logit)
with_out("logit_backward.grad_input", logit_backward, "grad_input")


# ---- PReLU and GLU -----------------------------------------------------------------------------
@aten("_prelu_kernel")
def prelu_kernel(self, weight):
    """nn.PReLU: x where x > 0, else weight * x (weight already broadcastable to x)."""
    out = meta_result(_aten._prelu_kernel.default, (self, weight), {})
    dtype = np_dtype(out.dtype, "_prelu_kernel")
    x, w = operand(self, dtype), operand(weight, dtype)
    return finish(pointwise.elementwise("x > 0 ? x : w * x", x=x, w=w), out)


@aten("_prelu_kernel_backward")
def prelu_kernel_backward(grad_output, self, weight):
    gi, gw = meta_result(_aten._prelu_kernel_backward.default, (grad_output, self, weight), {})
    dtype = np_dtype(gi.dtype, "_prelu_kernel_backward")
    g, x, w = (operand(t, dtype) for t in (grad_output, self, weight))
    return (finish(pointwise.elementwise("x > 0 ? g : w * g", g=g, x=x, w=w), gi),
            finish(pointwise.elementwise("x > 0 ? 0 : x * g", g=g, x=x), gw))


@aten("glu")
def glu(self, dim=-1):
    """nn.GLU: the first half along dim times the sigmoid of the second."""
    out = meta_result(_aten.glu.default, (self, dim), {})
    a, b = unwrap(self).chunk(2, dim)
    return finish(pointwise.elementwise("a / (1 + exp(-b))", a=a, b=b), out)


@aten("glu_backward")
def glu_backward(grad_output, self, dim):
    out = meta_result(_aten.glu_backward.default, (grad_output, self, dim), {})
    g, (a, b) = unwrap(grad_output), unwrap(self).chunk(2, dim)
    s = pointwise.elementwise("1 / (1 + exp(-b))", b=b)
    halves = (g * s, pointwise.elementwise("g * a * s * (1 - s)", g=g, a=a, s=s))
    return finish(raw("cat")(halves, dim), out)


with_out("glu.out", glu)
with_out("glu_backward.grad_input", glu_backward, "grad_input")
