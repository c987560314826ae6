"""cltensor.special (torch.special): the kernels of its own against mpmath at 40 digits, far
into the tails, with torch's values at the special points; gradients by finite differences;
torch's names for cltensor's functions."""
import functools

import numpy as np
import pytest

import cltensor as ct
from cltensor import special
from cltensor.testing import gradcheck

mp = pytest.importorskip("mpmath")
mp.mp.dps = 40

# relative error bounds against mpmath: float64 at most ~600 ulp where an argument's rounding
# is amplified (erfcx(-25.6) through exp(x^2), ndtr(-28.7) through erfc's slope), float32 the
# same near its own overflow (erfcx(-8.3): 3.8e-6, as torch's)
TOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-5}
X = np.concatenate([np.linspace(-30, 30, 121), [1e-30, -1e-30, 0.3, 2.49, 2.51, 7.3]])
P = np.concatenate([np.linspace(0.01, 0.99, 99), [1e-300, 1e-30, 1e-10, 1e-5, 0.25, 0.75,
                                                  0.4999, 0.5001, 1 - 1e-10]])


def _ndtr(x):
    return mp.ncdf(x)


def _ndtri(p):
    with mp.workdps(400):  # 2p - 1 exact for p down to 1e-300
        return mp.sqrt(2) * mp.erfinv(2 * p - 1)


MPMATH = {
    "i0e": lambda x: mp.exp(-abs(x)) * mp.besseli(0, x),
    "i1e": lambda x: mp.exp(-abs(x)) * mp.besseli(1, x),
    "erfcx": lambda x: mp.exp(x * x) * mp.erfc(x),
    "ndtr": _ndtr,
    "log_ndtr": lambda x: mp.log(_ndtr(x)) if x < 0 else mp.log1p(-_ndtr(-x)),
    "entr": lambda x: -x * mp.log(x) if x > 0 else mp.mpf(0) if x == 0 else -mp.inf,
    "ndtri": _ndtri,
}


def _zeta(s, q):
    """Hurwitz's zeta with Cephes's (and torch's) domain: inf at s = 1 and at q a non-positive
    integer, NaN for s < 1 and for q < 0 with s not an integer."""
    if s == 1 or (q <= 0 and q == int(q)):
        return float("inf")
    if s < 1 or (q < 0 and s != int(s)):
        return float("nan")
    return float(mp.zeta(s, q))


@pytest.mark.parametrize("name", sorted(MPMATH))
def test_special_against_mpmath(device, fp_dtypes, name):
    for dtype in fp_dtypes:
        xs = (P if name == "ndtri" else X).astype(dtype)
        xs = xs[(xs != 0) & (xs < 1)] if name == "ndtri" else xs
        ref = np.array([float(MPMATH[name](mp.mpf(float(v)))) for v in xs])
        out = ct.full(xs.shape, float("nan"), dtype=dtype, device=device)  # poisoned
        got = getattr(special, name)(ct.from_numpy(xs, device=device), out=out).numpy()
        info = np.finfo(dtype)
        fin = np.isfinite(ref) & (np.abs(ref) > info.tiny) & (np.abs(ref) < info.max)
        err = np.abs(got[fin] - ref[fin]) / np.abs(ref[fin])
        assert fin.sum() >= 40 and err.max() <= TOL[dtype], \
            (name, dtype, xs[fin][np.argmax(err)], err.max())
        # below the smallest normal the result is 0 or subnormal; past the largest, inf
        assert np.all(np.abs(got[~fin & (np.abs(ref) <= info.tiny)]) <= 2 * info.tiny)
        assert np.all(np.isinf(got[~fin & (np.abs(ref) >= info.max)]))


SPECIAL_POINTS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.0, 1.0, 0.5, 2.0]


