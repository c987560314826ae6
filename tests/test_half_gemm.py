"""GEMM on float16 and bfloat16 tensors read in place: every family forced, sums in float32,
results stored in the 16-bit dtype (or float32), against torch on the CPU in the same dtype
(torch sums in float32 and rounds once: 1 ulp of the 16-bit type at the output's scale)."""
import gc
import json

import numpy as np
import pytest
import torch

import cltensor as ct
from cltensor import tunedb
from cltensor.ops import gemm as gm
from cltensor.ops.gemm import engine
from test_nvidia_plugin import only_plugins

HALF = ["float16", "bfloat16"]


@pytest.fixture(params=gm.FAMILIES)
def variant(request, monkeypatch):
    """Force one GEMM family for every product the test makes."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", request.param)
    return request.param


def _pair(device, rng, shape, name):
    """The same random values as a cltensor and a torch tensor of dtype `name`."""
    x = rng.standard_normal(shape).astype(np.float32)
    tt = torch.from_numpy(x).to(getattr(torch, name))
    return ct.from_numpy(tt.float().numpy(), device=device).to(getattr(ct, name)), tt


def _poisoned(device, shape, name):
    return ct.full(shape, float("nan"), dtype=getattr(ct, name), device=device)


# the portable families' kernels, and the NVIDIA plug-in's, which read 16-bit operands too
GEMM_KERNELS = {"gemm_direct", "gemm_tiled", "gemm_packed", "pack_panels", "xgemm", "pad_copy",
                "xgemm_reduce", "gemm_rowdot", "gemm_rowdot_wg", "gemm_rowaxpy", "gemm_rowaxpy_wg",
                "gemm_slabs", "nvmma_gemm", "nvwg_gemm", "pack_half_slices"}


def _in_place(fn, *args, **kwargs):
    """fn's result, checked to run GEMM kernels alone (no casts of the operands)."""
    with ct.profile() as prof:
        r = fn(*args, **kwargs)
    names = {rec["name"] for rec in prof.records()}
    assert names <= GEMM_KERNELS, f"other kernels ran: {names - GEMM_KERNELS}"
    return r


def _close(mine, want):
    """mine (a cltensor) has want's dtype and shape and is within one ulp of the 16-bit type
    at the output's scale (the largest |want|)."""
    assert mine.dtype.name == str(want.dtype).split(".")[-1]
    got, exp = mine.float().numpy(), want.float().numpy()
    assert got.shape == exp.shape
    assert not np.isnan(got).any(), "an element was not written"
    ulp = float(torch.finfo(want.dtype).eps) * max(float(np.abs(exp).max()), 1e-30)
    np.testing.assert_allclose(got, exp, rtol=0, atol=ulp)


@pytest.mark.parametrize("name", HALF)
def test_families_awkward_sizes(device, rng, variant, name):
    """mm into a poisoned out, sizes cut by every tile (and wide enough for the packed family
    to read B in place, its last panel partial)."""
    for m, k, n in [(1, 1, 1), (7, 33, 17), (65, 17, 127), (64, 64, 64), (33, 130, 5),
                    (9, 40, 150)]:
        (a, ta), (b, tb) = _pair(device, rng, (m, k), name), _pair(device, rng, (k, n), name)
        out = _poisoned(device, (m, n), name)
        assert _in_place(ct.mm, a, b, out=out) is out
        _close(out, ta @ tb)


@pytest.mark.parametrize("name", HALF)
def test_families_transposed_strided_batched(device, rng, variant, name):
    """Transposed and step-sliced operands, batches and broadcast batches, read in place."""
    (a, ta), (b, tb) = _pair(device, rng, (40, 2 * 37), name), _pair(device, rng, (29, 37), name)
    _close(_in_place(ct.matmul, a[:, ::2], b.mT), ta[:, ::2] @ tb.mT)
    (x, tx), (w, tw) = _pair(device, rng, (3, 19, 24), name), _pair(device, rng, (3, 24, 21), name)
    _close(_in_place(ct.bmm, x, w), torch.bmm(tx, tw))
    _close(_in_place(ct.bmm, x.mT[:, :, 1:], w[:, 1:19]),
           torch.bmm(tx.mT[:, :, 1:], tw[:, 1:19]))
    (v, tv) = _pair(device, rng, (24, 9), name)
    _close(_in_place(ct.matmul, x, v), torch.matmul(tx, tv))  # B shared by the batches
    (y, ty) = _pair(device, rng, (2, 1, 6, 24), name)
    _close(_in_place(ct.matmul, y, w), torch.matmul(ty, tw))  # broadcast batch dims


