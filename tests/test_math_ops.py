"""The math ops beyond the basics: atan2, hypot, fmod, logaddexp(2), copysign, xlogy, heaviside;
frac, sgn, signbit, nan_to_num, deg2rad, rad2deg, logit, isposinf, isneginf, isreal; the bitwise
ops and their operators. Against numpy in float64 (special values included), torch forward and
backward, finite differences; each test groups many ops so that few kernels are built."""
import numpy as np
import pytest

import cltensor as ct
from cltensor.testing import assert_close, gradcheck

INF, NAN = np.inf, np.nan
TOL = {np.dtype(np.float32): (4e-6, 1e-6), np.dtype(np.float64): (1e-12, 1e-14)}


def _xlogy(x, y):
    return np.where(np.isnan(y), y, np.where(x == 0, 0.0, x * np.log(y)))


def _heaviside(x, values):  # torch's: NaN gives 0 (numpy's gives NaN)
    return np.where(x == 0, values, (x > 0).astype(np.float64))


def _logit(x, eps=None):
    if eps is not None:
        x = np.where(x < eps, eps, np.where(x > 1 - eps, 1 - eps, x))  # NaN stays
    return np.log(x / (1 - x))


BINARY = {"atan2": np.arctan2, "hypot": np.hypot, "fmod": np.fmod, "logaddexp": np.logaddexp,
          "logaddexp2": np.logaddexp2, "copysign": np.copysign, "xlogy": _xlogy,
          "heaviside": _heaviside}
UNARY = {"frac": lambda x: x - np.trunc(x), "sgn": lambda x: np.nan_to_num(np.sign(x)),
         "signbit": np.signbit, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg,
         "isposinf": np.isposinf, "isneginf": np.isneginf}
DIFFERENTIABLE = ["atan2", "hypot", "fmod", "logaddexp", "logaddexp2", "copysign", "xlogy"]


def _nonzero(rng, shape, low=0.25, high=3.0):
    """Random magnitudes in [low, high) with random signs: never zero."""
    return rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)


def _operands(rng):
    """a: a (3, 1, 4) strided view of a (3, 2, 8) array; b: (7, 1). Both hold special values, so
    broadcasting pairs every special value of one with every value of the other."""
    full = _nonzero(rng, (3, 2, 8))
    full[0, 0, ::2] = [INF, -INF, NAN, -0.0]
    full[1, 0, 0] = 0.0
    b = np.concatenate([_nonzero(rng, 4), [-0.0, INF, NAN]]).reshape(7, 1)
    return full, b


def _check(out, ref, dtype):
    """Close in value, NaN in the same places, and the same sign bit where not NaN (-0.0)."""
    rtol, atol = TOL[np.dtype(dtype)]
    got = out.numpy()
    assert_close(got, ref, rtol=rtol, atol=atol)
    ok = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(ref[ok]))


def test_binary_against_numpy(device, rng, fp_dtypes):
    full, b = _operands(rng)
    for dtype in fp_dtypes:
        a_cast, b_cast = full.astype(dtype), b.astype(dtype)
        ta = ct.from_numpy(a_cast, device=device)[:, :1, ::2]
        tb = ct.from_numpy(b_cast, device=device)
        assert not ta.is_contiguous()
        x, y = a_cast[:, :1, ::2].astype(np.float64), b_cast.astype(np.float64)
        with np.errstate(all="ignore"):
            for name, ref in BINARY.items():
                out = getattr(ct, name)(ta, tb)
                assert out.dtype == dtype and out.shape == (3, 7, 4), name
                _check(out, ref(x, y), dtype)


def test_unary_against_numpy(device, rng, fp_dtypes):
    full, _ = _operands(rng)
    u = np.concatenate([rng.uniform(0.02, 0.98, 9), [0.0, 1.0, NAN, -0.5, 1.5, INF]])
    for dtype in fp_dtypes:
        t = ct.from_numpy(full.astype(dtype), device=device)[:, :1, ::2]
        x = full.astype(dtype)[:, :1, ::2]
        x64 = x.astype(np.float64)
        with np.errstate(all="ignore"):
            for name, ref in UNARY.items():
                out, expect = getattr(ct, name)(t), ref(x64)
                if expect.dtype == bool:
                    assert_close(out, expect, dtype=np.bool_)
                else:
                    assert out.dtype == dtype, name
                    _check(out, expect, dtype)
            # nan_to_num: the dtype's own largest / lowest finite values by default
            assert_close(ct.nan_to_num(t), np.nan_to_num(x), dtype=dtype)
            assert_close(t.nan_to_num(1.5, posinf=7.0, neginf=-9.0),
                         np.nan_to_num(x64, nan=1.5, posinf=7.0, neginf=-9.0), dtype=dtype)
            tu = ct.from_numpy(u.astype(dtype), device=device)
            u64 = u.astype(dtype).astype(np.float64)
            _check(ct.logit(tu), _logit(u64), dtype)
            _check(tu.logit(eps=0.1), _logit(u64, dtype.type(0.1)), dtype)