@pytest.mark.parametrize("name", ["i0e", "i1e", "erfcx", "ndtr", "log_ndtr", "ndtri", "entr"])
def test_special_points_as_torch(device, fp_dtypes, name):
    torch = pytest.importorskip("torch")
    for dtype in fp_dtypes:
        x = np.array(SPECIAL_POINTS, dtype)
        got = getattr(special, name)(ct.from_numpy(x, device=device)).numpy()
        want = getattr(torch.special, name)(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=0, err_msg=name)
        assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0])), name


def test_integer_inputs_give_float32(device):
    x = ct.tensor([0, 1, 2], device=device)
    for name in ("i0e", "erfcx", "ndtr", "entr"):
        assert getattr(special, name)(x).dtype == ct.float32
    assert special.xlog1py(x, 1).dtype == ct.float32


def test_xlog1py_and_zeta(device, fp_dtypes):
    for dtype in fp_dtypes:
        a = np.array([0.0, 0.0, 2.0, -1.5, 3.0, 0.0], dtype)
        b = np.array([1.0, np.nan, 0.5, -0.5, -1.0, -1.0], dtype)
        got = special.xlog1py(ct.from_numpy(a, device=device), ct.from_numpy(b, device=device))
        with np.errstate(divide="ignore", invalid="ignore"):
            want = np.where(np.isnan(b), np.nan, np.where(a == 0, 0, a * np.log1p(b)))
        np.testing.assert_allclose(got.numpy(), want, rtol=TOL[dtype])
        x = np.array([2.0, 3.0, 4.5, 2.0, 3.0, 0.5, 1.0, 2.0, 2.5], dtype)
        q = np.array([1.0, 2.5, 0.5, -1.5, -2.5, 1.0, 1.0, -2.0, -1.5], dtype)
        got = special.zeta(ct.from_numpy(x, device=device), ct.from_numpy(q, device=device))
        want = [_zeta(float(s), float(v)) for s, v in zip(x, q)]
        np.testing.assert_allclose(got.numpy(), want, rtol=TOL[dtype])


def test_special_gradients(device, rng):
    if not device.has_fp64:
        pytest.skip("gradcheck runs in float64")

    def leaf(values):
        return ct.from_numpy(np.asarray(values, np.float64), device=device).requires_grad_()

    small = rng.uniform(0.2, 1.5, 6) * rng.choice([-1, 1], 6)
    for name in ("i0e", "i1e", "erfcx", "ndtr", "log_ndtr", "i1"):
        assert gradcheck(getattr(special, name), [leaf(small)]), name
    # NOTE: one tensor per scale: gradcheck's numerical side sums all outputs, so a large one's
    # rounding swamps a small one's difference quotient (erfcx(-3.5) is 4e5; on the H200 a
    # mixed tensor failed by 9e-6 absolute)
    for name in ("i0e", "i1e", "erfcx", "ndtr", "log_ndtr"):  # the series' and fraction's range
        assert gradcheck(getattr(special, name), [leaf([2.7, 5.0, 9.5, 20.0])]), name
    for x in (-2.0, -3.5):
        assert gradcheck(special.erfcx, [leaf([x])])
    assert gradcheck(special.log_ndtr, [leaf([-30.0, -12.0, 8.0])])  # phi / ndtr far out
    assert gradcheck(special.entr, [leaf(rng.uniform(0.1, 3, 6))])
    assert gradcheck(special.ndtri, [leaf(rng.uniform(0.02, 0.98, 6))])
    assert gradcheck(special.xlog1py, [leaf(rng.uniform(-2, 2, 6)), leaf(rng.uniform(0, 2, 6))])
    x = ct.from_numpy(np.full(6, 3.0), device=device)
    assert gradcheck(lambda q: special.zeta(x, q), [leaf(rng.uniform(0.5, 2, 6))])
    with pytest.raises(NotImplementedError, match="zeta with respect to x"):
        special.zeta(leaf([3.0]), 2.0).sum().backward()
    # second order: create_graph records the formulas' own special functions
    def first(values, create_graph=False):
        t = leaf(values)
        return t, ct.autograd.grad(special.i0e(t).sum(), [t], create_graph=create_graph)[0]

    z, g = first([0.7, -1.3], create_graph=True)
    second = ct.autograd.grad(g.sum(), [z])[0].numpy()
    h = 1e-5
    up, down = first([0.7 + h, -1.3 + h])[1].numpy(), first([0.7 - h, -1.3 - h])[1].numpy()
    numeric = (up - down) / (2 * h)
    np.testing.assert_allclose(second, numeric, rtol=1e-6)


