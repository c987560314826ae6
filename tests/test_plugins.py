"""Plug-ins (cltensor/plugins): registration, entry points, probes, and the GEMM and conv hooks,
proved with test plug-ins that serve every device; the NVIDIA plug-in stays off other devices."""
import importlib
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import subprocess_env
from test_conv import ref_conv

import cltensor
from cltensor import backends, program
from cltensor.__main__ import main as list_devices
from cltensor.conv import common, conv2d, conv_algorithms, dispatch
from cltensor.ops import gemm as gemm_module
from cltensor.plugins import (Plugin, PluginWarning, plugins_for, register_plugin,
                              unregister_plugin)
from cltensor.testing import random_array, rel_error

registry = importlib.import_module("cltensor.plugins")  # NOTE: cltensor.plugins is the function
OCLGRIND_ICD = os.environ.get("OCLGRIND_ICD", "/usr/lib/oclgrind/liboclgrind-rt-icd.so")

# A deliberately plain kernel, test-local: one work-item per element of a strided 2-d product.
NAIVE_GEMM = """
__kernel void naive_gemm(const int m, const int n, const int k, const float alpha,
                         const float beta, const int flags,
                         __global const float* a, const long a0, const long ars, const long acs,
                         __global const float* b, const long b0, const long brs, const long bcs,
                         __global const float* c, const long c0, const long crs, const long ccs,
                         __global float* o, const long o0, const long ors, const long ocs,
                         __global const float* rb, const long rb0, const long rbs,
                         __global const float* cb, const long cb0, const long cbs) {
    const int i = get_global_id(0), j = get_global_id(1);
    if (i >= m || j >= n) return;
    float s = 0;
    for (int q = 0; q < k; q++) s += a[a0 + i * ars + q * acs] * b[b0 + q * brs + j * bcs];
    float v = alpha * s;
    if (flags & 1) v += beta * c[c0 + i * crs + j * ccs];
    if (flags & 2) v += rb[rb0 + i * rbs];
    if (flags & 4) v += cb[cb0 + j * cbs];
    if ((flags & 8) && v < 0) v = 0;
    o[o0 + i * ors + j * ocs] = v;
}
"""


class NaiveGemm(Plugin):
    """Runs unbatched float32 products with even M; declines the others."""
    name = "test_naive_gemm"
    description = "a naive GEMM kernel for the tests"
    probe_file = "ranges.cl"  # builds everywhere: the probe path that passes

    def __init__(self):
        self.calls = Counter()

    def gemm(self, p, alpha, beta, has_ci, row_bias, col_bias, relu):
        if p.bshape or p.dtype != np.float32 or p.m % 2:
            self.calls["declined"] += 1
            return False
        kernel = program.get_kernel(p.device, "test_naive_gemm.cl", "naive_gemm", {}, NAIVE_GEMM)
        flags = has_ci | (row_bias is not None) << 1 | (col_bias is not None) << 2 | relu << 3
        args = [np.int32(p.m), np.int32(p.n), np.int32(p.k), np.float32(alpha),
                np.float32(beta), np.int32(flags)]
        for op in (p.a, p.b, p.ci, p.co):
            args += [op.t.storage.buf, np.int64(op.t.offset), np.int64(op.rs), np.int64(op.cs)]
        for bias in (row_bias, col_bias):
            t = bias if bias is not None else p.co.t
            args += [t.storage.buf, np.int64(t.offset), np.int64(t.strides[0])]
        program.launch(p.device, kernel, (p.m, p.n), (1, 1), *args)
        self.calls["ran"] += 1
        return True


class BrokenProbe(Plugin):
    name = "test_broken_probe"
    probe_file = "ranges.cl"
    probe_defines = {"OUT_T": "no_such_type"}

    def gemm(self, p, alpha, beta, has_ci, row_bias, col_bias, relu):
        pytest.fail("a plug-in whose probe failed was asked to run a product")


class EntryPointPlugin(Plugin):
    name = "test_from_entry_point"


