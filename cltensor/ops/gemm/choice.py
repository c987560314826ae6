"""Which family runs a product: the tuning database's entry for the device and dtype, the
forced family, and the small-problem and bounds-checked fallbacks."""
import numpy as np

from ... import dtypes as dt
from ... import tunedb
from .kit import group_fits


FAMILIES = ("direct", "tiled", "packed", "xgemm")
# None picks per device and problem; a family name forces it (tests, benchmarks, the tuner).
FORCE_FAMILY = None
# Used when the database's own choices do not fit a device, largest first.
TILED_FALLBACKS = (
    {"TSM": 64, "TSN": 64, "TSK": 16, "WPTM": 4, "WPTN": 4},
    {"TSM": 32, "TSN": 32, "TSK": 16, "WPTM": 2, "WPTN": 2},
    {"TSM": 16, "TSN": 16, "TSK": 8, "WPTM": 2, "WPTN": 2},
    {"TSM": 8, "TSN": 8, "TSK": 8, "WPTM": 1, "WPTN": 1},
)


def entry_for(device, dtype):
    """The database entry for GEMM on a device: float64 and int64 share gemm_float64's
    parameters, 4-byte types gemm_float32's (register tiles are sized in bytes); float16 and
    bfloat16 operands have their own (tuned for them, else gemm_float32's)."""
    try:
        kernel = _ENTRY_KERNELS.get(dtype)
    except TypeError:  # an unhashable dtype-like: np.dtype decides
        kernel = None
    if kernel is None:
        kernel = _entry_kernel(dtype)
    return tunedb.current("gemm", kernel, device)


def _entry_kernel(dtype):
    """entry_for's database kernel name of a dtype (any form np.dtype takes)."""
    if dtype in dt.HALF_TYPES:
        return f"gemm_{dt.as_dtype(dtype).name}"  # NOTE: numpy's float16 type has no .name
    return "gemm_float32" if np.dtype(dtype).itemsize <= 4 else "gemm_float64"


# cltensor's dtypes -> entry_for's kernel name (GEMM asks on every product)
_ENTRY_KERNELS = {d: _entry_kernel(d) for d in dt.DTYPES}


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
    if fam == "tiled" and not tiled_candidates(device, entry, np.dtype(dtype).itemsize):
        fam = "direct"
    return fam


def tiled_candidates(device, entry, itemsize):
    out = []
    for params in [entry.get("tiled"), *TILED_FALLBACKS]:
        if params is None:
            continue
        lx, ly = params["TSN"] // params["WPTN"], params["TSM"] // params["WPTM"]
        local = params["TSK"] * (params["TSM"] + params["TSN"] + 2) * itemsize
        if group_fits(device, lx, ly, local):
            out.append(params)
    return out
