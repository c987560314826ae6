"""The GEMM engine (cltensor/ops/gemm/): every kernel family against float64 numpy with every
transposition, batches, the fused epilogue, awkward sizes and poisoned outputs, bad input, a
property test, the small-problem thresholds and gemm_rowdot; and the helpers (the bound below,
poisoned outputs, launch counts) that the other test_gemm_*.py files import. How the fast
families read their operands is in test_gemm_families.py; device limits, the plans, the
parameter database and the tuner in test_gemm_tuning.py.

Error bounds, per dtype (u = 2**-24 for float32, 2**-53 for float64). Every element of
C = act(alpha * A @ B + beta * Ci + row_bias + col_bias) satisfies

    |C - C_exact| <= (K + 5) * u * (|alpha| |A| @ |B| + |beta Ci| + |row_bias| + |col_bias|)

the classical bound for a length-K dot product in any summation order, with or without fused
multiply-adds, plus the epilogue's roundings (ReLU is 1-Lipschitz and adds none). Exact values
come from numpy in long double. On random data the norm-relative error is far smaller; tested
here at most 1e-5 for float32 and 1e-13 for float64 with K up to 2053.
"""
import itertools
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cltensor
from cltensor import tune
from cltensor.device import Device
from cltensor.ops import gemm as gm
from cltensor.testing import random_array, rel_error

UNIT_ROUNDOFF = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float64): 2.0**-53}
NORM_TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-13}
SIZES = [(1, 1, 1), (1, 17, 5), (13, 1, 29), (67, 45, 37), (130, 66, 17), (64, 64, 64),
         (5, 131, 2), (29, 31, 1)]
SHIPPED_DB = tune.DB_DIR / "gemm.json"


