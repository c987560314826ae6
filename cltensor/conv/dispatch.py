"""Choosing a convolution algorithm per device, problem and pass.

Three passes are chosen separately, as cuDNN does: "forward", "backward_data" (the input
gradient) and "backward_weight". `algo="auto"` applies RULES, measured on each device kind
(benchmarks/conv.py); with `cltensor.backends.benchmark = True` it instead times every eligible
algorithm once per (device, problem, pass) on the call's own tensors and keeps the fastest, in
memory and in a per-user JSON file keyed by device name and driver version:
<cache root>/conv/<device>-<driver>.json ($CLTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/cltensor,
else ~/.cache/cltensor). `clear_cache()` forgets the in-memory choices; delete the file to
forget the others. `python -m cltensor.tune conv` (cltensor/tune_conv.py) measures the benchmark
networks' layers into the same file, marked as tuned: auto follows a tuned choice for exactly
its problem and pass (shape, batch, dtype) also with benchmark mode off, and its rules elsewhere.
With CLTENSOR_AUTOTUNE=1 each problem's pass is measured so on its first call.

Plug-ins (cltensor/plugins) add algorithms on the devices they serve: `algorithms(device)` is
the portable ALGORITHMS plus those; auto asks their prefer() first, benchmark mode times them
beside the portable ones, and a cached choice is timed again when a new candidate appears.

`cltensor.backends.conv_precision` ("accurate" by default) limits auto to algorithms whose
modelled float32 error is within twice PyTorch's (precision.py); benchmark mode then
times only those. "fast" leaves the rules and benchmark mode speed-first.
"""
import inspect
import time
import warnings
from pathlib import Path

from .. import backends, caches, tunedb
from .. import dtypes as dt
from ..diskfiles import private_dirs, read_json, update_json, warn_once
from ..program import cache_root, device_key, memo_with, remember
from . import common, gemm1x1, im2col, implicit, precision, s2d, winograd

ALGORITHMS = {"im2col": im2col, "implicit_gemm": implicit, "winograd": winograd.F2,
              "winograd_4x4": winograd.F4, "gemm_1x1": gemm1x1, "s2d_winograd": s2d}
PASSES = ("forward", "backward_data", "backward_weight")
# The algorithms that read float16/bfloat16 tensors in place (sums in float32); the others run
# 16-bit convolutions on float32 copies (conv/common.py half_fallback; docs/half.md).
HALF_ALGORITHMS = ("gemm_1x1", "im2col", "winograd", "winograd_4x4", "implicit_gemm",
                   "s2d_winograd")
# (device index, params, pass, precision) -> algorithm name
_chosen = caches.register("conv.dispatch.chosen", {})
# (device index, params, pass) -> {algorithm: ms}
_times = caches.register("conv.dispatch.times", {})
# device index -> the cache file's dict
_disk = caches.register("conv.dispatch.disk", {})
# id of the plug-ins' {name: algorithm} for a device -> (it, algorithms()'s dict)
_merged = caches.register("conv.dispatch.merged", {})
# (device, params, pass, precision) -> portable_rule's choice
_ruled = caches.register("conv.dispatch.ruled", {})
# (device, params, pass, precision) -> the tuner's choice in the file, or None
_tuned = caches.register("conv.dispatch.tuned", {})
# (device, params, pass, precision, allow_tf32, id of the plug-ins' offer) -> (the offer,
# _ruled_choice's result)
_rules_memo = caches.register("conv.dispatch.rules_memo", {})
_first_use_warned = set()  # device indices told that CLTENSOR_AUTOTUNE times their passes


def eligible(name, p, pass_="forward", device=None):
    """(True, "") when algorithm `name` can run this pass of problem p, else (False, why);
    a plug-in's algorithm needs the device."""
    mod = algorithm(name, device)
    if hasattr(mod, "eligible"):
        ok, why = mod.eligible(p)
        if not ok:
            return ok, why
    if pass_ in getattr(mod, "PASSES_NOT_SUPPORTED", ()):
        return False, f"{name} has no {pass_.replace('_', ' ')} pass"
    return True, ""


