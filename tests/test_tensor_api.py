"""torch.Tensor's API beyond the basics: the special functions (erfinv, lgamma, digamma,
polygamma, mvlgamma, i0, sinc, igamma(c), acosh, asinh, atanh), fmax/fmin, nextafter, gcd/lcm,
frexp, ldexp, float_power; the aliases and in-place forms; views changed in place; the scatters
into views, put, index_reduce; nanmedian, mode, cov, corrcoef, histogram, multinomial; and the
tensor's properties. Kernel math against float64 references that need no torch (math, numpy,
closed forms and series written here), then against torch in float32 and float64; gradients by
finite differences. Each test groups many ops so that few kernels are built."""
import math

import numpy as np
import pytest

import cltensor as ct
from cltensor.testing import assert_close, gradcheck

INF, NAN = np.inf, np.nan
EULER = 0.5772156649015329
TOL = {np.dtype(np.float32): (2e-5, 1e-5), np.dtype(np.float64): (1e-12, 1e-13)}  # vs torch


def T(a, device, dtype=None):
    a = np.asarray(a) if dtype is None else np.asarray(a, dtype)
    return ct.from_numpy(np.ascontiguousarray(a), device=device)


@pytest.fixture
def f64(device):
    if not device.has_fp64:
        pytest.skip(f"{device} has no float64: the float64 references need it")
    return lambda a: T(a, device, np.float64)


@pytest.fixture
def g64(f64):
    """float64 leaves that require grad (finite differences need float64)."""
    return lambda a: f64(a).requires_grad_()


# ---- float64 references without torch ---------------------------------------------------------

def _polygamma_reference(n, x, terms=40):
    """(-1)^(n+1) n! sum_k (x + k)^-(n+1): the sum's first terms (40 past -x, summed exactly:
    below zero they cancel in pairs), then the Euler-Maclaurin tail (integral, half term and
    three derivative terms); x not a non-positive integer."""
    terms += max(0, math.ceil(-x))
    s = math.fsum((x + k) ** -(n + 1) for k in range(terms))
    y = x + terms
    rising = [math.prod(range(n + 1, n + 1 + j)) for j in (1, 3, 5)]
    tail = y ** -n / n + 0.5 * y ** -(n + 1) + rising[0] / 12 * y ** -(n + 2) \
        - rising[1] / 720 * y ** -(n + 4) + rising[2] / 30240 * y ** -(n + 6)
    return (-1) ** (n + 1) * math.factorial(n) * (s + tail)


def _i0_reference(x):
    """I0 by its power series sum (x^2 / 4)^k / (k!)^2, in float64 (terms all positive)."""
    term, total, k = 1.0, 1.0, 0
    while term > 1e-17 * total:
        k += 1
        term *= (x * x / 4) / (k * k)
        total += term
    return total


def _igamma_reference(a, x):
    """(P(a, x), Q(a, x)) in closed form. Integer a: the Poisson sums e^-x sum x^k / k! over
    k >= a and k < a (positive terms: accurate however small either is); a = k + 1/2: from
    P(1/2, x) = erf(sqrt x) by P(b + 1, x) = P(b, x) - x^b e^-x / Gamma(b + 1)."""
    if a == int(a):
        terms = [x ** k / math.factorial(k) for k in range(int(a) + int(x) + 80)]
        return (math.exp(-x) * math.fsum(terms[int(a):]),
                math.exp(-x) * math.fsum(terms[:int(a)]))
    p = math.erf(math.sqrt(x))
    for k in range(int(a)):
        b = k + 0.5
        p -= x ** b * math.exp(-x) / math.gamma(b + 1)
    return p, 1 - p


