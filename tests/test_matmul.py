"""matmul, mm, bmm, mv, dot, addmm, baddbmm, outer against numpy in float64, on every device
and with every GEMM family forced in turn (direct, tiled, packed, xgemm: cltensor/ops/gemm/).
The GEMM engine's own tests are in test_gemm.py (epilogue, error bounds), test_gemm_families.py
and test_gemm_tuning.py (database, tuner)."""
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cltensor
from cltensor.device import Device
from cltensor.ops import gemm as gm
from cltensor.testing import random_array, rel_error

TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
AWKWARD = [(1, 1, 1), (1, 7, 17), (7, 1, 33), (17, 33, 1), (33, 65, 7), (65, 17, 127),
           (127, 127, 65), (7, 127, 1), (1, 127, 127), (64, 64, 64), (33, 7, 65)]


@pytest.fixture(params=gm.FAMILIES)
def variant(request, monkeypatch):
    """Force one GEMM family for every product the test makes."""
    monkeypatch.setattr(gm, "FORCE_FAMILY", request.param)
    return request.param


def put(device, array):
    return cltensor.from_numpy(np.ascontiguousarray(array), device=device)


def check(actual, expected, dtype, scale=None):
    """Shape and dtype match, and the norm-relative error is within the dtype's tolerance;
    relative to `scale` (the product of the operands' absolute values) when the result may
    cancel (a dot product of random signs), as rounding errors scale with |a| @ |b|."""
    assert actual.shape == np.shape(expected), f"shape {actual.shape} != {np.shape(expected)}"
    assert actual.dtype == np.dtype(dtype), f"dtype {actual.dtype} != {np.dtype(dtype)}"
    if np.size(expected) == 0:
        return
    if np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(actual.numpy(), expected)
        return
    err = rel_error(actual, expected)
    if scale is not None:
        err *= np.linalg.norm(expected) / np.linalg.norm(scale)
    assert err <= TOL[np.dtype(dtype)], f"norm-relative error {err:.3g}"


def ref(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def poisoned(device, shape, dtype):
    fill = float("nan") if np.dtype(dtype).kind == "f" else -12345
    return cltensor.full(shape, fill, dtype=dtype, device=device)


# ---- sizes and dtypes -------------------------------------------------------------------------

def test_mm_awkward_sizes(device, rng, fp_dtypes, variant):
    for dtype in fp_dtypes:
        for m, k, n in AWKWARD:
            a, b = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
            check(cltensor.mm(put(device, a), put(device, b)), ref(a, b), dtype)


def test_float32_large_k_accuracy(device, rng, variant):
    a = random_array(rng, (9, 2053), np.float32)
    b = random_array(rng, (2053, 35), np.float32)
    check(put(device, a) @ put(device, b), ref(a, b), np.float32)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_matmul_is_exact(device, rng, variant, dtype):
    a, b = random_array(rng, (4, 17, 9), dtype), random_array(rng, (9, 33), dtype)
    out = put(device, a) @ put(device, b)
    check(out, np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dtype), dtype)


def test_k_zero_gives_zeros_or_beta_input(device, rng, variant):
    a, b = put(device, np.zeros((3, 0), np.float32)), put(device, np.zeros((0, 5), np.float32))
    out = poisoned(device, (3, 5), np.float32)
    cltensor.mm(a, b, out=out)
    check(out, np.zeros((3, 5)), np.float32)
    c = random_array(rng, (5,), np.float32)
    check(cltensor.addmm(put(device, c), a, b, beta=0.5), np.broadcast_to(0.5 * c, (3, 5)),
          np.float32)
    check(cltensor.dot(put(device, np.zeros(0, np.float32)), put(device, np.zeros(0, np.float32))),
          np.float64(0), np.float32)


@pytest.mark.parametrize("sa, sb", [((0, 5), (5, 3)), ((4, 5), (5, 0)), ((0, 2, 3), (0, 3, 4)),
                                    ((2, 0, 3), (2, 3, 4))])
def test_empty_results(device, rng, sa, sb):
    a, b = random_array(rng, sa), random_array(rng, sb)
    check(put(device, a) @ put(device, b), ref(a, b), np.float32)


# ---- torch.matmul's shape rules ---------------------------------------------------------------

