"""Implicit GEMM (its CPU and GPU kernel families) and s2d Winograd read float16/bfloat16
tensors in place: forward, input and weight gradients (and conv_transpose2d's passes) against
torch's float32 convolution of the same rounded values, rounded to the 16-bit dtype, within
torch's tolerance for it; no float32 copies of the operands."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import cltensor as ct
from cltensor.conv import common, dispatch, implicit, implicit_gpu
from cltensor.conv.params import make_params
from test_half_conv import _peak
from test_nvidia_plugin import EMULATED_CONFIGS, EMULATED_CONV_CONFIGS, _emulated, _served

HALF = ["float16", "bfloat16"]
STYLES = ["cpu", "gpu"]  # implicit GEMM's kernel families, both run on every device
IMPLICIT_CASES = [  # (input shape, weight shape, conv2d keywords)
    ((2, 5, 7, 9), (7, 5, 3, 3), {"padding": 1}),
    ((2, 4, 9, 8), (6, 2, 3, 2), {"stride": 2, "padding": (1, 2), "dilation": (1, 2),
                                  "groups": 2}),
    ((1, 3, 11, 10), (5, 3, 1, 1), {}),  # a plain product on the GPU kernels
]
S2D_CASES = [
    ((2, 3, 11, 12), (5, 3, 5, 5), {"stride": 2, "padding": 2}),
    ((1, 4, 13, 10), (3, 4, 4, 4), {"stride": 3, "padding": (1, 0)}),
]


def _rounded(device, rng, shape, name):
    """A cltensor 16-bit tensor and torch's float32 tensor of the same (rounded) values."""
    t = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(getattr(torch, name))
    return ct.from_numpy(t.float().numpy(), device=device).to(getattr(ct, name)), t.float()


def _check(mine, want, name, what, scaled=False):
    """mine (16-bit) against torch's float32 result rounded to `name`, torch's tolerance; with
    scaled (Winograd's algorithms or auto's choice: a bfloat16 problem's Winograd products may
    run in TF32, conv/winograd.py) within one ulp at the output's scale."""
    assert mine.dtype is getattr(ct, name), what
    got = torch.from_numpy(mine.detach().float().numpy()).to(getattr(torch, name))
    want = want.detach().to(getattr(torch, name))
    if not scaled:
        torch.testing.assert_close(got, want, msg=what)
        return
    ulp = float(torch.finfo(want.dtype).eps) * float(want.float().abs().max())
    torch.testing.assert_close(got.float(), want.float(), rtol=0, atol=ulp, msg=what)


@pytest.fixture
def poisoned(monkeypatch):
    """Every output and scratch tensor the convolutions allocate starts as NaN."""
    empty = common.empty
    monkeypatch.setattr(common, "empty", lambda *a, **k: empty(*a, **k).fill_(float("nan")))


@pytest.fixture
def in_place(monkeypatch):
    """Fails a test that makes float32 copies (conv/common.py half_fallback)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a 16-bit convolution ran on float32 copies")
    monkeypatch.setattr(common, "half_fallback", refuse)


def _conv_and_grads(device, rng, name, algo, xshape, wshape, kwargs):
    """conv2d(algo=algo) with a bias, and its three gradients, against torch."""
    (x, tx), (w, tw) = _rounded(device, rng, xshape, name), _rounded(device, rng, wshape, name)
    b, tb = _rounded(device, rng, (wshape[0],), name)
    x, w, b = (t.requires_grad_(True) for t in (x, w, b))
    y = ct.conv.conv2d(x, w, b, algo=algo, **kwargs)
    leaves = [t.requires_grad_(True) for t in (tx, tw, tb)]
    ty = TF.conv2d(*leaves, **kwargs)
    scaled = "winograd" in algo or algo == "auto"
    _check(y, ty, name, f"{algo} {xshape}: forward", scaled)
    g, tg = _rounded(device, rng, tuple(ty.shape), name)
    y.backward(g)
    ty.backward(tg)
    for what, mine, t in (("input", x, tx), ("weight", w, tw), ("bias", b, tb)):
        _check(mine.grad, t.grad, name, f"{algo} {xshape}: {what} gradient", scaled)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("name", HALF)
def test_implicit_gemm_in_place(device, rng, monkeypatch, poisoned, in_place, name, style):
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    for xshape, wshape, kwargs in IMPLICIT_CASES:
        _conv_and_grads(device, rng, name, "implicit_gemm", xshape, wshape, kwargs)


@pytest.mark.parametrize("name", HALF)
def test_implicit_gemm_gpu_weight_gradient_splits(device, rng, monkeypatch, poisoned, in_place,
                                                  name):
    """The GPU weight gradient summed in float32 shares (cx_wgrad_sum rounds once), and in
    one share written straight to the 16-bit weight gradient."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    for forced in (1, 3):
        monkeypatch.setattr(implicit_gpu, "_wgrad_splits", lambda *a, n=forced: n)
        _conv_and_grads(device, rng, name, "implicit_gemm", (2, 4, 9, 8), (6, 4, 3, 3),
                        {"padding": 1})