def test_special_functions_against_float64_references(device, f64):
    x = np.array([0.25, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 10.5, 31.0, 170.5])
    neg = np.array([-0.5, -1.5, -2.25, -7.9])
    tx, tneg = f64(x), f64(neg)
    assert_close(tx.lgamma(), [math.lgamma(v) for v in x], rtol=1e-13)
    assert_close(tneg.lgamma(), [math.lgamma(v) for v in neg], rtol=1e-13)
    # digamma at integers and half-integers in closed form; the reflection formula below 0
    ints = np.arange(1, 12)
    assert_close(f64(ints).digamma(), [-EULER + sum(1 / k for k in range(1, n)) for n in ints],
                 rtol=1e-13, atol=1e-15)
    halves = ints - 0.5
    assert_close(f64(halves).digamma(), [-EULER - 2 * math.log(2) + sum(2 / (2 * k - 1)
                                          for k in range(1, n)) for n in ints], rtol=1e-13)
    reflected = f64(1 - neg).digamma() - tneg.digamma()
    assert_close(reflected, math.pi / np.tan(math.pi * neg), rtol=1e-12)
    for n in (1, 2, 3):
        assert_close(ct.polygamma(n, tx), [_polygamma_reference(n, v) for v in x], rtol=3e-15)
    assert_close(tx.polygamma(0), tx.digamma().numpy(), rtol=1e-15)
    assert_close(tx[3:].mvlgamma(3), [sum(math.lgamma(v - i / 2) for i in range(3)) +
                                      1.5 * math.log(math.pi) for v in x[3:]], rtol=1e-13)
    y = np.concatenate([np.linspace(-0.999, 0.999, 15), [1e-300, 0.9999999, -0.99999999]])
    got = f64(y).erfinv().numpy()
    # round trip through math.erf: |erf(got) - y| within a few ulps of erf's slope at got
    slope = 2 / math.sqrt(math.pi) * np.exp(-got * got)
    assert np.all(np.abs([math.erf(v) for v in got] - y) <= 4e-16 * (1 + slope * np.abs(got)))
    z = np.array([0.0, 1e-3, 0.7, 2.5, 8.0, 8.5, 30.0, 700.0])
    z = np.concatenate([z, -z[1:]])
    assert_close(f64(z).i0(), [_i0_reference(v) for v in z], rtol=1e-14)
    assert_close(f64(z).sinc(), np.sinc(z), rtol=1e-14, atol=1e-16)
    assert_close(f64(x + 1).acosh(), np.arccosh(x + 1), rtol=1e-14)
    assert_close(f64(z).asinh(), np.arcsinh(z), rtol=1e-14)
    assert_close(f64(y).atanh(), np.arctanh(y), rtol=1e-13)
    # each branch: P's series (x small or below a), Q's series (x <= 1.1) and continued
    # fraction (x above a); P tiny at (12, 0.3) and Q tiny at (2, 40)
    a = np.array([1.0, 2.0, 5.0, 12.0, 12.0, 2.0, 30.0, 0.5, 1.5, 4.5, 25.5])
    xs = np.array([0.3, 4.0, 2.5, 15.0, 0.3, 40.0, 24.0, 0.2, 3.0, 9.0, 22.0])
    p_ref, q_ref = np.array([_igamma_reference(p, q) for p, q in zip(a, xs)]).T
    assert_close(ct.igamma(f64(a), f64(xs)), p_ref, rtol=1e-13)
    assert_close(ct.igammac(f64(a), f64(xs)), q_ref, rtol=1e-13)


def test_special_values(device, fp_dtypes):
    for dtype in fp_dtypes:
        t = lambda a: T(a, device, dtype)
        edge = t([0.0, -0.0, -1.0, -2.0, INF, -INF, NAN])
        assert_close(edge.lgamma(), [INF, INF, INF, INF, INF, INF, NAN])
        assert_close(edge.digamma(), [-INF, INF, NAN, NAN, INF, NAN, NAN])
        assert_close(t([-1.0, 1.0, 1.5, -0.0, 0.0, NAN]).erfinv(), [-INF, INF, NAN, -0.0, 0.0, NAN])
        assert np.signbit(t([-0.0]).erfinv().numpy()[0])
        assert_close(t([0.0, -0.0, INF, NAN]).sinc(), [1.0, 1.0, NAN, NAN])
        assert_close(t([0.0, INF, -INF, NAN]).i0(), [1.0, NAN, NAN, NAN])
        assert_close(t([0.5, 1.0, INF]).acosh(), [NAN, 0.0, INF])
        assert_close(t([1.0, -1.0, 2.0]).atanh(), [INF, -INF, NAN])
        # SciPy's (and torch's) boundary values of the incomplete gamma functions
        a = t([0.0, 0.0, 1.0, -1.0, INF, 2.0, 2.0, INF])
        x = t([0.0, 1.0, 0.0, 1.0, 1.0, INF, -1.0, INF])
        assert_close(ct.igamma(a, x), [NAN, 1.0, 0.0, NAN, 0.0, 1.0, NAN, NAN])
        assert_close(ct.igammac(a, x), [NAN, 0.0, 1.0, NAN, 1.0, 0.0, NAN, NAN])
        m, e = ct.frexp(t([0.0, -0.0, 1.0, 3.0, INF, NAN, -5.0, 1e-40]))
        ref_m, ref_e = np.frexp(np.array([0.0, -0.0, 1.0, 3.0, 0.0, 0.0, -5.0, 1e-40], dtype))
        assert e.dtype == ct.int32
        assert_close(m, np.where([0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, INF, NAN, 0, 0], ref_m))
        assert_close(e, ref_e.astype(np.int32))
        assert np.signbit(m.numpy()[1])