MATMUL_SHAPES = [
    ((7,), (7,)), ((5, 7), (7,)), ((7,), (7, 3)), ((4, 5, 7), (7,)), ((7,), (4, 7, 3)),
    ((4, 5, 7), (7, 3)), ((5, 7), (4, 7, 3)), ((2, 1, 5, 7), (3, 7, 3)),
    ((3, 1, 5, 7), (1, 2, 7, 1)),
    ((2, 3, 1, 5, 7), (4, 7, 6)), ((1, 7), (7, 1)), ((3, 1, 7), (1, 7, 3)),
]


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES)
def test_matmul_shape_rules(device, rng, variant, sa, sb):
    a, b = random_array(rng, sa), random_array(rng, sb)
    check(cltensor.matmul(put(device, a), put(device, b)), ref(a, b), np.float32)


def test_matmul_float64(device, rng, variant):
    if not device.has_fp64:
        pytest.skip("the device has no float64")
    a, b = random_array(rng, (3, 17, 33), np.float64), random_array(rng, (33, 65), np.float64)
    check(put(device, a) @ put(device, b), ref(a, b), np.float64)


def test_mm_bmm_mv_dot(device, rng, fp_dtypes):
    for dtype in fp_dtypes:
        a, b = random_array(rng, (17, 33), dtype), random_array(rng, (33, 7), dtype)
        x, y = random_array(rng, (33,), dtype), random_array(rng, (33,), dtype)
        ba, bb = random_array(rng, (5, 7, 33), dtype), random_array(rng, (5, 33, 17), dtype)
        A, B, X, Y = (put(device, t) for t in (a, b, x, y))
        check(cltensor.mm(A, B), ref(a, b), dtype)
        check(cltensor.bmm(put(device, ba), put(device, bb)), ref(ba, bb), dtype)
        check(cltensor.mv(A, X), ref(a, x), dtype)
        check(cltensor.dot(X, Y), ref(x, y), dtype)


def test_tensor_methods_and_operator(device, rng):
    a, b = random_array(rng, (6, 4)), random_array(rng, (4, 5))
    v, w = random_array(rng, (4,)), random_array(rng, (6,))
    A, B, V, W = (put(device, t) for t in (a, b, v, w))
    check(A @ B, ref(a, b), np.float32)
    check(A.matmul(B), ref(a, b), np.float32)
    check(A.mm(B), ref(a, b), np.float32)
    check(A.mv(V), ref(a, v), np.float32)
    check(V.dot(V), ref(v, v), np.float32)
    check(A.unsqueeze(0).bmm(B.unsqueeze(0)), ref(a, b)[None], np.float32)
    check(W.outer(V), np.outer(w, v), np.float32)
    check(W.ger(V), np.outer(w, v), np.float32)
    c = random_array(rng, (6, 5))
    check(put(device, c).addmm(A, B, beta=0.5), 0.5 * c + ref(a, b), np.float32)
    check(put(device, c[None]).baddbmm(A[None], B[None], alpha=2), c[None] + 2 * ref(a, b)[None],
          np.float32)


# ---- views: no copies needed ------------------------------------------------------------------

def _operand_views(device, rng, shape):
    """(numpy value, tensor view) pairs of one logical matrix under different layouts."""
    m, n = shape
    base = random_array(rng, (m + 3, 2 * n + 5))
    yield base[3:, 5::2], put(device, base)[3:, 5::2]                      # offset, step-sliced
    t = random_array(rng, (n, m))
    yield t.T, put(device, t).t()                                           # transposed
    big = random_array(rng, (2 * n, 3 * m))
    yield big[::2, ::3].T, put(device, big)[::2, ::3].t()                 # transposed and sliced
    row = random_array(rng, (1, n))
    yield np.broadcast_to(row, (m, n)), put(device, row).expand(m, n)      # stride-0 rows


def test_mm_strided_operands(device, rng, variant):
    m, k, n = 17, 33, 19
    b = random_array(rng, (k, n))
    a = random_array(rng, (m, k))
    for av, at in _operand_views(device, rng, (m, k)):
        check(at @ put(device, b), ref(av, b), np.float32)
    for bv, bt in _operand_views(device, rng, (k, n)):
        check(put(device, a) @ bt, ref(a, bv), np.float32)