class TapsConv:
    """A convolution algorithm for the tests: the sum over the kernel's taps of shifted GEMMs
    (stride 1, dilation 1, no padding, no groups), forward and input gradient."""
    PASSES_NOT_SUPPORTED = ("backward_weight",)

    def __init__(self, prefer=False, serves=True):
        self.prefers, self.serves_it = prefer, serves
        self.calls = Counter()

    def serves(self, device):
        return self.serves_it

    def prefer(self, p, device, pass_):
        return self.prefers

    def eligible(self, p):
        if (p.sh, p.sw, p.dh, p.dw, p.groups) != (1, 1, 1, 1, 1):
            return False, "taps needs stride 1, dilation 1 and one group"
        if p.pt or p.pb or p.pl or p.pr:
            return False, "taps does not pad"
        return True, ""

    def workspace_bytes(self, p, backward=False):
        return 0

    def _taps(self, p):
        return [(i, j) for i in range(p.kh) for j in range(p.kw)]

    def forward(self, x, w, b, p, out):
        self.calls["forward"] += 1
        o = out.permute(0, 2, 3, 1)
        for t, (i, j) in enumerate(self._taps(p)):
            xs = x[:, :, i:i + p.ho, j:j + p.wo].permute(0, 2, 3, 1)
            cltensor.gemm(xs, w[:, :, i, j].mT, out=o, c=o, beta=1 if t else 0,
                          col_bias=b if t == 0 else None)
        return out

    def backward(self, x, w, gout, p, need_x, need_w):
        assert not need_w, "the dispatcher asked taps for a weight gradient"
        self.calls["backward_data"] += 1
        gx = cltensor.zeros(*x.shape, dtype=x.dtype, device=x.device)
        g = gout.permute(0, 2, 3, 1)
        for i, j in self._taps(p):
            win = gx[:, :, i:i + p.ho, j:j + p.wo].permute(0, 2, 3, 1)
            cltensor.gemm(g, w[:, :, i, j], out=win, c=win, beta=1)
        return gx, None


class TapsPlugin(Plugin):
    name = "test_taps_plugin"

    def __init__(self, algo):
        self.algo = algo

    def conv_algorithms(self):
        return {"test_taps": self.algo}


class Elsewhere(Plugin):
    name = "test_elsewhere"
    vendors = ("no_such_vendor",)

    def conv_algorithms(self):
        return {"elsewhere_algo": TapsConv()}


@pytest.fixture(autouse=True)
def clean_registry():
    """Every test starts from, and leaves, the registry and conv choices it found."""
    loaded, registered = registry._builtin_and_entry_points(), list(registry._registered)
    dispatch.clear_cache()
    yield
    registry._loaded = loaded
    registry._registered[:] = registered
    registry._changed()
    dispatch.clear_cache()


@pytest.fixture
def poisoned_empty(monkeypatch):
    """conv's new tensors (outputs, gradients, scratch) start as NaN, so unwritten ones show."""
    real = common.empty

    def empty(shape, like, *args):
        return real(shape, like, *args).fill_(float("nan"))
    monkeypatch.setattr(common, "empty", empty)


def _plugin_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]


def _main_output(capsys):
    assert list_devices() == 0
    return capsys.readouterr().out


# ---- the registry -----------------------------------------------------------------------------

def test_register_and_unregister(device):
    plugin = NaiveGemm()
    assert register_plugin(plugin) is plugin
    assert plugin in cltensor.plugins() and plugin in plugins_for(device)
    with pytest.raises(ValueError, match="'test_naive_gemm' is already registered"):
        register_plugin(NaiveGemm())

    @register_plugin
    class Decorated(Plugin):
        name = "test_decorated"
    assert isinstance(Decorated, type)
    assert [pl.name for pl in plugins_for(device)][-2:] == ["test_naive_gemm", "test_decorated"]
    unregister_plugin("test_naive_gemm")
    assert plugin not in cltensor.plugins() and plugin not in plugins_for(device)
    with pytest.raises(ValueError, match="no plug-in named 'test_naive_gemm'"):
        unregister_plugin("test_naive_gemm")
    with pytest.raises(TypeError, match="expected a cltensor.plugins.Plugin"):
        register_plugin(object())
    with pytest.raises(ValueError, match="has no name"):
        register_plugin(Plugin())