def test_torch_names_for_cltensor_functions(device):
    assert special.expit is ct.sigmoid and special.gammaln is ct.lgamma
    assert special.psi is special.digamma is ct.digamma and special.multigammaln is ct.mvlgamma
    assert special.gammainc is ct.igamma and special.gammaincc is ct.igammac
    assert special.modified_bessel_i0 is ct.i0 and special.modified_bessel_i1 is special.i1
    x = ct.tensor([[0.5, -1.0], [2.0, 0.1]], device=device)
    np.testing.assert_allclose(special.softmax(x, 1).numpy(), ct.softmax(x, 1).numpy())
    np.testing.assert_allclose(special.logsumexp(x, 0).numpy(), ct.logsumexp(x, 0).numpy())


def test_special_errors(device):
    with pytest.raises(TypeError, match="i0e"):
        special.i0e([1.0, 2.0])
    with pytest.raises(TypeError, match="xlog1py"):
        special.xlog1py(ct.tensor([1.0], device=device), "2")


# ---- the functions without gradients: spherical_bessel_j0 and the orthogonal polynomials ------

POLY_X = np.array([-3.0, -1.0, -0.7, -0.4, 0.0, 1e-3, 0.3, 0.9999, 1.0, 1.5, 2.0])
POLY_N = np.array([0, 1, 2, 3, 5, 7, 9, 12, 30, 65, 100, -1, 2.7])
def _chebyshev(n, x, kind):
    """T, U, V, W of degree n at x from their trigonometric (|x| < 1) or hyperbolic forms."""
    x = mp.mpf(x)
    if abs(x) < 1:
        th, cos, sin = mp.acos(x), mp.cos, mp.sin
    else:
        th, cos, sin = mp.acosh(abs(x)), mp.cosh, mp.sinh
    h = n + mp.mpf(1) / 2
    value = {"t": cos(n * th), "u": sin((n + 1) * th) / sin(th),
             "v": cos(h * th) / cos(th / 2), "w": sin(h * th) / sin(th / 2)}
    if abs(x) < 1:
        return value[kind]
    if x < 0:  # T(-x) = (-1)^n T(x), U likewise; V(-x) = (-1)^n W(x)
        value["v"], value["w"] = value["w"], value["v"]
    return value[kind] * (-1) ** n if x < 0 else value[kind]


MP_POLY = {  # references at 40 digits: degrees that take the closed forms or long recurrences
    **{f"chebyshev_polynomial_{k}": (lambda n, x, k=k: _chebyshev(n, x, k)) for k in "tuvw"},
    "hermite_polynomial_h": mp.hermite,
    "hermite_polynomial_he": lambda n, x: mp.hermite(n, x / mp.sqrt(2)) / mp.sqrt(2) ** n,
    "laguerre_polynomial_l": lambda n, x: mp.laguerre(n, 0, x),
    "legendre_polynomial_p": mp.legendre,
}


