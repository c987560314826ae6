"""benchmarks/conv.py end to end on a small case: per-layer times with the TF32 mode's flag
carried into the run and the JSON, plug-in algorithms named by --algos, and a misspelt
algorithm refused before any timing; benchmarks/host_overhead.py's TF32 flag likewise, and its
graph replays and per-op figures, and its --wake mode (launches released to the device in
batches); benchmarks/gemm.py's split of a product among its launches; benchmarks/net_kernels.py's
kernel table and per-pass algorithms."""
import importlib.util
import json
import os
import time
import threading

import numpy as np
import pytest

import cltensor as ct
from cltensor import backends, profiler
from cltensor.ops import gemm as gm
from cltensor.plugins import nvidia

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                  os.path.join(ROOT, "benchmarks", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_conv_benchmark_tf32_mode(device, tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "allow_tf32", False)  # main() sets it for the run
    mod = script("conv")
    seen = []
    real = mod.cl_layer
    monkeypatch.setattr(mod, "cl_layer",
                        lambda *a, **kw: seen.append(backends.allow_tf32) or real(*a, **kw))
    out = tmp_path / "conv.json"
    tensor_cores = nvidia.NvidiaTensorCores().serves(device)
    algos = "auto,tf32_implicit" if tensor_cores else "auto"
    mod.main(["--nets", "alexnet", "--batch", "1", "--iters", "1", "--algos", algos,
             "--step", "", "--device", device.index, "--json", str(out), "--tf32"])
    result = json.loads(out.read_text())
    assert result["allow_tf32"] is True and seen and all(seen)
    assert len(result["layers"]) == 5
    for layer in result["layers"]:
        assert layer["algos"]["auto"]["fwd_ms"] > 0 and layer["algos"]["auto"]["bwd_ms"] > 0
        if tensor_cores:
            assert layer["algos"]["tf32_implicit"]["fwd_ms"] > 0
    if "torch" in result["layers"][0] and "cuDNN" in result["reference"]:
        assert "TF32 on" in result["reference"]


def test_conv_benchmark_rounds_and_layers(device, tmp_path, monkeypatch):
    """--rounds 2: every layer's times are the medians of two rounds, both kept; --layers runs
    the named layers alone and refuses a name the networks lack."""
    mod = script("conv")
    monkeypatch.setattr(mod, "WARMUP_SECONDS", 0.0)
    out = tmp_path / "conv.json"
    mod.main(["--nets", "alexnet", "--batch", "1", "--iters", "1", "--rounds", "2", "--algos",
              "auto", "--step", "", "--device", device.index, "--json", str(out),
              "--layers", "conv4,conv2"])
    result = json.loads(out.read_text())
    assert result["rounds"] == 2 and [r["layer"] for r in result["layers"]] == ["conv2", "conv4"]
    for layer in result["layers"]:
        for res in [layer["algos"]["auto"]] + ([layer["torch"]] if "torch" in layer else []):
            (f0, b0), (f1, b1) = res["rounds_ms"]
            assert res["fwd_ms"] == pytest.approx((f0 + f1) / 2) and f0 > 0 and f1 > 0
            assert res["bwd_ms"] == pytest.approx((b0 + b1) / 2) and b0 > 0 and b1 > 0
    with pytest.raises(SystemExit):
        mod.main(["--rounds", "0", "--device", device.index, "--json", str(out)])
    with pytest.raises(SystemExit):
        mod.main(["--nets", "alexnet", "--layers", "conv2,3a/5x5", "--device", device.index,
                  "--json", str(out)])


def test_conv_benchmark_refuses_unknown_algorithm(device, tmp_path):
    with pytest.raises(ValueError, match="unknown algo 'implicit_gem'"):
        script("conv").main(["--nets", "alexnet", "--algos", "auto,implicit_gem", "--device",
                             device.index, "--json", str(tmp_path / "x.json")])


def test_host_overhead_tf32_mode(device, tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "allow_tf32", False)  # main() sets it for the run
    mod = script("host_overhead")
    seen = []
    real = mod.make_step

    def spying(*args):
        step = real(*args)
        return lambda: seen.append(backends.allow_tf32) or step()
    monkeypatch.setattr(mod, "make_step", spying)
    out = tmp_path / "host.json"
    mod.main(["--model", "alexnet", "--batch", "1", "--steps", "1", "--warmup", "1",
              "--device", device.index, "--json", str(out), "--tf32"])
    result = json.loads(out.read_text())
    assert result["allow_tf32"] is True and len(seen) == 3 and all(seen)
    alexnet = result["results"]["alexnet"]
    assert alexnet["launches"] > 10 and alexnet["median_ms"] > 0


def test_host_overhead_graphs_and_ops(device, tmp_path):
    """--graphs times the captured step's replay beside the eager step; --ops gives us per
    launch of each op kind, eager and replayed."""
    out = tmp_path / "host.json"
    script("host_overhead").main(["--model", "alexnet", "--batch", "1", "--steps", "1",
                                  "--warmup", "1", "--device", device.index, "--graphs",
                                  "--ops", "relu,adam_step", "--reps", "2", "--json", str(out)])
    result = json.loads(out.read_text())
    assert set(result["results"]) == {"alexnet eager", "alexnet replay"}
    assert result["results"]["alexnet replay"]["median_ms"] > 0
    assert set(result["ops"]) == {"relu", "adam_step"}
    for r in result["ops"].values():
        assert r["launches_per_call"] == 1 and r["eager_us"] > 0 and r["replay_us"] > 0
    with pytest.raises(SystemExit, match="unknown op kind"):
        script("host_overhead").main(["--model", "", "--ops", "relu,nope", "--device",
                                      device.index])


def test_untuned_sets_a_siblings_entries_aside(tmp_path, monkeypatch):
    """An unnamed GPU takes its architecture sibling's entries (an H100 the H200's sm_90 ones):
    benchmarks/untuned.py sets those aside too, so the device is then untuned."""
    import dataclasses
    import types
    from cltensor import tunedb
    from test_device_defaults import DEVICES
    h100 = dataclasses.replace(DEVICES["nvidia-h200"], name="NVIDIA H100 80GB HBM3",
                               arch="sm_90")
    monkeypatch.setattr(tunedb, "DB_DIR", tunedb.DB_DIR)  # restored after the test
    tunedb.clear()
    sets = tunedb.database_entry("gemm", "gemm_float32", h100)["xgemm"]
    try:
        removed = script("untuned").strip_device_entries(
            tunedb, types.SimpleNamespace(description=lambda: h100), tmp_path / "db")
        assert removed and all(r.startswith(("gemm.json: ", "conv.json: ")) for r in removed)
        assert tunedb.database_entry("gemm", "gemm_float32", h100)["xgemm"] != sets
    finally:
        tunedb.clear()


def test_untuned_sets_the_devices_entries_aside(device, tmp_path, monkeypatch):
    """benchmarks/untuned.py: with the shipped entries that match the device set aside and an
    empty user cache, the device has no entry of its own; the real database is untouched."""
    from cltensor import tunedb
    mod = script("untuned")
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tunedb, "DB_DIR", tunedb.DB_DIR)  # restored after the test
    shipped = (tunedb.DB_DIR / "gemm.json").read_text()
    tunedb.clear()
    tuned_before = tunedb.is_tuned("gemm", "gemm_float32", device)
    try:
        removed = mod.strip_device_entries(tunedb, device, tmp_path / "db")
        assert not tunedb.is_tuned("gemm", "gemm_float32", device)
        assert bool(removed) == tuned_before, removed
        assert all(r.startswith("gemm.json: ") for r in removed)
    finally:
        tunedb.clear()
    assert (tmp_path / "db" / "gemm.json").exists()
    monkeypatch.undo()
    assert (tunedb.DB_DIR / "gemm.json").read_text() == shipped