def test_batched_strided_and_expanded(device, rng, variant):
    x = random_array(rng, (3, 6, 5, 7))
    X = put(device, x)
    w = random_array(rng, (7, 4))
    # permuted batch dims and a step slice: batch dims that cannot merge into one stride
    check(X.permute(1, 0, 2, 3)[::2] @ put(device, w), ref(x.transpose(1, 0, 2, 3)[::2], w),
          np.float32)
    # a shared matrix expanded over the batch (stride 0) and a transposed batched operand
    y = random_array(rng, (4, 4, 7))
    check(X[:, :4] @ put(device, y).mT, ref(x[:, :4], y.transpose(0, 2, 1)), np.float32)
    check(cltensor.bmm(put(device, w.T[None]).expand(6, 4, 7), X[0].mT),
          ref(np.broadcast_to(w.T, (6, 4, 7)), x[0].transpose(0, 2, 1)), np.float32)
    # a 1-d operand read with a step
    v = random_array(rng, (14,))
    check(X @ put(device, v)[::2], ref(x, v[::2]), np.float32)


def test_strided_result_matches_contiguous(device, rng, variant):
    a, b = random_array(rng, (2, 5, 9)), random_array(rng, (2, 9, 3))
    A, B = put(device, a), put(device, b)
    contiguous = (A @ B).numpy()
    non_contig = (put(device, a.transpose(1, 0, 2)).permute(1, 0, 2) @
                  put(device, b.transpose(2, 1, 0)).permute(2, 1, 0))
    np.testing.assert_allclose(non_contig.numpy(), contiguous, rtol=1e-6, atol=1e-6)


# ---- outputs ----------------------------------------------------------------------------------

def test_out_writes_only_its_view(device, rng, variant):
    a, b = random_array(rng, (7, 5)), random_array(rng, (5, 6))
    big = poisoned(device, (9, 14), np.float32)
    view = big[1:7, 1::2].t()                      # (7, 6), strided and transposed
    res = cltensor.mm(put(device, a), put(device, b), out=view)
    assert res is view
    check(view, ref(a, b), np.float32)
    mask = np.zeros((9, 14), bool)
    mask[1:7, 1::2] = True
    host = big.numpy()
    assert np.isnan(host[~mask]).all(), "mm wrote outside its output view"


def test_out_for_every_op(device, rng, variant):
    a, b = random_array(rng, (4, 6)), random_array(rng, (6, 3))
    v, w = random_array(rng, (6,)), random_array(rng, (6,))
    ba, bb = random_array(rng, (2, 4, 6)), random_array(rng, (2, 6, 3))
    c = random_array(rng, (3,))
    A, B, V, W = (put(device, t) for t in (a, b, v, w))
    cases = [
        (lambda o: cltensor.matmul(put(device, ba), B, out=o), ref(ba, b)),
        (lambda o: cltensor.bmm(put(device, ba), put(device, bb), out=o), ref(ba, bb)),
        (lambda o: cltensor.mv(A, V, out=o), ref(a, v)),
        (lambda o: cltensor.dot(V, W, out=o), ref(v, w), ref(abs(v), abs(w))),
        (lambda o: cltensor.addmm(put(device, c), A, B, alpha=2, out=o), c + 2 * ref(a, b)),
        (lambda o: cltensor.baddbmm(put(device, c), put(device, ba), put(device, bb), beta=-1,
                                    out=o), ref(ba, bb) - c),
        (lambda o: cltensor.outer(V, W, out=o), np.outer(v, w)),
    ]
    for fn, expected, *scale in cases:
        out = poisoned(device, expected.shape, np.float32)
        assert fn(out) is out
        check(out, expected, np.float32, *scale)


def test_out_aliasing_an_input(device, rng, variant):
    a, b = random_array(rng, (5, 5)), random_array(rng, (5, 5))
    A = put(device, a)
    cltensor.mm(A, put(device, b), out=A)
    check(A, ref(a, b), np.float32)
    B = put(device, b)
    cltensor.matmul(put(device, a), B.t(), out=B)
    check(B, ref(a, b.T), np.float32)


def test_addmm_beta_zero_ignores_nan_input(device, rng, variant):
    a, b = random_array(rng, (6, 5)), random_array(rng, (5, 7))
    nan_input = poisoned(device, (6, 7), np.float32)
    check(cltensor.addmm(nan_input, put(device, a), put(device, b), beta=0, alpha=1.5),
          1.5 * ref(a, b), np.float32)
    nan_input.addmm_(put(device, a), put(device, b), beta=0)
    check(nan_input, ref(a, b), np.float32)


