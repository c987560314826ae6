"""Layer ops for torch.nn on the opencl device: pooling, dropout, embedding, log-softmax, nll_loss
and their backwards (the convolutions are conv_ops.py's), and trace with the index_fill_ of its
gradient. Forms outside these kernels run through the CPU fallback with its warning."""

import torch

import cltensor
import cltensor.nn.functional as F

from .. import dtypes as dt
from ..ops import activation, pool
from ..ops.indexing import slices
from ..tensor import ClTensor
from . import relu_grad
from ._backend import aten, fill_on_read, np_dtype, unwrap, wrap
from .fallback import cpu_fallback
from .math_ops import Plans, finish, meta_result, operand, signature, with_out, write_into

_aten = torch.ops.aten
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _ints(v):
    """torch's int[] arguments (a list, or one int in a default) as cltensor takes them."""
    return tuple(v) if isinstance(v, (list, tuple)) else v


def vjp(fn, inputs, needs, grad):
    """Gradients of fn(*inputs) against `grad` by cltensor's autograd, for the inputs `needs` marks."""
    leaves = [x.detach().requires_grad_(bool(n)) for x, n in zip(inputs, needs)]
    with cltensor.enable_grad():
        out = fn(*leaves)
    out.backward(grad)
    return [x.grad if n else None for x, n in zip(leaves, needs)]


# ---- activations and pooling ------------------------------------------------------------------
@aten("threshold_backward")
def threshold_backward(grad_output, self, threshold):
    fused = relu_grad.deferred(grad_output, self, threshold)  # ReLU's gradient, launch deferred
    if fused is not None:
        return fused
    out = meta_result(_aten.threshold_backward.default, (grad_output, self, threshold), {})
    dtype = np_dtype(out.dtype, "threshold_backward")
    x, g = operand(self, dtype), operand(grad_output, dtype)
    # torch's rule: zero where self <= threshold, so a NaN passes its gradient on
    if dtype.kind == "f" and x.shape == g.shape == tuple(out.shape):
        # one pass: hardtanh's gradient is zero where x <= lo or x >= hi; no x is >= NaN
        return finish(activation.hardtanh_backward(g, x, threshold, float("nan")), out)
    return finish(cltensor.where(x <= threshold, 0.0, g), out)


@aten("threshold_backward.grad_input")
def threshold_backward_out(grad_output, self, threshold, *, grad_input):
    return write_into(grad_input, threshold_backward(grad_output, self, threshold))


_POOL_PLANS = Plans()  # signature -> (Meta results, pooling fields, output size)


@aten("max_pool2d_with_indices")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    args = (self, kernel_size, stride, padding, dilation, ceil_mode)
    key = signature(*args)
    plan = _POOL_PLANS.get(key)
    if plan is None:
        plan = _POOL_PLANS.put(key, _pool_plan(args))
    (out, idx), fields, out_hw = plan
    x = unwrap(self)
    if fields is None:  # unbatched
        res, ind = F.max_pool2d(x, _ints(kernel_size), _ints(stride) or None, _ints(padding),
                                _ints(dilation), ceil_mode, return_indices=True)
        return finish(res, out), finish(ind, idx)
    res, taps = pool.max_pool2d(x, fields, out_hw, True)
    return finish(res, out), finish(_indices_of_taps(taps, x.shape, fields), idx)


def _indices_of_taps(taps, x_shape, fields):
    """torch's int64 indices of the forward's argmax taps, made only when something reads them:
    torch keeps them for the pooling backward alone, which takes the taps themselves
    (_forward_taps). NOTE: made at once, they cost two passes per pooling layer (indices, then
    taps again in the backward): 21 of a GoogLeNet step's 101 ms of kernels on PoCL."""
    wide = ClTensor.empty_on(taps.shape, dt.int64, taps.device, pool.layout_of(taps))
    return fill_on_read(wide, _PendingIndices(taps, x_shape, fields))


