"""How the GEMM engine picks its parameter sets: forced small device limits (every choice
fits, the results stay right), the plan weighing padding, occupancy, split K and each layout's
rate, split-K sums, benchmark mode, invalid sets skipped; the parameter database (lookup
falling back from device to vendor to global, the user cache keyed by device and driver, the
shipped entries); and the tuner (a winner the next process uses, wrong or unfit candidates
rejected, no fallback timed for an unfit set)."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

import cltensor
from cltensor import tune, tunedb
from cltensor.ops import gemm as gm
from cltensor.testing import random_array
from conftest import subprocess_env
from test_gemm import SHIPPED_DB, poisoned, put, run_check, stored


# ---- device limits ----------------------------------------------------------------------------

TOO_BIG = [  # 512 work-items; then 48 KiB of local memory; then a fitting one
    {"MWG": 128, "NWG": 128, "KWG": 16, "MDIMC": 16, "NDIMC": 32, "VWM": 4, "VWN": 4,
     "STRM": 1, "STRN": 1, "PADA": 0, "PADB": 0, "NBUF": 2},
    {"MWG": 128, "NWG": 64, "KWG": 32, "MDIMC": 16, "NDIMC": 16, "VWM": 4, "VWN": 4,
     "STRM": 1, "STRN": 1, "PADA": 4, "PADB": 4, "NBUF": 2},
    {"MWG": 64, "NWG": 32, "KWG": 16, "MDIMC": 16, "NDIMC": 8, "VWM": 2, "VWN": 4,
     "STRM": 0, "STRN": 1, "PADA": 2, "PADB": 4, "NBUF": 2},
]


def test_forced_small_device_limits(device, rng, monkeypatch):
    """256 work-items and 32 KiB of local memory, as on many AMD and Intel GPUs: every choice
    fits, and the results stay right (also when the device's own limits chose first: the
    fitting sets are memoized)."""
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=TOO_BIG,
                 tiled={"TSM": 128, "TSN": 128, "TSK": 32, "WPTM": 4, "WPTN": 4})
    gm.xgemm_candidates(device, entry, 4)
    monkeypatch.setattr(device, "max_work_group", 256)
    monkeypatch.setattr(device, "local_mem", 32 * 1024)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    own, extra = gm.xgemm_candidates(device, entry, 4)
    assert own == TOO_BIG[2:]
    assert all(gm.xgemm_local_bytes(q, 4) <= 32 * 1024 and q["MDIMC"] * q["NDIMC"] <= 256
               for q in own + extra)
    assert all(q["TSM"] <= 64 for q in gm.tiled_candidates(device, entry, 4))
    for fam in ("xgemm", "tiled"):
        monkeypatch.setattr(gm, "FORCE_FAMILY", fam)
        a, b = random_array(rng, (70, 50)), random_array(rng, (50, 40))
        with cltensor.profile() as prof:
            out = cltensor.gemm(put(device, a), put(device, b), col_bias=put(device, b[0]))
        run_check(out, a, b, np.float32, col_bias=b[0])
        locals_ = [r["local"] for r in prof.records() if r["name"] in ("xgemm", "gemm_tiled")]
        assert locals_ and all(np.prod(lc) <= 256 for lc in locals_)


def test_plan_weighs_padding_occupancy_and_split_k(device):
    big = dict(TOO_BIG[0], rate=40.0)
    narrow = dict(TOO_BIG[2], rate=30.0)  # 64 x 32 tiles
    entry = {"xgemm": [big, narrow], "compute_units": 8, "threads_per_cu": 256,
             "split_cost_us": 0, "bandwidth_gbs": 1e9}
    p = lambda m, n, k: gm.Problem(device, np.dtype(np.float32), m, n, k, (), *[None] * 4)
    best = lambda prob: min(entry["xgemm"], key=lambda q: gm.xgemm_plan(prob, entry, q)[0])
    assert best(p(1024, 1024, 64)) is big          # 64 tiles, no padding: the faster rate wins
    assert best(p(64, 4096, 64)) is narrow         # half of each 128-row tile would be padding
    cost, splits = gm.xgemm_plan(p(128, 256, 4096), entry, big)
    assert splits == 4                             # 2 tiles on 8 units: 4 shares fill a wave
    # 3 tiles: 8 shares make 3 full waves; 3 shares would leave the second wave 1/8 busy
    assert gm.xgemm_plan(p(384, 128, 4096), entry, big)[1] == 8
    assert gm.groups_per_cu(entry, narrow) == 2 and gm.groups_per_cu(entry, big) == 1
    assert gm.xgemm_plan(p(128, 256, 64), entry, big)[1] == 1       # too few K slices to split
    assert gm.xgemm_plan(p(128, 256, 4096), dict(entry, split_k=False), big)[1] == 1
    slow_reduce = dict(entry, split_cost_us=1e6)      # a second per extra pass: never split
    assert gm.xgemm_plan(p(128, 256, 4096), slow_reduce, big)[1] == 1
    # split counts are powers of two (24 tiles on 132 units: the estimate's best count is 11)
    many_units = dict(entry, compute_units=132)
    assert [gm.xgemm_plan(p(128, n, 36864), many_units, big)[1] for n in (2048, 3072, 4096)] \
        == [8, 16, 4]


def test_plan_prices_each_layout_at_its_own_rate(device):
    """A set's layout_factors scale its rate to the way A and B are stored (gemm.layout_of):
    a set twice as slow with both operands K-contiguous loses a product it wins row-major."""
    big = dict(TOO_BIG[0], rate=40.0, layout_factors={"KK": 0.5, "MN": 1.0, "MK": 1.0})
    narrow = dict(TOO_BIG[2], rate=30.0)
    entry = {"xgemm": [big, narrow], "compute_units": 8, "threads_per_cu": 256}
    m, n, k = 1024, 1024, 64

    def problem(a_kc, b_kc):
        a = gm.Operand(None, [], k, 1) if a_kc else gm.Operand(None, [], 1, m)
        b = gm.Operand(None, [], 1, k) if b_kc else gm.Operand(None, [], n, 1)
        return gm.Problem(device, np.dtype(np.float32), m, n, k, (), a, b, None, None)
    layouts = {lay: problem(lay[0] == "K", lay[1] == "K") for lay in gm.LAYOUTS}
    assert {lay: gm.layout_of(q) for lay, q in layouts.items()} == {l: l for l in gm.LAYOUTS}
    best = lambda prob: min(entry["xgemm"], key=lambda q: gm.xgemm_plan(prob, entry, q)[0])
    assert [best(layouts[lay]) is big for lay in gm.LAYOUTS] == [True, True, False, True]
    kk, kn = (gm.xgemm_plan(layouts[lay], entry, big)[0] for lay in ("KK", "KN"))
    assert kk == pytest.approx(2 * kn)


def test_split_k_sums_the_shares(device, rng, monkeypatch, fp_dtypes):
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=[gm.XGEMM_FALLBACKS[1]],
                 strict=True, compute_units=64)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    for dtype in fp_dtypes:
        a, b = random_array(rng, (2, 40, 301), dtype), random_array(rng, (2, 301, 50), dtype)
        c, bias = random_array(rng, (40, 50), dtype), random_array(rng, (40,), dtype)
        with cltensor.profile() as prof:
            out = cltensor.gemm(put(device, a), stored(device, b, True), c=put(device, c),
                                beta=-1, row_bias=put(device, bias), relu=True)
        run_check(out, a, b, dtype, beta=-1, c=c, row_bias=bias, relu=True)
        names = [r["name"] for r in prof.records()]
        assert names.count("xgemm_reduce") == 1, names
        (xgemm_launch,) = [r for r in prof.records() if r["name"] == "xgemm"]
        assert xgemm_launch["global"][2] > 2, "K was not split"


def test_benchmark_mode_times_sets_and_splits(device, rng, monkeypatch):
    """cltensor.backends.benchmark: xgemm times the near-best (set, split count) pairs once
    per shape into a scratch output (an in-place c = a @ b + c stays right), runs the fastest
    and remembers it."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    monkeypatch.setattr(gm.bench, "BENCH_MIN_SECONDS", 0.0)
    monkeypatch.setattr(gm.bench, "BENCH_SLACK", 1e9)  # every candidate
    monkeypatch.setattr(cltensor.backends, "benchmark", True)
    sets = [gm.XGEMM_FALLBACKS[1], dict(gm.XGEMM_FALLBACKS[1], MWG=64, MDIMC=16)]
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), xgemm=sets, strict=True,
                 compute_units=64)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    gm.clear_cache()
    a, b, c = (random_array(rng, s, np.float32) for s in ((40, 301), (301, 50), (40, 50)))
    tc = put(device, c)
    cltensor.gemm(put(device, a), stored(device, b, True), out=tc, c=tc, beta=1)
    run_check(tc, a, b, np.float32, beta=1, c=c)
    (params, splits, times), = gm.benchmark_times(device).values()
    assert len(times) == 2 * 301 // (8 * gm.SPLIT_MIN_SLICES)  # both sets, splits 1..9
    assert times[(sets.index(params), splits)] == min(times.values())
    monkeypatch.setattr(gm.bench, "_time_plan", lambda *args: pytest.fail("timed twice"))
    out = poisoned(device, (40, 50), np.float32)
    cltensor.gemm(put(device, a), stored(device, b, True), out)
    run_check(out, a, b, np.float32)
    gm.clear_cache()
    assert gm.benchmark_times(device) == {}