@pytest.mark.parametrize("cshape", [(6, 7), (7,), (6, 1), ()])
def test_addmm_broadcasts_input(device, rng, variant, cshape):
    a, b, c = random_array(rng, (6, 5)), random_array(rng, (5, 7)), random_array(rng, cshape)
    out = cltensor.addmm(put(device, c), put(device, a), put(device, b), beta=0.25, alpha=-2)
    check(out, 0.25 * c - 2 * ref(a, b), np.float32)


def test_inplace_addmm_and_baddbmm(device, rng, variant, fp_dtypes):
    for dtype in fp_dtypes:
        a, b, c = (random_array(rng, s, dtype) for s in ((6, 5), (5, 7), (6, 7)))
        C = put(device, c)
        assert C.addmm_(put(device, a), put(device, b), beta=2, alpha=0.5) is C
        check(C, 2 * c.astype(np.float64) + 0.5 * ref(a, b), dtype)
        ba, bb, bc = (random_array(rng, s, dtype) for s in ((3, 6, 5), (3, 5, 7), (3, 6, 7)))
        BC = put(device, bc)
        BC.baddbmm_(put(device, ba), put(device, bb), alpha=-1)
        check(BC, bc.astype(np.float64) - ref(ba, bb), dtype)
    # the matrix being updated is also a factor: computed through a temporary
    s, t = random_array(rng, (5, 5)), random_array(rng, (5, 5))
    S = put(device, s)
    S.addmm_(put(device, t), S)
    check(S, s + ref(t, s), np.float32)


def test_baddbmm_broadcasts_input(device, rng, variant):
    ba, bb = random_array(rng, (3, 6, 5)), random_array(rng, (3, 5, 7))
    c = random_array(rng, (6, 1))
    out = cltensor.baddbmm(put(device, c), put(device, ba), put(device, bb), beta=3)
    check(out, 3 * c + ref(ba, bb), np.float32)


def test_integer_addmm_alpha_beta(device, rng):
    a, b, c = (random_array(rng, s, np.int64) for s in ((4, 6), (6, 3), (4, 3)))
    out = cltensor.addmm(put(device, c), put(device, a), put(device, b), beta=3, alpha=-2)
    check(out, 3 * c - 2 * (a @ b), np.int64)


def test_outer_promotes_dtypes(device, rng):
    x, y = random_array(rng, (5,), np.int32), random_array(rng, (3,), np.float32)
    check(cltensor.outer(put(device, x), put(device, y)), np.outer(x, y), np.float32)
    check(cltensor.outer(put(device, x), put(device, x)), np.outer(x, x), np.int32)


# ---- large launches are split ------------------------------------------------------------------

def test_launches_split_over_rows_and_batches(device, rng, variant, monkeypatch):
    monkeypatch.setattr(gm, "MAX_GROUPS", 2)
    a, b = random_array(rng, (5, 37, 9)), random_array(rng, (5, 9, 11))
    check(put(device, a) @ put(device, b), ref(a, b), np.float32)
    x, w = random_array(rng, (3, 50, 9)), random_array(rng, (9, 4))
    check(put(device, x) @ put(device, w), ref(x, w), np.float32)


# ---- kernel choice ----------------------------------------------------------------------------

class _FakeDevice:
    def __init__(self, max_work_group, local_mem, kind="gpu"):
        self.is_cpu, self.is_gpu = kind == "cpu", kind == "gpu"
        self.max_work_group, self.local_mem = max_work_group, local_mem
        self.cl_device = type("D", (), {"max_work_item_sizes": [max_work_group] * 3})()


@pytest.mark.parametrize("max_wg, local_mem",
                         [(1024, 49152), (256, 16384), (64, 4096), (32, 2048)])
