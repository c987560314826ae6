"""Reductions and scans with torch's names, dtype rules and return types.

Kernels: cl_kernels/reduce.cl (every reduction) and cl_kernels/scan.cl (cumsum, cumprod,
logcumsumexp).
"""
import builtins
import math
import numbers
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import pyopencl as cl

from .. import caches
from .. import dtypes as dt
from ..program import ctype_of, get_kernel, launch, memo_with, round_up
from ..tensor import ClTensor, _norm_dim
from . import elementwise as ew

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std",
           "norm", "all", "any", "logsumexp", "cumsum", "cumprod", "logcumsumexp", "return_types"]

KERNEL_FILE = "reduce.cl"
SCAN_FILE = "scan.cl"
STATE_BYTES = 32  # the largest State in reduce.cl: RED_VAR's four accumulators

# Launch tunables by device kind. NOTE: PoCL runs every barrier as a loop over the work-items, so
# on CPUs each work-item reduces a whole block serially and no local-memory tree is built.
TUNING = {
    "cpu": {"tree": False, "interleave": False, "group": 64, "groups_per_cu": 4,
            "min_per_item": 4096, "max_chunks": 64, "scan_group": 16,
            "scan_items_per_cu": 16, "scan_min_block": 4096, "scan_max_blocks": 1024},
    "gpu": {"tree": True, "interleave": True, "lanes": 256, "col_lanes": 8, "group": 256,
            "groups_per_cu": 8, "min_per_item": 16, "max_chunks": 1024,
            "scan_group": 256, "scan_items_per_cu": 2048, "scan_min_block": 256,
            "scan_max_blocks": 8192},
}

VEC_SUM_BYTES = 64  # reduce.cl's VEC_SUM lanes on CPUs: one AVX-512 register

# What a reduction computes: a kind of State, a per-element map, a per-output aux value and a
# finish (macros of reduce.cl).
Spec = namedtuple("Spec", "kind map aux fin")
SUM = Spec("RED_SUM", "MAP_ID", "AUX_NONE", "FIN_DIV")
PROD = Spec("RED_PROD", "MAP_ID", "AUX_NONE", "FIN_ID")
MAX = Spec("RED_MAX", "MAP_ID", "AUX_NONE", "FIN_ID")
MIN = Spec("RED_MIN", "MAP_ID", "AUX_NONE", "FIN_ID")
ANY = Spec("RED_SUM", "MAP_NZ", "AUX_NONE", "FIN_ID")
ALL = Spec("RED_PROD", "MAP_NZ", "AUX_NONE", "FIN_ID")
VAR = Spec("RED_VAR", "MAP_DEV", "AUX_MEAN", "FIN_DIV")
STD = Spec("RED_VAR", "MAP_DEV", "AUX_MEAN", "FIN_SQRT_DIV")
NORM0 = Spec("RED_SUM", "MAP_NZ", "AUX_NONE", "FIN_ID")
NORM1 = Spec("RED_SUM", "MAP_ABS", "AUX_NONE", "FIN_ID")
NORM2 = Spec("RED_SUM", "MAP_SQ", "AUX_NONE", "FIN_SQRT_DIV")
NORMP = Spec("RED_SUM", "MAP_POWABS", "AUX_NONE", "FIN_ROOT")
LOGSUMEXP = Spec("RED_SUM", "MAP_EXPSUB", "AUX_SHIFT", "FIN_LOGADD")
INDEX_KINDS = ("RED_MAX", "RED_MIN")

return_types = SimpleNamespace(max=namedtuple("max", "values indices"),
                               min=namedtuple("min", "values indices"),
                               sort=namedtuple("sort", "values indices"),
                               topk=namedtuple("topk", "values indices"),
                               kthvalue=namedtuple("kthvalue", "values indices"),
                               median=namedtuple("median", "values indices"),
                               cummax=namedtuple("cummax", "values indices"),
                               cummin=namedtuple("cummin", "values indices"),
                               aminmax=namedtuple("aminmax", "min max"),
                               nanmedian=namedtuple("nanmedian", "values indices"),
                               mode=namedtuple("mode", "values indices"),
                               frexp=namedtuple("frexp", "mantissa exponent"),
                               histogram=namedtuple("histogram", "hist bin_edges"))

