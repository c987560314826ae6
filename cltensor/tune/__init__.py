"""The tuner: `python -m cltensor.tune gemm [--device SPEC] [--dtype float32]` times candidate
parameter sets on the device and stores the winner in the user cache of the tuned-parameter
database (cltensor/tunedb.py, which also reads the shipped one); the next process uses it.
`python -m cltensor.tune conv` measures the convolution algorithms of the benchmark networks'
layers (tune_conv.py). `python -m cltensor.tune all` tunes every kernel family with tunables
(TUNERS) in every dtype, and conv, with a progress bar and an estimate of the time left.

Tuning on first use: with CLTENSOR_AUTOTUNE=1 (off by default: it stalls the first product for
seconds to a minute), the first lookup for a device with no entry of its own (shipped or cached)
runs the quick tuning once and stores it; a TuningWarning reports it. The database calls it
through tunedb.first_use, which this module sets (the package imports it). The command line
is __main__.py beside it.
"""
import argparse
import json
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from .. import caches, tune_conv, tunedb
from .. import dtypes as dt
from ..creation import from_numpy
from ..device import get_device
from ..ops import gemm as gm
from ..profiler import profile
from ..tunedb import (AUTOTUNE_ENV, DB_DIR, FAMILIES, GEMM_ENTRY, KERNELS,  # noqa: F401
                     TuningWarning, autotune_enabled, check_value, clear, current, database,
                     database_entry, derived_defaults, is_tuned, lookup, normalize_name,
                     store, user_cache_path, validate_database, validate_user,
                     vendor_key, vendor_of)

# ---- tuning on first use ----------------------------------------------------------------------

FIRST_USE_SIZE = None  # the cube first-use tuning times (None: the tuner's default)
_first_use = caches.register("tune.first_use", set())  # (kernel, device index) tried
_first_use_lock = threading.RLock()


def _tune_on_first_use(family, kernel, device):
    """With CLTENSOR_AUTOTUNE=1: tune `kernel` quickly for a device with no entry of its own
    (shipped or cached), once per process, and store the winner in the user cache; one
    TuningWarning reports it (or why it failed: the untuned entry is used then)."""
    if family not in TUNERS or not autotune_enabled():
        return
    kernel = tunedb.BASE_KERNEL.get(kernel, kernel)  # 16-bit products start from float32's
    key = (kernel, device.index)
    with _first_use_lock:  # other threads wait for the winner; this one's own lookups pass
        if key in _first_use or is_tuned(family, kernel, device):
            return
        _first_use.add(key)
        t0 = time.perf_counter()
        try:
            entry, _ = TUNERS[family](device, kernel, size=FIRST_USE_SIZE, quick=True,
                                      log=lambda *a: None)
            path = store(kernel, device, entry)
        except Exception as e:  # noqa: BLE001 (a failed tuning must not fail the product)
            warnings.warn(f"{AUTOTUNE_ENV}: tuning {kernel} on {device.name} failed "
                          f"({type(e).__name__}: {e}); untuned parameters are used",
                          TuningWarning, stacklevel=4)
            return
        warnings.warn(f"{AUTOTUNE_ENV}: tuned {kernel} on {device.name} on first use in "
                      f"{time.perf_counter() - t0:.1f} s ({entry.get('family')}); stored in "
                      f"{path}", TuningWarning, stacklevel=4)


tunedb.first_use = _tune_on_first_use


# ---- timing -----------------------------------------------------------------------------------

def time_call(device, fn, reps=5, warmup=1, cpu=False):
    """Median seconds of `fn()` over reps, each from its first kernel's start to its last
    kernel's end (OpenCL profiling events), or with cpu the process CPU time of the call to
    the end of its kernels (a CPU device's threads are the process's); warm-up calls
    excluded."""
    for _ in range(warmup):
        fn()
    device.synchronize()
    times = []
    for _ in range(reps):
        if cpu:
            c0 = time.process_time()
            fn()
            device.synchronize()
            times.append(time.process_time() - c0)
            continue
        with profile() as prof:
            fn()
        recs = prof.records()
        times.append((max(r["end_ns"] for r in recs) - min(r["start_ns"] for r in recs)) * 1e-9)
    return float(np.median(times))


