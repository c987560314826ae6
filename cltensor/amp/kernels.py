"""Launches of cl_kernels/amp.cl: unscale and check gradients, MT of them per launch."""
import numpy as np

from .. import dtypes as dt
from ..ops import elementwise as ew
from ..ops import pointwise, reduce
from ..program import ctype_of, get_kernel, launch, round_up
from ..tensor import ClTensor

KERNEL_FILE = "amp.cl"
SLOTS = 8  # MT in amp.cl
ENDS_T = np.dtype([("end", np.int64, (SLOTS,))])
LOCAL_SIZE = 256


def unscale_and_check(grads, inv_scale, found_inf):
    """g *= inv_scale for every gradient, found_inf (a float32 tensor of one element) set to 1
    where a gradient held an infinity or NaN; contiguous gradients of one dtype share launches."""
    groups = {}
    for g in grads:
        if g.numel() == 0:
            continue
        if not g.is_contiguous():  # rare: two elementwise passes
            _unscale_strided(g, inv_scale, found_inf)
            continue
        groups.setdefault(g.dtype, []).append(g)
    for same in groups.values():
        for start in range(0, len(same), SLOTS):
            _launch(same[start:start + SLOTS], inv_scale, found_inf)


def _launch(grads, inv_scale, found_inf):
    device = grads[0].device
    ends = np.zeros((), ENDS_T)
    sizes = np.cumsum([g.numel() for g in grads])
    ends["end"][:len(grads)] = sizes
    ends["end"][len(grads):] = sizes[-1]
    args = []
    for g in grads + [grads[-1]] * (SLOTS - len(grads)):
        args += [g.storage.buf, np.int64(g.offset)]
    kernel = get_kernel(device, KERNEL_FILE, "unscale_multi", {"T": ctype_of(grads[0].dtype)})
    total = int(sizes[-1])
    local = None if device.is_cpu else (min(LOCAL_SIZE, device.max_work_group),)
    gsize = total if local is None else round_up(total, local[0])
    launch(device, kernel, (gsize,), local, ends, *args, np.float32(inv_scale),
           found_inf.storage.buf)
    for storage in {id(g.storage): g.storage for g in grads}.values():
        storage.version += 1


def _unscale_strided(g, inv_scale, found_inf):
    bad = reduce.any(pointwise.logical_not(ew.predicate("isfinite", [g])))
    bad = ew.copy(bad.reshape(1), ClTensor.empty_on((1,), dt.float32, g.device))
    ew.binary("maximum", found_inf, bad, out=found_inf)
    ew.binary("mul", g, float(inv_scale), out=g)


def new_flag(device):
    return ClTensor.empty_on((1,), dt.float32, device).zero_()
