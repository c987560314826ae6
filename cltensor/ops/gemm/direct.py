"""The bounds-checked families: direct and tiled (gemm_direct.cl), rowdot and rowaxpy
(gemm_rowdot.cl)."""
import numpy as np

from .choice import tiled_candidates
from .kit import get_kernel, kernel_fits, launch_tiles, operand_args, storage_defines


DIRECT_GPU_LOCAL = (16, 8)  # gemm_direct's work-group off the CPU
# How gemm_direct may read B's rows: through b_cs, as unaligned vectors, as aligned vectors.
B_STRIDED, B_UNIT, B_ALIGNED = "strided", "unit", "aligned"


def _operand_types(p):
    """The type defines of a kernel that reads A and B where they are."""
    return storage_defines(p, p.a.t.dtype, p.b.t.dtype)


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


def run_direct(p, entry, epi):
    params = dict(entry["direct"])
    params["TM"] = direct_rows(p.m, params["TM"])
    defines = dict(params, **_operand_types(p))
    layout = _b_layout(p, params["VW"])
    if layout != B_STRIDED:
        defines["B_UNIT_N"] = None
    if layout == B_ALIGNED:
        defines["B_ALIGNED"] = None
    kernel = get_kernel(p.device, "gemm_direct.cl", "gemm_direct", defines)
    # NOTE: PoCL compiles a kernel once per local size; a fixed (1, 1, 1) avoids a compile for
    # every new global size that the runtime's own choice would bring.
    lx, ly = (1, 1) if p.device.is_cpu else DIRECT_GPU_LOCAL
    tail = operand_args(p.a) + operand_args(p.b) + epi
    launch_tiles(p, kernel, params["TM"] * ly, -(-p.n // (params["TN"] * lx)), (lx, ly, 1),
                  p.k, tail)


def rowdot_applies(p, entry):
    """A few rows (at most the entry's rowdot_max_m) with A and B both K-contiguous: a linear
    layer's x @ W^T at a small batch."""
    return p.m <= entry.get("rowdot_max_m", 0) and p.a.cs == 1 and p.b.rs == 1 and p.k > 0


def run_rowdot(p, entry, epi):
    """gemm_rowdot (a work-item per NB columns: CPUs) or gemm_rowdot_wg (a work-group per NB
    columns: GPUs, or where the entry's rowdot_wg says so)."""
    wg = bool(entry.get("rowdot_wg", not p.device.is_cpu))
    params = entry.get("rowdot", {})
    vw = params.get("VW", 4 if wg else 16)
    nb = max(1, min(params.get("NB", 4), ROWDOT_ACCUMULATORS // p.m))
    defines = {**_operand_types(p), "MR": p.m, "NB": nb, "VW": vw}
    if all(v % vw == 0 for v in (p.a.rs, p.b.cs, p.a.t.offset, p.b.t.offset,
                                 *p.a.bstrides, *p.b.bstrides)):
        defines["ALIGNED"] = None
    tail = operand_args(p.a) + operand_args(p.b) + epi
    if wg:
        lx = min(params.get("LX", ROWDOT_WG_LOCAL), p.device.max_work_group)
        lx = 1 << (lx.bit_length() - 1)  # the kernel's tree sum halves LX
        kernel = get_kernel(p.device, "gemm_rowdot.cl", "gemm_rowdot_wg", dict(defines, LX=lx))
        launch_tiles(p, kernel, p.m, -(-p.n // nb), (lx, 1, 1), p.k, tail)
        return
    kernel = get_kernel(p.device, "gemm_rowdot.cl", "gemm_rowdot", defines)
    lx = ROWDOT_LOCAL
    launch_tiles(p, kernel, p.m, -(-p.n // (nb * lx)), (lx, 1, 1), p.k, tail)


def rowaxpy_applies(p, entry):
    """A few rows (at most the entry's rowaxpy_max_m) times a B with contiguous columns, at
    least a vector of them: a linear layer's g @ W (its input gradient) at a small batch."""
    return (p.m <= entry.get("rowaxpy_max_m", 0) and p.b.cs == 1 and p.n >= ROWAXPY_VW
            and p.k > 0)


def run_rowaxpy(p, entry, epi):
    """gemm_rowaxpy (CPUs: each work-item streams a strip of B's columns down K for all M rows)
    or gemm_rowaxpy_wg (GPUs, or where the entry's rowaxpy_wg says so: a work-group of LX x KS
    on LX strips, KS rows at a time)."""
    tail = operand_args(p.a) + operand_args(p.b) + epi
    if entry.get("rowaxpy_wg", not p.device.is_cpu):
        params = dict(ROWAXPY_WG, **entry.get("rowaxpy", {}))
        vw = params["VW"]
        lx, ks = rowaxpy_wg_group(p.device, p.m, vw, p.dtype.itemsize, params["LX"],
                                  params["KS"])
        defines = {**_operand_types(p), "MR": p.m, "VW": vw, "LX": lx, "KS": ks,
                   "KB": params["KB"], **_aligned(p, vw)}
        kernel = get_kernel(p.device, "gemm_rowdot.cl", "gemm_rowaxpy_wg", defines)
        launch_tiles(p, kernel, p.m, -(-p.n // (lx * vw)), (lx, ks, 1), p.k, tail)
        return
    nv = max(1, ROWAXPY_COLUMNS // (ROWAXPY_VW * p.m))
    defines = {**_operand_types(p), "MR": p.m, "NV": nv, "VW": ROWAXPY_VW,
               **_aligned(p, ROWAXPY_VW)}
    kernel = get_kernel(p.device, "gemm_rowdot.cl", "gemm_rowaxpy", defines)
    launch_tiles(p, kernel, p.m, -(-p.n // (nv * ROWAXPY_VW * ROWDOT_LOCAL)),
                 (ROWDOT_LOCAL, 1, 1), p.k, tail)


def _aligned(p, vw):
    """gemm_rowaxpy's ALIGNED define where B's rows, offsets and N are whole vectors."""
    aligned = all(v % vw == 0 for v in (p.n, p.b.rs, p.b.t.offset, *p.b.bstrides))
    return {"ALIGNED": None} if aligned else {}


def rowaxpy_wg_group(device, m, vw, itemsize, lx, ks):
    """gemm_rowaxpy_wg's (LX, KS): the entry's, KS halved (then LX) until the work-group
    (LX * KS) and its sums in local memory (KS * m * LX vectors) fit the device."""
    def fits():
        return lx * ks <= device.max_work_group and ks * m * lx * vw * itemsize <= device.local_mem
    while ks > 1 and not fits():
        ks //= 2
    while lx > 1 and not fits():
        lx //= 2
    return lx, ks


ROWAXPY_VW = 16  # gemm_rowaxpy's vector width
# gemm_rowaxpy_wg's defaults (the entry's "rowaxpy" overrides them): 32 work-items of float4
# read 512 bytes of a row; 8 rows at a time; blocks of 64 of a work-item's rows in the sums
ROWAXPY_WG = {"VW": 4, "LX": 32, "KS": 8, "KB": 64}
ROWAXPY_COLUMNS = 128  # columns per work-item times M: M * NV vector accumulators, 8 or fewer
ROWDOT_ACCUMULATORS = 16  # vector accumulators (M * NB) per work-item: AVX-512 has 32 registers
ROWDOT_LOCAL = 16  # NOTE: fixed, so that PoCL compiles the kernel once
ROWDOT_WG_LOCAL = 128  # gemm_rowdot_wg's work-group: 32 float4 loads of a row per step


def run_tiled(p, entry, epi):
    for params in tiled_candidates(p.device, entry, p.dtype.itemsize):
        kernel = get_kernel(p.device, "gemm_direct.cl", "gemm_tiled",
                            dict(params, **_operand_types(p)))
        lx, ly = params["TSN"] // params["WPTN"], params["TSM"] // params["WPTM"]
        if kernel_fits(p.device, kernel, lx * ly):
            break
    else:
        return run_direct(p, entry, epi)
    flags = [np.int32(abs(p.a.cs) <= abs(p.a.rs)), np.int32(abs(p.b.cs) <= abs(p.b.rs))]
    tail = operand_args(p.a) + operand_args(p.b) + epi + flags
    launch_tiles(p, kernel, params["TSM"], -(-p.n // params["TSN"]), (lx, ly, 1), p.k, tail)