@pytest.mark.parametrize("name", [n for n in special.__all__ if "_polynomial_" in n])
def test_orthogonal_polynomials_as_torch(device, fp_dtypes, name):
    """Every x on both sides of and at +-1, every degree through the closed forms' range
    (n > 8 inside (-1, 1), n > 64 outside) and a negative and a fractional one, against torch;
    large degrees against mpmath; NaN, +-inf, integer inputs, broadcast degrees."""
    torch = pytest.importorskip("torch")
    fn, tfn = getattr(special, name), getattr(torch.special, name)
    x, n = np.meshgrid(POLY_X, POLY_N)
    for dtype in fp_dtypes:
        got = fn(ct.from_numpy(x.astype(dtype), device=device),
                 ct.from_numpy(n.astype(dtype), device=device)).numpy()
        want = tfn(torch.from_numpy(x.astype(dtype)), torch.from_numpy(n.astype(dtype))).numpy()
        assert got.dtype == dtype
        # NOTE: where the values overflow, torch's recurrences give inf or inf - inf = NaN,
        # the closed forms inf: compared where torch's is finite (and not near overflow)
        fine = np.isfinite(want) & (np.abs(want) < np.finfo(dtype).max / 4)
        assert fine.mean() > 0.8
        np.testing.assert_allclose(got[fine], want[fine], rtol=TOL[np.dtype(dtype)] * 100,
                                   atol=TOL[np.dtype(dtype)] * 100)
    if name in MP_POLY:
        for xv, nv in ((0.3, 140), (-0.83, 250), (1.7, 90), (-2.2, 75), (0.5, 23)):
            want = float(MP_POLY[name](nv, xv))
            got = fn(ct.tensor([xv], dtype=ct.float64, device=device), nv).item()
            assert got == pytest.approx(want, rel=1e-11, abs=1e-11), (xv, nv)
    nan_inf = fn(ct.tensor([np.nan, np.inf, -np.inf, -np.inf, np.inf, 0.5], device=device),
                 ct.tensor([3.0, 3.0, 3.0, 0.0, 4.0, np.nan], device=device)).numpy()
    sign = -1 if name == "laguerre_polynomial_l" else 1  # leading coefficient (-1)^n / n!
    np.testing.assert_array_equal(nan_inf[:5], [np.nan, sign * np.inf, -sign * np.inf, 1.0,
                                                np.inf])
    assert np.isnan(nan_inf[5])
    ints = fn(ct.tensor([0, 1, 2], device=device), ct.tensor([2], device=device))
    assert ints.dtype == ct.float32
    np.testing.assert_allclose(ints.numpy(), tfn(torch.tensor([0, 1, 2]), 2).numpy(), rtol=1e-6)


def test_spherical_bessel_j0(device, fp_dtypes):
    x = np.concatenate([np.linspace(-20, 20, 81), [1e-300, 1e-8, 0.4999, 0.5, -0.5001, 300.5]])
    for dtype in fp_dtypes:
        got = special.spherical_bessel_j0(ct.from_numpy(x.astype(dtype), device=device)).numpy()
        want = [float(mp.sin(mp.mpf(float(v))) / mp.mpf(float(v))) if v else 1.0
                for v in x.astype(dtype)]
        np.testing.assert_allclose(got, want, rtol=TOL[np.dtype(dtype)], atol=1e-300)
    edge = special.spherical_bessel_j0(ct.tensor([0.0, np.inf, -np.inf, np.nan],
                                                 device=device)).numpy()
    np.testing.assert_array_equal(edge, [1.0, 0.0, 0.0, np.nan])


# ---- the Bessel functions J, Y and K of orders 0 and 1, and Airy's Ai ------------------------

@functools.cache
def _bessel_mp(name, x):
    """mpmath's value of torch.special.<name> at x, memoized: the grids' points are the same in
    float and double, and a scaled K is its K times exp(x) (mpmath's K takes 30 ms at x = 20)."""
    if name.startswith("scaled_"):
        return _bessel_mp(name[len("scaled_"):], x) * mp.exp(x)
    x = mp.mpf(x)
    if name == "airy_ai":
        return mp.airyai(x)
    return {"j": mp.besselj, "y": mp.bessely, "k": mp.besselk}[name[-2]](int(name[-1]), x)


BESSEL_NAMES = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0",
                "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
                "airy_ai"]
