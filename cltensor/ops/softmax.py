"""softmax / log_softmax over any dim and the fused softmax cross-entropy, forward and backward:
row views, work sizes and launches of cl_kernels/softmax.cl. No autograd here
(cltensor/nn/functional.py).
"""
import numpy as np

from .. import dtypes as dt
from ..device import capturing
from ..program import ctype_of, get_kernel, launch, read_sources, round_up
from ..tensor import ClTensor
from . import elementwise as ew
from .pool import launch_grid

KERNEL_FILE = "softmax.cl"
VIEW3_T = np.dtype([(f, np.int64) for f in ("off", "o", "d", "i")])
VIEW2_T = np.dtype([(f, np.int64) for f in ("off", "o", "i")])
# Work-items per row by device kind, and the work-group size of one-item-per-row launches.
# NOTE: PoCL runs every barrier as a loop over the work-items, so CPUs take one work-item per
# row; GPUs a work-group per row once rows are long enough. A fixed group size (never None) also
# matters on PoCL: it compiles a kernel anew for every work-group size it is launched with.
TUNING = {"cpu": {"lanes": 1, "min_row": 1, "group": 64},
          "gpu": {"lanes": 256, "min_row": 128, "group": 256}}
# On CPUs, launches of fewer rows than group * CPU_GROUPS_PER_CU * compute units take
# work-groups of one row: PoCL runs a work-group on one thread, so 64 long rows in one group
# used one core.
CPU_GROUPS_PER_CU = 4
# On CPUs, softmax forward and backward over contiguous rows of these dtypes walk 16 elements
# at a time (softmax.cl, softmax_fwd_vec16 and softmax_bwd_vec16).
VEC16_DTYPES = ("float32", "float16", "bfloat16")


def _vec16(device, dtype, lanes):
    """Whether softmax on `dtype` takes the *_vec16 kernels' build (CPUs, VEC16_DTYPES)."""
    return device.is_cpu and lanes == 1 and dtype.name in VEC16_DTYPES


def _kernel(device, name, dtype, lanes=1):
    """float16/bfloat16 data (softmax_fwd/bwd only) is stored as S, computed as float."""
    defines = {"T": ctype_of(dt.compute_dtype(dtype)), "LANES": lanes}
    if dtype in dt.HALF_TYPES:
        defines.update({"S": ctype_of(dtype), "S16": None})
        if dtype == dt.bfloat16:
            defines["S_BF16"] = None
        elif device.is_cpu and "oclgrind" not in device.name.lower():
            defines["HALF_VECTORS"] = None  # (Oclgrind's interpreter cannot convert half)
    if _vec16(device, dtype, lanes):
        defines["VEC16"] = None
    return get_kernel(device, KERNEL_FILE, name, defines,
                      read_sources("compensated.cl", KERNEL_FILE))  # ksum


# ---- rows: a tensor seen as (O, D, I) around one dim ------------------------------------------

def _merged(shape, strides):
    """(size, stride) of dims that merge into one, or None when they do not."""
    dims, (sts,) = ew.collapse(shape, [list(strides)])
    if len(dims) > 1:
        return None
    return (dims[0], sts[0]) if dims else (1, 0)


def _rows(t, dim):
    """((O, D, I), View3) of t around dim, or None when t's strides do not allow it."""
    outer = _merged(t.shape[:dim], t.strides[:dim])
    inner = _merged(t.shape[dim + 1:], t.strides[dim + 1:])
    if outer is None or inner is None:
        return None
    v = np.zeros((), VIEW3_T)
    v["off"], v["o"], v["d"], v["i"] = t.offset, outer[1], t.strides[dim], inner[1]
    return (outer[0], t.shape[dim], inner[0]), v


def rows(t, dim):
    """(t or a contiguous copy, (O, D, I), View3)."""
    r = _rows(t, dim)
    if r is None:
        t = t.contiguous()
        r = _rows(t, dim)
    return (t,) + r


def _view2(t, split):
    """View2 of t as (prod(shape[:split]), prod(shape[split:])), or None."""
    outer = _merged(t.shape[:split], t.strides[:split])
    inner = _merged(t.shape[split:], t.strides[split:])
    if outer is None or inner is None:
        return None
    v = np.zeros((), VIEW2_T)
    v["off"], v["o"], v["i"] = t.offset, outer[1], inner[1]
    return v


def per_row(t, split):
    """(t or a contiguous copy, View2) over the rows (t has the rows' shape, dims < split outer)."""
    v = _view2(t, split)
    if v is None:
        t = t.contiguous()
        v = _view2(t, split)
    return t, v


def _lanes(device, D, I):
    tune = TUNING["cpu" if device.is_cpu else "gpu"]
    if tune["lanes"] <= 1 or I != 1 or D < tune["min_row"]:
        return 1
    lanes = 1
    while lanes * 2 <= min(tune["lanes"], device.max_work_group) and lanes < D:
        lanes *= 2
    return lanes


