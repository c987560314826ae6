"""max_pool2d forward of windows that overlap down the columns (padded 3x3 and the like) on
CPUs: pool.cl's strips (max_pool2d_fwd_strips, separable row maxima walked down bands of
rows) against torch on the CPU in the same dtype, bit for bit, with the argmax, relu, NaN,
-inf, ties, unaligned and strided rows, ceil_mode and bands of several rows; outputs poisoned
first."""
import numpy as np
import pytest
import torch

import cltensor as ct
from cltensor.ops import pool

POISON = float("nan")
# (kernel, stride, padding, ceil_mode): GoogLeNet's 3x3 stride 1 and stride 2 pools, and
# windows of other heights and widths (4 wide: stride 2 loads two pairs)
WINDOWS = [(3, 1, 1, False), (3, 2, 1, False), (3, 2, 0, True), (3, 2, 1, True),
           ((5, 3), 1, (2, 1), False), (4, 2, 1, False), (3, 1, 0, False), ((3, 2), (2, 1), 0, False)]
WINDOW_IDS = ["3s1p1", "3s2p1", "3s2p0ceil", "3s2p1ceil", "5x3s1p2x1", "4s2p1", "3s1p0", "3x2s2x1p0"]


def _same(mine, want):
    """mine equals torch's `want` bit for bit (NaN where it has NaN)."""
    got, exp = mine.float().numpy(), want.float().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    ok = ~np.isnan(exp)
    np.testing.assert_array_equal(got[ok].view(np.uint32), exp[ok].view(np.uint32))


def _poison(shape, dtype, device):
    """Free NaN-filled buffers of an output's size, which the next allocations of that size get."""
    for t in [ct.full(tuple(shape), POISON, dtype=dtype, device=device) for _ in range(2)]:
        del t


def _forward(x, k, s, p, ceil, with_indices, relu=False):
    """ops.pool.max_pool2d (relu: stored clamped at 0, as Sequential's MaxPool2d+ReLU) and the
    names of the kernels it launched."""
    fields, out_hw = pool.window("max_pool2d", x, k, s, p, 1, ceil)
    with ct.profile() as prof:
        y, idx = pool.max_pool2d(x, fields, out_hw, with_indices, relu)
        if with_indices:
            idx = pool.max_pool2d_indices(idx, x.shape, fields)
    return y, idx, [e[0] for e in prof.events]


def _input(rng, name, device):
    """An input of 47 columns (views of 45 and 44: strips at 1, 16 and an overlapping last
    one, edge strips) and the same as torch's, in dtype `name`: ties, a NaN, a row of -inf,
    -0.0 beside 0.0, windows of -inf only."""
    full = np.round(rng.standard_normal((2, 3, 13, 47)).astype(np.float32) * 2) / 2
    full[1, 2, 5, 20], full[0, 1, 4, :] = np.nan, -np.inf
    full[0, 0, 7, 10:14] = (-0.0, 0.0, -0.0, 0.0)
    full[0, 0, 6:9, 30:33] = -np.inf  # a window of -inf only: the argmax is its first tap
    full[0, 2, :3, :4] = full[0, 2, -3:, 41:] = -np.inf  # and such windows in the corners
    tx = torch.from_numpy(full).to(getattr(torch, name))
    return ct.from_numpy(full, device=device).to(getattr(ct, name)), tx


def _match_torch(x, ty, tidx, device, k, s, p, ceil):
    """max_pool2d of x without and with indices (outputs poisoned first) equals torch's ty and
    tidx; the names of the kernels each call launched."""
    launched = []
    for with_indices in (False, True):
        _poison(ty.shape, x.dtype, device)
        y, idx, names = _forward(x, k, s, p, ceil, with_indices)
        _same(y, ty)
        if with_indices:
            np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
        launched.append(names)
    return launched


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("k,s,p,ceil", WINDOWS, ids=WINDOW_IDS)
@pytest.mark.parametrize("bands", ["short", "long"])
def test_max_pool2d_strips_match_torch(device, rng, monkeypatch, name, k, s, p, ceil, bands):
    if name == "float64" and not device.has_fp64:
        pytest.skip("no float64 on this device")
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    if bands == "long":  # few work-items: bands of many rows, the last one shorter
        monkeypatch.setattr(pool, "ITEMS_PER_CU", 1)
        monkeypatch.setattr(pool, "STRIP_BAND_BYTES", 1200)
    full, tfull = _input(rng, name, device)
    views = ((full[..., 1:46], tfull[..., 1:46]),  # unaligned rows, row stride 47
             (full[..., :44], tfull[..., :44]))  # stride 2's other right edge
    for x, tx in views:
        ty, tidx = torch.nn.functional.max_pool2d(tx, k, s, p, ceil_mode=ceil,
                                                  return_indices=True)
        for names in _match_torch(x, ty, tidx, device, k, s, p, ceil):
            if device.is_cpu:
                assert "max_pool2d_fwd_strips" in names, names
        _poison(ty.shape, x.dtype, device)
        _same(_forward(x, k, s, p, ceil, True, relu=True)[0], torch.relu(ty))


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
def test_max_pool2d_strips_leave_other_windows_to_rows(device, rng, monkeypatch, name):
    """Windows that do not overlap down the columns, dilated ones, rows too short for a strip
    and channels_last inputs keep the rows (or items) form; all still match torch."""
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    full, tfull = _input(rng, name, device)
    cases = [(full, tfull, 2, 2, 0, 1), (full, tfull, 3, 1, 1, 2),
             (full[..., :12], tfull[..., :12], 3, 1, 1, 1),
             (full.contiguous(memory_format=ct.channels_last),
              tfull.contiguous(memory_format=torch.channels_last), 3, 1, 1, 1)]
    for x, tx, k, s, p, d in cases:
        ty = torch.nn.functional.max_pool2d(tx, k, s, p, dilation=d)
        _poison(ty.shape, x.dtype, device)
        fields, out_hw = pool.window("max_pool2d", x, k, s, p, d, False)
        with ct.profile() as prof:
            y, _ = pool.max_pool2d(x, fields, out_hw, False)
        _same(y, ty)
        assert "max_pool2d_fwd_strips" not in [e[0] for e in prof.events]