# each regime and both sides of each branch point: J and Y's asymptotic forms from 5 (double)
# and 3 (float), J0's series below 1e-5, K's 2, Ai's -2.09, 1.2 (float), 2.09 (double) and 110;
# zeros (J0 2.4048, 5.5201; J1 3.8317; Y0 0.8936, 3.9577; Y1 2.1971; Ai -2.3381, -4.0879); tiny
# and huge arguments (those past float's range are left out for float)
_EDGES = [2.9999, 3.0001, 4.9999, 5.0, 5.0001, 1e-300, 1e-20, 123.456, 1e5 + 0.3, 1e8, 1e12,
          1e15, 1e200]
_J_X = np.concatenate([np.linspace(-30, 30, 121), _EDGES, np.negative(_EDGES[:8]),
                       [9.9e-6, 1.01e-5, 2.404825557695773, 5.520078110286311,
                        3.8317059702075125, -7.015586669815619]])
_Y_X = np.concatenate([np.linspace(0.25, 30, 120), _EDGES,
                       [0.8935769662791675, 3.957678419314858, 2.197141326031017]])
_K_X = np.concatenate([np.linspace(0.5, 30, 60),
                       [5e-324, 1e-300, 1e-20, 1e-5, 1.999999, 2.0, 2.000001, 100, 700, 1e4,
                        1e300]])
_AI_X = np.concatenate([np.linspace(-30, 30, 121),
                        [-1e12, -1e6, -1e5 - 0.3, -1000.5, -100.25, -2.338107410459767,
                         -4.08794944413097, -2.0900001, -2.09, -2.0899999, 1.1999, 1.2001,
                         2.0899, 2.0901, 50, 100, 103.5, 105, 109.9, 110.1, 1e-300,
                         -1e-300]])
BESSEL_X = {"bessel_j": _J_X, "bessel_y": _Y_X, "modified_bessel_k": _K_X,
            "scaled_modified_bessel_k": _K_X, "airy_a": _AI_X}  # by name less its last letter
# errors relative to _scale: double's worst measured 1.2e-14 (Ai near 2.09, the series'
# cancellation; the rest 3.1e-15), float's 6 ulp (K0 near 1.4; Ai's series near 1.2: 4.5)
BESSEL_TOL = {np.dtype(np.float64): 2e-14, np.dtype(np.float32): 1.5e-6}


def _scale(name, x, ref):
    """|ref|, or where the function oscillates its envelope if larger: sqrt(2 / (pi |x|)) (at
    most 1) for J and Y, |x|^(-1/4) / sqrt(pi) for Ai at x < 0. Near a zero the value's relative
    condition is unbounded: there the error is measured against the envelope."""
    x = np.asarray(x, np.float64)
    with np.errstate(divide="ignore"):
        if name.startswith("bessel"):
            env = np.minimum(1, np.sqrt(2 / (np.pi * np.abs(x))))
        elif name == "airy_ai":
            env = np.where(x < 0, np.abs(x) ** -0.25 / np.sqrt(np.pi), 0)
        else:
            env = 0
    return np.maximum(np.abs(ref), env)


@pytest.mark.parametrize("name", BESSEL_NAMES)
def test_bessel_and_airy_against_mpmath(device, fp_dtypes, name):
    for dtype in fp_dtypes:
        info = np.finfo(dtype)
        xs = BESSEL_X[name[:-1]]
        xs = xs[np.abs(xs) < info.max].astype(dtype)
        if name == "airy_ai" and dtype == np.float32:
            xs = xs[xs >= -1e5]  # NOTE: past that float's pair for zeta loses the phase
        ref = np.array([float(_bessel_mp(name, float(v))) for v in xs])
        got = getattr(special, name)(ct.from_numpy(xs, device=device)).numpy()
        assert got.dtype == dtype
        fin = np.isfinite(ref) & (np.abs(ref) > info.tiny) & (np.abs(ref) < info.max)
        err = np.abs(got[fin] - ref[fin]) / _scale(name, xs[fin], ref[fin])
        assert fin.sum() >= 60 and err.max() <= BESSEL_TOL[dtype], \
            (name, dtype, xs[fin][np.argmax(err)], err.max())
        # below the smallest normal the result is 0 or subnormal; past the largest, inf
        assert np.all(np.abs(got[~fin & (np.abs(ref) <= info.tiny)]) <= 2 * info.tiny)
        assert np.all(np.isinf(got[~fin & (np.abs(ref) >= info.max)]))


