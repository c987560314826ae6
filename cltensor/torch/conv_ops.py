"""The convolution family on the opencl device: aten's convolution and convolution_backward,
plain and transposed, on cltensor.conv's passes, 2-d (N, C, H, W) and 1-d (N, C, L) as 2-d over
rows of height 1, and 3-d (N, C, D, H, W) on cltensor.conv.volume's; im2col and
col2im (F.unfold, F.fold, each the other's gradient) on cltensor's unfold and fold, and
Tensor.unfold's gradient."""
import numpy as np
import torch

from .. import dtypes as dt
from ..conv import common, dispatch, volume
from ..conv import function as conv_function
from ..conv.params import make_params
from ..conv.transposed import padded_input, transposed_params
from ..creation import from_numpy
from ..nn import functional as F
from ..ops import elementwise as ew
from ..ops.indexing.slices import index_add_
from ..tensor import ClTensor
from . import lazy_relu
from ._backend import aten, unwrap, wrap
from .fallback import cpu_fallback
from .math_ops import Plans, finish, meta_result, signature, with_out

_aten = torch.ops.aten


def _opt(t):
    return None if t is None else unwrap(t)


def _conv_form(input, transposed, output_padding):
    """Whether cltensor runs the convolution: 3-d, 2-d, or 1-d as 2-d over rows of height 1 (a
    plain convolution takes no output_padding)."""
    return input.dim() in (3, 4, 5) and (transposed or not any(output_padding))


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


def _params(x, w, bias, stride, padding, dilation, transposed, output_padding, groups, ndim):
    """The ConvParams of the 2-d operands' convolution (transposed: of the convolution that
    conv_transpose2d transposes, its input the transposed one's output), checked; a transposed
    16-bit problem's in float32, as its passes run on float32 copies."""
    stride, padding, dilation = _geometry(stride, padding, dilation, ndim)
    if not transposed:
        return make_params(x, w, bias, stride, padding, dilation, groups)
    extra = (0, *output_padding) if ndim == 3 else tuple(output_padding)
    p = transposed_params(x, w, bias, stride, padding, extra, groups, dilation)
    return p._replace(dtype=dt.float32) if common.is_half(x) else p


def _wide(t):
    """16-bit floats as float32 copies (the passes of the transposed convolution read 32- or
    64-bit floats); other tensors and None as they are."""
    return t.to(dt.float32) if common.is_half(t) else t


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
    if nd == 5 and transposed:  # on float32 copies of 16-bit operands, as the 2-d one
        x, w, b = (_wide(t) for t in (unwrap(input), unwrap(weight), _opt(bias)))
        return finish(volume.transposed_forward(volume.padded_input(x, p), w, b, p), out)
    if nd == 5:  # 16-bit operands too: conv3d's conv2d reads them (or widens them) itself
        return finish(volume.forward(unwrap(input), unwrap(weight), _opt(bias), p), out)
    x, w = _as_2d(unwrap(input), nd), _as_2d(unwrap(weight), nd)
    b = None if bias is None else unwrap(bias)
    if transposed:
        return finish(_from_2d(_transposed(_wide(x), _wide(w), _wide(b), p), nd), out)
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
    if nd == 5:
        return out, _params_3d(unwrap(input), unwrap(weight), _opt(bias), *args[3:])
    return out, _params(_as_2d(unwrap(input), nd), _as_2d(unwrap(weight), nd), _opt(bias),
                        *args[3:], nd)