def test_entry_points_load_once_and_broken_ones_warn(device, monkeypatch):
    group = registry.ENTRY_POINT_GROUP
    make = importlib.metadata.EntryPoint
    points = [make("good", f"{__name__}:EntryPointPlugin", group),
              make("missing", "no_such_module_for_cltensor:Thing", group),
              make("not_a_plugin", "os:sep", group)]
    asked = Counter()

    def entry_points(group=None, **kwargs):
        asked[group] += 1
        return points if group == registry.ENTRY_POINT_GROUP else []
    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    registry._loaded = None
    registry._changed()  # NOTE: plugins_for's memo, filled by any earlier test in this process
    msgs = _plugin_warnings(lambda: plugins_for(device))
    assert len(msgs) == 2
    assert "'missing'" in msgs[0] and "ModuleNotFoundError" in msgs[0]
    assert "'not_a_plugin'" in msgs[1] and "expected a cltensor.plugins.Plugin" in msgs[1]
    names = [pl.name for pl in cltensor.plugins()]
    assert names[:2] == ["nvidia_tf32", "test_from_entry_point"]
    assert "test_from_entry_point" in [pl.name for pl in plugins_for(device)]
    assert _plugin_warnings(cltensor.plugins) == [] and asked[group] == 1


def test_probe_failure_warns_once_and_portable_path_runs(device, rng, capsys):
    plugin = register_plugin(BrokenProbe())
    x, y = random_array(rng, (6, 5)), random_array(rng, (5, 7))
    X, Y = cltensor.from_numpy(x, device=device), cltensor.from_numpy(y, device=device)

    def use():
        plugins_for(device)
        register_plugin(EntryPointPlugin())  # clears plugins_for's memo
        out = cltensor.gemm(X, Y)
        assert rel_error(out, x.astype(np.float64) @ y) <= 1e-6
        unregister_plugin("test_from_entry_point")
    msgs = _plugin_warnings(lambda: [use() for _ in range(2)])
    assert len(msgs) == 1, msgs
    assert "'test_broken_probe'" in msgs[0] and "ranges.cl failed to build" in msgs[0]
    assert str(device) in msgs[0] and "no_such_type" in msgs[0]
    assert plugin not in plugins_for(device) and not plugin.serves(device)
    assert "no: its probe ranges.cl failed to build" in _main_output(capsys)


# ---- the GEMM hook ----------------------------------------------------------------------------

def test_gemm_reaches_the_plugin_and_declines_fall_back(device, rng, monkeypatch):
    plugin = register_plugin(NaiveGemm())
    a, b = random_array(rng, (8, 13)), random_array(rng, (11, 13))
    c, bias = random_array(rng, (8, 11)), random_array(rng, (11,))
    A, B, C, Bias = (cltensor.from_numpy(t, device=device) for t in (a, b, c, bias))
    ref = np.maximum(0.5 * a.astype(np.float64) @ b.T + 2 * c + bias, 0)
    for m, expect in ((8, "ran"), (7, "declined")):  # odd M: the plug-in declines
        out = cltensor.from_numpy(np.full((m, 11), np.nan, np.float32), device=device)
        before = plugin.calls[expect]
        cltensor.gemm(A[:m], B.mT, out=out, c=C[:m], alpha=0.5, beta=2, col_bias=Bias,
                      relu=True)
        assert plugin.calls[expect] == before + 1
        assert rel_error(out, ref[:m]) <= 1e-6
    ba, bb = random_array(rng, (3, 4, 13)), random_array(rng, (3, 13, 5))  # batched: declined
    res = cltensor.matmul(*(cltensor.from_numpy(t, device=device) for t in (ba, bb)))
    assert rel_error(res, ba.astype(np.float64) @ bb) <= 1e-6
    assert plugin.calls["declined"] == 2
    ran = plugin.calls["ran"]
    monkeypatch.setattr(gemm_module, "FORCE_FAMILY", "direct")  # forced: portable kernels only
    assert rel_error(cltensor.gemm(A, B.mT), a.astype(np.float64) @ b.T) <= 1e-6
    monkeypatch.setattr(gemm_module, "FORCE_FAMILY", None)
    unregister_plugin("test_naive_gemm")
    assert rel_error(cltensor.gemm(A, B.mT), a.astype(np.float64) @ b.T) <= 1e-6
    assert plugin.calls["ran"] == ran


