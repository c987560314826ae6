"""backends.conv_precision: under "accurate" algo="auto" keeps every pass's float32 error
within twice PyTorch CPU float32's (both against float64) on every device; "fast" takes Winograd
F(4x4); a bad value is refused. Shapes: small versions of the networks' layer kinds."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import cltensor
from cltensor import backends
from cltensor.conv import conv2d, dispatch, precision
from cltensor.conv import function as conv_function
from cltensor.conv.params import make_params

# (input shape, weight shape, stride, padding): 3x3 and 5x5 stride-1 layers with the channels
# where the speed rules take F(4x4), AlexNet's first layer (s2d_winograd's F(4x4)), and a 3x3
# layer of 512 channels (sums of 4608 terms: the CPU GEMM's blocked sums keep them near torch's)
LAYERS = [((1, 32, 12, 12), (32, 32, 3, 3), 1, 1),
          ((1, 64, 10, 10), (48, 64, 3, 3), 1, 1),
          ((1, 16, 12, 12), (32, 16, 5, 5), 1, 2),
          ((1, 3, 39, 39), (16, 3, 11, 11), 4, 2),
          ((1, 512, 6, 6), (64, 512, 3, 3), 1, 1)]
PASSES = ("forward", "backward_data", "backward_weight")


def _data(rng, xs, ws, stride, pad):
    """float64 x ~ N(0, 1), Kaiming-scaled w, the output gradient ~ N(0, 1)."""
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws) * np.sqrt(2.0 / np.prod(ws[1:]))
    side = [(n + 2 * pad - k) // stride + 1 for n, k in zip(xs[2:], ws[2:])]
    return x, w, rng.standard_normal((xs[0], ws[0], *side))


def _torch_passes(x, w, g, stride, pad, dtype):
    xt = torch.tensor(x, dtype=dtype, requires_grad=True)
    wt = torch.tensor(w, dtype=dtype, requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=pad)
    y.backward(torch.tensor(g, dtype=dtype))
    return dict(zip(PASSES, (y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy())))


def _rel(a, ref):
    return np.linalg.norm(np.asarray(a, np.float64) - ref) / np.linalg.norm(ref)


def _auto_passes(device, x, w, g, stride, pad):
    X, W, G = (cltensor.from_numpy(a.astype(np.float32), device=device) for a in (x, w, g))
    out = conv2d(X, W, None, stride, pad)
    p = make_params(X, W, None, stride, pad, 1, 1)
    gx, gw, _ = conv_function.backward(X, W, G, p, "auto", True, True)
    chosen = {ps: dispatch.choose(p, device, ps) for ps in PASSES}
    return dict(zip(PASSES, (out.numpy(), gx.numpy(), gw.numpy()))), chosen


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: "x".join(map(str, layer[1])))
def test_accurate_auto_within_twice_torch_error(device, rng, monkeypatch, layer):
    monkeypatch.setattr(backends, "conv_precision", "accurate")
    xs, ws, stride, pad = layer
    x, w, g = _data(rng, xs, ws, stride, pad)
    ref = _torch_passes(x, w, g, stride, pad, torch.float64)
    theirs = _torch_passes(x, w, g, stride, pad, torch.float32)
    ours, chosen = _auto_passes(device, x, w, g, stride, pad)
    for ps in PASSES:
        err, bound = _rel(ours[ps], ref[ps]), 2 * _rel(theirs[ps], ref[ps])
        assert err <= bound, f"{ps} by {chosen[ps]}: {err:.2e} > 2x torch ({bound / 2:.2e})"


def _params(device, xs, ws, stride, pad):
    X = cltensor.zeros(*xs, device=device)
    W = cltensor.zeros(*ws, device=device)
    return make_params(X, W, None, stride, pad, 1, 1)


def test_fast_still_takes_winograd_4x4(device, monkeypatch):
    """The flag is read at call time: the same problem switches between F(4x4) ("fast") and a
    more accurate algorithm ("accurate") without clearing any cache."""
    p = _params(device, *LAYERS[0])
    for ps in PASSES:
        monkeypatch.setattr(backends, "conv_precision", "fast")
        assert dispatch.choose(p, device, ps) == "winograd_4x4"
        monkeypatch.setattr(backends, "conv_precision", "accurate")
        assert dispatch.choose(p, device, ps) != "winograd_4x4"


def test_bad_precision_refused(device, monkeypatch):
    monkeypatch.setattr(backends, "conv_precision", "precise")
    x = cltensor.zeros(1, 4, 6, 6, device=device)
    w = cltensor.zeros(4, 4, 3, 3, device=device)
    with pytest.raises(ValueError, match="conv_precision must be one of 'accurate', 'fast'"):
        conv2d(x, w, padding=1)


def test_benchmark_mode_times_only_admitted(device, rng, tmp_path, monkeypatch):
    """Benchmark mode under "accurate": F(4x4) is not timed, and a file entry that chose
    it (written in "fast" mode) gives way to the fastest admitted algorithm of its times."""
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backends, "benchmark", True)
    monkeypatch.setattr(backends, "conv_precision", "accurate")
    dispatch.clear_cache()
    xs, ws, stride, pad = LAYERS[0]
    x, w, _ = _data(rng, xs, ws, stride, pad)
    X, W = (cltensor.from_numpy(a.astype(np.float32), device=device) for a in (x, w))
    conv2d(X, W, None, stride, pad)
    path = dispatch.cache_path(device)
    data = json.loads(path.read_text())
    key = next(k for k in data if k.endswith("|forward"))
    assert "winograd_4x4" not in data[key]["times_ms"]
    p = _params(device, *LAYERS[0])
    dispatch.clear_cache()  # a new process takes the accurate entry without timing again
    monkeypatch.setattr(dispatch, "time_pass", lambda *a: pytest.fail("timed again"))
    assert dispatch.choose(p, device, "forward", "auto", (X, W, None)) == data[key]["algo"]
    times = {"winograd_4x4": 1.0, "implicit_gemm": 1.5, "im2col": 2.0, "winograd": 3.0}
    data[key] = {"algo": "winograd_4x4", "times_ms": times, "vendor": data[key]["vendor"]}
    path.write_text(json.dumps(data))
    dispatch.clear_cache()
    # implicit_gemm keeps one running sum (not admitted); im2col is where the GEMM's sums are
    # blocked (precision.gemm_block)
    want = "im2col" if precision.gemm_block(device) else "winograd"
    assert dispatch.choose(p, device, "forward") == want
    monkeypatch.setattr(backends, "conv_precision", "fast")
    assert dispatch.choose(p, device, "forward") == "winograd_4x4"


def test_precision_script(device, tmp_path):
    """benchmarks/conv_precision.py on one small layer: its rows, the JSON and the table."""
    spec = importlib.util.spec_from_file_location(
        "bench_conv_precision", Path(__file__).resolve().parent.parent / "benchmarks" /
        "conv_precision.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, md = tmp_path / "p.json", tmp_path / "p.md"
    mod.main(["--nets", "googlenet", "--layers", "4a/5x5", "--crop", "8", "--device",
              device.index, "--json", str(out), "--markdown", str(md)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["pass"] for r in rows] == list(PASSES)
    # 14 x 14 inputs cropped to 8 x 8, for 8 x 8 outputs
    assert all(r["shape"] == [1, 16, 8, 8, 48, 5, 1, 2] for r in rows)
    for r in rows:
        assert set(r["auto"]) == {"accurate", "fast"} and 0 < r["torch"] < 1e-5
        assert {"im2col", "winograd_4x4"} <= set(r["algos"])
        assert r["algos"][r["auto"]["accurate"]] <= 2 * r["torch"]
    assert "| googlenet | auto (accurate) |" in md.read_text()


def test_model_follows_the_gemm_block(device, monkeypatch):
    """The GEMM paths' modelled error follows the database's block of K: one running sum
    (KB 0, or a family other than packed) models a 4608-term sum at its full length."""
    p = _params(device, *LAYERS[-1])
    entry = dict(precision.gemm.entry_for(device, np.float32))
    monkeypatch.setattr(precision.gemm, "entry_for", lambda *args: entry)
    entry.update(family="packed", packed=dict(entry.get("packed", {}), KB=64))
    assert precision.gemm_block(device) == 64
    assert precision.blocked_length(4608, 64) == 64 + 72
    assert precision.within_bound("im2col", p, "forward", 64)
    entry.update(packed=dict(entry["packed"], KB=0))
    assert precision.gemm_block(device) is None
    assert not precision.within_bound("im2col", p, "forward", None)
    entry.update(family="xgemm")
    assert precision.gemm_block(device) is None


def test_gpu_rules_under_accurate(device, monkeypatch):
    """GPUs (a stand-in with is_cpu False; their GEMMs keep one running sum): "fast" keeps the
    speed rules' F(4x4), "accurate" takes the first of F(2x2), implicit GEMM, gemm_1x1, im2col
    within the bound, else the one of least modelled error."""
    gpu = type("GpuLike", (), {"is_cpu": False})()
    monkeypatch.setattr(precision, "gemm_block", lambda dev: None)
    p = _params(device, *LAYERS[0])
    for ps in PASSES:
        assert dispatch._precise_rule(p, gpu, ps, "fast") == "winograd_4x4"
        pick = dispatch._precise_rule(p, gpu, ps, "accurate")
        assert pick == "winograd", (ps, pick)  # F(2x2) is within twice torch's on 32 channels
        assert precision.within_bound(pick, p, ps, None)
    deep = _params(device, *LAYERS[-1])  # 512 channels: nothing within the bound
    names = ["winograd_4x4", "winograd", "implicit_gemm", "im2col"]
    for ps in PASSES:
        pick = dispatch._precise_rule(deep, gpu, ps, "accurate")
        least = min(names, key=lambda n: precision.error(n, deep, ps, None))
        assert precision.error(pick, deep, ps, None) == precision.error(least, deep, ps, None)


def test_cpu_devices_judged_against_pytorch_cpu(device, monkeypatch):
    """CPU devices are judged against PyTorch CPU's measured error, GPUs against the envelope
    shared with cuDNN: with the same blocked GEMM sums, F(2x2)'s input gradient of a 3x3 layer
    with 192 output channels is within twice PyTorch CPU's (the CPU pick) but not twice
    cuDNN's (im2col there); with 1024 output channels it is within neither."""
    monkeypatch.setattr(precision, "gemm_block", lambda dev: 64)
    cpu = type("CpuLike", (), {"is_cpu": True})()
    gpu = type("GpuLike", (), {"is_cpu": False})()
    assert precision.reference_coef(cpu)["backward_data"] > \
        precision.reference_coef(gpu)["backward_data"]
    p = _params(device, (1, 128, 12, 12), (192, 128, 3, 3), 1, 1)
    assert dispatch._precise_rule(p, cpu, "backward_data", "accurate") == "winograd"
    assert dispatch._precise_rule(p, gpu, "backward_data", "accurate") == "im2col"
    wide = _params(device, (1, 128, 12, 12), (1024, 128, 3, 3), 1, 1)
    assert dispatch._precise_rule(wide, cpu, "backward_data", "accurate") == "im2col"
    for ps in ("forward", "backward_weight"):  # the other passes' references are unchanged
        assert precision.reference_coef(cpu)[ps] == precision.reference_coef(gpu)[ps]
