"""conv3d and conv_transpose3d: the 3-d convolution as one 2-d convolution whose channels
are the depth taps.

For x (N, C, D, H, W) and weight (Co, C / groups, Kd, Kh, Kw), the columns
col[n*Do + od][c*Kd + kd] = x[n][c][od*sd + kd*dd - pd] (zero outside the depth; one gather
kernel, cl_kernels/conv_depth.cl) form N*Do images of C*Kd channels, and the weight viewed as
(Co, C / groups * Kd, Kh, Kw) convolves them in height and width by conv2d, whose dispatch
picks the algorithm (im2col, implicit GEMM, Winograd...). Its (N*Do, Co, Ho, Wo) result,
transposed, is the output. The backward runs conv2d's passes on the same columns; the input
gradient comes back from the columns' gradient by the gather's adjoint (depth_scatter). The
launches do not grow with the depth: gather, conv2d, one transposing copy.
conv_transpose3d runs the same steps the other way: conv_transpose2d of the depth slices into
columns, then the gather's adjoint.
"""

from typing import NamedTuple

import numpy as np

from .. import autograd, caches
from ..autograd.namespace import pad
from ..program import ctype_of, remember
from ..tensor import ClTensor
from . import common
from . import function as conv_function
from .function import ConvTranspose2dFunction, ConvWeightGrad, conv2d
from .params import ConvParams, _positive_int, check_tensors
from .transposed import output_size

KERNEL_FILE = "conv_depth.cl"
# stride, dilation, padding: one int for the three dims, or (d, h, w)
Triple = int | tuple[int, int, int]
Padding3 = int | tuple[int, int, int] | str


class Conv3dParams(NamedTuple):
    """One 3-d convolution problem: (N, C, D, H, W) input, (Co, C / groups, Kd, Kh, Kw) weight,
    padding front/back (depth), top/bottom, left/right."""
    n: int
    c: int
    d: int
    h: int
    w: int
    co: int
    kd: int
    kh: int
    kw: int
    sd: int
    sh: int
    sw: int
    pf: int
    pk: int
    pt: int
    pb: int
    pl: int
    pr: int
    dd: int
    dh: int
    dw: int
    groups: int
    dtype: np.dtype

    @property
    def do(self):
        return (self.d + self.pf + self.pk - self.dd * (self.kd - 1) - 1) // self.sd + 1

    @property
    def cg(self):
        return self.c // self.groups

    @property
    def out_shape(self):
        p = self.plane()
        return (self.n, self.co, self.do, p.ho, p.wo)

    def plane(self, dtype=None) -> ConvParams:
        """The 2-d convolution of the columns (N*Do, C*Kd, H, W) by (Co, Cg*Kd, Kh, Kw)."""
        return ConvParams(self.n * self.do, self.c * self.kd, self.h, self.w, self.co, self.kh,
                          self.kw, self.sh, self.sw, self.pt, self.pb, self.pl, self.pr,
                          self.dh, self.dw, self.groups, dtype or self.dtype)

    def plane_args(self):
        """conv2d's (stride, padding as (left, right, top, bottom), dilation)."""
        return (self.sh, self.sw), (self.pl, self.pr, self.pt, self.pb), (self.dh, self.dw)


def _triple(value, name, minimum, op):
    """An int or three ints, each at least `minimum`, as a triple."""
    vals = tuple(value) if isinstance(value, (tuple, list)) else (value,) * 3
    if len(vals) != 3 or not all(_positive_int(v) for v in vals):
        raise TypeError(f"{op}: {name} must be an int or a tuple of 3 ints, got {value!r}")
    if any(v < minimum for v in vals):
        raise ValueError(f"{op}: {name} must be {'positive' if minimum else 'non-negative'}, "
                         f"got {value!r}")
    return tuple(int(v) for v in vals)


