"""The tuner's command line (`tune all`, its progress bar) and tuning on first use
(CLTENSOR_AUTOTUNE), each over a search space of two candidates so that it runs in seconds."""
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from cltensor import tune, tune_conv, tunedb
from cltensor.conv import dispatch
from cltensor.ops import gemm as gm
from conftest import subprocess_env

SHIPPED_DB = tune.DB_DIR / "gemm.json"


@pytest.fixture
def tiny_tuner(tmp_path, monkeypatch):
    """A private database folder (the shipped database without device entries) and user cache,
    and a tuner with two candidates per family and a fixed threshold; returns the calls to the
    tuner."""
    db = tmp_path / "db"
    db.mkdir()
    shipped = json.loads(SHIPPED_DB.read_text())
    for table in shipped.values():
        for vendor in table["vendors"].values():
            vendor.pop("devices", None)
    (db / "gemm.json").write_text(json.dumps(shipped))
    monkeypatch.setattr(tunedb, "DB_DIR", db)  # the module that reads it
    monkeypatch.setattr(tune, "DB_DIR", db)
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(tune.AUTOTUNE_ENV, raising=False)
    monkeypatch.setattr(tune, "_packed_candidates", lambda dtype, quick=False: [
        {"MR": 4, "NR": 16, "VW": 16, "ORDER": 0}, {"MR": 6, "NR": 16, "VW": 16, "ORDER": 1}])
    monkeypatch.setattr(tune, "_xgemm_structures", lambda dtype: [gm.XGEMM_FALLBACKS[1]])
    monkeypatch.setattr(tune, "_xgemm_variations", lambda p: [])
    monkeypatch.setattr(tune.GemmTuner, "THRESHOLD_SIZES", (16,))
    monkeypatch.setattr(tune.GemmTuner, "tune_threshold", lambda self, e: {"min_work": 4321})
    monkeypatch.setattr(tune, "FIRST_USE_SIZE", 32)
    calls = []
    real = tune.TUNERS["gemm"]
    monkeypatch.setitem(tune.TUNERS, "gemm", lambda *a, **kw: calls.append(a[1]) or real(*a, **kw))
    monkeypatch.setattr(tune_conv, "LAYERS", {"tiny": ((4, 6, 5, 3, 1, 1),)})
    monkeypatch.setattr(tune_conv, "BATCHES", {"tiny": (1, 1)})
    tune.clear()
    tune._first_use.clear()
    dispatch.clear_cache()
    yield calls
    tune.clear()
    tune._first_use.clear()
    dispatch.clear_cache()


def _cached(device):
    path = tune.user_cache_path(device)
    return json.loads(path.read_text()) if path.exists() else {}


# ---- the progress bar -------------------------------------------------------------------------

class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_estimates_the_time_left_from_the_mean_step():
    clock, out = _Clock(), io.StringIO()
    bar = tune.Progress(10, stream=out, clock=clock)
    assert bar.seconds_left() is None and "~?" in bar.line()
    clock.now += 6.0
    bar.step("a", n=2)  # 3 s a step, 8 steps left
    assert bar.seconds_left() == pytest.approx(24.0)
    assert "2/10" in bar.line() and "20%" in bar.line() and "~0m24s left a" in bar.line()
    clock.now += 90.0
    bar.step("b", n=8)
    assert bar.seconds_left() == 0
    bar.step("c")  # past the plan: the total grows with it
    assert bar.total == 11 and "100%" in bar.line()
    bar.close()
    lines = out.getvalue().splitlines()  # not a terminal: a line per tenth of the total
    assert len(lines) == 2 and lines[0].startswith("[######") and "~0m24s left" in lines[0]
    assert lines[1].startswith("[" + "#" * 30 + "] 10/10 100%")


# ---- python -m cltensor.tune all --------------------------------------------------------------