def test_binary_math_against_numpy(device, rng, fp_dtypes):
    a = np.array([1.0, NAN, NAN, -2.0, 3.0, 0.0, -0.0, INF])
    b = np.array([NAN, 2.0, NAN, -3.0, 3.0, -0.0, 0.0, 1.0])
    for dtype in fp_dtypes:
        ta, tb = T(a, device, dtype), T(b, device, dtype)
        assert_close(ct.fmax(ta, tb), np.fmax(a, b).astype(dtype), dtype=dtype)
        assert_close(ta.fmin(tb), np.fmin(a, b).astype(dtype), dtype=dtype)
        got = ct.nextafter(ta, tb).numpy()
        want = np.nextafter(a.astype(dtype), b.astype(dtype))
        assert got.dtype == dtype and np.array_equal(got, want, equal_nan=True)
    i = rng.integers(-6, 7, 8)
    assert_close(ct.ldexp(ta, T(i, device)), np.ldexp(a, i).astype(dtype), dtype=dtype)
    i1, i2 = rng.integers(-40, 41, (2, 16))
    i1[:3], i2[:3] = [0, 0, 7], [0, 5, 0]
    assert_close(ct.gcd(T(i1, device), T(i2, device)), np.gcd(i1, i2), dtype=np.int64)
    assert_close(T(i1, device).lcm(T(i2, device)), np.lcm(i1, i2), dtype=np.int64)
    if device.has_fp64:
        p = ct.float_power(T([1, 2, 3], device), T([2.0, 0.5, -1.0], device, np.float64))
        assert_close(p, np.float_power([1, 2, 3], [2.0, 0.5, -1.0]), dtype=np.float64)
    assert_close(ct.angle(ta), np.where(np.isnan(a), NAN, np.where(a < 0, np.pi, 0.0)),
                 dtype=dtype, rtol=1e-7)  # -0.0 has angle 0, as torch


def test_dtypes_and_bad_input(device):
    i = ct.tensor([1, 2, 3], device=device)
    f = ct.tensor([0.5, 1.5], device=device)
    for name in ("acosh", "asinh", "atanh", "erfinv", "lgamma", "digamma", "i0", "sinc"):
        with pytest.raises(TypeError, match="can't be cast"):
            getattr(i.clone(), name + "_")()
    assert_close(i.lgamma(), [math.lgamma(v) for v in (1, 2, 3)], dtype=np.float32, rtol=1e-6)
    assert ct.polygamma(1, i).dtype == ct.float32 and ct.erfinv(i).dtype == ct.float32
    for call, op in [(lambda: ct.nextafter(i, i), "nextafter"), (lambda: ct.igamma(i, 2), None),
                     (lambda: ct.gcd(f, i), "gcd"), (lambda: ct.lcm(i, True), "lcm"),
                     (lambda: ct.frexp(i), "frexp"), (lambda: ct.polygamma(1.5, f), "polygamma"),
                     (lambda: ct.fmax(f, "x"), "fmax"), (lambda: f.float_power_(2), "float_power_"),
                     (lambda: ct.positive(ct.tensor([True])), "positive")]:
        with pytest.raises(TypeError, match=op or "igamma"):
            call()
    for call, match in [(lambda: ct.polygamma(-1, f), "non-negative"),
                        (lambda: ct.mvlgamma(f, 0), "p has to be"),
                        (lambda: ct.fmax(f, ct.ones(3, device=device)), "broadcast")]:
        with pytest.raises(ValueError, match=match):
            call()


def test_polygamma_below_zero(device, rng, fp_dtypes):
    """polygamma(n >= 2, x < 0) at half-integers, where the sum's terms cancel in pairs (float32
    polygamma(6, -12.5) was 1.6e2 relative off when they were summed one by one), and at
    points at least 0.05 from an integer or half-integer (farther from the function's zeros)."""
    r = rng.uniform(-13, -0.05, 60)
    r = r[(np.abs(r - np.round(r)) > 0.05) & (np.abs(r - np.floor(r) - 0.5) > 0.05)]
    for dtype in fp_dtypes:
        xs = np.concatenate([-np.arange(0.5, 13), r]).astype(dtype)
        for n in (2, 3, 4, 5, 6):
            want = [_polygamma_reference(n, float(v)) for v in xs]
            assert_close(ct.polygamma(n, T(xs, device, dtype)), want,
                         rtol=2e-6 if dtype == np.float32 else 1e-12)


def test_erfinv_tails(device, fp_dtypes):
    """erfinv as |y| -> 1, where Newton's steps on erf(x) - y lost erf's absolute rounding
    (float32 at 0.999999: 4e-6 relative; float64 at 1 - 2^-53: 6e-5); they now run on erfc."""
    torch = pytest.importorskip("torch")
    for dtype, rtol in ((np.float32, 1e-6), (np.float64, 5e-12)):
        if dtype not in fp_dtypes:
            continue
        eps = np.finfo(dtype).epsneg
        y = np.array([0.75, 0.9999, 0.99999, -0.999999, 0.9999999, 1 - 2e3 * eps, 1 - eps,
                      -(1 - eps)], dtype)
        want = torch.erfinv(torch.from_numpy(y.astype(np.float64))).numpy()
        assert_close(ct.erfinv(T(y, device, dtype)), want, rtol=rtol)


