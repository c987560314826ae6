"""The benchmark networks: the same definitions as torch's, agreeing with torch forward and
backward, and the benchmark command end to end; the tinygrad adapter and --compare tinygrad."""
import gc
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import cltensor as ct
from cltensor.conv import dispatch
from cltensor.device import all_devices
from conftest import ran_in_fresh_process, subprocess_env
from convnet_benchmarks import bench, models
from convnet_benchmarks.__main__ import main

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def give_back_pooled_memory():
    """Whole networks in float64 take gigabytes: after each test the pools give their unused
    buffers back, or they pile up (in host memory on CPU devices: 15 GB at this file's peak)."""
    yield
    gc.collect()
    for d in all_devices():
        ct.empty_cache(d)


# Parameter counts of the convnet-benchmarks definitions (AlexNet "one weird trick", VGG-A =
# VGG-11, GoogLeNet v1 without auxiliary heads, Overfeat fast).
PARAMS = {"alexnet": 61_100_840, "vgg_a": 132_863_336}


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_definitions_match_torch(device, name):
    ours = models.MODELS[name](ct).to(device=device)
    theirs = models.MODELS[name](torch)
    shapes = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    if name in PARAMS:
        assert sum(int(np.prod(s)) for s in shapes.values()) == PARAMS[name]


def _rel(a, b):
    """Norm-relative difference; 0 for two all-zero arrays (a branch with no gradient)."""
    diff = np.linalg.norm(a - b)
    return 0.0 if diff == 0 else float(diff / np.linalg.norm(b))


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_forward_and_backward_agree_with_torch(device, name):
    """Batch 1 through the whole network, weights copied from cltensor to torch: in float64 the
    output and every gradient must agree to rounding (fp32 deep-network gradients differ by
    percents between any two correct implementations, so fp32 checks only the output)."""
    dtype = "float64" if device.has_fp64 else "float32"
    ct.manual_seed(0)
    ours = models.MODELS[name](ct).to(device=device, dtype=dtype)
    theirs = models.MODELS[name](torch).to(getattr(torch, dtype))
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in ours.state_dict().items()})
    c, hw, _, _ = models.INPUTS[name]
    x_np = np.random.default_rng(0).standard_normal((1, c, hw, hw)).astype(dtype)
    x = ct.from_numpy(x_np, device=device).requires_grad_()
    tx = torch.from_numpy(x_np).requires_grad_()
    y, ty = ours(x), theirs(tx)
    g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype)
    y.backward(ct.from_numpy(g, device=device))
    ty.backward(torch.from_numpy(g))
    tol = 1e-10 if dtype == "float64" else 1e-4
    assert _rel(y.numpy(), ty.detach().numpy()) < tol
    if dtype == "float64":
        assert _rel(x.grad.numpy(), tx.grad.numpy()) < tol
        theirs_p = dict(theirs.named_parameters())
        for k, p in ours.named_parameters():
            assert _rel(p.grad.numpy(), theirs_p[k].grad.numpy()) < tol, k


def test_benchmark_command_end_to_end(device, tmp_path):
    out = tmp_path / "res.json"
    md = tmp_path / "res.md"
    cmd = [sys.executable, "-m", "convnet_benchmarks", "--model", "alexnet", "--batch-size", "1",
           "--iterations", "1", "--device", device.index, "--compare", "torch",
           "--json", str(out), "--markdown", str(md)]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env=subprocess_env())
    assert run.returncode == 0, run.stderr[-2000:]
    res = json.loads(out.read_text())
    row = res["rows"][0]
    assert row["model"] == "alexnet" and row["batch"] == 1
    for fw in ("cltensor", "torch"):
        assert row[fw]["total"]["median"] > 0
    assert row["torch"]["output_rel_error"] < 1e-4
    assert "| alexnet | 1 | cltensor |" in md.read_text()
    layers = row["conv_layers"]
    assert [r["weight"][0] for r in layers] == [64, 192, 384, 256, 256]
    assert all(r["forward_ms"] > 0 and r["backward_ms"] > 0 for r in layers)
    assert all(r["algo"]["forward"] in dispatch.ALGORITHMS for r in layers)
    assert "convolutions alone" in run.stdout


# ---- tinygrad -----------------------------------------------------------------------------------
# tinygrad compiles every kernel on first use (tens of seconds on PoCL for AlexNet), so its tests
# run a small network of the same layer kinds: strided conv, max pool in ceil mode (where ceil
# and floor differ), an Inception block (cat), average pool, flatten, linear. Every test builds
# it at batch 1 with one input shape, so the kernels compiled by one test serve the next.

NO_TINYGRAD = "tinygrad is not installed (pip install tinygrad==0.14.0)"


def small(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        models.inception_class(lib)(8, 4, 4, 6, 2, 3, 3), nn.AvgPool2d(5), nn.Flatten(),
        nn.Linear(16, 10))


SMALL_INPUT = (3, 20, 1, 1)  # 20x20 -> conv 10x10 -> pool 5x5 (4x4 with floor) -> avg 1x1