def test_tune_all_tunes_every_kernel_with_a_progress_bar(device, tiny_tuner, capsys):
    assert tune.main(["all", "--device", device.index, "--size", "32", "--reps", "1"]) == 0
    want = ["gemm_float32"] + (["gemm_float64"] if device.has_fp64 else []) + \
        ["gemm_float16", "gemm_bfloat16"]
    assert tiny_tuner == want
    cached = _cached(device)
    assert sorted(cached) == sorted(want) and all(cached[k]["min_work"] == 4321 for k in want)
    if device.is_cpu:
        assert {cached[k]["family"] for k in want} == {"packed"}
    out, err = capsys.readouterr()
    assert all(f"{k}: " in out for k in want + ["conv_float32"])
    recorded = json.loads(dispatch.cache_path(device).read_text())  # conv's three passes
    assert len(recorded) == 3 and all(e["tuned"] for e in recorded.values())
    bars = [line for line in err.splitlines() if line.startswith("[")]
    assert bars and " left " in bars[0] and "100%" in bars[-1], err[-2000:]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_products_take_float32s_entry_until_tuned_for_themselves(device, tiny_tuner,
                                                                        name):
    """A 16-bit product's parameters: gemm_float32's merged entry (shipped and the user's)
    while the device has none of its own; `tune gemm --dtype` times candidates on 16-bit
    operands (checked against float64 first) and stores an entry that 16-bit products then
    take and float32 ones do not."""
    dtype = getattr(tune.dt, name)
    f32 = np.dtype(np.float32)
    tunedb.store("gemm_float32", device, dict(gm.entry_for(device, f32), min_work=1234))
    assert gm.entry_for(device, dtype)["min_work"] == 1234
    assert not tune.is_tuned("gemm", f"gemm_{name}", device)
    assert tune.main(["gemm", "--dtype", name, "--device", device.index, "--size", "32",
                      "--reps", "1"]) == 0
    assert tiny_tuner == [f"gemm_{name}"]
    assert _cached(device)[f"gemm_{name}"]["min_work"] == 4321
    assert tune.is_tuned("gemm", f"gemm_{name}", device)
    assert gm.entry_for(device, dtype)["min_work"] == 4321
    assert gm.entry_for(device, f32)["min_work"] == 1234


def test_tuner_refuses_a_wrong_16bit_candidate(device, tiny_tuner, monkeypatch):
    """A candidate whose 16-bit product is wrong is never timed (the check reads the
    product of the values as stored, within bfloat16's rounding)."""
    tuner = tune.GemmTuner(device, "bfloat16", 32, 1, log=lambda *a: None)
    entry = dict(gm.entry_for(device, tune.dt.bfloat16), min_work=0, min_dim=0)
    assert tuner.measure(entry, (32, 32, 32)) is not None
    real = gm.gemm_into
    monkeypatch.setattr(tuner.gm, "gemm_into",
                        lambda a, b, c, **kw: real(a, b, c, **kw).mul_(1.05))
    assert tuner.measure(entry, (32, 32, 32)) is None


