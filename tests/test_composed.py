"""The composed tensor ops (cltensor/composed/composed.py): lerp, addcmul, addcdiv, unbind, var_mean,
std_mean, kthvalue, median, unique, against float64 numpy references and torch, gradients by
finite differences, NaN, edge sizes and bad input."""
import numpy as np
import pytest

import cltensor
from cltensor.testing import assert_close, gradcheck, random_array

F64 = {"rtol": 1e-12, "atol": 1e-12}


def T(a, device, grad=False):
    t = cltensor.from_numpy(np.array(a, order="C"), device=device)  # 0-d stays 0-d
    return t.requires_grad_() if grad else t


def _fp(device):
    return np.float64 if device.has_fp64 else np.float32


def _check_picked(result, a, dim, values, keepdim=False):
    """values as expected, and the indices point at them in a along dim."""
    got_v, got_i = result.values.numpy(), result.indices.numpy()
    want = values if not keepdim else np.expand_dims(values, dim)
    assert_close(got_v, want, rtol=0, atol=0)
    idx = got_i if keepdim else np.expand_dims(got_i, dim)
    picked = np.take_along_axis(a, idx, dim)
    np.testing.assert_array_equal(picked if keepdim else picked.squeeze(dim), got_v)


@pytest.mark.parametrize("shape, dim", [((7,), 0), ((3, 4, 5), 1), ((3, 4, 6), -1), ((2, 1), 1)])
def test_median_and_kthvalue(device, rng, shape, dim):
    a = random_array(rng, shape).astype(_fp(device))  # distinct values: unique indices
    x = T(a, device)
    n = a.shape[dim]
    srt = np.sort(a, dim)
    for keepdim in (False, True):
        _check_picked(cltensor.median(x, dim, keepdim), a, dim, np.take(srt, (n - 1) // 2, dim),
                      keepdim)
        for k in {1, (n + 1) // 2, n}:
            _check_picked(x.kthvalue(k, dim, keepdim), a, dim, np.take(srt, k - 1, dim), keepdim)
    assert x.median().item() == np.sort(a.ravel())[(a.size - 1) // 2]


def test_median_propagates_nan(device, rng):
    a = random_array(rng, (3, 6)).astype(_fp(device))
    a[1, 4] = a[1, 2] = np.nan
    m = T(a, device).median(1)
    assert np.isnan(m.values.numpy()[1]) and m.indices.numpy()[1] == 2  # the first NaN
    np.testing.assert_array_equal(m.values.numpy()[[0, 2]], np.sort(a[[0, 2]], 1)[:, 2])
    assert np.isnan(T(a, device).median().item())
    # kthvalue sorts NaN as the largest
    assert np.isnan(T(a, device).kthvalue(6, 1).values.numpy()[1])
    assert T(a, device).kthvalue(4, 1).values.numpy()[1] == np.sort(a[1])[3]


def test_median_kthvalue_edges_and_errors(device):
    s = cltensor.tensor(3.0, device=device)
    assert cltensor.median(s).item() == 3.0
    assert [v.item() for v in cltensor.median(s, 0)] == [3.0, 0]
    assert [v.item() for v in cltensor.kthvalue(s, 1)] == [3.0, 0]
    assert np.isnan(cltensor.median(cltensor.zeros(0, device=device)).item())
    with pytest.raises(ValueError, match=r"kthvalue: k \(3\) out of range for a dim of size 2"):
        cltensor.kthvalue(cltensor.zeros(2, device=device), 3)
    with pytest.raises(TypeError, match="kthvalue: k must be an int"):
        cltensor.kthvalue(cltensor.zeros(2, device=device), 1.0)
    with pytest.raises(ValueError, match=r"median: dim 1 of input of shape \(2, 0\) is empty"):
        cltensor.median(cltensor.zeros(2, 0, device=device), 1)
    with pytest.raises(IndexError, match="dimension out of range"):
        cltensor.median(cltensor.zeros(2, device=device), 1)
    ints = cltensor.tensor([5, 1, 4, 2], device=device)
    assert ints.median().item() == 2 and ints.kthvalue(3).values.item() == 4


def test_gradients(device, rng):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64")
    x = T(rng.standard_normal((3, 4)), device, True)
    y = T(rng.standard_normal((3, 4)), device, True)
    w = T(rng.uniform(0, 1, (3, 4)), device, True)
    z = T(rng.uniform(1, 2, (3, 4)), device, True)
    assert gradcheck(lambda a: cltensor.median(a, 1).values, [x])
    assert gradcheck(lambda a: a.median(), [x])
    assert gradcheck(lambda a: a.kthvalue(2, 0, keepdim=True).values, [x])
    for weight in (0.3, 0.8):
        assert gradcheck(lambda a, b: cltensor.lerp(a, b, weight), [x, y])
    assert gradcheck(lambda a, b, c: a.lerp(b, c), [x, y, w])
    assert gradcheck(lambda a, b, c: cltensor.addcmul(a, b, c, value=-0.5), [x, y, w])
    assert gradcheck(lambda a, b, c: cltensor.addcdiv(a, b, c, value=2), [x, y, z])
    assert gradcheck(lambda a: cltensor.var_mean(a, 1), [x])
    assert gradcheck(lambda a: cltensor.std_mean(a, 0, correction=0), [x])
    assert gradcheck(lambda a: a.unbind(1)[2] * 3 + a.unbind(1)[0], [x])


def test_pointwise_composites(device, rng):
    a, b, c = (random_array(rng, s).astype(_fp(device)) for s in ((3, 4), (3, 4), (4,)))
    x, y, z = T(a, device), T(b, device), T(c, device)
    tol = F64 if _fp(device) == np.float64 else {"rtol": 1e-5, "atol": 1e-6}
    for weight in (0.25, 0.5, 0.9, -1.5):
        want = a + weight * (b - a) if abs(weight) < 0.5 else b - (b - a) * (1 - weight)
        assert_close(cltensor.lerp(x, y, weight), want, **tol)
    wt = np.abs(c)  # a tensor weight, broadcast
    want = np.where(wt < 0.5, a + wt * (b - a), b - (b - a) * (1 - wt))
    assert_close(x.lerp(y, z.abs()), want, **tol)
    assert_close(cltensor.addcmul(x, y, z, value=0.5), a + 0.5 * b * c, **tol)
    assert_close(x.addcdiv(y, z, value=-2), a - 2 * b / c, **tol)
    parts = x.unbind(1)
    assert len(parts) == 4 and all(p.storage is x.storage for p in parts)
    for i, p in enumerate(parts):
        assert_close(p, a[:, i], rtol=0, atol=0)
    for fn, ref in ((cltensor.var_mean, np.var), (cltensor.std_mean, np.std)):
        s, m = fn(x, 1, keepdim=True)
        assert_close(s, ref(a, 1, ddof=1, keepdims=True), **tol)
        assert_close(m, a.mean(1, keepdims=True), **tol)


def test_pointwise_composites_bad_input(device):
    ints = cltensor.tensor([1, 2], device=device)
    f = cltensor.ones(2, device=device)
    with pytest.raises(TypeError, match="addcdiv: integer division is not supported"):
        cltensor.addcdiv(ints, ints, ints)
    with pytest.raises(TypeError, match="lerp: expected a floating point input, got int64"):
        cltensor.lerp(ints, ints, 0.5)
    with pytest.raises(TypeError, match="lerp: weight must be a number or a tensor, got str"):
        cltensor.lerp(f, f, "0.5")
    with pytest.raises(TypeError, match="addcmul: tensor2 must be a tensor, got list"):
        cltensor.addcmul(f, f, [1.0, 2.0])
    with pytest.raises(IndexError, match="unbind: a 0-d tensor has no dim to unbind"):
        cltensor.tensor(1.0, device=device).unbind()


def _numpy_unique(a):
    """(values, inverse, counts) with every NaN distinct, as torch."""
    flat = a.ravel()
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    change = np.ones(len(s), bool)
    change[1:] = ~(s[1:] == s[:-1])
    group = np.cumsum(change) - 1
    inverse = np.empty(len(s), np.int64)
    inverse[order] = group
    starts = np.flatnonzero(change)
    return s[change], inverse.reshape(a.shape), np.diff(np.append(starts, len(s)))


def test_unique(device, rng):
    cases = [rng.integers(-3, 4, (4, 7)), np.round(rng.standard_normal(40), 1),
             np.array([np.nan, 1.0, np.nan, 1.0, -2.0]), np.array([True, False, True]),
             np.zeros((0, 3)), np.array(5)]
    for a in cases:
        a = a.astype(np.float32) if a.dtype == np.float64 and not device.has_fp64 else a
        values, inverse, counts = cltensor.unique(T(a, device), return_inverse=True,
                                                  return_counts=True)
        want = _numpy_unique(a)
        np.testing.assert_array_equal(values.numpy(), want[0])
        assert values.dtype == np.dtype(a.dtype)
        np.testing.assert_array_equal(inverse.numpy(), want[1])
        np.testing.assert_array_equal(counts.numpy(), want[2])
        np.testing.assert_array_equal(T(a, device).unique(sorted=False).numpy(), want[0])


def test_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    dtype = _fp(device)
    tol = F64 if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}
    cases = [
        ("median", lambda m, a: m.median(a, 1).values),
        ("median all", lambda m, a: m.median(a)),
        ("kthvalue", lambda m, a: m.kthvalue(a, 3, 0, True).values),
        ("lerp", lambda m, a: m.lerp(a, a.flip(0) * 2, 0.7)),
        ("lerp tensor", lambda m, a: m.lerp(a, a * 3, (a * 0.4).sigmoid())),
        ("addcmul", lambda m, a: m.addcmul(a, a * 2, a.flip(1), value=0.3)),
        ("addcdiv", lambda m, a: m.addcdiv(a, a.flip(0), a * a + 1, value=-1)),
        ("var_mean", lambda m, a: m.var_mean(a, 0)[0] * m.var_mean(a, 0)[1]),
        ("std_mean", lambda m, a: m.std_mean(a, 1, keepdim=True)[0]),
        ("unbind", lambda m, a: m.unbind(a, 1)[1] * 2),
    ]
    for name, fn in cases:
        a = rng.standard_normal((5, 4)).astype(dtype)
        x, t = T(a, device, True), torch.tensor(a, requires_grad=True)
        y, ty = fn(cltensor, x), fn(torch, t)
        assert_close(y, ty.detach().numpy(), **tol), name
        g = rng.standard_normal(ty.shape).astype(dtype)
        y.backward(T(g, device))
        ty.backward(torch.tensor(g))
        assert_close(x.grad, t.grad.numpy(), **tol), name
    a = rng.integers(0, 6, (3, 5))
    for got, want in zip(cltensor.unique(T(a, device), return_inverse=True, return_counts=True),
                         torch.unique(torch.tensor(a), return_inverse=True, return_counts=True)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_new_tensors_and_conveniences(device, rng):
    a = random_array(rng, (2, 3, 4))
    x = T(a, device)
    assert x.new_zeros(2, 3).shape == (2, 3) and x.new_zeros((2, 3)).dtype == x.dtype
    np.testing.assert_array_equal(x.new_ones(3, dtype=cltensor.int64).numpy(), [1, 1, 1])
    np.testing.assert_array_equal(x.new_full((2,), 7.5).numpy(), [7.5, 7.5])
    assert x.new_empty(4).shape == (4,) and x.new_empty(4).device == device
    assert x.new_tensor([1, 2]).dtype == x.dtype and x.new_zeros(2, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match=r"new_zeros: negative dimension -1 in size \(2, -1\)"):
        x.new_zeros(2, -1)
    with pytest.raises(TypeError, match="new_full: sizes must be ints, got 2.0"):
        x.new_full((2.0,), 1.0)
    assert x.type_as(cltensor.tensor([1], device=device)).dtype == cltensor.int64
    assert x.nelement() == 24 and x.transpose(0, 2).ravel().shape == (24,)
    assert_close(x.transpose(0, 2).ravel(), a.transpose(2, 1, 0).ravel(), rtol=0, atol=0)
    for src, dst in (((0, 1), (2, 0)), (0, -1), ((1, 2), (0, 1)), (-1, 0)):
        y = x.movedim(src, dst)
        assert y.storage is x.storage
        assert_close(y, np.moveaxis(a, src, dst), rtol=0, atol=0)
    assert_close(cltensor.moveaxis(x, 2, 0), np.moveaxis(a, 2, 0), rtol=0, atol=0)
    assert_close(x.swapaxes(0, 2), np.swapaxes(a, 0, 2), rtol=0, atol=0)
    with pytest.raises(ValueError, match="movedim: source .* must have the same number of dims"):
        x.movedim((0, 1), 2)
    with pytest.raises(ValueError, match="movedim: repeated dim"):
        x.movedim((0, 0), (1, 2))
    assert_close(cltensor.msort(x), np.sort(a, 0), rtol=0, atol=0)
    assert_close(x.clamp_min(0.1), np.maximum(a, 0.1), rtol=0, atol=0)
    assert_close(x.clamp_max(0.1), np.minimum(a, 0.1), rtol=0, atol=0)


def test_nan_reductions_and_comparisons(device, rng):
    a = random_array(rng, (3, 5)).astype(_fp(device))
    a[0, 1] = a[2, :] = np.nan
    x = T(a, device)
    tol = {"rtol": 1e-6, "atol": 1e-6}
    assert_close(x.nansum(), np.nansum(a), **tol)
    assert_close(x.nansum(1, keepdim=True), np.nansum(a, 1, keepdims=True), **tol)
    rows = [np.mean(r[~np.isnan(r)]) if not np.isnan(r).all() else np.nan for r in a]
    assert_close(cltensor.nanmean(x, 1), np.array(rows), **tol)  # an all-NaN row gives NaN
    with pytest.raises(TypeError, match="nanmean: expected a floating point input"):
        cltensor.nanmean(cltensor.tensor([1, 2], device=device))
    p = T(np.array([1.0, np.inf, np.nan, 1e-9, -np.inf, 2.0]), device)
    q = T(np.array([1.0 + 1e-7, np.inf, np.nan, 0.0, np.inf, 2.1]), device)
    np.testing.assert_array_equal(p.isclose(q).numpy(), [True, True, False, True, False, False])
    np.testing.assert_array_equal(cltensor.isclose(p, q, equal_nan=True).numpy(),
                                  [True, True, True, True, False, False])
    np.testing.assert_array_equal(p.isclose(q, atol=0.2).numpy(),
                                  [True, True, False, True, False, True])
    assert not cltensor.allclose(p, q) and cltensor.allclose(p[:2], q[:2])
    assert cltensor.equal(x[:2, 2:], x[:2, 2:]) and not cltensor.equal(x, x)  # NaN != NaN
    assert not cltensor.equal(x[:1], x[:2])
    with pytest.raises(ValueError, match="isclose: rtol .* must be non-negative"):
        p.isclose(q, rtol=-1)
    ints = T(np.array([[0, 3, 0], [1, 0, 2]]), device)
    np.testing.assert_array_equal(ints.count_nonzero(0).numpy(), [1, 1, 1])
    assert cltensor.count_nonzero(ints).item() == 3
