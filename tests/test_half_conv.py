"""Convolutions of float16 and bfloat16 tensors read in place (im2col, gemm_1x1 and Winograd:
forward, input and weight gradients, sums and transforms in float32), against float64 results
rounded once to the 16-bit dtype (implicit GEMM and s2d Winograd: test_half_conv_implicit.py);
and the memory that saves."""
import gc
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import cltensor as ct
from cltensor.conv import dispatch
from test_nvidia_plugin import EMULATED_CONFIGS, _emulated, only_plugins

HALF = ["float16", "bfloat16"]
CASES = [  # (algo, weight shape, stride, padding, groups)
    ("im2col", (6, 4, 3, 3), 1, 1, 1),
    ("im2col", (6, 2, 3, 2), 2, 0, 2),
    ("gemm_1x1", (6, 4, 1, 1), 1, 0, 1),
    ("gemm_1x1", (6, 2, 1, 1), 2, 0, 2),
    ("winograd", (6, 4, 3, 3), 1, 1, 1),
    ("winograd", (6, 2, 3, 3), 1, 0, 2),
    ("winograd_4x4", (6, 4, 3, 3), 1, 1, 1),
]


def _pair(device, rng, shape, name):
    x = rng.standard_normal(shape).astype(np.float32)
    tt = torch.from_numpy(x).to(getattr(torch, name))
    return ct.from_numpy(tt.float().numpy(), device=device).to(getattr(ct, name)), tt


def _close(mine, exact, name):
    """mine is `name` and within one ulp of it, at the output's scale, of the float64 result
    `exact` (torch rounds its float32 sums once)."""
    assert mine.dtype is getattr(ct, name)
    want = exact.detach().to(getattr(torch, name)).float().numpy()
    got = mine.detach().float().numpy()
    ulp = float(torch.finfo(getattr(torch, name)).eps) * float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=ulp)