@pytest.mark.parametrize("name", HALF)
def test_gpu_kernels_take_16bit_relu_back_as_they_read(device, rng, monkeypatch, poisoned,
                                                       in_place, name):
    """A fused Conv2d + ReLU on 16-bit tensors: cx_conv's input gradient and cx_wgrad keep
    the ReLU output's bits beside the gradient's and mask as they store a slice (RELU_MASK);
    the gradients against torch's through the same ReLU output, in one launch fewer than
    relu_backward first would take."""
    from cltensor.conv import function, plans
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    plans.clear()
    (x, tx), (w, tw) = (_rounded(device, rng, s, name) for s in ((2, 5, 7, 9), (6, 5, 3, 3)))
    b, tb = _rounded(device, rng, (6,), name)
    x, w, b = (t.requires_grad_(True) for t in (x, w, b))
    y = ct.conv.conv2d(x, w, b, padding=1, algo="implicit_gemm", relu=True)
    assert function._masks_relu([dispatch.algorithm("implicit_gemm", device)] * 2, y, y, False)
    ty = TF.relu(TF.conv2d(*(t.requires_grad_(True) for t in (tx, tw, tb)), padding=1))
    _check(y, ty, name, "forward")
    assert (y.float().numpy() == 0).any() and (y.float().numpy() > 0).any()
    g, tg = _rounded(device, rng, tuple(ty.shape), name)
    with ct.profile() as prof:
        y.backward(g)
    ty.backward(tg)
    assert "cx_wgrad" in {r["name"] for r in prof.records()}
    assert "relu_backward" not in " ".join(r["name"] for r in prof.records())
    for what, mine, t in (("input", x, tx), ("weight", w, tw), ("bias", b, tb)):
        _check(mine.grad, t.grad, name, f"{what} gradient")


@pytest.mark.parametrize("name", HALF)
def test_implicit_gemm_cpu_weight_gradient_cuts(device, rng, monkeypatch, poisoned, in_place,
                                                name):
    """The CPU weight gradient (wgrad_blocks) in blocks of 7 positions that cross rows and
    images, one register tile per chunk, several float32 slices summed and rounded once."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "cpu")
    monkeypatch.setattr(implicit, "WGRAD_BQ", 7)
    monkeypatch.setattr(implicit, "WGRAD_LOCAL_BYTES", 1)
    monkeypatch.setattr(implicit, "GROUPS_PER_CU", 16)
    _conv_and_grads(device, rng, name, "implicit_gemm", (3, 6, 7, 9), (40, 3, 3, 3),
                    {"padding": (1, 2), "stride": 2, "groups": 2})


@pytest.mark.parametrize("name", HALF)
def test_s2d_winograd_in_place(device, rng, poisoned, in_place, name):
    for xshape, wshape, kwargs in S2D_CASES:
        _conv_and_grads(device, rng, name, "s2d_winograd", xshape, wshape, kwargs)


@pytest.mark.parametrize("algo, style", [("implicit_gemm", "cpu"), ("implicit_gemm", "gpu"),
                                         ("s2d_winograd", None)])
@pytest.mark.parametrize("name", HALF)
def test_transposed_in_place(device, rng, monkeypatch, poisoned, in_place, name, algo, style):
    """conv_transpose2d's forward (the input gradient pass) and its gradients."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    (x, tx), (w, tw) = _rounded(device, rng, (2, 4, 5, 6), name), _rounded(device, rng, (4, 3, 3, 2), name)
    x, w = x.requires_grad_(True), w.requires_grad_(True)
    kwargs = {"stride": 2, "padding": 1, "output_padding": 1}
    y = ct.conv.conv_transpose2d(x, w, algo=algo, **kwargs)
    tx.requires_grad_(True), tw.requires_grad_(True)
    ty = TF.conv_transpose2d(tx, tw, **kwargs)
    scaled = "winograd" in algo
    _check(y, ty, name, f"{algo}: transposed forward", scaled)
    g, tg = _rounded(device, rng, tuple(ty.shape), name)
    y.backward(g)
    ty.backward(tg)
    _check(x.grad, tx.grad, name, f"{algo}: transposed input gradient", scaled)
    _check(w.grad, tw.grad, name, f"{algo}: transposed weight gradient", scaled)


