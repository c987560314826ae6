"""linear and bilinear: the affine maps of nn.Linear and nn.Bilinear."""

from ...autograd import Function
from ...autograd.functions.common import _reduce_to
from ...autograd.functions.matmul import _is_transposed, _mm_like
from ...autograd.namespace import addmm
from ...ops.gemm import gemm
from .activation import relu_grad
from .utils import _float_tensor, _loss_operand, _per_channel, _tensor

__all__ = ["bilinear", "linear"]


def linear(input, weight, bias=None, *, relu=False):
    """y = input @ weight.T + bias over the last dim (one GEMM with the bias fused, via addmm).

    Args:
        input: (*, in_features) floating tensor.
        weight: (out_features, in_features).
        bias: optional (out_features,).
        relu: also apply max(y, 0), NaN kept, as the GEMM stores (nn.Sequential fuses a Linear
            and the ReLU after it this way): relu(linear(...)) with one pass fewer.

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
    if relu:
        y = _LinearReLU.apply(x2, weight.T, bias)
    else:
        y = x2 @ weight.T if bias is None else addmm(bias, x2, weight.T)
    return y if input.ndim == 2 else y.reshape(input.shape[:-1] + (weight.shape[0],))


class _LinearReLU(Function):
    """relu(x @ wt + bias) by one GEMM with the ReLU applied as it stores: the kernel and the
    gradients of addmm (or of matmul without a bias) followed by relu, bit for bit."""

    @staticmethod
    def forward(ctx, x, wt, bias):
        y = gemm(x, wt, c=bias, relu=True)
        ctx.save_for_backward(x, wt, y)
        ctx.bias = bias
        return y

    @staticmethod
    def backward(ctx, g):
        x, wt, y = ctx.saved_tensors
        g = relu_grad(g, y)
        need_x, need_w, need_b = ctx.needs_input_grad
        gb = _reduce_to(g, ctx.bias) if need_b else None
        if ctx.bias is None:  # matmul's gradients
            return (g @ wt.mT if need_x else None), (x.mT @ g if need_w else None), None
        gx = _mm_like(g, wt.mT, _is_transposed(x)) if need_x else None
        gw = _mm_like(x.mT, g, _is_transposed(wt)) if need_w else None
        return gx, gw, gb


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