def test_integer_and_bool_inputs(device):
    i = ct.tensor([[3, -4, 5, 0]], device=device)
    i32 = i.to(ct.int32)
    flags = ct.tensor([True, False], device=device)
    # float ops on integers give float32, as torch (atan2 of int and bool tensors too)
    for out, ref in [(ct.atan2(i, i32.T), np.arctan2([[3, -4, 5, 0]], [[3], [-4], [5], [0]])),
                     (ct.copysign(i, -1), -np.abs([[3, -4, 5, 0]])),
                     (ct.xlogy(i, 2), np.array([[3, -4, 5, 0]]) * np.log(2)),
                     (ct.atan2(flags, flags), np.arctan2([1, 0], [1, 0])),
                     (ct.deg2rad(i), np.deg2rad([[3, -4, 5, 0]])),
                     (ct.logit(flags), [INF, -INF])]:
        assert out.dtype == ct.float32
        assert_close(out, np.asarray(ref, np.float64), rtol=2e-6)
    assert_close(ct.xlogy(2, ct.tensor([1.0, 4.0], device=device)), 2 * np.log([1.0, 4.0]),
                 rtol=2e-6)  # a number first, as torch
    assert_close(ct.sgn(i32), np.sign([[3, -4, 5, 0]]), dtype=np.int32)
    assert_close(ct.signbit(i32), [[False, True, False, False]])
    assert_close(ct.signbit(flags), [False, False])
    assert_close(i.nan_to_num(), i.numpy(), dtype=np.int64)
    assert_close(ct.isposinf(i) | ct.isneginf(i), np.zeros((1, 4), bool))
    assert_close(ct.isreal(i), np.ones((1, 4), bool))
    assert_close(ct.heaviside(i32, ct.tensor([7], dtype=ct.int32, device=device)), [[1, 0, 1, 7]],
                 dtype=np.int32)


def test_fmod_integers_and_signs(device, rng):
    for dtype in (np.int32, np.int64):
        a = rng.integers(-50, 50, (4, 6)).astype(dtype)
        b = _nonzero(rng, (6,), 1, 9).astype(dtype)
        ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
        assert_close(ct.fmod(ta, tb), np.fmod(a, b), dtype=dtype)  # the dividend's sign
        assert_close(ta.fmod(-7), np.fmod(a, -7), dtype=dtype)
        assert_close(ta.remainder(tb), np.remainder(a, b), dtype=dtype)  # the divisor's sign
        with pytest.raises(ZeroDivisionError, match="fmod: integer division by zero"):
            ct.fmod(ta, tb * 0)
        with pytest.raises(ZeroDivisionError, match="fmod: integer division by zero"):
            ta.fmod(0)
    x = ct.tensor([5.0, -5.0, 5.0, -5.0, -4.0], device=device)
    out = ct.fmod(x, ct.tensor([3.0, 3.0, -3.0, -3.0, 2.0], device=device))
    _check(out, np.array([2.0, -2.0, 2.0, -2.0, -0.0]), np.float32)
    assert np.isnan(ct.fmod(x, 0.0).numpy()).all()  # a float divisor of zero: NaN, no error


def _shift_left(a, b, bits):
    out = a.astype(np.int64) << np.clip(b, 0, bits - 1).astype(np.int64)
    return np.where((b < 0) | (b >= bits), 0, out).astype(a.dtype)


def _shift_right(a, b, bits):
    out = a >> np.clip(b, 0, bits - 1).astype(a.dtype)
    return np.where((b < 0) | (b >= bits), np.where(a < 0, -1, 0), out).astype(a.dtype)