def eligible_names(p, pass_, device=None):
    return [n for n in algorithms(device) if eligible(n, p, pass_, device)[0]]


def workspace_bytes(name, p, pass_="forward", device=None):
    """Scratch bytes of algorithm `name` for a pass of p; the device goes to the algorithms
    whose estimate takes one (implicit GEMM's weight-gradient splits depend on it)."""
    mod, backward = algorithm(name, device), pass_ != "forward"
    if "device" in inspect.signature(mod.workspace_bytes).parameters:
        return mod.workspace_bytes(p, backward=backward, device=device)
    return mod.workspace_bytes(p, backward=backward)


# ---- plug-in algorithms -----------------------------------------------------------------------

# Algorithms offered from above (cltensor.plugins registers itself here, so that this module
# never imports plug-ins): objects with algorithms_for(device) -> {name: algorithm}, memoized,
# and owner_of(name) -> the plug-in that offers algorithm `name` on some device, or None.
PROVIDERS = []


# the offer when no plug-in offers anything: one object, as auto's memo keys on the offer's id
_NONE_OFFERED = {}


def _offered(device):
    found = {}
    for provider in PROVIDERS:
        more = provider.algorithms_for(device)
        found = {**found, **more} if found else more
    return found or _NONE_OFFERED


def algorithm_owner(name):
    """The plug-in that offers conv algorithm `name` (on any device), or None."""
    for provider in PROVIDERS:
        owner = provider.owner_of(name)
        if owner is not None:
            return owner
    return None

def algorithms(device=None):
    """{name: algorithm} on a device: the portable ones, then the plug-ins' that serve it
    (not to be changed: it is shared)."""
    extra = _offered(device) if device is not None else {}
    if not extra:
        return ALGORITHMS
    hit = _merged.get(id(extra))
    if hit is None or hit[0] is not extra:  # NOTE: every pass of every convolution asks
        hit = remember(_merged, id(extra), (extra, {**ALGORITHMS, **extra}))
    return hit[1]


def algorithm(name, device=None):
    """The algorithm called `name` on a device; ValueError when it is not one there."""
    found = algorithms(device).get(name)
    if found is None:
        raise ValueError(_unknown_algo(name, device))
    return found


def check_algo(algo, device):
    """ValueError unless algo is "auto" or an algorithm that runs on the device."""
    if algo != "auto":
        algorithm(algo, device)


def _unknown_algo(name, device):
    owner = algorithm_owner(name)
    if owner is not None and device is not None:
        why = owner.why_not(device) or "the algorithm's serves() declined it"
        return (f"conv2d: algo {name!r} of plug-in {owner.name!r} does not serve {device}: "
                f"{why}")
    names = ", ".join(["auto", *algorithms(device)])
    return f"conv2d: unknown algo {name!r}; expected one of {names}"


def _usable(name, p, pass_, device):
    """Whether a remembered choice still runs here (its plug-in may be gone, or ineligible now)."""
    return name in algorithms(device) and eligible(name, p, pass_, device)[0]


def _plugin_choice(p, device, pass_):
    """The first plug-in algorithm that can run this pass of p and prefers it, or None."""
    for name, algo in _offered(device).items():
        if eligible(name, p, pass_, device)[0] and algo.prefer(p, device, pass_):
            return name
    return None


# ---- the rules --------------------------------------------------------------------------------

def rule(p, device, pass_):
    """algo="auto"'s choice without timing, from the per-layer measurements of
    benchmarks/conv.py (PoCL on 2 CPU cores at batch 8; an H200 at the networks' batch sizes,
    where benchmark mode's own picks agreed with these rules on most layers). A plug-in
    algorithm whose prefer() says so comes first."""
    preferred = _plugin_choice(p, device, pass_)
    return preferred if preferred is not None else portable_rule(p, device, pass_)