class Progress:
    """A progress bar with an estimate of the time left: steps done of a planned total (an
    estimate: a stage that ends early skips its remaining steps), the time left from the mean
    step so far. On a terminal one line redrawn in place (stderr), with the notes (stdout)
    printed above it; elsewhere a line per tenth of the total."""

    WIDTH = 30

    def __init__(self, total, stream=None, clock=time.perf_counter):
        self.total, self.done, self.clock = max(1, total), 0, clock
        self.stream = stream or sys.stderr
        self.start, self._tenth, self._label = clock(), -1, ""
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def step(self, label="", n=1):
        self.done += n
        self.total = max(self.total, self.done)
        self._label = label
        self._show()

    def seconds_left(self):
        """The time left at the mean step so far, or None before the first step."""
        if not self.done:
            return None
        return (self.clock() - self.start) / self.done * (self.total - self.done)

    def line(self):
        frac = self.done / self.total
        left = self.seconds_left()
        eta = "?" if left is None else f"{int(left) // 60}m{int(left) % 60:02d}s"
        return (f"[{'#' * round(frac * self.WIDTH):<{self.WIDTH}}] {self.done}/{self.total} "
                f"{frac:4.0%} ~{eta} left {self._label}")

    def note(self, message):
        """A line of the tuner's log on stdout, above the bar."""
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
        print(message, flush=True)
        if self.tty:
            self._show()

    def _show(self):
        tenth = 10 * self.done // self.total
        if self.tty:
            self.stream.write(f"\r\033[K{self.line()[:120]}")
        elif tenth != self._tenth:
            self._tenth = tenth
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self):
        self.done = self.total
        self._show()
        if self.tty:
            self.stream.write("\n")


# ---- the GEMM tuner ---------------------------------------------------------------------------

def _packed_candidates(dtype, quick=False):
    """Register tiles for the CPU kernel: MR x NR elements in vectors of VW, at most ~30
    vector accumulators (AVX-512 has 32 registers); quick: 16 of them, two or three vectors
    wide."""
    vws = (16, 8) if dtype.itemsize == 4 else (8, 4)
    mrs = (6, 8, 14) if quick else (4, 6, 8, 10, 12, 14, 16, 24, 28)
    out = []
    for vw in vws:
        for nv in (2, 3) if quick else (1, 2, 3, 4):
            for mr in mrs:
                if 16 <= mr * nv <= 30 and (nv > 1 or mr >= 16):
                    out += [{"MR": mr, "NR": nv * vw, "VW": vw, "ORDER": o} for o in (0, 1)]
    return out


# gemm_slabs' blocks of tiles (BM x BN), slabs of K and prefetch distances (elements of A) to
# try: B's slab panel (KC x NR) in L1 while the block's panels of A (BM*MR x KC) stay in L2
# (gemm_cpu.cl)
SLAB_KCS, SLAB_BLOCKS, SLAB_PFS = (256, 512), ((8, 4), (16, 8), (8, 16)), (1024, 0)
PACK_LXS = (4, 8, 16, 32)  # pack_panels' work-groups along K (PACK_LX)