def test_against_torch(device, rng, fp_dtypes):
    torch = pytest.importorskip("torch")
    pos = rng.uniform(0.05, 12.0, 24)
    # -1.99913 and -4.99912 sit near digamma's poles, where pi x's rounding shows (torch
    # reduces x to its nearest integer's distance in double)
    mixed = np.concatenate([rng.uniform(-6, 6, 18), [-2.5, -0.5, 0.0, 9.0, -1.99913, -4.99912]])
    unit = np.concatenate([rng.uniform(-0.999, 0.999, 22), [0.0, 0.5]])
    unary = [("acosh", pos + 1), ("asinh", mixed), ("atanh", unit), ("erfinv", unit),
             ("lgamma", mixed), ("digamma", mixed), ("i0", mixed), ("sinc", mixed)]
    a, x = rng.uniform(0.1, 20, 24), rng.uniform(0.01, 30, 24)
    for dtype in fp_dtypes:
        rtol, atol = TOL[np.dtype(dtype)]
        for name, v in unary:
            got = getattr(ct, name)(T(v, device, dtype))
            want = getattr(torch, name)(torch.from_numpy(v.astype(dtype))).numpy()
            assert_close(got, want, rtol=rtol, atol=atol, dtype=dtype)
        for n in (1, 2, 4):
            want = torch.polygamma(n, torch.from_numpy(pos.astype(dtype))).numpy()
            # NOTE: torch's trigamma (n = 1) stops its series early: about 1e-9 off in float64
            assert_close(ct.polygamma(n, T(pos, device, dtype)), want,
                         rtol=max(10 * rtol, 2e-9 if n == 1 else 0))
        ta, tx = T(a, device, dtype), T(x, device, dtype)
        for name in ("igamma", "igammac"):
            want = getattr(torch, name)(torch.from_numpy(a.astype(dtype)),
                                        torch.from_numpy(x.astype(dtype))).numpy()
            # NOTE: torch's asymptotic expansion for large a near x is ~1e-9 off in float64
            assert_close(getattr(ct, name)(ta, tx), want, rtol=max(rtol, 3e-9), atol=1e-12)


def test_gradients(device, rng, g64):
    s = g64(rng.uniform(-2.5, 2.5, 5))
    u = g64(rng.uniform(-0.9, 0.9, 5))
    p = g64(rng.uniform(1.2, 4.0, 5))
    cases = [(lambda t: t.acosh(), p), (lambda t: t.asinh(), s), (lambda t: t.atanh(), u),
             (lambda t: t.erfinv(), u), (lambda t: t.lgamma(), p), (lambda t: t.digamma(), p),
             (lambda t: ct.polygamma(2, t), p), (lambda t: t.i0(), s), (lambda t: t.sinc(), s),
             (lambda t: t.mvlgamma(2), p), (lambda t: ct.frexp(t).mantissa, s),
             (lambda t: ct.igamma(p.detach(), t), p), (lambda t: ct.igammac(p.detach(), t), p)]
    for fn, t in cases:
        gradcheck(fn, [t])
    gradcheck(ct.fmax, [s, u])
    a, b = g64([1.0, 2.0, NAN]), g64([1.0, 3.0, 0.5])
    ct.fmax(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 0.0, 0.0] and b.grad.tolist() == [0.0, 1.0, 1.0]  # ties: a
    gradcheck(lambda a, b: ct.fmin(a, b.masked_fill(b.detach() > 0, NAN)), [s, u])  # NaN: a
    # second order through digamma's gradient (polygamma) and i0's (I1)
    x = g64([0.7, 1.9])
    (g,) = ct.autograd.grad(x.lgamma().sum(), x, create_graph=True)
    (g1,) = ct.autograd.grad(x.i0().sum(), x, create_graph=True)
    i1 = [sum((v / 2) ** (2 * k + 1) / math.factorial(k) / math.factorial(k + 1)
              for k in range(30)) for v in (0.7, 1.9)]
    assert_close(g1, i1, rtol=1e-13)  # I1, then I1' = I0 - I1 / x
    assert_close(ct.autograd.grad(g1.sum(), x)[0],
                 [_i0_reference(v) - b / v for v, b in zip((0.7, 1.9), i1)], rtol=1e-13)
    assert_close(ct.autograd.grad(g.sum(), x)[0], ct.polygamma(1, x.detach()), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="igamma"):
        ct.igamma(p, p.detach()).sum().backward()


# ---- aliases and in-place forms ---------------------------------------------------------------

ALIASES = {"absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
           "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh", "fix": "trunc",
           "negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
           "true_divide": "div", "greater": "gt", "greater_equal": "ge", "less": "lt",
           "less_equal": "le", "not_equal": "ne", "swapdims": "swapaxes", "unsafe_chunk": "chunk",
           "unsafe_split": "split", "unsafe_split_with_sizes": "split_with_sizes"}


def test_aliases_are_their_targets(device):
    for alias, target in ALIASES.items():
        assert getattr(ct.ClTensor, alias) is getattr(ct.ClTensor, target), alias
        assert getattr(ct, alias) is getattr(ct, target), alias
        if hasattr(ct.ClTensor, target + "_"):
            assert getattr(ct.ClTensor, alias + "_") is getattr(ct.ClTensor, target + "_"), alias
    assert ct.ClTensor.swapaxes_ is ct.ClTensor.transpose_
    x = ct.tensor([[0.25, -0.5]], device=device)
    assert_close(x.arcsinh(), np.arcsinh([[0.25, -0.5]]), rtol=1e-6)
    assert_close(ct.less_equal(x, x.flip(1)), [[False, True]])
    assert ct.positive(x) is x and ct.sinc_(x.clone()).tolist() == x.sinc().tolist()