def test_tiled_parameters_respect_device_limits(max_wg, local_mem):
    dev = _FakeDevice(max_wg, local_mem)
    entry = {"tiled": {"TSM": 128, "TSN": 128, "TSK": 16, "WPTM": 4, "WPTN": 4}}
    fitting = gm.tiled_candidates(dev, entry, 8)
    for p in fitting:
        assert (p["TSN"] // p["WPTN"]) * (p["TSM"] // p["WPTM"]) <= max_wg
        assert p["TSK"] * (p["TSM"] + p["TSN"] + 2) * 8 <= local_mem
    family = gm.family_of(dev, np.dtype(np.float64), dict(entry, family="tiled"), (9, 9, 9))
    assert family == ("tiled" if fitting else "direct")
    assert bool(fitting) == (max_wg >= 64)


def test_device_default_family(device):
    entry = gm.entry_for(device, np.dtype(np.float32))
    family = gm.family_of(device, np.dtype(np.float32), entry, (512, 512, 512))
    if device.is_cpu:
        assert family == "packed"
    elif device.is_gpu:
        assert family == "xgemm"
    assert gm.family_of(device, np.dtype(np.int32), entry, (512, 512, 512)) in ("direct", "tiled")
    assert gm.family_of(device, np.dtype(np.float32), entry, (2, 2, 2)) in ("direct", "tiled")


# ---- bad input --------------------------------------------------------------------------------

def test_inner_dim_mismatch_names_both_shapes(device):
    a, b = cltensor.ones(2, 3, device=device), cltensor.ones(4, 5, device=device)
    for fn in (cltensor.matmul, cltensor.mm):
        with pytest.raises(ValueError, match=r"\(2, 3\) and \(4, 5\) cannot be multiplied"):
            fn(a, b)
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\) cannot be multiplied"):
        cltensor.mv(a, cltensor.ones(4, device=device))
    with pytest.raises(ValueError, match=r"\(3,\) and \(4,\)"):
        cltensor.dot(cltensor.ones(3, device=device), cltensor.ones(4, device=device))
    with pytest.raises(ValueError, match=r"\(2, 2, 3\) and \(2, 4, 5\)"):
        cltensor.bmm(cltensor.ones(2, 2, 3, device=device), cltensor.ones(2, 4, 5, device=device))


def test_zero_dim_operands(device):
    s, m = cltensor.ones((), device=device), cltensor.ones(2, 2, device=device)
    with pytest.raises(ValueError, match="at least 1-d, but they are 0-d and 2-d"):
        cltensor.matmul(s, m)
    with pytest.raises(ValueError, match="at least 1-d, but they are 2-d and 0-d"):
        m @ s


def test_wrong_ranks(device):
    m2, m3, v = (cltensor.ones(*s, device=device) for s in ((2, 2), (1, 2, 2), (2,)))
    with pytest.raises(ValueError, match="mm: expected 2-d and 2-d tensors, got 3-d and 2-d"):
        cltensor.mm(m3, m2)
    with pytest.raises(ValueError, match="bmm: expected 3-d and 3-d tensors, got 2-d and 3-d"):
        cltensor.bmm(m2, m3)
    with pytest.raises(ValueError, match="mv: expected 2-d and 1-d"):
        cltensor.mv(m2, m2)
    with pytest.raises(ValueError, match="dot: expected 1-d and 1-d"):
        cltensor.dot(m2, v)
    with pytest.raises(ValueError, match="outer: expected 1-d and 1-d"):
        cltensor.outer(m2, v)


def test_batch_mismatch(device):
    with pytest.raises(ValueError, match=r"bmm: batch sizes differ.*\(2, 3, 4\).*\(3, 4, 5\)"):
        cltensor.bmm(cltensor.ones(2, 3, 4, device=device), cltensor.ones(3, 4, 5, device=device))
    with pytest.raises(ValueError, match=r"batch dims of shapes \(2, 3, 4\) and \(3, 4, 5\)"):
        cltensor.matmul(cltensor.ones(2, 3, 4, device=device),
                        cltensor.ones(3, 4, 5, device=device))


