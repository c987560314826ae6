"""scatter_reduce (and scatter's reduce=), masked_scatter, logcumsumexp, unique(dim=) and
unique_consecutive: against float64 numpy references, against torch (forward and backward) and
by finite differences."""
import numpy as np
import pytest

import cltensor as ct
from cltensor.ops import indexing, reduce
from cltensor.testing import assert_close, gradcheck, random_array
from test_index_ops import both, dev, fdtype, spread, untouched

NAN, INF = float("nan"), float("inf")
REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


# ---- scatter_reduce ------------------------------------------------------------------------------

def scatter_reduce_ref(a, dim, idx, src, how, include_self):
    """scatter_reduce by a loop over the index, in float64 (int64 for integers)."""
    wide = np.float64 if a.dtype.kind == "f" else np.int64
    out = a.astype(wide)
    groups = {}
    for pos in np.ndindex(idx.shape):
        at = pos[:dim] + (idx[pos],) + pos[dim + 1:]
        groups.setdefault(at, [out[at]] if include_self else []).append(src[pos])
    for at, values in groups.items():
        v = np.array(values, wide)
        if how == "mean":
            out[at] = v.sum() / v.size if wide is np.float64 else v.sum() // v.size
        else:
            out[at] = {"sum": v.sum, "prod": v.prod, "amax": v.max, "amin": v.min}[how]()
    return out


def scatter_case(rng, dtype, dim, size):
    """x with `size` along dim, an index of 7 entries per lane (narrower than x in another dim)
    and a src larger than the index."""
    shape = [3, 4]
    shape.insert(dim, size)
    ishape = [3, 2]
    ishape.insert(dim, 7)
    sshape = [n + 1 for n in ishape]
    return (random_array(rng, shape, dtype), rng.integers(0, size, ishape),
            random_array(rng, sshape, dtype))


@pytest.mark.parametrize("size", [5, 40])  # one work-item per output element / per lane
def test_scatter_reduce_matches_a_loop(device, rng, size):
    for dtype in (np.float32, np.int64):
        for dim in (0, 2):
            a, idx, src = scatter_case(rng, dtype, dim, size)
            for how in REDUCTIONS:
                for include_self in (True, False):
                    ref = scatter_reduce_ref(a, dim, idx, src, how, include_self)
                    x, buf, outside = spread(a, device)
                    s, _, _ = spread(src, device)
                    i = dev(idx.astype(np.int32) if dim else idx, device)
                    assert x.scatter_reduce_(dim, i, s, how, include_self=include_self) is x
                    assert_close(x, ref, rtol=1e-5, atol=1e-5, dtype=dtype)
                    untouched(buf, outside)
            out = ct.scatter_reduce(dev(a, device), dim - 3, dev(idx, device), dev(src, device),
                                    "amin", include_self=False)
            assert_close(out, scatter_reduce_ref(a, dim, idx, src, "amin", False))
    if device.has_fp64:  # the gradients' dtype: one more build
        a, idx, src = scatter_case(rng, np.float64, 1, size)
        for how in REDUCTIONS:
            x = dev(a, device)
            x.scatter_reduce_(1, dev(idx, device), dev(src, device), how, include_self=False)
            assert_close(x, scatter_reduce_ref(a, 1, idx, src, how, False), dtype=np.float64)


def test_scatter_reduce_long_index_is_segmented(device, rng):
    n, size = 5000, 6
    assert indexing.gather_scatter._segments([n], 0, size) > 1  # partials that start from each identity
    idx = rng.integers(0, size, n)
    a = random_array(rng, size, np.float32)
    src = random_array(rng, n, np.float32)
    signs = rng.choice([-1, 1], n).astype(np.int64)  # exact products
    for how in REDUCTIONS:
        for include_self in (True, False):
            for a_, s_ in ((a, src), (np.arange(1, size + 1), signs)):
                ref = scatter_reduce_ref(a_, 0, idx, s_, how, include_self)
                out = dev(a_, device).scatter_reduce(0, dev(idx, device), dev(s_, device), how,
                                                     include_self=include_self)
                assert_close(out, ref, rtol=1e-4, atol=1e-4)


