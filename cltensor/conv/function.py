"""conv2d's and conv_transpose2d's autograd Functions (each the other's input gradient): the
algorithm of each pass is picked by dispatch.choose.

Under create_graph=True the gradients come from Functions instead (recorded_grads): the input's
is a transposed convolution, the weight's a ConvWeightGrad, so that they can be differentiated
again.
"""
from __future__ import annotations

from .. import autograd
from ..autograd.functions import _where
from ..ops import activation as act
from ..ops import elementwise as ew
from ..ops import norm
from ..tensor import CHANNELS_LAST, ClTensor
from . import common, dispatch, plans
from .params import Padding, Pair, make_params

ALGOS = ("auto",) + tuple(dispatch.ALGORITHMS)  # plus plug-ins' on the devices they serve


class Conv2dFunction(autograd.Function):
    """The differentiable convolution: forward(ctx, input, weight, bias, params, algo, relu),
    relu: max(., 0) applied to the result (saved for backward, as ReLU saves its output)."""

    @staticmethod
    def forward(ctx, input, weight, bias, p, algo, relu=False):
        if p.n:
            name = dispatch.choose(p, input.device, "forward", algo, (input, weight, bias))
            out, = plans.run(("forward", p, name, relu), (input, weight, bias), input.dtype,
                             lambda: _new_forward(name, input, weight, bias, p, relu),
                             (), *_replay_terms(input.device, name))
        else:
            out = common.empty(p.out_shape, input, common.layout_of(input))
        ctx.save_for_backward(input, weight, out if relu else None)
        ctx.p, ctx.algo = p, algo
        return out

    @staticmethod
    def backward(ctx, gout):
        x, w, y = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        if autograd.is_grad_enabled():
            gout = gout if y is None else _where(y <= 0, 0.0, gout)
            return (*recorded_grads(x, w, gout, ctx.p, ctx.algo, needs), None, None, None)
        gx, gw, gb = backward(x, w, gout, ctx.p, ctx.algo, *needs, relu_y=y)
        return gx, gw, gb, None, None, None


class ConvWeightGrad(autograd.Function):
    """forward(ctx, x, gout, w, p, algo): the weight gradient of the convolution p of x at
    output gradient gout (w gives its shape), as a Function, so that create_graph=True records
    it. Being bilinear, its gradient w.r.t. x is the transposed convolution of gout by the
    incoming gradient gw, and w.r.t. gout the convolution of x by gw."""

    @staticmethod
    def forward(ctx, x, gout, w, p, algo):
        ctx.save_for_backward(x, gout)
        ctx.p, ctx.algo = p, algo
        return backward(x, w, gout, p, algo, False, True)[1]

    @staticmethod
    def backward(ctx, gw):
        x, gout = ctx.saved_tensors
        need_x, need_gout = ctx.needs_input_grad[:2]
        gx = ConvTranspose2dFunction.apply(gout, gw, None, ctx.p, ctx.algo) if need_x else None
        ggout = Conv2dFunction.apply(x, gw, None, ctx.p, ctx.algo) if need_gout else None
        return gx, ggout, None, None, None


def recorded_grads(x, w, gout, p, algo, needs, transposed=False):
    """(input, weight, bias) gradients of conv2d (transposed: of conv_transpose2d, x its input
    and gout its output's gradient) as Function.apply calls, so that create_graph=True records
    them; None where needs is False. The convolution p runs from a to b (conv2d: x to gout;
    transposed: gout to x). The input's gradient takes gout back through w (conv2d: a
    transposed convolution; transposed: a convolution), the weight's is ConvWeightGrad(a, b),
    the bias's gout summed."""
    need_x, need_w, need_b = needs
    a, b = (gout, x) if transposed else (x, gout)
    data = Conv2dFunction if transposed else ConvTranspose2dFunction
    gx = data.apply(gout, w, None, p, algo) if need_x else None
    gw = ConvWeightGrad.apply(a, b, w.detach(), p, algo) if need_w else None
    gb = gout.sum((0, 2, 3)) if need_b else None
    return gx, gw, gb


def forward(algo, x, w, bias, p, out, relu=False):
    """out = the convolution by algorithm module `algo`, then max(., 0) with relu: as the
    result is stored where the algorithm says FUSES_RELU (cuDNN's fused convolution, bias and
    activation: no pass over the output, one launch fewer), else in place afterwards."""
    if relu and getattr(algo, "FUSES_RELU", False):
        return algo.forward(x, w, bias, p, out, relu=True)
    algo.forward(x, w, bias, p, out)
    if relu:
        act.relu(out, out=out)
    return out


def forward_into(name, x, w, bias, p, out, relu=False):
    """forward() by algorithm `name` into the given out, its launches replayed (conv/plans.py)
    for the next call with the same key and layouts, out's among them (the PyTorch device's
    deferred convolutions, whose outputs exist before their launch)."""
    if p.n == 0:
        return out

    def decide():
        forward(dispatch.algorithm(name, x.device), x, w, bias, p, out, relu)
        return ()  # no new tensors: out is the caller's
    plans.run(("forward_into", p, name, relu), (x, w, bias, out), x.dtype, decide, (),
              *_replay_terms(x.device, name))
    return out


