"""Recurrent cells and two layer ops on the opencl device: the fused LSTM and GRU cells that
torch's lstm/gru composites call for accelerators, their backwards, channel_shuffle and rrelu.

The cells follow torch's CUDA kernels (aten/src/ATen/native/cuda/RNN.cu): the LSTM workspace
holds the activated gates (i, f, g, o), the GRU workspace (r, z, n, hx, hn + b_hn); each piece
is one generated elementwise launch writing a slice, computed in float32 for 16-bit dtypes."""
import torch

from .. import dtypes as dt
from ..ops import elementwise as ew
from ..tensor import ClTensor
from ._backend import aten, np_dtype, unwrap, wrap
from .fallback import cpu_fallback
from .math_ops import check_devices, finish, meta_result, operand, with_out

_aten = torch.ops.aten
_SIGMOID = "1 / (1 + exp(-({})))"


def _launch(expr, out, compute, **operands):
    """out[...] = expr over the named operands (ClTensors broadcast to out, or numbers), computed
    in `compute`; one launch of a generated elementwise kernel."""
    names = list(operands)
    return ew.user_elementwise(expr, [operands[n] for n in names], names, out.dtype, compute,
                               out=out)


def _compute_dtype(tensors, name):
    """The dtype the cells compute in (float32 for 16-bit), after torch's dtype checks: floating
    operands, all of one dtype."""
    first = tensors[0].dtype
    if not first.is_floating_point:
        raise NotImplementedError(f'"{name}" not implemented for \'{_short(first)}\'')
    for t in tensors[1:]:
        if t is not None and t.dtype != first:
            raise RuntimeError(f"{name}: expected scalar type {_short(first)} but found "
                               f"{_short(t.dtype)}")
    return dt.float64 if first == torch.float64 else dt.float32


def _short(dtype):
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half",
            torch.bfloat16: "BFloat16", torch.int64: "Long", torch.int32: "Int",
            torch.bool: "Bool"}.get(dtype, str(dtype))


def _empty(shape, dtype, like):
    return ClTensor.empty_on(tuple(shape), dtype, like.device)


def _slices(x, k):
    """x (rows, k * h) as its k column blocks of width h."""
    h = x.shape[1] // k
    return [x[:, j * h:(j + 1) * h] for j in range(k)]


def _bias(b, compute):
    """A bias vector as a ClTensor in the computing dtype, or 0.0 when absent."""
    return 0.0 if b is None else operand(b, compute)


def _cols(v, lo, hi):
    """Columns lo:hi of gates or of a bias; a number (an absent bias) stays as it is."""
    return v if isinstance(v, float) else v[..., lo:hi]


def _check_dim(t, ndim, arg, pos, fn):
    if t.dim() != ndim:
        raise RuntimeError(f"Expected {ndim}-dimensional tensor, but got {t.dim()}-dimensional "
                           f"tensor for argument #{pos} '{arg}' (while checking arguments for {fn})")


def _check_sizes(input_gates, hidden_gates, hx, input_bias, hidden_bias, factor, fn):
    """torch's checkSizes of the fused cells (factor gates a cell), then its device check."""
    _check_dim(input_gates, 2, "input_gates", 1, fn)
    if input_gates.shape != hidden_gates.shape:
        raise RuntimeError(f"Expected tensor for argument #1 'input_gates' to have the same size "
                           f"as tensor for argument #2 'hidden_gates'; but {list(input_gates.shape)}"
                           f" does not equal {list(hidden_gates.shape)} (while checking arguments "
                           f"for {fn})")
    n = input_gates.shape[1]
    if input_bias is not None:
        _check_dim(input_bias, 1, "input_bias", 3, fn)
        if input_bias.numel() != n or hidden_bias is None or hidden_bias.shape != input_bias.shape:
            raise RuntimeError(f"{fn}: the biases must both have {n} elements")
    _check_dim(hx, 2, "prev_hidden", 5, fn)
    if hx.numel() != input_gates.shape[0] * n // factor or n % factor:
        raise RuntimeError(f"Expected tensor for argument #5 'prev_hidden' to have "
                           f"{input_gates.shape[0] * n // factor} elements; but it actually has "
                           f"{hx.numel()} elements (while checking arguments for {fn})")
    check_devices((input_gates, hidden_gates, input_bias, hidden_bias, hx), {},
                  getattr(_aten, fn).default)