def test_scatter_reduce_nan_bool_and_empty_against_torch(device):
    torch = pytest.importorskip("torch")
    idx = np.array([0, 0, 1, 1, 2])
    cases = [(np.array([1.0, NAN, 3.0], np.float32), np.array([NAN, 5, 1, 2, -1], np.float32)),
             (np.array([True, False, False]), np.array([True, False, True, False, False]))]
    for a, src in cases:
        for how in REDUCTIONS[:2] + REDUCTIONS[3:]:
            for include_self in (True, False):
                got = dev(a, device).scatter_reduce(0, dev(idx, device), dev(src, device), how,
                                                    include_self=include_self)
                want = torch.from_numpy(a).scatter_reduce(
                    0, torch.from_numpy(idx), torch.from_numpy(src), how,
                    include_self=include_self)
                assert_close(got, want.numpy(), dtype=a.dtype)
    x = ct.ones(2, 3, device=device)
    empty = ct.zeros(2, 0, dtype=ct.int64, device=device)
    assert_close(x.scatter_reduce(1, empty, x, "mean", include_self=False), np.ones((2, 3)))
    x0 = ct.tensor(2.0, device=device)
    assert x0.scatter_reduce(0, ct.tensor(0, device=device), ct.tensor(5.0, device=device),
                             "amax").item() == 5


def test_scatter_legacy_reduce(device, rng):
    a = random_array(rng, (4, 3), np.float32)
    idx = rng.integers(0, 4, (5, 3))
    src = random_array(rng, (5, 3), np.float32)
    for legacy, how in (("add", "sum"), ("multiply", "prod")):
        ref = scatter_reduce_ref(a, 0, idx, src, how, True)
        x, buf, outside = spread(a, device)
        assert x.scatter_(0, dev(idx, device), dev(src, device), reduce=legacy) is x
        assert_close(x, ref)
        untouched(buf, outside)
        ref = scatter_reduce_ref(a, 0, idx, np.full(idx.shape, 1.5), how, True)
        out = ct.scatter(dev(a, device), 0, dev(idx, device), value=1.5, reduce=legacy)
        assert_close(out, ref)
    x = dev(a, device).requires_grad_()
    with pytest.raises(RuntimeError, match="reduce= is not implemented"):
        x.scatter(0, dev(idx, device), 2.0, reduce="add")


