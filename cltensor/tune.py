"""Tuned kernel parameters: the shipped database, a per-user cache, and the tuner.

Parameters are data. The database (cltensor/tuning/<name>.json, one file per kernel family) is
keyed kernel -> vendor -> device, each level with a `default`:

    {"gemm_float32": {"default": {...},
                      "vendors": {"pocl": {"default": {...},
                                           "devices": {"pthread-skylake-avx512": {...}}}}}}

A lookup merges, key by key, the global default, the vendor's default, the device's entry (the
longest key contained in the device's name) and last the user cache, which the tuner writes:
~/.cache/cltensor/tuning/<device>-<driver>.json ($CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor,
replaces ~/.cache/cltensor), keyed by device name and driver version so a driver update starts
from the shipped entries again.

Every entry is checked against GEMM_ENTRY (each tunable's type and range; unknown keys
refused), since its values become -D build options. A user file that fails the check is set
aside as *.corrupt with one CacheWarning; store() merges with the file under a lock and
replaces it atomically (cltensor/diskfiles.py). docs/tuning.md explains the shipped entries.

Command line: `python -m cltensor.tune gemm [--device SPEC] [--dtype float32]` times candidate
parameter sets on the device and stores the winner in the user cache; the next process uses it.
"""
import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

from . import caches
from .diskfiles import private_dirs, read_json, update_json
from .program import cache_root, device_key

DB_DIR = Path(__file__).resolve().parent / "tuning"
_db_files = caches.register("tune.db_files", {})
_merged = caches.register("tune.merged", {})
# (family, kernel, device index) -> current()'s entry
_current = caches.register("tune.current", {})


# ---- the database -----------------------------------------------------------------------------

def vendor_of(device):
    """The database's vendor key of a device: 'pocl' for PoCL (its compiler decides speed),
    else the driver vendor's short name ('nvidia', 'amd', 'intel', 'apple', ...)."""
    d = device.cl_device
    if "portable computing language" in d.platform.name.lower():
        return "pocl"
    vendor = d.vendor.lower()
    for key, names in (("nvidia", ("nvidia",)), ("amd", ("advanced micro", "amd")),
                       ("intel", ("intel",)), ("apple", ("apple",)), ("arm", ("arm",))):
        if any(n in vendor for n in names):
            return key
    return re.sub(r"[^a-z0-9]+", "_", vendor).strip("_") or "unknown"


# ---- the schema ---------------------------------------------------------------------------------
# Every value of the database becomes a -D build option or a size the engine computes with, so
# each is checked against its tunable's type and range; unknown keys are refused.

_BIG = 2 ** 62
_VW = ("in", (1, 2, 4, 8, 16))
_BIT = ("in", (0, 1))
_RATE = ("num", 1e-9)


def _int(lo, hi):
    return ("int", lo, hi)


def _dict(fields, required=()):
    return ("dict", fields, tuple(required))


_DIRECT = _dict({"TM": _int(1, 64), "TN": _int(1, 256), "VW": _VW}, ("TM", "TN", "VW"))
_TILED = _dict({k: _int(1, 256) for k in ("TSM", "TSN", "TSK", "WPTM", "WPTN")},
               ("TSM", "TSN", "TSK", "WPTM", "WPTN"))
_ROWDOT = _dict({"VW": _VW, "NB": _int(1, 64), "LX": _int(1, 1024)})
_PACKED = _dict({"MR": _int(1, 64), "NR": _int(1, 256), "VW": _VW, "ORDER": _BIT,
                 "WALK_M_FROM_K": _int(0, _BIG), "B_IN_PLACE_MIN_N": _int(0, _BIG),
                 "A_IN_PLACE": _BIT, "KB": _int(0, 65536)}, ("MR", "NR", "VW"))
_XGEMM_CORE = ("MWG", "NWG", "KWG", "MDIMC", "NDIMC", "VWM", "VWN", "STRM", "STRN", "PADA",
               "PADB", "NBUF")
