"""max_pool2d keeps its argmax as a tap of the window in the smallest integer type that holds
the window (pool.cl's IDX_T): torch's int64 indices where the user asks for them, values and
gradients as torch's in every float dtype, and the bytes a training step keeps."""
import numpy as np
import pytest
import torch

import cltensor as ct
import cltensor.nn.functional as F
from cltensor.ops import pool

DTYPES = ["float32", "float16", "bfloat16"]
# (kernel, stride, padding, dilation, ceil_mode, tap dtype): 3x3 windows, a window of 272 taps
# (int16), dilated windows wholly in the padding (their argmax is torch's default index)
CASES = [((3, 3), (2, 2), (1, 1), (1, 1), True, "uint8"),
         ((2, 2), (2, 2), (0, 0), (1, 1), False, "uint8"),
         ((16, 17), (3, 2), (8, 8), (1, 1), False, "int16"),
         ((2, 3), (3, 4), (1, 1), (3, 2), True, "uint8")]


def _poison(shape, dtype, device):
    """Free NaN-filled (integers: -7) buffers of an output's size, which the pool hands to the
    next ones."""
    fill = float("nan") if dtype.is_floating_point else -7
    for t in [ct.full(tuple(shape), fill, dtype=dtype, device=device) for _ in range(2)]:
        del t


def _inputs(rng, shape, name, device):
    """(torch CPU tensor, cltensor views: contiguous, channels_last, sliced) of a tie-rich
    array with a NaN, in dtype `name`."""
    full = np.round(rng.standard_normal(shape[:3] + (shape[3] + 1,)).astype(np.float32) * 4) / 4
    full[0, 1, 2, 3] = np.nan
    want = torch.from_numpy(full[..., 1:].copy()).to(getattr(torch, name))
    base = ct.from_numpy(full, device=device).to(getattr(ct, name))
    x = base[..., 1:].contiguous()
    return want, [x, x.contiguous(ct.channels_last), base[..., 1:]]


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("k,s,p,d,ceil,taps", CASES)
def test_max_pool2d_indices_and_gradient_match_torch(device, rng, name, k, s, p, d, ceil, taps):
    want, views = _inputs(rng, (2, 3, 19, 21), name, device)
    want.requires_grad_(True)
    ty, tidx = torch.nn.functional.max_pool2d(want, k, s, p, d, ceil, return_indices=True)
    g = torch.from_numpy(rng.standard_normal(ty.shape).astype(np.float32)).to(want.dtype)
    ty.backward(g)
    fields, _ = pool.window("max_pool2d", views[0], k, s, p, d, ceil)
    assert pool.tap_dtype(fields) == getattr(ct, taps)
    for x in views:
        leaf = x.detach().requires_grad_(True)
        _poison(ty.shape, ct.int64, device)
        y, idx = F.max_pool2d(leaf, k, s, p, d, ceil, return_indices=True)
        assert idx.dtype == ct.int64
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
        np.testing.assert_array_equal(y.float().numpy(), ty.detach().float().numpy())
        _poison(want.shape, leaf.dtype, device)
        y.backward(ct.from_numpy(g.float().numpy(), device=device).to(leaf.dtype))
        if name == "float32":
            np.testing.assert_array_equal(leaf.grad.numpy(), want.grad.numpy())
        else:  # the sums in float32, rounded once (torch's rounds after each add)
            np.testing.assert_allclose(leaf.grad.float().numpy(), _grad64(g, tidx, want.shape),
                                       rtol=2**-7, atol=1e-6)


def _grad64(g, tidx, shape):
    """max pooling's input gradient in float64: g summed at torch's indices tidx."""
    n, c = shape[:2]
    gx = np.zeros((n, c, shape[2] * shape[3]))
    for i, j in np.ndindex(n, c):
        np.add.at(gx[i, j], tidx[i, j].numpy().ravel(), g[i, j].double().numpy().ravel())
    return gx.reshape(shape)


@pytest.mark.parametrize("k,s,p,d,ceil,taps", CASES)
def test_max_pool2d_taps_round_trip(device, rng, k, s, p, d, ceil, taps):
    """torch's indices back to taps (max_pool2d_with_indices_backward), then to indices: the
    same; an index outside its window (or the plane) marks the window, which sends no
    gradient."""
    _, (x, *_) = _inputs(rng, (1, 2, 19, 21), "float32", device)
    fields, out_hw = pool.window("max_pool2d", x, k, s, p, d, ceil)
    _, t = pool.max_pool2d(x, fields, out_hw, True)
    idx = pool.max_pool2d_indices(t, x.shape, fields)
    back = pool.max_pool2d_taps(idx, x.shape, fields)
    np.testing.assert_array_equal(pool.max_pool2d_indices(back, x.shape, fields).numpy(),
                                  idx.numpy())
    bad = idx.numpy().copy()
    bad[0, 0, 0, 0], bad[0, 1, 0, 0] = 19 * 21, -1
    marked = pool.max_pool2d_taps(ct.from_numpy(bad, device=device), x.shape, fields).numpy()
    none = np.iinfo(getattr(np, taps)).max if taps == "uint8" else -1
    assert marked[0, 0, 0, 0] == marked[0, 1, 0, 0] == none
    g = ct.ones(idx.shape, device=device)
    gx = pool.max_pool2d_backward(g, ct.from_numpy(marked, device=device).to(t.dtype), x.shape,
                                  pool.layout_of(x), fields)
    full = pool.max_pool2d_backward(g, t, x.shape, pool.layout_of(x), fields)
    assert gx.numpy().sum() == full.numpy().sum() - 2