def test_bitwise_ops_and_operators(device, rng):
    for dtype in (np.int32, np.int64):
        bits = np.dtype(dtype).itemsize * 8
        a = rng.integers(-1000, 1000, (3, 5)).astype(dtype)
        b = rng.integers(-1000, 1000, (5,)).astype(dtype)
        ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
        for fn, ref in [(ct.bitwise_and, np.bitwise_and), (ct.bitwise_or, np.bitwise_or),
                        (ct.bitwise_xor, np.bitwise_xor)]:
            assert_close(fn(ta, tb), ref(a, b), dtype=dtype)
            assert_close(fn(ta, 0x2A5), ref(a, dtype(0x2A5)), dtype=dtype)
        assert_close(ta & tb, a & b, dtype=dtype)
        assert_close(ta | tb, a | b, dtype=dtype)
        assert_close(ta ^ tb, a ^ b, dtype=dtype)
        assert_close(~ta, ~a, dtype=dtype)
        assert_close(6 & ta, 6 & a, dtype=dtype)
        counts = np.array([0, 1, bits - 1, bits, bits + 3, -1, -5, 7], dtype)
        tc = ct.from_numpy(counts, device=device)
        wide = np.concatenate([a.ravel(), [np.iinfo(dtype).min]])[:8].astype(dtype)
        tw = ct.from_numpy(wide, device=device)
        assert_close(tw << tc, _shift_left(wide, counts, bits), dtype=dtype)
        assert_close(tw >> tc, _shift_right(wide, counts, bits), dtype=dtype)
        assert_close(3 << tc, _shift_left(np.full(8, 3, dtype), counts, bits), dtype=dtype)
        t = ta.clone()
        t &= tb
        t |= 4
        t ^= tb
        t <<= 2
        t >>= 1
        assert_close(t, (((a & b) | 4) ^ b) << 2 >> 1, dtype=dtype)
        t.bitwise_not_()
        assert_close(t, ~((((a & b) | 4) ^ b) << 2 >> 1), dtype=dtype)
    p = ct.tensor([True, True, False, False], device=device)
    q = ct.tensor([True, False, True, False], device=device)
    for got, ref in [(p & q, [1, 0, 0, 0]), (p | q, [1, 1, 1, 0]), (p ^ q, [0, 1, 1, 0]),
                     (~p, [0, 0, 1, 1]), (ct.bitwise_not(q), [0, 1, 0, 1]),
                     (ct.bitwise_and(p, True), [1, 1, 0, 0])]:
        assert_close(got, np.array(ref, bool), dtype=np.bool_)
    mixed = p & ct.tensor([3, 3, 3, 3], device=device)  # bool with int: an int result, as torch
    assert_close(mixed, [1, 1, 0, 0], dtype=np.int64)


def test_bad_input_raises(device):
    f = ct.tensor([1.0, 2.0], device=device)
    i = ct.tensor([1, 2], device=device)
    flags = ct.tensor([True, False], device=device)
    for call, op in [(lambda: ct.bitwise_and(f, i), "bitwise_and"), (lambda: f | 1, "bitwise_or"),
                     (lambda: i ^ 1.5, "bitwise_xor"), (lambda: ~f, "bitwise_not"),
                     (lambda: f << 1, "bitwise_left_shift"),
                     (lambda: flags >> 1, "bitwise_right_shift"),
                     (lambda: i.bitwise_and_(f), "bitwise_and")]:
        with pytest.raises(TypeError, match=f"{op}: expected integer"):
            call()
    with pytest.raises(TypeError, match="float32"):
        ct.bitwise_xor(i, f)
    with pytest.raises(TypeError, match="frac: expected a floating-point tensor, got int64"):
        ct.frac(i)
    for call, op in [(lambda: ct.atan2(f, "x"), "atan2"), (lambda: ct.frac([1.0]), "frac"),
                     (lambda: ct.logit(0.5), "logit"), (lambda: ct.nan_to_num(None), "nan_to_num"),
                     (lambda: ct.bitwise_and(i, [1]), "bitwise_and"),
                     (lambda: ct.signbit(1.0), "signbit")]:
        with pytest.raises(TypeError, match=op):
            call()
    with pytest.raises(TypeError, match="can't be cast"):
        i.atan2_(i)  # a float result into an integer tensor


def test_out_and_inplace(device, rng, fp_dtypes):
    dtype = fp_dtypes[-1]
    a, b = _nonzero(rng, (2, 3)).astype(dtype), _nonzero(rng, (3,)).astype(dtype)
    ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    out = ct.empty((2, 3), dtype=dtype, device=device)
    assert ct.hypot(ta, tb, out=out) is out
    assert_close(out, np.hypot(a, b), *TOL[np.dtype(dtype)])
    for name in ["atan2", "arctan2", "hypot", "fmod", "copysign", "xlogy", "heaviside"]:
        t = ta.clone()
        assert getattr(t, name + "_")(tb) is t
        assert_close(t, getattr(ct, name)(ta, tb), dtype=dtype)
    for name, args in [("frac", ()), ("sgn", ()), ("deg2rad", ()), ("rad2deg", ()),
                       ("logit", (0.2,)), ("nan_to_num", (0.0, 1.0, -1.0))]:
        t = ta.clone()
        assert getattr(t, name + "_")(*args) is t
        assert_close(t, getattr(ct, name)(ta, *args), dtype=dtype)


