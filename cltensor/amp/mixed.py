"""linear under autocast with float32 parameters, without casting them: the GEMM reads the
16-bit input and the float32 weight and bias each in its own type (ops/gemm: TA, TB, TR), so
no 16-bit copy of the weight is made at every call or kept for the backward pass, and the
weight's gradient is summed straight into float32 (torch rounds it to the 16-bit dtype
first). Where a plug-in multiplies 16-bit operands itself (tensor cores), linear takes torch's
casts instead: a product of two 16-bit operands runs there at several times a mixed one's
rate."""
from .. import dtypes as dt
from ..autograd import Function
from ..ops import activation as act
from ..ops.gemm import gemm_into, multiplies_16bit
from ..ops.reduce import sum as sum_
from ..tensor import ClTensor


def applies(input, weight, bias):
    """Whether linear(input, weight, bias) can run mixed: float32 2-d weight and 1-d bias of
    matching sizes, a floating input other than float64, on a device without 16-bit tensor
    cores (anything else takes the casts, and their errors)."""
    tensors = [t for t in (input, weight, bias) if t is not None]
    if not all(isinstance(t, ClTensor) for t in tensors):
        return False
    return (weight.dtype is dt.float32 and weight.ndim == 2 and input.ndim >= 1 and
            input.dtype.is_floating_point and input.dtype is not dt.float64 and
            input.shape[-1] == weight.shape[1] and
            (bias is None or (bias.dtype is dt.float32 and bias.shape == (weight.shape[0],))) and
            len({t.device for t in tensors}) == 1 and not multiplies_16bit(weight.device))


def linear(input, weight, bias, relu, low):
    """F.linear's result in dtype `low` from input (cast to it) and the float32 weight and
    bias read in place."""
    x = input.to(low)
    x2 = x if x.ndim == 2 else x.reshape(-1, weight.shape[1])
    y = MixedLinear.apply(x2, weight, bias, bool(relu))
    return y if x.ndim == 2 else y.reshape(x.shape[:-1] + (weight.shape[0],))


class MixedLinear(Function):
    """act(x @ w^T + b) with x 16-bit and w, b float32; the result and x's gradient in x's
    dtype, w's and b's gradients float32."""

    @staticmethod
    def forward(ctx, x, w, b, relu):
        y = ClTensor.empty_on((x.shape[0], w.shape[0]), x.dtype, x.device)
        gemm_into(x, w.mT, y, col_bias=b, relu=relu)
        ctx.save_for_backward(x, w, y if relu else None)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, y = ctx.saved_tensors
        if y is not None:
            g = act.relu_backward(g, y)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx = gw = gb = None
        if need_x:
            gx = gemm_into(g, w, ClTensor.empty_on(x.shape, x.dtype, x.device))
        if need_w:
            gw = gemm_into(g.mT, x, ClTensor.empty_on(w.shape, dt.float32, w.device))
        if need_b:
            gb = sum_(g.to(dt.float32), dim=0)
        return gx, gw, gb, None
