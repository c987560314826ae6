"""The GEMM engine under every matrix product and layer:

    out[b] = act(alpha * a[b] @ b[b] + beta * c[b] + row_bias[:, None] + col_bias[None, :])

over strided, batched views (a transposed operand is a view, never a copy), with the kernel
family and its parameters chosen per device and problem from the tuning database
(cltensor/tune.py, cltensor/tuning/gemm.json). The families (cl_kernels/gemm_*.cl, each
prepended with gemm_common.cl):

    direct  gemm_direct.cl:gemm_direct  bounds-checked register tiles straight from any strides,
            no local memory: CPUs' small and odd sizes, integer dtypes
    tiled   gemm_direct.cl:gemm_tiled   bounds-checked local-memory tiles: GPUs' small sizes
    packed  gemm_cpu.cl:gemm_packed over gemm_pack.cl:pack_panels: CPUs
    xgemm   gemm_xgemm.cl:xgemm, operands read in place when aligned and whole tiles, else
            copied by gemm_pack.cl:pad_copy: GPUs
"""
import importlib
import math
import sys
import time
from typing import NamedTuple

import numpy as np
import pyopencl as cl

from .. import backends, caches, program
from ..program import ctype_of, launch, memo_with, remember, round_up
from ..tensor import ClTensor
from . import elementwise as ew

__all__ = ["gemm"]

FAMILIES = ("direct", "tiled", "packed", "xgemm")
# None picks per device and problem; a family name forces it (tests, benchmarks, the tuner).
FORCE_FAMILY = None
# NVIDIA's OpenCL inherits CUDA's limit of 65535 work-groups along dims 1 and 2 of a launch;
# larger problems are split into several launches over rows and batches.
MAX_GROUPS = 65535
MAX_DIM_SIZE = 2**31 - 1  # M, N and K are ints in the kernels
# Used when the database's own choices do not fit a device, largest first.
TILED_FALLBACKS = (
    {"TSM": 64, "TSN": 64, "TSK": 16, "WPTM": 4, "WPTN": 4},
    {"TSM": 32, "TSN": 32, "TSK": 16, "WPTM": 2, "WPTN": 2},
    {"TSM": 16, "TSN": 16, "TSK": 8, "WPTM": 2, "WPTN": 2},
    {"TSM": 8, "TSN": 8, "TSK": 8, "WPTM": 1, "WPTN": 1},
)
XGEMM_FALLBACKS = (
    {"MWG": 64, "NWG": 64, "KWG": 16, "MDIMC": 16, "NDIMC": 16, "VWM": 4, "VWN": 4,
     "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": 2},
    {"MWG": 32, "NWG": 32, "KWG": 8, "MDIMC": 8, "NDIMC": 8, "VWM": 2, "VWN": 2,
     "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": 1},
)
VECTOR_BYTES = 16  # widest global load of gemm_xgemm.cl
DIRECT_GPU_LOCAL = (16, 8)  # gemm_direct's work-group off the CPU
# How gemm_direct may read B's rows: through b_cs, as unaligned vectors, as aligned vectors.
B_STRIDED, B_UNIT, B_ALIGNED = "strided", "unit", "aligned"
EPI_ROW_BIAS, EPI_COL_BIAS, EPI_RELU = 1, 2, 4
_ZERO = np.int64(0)  # an absent bias's offset and stride
_fits = caches.register("ops.gemm.fits", {})
# Device-specific GEMM kernels offered from above: callables device -> [objects whose
# gemm(p, alpha, beta, has_ci, row_bias, col_bias, relu) runs p and returns True, or declines];
# cltensor.plugins registers its lookup here, so that this engine never imports plug-ins.
PROVIDERS = []
generation = 0  # counts the changes to what PROVIDERS offer (keys of replayed launches)


class Operand(NamedTuple):
    """One operand seen by the kernels: its tensor (buffer, offset), strides over the collapsed
    batch dims, and its row and column strides."""
    t: object
    bstrides: list
    rs: int
    cs: int


class Problem(NamedTuple):
    device: object
    dtype: np.dtype
    m: int
    n: int
    k: int
    bshape: tuple
    a: Operand
    b: Operand
    ci: Operand
    co: Operand

    @property
    def nbatch(self):
        return math.prod(self.bshape)


# ---- kernels ----------------------------------------------------------------------------------

def get_kernel(device, filename, name, defines, rebuild=None):
    """A kernel of cl_kernels/<filename> (prepended with gemm_common.cl), built once (rebuild:
    see program.build_program)."""
    source = program.read_sources("gemm_common.cl", filename)
    return program.get_kernel(device, filename, name, defines, source, rebuild)


def kernel_fits(device, kernel, wgs):
    """Whether the built kernel accepts wgs work-items within the device's local memory.
    NOTE: memoized; the queries cost tens of microseconds on some drivers."""
    key = (kernel, device, wgs, device.local_mem)  # NOTE: the kernel itself, not a reusable id
    if key not in _fits:
        info = cl.kernel_work_group_info
        _fits[key] = (
            kernel.get_work_group_info(info.WORK_GROUP_SIZE, device.cl_device) >= wgs and
            kernel.get_work_group_info(info.LOCAL_MEM_SIZE, device.cl_device) <= device.local_mem)
    return _fits[key]


def _group_fits(device, lx, ly, local_bytes):
    sizes = device.cl_device.max_work_item_sizes
    return (lx * ly <= device.max_work_group and lx <= sizes[0] and ly <= sizes[1] and
            local_bytes <= device.local_mem)


# ---- choosing a family ------------------------------------------------------------------------

def entry_for(device, dtype):
    """The database entry for GEMM on a device: float64 and int64 share gemm_float64's
    parameters, 4-byte types gemm_float32's (register tiles are sized in bytes)."""
    # NOTE: tune is imported on first use, not at import time, so that `python -m
    # cltensor.tune` runs cleanly; sys.modules is the cheap way to reach it after that
    tune = sys.modules.get("cltensor.tune") or importlib.import_module("cltensor.tune")
    kernel = "gemm_float32" if np.dtype(dtype).itemsize <= 4 else "gemm_float64"
    return tune.current("gemm", kernel, device)


def small_family(entry):
    return entry.get("small", "direct")