# torch's values at x = 0, -0, +inf, -inf, NaN but at +-inf, where its J, Y and Ai give NaN:
# here their limit 0 (-0 for J1(-inf))
BESSEL_SPECIAL_X = [0.0, -0.0, np.inf, -np.inf, np.nan]
BESSEL_AT_INF = {"bessel_j0": (0.0, 0.0), "bessel_j1": (0.0, -0.0), "bessel_y0": (0.0, np.nan),
                 "bessel_y1": (0.0, np.nan), "airy_ai": (0.0, 0.0)}


@pytest.mark.parametrize("name", BESSEL_NAMES)
def test_bessel_and_airy_as_torch(device, fp_dtypes, name):
    """A grid through every branch point against torch (NaN for Y and K at x < 0), within 2e-5
    of _scale: torch's J and Y are up to 2.4e-6 of it off just above 5 and its Ai 2.5e-6 near
    -2.3 (its denominators miss their leading 1s), its float Ai 1e-5 near -28; the special
    points exactly."""
    torch = pytest.importorskip("torch")
    grid = np.concatenate([np.linspace(-30, 30, 241), [1e-6, 1.2, 2.09, 2.1, 4.99, 5.01]])
    for dtype in fp_dtypes:
        x = np.concatenate([grid, BESSEL_SPECIAL_X]).astype(dtype)
        got = getattr(special, name)(ct.from_numpy(x, device=device)).numpy()
        want = getattr(torch.special, name)(torch.from_numpy(x)).numpy()
        fine = np.isfinite(want) & (np.abs(want) > np.finfo(dtype).tiny)
        fine[len(grid):] = False
        err = np.abs(got[fine] - want[fine]) / _scale(name, x[fine], want[fine])
        assert err.max() <= 2e-5, (name, dtype, x[fine][np.argmax(err)], err.max())
        np.testing.assert_array_equal(np.isnan(got[:len(grid)]), np.isnan(want[:len(grid)]),
                                      err_msg=name)
        special_x = want[len(grid):]
        special_x[2:4] = BESSEL_AT_INF.get(name, special_x[2:4])
        np.testing.assert_array_equal(got[len(grid):], special_x, err_msg=name)
        assert np.array_equal(np.signbit(got[len(grid):]), np.signbit(special_x)), name


def test_bessel_and_airy_integer_empty_and_strided_inputs(device):
    """Integer inputs give float32 (as torch's), an empty input an empty result, a transposed
    view the contiguous copy's values (one function each: one path for all)."""
    torch = pytest.importorskip("torch")
    ints = np.array([0, 1, 2, 7, -3])
    got = special.bessel_y1(ct.from_numpy(ints, device=device))
    assert got.dtype == ct.float32
    want = torch.special.bessel_y1(torch.from_numpy(ints)).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    empty = special.modified_bessel_k0(ct.tensor([], device=device))
    assert empty.shape == (0,) and empty.dtype == ct.float32
    x = np.linspace(-8.0, 8.0, 24, dtype=np.float32).reshape(4, 6)
    strided = special.airy_ai(ct.from_numpy(x, device=device).t()).numpy()
    contiguous = special.airy_ai(ct.from_numpy(x.T.copy(), device=device)).numpy()
    np.testing.assert_array_equal(strided, contiguous)


def test_functions_without_gradients_give_results_without_grad(device):
    x = ct.tensor([0.3, 0.8], dtype=ct.float64, device=device, requires_grad=True)
    outs = [getattr(special, name)(x) for name in ("spherical_bessel_j0", *BESSEL_NAMES)]
    outs += [special.legendre_polynomial_p(x, 3),
             special.hermite_polynomial_h(x, ct.tensor([2.0, 4.0], device=device))]
    for out in outs:
        assert not out.requires_grad and out.grad_fn is None