@pytest.fixture
def small_model(monkeypatch):
    """`small` registered as a benchmark model for the duration of a test."""
    monkeypatch.setitem(models.MODELS, "small", small)
    monkeypatch.setitem(models.INPUTS, "small", SMALL_INPUT)


def test_tiny_adapter_matches_torch(rng):
    """models.py through the adapter: torch's state-dict keys, and output and every parameter
    gradient as torch's with the same weights."""
    pytest.importorskip("tinygrad", reason=NO_TINYGRAD)
    from tinygrad import Tensor

    from convnet_benchmarks import tiny
    torch.manual_seed(0)  # NOTE: reproducible weights (unseeded, a ReLU branch could die)
    theirs = small(torch)
    with torch.no_grad():  # positive biases keep every ReLU branch alive: no all-zero gradient
        for name, p in theirs.named_parameters():
            if name.endswith("bias"):
                p.uniform_(0.05, 0.2)
    ours = small(tiny.library("CL"))
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict(state)
    x_np = rng.standard_normal((1, 3, 20, 20)).astype("float32")
    g_np = rng.standard_normal((1, 10)).astype("float32")
    out = ours(Tensor(x_np, device="CL"))
    y = out.contiguous().realize()  # realized as the benchmark does, so its kernels are reused
    grads = out.gradient(*ours.parameters(), gradient=Tensor(g_np, device="CL"))
    Tensor.realize(*grads)
    ty = theirs(torch.from_numpy(x_np))
    ty.backward(torch.from_numpy(g_np))
    assert _rel(y.numpy(), ty.detach().numpy()) < 1e-5
    for (k, p), grad in zip(theirs.named_parameters(), grads):
        assert _rel(grad.numpy(), p.grad.numpy()) < 1e-4, k


def test_tiny_load_state_dict_errors():
    pytest.importorskip("tinygrad", reason=NO_TINYGRAD)
    from convnet_benchmarks import tiny
    net = small(tiny.library("CL"))
    state = {k: np.zeros(v.shape, "float32") for k, v in net.state_dict().items()}
    with pytest.raises(KeyError, match=r"missing \['6.bias'\], unexpected \['6.b'\]"):
        net.load_state_dict({**{k: v for k, v in state.items() if k != "6.bias"}, "6.b": 0})
    with pytest.raises(ValueError, match=r"0.weight has shape \(8, 3, 3\), the model expects "
                                         r"\(8, 3, 3, 3\)"):
        net.load_state_dict({**state, "0.weight": np.zeros((8, 3, 3), "float32")})


def small_row(device, tmp_path, flag):
    """The small model's row (batch 2, one iteration) with one more row's flag, and the
    markdown table."""
    out, md = tmp_path / "res.json", tmp_path / "res.md"
    argv = ["--model", "small", "--batch-size", "2", "--iterations", "1", "--device",
            device.index, flag, "--no-layers", "--json", str(out), "--markdown", str(md)]
    assert main(argv) == 0
    return json.loads(out.read_text())["rows"][0], md.read_text()


def test_bench_mode_row(device, small_model, tmp_path, monkeypatch):
    """--bench-mode: a second cltensor row run with cltensor.backends.benchmark on (its conv
    choices timed and written to the per-user file), the flag off again afterwards."""
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    dispatch.clear_cache()
    row, md = small_row(device, tmp_path, "--bench-mode")
    assert row["cltensor_bench"]["total"]["median"] > 0
    assert row["cltensor_bench"]["output_rel_error"] < 1e-4
    assert "| small | 2 | cltensor_bench |" in md
    assert json.loads(dispatch.cache_path(device).read_text())  # conv passes were timed
    assert ct.backends.benchmark is False
    dispatch.clear_cache()


def test_fast_conv_row(device, small_model, tmp_path, monkeypatch):
    """--fast-conv: a second cltensor row with cltensor.backends.conv_precision = "fast", the
    flag back to what it was afterwards."""
    seen = []
    real = bench.run_cltensor

    def spy(*args, **kwargs):
        seen.append(ct.backends.conv_precision)
        return real(*args, **kwargs)
    monkeypatch.setattr(bench, "run_cltensor", spy)
    row, md = small_row(device, tmp_path, "--fast-conv")
    assert row["cltensor_fast"]["total"]["median"] > 0
    assert row["cltensor_fast"]["output_rel_error"] < 1e-4
    assert "| small | 2 | cltensor_fast |" in md
    assert seen == ["accurate", "fast"] and ct.backends.conv_precision == "accurate"


def test_tf32_fast_row(device, small_model, tmp_path, monkeypatch):
    """--tf32-fast: a float32 row (whatever --precision says) with allow_tf32 and the "fast"
    conv rules, both flags back to what they were afterwards."""
    seen = []
    real = bench.run_cltensor

    def spy(*args, **kwargs):
        seen.append((ct.backends.allow_tf32, ct.backends.conv_precision, kwargs["precision"]))
        return real(*args, **kwargs)
    monkeypatch.setattr(bench, "run_cltensor", spy)
    out, md = tmp_path / "res.json", tmp_path / "res.md"
    argv = ["--model", "small", "--batch-size", "2", "--iterations", "1", "--device",
            device.index, "--precision", "bf16", "--tf32-fast", "--no-layers", "--json",
            str(out), "--markdown", str(md)]
    assert main(argv) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["cltensor_tf32_fast"]["total"]["median"] > 0
    assert "| small | 2 | cltensor_tf32_fast |" in md.read_text()
    assert seen == [(False, "accurate", "bf16"), (True, "fast", "fp32")]
    assert ct.backends.allow_tf32 is False and ct.backends.conv_precision == "accurate"