def test_benchmark_mode_times_packed_variants(device, rng, monkeypatch):
    """cltensor.backends.benchmark on gemm_packed: the entry's set, its tile at half and twice
    MR, packed B (where B is read in place) and slabs are timed once per shape into a scratch
    output (c = a @ b + c stays right), the fastest runs and is remembered; each variant's
    result is right."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "packed")
    monkeypatch.setattr(gm.bench, "PACKED_BENCH_MIN_FLOPS", 0)
    monkeypatch.setattr(cltensor.backends, "benchmark", True)
    base = gm.entry_for(device, np.dtype(np.float32))
    params = dict(base["packed"], MR=8, NR=32, VW=16, B_IN_PLACE_MIN_N=1, KB=64, KC=128,
                  B_IN_PLACE_MAX_M=2 ** 62,
                  SLAB_MIN_K=2 ** 20)
    entry = dict(base, packed=params, min_work=0, min_dim=0)
    monkeypatch.setattr(gm, "entry_for", lambda *args: entry)
    gm.clear_cache()
    a, b, c = (random_array(rng, s, np.float32) for s in ((300, 301), (301, 288), (300, 288)))
    tc = put(device, c)
    cltensor.gemm(put(device, a), put(device, b), out=tc, c=tc, beta=1)
    run_check(tc, a, b, np.float32, beta=1, c=c)
    (chosen, times), = gm.benchmark_times(device).values()
    variants = [dict(params, MR=4, NR=64, WIDE_MAX_M=0), dict(params, MR=16, NR=16, WIDE_MAX_M=0),
                dict(params, B_IN_PLACE_MIN_N=2 ** 62),
                dict(params, SLAB_MIN_K=1, SLAB_MIN_M=1, SLAB_MIN_MN=1, SLAB_MIN_N=1)]
    assert len(times) == 5 and chosen == ([params] + variants)[min(times, key=times.get)]
    monkeypatch.setattr(gm.bench, "_best_seconds", lambda *args: pytest.fail("timed twice"))
    out = poisoned(device, (300, 288), np.float32)
    cltensor.gemm(put(device, a), put(device, b), out)
    run_check(out, a, b, np.float32)
    for v in variants:  # each variant itself, as benchmark mode would run it
        entry["packed"] = v
        gm.clear_cache()
        monkeypatch.setattr(gm.bench, "PACKED_BENCH_MIN_FLOPS", 1e30)
        out = poisoned(device, (300, 288), np.float32)
        cltensor.gemm(put(device, a), put(device, b), out)
        run_check(out, a, b, np.float32)
    gm.clear_cache()
    assert gm.benchmark_times(device) == {}


def test_invalid_parameter_sets_are_skipped():
    assert gm.xgemm_valid(gm.XGEMM_FALLBACKS[0])
    assert not gm.xgemm_valid(dict(gm.XGEMM_FALLBACKS[0], VWM=3))
    assert not gm.xgemm_valid(dict(gm.XGEMM_FALLBACKS[0], MWG=48))  # MWG % (MDIMC*VWM) != 0
    assert not gm.xgemm_valid({"MWG": 64})


# ---- the parameter database -------------------------------------------------------------------

@pytest.fixture
def tmp_tuning(tmp_path, monkeypatch):
    """A private database folder and user cache for one test."""
    db = tmp_path / "db"
    db.mkdir()
    monkeypatch.setattr(tunedb, "DB_DIR", db)
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    tune.clear()
    yield db
    tune.clear()


def test_lookup_falls_back_device_vendor_global(device, tmp_tuning):
    vendor = tune.vendor_of(device)
    name = device.name
    # levels: 1 global ... 4 long; keys that the device's derived defaults leave to the database
    a, b, c, d = "threads_per_cu", "compute_units", "min_m", "rowdot_max_m"
    table = {"gemm_float32": {
        "default": {a: 1, b: 1, c: 1, d: 1},
        "vendors": {vendor: {"default": {b: 2, c: 2, d: 2},
                             "devices": {name[:3]: {c: 3, d: 3},
                                         name[:5]: {d: 4}, "no such device": {a: 9}}},
                    "other vendor": {"default": {a: 9}}}}}
    (tmp_tuning / "gemm.json").write_text(json.dumps(table))
    got = tune.lookup("gemm", "gemm_float32", device)  # the longest device key wins, alone
    derived = tune.derived_defaults("gemm_float32", device.description())
    assert got == dict(derived, **{a: 1, b: 2, c: 2, d: 4})
    assert tune.lookup("gemm", "gemm_float64", device) == tune.derived_defaults(
        "gemm_float64", device.description())


def test_user_cache_overrides_and_is_keyed_by_device_and_driver(device, tmp_tuning, tmp_path):
    vendor = {tune.vendor_of(device): {"default": {"family": "direct", "min_work": 5}}}
    (tmp_tuning / "gemm.json").write_text(json.dumps({"gemm_float32": {"vendors": vendor}}))
    assert gm.entry_for(device, np.dtype(np.float32))["min_work"] == 5
    path = tune.store("gemm_float32", device, {"min_work": 7})
    assert path == tune.user_cache_path(device)
    assert str(path).startswith(str(tmp_path / "cache" / "tuning"))
    assert re.sub(r"[^A-Za-z0-9_.-]+", "_", device.cl_device.driver_version) in path.name
    got = tune.lookup("gemm", "gemm_float32", device)
    assert (got["family"], got["min_work"]) == ("direct", 7)
    assert gm.entry_for(device, np.dtype(np.float32))["min_work"] == 7  # store() forgets


def test_shipped_database_has_measured_entries():
    db = json.loads((tune.DB_DIR / "gemm.json").read_text())
    for kernel in ("gemm_float32", "gemm_float64"):
        vendors = db[kernel]["vendors"]
        assert any("pthread" in key for key in vendors["pocl"]["devices"]), kernel
        assert any("H200" in key for key in vendors["nvidia"]["devices"]), kernel
        for entry in [db[kernel]["default"], *(v["default"] for v in vendors.values()),
                      *(e for v in vendors.values() for e in v["devices"].values())]:
            assert all(gm.xgemm_valid(q) for q in entry.get("xgemm", [])), entry


# ---- the tuner --------------------------------------------------------------------------------

def test_tuner_stores_a_winner_the_next_process_uses(device, tmp_tuning, tmp_path, monkeypatch):
    (tmp_tuning / "gemm.json").write_text(SHIPPED_DB.read_text())
    monkeypatch.setattr(tune, "_packed_candidates", lambda dtype: [
        {"MR": 4, "NR": 16, "VW": 16, "ORDER": 0}, {"MR": 6, "NR": 16, "VW": 16, "ORDER": 1}])
    monkeypatch.setattr(tune, "_xgemm_structures", lambda dtype: [gm.XGEMM_FALLBACKS[1]])
    monkeypatch.setattr(tune, "_xgemm_variations", lambda p: [dict(p, STRM=0)])
    monkeypatch.setattr(tune.GemmTuner, "tune_threshold", lambda self, e: {"min_work": 1234})
    report = tmp_path / "report.json"
    assert tune.main(["gemm", "--device", device.index, "--size", "64", "--reps", "1",
                      "--json", str(report)]) == 0
    winner = json.loads(report.read_text())["winners"]["gemm_float32"]
    assert winner["min_work"] == 1234
    if device.is_cpu:
        assert winner["family"] == "packed" and winner["packed"]["MR"] in (4, 6)
    cached = json.loads(tune.user_cache_path(device).read_text())["gemm_float32"]
    assert cached == winner
    code = ("import cltensor, numpy as np; from cltensor.ops import gemm; "
            f"d = cltensor.get_device({device.index!r}); "
            "print(gemm.entry_for(d, np.dtype(np.float32))['min_work'])")
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "1234"


def test_tuner_rejects_wrong_or_unfit_candidates(device, rng, monkeypatch):
    tuner = tune.GemmTuner(device, np.float32, 32, 1, log=lambda *a: None)
    base = gm.entry_for(device, np.dtype(np.float32))
    unfit = dict(base, family="xgemm", xgemm=[dict(gm.XGEMM_FALLBACKS[1], KWG=8192)],
                 strict=True, min_work=0, min_dim=0)  # 2 MiB of local memory
    assert tuner.measure(unfit, (32, 32, 32)) is None
    ok = dict(base, family="xgemm", xgemm=[gm.XGEMM_FALLBACKS[1]], strict=True, min_work=0,
              min_dim=0)
    assert tuner.measure(ok, (32, 32, 32)) > 0
    monkeypatch.setattr(tuner, "_correct", lambda entry: False)
    assert tuner.measure(ok, (32, 32, 32)) is None


def test_tuner_never_times_a_fallback_for_an_unfit_set(device, monkeypatch):
    """A set that does not fit the device gets no rate (the engine would run a fallback set
    in its place, and the fallback's rate would be shipped under the unfit set's name)."""
    unfit = dict(gm.XGEMM_FALLBACKS[0], KWG=8192)  # 4 MiB of local memory
    fit = dict(gm.XGEMM_FALLBACKS[1], GROUP_M=8)
    monkeypatch.setattr(tune, "_xgemm_structures", lambda dtype: [unfit, fit])
    monkeypatch.setattr(tune, "_xgemm_variations", lambda p: [])
    logs = []
    tuner = tune.GemmTuner(device, np.float32, 32, 1, log=lambda *a: logs.append(a))
    winner = tuner.tune_xgemm()
    assert [{k: v for k, v in q.items() if k not in ("rate", "layout_factors")}
            for q in winner["xgemm"]] == [fit]
    assert {r["entry"]["xgemm"][0]["KWG"] for r in tuner.results} == {fit["KWG"]}
    # the winner's speed in the other layouts, timed with A and B stored that way
    assert "layout_factors" in winner["xgemm"][0], (tuner.results[-6:], logs[-6:])
    factors = winner["xgemm"][0]["layout_factors"]
    assert set(factors) == {"MN", "KK", "MK"} and all(f > 0 for f in factors.values())
    assert {r["label"] for r in tuner.results} >= {f"layout {lay}" for lay in gm.LAYOUTS}
    for lay in gm.LAYOUTS:
        a, b, A, B, _ = tuner._tensors(32, 32, 32, lay)
        assert (A.strides[1] == 1, B.strides[0] == 1) == (lay[0] == "K", lay[1] == "K"), lay
        np.testing.assert_array_equal(A.numpy(), a)
        np.testing.assert_array_equal(B.numpy(), b)
