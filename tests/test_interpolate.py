"""F.interpolate and the Upsample modules: nearest, nearest-exact, (bi)linear, bicubic and area against
float64 numpy references and torch, gradients by finite differences, layouts, bad input."""
import math

import numpy as np
import pytest

import cltensor
import cltensor.nn.functional as F
from cltensor import nn
from cltensor.ops import resample
from cltensor.testing import assert_close, gradcheck, random_array

F32 = {"rtol": 1e-5, "atol": 1e-6}
# bicubic sums 16 products with weights up to 1.2 and of both signs: float32 outputs of about 1
# carry absolute errors of a few 1e-7, more where the sum cancels
F32_CUBIC = {"rtol": 1e-5, "atol": 5e-6}


def _nearest_index(n, m, factor, exact):
    """torch's source index per output, in float32 as torch computes it."""
    scale = np.float32(1.0 / factor) if factor else np.float32(n) / np.float32(m)
    d = np.arange(m)
    if exact:
        return np.minimum(np.floor((d + np.float32(0.5)).astype(np.float32) * scale), n - 1)
    if m == n:
        return d
    if m == 2 * n:
        return d // 2
    return np.minimum(np.floor(d.astype(np.float32) * scale), n - 1).astype(int)


def _scale(n, m, factor, align):
    if align:
        return (n - 1) / (m - 1) if m > 1 else 0.0
    return 1.0 / factor if factor else n / m


def _linear_matrix(n, m, factor, align):
    """The (m, n) matrix of bilinear weights along one dim, in float64."""
    scale = _scale(n, m, factor, align)
    w = np.zeros((m, n))
    for d in range(m):
        s = scale * d if align else max(scale * (d + 0.5) - 0.5, 0.0)
        i0 = int(s)
        i1 = i0 + (i0 < n - 1)
        w[d, i0] += 1 - (s - i0)
        w[d, i1] += s - i0
    return w


def _keys(d, a=-0.75):
    """Keys' cubic convolution kernel at distance d."""
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a if d < 2 else 0.0


def _cubic_matrix(n, m, factor, align):
    """The (m, n) matrix of bicubic weights along one dim: four sources around each output's
    position, clamped to the edges (a clamped source adds its weight to the edge's)."""
    scale = _scale(n, m, factor, align)
    w = np.zeros((m, n))
    for d in range(m):
        s = scale * d if align else scale * (d + 0.5) - 0.5
        i0 = math.floor(s)
        for k in range(-1, 3):
            w[d, min(max(i0 + k, 0), n - 1)] += _keys(s - (i0 + k))
    return w


def reference(x, out_hw, factors, mode, align=False):
    x = x.astype(np.float64)
    (h, w), factors = x.shape[2:], factors or (None, None)
    if mode in ("bilinear", "bicubic"):
        matrix = _linear_matrix if mode == "bilinear" else _cubic_matrix
        mh = matrix(h, out_hw[0], factors[0], align)
        mw = matrix(w, out_hw[1], factors[1], align)
        return np.einsum("ah,nchw,bw->ncab", mh, x, mw)
    exact = mode == "nearest-exact"
    rows = _nearest_index(h, out_hw[0], factors[0], exact).astype(int)
    cols = _nearest_index(w, out_hw[1], factors[1], exact).astype(int)
    return x[:, :, rows][:, :, :, cols]


# (size or None, scale_factor or None, mode, align_corners): up, down, odd ratios, one output
CASES = [
    (None, 2, "nearest", None), ((7, 5), None, "nearest", None), (None, (0.5, 2.5), "nearest", None),
    ((13, 3), None, "nearest-exact", None), (None, (1.7, 0.6), "nearest-exact", None),
    (None, 2, "bilinear", None), (None, (1.7, 0.6), "bilinear", None),
    ((9, 11), None, "bilinear", True), ((1, 4), None, "bilinear", True),
    ((3, 17), None, "bilinear", False),
    (None, 2, "bicubic", None), (None, (1.7, 0.6), "bicubic", None),
    ((9, 11), None, "bicubic", True), ((1, 4), None, "bicubic", True),
    ((3, 17), None, "bicubic", False), ((2, 1), None, "bicubic", False),
    (None, (4, 5), "bicubic", None),  # outputs more than two apart read the same input
]


def test_against_reference(device, rng):
    a = random_array(rng, (2, 3, 6, 8))
    views = [cltensor.from_numpy(a, device=device),
             cltensor.from_numpy(a, device=device).contiguous(memory_format=cltensor.channels_last),
             cltensor.from_numpy(np.ascontiguousarray(a.transpose(0, 1, 3, 2)),
                                 device=device).transpose(2, 3)]
    for size, factor, mode, align in CASES:
        y0 = F.interpolate(views[0], size, factor, mode, align)
        factors = None if size else (factor if isinstance(factor, tuple) else (factor,) * 2)
        want = reference(a, y0.shape[2:], factors, mode, bool(align))
        for i, x in enumerate(views):
            y = F.interpolate(x, size, factor, mode, align)
            assert_close(y, want, **(F32_CUBIC if mode == "bicubic" else F32)), \
                (size, factor, mode, i)
        assert F.interpolate(views[1], size, factor, mode, align).is_contiguous(
            memory_format=cltensor.channels_last)


