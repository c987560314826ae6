"""GEMM parameters for a device the tuning database does not name, from what it reports.

tune.lookup() merges these under the database's vendor and device entries, so that any CPU
gets the CPU kernels (gemm_cpu.cl's packed family) and any GPU or accelerator the GPU ones
(gemm_xgemm.cl), sized to the device's vector width, lockstep width, work-group limit and
local memory. The other kernel families choose by device kind in their own modules (softmax,
reduce, pool, norm: TUNING["cpu"/"gpu"], clamped to max_work_group);
tests/test_device_defaults.py checks them all on a table of device descriptions.
"""

# Measured on PoCL (2 cores, AVX-512; gemm.json's pocl entries): below this work the packed
# family's packing costs more than it saves; GPUs: below it a grid of 64x64 tiles is too few
CPU_MIN_WORK, GPU_MIN_WORK = 262144, 2097152
# K slabs from K = 512 (gemm_cpu.cl gemm_slabs): a slab's panel of B (256 x NR, 32 KiB at 16
# float lanes, 16 KiB at 8) stays in L1 and a block's panels of A (8 tiles of MR rows) in L2
# (PoCL and Intel's runtime, 2 Zen 5 cores: docs/performance.md); B's slab is read where it is
# when its rows allow and M is at most 192 (SLAB_B_IN_PLACE: no pack of B; taller products
# amortize the pack: ops/gemm/packed.py). NOTE: no prefetch (PF): the measured entries set
# it; Oclgrind, which gets these, cannot run llvm.prefetch
CPU_SLABS = {"KC": 256, "BM": 8, "BN": 4, "SLAB_B_IN_PLACE": 1, "SLAB_B_IN_PLACE_MAX_M": 192}
# gemm_packed's tiles per work-item along its walk (ops/gemm/packed.py tiles_per_item): fewer,
# longer work-items on both CPU runtimes (docs/performance.md)
CPU_TPI = 8
# gemm_packed reads B in place for at most this many rows of A; taller products pack a deep,
# large B (ops/gemm/packed.py _tall: the pack's cost spread over more tiles; both CPU
# runtimes, docs/tuning.md)
CPU_B_IN_PLACE_MAX_M = 192
XGEMM_TILE = 64  # xgemm's work-group tile (MWG = NWG) on a GPU with no entry
# a linear layer's input gradient g @ W with at most this many rows runs gemm_rowaxpy_wg on
# GPUs: bound by reading W once, where the small-problem family read it at a tenth of the
# memory's bandwidth (docs/performance.md)
GPU_ROWAXPY_MAX_M = 8
XGEMM_KWG = 16
LANES = (1, 2, 4, 8, 16)  # the vector widths the kernels accept


def _lanes(width):
    """The largest vector width the kernels accept that is at most `width`."""
    return max(v for v in LANES if v <= max(width, 1))


def gemm_defaults(desc, itemsize):
    """The GEMM entry (gemm.json's fields) for a device Description and an element size."""
    if desc.is_cpu:
        return cpu_gemm(desc, itemsize)
    return gpu_gemm(desc, itemsize)


def cpu_gemm(desc, itemsize):
    # NOTE: the float lanes scaled to the element size (a float64 vector holds half as many);
    # two vectors of accumulators per row, MR rows: 16 vector registers with 8 lanes (AVX2), 32
    # with 16 (AVX-512), so the tile stays in registers
    # NOTE: two lanes at least: gemm_cpu.cl's vectors have no one-lane type (Oclgrind reports 1)
    vw = _lanes(max(2, desc.vector_width * 4 // itemsize))
    mr = 8 if vw >= 16 else 6
    return {"family": "packed", "small": "direct", "min_work": CPU_MIN_WORK, "min_dim": 4,
            "direct": {"TM": 8, "TN": 2 * vw, "VW": vw},
            "packed": {"MR": mr, "NR": 2 * vw, "VW": vw, "ORDER": 1, "KB": 64,
                       "A_IN_PLACE": 1, "B_IN_PLACE_MIN_N": 128,
                       "B_IN_PLACE_MAX_M": CPU_B_IN_PLACE_MAX_M, "TPI": CPU_TPI, **CPU_SLABS}}


def _group_side(desc):
    """The work-group's side (MDIMC = NDIMC): 16 (256 work-items, a multiple of every lockstep
    width up to 64) where the device allows it, else the largest power of two that fits."""
    side = 16
    while side > 1 and (side * side > desc.max_work_group or
                        side > min(desc.max_work_item_sizes[:2])):
        side //= 2
    return side


def gpu_gemm(desc, itemsize):
    side = _group_side(desc)
    vw = 4 if itemsize <= 4 else 2
    tile = max(XGEMM_TILE, side * vw)
    kwg = XGEMM_KWG
    nbuf = 2 if 2 * kwg * 2 * tile * itemsize <= desc.local_mem // 2 else 1
    xgemm = {"MWG": tile, "NWG": tile, "KWG": kwg, "MDIMC": side, "NDIMC": side, "VWM": vw,
             "VWN": vw, "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": nbuf}
    wpt = max(1, 32 // side)
    return {"family": "xgemm", "small": "tiled", "min_work": GPU_MIN_WORK, "min_dim": 16,
            "rowaxpy_max_m": GPU_ROWAXPY_MAX_M,
            "rowaxpy": {"VW": vw},  # LX and KS: ops/gemm/direct.py's, fitted to the device
            "direct": {"TM": 8, "TN": 16, "VW": 8},
            "tiled": {"TSM": side * wpt, "TSN": side * wpt, "TSK": 16, "WPTM": wpt, "WPTN": wpt},
            "xgemm": [xgemm]}
