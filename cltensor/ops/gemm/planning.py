"""Planning xgemm: which parameter sets fit a device, and the estimate that ranks them and
their K split counts for a problem."""
from ... import caches
from ...program import memo_with
from .kit import group_fits


XGEMM_FALLBACKS = (
    {"MWG": 64, "NWG": 64, "KWG": 16, "MDIMC": 16, "NDIMC": 16, "VWM": 4, "VWN": 4,
     "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": 2},
    {"MWG": 32, "NWG": 32, "KWG": 8, "MDIMC": 8, "NDIMC": 8, "VWM": 2, "VWN": 2,
     "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": 1},
)


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


def xgemm_candidates(device, entry, itemsize):
    """The entry's xgemm parameter sets that fit the device, then (unless the entry is strict,
    as the tuner's are) the fallbacks that fit (memoized: every product asks)."""
    def candidates():
        own = [q for q in entry.get("xgemm", []) if xgemm_valid(q)]
        extra = [] if entry.get("strict") else list(XGEMM_FALLBACKS)
        fits = lambda q: group_fits(device, q["NDIMC"], q["MDIMC"],
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


_ranked = caches.register("ops.gemm.ranked", {})
# the entry's settings that xgemm_plan reads besides its sets
PLAN_SETTINGS = ("compute_units", "threads_per_cu", "split_k", "split_cost_us", "bandwidth_gbs")


def ranking(p, entry, own, extra):
    """[(params, K splits)]: own by xgemm_plan's estimate, then the fallbacks; memoized, since
    estimating every set and split count costs more host time than a launch."""
    def rank():
        plans = [(q, *xgemm_plan(p, entry, q)) for q in own]
        ranking = [(q, splits) for q, _, splits in sorted(plans, key=lambda r: r[1])]
        return ranking + [(q, xgemm_plan(p, entry, q)[1]) for q in extra]
    key = (p.device, p.dtype.itemsize, p.m, p.n, p.k, p.nbatch, layout_of(p), len(own),
           len(extra), *[entry.get(k) for k in PLAN_SETTINGS])
    return memo_with(_ranked, key, entry.get("xgemm"), rank)