def _result(t, dtype):
    """ClTensor t as an opencl tensor of cltensor dtype `dtype`."""
    return wrap(t if t.dtype is dtype else t.to(dtype))


# ---- LSTM -------------------------------------------------------------------------------------
@aten("_thnn_fused_lstm_cell")
def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """(hy, cy, workspace): gates i, f, g, o from input_gates + hidden_gates (+ biases), cy = f * cx
    + i * g, hy = o * tanh(cy); the workspace keeps the activated gates for the backward."""
    args = (input_gates, hidden_gates, cx, input_bias, hidden_bias)
    # NOTE: torch's Meta kernel of this op fails on absent biases, so the checks are written here
    _check_sizes(*args, 4, "_thnn_fused_lstm_cell")
    compute = _compute_dtype(args, "_thnn_fused_lstm_cell")
    a, b = operand(input_gates, compute), operand(hidden_gates, compute)
    rows, h = a.shape[0], a.shape[1] // 4
    c = operand(cx, compute).reshape(rows, h)  # torch reads cx by its elements
    ib, hb = _bias(input_bias, compute), _bias(hidden_bias, compute)
    ws = _empty(a.shape, compute, a)
    _launch(_SIGMOID.format("a + b + c + d"), ws, compute, a=a, b=b, c=ib, d=hb)
    i, f, g, o = _slices(ws, 4)
    _launch("tanh(a + b + c + d)", g, compute, a=_cols(a, 2 * h, 3 * h), b=_cols(b, 2 * h, 3 * h),
            c=_cols(ib, 2 * h, 3 * h), d=_cols(hb, 2 * h, 3 * h))
    cy = _launch("f * c + i * g", _empty(c.shape, compute, a), compute, f=f, c=c, i=i, g=g)
    hy = _launch("o * tanh(c)", _empty(c.shape, compute, a), compute, o=o, c=cy)
    dtype = np_dtype(cx.dtype, "_thnn_fused_lstm_cell")
    return tuple(_result(t, dtype) for t in (hy.reshape(*cx.shape), cy.reshape(*cx.shape), ws))


@aten("_thnn_fused_lstm_cell_backward_impl")
def fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """(grad_gates, grad_cx, grad_bias) as torch's CUDA kernel; a missing grad_hy or grad_cy
    counts as zeros, and both missing give no gradients."""
    args = (grad_hy, grad_cy, cx, cy, workspace, has_bias)
    metas = meta_result(_aten._thnn_fused_lstm_cell_backward_impl.default, args, {})
    if grad_hy is None and grad_cy is None:
        return None, None, None
    gates_m, gcx_m, gb_m = metas
    defined = grad_hy if grad_hy is not None else grad_cy
    compute = _compute_dtype((workspace, defined, cx, cy), "_thnn_fused_lstm_cell_backward")
    shape = tuple(cx.shape)
    ghy = 0.0 if grad_hy is None else operand(grad_hy, compute)
    gcy = 0.0 if grad_cy is None else operand(grad_cy, compute)
    c0, c1 = operand(cx, compute), operand(cy, compute)
    ws = operand(workspace, compute).reshape(shape[0], 4 * shape[1])
    i, f, g, o = _slices(ws, 4)
    gc = _launch("h * o * (1 - tanh(c) * tanh(c)) + d", _empty(shape, compute, ws), compute,
                 h=ghy, o=o, c=c1, d=gcy)
    gates = _empty(ws.shape, compute, ws)
    gi, gf, gg, go = _slices(gates, 4)
    _launch("e * g * (1 - i) * i", gi, compute, e=gc, g=g, i=i)
    _launch("e * x * (1 - f) * f", gf, compute, e=gc, x=c0, f=f)
    _launch("e * i * (1 - g * g)", gg, compute, e=gc, i=i, g=g)
    _launch("h * tanh(c) * (1 - o) * o", go, compute, h=ghy, c=c1, o=o)
    gcx = _launch("e * f", _empty(shape, compute, ws), compute, e=gc, f=f)
    bias = finish(gates.sum(dim=0), gb_m) if has_bias else None
    return finish(gates, gates_m), finish(gcx, gcx_m), bias