def test_gradients(device, rng):
    """Finite differences in float64 for each mode, up- and downsampling, and the 1-d modes."""
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    x = cltensor.from_numpy(rng.standard_normal((1, 2, 4, 5)), device=device).requires_grad_()
    for size, factor, mode, align in CASES:
        assert gradcheck(lambda t: F.interpolate(t, size, factor, mode, align), [x]), \
            (size, factor, mode)
    x1 = cltensor.from_numpy(rng.standard_normal((2, 2, 5)), device=device).requires_grad_()
    for kwargs in (dict(scale_factor=2.0, mode="linear"), dict(size=3, mode="nearest"),
                   dict(size=8, mode="linear", align_corners=True), dict(size=2, mode="area")):
        assert gradcheck(lambda t: F.interpolate(t, **kwargs), [x1]), kwargs


def test_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    dtype = np.float64 if device.has_fp64 else np.float32
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else F32
    cases = [dict(size=s, scale_factor=f, mode=m, align_corners=a) for s, f, m, a in CASES]
    cases += [dict(scale_factor=3, mode="bilinear", recompute_scale_factor=True),
              dict(size=(4, 3), mode="area")]
    for kwargs in cases:
        a = rng.standard_normal((2, 3, 6, 8)).astype(dtype)
        x = cltensor.from_numpy(a, device=device).requires_grad_()
        t = torch.tensor(a, requires_grad=True)
        y, ty = F.interpolate(x, **kwargs), torch.nn.functional.interpolate(t, **kwargs)
        assert_close(y, ty.detach().numpy(), **tol)
        g = rng.standard_normal(ty.shape).astype(dtype)
        y.backward(cltensor.from_numpy(g, device=device))
        ty.backward(torch.tensor(g))
        assert_close(x.grad, t.grad.numpy(), **tol)
    a = rng.standard_normal((2, 3, 7)).astype(dtype)
    for kwargs in (dict(scale_factor=2, mode="linear"), dict(size=11, mode="nearest-exact")):
        assert_close(F.interpolate(cltensor.from_numpy(a, device=device), **kwargs),
                     torch.nn.functional.interpolate(torch.tensor(a), **kwargs).numpy(), **tol)


def test_bad_input_and_empty(device):
    x = cltensor.zeros(1, 2, 4, 4, device=device)
    cases = [
        (dict(), "exactly one of size and scale_factor"),
        (dict(size=4, scale_factor=2), "exactly one of size and scale_factor"),
        (dict(size=(4, 0)), "size must be a positive int"),
        (dict(scale_factor=0.1), r"gives an empty output \(0, 0\)"),
        (dict(scale_factor=-2), "scale_factor must be a positive number"),
        (dict(scale_factor=2, mode="linear"), "mode 'linear' is not supported for 4-d"),
        (dict(scale_factor=2, align_corners=True), "align_corners can only be set"),
        (dict(scale_factor=2, mode="bilinear", antialias=True), "antialias"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            F.interpolate(x, **kwargs)
    with pytest.raises(ValueError, match="mode 'bicubic' is not supported for 3-d input"):
        F.interpolate(cltensor.zeros(1, 2, 4, device=device), scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="3-d .* or 5-d"):
        F.interpolate(cltensor.zeros(1, 2, 2, 2, 2, 2, device=device), scale_factor=2)
    with pytest.raises(TypeError, match="floating point"):
        F.interpolate(cltensor.zeros(1, 1, 2, 2, dtype=cltensor.int32, device=device), size=3)
    assert F.interpolate(cltensor.zeros(0, 2, 4, 4, device=device), scale_factor=2).shape == \
        (0, 2, 8, 8)


def test_scales_follow_torch():
    """The step per output as torch computes it: float32 for the nearest modes, the input's
    type for bilinear, 1 / scale_factor when one is given."""
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert resample.scales((6, 6), (15, 15), (2.5, 2.5), "nearest", False, f64)[0][0] == \
        np.float32(1 / 2.5)
    (s32, t), _ = resample.scales((6, 6), (7, 7), None, "bilinear", False, f64)
    assert t == 6 / 7 and t.dtype == np.float64 and s32 == np.float32(6 / 7)
    assert resample.scales((6, 6), (1, 9), None, "bilinear", True, f32)[0][1] == 0
    assert math.isclose(resample.scales((6, 6), (1, 9), None, "bilinear", True, f32)[1][1],
                        5 / 8)


def test_upsample_modules(device, rng):
    a = random_array(rng, (1, 2, 3, 4))
    x = cltensor.from_numpy(a, device=device)
    up = nn.Upsample(scale_factor=2, mode="bilinear")
    assert repr(up) == "Upsample(scale_factor=2.0, mode='bilinear')"
    assert_close(up(x), F.interpolate(x, scale_factor=2, mode="bilinear").numpy(), rtol=0, atol=0)
    assert_close(nn.UpsamplingNearest2d(size=(6, 8))(x), reference(a, (6, 8), None, "nearest"))
    assert_close(nn.UpsamplingBilinear2d(scale_factor=2)(x),
                 reference(a, (6, 8), None, "bilinear", True), **F32)
    assert repr(nn.Upsample(size=5)) == "Upsample(size=5, mode='nearest')"