def test_max_pool2d_keeps_a_byte_per_output(device, rng):
    """What a training forward keeps beside its output: one byte per output for 3x3 windows
    (int32 indices took four)."""
    x = ct.from_numpy(rng.standard_normal((2, 8, 32, 32)).astype(np.float32),
                      device=device).to(ct.float16).requires_grad_(True)
    before = ct.memory_stats(device)["allocated"]
    y = F.max_pool2d(x, 3, 2, 1)
    kept = ct.memory_stats(device)["allocated"] - before
    assert kept == y.numel() * (2 + 1), kept


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_pooling_gradients_walk_planes(device, rng, name):
    """On CPUs, 16-bit max and avg pooling backward take the planes form where no input lies
    in two windows (each gets one gradient, rounded once, as the items form's); with
    overlapping windows they sum their planes in a ring of float rows, rounded once (the
    _bwd_ring kernels). Values against float64."""
    if not device.is_cpu:
        pytest.skip("the CPUs' kernel form")
    a = rng.standard_normal((2, 3, 9, 12)).astype(np.float32)
    x = ct.from_numpy(a, device=device).to(getattr(ct, name)).requires_grad_(True)
    for k, s, planes in ((2, 2, True), (3, 3, True), (3, 2, False)):
        for fn in (F.max_pool2d, F.avg_pool2d):
            y = fn(x, k, s)
            g = ct.from_numpy(rng.standard_normal(y.shape).astype(np.float32),
                              device=device).to(x.dtype)
            _poison(x.shape, x.dtype, device)
            with ct.profile() as prof:
                (gx,) = ct.autograd.grad(y, x, g)
            names = [r["name"] for r in prof.records()]
            assert any(n.endswith("_bwd_planes") for n in names) == planes, (k, s, names)
            assert (fn.__name__ + "_bwd_ring" in names) == (not planes), (k, s, names)
            tx = torch.from_numpy(x.float().numpy().astype(np.float64)).requires_grad_(True)
            tfn = getattr(torch.nn.functional, fn.__name__)
            tfn(tx, k, s).backward(torch.from_numpy(g.float().numpy().astype(np.float64)))
            np.testing.assert_allclose(gx.float().numpy(), tx.grad.numpy(), rtol=2**-7,
                                       atol=1e-6)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("k,s,p,d,ceil,taps", CASES)
def test_pooling_ring_equals_items_form(device, rng, monkeypatch, name, k, s, p, d, ceil, taps):
    """16-bit max and avg pooling backward: the planes summed in float rows (CPUs) and the
    items form add the same gradients in the same order and round once: equal bit for bit."""
    if not device.is_cpu:
        pytest.skip("the CPUs' kernel form")
    _, views = _inputs(rng, (2, 3, 19, 21), name, device)
    for x in views[:2]:
        fields, out_hw = pool.window("max_pool2d", x, k, s, p, d, ceil)
        _, t = pool.max_pool2d(x, fields, out_hw, True)
        g = ct.from_numpy(rng.standard_normal(t.shape).astype(np.float32),
                          device=device).to(x.dtype)
        _poison(x.shape, x.dtype, device)
        ring = pool.max_pool2d_backward(g, t, x.shape, pool.layout_of(x), fields)
        monkeypatch.setitem(pool.FORM, "cpu", "items")
        items = pool.max_pool2d_backward(g, t, x.shape, pool.layout_of(x), fields)
        monkeypatch.undo()
        np.testing.assert_array_equal(ring.float().numpy(), items.float().numpy())
        if d != (1, 1):  # avg pooling has no dilation
            continue
        fields, out_hw = pool.window("avg_pool2d", x, k, s, p, 1, ceil)
        g = ct.from_numpy(rng.standard_normal(x.shape[:2] + out_hw).astype(np.float32),
                          device=device).to(x.dtype)
        for include_pad, divisor in ((1, 0), (0, 0), (1, 5)):
            args = (g, x.shape, pool.layout_of(x), fields, divisor, include_pad)
            ring = pool.avg_pool2d_backward(*args)
            monkeypatch.setitem(pool.FORM, "cpu", "items")
            items = pool.avg_pool2d_backward(*args)
            monkeypatch.undo()
            np.testing.assert_array_equal(ring.float().numpy(), items.float().numpy())


def test_torch_device_max_pool2d_indices(device, rng, monkeypatch):
    """The PyTorch device's max_pool2d_with_indices returns torch's int64 indices from the
    window taps, and its backward turns them back: values, indices and gradients as torch's on
    the CPU (overlapping, padded, dilated windows; an unbatched input)."""
    pytest.importorskip("torch")
    import cltensor.torch  # noqa: F401  (registers the "opencl" device)
    monkeypatch.setenv("CLTENSOR_TORCH_FALLBACK", "error")
    prev = ct.default_device()
    ct.set_default_device(device)
    try:
        for shape, args in (((2, 3, 9, 11), (3, 2, 1)), ((2, 3, 9, 11), (2, 3, 1, (3, 2), True)),
                            ((3, 9, 11), (3, 1, 1))):
            a = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
            res = []
            for dev in ("cpu", "opencl"):
                x = a.to(dev).detach().requires_grad_(True)
                y, i = torch.nn.functional.max_pool2d(x, *args, return_indices=True)
                (y * torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape).to(dev)).sum() \
                    .backward()
                res.append([t.detach().cpu() for t in (y, i, x.grad)])
            for got, want in zip(res[1], res[0]):
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got.numpy(), want.numpy())
    finally:
        ct.set_default_device(prev)
