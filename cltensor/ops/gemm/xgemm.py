"""The xgemm family of GPUs (gemm_xgemm.cl): each operand read in place or from a padded
copy, the run decided once per layout (XPlan), and its launch with the split-K reduction."""
from typing import NamedTuple

import numpy as np

from ... import caches
from ...program import remember, round_up
from .. import elementwise as ew
from .kit import (VECTOR_BYTES, dense_strides, get_kernel, kernel_fits, launch_tiles, pad_copy,
                  reduce_splits, scratch, storage_defines)


class XOperand(NamedTuple):
    """An operand as xgemm reads it: the tensor, batch strides, leading dim, layout flag (1: K
    contiguous), the vector width of its loads and whether its rows end inside a tile."""
    t: object
    bstrides: list
    ld: int
    kc: int
    vw: int
    tail: int = 0


def _load_width(p, params, tile, kc, strides):
    """The widest vector (elements, at most VECTOR_BYTES) that divides the offsets and strides
    and splits the slice evenly over the work-group; 0 when none does."""
    wgs = params["MDIMC"] * params["NDIMC"]
    w = VECTOR_BYTES // p.dtype.itemsize
    while w >= 1:
        along = params["KWG"] if kc else tile
        count = params["KWG"] * tile // w
        if (along % w == 0 and all(s % w == 0 for s in strides) and count % wgs == 0 and
                count >= wgs):
            return w
        w //= 2
    return 0


def xgemm_operand(p, op, rows, rs, ks, tile, params, kp):
    """(op as xgemm reads it, the copy to launch first or None): in place when one dim is
    contiguous, K whole slices unless the operand's vectors run along its rows (the kernel
    reads rows from K on as zeros: KTAIL), its rows whole vectors (the kernel reads rows past
    the last as zeros: ATAIL / BTAIL) and the loads as wide as from a copy; else a zero-padded
    copy (pad_copy) that keeps the contiguous dim. NOTE: narrower loads would need another
    build of the kernel (slow on PoCL), and the copy costs little next to the product."""
    kc = rs != 1 if p.k == 1 else ks == 1  # K = 1: along the rows when they are contiguous
    if (kc or rs == 1 or rows == 1) and (p.k == kp or not kc):
        ld = rs if kc else ks
        lds = [ld] if p.k > 1 else []  # one row: its stride is never used
        vw = _load_width(p, params, tile, kc, [*lds, op.t.offset, *op.bstrides])
        tail = rows % tile != 0
        if vw and vw == _load_width(p, params, tile, kc, []) and (kc or rows % vw == 0):
            return XOperand(op.t, op.bstrides, ld, int(kc), vw, int(tail)), None
    rows_p = round_up(rows, tile)
    shape = (rows_p, kp) if kc else (kp, rows_p)
    strides = (rs, ks) if kc else (ks, rs)
    shared = not any(op.bstrides)
    dst = scratch(p, (1 if shared else p.nbatch) * shape[0] * shape[1])
    bstrides = [0] * len(p.bshape) if shared else dense_strides(p.bshape, shape[0] * shape[1])
    vw = _load_width(p, params, tile, kc, [shape[1], *bstrides])
    assert vw, f"xgemm: no load width for a padded {shape} operand with {params}"
    copy = lambda: pad_copy(p, op, (rows, p.k) if kc else (p.k, rows), shape, strides, dst)
    return XOperand(dst, bstrides, shape[1], int(kc), vw), copy


def xgemm_kernel(p, params, xa, xb, name="xgemm"):
    defines = {k: v for k, v in params.items() if k.isupper()}  # not "rate"
    defines.update(storage_defines(p, xa.t.dtype, xb.t.dtype), A_KC=xa.kc, B_KC=xb.kc, VWA=xa.vw, VWB=xb.vw,
                   KTAIL=int(p.k % params["KWG"] != 0), ATAIL=xa.tail, BTAIL=xb.tail)
    kernel = get_kernel(p.device, "gemm_xgemm.cl", name, defines)
    if name != "xgemm" or kernel_fits(p.device, kernel, params["MDIMC"] * params["NDIMC"]):
        return kernel
    return None