@pytest.mark.parametrize("style", STYLES)
def test_implicit_gemm_allocates_no_float32_copies(device, rng, monkeypatch, style):
    """A 16-bit forward (its packed weight made by an earlier call) allocates its 16-bit
    output alone: no float32 copy of the input, weight or output."""
    monkeypatch.setattr(implicit, "KERNEL_STYLE", style)
    x = ct.from_numpy(rng.standard_normal((2, 16, 12, 12)).astype(np.float32),
                      device=device).bfloat16()
    w = ct.from_numpy(rng.standard_normal((4, 16, 3, 3)).astype(np.float32),
                      device=device).bfloat16()
    ct.conv.conv2d(x, w, padding=1, algo="implicit_gemm")  # kernels built, weight packed
    used, y = _peak(device, lambda: ct.conv.conv2d(x, w, padding=1, algo="implicit_gemm"))
    assert y.dtype is ct.bfloat16
    assert used <= y.numel() * 2, (used, y.numel() * 2)


def test_s2d_winograd_allocates_less_than_float32(device, rng):
    """A 16-bit s2d Winograd step (forward and both gradients) allocates less at its peak than
    the float32 one: its rearranged copies stay 16-bit."""
    x32 = ct.from_numpy(rng.standard_normal((2, 8, 24, 24)).astype(np.float32), device=device)
    w32 = ct.from_numpy(rng.standard_normal((8, 8, 5, 5)).astype(np.float32), device=device)

    def step(x, w):
        x, w = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
        y = ct.conv.conv2d(x, w, stride=2, padding=2, algo="s2d_winograd")
        y.backward(ct.ones_like(y))
        return x.grad
    half = (x32.bfloat16(), w32.bfloat16())
    step(*half), step(x32, w32)  # kernels built
    bytes16, grad = _peak(device, lambda: step(*half))
    bytes32, _ = _peak(device, lambda: step(x32, w32))
    assert grad.dtype is ct.bfloat16
    assert bytes16 < bytes32, (bytes16, bytes32)


@pytest.fixture(params=["emulated", "real"])
def tensor_cores(request, device):
    """The NVIDIA plug-in's tensor-core convolutions: in emulation, registered on this device;
    or the real plug-in where it serves the device (skips elsewhere)."""
    if request.param == "real":
        pl = _served(device)
        if pl is None:
            pytest.skip(f"needs an NVIDIA GPU the plug-in serves; {device} is not one")
        yield pl
        return
    pl = _emulated(EMULATED_CONFIGS[0])
    pl.conv_configs = EMULATED_CONV_CONFIGS[:1]
    ct.register_plugin(pl)
    try:
        yield pl
    finally:
        ct.unregister_plugin(pl.name)


@pytest.mark.parametrize("name", HALF)
def test_tensor_core_engine_reads_16bit(device, rng, monkeypatch, poisoned, in_place,
                                        tensor_cores, name):
    """A plug-in's tensor-core implicit GEMM (xgemm_mma.cl, emulated and real) reads 16-bit tensors in
    place whatever allow_tf32 says: 16-bit values are exact in TF32, so every pass is torch's
    float32 result rounded once. cx_conv multiplies them on m16n8k16 (MMA_HALF), cx_wgrad
    in TF32."""
    assert not ct.backends.allow_tf32
    implicit_gpu.clear_cache()
    chosen, real = [], implicit_gpu.mma_half
    monkeypatch.setattr(implicit_gpu, "mma_half", lambda name, geo, q: chosen.append(
        (name, real(name, geo, q))) or chosen[-1][1])
    try:
        with ct.profile() as prof:
            for xshape, wshape, kwargs in IMPLICIT_CASES:
                _conv_and_grads(device, rng, name, "tf32_implicit", xshape, wshape, kwargs)
    finally:
        implicit_gpu.clear_cache()
    assert {"cx_conv", "cx_wgrad"} <= {r["name"] for r in prof.records()}
    half = 1 if name == "float16" else 2
    assert {"cx_conv", "cx_wgrad"} <= {k for k, _ in chosen}, chosen
    assert all(m == (half if k == "cx_conv" else 0) for k, m in chosen), chosen