_XGEMM_SET = _dict({"MWG": _int(1, 1024), "NWG": _int(1, 1024), "KWG": _int(1, 256),
                    "MDIMC": _int(1, 1024), "NDIMC": _int(1, 1024), "VWM": _VW, "VWN": _VW,
                    "STRM": _BIT, "STRN": _BIT, "PADA": _int(0, 64), "PADB": _int(0, 64),
                    "NBUF": ("in", (1, 2)), "GROUP_M": _int(1, 1024), "max_m": _int(1, _BIG),
                    "groups_per_cu": _int(1, 1024), "rate": _RATE,
                    "layout_factors": _dict({k: _RATE for k in ("MN", "KK", "MK")})},
                   _XGEMM_CORE)
GEMM_ENTRY = _dict({
    "family": ("in", ("direct", "tiled", "packed", "xgemm")), "small": ("in", ("direct", "tiled")),
    "min_work": _int(0, _BIG), "min_dim": _int(0, _BIG), "min_m": _int(0, _BIG),
    "rowdot_max_m": _int(0, 1024), "rowaxpy_max_m": _int(0, 64), "rowdot_wg": _BIT,
    "split_cost_us": ("num", 0.0), "bandwidth_gbs": _RATE,
    "threads_per_cu": _int(1, 65536), "compute_units": _int(1, 65536), "split_k": ("bool",),
    "direct": _DIRECT, "tiled": _TILED, "rowdot": _ROWDOT, "packed": _PACKED,
    "xgemm": ("list", _XGEMM_SET), "cx_sets": ("list", _XGEMM_SET),
    "cx_conv": ("list", _XGEMM_SET), "cx_wgrad": ("list", _XGEMM_SET)})
FAMILIES = {"gemm": ("gemm_float32", "gemm_float64")}  # family -> its database's kernels
KERNELS = {"gemm_float32": GEMM_ENTRY, "gemm_float64": GEMM_ENTRY}


def _scalar_ok(value, spec):
    kind = spec[0]
    if kind == "bool":
        return type(value) is bool
    if kind == "int":
        return type(value) is int and spec[1] <= value <= spec[2]
    if kind == "num":
        return type(value) in (int, float) and math.isfinite(value) and value >= spec[1]
    return type(value) in (int, str) and value in spec[1]  # "in"


def _describe(spec):
    kind = spec[0]
    if kind == "int":
        return f"an integer in [{spec[1]}, {spec[2]}]"
    if kind == "num":
        return f"a finite number >= {spec[1]}"
    return f"one of {list(spec[1])}" if kind == "in" else "true or false"


def check_value(value, spec, where):
    """Raise ValueError naming `where` unless value fits spec (see GEMM_ENTRY)."""
    kind = spec[0]
    if kind == "dict":
        _check_fields(value, spec[1], spec[2], where)
    elif kind == "list":
        if not isinstance(value, list) or not value:
            raise ValueError(f"{where}: expected a non-empty list, got {value!r:.80}")
        for i, item in enumerate(value):
            check_value(item, spec[1], f"{where}[{i}]")
    elif not _scalar_ok(value, spec):
        raise ValueError(f"{where}: {value!r:.80} is not {_describe(spec)}")


def _check_fields(value, fields, required, where):
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    for key, item in value.items():
        if key not in fields:
            raise ValueError(f"{where}: unknown key {key!r:.60}")
        check_value(item, fields[key], f"{where}.{key}")
    missing = [k for k in required if k not in value]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")