class XPlan(NamedTuple):
    """An xgemm run decided: the parameter set, its kernel, the operands as it reads them,
    the copies to launch first and the K split count."""
    params: dict
    kernel: object
    xa: XOperand
    xb: XOperand
    copies: tuple
    splits: int


# _plan_key -> (params, kernel, each in-place XOperand's fields after its tensor)
_prepared = caches.register("ops.gemm.prepared", {})


def layout_key(p):
    """What decides an xgemm run besides the parameter set and the operands' tensors: the
    device and its limits (tests lower them), sizes, batches, A's and B's strides and their
    offsets' alignment to vectors (C is read and written through its strides by any plan),
    and the storage types (the kernel's TA, TB, TC and TR)."""
    vw = VECTOR_BYTES // p.dtype.itemsize
    a, b = p.a, p.b
    return (p.device, p.device.max_work_group, p.device.local_mem, p.dtype, a.t.dtype,
            b.t.dtype, p.co.t.dtype, p.tr if p.tr != p.co.t.dtype else None, p.m, p.n, p.k,
            p.bshape, a.rs, a.cs, tuple(a.bstrides), a.t.offset % vw, b.rs, b.cs,
            tuple(b.bstrides), b.t.offset % vw)


def _plan_key(p, params, splits):
    return (id(params), splits) + layout_key(p)


def prepare(p, params, splits):
    """The XPlan of running `params` on p, or None when its kernel does not fit the device.
    NOTE: memoized when it reads both operands in place (the common case; a padded copy
    needs its own scratch): deciding costs more host time than the launch."""
    key = _plan_key(p, params, splits)
    hit = _prepared.get(key)
    if hit is not None and hit[0] is params:
        _, kernel, xa, xb = hit
        return XPlan(params, kernel, XOperand(p.a.t, *xa), XOperand(p.b.t, *xb), (), splits)
    plan = _decide(p, params, splits)
    if plan is not None and not plan.copies:
        # NOTE: params in the value keeps its id from passing to another dict
        remember(_prepared, key, (params, plan.kernel, plan.xa[1:], plan.xb[1:]))
    return plan


def _decide(p, params, splits):
    kp = round_up(p.k, params["KWG"])
    xa, copy_a = xgemm_operand(p, p.a, p.m, p.a.rs, p.a.cs, params["MWG"], params, kp)
    xb, copy_b = xgemm_operand(p, p.b, p.n, p.b.cs, p.b.rs, params["NWG"], params, kp)
    kernel = xgemm_kernel(p, params, xa, xb)
    if kernel is None:
        return None
    copies = tuple(c for c in (copy_a, copy_b) if c is not None)
    return XPlan(params, kernel, xa, xb, copies, splits)


def launch_xgemm(p, plan, epi):
    q, splits = plan.params, plan.splits
    part = scratch(p, splits * p.nbatch * p.m * p.n) if splits > 1 else p.co.t
    tail = []
    for x in (plan.xa, plan.xb):
        tail += [x.t.storage.buf, ew.view_arg(x.t.offset, x.bstrides), np.int64(x.ld)]
    tail += [np.int32(splits), part.storage.buf]
    reduce = xgemm_kernel(p, q, plan.xa, plan.xb, "xgemm_reduce") if splits > 1 else None
    # NOTE: everything is decided before the first enqueue: host work between the copies and
    # the product would leave the device idle.
    for copy in plan.copies:
        copy()
    launch_tiles(p, plan.kernel, q["MWG"], -(-p.n // q["NWG"]), (q["NDIMC"], q["MDIMC"], 1),
                  p.k, tail + epi, splits=splits)
    if splits > 1:
        reduce_splits(p, reduce, splits, part, epi)