@pytest.mark.parametrize("precision, low", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_precision_runs_the_forward_under_autocast(device, small_model, tmp_path, monkeypatch,
                                                   request, precision, low):
    """--precision bf16|fp16: the timed forward under autocast (a low-precision output, float32
    parameters) in every row (the benchmark-mode and graph rows too), torch's row under
    torch.autocast, the precision in the JSON row."""
    if ran_in_fresh_process(request):
        return
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    dispatch.clear_cache()
    outputs = []
    real = bench.time_steps

    def spy(forward, backward, *args):
        def traced():
            out = forward()
            if out is not None:  # a replayed graph returns nothing
                outputs.append(str(out.dtype).rsplit(".", 1)[-1])
            return out
        return real(traced, backward, *args)
    monkeypatch.setattr(bench, "time_steps", spy)
    out = tmp_path / "res.json"
    argv = ["--model", "small", "--batch-size", "2", "--iterations", "1", "--device",
            device.index, "--precision", precision, "--compare", "torch", "--no-layers",
            "--bench-mode", "--graphs", "--json", str(out)]
    assert main(argv) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["precision"] == precision and row["cltensor"]["total"]["median"] > 0
    assert row["torch"]["output_rel_error"] < 0.05  # reported: autocast rounds differently
    assert row["cltensor_bench"]["total"]["median"] > 0
    # the replayed forward is the eager one under the same autocast, bit for bit
    assert row["cltensor_graphs"]["output_rel_error"] == 0
    assert set(outputs) == {low}  # cltensor's and torch's forwards alike
    assert len(outputs) >= 3 * 2  # cltensor, cltensor_bench, torch: dry run and timed step
    dispatch.clear_cache()


def test_compare_tinygrad_end_to_end(device, small_model, tmp_path):
    """--compare torch,tinygrad: the same network in all three, tinygrad's output checked against
    cltensor's and its times in the JSON and the markdown table (or, on a device tinygrad's
    OpenCL backend cannot see, a refusal that says how to reach it)."""
    pytest.importorskip("tinygrad", reason=NO_TINYGRAD)
    out, md = tmp_path / "res.json", tmp_path / "res.md"
    argv = ["--model", "small", "--batch-size", "1", "--iterations", "1", "--device",
            device.index, "--compare", "torch,tinygrad", "--no-layers", "--json", str(out),
            "--markdown", str(md)]
    try:
        bench.tinygrad_device(device)
    except LookupError:
        with pytest.raises(SystemExit, match="--compare tinygrad: .*OCL_ICD_VENDORS"):
            main(argv)
        return
    assert main(argv) == 0
    row = json.loads(out.read_text())["rows"][0]
    for fw in ("cltensor", "torch", "tinygrad"):
        for part in ("forward", "backward", "total"):
            assert row[fw][part]["median"] > 0, (fw, part)
    tg = row["tinygrad"]
    assert tg["step"]["median"] > 0
    assert tg["device"].startswith("CL:") and device.name in tg["device"]
    assert tg["output_rel_error"] < 1e-5 and row["torch"]["output_rel_error"] < 1e-5
    assert "| small | 1 | tinygrad |" in md.read_text()


def test_compare_tinygrad_not_installed(device, monkeypatch):
    monkeypatch.setitem(sys.modules, "tinygrad", None)  # import tinygrad now raises ImportError
    with pytest.raises(SystemExit, match=r"the tinygrad package is not installed .*"
                                         r"install it with `pip install tinygrad==0\.14\.0`"):
        main(["--device", device.index, "--compare", "torch,tinygrad"])


def test_compare_unknown_framework(device):
    with pytest.raises(SystemExit, match="--compare: jax not supported "
                                         r"\(choose from torch, tinygrad\)"):
        main(["--device", device.index, "--compare", "torch,jax"])


def test_tinygrad_device_refuses_devices_it_cannot_see():
    stranger = types.SimpleNamespace(cl_device=None, name="Some GPU", platform_name="Other")
    with pytest.raises(LookupError, match="only sees the first platform's devices .*not Some GPU "
                                          r"\(Other\); point OCL_ICD_VENDORS"):
        bench.tinygrad_device(stranger)


def test_graphs_row(device, small_model, tmp_path):
    """--graphs: a cltensor row replayed from the captured forward and backward, its output
    the eager one's bit for bit."""
    row, md = small_row(device, tmp_path, "--graphs")
    assert row["cltensor_graphs"]["total"]["median"] > 0
    assert row["cltensor_graphs"]["output_rel_error"] == 0
    assert row["cltensor_graphs"]["launches"] > 5
    assert row["cltensor_graphs"]["peak_memory_mb"] > 0
    assert "| small | 2 | cltensor_graphs |" in md