class _PendingIndices:
    """The fill (unwrap's fill_on_read) of indices not made yet from max_pool2d's taps."""

    def __init__(self, taps, x_shape, fields):
        self.taps, self.x_shape, self.fields = taps, tuple(x_shape), fields

    def __call__(self, storage):
        ind = pool.max_pool2d_indices(self.taps, self.x_shape, self.fields)
        ClTensor(storage, ind.shape, ind.strides, 0, dt.int64).copy_(ind)


def _forward_taps(indices, x_shape, fields):
    """The argmax taps behind opencl int64 indices that are exactly an unread result of
    max_pool2d_with_indices with this input shape and window, else None."""
    storage = getattr(indices.untyped_storage(), "_cl_storage", None)
    pending = getattr(storage, "fill_on_read", None)
    if (not isinstance(pending, _PendingIndices) or pending.x_shape != tuple(x_shape) or
            pending.fields != fields):
        return None
    taps = pending.taps
    exact = (tuple(indices.shape) == taps.shape and tuple(indices.stride()) == taps.strides
             and indices.storage_offset() == 0)
    return taps if exact else None


def _pool_plan(args):
    self, kernel_size, stride, padding, dilation, ceil_mode = args
    metas = meta_result(_aten.max_pool2d_with_indices.default, args, {})
    if self.dim() != 4:
        return metas, None, None
    return (metas, *_window(self, kernel_size, stride, padding, dilation, ceil_mode))


def _window(x, kernel_size, stride, padding, dilation, ceil_mode):
    return pool.window("max_pool2d", x, _ints(kernel_size), _ints(stride), _ints(padding),
                       _ints(dilation), ceil_mode)


_POOL_BACKWARD_PLANS = Plans()  # (input shape, window arguments) -> pooling fields


@aten("max_pool2d_with_indices_backward")
def max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices):
    """Each output's gradient goes to the input element its index names (summed where windows
    share their maximum; none where it names no element of the output's window), by
    cltensor's pooling backward kernel on the window taps the indices name."""
    x, g = unwrap(self), unwrap(grad_output)
    if x.ndim == 3:  # unbatched
        x, g = x.unsqueeze(0), g.unsqueeze(0)
    key = signature(x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    fields = _POOL_BACKWARD_PLANS.get(key)
    if fields is None:
        fields = _POOL_BACKWARD_PLANS.put(key, _window(x, kernel_size, stride, padding, dilation,
                                                       ceil_mode)[0])
    taps = _forward_taps(indices, x.shape, fields)
    if taps is None:
        idx = unwrap(indices)
        taps = pool.max_pool2d_taps(idx.unsqueeze(0) if idx.ndim == 3 else idx, x.shape, fields)
    gx = pool.max_pool2d_backward(g, taps, x.shape, pool.layout_of(x), fields)
    return wrap(gx.reshape(tuple(self.shape)))


@aten("native_dropout")
def native_dropout(input, p, train):
    """(output, mask): each element kept with probability 1 - p and scaled by 1 / (1 - p)."""
    x = unwrap(input)
    if not train or p == 0:
        return wrap(x.clone()), wrap(cltensor.ones(*x.shape, dtype=cltensor.bool_, device=x.device))
    keep = cltensor.rand(*x.shape, dtype=x.dtype, device=x.device) >= p
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    return wrap(x * keep.to(x.dtype) * scale), wrap(keep)


@aten("native_dropout_backward")
def native_dropout_backward(grad_output, mask, scale):
    g = unwrap(grad_output)
    return wrap(g * unwrap(mask).to(g.dtype) * scale)


@aten("embedding_dense_backward")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Each looked-up row's gradient summed into its weight row (divided by how often the
    batch looks it up, with scale_grad_by_freq); padding_idx's row gets none."""
    g, idx = unwrap(grad_output), unwrap(indices).reshape(-1)
    rows = g.reshape(idx.shape[0], g.shape[-1])
    if scale_grad_by_freq and idx.numel():
        counts = cltensor.bincount(idx, minlength=num_weights)
        rows = rows / counts[idx].to(g.dtype).unsqueeze(1)
    if padding_idx >= 0:
        rows = rows * (idx != padding_idx).to(g.dtype).unsqueeze(1)
    grad = cltensor.zeros(num_weights, g.shape[-1], dtype=g.dtype, device=g.device)
    return wrap(cltensor.index_add(grad, 0, idx, rows))


