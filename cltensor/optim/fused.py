"""Launchers of the fused optimizer steps in cl_kernels/optim.cl: one launch per parameter, or,
inside batched(), one launch per SLOTS contiguous parameters that share their hyperparameters."""
import contextlib
import threading

import numpy as np

from .. import dtypes as dt
from .. import graphs
from ..ops import elementwise as ew
from ..program import ctype_of, get_kernel, launch, round_up

KERNEL_FILE = "optim.cl"
LOCAL_SIZE = 256  # work-group size on GPUs; CPUs let the driver choose

# flags, as #defined in optim.cl
SGD_MOMENTUM, SGD_FIRST, SGD_NESTEROV, SGD_MAXIMIZE, SGD_DECAY = 1, 2, 4, 8, 16
ADAM_AMSGRAD, ADAM_MAXIMIZE, ADAM_DECAY, ADAM_DECOUPLED, ADAM_FIRST = 1, 2, 4, 8, 16
RMS_CENTERED, RMS_MOMENTUM, RMS_MAXIMIZE, RMS_DECAY = 1, 2, 4, 8


def get_optim_kernel(device, name, dtype):
    """The memoized kernel `name` (sgd_step, adam_step, sgd_multi, ...) of optim.cl for a float
    dtype (float16 and bfloat16 read and written in place, computed in float32)."""
    return get_kernel(device, KERNEL_FILE, name, {"T": ctype_of(dtype)})


def _geometry(param, grad):
    """(n, nd, Shape, param View, grad View) with dims merged where both views allow it."""
    shape, (ps, gs) = ew.collapse(param.shape, [list(param.strides),
                                                ew.broadcast_strides(grad, param.shape)])
    if len(shape) > ew.MAX_DIMS:
        raise ValueError(f"optimizer step: the parameter of shape {param.shape} has more than "
                         f"{ew.MAX_DIMS} non-mergeable dims")
    return (np.int64(param.numel()), np.int32(len(shape)), ew.shape_arg(shape),
            ew.view_arg(param.offset, ps), ew.view_arg(grad.offset, gs))


# kernels with a multi-tensor form (optim.cl's *_multi) and the parameters one launch takes
MULTI = {"sgd_step": "sgd_multi", "adam_step": "adam_multi"}
SLOTS = 8  # MT in optim.cl
ENDS_T = np.dtype([("end", np.int64, (SLOTS,))])


class _Batch(threading.local):
    pending = None  # inside batched(): {(kernel, device, dtype, scalars, flags, group): [steps]}


_batch = _Batch()


@contextlib.contextmanager
def batched():
    """Hold the steps launched inside the block that have a multi-tensor kernel and launch
    them at its end, SLOTS parameters per launch (an optimizer's step over many small
    parameters costs a launch per 8 rather than per parameter). Other steps launch at once;
    each parameter is updated exactly once either way, so the order does not matter."""
    if _batch.pending is not None:  # nested: the outer block launches
        yield
        return
    _batch.pending = pending = {}
    try:
        yield
    finally:
        _batch.pending = None
        for (name, _, _, scalars, flags, _), steps in pending.items():
            for start in range(0, len(steps), SLOTS):
                _launch_multi(MULTI[name], steps[start:start + SLOTS], scalars, flags)


def _holds(name, param, grad, buffers, scalars, flags, refresh):
    """Add the step to the pending batch when it can run in a multi-tensor launch (in a
    capture, with the steps whose scalars the same group refreshes)."""
    if _batch.pending is None or name not in MULTI or param.numel() == 0:
        return False
    if not all(t.is_contiguous() and t.offset == 0 for t in (param, grad, *buffers)):
        return False
    key = (name, param.device, param.dtype, tuple(float(s) for s in scalars), flags,
           refresh and id(refresh.group))
    _batch.pending.setdefault(key, []).append((param, grad, buffers, refresh))
    return True


class Refresh:
    """A captured step's scalars, made again before each replay: scalars(group, state) after
    the replay's updates (Adam's step count, advanced; a scheduler's lr)."""

    def __init__(self, scalars, group, state):
        self.scalars, self.group, self.state = scalars, group, state

    def on_replay(self, count, ftype):
        """Set the last launch's `count` scalars (before its flags) again at each replay."""
        kernel, args = graphs.last_launch()
        head, tail = args[:len(args) - 1 - count], args[-1:]
        graphs.on_replay(lambda: kernel.set_args(
            *head, *map(ftype, self.scalars(self.group, self.state)), *tail))