def test_torch_device_benchmark_runs(device, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "td.json"
    script("torch_device").main(["--model", "alexnet", "--batch", "1", "--reps", "1",
                                 "--device", device.index, "--json", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    assert row["model"] == "alexnet" and row["wall"] > 0 and row["cpu"] > 0


def test_torch_device_benchmark_standard_batch(device):
    """--batch 0 takes the convnet benchmarks' batch of each network for the device's kind."""
    pytest.importorskip("torch")
    want = {"alexnet": 8, "vgg_a": 2} if device.is_cpu else {"alexnet": 128, "vgg_a": 64}
    for name, batch in want.items():
        assert script("torch_device").standard_batch(name, device) == batch


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_net_kernels_table(device, tmp_path, monkeypatch, precision):
    """benchmarks/net_kernels.py: a step's kernels (calls and ms from profiling events), the
    convolution algorithm of every pass, and 16-bit passes under --precision bf16."""
    from convnet_benchmarks import models
    monkeypatch.setitem(models.INPUTS, "tiny_net", (3, 12, 2, 2))
    monkeypatch.setitem(models.MODELS, "tiny_net", lambda lib: lib.nn.Sequential(
        lib.nn.Conv2d(3, 8, 3, padding=1), lib.nn.ReLU(), lib.nn.Conv2d(8, 8, 3, padding=1),
        lib.nn.MaxPool2d(2),
        lib.nn.Flatten(), lib.nn.Linear(8 * 36, 5)))
    out = tmp_path / "k.json"
    assert script("net_kernels").main(["--model", "tiny_net", "--precision", precision,
                                       "--device", device.index, "--json", str(out)]) == 0
    (res,) = json.loads(out.read_text())["results"]
    assert res["batch"] == 2 and res["wall_ms"] > 0 and res["launches"] >= len(res["kernels"])
    listed = sum(k["ms"] for k in res["kernels"])  # each rounded to 1 us
    assert 0 < listed <= res["kernel_ms"] + 5e-4 * len(res["kernels"])
    assert {a["pass"] for a in res["algorithms"]} == {"forward", "backward_data",
                                                      "backward_weight"}
    assert {a["layer"].split(" ")[0] for a in res["algorithms"]} == {"c3->8", "c8->8"}
    with pytest.raises(SystemExit):
        script("net_kernels").main(["--model", "no_such_net"])


def test_net_kernels_tf32_fast(device, tmp_path, monkeypatch):
    """net_kernels.py --tf32-fast: float32 with allow_tf32 and the "fast" rules (the flags
    put back by the caller's fixture), labelled so; it refuses a 16-bit precision beside it."""
    from convnet_benchmarks import models

    import cltensor as ct
    monkeypatch.setitem(models.INPUTS, "tiny_net", (3, 8, 2, 2))
    monkeypatch.setitem(models.MODELS, "tiny_net", lambda lib: lib.nn.Sequential(
        lib.nn.Conv2d(3, 4, 3, padding=1), lib.nn.ReLU(), lib.nn.Flatten(),
        lib.nn.Linear(4 * 64, 3)))
    monkeypatch.setattr(ct.backends, "allow_tf32", False)
    monkeypatch.setattr(ct.backends, "conv_precision", "accurate")
    out = tmp_path / "k.json"
    assert script("net_kernels").main(["--model", "tiny_net", "--tf32-fast", "--device",
                                       device.index, "--json", str(out)]) == 0
    (res,) = json.loads(out.read_text())["results"]
    assert res["precision"] == "fp32, tf32 fast" and res["launches"] > 0
    assert ct.backends.allow_tf32 and ct.backends.conv_precision == "fast"
    with pytest.raises(SystemExit):
        script("net_kernels").main(["--model", "tiny_net", "--tf32-fast", "--precision", "bf16"])


def test_gemm_benchmark_splits_kernel_time(device, tmp_path, capsys):
    """benchmarks/gemm.py's per-launch split of a product's kernel time: the product's own
    kernel is among the launches, each with a time, and --kernels prints them."""
    out = tmp_path / "gemm.json"
    script("gemm").main(["--sizes", "96", "--no-layers", "--fp64-sizes", "--reps", "1",
                         "--warmup", "0", "--kernels", "--device", device.index,
                         "--json", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    split = row["kernels_ms"]
    assert split and all(ms > 0 for ms in split.values()), split
    assert any(name.startswith(("gemm", "xgemm", "nv")) for name in split), split
    assert "ms" in capsys.readouterr().out.splitlines()[-1]


def test_gemm_benchmark_times_steady_state(device, monkeypatch):
    """benchmarks/gemm.py on a CPU device times each side's product right after untimed ones
    of the same side (after the rest; one where WARM_S is 0), cltensor's in one profile (one
    queue), and runs a round again when other processes were busy during its rests; on GPUs
    neither."""
    mod = script("gemm")
    monkeypatch.setattr(mod, "SETTLE_S", 0.01)
    monkeypatch.setattr(mod, "WARM_S", 0.0)
    busy = iter([1.0])  # others busy in the first rest only
    monkeypatch.setattr(mod, "rest", lambda seconds: next(busy, 0.0))
    a, c = ct.randn(8, 8, device=device), ct.empty(8, 8, device=device)
    log = []

    def product():
        log.append(("cl", profiler._state.active))
        gm.gemm_into(a, a, c)

    def ref():
        log.append(("ref", ()))
        return 1e-3

    t = mod.interleaved(device, product, ref, reps=2)
    assert t["ref"] == 1e-3 and t["kernel"] > 0 and t["wall"] > 0
    names = [name for name, _ in log]
    if not device.is_cpu:
        assert t["redone"] == 0 and names == ["cl", "ref", "ref", "cl", "cl", "ref"]
        return
    # warm-up round, the busy round redone, 2 timed rounds; each side twice in a row
    assert t["redone"] == 1 and len(names) == 16, names
    assert names[0::2] == names[1::2] and names[0::4] == ["cl", "cl", "ref", "cl"]
    profiles = [active for name, active in log if name == "cl"]
    assert all(profiles) and profiles[0::2] == profiles[1::2]


def test_gemm_benchmark_warms_for_warm_s(monkeypatch):
    """After its rest a CPU side runs untimed products until WARM_S has passed, at least one."""
    mod = script("gemm")
    monkeypatch.setattr(mod, "rest", lambda seconds: 0.25)
    calls = []

    def product():
        calls.append(time.perf_counter())
        time.sleep(0.002)

    monkeypatch.setattr(mod, "WARM_S", 0.02)
    assert mod.steady(0.3, product) == 0.25
    assert len(calls) >= 2 and calls[-1] - calls[0] < 0.02
    calls.clear()
    monkeypatch.setattr(mod, "WARM_S", 0.0)
    assert mod.steady(0.3, product) == 0.25 and len(calls) == 1
    calls.clear()
    assert mod.steady(0, product) == 0.0 and not calls  # GPUs: no rest, no warm-up


def test_gemm_benchmark_chosen_layers(device, tmp_path):
    """--layers runs the named layer shapes alone (scaled down here), and names the choices
    when one is unknown."""
    out = tmp_path / "gemm.json"
    script("gemm").main(["--layers", "googlenet.fc,alexnet.fc8", "--batch-scale", "0.125",
                         "--reps", "1", "--warmup", "0", "--device", device.index,
                         "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == ["googlenet.fc", "alexnet.fc8"]
    with pytest.raises(SystemExit):
        script("gemm").main(["--layers", "alexnet.fc9", "--device", device.index])


def test_host_overhead_wake_mode(device, tmp_path):
    """--wake times a chain of small launches as launched and released k at a time (the last,
    partial batch released too: the run's synchronize returns), and counts the launches of a
    profiled step that found the queue drained."""
    mod = script("host_overhead")
    out = tmp_path / "host.json"
    mod.main(["--model", "", "--wake", "0,4", "--chain", "6", "--delay-us", "0", "--steps", "1",
              "--device", device.index, "--json", str(out)])
    chain = json.loads(out.read_text())["wake"]["chain"]
    assert set(chain) == {"0", "4"}
    for r in chain.values():
        assert 0 < r["cpu_us"] and 0 < r["enqueue_us"] <= r["wall_us"]
    x = ct.randn(64, device=device)
    launches, drained = mod.drained_launches(
        lambda: [ct.nn.functional.relu(x) for _ in range(3)], device)
    assert launches == 3 and 1 <= drained <= 3


def test_host_overhead_wake_chain_releases_its_gate_on_error(device, monkeypatch):
    """A chain that fails inside a batch still lets the launches held behind its gate run: a
    read enqueued after it returns (in a thread, with a timeout) the right values."""
    real = ct.nn.functional.relu
    calls = []

    def failing(t):
        calls.append(t)
        if len(calls) == 3:
            raise RuntimeError("failed inside the batch")
        return real(t)
    monkeypatch.setattr(ct.nn.functional, "relu", failing)
    step = script("host_overhead").wake_chain(device, 8, 16, 0)  # one batch, never full
    x = ct.from_numpy(np.arange(-2, 2, dtype=np.float32), device=device)
    with pytest.raises(RuntimeError, match="inside the batch"):
        step()
    got = []
    reader = threading.Thread(target=lambda: got.append(real(x).numpy()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive(), "a read after the failed chain waited on its gate"
    np.testing.assert_array_equal(got[0], np.maximum(np.arange(-2, 2), 0))


def test_wgmma_sets_sweep_and_refusal(device):
    """benchmarks/wgmma_sets.py: its sweep's sets are valid and fit NVIDIA's 48 KiB of local
    memory; on a device without wgmma it refuses, naming the device."""
    mod = script("wgmma_sets")
    sets = mod.sweep_sets()
    assert sets and all(nvidia.config_valid(q) for q in sets)
    assert all(nvidia.local_bytes(q) + nvidia.LOCAL_RESERVED <= 48 * 1024 for q in sets)
    assert {q["BN"] for q in sets} == {128, 160, 192, 224, 256}
    wide = mod.sweep_sets(wide=True)
    assert wide and all(nvidia.config_valid(q) and q["WGS_M"] == 2 for q in wide)
    assert all(nvidia.local_bytes(q) + nvidia.LOCAL_RESERVED <= 48 * 1024 for q in wide)
    assert {q["BN"] for q in wide} == {128, 160, 192, 224, 256}
    if not nvidia.is_sm90(device):
        with pytest.raises(SystemExit, match="compute capability 9.0"):
            mod.main(["--device", device.index, "--sizes", "64"])