_kernels = caches.register("ops.reduce.kernels", {})
_dummies = caches.register("ops.reduce.dummies", {})


# ---- kernels ----------------------------------------------------------------------------------

def get_reduce_kernels(device, spec, in_dtype, acc_dtype, out_dtype, tree):
    """The reduce_full / reduce_part / reduce_merge kernels of one build (memoized)."""
    key = (device, spec, in_dtype, acc_dtype, out_dtype, tree)
    ks = _kernels.get(key)
    if ks is None:
        defines = {"T": ctype_of(in_dtype), "ACC_T": ctype_of(acc_dtype),
                   "OUT_T": ctype_of(out_dtype), spec.kind: None, "MAP": spec.map,
                   "AUX": spec.aux, "FIN": spec.fin, "USE_TREE": int(tree)}
        if dt.is_floating(acc_dtype):
            defines["ACC_FLOAT"] = None
        if out_dtype == dt.bool_:
            defines["OUT_BOOL"] = None
        if (device.is_cpu and spec[:3] == SUM[:3] and dt.is_floating(acc_dtype) and
                (in_dtype == acc_dtype or in_dtype in dt.HALF_TYPES)):
            defines["VEC_SUM"] = VEC_SUM_BYTES // np.dtype(acc_dtype).itemsize
            if in_dtype in dt.HALF_TYPES:  # converted to float lanes as loaded
                defines["VEC_HALF" if in_dtype is dt.float16 else "VEC_BF16"] = None
                # summed in double lanes on PoCL (Intel's runtime ran them slower than the
                # compensated float lanes: 0.9 ms against 0.75 for 64 rows of 256K)
                if device.has_fp64 and "Portable Computing Language" in device.platform_name:
                    defines["WIDE_SUM"] = None
        # NOTE: through get_kernel: bool and uint8 (both uchar) can share one program
        full, part, merge = (get_kernel(device, KERNEL_FILE, name, defines)
                             for name in ("reduce_full", "reduce_part", "reduce_merge"))
        limit = full.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                         device.cl_device)
        ks = _kernels[key] = SimpleNamespace(full=full, part=part, merge=merge, limit=limit)
    return ks


def get_scan_kernels(device, op, in_dtype, out_dtype):
    acc_dtype = dt.compute_dtype(out_dtype)  # 16-bit floats accumulate in float32
    key = (device, SCAN_FILE, op, in_dtype, out_dtype)
    ks = _kernels.get(key)
    if ks is None:
        defines = {"T": ctype_of(in_dtype), "ACC_T": ctype_of(acc_dtype),
                   "OUT_T": ctype_of(out_dtype), op: None}
        if dt.is_floating(acc_dtype):
            defines["ACC_FLOAT"] = None
        totals, carry, blocks = (get_kernel(device, SCAN_FILE, name, defines)
                                 for name in ("scan_totals", "scan_carry", "scan_blocks"))
        ks = _kernels[key] = SimpleNamespace(totals=totals, carry=carry, blocks=blocks)
    return ks


def clear_kernels():
    _kernels.clear()
    _dummies.clear()


def placeholder_buffer(device):
    """The buffer the reduction kernels get for an argument their build never touches (a
    replayed pass passes it in its place, conv/plans.py)."""
    return _dummy(device)


def _dummy(device):
    if device.index not in _dummies:
        _dummies[device.index] = ClTensor.empty_on((2,), dt.int64, device)
    return _dummies[device.index].storage.buf


def _tuning(device):
    return TUNING["cpu" if device.is_cpu else "gpu"]




def _pow2_at_least(n):
    return 1 << builtins.max(0, int(n) - 1).bit_length()


# ---- planning a reduction ---------------------------------------------------------------------

Plan = namedtuple("Plan", "x kept_shape kshape kstrides rshape rstrides M R")


def _plan(x, dims, ordered):
    """x seen as (kept dims) x (reduced dims), each collapsed to as few dims as its strides allow.

    Unless `ordered` (index-carrying reductions count r in row-major order), the reduced dims are
    walked by decreasing stride so that the innermost loop moves through memory the least.
    """
    return Plan(x, *_layout(x.shape, x.strides, tuple(dims), ordered))