def test_python_m_tune_runs_the_command_line():
    out = subprocess.run([sys.executable, "-m", "cltensor.tune", "--help"], env=subprocess_env(),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "{gemm,conv,all}" in out.stdout
    assert "Warning" not in out.stderr, out.stderr  # runpy's about a module imported twice


# ---- tuning on first use ----------------------------------------------------------------------

def test_first_use_tunes_an_unseen_device_once_and_stores_it(device, tiny_tuner, monkeypatch):
    monkeypatch.setenv(tune.AUTOTUNE_ENV, "1")
    with pytest.warns(tune.TuningWarning, match="tuned gemm_float32 .* on first use"):
        entry = gm.entry_for(device, np.dtype(np.float32))
    assert entry["min_work"] == 4321 and tiny_tuner == ["gemm_float32"]
    assert _cached(device)["gemm_float32"] == entry
    tune.clear()
    tune._first_use.clear()  # as in a new process: the stored entry is the device's own now
    assert gm.entry_for(device, np.dtype(np.float32))["min_work"] == 4321
    assert tune.is_tuned("gemm", "gemm_float32", device)
    assert tiny_tuner == ["gemm_float32"]


def test_first_use_is_off_by_default(device, tiny_tuner):
    assert gm.entry_for(device, np.dtype(np.float32))["min_work"] != 4321
    assert tiny_tuner == [] and _cached(device) == {}


def test_first_use_skips_a_device_with_a_shipped_entry(device, tiny_tuner, monkeypatch):
    db = json.loads((tune.DB_DIR / "gemm.json").read_text())
    level = db["gemm_float32"]["vendors"].setdefault(tune.vendor_of(device), {})
    level["devices"] = {device.name: {"min_dim": 3}}
    (tune.DB_DIR / "gemm.json").write_text(json.dumps(db))
    monkeypatch.setenv(tune.AUTOTUNE_ENV, "1")
    assert gm.entry_for(device, np.dtype(np.float32))["min_dim"] == 3
    assert tiny_tuner == []


def test_first_use_failure_warns_and_keeps_the_untuned_entry(device, tiny_tuner, monkeypatch):
    monkeypatch.setenv(tune.AUTOTUNE_ENV, "1")
    monkeypatch.setattr(tune, "store", lambda *a: (_ for _ in ()).throw(OSError("read-only")))
    with pytest.warns(tune.TuningWarning, match="failed .*read-only.*untuned"):
        entry = gm.entry_for(device, np.dtype(np.float32))
    assert entry["min_work"] != 4321 and tiny_tuner == ["gemm_float32"]
    tune.clear()  # the merged entries forgotten, not the attempt
    gm.entry_for(device, np.dtype(np.float32))
    assert tiny_tuner == ["gemm_float32"]  # tried once per process


# ---- shipped entries ----------------------------------------------------------------------------

def test_intels_cpu_runtime_has_a_measured_cpu_entry():
    """Intel's OpenCL CPU runtime (vendor 'intel', the CPU's own name) gets the CPU kernels."""
    db = json.loads(SHIPPED_DB.read_text())
    tune.validate_database(db)
    for kernel in ("gemm_float32", "gemm_float64"):
        entry = db[kernel]["vendors"]["intel"]["devices"]["AMD EPYC"]
        assert entry["family"] == "packed" and entry["small"] == "direct", kernel
        assert entry["packed"]["KB"] == 64, kernel  # the blocked sums' accuracy


def test_avx512_cpu_entries_read_b_in_place_unless_it_aliases(device):
    """Below the slabs' K, B is read where it is unless its rows alias in the L2: a panel
    deeper than the L2 sets its rows map to hold (rows 12800 bytes apart: 128 sets, 2048 rows;
    4096 apart: 16 sets), which is packed instead, as are rows off 64-byte lines (4000 bytes
    apart) and a deep, large B of a product of more than B_IN_PLACE_MAX_M rows. Deep products
    walk down M: walking along N streams all of B once per panel of A (docs/tuning.md)."""
    import cltensor
    db = json.loads(SHIPPED_DB.read_text())["gemm_float32"]["vendors"]
    x = cltensor.zeros((8,), device=device)
    for params in (db["pocl"]["devices"]["pthread-skylake-avx512-AMD EPYC"]["packed"],
                   db["intel"]["devices"]["AMD EPYC"]["packed"]):
        def problem(k, n=1008, m=params["B_IN_PLACE_MAX_M"]):
            b = gm.Operand(x, [], n, 1)
            return gm.Problem(device, np.dtype(np.float32), m, n, k, (), None, b, None, None)
        assert gm.packed_reads_b_in_place(problem(576), params)
        assert gm.packed_reads_b_in_place(problem(576, m=512), params)  # shallow
        assert not gm.packed_reads_b_in_place(problem(2200, m=512), params)  # deep and tall
        assert not gm.packed_reads_b_in_place(problem(576, 1000), params)
        assert gm.packed_reads_b_in_place(problem(2200), params)  # rows 4032 bytes apart
        assert gm.packed_reads_b_in_place(problem(1152, 6272), params)
        assert not gm.packed_reads_b_in_place(problem(2400, 3200), params)
        assert not gm.packed_reads_b_in_place(problem(1024, 1024), params)
        assert not gm.packed_walks_n(problem(1024), params)
        assert gm.packed_walks_n(problem(256), params)


def test_global_default_cpu_tile_fits_avx2_registers():
    """The packed tile a CPU without an entry of its own gets fits AVX2's 16 vector registers
    (accumulators, a row of B's panel and a broadcast of A), with the rules measured on CPUs."""
    params = json.loads(SHIPPED_DB.read_text())["gemm_float32"]["default"]["packed"]
    lanes = params["VW"] // 8 if params["VW"] > 8 else 1  # 256-bit registers per vector
    vectors = params["NR"] // params["VW"]
    assert (params["MR"] * vectors + vectors + 1) * lanes <= 16, params
    assert params["A_IN_PLACE"] == 1 and params["WALK_M_FROM_K"] == 512 and params["KB"] == 64


def test_tuner_times_cpu_devices_by_process_cpu_time(device, monkeypatch):
    """On a CPU device the tuner ranks by the CPU time a product takes (other work on the
    machine stretches its wall time far more), elsewhere by the kernels' profiled time."""
    seen = []
    real = tune.time_call
    monkeypatch.setattr(tune, "time_call", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    tuner = tune.GemmTuner(device, np.float32, 32, 1, log=lambda *a: None)
    entry = dict(gm.entry_for(device, np.dtype(np.float32)), min_work=0, min_dim=0)
    assert tuner.measure(entry, (32, 32, 32)) > 0
    assert seen == [{"cpu": device.is_cpu}]
    _, _, ta, tb, tc = tuner._tensors(32, 32, 32)
    assert 0 < real(device, lambda: gm.gemm_into(ta, tb, tc), reps=1, cpu=True) < 10