def portable_rule(p, device, pass_):
    """The rules' choice among the portable algorithms alone (memoized: it runs for every pass
    of every convolution), under backends.conv_precision; 16-bit problems under "fast", as
    their results' rounding is far above any algorithm's float32 error (docs/half.md)."""
    mode = "fast" if p.dtype in dt.HALF_TYPES else precision.mode()
    key = (device, p, pass_, mode)
    name = _ruled.get(key)
    if name is None:
        name = _ruled[key] = _precise_rule(p, device, pass_, mode)
    return name


# "accurate": the fastest algorithm within precision.BOUND times PyTorch's error, in this order
# after the speed rules' own choice (measured speed per device kind, benchmarks/conv.py), else
# the most accurate. The error models hold on GPUs too, their GEMMs keeping one running sum
# (docs/conv_precision.md).
ACCURATE_ORDER = ("gemm_1x1", "winograd_4x4", "s2d_winograd", "winograd")
GPU_ACCURATE_ORDER = ("winograd", "implicit_gemm", "gemm_1x1", "im2col")


def _precise_rule(p, device, pass_, mode):
    fast = _portable_rule(p, device, pass_)
    if mode == "fast":
        return fast
    block, coef = precision.gemm_block(device), precision.reference_coef(device)
    if precision.within_bound(fast, p, pass_, block, coef):
        return fast
    if device.is_cpu:
        order = [fast, *ACCURATE_ORDER, _cpu_gemm_rule(p, pass_), "implicit_gemm", "im2col"]
    else:
        order = [fast, *GPU_ACCURATE_ORDER]
    names = [n for n in dict.fromkeys(order) if eligible(n, p, pass_)[0]]
    return precision.accurate_choice(names, p, pass_, block, coef)


def _portable_rule(p, device, pass_):
    cpu = device.is_cpu
    if cpu and eligible("gemm_1x1", p, pass_)[0]:
        return "gemm_1x1"
    if eligible("winograd_4x4", p, pass_)[0] and _winograd_pays(p, cpu, pass_):
        return "winograd_4x4"
    s2d_pass = cpu or pass_ == "backward_data"  # GPUs: the input gradient alone (measured)
    if s2d_pass and eligible("s2d_winograd", p, pass_)[0] and _s2d_pays(p, cpu, pass_):
        return "s2d_winograd"
    if cpu:
        return _cpu_gemm_rule(p, pass_)
    if pass_ == "backward_data" and (p.sh, p.sw) != (1, 1):
        return "im2col"  # implicit GEMM gathers the stride-upsampled gradient: mostly zeros
    # NOTE: on GPUs implicit GEMM (the GEMM engine with gathering loads, over the positions of
    # all images) beat gemm_1x1 and im2col on every other forward and input-gradient pass of
    # the four networks on the H200, and their weight gradients on all but a few (within 15%)
    return "implicit_gemm"


# Winograd F(4x4) (algo "winograd_4x4") pays for its transforms from this many channels (the
# smaller of in and out) per pass; measured per layer on PoCL and the H200 (docs/performance.md,
# "Winograd thresholds"). The networks' first layers (3 channels) stay with the GEMM paths.
CPU_WINOGRAD_MIN_CHANNELS = {"forward": 16, "backward_data": 16, "backward_weight": 16}
GPU_WINOGRAD_MIN_CHANNELS = 16
# ... except the weight gradient of 5x5 layers with at most this many output positions per
# image, where Winograd's launches cost more host time than its products save (H200)
GPU_SMALL_5X5_POSITIONS = 14 * 14
# Cog*C*Kh*Kw up to which implicit GEMM's weight gradient beats im2col's on CPUs: the GEMM
# engine runs such skinny products (N = Cog or K small) with few tiles
CPU_IMPLICIT_WGRAD_MAX = 2**16


# s2d_winograd pays (every pass on CPUs, the input gradient on GPUs) where its stride-1
# problem has the channels Winograd needs and its kernel of whole stride blocks adds at most
# this much to the kernel's area (docs/performance.md, "Winograd thresholds")
S2D_MAX_AREA = 1.25