@caches.lru_cache(maxsize=1024)
def _layout(shape, strides, dims, ordered):
    """_plan's fields after x, memoized per layout."""
    kept = [i for i in range(len(shape)) if i not in dims]
    red = list(dims) if ordered else sorted(dims, key=lambda i: -abs(strides[i]))
    kshape, (kstrides,) = ew.collapse([shape[i] for i in kept], [[strides[i] for i in kept]])
    rshape, (rstrides,) = ew.collapse([shape[i] for i in red], [[strides[i] for i in red]])
    if builtins.max(len(kshape), len(rshape)) > ew.MAX_DIMS:
        raise ValueError(f"reductions support at most {ew.MAX_DIMS} kept and {ew.MAX_DIMS} reduced "
                         f"dims that cannot be merged; got shape {shape}, strides {strides}, "
                         f"dims {dims}")
    kept_shape = tuple(int(shape[i]) for i in kept)  # Python ints, whatever the key held
    return (kept_shape, tuple(kshape), tuple(kstrides), tuple(rshape), tuple(rstrides),
            math.prod(kept_shape), int(math.prod(shape[i] for i in dims)))


def _lanes(device, R, row_like, limit):
    """(L0, L1): outputs per work-group and lanes per output (a power of two).

    NOTE: the sizes do not depend on the number of outputs: PoCL compiles a kernel again for
    every new work-group size, and spare work-items past the last output cost little.
    """
    t = _tuning(device)
    if not t["tree"]:
        return builtins.min(t["group"], limit), 1
    wanted = -(-R // t["min_per_item"])  # lanes that get min_per_item elements each
    l1 = builtins.min(t["lanes"] if row_like else t["col_lanes"], _pow2_at_least(wanted))
    l0 = builtins.max(1, t["group"] // l1)
    sizes = device.cl_device.max_work_item_sizes
    while l1 > 1 and (l1 > limit or l1 > sizes[1]):
        l1 //= 2
    while l0 > 1 and (l0 * l1 > limit or l0 > sizes[0]):
        l0 //= 2
    return l0, l1


def _chunks(device, M, R, l0, l1):
    """G: how many chunks each row is cut into, so that the device gets enough work-groups."""
    t = _tuning(device)
    groups = -(-M // l0)
    want = device.cl_device.max_compute_units * t["groups_per_cu"]
    if groups >= want:
        return 1
    g = builtins.min(-(-want // groups), R // (l1 * t["min_per_item"]), t["max_chunks"])
    return builtins.max(g, 1)


def _rows_alone(device, M, l0):
    """Whether each of M contiguous rows takes a work-group of its own (CPUs): rows enough for
    the compute units, but too few for groups of l0 rows, which were cut into chunks and
    summed again by reduce_merge (a second launch; PoCL, 64 rows of 256K 16-bit elements: 0.85
    ms against 0.77 on 2 threads). Only for rows of one contiguous run, where it was
    measured: strided rows (column sums), whose group's work-items read neighbouring
    columns, ran 8-11% slower alone."""
    t = _tuning(device)
    want = device.cl_device.max_compute_units * t["groups_per_cu"]
    return not t["tree"] and l0 > 1 and -(-M // l0) < want <= M


def _chunk_args(device, R, l1, g):
    """(chunk_stride, chunk_len, step) of reduce.cl: interleaved on GPUs, blocked on CPUs."""
    if _tuning(device)["interleave"]:
        return l1, R, g * l1
    block = -(-R // g)
    return block, block, l1


# ---- running a reduction ----------------------------------------------------------------------

def _run(x, dims, spec, acc_dtype, out_dtype, aux=None, p=0, divisor=1, ordered=False):
    """Reduce x over `dims` (sorted, normalized): (values, indices or None) as new contiguous
    tensors of the kept shape. `aux` is a contiguous tensor of the kept shape (AUX_MEAN/SHIFT)."""
    plan = _plan(x, dims, ordered)
    acc_dtype = dt.compute_dtype(acc_dtype)  # 16-bit floats accumulate in float32
    values = ClTensor.empty_on(plan.kept_shape, out_dtype, x.device)
    indices = (ClTensor.empty_on(plan.kept_shape, dt.int64, x.device)
               if spec.kind in INDEX_KINDS else None)
    if plan.M:
        ks = get_reduce_kernels(x.device, spec, x.dtype, acc_dtype, out_dtype,
                                _tuning(x.device)["tree"])
        acc = acc_dtype.type
        _launch_reduce(plan, ks, spec, acc_dtype, aux, acc(p), acc(divisor), values, indices)
    return values, indices


def _launch_reduce(plan, ks, spec, acc_dtype, aux, p, divisor, values, indices):
    """reduce_full, or reduce_part then reduce_merge when rows are cut into chunks."""
    device = plan.x.device
    key = (device, plan.kshape, plan.kstrides, plan.rshape, plan.rstrides, plan.M, plan.R,
           ks.limit)
    geo = memo_with(_geometries, key, _tuning(device), lambda: _geometry(*key))
    aux_buf = _buf(aux, device)
    outs = [values.storage.buf, _buf(indices, device)]
    args = [plan.x.storage.buf, ew.view_arg(plan.x.offset, plan.kstrides), *geo.row_args,
            aux_buf, p]
    if geo.chunks == 1:
        launch(device, ks.full, geo.gsize, geo.lsize, *args, divisor, *outs, geo.scratch)
        return
    pval = ClTensor.empty_on((plan.M * geo.chunks * _parts(spec, acc_dtype),), acc_dtype, device)
    pidx = (ClTensor.empty_on((plan.M * geo.chunks,), dt.int64, device)
            if indices is not None else None)
    parts = [pval.storage.buf, _buf(pidx, device)]
    launch(device, ks.part, geo.gsize, geo.lsize, *args, *parts, geo.scratch)
    launch(device, ks.merge, geo.merge_gsize, geo.merge_lsize, *parts, np.int64(plan.M),
           np.int64(geo.chunks), aux_buf, p, divisor, *outs, geo.merge_scratch)


Geometry = namedtuple("Geometry", "chunks gsize lsize row_args scratch merge_gsize merge_lsize "
                                  "merge_scratch")


# (device, layout, kernel limit, id of the tuning) -> (tuning, Geometry)
_geometries = caches.register("ops.reduce.geometries", {})


def _geometry(device, kshape, kstrides, rshape, rstrides, M, R, limit):
    """A reduction's work sizes, chunks and the arguments after its input's view (ROW_ARGS in
    reduce.cl); memoized per layout and tuning (_launch_reduce), as training repeats the same
    reductions."""
    # lanes walk along rows when the reduced dims move through memory the least
    row_like = not kstrides or bool(rstrides) and abs(rstrides[-1]) <= abs(kstrides[-1])
    l0, l1 = _lanes(device, R, row_like, limit)
    if tuple(rstrides) == (1,) and _rows_alone(device, M, l0):
        l0 = 1
    g = _chunks(device, M, R, l0, l1)
    chunk_stride, chunk_len, step = _chunk_args(device, R, l1, g)
    row_args = (ew.shape_arg(kshape), np.int32(len(kshape)), ew.view_arg(0, rstrides),
                ew.shape_arg(rshape), np.int32(len(rshape)), np.int64(M), np.int64(R),
                np.int64(chunk_stride), np.int64(chunk_len), np.int64(step))
    m0, m1 = _lanes(device, g, True, limit)
    return Geometry(g, (round_up(M, l0), l1 * g), (l0, l1), row_args,
                    _local(STATE_BYTES * l0 * l1), (round_up(M, m0), m1), (m0, m1),
                    _local(STATE_BYTES * m0 * m1))


@caches.lru_cache(maxsize=64)
def _local(nbytes):
    """A local-memory argument of nbytes (only its size matters: one object per size)."""
    return cl.LocalMemory(nbytes)


def _buf(t, device):
    """t's buffer, or a dummy for an argument the build never touches."""
    return _dummy(device) if t is None else t.storage.buf


def _parts(spec, acc_dtype):
    """How many accumulators a saved State holds (st_save in reduce.cl)."""
    if spec.kind == "RED_VAR":
        return 4
    return 2 if spec.kind == "RED_SUM" and dt.is_floating(acc_dtype) else 1


# ---- argument checks and dtype rules ----------------------------------------------------------

def _check_tensor(x, op):
    if not isinstance(x, ClTensor):
        raise TypeError(f"{op}(): expected a tensor, got {type(x).__name__}")


def _dims(x, dim, op):
    """The reduced dims, sorted: all of them for None or (), else `dim` (an int or a sequence)."""
    if dim is None:
        return tuple(range(x.ndim))
    seq = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if not seq:
        return tuple(range(x.ndim))
    norm = [_norm_dim(d, x.ndim, op) for d in seq]
    for d in set(norm):
        if norm.count(d) > 1:
            raise RuntimeError(f"{op}(): dim {d} appears multiple times in the list of dims {seq}")
    return tuple(sorted(set(norm))) if x.ndim else ()


def _count(x, dims):
    return math.prod(x.shape[d] for d in dims)


def _keep(t, x, dims, keepdim):
    """t (of the kept shape) with the reduced dims put back as size 1 when keepdim."""
    if not keepdim or t is None:
        return t
    return t.view(tuple(1 if i in dims else n for i, n in enumerate(x.shape)))


def _check_nonempty(x, dims, op, dim_given):
    if not dim_given and x.numel() == 0:
        raise RuntimeError(f"{op}(): the input is empty (shape {x.shape}); specify a dim to "
                           f"reduce over a non-empty one")
    for d in dims:
        if x.shape[d] == 0:
            raise IndexError(f"{op}(): expected reduction dim {d} to have non-zero size")


def _floating_only(x, op):
    if not dt.is_floating(x.dtype):
        raise TypeError(f"{op}(): the input dtype must be floating point, got {x.dtype}")


def _sum_dtype(x, dtype):
    """sum/prod/cumsum's result dtype: `dtype`, else int64 for bool and integers."""
    if dtype is not None:
        return dt.as_dtype(dtype)
    return x.dtype if dt.is_floating(x.dtype) else dt.int64


def _acc_dtype(out_dtype):
    """float32 sums for the 16-bit floats (as torch), int64 for integers."""
    return dt.compute_dtype(out_dtype) if dt.is_floating(out_dtype) else dt.int64


def _mean_dtype(x, dtype):
    if dtype is not None:
        out = dt.as_dtype(dtype)
        if not dt.is_floating(out):
            raise TypeError(f"mean(): could not infer output dtype. Optional dtype must be "
                            f"floating point, got {out}")
        return out
    if not dt.is_floating(x.dtype):
        raise TypeError(f"mean(): could not infer output dtype. Input dtype must be floating "
                        f"point, got {x.dtype}; pass dtype= to average integers")
    return x.dtype


def _extreme_acc(dtype):
    return dt.int32 if dtype == dt.bool_ else dt.compute_dtype(dtype)


# ---- sum, mean, prod --------------------------------------------------------------------------

def sum(x, dim=None, keepdim=False, dtype=None):
    """Sum over all elements (a 0-d result) or over `dim` (an int or a tuple of ints).

    Bool and integer inputs give int64 unless `dtype` is given; the sum of no elements is 0.
    Float sums are compensated, so long float32 sums stay accurate.

    Example:
        cltensor.sum(x, dim=(0, -1), keepdim=True)
    """
    _check_tensor(x, "sum")
    out = _sum_dtype(x, dtype)
    dims = _dims(x, dim, "sum")
    values, _ = _run(x, dims, SUM, _acc_dtype(out), out)
    return _keep(values, x, dims, keepdim)


def mean(x, dim=None, keepdim=False, dtype=None):
    """Mean over all elements or over `dim`; floating inputs only unless a floating `dtype` is
    given. The mean of no elements is nan.

    Example:
        x.mean(dim=1, keepdim=True)
    """
    _check_tensor(x, "mean")
    out = _mean_dtype(x, dtype)
    dims = _dims(x, dim, "mean")
    values, _ = _run(x, dims, SUM, out, out, divisor=_count(x, dims))
    return _keep(values, x, dims, keepdim)


def prod(x, dim=None, keepdim=False, dtype=None):
    """Product over all elements or over `dim`; bool and integers give int64 unless `dtype`.

    Example:
        cltensor.prod(x, dim=0)
    """
    _check_tensor(x, "prod")
    out = _sum_dtype(x, dtype)
    dims = _dims(x, dim, "prod")
    values, _ = _run(x, dims, PROD, _acc_dtype(out), out)
    return _keep(values, x, dims, keepdim)


# ---- max, min, amax, amin, argmax, argmin -----------------------------------------------------

def max(x, dim=None, keepdim=False):
    """x.max() is a 0-d tensor; max(x, dim) is (values, indices); max(x, other) is maximum.

    NaN wins: a row holding NaN gives NaN and the index of its first NaN; ties give the first
    index.

    Example:
        values, indices = cltensor.max(x, dim=1)
    """
    if isinstance(dim, ClTensor):
        return ew.binary("maximum", x, dim)
    return _extreme(x, dim, keepdim, MAX, "max")


def min(x, dim=None, keepdim=False):
    """x.min() is a 0-d tensor; min(x, dim) is (values, indices); min(x, other) is minimum.

    Example:
        values, indices = cltensor.min(x, dim=1)
    """
    if isinstance(dim, ClTensor):
        return ew.binary("minimum", x, dim)
    return _extreme(x, dim, keepdim, MIN, "min")


def _extreme(x, dim, keepdim, spec, op):
    _check_tensor(x, op)
    if dim is None:
        _check_nonempty(x, (), op, False)
        values, _ = _run(x, _dims(x, None, op), spec, _extreme_acc(x.dtype), x.dtype)
        return values
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}(): dim must be an int, got {dim!r}; use a{op}() to reduce "
                        f"several dims")
    dims = _dims(x, dim, op)
    _check_nonempty(x, dims, op, True)
    values, indices = _run(x, dims, spec, _extreme_acc(x.dtype), x.dtype, ordered=True)
    result = getattr(return_types, op)
    return result(_keep(values, x, dims, keepdim), _keep(indices, x, dims, keepdim))


def amax(x, dim=(), keepdim=False):
    """The largest value over `dim` (an int or a tuple; () or None: all dims); NaN propagates.

    Example:
        cltensor.amax(x, dim=(0, 2))
    """
    return _amax_amin(x, dim, keepdim, MAX, "amax")


def amin(x, dim=(), keepdim=False):
    """The smallest value over `dim` (an int or a tuple; () or None: all dims); NaN propagates.

    Example:
        cltensor.amin(x, dim=-1, keepdim=True)
    """
    return _amax_amin(x, dim, keepdim, MIN, "amin")


def _amax_amin(x, dim, keepdim, spec, op):
    _check_tensor(x, op)
    dims = _dims(x, dim, op)
    _check_nonempty(x, dims, op, True)
    values, _ = _run(x, dims, spec, _extreme_acc(x.dtype), x.dtype)
    return _keep(values, x, dims, keepdim)


def argmax(x, dim=None, keepdim=False):
    """Index of the largest value along `dim`, or the flat index over all elements when dim is
    None. Ties give the first index; a NaN counts as the largest.

    Example:
        cltensor.argmax(x, dim=1)
    """
    return _arg(x, dim, keepdim, MAX, "argmax")


def argmin(x, dim=None, keepdim=False):
    """Index of the smallest value along `dim`, or the flat index when dim is None.

    Example:
        cltensor.argmin(x)
    """
    return _arg(x, dim, keepdim, MIN, "argmin")


def _arg(x, dim, keepdim, spec, op):
    _check_tensor(x, op)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}(): dim must be an int or None, got {dim!r}")
    dims = _dims(x, dim, op)
    _check_nonempty(x, dims, op, dim is not None)
    _, indices = _run(x, dims, spec, _extreme_acc(x.dtype), x.dtype, ordered=True)
    return _keep(indices, x, dims, keepdim)


# ---- var, std, norm, logsumexp ----------------------------------------------------------------

def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` with Bessel's `correction` (default 1; unbiased=False means 0).

    Two passes (the mean, then the corrected sum of squared deviations from it), so a large
    mean costs no accuracy.

    Example:
        cltensor.var(x, dim=0, correction=0)
    """
    return _moment(x, dim, unbiased, keepdim, correction, VAR, "var")


def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation: the square root of var() with the same arguments.

    Example:
        x.std(dim=-1, keepdim=True)
    """
    return _moment(x, dim, unbiased, keepdim, correction, STD, "std")


def _correction(unbiased, correction, op):
    if unbiased is not None and correction is not None:
        raise ValueError(f"{op}(): pass either unbiased or correction, not both")
    if correction is not None:
        if not isinstance(correction, numbers.Real) or isinstance(correction, bool):
            raise TypeError(f"{op}(): correction must be a number, got {correction!r}")
        return correction
    return 1 if unbiased is None or unbiased else 0


def _moment(x, dim, unbiased, keepdim, correction, spec, op):
    _check_tensor(x, op)
    if isinstance(dim, bool):  # the legacy var(x, unbiased) form
        dim, unbiased = None, dim
    corr = _correction(unbiased, correction, op)
    _floating_only(x, op)
    dims = _dims(x, dim, op)
    n = _count(x, dims)
    acc = dt.compute_dtype(x.dtype)  # the aux values are read as ACC_T
    mu, _ = _run(x, dims, SUM, acc, acc, divisor=n)
    values, _ = _run(x, dims, spec, x.dtype, x.dtype, aux=mu, p=n,
                     divisor=builtins.max(0, n - corr))
    return _keep(values, x, dims, keepdim)


def norm(x, p=2, dim=None, keepdim=False):
    """Vector p-norm over `dim` (None: all elements): p = 'fro' (= 2), inf, -inf, 0 (the count
    of non-zeros) or any other real number, giving (sum |x|^p)^(1/p).

    Example:
        cltensor.norm(x, p=1, dim=1)
    """
    _check_tensor(x, "norm")
    _floating_only(x, "norm")
    if p == "fro":
        p = 2
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise ValueError(f"norm(): p must be a real number, 'fro', inf or -inf, got {p!r}")
    if p in (math.inf, -math.inf):
        return (amax if p > 0 else amin)(ew.unary("abs", x), () if dim is None else dim, keepdim)
    spec = {0: NORM0, 1: NORM1, 2: NORM2}.get(p, NORMP)
    dims = _dims(x, dim, "norm")
    values, _ = _run(x, dims, spec, x.dtype, x.dtype, p=p)
    return _keep(values, x, dims, keepdim)


def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) over `dim`, computed stably as m + log(sum(exp(x - m))) with m the max;
    rows of -inf give -inf. Integer inputs are computed in float32.

    Example:
        cltensor.logsumexp(x, dim=1)
    """
    _check_tensor(x, "logsumexp")
    if not dt.is_floating(x.dtype):
        x = x.to(dt.float32)
    dims = _dims(x, dim, "logsumexp")
    if _count(x, dims) == 0:
        shift = ClTensor.empty_on(tuple(n for i, n in enumerate(x.shape) if i not in dims),
                                  dt.compute_dtype(x.dtype), x.device).fill_(0)
    else:
        shift, _ = _run(x, dims, MAX, x.dtype, dt.compute_dtype(x.dtype))
    values, _ = _run(x, dims, LOGSUMEXP, x.dtype, x.dtype, aux=shift)
    return _keep(values, x, dims, keepdim)


# ---- all, any ---------------------------------------------------------------------------------

def all(x, dim=None, keepdim=False):
    """True where every element over `dim` (None: all elements) is non-zero; a bool tensor.

    Example:
        cltensor.all(x > 0, dim=1)
    """
    return _logical(x, dim, keepdim, ALL, "all")


def any(x, dim=None, keepdim=False):
    """True where some element over `dim` (None: all elements) is non-zero (NaN counts).

    Example:
        cltensor.any(x == 0).item()
    """
    return _logical(x, dim, keepdim, ANY, "any")


def _logical(x, dim, keepdim, spec, op):
    _check_tensor(x, op)
    dims = _dims(x, dim, op)
    values, _ = _run(x, dims, spec, dt.int64, dt.bool_)
    if x.dtype == dt.uint8:  # torch's: uint8 in, uint8 (0 or 1) out
        values = values.to(dt.uint8)
    return _keep(values, x, dims, keepdim)


# ---- cumsum, cumprod --------------------------------------------------------------------------

def cumsum(x, dim, dtype=None):
    """Inclusive prefix sums along `dim`; bool and integers give int64 unless `dtype`.

    Example:
        cltensor.cumsum(x, dim=0)
    """
    return _scan(x, dim, dtype, "SCAN_SUM", "cumsum")


def cumprod(x, dim, dtype=None):
    """Inclusive prefix products along `dim`; bool and integers give int64 unless `dtype`.

    Example:
        cltensor.cumprod(x, dim=-1)
    """
    return _scan(x, dim, dtype, "SCAN_PROD", "cumprod")


def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) along `dim`, computed stably with a running max (large values do not
    overflow; a prefix of only -inf gives -inf, a +inf gives +inf from there on); floating
    inputs only.

    Example:
        cltensor.logcumsumexp(cltensor.tensor([0.0, 0.0, 1000.0]), 0)   # [0, log 2, 1000]
    """
    _check_tensor(x, "logcumsumexp")
    _floating_only(x, "logcumsumexp")
    return _scan(x, dim, None, "SCAN_LSE", "logcumsumexp")


def _scan(x, dim, dtype, op_macro, op):
    _check_tensor(x, op)
    if isinstance(dim, (tuple, list)) or dim is None:
        raise TypeError(f"{op}(): dim must be an int, got {dim!r}")
    d = _norm_dim(dim, x.ndim, op)
    out_dtype = _sum_dtype(x, dtype)
    out = ClTensor.empty_on(x.shape, out_dtype, x.device)
    if out.numel() == 0:
        return out
    if x.ndim == 0:
        return out.copy_(x)
    _launch_scan(x, d, out, op_macro)
    return out


def _launch_scan(x, d, out, op_macro):
    device = x.device
    others = [i for i in range(x.ndim) if i != d]
    strides = [[x.strides[i] for i in others], [out.strides[i] for i in others]]
    shape, (xst, ost) = ew.collapse([x.shape[i] for i in others], strides)
    if len(shape) > ew.MAX_DIMS:
        raise ValueError(f"scans support at most {ew.MAX_DIMS} other dims that cannot be merged; "
                         f"got shape {x.shape}, strides {x.strides}")
    lines, n = math.prod(shape), x.shape[d]
    blocks = _scan_blocks(device, lines, n)
    ks = get_scan_kernels(device, op_macro, x.dtype, out.dtype)
    args = [x.storage.buf, ew.view_arg(x.offset, xst), np.int64(x.strides[d]), ew.shape_arg(shape),
            np.int32(len(shape)), np.int64(lines), np.int64(n), np.int64(blocks),
            np.int64(-(-n // blocks))]
    # CARRY_PARTS in scan.cl: float sums and products are compensated, log-sum-exps keep a max
    parts = 2 if op_macro == "SCAN_LSE" or dt.is_floating(out.dtype) else 1
    carry = ClTensor.empty_on((lines * blocks * parts if blocks > 1 else 1,),
                              dt.compute_dtype(out.dtype), device)
    if blocks > 1:
        _launch_lines(device, ks.totals, lines * blocks, *args, carry.storage.buf)
        _launch_lines(device, ks.carry, lines, np.int64(lines), np.int64(blocks),
                      carry.storage.buf)
    _launch_lines(device, ks.blocks, lines * blocks, *args, carry.storage.buf, out.storage.buf,
                  ew.view_arg(out.offset, ost), np.int64(out.strides[d]))


def _scan_blocks(device, lines, n):
    """B: blocks per line, so that lines * B work-items keep the device busy."""
    t = _tuning(device)
    want = device.cl_device.max_compute_units * t["scan_items_per_cu"]
    return builtins.max(1, builtins.min(-(-want // lines), n // t["scan_min_block"],
                                        t["scan_max_blocks"]))


def _launch_lines(device, kernel, items, *args):
    local = builtins.min(_tuning(device)["scan_group"], device.max_work_group)
    launch(device, kernel, (round_up(items, local),), (local,), *args)


# ---- tensor methods ---------------------------------------------------------------------------

TENSOR_METHODS = {f.__name__: f for f in (sum, mean, prod, max, min, amax, amin, argmax, argmin,
                                          var, std, norm, all, any, logsumexp, cumsum, cumprod,
                                          logcumsumexp)}