def _check_levels(value, keys, where):
    """value is an object whose keys are among `keys` (any keys when None)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    unknown = [k for k in value if keys is not None and k not in keys]
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r:.60}")


def validate_database(data, family="gemm"):
    """Raise ValueError unless `data` is a valid shipped database of `family` (kernel ->
    default / vendors -> default / devices, each entry checked against its kernel's schema)."""
    _check_levels(data, FAMILIES[family], family)
    for kernel, table in data.items():
        spec = KERNELS[kernel]
        _check_levels(table, ("default", "vendors"), kernel)
        check_value(table.get("default", {}), spec, f"{kernel}.default")
        _check_levels(table.get("vendors", {}), None, f"{kernel}.vendors")
        for vendor, level in table.get("vendors", {}).items():
            where = f"{kernel}.vendors.{vendor}"
            _check_levels(level, ("default", "devices"), where)
            check_value(level.get("default", {}), spec, f"{where}.default")
            devices = level.get("devices", {})
            _check_levels(devices, None, f"{where}.devices")
            for name, entry in devices.items():
                check_value(entry, spec, f"{where}.devices.{name}")


def validate_user(data):
    """Raise ValueError unless `data` is a valid per-user file: kernel -> entry."""
    _check_levels(data, KERNELS, "tuning cache")
    for kernel, entry in data.items():
        check_value(entry, KERNELS[kernel], kernel)


# ---- the database -----------------------------------------------------------------------------

def user_cache_path(device):
    """The tuner's file for one device: <cache root>/tuning/<device>-<driver>-<platform>.json."""
    return Path(cache_root()) / "tuning" / f"{device_key(device)}.json"


def _user_entries(device):
    """The device's per-user file, validated ({} when missing, refused or set aside)."""
    if private_dirs(cache_root(), "tuning") is None:
        return {}
    return read_json(user_cache_path(device), validate_user)


def database(family):
    """The shipped database of a kernel family (cltensor/tuning/<family>.json), read once."""
    if family not in FAMILIES:
        raise ValueError(f"tune: unknown kernel family {family!r} (known: {', '.join(FAMILIES)})")
    if family not in _db_files:
        path = DB_DIR / f"{family}.json"
        try:
            data = json.loads(path.read_text())
            validate_database(data, family)
        except (OSError, ValueError) as e:
            raise RuntimeError(f"tune: the shipped database {path} is unusable: {e}") from None
        _db_files[family] = data
    return _db_files[family]


def _device_entry(devices, name):
    """The entry whose key is the longest substring of the device's name, or {}."""
    hits = [k for k in devices if k in name]
    return devices[max(hits, key=len)] if hits else {}


def lookup(family, kernel, device):
    """The merged parameters of `kernel` (a key of `family`'s database) on `device`.

    Example:
        >>> tune.lookup("gemm", "gemm_float32", cltensor.default_device())["family"]
        'packed'
    """
    # NOTE: keyed by the cache root (the environment may move it), not the full path, which
    # costs more to build than the rest of a cached lookup
    key = (family, kernel, device.index, cache_root())
    if key not in _merged:
        table = database(family).get(kernel, {})
        vendor = table.get("vendors", {}).get(vendor_of(device), {})
        merged = dict(table.get("default", {}))
        merged.update(vendor.get("default", {}))
        merged.update(_device_entry(vendor.get("devices", {}), device.name))
        merged.update(_user_entries(device).get(kernel, {}))
        _merged[key] = merged
    return dict(_merged[key])


def store(kernel, device, params):
    """Write `params` for `kernel` into the device's user cache, merged under a file lock with
    the entries on disk (other kernels' entries stay), atomically. Raises ValueError for
    params outside the schema, OSError when the cache folder is refused or unwritable."""
    if kernel not in KERNELS:
        raise ValueError(f"tune.store: unknown kernel {kernel!r} (known: {', '.join(KERNELS)})")
    check_value(params, KERNELS[kernel], kernel)
    if private_dirs(cache_root(), "tuning") is None:
        raise PermissionError(f"tune.store: the cache folder under {cache_root()} is refused "
                              f"(see the warning); {kernel} not stored")
    path = user_cache_path(device)
    update_json(path, validate_user, lambda entries: entries.__setitem__(kernel, params))
    clear()
    return path


def current(family, kernel, device):
    """lookup()'s entry, shared (callers must not change it) and kept without reading the
    environment again until clear() (which store() and the tests that move the cache folder
    call). GEMM asks on every product, and the environment's variables cost microseconds."""
    key = (family, kernel, device.index)
    entry = _current.get(key)
    if entry is None:
        entry = _current[key] = lookup(family, kernel, device)
    return entry


def clear():
    """Forget the merged lookups (and the database files) read so far."""
    _merged.clear()
    _current.clear()
    _db_files.clear()


# ---- timing -----------------------------------------------------------------------------------

def time_call(device, fn, reps=5, warmup=1):
    """Median seconds of `fn()` over reps, each from its first kernel's start to its last
    kernel's end (OpenCL profiling events); warm-up calls excluded."""
    from .profiler import profile
    for _ in range(warmup):
        fn()
    device.synchronize()
    times = []
    for _ in range(reps):
        with profile() as prof:
            fn()
        recs = prof.records()
        times.append((max(r["end_ns"] for r in recs) - min(r["start_ns"] for r in recs)) * 1e-9)
    return float(np.median(times))


# ---- the GEMM tuner ---------------------------------------------------------------------------

def _packed_candidates(dtype):
    """Register tiles for the CPU kernel: MR x NR elements in vectors of VW, at most ~30
    vector accumulators (AVX-512 has 32 registers)."""
    vws = (16, 8) if dtype.itemsize == 4 else (8, 4)
    out = []
    for vw in vws:
        for nv in (1, 2, 3, 4):
            for mr in (4, 6, 8, 10, 12, 14, 16, 24, 28):
                if 16 <= mr * nv <= 30 and (nv > 1 or mr >= 16):
                    out += [{"MR": mr, "NR": nv * vw, "VW": vw, "ORDER": o} for o in (0, 1)]
    return out


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


class GemmTuner:
    """Times GEMM parameter sets on one device and dtype, always checking results first."""

    def __init__(self, device, dtype, size, reps, log=print):
        from .ops import gemm as gm
        self.gm, self.device, self.dtype = gm, device, np.dtype(dtype)
        self.size, self.reps, self.log = size, reps, log
        self.rng = np.random.default_rng(0)
        self.results = []
        self._operands = {}

    def _tensors(self, m, n, k, layout="KN"):
        """(a, b, A, B, C): A and B stored as `layout` says (gemm.layout_of)."""
        from .creation import from_numpy
        key = (m, n, k, layout)
        if key not in self._operands:
            a = self.rng.uniform(-1, 1, (m, k)).astype(self.dtype)
            b = self.rng.uniform(-1, 1, (k, n)).astype(self.dtype)
            put = lambda x, keep: (from_numpy(x, device=self.device) if keep else
                                   from_numpy(np.ascontiguousarray(x.T), device=self.device).mT)
            self._operands[key] = (a, b, put(a, layout[0] == "K"), put(b, layout[1] == "N"),
                                   from_numpy(np.zeros((m, n), self.dtype), device=self.device))
        return self._operands[key]

    def _correct(self, entry):
        a, b, ta, tb, tc = self._tensors(67, 45, 37)
        tc.fill_(float("nan"))
        self.gm.gemm_into(ta, tb, tc, entry=entry)
        want = a.astype(np.float64) @ b
        err = np.linalg.norm(tc.numpy() - want) / np.linalg.norm(want)
        return err < (1e-5 if self.dtype.itemsize == 4 else 1e-12)

    def measure(self, entry, shape, label="", layout="KN"):
        """GFLOP/s of one entry on an (M, N, K) problem with A and B stored as `layout` says,
        or None if it fails, does not fit or computes a wrong result."""
        m, n, k = shape
        try:
            if self.gm.family_of(self.device, self.dtype, entry, shape) != entry["family"]:
                return None  # does not fit this device: the engine would run something else
            if not self._correct(entry):
                self.log(f"  wrong result, skipped: {entry}")
                return None
            _, _, ta, tb, tc = self._tensors(m, n, k, layout)
            secs = time_call(self.device, lambda: self.gm.gemm_into(ta, tb, tc, entry=entry),
                             self.reps)
        except Exception as e:  # a build failure or a refused launch: not a candidate here
            self.log(f"  failed ({type(e).__name__}: {str(e).splitlines()[0][:100]}): {entry}")
            return None
        gflops = 2 * m * n * k / secs / 1e9
        self.results.append({"label": label, "shape": shape, "entry": entry, "gflops": gflops})
        return gflops

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
        for _ in range(2 if len(top) > 1 else 0):
            for runs, (_, e) in zip(top, scored):
                runs.append(self.measure(e, shape, label + "-confirm") or 0.0)
        head = sorted(((float(np.median(r)), e) for r, (_, e) in zip(top, scored)),
                      key=lambda s: -s[0])
        return head + scored[len(head):]

    def tune_packed(self):
        shape = (self.size,) * 3
        cands = [{"family": "packed", "packed": p, "min_work": 0, "min_dim": 0}
                 for p in _packed_candidates(self.dtype)]
        scored = self.best(cands, shape, "packed")
        return {"family": "packed", "packed": scored[0][1]["packed"]} if scored else None

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
        for s in (16, 32, 48, 64, 96, 128, 192, 256, 384, 512):
            fast = self.measure(dict(direct, min_work=0, min_dim=0), (s, s, s), "fast")
            small = self.measure(dict(direct, family=self.gm.small_family(direct)), (s, s, s),
                                 "small")
            self.log(f"  threshold {s}^3: fast {fast or 0:.1f}, direct {small or 0:.1f} GFLOP/s")
            if fast and small and fast > small:
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


def tune_gemm(device, dtype, size=None, reps=5, quick=False, log=print):
    """Tune GEMM on a device and dtype; returns (winning entry, all measurements)."""
    from .ops import gemm as gm
    dtype = np.dtype(dtype)
    size = size or (1024 if device.is_cpu else 4096)
    tuner = GemmTuner(device, dtype, size, reps, log)
    base = gm.entry_for(device, dtype)
    log(f"tuning gemm {dtype} on {device} at {size}^3; current family {base['family']}")
    winner = tuner.tune_packed() if device.is_cpu else tuner.tune_xgemm(quick)
    if winner is None:
        raise RuntimeError(f"tune: no GEMM candidate ran correctly on {device}")
    if "packed" in winner:  # the tile is tuned; the rules measured on products stay
        rules = {k: v for k, v in base.get("packed", {}).items() if k not in winner["packed"]}
        winner["packed"] = dict(rules, **winner["packed"])
    entry = dict(base, **winner)
    entry.update(tuner.tune_threshold(entry))
    return entry, tuner.results


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m cltensor.tune",
                                     description="Tune kernel parameters on this machine's "
                                                 "OpenCL device and cache the winners.")
    parser.add_argument("kernel", choices=["gemm"])
    parser.add_argument("--device", help="platform:device index or name substring")
    parser.add_argument("--dtype", action="append", choices=["float32", "float64"],
                        help="dtype(s) to tune (default float32)")
    parser.add_argument("--size", type=int, help="cube size to time (1024 on CPUs, 4096 else)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer candidates")
    parser.add_argument("--no-store", action="store_true", help="do not write the user cache")
    parser.add_argument("--json", help="write every measurement and the winners here")
    args = parser.parse_args(argv)
    from .device import get_device
    device = get_device(args.device)
    report = {"device": device.name, "driver": device.cl_device.driver_version,
              "vendor": vendor_of(device), "winners": {}, "measurements": {}}
    failed = 0
    for dtype in args.dtype or ["float32"]:
        t0 = time.perf_counter()
        entry, results = tune_gemm(device, dtype, args.size, args.reps, args.quick)
        key = f"gemm_{dtype}"
        report["winners"][key], report["measurements"][key] = entry, results
        print(f"{key}: {json.dumps(entry)}  ({time.perf_counter() - t0:.0f} s)")
        if args.json:  # NOTE: written after each winner, so a later failure loses none
            Path(args.json).write_text(json.dumps(report, indent=1))
        if not args.no_store:
            try:
                print(f"stored in {store(key, device, entry)}")
            except OSError as e:
                print(f"not stored ({e}); the winner is printed above", file=sys.stderr)
                failed = 1
    return failed


if __name__ == "__main__":
    # NOTE: run the package's own copy of this module, whose caches the GEMM engine shares
    from cltensor.tune import main as _main
    sys.exit(_main())