@pytest.fixture(params=gm.FAMILIES)
def family(request, monkeypatch):
    """Force one GEMM family for every product the test makes."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", request.param)
    return request.param


def put(device, array):
    return cltensor.from_numpy(np.ascontiguousarray(array), device=device)


def stored(device, x, transposed):
    """x as a tensor, kept in memory transposed (a .mT view of the transpose) if asked."""
    if not transposed:
        return put(device, x)
    return put(device, np.swapaxes(x, -1, -2)).mT


def poisoned(device, shape, dtype):
    return cltensor.full(shape, float("nan"), dtype=dtype, device=device)


def exact(a, b, alpha=1, beta=0, c=None, row_bias=None, col_bias=None, relu=False):
    """(value, magnitude) of the GEMM in long double: the exact result for the bound, and the
    sum of absolute values that rounding errors scale with."""
    ld = np.longdouble
    a, b = a.astype(ld), b.astype(ld)
    value, mag = ld(alpha) * np.matmul(a, b), abs(ld(alpha)) * np.matmul(abs(a), abs(b))
    terms = [] if c is None else [ld(beta) * c.astype(ld)]
    terms += [] if row_bias is None else [row_bias.astype(ld)[:, None]]
    terms += [] if col_bias is None else [col_bias.astype(ld)]
    for t in terms:
        value, mag = value + t, mag + abs(t)
    return (np.maximum(value, 0) if relu else value), mag


def check_bound(out, expected, dtype, k):
    """The elementwise bound of the module docstring for a length-k product; every element
    written (no NaN of the poison left)."""
    value, mag = expected
    got = out.numpy().astype(np.longdouble)
    assert got.shape == value.shape, f"shape {got.shape} != {value.shape}"
    assert out.dtype == np.dtype(dtype)
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) elements left"
    bound = (k + 5) * UNIT_ROUNDOFF[np.dtype(dtype)] * mag
    excess = abs(got - value) - bound
    if excess.size and excess.max() > 0:
        worst = np.unravel_index(np.argmax(excess), excess.shape)
        raise AssertionError(f"error {float(abs(got - value)[worst]):.3g} over the bound "
                             f"{float(bound[worst]):.3g} at {worst}")


def run_check(out, a, b, dtype, **epilogue):
    check_bound(out, exact(a, b, **epilogue), dtype, a.shape[-1])


def _kernel_counts(fn):
    with cltensor.profile() as prof:
        fn()
    counts = {}
    for r in prof.records():
        counts[r["name"]] = counts.get(r["name"], 0) + 1
    return counts


def epilogue_outputs(device, rng, dtype, batch, m, n):
    """(epilogue for run_check, the same on the device, {name: output}): alpha, row and column
    biases and ReLU; contiguous, offset and column-strided (*batch, m, n) outputs poisoned."""
    rb, cb = random_array(rng, (m,), dtype), random_array(rng, (n,), dtype)
    epi = dict(alpha=-0.75, row_bias=rb, col_bias=cb, relu=True)
    dev_epi = dict(epi, row_bias=put(device, rb), col_bias=put(device, cb))
    outs = {"contiguous": poisoned(device, (*batch, m, n), dtype),
            "offset 1": poisoned(device, (*batch, m, n + 1), dtype)[..., 1:],
            "column-strided": poisoned(device, (*batch, n, m), dtype).mT}
    return epi, dev_epi, outs


# ---- families, transpositions, sizes ----------------------------------------------------------

def test_every_family_transposition_and_size(device, rng, family, fp_dtypes):
    for dtype, (m, n, k) in itertools.product(fp_dtypes, SIZES):
        a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
        for ta, tb in itertools.product((False, True), repeat=2):
            out = poisoned(device, (m, n), dtype)
            cltensor.gemm(stored(device, a, ta), stored(device, b, tb), out)
            run_check(out, a, b, dtype)


def test_large_k_accuracy(device, rng, family, fp_dtypes):
    for dtype in fp_dtypes:
        a, b = random_array(rng, (9, 2053), dtype), random_array(rng, (2053, 35), dtype)
        out = cltensor.gemm(put(device, a), put(device, b))
        run_check(out, a, b, dtype)
        assert rel_error(out, a.astype(np.float64) @ b) <= NORM_TOL[np.dtype(dtype)]


def test_integer_dtypes_are_exact(device, rng, family):
    for dtype in (np.int32, np.int64):
        a, b = random_array(rng, (5, 19, 9), dtype), random_array(rng, (9, 33), dtype)
        c = random_array(rng, (33,), dtype)
        out = cltensor.gemm(put(device, a), put(device, b), col_bias=put(device, c), relu=True)
        np.testing.assert_array_equal(out.numpy(), np.maximum(a @ b + c, 0))


def test_k_zero(device, rng, family):
    c = random_array(rng, (4, 5))
    bias = random_array(rng, (4,))
    out = poisoned(device, (4, 5), np.float32)
    cltensor.gemm(put(device, np.zeros((4, 0), np.float32)), put(device, np.zeros((0, 5), np.float32)),
                  out, c=put(device, c), beta=0.5, row_bias=put(device, bias))
    np.testing.assert_allclose(out.numpy(), 0.5 * c + bias[:, None], rtol=1e-6)


# ---- the fused epilogue -----------------------------------------------------------------------

EPILOGUES = [
    {"alpha": 1.5},
    {"alpha": -0.5, "beta": 2.0, "c": "full"},
    {"beta": -1.0, "c": "row"},
    {"row_bias": True},
    {"col_bias": True, "relu": True},
    {"alpha": 0.75, "beta": 0.5, "c": "full", "row_bias": True, "col_bias": True, "relu": True},
    {"relu": True},
]


def _epilogue_case(device, rng, spec, m, n, dtype):
    """(tensor kwargs, numpy kwargs) of one epilogue spec, with strided biases."""
    kw, ref = {}, {}
    for name in ("alpha", "beta", "relu"):
        if name in spec:
            kw[name] = ref[name] = spec[name]
    if "c" in spec:
        ref["c"] = random_array(rng, (m, n) if spec["c"] == "full" else (n,), dtype)
        kw["c"] = put(device, ref["c"])
    for name, size in (("row_bias", m), ("col_bias", n)):
        if spec.get(name):
            base = random_array(rng, (2 * size + 1,), dtype)
            ref[name], kw[name] = base[1::2], put(device, base)[1::2]
    if "c" in ref:
        ref["beta"] = spec.get("beta", 1)
    return kw, ref


def test_fused_epilogue(device, rng, family, fp_dtypes):
    for dtype, spec in itertools.product(fp_dtypes, EPILOGUES):
        for m, n, k in ((67, 45, 37), (64, 64, 32)):
            a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
            kw, ref = _epilogue_case(device, rng, spec, m, n, dtype)
            big = poisoned(device, (m + 2, 2 * n), dtype)
            out = big[1:m + 1, ::2]  # a strided, offset output view
            assert cltensor.gemm(put(device, a), stored(device, b, True), out, **kw) is out
            run_check(out, a, b, dtype, **ref)
            host = big.numpy()
            assert np.isnan(host[0]).all() and np.isnan(host[:, 1::2]).all(), "wrote outside out"


def test_relu_keeps_nan_and_beta_zero_ignores_c(device, rng, family):
    a, b = random_array(rng, (20, 7)), random_array(rng, (7, 18))
    c = random_array(rng, (20, 18))
    c[3, 4] = np.nan
    A, B, C = put(device, a), put(device, b), put(device, c)
    out = cltensor.gemm(A, B, c=C, relu=True).numpy()
    assert np.isnan(out[3, 4]) and np.isnan(out).sum() == 1
    out = cltensor.gemm(A, B, c=C, beta=0, relu=True)
    run_check(out, a, b, np.float32, relu=True)


def test_out_is_c_in_place_and_aliasing(device, rng, family):
    a, b, c = random_array(rng, (9, 9)), random_array(rng, (9, 9)), random_array(rng, (9, 9))
    C = put(device, c)
    assert cltensor.gemm(put(device, a), put(device, b), C, c=C, beta=0.5, alpha=2) is C
    run_check(C, a, b, np.float32, alpha=2, beta=0.5, c=c)
    A = put(device, a)  # out is also an operand and its bias: computed through a temporary
    cltensor.gemm(A, A.mT, A, row_bias=A[0])
    run_check(A, a, a.T, np.float32, row_bias=a[0])


# ---- batches ----------------------------------------------------------------------------------

def test_batched_strided_and_broadcast(device, rng, family, fp_dtypes):
    for dtype in fp_dtypes:
        x = random_array(rng, (3, 4, 13, 9), dtype)
        w = random_array(rng, (4, 9, 11), dtype)
        bias = random_array(rng, (13,), dtype)
        X = put(device, x.transpose(1, 0, 2, 3)).permute(1, 0, 2, 3)  # batch dims that cannot merge
        out = poisoned(device, (3, 4, 13, 11), dtype)
        cltensor.gemm(X, put(device, w), out, row_bias=put(device, bias), relu=True)
        run_check(out, x, w, dtype, row_bias=bias, relu=True)
        shared = random_array(rng, (9, 11), dtype)  # one matrix for every batch (folded rows)
        out = cltensor.gemm(put(device, x), put(device, shared).expand(3, 4, 9, 11),
                            col_bias=put(device, bias[:11]))
        run_check(out, x, shared, dtype, col_bias=bias[:11])
        lhs = random_array(rng, (13, 9), dtype)  # A shared, B batched (stride-0 batch of A)
        out = cltensor.gemm(put(device, lhs), put(device, w))
        run_check(out, np.broadcast_to(lhs, (4, 13, 9)), w, dtype)


def test_batch_of_transposed_slices(device, rng, family):
    base = random_array(rng, (6, 40, 30))
    a = base[::2, 3:20, ::2]  # (3, 17, 15): step-sliced batch, offset rows, strided columns
    A = put(device, base)[::2, 3:20, ::2]
    b = random_array(rng, (3, 12, 15))
    out = cltensor.gemm(A, put(device, b).mT, c=put(device, np.ones((12,), np.float32)), beta=3)
    run_check(out, a, b.transpose(0, 2, 1), np.float32, beta=3, c=np.ones(12, np.float32))


# ---- bad input --------------------------------------------------------------------------------

def test_gemm_errors_leave_data_untouched(device, rng):
    a, c = random_array(rng, (3, 4)), random_array(rng, (3, 5))
    A, C = put(device, a), put(device, c)
    B = put(device, random_array(rng, (4, 5)))
    with pytest.raises(ValueError, match=r"gemm: shapes \(3, 4\) and \(3, 4\) cannot be multiplied"):
        cltensor.gemm(A, A, C)
    with pytest.raises(ValueError, match="gemm: expected a and b to be at least 2-d, got 1-d"):
        cltensor.gemm(A[0], B)
    with pytest.raises(ValueError, match=r"row_bias must have shape \(3,\), got \(5,\)"):
        cltensor.gemm(A, B, C, row_bias=C[0])
    with pytest.raises(ValueError, match=r"col_bias must have shape \(5,\), got \(3, 5\)"):
        cltensor.gemm(A, B, C, col_bias=C)
    with pytest.raises(ValueError, match=r"input of shape \(4,\) cannot be broadcast"):
        cltensor.gemm(A, B, C, c=A[0])
    with pytest.raises(ValueError, match=r"result's shape \(3, 5\) does not match out's shape"):
        cltensor.gemm(A, B, A)
    with pytest.raises(RuntimeError, match="expanded view"):
        cltensor.gemm(A, B, C[:1].expand(3, 5))
    with pytest.raises(TypeError, match="gemm: expected all operands to have the same dtype"):
        cltensor.gemm(A, B, C, col_bias=cltensor.ones(5, dtype=cltensor.int32, device=device))
    with pytest.raises(TypeError, match="gemm: alpha must be a real number"):
        cltensor.gemm(A, B, C, alpha="2")
    with pytest.raises(TypeError, match="gemm: expected tensors, got ndarray"):
        cltensor.gemm(A, b=np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"batch dims of shapes \(2, 3, 4\) and \(3, 4, 5\)"):
        cltensor.gemm(put(device, np.ones((2, 3, 4), np.float32)),
                      put(device, np.ones((3, 4, 5), np.float32)))
    other = Device(device.index + "-other-context", device.cl_device)
    with pytest.raises(RuntimeError, match="gemm: expected all tensors on the same device"):
        cltensor.gemm(A, B, C, row_bias=cltensor.from_numpy(c[:, 0].copy(), device=other))
    np.testing.assert_array_equal(C.numpy(), c)
    np.testing.assert_array_equal(A.numpy(), a)


# ---- property test ----------------------------------------------------------------------------

@st.composite
def gemm_case(draw):
    """Shapes, batch broadcasting, layouts, an epilogue and the family to run."""
    m, n, k = (draw(st.integers(1, 70)) for _ in range(3))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    a_batch = tuple(draw(st.sampled_from([1, d])) for d in batch)
    b_batch = tuple(draw(st.sampled_from([1, d])) for d in batch)
    return {"m": m, "n": n, "k": k, "a_batch": a_batch, "b_batch": b_batch,
            "ta": draw(st.booleans()), "tb": draw(st.booleans()),
            "row_bias": draw(st.booleans()), "col_bias": draw(st.booleans()),
            "relu": draw(st.booleans()), "beta": draw(st.sampled_from([0.0, 1.0, -0.5])),
            "family": draw(st.sampled_from(gm.FAMILIES))}


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=gemm_case())
def test_gemm_property(device, case):
    rng = np.random.default_rng(zlib.crc32(repr(sorted(case.items())).encode()))
    m, n, k = case["m"], case["n"], case["k"]
    a = random_array(rng, case["a_batch"] + (m, k))
    b = random_array(rng, case["b_batch"] + (k, n))
    shape = np.broadcast_shapes(case["a_batch"], case["b_batch"]) + (m, n)
    c = random_array(rng, shape)
    kw = {"beta": case["beta"], "relu": case["relu"], "c": put(device, c)}
    ref = {"beta": case["beta"], "relu": case["relu"], "c": c}
    for name, size in (("row_bias", m), ("col_bias", n)):
        if case[name]:
            ref[name] = random_array(rng, (size,))
            kw[name] = put(device, ref[name])
    old, gm.FORCE_FAMILY = gm.FORCE_FAMILY, case["family"]
    try:
        out = cltensor.gemm(stored(device, a, case["ta"]), stored(device, b, case["tb"]), **kw)
    finally:
        gm.FORCE_FAMILY = old
    run_check(out, np.broadcast_to(a, shape[:-2] + (m, k)),
              np.broadcast_to(b, shape[:-2] + (k, n)), np.float32, **ref)


def test_small_problem_thresholds(device):
    """Below min_work (M*N*K*batches), min_dim (min(M, N)) or min_m (M) the entry's small
    family runs; integer products always take it."""
    entry = {"family": "packed", "small": "direct", "min_work": 1000, "min_dim": 4, "min_m": 24}

    def fam(shape, nbatch=1, dtype=np.float32):
        return gm.family_of(device, dtype, entry, shape, nbatch)

    assert fam((64, 64, 64)) == "packed"
    assert fam((8, 8, 8)) == "direct"            # min_work
    assert fam((4, 8, 8), nbatch=64) == "direct"  # min_m (the work is enough)
    assert fam((512, 3, 512)) == "direct"        # min_dim
    assert fam((16, 4096, 4096)) == "direct"     # min_m
    assert fam((24, 4096, 4096)) == "packed"
    assert fam((4096, 8, 4096)) == "packed"      # few columns, many rows: packed
    assert fam((64, 64, 64), dtype=np.int32) == "direct"


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("kernel", ["gemm_rowdot", "gemm_rowdot_wg"])
def test_rowdot_linear_layers(device, rng, fp_dtypes, m, kernel):
    """gemm_rowdot and gemm_rowdot_wg (x @ W^T with few rows, both K-contiguous) on every
    device: K with and without a vector tail, N prime, offset (unaligned) views, batches, the
    whole epilogue; poisoned outputs."""
    for dtype in fp_dtypes:
        _check_rowdot(device, rng, dtype, m, kernel)


def epilogue_args(device, rng, dtype, m, n, epi):
    """gemm_into's keyword arguments for the epilogue named by epi (alpha, beta, relu,
    row_bias, col_bias) on an (m, n) result, random where data is needed, and exact()'s."""
    kw, ref_kw = {}, {}
    if "beta" in epi:
        c = random_array(rng, (m, n), dtype)
        kw.update(c_in=put(device, c), beta=epi["beta"])
        ref_kw.update(c=c, beta=epi["beta"])
    for side, size in (("row_bias", m), ("col_bias", n)):
        if epi.get(side):
            bias = random_array(rng, (size,), dtype)
            kw[side], ref_kw[side] = put(device, bias), bias
    for flag in ("alpha", "relu"):
        if flag in epi:
            kw[flag] = ref_kw[flag] = epi[flag]
    return kw, ref_kw