def _launch_rows(device, kernel, nrows, lanes, *args):
    if lanes > 1:
        # exactly one work-group per row: the kernels do not check for rows past the end
        launch(device, kernel, (nrows * lanes,), (lanes,), *args)
        return
    tune = TUNING["cpu" if device.is_cpu else "gpu"]
    group = min(tune["group"], device.max_work_group)
    if device.is_cpu and nrows < group * CPU_GROUPS_PER_CU * device.cl_device.max_compute_units:
        group = 1
    launch(device, kernel, (round_up(nrows, group),), (group,), *args)


def launch_3d(device, kernel, dims, *args):
    """One work-item per element of a (dims[2], dims[1], dims[0]) block, innermost first."""
    launch_grid(device, kernel, dims, TUNING["cpu" if device.is_cpu else "gpu"]["group"], *args)


# ---- softmax ----------------------------------------------------------------------------------

def softmax(x, dim, log=False):
    """softmax (or log_softmax) of a floating tensor over dim (already normalized)."""
    y = ClTensor.empty_on(x.shape, x.dtype, x.device)
    if x.numel() == 0:
        return y
    x, (O, D, I), vx = rows(x, dim)
    _, _, vy = rows(y, dim)
    lanes = _lanes(x.device, D, I)
    vec = _vec16(x.device, x.dtype, lanes) and vx["d"] == 1 and vy["d"] == 1
    k = _kernel(x.device, "softmax_fwd_vec16" if vec else "softmax_fwd", x.dtype, lanes)
    _launch_rows(x.device, k, O * I, lanes, np.int64(O * I), np.int64(D), np.int64(I),
                 np.int32(log), x.storage.buf, vx, y.storage.buf, vy)
    return y


def softmax_backward(g, y, dim, log=False):
    """The input's gradient from the output y and its gradient g (any strides)."""
    gx = ClTensor.empty_on(y.shape, y.dtype, y.device)
    if y.numel() == 0:
        return gx
    g, (O, D, I), vg = rows(g, dim)
    y, _, vy = rows(y, dim)
    _, _, vgx = rows(gx, dim)
    lanes = _lanes(y.device, D, I)
    vec = _vec16(y.device, y.dtype, lanes) and vg["d"] == vy["d"] == vgx["d"] == 1
    k = _kernel(y.device, "softmax_bwd_vec16" if vec else "softmax_bwd", y.dtype, lanes)
    _launch_rows(y.device, k, O * I, lanes, np.int64(O * I), np.int64(D), np.int64(I),
                 np.int32(log), g.storage.buf, vg, y.storage.buf, vy, gx.storage.buf, vgx)
    return gx


# ---- cross entropy ----------------------------------------------------------------------------

def _weight_buf(weight, x):
    return (weight if weight is not None else x).storage.buf


def xent_forward(x, cdim, target, weight, ignore_index, eps):
    """Per-row (loss, weight of the row's target, logsumexp), each of target's shape.

    x: floating logits; cdim: the class dim; target: int64 of x's shape without cdim, checked
    on the device (IndexError naming a target outside [0, C) other than ignore_index).
    """
    shape = target.shape
    loss, wt, lse = (ClTensor.empty_on(shape, x.dtype, x.device) for _ in range(3))
    if target.numel() == 0:
        return loss, wt, lse
    x, (O, D, I), vx = rows(x, cdim)
    target, vt = per_row(target, cdim)
    bad = ClTensor.empty_on((1,), dt.int64, x.device).fill_(0)
    lanes = _lanes(x.device, D, I)
    k = _kernel(x.device, "xent_fwd", x.dtype, lanes)
    _launch_rows(x.device, k, O * I, lanes, np.int64(O * I), np.int64(D), np.int64(I),
                 x.storage.buf, vx, target.storage.buf, vt, np.int32(weight is not None),
                 _weight_buf(weight, x),
                 np.int64(ignore_index), x.dtype.type(eps), loss.storage.buf, wt.storage.buf,
                 lse.storage.buf, bad.storage.buf)
    # NOTE: a graph capture runs nothing and cannot read the flag: replays skip this check
    b = bad.item() if capturing.graph is None else 0
    if b != 0:
        raise IndexError(f"cross_entropy: Target {b} is out of bounds (expected a class index in "
                         f"[0, {D}) or ignore_index={ignore_index}).")
    return loss, wt, lse


def xent_backward(x, cdim, target, weight, wsum, ignore_index, eps, lse, scale):
    """The logits' gradient; scale (broadcast to target's shape) multiplies each row's."""
    gx = ClTensor.empty_on(x.shape, x.dtype, x.device)
    if x.numel() == 0:
        return gx
    x, (O, D, I), vx = rows(x, cdim)
    target, vt = per_row(target, cdim)
    scale, vs = per_row(scale.expand(target.shape), cdim)
    k = _kernel(x.device, "xent_bwd", x.dtype)
    launch_3d(x.device, k, (I, D, O), np.int64(O), np.int64(D), np.int64(I),
                 x.storage.buf, vx, target.storage.buf, vt, np.int32(weight is not None),
                 _weight_buf(weight, x),
                 _weight_buf(wsum, x), np.int64(ignore_index), x.dtype.type(eps),
                 lse.storage.buf, scale.storage.buf, vs, gx.storage.buf)
    return gx