def test_inplace_forms_write_in_place(device, rng, fp_dtypes):
    dtype = fp_dtypes[-1]
    base = rng.uniform(0.1, 0.9, (2, 3))
    other = T(rng.uniform(0.1, 0.9, (3,)), device, dtype)
    calls = [("erfinv_", ()), ("lgamma_", ()), ("digamma_", ()), ("i0_", ()), ("sinc_", ()),
             ("asinh_", ()), ("atanh_", ()), ("arcsinh_", ()), ("polygamma_", (1,)),
             ("mvlgamma_", (1,)), ("ldexp_", (2,)), ("igamma_", (other,)),
             ("igammac_", (other,)), ("nextafter_", (other,)), ("clamp_min_", (0.5,)),
             ("clamp_max_", (0.5,)), ("cumsum_", (1,)), ("cumprod_", (0,)),
             ("addcmul_", (other, other)), ("addcdiv_", (other, other)), ("lerp_", (other, 0.3)),
             ("renorm_", (2, 0, 0.5)), ("true_divide_", (other,)), ("multiply_", (other,)),
             ("eq_", (other,)), ("logical_not_", ())]
    # NOTE: the references that are not out-of-place twins come from numpy (no extra kernels)
    by_hand = {"eq_": (base == other.numpy()).astype(dtype), "logical_not_": base * 0,
               "fill_diagonal_": np.where(np.eye(2, 3, dtype=bool), 7.0, base)}
    for name, args in calls + [("fill_diagonal_", (7.0,))]:
        t = T(base, device, dtype)
        storage = t.storage
        assert getattr(t, name)(*args) is t and t.storage is storage, name
        want = by_hand[name] if name in by_hand else \
            getattr(T(base, device, dtype), name[:-1])(*args).to(dtype).numpy()
        assert_close(t, want, rtol=1e-6, dtype=dtype)
    f = T(base[:, 0], device, dtype)
    assert_close(f.addmv_(T(base, device, dtype), T([1.0, 2.0, 3.0], device, dtype), beta=0.5),
                 0.5 * base[:, 0] + base @ [1.0, 2.0, 3.0], rtol=1e-6)
    m = T(base, device, dtype)
    m.addr_(T([1.0, 2.0], device, dtype), T([1.0, 0.0, 1.0], device, dtype), alpha=2)
    assert_close(m, base + 2 * np.outer([1, 2], [1, 0, 1]), rtol=1e-6)
    m.addbmm_(T(np.ones((2, 2, 4)), device, dtype), T(np.ones((2, 4, 3)), device, dtype))
    assert_close(m, base + 2 * np.outer([1, 2], [1, 0, 1]) + 8, rtol=1e-6)
    d = T([2.0, 3.0], device, np.float64) if device.has_fp64 else None
    if d is not None:
        assert_close(d.float_power_(2), [4.0, 9.0], dtype=np.float64)
    i = ct.tensor([1, 2, 3], device=device)
    with pytest.raises(TypeError, match="clamp_min_: result type float32 can't be cast"):
        i.clamp_min_(0.5)
    with pytest.raises(ValueError, match="addcmul_: the result's shape \\(2, 3\\)"):
        other.clone().addcmul_(T(base, device, dtype), other)
    with pytest.raises(TypeError, match="cumsum_: dtype"):
        other.clone().cumsum_(0, dtype=ct.int64)
    with pytest.raises(ValueError, match="all dimensions of input must be of equal length"):
        ct.zeros(2, 3, 2, device=device).fill_diagonal_(1)


def test_inplace_forms_record_gradients(device, rng, g64):
    a, b = g64(rng.uniform(0.5, 1.5, (3, 3))), g64(rng.uniform(0.5, 1.5, (3,)))
    gradcheck(lambda x, y: (x * 1).addcmul_(y, x, value=2), [a, b])
    gradcheck(lambda x, y: (x * 1).lerp_(y, 0.3).cumsum_(0), [a, b])
    gradcheck(lambda x: (x * 1).renorm_(2, 0, 1.0).fill_diagonal_(0.5), [a])
    gradcheck(lambda x: (x * 1).t_().unsqueeze_(0).squeeze_(0) * ct.arange(
        3.0, dtype=ct.float64, device=device), [a])
    gradcheck(lambda x: (x * 1).digamma_().polygamma_(1), [a])
    for call in (lambda: a.addcmul_(b, b), lambda: a.t_(), lambda: b.squeeze_()):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            call()
    with ct.no_grad():
        assert a.detach().t_().shape == (3, 3)


# ---- views, scatters, put, index_reduce --------------------------------------------------------