@pytest.mark.parametrize("tensor_cores", ["emulated"], indirect=True)
def test_gpu_auto_takes_the_rules_choice_for_16bit(device, monkeypatch, tensor_cores):
    """On GPUs a 16-bit pass takes the rules' choice (the plug-in's first) where it reads 16-bit
    tensors, not im2col's materialized columns; CPUs keep gemm_1x1 / im2col (peak memory)."""
    x = ct.zeros(2, 8, 9, 9, device=device, dtype=ct.bfloat16)
    w = ct.zeros(16, 8, 3, 3, device=device, dtype=ct.bfloat16)
    p = make_params(x, w, None, 1, 1, 1, 1)
    monkeypatch.setattr(dispatch, "portable_rule", lambda p, device, pass_: "implicit_gemm")
    monkeypatch.setattr(device, "is_cpu", False)
    dispatch.clear_cache()  # NOTE: choices are remembered per problem; the rules change here
    assert dispatch.choose(p, device, "forward") == "tf32_implicit"
    monkeypatch.setattr(dispatch, "portable_rule", lambda p, device, pass_: "winograd_4x4")
    dispatch.clear_cache()
    assert dispatch.choose(p, device, "forward") == "winograd_4x4"
    monkeypatch.setattr(device, "is_cpu", True)
    dispatch.clear_cache()
    assert dispatch.choose(p, device, "forward") == "im2col"
    dispatch.clear_cache()


GPU_RULE_CASES = [  # a strided first layer, Winograd's 3x3 and 5x5, a 1x1 layer
    ((2, 3, 17, 17), (8, 3, 7, 7), {"stride": 2, "padding": 3}),
    ((2, 32, 9, 9), (32, 32, 3, 3), {"padding": 1}),
    ((1, 16, 9, 9), (16, 16, 5, 5), {"padding": 2}),
    ((2, 32, 9, 9), (16, 32, 1, 1), {}),
]


@pytest.mark.parametrize("mode", ["accurate", "fast"])
def test_gpu_rules_run_16bit_in_place(device, rng, monkeypatch, poisoned, in_place, mode):
    """Every pass the GPU rules choose for a 16-bit problem (under either conv_precision)
    reads the 16-bit tensors in place and gives torch's float32 result rounded once."""
    monkeypatch.setattr(device, "is_cpu", False)
    monkeypatch.setattr(implicit, "KERNEL_STYLE", "gpu")
    monkeypatch.setattr(ct.backends, "conv_precision", mode)
    dispatch.clear_cache()
    try:
        with ct.profile() as prof:
            for xshape, wshape, kwargs in GPU_RULE_CASES:
                _conv_and_grads(device, rng, "bfloat16", "auto", xshape, wshape, kwargs)
    finally:
        dispatch.clear_cache()
    ran = {r["name"] for r in prof.records()}
    assert {"cx_conv", "input_transform"} <= ran, ran  # implicit GEMM and Winograd, not im2col


def test_16bit_rules_take_the_fast_choices(device, monkeypatch):
    """16-bit problems take the "fast" rules whatever conv_precision says (their 16-bit
    rounding is far above Winograd F(4x4, 3x3)'s float32 error), float32 ones stay accurate."""
    monkeypatch.setattr(ct.backends, "conv_precision", "accurate")
    monkeypatch.setattr(device, "is_cpu", False)
    dispatch.clear_cache()
    try:
        for dtype in (ct.bfloat16, ct.float16, ct.float32):
            x = ct.zeros(2, 256, 14, 14, device=device, dtype=dtype)
            w = ct.zeros(256, 256, 3, 3, device=device, dtype=dtype)
            p = make_params(x, w, None, 1, 1, 1, 1)
            fast = dispatch._precise_rule(p, device, "forward", "fast")
            accurate = dispatch._precise_rule(p, device, "forward", "accurate")
            assert fast != accurate, (fast, accurate)  # the case tells the modes apart
            want = accurate if dtype == ct.float32 else fast
            assert dispatch.portable_rule(p, device, "forward") == want, dtype
    finally:
        dispatch.clear_cache()
