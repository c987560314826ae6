"""The convolution family on the opencl device: aten's convolution and convolution_backward on
cltensor.conv's passes, 2-d (N, C, H, W) and 1-d (N, C, L) as 2-d over rows of height 1. Other
forms (3-d) run through the CPU fallback with its warning."""
import torch

from .. import dtypes as dt
from ..conv import common
from ..conv import function as conv_function
from ..conv.params import make_params
from ..nn import functional as F
from . import lazy_relu
from ._backend import aten, unwrap, wrap
from .fallback import cpu_fallback
from .math_ops import Plans, finish, meta_result, signature

_aten = torch.ops.aten


def _opt(t):
    return None if t is None else unwrap(t)


def _conv_form(input, transposed, output_padding):
    """Whether cltensor runs the convolution: 2-d, or 1-d as 2-d over rows of height 1."""
    return input.dim() in (3, 4) and not transposed and not any(output_padding)


def _as_2d(t, ndim):
    """A 1-d convolution's (N, C, L) operand as (N, C, 1, L); 2-d ones as they are."""
    return t.unsqueeze(2) if ndim == 3 else t


def _from_2d(t, ndim):
    """A gradient or output of the 2-d form back in the 1-d convolution's shape."""
    return t.squeeze(2) if ndim == 3 and t.ndim == 4 else t


def _geometry(stride, padding, dilation, ndim):
    """(stride, padding, dilation) of the 2-d form."""
    if ndim == 3:
        return (1, *stride), (0, *padding), (1, *dilation)
    return tuple(stride), tuple(padding), tuple(dilation)


_CONV_PLANS = Plans()  # signature -> (Meta result, ConvParams; None: no cltensor form)


@aten("convolution")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    args = (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    key = signature(*args)
    plan = _CONV_PLANS.get(key)
    if plan is None:  # torch's and cltensor's checks, once per signature
        plan = _CONV_PLANS.put(key, _conv_plan(args))
    out, p = plan
    if p is None:
        return cpu_fallback(_aten.convolution.default, *args)
    nd = input.dim()
    x, w = _as_2d(unwrap(input), nd), _as_2d(unwrap(weight), nd)
    b = None if bias is None else unwrap(bias)
    if common.is_half(x):
        return finish(F.conv2d(x, w, b, *_geometry(stride, padding, dilation, nd), groups), out)
    # of the Meta result's dtype and shape
    return wrap(_from_2d(lazy_relu.convolution(x, w, b, p), nd))


def _conv_plan(args):
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    if not _conv_form(input, transposed, output_padding):
        return None, None
    out = meta_result(_aten.convolution.default, args, {})
    nd = input.dim()
    return out, make_params(_as_2d(unwrap(input), nd), _as_2d(unwrap(weight), nd), _opt(bias),
                            *_geometry(stride, padding, dilation, nd), groups)


_CONV_BACKWARD_PLANS = Plans()  # signature -> the ConvParams of the float32/64 operands


@aten("convolution_backward")
def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    args = (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
            output_padding, groups, output_mask)
    key = signature(*args)
    p = _CONV_BACKWARD_PLANS.get(key)
    if p is None and not _conv_form(input, transposed, output_padding):
        return cpu_fallback(_aten.convolution_backward.default, *args)
    nd = input.dim()
    operands = [_as_2d(unwrap(t), nd) for t in (input, weight, grad_output)]
    dtypes = [t.dtype for t in operands]  # of the input, weight and bias gradients
    # the backward kernels read 32- or 64-bit floats: 16-bit operands go through float32 copies
    x, w, g = (t.to(dt.float32) if common.is_half(t) else t for t in operands)
    if p is None:
        p = _CONV_BACKWARD_PLANS.put(key, make_params(
            x, w, None, *_geometry(stride, padding, dilation, nd), groups))
    # cltensor's own backward passes (each by its dispatched algorithm), no forward recomputed
    grads = conv_function.backward(x, w, g, p, "auto", *map(bool, output_mask))
    return tuple(None if r is None else wrap(_as(_from_2d(r, nd), d))
                 for r, d in zip(grads, dtypes))


def _as(t, dtype):
    """t in dtype, dense."""
    return (t if t.dtype is dtype else t.to(dtype)).contiguous()