def test_scatter_reduce_errors_leave_the_tensor_unchanged(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    x = dev(a, device)
    i = ct.tensor([[0, 2]], device=device)
    src = ct.ones(1, 2, device=device)
    with pytest.raises(ValueError, match="reduce must be one of sum, prod, mean, amax, amin, "
                                         "got 'max'"):
        x.scatter_reduce_(0, i, src, "max")
    with pytest.raises(ValueError, match="reduce must be 'add' or 'multiply', got 'sum'"):
        x.scatter_(0, i, src, reduce="sum")
    with pytest.raises(TypeError, match="int64 or int32, got float32"):
        x.scatter_reduce_(0, src, src, "sum")
    with pytest.raises(TypeError, match="src's dtype int64 must match the tensor's dtype"):
        x.scatter_reduce_(0, i, i, "amax")
    with pytest.raises(TypeError, match="src must be a tensor, got float"):
        x.scatter_reduce_(0, i, 1.0, "sum")
    flags = dev(np.array([True, False, True]), device)
    with pytest.raises(TypeError, match="'mean' is not supported for bool"):
        flags.scatter_reduce(0, i[0], flags, "mean")
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.scatter_reduce_(0, ct.tensor([[0, 3]], device=device), src, "prod",
                          include_self=False)
    with pytest.raises(ValueError, match="the index's size 2 exceeds the size 1 of src"):
        x.scatter_reduce_(0, i, ct.ones(2, 1, device=device), "sum")
    with pytest.raises(ValueError, match="the index has 1 dims but the tensor has 2"):
        x.scatter_reduce_(0, i[0], src, "sum")
    with pytest.raises(IndexError, match="dimension out of range"):
        x.scatter_reduce_(2, i, src, "sum")
    assert_close(x, a)


def test_scatter_reduce_gradients_match_torch(device, rng):
    dtype = fdtype(device)
    a = rng.integers(-2, 3, (4, 3)).astype(dtype)  # ties with src and among src
    a[1, 1] = 0  # a zero of x
    src = rng.integers(-2, 3, (6, 3)).astype(dtype)
    src[:2, 2] = 0  # two zeros scattered to one place
    src[3, 0] = 0
    idx = np.array([[2, 1, 1], [0, 0, 1], [2, 1, 3], [0, 3, 3], [2, 2, 0], [1, 1, 0]])
    for how in REDUCTIONS:
        for include_self in (True, False):
            both(device, lambda lib, c, x, s: x.scatter_reduce(
                0, c(idx), s, how, include_self=include_self), [a, src])

    def in_place(lib, c, x, s):  # on a tensor inside a graph, and src larger than the index
        y = x * 2
        return y.scatter_reduce_(0, c(idx[:4, :2]), s[:4, :2], "mean", include_self=False)
    both(device, in_place, [a, src])
    if device.has_fp64:
        i = dev(idx, device)
        x = dev(rng.standard_normal((4, 3)), device).requires_grad_()
        s = dev(rng.standard_normal((7, 4)), device).requires_grad_()  # larger than the index
        for how in REDUCTIONS:
            assert gradcheck(lambda x, s: x.scatter_reduce(0, i, s, how), [x, s])
        assert gradcheck(lambda x, s: x.scatter_reduce(0, i, s, "prod", include_self=False),
                         [x, s])


# ---- masked_scatter ------------------------------------------------------------------------------

def masked_scatter_ref(a, mask, src):
    out = np.array(np.broadcast_to(a, np.broadcast_shapes(a.shape, mask.shape)))
    m = np.broadcast_to(mask, out.shape)
    out[m] = src.ravel()[:m.sum()]
    return out


def test_masked_scatter_matches_numpy(device, rng):
    dtypes = [np.float32, np.int64, np.bool_] + ([np.float64] if device.has_fp64 else [])
    for dtype in dtypes:
        for shape, mshape in (((70, 80), (70, 80)), ((6, 5, 4), (5, 1)), ((9,), (9,))):
            a = random_array(rng, shape, dtype)
            mask = rng.random(mshape) < 0.4
            src = random_array(rng, (2, a.size), dtype)
            ref = masked_scatter_ref(a, mask, src)
            x, buf, outside = spread(a, device)
            s, _, _ = spread(src, device)
            m, _, _ = spread(mask, device)
            assert x.masked_scatter_(m, s) is x
            assert_close(x, ref, dtype=dtype)
            if dtype != np.bool_:  # (bool has no sentinel)
                untouched(buf, outside)
    a = random_array(rng, (1, 5), np.float32)  # out of place: x broadcast to the mask's shape
    mask = rng.random((4, 1)) < 0.5
    src = random_array(rng, 23, np.float32)
    got = ct.masked_scatter(dev(a, device), dev(mask, device), dev(src, device)[3:])
    assert_close(got, masked_scatter_ref(a, mask, src[3:]))  # a contiguous source at an offset


def test_masked_scatter_edge_cases_and_errors(device):
    x0 = ct.tensor(1.0, device=device)
    assert ct.masked_scatter(x0, ct.tensor(True, device=device),
                             ct.tensor([7.0, 8.0], device=device)).item() == 7
    x = dev(np.arange(6, dtype=np.float32).reshape(2, 3), device)
    none = ct.zeros(2, 3, dtype=ct.bool, device=device)
    assert x.masked_scatter(none, ct.zeros(0, device=device)).tolist() == x.tolist()
    assert ct.zeros(0, 3, device=device).masked_scatter_(none[:0], x).shape == (0, 3)
    x.masked_scatter_(dev(np.arange(6).reshape(2, 3) > 1, device), x)  # source is the target
    assert x.tolist() == [[0, 1, 0], [1, 2, 3]]  # (each element read before it is written)
    mask = ct.tensor([True, False, True], device=device)
    ints = dev(np.arange(6), device)
    with pytest.raises(ValueError, match="the mask has 4 True elements but source has only 3"):
        x.masked_scatter_(mask, ct.ones(3, device=device))
    with pytest.raises(TypeError, match="mask must be a bool tensor, got int64"):
        x.masked_scatter_(ints, x)
    with pytest.raises(TypeError, match="source's dtype int64 must match the tensor's dtype"):
        x.masked_scatter_(mask, ints)
    with pytest.raises(TypeError, match="source must be a tensor, got list"):
        x.masked_scatter_(mask, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"mask's shape \(2, 2\) does not broadcast"):
        x.masked_scatter_(ct.ones(2, 2, dtype=ct.bool, device=device), x)
    with pytest.raises(ValueError, match=r"mask's shape \(2, 2, 3\) does not broadcast"):
        x.masked_scatter_(ct.ones(2, 2, 3, dtype=ct.bool, device=device), x)
    assert x.tolist() == [[0, 1, 0], [1, 2, 3]]


def test_masked_scatter_gradients(device, rng):
    dtype = fdtype(device)
    a = random_array(rng, (1, 4), dtype)
    src = random_array(rng, (3, 5), dtype)  # more elements than the mask takes
    mask = np.array([[True, False, True, True], [False, False, True, False], [True] * 4])
    both(device, lambda lib, c, x, s: lib.masked_scatter(x, c(mask), s), [a, src])

    def in_place(lib, c, x, s):
        y = x.expand(3, 4) * 1.5
        return y.masked_scatter_(c(mask[0]), s)
    both(device, in_place, [a, src])
    if device.has_fp64:
        x, s = dev(a, device).requires_grad_(), dev(src, device).requires_grad_()
        assert gradcheck(lambda x, s: x.masked_scatter(dev(mask, device), s), [x, s])


# ---- logcumsumexp --------------------------------------------------------------------------------

def logcumsumexp_ref(a, dim):
    return np.logaddexp.accumulate(a.astype(np.float64), axis=dim)


@pytest.mark.parametrize("blocks", [None, 3])  # the launcher's own split, and one forced
def test_logcumsumexp_matches_numpy(device, rng, monkeypatch, blocks):
    if blocks:
        monkeypatch.setattr(reduce, "_scan_blocks", lambda device, lines, n: min(blocks, n))
    dtypes = [np.float32] + ([np.float64] if device.has_fp64 else [])
    for dtype in dtypes:
        a = random_array(rng, (5, 13, 4), dtype, -300, 300)  # exp() overflows without a shift
        for dim in (0, 1, -1):
            x, _, _ = spread(a, device)
            assert_close(ct.logcumsumexp(x, dim), logcumsumexp_ref(a, dim), dtype=dtype)
    long_rows = random_array(rng, (2, 9000), np.float32, -5, 5)
    assert_close(dev(long_rows, device).logcumsumexp(1), logcumsumexp_ref(long_rows, 1),
                 rtol=1e-5, atol=1e-5)


def test_logcumsumexp_infinities_and_errors(device):
    torch = pytest.importorskip("torch")
    a = np.array([[-INF, -INF, 1.0, INF, 2.0, -INF, 3.0],
                  [-INF, 2.0, -INF, 5.0, NAN, 1.0, INF],
                  [INF, INF, -INF, 0.0, -INF, 1.0, 1.0]], np.float32)
    got = dev(a, device).logcumsumexp(1)
    assert_close(got, torch.from_numpy(a).logcumsumexp(1).numpy())
    assert got.numpy()[0, 0] == -INF  # an all -inf prefix: -inf, not NaN
    assert ct.logcumsumexp(ct.tensor(2.5, device=device), 0).item() == 2.5
    assert ct.logcumsumexp(ct.zeros(0, 3, device=device), 0).shape == (0, 3)
    with pytest.raises(TypeError, match="logcumsumexp.*must be floating point, got int64"):
        ct.logcumsumexp(ct.tensor([1, 2], device=device), 0)
    with pytest.raises(TypeError, match="dim must be an int, got None"):
        ct.logcumsumexp(ct.ones(2, device=device), None)
    with pytest.raises(IndexError, match="dimension out of range"):
        ct.logcumsumexp(ct.ones(2, device=device), 1)


def test_logcumsumexp_gradients(device, rng):
    a = random_array(rng, (3, 6), fdtype(device), -3, 3)
    both(device, lambda lib, c, x: lib.logcumsumexp(x, 1), [a])
    both(device, lambda lib, c, x: x.logcumsumexp(0) * 2, [a])
    x = dev(np.array([-INF, -INF, 0.5, -INF, 1.0], a.dtype), device).requires_grad_()
    x.logcumsumexp(0).backward(dev(np.array([1.0, -2.0, 3.0, 0.5, 1.0], a.dtype), device))
    g = x.grad.numpy()  # torch gives NaN at the leading -inf entries; the limit is 0
    assert g[0] == g[1] == g[3] == 0 and np.isfinite(g).all()
    if device.has_fp64:
        x = dev(rng.standard_normal((3, 5)), device).requires_grad_()
        assert gradcheck(lambda x: x.logcumsumexp(-1), [x])


# ---- unique(dim=), unique_consecutive ------------------------------------------------------------

def assert_same_results(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w.numpy())


def test_unique_dim_matches_torch(device, rng):
    torch = pytest.importorskip("torch")
    for dtype in (np.float32, np.int64):
        a = rng.integers(0, 2, (30, 3, 2)).astype(dtype)  # repeated slices along every dim
        x = spread(a, device)[0] if dtype == np.float32 else dev(a, device)
        for dim in (0, 1, -1):
            got = ct.unique(x, dim=dim, return_inverse=True, return_counts=True)
            want = torch.unique(torch.from_numpy(a), dim=dim, return_inverse=True,
                                return_counts=True)
            assert_same_results(got, want)
    b = np.array([[1.0, NAN], [0.0, 2.0], [1.0, NAN], [0.0, 2.0]], np.float32)
    values, counts = dev(b, device).unique(dim=0, return_counts=True)
    assert_close(values, [[0.0, 2.0], [1.0, NAN], [1.0, NAN]])  # a NaN slice is never equal
    assert counts.tolist() == [2, 1, 1]
    assert ct.unique(dev(a, device), dim=0, sorted=False).shape[1:] == (3, 2)


def test_unique_consecutive_matches_torch(device, rng):
    torch = pytest.importorskip("torch")
    a = rng.integers(0, 2, (12, 2)).astype(np.float32)
    a[3:6] = 1  # a run
    a[8, 0] = NAN
    for dim in (None, 0, 1):
        got = ct.unique_consecutive(dev(a, device), return_inverse=True, return_counts=True,
                                    dim=dim)
        want = torch.unique_consecutive(torch.from_numpy(a), return_inverse=True,
                                        return_counts=True, dim=dim)
        assert_same_results(got, want)
    flat = a.ravel()  # runs of the flattened input: neighbours differ (NaN from everything)
    assert ct.unique_consecutive(dev(a, device)).shape == (int(np.sum(flat[1:] != flat[:-1])) + 1,)
    r = ct.unique_consecutive(ct.tensor(3.0, device=device), return_inverse=True)
    assert r[0].tolist() == [3] and r[1].shape == ()


def test_unique_dim_edge_cases_and_errors(device):
    values, inverse, counts = ct.unique(ct.zeros(0, 3, device=device), dim=0,
                                        return_inverse=True, return_counts=True)
    assert (values.shape, inverse.shape, counts.shape) == ((0, 3), (0,), (0,))
    assert ct.unique(ct.zeros(3, 0, device=device), dim=1).shape == (3, 0)
    assert ct.unique_consecutive(ct.zeros(0, 2, device=device), dim=0).shape == (0, 2)
    with pytest.raises(ValueError, match=r"slices along dim 0 of a tensor of shape \(3, 0\) "
                                         r"are empty"):
        ct.unique(ct.zeros(3, 0, device=device), dim=0)
    with pytest.raises(IndexError, match="unique: dim 0 given for a 0-d tensor"):
        ct.unique(ct.tensor(1.0, device=device), dim=0)
    with pytest.raises(IndexError, match="unique_consecutive: dimension out of range"):
        ct.unique_consecutive(ct.ones(2, 2, device=device), dim=2)
    with pytest.raises(TypeError, match="unique: input must be a tensor, got list"):
        ct.unique([1, 2], dim=0)