def family_of(device, dtype, entry, shape, nbatch=1):
    """The family that runs an (M, N, K) product: the entry's (or the forced) family, the
    entry's small-problem kernel below its thresholds, and a bounds-checked kernel for integer
    dtypes and K == 0."""
    m, n, k = shape
    fam = FORCE_FAMILY or entry["family"]
    fast = fam in ("packed", "xgemm")
    if fast and (np.dtype(dtype).kind != "f" or k == 0):
        fam = small_family(entry)
    elif fast and FORCE_FAMILY is None and (m * n * k * nbatch < entry.get("min_work", 0) or
                                            min(m, n) < entry.get("min_dim", 0) or
                                            m < entry.get("min_m", 0)):
        fam = small_family(entry)
    if fam == "tiled" and not _tiled_candidates(device, entry, np.dtype(dtype).itemsize):
        fam = "direct"
    return fam


# ---- the launcher -----------------------------------------------------------------------------

def _operand_args(op):
    return [op.t.storage.buf, ew.view_arg(op.t.offset, op.bstrides), np.int64(op.rs),
            np.int64(op.cs)]


def launch_tiles(p, kernel, tile, groups_n, local, k_arg, tail, rows_in_dim0=False,
                  splits=1, summed=False):
    """Launch over (groups_n, ceil(M / tile) groups, batches * splits), split so that dims 1
    and 2 stay within MAX_GROUPS; rows_in_dim0 puts the row groups in dim 0 (gemm_packed
    walking down M); summed: the first batch dim is summed in the kernel, not launched."""
    nz = p.nbatch // p.bshape[0] if summed else p.nbatch * splits
    for gsize, head in _tile_launches(p.m, p.n, k_arg, p.bshape, tile, groups_n, tuple(local),
                                      rows_in_dim0, nz):
        launch(p.device, kernel, gsize, local, *head, *tail)