@pytest.fixture
def f64(device):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64: finite-difference checks need it")
    return lambda a: ct.from_numpy(np.asarray(a, np.float64), device=device).requires_grad_()


def test_gradients_by_finite_differences(device, rng, f64):
    a, b = _nonzero(rng, (2, 1, 3), 0.3, 2.0), _nonzero(rng, (4, 1), 0.3, 2.0)
    for name in DIFFERENTIABLE:
        ta, tb = f64(a), f64(np.abs(b) if name == "xlogy" else b)
        gradcheck(getattr(ct, name), [ta, tb])  # broadcast: each gradient summed to its shape
    gradcheck(lambda t: ct.atan2(t, 2.0), [f64(a)])
    gradcheck(lambda t: t.logaddexp(ct.tensor(0.5, dtype=ct.float64, device=device)), [f64(a)])
    x = f64(rng.uniform(0.1, 0.9, (3, 4)))
    for fn in [ct.deg2rad, ct.rad2deg, ct.frac, ct.logit, lambda t: t.logit(eps=0.3),
               lambda t: ct.nan_to_num(t, posinf=1.0)]:
        gradcheck(fn, [x])


def test_against_torch(device, rng, fp_dtypes):
    torch = pytest.importorskip("torch")
    dtype = fp_dtypes[-1]
    full, b = _operands(rng)
    a_np, b_np = full.astype(dtype)[:, :1, ::2], b.astype(dtype)
    ta = ct.from_numpy(full.astype(dtype), device=device)[:, :1, ::2]
    tb = ct.from_numpy(b_np, device=device)
    pa, pb = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np)
    rtol, atol = TOL[np.dtype(dtype)]
    for name in DIFFERENTIABLE + ["heaviside"]:  # forward, special values included
        _check(getattr(ct, name)(ta, tb), getattr(torch, name)(pa, pb).numpy(), dtype)
    for name in ["frac", "sgn", "signbit", "nan_to_num", "deg2rad", "rad2deg", "logit",
                 "isposinf", "isneginf", "isreal"]:
        assert_close(getattr(ct, name)(ta), getattr(torch, name)(pa).numpy(), rtol, atol)
    # backward on broadcast operands: finite values, and the edge points of copysign and xlogy
    a2, b2 = _nonzero(rng, (2, 1, 3)).astype(dtype), _nonzero(rng, (4, 1)).astype(dtype)
    a2[0, 0, :2] = 0.0
    b2[:2, 0] = [0.0, -1.0]
    g = rng.standard_normal((2, 4, 3)).astype(dtype)
    for name in DIFFERENTIABLE:
        x, y = ct.from_numpy(a2, device=device).requires_grad_(), \
            ct.from_numpy(b2, device=device).requires_grad_()
        px, py = torch.from_numpy(a2).requires_grad_(), torch.from_numpy(b2).requires_grad_()
        getattr(ct, name)(x, y).backward(ct.from_numpy(g, device=device))
        getattr(torch, name)(px, py).backward(torch.from_numpy(g))
        assert_close(x.grad, px.grad.numpy(), rtol, atol)
        assert_close(y.grad, py.grad.numpy(), rtol, atol)
    u = np.array([0.05, 0.5, 0.97, -0.5, 1.5, 0.0, NAN, INF], dtype)
    for kwargs in [{}, {"eps": 0.1}]:
        x = ct.from_numpy(u, device=device).requires_grad_()
        px = torch.from_numpy(u).requires_grad_()
        ct.logit(x, **kwargs).sum().backward()
        torch.logit(px, **kwargs).sum().backward()
        # torch's clamped gradient at NaN depends on its CPU path: NaN from the scalar loop,
        # 0 from the AVX2 vector one (a length-8 float64 input); ours propagates the NaN
        expected = px.grad.numpy().copy()
        expected[np.isnan(u)] = NAN
        assert_close(x.grad, expected, rtol, atol)
    x, px = ct.from_numpy(u, device=device).requires_grad_(), torch.from_numpy(u).requires_grad_()
    (ct.nan_to_num(x) + ct.rad2deg(x) + ct.frac(x)).sum().backward()
    (torch.nan_to_num(px) + torch.rad2deg(px) + torch.frac(px)).sum().backward()
    assert_close(x.grad, px.grad.numpy(), rtol, atol)
    assert not ct.heaviside(x, x).requires_grad and not ct.signbit(x).requires_grad