@pytest.mark.parametrize("name", HALF)
def test_ops_with_addends(device, rng, variant, name):
    """addmm, baddbmm, mv and linear: alpha, beta and the bias in float32, rounded once."""
    (c, tc), (a, ta) = _pair(device, rng, (9, 13), name), _pair(device, rng, (9, 20), name)
    (b, tb), (bias, tbias) = _pair(device, rng, (20, 13), name), _pair(device, rng, (13,), name)
    _close(_in_place(ct.addmm, c, a, b, beta=0.5, alpha=-2),
           torch.addmm(tc, ta, tb, beta=0.5, alpha=-2))
    _close(_in_place(ct.addmm, bias, a, b), torch.addmm(tbias, ta, tb))
    (x, tx), (y, ty) = _pair(device, rng, (2, 9, 20), name), _pair(device, rng, (2, 20, 13), name)
    _close(_in_place(ct.baddbmm, c, x, y, beta=2), torch.baddbmm(tc, tx, ty, beta=2))
    (v, tv) = _pair(device, rng, (20,), name)
    _close(_in_place(ct.mv, a, v), torch.mv(ta, tv))
    _close(_in_place(ct.nn.functional.linear, a, b.mT, bias),
           torch.nn.functional.linear(ta, tb.mT, tbias))


def _ref(a, b, dtype, alpha=1, c=None, beta=0, relu=False, row_bias=None, col_bias=None):
    """The epilogue on float64 sums of the float32 values, rounded once to dtype."""
    r = alpha * (a.double() @ b.double())
    if c is not None:
        r = r + beta * c.double()
    if row_bias is not None:
        r = r + row_bias.double()[:, None]
    if col_bias is not None:
        r = r + col_bias.double()
    return (r.clamp(min=0) if relu else r).to(dtype)


@pytest.mark.parametrize("kernel", ["gemm_rowdot", "gemm_rowdot_wg", "gemm_rowaxpy",
                                    "gemm_rowaxpy_wg"])
@pytest.mark.parametrize("name", HALF)
def test_small_batch_kernels(device, rng, kernel, name):
    """rowdot, rowdot_wg (x @ W^T) and rowaxpy, rowaxpy_wg (g @ W) with few rows: unaligned
    views, a K tail, the whole epilogue in float32, stored rounded once."""
    dtype = getattr(torch, name)
    axpy = kernel.startswith("gemm_rowaxpy")
    entry = dict(gm.entry_for(device, np.float32), rowdot_max_m=8 * (not axpy),
                 rowaxpy_max_m=8 * axpy, rowdot_wg=int(kernel == "gemm_rowdot_wg"),
                 rowaxpy_wg=int(kernel == "gemm_rowaxpy_wg"))
    m, n, k = 3, 37, 70
    (x, tx) = _pair(device, rng, (m, k + 1), name)
    a, ta = x[:, 1:], tx[:, 1:]
    if axpy:  # B's columns contiguous
        (w, tw) = _pair(device, rng, (k, n + 1), name)
        b, tb = w[:, 1:], tw[:, 1:]
    else:  # B's rows contiguous (W^T)
        (w, tw) = _pair(device, rng, (n, k + 2), name)
        b, tb = w[:, 2:].mT, tw[:, 2:].mT
    (c, tc), (rb, trb) = _pair(device, rng, (m, n), name), _pair(device, rng, (m,), name)
    (cb, tcb) = _pair(device, rng, (n,), name)
    out = _poisoned(device, (m, n), name)
    with ct.profile() as prof:
        gm.gemm_into(a, b, out, c_in=c, alpha=-0.5, beta=2.0, row_bias=rb, col_bias=cb,
                     relu=True, entry=entry)
    assert {r["name"] for r in prof.records()} == {kernel}
    _close(out, _ref(ta.float(), tb.float(), dtype, -0.5, tc.float(), 2.0, True, trb.float(),
                     tcb.float()))


