"""Normalization kernels' launchers: local response norm and batch norm, forward and backward,
and the per-channel gradient of a convolution's fused ReLU and bias (cl_kernels/norm.cl). No
autograd here (cltensor/nn/functional.py).

Inputs are seen as (N, C, S) views (S the spatial dims collapsed; any strides); outputs are
contiguous, or channels_last when a 4-d input is.
"""

import numpy as np

from .. import dtypes as dt
from ..program import ctype_of, get_kernel, launch, read_sources, round_up
from ..tensor import CHANNELS_LAST, ClTensor
from . import elementwise as ew
from .pool import launch_grid, layout_of
from .softmax import rows

KERNEL_FILE = "norm.cl"
# Batch-norm statistics: lanes per chunk and how finely a channel is cut. NOTE: PoCL runs every
# barrier as a loop over the work-items, so CPUs reduce a chunk in one work-item.
# `group`: the work-group size of elementwise launches (fixed: PoCL compiles once per size).
# relu_bias_grad's form: "vec16" (one work-item a channel, 16 elements at a time: float32 and 16-bit)
# or "lanes" (`lanes` work-items a channel), and `fuse_max`, the most elements per channel it
# takes (above it a GPU runs the ReLU's backward and the sum as two wider launches).
TUNING = {"cpu": {"lanes": 1, "items_per_cu": 4, "min_chunk": 4096, "group": 64,
                  "relu_bias": "vec16", "fuse_max": None},
          "gpu": {"lanes": 256, "items_per_cu": 4, "min_chunk": 2048, "group": 256,
                  "relu_bias": "lanes", "fuse_max": 16384}}
OPT = {"weight": 1, "bias": 2, "running": 4}  # must match OPT_* in norm.cl
# On CPUs, batch norm of these dtypes sums and applies 16 elements of a row at a time
# (bn_reduce_vec16, bn_apply_vec16) where the rows are contiguous.
VEC16_DTYPES = ("float32", "float16", "bfloat16")
APPLY_ROW_SPAN = 16 * 8  # elements of a row per work-item of bn_apply_vec16 (norm.cl, BN_VECS)
# rows that bn_reduce_vec16 sums side by side (norm.cl): float32's, 16-bit data's
BN_ROWS = {False: 2, True: 4}


def _vec16(device, dtype):
    """Whether batch norm on `dtype` takes norm.cl's vector forms (VEC16_DTYPES, CPUs)."""
    return device.is_cpu and dtype.name in VEC16_DTYPES


def _kernel(device, name, dtype, lanes=1, **more):
    """float16/bfloat16 data (batch norm, LRN) is stored as DATA_T, computed in float."""
    defines = {"T": ctype_of(dt.compute_dtype(dtype)), "LANES": lanes, **more}
    if dtype in dt.HALF_TYPES:
        defines["DATA_T"] = ctype_of(dtype)
    if _vec16(device, dtype):
        defines["VEC16"] = None
        defines["BN_ROWS"] = BN_ROWS[dtype in dt.HALF_TYPES]
    return get_kernel(device, KERNEL_FILE, name, defines,
                      read_sources("compensated.cl", KERNEL_FILE))  # ksum


def _tuning(device):
    return TUNING["cpu" if device.is_cpu else "gpu"]


def _launch(device, kernel, n, *args):
    """One work-item per channel (n channels)."""
    group = min(_tuning(device)["group"], device.max_work_group)
    launch(device, kernel, (round_up(n, group),), (group,), *args)


def _launch_elements(kernel, out, N, C, S, *args):
    """A 2-d launch over the (N, C, S) elements of `out`, in its layout (see norm.cl)."""
    c_last = _c_last(out)
    launch_grid(out.device, kernel, (C, N * S) if c_last else (S, N * C),
                _tuning(out.device)["group"], np.int64(N), np.int64(C), np.int64(S), c_last, *args)


def _output(x):
    return ClTensor.empty_on(x.shape, x.dtype, x.device, layout_of(x))


def _c_last(t):
    return np.int32(layout_of(t) == CHANNELS_LAST)


def _opt(weight=None, bias=None, running=None):
    return np.int32((OPT["weight"] if weight is not None else 0) |
                    (OPT["bias"] if bias is not None else 0) |
                    (OPT["running"] if running is not None else 0))


# ---- local response norm ------------------------------------------------------------------------

def lrn(x, size, alpha, beta, k, save_scale):
    """(y, scale or None) of an (N, C, ...) floating tensor."""
    y = _output(x)
    # the scale in the compute type: float32 for 16-bit data, for the backward's division
    scale = ClTensor.empty_on(x.shape, dt.compute_dtype(x.dtype), x.device,
                              layout_of(x)) if save_scale else None
    if x.numel() == 0:
        return y, scale
    x, (N, C, S), vx = rows(x, 1)
    _, _, vy = rows(y, 1)
    ft = dt.compute_dtype(x.dtype).type
    _launch_elements(_kernel(x.device, "lrn_fwd", x.dtype), y, N, C, S, np.int32(size),
                     ft(alpha), ft(beta), ft(k), np.int32(save_scale), x.storage.buf, vx, y.storage.buf, vy,
            (scale if save_scale else y).storage.buf)
    return y, scale