def _cpu_gemm_rule(p, pass_):
    """The CPU rules' GEMM path where no Winograd pays."""
    if pass_ == "backward_weight" and p.cog * p.k <= CPU_IMPLICIT_WGRAD_MAX:
        return "implicit_gemm"  # small weights, long reductions (first layers)
    big_stride1 = (p.sh, p.sw) == (1, 1) and p.kh * p.kw >= 25
    return "implicit_gemm" if big_stride1 else "im2col"


def _s2d_pays(p, cpu, pass_):
    k = s2d.kernel_side(p) * p.sh
    least = CPU_WINOGRAD_MIN_CHANNELS[pass_] if cpu else GPU_WINOGRAD_MIN_CHANNELS
    return min(p.c * p.sh * p.sw, p.co) >= least and k * k <= S2D_MAX_AREA * p.kh * p.kw


def _winograd_pays(p, cpu, pass_):
    if cpu:
        return min(p.cg, p.cog) >= CPU_WINOGRAD_MIN_CHANNELS[pass_]
    if pass_ == "backward_weight" and p.kh == 5 and p.ho * p.wo <= GPU_SMALL_5X5_POSITIONS:
        return False
    return min(p.cg, p.cog) >= GPU_WINOGRAD_MIN_CHANNELS


def choose(p, device, pass_, algo="auto", tensors=None):
    """The algorithm that runs `pass_` of problem p. An explicit algo must be eligible for the
    forward pass (ValueError otherwise); a backward pass it lacks falls back to auto's choice.
    In benchmark mode `tensors` (the pass's operands, see time_pass) are timed."""
    half = p.dtype in dt.HALF_TYPES
    if half and algo != "auto":
        return _half_choice(p, device, pass_, algo)
    mode = precision.mode()  # checked on every call, as the flag may change at any moment
    if algo != "auto":
        ok, why = eligible(algo, p, pass_, device)
        if ok:
            return algo
        if pass_ == "forward":
            raise ValueError(f"conv2d: algo={algo!r} cannot run this convolution: {why}")
    key = (device, p, pass_, mode)
    if not backends.benchmark:
        if key not in _tuned:
            _tuned[key] = _tuned_choice(device, p, pass_) or _first_use(p, pass_, tensors)
        return _tuned[key] or _ruled_choice(p, device, pass_)
    if key in _chosen and _usable(_chosen[key], p, pass_, device):
        return _chosen[key]
    name = _admitted_from_disk(device, p, pass_)
    if name is None and tensors is not None:
        name = _benchmark(device, p, pass_, tensors)
    if name is None:
        return _ruled_choice(p, device, pass_)
    _chosen[key] = name
    return name


def _ruled_choice(p, device, pass_):
    """The rules' choice, for 16-bit problems among the algorithms that read them in place;
    remembered per problem, pass, precision mode and allow_tf32 while the plug-ins offer the
    same algorithms (every pass of every convolution asks: 5 us a call with a plug-in serving,
    as the plug-ins' eligible() and prefer() are asked again)."""
    key = (device, p, pass_, precision.mode(), backends.allow_tf32)
    return memo_with(_rules_memo, key, _offered(device),
                     lambda: _half_choice(p, device, pass_, "auto")
                     if p.dtype in dt.HALF_TYPES else rule(p, device, pass_))


def reads_half(algo, device=None):
    """Whether conv2d(..., algo=algo) reads 16-bit tensors in place: "auto", the portable
    HALF_ALGORITHMS, and the plug-in algorithms on the device that say so (READS_16BIT)."""
    if algo == "auto" or algo in HALF_ALGORITHMS:
        return True
    found = _offered(device).get(algo) if device is not None else None
    return bool(getattr(found, "READS_16BIT", False))