def _pads(padding, kernel, stride, dilation, op):
    """((front, back), (top, bottom), (left, right)) from an int, a triple, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a tuple of 3 "
                             f"ints, got {padding!r}")
        if padding == "valid":
            return ((0, 0),) * 3
        if stride != (1, 1, 1):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    return tuple((v, v) for v in _triple(padding, "padding", 0, op))


def make_params(input, weight, bias, stride, padding, dilation, groups, op="conv3d"):
    """Check conv3d's arguments (input already 5-d) and return its Conv3dParams."""
    check_tensors(input, weight, bias, op, "DHW")
    key = (input.shape, weight.shape, None if bias is None else bias.shape, input.dtype,
           _hashable(stride), _hashable(padding), _hashable(dilation), _hashable(groups), op)
    p = _params.get(key)
    if p is None:
        p = _make_params(input, weight, bias, stride, padding, dilation, groups, op)
        remember(_params, key, p)
    return p


# make_params' memo: shapes, dtype and the arguments (with their types) -> Conv3dParams
_params = caches.register("conv.volume.params", {})


def _hashable(v):
    """v keyed with its type (True must not pass as 1), lists as tuples."""
    return (type(v), tuple(map(_hashable, v)) if isinstance(v, (list, tuple)) else v)


def _make_params(input, weight, bias, stride, padding, dilation, groups, op):
    n, c, d, h, w = (int(v) for v in input.shape)
    co, cg, kd, kh, kw = (int(v) for v in weight.shape)
    if not _positive_int(groups) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    stride = _triple(stride, "stride", 1, op)
    dilation = _triple(dilation, "dilation", 1, op)
    pads = _pads(padding, (kd, kh, kw), stride, dilation, op)
    if min(co, cg, kd, kh, kw) == 0:
        raise ValueError(f"{op}: the weight has an empty dimension: {tuple(weight.shape)}")
    if co % groups:
        raise ValueError(f"{op}: groups={groups} does not divide the weight's {co} output "
                         f"channels (weight shape {tuple(weight.shape)})")
    if c % groups:
        raise ValueError(f"{op}: groups={groups} does not divide the input's {c} channels "
                         f"(input shape {tuple(input.shape)})")
    if c != cg * groups:
        raise ValueError(f"{op}: input of shape {tuple(input.shape)} has {c} channels, weight of "
                         f"shape {tuple(weight.shape)} expects {cg * groups} ({cg} per group x "
                         f"{groups} groups)")
    if bias is not None and tuple(bias.shape) != (co,):
        raise ValueError(f"{op}: bias must have shape ({co},), got {tuple(bias.shape)}")
    eff = [dl * (k - 1) + 1 for dl, k in zip(dilation, (kd, kh, kw))]
    padded = [s + a + b for s, (a, b) in zip((d, h, w), pads)]
    if any(e > s for e, s in zip(eff, padded)):
        raise ValueError(f"{op}: kernel size {'x'.join(map(str, eff))} (dilated) is larger than "
                         f"the padded input {'x'.join(map(str, padded))} (input shape "
                         f"{tuple(input.shape)}, weight shape {tuple(weight.shape)})")
    return Conv3dParams(n, c, d, h, w, co, kd, kh, kw, *stride, *pads[0], *pads[1], *pads[2],
                        *dilation, int(groups), input.dtype)


# ---- the depth gather and its adjoint ------------------------------------------------------
def _defines(p, ctype):
    return {"T": ctype, "KD": p.kd, "SD": p.sd, "DD": p.dd, "PD": p.pf}


def _sizes(p):
    return [np.int32(v) for v in (p.n, p.c, p.d, p.h, p.w, p.do)]


def by_rows(device):
    """Whether the depth kernels run one work-item per row of W (CPUs: the index arithmetic
    once per row) rather than per element (coalesced accesses)."""
    return device.is_cpu


def gather(x: ClTensor, p: Conv3dParams) -> ClTensor:
    """The (N*Do, C*Kd, H, W) columns of the (N, C, D, H, W) view x."""
    cols = common.empty((p.n * p.do, p.c * p.kd, p.h, p.w), x)
    if cols.numel() == 0:
        return cols
    rows = by_rows(x.device)
    name = "depth_gather_rows" if rows else "depth_gather"
    # NOTE: a copy: 16-bit floats move as their bits (zero is all zero bits)
    kernel = common.get_kernel(x.device, KERNEL_FILE, name,
                               _defines(p, ctype_of(common.bits_dtype(x.dtype))))
    common.launch_1d(x.device, kernel, cols.numel() // (p.w if rows else 1), *_sizes(p),
                     x.storage.buf, *map(np.int64, (x.offset, *x.strides)), cols.storage.buf)
    return cols


