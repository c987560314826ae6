"""Loss kernels' launchers: nll_loss (per row) and the pointwise losses mse_loss and
binary_cross_entropy_with_logits (per element), forward and backward, from cl_kernels/loss.cl.
No autograd and no reduction here (cltensor/nn/functional.py does both). float16 and
bfloat16 operands are read in place and computed in float32 (loss.cl's LD/ST).
"""
import numpy as np

from .. import dtypes as dt
from ..program import ctype_of, get_kernel, launch, round_up
from ..tensor import ClTensor, contiguous_strides
from . import elementwise as ew
from .softmax import launch_3d, per_row, rows

KERNEL_FILE = "loss.cl"
GROUP = {"cpu": 64, "gpu": 256}  # work-group size (fixed: PoCL compiles once per size)
FLAGS = {"BCE": 1, "WEIGHT": 2, "POS": 4, "GRAD_TARGET": 8}  # must match F_* in loss.cl


def _kernel(device, name, dtype):
    return get_kernel(device, KERNEL_FILE, name, {"T": ctype_of(dtype)})


def _launch(device, kernel, n, *args):
    group = min(GROUP["cpu" if device.is_cpu else "gpu"], device.max_work_group)
    launch(device, kernel, (round_up(n, group),), (group,), np.int64(n), *args)


# ---- nll ----------------------------------------------------------------------------------------

def nll_forward(x, cdim, target, weight, ignore_index):
    """Per-row (loss, weight of the row's target), of target's shape; targets are checked on the
    device (IndexError naming one outside [0, C) other than ignore_index)."""
    loss, wt = (ClTensor.empty_on(target.shape, x.dtype, x.device) for _ in range(2))
    if target.numel() == 0:
        return loss, wt
    x, (O, C, I), vx = rows(x, cdim)
    target, vt = per_row(target, cdim)
    bad = ClTensor.empty_on((1,), dt.int64, x.device).fill_(0)
    k = _kernel(x.device, "nll_fwd", x.dtype)
    _launch(x.device, k, O * I, np.int64(C), np.int64(I), x.storage.buf, vx, target.storage.buf,
            vt, np.int32(weight is not None), (weight if weight is not None else x).storage.buf,
            np.int64(ignore_index),
            loss.storage.buf, wt.storage.buf, bad.storage.buf)
    b = bad.item()
    if b != 0:
        raise IndexError(f"nll_loss: Target {b} is out of bounds (expected a class index in "
                         f"[0, {C}) or ignore_index={ignore_index}).")
    return loss, wt


def nll_backward(x_shape, cdim, target, weight, ignore_index, scale):
    """The log-probabilities' gradient (contiguous); scale broadcasts to target's shape."""
    gx = ClTensor.empty_on(x_shape, scale.dtype, scale.device)
    if gx.numel() == 0:
        return gx
    _, (O, C, I), _ = rows(gx, cdim)
    target, vt = per_row(target, cdim)
    scale, vs = per_row(scale.expand(target.shape), cdim)
    k = _kernel(gx.device, "nll_bwd", gx.dtype)
    launch_3d(gx.device, k, (I, C, O), np.int64(O), np.int64(C), np.int64(I), target.storage.buf,
              vt,
            np.int32(weight is not None), (weight if weight is not None else gx).storage.buf,
            np.int64(ignore_index),
            scale.storage.buf, vs, gx.storage.buf)
    return gx


# ---- pointwise losses ---------------------------------------------------------------------------

def _operands(shape, tensors):
    """(nd, Shape, [View per tensor]) of tensors broadcast over shape, dims collapsed."""
    stride_lists = [list(contiguous_strides(shape))] + [ew.broadcast_strides(t, shape)
                                                        for t in tensors]
    dims, strides = ew.collapse(shape, stride_lists)
    if len(dims) > ew.MAX_DIMS:
        raise ValueError(f"loss: at most {ew.MAX_DIMS} non-mergeable dims are supported, got "
                         f"{len(dims)}")
    shp = np.zeros((), ew.SHAPE_T)
    shp["size"][:len(dims)] = dims
    views = []
    for t, st in zip(tensors, strides[1:]):
        v = np.zeros((), ew.VIEW_T)
        v["offset"] = t.offset
        v["stride"][:len(st)] = st
        views.append(v)
    return np.int32(len(dims)), shp, views


def _flags(kind, weight, pos_weight, grad_target=False):
    return np.int32((FLAGS["BCE"] if kind == "BCE" else 0) |
                    (FLAGS["WEIGHT"] if weight is not None else 0) |
                    (FLAGS["POS"] if pos_weight is not None else 0) |
                    (FLAGS["GRAD_TARGET"] if grad_target else 0))


def _pointwise_args(shape, g, x, t, weight, pos_weight):
    """(nd, Shape, buffer and View of g (when given), x, t, weight, pos_weight); an absent
    operand passes x's buffer, unread."""
    given = [a for a in (g, x, t, weight, pos_weight) if a is not None]
    nd, shp, views = _operands(shape, given)
    by_id = {id(a): (a.storage.buf, v) for a, v in zip(given, views)}
    args = []
    for a in ((g,) if g is not None else ()) + (x, t, weight, pos_weight):
        args += by_id[id(a)] if a is not None else [x.storage.buf, views[0]]
    return nd, shp, args


def _loss_shape(x, t, weight, pos_weight):
    return ew.broadcast_shapes(*[a.shape for a in (x, t, weight, pos_weight) if a is not None])


def pointwise_forward(kind, x, t, weight=None, pos_weight=None):
    """Unreduced loss over broadcast(x, t): kind 'MSE' or 'BCE' (with logits)."""
    loss = ClTensor.empty_on(_loss_shape(x, t, weight, pos_weight), x.dtype, x.device)
    if loss.numel() == 0:
        return loss
    nd, shp, args = _pointwise_args(loss.shape, None, x, t, weight, pos_weight)
    _launch(x.device, _kernel(x.device, "pw_loss_fwd", x.dtype), loss.numel(), nd, shp,
            _flags(kind, weight, pos_weight), loss.storage.buf, *args)
    return loss


def pointwise_backward(kind, g, mult, x, t, weight=None, pos_weight=None, grad_target=False):
    """(gx, gt or None) over the loss's shape; g broadcasts to it and is scaled by mult."""
    shape = _loss_shape(x, t, weight, pos_weight)
    gx = ClTensor.empty_on(shape, x.dtype, x.device)
    gt = ClTensor.empty_on(shape, x.dtype, x.device) if grad_target else None
    if gx.numel() == 0:
        return gx, gt
    nd, shp, args = _pointwise_args(shape, g, x, t, weight, pos_weight)
    _launch(x.device, _kernel(x.device, "pw_loss_bwd", x.dtype), gx.numel(), nd, shp,
            _flags(kind, weight, pos_weight, grad_target), dt.compute_dtype(x.dtype).type(mult),
            *args[:2],
            gx.storage.buf, (gt if grad_target else gx).storage.buf, *args[2:])
    return gx, gt