# ---- the conv hook ----------------------------------------------------------------------------

def _conv_case(device, rng, grad=False):
    x, w, b = (random_array(rng, s) for s in ((2, 3, 7, 6), (4, 3, 3, 2), (4,)))
    X, W, B = (cltensor.from_numpy(t, device=device) for t in (x, w, b))
    if grad:
        X.requires_grad_()
        W.requires_grad_()
    return (x, w, b), (X, W, B)


def test_conv_auto_prefers_the_plugin_and_algo_names_it(device, rng, poisoned_empty):
    algo = TapsConv(prefer=True)
    register_plugin(TapsPlugin(algo))
    (x, w, b), (X, W, B) = _conv_case(device, rng, grad=True)
    out = conv2d(X, W, B)
    g = random_array(rng, out.shape)
    out.backward(cltensor.from_numpy(g, device=device))
    ref, gx, gw = ref_conv(x, w, b, grad=g.astype(np.float64))
    assert algo.calls == Counter(forward=1, backward_data=1)
    assert rel_error(out, ref) <= 1e-5
    assert rel_error(X.grad, gx) <= 1e-5 and rel_error(W.grad, gw) <= 1e-5  # wgrad: portable
    algo.prefers = False
    cltensor.conv.clear_cache()  # NOTE: auto's choice is remembered per problem and pass
    with cltensor.no_grad():
        assert rel_error(conv2d(X, W, B), ref) <= 1e-5
        assert algo.calls["forward"] == 1
        assert rel_error(conv2d(X, W, B, algo="test_taps"), ref) <= 1e-5
        assert algo.calls["forward"] == 2
        with pytest.raises(ValueError, match="algo='test_taps' cannot run.*taps does not pad"):
            conv2d(X, W, B, padding=1, algo="test_taps")
        with pytest.raises(ValueError, match="unknown algo 'fft'; expected one of auto, "
                                             "im2col.*s2d_winograd, .*test_taps"):
            conv2d(X, W, algo="fft")


def test_conv_algo_of_a_plugin_that_does_not_serve_the_device(device, rng):
    register_plugin(Elsewhere())
    register_plugin(TapsPlugin(TapsConv(serves=False)))
    _, (X, W, B) = _conv_case(device, rng)
    with pytest.raises(ValueError, match=r"algo 'elsewhere_algo' of plug-in 'test_elsewhere' "
                                         r"does not serve cl:.*vendor .* is not 'no_such_vendor'"):
        conv2d(X, W, B, algo="elsewhere_algo")
    with pytest.raises(ValueError, match="'test_taps' of plug-in 'test_taps_plugin' does not "
                                         "serve .*serves\\(\\) declined"):
        conv2d(X, W, B, algo="test_taps")


def test_conv_algorithms_lists_plugin_algorithms(device):
    register_plugin(TapsPlugin(TapsConv(prefer=True)))
    rows = conv_algorithms((2, 3, 7, 6), (4, 3, 3, 3), device=device)
    by = {(r["algo"], r["pass"]): r for r in rows}
    fwd = by[("test_taps", "forward")]
    assert fwd["eligible"] and fwd["chosen"] and fwd["plugin"] == "test_taps_plugin"
    assert fwd["workspace_bytes"] == 0 and by[("im2col", "forward")]["plugin"] is None
    assert not by[("test_taps", "backward_weight")]["eligible"]
    padded = conv_algorithms((2, 3, 7, 6), (4, 3, 3, 3), padding=1, device=device)
    row = next(r for r in padded if r["algo"] == "test_taps" and r["pass"] == "forward")
    assert not row["eligible"] and not row["chosen"] and row["reason"] == "taps does not pad"