def scatter(gcols: ClTensor, p: Conv3dParams) -> ClTensor:
    """The (N, C, D, H, W) input gradient from the columns' gradient gcols (any 4-d view)."""
    if common.is_half(gcols):  # summed in float32, as conv_depth.cl reads no 16-bit sums
        return scatter(gcols.to(common.compute_dtype(gcols.dtype)), p).to(gcols.dtype)
    gx = common.empty((p.n, p.c, p.d, p.h, p.w), gcols)
    if gx.numel() == 0:
        return gx
    rows = by_rows(gcols.device)
    kernel = common.get_kernel(gcols.device, KERNEL_FILE,
                               "depth_scatter_rows" if rows else "depth_scatter",
                               _defines(p, ctype_of(gcols.dtype)))
    common.launch_1d(gcols.device, kernel, gx.numel() // (p.w if rows else 1), *_sizes(p),
                     *common.view_args(gcols), gx.storage.buf)
    return gx


class DepthGather(autograd.Function):
    """gather's differentiable form: forward(ctx, x, p); its gradient is scatter's."""

    @staticmethod
    def forward(ctx, x, p):
        ctx.p = p
        return gather(x, p)

    @staticmethod
    def backward(ctx, g):
        return DepthScatter.apply(g, ctx.p), None


class DepthScatter(autograd.Function):
    """scatter's differentiable form: forward(ctx, gcols, p); its gradient is gather's."""

    @staticmethod
    def forward(ctx, g, p):
        ctx.p = p
        return scatter(g, p)

    @staticmethod
    def backward(ctx, g):
        return DepthGather.apply(g, ctx.p), None


# ---- the convolution -------------------------------------------------------------------------
class Conv3dFunction(autograd.Function):
    """The differentiable conv3d: forward(ctx, input, weight, bias, p, algo). It saves the
    input, not its Kd-fold columns: the backward gathers them again (one launch). Under
    create_graph=True the gradients come from recorded Functions (recorded_grads)."""

    @staticmethod
    def forward(ctx, x, w, bias, p, algo):
        ctx.save_for_backward(x, w)
        ctx.p, ctx.algo = p, algo
        return forward(x, w, bias, p, algo)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        if autograd.is_grad_enabled():
            return (*recorded_grads(x, w, gy, ctx.p, ctx.algo, needs), None, None)
        return (*backward(x, w, gy, ctx.p, ctx.algo, *needs), None, None)


def recorded_grads(x, w, gy, p, algo, needs):
    """(input, weight, bias) gradients of conv3d as Function.apply calls, so that
    create_graph=True records them; None where needs is False. The input's is the transposed
    convolution of gy, the weight's conv2d's ConvWeightGrad of the columns, the bias's gy
    summed."""
    need_x, need_w, need_b = needs
    gx = transposed_forward(gy, w, None, p, algo) if need_x else None
    gw = None
    if need_w:
        n, co, do, ho, wo = p.out_shape
        g2 = gy.permute(0, 2, 1, 3, 4).contiguous().reshape(n * do, co, ho, wo)
        w2 = w.detach().reshape(p.co, p.cg * p.kd, p.kh, p.kw)
        gw = ConvWeightGrad.apply(DepthGather.apply(x, p), g2, w2, p.plane(), algo)
        gw = gw.reshape(tuple(w.shape))
    gb = gy.sum((0, 2, 3, 4)) if need_b else None
    return gx, gw, gb


def forward(x, w, bias, p, algo="auto"):
    """conv3d's (N, Co, Do, Ho, Wo) output for checked params p (autograd would record the
    gather, conv2d and the transposition: Conv3dFunction runs it unrecorded)."""
    cols = DepthGather.apply(x, p)
    w2 = w.reshape(p.co, p.cg * p.kd, p.kh, p.kw)
    y2 = conv2d(cols, w2, bias, *p.plane_args(), p.groups, algo)
    n, co, do, ho, wo = p.out_shape
    return y2.reshape(n, do, co, ho, wo).permute(0, 2, 1, 3, 4).contiguous()