def slab_candidates(params, quick=False):
    """gemm_slabs' settings for a tile (its KB): slabs off, then KC x blocks x prefetch, KC
    rounded up to a multiple of KB; quick: blocks of 8 x 4 with prefetch alone."""
    kb = params.get("KB") or 1
    blocks, pfs = (SLAB_BLOCKS[:1], SLAB_PFS[:1]) if quick else (SLAB_BLOCKS, SLAB_PFS)
    return [{"KC": 0}] + [{"KC": -(-kc // kb) * kb, "BM": bm, "BN": bn, "PF": pf}
                          for kc in SLAB_KCS for bm, bn in blocks for pf in pfs]


def _xgemm(mwg, nwg, mdimc, ndimc, kwg, vw=4, str_=1, pad=0, nbuf=2):
    return {"MWG": mwg, "NWG": nwg, "KWG": kwg, "MDIMC": mdimc, "NDIMC": ndimc, "VWM": vw,
            "VWN": vw, "STRM": str_, "STRN": str_, "PADA": pad, "PADB": pad, "NBUF": nbuf,
            "GROUP_M": 8}


def _xgemm_structures(dtype):
    """Work-group tiles, work-group shapes and slice depths to try first (about 25)."""
    vw = 4 if dtype.itemsize == 4 else 2
    shapes = [  # (MWG, NWG, MDIMC, NDIMC), slice depths, buffers
        ((128, 128, 16, 16), (8, 16, 32), (1, 2)), ((128, 128, 8, 32), (16,), (2,)),
        ((128, 128, 32, 8), (16,), (2,)), ((64, 64, 16, 16), (16, 32), (2,)),
        ((64, 64, 8, 8), (16,), (2,)), ((128, 64, 16, 16), (16,), (2,)),
        ((64, 128, 16, 16), (16,), (2,)), ((256, 128, 32, 16), (8, 16), (2,)),
        ((128, 256, 16, 32), (8, 16), (2,)), ((128, 128, 16, 8), (16,), (2,)),
        ((256, 128, 16, 16), (8,), (2,)), ((128, 64, 16, 8), (16,), (1, 2)),
        ((64, 128, 8, 16), (16,), (1, 2)),
    ]
    return [_xgemm(*t, kwg, vw=vw, nbuf=nb) for t, kwgs, nbufs in shapes for kwg in kwgs
            for nb in nbufs]


def _xgemm_variations(p):
    """Neighbours of a good set: access strides, padding, vector widths and the tile order
    (about 12)."""
    out = []
    for strm, strn in ((1, 1), (0, 0), (1, 0), (0, 1)):
        for pad in (0, 1):
            out.append(dict(p, STRM=strm, STRN=strn, PADA=pad * p["VWM"], PADB=pad * p["VWN"]))
    for vwm, vwn in ((2, 2), (4, 4), (4, 8), (8, 4)):
        out.append(dict(p, VWM=vwm, VWN=vwn, PADA=0, PADB=0))
    for group_m in (1, 8):
        out.append(dict(p, GROUP_M=group_m))
    return [q for i, q in enumerate(out) if q != p and q not in out[:i]]


MAX_TILE_SHAPES = 5


# a candidate's norm-relative error on a small product, at most (16-bit C: its rounding)
CORRECT_TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1e-2}


class GemmTuner:
    """Times GEMM parameter sets on one device and dtype, always checking results first."""

    THRESHOLD_SIZES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)

    def __init__(self, device, dtype, size, reps, log=print, progress=None, quick=False):
        # dtype: the operands' storage type; the candidates are sized for the compute type
        self.gm, self.device, self.storage = gm, device, dt.as_dtype(dtype)
        self.dtype = np.dtype(dt.compute_dtype(self.storage))
        self.size, self.reps, self.log = size, reps, log
        self.progress, self.quick = progress, quick
        self.rng = np.random.default_rng(0)
        self.results = []
        self._operands = {}

    def _tensors(self, m, n, k, layout="KN"):
        """(a, b, A, B, C): A and B stored as `layout` says (gemm.layout_of)."""
        key = (m, n, k, layout)
        if key not in self._operands:
            a = self.rng.uniform(-1, 1, (m, k)).astype(self.dtype)
            b = self.rng.uniform(-1, 1, (k, n)).astype(self.dtype)
            store = lambda x: from_numpy(x, device=self.device).to(self.storage)  # noqa: E731
            put = lambda x, keep: store(x) if keep else store(np.ascontiguousarray(x.T)).mT
            ta, tb = put(a, layout[0] == "K"), put(b, layout[1] == "N")
            if self.storage in dt.HALF_TYPES:  # the values as stored
                a, b = ta.float().numpy(), tb.float().numpy()
            self._operands[key] = (a, b, ta, tb, store(np.zeros((m, n), self.dtype)))
        return self._operands[key]

    def _correct(self, entry):
        a, b, ta, tb, tc = self._tensors(67, 45, 37)
        tc.fill_(float("nan"))
        self.gm.gemm_into(ta, tb, tc, entry=entry)
        want = a.astype(np.float64) @ b
        got = (tc.float() if self.storage in dt.HALF_TYPES else tc).numpy()
        err = np.linalg.norm(got - want) / np.linalg.norm(want)
        return err < CORRECT_TOL[self.storage.name]

    def measure(self, entry, shape, label="", layout="KN"):
        """GFLOP/s of one entry on an (M, N, K) problem with A and B stored as `layout` says,
        or None if it fails, does not fit or computes a wrong result."""
        m, n, k = shape
        self._step(label)
        try:
            if self.gm.family_of(self.device, self.dtype, entry, shape) != entry["family"]:
                return None  # does not fit this device: the engine would run something else
            if not self._correct(entry):
                self.log(f"  wrong result, skipped: {entry}")
                return None
            _, _, ta, tb, tc = self._tensors(m, n, k, layout)
            # NOTE: CPU time on CPU devices: on a shared machine other work stretches the
            # kernels' wall time 2-5x from one call to the next, their CPU time 10-20%
            secs = time_call(self.device, lambda: self.gm.gemm_into(ta, tb, tc, entry=entry),
                             self.reps, cpu=self.device.is_cpu)
        except Exception as e:  # a build failure or a refused launch: not a candidate here
            self.log(f"  failed ({type(e).__name__}: {str(e).splitlines()[0][:100]}): {entry}")
            return None
        gflops = 2 * m * n * k / secs / 1e9
        self.results.append({"label": label, "shape": shape, "entry": entry, "gflops": gflops})
        return gflops

    def _step(self, label, n=1):
        if self.progress is not None and n > 0:
            self.progress.step(f"{self.storage.name} {label}", n)

    def planned_steps(self):
        """About how many timings tune_gemm makes (Progress's total)."""
        if self.device.is_cpu:
            tune = (len(self.packed_candidates()) + len(slab_candidates({}, self.quick)) +
                    len(PACK_LXS) + 14)
        else:
            structures = len(_xgemm_structures(self.dtype)[::4 if self.quick else 1])
            tune = structures + 12 + (4 if self.quick else 24) + 3 * 4 * MAX_TILE_SHAPES
        return tune + 2 * len(self.THRESHOLD_SIZES)

    def packed_candidates(self):
        return _packed_candidates(self.dtype, quick=True) if self.quick else \
            _packed_candidates(self.dtype)

    def best(self, entries, shape, label, confirm=3):
        """(GFLOP/s, entry) of the entries that ran, best first; the `confirm` best are timed
        twice more, interleaved, and ranked by their median (shared machines are noisy)."""
        scored = []
        for e in entries:
            g = self.measure(e, shape, label)
            if g is not None:
                scored.append((g, e))
                self.log(f"  {label} {shape}: {g:9.1f} GFLOP/s  {_short(e)}")
        scored.sort(key=lambda s: -s[0])
        top = [[g] for g, _ in scored[:confirm]]
        for i in range(2 if len(top) > 1 else 0):  # each pass in the other order
            for runs, (_, e) in list(zip(top, scored))[::-1 if i % 2 == 0 else 1]:
                runs.append(self.measure(e, shape, label + "-confirm") or 0.0)
        head = sorted(((float(np.median(r)), e) for r, (_, e) in zip(top, scored)),
                      key=lambda s: -s[0])
        return head + scored[len(head):]

    def tune_packed(self):
        shape = (self.size,) * 3
        cands = [{"family": "packed", "packed": p, "min_work": 0, "min_dim": 0}
                 for p in self.packed_candidates()]
        scored = self.best(cands, shape, "packed")
        return {"family": "packed", "packed": scored[0][1]["packed"]} if scored else None

    def tune_slabs(self, params):
        """params with the best of slab_candidates, then of pack_panels' work-groups
        (PACK_LXS), timed on a cube twice the tuning size (K slabs pay where K runs to
        thousands)."""
        shape = (2 * self.size,) * 3
        bare = {k: v for k, v in params.items() if k not in ("KC", "BM", "BN", "PF")}
        wrap = lambda ps: [{"family": "packed", "packed": q, "min_work": 0, "min_dim": 0}
                           for q in ps]
        scored = self.best(wrap([dict(bare, **c) for c in slab_candidates(bare, self.quick)]),
                           shape, "slabs")
        best = scored[0][1]["packed"] if scored else params
        scored = self.best(wrap([dict(best, PACK_LX=lx) for lx in PACK_LXS]), shape, "pack")
        return scored[0][1]["packed"] if scored else best

    def tune_xgemm(self, quick=False):
        shape = (self.size,) * 3
        wrap = lambda ps: [_xgemm_entry(p) for p in ps]
        structures = _xgemm_structures(self.dtype)
        if quick:
            structures = structures[::4]
        scored = self.best(wrap(structures), shape, "xgemm")
        if not scored:
            return None
        tops = [s[1]["xgemm"][0] for s in scored[:1 if quick else 2]]
        varied = [q for p in tops for q in _xgemm_variations(p)]
        scored = sorted(scored + self.best(wrap(varied[::3] if quick else varied), shape,
                                           "xgemm"), key=lambda s: -s[0])
        # the best set of each tile shape, with its rate: the engine weighs padding, device
        # occupancy and split K against these rates per product (ops/gemm/planning.py: xgemm_plan)
        tiles = {}
        for g, e in scored:
            q = e["xgemm"][0]
            tiles.setdefault((q["MWG"], q["NWG"]), dict(q, rate=round(g, 1)))
        sets = list(tiles.values())[:MAX_TILE_SHAPES]
        return {"family": "xgemm", "xgemm": [self.with_layout_factors(q) for q in sets]}

    def with_layout_factors(self, params):
        """params with its layout_factors: its GFLOP/s with A and B stored each other way
        (gemm.LAYOUTS) against its own in the KN layout, all measured now, interleaved (the
        operands' loads and local stores differ per layout: H200 at 4096^3, 0.71-0.95 with
        both K-contiguous, as weight gradients are, 0.90-1.22 with A M-contiguous)."""
        shape, entry = (self.size,) * 3, _xgemm_entry(params)
        runs = {lay: [] for lay in self.gm.LAYOUTS}
        for _ in range(3):
            for lay in runs:
                runs[lay].append(self.measure(entry, shape, f"layout {lay}", lay) or 0.0)
        base = float(np.median(runs["KN"]))
        if not base:
            return dict(params)
        factors = {lay: round(float(np.median(r)) / base, 3) for lay, r in runs.items()
                   if lay != "KN"}
        self.log(f"  layout factors {factors}: {_short(entry)}")
        return dict(params, layout_factors=factors)

    def tune_threshold(self, entry):
        """The smallest cube (as M*N*K) from which the fast family beats the direct kernel."""
        direct = {k: v for k, v in entry.items() if k not in ("min_work", "min_dim", "min_m")}
        for i, s in enumerate(self.THRESHOLD_SIZES):
            fast = self.measure(dict(direct, min_work=0, min_dim=0), (s, s, s), "fast")
            small = self.measure(dict(direct, family=self.gm.small_family(direct)), (s, s, s),
                                 "small")
            self.log(f"  threshold {s}^3: fast {fast or 0:.1f}, direct {small or 0:.1f} GFLOP/s")
            if fast and small and fast > small:
                self._step("threshold", 2 * (len(self.THRESHOLD_SIZES) - i - 1))
                return {"min_work": s ** 3, "min_dim": max(1, s // 4)}
        return {"min_work": 512 ** 3, "min_dim": 128}


def _xgemm_entry(params):
    """An entry that runs xgemm with this one parameter set at any size.
    NOTE: strict: a set that does not fit the device fails instead of timing a fallback."""
    return {"family": "xgemm", "xgemm": [params], "min_work": 0, "min_dim": 0, "strict": True}


def _short(entry):
    p = entry.get(entry["family"])
    p = p[0] if isinstance(p, list) else p
    return " ".join(f"{k}={v}" for k, v in (p or {}).items())


def tune_gemm(device, dtype, size=None, reps=5, quick=False, log=print, progress=None):
    """Tune GEMM on a device and dtype (the operands' storage type: float32, float64, float16
    or bfloat16); returns (winning entry, all measurements)."""
    dtype = dt.as_dtype(dtype)
    _first_use.add((_gemm_kernel(dtype), device.index))  # tuned here, not again on first use
    size = size or (1024 if device.is_cpu else 4096)
    tuner = GemmTuner(device, dtype, size, reps, log, progress, quick)
    base = gm.entry_for(device, dtype)
    log(f"tuning gemm {dtype} on {device} at {size}^3; current family {base['family']}")
    winner = tuner.tune_packed() if device.is_cpu else tuner.tune_xgemm(quick)
    if winner is None:
        raise RuntimeError(f"tune: no GEMM candidate ran correctly on {device}")
    if "packed" in winner:  # the tile is tuned; the rules measured on products stay
        rules = {k: v for k, v in base.get("packed", {}).items() if k not in winner["packed"]}
        winner["packed"] = tuner.tune_slabs(dict(rules, **winner["packed"]))
        winner["small"] = "direct"  # the CPU kernel of small and odd sizes
    entry = dict(base, **winner)
    entry.update(tuner.tune_threshold(entry))
    return entry, tuner.results


def _gemm_kernel(dtype):
    return f"gemm_{dt.as_dtype(dtype).name}"


def _tune_gemm_kernel(device, kernel, size=None, reps=5, quick=False, log=print, progress=None):
    return tune_gemm(device, kernel.removeprefix("gemm_"), size, reps, quick, log, progress)


def _gemm_steps(device, kernel, size, reps, quick):
    tuner = GemmTuner(device, kernel.removeprefix("gemm_"), size, reps, quick=quick)
    return tuner.planned_steps()


# family -> (tune(device, kernel, size=, reps=, quick=, log=, progress=) -> (entry, results),
#            planned steps(device, kernel, size, reps, quick))
TUNERS = {"gemm": _tune_gemm_kernel}
PLANS = {"gemm": _gemm_steps}


def tunable_kernels(device, family=None):
    """(family, kernel) pairs `tune all` (or one family) tunes on a device: every kernel of
    every family with a tuner, float64 ones where the device has fp64."""
    return [(f, k) for f in TUNERS if family in (None, f) for k in FAMILIES[f]
            if device.has_fp64 or "float64" not in k]


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m cltensor.tune",
                                     description="Tune kernel parameters on this machine's "
                                                 "OpenCL device and cache the winners.")
    parser.add_argument("kernel", choices=["gemm", "conv", "all"],
                        help="one kernel family, conv (the algorithm per layer of the benchmark "
                        "networks), or all: every family with tunables and dtype, and conv")
    parser.add_argument("--device", help="platform:device index or name substring")
    parser.add_argument("--dtype", action="append",
                        choices=["float32", "float64", "float16", "bfloat16"],
                        help="dtype(s) to tune (default float32; all: every dtype)")
    parser.add_argument("--size", type=int, help="cube size to time (1024 on CPUs, 4096 else)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="fewer candidates; conv: AlexNet's layers alone")
    parser.add_argument("--batch", type=int,
                        help="conv: the batch size of every layer (default: the networks')")
    parser.add_argument("--no-store", action="store_true", help="do not write the user cache")
    parser.add_argument("--json", help="write every measurement and the winners here")
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse(argv)
    device = get_device(args.device)
    if args.kernel == "all" and not args.dtype:
        jobs = tunable_kernels(device)
    else:
        jobs = [("gemm", f"gemm_{d}") for d in args.dtype or ["float32"]]
    if args.kernel != "gemm":
        jobs = (jobs if args.kernel == "all" else []) + [("conv", "conv_float32")]
    report = {"device": device.name, "driver": device.cl_device.driver_version,
              "vendor": vendor_of(device), "winners": {}, "measurements": {}}
    progress = Progress(sum(tune_conv.planned_steps(device, args.quick) if f == "conv" else
                            PLANS[f](device, k, args.size, args.reps, args.quick)
                            for f, k in jobs))
    failed = 0
    for family, key in jobs:
        t0 = time.perf_counter()
        if family == "conv":  # recorded per problem as it goes (benchmark mode's file)
            entry, results = tune_conv.tune_conv(device, quick=args.quick, batch=args.batch,
                                                 record=not args.no_store, log=progress.note,
                                                 progress=progress)
        else:
            entry, results = TUNERS[family](device, key, size=args.size, reps=args.reps,
                                            quick=args.quick, log=progress.note,
                                            progress=progress)
        report["winners"][key], report["measurements"][key] = entry, results
        progress.note(f"{key}: {json.dumps(entry)}  ({time.perf_counter() - t0:.0f} s)")
        if args.json:  # NOTE: written after each winner, so a later failure loses none
            Path(args.json).write_text(json.dumps(report, indent=1))
        if args.no_store:
            continue
        if family == "conv":
            progress.note(f"recorded in {tune_conv.dispatch.cache_path(device)}")
            continue
        try:
            progress.note(f"stored in {store(key, device, entry)}")
        except OSError as e:
            print(f"not stored ({e}); the winner is printed above", file=sys.stderr)
            failed = 1
    progress.close()
    return failed
