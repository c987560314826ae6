"""Benchmark mode (cltensor.backends.benchmark): xgemm's near-best plans and gemm_packed's
variants of its entry's set, timed once per device and problem shape."""
import math
import time

from ... import caches
from ...tensor import ClTensor
from . import packed
from .kit import VECTOR_BYTES, Operand, dense_strides, epilogue_args
from .xgemm import launch_xgemm, prepare
from .planning import xgemm_max_splits, xgemm_seconds


# xgemm_plan's estimate ranks parameter sets and split counts well on the whole, but not always:
# on the H200 the time of a split-K product is not smooth in the split count (AlexNet fc6 with
# the 128x64 set: 37.1 TFLOP/s in 4 splits, 24.4 in 8, 31.5 in 16). Benchmark mode times the
# candidates whose estimate is within BENCH_SLACK of the best, once per device and problem
# shape, into a scratch output, and keeps the fastest (in memory, like cudnn.benchmark).
BENCH_SLACK = 2.0
BENCH_MIN_SECONDS = 20e-6  # products estimated faster than this run the estimate's choice
BENCH_REPEAT = 3
# (device, shape key) -> (params, splits, {(set index, splits): seconds}) for xgemm, and
# ("packed", device, shape key) -> (entry, its timed variant, {variant index: seconds})
_timed = caches.register("ops.gemm.timed", {})
# Products of fewer FLOPs run gemm_packed's entry set untimed (tens of microseconds on CPUs).
PACKED_BENCH_MIN_FLOPS = 2e7


def _bench_key(p):
    """What decides an xgemm choice: dtype, sizes, batches and each operand's layout
    (contiguous dims, shared batches, alignment of its offset and strides to vectors)."""
    vw = VECTOR_BYTES // p.dtype.itemsize

    def layout(op):
        return (op.rs == 1, op.cs == 1, any(op.bstrides),
                math.gcd(vw, op.t.offset, op.rs, op.cs, *op.bstrides))
    return (p.dtype.str, p.m, p.n, p.k, p.nbatch, layout(p.a), layout(p.b))


def timed_plan(p, entry, own):
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
            plan = prepare(p, own[i], s) if est <= BENCH_SLACK * best else None
            if plan is not None:
                times[(i, s)] = _time_plan(p, plan)
        if not times:
            return None
        i, s = min(times, key=times.get)
        _timed[key] = (own[i], s, times)
    params, splits, _ = _timed[key]
    return prepare(p, params, splits)


def _time_plan(p, plan):
    """Seconds of one run of plan on p (_best_seconds)."""
    return _best_seconds(p, [lambda q, epi: launch_xgemm(q, plan, epi)])[0]


def _best_seconds(p, runs):
    """Each of runs' best of BENCH_REPEAT rounds (after a warm-up one), run(problem,
    epilogue) on p with a scratch output, so that the caller's tensors stay untouched.
    NOTE: the rounds interleave the runs, so that a spell of other work on the device (a CPU
    shared with other processes) slows them alike rather than one of them."""
    out = ClTensor.empty_on((p.nbatch, p.m, p.n), p.dtype, p.device)
    dense = Operand(out, dense_strides(p.bshape, p.m * p.n), p.n, 1)
    q = p._replace(ci=dense, co=dense)
    epi = epilogue_args(q, 1, 0, False, None, None, False)
    best = [float("inf")] * len(runs)
    for rep in range(BENCH_REPEAT + 1):
        for i, run in enumerate(runs):
            p.device.synchronize()
            t0 = time.perf_counter()
            run(q, epi)
            p.device.synchronize()
            if rep:
                best[i] = min(best[i], time.perf_counter() - t0)
    return best


def packed_variants(p, params):
    """gemm_packed's candidate sets for p: the entry's, its register tile of the same area at
    half and twice MR (NR a multiple of VW), B packed where the set reads it in place, and
    slabs where it has them but p would not run them. NOTE: the best tile and route varied
    with the shape in ways no rule caught: PoCL, 2 Zen 4 cores, GFLOP/s, 8x32 / 4x64 / 16x16:
    64 x 24200 x 363 124 / 152 / 129, 64 x 100352 x 147 136 / 138 / 198, 384 x 392 x 1728
    134 / 97 / - (docs/tuning.md)."""
    mr, nr, vw = *packed.packed_tile(p, params), params["VW"]
    out = [params]
    for m2, n2 in ((mr // 2, nr * 2), (mr * 2, nr // 2)):
        if m2 >= 1 and n2 % vw == 0 and m2 * 2 * n2 == mr * 2 * nr:
            out.append(dict(params, MR=m2, NR=n2, WIDE_MAX_M=0))
    if not packed.packed_slab(p, params) and packed.packed_reads_b_in_place(p, params):
        out.append(dict(params, B_IN_PLACE_MIN_N=2 ** 62))
    if params.get("KC") and not packed.packed_slab(p, params):
        slabs = dict(params, SLAB_MIN_K=1, SLAB_MIN_M=1, SLAB_MIN_MN=1, SLAB_MIN_N=1)
        if packed.packed_slab(p, slabs):
            out.append(slabs)
    return out


def timed_packed(p, entry):
    """entry with the gemm_packed set that ran p fastest of packed_variants (timed once per
    device and shape), or entry itself for products under PACKED_BENCH_MIN_FLOPS."""
    if 2 * p.m * p.n * p.k * p.nbatch < PACKED_BENCH_MIN_FLOPS:
        return entry
    key = ("packed", p.device, _bench_key(p))
    hit = _timed.get(key)
    if hit is None or hit[0] is not entry:
        variants = [dict(entry, packed=v) for v in packed_variants(p, entry["packed"])]
        runs = [lambda q, epi, v=v: packed.run_packed(q, v, epi) for v in variants]
        times = dict(enumerate(_best_seconds(p, runs)))
        hit = _timed[key] = (entry, variants[min(times, key=times.get)], times)
    return hit[1]


def benchmark_times(device):
    """{shape key: (parameter set, splits, {(set index, splits): seconds})} of the products
    benchmark mode timed on a device (the indexes are into the entry's xgemm sets that fit);
    gemm_packed's: {shape key: (its packed set, {variant index: seconds})}."""
    out = {}
    for k, v in _timed.items():
        if k[0] is device:
            out[k[1]] = v
        elif k[0] == "packed" and k[1] is device:
            out[k[2]] = (v[1]["packed"], v[2])
    return out
