"""Reductions and scans against numpy in float64: every op and dtype, dims and keepdim, strided
views, empty and awkward sizes, NaN, accuracy, bad input, and the GPU-style work-group tree
forced on whatever device runs the tests."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor as ct
from cltensor.ops import reduce as red
from cltensor.testing import assert_close, random_array

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
DIMS = [None, 0, -1, (0, 2), (-1, 0, 1), ()]
SHAPE = (5, 7, 3)


def _dtypes(device, kinds="buif"):
    return [d for d in DTYPES if np.dtype(d).kind in kinds and (d != np.float64 or device.has_fp64)]


def _axis(dim):
    """numpy's axis for a torch dim: torch reduces every dim for None and ()."""
    return None if dim is None or dim == () else dim


def _tol(dtype):
    return (2e-6, 1e-6) if np.dtype(dtype) == np.float32 else (1e-12, 1e-13)


def _data(rng, shape, dtype):
    """Random data; floats away from zero so that products stay well scaled."""
    if np.dtype(dtype).kind == "f":
        return (rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)).astype(dtype)
    return random_array(rng, shape, dtype)


def _poison_pool(device, *nbytes):
    """Leave NaN-filled blocks of these sizes in the memory pool, so that an output a kernel
    forgets to write shows up as NaN (or as a huge integer)."""
    held = [ct.full((max(n // 4, 1),), float("nan"), dtype=ct.float32, device=device)
            for n in nbytes]
    del held


@pytest.fixture(params=["default", "tree"])
def config(request, device, monkeypatch):
    """'default': the device's tuning; 'tree': small GPU-style work-groups with a local-memory
    tree, interleaved chunks and split rows, so every kernel path runs on every device."""
    if request.param == "tree":
        kind = "cpu" if device.is_cpu else "gpu"
        small = dict(red.TUNING["gpu"], lanes=16, group=32, col_lanes=4, min_per_item=2,
                     max_chunks=8, groups_per_cu=8)
        monkeypatch.setitem(red.TUNING, kind, small)
    return request.param


# ---- sum, prod, mean --------------------------------------------------------------------------

SUMLIKE = {"sum": np.sum, "prod": np.prod}


@pytest.mark.parametrize("op", sorted(SUMLIKE))
def test_sum_prod_every_dtype_and_dim(device, rng, op):
    for dtype in _dtypes(device):
        a = _data(rng, SHAPE, dtype)
        t = ct.from_numpy(a, device=device)
        wide = np.float64 if np.dtype(dtype).kind == "f" else np.int64
        for dim in DIMS:
            for keepdim in (False, True):
                out = getattr(ct, op)(t, dim=dim, keepdim=keepdim)
                ref = SUMLIKE[op](a.astype(wide), axis=_axis(dim), keepdims=keepdim)
                expected = dtype if np.dtype(dtype).kind == "f" else np.int64
                rtol, atol = _tol(dtype)
                assert_close(out, ref, rtol=rtol * 10, atol=atol, dtype=expected)


def test_mean_every_float_dtype_and_dim(device, rng):
    for dtype in _dtypes(device, "f"):
        a = random_array(rng, SHAPE, dtype)
        t = ct.from_numpy(a, device=device)
        for dim in DIMS:
            for keepdim in (False, True):
                ref = a.astype(np.float64).mean(axis=_axis(dim), keepdims=keepdim)
                rtol, atol = _tol(dtype)
                assert_close(t.mean(dim, keepdim), ref, rtol=rtol, atol=atol, dtype=dtype)


def test_dtype_argument(device, rng):
    a = random_array(rng, (6, 5), np.int32)
    t = ct.from_numpy(a, device=device)
    assert_close(t.sum(dtype=ct.float32), a.sum(), dtype=np.float32)
    assert_close(t.sum(1, dtype=ct.int32), a.sum(1), dtype=np.int32)
    assert_close(ct.mean(t, 0, dtype=ct.float32), a.mean(0), dtype=np.float32)
    assert_close(ct.prod(t[:, :2], 0, dtype=ct.float32), a[:, :2].astype(np.float64).prod(0),
                 dtype=np.float32)
    assert_close(ct.cumsum(t, 1, dtype=ct.float32), np.cumsum(a, 1), dtype=np.float32)


def test_mean_of_integers_needs_a_float_dtype(device):
    t = ct.tensor([[1, 2], [3, 4]], device=device)
    with pytest.raises(TypeError, match="floating point"):
        t.mean()
    with pytest.raises(TypeError, match="floating point"):
        t.mean(dtype=ct.int64)
    assert_close(t.mean(dtype=ct.float32), 2.5, dtype=np.float32)


def test_zero_dim_tensors(device):
    t = ct.tensor(3.5, device=device)
    for out in (t.sum(), t.sum(0), t.mean(-1), t.prod(), t.amax(), t.max(), t.logsumexp(0)):
        assert out.shape == () and out.item() == pytest.approx(3.5)
    values, indices = t.max(0)
    assert values.item() == 3.5 and indices.item() == 0 and indices.shape == ()
    assert t.argmin().item() == 0
    assert t.sum(keepdim=True).shape == ()
    assert math.isnan(t.var().item()) and t.var(correction=0).item() == 0
    assert ct.cumsum(t, 0).item() == 3.5 and ct.cumprod(t, -1).shape == ()
    assert t.any().item() is True and t.all(0).item() is True


# ---- empty inputs and awkward sizes -----------------------------------------------------------

def test_empty_inputs(device):
    e = ct.zeros(0, 4, device=device)
    assert ct.sum(e).item() == 0 and ct.sum(e).shape == ()
    assert_close(ct.sum(e, 0), np.zeros(4))
    assert ct.sum(e, 1).shape == (0,)
    assert_close(ct.prod(e, 0), np.ones(4))
    assert math.isnan(ct.mean(e).item())
    assert np.isnan(ct.mean(e, 0).numpy()).all()
    assert np.isnan(ct.var(e, 0).numpy()).all()
    assert ct.any(e).item() is False and ct.all(e).item() is True
    assert ct.logsumexp(e, 0).numpy().tolist() == [-np.inf] * 4
    assert ct.amax(e, 1).shape == (0,) and ct.max(e, 1).indices.shape == (0,)
    assert ct.cumsum(e, 0).shape == (0, 4) and ct.cumprod(e, 1).shape == (0, 4)
    assert ct.sum(ct.zeros(0, dtype=ct.int32, device=device)).dtype == ct.int64


def test_max_of_empty_raises(device):
    e = ct.zeros(0, 4, device=device)
    with pytest.raises(RuntimeError, match="empty"):
        e.max()
    with pytest.raises(RuntimeError, match="empty"):
        e.argmin()
    for fn in (lambda: e.max(0), lambda: e.min(dim=-2), lambda: e.argmax(0), lambda: ct.amax(e),
               lambda: ct.amin(e, (0, 1)), lambda: ct.norm(e, math.inf, 0)):
        with pytest.raises(IndexError, match="reduction dim 0 to have non-zero size"):
            fn()


SIZES = [(1, 1), (2, 3), (3, 7), (1, 257), (5, 1031), (1031, 5), (2, 4099), (1, 65537)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's var of one element
@pytest.mark.parametrize("rows,cols", SIZES)
def test_awkward_sizes(device, rng, config, rows, cols):
    a = random_array(rng, (rows, cols), np.float32)
    a[rows // 2, cols // 3] = 2.5  # a unique max
    t = ct.from_numpy(a, device=device)
    for dim in (1, 0, None):
        outputs = a.size // (a.shape[dim] if dim is not None else a.size)
        _poison_pool(device, 4 * outputs, 8 * outputs)
        assert_close(t.sum(dim), a.astype(np.float64).sum(_axis(dim)), rtol=2e-6, atol=1e-5)
        assert_close(t.var(dim), a.astype(np.float64).var(_axis(dim), ddof=1), rtol=1e-5,
                     atol=1e-6)
        assert_close(t.amin(() if dim is None else dim), a.min(_axis(dim)))
        assert_close(t.argmax(dim), a.argmax(_axis(dim)))
        assert_close(ct.any(t > 2.4, dim), (a > 2.4).any(_axis(dim)))
        assert_close(ct.all(t < 2.4, dim), (a < 2.4).all(_axis(dim)))
    assert_close(ct.cumsum(t, 1), np.cumsum(a.astype(np.float64), 1), rtol=1e-5, atol=1e-5)


def test_long_rows_split_into_chunks(device, rng, config):
    """Rows long enough to be cut into chunks, with ties and NaN that must pick the first index."""
    a = random_array(rng, (3, 100003), np.float32)
    a[0, [7, 60000, 99999]] = 9.0
    a[1, [50001, 80000]] = np.nan
    a[2, [3, 99998]] = -9.0
    t = ct.from_numpy(a, device=device)
    values, indices = t.max(1)
    assert_close(values, [9.0, np.nan, a[2].max()])
    assert indices.tolist() == [7, 50001, int(a[2].argmax())]
    assert t.argmin(1).tolist() == [int(a[0].argmin()), 50001, 3]
    assert_close(t[0].sum(), a[0].astype(np.float64).sum(), rtol=1e-6, atol=1e-4)
    b = rng.uniform(0.999, 1.001, (2, 100003))
    assert_close(ct.from_numpy(b.astype(np.float32), device=device).prod(1),
                 b.astype(np.float32).astype(np.float64).prod(1), rtol=1e-4)


def test_rows_enough_for_the_compute_units_take_a_group_each(device, rng):
    """On CPUs, rows too few for groups of 64 on every compute unit but enough for a group each
    (reduce.py _rows_alone) take one work-group per row and one launch, no chunks and no
    merge: sums, means, max with its index, var and argmin over rows, and of 16-bit data,
    outputs poisoned; a transposed view (strided rows: column sums) keeps its groups."""
    cus = device.cl_device.max_compute_units
    kind = "cpu" if device.is_cpu else "gpu"
    M = cus * red.TUNING[kind]["groups_per_cu"] + 3
    a = random_array(rng, (M, 20001), np.float32)
    a[1, [5, 70]] = 9.0
    a[2, 300] = np.nan
    t = ct.from_numpy(a, device=device)
    with ct.profile() as prof:
        _poison_pool(device, 8 * M)
        got = t.sum(1)
    launches = [(r["name"], r["local"]) for r in prof.records() if r["name"].startswith("reduce")]
    if device.is_cpu:
        assert launches == [("reduce_full", (1, 1))]
    want = a.astype(np.float64)
    assert_close(got, want.sum(1), rtol=1e-6, atol=1e-4)
    assert_close(t.mean(1), want.mean(1), rtol=1e-6, atol=1e-6)
    values, indices = t.max(1)
    assert_close(values, np.where(np.isnan(a).any(1), np.nan, a.max(1)))
    assert indices[1].item() == 5 and indices[2].item() == 300
    assert_close(t.var(1), want.var(1, ddof=1), rtol=1e-5, atol=1e-6)
    assert t.argmin(1).tolist()[3:] == np.argmin(a, 1).tolist()[3:]
    tt = ct.from_numpy(np.ascontiguousarray(a.T), device=device).t()  # rows strided
    with ct.profile() as prof:
        got = tt.sum(1)
    if device.is_cpu:  # neighbouring columns stay in one group
        assert all(r["local"][0] > 1 for r in prof.records() if r["name"].startswith("reduce"))
    assert_close(got, want.sum(1), rtol=1e-6, atol=1e-4)
    h = t.to(ct.bfloat16)
    assert_close(h.sum(1, dtype=ct.float32), h.float().numpy().astype(np.float64).sum(1),
                 rtol=1e-6, atol=1e-4)


# ---- max, min, amax, amin, argmax, argmin -----------------------------------------------------

def test_max_min_along_dim(device, rng):
    for dtype in _dtypes(device):
        a = random_array(rng, SHAPE, dtype, low=-1, high=1)  # few distinct values: many ties
        t = ct.from_numpy(a, device=device)
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                for op, np_op, np_arg in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
                    result = getattr(t, op)(dim, keepdim)
                    values, indices = result
                    assert type(result).__name__ == op and result.values is values
                    assert_close(values, np_op(a, dim, keepdims=keepdim), dtype=dtype)
                    ref_idx = np_arg(a, dim)
                    ref_idx = np.expand_dims(ref_idx, dim) if keepdim else ref_idx
                    assert_close(indices, ref_idx, dtype=np.int64)


def test_full_and_multi_dim_extremes(device, rng):
    for dtype in _dtypes(device):
        a = random_array(rng, SHAPE, dtype, low=-1, high=1)
        t = ct.from_numpy(a, device=device)
        assert_close(t.max(), a.max(), dtype=dtype)
        assert_close(ct.min(t), a.min(), dtype=dtype)
        assert_close(t.argmax(), a.argmax(), dtype=np.int64)
        assert_close(ct.argmin(t), a.argmin(), dtype=np.int64)
        assert ct.argmax(t, keepdim=True).shape == (1, 1, 1)
        for dim in ((0, 2), (-1, 1, 0), 1, ()):
            for keepdim in (False, True):
                ref_dim = _axis(dim)
                assert_close(ct.amax(t, dim, keepdim), a.max(ref_dim, keepdims=keepdim),
                             dtype=dtype)
                assert_close(t.amin(dim, keepdim), a.min(ref_dim, keepdims=keepdim), dtype=dtype)


def test_max_with_a_tensor_is_elementwise(device, rng):
    a, b = random_array(rng, (4, 5), np.float32), random_array(rng, (5,), np.float32)
    ta, tb = ct.from_numpy(a, device=device), ct.from_numpy(b, device=device)
    assert_close(ct.max(ta, tb), np.maximum(a, b))
    assert_close(ta.min(tb), np.minimum(a, b))


def test_nan_propagates(device, rng):
    a = random_array(rng, (4, 9), np.float32)
    a[1, 4] = a[1, 6] = np.nan
    a[3, 0] = np.nan
    t = ct.from_numpy(a, device=device)
    for op in ("max", "min"):
        values, indices = getattr(t, op)(1)
        assert np.isnan(values.numpy()[[1, 3]]).all() and not np.isnan(values.numpy()[[0, 2]]).any()
        assert indices.numpy()[[1, 3]].tolist() == [4, 0]
    assert_close(t.amax(1), a.max(1))
    assert t.argmax().item() == 13 and t.argmin().item() == 13 and math.isnan(t.max().item())
    for out in (t.sum(1), t.mean(1), t.var(1), t.std(1), ct.norm(t, 2, 1), ct.logsumexp(t, 1),
                ct.norm(t, math.inf, 1), t.prod(1)):
        assert np.isnan(out.numpy()[[1, 3]]).all() and not np.isnan(out.numpy()[[0, 2]]).any()
    assert ct.any(ct.from_numpy(np.array([0, np.nan, 0], np.float32), device=device)).item()


# ---- var, std, norm, logsumexp ----------------------------------------------------------------

def test_var_std(device, rng):
    for dtype in _dtypes(device, "f"):
        a = random_array(rng, SHAPE, dtype)
        t = ct.from_numpy(a, device=device)
        rtol, atol = _tol(dtype)
        for dim in (None, 1, -1, (0, 2)):
            for kwargs, ddof in (({}, 1), ({"unbiased": False}, 0), ({"correction": 0}, 0),
                                 ({"correction": 2}, 2), ({"correction": 0.5}, 0.5)):
                ref = a.astype(np.float64).var(axis=_axis(dim), ddof=ddof)
                assert_close(ct.var(t, dim, **kwargs), ref, rtol=rtol * 5, atol=atol, dtype=dtype)
                assert_close(t.std(dim, keepdim=True, **kwargs),
                             np.sqrt(a.astype(np.float64).var(axis=_axis(dim), ddof=ddof,
                                                              keepdims=True)),
                             rtol=rtol * 5, atol=atol, dtype=dtype)
        assert_close(t.var(False), a.astype(np.float64).var(), rtol=rtol * 5, atol=atol)


def test_var_is_accurate_for_a_large_mean(device, rng, config):
    """E[x^2] - E[x]^2 would lose every digit here; the corrected two-pass must not."""
    a = (1e6 + rng.uniform(-1, 1, (3, 20011))).astype(np.float32)
    t = ct.from_numpy(a, device=device)
    ref = a.astype(np.float64).var(1, ddof=1)
    assert_close(t.var(1), ref, rtol=1e-5, atol=0)
    assert_close(t.std(), a.astype(np.float64).std(ddof=1), rtol=1e-5, atol=0)
    assert t.var(1, correction=0).numpy().min() > 0.3


NORMS = [1, 2, "fro", math.inf, -math.inf, 3, 0.5, 0]


def test_norm(device, rng):
    for dtype in _dtypes(device, "f"):
        a = random_array(rng, SHAPE, dtype)
        a[0, 0, 0] = 0
        t = ct.from_numpy(a, device=device)
        rtol, atol = _tol(dtype)
        for p in NORMS:
            for dim in (None, 1, (0, 2)):
                x = np.abs(a.astype(np.float64))
                ax = _axis(dim)
                ref = {"fro": np.sqrt((x * x).sum(ax)), math.inf: x.max(ax), -math.inf: x.min(ax),
                       0: (x != 0).sum(ax)}.get(p)
                ref = (x ** p).sum(ax) ** (1 / p) if ref is None else ref
                assert_close(ct.norm(t, p, dim), ref, rtol=rtol * 5, atol=atol, dtype=dtype)
        assert_close(t.norm(dim=-1, keepdim=True), np.linalg.norm(a.astype(np.float64), axis=-1,
                                                                  keepdims=True), rtol=rtol * 5)


def _logsumexp_ref(a, axis):
    m = a.max(axis, keepdims=True)
    m = np.where(np.isinf(m), 0, m)
    return np.squeeze(np.log(np.exp(a - m).sum(axis, keepdims=True)) + m, axis)


def test_logsumexp(device, rng):
    for dtype in _dtypes(device, "f"):
        a = random_array(rng, SHAPE, dtype, low=-50, high=50) + np.asarray(1000, dtype)
        t = ct.from_numpy(a, device=device)
        rtol, atol = _tol(dtype)
        for dim in (0, -1, (0, 2)):
            assert_close(ct.logsumexp(t, dim), _logsumexp_ref(a.astype(np.float64), dim),
                         rtol=rtol, atol=atol, dtype=dtype)
        assert ct.logsumexp(t, 1, keepdim=True).shape == (5, 1, 3)
    inf = np.inf
    b = np.array([[-inf, -inf, -inf], [1, -inf, 2], [inf, 1, 2], [inf, -inf, 0]], np.float32)
    out = ct.logsumexp(ct.from_numpy(b, device=device), 1).numpy()
    assert out[0] == -inf and out[2] == inf and out[3] == inf
    assert out[1] == pytest.approx(np.log(np.exp(1) + np.exp(2)), rel=1e-6)
    ints = ct.logsumexp(ct.tensor([[1, 2], [3, 4]], device=device), 1)
    assert_close(ints, np.log(np.exp([1, 3]) + np.exp([2, 4])), dtype=np.float32)


# ---- all, any ---------------------------------------------------------------------------------

def test_all_any(device, rng):
    for dtype in _dtypes(device):
        a = random_array(rng, SHAPE, dtype)
        a[1] = 0
        a[2, 3] = 1
        t = ct.from_numpy(a, device=device)
        for dim in DIMS:
            for keepdim in (False, True):
                ax = _axis(dim)
                assert_close(ct.all(t, dim, keepdim), np.all(a, ax, keepdims=keepdim),
                             dtype=np.bool_)
                assert_close(t.any(dim, keepdim), np.any(a, ax, keepdims=keepdim), dtype=np.bool_)


def test_any_serves_integer_division_by_zero(device):
    assert ct.any(ct.tensor([0, 0, 3], device=device)).item() is True
    a = ct.tensor([4, 5, 6], device=device)
    with pytest.raises(ZeroDivisionError):
        a // ct.tensor([1, 0, 2], device=device)


# ---- cumsum, cumprod --------------------------------------------------------------------------

def test_cumsum_cumprod(device, rng):
    for dtype in _dtypes(device):
        a = _data(rng, SHAPE, dtype)
        t = ct.from_numpy(a, device=device)
        wide = np.float64 if np.dtype(dtype).kind == "f" else np.int64
        expected = dtype if np.dtype(dtype).kind == "f" else np.int64
        rtol, atol = _tol(dtype)
        for dim in (0, 1, -1):
            assert_close(ct.cumsum(t, dim), np.cumsum(a.astype(wide), dim), rtol=rtol, atol=atol,
                         dtype=expected)
            assert_close(t.cumprod(dim), np.cumprod(a.astype(wide), dim), rtol=rtol * 5,
                         atol=atol, dtype=expected)


def test_long_scans(device, rng):
    a = rng.uniform(0, 1, (2, 50021)).astype(np.float32)
    t = ct.from_numpy(a, device=device)
    _poison_pool(device, 4 * a.size)
    ref = np.cumsum(a.astype(np.float64), 1)
    assert_close(ct.cumsum(t, 1), ref, rtol=1e-6, atol=0)
    assert_close(ct.cumsum(t.t(), 0), ref.T, rtol=1e-6, atol=0)
    dtype, rtol = (np.float64, 1e-11) if device.has_fp64 else (np.float32, 5e-3)
    b = rng.uniform(0.99995, 1.00005, 30011).astype(dtype)
    assert_close(ct.cumprod(ct.from_numpy(b, device=device), 0), np.cumprod(b), rtol=rtol)
    # float32 products are compensated too (uncompensated: 5e-6 off); 0 * -1 stays -0
    c = rng.uniform(0.999, 1.001, 30011).astype(np.float32)
    assert_close(ct.cumprod(ct.from_numpy(c, device=device), 0),
                 np.cumprod(c.astype(np.float64)), rtol=5e-7, atol=0)
    zero = ct.from_numpy(np.array([0.0, -1.0, 2.0], np.float32), device=device)
    assert np.signbit(ct.cumprod(zero, 0).numpy()).tolist() == [False, True, True]


# ---- strided views ----------------------------------------------------------------------------

def _views(t):
    """Non-contiguous views of a (6, 10, 8) tensor, each with shape (k, m, n) of three dims."""
    return {
        "permuted": t.permute(2, 0, 1),
        "step-sliced": t[::2, 1::3, ::3],
        "offset": t[1:, 2:, 3:],
        "expanded": t[:, :1, :].expand(6, 5, 8),
        "transposed-slice": t.transpose(0, 2)[1:7:2],
    }


VIEW_OPS = {
    "sum": lambda x: x.sum((0, 2)), "mean": lambda x: x.mean(-1), "prod": lambda x: x.prod(1),
    "max": lambda x: x.max(1).values, "argmax": lambda x: x.argmax(1),
    "argmin": lambda x: x.argmin(),
    "amin": lambda x: x.amin((1, 2)), "var": lambda x: x.var(0), "std": lambda x: x.std((1, 2)),
    "norm": lambda x: ct.norm(x, 3, 2), "all": lambda x: (x > -1.9).all(1),
    "any": lambda x: (x > 1.9).any((0, 1)), "logsumexp": lambda x: ct.logsumexp(x, (0, 2)),
    "cumsum": lambda x: x.cumsum(1), "cumprod": lambda x: x.cumprod(0), "full": lambda x: x.sum(),
}


def test_strided_views_match_contiguous_copies(device, rng):
    a = _data(rng, (6, 10, 8), np.float32)
    t = ct.from_numpy(a, device=device)
    for name, view in _views(t).items():
        assert not view.is_contiguous(), name
        copy = view.contiguous()
        for fn in VIEW_OPS.values():
            assert_close(fn(view), fn(copy).numpy(), rtol=1e-5, atol=1e-6)


# ---- accuracy ---------------------------------------------------------------------------------

def test_float32_sum_of_ten_million(device, rng):
    a = rng.uniform(0, 1, 10**7).astype(np.float32)
    t = ct.from_numpy(a, device=device)
    ref = a.astype(np.float64).sum()
    assert abs(t.sum().item() - ref) <= 1e-6 * ref
    assert abs(t.mean().item() - ref / a.size) <= 1e-6 * ref / a.size
    b = ct.from_numpy(a.reshape(1000, 10**4), device=device)
    assert_close(b.sum(0), a.reshape(1000, 10**4).astype(np.float64).sum(0), rtol=1e-6, atol=0)


def test_sums_of_contiguous_runs(device, rng, fp_dtypes):
    """Sums whose lanes walk contiguous runs (on CPUs in compensated vector lanes, reduce.cl
    VEC_SUM): one long row, a bias gradient's (0, 2, 3) over NCHW, and rows of 99 read from an
    unaligned view, with an infinity and a NaN in two outputs; a cancellation that plain
    float32 lanes would lose."""
    for dtype in fp_dtypes:
        a = random_array(rng, (3, 5, 9, 11), dtype)
        t = ct.from_numpy(a, device=device)
        ref = a.astype(np.float64)
        assert_close(t.sum((0, 2, 3)), ref.sum((0, 2, 3)), rtol=1e-6, atol=1e-6)
        assert_close(t.mean((0, 2, 3)), ref.mean((0, 2, 3)), rtol=1e-6, atol=1e-6)
        full = random_array(rng, (3, 5, 100), dtype)
        full[1, 0, 6], full[2, 1, 8] = np.inf, np.nan
        view = ct.from_numpy(full, device=device)[..., 1:]
        want = full[..., 1:].astype(np.float64).sum((0, 2))
        got = view.sum((0, 2)).numpy()
        assert np.isinf(got[0]) and np.isnan(got[1])
        assert_close(got[2:], want[2:], rtol=1e-6, atol=1e-6)
        x = np.ones(1003, dtype)
        x[0], x[1001] = 1e8, -1e8  # exact total: 1001 ones
        assert ct.from_numpy(x, device=device).sum().item() == 1001.0
        # the cancellation across a bias gradient's runs (lanes carried from run to run)
        g = np.ones((4, 2, 5, 7), dtype)
        g[0, 1, 0, 0], g[3, 1, 0, 0] = 1e8, -1e8
        np.testing.assert_array_equal(ct.from_numpy(g, device=device).sum((0, 2, 3)).numpy(),
                                      [140.0, 138.0])


# ---- bad input --------------------------------------------------------------------------------

def test_bad_dims(device):
    t = ct.zeros(2, 3, device=device)
    for fn in (ct.sum, ct.mean, ct.amax, ct.any, ct.argmax, ct.var, ct.logsumexp, ct.cumsum):
        with pytest.raises(IndexError, match=r"but got 2\)"):
            fn(t, 2)
        with pytest.raises(IndexError, match=r"but got -3\)"):
            fn(t, -3)
    with pytest.raises(IndexError, match="got 5"):
        t.max(5)
    with pytest.raises(IndexError, match="got 7"):
        t.sum((0, 7))
    for fn in (ct.sum, ct.prod, ct.amin, ct.all, ct.std, ct.norm):
        with pytest.raises(RuntimeError, match="dim 1 appears multiple times"):
            fn(t, dim=(1, -1))
    with pytest.raises(TypeError, match="dim must be an int"):
        t.sum(1.5)
    with pytest.raises(TypeError, match="use amax"):
        t.max((0, 1))
    with pytest.raises(TypeError, match="dim must be an int"):
        t.argmax((0, 1))
    with pytest.raises(TypeError, match="dim must be an int"):
        ct.cumsum(t, None)


def test_bad_dtypes_and_arguments(device):
    i = ct.tensor([[1, 2], [3, 4]], device=device)
    f = ct.zeros(2, 2, device=device)
    for fn in (ct.var, ct.std, ct.norm):
        with pytest.raises(TypeError, match="must be floating point, got int64"):
            fn(i)
    with pytest.raises(TypeError, match="expected a tensor"):
        ct.sum(np.zeros(3))
    with pytest.raises(ValueError, match="unbiased or correction"):
        f.var(0, unbiased=True, correction=1)
    with pytest.raises(ValueError, match="p must be"):
        ct.norm(f, "nuc")
    with pytest.raises(TypeError, match="unsupported dtype"):
        f.sum(dtype="complex64")


def test_too_many_unmergeable_dims(device):
    t = ct.zeros(*([2] * 18), device=device)
    with pytest.raises(ValueError, match="at most 8"):
        t.sum(tuple(range(0, 18, 2)))


# ---- property test ----------------------------------------------------------------------------

@st.composite
def _strided_case(draw):
    nd = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 6), min_size=nd, max_size=nd))
    perm = draw(st.permutations(range(nd)))
    steps = draw(st.lists(st.integers(1, 2), min_size=nd, max_size=nd))
    starts = draw(st.lists(st.integers(0, 1), min_size=nd, max_size=nd))
    dims = draw(st.sets(st.integers(-nd, nd - 1), max_size=nd).filter(
        lambda s: len({d % nd for d in s}) == len(s)))
    return shape, perm, steps, starts, tuple(dims), draw(st.booleans())


@settings(max_examples=30, deadline=None)
@given(case=_strided_case(), seed=st.integers(0, 2**16))
def test_property_strided_sum_max_mean(device, case, seed):
    shape, perm, steps, starts, dims, keepdim = case
    rng = np.random.default_rng(seed)
    big_shape = [n * s + b for n, s, b in zip(shape, steps, starts)]
    big = random_array(rng, [big_shape[p] for p in perm], np.float32)
    inv = np.argsort(perm).tolist()
    sl = tuple(slice(b, None, s) for s, b in zip(steps, starts))
    a = big.transpose(inv)[sl]
    t = ct.from_numpy(big, device=device).permute(*inv)[sl]
    assert t.shape == a.shape
    ax = dims if dims else None
    a64 = a.astype(np.float64)
    assert_close(t.sum(dims, keepdim), a64.sum(ax, keepdims=keepdim), rtol=1e-5, atol=1e-5)
    assert_close(t.mean(dims, keepdim), a64.mean(ax, keepdims=keepdim), rtol=1e-5, atol=1e-6)
    assert_close(t.amax(dims, keepdim), a.max(ax, keepdims=keepdim))
    if len(dims) == 1:
        values, indices = t.max(dims[0], keepdim)
        assert_close(values, a.max(dims[0], keepdims=keepdim))
        assert_close(indices, np.expand_dims(a.argmax(dims[0]), dims[0]) if keepdim
                     else a.argmax(dims[0]))