def test_views_in_place_and_as_strided(device):
    t = ct.arange(6, device=device).reshape(2, 1, 3)
    assert t.transpose_(0, 2) is t and t.shape == (3, 1, 2) and t.strides == (1, 3, 3)
    assert t.squeeze_().shape == (3, 2) and t.unsqueeze_(0).shape == (1, 3, 2)
    assert t.swapdims_(1, 2).shape == (1, 2, 3) and t.squeeze_(0).t_().shape == (3, 2)
    assert t.tolist() == [[0, 3], [1, 4], [2, 5]]
    x = ct.arange(6.0, device=device)
    assert x.as_strided((2, 2), (1, 2), 1).tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert ct.as_strided(x, (3,), (2,)).tolist() == [0.0, 2.0, 4.0]
    assert x[2:].as_strided((2,), (1,)).tolist() == [2.0, 3.0]  # the view's own offset
    assert x.clone().as_strided_((2, 2), (2, 1)).tolist() == [[0.0, 1.0], [2.0, 3.0]]
    e = x.new_empty_strided((2, 3), (1, 2))
    assert e.shape == (2, 3) and e.stride() == (1, 2) and e.storage.nbytes == 6 * 4
    with pytest.raises(ValueError, match="reach element 8 of a storage of 6"):
        x.as_strided((3, 3), (3, 1))
    with pytest.raises(ValueError, match="negative"):
        x.as_strided((2,), (-1,))


def test_scatters_into_views(device, rng, g64):
    x, src = rng.normal(size=(3, 4)), rng.normal(size=(4,))
    tx = T(x, device, np.float32)
    want = x.copy()
    want[1] = src
    assert_close(ct.select_scatter(tx, T(src, device, np.float32), 0, 1), want, rtol=1e-6)
    want = x.copy()
    want[:, 1::2] = x[:, :2] * 10
    assert_close(tx.slice_scatter(tx[:, :2] * 10, 1, 1, None, 2), want, rtol=1e-6)
    want = x.copy()
    want[[0, 1, 2], [1, 2, 3]] = src[:3]
    assert_close(ct.diagonal_scatter(tx, T(src[:3], device, np.float32), 1), want, rtol=1e-6)
    assert_close(tx, x, rtol=0)  # out of place
    with pytest.raises(ValueError, match="src size \\(3,\\), slice size \\(4,\\)"):
        ct.select_scatter(tx, tx[0, :3], 0, 0)
    with pytest.raises(TypeError, match="src must be a tensor"):
        ct.slice_scatter(tx, 1.0)
    a, b = g64(x), g64(src)
    gradcheck(lambda p, q: ct.select_scatter(p, q, 1, 2)[:, :3] * 2, [a, b[:3]])
    gradcheck(lambda p, q: p.slice_scatter(q.reshape(1, 4), 0, 2), [a, b])
    gradcheck(lambda p, q: ct.diagonal_scatter(p, q[:3] * q[:3]), [a, b])
    gradcheck(lambda p: p.as_strided((2, 3), (1, 3), 1) * p.as_strided((2, 3), (4, 1)), [a])


def test_put_and_index_reduce(device, rng, g64):
    x = rng.normal(size=(2, 3))
    tx = T(x, device, np.float32)
    t = T(x, device, np.float32).t()  # a non-contiguous target: positions in its row-major order
    values = ct.tensor([9.0, 8.0, 7.0], device=device)
    assert t.put_(ct.tensor([0, -1, 2], device=device), values) is t
    assert_close(t, _put_reference(x.T, [0, -1, 2], [9, 8, 7]), rtol=1e-6)
    assert_close(ct.put(tx, ct.tensor([1, 1], device=device), ct.tensor([1.0, 2.0], device=device),
                        accumulate=True), _put_reference(x, [1], [x.reshape(-1)[1] + 3]),
                 rtol=1e-6)
    for call, err, match in [
            (lambda: tx.put(ct.tensor([0], dtype=ct.int32, device=device), tx[0, :1]), TypeError,
             "int64 index"),
            (lambda: tx.put(ct.tensor([0, 1], device=device), tx[0, :1]), ValueError, "elements"),
            (lambda: tx.put(ct.tensor([6], device=device), tx[0, :1]), IndexError, "6"),
            (lambda: tx.put(ct.tensor([0], device=device), ct.tensor([1])), TypeError, "dtype")]:
        with pytest.raises(err, match=match):
            call()
    a = g64(x)
    gradcheck(lambda p, q: p.put(ct.tensor([3, 0, 3], device=device), q, accumulate=True),
              [a, g64([1.0, 2.0, 3.0])])
    idx, src = ct.tensor([0, 2, 0], device=device), rng.uniform(0.5, 2, (2, 3))
    for reduce, include_self in [("prod", True), ("mean", False), ("amax", True), ("amin", False)]:
        got = tx.index_reduce(1, idx, T(src, device, np.float32), reduce,
                              include_self=include_self)
        assert_close(got, _index_reduce_reference(x, 1, [0, 2, 0], src, reduce, include_self),
                     rtol=1e-6)
    gradcheck(lambda p, q: p.index_reduce(1, idx, q, "prod"), [a, g64(src)])
    with pytest.raises(ValueError, match="reduce must be one of"):
        tx.index_reduce(1, idx, T(src, device, np.float32), "sum")
    with pytest.raises(ValueError, match="source of shape \\(3, 3\\)"):
        tx.index_reduce(1, idx, ct.ones(3, 3, device=device), "amax")