def _new_forward(name, x, w, bias, p, relu):
    """(the convolution by algorithm `name` into a new tensor,)"""
    out = common.empty(p.out_shape, x, common.layout_of(x))
    forward(dispatch.algorithm(name, x.device), x, w, bias, p, out, relu)
    return (out,)


def backward(x, w, gout, p, algo, need_x, need_w, need_b=False, relu_y=None):
    """(input gradient, weight gradient, bias gradient) of a convolution, the first two each
    by its pass's algorithm; None for one not needed (the first layer of a network needs no
    input gradient). The bias gradient comes with the weight gradient where that algorithm
    folds it in (an optional backward_with_bias), else from a reduction of gout. relu_y: the
    output of a fused ReLU, through which gout is taken back first."""
    if p.n == 0:
        if relu_y is not None:
            gout = act.relu_backward(gout, relu_y)
        gw = ClTensor.empty_on(w.shape, w.dtype, w.device).zero_() if need_w else None
        gb = common.bias_grad(gout) if need_b else None
        return (common.empty(x.shape, x) if need_x else None), gw, gb
    passes = [("backward_data", need_x), ("backward_weight", need_w)]
    names = {ps: dispatch.choose(p, x.device, ps, algo, (x, w, gout)) for ps, need in passes
             if need}
    key = ("backward", p, tuple(names.items()), need_x, need_w, need_b)
    gx, gw, gb = plans.run(
        key, (x, w, gout, relu_y), x.dtype,
        lambda: _new_grads(x, w, gout, p, names, need_x, need_w, need_b, relu_y),
        common.bias_grad_buffers(x.device) if need_b else (),
        *_replay_terms(x.device, *names.values()))
    return gx, gw, gb


def _replay_terms(device, *names):
    """(replay, anchor) for plans.run: passes of built-in algorithms are replayed, and those of
    a plug-in's algorithm that says its passes are their launches (REPLAYABLE), keyed by its
    replay_anchor() (the state its launches were chosen from); not a mix of plug-ins'."""
    anchor = None
    for name in names:
        if name in dispatch.ALGORITHMS:
            continue
        algo = dispatch.algorithm(name, device)
        if not getattr(algo, "REPLAYABLE", False):
            return False, None
        mine = algo.replay_anchor()
        if anchor is not None and mine is not anchor:
            return False, None
        anchor = mine
    return True, anchor


def _new_grads(x, w, gout, p, names, need_x, need_w, need_b, relu_y):
    """backward()'s gradients by the algorithms `names` of its passes, gout taken back through
    relu_y's ReLU first (unless None): with the bias gradient in the same launch where the
    weight pass's algorithm does not fold that gradient in."""
    algo_of = {ps: dispatch.algorithm(name, x.device) for ps, name in names.items()}
    folded = need_w and hasattr(algo_of["backward_weight"], "backward_with_bias")
    mask = relu_y if _masks_relu(algo_of.values(), gout, relu_y, need_b and not folded) \
        else None
    if mask is None:
        gout, relu_gb = _through_relu(gout, relu_y, need_b and not folded)
    else:  # NOTE: the passes' kernels take gout back through the ReLU as they read it
        relu_gb = None
    need_b = need_b and relu_gb is None
    kw = {} if mask is None else {"relu_y": mask}

    def run(pass_, nx, nw):
        a = algo_of[pass_]
        if need_b and nw and hasattr(a, "backward_with_bias"):
            return a.backward_with_bias(x, w, gout, p, nx, nw, **kw)
        return (*a.backward(x, w, gout, p, nx, nw, **kw), None)

    if need_x and need_w and names["backward_data"] == names["backward_weight"]:
        gx, gw, gb = run("backward_data", True, True)
    else:
        gx = run("backward_data", True, False)[0] if need_x else None
        gw, gb = run("backward_weight", False, True)[1:] if need_w else (None, None)
    if need_b and gb is None:
        gb = common.bias_grad(gout) if mask is None else _masked_bias_grad(gout, mask)
    return gx, gw, relu_gb if relu_gb is not None else gb


def _masked_bias_grad(gout, y):
    """The bias gradient of gout taken back through the ReLU whose output is y (the passes
    mask gout themselves: the masked gradient is not written where one launch sums it)."""
    both = norm.relu_bias_grad(gout, y, masked_out=False)
    return both[1] if both is not None else common.bias_grad(act.relu_backward(gout, y))


def _masks_relu(algos, gout, y, unfolded_bias):
    """Whether the passes' algorithms take gout back through the fused ReLU whose output is y
    themselves (takes_relu_mask), saving relu_backward's pass: y laid out as gout but for the
    image stride (gout a channel slice of a concatenation's gradient), and no bias gradient
    that only a reduction of the masked gradient would give."""
    return (y is not None and not unfolded_bias and y.strides[1:] == gout.strides[1:] and
            y.dtype is gout.dtype and
            all(getattr(a, "takes_relu_mask", _no)(gout.device) for a in algos))


def _no(device):
    return False