def _leaf(t):
    return t.detach().double().requires_grad_(True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-s{c[2]}g{c[4]}")
@pytest.mark.parametrize("name", HALF)
def test_in_place_algorithms(device, rng, name, case):
    """Forward (bias fused), input and weight gradients of each algorithm forced."""
    algo, wshape, stride, padding, groups = case
    (x, tx), (w, tw) = _pair(device, rng, (2, 4, 7, 8), name), _pair(device, rng, wshape, name)
    (b, tb) = _pair(device, rng, (wshape[0],), name)
    for t in (x, w, b):
        t.requires_grad_(True)
    y = ct.conv.conv2d(x, w, b, stride=stride, padding=padding, groups=groups, algo=algo)
    dx, dw, db = _leaf(tx), _leaf(tw), _leaf(tb)
    ty = TF.conv2d(dx, dw, db, stride=stride, padding=padding, groups=groups)
    _close(y, ty, name)
    assert {dispatch.choose(y.grad_fn.ctx.p, device, ps, algo)
            for ps in dispatch.PASSES} <= set(dispatch.HALF_ALGORITHMS) | {algo}
    g, tg = _pair(device, rng, tuple(ty.shape), name)
    y.backward(g)
    ty.backward(tg.double())
    for mine, exact in ((x.grad, dx.grad), (w.grad, dw.grad), (b.grad, db.grad)):
        _close(mine, exact, name)


@pytest.mark.parametrize("name", HALF)
def test_winograd_products_in_tf32_for_bfloat16(device, rng, monkeypatch, name):
    """With allow_tf32 off and a plug-in that multiplies in TF32 (the NVIDIA one, emulated),
    Winograd's products of a bfloat16 problem take TF32 for the tiles whose error stays under
    bfloat16's rounding (F(2x2, 3x3), F(4x4, 3x3), F(2x2, 5x5)), not F(4x4, 5x5)'s, nor
    float16's; every pass within one ulp at the output's scale."""
    assert not ct.backends.allow_tf32
    pl, asked = _emulated(EMULATED_CONFIGS[0]), []
    real = type(pl).gemm
    monkeypatch.setattr(pl, "gemm", lambda p, *a: asked.append(p.tf32) or real(pl, p, *a))
    with only_plugins(pl):
        # NOTE: channels differ per case: products of the same shapes replay the first's
        # launches (GPUs pad the tiles: F(4x4, 3x3)'s products here are F(2x2, 5x5)'s)
        for c, (algo, k, want) in enumerate((("winograd", 3, True), ("winograd_4x4", 3, True),
                                             ("winograd", 5, True), ("winograd_4x4", 5, False)),
                                            start=5):
            asked.clear()
            (x, tx), (w, tw) = (_pair(device, rng, (2, c, 9, 9), name),
                                _pair(device, rng, (8, c, k, k), name))
            x.requires_grad_(True), w.requires_grad_(True)
            y = ct.conv.conv2d(x, w, padding=k // 2, algo=algo)
            dx, dw = _leaf(tx), _leaf(tw)
            ty = TF.conv2d(dx, dw, padding=k // 2)
            g, tg = _pair(device, rng, tuple(ty.shape), name)
            y.backward(g)
            ty.backward(tg.double())
            for mine, exact in ((y, ty), (x.grad, dx.grad), (w.grad, dw.grad)):
                _close(mine, exact, name)
            assert asked and set(asked) == {want and name == "bfloat16"}, (algo, k, asked)


@pytest.mark.parametrize("name", HALF)
def test_transposed_and_copied_algorithms(device, rng, name, monkeypatch):
    """conv_transpose2d and conv2d(algo="implicit_gemm") run their 16-bit problems in place
    and give the input's dtype."""
    problems = []
    choose = dispatch.choose
    monkeypatch.setattr(dispatch, "choose", lambda p, *a: problems.append(p) or choose(p, *a))
    (x, tx), (w, tw) = _pair(device, rng, (2, 4, 5, 6), name), _pair(device, rng, (4, 3, 3, 3),
                                                                      name)
    y = ct.conv.conv_transpose2d(x, w, stride=2, padding=1)
    _close(y, TF.conv_transpose2d(tx.double(), tw.double(), stride=2, padding=1), name)
    assert [q.dtype for q in problems] == [getattr(ct, name)]
    (v, tv) = _pair(device, rng, (3, 4, 3, 3), name)
    y = ct.conv.conv2d(x, v, padding=1, algo="implicit_gemm")
    want = TF.conv2d(tx.double(), tv.double(), padding=1)
    assert problems[-1].dtype is getattr(ct, name)
    _close(y, want, name)


def _peak(device, fn):
    """Bytes fn allocates at its peak beyond what was live before: the smaller of two calls'
    (a memo cache that fills up is emptied at once, program.remember, and the call that meets
    that refills it: its per-weight transforms and plans, which a steady step does not make)."""
    peaks = []
    for _ in range(2):
        gc.collect()  # NOTE: earlier tests' tensors in reference cycles, freed at any moment
        device.synchronize()
        before = device.allocated
        device.reset_peak()
        out = fn()
        device.synchronize()
        peaks.append(device.peak - before)
    return min(peaks), out


@pytest.mark.parametrize("name", ["bfloat16"])
def test_forward_and_weight_gradient_memory_halves(device, rng, name):
    """A 16-bit convolution's forward and weight gradient (a first layer's backward) allocate
    at most 0.6x the float32 ones' bytes: no float32 copies of the operands (the small
    operand's packed GEMM panels stay float32; the input gradient's column buffer too, so
    that col2im rounds once)."""
    x32 = ct.from_numpy(rng.standard_normal((4, 16, 24, 24)).astype(np.float32), device=device)
    w32 = ct.from_numpy(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), device=device)

    def step(x, w):
        w = w.detach().requires_grad_(True)
        y = ct.conv.conv2d(x, w, padding=1, algo="im2col")
        y.backward(ct.ones_like(y))
        return w.grad
    half = (x32.to(getattr(ct, name)), w32.to(getattr(ct, name)))
    step(*half), step(x32, w32)  # kernels built, pools filled
    bytes16, grad = _peak(device, lambda: step(*half))
    bytes32, _ = _peak(device, lambda: step(x32, w32))
    assert grad.dtype is getattr(ct, name)
    assert bytes16 <= 0.6 * bytes32, (bytes16, bytes32)


@pytest.mark.parametrize("algo", ["winograd", "winograd_4x4"])
def test_float32_winograd_after_16bit(device, rng, algo):
    """A 16-bit Winograd build leaves the float32 one's build options untouched."""
    x = ct.from_numpy(rng.standard_normal((2, 4, 7, 8)).astype(np.float32), device=device)
    w = ct.from_numpy(rng.standard_normal((6, 4, 3, 3)).astype(np.float32), device=device)
    ct.conv.conv2d(x.bfloat16(), w.bfloat16(), padding=1, algo=algo)
    y = ct.conv.conv2d(x, w, padding=1, algo=algo)
    want = TF.conv2d(torch.from_numpy(x.numpy()).double(), torch.from_numpy(w.numpy()).double(),
                     padding=1)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", HALF)
def test_benchmark_mode_times_in_place_readers(device, rng, name, tmp_path, monkeypatch):
    """Benchmark mode times a 16-bit problem's passes among the algorithms that read it in
    place, runs the fastest, and a new process takes the choice from the file."""
    from cltensor import backends
    monkeypatch.setenv("CLTENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backends, "benchmark", True)
    dispatch.clear_cache()
    (x, tx), (w, tw) = _pair(device, rng, (2, 4, 7, 8), name), _pair(device, rng, (6, 4, 3, 3), name)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = ct.conv.conv2d(x, w, padding=1)
    dx, dw = _leaf(tx), _leaf(tw)
    ty = TF.conv2d(dx, dw, padding=1)
    _close(y, ty, name)
    g, tg = _pair(device, rng, tuple(ty.shape), name)
    y.backward(g)
    ty.backward(tg.double())
    _close(x.grad, dx.grad, name)
    _close(w.grad, dw.grad, name)
    p = y.grad_fn.ctx.p
    for pass_ in dispatch.PASSES:
        times = dispatch.timings(device, p, pass_)
        assert set(times) == set(dispatch.candidates(p, pass_, device)), pass_
        assert len(times) >= 2 and all(dispatch.reads_half(n, device) for n in times), times
        assert dispatch.choose(p, device, pass_) == min(times, key=times.get)
    dispatch.clear_cache()
    monkeypatch.setattr(dispatch, "time_pass", lambda *a: pytest.fail("timed again"))
    _close(ct.conv.conv2d(x.detach(), w.detach(), padding=1), ty, name)
    dispatch.clear_cache()