def _launch_multi(name, steps, scalars, flags):
    """One launch of multi-tensor kernel `name` over up to SLOTS (param, grad, buffers,
    refresh) steps; empty slots repeat the last step's buffers over an empty range."""
    param = steps[0][0]
    device = param.device
    ends = np.zeros((), ENDS_T)
    sizes = np.cumsum([step[0].numel() for step in steps])
    ends["end"][:len(steps)] = sizes
    ends["end"][len(steps):] = sizes[-1]
    args = []
    for p, g, bufs, _ in steps + [steps[-1]] * (SLOTS - len(steps)):
        args += [p.storage.buf, g.storage.buf, *[b.storage.buf for b in bufs]]
    kernel = get_optim_kernel(device, name, param.dtype)
    ft = dt.compute_dtype(param.dtype).type  # R in optim.cl: float32 for 16-bit types
    total = int(sizes[-1])
    local = None if device.is_cpu else (min(LOCAL_SIZE, device.max_work_group),)
    gsize = total if local is None else round_up(total, local[0])
    launch(device, kernel, (gsize,), local, ends, *args, *[ft(s) for s in scalars],
           np.int32(flags))
    if steps[0][3] is not None:
        steps[0][3].on_replay(len(scalars), ft)
    _bump([t for p, _, bufs, _ in steps for t in (p, *bufs)])


def _bump(tensors):
    for storage in {id(t.storage): t.storage for t in tensors}.values():
        storage.version += 1  # saved tensors of an earlier forward now see the change


def _launch(name, param, grad, buffers, scalars, flags, refresh=None):
    """One step of kernel `name` over param and its state tensors `buffers` (placeholders where
    a step keeps none), bumping the versions of everything it writes; held for a multi-tensor
    launch inside batched(). refresh: a Refresh of the scalars, inside a capture."""
    if _holds(name, param, grad, buffers, scalars, flags, refresh):
        return
    _launch_now(name, param, grad, buffers, scalars, flags, refresh)


def _launch_now(name, param, grad, buffers, scalars, flags, refresh):
    device = param.device
    n, nd, shp, vp, vg = _geometry(param, grad)
    if n == 0:
        return
    kernel = get_optim_kernel(device, name, param.dtype)
    ft = dt.compute_dtype(param.dtype).type  # R in optim.cl: float32 for 16-bit types
    local = None if device.is_cpu else (min(LOCAL_SIZE, device.max_work_group),)
    gsize = int(n) if local is None else round_up(int(n), local[0])
    launch(device, kernel, (gsize,), local, n, nd, shp, param.storage.buf, vp, grad.storage.buf,
           vg, *[b.storage.buf for b in buffers], *[ft(s) for s in scalars], np.int32(flags))
    if refresh is not None:
        refresh.on_replay(len(scalars), ft)
    _bump([param, *buffers])


def sgd_step(param, grad, buf, lr, momentum, dampening, weight_decay, flags):
    """param -= lr * (SGD direction), updating the momentum buffer `buf` (None without momentum)."""
    b = param if buf is None else buf  # unused without SGD_MOMENTUM
    _launch("sgd_step", param, grad, [b],
            [lr, momentum, 1 - dampening, weight_decay], flags)


def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, scalars, flags, refresh=None):
    """One Adam/AdamW update of param and its moments; `scalars` in optim.cl's order after the
    buffers (1 - beta1, beta2, 1 - beta2, eps, weight_decay, decay factor, -step size,
    sqrt(bias correction 2))."""
    vmax = exp_avg_sq if max_exp_avg_sq is None else max_exp_avg_sq
    _launch("adam_step", param, grad, [exp_avg, exp_avg_sq, vmax], scalars, flags, refresh)


def rmsprop_step(param, grad, square_avg, grad_avg, buf, scalars, flags):
    """One RMSprop update of param and its state (grad_avg, buf: None when not kept);
    `scalars` in optim.cl's order (alpha, 1 - alpha, eps, weight_decay, momentum, lr)."""
    unused = square_avg
    _launch("rmsprop_step", param, grad,
            [square_avg, unused if grad_avg is None else grad_avg, unused if buf is None else buf],
            scalars, flags)