# ---- GRU --------------------------------------------------------------------------------------
@aten("_thnn_fused_gru_cell")
def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """(hy, workspace): r, z = sigmoid(i + h + biases), n = tanh(i_n + b_in + r * (h_n + b_hn)),
    hy = n + z * (hx - n); the workspace holds (r, z, n, hx, h_n + b_hn)."""
    args = (input_gates, hidden_gates, hx, input_bias, hidden_bias)
    _check_sizes(*args, 3, "_thnn_fused_gru_cell")
    compute = _compute_dtype(args, "_thnn_fused_gru_cell")
    a, b = operand(input_gates, compute), operand(hidden_gates, compute)
    rows, h = a.shape[0], a.shape[1] // 3
    x = operand(hx, compute).reshape(rows, h)
    ib, hb = _bias(input_bias, compute), _bias(hidden_bias, compute)
    ws = _empty((rows, 5 * h), compute, a)
    r, z, n, wx, hn = _slices(ws, 5)
    rz, new = (0, 2 * h), (2 * h, 3 * h)  # r and z in one launch, then the new gate
    _launch(_SIGMOID.format("a + b + c + d"), ws[:, :2 * h], compute, a=_cols(a, *rz),
            b=_cols(b, *rz), c=_cols(ib, *rz), d=_cols(hb, *rz))
    _launch("a + b", hn, compute, a=_cols(b, *new), b=_cols(hb, *new))
    _launch("tanh(a + b + r * n)", n, compute, a=_cols(a, *new), b=_cols(ib, *new), r=r, n=hn)
    wx.copy_(x)
    hy = _launch("n + z * (x - n)", _empty((rows, h), compute, a), compute, n=n, z=z, x=x)
    dtype = np_dtype(hx.dtype, "_thnn_fused_gru_cell")
    return _result(hy.reshape(*hx.shape), dtype), _result(ws, dtype)