@aten("embedding_renorm_")
def embedding_renorm_(self, indices, max_norm, norm_type):
    """nn.Embedding's max_norm: the looked-up rows whose norm_type-norm exceeds max_norm are
    scaled to max_norm / (norm + 1e-7), in place, each row once."""
    w, idx = unwrap(self), unwrap(indices).reshape(-1)
    if idx.numel() == 0:
        return self
    rows = cltensor.unique(idx)
    picked = w[rows]
    wide = picked.to(dt.compute_dtype(picked.dtype))
    norms = cltensor.linalg.vector_norm(wide, float(norm_type), dim=1, keepdim=True)
    scale = cltensor.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    w.index_copy_(0, rows, (wide * scale).to(w.dtype))
    return self


# ---- softmax and losses -----------------------------------------------------------------------
def _softmax_forward(name, fn):
    op = getattr(_aten, name).default

    def kernel(self, dim, half_to_float):
        return finish(fn(unwrap(self), dim), meta_result(op, (self, dim, half_to_float), {}))
    aten(name)(kernel)


_softmax_forward("_log_softmax", F.log_softmax)
_softmax_forward("_softmax", F.softmax)


@aten("_log_softmax_backward_data")
def log_softmax_backward(grad_output, output, dim, input_dtype):
    g, y = unwrap(grad_output), unwrap(output)
    return wrap(g - cltensor.exp(y) * g.sum(dim=dim, keepdim=True))


@aten("_softmax_backward_data")
def softmax_backward(grad_output, output, dim, input_dtype):
    g, y = unwrap(grad_output), unwrap(output)
    return wrap(y * (g - (g * y).sum(dim=dim, keepdim=True)))


def _nll_parts(self, target, weight, ignore_index):
    """(x as N x C, targets clamped to a class, per-row weight: 0 where ignored)."""
    x, t = unwrap(self), unwrap(target)
    if x.ndim == 1:
        x, t = x.unsqueeze(0), t.unsqueeze(0)
    valid = t != ignore_index
    tc = cltensor.where(valid, t, 0)
    classes = x.shape[1]
    if bool((tc < 0).any()) or bool((tc >= classes).any()):
        bad = int(cltensor.where((tc < 0) | (tc >= classes), tc, 0).abs().amax())
        raise IndexError(f"nll_loss: Target {bad} is out of bounds (classes: {classes})")
    w = valid.to(x.dtype)
    if weight is not None:
        w = w * cltensor.index_select(unwrap(weight), 0, tc)
    return x, tc, w


@aten("nll_loss_forward")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    args = (self, target, weight, reduction, ignore_index)
    if self.dim() > 2:
        return cpu_fallback(_aten.nll_loss_forward.default, *args)
    out, total_meta = meta_result(_aten.nll_loss_forward.default, args, {})
    x, tc, w = _nll_parts(self, target, weight, ignore_index)
    losses = -x.gather(1, tc.unsqueeze(1)).squeeze(1) * w
    total = w.sum()
    kind = _REDUCTIONS[reduction]
    res = losses.sum() / total if kind == "mean" else losses.sum() if kind == "sum" else losses
    return finish(res, out), finish(total, total_meta)


@aten("nll_loss_backward")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    if self.dim() > 2:
        return cpu_fallback(_aten.nll_loss_backward.default, grad_output, self, target, weight,
                            reduction, ignore_index, total_weight)
    x, tc, w = _nll_parts(self, target, weight, ignore_index)
    scale = -unwrap(grad_output)
    if _REDUCTIONS[reduction] == "mean":
        scale = scale / unwrap(total_weight)
    rows = (w * scale).unsqueeze(1)
    grad = cltensor.one_hot(tc, x.shape[1]).to(x.dtype) * rows
    return wrap(grad.reshape(tuple(self.shape)).contiguous())