@pytest.mark.parametrize("name", HALF)
def test_mixed_operands_and_float32_result(device, rng, variant, name):
    """A 16-bit activation times a float32 weight, each read in its own type, into a float32
    result and into a 16-bit one."""
    (x, tx) = _pair(device, rng, (17, 45), name)
    w = rng.standard_normal((45, 23)).astype(np.float32)
    wt = ct.from_numpy(w, device=device)
    want = tx.double() @ torch.from_numpy(w).double()
    out = ct.full((17, 23), float("nan"), device=device)
    gm.gemm_into(x, wt, out)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    out16 = _poisoned(device, (17, 23), name)
    gm.gemm_into(wt.mT, x.mT, out16.mT)
    _close(out16, want.to(getattr(torch, name)))


@pytest.mark.parametrize("name", HALF)
def test_no_float32_copies(device, rng, name, monkeypatch):
    """A 16-bit product allocates its result alone (the direct family reads in place)."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "direct")
    (a, _), (b, _) = _pair(device, rng, (96, 80), name), _pair(device, rng, (80, 64), name)
    ct.mm(a, b)  # builds the kernel
    gc.collect()  # NOTE: earlier tests' tensors in reference cycles, freed at any moment
    device.synchronize()
    before = device.allocated
    device.reset_peak()
    r = ct.mm(a, b)
    assert device.peak - before == r.numel() * 2


class _Recorder:
    """A plug-in that declines every product and records the dtypes it was offered."""
    def __init__(self):
        self.seen = []

    def gemm(self, p, *args):
        self.seen.append((p.a.t.dtype, p.co.t.dtype))
        return False


@pytest.mark.parametrize("name", HALF)
def test_plugins_offered_computed_types_only(device, rng, name, monkeypatch):
    """A plug-in that does not say it reads 16-bit tensors (reads_16bit) is never offered
    16-bit operands."""
    rec = _Recorder()
    monkeypatch.setattr(engine, "PROVIDERS", engine.PROVIDERS + [lambda dev: [rec]])
    (a, ta), (b, tb) = _pair(device, rng, (8, 8), name), _pair(device, rng, (8, 8), name)
    _close(_in_place(ct.mm, a, b), ta @ tb)
    assert rec.seen == []
    ct.mm(a.float(), b.float())
    assert rec.seen == [(ct.float32, ct.float32)]


@pytest.mark.parametrize("name", HALF)
def test_linear_relu_fused(device, rng, name):
    """linear(..., relu=True) on 16-bit tensors: one GEMM applies bias and ReLU as it stores;
    its gradients match torch's."""
    (x, tx), (w, tw) = _pair(device, rng, (6, 20), name), _pair(device, rng, (9, 20), name)
    (b, tb) = _pair(device, rng, (9,), name)
    for t in (x, w, b, tx, tw, tb):
        t.requires_grad_(True)
    y = _in_place(ct.nn.functional.linear, x, w, b, relu=True)
    ty = torch.relu(torch.nn.functional.linear(tx, tw, tb))
    _close(y.detach(), ty.detach())
    g, tg = _pair(device, rng, (6, 9), name)
    y.backward(g)
    ty.backward(tg)
    for mine, want in ((x.grad, tx.grad), (w.grad, tw.grad), (b.grad, tb.grad)):
        _close(mine, want)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("name", HALF)
def test_autocast_linear_reads_float32_parameters(device, rng, name, relu):
    """Under autocast, linear with float32 parameters casts the input alone: the GEMM reads
    the weight and bias as float32, and their gradients are summed into float32. No plug-in
    is asked: where one multiplies 16-bit operands linear casts as torch does
    (test_half_amp.py)."""
    with only_plugins():
        _linear_reads_float32_parameters(device, rng, name, relu)