def test_conv_benchmark_mode_times_plugin_algorithms(device, rng, tmp_path, monkeypatch,
                                                     poisoned_empty):
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backends, "benchmark", True)
    (x, w, b), (X, W, B) = _conv_case(device, rng)
    ref = ref_conv(x, w, b)
    assert rel_error(conv2d(X, W, B), ref) <= 1e-5  # timed without the plug-in
    algo = TapsConv()
    register_plugin(TapsPlugin(algo))
    dispatch.clear_cache()
    rows = conv_algorithms(X, W, B)  # the file lacks test_taps: timed again, for real
    taps = next(r for r in rows if r["algo"] == "test_taps" and r["pass"] == "forward")
    assert taps["time_ms"] is not None and algo.calls["forward"] >= 2  # warm-up and timed run
    entry = _disk_entry(device, "forward")
    assert "test_taps" in entry["times_ms"] and "im2col" in entry["times_ms"]
    # the fastest (by a fake clock) is chosen, stored, and taken from the file later
    monkeypatch.setattr(dispatch, "time_pass",
                        lambda name, *args, **kw: 0.1 if name == "test_taps" else 9.0)
    dispatch.cache_path(device).unlink()
    dispatch.clear_cache()
    runs = algo.calls["forward"]
    assert rel_error(conv2d(X, W, B), ref) <= 1e-5
    assert algo.calls["forward"] == runs + 1
    assert _disk_entry(device, "forward")["algo"] == "test_taps"
    dispatch.clear_cache()
    monkeypatch.setattr(dispatch, "time_pass", lambda *args: pytest.fail("timed again"))
    assert rel_error(conv2d(X, W, B), ref) <= 1e-5
    assert algo.calls["forward"] == runs + 2
    unregister_plugin("test_taps_plugin")  # its choice in memory and on disk no longer holds
    monkeypatch.setattr(dispatch, "time_pass", lambda name, *args, **kw: 1.0)
    assert rel_error(conv2d(X, W, B), ref) <= 1e-5
    assert algo.calls["forward"] == runs + 2
    assert _disk_entry(device, "forward")["algo"] != "test_taps"


def _disk_entry(device, pass_):
    data = json.loads(dispatch.cache_path(device).read_text())
    return next(v for k, v in data.items() if k.endswith("|" + pass_))


# ---- the NVIDIA plug-in stays off other devices ----------------------------------------------

def test_nvidia_plugin_serves_only_nvidia_devices(device, capsys):
    nvidia = next(pl for pl in cltensor.plugins() if pl.name == "nvidia_tf32")
    on_nvidia = "nvidia" in f"{device.cl_device.vendor} {device.platform_name}".lower()
    assert (nvidia in plugins_for(device)) == on_nvidia
    if not on_nvidia:
        assert not nvidia.matches(device) and "vendor" in nvidia.why_not(device)
        lines = _main_output(capsys).split("  nvidia_tf32:")[1].splitlines()
        line = next(s for s in lines if s.split()[:1] == [device.index])
        assert "no: vendor" in line and "is not 'nvidia'" in line


@pytest.mark.oclgrind
def test_nvidia_plugin_does_not_serve_oclgrind(tmp_path):
    if not Path(OCLGRIND_ICD).exists():
        pytest.skip(f"Oclgrind is not installed ({OCLGRIND_ICD} missing)")
    (tmp_path / "oclgrind.icd").write_text(OCLGRIND_ICD + "\n")
    env = subprocess_env(OCL_ICD_VENDORS=str(tmp_path), CLTENSOR_DEVICE="Oclgrind")
    res = subprocess.run([sys.executable, "-m", "cltensor"], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    listing = res.stdout.split("  nvidia_tf32:")[1]
    assert "Oclgrind" in listing and "no: vendor 'Oclgrind" in listing