def _put_reference(x, index, values):
    flat = np.array(x).reshape(-1)
    flat[index] = values
    return flat.reshape(np.shape(x))


def _index_reduce_reference(x, dim, index, src, reduce, include_self):
    out = np.moveaxis(np.array(x), dim, 0).copy()
    src = np.moveaxis(src, dim, 0)
    fns = {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}
    for i in set(index):
        parts = [src[k] for k, j in enumerate(index) if j == i]
        out[i] = fns[reduce](([out[i]] if include_self else []) + parts, axis=0)
    return np.moveaxis(out, 0, dim)


# ---- statistics ---------------------------------------------------------------------------------

def test_nanmedian_and_mode(device, rng, fp_dtypes):
    dtype = fp_dtypes[-1]  # NOTE: the dtype most tests here use: their kernels are built once
    x = np.array([[1.0, NAN, 3.0, 2.0], [NAN] * 4, [5.0, 1.0, NAN, 2.0]])
    r = ct.nanmedian(T(x, device, dtype), 1)
    assert_close(r.values, [2.0, NAN, 2.0])
    assert r.indices.tolist() == [3, 0, 3]  # all NaN: the first (torch's is unspecified)
    assert ct.nanmedian(T(x, device, dtype)).item() == 2.0
    assert ct.nanmedian(T(x[0], device, dtype), 0, keepdim=True).values.tolist() == [2.0]
    assert ct.nanmedian(ct.tensor([4, 1, 3], device=device)).item() == 3
    m = ct.mode(T([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4]], device, dtype))
    assert m.values.tolist() == [1, 4] and m.indices.tolist() == [3, 4]
    r = rng.integers(0, 4, (3, 9))
    got = ct.mode(T(r, device, dtype), 1, keepdim=True)
    for row, v, i in zip(r, got.values.numpy()[:, 0], got.indices.numpy()[:, 0]):
        counts = np.bincount(row)
        assert v == np.argmax(counts) and row[i] == v and i == np.nonzero(row == v)[0][-1]
    assert ct.mode(ct.tensor(3, device=device)).indices.item() == 0
    with pytest.raises(ValueError, match="mode: dim 0 .* is empty"):
        ct.mode(ct.zeros(0, 2, device=device), 0)


def test_cov_corrcoef_histogram(device, rng, f64):
    x = rng.normal(size=(3, 7))
    fw, aw = rng.integers(1, 4, 7), rng.uniform(0.1, 2.0, 7)
    assert_close(ct.cov(f64(x)), np.cov(x), rtol=1e-12)
    assert_close(ct.cov(f64(x), correction=0), np.cov(x, bias=True), rtol=1e-12)
    assert_close(ct.cov(f64(x), fweights=T(fw, device), aweights=f64(aw)),
                 np.cov(x, fweights=fw, aweights=aw), rtol=1e-12)
    assert_close(ct.cov(f64(x[0])), np.cov(x[0]), rtol=1e-12)
    assert_close(ct.corrcoef(f64(x)), np.corrcoef(x), rtol=1e-12)
    gradcheck(ct.corrcoef, [f64(x).requires_grad_()])
    for kwargs, err in [({"fweights": f64(aw)}, TypeError), ({"aweights": f64(-aw)}, ValueError),
                        ({"fweights": T(fw[:3], device)}, ValueError)]:
        with pytest.raises(err, match="cov: "):
            ct.cov(f64(x), **kwargs)
    with pytest.raises(ValueError, match="two or fewer dims"):
        ct.cov(ct.zeros(2, 2, 2, device=device))
    h = np.concatenate([rng.uniform(-1, 3, 30), [3.0, -7.0]])
    for bins, kwargs in [(5, {}), (4, {"range": (0.0, 2.0)}), (3, {"density": True})]:
        with_nan = np.append(h, NAN) if "range" in kwargs else h  # NaN is never counted
        hist, edges = ct.histogram(f64(with_nan), bins, **kwargs)
        want, want_edges = np.histogram(h, bins, kwargs.get("range"),
                                        density=kwargs.get("density", False))
        assert_close(edges, want_edges, rtol=1e-14)
        assert_close(hist, want, rtol=1e-12)
    e = np.array([-1.0, 0.0, 2.5, 3.0])
    hist, _ = f64(h).histogram(f64(e), weight=f64(h * 0 + 2))
    assert_close(hist, 2 * np.histogram(h, e)[0], rtol=1e-12)
    with pytest.raises(TypeError, match="histogram: the input must be float"):
        ct.histogram(ct.tensor([1, 2], device=device), 2)
    with pytest.raises(ValueError, match="range \\[nan, nan\\] must be finite"):
        ct.histogram(f64([1.0, NAN]), 2)