@aten("_thnn_fused_gru_cell_backward")
def fused_gru_cell_backward(grad_hy, workspace, has_bias):
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)."""
    fn = "fused_gru_cell_backward"
    _check_dim(grad_hy, 2, "grad_hy", 1, fn)
    want = [grad_hy.shape[0], grad_hy.shape[1] * 5]
    if list(workspace.shape) != want:
        raise RuntimeError(f"Expected tensor for argument #2 'workspace' to have size {want}, "
                           f"but got size {list(workspace.shape)} (while checking arguments for "
                           f"{fn})")
    check_devices((grad_hy, workspace), {}, _aten._thnn_fused_gru_cell_backward.default)
    compute = _compute_dtype((grad_hy, workspace), "_thnn_fused_gru_cell_backward")
    go, ws = operand(grad_hy, compute), operand(workspace, compute)
    r, z, n, x, hn = _slices(ws, 5)
    rows, h = go.shape
    gin_, ghid = _empty((rows, 3 * h), compute, ws), _empty((rows, 3 * h), compute, ws)
    gr, gz, gn = _slices(gin_, 3)
    _launch("g * (1 - z) * (1 - n * n)", gn, compute, g=go, z=z, n=n)
    _launch("g * (x - n) * (1 - z) * z", gz, compute, g=go, x=x, n=n, z=z)
    _launch("e * h * (1 - r) * r", gr, compute, e=gn, h=hn, r=r)
    ghid[:, :2 * h].copy_(gin_[:, :2 * h])
    _launch("e * r", ghid[:, 2 * h:], compute, e=gn, r=r)
    ghx = _launch("g * z", _empty((rows, h), compute, ws), compute, g=go, z=z)
    out = [gin_, ghid, ghx] + ([gin_.sum(dim=0), ghid.sum(dim=0)] if has_bias else [None, None])
    dtype = np_dtype(workspace.dtype, fn)
    return tuple(None if t is None else _result(t, dtype) for t in out)


# ---- channel_shuffle and rrelu ------------------------------------------------------------------
@aten("channel_shuffle", "native_channel_shuffle")
def channel_shuffle(self, groups):
    """Channels (dim 1) seen as (groups, C / groups), transposed: ShuffleNet's shuffle."""
    out = meta_result(_aten.channel_shuffle.default, (self, groups), {})
    x = unwrap(self)
    n, c, rest = x.shape[0], x.shape[1], tuple(x.shape[2:])
    y = x.reshape(n, groups, c // groups, *rest).transpose(1, 2).contiguous()
    return finish(y.reshape(*x.shape), out)


with_out("channel_shuffle.out", channel_shuffle)
_RRELU = _aten.rrelu_with_noise.default


def _check_rrelu(self, noise, lower, upper, training):
    """torch's checks of rrelu_with_noise (the CPU kernel's; its Meta kernel has none)."""
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f'"rrelu_with_noise" not implemented for \'{_short(self.dtype)}\'')
    if noise.shape != self.shape:
        raise RuntimeError(f"noise tensor shape must match self tensor shape. Got self.shape = "
                           f"{list(self.shape)} noise.shape = {list(noise.shape)}")
    if noise.dtype != self.dtype:
        raise RuntimeError(f"expected scalar type {_short(self.dtype)} but found "
                           f"{_short(noise.dtype)}")
    if training and not float(lower) <= float(upper):
        raise RuntimeError("Expected from <= to to be true, but got false.")


@aten("rrelu_with_noise")
def rrelu_with_noise(self, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    """Randomized leaky ReLU: in training, slopes uniform in [lower, upper) where self <= 0, kept in
    noise (1 elsewhere); in eval, leaky ReLU of slope (lower + upper) / 2, noise untouched."""
    out = meta_result(_RRELU, (self, noise, lower, upper, training), {})
    res = _empty(out.shape, np_dtype(out.dtype, "rrelu_with_noise"), unwrap(self))
    done = _rrelu(self, noise, lower, upper, training, generator, res)
    return wrap(res) if done is None else done


@aten("rrelu_with_noise_")
def rrelu_with_noise_(self, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    meta_result(_aten.rrelu_with_noise_.default, (self, noise, lower, upper, training), {})
    done = _rrelu(self, noise, lower, upper, training, generator, unwrap(self))
    return self if done is None else _aten.copy_(self, done)


def _rrelu(self, noise, lower, upper, training, generator, res):
    """rrelu of self written into ClTensor res (training: the slopes into noise, from the same
    draws), computed in float32 for 16-bit; the CPU's result instead for a torch.Generator."""
    _check_rrelu(self, noise, lower, upper, training)
    if training and generator is not None:  # a CPU generator: its draws are the CPU's
        return cpu_fallback(_RRELU, self, noise, lower, upper, training, generator)
    x = unwrap(self)
    compute = dt.float64 if x.dtype is dt.float64 else dt.float32
    lower, upper = float(lower), float(upper)
    if not training:
        _launch("x > 0 ? x : x * s", res, compute, x=x, s=(lower + upper) / 2)
        return None
    draws = _empty(x.shape, compute, x).uniform_(lower, upper)
    _launch("x <= 0 ? r : 1", unwrap(noise), compute, x=x, r=draws)
    _launch("x <= 0 ? x * r : x", res, compute, x=x, r=draws)
    return None


with_out("rrelu_with_noise.out", rrelu_with_noise)