def _check_rowdot(device, rng, dtype, m, kernel):
    entry = dict(gm.entry_for(device, dtype), rowdot_max_m=8,
                 rowdot_wg=int(kernel == "gemm_rowdot_wg"))
    cases = [(37, 64, {}), (131, 53, {"alpha": -0.5, "relu": True}),
             (16, 1000, {"beta": 2.0}), (29, 7, {"row_bias": True, "col_bias": True})]
    for n, k, epi in cases:
        x, w = random_array(rng, (m, k + 1), dtype), random_array(rng, (n, k + 1), dtype)
        a, b = put(device, x)[:, 1:], put(device, w)[:, 1:].mT  # offset views: unaligned
        kw, ref_kw = epilogue_args(device, rng, dtype, m, n, epi)
        out = poisoned(device, (m, n), dtype)
        with cltensor.profile() as prof:
            gm.gemm_into(a, b, out, entry=entry, **kw)
        assert {r["name"] for r in prof.records()} == {kernel}
        run_check(out, x[:, 1:], w[:, 1:].T, dtype, **ref_kw)
    # aligned and batched: a (3, m, 64) batch against one shared weight
    x, w = random_array(rng, (3, m, 64), dtype), random_array(rng, (40, 64), dtype)
    out = poisoned(device, (3, m, 40), dtype)
    gm.gemm_into(put(device, x), put(device, w).mT.expand(3, 64, 40), out, entry=entry)
    run_check(out, x, np.broadcast_to(w.T, (3, 64, 40)), dtype)