def _through_relu(gout, y, with_bias):
    """(gout taken back through the fused ReLU whose output is y, or gout itself when y is
    None; with with_bias, the bias gradient where one launch makes both, else None)."""
    if y is None:
        return gout, None
    both = norm.relu_bias_grad(gout, y) if with_bias else None
    return both if both is not None else (act.relu_backward(gout, y), None)


def conv2d(input: ClTensor, weight: ClTensor, bias: ClTensor | None = None, stride: Pair = 1,
           padding: Padding = 0, dilation: Pair = 1, groups: int = 1, algo: str = "auto",
           relu: bool = False) -> ClTensor:
    """2-d convolution (cross-correlation, as in torch) over an (N, C, H, W) input.

    Args:
        input: (N, C, H, W) or unbatched (C, H, W) float32/float64 tensor; any strides. A
            channels_last input gives a channels_last output.
        weight: (Co, C / groups, Kh, Kw) tensor of the input's dtype and device.
        bias: optional (Co,) tensor.
        stride, dilation: an int or a pair (h, w), positive.
        padding: an int, a pair (h, w), a 4-tuple (left, right, top, bottom) for asymmetric
            padding, or 'valid' / 'same' (stride 1).
        groups: split the channels into this many independent convolutions.
        algo: "auto" (per device and shape; timed once per problem when
            cltensor.backends.benchmark is True), "im2col", "implicit_gemm", "winograd"
            (F(2x2, 3x3) or F(2x2, 5x5): 3x3 or 5x5 kernels, stride 1, dilation 1),
            "winograd_4x4" (F(4x4, ...), likewise), "gemm_1x1" (1x1, no padding),
            "s2d_winograd" (stride s > 1 in both dims, a kernel of 3x3 or 5x5 blocks of s x s,
            dilation 1, one group), or an algorithm of a plug-in that serves the device
            (cltensor.plugins()). A backward pass the algorithm lacks (a plug-in's, say) falls
            back to auto's choice.
        relu: also apply max(x, 0), NaN kept, as the result is stored (cuDNN's fused
            convolution, bias and activation; nn.Sequential fuses a Conv2d and the ReLU after
            it this way): relu(conv2d(...)) with one pass fewer over the output.

    Returns:
        (N, Co, Ho, Wo) tensor, Ho = (H + top + bottom - dilation*(Kh - 1) - 1) // stride + 1.

    Example:
        >>> x = cltensor.randn(8, 3, 32, 32)
        >>> w = cltensor.randn(16, 3, 3, 3)
        >>> cltensor.conv.conv2d(x, w, padding=1, algo="winograd").shape
        (8, 16, 32, 32)
    """
    if common.is_half(input) and not dispatch.reads_half(algo, input.device):  # docs/half.md
        return common.half_fallback(conv2d, input, weight, bias, stride, padding, dilation,
                                    groups, algo, relu)
    unbatched = isinstance(input, ClTensor) and input.ndim == 3
    if unbatched:
        input = input.unsqueeze(0)
    p = make_params(input, weight, bias, stride, padding, dilation, groups)
    dispatch.check_algo(algo, input.device)
    out = Conv2dFunction.apply(input, weight, bias, p, algo, bool(relu))
    return out.squeeze(0) if unbatched else out


class ConvTranspose2dFunction(autograd.Function):
    """forward(ctx, input, weight, bias, p, algo): p is the transposed convolution's ConvParams
    (its input the output of this function)."""

    @staticmethod
    def forward(ctx, x, w, bias, p, algo):
        shape = (p.n, p.c, p.h, p.w)
        if p.n:
            y = backward(_shaped_like(x, shape), w, x, p, algo, True, False)[0]
        else:
            y = common.empty(shape, x)
        if bias is not None:
            ew.binary("add", y, bias.reshape(1, -1, 1, 1), out=y)
        ctx.save_for_backward(x, w)
        ctx.p, ctx.algo = p, algo
        return y

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        p, algo = ctx.p, ctx.algo
        if autograd.is_grad_enabled():
            needs = ctx.needs_input_grad[:3]
            return (*recorded_grads(x, w, gy, p, algo, needs, transposed=True), None, None)
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx = gw = None
        if need_x:
            gx = common.empty(x.shape, x, common.layout_of(x))
            if p.n:
                name = dispatch.choose(p, x.device, "forward", algo, (gy, w, None))
                forward(dispatch.algorithm(name, x.device), gy, w, None, p, gx)
        if need_w:
            gw = backward(gy, w, x, p, algo, False, True)[1]
        gb = common.bias_grad(gy) if need_b else None
        return gx, gw, gb, None, None


def _shaped_like(x, shape):
    """A tensor of `shape` that stands for the transposed convolution's output where the input
    gradient pass reads its input for dtype, device and memory format only (conv/*.py): a
    stride-0 view of x's first element (no memory), or, for a channels_last x, an empty
    channels_last tensor (the pass's output takes its format)."""
    if common.layout_of(x) == CHANNELS_LAST:
        return common.empty(shape, x, CHANNELS_LAST)
    return x._view(shape, (0, 0, 0, 0))