# ---- average pooling and gelu -----------------------------------------------------------------
@aten("avg_pool2d")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    args = (self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    out = meta_result(_aten.avg_pool2d.default, args, {})
    return finish(_avg_pool(unwrap(self), *args[1:]), out)


def _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return F.avg_pool2d(x, _ints(kernel_size), _ints(stride) or None, _ints(padding), ceil_mode,
                        count_include_pad, divisor_override)


@aten("avg_pool2d_backward")
def avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override):
    out = meta_result(_aten.avg_pool2d_backward.default,
                      (grad_output, self, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override), {})
    pool = lambda x: _avg_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                               divisor_override)
    return finish(vjp(pool, (unwrap(self),), (True,), unwrap(grad_output))[0], out)


@aten("_adaptive_avg_pool2d")
def adaptive_avg_pool2d(self, output_size):
    out = meta_result(_aten._adaptive_avg_pool2d.default, (self, output_size), {})
    return finish(F.adaptive_avg_pool2d(unwrap(self), _ints(output_size)), out)


@aten("_adaptive_avg_pool2d_backward")
def adaptive_avg_pool2d_backward(grad_output, self):
    out = meta_result(_aten._adaptive_avg_pool2d_backward.default, (grad_output, self), {})
    pool = lambda x: F.adaptive_avg_pool2d(x, tuple(grad_output.shape[-2:]))
    return finish(vjp(pool, (unwrap(self),), (True,), unwrap(grad_output))[0], out)


@aten("gelu")
def gelu(self, *, approximate="none"):
    out = meta_result(_aten.gelu.default, (self,), {"approximate": approximate})
    return finish(F.gelu(unwrap(self), approximate), out)


@aten("gelu_backward")
def gelu_backward(grad_output, self, *, approximate="none"):
    out = meta_result(_aten.gelu_backward.default, (grad_output, self), {"approximate": approximate})
    dtype = np_dtype(out.dtype, "gelu_backward")
    tanh_form = 1.0 if approximate == "tanh" else 0.0
    return finish(activation.gelu_backward(operand(grad_output, dtype), operand(self, dtype),
                                           tanh_form), out)


with_out("avg_pool2d.out", avg_pool2d)
with_out("avg_pool2d_backward.grad_input", avg_pool2d_backward, "grad_input")
with_out("_adaptive_avg_pool2d.out", adaptive_avg_pool2d)
with_out("_adaptive_avg_pool2d_backward.out", adaptive_avg_pool2d_backward)
with_out("gelu.out", gelu)
with_out("gelu_backward.grad_input", gelu_backward, "grad_input")


def _activation_backward(name, fn):
    """name(grad_output, output) -> grad_input and its grad_input= form."""
    op = getattr(_aten, name).default

    def kernel(grad_output, output):
        out = meta_result(op, (grad_output, output), {})
        dtype = np_dtype(out.dtype, name)
        return finish(fn(operand(grad_output, dtype), operand(output, dtype)), out)
    aten(name)(kernel)
    with_out(f"{name}.grad_input", kernel, "grad_input")


_activation_backward("tanh_backward", activation.tanh_backward)
_activation_backward("sigmoid_backward", activation.sigmoid_backward)


# ---- trace ------------------------------------------------------------------------------------
@aten("trace")
def trace(self):
    """The sum of a matrix's main diagonal, integers summed in int64 (torch's result dtype),
    16-bit floats in float32."""
    out = meta_result(_aten.trace.default, (self,), {})
    x = unwrap(self)
    if x.dtype is dt.bool_:
        raise RuntimeError('"trace" not implemented for \'Bool\'')
    dtype = dt.compute_dtype(np_dtype(out.dtype, "trace"))
    return finish(x.diagonal().to(dtype).sum(), out)


with_out("trace.out", trace)


@aten("index_fill_.int_Scalar", "index_fill_.int_Tensor")
def index_fill_(self, dim, index, value):
    """self's slices along dim at index set to value (a number or a 0-d tensor, read on the
    device): torch's trace_backward fills a zero matrix's diagonal with it this way."""
    op = _aten.index_fill_.int_Tensor if isinstance(value, torch.Tensor) else \
        _aten.index_fill_.int_Scalar
    meta_result(op, (self, dim, index, value), {})
    x = unwrap(self)
    slices.index_fill_(x, dim, unwrap(index), operand(value, x.dtype))
    return self