def test_multinomial(device, fp_dtypes):
    ct.manual_seed(3)
    p = T([[0.0, 1.0, 3.0], [2.0, 0.0, 2.0]], device, fp_dtypes[-1])
    draws = ct.multinomial(p, 4000, replacement=True).numpy()
    for row, weights in zip(draws, p.numpy()):
        assert np.allclose(np.bincount(row, minlength=3) / 4000, weights / weights.sum(),
                           atol=0.03)
    firsts = np.array([ct.multinomial(p[0], 2)[0].item() for _ in range(300)])
    assert 0 not in firsts and abs(np.mean(firsts == 2) - 0.75) < 0.08
    s = ct.multinomial(T([0.2, 0.0, 0.5, 0.3], device, fp_dtypes[-1]), 4).tolist()
    assert sorted(s) == [0, 1, 2, 3] and s[-1] == 1  # distinct; the zero weight comes last
    for args, match in [((p, 4), "without replacement"), ((p, 0), "n_sample <= 0"),
                        ((-p, 1), "non-negative"), ((p * 0, 1), "sum of probabilities")]:
        with pytest.raises(ValueError, match=match):
            ct.multinomial(*args)
    with pytest.raises(TypeError, match="floating point"):
        ct.multinomial(ct.tensor([1, 2], device=device), 1)


# ---- shapes and properties ---------------------------------------------------------------------

def test_splits_sums_and_diagonals(device):
    x = ct.arange(24.0, device=device).reshape(2, 3, 4)
    assert [t.shape for t in x.split_with_sizes([1, 2], 1)] == [(2, 1, 4), (2, 2, 4)]
    assert [t.shape for t in ct.hsplit(x, 3)] == [(2, 1, 4)] * 3
    assert [t.shape for t in x.vsplit([1])] == [(1, 3, 4), (1, 3, 4)]
    assert [t.shape for t in ct.dsplit(x, 2)] == [(2, 3, 2)] * 2
    assert [t.tolist() for t in ct.hsplit(ct.arange(4, device=device), 2)] == [[0, 1], [2, 3]]
    for call, match in [(lambda: x.split_with_sizes([1, 1], 1), "add up"),
                        (lambda: ct.hsplit(x, 2), "3 into 2 equal"),
                        (lambda: ct.dsplit(x[0], 2), "at least 3 dims")]:
        with pytest.raises(ValueError, match=match):
            call()
    s = np.arange(24.0).reshape(2, 3, 4)
    assert_close(x.sum_to_size(3, 1), s.sum((0, 2))[:, None])
    assert_close(x.sum_to_size(1, 1, 4), s.sum((0, 1), keepdims=True))
    assert x.sum_to_size(2, 3, 4) is x
    with pytest.raises(ValueError, match="not expandable"):
        x.sum_to_size(2, 4)
    assert_close(ct.diagflat(ct.tensor([[1, 2], [3, 4]], device=device), -1),
                 np.diagflat([1, 2, 3, 4], -1))
    assert ct.narrow_copy(x, 2, 1, 2).is_contiguous()
    tall = ct.zeros(7, 3, device=device).fill_diagonal_(5, wrap=True).numpy()
    assert np.argwhere(tall).tolist() == [[0, 0], [1, 1], [2, 2], [4, 0], [5, 1], [6, 2]]


def test_tensor_properties(device):
    x = ct.ones(2, 3, device=device)
    assert x.mH.shape == x.H.shape == x.adjoint().shape == ct.adjoint(x).shape == (3, 2)
    assert ct.ones(4, 2, 3, device=device).mH.shape == (4, 3, 2)
    for call in (lambda: ct.ones(2, 2, 2, device=device).H, lambda: ct.ones(3, device=device).mH):
        with pytest.raises(ValueError):
            call()
    assert x.ndimension() == 2 and x.nbytes == 24 and x.itemsize == 4
    assert ct.ones(3, dtype=ct.float64 if device.has_fp64 else ct.int64, device=device).nbytes == 24
    assert x.is_signed() and not ct.tensor([True], device=device).is_signed()
    assert x.is_same_size(ct.zeros(2, 3, device=device)) and not x.is_same_size(x.t())
    assert ct.tensor([2.0], device=device).is_nonzero()
    assert not ct.tensor(0, device=device).is_nonzero()
    for t, match in [(x, "more than one value"), (ct.zeros(0, device=device), "no values")]:
        with pytest.raises(RuntimeError, match=match):
            t.is_nonzero()
    assert not (x.is_complex() or x.is_conj() or x.is_neg())
    assert x.conj() is x and x.real is x and ct.resolve_neg(x) is x
    w = ct.ones(2, device=device).requires_grad_()
    y = w * 2
    assert not w.retains_grad and not y.retains_grad
    y.retain_grad()
    assert y.retains_grad and y.output_nr == 0
    assert ct.softmax(ct.tensor([0.0, 0.0], device=device), 0).tolist() == [0.5, 0.5]
    z = ct.tensor([-2.0, 0.25, 3.0], device=device)
    assert z.hardshrink(0.5).tolist() == [-2.0, 0.0, 3.0]
    assert z.prelu(ct.tensor([0.5], device=device)).tolist() == [-1.0, 0.25, 3.0]
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        _ = z.imag
