"""Elementwise ops against numpy in float64: every op, broadcasting, strided views, dtype rules."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor as ct
from cltensor.testing import assert_close, random_array

FLOAT_UNARY = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "reciprocal": lambda x: 1 / x,
    "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc),
    "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
}
SAME_UNARY = {
    "abs": np.abs, "sign": np.sign, "relu": lambda x: np.maximum(x, 0), "square": np.square,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "neg": np.negative,
}
POSITIVE_ONLY = {"log", "sqrt", "rsqrt", "log1p", "reciprocal", "log2", "log10"}
UNIT_INTERVAL = {"asin", "acos"}  # inputs in (-1, 1)


def _floats(rng, shape, dtype, positive=False):
    a = random_array(rng, shape, dtype)
    return np.abs(a) + np.asarray(0.1, dtype) if positive else a


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_unary(device, rng, fp_dtypes, name):
    for dtype in fp_dtypes:
        a = _floats(rng, (3, 37), dtype, positive=name in POSITIVE_ONLY)
        if name in UNIT_INTERVAL:
            a = np.clip(a, -0.95, 0.95)
        out = getattr(ct, name)(ct.from_numpy(a, device=device))
        ref = FLOAT_UNARY[name](a.astype(np.float64))
        tol = 2e-6 if dtype == np.float32 else 1e-13
        assert_close(out, ref, rtol=tol, atol=tol, dtype=dtype)


@pytest.mark.parametrize("name", sorted(SAME_UNARY))
def test_same_dtype_unary(device, rng, fp_dtypes, name):
    for dtype in fp_dtypes + [np.int32, np.int64]:
        a = random_array(rng, (5, 11), dtype, low=-4, high=4)
        if dtype in fp_dtypes:
            a[0, :4] = np.array([0.5, 1.5, -2.5, -0.5], dtype)  # round half to even, as torch
        out = getattr(ct, name)(ct.from_numpy(a, device=device))
        assert_close(out, SAME_UNARY[name](a.astype(np.float64)), dtype=dtype)


def test_int_inputs_to_float_ops_give_float32(device):
    x = ct.tensor([1, 2, 3], device=device)
    y = ct.exp(x)
    assert y.dtype == ct.float32
    assert_close(y, np.exp([1.0, 2.0, 3.0]))
    assert (x / 2).dtype == ct.float32
    assert_close(x / 2, [0.5, 1.0, 1.5])


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "maximum": np.maximum, "minimum": np.minimum,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_and_scalars(device, rng, fp_dtypes, name):
    for dtype in fp_dtypes:
        a = random_array(rng, (4, 1, 6), dtype)
        b = random_array(rng, (3, 1), dtype) + np.asarray(3.0, dtype)
        ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
        fn = getattr(ct, name)
        ref = BINARY[name](a.astype(np.float64), b.astype(np.float64))
        assert_close(fn(ta, tb), ref, dtype=dtype)
        assert_close(fn(ta, 2.5), BINARY[name](a.astype(np.float64), 2.5), dtype=dtype)


def test_operators_match_numpy(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    b = random_array(rng, (4,), np.float32) + 3
    ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    cases = [
        (ta + tb, a64 + b64), (ta - tb, a64 - b64), (ta * tb, a64 * b64), (ta / tb, a64 / b64),
        (2 - ta, 2 - a64), (2 / tb, 2 / b64), (ta ** 2, a64 ** 2), (2 ** ta, 2 ** a64),
        (ta // tb, np.floor_divide(a64, b64)), (ta % tb, np.mod(a64, b64)),
        (7.5 // tb, np.floor_divide(7.5, b64)), (7.5 % tb, np.mod(7.5, b64)), (-ta, -a64),
        (abs(ta), np.abs(a64)), (tb ** ta, b64 ** a64),
    ]
    for got, ref in cases:
        assert_close(got, ref, rtol=2e-6, atol=1e-6)


def test_integer_division_and_modulo_follow_python(device):
    a = np.array([7, -7, 7, -7, 0, 5, -9], np.int64)
    b = np.array([2, 2, -2, -2, 3, -5, 4], np.int64)
    ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    assert_close(ta // tb, a // b, dtype=np.int64)
    assert_close(ta % tb, a % b, dtype=np.int64)
    assert_close(ta // 3, a // 3)
    assert_close(-ta % 4, (-a) % 4)
    assert_close(ta ** 2, a ** 2)
    assert_close(ct.tensor([2, 3], dtype=ct.int32, device=device) ** ct.tensor([10, 3], device=device),
                 [1024, 27])


def test_integer_division_by_zero_raises(device):
    a = ct.tensor([1, 2, 3], device=device)
    with pytest.raises(ZeroDivisionError):
        a // 0
    with pytest.raises(ZeroDivisionError):
        a % ct.tensor([1, 0, 1], device=device)
    with pytest.raises(ValueError, match="negative integer powers"):
        a ** -1
    # float division by zero follows IEEE, as in torch
    assert_close(ct.tensor([1.0, -1.0, 0.0], device=device) / 0,
                 [np.inf, -np.inf, np.nan])


def test_integer_division_with_an_empty_result(device):
    """A zero divisor raises only where some element is divided: an operand without elements
    broadcasts to an empty result, which torch returns."""
    empty = ct.zeros(0, 3, dtype=ct.int64, device=device)
    zeros = ct.zeros(2, 1, 3, dtype=ct.int64, device=device)
    for op in (ct.floor_divide, ct.remainder, ct.fmod):
        assert op(empty, zeros).shape == (2, 0, 3)
    assert (empty % 0).shape == (0, 3)


def test_sign_and_square_of_bool(device):
    """torch: sign keeps a bool tensor as it is, square promotes it to int64 (x ** 2)."""
    t = ct.tensor([True, False], device=device)
    assert ct.sign(t).dtype == ct.bool and ct.sign(t).tolist() == [True, False]
    assert ct.square(t).dtype == ct.int64 and ct.square(t).tolist() == [1, 0]


def test_type_promotion_follows_torch(device):
    f32 = ct.ones(2, device=device)
    f64 = ct.ones(2, dtype=ct.float64, device=device) if device.has_fp64 else None
    i32 = ct.ones(2, dtype=ct.int32, device=device)
    i64 = ct.ones(2, dtype=ct.int64, device=device)
    b = ct.ones(2, dtype=ct.bool, device=device)
    assert (i32 + 1).dtype == ct.int32
    assert (i32 + 1.5).dtype == ct.float32
    assert (i64 + 1.5).dtype == ct.float32
    assert (i32 + i64).dtype == ct.int64
    assert (b + 1).dtype == ct.int64
    assert (b + b).dtype == ct.bool
    assert (i64 * f32).dtype == ct.float32
    assert (f32 + ct.tensor(1.0, dtype=ct.float64, device=device)).dtype == ct.float32 \
        if device.has_fp64 else True
    assert (i32 + ct.tensor(2.5, device=device)).dtype == ct.float32
    if f64 is not None:
        assert (f32 + f64).dtype == ct.float64
        assert (i32 + ct.tensor(2.5, dtype=ct.float64, device=device)).dtype == ct.float64
    assert (i32 > 0.5).dtype == ct.bool
    assert_close(b + b, [True, True])


def test_comparisons_and_logical(device, rng):
    a = random_array(rng, (5, 7), np.float32)
    b = random_array(rng, (7,), np.float32)
    a[0, :3] = b[:3]  # some equal pairs
    ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    for got, ref in [(ta == tb, a == b), (ta != tb, a != b), (ta < tb, a < b),
                     (ta <= tb, a <= b), (ta > tb, a > b), (ta >= tb, a >= b),
                     (ta > 0.5, a > 0.5)]:
        assert got.dtype == ct.bool
        assert_close(got, ref)
    p, q = ta > 0, tb < 0
    assert_close(p & q, (a > 0) & (b < 0))
    assert_close(p | q, (a > 0) | (b < 0))
    assert_close(p ^ q, (a > 0) ^ (b < 0))
    assert_close(~p, ~(a > 0))
    assert_close(ct.logical_and(ta, tb), np.logical_and(a, b))
    assert_close(ct.logical_not(ta), np.logical_not(a))


def test_where_clamp_nan_semantics(device, rng):
    a = random_array(rng, (6, 5), np.float32)
    a[1, 1] = np.nan
    ta = ct.from_numpy(a, device=device)
    assert_close(ct.where(ta > 0, ta, 0.0), np.where(a > 0, a, 0.0))
    assert_close(ct.where(ta > 0, 1.0, ta * 2), np.where(a > 0, 1.0, a * 2))
    assert_close(ta.clamp(-0.5, 0.5), np.clip(a, -0.5, 0.5))
    assert_close(ta.clamp(min=0.1), np.maximum(a, 0.1))  # numpy keeps NaN like torch
    assert_close(ta.clamp(max=0.1), np.minimum(a, 0.1))
    assert_close(ta.clamp(1.0, -1.0), np.where(np.isnan(a), np.nan, -1.0))  # min > max gives max
    lo = ct.from_numpy(np.full((5,), -0.2, np.float32), device=device)
    assert_close(ct.clamp(ta, lo, 0.3), np.clip(a, -0.2, 0.3))
    b = ct.zeros(6, 5, device=device)
    assert_close(ct.maximum(ta, b), np.maximum(a, 0))  # NaN propagates
    assert_close(ct.isnan(ta), np.isnan(a))
    with np.errstate(divide="ignore", invalid="ignore"):  # the infinities are the point
        inf = a / 0
    assert_close(ct.isfinite(ta / 0), np.isfinite(inf))
    assert_close(ct.isinf(ta / 0), np.isinf(inf))
    assert_close(ct.relu(ta), np.where(np.isnan(a), np.nan, np.maximum(a, 0)))
    assert_close(ct.isnan(ct.tensor([1, 2], device=device)), [False, False])


def _views(t, a):
    """Pairs of (non-contiguous view, same numpy view) of a 3-d tensor."""
    return [
        (t.permute(2, 0, 1), a.transpose(2, 0, 1)),
        (t[::2, :, 1:], a[::2, :, 1:]),
        (t[1:, :, ::3], a[1:, :, ::3]),
        (t.transpose(0, 2)[::2], a.transpose(2, 1, 0)[::2]),
        (t[:, :1, :].expand(t.shape[0], 4, t.shape[2]),
         np.broadcast_to(a[:, :1, :], (a.shape[0], 4, a.shape[2]))),
        (t[2:3], a[2:3]),
    ]


@pytest.fixture(params=["ew_rows", "ew_strided"])
def strided_kernel(request, monkeypatch):
    """Run a test with each strided kernel (CPU-style rows, GPU-style 2-d grid) on every device."""
    from cltensor.ops import elementwise
    monkeypatch.setattr(elementwise, "STRIDED_KERNEL", request.param)
    return request.param


def test_noncontiguous_inputs_match_contiguous(device, rng, strided_kernel):
    a = random_array(rng, (5, 6, 7), np.float32)
    t = ct.from_numpy(a, device=device)
    for v, av in _views(t, a):
        assert not v.is_contiguous() or v.shape[0] == 1
        assert_close(ct.exp(v), np.exp(av.astype(np.float64)), rtol=2e-6)
        assert_close(v * 3 + v, av.astype(np.float64) * 4)
        assert_close(v.contiguous(), av)
        assert v.contiguous().is_contiguous()
        assert_close(v - v.contiguous(), np.zeros(av.shape))


def test_rows_kernel_shares_one_build_across_layouts(device, rng, monkeypatch):
    """With ew_rows and one element per work-item of ew_contig (the CPU settings), an op's
    contiguous, 2-d and 3-d launches run one program (shorter shapes padded with leading ones),
    with the right values in each."""
    from cltensor import program
    from cltensor.ops import elementwise
    monkeypatch.setattr(elementwise, "STRIDED_KERNEL", "ew_rows")
    monkeypatch.setattr(elementwise, "CONTIG_ITEMS", 1)  # GPUs' 4 make the contiguous a 2nd build
    a = random_array(rng, (4, 6, 10), np.float32)
    t = ct.from_numpy(a, device=device)
    before = len(program._programs)
    expr = "out = x * 3 - 0.25f"  # NOTE: a user op nothing else builds (one program per source)
    for v, av in ((t, a), (t[1].T, a[1].T), (t[::2, :, 1:], a[::2, :, 1:])):
        assert_close(ct.elementwise(expr, x=v), av.astype(np.float64) * 3 - 0.25)
    assert len(program._programs) == before + 1


def test_inplace_ops_and_aliasing(device, rng):
    a = random_array(rng, (4, 4), np.float32)
    t = ct.from_numpy(a, device=device)
    t += 1
    t *= 2
    t.sub_(ct.ones(4, device=device), alpha=3)
    t.div_(2)
    ref = ((a + 1) * 2 - 3) / 2
    assert_close(t, ref)
    # an in-place op whose input is another view of the output is computed as if out of place
    t.add_(t.T)
    assert_close(t, ref + ref.T)
    u = ct.from_numpy(a, device=device)
    u[1:] = u[:-1].clone() * 0 + u[:-1]
    ref2 = a.copy()
    ref2[1:] = a[:-1]
    assert_close(u, ref2)
    v = ct.from_numpy(a, device=device)
    v[1:] = v[:-1]  # overlapping copy: torch reads before writing
    assert_close(v, ref2)
    with pytest.raises(TypeError, match="can't be cast"):
        ct.ones(3, dtype=ct.int64, device=device).add_(1.5)
    with pytest.raises(RuntimeError, match="expanded"):
        ct.ones(1, 3, device=device).expand(4, 3).add_(1)
    with pytest.raises(ValueError, match="does not match"):
        ct.ones(3, device=device).add_(ct.ones(2, 3, device=device))


def test_user_defined_elementwise(device, rng):
    x = random_array(rng, (3, 50), np.float32)
    tx = ct.from_numpy(x, device=device)
    y = ct.elementwise("out = a * exp(-b * x)", x=tx, a=2.0, b=0.5)
    assert_close(y, 2.0 * np.exp(-0.5 * x.astype(np.float64)), rtol=2e-6)
    z = ct.elementwise("x * y + 1", x=tx, y=tx.T[:1].T)  # broadcast, strided
    assert_close(z, x.astype(np.float64) * x[:, :1] + 1, rtol=2e-6)
    with pytest.raises(ct.KernelBuildError, match="elementwise.cl"):
        ct.elementwise("out = no_such_function(x)", x=tx)


def test_elementwise_operand_named_like_out(device):
    x = ct.from_numpy(np.array([-1.0, 2.0], np.float32), device=device)
    got = ct.elementwise("outer >= 0 ? outer : 0", outer=x).numpy()
    np.testing.assert_array_equal(got, [0.0, 2.0])


def test_elementwise_assignment_forms(device):
    x = ct.from_numpy(np.array([-1.0, 2.0], np.float32), device=device)
    np.testing.assert_array_equal(ct.elementwise(" out= x * 2;", x=x).numpy(), [-2.0, 4.0])
    np.testing.assert_array_equal(ct.elementwise("out == 2 ? 1 : 0", out=x).numpy(), [0.0, 1.0])


def test_bad_inputs(device):
    a = ct.ones(2, 3, device=device)
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"):
        a + ct.ones(4, device=device)
    with pytest.raises(TypeError, match="str"):
        a + "x"
    with pytest.raises(TypeError, match="bool"):
        -ct.ones(2, dtype=ct.bool, device=device)
    with pytest.raises(TypeError, match="condition"):
        ct.where(a, a, a)
    with pytest.raises(ValueError, match="at least one"):
        a.clamp()


def test_mixed_devices_raise(device):
    twin = ct.Device(device.index + "-twin", device.cl_device)  # same hardware, another context
    a = ct.ones(3, device=device)
    b = ct.ones(3, device=twin)
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    assert_close(a + b.to(device), [2, 2, 2])


@st.composite
def _broadcast_case(draw):
    nd = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd))
    other = [1 if draw(st.booleans()) else n for n in shape]
    other = other[draw(st.integers(0, nd - 1)):]
    perm = draw(st.permutations(range(nd)))
    step = draw(st.integers(1, 2))
    return shape, other, perm, step


@settings(max_examples=40, deadline=None)
@given(case=_broadcast_case(), seed=st.integers(0, 2**16))
def test_property_broadcast_strided(device, case, seed):
    from cltensor.ops import elementwise
    for kernel in ("ew_rows", "ew_strided"):
        elementwise.STRIDED_KERNEL = kernel
        try:
            _check_broadcast_strided(device, case, seed)
        finally:
            elementwise.STRIDED_KERNEL = None


def _check_broadcast_strided(device, case, seed):
    shape, other, perm, step = case
    rng = np.random.default_rng(seed)
    # build `a` as a permuted, step-sliced view of a larger tensor
    big_shape = [n * step for n in shape]
    big = random_array(rng, [big_shape[p] for p in perm], np.float32)
    inv = np.argsort(perm)
    tb = ct.from_numpy(big, device=device)
    sl = tuple(slice(None, None, step) for _ in shape)
    a_np = big.transpose(inv)[sl]
    a = tb.permute(*inv.tolist())[sl]
    b_np = random_array(rng, other, np.float32)
    b = ct.from_numpy(b_np, device=device)
    assert_close(a * b - b, a_np.astype(np.float64) * b_np - b_np, rtol=1e-6, atol=1e-6)
    assert_close(ct.maximum(b, a), np.maximum(b_np, a_np))


def test_long_rows_are_chunked(device, rng, strided_kernel, monkeypatch):
    from cltensor.ops import elementwise
    monkeypatch.setattr(elementwise, "ROW_CHUNK", 7)
    a = random_array(rng, (3, 50), np.float32)
    t = ct.from_numpy(a, device=device)
    assert_close(t.T.contiguous(), a.T)
    assert_close(t[:, ::3] + t[:, :1], a[:, ::3] + a[:, :1])


def test_launch_is_split_past_the_group_limit(device, rng, monkeypatch):
    from cltensor import program
    from cltensor.ops import elementwise
    monkeypatch.setattr(program, "MAX_GROUPS", 2)
    monkeypatch.setattr(elementwise, "STRIDED_KERNEL", "ew_strided")
    a = random_array(rng, (3, 1400), np.float32)
    t = ct.from_numpy(a, device=device)
    with ct.profile() as prof:  # NOTE: a view that is not dense, so the result is contiguous
        got = t[:, ::2].T * 2  # 700 rows of 3: several launches told apart by global offsets
    assert sum(r[1] for r in prof.table()) > 1
    assert_close(got, a[:, ::2].T * 2)


def test_large_tensor_multiple_of_nothing(device, rng):
    n = 100_003
    a = random_array(rng, (n,), np.float32)
    t = ct.from_numpy(a, device=device)
    assert_close(t * 2 + 1, a.astype(np.float64) * 2 + 1)
    assert math.isclose((t * 0 + 1).numpy().sum(), n)


@pytest.mark.parametrize("items", [1, 3, 4])
def test_contiguous_kernel_items_per_work_item(device, rng, fp_dtypes, monkeypatch, items):
    """ew_contig with 1, 3 and 4 elements per work-item (each device kind has its own count):
    sizes that are no multiple of it, scalars, bool results, integers, in place; the output is
    poisoned first, so elements no work-item writes show."""
    from cltensor.ops import elementwise
    monkeypatch.setattr(elementwise, "CONTIG_ITEMS", items)
    for n in (1, 5, 1001, 10_007):  # a CPU work-group has up to 1024 work-items
        for dtype in fp_dtypes:
            a, b = random_array(rng, (n,), dtype), random_array(rng, (n,), dtype)
            ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
            out = ct.full((n,), float("nan"), dtype=ta.dtype, device=device)
            ct.mul(ta, tb, out=out)
            assert_close(out, a.astype(np.float64) * b)
            assert_close(ta.relu() - 0.5, np.maximum(a, 0) - 0.5)
            assert ((ta > tb).numpy() == (a > b)).all()
            ta.mul_(2).add_(tb)
            assert_close(ta, 2 * a.astype(np.float64) + b)
        i = np.arange(n, dtype=np.int64) - n // 2
        assert ((ct.from_numpy(i, device=device) * 3).numpy() == i * 3).all()


_POW_BASES = [-0.0, 0.0, -np.inf, np.inf, np.nan, 1.0, -1.0, -2.0, 2.0, 0.5, -0.5, 3e19, 1e-20,
              -7.3, 65504.0]
_POW_EXPONENTS = [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, 1.7, -1.7, np.inf, -np.inf, np.nan,
                  1e10, 2.0 ** 24 + 2, 255.0, -128.5]


def _same_bits_or_nan(got, want, ulps=0):
    """got equals want (its sign too; NaN where want is NaN), or within `ulps` of it."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    g, w = got[~nan], want[~nan]
    close = (g == w) & (np.signbit(g) == np.signbit(w))
    if ulps:
        close |= np.isfinite(w) & (np.abs(g - w) <= ulps * np.spacing(np.abs(w)))
    assert close.all(), list(zip(g[~close], w[~close]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_special_values_follow_c99(device, dtype):
    """pow's special cases (signed zeros, infinities, NaN, negative bases) as C99 and numpy
    give them, tensor ** tensor and tensor ** number, on every device."""
    if dtype == "float64" and not device.has_fp64:
        pytest.skip("the device has no float64")
    a = np.repeat(np.array(_POW_BASES, dtype), len(_POW_EXPONENTS))
    b = np.tile(np.array(_POW_EXPONENTS, dtype), len(_POW_BASES))
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    got = ct.tensor(a, device=device).pow(ct.tensor(b, device=device)).numpy()
    _same_bits_or_nan(got, want, ulps=1)
    base = np.array(_POW_BASES, dtype)
    for e in (1.7, -1.7, 255.0, np.inf):  # a Python number as the exponent
        with np.errstate(all="ignore"):
            want = np.power(base.astype(np.float64), float(np.array(e, dtype))).astype(dtype)
        _same_bits_or_nan(ct.tensor(base, device=device).pow(e).numpy(), want, ulps=1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_pow_scalar_forms_are_torchs(device, dtype):
    """x ** 0.5, -0.5, -1, 2, 3, -2 and 1 follow torch, which computes them as sqrt, rsqrt,
    reciprocal, x * x, x * x * x, 1 / (x * x) and a copy: 0.5 of -inf is NaN and of -0 is -0
    (C's pow gives inf and 0); values within an ulp (sqrt's rounding differs by runtime)."""
    torch = pytest.importorskip("torch")
    if dtype == "float64" and not device.has_fp64:
        pytest.skip("the device has no float64")
    x = np.array(_POW_BASES + [0.3, -0.7, 123.456], np.float64).astype(dtype)
    t = ct.tensor(x, device=device)
    for e in (0.5, -0.5, -1.0, -1, 2.0, 2, 3.0, -2.0, 1.0):
        want = torch.from_numpy(x).pow(e).numpy()
        _same_bits_or_nan(t.pow(e).numpy(), want, ulps=1)


def test_float_division_and_sqrt_round_as_ieee(device, rng):
    """float32 division and sqrt bit for bit numpy's (IEEE 754, as torch's): x / x is 1.
    OpenCL allows 2.5-3 ulp unless the build asks for correct rounding, which cltensor does on
    devices that offer it (NVIDIA's OpenCL divided to 2 ulp without it)."""
    n = 20000
    a = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    A, B = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    np.testing.assert_array_equal((A / B).numpy(), a / b)
    np.testing.assert_array_equal((A / A).numpy(), np.ones(n, np.float32))
    np.testing.assert_array_equal(ct.sqrt(A.abs()).numpy(), np.sqrt(np.abs(a)))


# (name, op on a module m (torch or cltensor) and a tensor x, x's shape, x channels_last)
LAYOUT_CASES = [
    ("add a scalar", lambda m, x: x + 1, (2, 3, 4, 5), True),
    ("square", lambda m, x: x * x, (2, 3, 4, 5), True),
    ("a broadcast bias after", lambda m, x: x + m.ones(1, 3, 1, 1), (2, 3, 4, 5), True),
    ("a broadcast bias first", lambda m, x: m.ones(1, 3, 1, 1) + x, (2, 3, 4, 5), True),
    ("exp", lambda m, x: x.exp(), (2, 3, 4, 5), True),
    ("a comparison", lambda m, x: x > 0, (2, 3, 4, 5), True),
    ("where", lambda m, x: m.where(x > 0, x, m.zeros_like(x)), (2, 3, 4, 5), True),
    ("with a contiguous operand after", lambda m, x: x + m.ones(2, 3, 4, 5), (2, 3, 4, 5), True),
    ("with a contiguous operand first", lambda m, x: m.ones(2, 3, 4, 5) + x, (2, 3, 4, 5), True),
    ("a transposed matrix", lambda m, x: x.t().exp(), (4, 6), False),
    ("two transposed matrices", lambda m, x: x.t() + x.t(), (4, 6), False),
    ("a sliced matrix", lambda m, x: x[:, ::2] * 2, (4, 6), False),
]


@pytest.mark.parametrize("name, op, shape, channels_last", LAYOUT_CASES,
                         ids=[c[0] for c in LAYOUT_CASES])
def test_pointwise_results_are_laid_out_as_torchs(device, rng, name, op, shape, channels_last):
    """A pointwise result takes the layout of its first operand of the result's shape (dense:
    its strides; else channels_last or contiguous), with torch's values and strides."""
    torch = pytest.importorskip("torch")
    a = rng.standard_normal(shape).astype(np.float32)
    tx, cx = torch.from_numpy(a), ct.from_numpy(a, device=device)
    if channels_last:
        tx = tx.contiguous(memory_format=torch.channels_last)
        cx = cx.contiguous(memory_format=ct.channels_last)
    want, got = op(torch, tx), op(ct, cx)
    assert got.strides == want.stride(), (got.strides, want.stride())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)  # exp: within an ulp


def test_operands_laid_out_as_the_result_take_the_flat_kernel(device, rng):
    """Operands laid out as the result (channels_last images, transposed matrices) are walked in
    memory order as one flat range (ew_contig or its vector form), not dim by dim."""
    a, b = (rng.standard_normal((2, 3, 4, 5)).astype(np.float32) for _ in range(2))
    x, y = (ct.from_numpy(v, device=device).contiguous(memory_format=ct.channels_last)
            for v in (a, b))
    m = ct.from_numpy(a.reshape(6, 20), device=device).t()
    with ct.profile() as prof:
        got, got_t = x * y + x, m.exp() * m
    assert {r["name"] for r in prof.records()} <= {"ew_contig", "ew_vec16"}, prof.records()
    assert_close(got, a.astype(np.float64) * b + a)
    assert_close(got_t, np.exp(a.reshape(6, 20).T.astype(np.float64)) * a.reshape(6, 20).T)