def _params_3d(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The Conv3dParams of a 3-d convolution (transposed: of the one it transposes, in float32
    for 16-bit operands, as its passes run on float32 copies), checked."""
    stride, padding, dilation = (tuple(v) for v in (stride, padding, dilation))
    if not transposed:
        return volume.make_params(x, w, bias, stride, padding, dilation, groups)
    p = volume.transposed_params(x, w, bias, stride, padding, tuple(output_padding), groups,
                                 dilation)
    return p._replace(dtype=dt.float32) if common.is_half(x) else p


def _transposed(x, w, bias, p):
    """conv_transpose2d's output: the input gradient pass of the convolution p at output
    gradient x (ConvTranspose2dFunction's forward), plus the bias."""
    shape, x = (p.n, p.c, p.h, p.w), padded_input(x, p)
    # NOTE: the pass reads its input argument for dtype, device and memory format alone
    y = conv_function.backward(conv_function._shaped_like(x, shape), w, x, p, "auto", True,
                               False)[0]
    if bias is not None:
        ew.binary("add", y, bias.reshape(1, -1, 1, 1), out=y)
    return y


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
    if nd == 5:
        return _backward_3d(key, args)
    operands = [_as_2d(unwrap(t), nd) for t in (input, weight, grad_output)]
    dtypes = [t.dtype for t in operands]  # of the input, weight and bias gradients
    # the backward kernels read 32- or 64-bit floats: 16-bit operands go through float32 copies
    x, w, g = map(_wide, operands)
    if p is None:
        if transposed:  # torch's checks of the gradient's shape
            meta_result(_aten.convolution_backward.default, args, {})
        p = _CONV_BACKWARD_PLANS.put(key, _params(x, w, None, *args[4:10], nd))
    # cltensor's own backward passes (each by its dispatched algorithm), no forward recomputed
    grads = (_transposed_grads if transposed else conv_function.backward)(
        x, w, g, p, "auto", *map(bool, output_mask))
    return tuple(None if r is None else wrap(_as(_from_2d(r, nd), d))
                 for r, d in zip(grads, dtypes))


def _backward_3d(key, args):
    """convolution_backward of a 3-d convolution, plain or transposed, by conv3d's passes;
    16-bit operands through float32 copies as the 2-d ones."""
    grad_output, input, weight, _, _, _, _, transposed, _, _, output_mask = args
    operands = [unwrap(t) for t in (input, weight, grad_output)]
    dtypes = [t.dtype for t in operands]
    x, w, g = map(_wide, operands)
    p = _CONV_BACKWARD_PLANS.get(key)
    if p is None:
        if transposed:  # torch's checks of the gradient's shape
            meta_result(_aten.convolution_backward.default, args, {})
        p = _CONV_BACKWARD_PLANS.put(key, _params_3d(x, w, None, *args[4:10]))
    grads = (volume.transposed_backward if transposed else volume.backward)(
        x, w, g, p, "auto", *map(bool, output_mask))
    return tuple(None if r is None else wrap(_as(r, d)) for r, d in zip(grads, dtypes))


def backward_through_relu(args, g, relu_y):
    """convolution_backward on args whose grad_output is the gradient g taken back through a
    ReLU of output relu_y (ClTensors of one shape, float32/64): relu_grad.py's fused form,
    the mask applied inside the backward passes; None for a transposed, 3-d, 16-bit or
    unplanned problem (the general kernel then runs)."""
    grad_output, input, weight, *_, transposed, output_padding, groups, output_mask = args
    if (transposed or input.dim() == 5 or input.dtype is not grad_output.dtype or
            weight.dtype is not input.dtype):
        return None
    key = signature(*args)
    p = _CONV_BACKWARD_PLANS.get(key)
    if p is None:  # the first call of a signature takes the general path, which plans it
        return None
    nd = input.dim()
    x, w = _as_2d(unwrap(input), nd), _as_2d(unwrap(weight), nd)
    grads = conv_function.backward(x, w, _as_2d(g, nd), p, "auto", *map(bool, output_mask),
                                   relu_y=_as_2d(relu_y, nd))
    return tuple(None if r is None else wrap(_as(_from_2d(r, nd), x.dtype)) for r in grads)


def _transposed_grads(x, w, gy, p, algo, need_x, need_w, need_b):
    """(input, weight, bias) gradients of conv_transpose2d at output gradient gy, as
    ConvTranspose2dFunction's backward takes them: the input's is the convolution p of gy, the
    weight's that convolution's weight gradient (gy its input, x its output's gradient), the
    bias's gy summed."""
    gx = gw = gb = None
    if need_x:
        gx = common.empty(p.out_shape, x, common.layout_of(x))
        if p.n:
            name = dispatch.choose(p, x.device, "forward", algo, (gy, w, None))
            conv_function.forward_into(name, gy, w, None, p, gx)
        gx = gx[:, :, :x.shape[2], :x.shape[3]]  # without padded_input's rows and columns
    if need_w:
        gw = conv_function.backward(gy, w, padded_input(x, p), p, algo, False, True)[1]
    if need_b:
        gb = common.bias_grad(gy)
    return gx, gw, gb


def _as(t, dtype):
    """t in dtype, dense."""
    return (t if t.dtype is dtype else t.to(dtype)).contiguous()


# ---- sliding blocks: im2col, col2im (F.unfold, F.fold) and Tensor.unfold's gradient ----------
def _computable(x, op):
    """x in a dtype cltensor's unfold and fold compute in: float32 and float64 as they are,
    16-bit floats and bool as float32 (exact; finish() casts the result back). torch's
    kernels take no integer tensors."""
    if x.dtype in (dt.float32, dt.float64):
        return x
    if x.dtype in dt.HALF_TYPES or x.dtype is dt.bool_:
        return x.to(dt.float32)
    raise NotImplementedError(f"{op}: not implemented for {x.dtype} on the opencl device "
                              f"(torch's kernels take floating point and bool tensors)")


def _sliding(name, fn):
    """im2col / col2im and their out= forms: torch's Meta checks and shape, cltensor's fn
    (its arguments in aten's order after the input)."""
    op = getattr(_aten, name).default

    def kernel(self, *sizes):
        out = meta_result(op, (self, *sizes), {})
        return finish(fn(_computable(unwrap(self), name), *map(tuple, sizes)), out)
    aten(name)(kernel)
    with_out(f"{name}.out", kernel)


_sliding("im2col", F.unfold)
_sliding("col2im", F.fold)


@aten("unfold_backward")
def unfold_backward(grad_in, input_sizes, dim, size, step):
    """The gradient of Tensor.unfold(dim, size, step): each window's element j of window i
    added into position i * step + j along dim (deterministically, where windows overlap)."""
    args = (grad_in, input_sizes, dim, size, step)
    out = meta_result(_aten.unfold_backward.default, args, {})
    g = _computable(unwrap(grad_in), "unfold_backward")
    shape = tuple(out.shape)
    if not shape:  # a 0-d input: one window of its one element, or none
        return finish(g.sum(), out)
    d, n = dim % len(shape), g.shape[dim % len(shape)]
    order = (*range(d + 1), g.ndim - 1, *range(d + 1, g.ndim - 1))  # window elements after i
    rows = g.permute(*order).contiguous().reshape(shape[:d] + (n * size,) + shape[d + 1:])
    at = (np.arange(n)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    zeros = ClTensor.empty_on(shape, g.dtype, g.device).zero_()
    return finish(index_add_(zeros, d, from_numpy(at, g.device), rows), out)


with_out("unfold_backward.out", unfold_backward)