def test_max_pool2d_strips_every_16_bit_pattern(device, rng, monkeypatch):
    """All 65536 float16 and bfloat16 bit patterns (subnormals, infinities, NaNs) through the
    strips' loads, stores and stride-2 even/odd splits: padded 3x3 windows give torch's
    largest."""
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    bits = rng.permutation(65536).astype(np.uint16).reshape(1, 2, 32, 1024)
    for name in ("float16", "bfloat16"):
        t = torch.from_numpy(bits.view(np.int16)).view(getattr(torch, name))
        x = ct.from_numpy(t.float().numpy(), device=device).to(getattr(ct, name))
        for s in (1, 2):
            want = torch.nn.functional.max_pool2d(t, 3, s, 1)
            _poison(want.shape, x.dtype, device)
            _same(_forward(x, 3, s, 1, False, False)[0], want)


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
@pytest.mark.parametrize("k,s,p,ceil", WINDOWS[:4], ids=WINDOW_IDS[:4])
def test_max_pool2d_strips_find_nan_in_every_column(device, rng, monkeypatch, name, k, s, p,
                                                    ceil):
    """One NaN per row, in every column over the planes (the strips' first and last lanes and
    the edges included): the strips compare without NaN checks and do a strip again, NaN-aware,
    where a lane met one; values and argmax (the last NaN) against torch."""
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    full = np.round(rng.standard_normal((2, 3, 13, 45)).astype(np.float32) * 2) / 2
    planes = full.reshape(6, 13, 45)
    for c in range(45):
        planes[c % 6, (c * 5) % 13, c] = np.nan
    planes[0, 3, 10:12] = np.nan  # two in a window: the last one is the argmax
    tx = torch.from_numpy(full).to(getattr(torch, name))
    x = ct.from_numpy(full, device=device).to(getattr(ct, name))
    ty, tidx = torch.nn.functional.max_pool2d(tx, k, s, p, ceil_mode=ceil, return_indices=True)
    _match_torch(x, ty, tidx, device, k, s, p, ceil)


@pytest.mark.parametrize("name", ["float32", "float16"])
@pytest.mark.parametrize("k,s,p,ceil", WINDOWS[:4], ids=WINDOW_IDS[:4])
def test_max_pool2d_strips_over_widths(device, rng, monkeypatch, name, k, s, p, ceil):
    """Rows of 33 to 40, 63 to 65 columns: edge strips that overlap the inside's, stride 2's
    three right edges (W's parity, ceil_mode) and rows too short for them (column by column);
    values and argmax against torch."""
    monkeypatch.setattr(pool, "BAKE_MIN_TAPS", 0)
    for w in (*range(33, 41), 63, 64, 65):
        full = np.round(rng.standard_normal((1, 2, 5, w)).astype(np.float32) * 2) / 2
        full[0, 0, 2, w - 1], full[0, 1, :3, :2] = np.nan, -np.inf
        tx = torch.from_numpy(full).to(getattr(torch, name))
        x = ct.from_numpy(full, device=device).to(getattr(ct, name))
        ty, tidx = torch.nn.functional.max_pool2d(tx, k, s, p, ceil_mode=ceil,
                                                  return_indices=True)
        _poison(ty.shape, x.dtype, device)
        y, idx, _ = _forward(x, k, s, p, ceil, True)
        _same(y, ty)
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
