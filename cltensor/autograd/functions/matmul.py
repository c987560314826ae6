"""Gradients of ops/matmul.py's ops: matmul (mm, bmm, mv, dot), addmm and baddbmm."""
from ...ops.elementwise import broadcast_shapes
from ...ops.gemm import gemm_into
from ...tensor import ClTensor
from ..engine import Function, is_grad_enabled, sum_to_shape
from .common import _op, _reduce_to, _scaled


class Matmul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _op("matmul")(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        out2 = broadcast_shapes(a2.shape[:-2], b2.shape[:-2]) + (a2.shape[-2], b2.shape[-1])
        g2 = g.reshape(out2)  # 1-d operands: the dims matmul removed come back as size 1
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = sum_to_shape(g2 @ b2.mT, a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = sum_to_shape(a2.mT @ g2, b2.shape).reshape(b.shape)
        return ga, gb


def _is_transposed(t):
    """A matrix (or batch) stored column-major: its last two dims are a transposed view."""
    return t.ndim >= 2 and t.strides[-2] == 1 and t.strides[-1] != 1 and t.shape[-2] > 1


def _mm_like(a, b, transposed):
    """a @ b, computed transposed when the input it is the gradient of was a transposed view
    (a linear layer's weight.T), so that the gradient reaches the leaf without a copy."""
    return _mm(b.mT, a.mT).mT if transposed else _mm(a, b)


def _mm(a, b):
    """a @ b; two matrices of one dtype outside grad mode (a backward's products, checked by
    the forward) go to the GEMM engine without matmul's checks and dispatch."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype is not b.dtype or is_grad_enabled():
        return a @ b
    return gemm_into(a, b, ClTensor.empty_on((a.shape[0], b.shape[1]), a.dtype, a.device))


class Addmm(Function):
    """beta * input + alpha * (m1 @ m2), also for baddbmm's batched form."""

    @staticmethod
    def forward(ctx, inp, m1, m2, beta=1, alpha=1, batched=False):
        ctx.save_for_backward(m1 if ctx.needs_input_grad[2] else None,
                              m2 if ctx.needs_input_grad[1] else None)
        ctx.inp, ctx.beta, ctx.alpha = inp, beta, alpha
        ctx.transposed = (_is_transposed(m1), _is_transposed(m2))
        fn = _op("baddbmm" if batched else "addmm")
        return fn(inp, m1, m2, beta=beta, alpha=alpha)

    @staticmethod
    def backward(ctx, g):
        m1, m2 = ctx.saved_tensors
        gi = _reduce_to(_scaled(g, ctx.beta), ctx.inp) if ctx.needs_input_grad[0] else None
        t1, t2 = ctx.transposed
        g1 = _scaled(_mm_like(g, m2.mT, t1), ctx.alpha) if ctx.needs_input_grad[1] else None
        g2 = _scaled(_mm_like(m1.mT, g, t2), ctx.alpha) if ctx.needs_input_grad[2] else None
        return gi, g1, g2, None, None, None


class Baddbmm(Addmm):
    @staticmethod
    def forward(ctx, inp, b1, b2, beta=1, alpha=1):
        return Addmm.forward(ctx, inp, b1, b2, beta, alpha, batched=True)