def _linear_reads_float32_parameters(device, rng, name, relu):
    low, tlow = getattr(ct, name), getattr(torch, name)
    x = rng.standard_normal((2, 3, 20)).astype(np.float32)
    w, b = rng.standard_normal((9, 20)).astype(np.float32), rng.standard_normal(9).astype(
        np.float32)
    cx, cw, cb = (ct.from_numpy(v, device=device).requires_grad_(True) for v in (x, w, b))
    with ct.autocast("opencl", dtype=low):
        with ct.profile() as prof:
            y = ct.nn.functional.linear(cx, cw, cb, relu=relu)
    casts = [r["name"] for r in prof.records() if r["name"] not in GEMM_KERNELS]
    assert len(casts) == 1, casts  # the input's
    tx = torch.from_numpy(x).to(tlow).double().requires_grad_(True)
    tw, tb = (torch.from_numpy(v).double().requires_grad_(True) for v in (w, b))
    ty = torch.nn.functional.linear(tx, tw, tb)
    ty = torch.relu(ty) if relu else ty
    _close(y.detach(), ty.detach().to(tlow))
    g = rng.standard_normal((2, 3, 9)).astype(np.float32)
    y.backward(ct.from_numpy(g, device=device).to(low))
    ty.backward(torch.from_numpy(g).to(tlow).double())
    assert cw.grad.dtype is ct.float32 and cb.grad.dtype is ct.float32
    for mine, want in ((cw.grad, tw.grad), (cb.grad, tb.grad)):
        np.testing.assert_allclose(mine.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    _close(cx.grad.to(low), tx.grad.to(tlow))


@pytest.mark.parametrize("name", HALF)
def test_xgemm_split_k(device, rng, name, monkeypatch):
    """xgemm splitting a deep K: float32 partial sums, the epilogue (beta * C) and the 16-bit
    store in xgemm_reduce."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", "xgemm")
    (a, ta), (b, tb) = _pair(device, rng, (8, 4096), name), _pair(device, rng, (4096, 8), name)
    (c, tc) = _pair(device, rng, (8, 8), name)
    with ct.profile() as prof:
        r = _in_place(ct.addmm, c, a, b, beta=0.5)
    assert "xgemm_reduce" in {rec["name"] for rec in prof.records()}
    _close(r, _ref(ta.float(), tb.float(), getattr(torch, name), c=tc.float(), beta=0.5))


def _shipped_16bit_entries():
    db = json.loads((tunedb.DB_DIR / "gemm.json").read_text())
    return [(kernel.removeprefix("gemm_"), key, entry)
            for kernel in ("gemm_float16", "gemm_bfloat16") if kernel in db
            for vendor in db[kernel].get("vendors", {}).values()
            for key, entry in vendor.get("devices", {}).items()]


@pytest.mark.parametrize("name, key, own", _shipped_16bit_entries())
def test_shipped_16bit_entries(device, rng, monkeypatch, name, key, own):
    """Every 16-bit device entry the database ships, merged over this device's float32 entry
    as a lookup merges it, on every device: sizes cut by its tiles, deep and wide products
    (slabs, B read in place), into poisoned outputs."""
    entry = {**gm.entry_for(device, np.dtype(np.float32)), **own, "min_work": 0, "min_dim": 0}
    monkeypatch.setattr(engine.choice, "entry_for", lambda *args: entry)
    for m, k, n in [(7, 33, 17), (65, 1100, 9), (20, 70, 300)]:
        (a, ta), (b, tb) = _pair(device, rng, (m, k), name), _pair(device, rng, (k, n), name)
        out = _poisoned(device, (m, n), name)
        assert _in_place(ct.mm, a, b, out=out) is out
        _close(out, ta @ tb)


def test_16bit_products_look_up_their_storage_types_entry(device, monkeypatch):
    """A product of 16-bit operands asks for its storage type's entry (gemm_bfloat16 /
    gemm_float16, which start from gemm_float32's), a float32 product for float32's."""
    asked = []
    real = engine.choice.entry_for
    monkeypatch.setattr(engine.choice, "entry_for",
                        lambda device, dtype: asked.append(dtype) or real(device, dtype))
    for name in ("bfloat16", "float16", "float32"):
        x = ct.ones(70, 80, dtype=getattr(ct, name), device=device)
        ct.mm(x, x.mT)
    halves = [d for d in asked if d in (ct.bfloat16, ct.float16)]
    assert list(dict.fromkeys(halves)) == [ct.bfloat16, ct.float16], halves
    assert any(d == np.float32 for d in asked)