def test_dtype_errors(device):
    f = cltensor.ones(2, 2, device=device)
    i = cltensor.ones(2, 2, dtype=cltensor.int32, device=device)
    with pytest.raises(TypeError, match="same dtype, but got: float32 != int32"):
        f @ i
    if device.has_fp64:
        with pytest.raises(TypeError, match="same dtype, but got: float32 != float64"):
            cltensor.matmul(f, f.double())
        with pytest.raises(TypeError, match="addmm: expected all operands to have the same dtype"):
            cltensor.addmm(f.double(), f, f)
    b = cltensor.ones(2, 2, dtype=cltensor.bool, device=device)
    with pytest.raises(TypeError, match="not implemented for bool"):
        b @ b
    with pytest.raises(TypeError, match="expected tensors, got list"):
        cltensor.matmul(f, [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match="alpha must be an integer"):
        cltensor.addmm(i, i, i, alpha=0.5)
    with pytest.raises(TypeError, match="beta must be a real number"):
        cltensor.addmm(f, f, f, beta="1")


def test_mixed_devices(device):
    other = Device(device.index + "-other-context", device.cl_device)
    a = cltensor.ones(2, 2, device=device)
    b = cltensor.from_numpy(np.ones((2, 2), np.float32), device=other)
    with pytest.raises(RuntimeError, match="matmul: expected all tensors on the same device"):
        a @ b
    with pytest.raises(RuntimeError, match="mm: expected all tensors on the same device"):
        cltensor.mm(a, a, out=b)
    with pytest.raises(RuntimeError, match="addmm: expected all tensors on the same device"):
        cltensor.addmm(b, a, a)


def test_bad_out_and_input_leave_data_untouched(device, rng):
    a, c = random_array(rng, (3, 4)), random_array(rng, (3, 5))
    A, C = put(device, a), put(device, c)
    with pytest.raises(ValueError,
                       match=r"result's shape \(3, 3\) does not match out's shape \(3, 5\)"):
        cltensor.mm(A, A.t(), out=C)
    with pytest.raises(TypeError, match="expected out to have dtype float32, got int32"):
        cltensor.mm(A, A.t(), out=cltensor.zeros(3, 3, dtype=cltensor.int32, device=device))
    with pytest.raises(RuntimeError, match="expanded view"):
        cltensor.mm(A, A.t(), out=cltensor.zeros(1, 3, device=device).expand(3, 3))
    with pytest.raises(ValueError, match="cannot be multiplied"):
        C.addmm_(A, A)
    with pytest.raises(ValueError, match="addmm_: expected 2-d, 2-d and 2-d"):
        C[0].addmm_(A, put(device, random_array(rng, (4, 5))))
    with pytest.raises(ValueError, match=r"input of shape \(4,\) cannot be broadcast"):
        cltensor.addmm(put(device, np.ones(4, np.float32)), A, A.t())
    with pytest.raises(ValueError, match=r"baddbmm_: self has shape \(3, 5\)"):
        C.baddbmm_(A[None], put(device, random_array(rng, (1, 4, 5))))
    np.testing.assert_array_equal(C.numpy(), c)
    np.testing.assert_array_equal(A.numpy(), a)


# ---- property test ----------------------------------------------------------------------------

@st.composite
def matmul_case(draw):
    """Shapes following torch.matmul's rules (1-d operands, broadcast batches) and, per
    operand, whether its matrix is stored transposed; and the kernel to run."""
    m, k, n = (draw(st.integers(1, 40)) for _ in range(3))
    nd_a, nd_b = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = [draw(st.integers(1, 3)) for _ in range(max(nd_a, nd_b) - 2)]

    def shape(nd, rows, cols):
        if nd == 1:
            return (k,)
        own = batch[len(batch) - (nd - 2):]
        return tuple(draw(st.sampled_from([1, d])) for d in own) + (rows, cols)
    return (shape(nd_a, m, k), shape(nd_b, k, n), draw(st.booleans()), draw(st.booleans()),
            draw(st.sampled_from(gm.FAMILIES)))


def _stored(device, x, transposed):
    if not transposed or x.ndim < 2:
        return put(device, x)
    return put(device, np.swapaxes(x, -1, -2)).mT


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=matmul_case())
def test_matmul_property(device, case):
    sa, sb, ta, tb, variant = case
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    a, b = random_array(rng, sa), random_array(rng, sb)
    old, gm.FORCE_FAMILY = gm.FORCE_FAMILY, variant
    try:
        out = cltensor.matmul(_stored(device, a, ta), _stored(device, b, tb))
    finally:
        gm.FORCE_FAMILY = old
    # relative to |a| @ |b|: a product of few outputs may cancel to near zero
    check(out, ref(a, b), np.float32, scale=ref(np.abs(a), np.abs(b)))