def backward(x, w, gout, p, algo="auto", need_x=True, need_w=True, need_b=False):
    """(input, weight, bias) gradients of conv3d at output gradient gout, each pass by conv2d's
    dispatch; None where not needed. Not recorded by autograd."""
    n, co, do, ho, wo = p.out_shape
    shape2 = (n * do, p.c * p.kd, p.h, p.w)
    # NOTE: the input-gradient pass reads its input for dtype, device and layout alone
    cols = gather(x, p) if need_w else common.strided(x, shape2, (0, 0, 0, 0))
    g2 = gout.permute(0, 2, 1, 3, 4).contiguous().reshape(n * do, co, ho, wo)
    w2 = w.reshape(p.co, p.cg * p.kd, p.kh, p.kw)
    gcols, gw2, gb = conv_function.backward(cols, w2, g2, p.plane(x.dtype), algo, need_x,
                                            need_w, need_b)
    gx = scatter(gcols, p) if need_x else None
    gw = gw2.reshape(tuple(w.shape)) if need_w else None
    return gx, gw, gb


def conv3d(input: ClTensor, weight: ClTensor, bias: ClTensor | None = None, stride: Triple = 1,
           padding: Padding3 = 0, dilation: Triple = 1, groups: int = 1,
           algo: str = "auto") -> ClTensor:
    """3-d convolution (cross-correlation, as in torch) over an (N, C, D, H, W) input.

    The depth taps are gathered as channels (Kd times the input's memory, gathered again for
    the backward) and convolved in height and width by one conv2d (see
    cltensor.conv.conv2d).

    Args:
        input: (N, C, D, H, W) or unbatched (C, D, H, W) float tensor (float32, float64,
            float16, bfloat16); any strides.
        weight: (Co, C / groups, Kd, Kh, Kw) tensor of the input's dtype and device.
        bias: optional (Co,) tensor.
        stride, dilation: an int or a triple (d, h, w), positive.
        padding: an int or a triple (d, h, w), non-negative, or 'valid' / 'same' (stride 1).
        groups: split the channels into this many independent convolutions.
        algo: conv2d's algorithm for the height and width ("auto": per device and shape).

    Returns:
        (N, Co, Do, Ho, Wo) tensor, Do = (D + 2 * padding - dilation * (Kd - 1) - 1) // stride
        + 1, Ho and Wo likewise.

    Example:
        >>> x = cltensor.randn(2, 4, 8, 16, 16)
        >>> w = cltensor.randn(8, 4, 3, 3, 3)
        >>> cltensor.nn.functional.conv3d(x, w, padding=1).shape
        (2, 8, 8, 16, 16)
    """
    unbatched = isinstance(input, ClTensor) and input.ndim == 4
    if unbatched:
        input = input.unsqueeze(0)
    p = make_params(input, weight, bias, stride, padding, dilation, groups)
    out = Conv3dFunction.apply(input, weight, bias, p, algo)
    return out.squeeze(0) if unbatched else out


# ---- the transposed convolution --------------------------------------------------------------
def conv_transpose3d(input: ClTensor, weight: ClTensor, bias: ClTensor | None = None,
                     stride: Triple = 1, padding: Triple = 0, output_padding: Triple = 0,
                     groups: int = 1, dilation: Triple = 1, algo: str = "auto") -> ClTensor:
    """3-d transposed convolution (torch.nn.functional.conv_transpose3d): the input gradient
    of the matching conv3d, run as conv_transpose2d of the depth columns and the gather's
    adjoint. 16-bit operands run through float32 copies.

    Args:
        input: (N, Cin, D, H, W) or unbatched (Cin, D, H, W) float tensor.
        weight: (Cin, Cout / groups, Kd, Kh, Kw) tensor.
        bias: optional (Cout,) tensor.
        stride, dilation: an int or a triple, positive.
        padding: an int or a triple, non-negative.
        output_padding: an int or a triple added to one side of the output, smaller than the
            stride or the dilation.
        groups: split the channels into this many independent convolutions.
        algo: conv2d's algorithm for each pass over height and width.

    Returns:
        (N, Cout, Do, Ho, Wo), Do = (D - 1) * stride - 2 * padding + dilation * (Kd - 1)
        + output_padding + 1, Ho and Wo likewise.

    Example:
        >>> x = cltensor.randn(2, 8, 3, 7, 7)
        >>> w = cltensor.randn(8, 4, 3, 3, 3)
        >>> conv_transpose3d(x, w, stride=2, padding=1, output_padding=1).shape
        (2, 4, 6, 14, 14)
    """
    if common.is_half(input):  # float32 copies, as conv_transpose2d's passes read them
        return common.half_fallback(conv_transpose3d, input, weight, bias, stride, padding,
                                    output_padding, groups, dilation, algo)
    unbatched = isinstance(input, ClTensor) and input.ndim == 4
    if unbatched:
        input = input.unsqueeze(0)
    p = transposed_params(input, weight, bias, stride, padding, output_padding, groups,
                          dilation)
    out = transposed_forward(padded_input(input, p), weight, bias, p, algo)
    return out.squeeze(0) if unbatched else out