def lrn_backward(g, x, y, scale, size, alpha, beta):
    gx = ClTensor.empty_on(y.shape, y.dtype, y.device, layout_of(y))
    if gx.numel() == 0:
        return gx
    g, (N, C, S), vg = rows(g, 1)
    x, _, vx = rows(x, 1)
    _, _, vy = rows(y, 1)
    ft = dt.compute_dtype(y.dtype).type
    _launch_elements(_kernel(y.device, "lrn_bwd", y.dtype), gx, N, C, S, np.int32(size),
                     ft(alpha), ft(beta), g.storage.buf, vg, x.storage.buf, vx, y.storage.buf,
                     scale.storage.buf, vy,
            gx.storage.buf)
    return gx


# ---- batch norm ---------------------------------------------------------------------------------

def _plan(device, M, C):
    """(P chunks per channel, lanes per chunk) for bn_reduce."""
    tune = _tuning(device)
    lanes = min(tune["lanes"], device.max_work_group)
    lanes = 1 << (lanes.bit_length() - 1)
    target = tune["items_per_cu"] * device.cl_device.max_compute_units
    P = max(1, min(-(-target // C), M // tune["min_chunk"]))
    return P, lanes


def _reduce(x, vx, N, C, S, g=None, vg=None, mean=None):
    """The (C, P, 2) partial sums of bn_reduce (statistics, or gradient sums with g)."""
    M = N * S
    P, lanes = _plan(x.device, M, C)
    part = ClTensor.empty_on((C, P, 2), dt.compute_dtype(x.dtype), x.device)
    vec = lanes == 1 and _vec16(x.device, x.dtype)
    kern = _kernel(x.device, "bn_reduce_vec16" if vec else "bn_reduce", x.dtype, lanes)
    launch(x.device, kern, (P * lanes, C), (lanes, 1), np.int64(N), np.int64(S),
           np.int64(-(-M // P)), np.int32(g is not None), x.storage.buf, vx,
           (g if g is not None else x).storage.buf,
           vg if vg is not None else vx, (mean if mean is not None else x).storage.buf,
           part.storage.buf)
    return part, P


def _buf(t, fallback):
    return (t if t is not None else fallback).storage.buf


def batch_norm_train(x, weight, bias, running_mean, running_var, momentum, eps):
    """(y, mean, invstd) from batch statistics; running stats (contiguous, or None) are updated
    in place."""
    y = _output(x)
    x, (N, C, S), vx = rows(x, 1)
    part, P = _reduce(x, vx, N, C, S)
    acc = dt.compute_dtype(x.dtype)
    mean, invstd = (ClTensor.empty_on((C,), acc, x.device) for _ in range(2))
    coef = ClTensor.empty_on((2, C), acc, x.device)
    ft = acc.type
    weight, bias, run_mean, run_var = (_widened(t, acc)
                                       for t in (weight, bias, running_mean, running_var))
    _launch(x.device, _kernel(x.device, "bn_stats", x.dtype), C, np.int64(C), np.int64(N * S),
            np.int64(P), _opt(weight, bias, run_mean), part.storage.buf, x.storage.buf, vx,
            ft(eps), ft(momentum), _buf(weight, mean), _buf(bias, mean), _buf(run_mean, mean),
            _buf(run_var, mean), mean.storage.buf, invstd.storage.buf, coef.storage.buf)
    for wide, running in ((run_mean, running_mean), (run_var, running_var)):
        if running is not None:
            if wide is not running:  # 16-bit running statistics: updated in float32
                ew.copy(wide, running)
            running.storage.version += 1
    return _apply(x, vx, N, C, S, coef, y), mean, invstd


def _widened(t, acc):
    """t as the kernels read it: a float32 copy of a 16-bit parameter (None stays None)."""
    if t is None or t.dtype is acc:
        return t
    return ew.copy(t, ClTensor.empty_on(t.shape, acc, t.device))


def batch_norm_eval(x, weight, bias, running_mean, running_var, eps):
    """(y, invstd) from the running statistics."""
    y = _output(x)
    x, (N, C, S), vx = rows(x, 1)
    acc = dt.compute_dtype(x.dtype)
    invstd = ClTensor.empty_on((C,), acc, x.device)
    coef = ClTensor.empty_on((2, C), acc, x.device)
    weight, bias, running_mean, running_var = (
        _widened(t, acc) for t in (weight, bias, running_mean, running_var))
    _launch(x.device, _kernel(x.device, "bn_eval_coeffs", x.dtype), C, np.int64(C),
            _opt(weight, bias), acc.type(eps), _buf(weight, coef), _buf(bias, coef),
            running_mean.storage.buf, running_var.storage.buf, invstd.storage.buf,
            coef.storage.buf)
    return _apply(x, vx, N, C, S, coef, y), invstd


def _apply(x, vx, N, C, S, coef, out, g=None, vg=None):
    total = out.numel()
    if total == 0:
        return out
    args = (np.int32(g is not None), x.storage.buf, vx,
            (g if g is not None else x).storage.buf, vg if vg is not None else vx,
            coef.storage.buf, out.storage.buf)
    if _vec16(x.device, x.dtype) and not _c_last(out):
        # APPLY_ROW_SPAN elements of a row per work-item (norm.cl, bn_apply_vec16)
        launch_grid(x.device, _kernel(x.device, "bn_apply_vec16", x.dtype),
                    (-(-S // APPLY_ROW_SPAN), C, N), _tuning(x.device)["group"], np.int64(N),
                    np.int64(C), np.int64(S), *args)
        return out
    _launch_elements(_kernel(x.device, "bn_apply", x.dtype), out, N, C, S, *args)
    return out


def batch_norm_backward(g, x, weight, mean, invstd, train):
    """(gx, gw, gb): mean and invstd are the batch's (train) or the running ones (eval)."""
    gx = ClTensor.empty_on(x.shape, x.dtype, x.device, layout_of(x))
    x, (N, C, S), vx = rows(x, 1)
    g, _, vg = rows(g, 1)
    acc = dt.compute_dtype(x.dtype)
    mean = _widened(mean, acc)  # eval: the running mean, maybe 16-bit
    part, P = _reduce(x, vx, N, C, S, g, vg, mean)
    grads = ClTensor.empty_on((2, C), acc, x.device)
    coef = ClTensor.empty_on((3, C), acc, x.device)
    param = weight
    weight = _widened(weight, acc)
    _launch(x.device, _kernel(x.device, "bn_grads", x.dtype), C, np.int64(C), np.int64(N * S),
            np.int64(P), _opt(weight), np.int32(train), part.storage.buf, _buf(weight, coef),
            mean.storage.buf, invstd.storage.buf,
            grads.storage.buf, coef.storage.buf)
    _apply(x, vx, N, C, S, coef, gx, g, vg)
    if param is not None and param.dtype is not acc:  # 16-bit parameters get 16-bit grads
        grads = ew.copy(grads, ClTensor.empty_on(grads.shape, param.dtype, grads.device))
    return gx, grads[0], grads[1]


# ---- a convolution's fused ReLU and bias, backward ---------------------------------------------

RELU_BIAS_DTYPES = (dt.float32, dt.float64, dt.float16, dt.bfloat16)


def relu_bias_grad(g, y, masked_out=True):
    """(g taken back through the ReLU whose output is y, the sum of that over all dims but 1)
    from one launch, for 4-d floating tensors of one shape and dtype (16-bit ones summed in
    float32, the sum rounded once); None where that pass does not apply (the vector form's
    float64 or channels_last; channels longer than the device's fuse_max): the caller then
    runs relu_backward and a sum. masked_out False: (None, the sum), the masked gradient not
    written."""
    device = g.device
    if (g.ndim != 4 or g.shape != y.shape or g.dtype is not y.dtype or y.device is not device
            or g.dtype not in RELU_BIAS_DTYPES or 0 in g.shape):
        return None
    tune = _tuning(device)
    N, C, H, W = g.shape
    if tune["fuse_max"] is not None and N * H * W > tune["fuse_max"]:
        return None
    vec = tune["relu_bias"] == "vec16"
    if vec and (not _vec16(device, g.dtype) or layout_of(g) == CHANNELS_LAST):
        return None  # NOTE: its rows are NCHW's, its sums float16 vectors
    gm = ClTensor.empty_on(g.shape, g.dtype, device, layout_of(g)) if masked_out else g
    g, (_, _, S), vg = rows(g, 1)
    y, _, vy = rows(y, 1)
    _, _, vm = rows(gm, 1)
    gb = ClTensor.empty_on((C,), g.dtype, device)
    lanes = 1 if vec else _plan(device, N * S, C)[1]
    kern = _kernel(device, "relu_bias_grad_vec16" if vec else "relu_bias_grad", g.dtype, lanes,
                   MASKED_OUT=int(masked_out))
    launch(device, kern, (lanes, C), (lanes, 1), np.int64(N), np.int64(S), g.storage.buf, vg,
           y.storage.buf, vy, gm.storage.buf, vm, gb.storage.buf)
    return (gm if masked_out else None), gb