@caches.lru_cache(maxsize=4096)
def _tile_launches(m, n, k_arg, bshape, tile, groups_n, local, rows_in_dim0, nz):
    """[(global size, leading arguments)] of launch_tiles' launches (memoized); nz: the
    batches of the grid."""
    groups_m = -(-m // tile)
    head = (np.int32(m), np.int32(n), np.int32(k_arg))
    batch = (np.int32(len(bshape)), ew.shape_arg(bshape))
    launches = []
    for b0 in range(0, nz, MAX_GROUPS):
        nb = min(MAX_GROUPS, nz - b0)
        step = groups_m if rows_in_dim0 else MAX_GROUPS
        for g0 in range(0, groups_m, step):
            cnt = min(step, groups_m - g0)
            dims = (cnt, groups_n) if rows_in_dim0 else (groups_n, cnt)
            gsize = (dims[0] * local[0], dims[1] * local[1], nb)
            launches.append((gsize, (*head, np.int32(g0 * tile), np.int64(b0), *batch)))
    return tuple(launches)


def epilogue_args(p, alpha, beta, has_ci, row_bias, col_bias, relu):
    """The EPI_ARGS of gemm_common.cl: alpha, beta, C's input and output, the epilogue's flags
    and both biases (an absent one as C's buffer with offset and stride 0)."""
    dt = p.dtype.type
    flags = ((EPI_ROW_BIAS if row_bias is not None else 0) |
             (EPI_COL_BIAS if col_bias is not None else 0) | (EPI_RELU if relu else 0))
    args = [dt(alpha), dt(beta if has_ci else 0), *_operand_args(p.ci), *_operand_args(p.co),
            np.int32(flags)]
    for bias in (row_bias, col_bias):
        if bias is None:
            args += [p.co.t.storage.buf, _ZERO, _ZERO]
        else:
            args += [bias.storage.buf, np.int64(bias.offset), np.int64(bias.strides[0])]
    return args


# ---- family: direct and tiled (gemm_direct.cl) ------------------------------------------------

def _b_layout(p, vw):
    """How gemm_direct may read B, from its strides."""
    if p.b.cs != 1 and p.n != 1:
        return B_STRIDED
    aligned = (all(s % vw == 0 for s in [p.b.t.offset, p.b.rs, *p.b.bstrides]) and
               vw * p.dtype.itemsize * 8 <= p.device.cl_device.mem_base_addr_align)
    return B_ALIGNED if aligned else B_UNIT


def direct_rows(m, tm):
    """gemm_direct's rows per work-item for M rows: the largest power of two up to the entry's
    TM that divides M, so that no block is cut by C's edge (a cut block runs a scalar loop:
    PoCL, 2 AVX-512 cores, the input gradients of batch-2/4/6 linear layers 2.3-4x faster,
    4 x 36864 x 3072 94 -> 34 ms, 2 x 25088 x 4096 98 -> 25, 6 x 4096 x 4096 17 -> 11)."""
    while tm > 1 and m % tm:
        tm //= 2
    return tm


def _run_direct(p, entry, epi):
    params = dict(entry["direct"])
    params["TM"] = direct_rows(p.m, params["TM"])
    defines = dict(params, T=ctype_of(p.dtype))
    layout = _b_layout(p, params["VW"])
    if layout != B_STRIDED:
        defines["B_UNIT_N"] = None
    if layout == B_ALIGNED:
        defines["B_ALIGNED"] = None
    kernel = get_kernel(p.device, "gemm_direct.cl", "gemm_direct", defines)
    # NOTE: PoCL compiles a kernel once per local size; a fixed (1, 1, 1) avoids a compile for
    # every new global size that the runtime's own choice would bring.
    lx, ly = (1, 1) if p.device.is_cpu else DIRECT_GPU_LOCAL
    tail = _operand_args(p.a) + _operand_args(p.b) + epi
    launch_tiles(p, kernel, params["TM"] * ly, -(-p.n // (params["TN"] * lx)), (lx, ly, 1),
                  p.k, tail)


# ---- family: rowdot (gemm_rowdot.cl) -----------------------------------------------------------

def _rowdot_applies(p, entry):
    """A few rows (at most the entry's rowdot_max_m) with A and B both K-contiguous: a linear
    layer's x @ W^T at a small batch."""
    return p.m <= entry.get("rowdot_max_m", 0) and p.a.cs == 1 and p.b.rs == 1 and p.k > 0


def _run_rowdot(p, entry, epi):
    params = entry.get("rowdot", {})
    vw = params.get("VW", 16)
    nb = max(1, min(params.get("NB", 4), ROWDOT_ACCUMULATORS // p.m))
    defines = {"T": ctype_of(p.dtype), "MR": p.m, "NB": nb, "VW": vw}
    if all(v % vw == 0 for v in (p.a.rs, p.b.cs, p.a.t.offset, p.b.t.offset,
                                 *p.a.bstrides, *p.b.bstrides)):
        defines["ALIGNED"] = None
    kernel = get_kernel(p.device, "gemm_rowdot.cl", "gemm_rowdot", defines)
    lx = ROWDOT_LOCAL
    tail = _operand_args(p.a) + _operand_args(p.b) + epi
    launch_tiles(p, kernel, p.m, -(-p.n // (nb * lx)), (lx, 1, 1), p.k, tail)


ROWDOT_ACCUMULATORS = 16  # vector accumulators (M * NB) per work-item: AVX-512 has 32 registers
ROWDOT_LOCAL = 16  # NOTE: fixed, so that PoCL compiles the kernel once


def _tiled_candidates(device, entry, itemsize):
    out = []
    for params in [entry.get("tiled"), *TILED_FALLBACKS]:
        if params is None:
            continue
        lx, ly = params["TSN"] // params["WPTN"], params["TSM"] // params["WPTM"]
        local = params["TSK"] * (params["TSM"] + params["TSN"] + 2) * itemsize
        if _group_fits(device, lx, ly, local):
            out.append(params)
    return out


def _run_tiled(p, entry, epi):
    for params in _tiled_candidates(p.device, entry, p.dtype.itemsize):
        kernel = get_kernel(p.device, "gemm_direct.cl", "gemm_tiled",
                            dict(params, T=ctype_of(p.dtype)))
        lx, ly = params["TSN"] // params["WPTN"], params["TSM"] // params["WPTM"]
        if kernel_fits(p.device, kernel, lx * ly):
            break
    else:
        return _run_direct(p, entry, epi)
    flags = [np.int32(abs(p.a.cs) <= abs(p.a.rs)), np.int32(abs(p.b.cs) <= abs(p.b.rs))]
    tail = _operand_args(p.a) + _operand_args(p.b) + epi + flags
    launch_tiles(p, kernel, params["TSM"], -(-p.n // params["TSN"]), (lx, ly, 1), p.k, tail)


# ---- family: packed (gemm_cpu.cl) -------------------------------------------------------------

PACK_LOCAL = 16  # pack_panels' work-group along K


def scratch(p, numel):
    """A fresh tensor of numel elements of the problem's dtype, on its device."""
    return ClTensor.empty_on((numel,), p.dtype, p.device)


def _pack_panels(p, op, rows, rs, ks, width):
    """op as panels of `width` rows (gemm_pack.cl), one copy when every batch shares it;
    returns (scratch tensor, its batch stride)."""
    shared = not any(op.bstrides)
    nb = 1 if shared else p.nbatch
    size = -(-rows // width) * p.k * width
    dst = scratch(p, nb * size)
    kernel = get_kernel(p.device, "gemm_pack.cl", "pack_panels",
                        {"T": ctype_of(p.dtype), "PR": width})
    lx = min(PACK_LOCAL, p.device.max_work_group)
    bshape = () if shared else p.bshape
    for b0 in range(0, nb, MAX_GROUPS):
        gsize = (round_up(p.k, lx), -(-rows // width), min(MAX_GROUPS, nb - b0))
        launch(p.device, kernel, gsize, (lx, 1, 1), np.int32(rows), np.int32(p.k),
               np.int64(b0), np.int32(len(bshape)), ew.shape_arg(bshape), op.t.storage.buf,
               ew.view_arg(op.t.offset, op.bstrides), np.int64(rs), np.int64(ks),
               dst.storage.buf, np.int64(0 if shared else size))
    return dst, 0 if shared else size


def packed_walks_n(p, params):
    """Whether gemm_packed's consecutive work-items walk along N (ORDER 1: they share A's panel
    and write C's rows in order) rather than down M (ORDER 0: they share B's panel, each
    streaming its own A panel of MR x K). Products with K of at least WALK_M_FROM_K walk down
    M whatever ORDER says (gemm.json: the PoCL measurements)."""
    return params.get("ORDER", 0) == 1 and p.k < params.get("WALK_M_FROM_K", 2**62)


# Deep B whose rows lie a multiple of this many bytes apart is packed: its panel's rows share
# cache sets (PoCL, 2 AVX-512 cores, ms in place vs packed: 2048^3 107 vs 91; CPU ms 1024^3
# 16.7 vs 10.7, 2048x1024x1024 28.3 vs 22.2; K = 512 level; docs/performance.md)
ALIASED_ROW_BYTES, ALIASED_MIN_K = 4096, 1024


def packed_reads_b_in_place(p, params):
    """Whether gemm_packed reads B where it is (rows contiguous along N) instead of from packed
    panels: from N = B_IN_PLACE_MIN_N columns on (gemm.json: on PoCL the pack, a full memory
    pass, cost as much as the product on the convolutions' shallow batched products; narrower
    B spends too much of its panels in the partial last one) and below K = B_IN_PLACE_MAX_K
    (deeper, a panel's rows far apart stream worse than a packed panel), unless its rows
    alias."""
    aliased = p.k >= ALIASED_MIN_K and p.b.rs * p.dtype.itemsize % ALIASED_ROW_BYTES == 0
    return (p.b.cs == 1 and p.n >= params.get("B_IN_PLACE_MIN_N", 2**62) and not aliased and
            p.k < params.get("B_IN_PLACE_MAX_K", 2**62))


def packed_reads_a_in_place(p, params):
    """Whether gemm_packed reads A where it is (rows contiguous along K, A_IN_PLACE set)."""
    return bool(params.get("A_IN_PLACE")) and (p.a.cs == 1 or p.k == 1)


def _packed_operand(p, op, in_place, ld, rows, rs, ks, width):
    """[buffer, batch stride, View, leading dim] of an operand as gemm_packed reads it: where
    it is (its View and leading dim), or packed into panels of `width` rows."""
    if in_place:
        return [op.t.storage.buf, np.int64(0), ew.view_arg(op.t.offset, op.bstrides),
                np.int64(ld)]
    t, bs = _pack_panels(p, op, rows, rs, ks, width)
    return [t.storage.buf, np.int64(bs), ew.view_arg(0, [0] * len(p.bshape)), np.int64(0)]


def _moves(p, params):
    """Elements gemm_packed moves one at a time for a problem: those it packs into panels (what
    it cannot read in place) and those it stores per element (C not row-contiguous).
    NOTE: gemm_into runs the transposed problem when that moves fewer: with both operands
    K-contiguous (1x1 weight gradients, x @ W^T) the smaller one is packed. PoCL, 2 AVX-512
    cores, kernel ms with packs, interleaved medians: 64x512x1568 (GoogLeNet 4b/pool's weight
    gradient) 1.58 -> 1.10, 32x256x6272 2.15 -> 1.08, x @ W^T at batch 64 (64x4096x9216)
    84.9 -> 31.9; counting packs alone, 1x1 input gradients (832x49x48 x8, A shared) were
    transposed for a column-strided C and lost (0.31 -> 0.44 ms)."""
    count = 0 if p.co.cs == 1 else p.m * p.n * p.nbatch
    for op, rows, in_place in ((p.a, p.m, packed_reads_a_in_place(p, params)),
                               (p.b, p.n, packed_reads_b_in_place(p, params))):
        if not in_place:
            count += rows * p.k * (p.nbatch if any(op.bstrides) else 1)
    return count


def packed_nr(p, params):
    """gemm_packed's NR for a problem: the entry's, or half of it when N fits in half (and VW
    divides it). NOTE: a narrow product fills half the lanes of a full-width tile. PoCL, 2
    AVX-512 cores, 2026-12-01, ms with packs, medians of 7 interleaved rounds, NR 32 vs 16:
    GoogLeNet's 1x1 weight gradients with 16 outputs (run transposed) 192x16x6272 0.61 vs 0.39
    (numpy 0.56 on the same operands) and 480x16x1568 0.41 vs 0.28, 1000x8x512 0.31 vs 0.24,
    192x16x256 level; at N = 24 (two panels) 16 lost (0.73 vs 0.93)."""
    nr = params["NR"]
    if p.n <= nr // 2 and (nr // 2) % params["VW"] == 0:
        return nr // 2
    return nr


def _run_packed(p, entry, epi, summed=False):
    """gemm_packed on p; summed: C is the sum over the first batch dim (gemm_sum_into)."""
    params = entry["packed"]
    mr, nr = params["MR"], packed_nr(p, params)
    a_in_place = packed_reads_a_in_place(p, params)
    b_in_place = packed_reads_b_in_place(p, params)
    tile = {"MR": mr, "NR": nr, "VW": params["VW"], "T": ctype_of(p.dtype),
            "A_INPLACE": int(a_in_place), "B_INPLACE": int(b_in_place)}
    if "KB" in params:  # else gemm_cpu.cl's default block of K
        tile["KB"] = params["KB"]
    if summed:
        tile["SUM_BATCHES"] = 1
    kernel = get_kernel(p.device, "gemm_cpu.cl", "gemm_packed", tile)
    a_args = _packed_operand(p, p.a, a_in_place, p.a.rs, p.m, p.a.rs, p.a.cs, mr)
    b_args = _packed_operand(p, p.b, b_in_place, p.b.rs, p.n, p.b.cs, p.b.rs, nr)
    # NOTE: B read in place walks down M, so that its panel (K rows far apart) is read from
    # memory once for all of M; walking N streamed all of B once per panel of A (PoCL, gemm.json)
    walk_n = packed_walks_n(p, params) and not b_in_place
    tail = a_args + b_args + [np.int32(walk_n)] + epi
    launch_tiles(p, kernel, mr, -(-p.n // nr), (1, 1, 1), p.k, tail, rows_in_dim0=not walk_n,
                  summed=summed)


# ---- family: xgemm (gemm_xgemm.cl) ------------------------------------------------------------

def xgemm_valid(params):
    """True when an xgemm parameter set is self-consistent (see gemm_xgemm.cl's header)."""
    q = params
    try:
        wgs = q["MDIMC"] * q["NDIMC"]
        return (q["MWG"] % (q["MDIMC"] * q["VWM"]) == 0 and q["NWG"] % (q["NDIMC"] * q["VWN"]) == 0
                and q["PADA"] % q["VWM"] == 0 and q["PADB"] % q["VWN"] == 0
                and q["KWG"] * q["MWG"] % wgs == 0 and q["KWG"] * q["NWG"] % wgs == 0
                and q["VWM"] in (1, 2, 4, 8, 16) and q["VWN"] in (1, 2, 4, 8, 16)
                and q["NBUF"] in (1, 2) and min(v for k, v in q.items() if k.isupper()) >= 0)
    except (KeyError, TypeError, ZeroDivisionError):
        return False


def xgemm_local_bytes(params, itemsize):
    q = params
    return q["NBUF"] * q["KWG"] * (q["MWG"] + q["PADA"] + q["NWG"] + q["PADB"]) * itemsize


def _xgemm_candidates(device, entry, itemsize):
    """The entry's xgemm parameter sets that fit the device, then (unless the entry is strict,
    as the tuner's are) the fallbacks that fit (memoized: every product asks)."""
    def candidates():
        own = [q for q in entry.get("xgemm", []) if xgemm_valid(q)]
        extra = [] if entry.get("strict") else list(XGEMM_FALLBACKS)
        fits = lambda q: _group_fits(device, q["NDIMC"], q["MDIMC"],
                                     xgemm_local_bytes(q, itemsize))
        return [q for q in own if fits(q)], [q for q in extra if fits(q)]
    # NOTE: the limits are in the key: tests lower them on a live device
    key = (device, device.max_work_group, device.local_mem, itemsize, bool(entry.get("strict")))
    return memo_with(_candidates, key, entry.get("xgemm"), candidates)


# (device, its limits, itemsize, strict, id of the entry's sets) -> (own, extra)
_candidates = caches.register("ops.gemm.candidates", {})


MAX_SPLITS = 16
SPLIT_MIN_SLICES = 4  # K slices per split, at least


def xgemm_plan(p, entry, params):
    """(estimated seconds, K splits) of running an xgemm parameter set on problem p: the split
    count, a power of two up to xgemm_max_splits, that minimizes xgemm_seconds.
    NOTE: powers of two only: the other counts ran far slower than estimated on the H200
    (Overfeat fc1, 128 x 3072 x 36864, 128x64 set: 11 splits 1072 us against 737 estimated,
    8 splits 764), and the plan restricted to them was faster or level on all 7 split products
    of benchmarks/gemm.py (fc1 0.64x -> 0.79x cuBLAS, VGG fc6 0.73x -> 0.78x)."""
    top = xgemm_max_splits(p, entry, params)
    return min((xgemm_seconds(p, entry, params, s), s)
               for s in (1 << e for e in range(top.bit_length())))


def xgemm_max_splits(p, entry, params):
    slices = -(-p.k // params["KWG"])
    return max(1, min(MAX_SPLITS, slices // SPLIT_MIN_SLICES)) if entry.get("split_k", True) else 1


def xgemm_seconds(p, entry, params, splits):
    """Estimated seconds of an xgemm parameter set on problem p with K split in `splits`
    shares. The work-groups spread evenly over the compute units (entry "compute_units",
    default the device's); the busiest unit's groups run at the set's measured rate ("rate",
    GFLOP/s at the tuning size, scaled to p's layout by its layout_factors) per unit when it
    holds at least groups_per_cu of them,
    proportionally slower when fewer, so that padding and idle or half-filled units count.
    Splits add their extra pass (split_cost_us plus their partial sums at bandwidth_gbs)."""
    units = entry.get("compute_units") or p.device.cl_device.max_compute_units
    tiles = -(-p.m // params["MWG"]) * -(-p.n // params["NWG"]) * p.nbatch
    slices = -(-p.k // params["KWG"])
    unit_rate = _rate(p, params) * 1e9 / units
    depth = -(-slices // splits) * params["KWG"]  # each share's K
    busiest = -(-tiles * splits // units)  # work-groups on the busiest unit
    work = busiest * 2.0 * params["MWG"] * params["NWG"] * depth
    secs = work / (unit_rate * min(1.0, busiest / groups_per_cu(entry, params)))
    if splits > 1:
        secs += (entry.get("split_cost_us", 20) * 1e-6 + (splits + 1) * p.m * p.n *
                 p.nbatch * p.dtype.itemsize / (entry.get("bandwidth_gbs", 100) * 1e9))
    return secs


LAYOUTS = ("KN", "MN", "KK", "MK")


def layout_of(p):
    """How A and B are stored, as their contiguous dims: "KN" (both row-major, the layout a
    set's rate is measured in), "MN", "KK" or "MK". A set's "layout_factors" scale its rate to
    the others (its speed there against its rate, measured in one run: the tuner)."""
    return ("K" if p.a.cs == 1 else "M") + ("K" if p.b.rs == 1 else "N")


def _rate(p, params):
    """The set's rate (GFLOP/s) in p's layout; a product priced by its sizes alone (conv's
    implicit GEMM, whose gathers are neither layout) at its rate."""
    factors = params.get("layout_factors")
    if not factors or getattr(p, "a", None) is None:
        return params.get("rate", 1.0)
    return params.get("rate", 1.0) * factors.get(layout_of(p), 1.0)


def groups_per_cu(entry, params):
    """Work-groups of a parameter set that one compute unit runs at once to reach the set's
    rate: the set's own "groups_per_cu", else enough for the entry's threads_per_cu (H200:
    one 256-item group reached the 4096^3 rate on one unit, gemm.json)."""
    wgs = params["MDIMC"] * params["NDIMC"]
    return params.get("groups_per_cu") or max(1, -(-entry.get("threads_per_cu", 256) // wgs))


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


def _xgemm_operand(p, op, rows, rs, ks, tile, params, kp):
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


def pad_copy(p, op, sizes, padded, strides, dst):
    """dst = a dense zero-padded copy (batches, *padded) of op, one copy when the batches
    share it."""
    shared = not any(op.bstrides)
    nb = 1 if shared else p.nbatch
    kernel = get_kernel(p.device, "gemm_pack.cl", "pad_copy", {"T": ctype_of(p.dtype)})
    lx = min(256, p.device.max_work_group)
    bshape = () if shared else p.bshape
    size = padded[0] * padded[1]
    for b0 in range(0, nb, MAX_GROUPS):
        launch(p.device, kernel, (round_up(size, lx), min(MAX_GROUPS, nb - b0)), (lx, 1),
               np.int32(sizes[0]), np.int32(sizes[1]), np.int32(padded[0]),
               np.int32(padded[1]), np.int64(b0), np.int32(len(bshape)), ew.shape_arg(bshape),
               op.t.storage.buf, ew.view_arg(op.t.offset, op.bstrides), np.int64(strides[0]),
               np.int64(strides[1]), dst.storage.buf)


def dense_strides(shape, inner):
    """Row-major strides of `shape` whose innermost element spans `inner` elements."""
    strides, acc = [], inner
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def _xgemm_kernel(p, params, xa, xb, name="xgemm"):
    defines = {k: v for k, v in params.items() if k.isupper()}  # not "rate"
    defines.update(T=ctype_of(p.dtype), A_KC=xa.kc, B_KC=xb.kc, VWA=xa.vw, VWB=xb.vw,
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


def _layout_key(p):
    """What decides an xgemm run besides the parameter set and the operands' tensors: the
    device and its limits (tests lower them), sizes, batches, A's and B's strides and their
    offsets' alignment to vectors (C is read and written through its strides by any plan)."""
    vw = VECTOR_BYTES // p.dtype.itemsize
    a, b = p.a, p.b
    return (p.device, p.device.max_work_group, p.device.local_mem, p.dtype, p.m, p.n, p.k,
            p.bshape, a.rs, a.cs, tuple(a.bstrides), a.t.offset % vw, b.rs, b.cs,
            tuple(b.bstrides), b.t.offset % vw)


def _plan_key(p, params, splits):
    return (id(params), splits) + _layout_key(p)


def _prepare(p, params, splits):
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
    xa, copy_a = _xgemm_operand(p, p.a, p.m, p.a.rs, p.a.cs, params["MWG"], params, kp)
    xb, copy_b = _xgemm_operand(p, p.b, p.n, p.b.cs, p.b.rs, params["NWG"], params, kp)
    kernel = _xgemm_kernel(p, params, xa, xb)
    if kernel is None:
        return None
    copies = tuple(c for c in (copy_a, copy_b) if c is not None)
    return XPlan(params, kernel, xa, xb, copies, splits)


def _run_xgemm(p, entry, epi):
    own, extra = _xgemm_candidates(p.device, entry, p.dtype.itemsize)
    if not own and not extra:
        if entry.get("strict"):
            raise RuntimeError(f"xgemm: no parameter set of the entry fits {p.device}")
        return _run_tiled(p, entry, epi)
    plan = _timed_plan(p, entry, own) if backends.benchmark and own else None
    if plan is None:
        for params, splits in _ranking(p, entry, own, extra):
            plan = _prepare(p, params, splits)
            if plan is not None:
                break
            if entry.get("strict"):
                raise RuntimeError(f"xgemm: {params} does not fit {p.device}'s registers")
        else:
            return _run_tiled(p, entry, epi)
        if not plan.copies:
            remember(_recipes, (FORCE_FAMILY,) + _layout_key(p),
                     (entry, plan.params, plan.kernel, plan.xa[1:], plan.xb[1:], plan.splits))
    _launch_xgemm(p, plan, epi)


# (FORCE_FAMILY, _layout_key) -> (entry, params, kernel, XOperand fields of A and B, splits):
# the estimate's in-place xgemm plan of a product, which gemm_into replays for the same
# layout and entry without choosing the family and the set again (tens of microseconds of
# host time a product; benchmark mode's timed choices are not kept here)
_recipes = caches.register("ops.gemm.recipes", {})


def _replayed_plan(p, entry):
    """The XPlan p ran with last time with this entry and layout (an in-place xgemm plan),
    reading p's tensors; None when there is none."""
    hit = _recipes.get((FORCE_FAMILY,) + _layout_key(p))
    if hit is None or hit[0] is not entry:
        return None
    _, params, kernel, xa, xb, splits = hit
    return XPlan(params, kernel, XOperand(p.a.t, *xa), XOperand(p.b.t, *xb), (), splits)


# (device, problem, the entry's settings, its sets) -> (sets, ranking)
_ranked = caches.register("ops.gemm.ranked", {})
# the entry's settings that xgemm_plan reads besides its sets
PLAN_SETTINGS = ("compute_units", "threads_per_cu", "split_k", "split_cost_us", "bandwidth_gbs")


def _ranking(p, entry, own, extra):
    """[(params, K splits)]: own by xgemm_plan's estimate, then the fallbacks; memoized, since
    estimating every set and split count costs more host time than a launch."""
    def rank():
        plans = [(q, *xgemm_plan(p, entry, q)) for q in own]
        ranking = [(q, splits) for q, _, splits in sorted(plans, key=lambda r: r[1])]
        return ranking + [(q, xgemm_plan(p, entry, q)[1]) for q in extra]
    key = (p.device, p.dtype.itemsize, p.m, p.n, p.k, p.nbatch, layout_of(p), len(own),
           len(extra), *[entry.get(k) for k in PLAN_SETTINGS])
    return memo_with(_ranked, key, entry.get("xgemm"), rank)


def _launch_xgemm(p, plan, epi):
    q, splits = plan.params, plan.splits
    part = scratch(p, splits * p.nbatch * p.m * p.n) if splits > 1 else p.co.t
    tail = []
    for x in (plan.xa, plan.xb):
        tail += [x.t.storage.buf, ew.view_arg(x.t.offset, x.bstrides), np.int64(x.ld)]
    tail += [np.int32(splits), part.storage.buf]
    reduce = _xgemm_kernel(p, q, plan.xa, plan.xb, "xgemm_reduce") if splits > 1 else None
    # NOTE: everything is decided before the first enqueue: host work between the copies and
    # the product would leave the device idle.
    for copy in plan.copies:
        copy()
    launch_tiles(p, plan.kernel, q["MWG"], -(-p.n // q["NWG"]), (q["NDIMC"], q["MDIMC"], 1),
                  p.k, tail + epi, splits=splits)
    if splits > 1:
        reduce_splits(p, reduce, splits, part, epi)


# ---- benchmark mode (cltensor.backends.benchmark) ---------------------------------------------
# The estimate above ranks parameter sets and split counts well on the whole, but not always:
# on the H200 the time of a split-K product is not smooth in the split count (AlexNet fc6 with
# the 128x64 set: 37.1 TFLOP/s in 4 splits, 24.4 in 8, 31.5 in 16). Benchmark mode times the
# candidates whose estimate is within BENCH_SLACK of the best, once per device and problem
# shape, into a scratch output, and keeps the fastest (in memory, like cudnn.benchmark).
BENCH_SLACK = 2.0
BENCH_MIN_SECONDS = 20e-6  # products estimated faster than this run the estimate's choice
BENCH_REPEAT = 3
# (device, shape key) -> (params, splits, {(set index, splits): seconds})
_timed = caches.register("ops.gemm.timed", {})


def _bench_key(p):
    """What decides an xgemm choice: dtype, sizes, batches and each operand's layout
    (contiguous dims, shared batches, alignment of its offset and strides to vectors)."""
    vw = VECTOR_BYTES // p.dtype.itemsize

    def layout(op):
        return (op.rs == 1, op.cs == 1, any(op.bstrides),
                math.gcd(vw, op.t.offset, op.rs, op.cs, *op.bstrides))
    return (p.dtype.str, p.m, p.n, p.k, p.nbatch, layout(p.a), layout(p.b))


def _timed_plan(p, entry, own):
    """The fastest measured XPlan among the estimate's near-best (set, splits), or None for
    products too small to be worth timing."""
    cands = [(xgemm_seconds(p, entry, q, s), i, s) for i, q in enumerate(own)
             for s in range(1, xgemm_max_splits(p, entry, q) + 1)]
    best = min(cands)[0]
    if best < BENCH_MIN_SECONDS:
        return None
    key = (p.device, _bench_key(p))
    if key not in _timed or _timed[key][0] not in own:  # NOTE: the tuner's entries differ
        times = {}
        for est, i, s in sorted(cands):
            plan = _prepare(p, own[i], s) if est <= BENCH_SLACK * best else None
            if plan is not None:
                times[(i, s)] = _time_plan(p, plan)
        if not times:
            return None
        i, s = min(times, key=times.get)
        _timed[key] = (own[i], s, times)
    params, splits, _ = _timed[key]
    return _prepare(p, params, splits)


def _time_plan(p, plan):
    """Seconds of one run of plan on p (best of BENCH_REPEAT after a warm-up), writing a
    scratch output so that the caller's tensors stay untouched."""
    out = ClTensor.empty_on((p.nbatch, p.m, p.n), p.dtype, p.device)
    dense = Operand(out, dense_strides(p.bshape, p.m * p.n), p.n, 1)
    q = p._replace(ci=dense, co=dense)
    epi = epilogue_args(q, 1, 0, False, None, None, False)
    best = float("inf")
    for rep in range(BENCH_REPEAT + 1):
        p.device.synchronize()
        t0 = time.perf_counter()
        _launch_xgemm(q, plan, epi)
        p.device.synchronize()
        if rep:
            best = min(best, time.perf_counter() - t0)
    return best


def benchmark_times(device):
    """{shape key: (parameter set, splits, {(set index, splits): seconds})} of the products
    benchmark mode timed on a device (the indexes are into the entry's xgemm sets that fit)."""
    return {k[1]: v for k, v in _timed.items() if k[0] is device}


def clear_cache():
    """Forget benchmark mode's timings, the estimate's rankings, the fitting sets and the
    decided plans."""
    _timed.clear()
    _ranked.clear()
    _candidates.clear()
    _prepared.clear()
    _recipes.clear()


def reduce_splits(p, kernel, splits, part, epi):
    """Sum the `splits` partial products in `part` into C through the epilogue (xgemm_reduce)."""
    lx = min(256, p.device.max_work_group)
    size = p.m * p.n
    for b0 in range(0, p.nbatch, MAX_GROUPS):
        launch(p.device, kernel, (round_up(size, lx), min(MAX_GROUPS, p.nbatch - b0)), (lx, 1),
               np.int32(p.m), np.int32(p.n), np.int32(splits), np.int64(b0),
               np.int32(len(p.bshape)), ew.shape_arg(p.bshape), part.storage.buf, *epi)


RUNNERS = {"direct": _run_direct, "tiled": _run_tiled, "packed": _run_packed,
           "xgemm": _run_xgemm, "rowdot": _run_rowdot}


# ---- the engine -------------------------------------------------------------------------------

def _merged_stride(sizes, strides):
    """The one stride that walks dims `sizes` in row-major order, or None if there is none."""
    dims = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    for (_, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1] if dims else 0


def _fold_batch(batch, m, strides):
    """(batch, M, K) @ (K, N) with B shared by all batches becomes one (batch*M, K) @ (K, N)
    when A's, Ci's and Co's batch and row dims each merge into one row stride."""
    if not batch or any(s != 0 and n != 1 for n, s in zip(batch, strides[1])):
        return batch, m, strides
    sizes = tuple(batch) + (m,)
    folded = []
    for k, st in enumerate(strides):
        if k == 1:
            folded.append(st[-2:])
            continue
        row = _merged_stride(sizes, st[:-1])
        if row is None:
            return batch, m, strides
        folded.append([row, st[-1]])
    return (), m * math.prod(batch), folded


@caches.lru_cache(maxsize=4096)
def _batch_layout(batch, m, strides, foldable):
    """(M, collapsed batch shape, (batch strides, row stride, column stride) per operand) of
    operands with these strides (a, b, c_in, c_out); memoized, as every product asks.
    foldable: no row bias (folded batches would change which bias row a row gets)."""
    strides = [list(st) for st in strides]
    if foldable:
        batch, m, strides = _fold_batch(batch, m, strides)
    bshape, bstrides = ew.collapse(batch, [st[:-2] for st in strides])
    if len(bshape) > ew.MAX_DIMS:
        raise ValueError(f"gemm: at most {ew.MAX_DIMS} non-mergeable batch dims are "
                         f"supported, got {len(bshape)} (batch shape {tuple(batch)})")
    return m, tuple(bshape), tuple((bst, st[-2], st[-1]) for st, bst in zip(strides, bstrides))


def gemm_into(a, b, c_out, c_in=None, alpha=1, beta=0, row_bias=None, col_bias=None,
              relu=False, entry=None):
    """c_out = act(alpha * a @ b + beta * c_in + biases), in place, with no checks.

    The low-level product under every op: a is (*batch, M, K), b (*batch, K, N), c_out and c_in
    (*batch, M, N), any strides (0 broadcasts in a, b and c_in); c_in may be c_out itself; the
    biases are 1-d (M and N). Callers validate and avoid overlaps (see gemm()). `entry`
    replaces the database's entry (the tuner's candidates). The providers in PROVIDERS (the plug-ins
    that serve the device) are asked first, unless `entry` or FORCE_FAMILY is set.
    """
    batch, (m, k), n = c_out.shape[:-2], a.shape[-2:], b.shape[-1]
    assert a.shape[:-2] == b.shape[:-2] == batch and b.shape[-2] == k, "gemm: shapes disagree"
    if m == 0 or n == 0 or 0 in batch:
        return c_out
    tensors = (a, b, c_out if c_in is None else c_in, c_out)
    m, bshape, layouts = _batch_layout(batch, m, tuple(t.strides for t in tensors),
                                       row_bias is None)
    ops = [Operand(t, *lay) for t, lay in zip(tensors, layouts)]
    p = Problem(c_out.device, c_out.dtype, m, n, k, bshape, *ops)
    # NOTE: the tuner's candidates (entry) and a forced family measure the portable kernels
    if entry is None and FORCE_FAMILY is None:
        for lookup in PROVIDERS:
            for plugin in lookup(p.device):
                if plugin.gemm(p, alpha, beta, c_in is not None, row_bias, col_bias, relu):
                    return c_out
    replayed = entry is None and not backends.benchmark
    entry = entry or entry_for(p.device, p.dtype)
    plan = _replayed_plan(p, entry) if replayed and _recipes else None
    fam = "xgemm"
    if plan is None:
        fam = _family(p, entry)
        if fam == "packed":
            moves = _moves(p, entry["packed"])
            if moves:
                pt = _transposed(p)
                if _moves(pt, entry["packed"]) < moves:
                    p, row_bias, col_bias = pt, col_bias, row_bias
    epi = epilogue_args(p, alpha, beta, c_in is not None, row_bias, col_bias, relu)
    if plan is not None:
        _launch_xgemm(p, plan, epi)
    else:
        RUNNERS[fam](p, entry, epi)
    return c_out


def _family(p, entry):
    if FORCE_FAMILY is None and p.dtype.kind == "f" and _rowdot_applies(p, entry):
        return "rowdot"
    return family_of(p.device, p.dtype, entry, (p.m, p.n, p.k), p.nbatch)


def sums_batches(device, dtype):
    """Whether gemm_sum_into runs on this device and dtype: in one kernel, on the devices
    whose GEMM family is packed (CPUs)."""
    fam = FORCE_FAMILY or entry_for(device, dtype)["family"]
    return fam == "packed" and np.dtype(dtype).kind == "f"


def gemm_sum_into(a, b, c_out):
    """c_out (*batch, M, N) = the sum over i of a[i] @ b[i], with no checks: a (S, *batch, M, K),
    b (S, *batch, K, N), any strides; on the devices sums_batches() names. One gemm_packed
    launch adds the S products of each tile in registers: a 1x1 convolution's weight gradient
    over the images of NCHW tensors, read in place, with no (C, N*H*W) copies."""
    batch, (m, k), n = a.shape[:-2], a.shape[-2:], b.shape[-1]
    if c_out.numel() == 0:
        return c_out
    if a.shape[0] == 0 or k == 0:
        return c_out.zero_()  # a sum of no products
    if a.shape[0] == 1:
        return gemm_into(a[0], b[0], c_out)
    c = c_out.expand(batch + (m, n))  # NOTE: batch stride 0 along the summed dim
    tensors = (a, b, c, c)
    m, bshape, layouts = _batch_layout(batch, m, tuple(t.strides for t in tensors), False)
    ops = [Operand(t, *lay) for t, lay in zip(tensors, layouts)]
    p = Problem(c_out.device, c_out.dtype, m, n, k, bshape, *ops)
    assert bshape[0] == a.shape[0] and p.co.bstrides[0] == 0, "gemm_sum_into: batch collapsed"
    entry = entry_for(p.device, p.dtype)
    pt = _transposed(p)
    if _moves(pt, entry["packed"]) < _moves(p, entry["packed"]):
        p = pt
    _run_packed(p, entry, epilogue_args(p, 1, 0, False, None, None, False), summed=True)
    return c_out


def _transposed(p):
    """The problem C^T = B^T @ A^T of the same product."""
    def t(op):
        return op._replace(rs=op.cs, cs=op.rs)
    return p._replace(m=p.n, n=p.m, a=t(p.b), b=t(p.a), ci=t(p.ci), co=t(p.co))


# ---- the public entry point -------------------------------------------------------------------

def _check_gemm(a, b, out, c, row_bias, col_bias, alpha, beta):
    """Checks of gemm()'s arguments; returns the result's shape."""
    from . import matmul as mm
    named = [t for t in (a, b, c, row_bias, col_bias) if t is not None]
    _, dtype = mm._check_tensors("gemm", *named)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError(f"gemm: expected a and b to be at least 2-d, got {a.ndim}-d and "
                         f"{b.ndim}-d")
    mm._check_inner("gemm", a, b, a.shape[-1], b.shape[-2])
    mm._check_scalar("gemm", "alpha", alpha, dtype)
    mm._check_scalar("gemm", "beta", beta, dtype)
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    batch = batch_a if batch_a == batch_b else mm._broadcast_batch("gemm", a, b)
    shape = batch + (a.shape[-2], b.shape[-1])
    for name, bias, size in (("row_bias", row_bias, shape[-2]), ("col_bias", col_bias, shape[-1])):
        if bias is not None and tuple(bias.shape) != (size,):
            raise ValueError(f"gemm: {name} must have shape ({size},), got {tuple(bias.shape)}")
    if c is not None:
        mm._check_addend("gemm", c, shape)
    if out is not None:
        mm._check_out("gemm", out, shape, dtype, a.device)
    return shape


def gemm(a, b, out=None, *, c=None, alpha=1, beta=1, row_bias=None, col_bias=None, relu=False):
    """out = act(alpha * a @ b + beta * c + row_bias[:, None] + col_bias[None, :]), one kernel.

    The GEMM entry point for layers (linear, convolution through im2col): the scaling, the
    addend, the biases and the ReLU are applied as the result is stored, so no extra pass runs.
    Transposed operands are views (`w.mT`, `x.transpose(-1, -2)`) and cost no copy; so do
    step-sliced, offset and expanded (stride 0) ones.

    Args:
        a: (*batch_a, M, K) tensor, float32, float64, int32 or int64; any strides.
        b: (*batch_b, K, N) tensor of a's dtype and device; batch dims broadcast with a's.
        out: optional (*batch, M, N) tensor to write into; it may be c itself (then c is
            updated in place) and may be any strided view. Default: a new contiguous tensor.
        c: optional addend, broadcast to (*batch, M, N); not read when beta is 0.
        alpha, beta: real numbers (integers for integer tensors); beta applies to c only.
        row_bias: optional (M,) tensor added along rows: out[..., m, n] += row_bias[m] (a
            convolution's per-channel bias when out = weight @ columns).
        col_bias: optional (N,) tensor added along columns: out[..., m, n] += col_bias[n] (a
            linear layer's bias when out = x @ weight.mT).
        relu: apply max(x, 0) last (NaN stays NaN, as torch.relu).

    Returns:
        out, or the new tensor.

    Shape:
        a (*batch_a, M, K), b (*batch_b, K, N) -> (*broadcast(batch_a, batch_b), M, N).

    Example:
        >>> x, w, bias = cltensor.ones(8, 3), cltensor.ones(4, 3), cltensor.zeros(4)
        >>> cltensor.gemm(x, w.mT, col_bias=bias, relu=True).shape      # relu(linear(x))
        (8, 4)
    """
    shape = _check_gemm(a, b, out, c, row_bias, col_bias, alpha, beta)
    batch = shape[:-2]
    a_full = _expand(a, batch + a.shape[-2:])
    b_full = _expand(b, batch + b.shape[-2:])
    c_in = _expand(c, shape) if c is not None and beta != 0 else None
    target = out
    readers = [t for t in (a_full, b_full, row_bias, col_bias) if t is not None]
    if out is None or _hazard(out, readers, c_in):
        target = ClTensor.empty_on(shape, a.dtype, a.device)
    gemm_into(a_full, b_full, target, c_in, alpha, beta, row_bias, col_bias, relu)
    if out is None:
        return target
    if target is not out:
        ew.copy_into(out, target)
    return out


def _expand(t, shape):
    """t seen with `shape` (t itself when it has it: gemm_into reads only the view)."""
    return t if t.shape == shape else t.expand(shape)


def _hazard(out, readers, c_in):
    """True when the kernel would write storage it still has to read through another view."""
    return (any(t.storage is out.storage for t in readers) or
            (c_in is not None and ew.overlaps_differently(out, c_in)))
