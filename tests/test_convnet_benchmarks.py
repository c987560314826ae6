"""The benchmark networks: the same definitions as torch's, agreeing with torch forward and
backward, and the benchmark command end to end."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cltensor as ct
from convnet_benchmarks import models

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


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
                         env=dict(os.environ, PYTHONPATH=ROOT))
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
    assert all(r["algo"]["forward"] in ("im2col", "implicit_gemm", "winograd", "gemm_1x1")
               for r in layers)
    assert "convolutions alone" in run.stdout