def transposed_params(x, w, bias, stride, padding, output_padding, groups, dilation):
    """The Conv3dParams of the convolution that conv_transpose3d's arguments transpose (its
    input of the transposed convolution's output shape), checked."""
    op = "conv_transpose3d"
    check_tensors(x, w, bias, op, "DHW")
    if not _positive_int(groups) or groups <= 0:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if 0 in w.shape or 0 in x.shape[1:]:
        raise ValueError(f"{op}: expected a weight and input (C, D, H, W) dims without zeros, "
                         f"got shapes {tuple(w.shape)} and {tuple(x.shape)}")
    if x.shape[1] != w.shape[0] or w.shape[0] % groups:
        raise ValueError(f"{op}: input of shape {tuple(x.shape)} has {x.shape[1]} channels, "
                         f"weight of shape {tuple(w.shape)} expects {w.shape[0]} (divisible by "
                         f"groups={groups})")
    s, d = _triple(stride, "stride", 1, op), _triple(dilation, "dilation", 1, op)
    pad, extra = _triple(padding, "padding", 0, op), _triple(output_padding, "output_padding",
                                                             0, op)
    size = output_size(op, x, w, s, pad, extra, d)
    cout = w.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (cout,):
        raise ValueError(f"{op}: bias must have shape ({cout},), got {tuple(bias.shape)}")
    # NOTE: make_params reads its input's shape, dtype and device alone: a stride-0 view
    shape = (x.shape[0], cout, *size)
    return make_params(common.strided(x, shape, (0,) * 5), w, None, s, pad, d, groups, op)


def padded_input(x, p):
    """x with zeros appended in depth, height and width up to the output size of the
    convolution p (larger than x where an output_padding reaches the stride; the elements
    beyond x take no part in the transposed convolution, and its gradient drops them)."""
    grow = [o - n for o, n in zip(p.out_shape[2:], x.shape[2:])]
    return pad(x, (0, grow[2], 0, grow[1], 0, grow[0])) if any(grow) else x


def transposed_forward(x, w, bias, p, algo="auto"):
    """conv_transpose3d's output for x padded to p's output shape; differentiable: the
    columns by conv_transpose2d of x's depth slices, then the gather's adjoint."""
    n, ci, do, ho, wo = p.out_shape
    x2 = x.permute(0, 2, 1, 3, 4).contiguous().reshape(n * do, ci, ho, wo)
    w2 = w.reshape(p.co, p.cg * p.kd, p.kh, p.kw)
    y = DepthScatter.apply(ConvTranspose2dFunction.apply(x2, w2, None, p.plane(), algo), p)
    return y if bias is None else y + bias.reshape(1, -1, 1, 1, 1)


def transposed_backward(x, w, gy, p, algo="auto", need_x=True, need_w=True, need_b=False):
    """(input, weight, bias) gradients of conv_transpose3d (x its unpadded input) at output
    gradient gy: the convolution p of gy, that convolution's weight gradient at gy with x as
    its output's gradient, gy summed. Not recorded by autograd."""
    gx = gw = gb = None
    if need_x:
        gx = forward(gy, w, None, p, algo)[:, :, :x.shape[2], :x.shape[3], :x.shape[4]]
    if need_w:
        gw = backward(gy, w, padded_input(x, p), p, algo, False, True)[1]
    if need_b:
        gb = gy.sum((0, 2, 3, 4))
    return gx, gw, gb