def _half_choice(p, device, pass_, algo):
    """A 16-bit problem's algorithm: algo when it reads 16-bit tensors and runs the pass;
    else on GPUs the rules' choice (plug-ins first) where it reads 16-bit tensors; else
    gemm_1x1 where it runs, else im2col (which runs every problem).
    NOTE: CPUs do not take the rules' float32 choice: Winograd's float32 transforms outweigh
    im2col's 16-bit columns (PoCL, peak of benchmarks/half.py's CNN step under bf16 autocast:
    58.8 MiB with im2col, 74.9 with Winograd where the rules pick it; GoogLeNet at batch 4:
    148 vs 164, float32 176) at about the same step time. On GPUs the im2col path took
    1.4-2x the float32 rules' step time (H200, Overfeat and VGG-A under bf16 autocast)."""
    names = [algo] if algo != "auto" else []
    if not device.is_cpu:
        names.append(rule(p, device, pass_))
    for name in (*names, "gemm_1x1"):
        if reads_half(name, device) and eligible(name, p, pass_, device)[0]:
            return name
    return "im2col"


def clear_cache():
    """Forget the in-memory choices and timings (the per-user file stays)."""
    _chosen.clear()
    _times.clear()
    _disk.clear()
    _ruled.clear()
    _tuned.clear()
    _rules_memo.clear()


# ---- benchmark mode ---------------------------------------------------------------------------

def time_pass(name, pass_, p, tensors, repeat=1):
    """Milliseconds one run of algorithm `name` takes for `pass_` (after a warm-up run).
    tensors: (x, w, bias) for the forward pass, (x, w, gout) for the backward ones."""
    device = tensors[0].device
    run = _runner(name, pass_, p, tensors)
    run()
    device.synchronize()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        device.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def _runner(name, pass_, p, tensors):
    mod = algorithm(name, tensors[0].device)
    if pass_ == "forward":
        x, w, b = tensors
        return lambda: mod.forward(x, w, b, p, common.empty(p.out_shape, x, common.layout_of(x)))
    x, w, g = tensors
    need_x = pass_ == "backward_data"
    return lambda: mod.backward(x, w, g, p, need_x, not need_x)


def candidates(p, pass_, device):
    """The algorithms benchmark mode times: the eligible ones, under "accurate" those within
    the error bound (precision.admitted); for 16-bit problems those that read them in place
    (their errors stay under the 16-bit rounding of the result: float32 sums, and TF32
    products only where conv/winograd.py allows them)."""
    names = eligible_names(p, pass_, device)
    if p.dtype in dt.HALF_TYPES:
        return [n for n in names if reads_half(n, device)]
    if precision.mode() == "accurate":
        return precision.admitted(names, p, pass_, precision.gemm_block(device),
                                  precision.reference_coef(device))
    return names


def _admitted_from_disk(device, p, pass_):
    """The file's choice if it is a candidate, else the fastest candidate by the file's times
    when it timed them all (an "accurate" entry times no others), else None (time them again:
    also when the file's choice no longer runs here, its plug-in gone, so the file is mended)."""
    name = _from_disk(device, p, pass_)
    allowed = candidates(p, pass_, device)
    if name in allowed:
        return name
    stored = _load(device).get(_disk_key(p, pass_), {}).get("algo")
    if stored is not None and not _usable(stored, p, pass_, device):
        return None
    times = timings(device, p, pass_)
    if not allowed or any(n not in times for n in allowed):
        return None
    return min(allowed, key=times.get)


def _benchmark(device, p, pass_, tensors, tuned=False, record=True):
    times = {n: time_pass(n, pass_, p, tensors) for n in candidates(p, pass_, device)}
    _times[(device, p, pass_)] = times
    best = min(times, key=times.get)
    if record:
        _to_disk(device, p, pass_, best, times, tuned)
    return best


def measure(p, pass_, tensors, record=True):
    """Time every candidate of a pass of p now (also where a choice is recorded); with record,
    keep the fastest in memory and in the per-user file, marked as tuned (auto follows it).
    Returns {algorithm: ms}; tensors as time_pass's."""
    device = tensors[0].device
    best = _benchmark(device, p, pass_, tensors, tuned=True, record=record)
    if record:
        _chosen[(device, p, pass_, precision.mode())] = best
        _tuned.clear()
    return dict(_times[(device, p, pass_)])


def _first_use(p, pass_, tensors):
    """With CLTENSOR_AUTOTUNE=1, a problem's pass with no tuned choice is measured on its first
    call and recorded as tuned (one TuningWarning per process says so); else None."""
    if tensors is None or not tunedb.autotune_enabled():
        return None
    device = tensors[0].device
    if device.index not in _first_use_warned:
        _first_use_warned.add(device.index)
        warnings.warn(f"{tunedb.AUTOTUNE_ENV}: each convolution's passes on {device.name} are "
                      f"timed on first use and recorded in {cache_path(device)}",
                      tunedb.TuningWarning, stacklevel=5)
    return _benchmark(device, p, pass_, tensors, tuned=True)


def _tuned_choice(device, p, pass_):
    """The choice the tuner recorded for this problem's pass on this device, where it is still
    a candidate here (or the fastest candidate it timed), else None."""
    if not _load(device).get(_disk_key(p, pass_), {}).get("tuned"):
        return None
    return _admitted_from_disk(device, p, pass_)


def timings(device, p, pass_):
    """The times benchmark mode measured for a problem's pass ({} before any)."""
    key = (device, p, pass_)
    if key in _times:
        return dict(_times[key])
    entry = _load(device).get(_disk_key(p, pass_), {})
    return dict(entry.get("times_ms", {}))


def cache_path(device):
    """The per-user file of benchmark-mode choices for one device and driver."""
    return Path(cache_root()) / "conv" / f"{device_key(device)}.json"


def _disk_key(p, pass_):
    return f"{p.key()}|{pass_}"


def validate_disk(data):
    """Raise ValueError unless `data` is a benchmark file: "<problem>|<pass>" -> {"algo": name,
    "times_ms": {name: ms}, "vendor": name, "tuned": bool (optional: recorded by the tuner)}."""
    if not isinstance(data, dict):
        raise ValueError(f"expected an object, got {type(data).__name__}")
    for key, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - {"algo", "times_ms", "vendor", "tuned"}:
            raise ValueError(f"{key!r:.80}: expected an object of algo, times_ms, vendor "
                             "and tuned")
        times = entry.get("times_ms", {})
        if not isinstance(entry.get("algo"), str) or not isinstance(times, dict) or \
                not isinstance(entry.get("vendor", ""), str) or \
                not isinstance(entry.get("tuned", False), bool):
            raise ValueError(f"{key!r:.80}: algo and vendor must be strings, times_ms an "
                             "object, tuned a bool")
        if not all(type(t) in (int, float) and 0 <= t < float("inf") for t in times.values()):
            raise ValueError(f"{key!r:.80}: times_ms must be finite numbers >= 0")


def _load(device):
    if device.index not in _disk:
        ok = private_dirs(cache_root(), "conv") is not None
        _disk[device.index] = read_json(cache_path(device), validate_disk) if ok else {}
    return _disk[device.index]


def _from_disk(device, p, pass_):
    entry = _load(device).get(_disk_key(p, pass_))
    if not isinstance(entry, dict):
        return None
    name = entry.get("algo")
    if not isinstance(name, str) or not _usable(name, p, pass_, device):
        return None
    # NOTE: a candidate the file never timed (a plug-in installed since) is timed now
    untimed = set(eligible_names(p, pass_, device)) - set(entry.get("times_ms", {}))
    return None if untimed else name


def _to_disk(device, p, pass_, best, times, tuned=False):
    """Merge one choice into the file under its lock (other processes' choices stay); a
    problem the tuner recorded stays marked as tuned when benchmark mode times it again."""
    entry = {"algo": best, "times_ms": times, "vendor": tunedb.vendor_of(device)}
    if tuned or _load(device).get(_disk_key(p, pass_), {}).get("tuned"):
        entry["tuned"] = True
    _load(device)[_disk_key(p, pass_)] = entry
    if private_dirs(cache_root(), "conv") is None:
        return
    try:
        data = update_json(cache_path(device), validate_disk,
                           lambda data: data.__setitem__(_disk_key(p, pass_), entry))
    except OSError as e:  # a full disk: the choice stays in memory for this process
        warn_once(("write", str(cache_path(device))),
                  f"cltensor: cannot write {cache_path(device)} ({e}); choice kept in memory")
        return
    _disk[device.index] = data
