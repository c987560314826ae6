"""index_add / index_copy / index_fill, take, take_along_dim, argwhere, aminmax, cummax / cummin,
searchsorted / bucketize, bincount / histc and quantile / nanquantile: against float64 numpy
references, against torch (forward and backward) and by finite differences."""
import numpy as np
import pytest

import cltensor as ct
from cltensor.composed import searching
from cltensor.testing import assert_close, gradcheck, random_array

NAN = float("nan")


# ---- helpers ------------------------------------------------------------------------------------

def fdtype(device):
    return np.float64 if device.has_fp64 else np.float32


def dev(a, device):
    return ct.from_numpy(np.asarray(a), device=device)


def spread(a, device):
    """a as a strided view (offset 5, every other element) of a larger buffer whose other
    elements are a sentinel (NaN, or -7 for integers); returns (view, buffer, sentinel mask)."""
    fill = np.nan if a.dtype.kind == "f" else -7
    flat = np.full(2 * a.size + 5, fill, dtype=a.dtype)
    flat[5::2] = a.ravel()
    buf = dev(flat, device)
    outside = np.ones(flat.size, bool)
    outside[5::2] = False
    return buf[5::2].view(a.shape), buf, outside


def untouched(buf, outside):
    rest = buf.numpy()[outside]
    kept = np.isnan(rest) if rest.dtype.kind == "f" else rest == -7
    assert kept.all(), "wrote outside the view"


def both(device, fn, arrays, seed=0):
    """fn(lib, conv, *leaves) with cltensor and with torch (conv: numpy array -> that library's
    tensor), leaves made of `arrays` requiring grad: the outputs (the first of a tuple) and the
    leaves' gradients for one random output gradient must match."""
    torch = pytest.importorskip("torch")

    def conv_ct(a):
        return dev(a, device)

    def conv_t(a):
        return torch.from_numpy(np.array(a))

    leaves_c = [conv_ct(a).requires_grad_() for a in arrays]
    leaves_t = [conv_t(a).requires_grad_() for a in arrays]
    out_c, out_t = fn(ct, conv_ct, *leaves_c), fn(torch, conv_t, *leaves_t)
    out_c = out_c[0] if isinstance(out_c, tuple) else out_c
    out_t = out_t[0] if isinstance(out_t, tuple) else out_t
    assert_close(out_c, out_t.detach().numpy())
    g = np.asarray(np.random.default_rng(seed).standard_normal(tuple(out_t.shape)), arrays[0].dtype)
    out_c.backward(conv_ct(g))
    out_t.backward(conv_t(g))
    for lc, lt in zip(leaves_c, leaves_t):
        assert_close(lc.grad, lt.grad.numpy())


def slots(a, dim):
    """a viewed with dim first (writes go to a)."""
    return np.moveaxis(a, dim, 0)


# ---- index_add, index_copy, index_fill -----------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_adds_repeated_indices_in_order(device, rng, dim):
    a = random_array(rng, (4, 5, 3), np.float32)
    size = a.shape[dim]
    idx = np.concatenate([rng.integers(0, size, 6), [size - 1, size - 1]])  # duplicates
    shape = list(a.shape)
    shape[dim] = idx.size
    src = random_array(rng, shape, np.float32)
    for alpha in (1, 2.5):
        ref = a.astype(np.float64)
        np.add.at(slots(ref, dim), idx, alpha * slots(src.astype(np.float64), dim))
        for index_dtype in (np.int64, np.int32):
            x, buf, outside = spread(a, device)
            s, _, _ = spread(src, device)
            assert x.index_add_(dim, dev(idx.astype(index_dtype), device), s, alpha=alpha) is x
            assert_close(x, ref)
            untouched(buf, outside)
        x = dev(a, device)
        assert_close(ct.index_add(x, dim, dev(idx, device), dev(src, device), alpha=alpha), ref)
        assert_close(x, a)  # out of place


def test_index_add_integers_empty_and_0d(device, rng):
    a = rng.integers(-9, 9, (5, 2))
    ones = dev(np.ones((3, 2), np.int64), device)
    out = dev(a, device).index_add(0, dev([4, 0, 4], device), ones, alpha=3)
    ref = a.copy()
    np.add.at(ref, [4, 0, 4], 3)
    assert_close(out, ref, dtype=np.int64)
    x = dev(a, device)
    none = ct.tensor([], dtype=ct.int64, device=device)
    x.index_add_(1, none, ct.zeros(5, 0, dtype=ct.int64, device=device))
    assert_close(x, a)
    x0 = ct.tensor(1.5, device=device)
    x0.index_add_(-1, ct.tensor(0, device=device), ct.tensor(2.0, device=device))
    assert x0.shape == () and x0.item() == 3.5
    x0.index_add_(0, ct.tensor([0], device=device), ct.tensor(1.0, device=device), alpha=2)
    assert x0.item() == 5.5


def test_index_copy_overwrites_every_listed_slot(device, rng):
    a = random_array(rng, (6, 4), np.float32)
    perm = rng.permutation(6)  # every row: the NaN-poisoned target must come out NaN-free
    x = ct.full((6, 4), NAN, device=device)
    src, _, _ = spread(a, device)
    assert x.index_copy_(0, dev(perm, device), src) is x
    ref = np.empty_like(a)
    ref[perm] = a
    assert_close(x, ref)
    idx = rng.permutation(4)[:3]
    ref = a.copy()
    ref[:, idx] = -a[:, :3]
    x, buf, outside = spread(a, device)
    x.index_copy_(-1, dev(idx, device), dev(-a[:, :3], device))
    assert_close(x, ref)
    untouched(buf, outside)
    x0 = ct.tensor(1.0, device=device)
    seven = ct.tensor(7.0, device=device)
    assert ct.index_copy(x0, 0, ct.tensor([0], device=device), seven).item() == 7
    assert x0.item() == 1


def test_index_fill_wraps_negative_indices(device, rng):
    a = random_array(rng, (3, 5, 2), np.float32)
    idx = np.array([-1, 0, 2, -1])
    ref = a.copy()
    slots(ref, 1)[idx] = -4.5
    x, buf, outside = spread(a, device)
    assert x.index_fill_(1, dev(idx, device), -4.5) is x
    assert_close(x, ref)
    untouched(buf, outside)
    value = ct.tensor(2.25, dtype=ct.float64 if device.has_fp64 else ct.float32, device=device)
    out = ct.index_fill(dev(a, device), -3, ct.tensor(-3, device=device), value)
    ref = a.copy()
    ref[0] = 2.25
    assert_close(out, ref, dtype=np.float32)
    ints = dev(np.arange(6).reshape(2, 3), device).index_fill(1, ct.tensor([1], device=device), 2.7)
    assert ints.tolist() == [[0, 2, 2], [3, 2, 5]]  # the value in the tensor's dtype, as torch
    x0 = ct.tensor(1.0, device=device)
    assert ct.index_fill(x0, 0, ct.tensor([0], device=device), 5).item() == 5


def test_index_ops_errors_leave_the_tensor_unchanged(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    x = dev(a, device)
    i = ct.tensor([0, 2], device=device)
    src = ct.ones(2, 4, device=device)
    with pytest.raises(TypeError, match="int64 or int32, got float32"):
        x.index_add_(0, ct.tensor([0.0], device=device), src[:1])
    with pytest.raises(TypeError, match="index_copy_: the index must be an int64 tensor, got int"):
        x.index_copy_(0, i.int(), src)
    with pytest.raises(TypeError, match="index_fill_: the index must be an int64 tensor"):
        x.index_fill_(0, i.int(), 1.0)
    with pytest.raises(IndexError, match="0-d or 1-d, got a 2-d"):
        x.index_add_(0, i.reshape(2, 1), src)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.index_add_(0, ct.tensor([0, 3], device=device), src)
    with pytest.raises(IndexError, match="index -1 is out of bounds for dimension 0 with size 3"):
        x.index_copy_(0, ct.tensor([-1, 0], device=device), src)
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with size 4"):
        x.index_fill_(1, ct.tensor([-5], device=device), 0.0)
    with pytest.raises(ValueError, match=r"number of indices \(2\) must equal source's size \(3\)"):
        x.index_add_(0, i, ct.ones(3, 4, device=device))
    with pytest.raises(ValueError, match="must match the tensor's shape"):
        x.index_copy_(0, i, ct.ones(2, 5, device=device))
    with pytest.raises(ValueError, match="source has 1 dims but the tensor has 2"):
        x.index_add_(0, i, ct.ones(2, device=device))
    with pytest.raises(TypeError, match="source's dtype int64 must match the tensor's dtype"):
        x.index_copy_(0, i, src.long())
    with pytest.raises(ValueError, match="0-d tensor"):
        x.index_fill_(0, i, ct.ones(1, device=device))
    with pytest.raises(IndexError, match="dimension out of range"):
        x.index_add_(2, i, src)
    assert_close(x, a)


def test_index_ops_gradients(device, rng):
    dtype = fdtype(device)
    a = random_array(rng, (4, 3), dtype)
    src = random_array(rng, (5, 3), dtype)
    idx = np.array([3, 0, 3, 1, 3])
    both(device, lambda lib, c, x, s: lib.index_add(x, 0, c(idx), s, alpha=-1.5), [a, src])
    both(device, lambda lib, c, x, s: x.index_copy(1, c(np.array([2, 0])), s[:4, :2]), [a, src])
    both(device, lambda lib, c, x, v: x.index_fill(0, c(np.array([3, 1, 1])), v.sum()), [a, src])

    def in_place(lib, c, x, s):  # on a tensor inside a graph, as torch
        y = x * 2
        y.index_add_(1, c(np.array([2, 2])), s[:4, :2])
        return y.index_fill_(0, c(np.array([0])), 0.0)
    both(device, in_place, [a, src])
    if device.has_fp64:
        i = dev(idx, device)
        x, s = (dev(v, device).requires_grad_() for v in (a, src))
        assert gradcheck(lambda x, s: x.index_add(0, i, s, alpha=2.0), [x, s])
        assert gradcheck(lambda x, s: x.index_copy(0, dev([2, 0, 3], device), s[:3]), [x, s])
        v = ct.tensor(0.5, dtype=ct.float64, device=device).requires_grad_()
        assert gradcheck(lambda x, v: x.index_fill(1, i[1:2], v), [x, v])


# ---- take, take_along_dim, argwhere --------------------------------------------------------------

def test_take(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    idx = rng.integers(-12, 12, (2, 5))
    x, _, _ = spread(a, device)
    assert_close(ct.take(x, dev(idx, device)), np.take(a.ravel(), idx))
    assert_close(x.take(ct.tensor(-2, device=device)), np.float32(a.ravel()[-2]))
    assert ct.take(x, ct.tensor([], dtype=ct.int64, device=device)).shape == (0,)
    four = ct.tensor(4.0, device=device)
    assert ct.take(four, ct.tensor([0, -1], device=device)).tolist() == [4, 4]
    with pytest.raises(TypeError, match="take: index must be an int64 tensor, got int32"):
        ct.take(x, dev(idx, device).int())
    with pytest.raises(IndexError, match="index 12 is out of bounds"):
        ct.take(x, ct.tensor([0, 12], device=device))
    both(device, lambda lib, c, x: lib.take(x, c(np.array([[5, 5], [-1, 0]]))), [a])


def test_take_along_dim(device, rng):
    a = random_array(rng, (4, 1, 5), np.float32)
    idx = rng.integers(-5, 5, (1, 3, 2))
    ref = np.take_along_axis(np.broadcast_to(a, (4, 3, 5)), np.broadcast_to(idx, (4, 3, 2)), 2)
    x, _, _ = spread(a, device)
    assert_close(ct.take_along_dim(x, dev(idx, device), -1), ref)
    flat = rng.integers(0, 20, 7)
    assert_close(x.take_along_dim(dev(flat, device)), a.ravel()[flat])
    with pytest.raises(TypeError, match="indices must be an int64 tensor, got int32"):
        ct.take_along_dim(x, dev(idx, device).int(), 2)
    with pytest.raises(ValueError, match=r"input \(3-d\) and indices \(2-d\)"):
        ct.take_along_dim(x, dev(idx[0], device), 2)
    with pytest.raises(IndexError, match="index -6 is out of bounds for dimension 2 with size 5"):
        ct.take_along_dim(x, ct.tensor([[[0, -6]]], device=device), 2)
    with pytest.raises(IndexError, match="out of bounds"):
        ct.take_along_dim(x, ct.tensor([-1], device=device))  # flattened: no wrapping, as torch
    both(device, lambda lib, c, x: lib.take_along_dim(x, c(np.array([[[1, 1, -1]]])), 2), [a])


@pytest.mark.parametrize("shape", [(), (0, 3), (4, 5), (2, 3, 4)])
def test_argwhere(device, rng, shape):
    a = rng.integers(0, 2, shape).astype(np.float32) * random_array(rng, shape, np.float32)
    out = ct.argwhere(dev(a, device))
    assert_close(out, np.argwhere(a), dtype=np.int64)


# ---- aminmax, cummax, cummin ---------------------------------------------------------------------

def test_aminmax(device, rng):
    a = rng.integers(-3, 3, (4, 6)).astype(np.float32)  # ties
    a[2, 1] = NAN
    x = dev(a, device)
    r = ct.aminmax(x)
    assert np.isnan(r.min.item()) and np.isnan(r.max.item())
    for dim in (0, -1):
        r = x.aminmax(dim=dim, keepdim=True)
        assert_close(r.min, np.min(a, dim, keepdims=True))
        assert_close(r.max, np.max(a, dim, keepdims=True))
    assert ct.aminmax(x[:2], keepdim=True).min.shape == (1, 1)
    assert ct.aminmax(ct.tensor(3, device=device), dim=0) == (3, 3)
    b = ct.tensor([True, False], device=device)
    assert ct.aminmax(b).min.item() is False and ct.aminmax(b).max.dtype == ct.bool
    assert ct.aminmax(ct.zeros(0, 3, device=device), dim=1).max.shape == (0,)
    with pytest.raises(ValueError, match="cannot reduce an empty tensor"):
        ct.aminmax(ct.zeros(0, 3, device=device))
    with pytest.raises(IndexError, match="dim 0 has size 0"):
        ct.aminmax(ct.zeros(0, 3, device=device), dim=0)
    with pytest.raises(TypeError, match="dim must be an int or None"):
        ct.aminmax(x, dim=(0, 1))
    b = rng.integers(-2, 2, (3, 4)).astype(fdtype(device))  # ties share the gradient

    def min_plus_max(lib, c, x):  # torch's aminmax has amin's and amax's gradients (since 2.13)
        return sum(ct.aminmax(x, dim=1) if lib is ct else (x.amin(1), x.amax(1)))
    both(device, min_plus_max, [b])


def running_ref(a, dim, take_min):
    """cummax / cummin along dim by a sequential loop with torch's rule, in float64."""
    a = np.moveaxis(a.astype(np.float64), dim, -1)
    values, indices = np.empty_like(a), np.zeros(a.shape, np.int64)
    for row in np.ndindex(a.shape[:-1]):
        best, at = None, 0
        for k, v in enumerate(a[row]):
            if best is None or np.isnan(v) or (not np.isnan(best) and
                                               (v <= best if take_min else v >= best)):
                best, at = v, k
            values[row + (k,)], indices[row + (k,)] = best, at
    return np.moveaxis(values, -1, dim), np.moveaxis(indices, -1, dim)


@pytest.mark.parametrize("blocks", [None, 3])  # the kernels' own split, and one forced
def test_cummax_cummin_match_a_sequential_loop(device, rng, monkeypatch, blocks):
    if blocks:
        monkeypatch.setattr(searching, "_scan_blocks", lambda device, lines, n: min(blocks, n))
    a = rng.integers(-3, 3, (5, 11, 3)).astype(np.float32)  # many ties
    a[rng.random(a.shape) < 0.08] = NAN
    for op, take_min in ((ct.cummax, False), (ct.cummin, True)):
        for dim in (1, -1, 0):
            x, _, _ = spread(a, device)
            values, indices = op(x, dim)
            ref_v, ref_i = running_ref(a, dim, take_min)
            assert_close(values, ref_v)
            assert_close(indices, ref_i, dtype=np.int64)
    dtypes = [np.int64, np.bool_] + ([np.float64] if device.has_fp64 else [])
    for dtype in dtypes:
        b = random_array(rng, (2, 9), dtype)
        values, indices = dev(b, device).cummin(1)
        ref_v, ref_i = running_ref(b, 1, True)
        assert_close(values, ref_v.astype(dtype), dtype=dtype)
        assert_close(indices, ref_i)


def test_cummax_long_rows_0d_and_empty(device, rng):
    a = rng.integers(0, 50, (2, 9000)).astype(np.float32)  # several blocks per row
    a[1, 4500] = NAN
    values, indices = ct.cummax(dev(a, device), 1)
    ref_v, ref_i = running_ref(a, 1, False)
    assert_close(values, ref_v)
    assert_close(indices, ref_i)
    r = ct.cummin(ct.tensor(2.5, device=device), -1)
    assert r.values.shape == r.indices.shape == ()
    assert (r.values.item(), r.indices.item()) == (2.5, 0)
    assert ct.cummax(ct.zeros(0, 3, device=device), 1).indices.shape == (0, 3)
    with pytest.raises(IndexError, match="dimension out of range"):
        ct.cummax(ct.tensor(2.5, device=device), 1)


def test_cummax_cummin_gradients(device, rng):
    a = rng.integers(-2, 3, (3, 7)).astype(fdtype(device))  # ties: the gradient goes to the index
    both(device, lambda lib, c, x: lib.cummax(x, 1), [a])
    both(device, lambda lib, c, x: x.cummin(0), [a])
    if device.has_fp64:
        x = dev(rng.standard_normal((3, 4)), device).requires_grad_()
        assert gradcheck(lambda x: x.cummax(-1).values, [x])


# ---- searchsorted, bucketize ---------------------------------------------------------------------

@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy(device, rng, side):
    seq = np.sort(rng.integers(-5, 5, 12)).astype(np.float32)  # repeated boundaries
    vals = np.concatenate([rng.integers(-7, 7, 9), seq[:4]]).astype(np.float32).reshape(13, 1)
    s, _, _ = spread(seq, device)
    v, _, _ = spread(vals, device)
    right = side == "right"
    out = ct.searchsorted(s, v, right=right)
    assert_close(out, np.searchsorted(seq, vals, side), dtype=np.int64)
    assert_close(ct.searchsorted(s, v, side=side, out_int32=True),
                 np.searchsorted(seq, vals, side), dtype=np.int32)
    rows = np.sort(random_array(rng, (3, 6), np.float32), 1)
    values = random_array(rng, (3, 4), np.float32)
    ref = np.stack([np.searchsorted(r, q, side) for r, q in zip(rows, values)])
    assert_close(ct.searchsorted(dev(rows, device), dev(values, device), right=right), ref)
    unsorted = rng.permutation(seq)
    order = np.argsort(unsorted, kind="stable")
    got = ct.searchsorted(dev(unsorted, device), v, side=side, sorter=dev(order, device))
    assert_close(got, np.searchsorted(unsorted, vals, side, sorter=order))
    ints = np.arange(0, 20, 3)
    assert_close(ct.searchsorted(dev(ints, device), 4.5), np.searchsorted(ints, 4.5))
    assert_close(ct.bucketize(v, s, right=right), np.searchsorted(seq, vals, side))
    assert ct.bucketize(2, s).shape == ()


def test_searchsorted_nan_empty_and_torch(device, rng):
    torch = pytest.importorskip("torch")
    seq = np.array([1.0, 2.0, 2.0, NAN], np.float32)
    vals = np.array([NAN, 2.0, 5.0, -1.0], np.float32)
    for right in (False, True):
        got = ct.searchsorted(dev(seq, device), dev(vals, device), right=right)
        want = torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(vals), right=right)
        assert_close(got, want.numpy())
    assert ct.searchsorted(ct.zeros(0, device=device), dev(vals, device)).tolist() == [0] * 4
    assert ct.searchsorted(dev(seq, device), ct.zeros(0, 2, device=device)).shape == (0, 2)


def test_searchsorted_errors(device):
    s = ct.tensor([1.0, 2.0, 3.0], device=device)
    v = ct.tensor([2.0], device=device)
    with pytest.raises(ValueError, match="side='left' contradicts right=True"):
        ct.searchsorted(s, v, right=True, side="left")
    with pytest.raises(ValueError, match="side must be 'left' or 'right', got 'middle'"):
        ct.searchsorted(s, v, side="middle")
    with pytest.raises(TypeError, match="sorter must be an int64 tensor, got int32"):
        ct.searchsorted(s, v, sorter=ct.tensor([0, 1, 2], dtype=ct.int32, device=device))
    with pytest.raises(IndexError, match="sorter index 3 is out of range"):
        ct.searchsorted(s, v, sorter=ct.tensor([0, 1, 3], device=device))
    with pytest.raises(ValueError, match="sorter's shape"):
        ct.searchsorted(s, v, sorter=ct.tensor([0, 1], device=device))
    with pytest.raises(ValueError, match="leading dims"):
        ct.searchsorted(s.reshape(1, 3), ct.ones(2, 1, device=device))
    with pytest.raises(ValueError, match="a number can only be searched in a 1-d sequence"):
        ct.searchsorted(s.reshape(1, 3), 2.0)
    with pytest.raises(ValueError, match="at least 1 dim"):
        ct.searchsorted(s[0], v)
    with pytest.raises(ValueError, match="boundaries must be 1-d"):
        ct.bucketize(v, s.reshape(1, 3))


# ---- bincount, histc -----------------------------------------------------------------------------

def test_bincount(device, rng):
    a = rng.integers(0, 6, 40)
    x = dev(a, device)
    assert_close(ct.bincount(x), np.bincount(a), dtype=np.int64)
    assert_close(x.int().bincount(minlength=9), np.bincount(a, minlength=9))
    w = random_array(rng, 40, np.float32)
    w_t = dev(w, device)
    assert_close(ct.bincount(x, w_t), np.bincount(a, w), dtype=np.float32)
    if device.has_fp64:  # other weights give float64, as torch
        assert_close(ct.bincount(x, dev(a * 2, device)), np.bincount(a, a * 2), dtype=np.float64)
    assert ct.bincount(x, w_t.requires_grad_()).requires_grad is False
    empty = ct.tensor([], dtype=ct.int64, device=device)
    assert ct.bincount(empty).shape == (0,) and ct.bincount(empty, minlength=3).tolist() == [0] * 3
    with pytest.raises(ValueError, match="values must be non-negative, got -1"):
        ct.bincount(ct.tensor([1, -1, 3], device=device))
    with pytest.raises(ValueError, match="input must be 1-d, got a 2-d"):
        ct.bincount(x.reshape(4, 10))
    with pytest.raises(TypeError, match="int64 or int32 tensor, got float32"):
        ct.bincount(w_t)
    with pytest.raises(ValueError, match="minlength must be a non-negative int"):
        ct.bincount(x, minlength=-1)
    with pytest.raises(ValueError, match="as long as input"):
        ct.bincount(x, w_t[:3])


def test_histc(device, rng):
    torch = pytest.importorskip("torch")
    grid = rng.integers(0, 13, 60).astype(np.float32) / 4  # values on the bin edges
    x = dev(grid, device)
    assert_close(ct.histc(x, bins=12, min=0, max=3), np.histogram(grid, 12, (0, 3))[0])
    assert_close(x.histc(5), np.histogram(grid, 5)[0], dtype=np.float32)  # the data's range
    a = random_array(rng, (7, 9), np.float32)
    a[0, :3] = [NAN, np.inf, -np.inf]
    got = ct.histc(dev(a, device), bins=7, min=-1.5, max=1.25)
    assert_close(got, torch.histc(torch.from_numpy(a), bins=7, min=-1.5, max=1.25).numpy())
    b = random_array(rng, 50, np.float32)
    assert_close(ct.histc(dev(b, device), 9), torch.histc(torch.from_numpy(b), 9).numpy())
    assert ct.histc(ct.full((3,), 1.0, device=device), 4).tolist() == [0, 0, 3, 0]
    assert ct.histc(ct.tensor(2.0, device=device), 4).tolist() == [0, 0, 1, 0]
    assert ct.histc(ct.zeros(0, device=device), 3).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="not finite"):
        ct.histc(dev(a, device), 4)  # NaN in the data's range
    with pytest.raises(ValueError, match="max .* must be larger than min"):
        ct.histc(x, 4, min=3, max=1)
    with pytest.raises(ValueError, match="bins must be positive"):
        ct.histc(x, 0)
    with pytest.raises(TypeError, match="float32 or float64, got int64"):
        ct.histc(ct.tensor([1, 2], device=device))


# ---- quantile, nanquantile -----------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:All-NaN slice")  # numpy's, for the all-NaN row
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint"])
def test_quantile_matches_numpy(device, rng, interpolation):
    a = random_array(rng, (3, 7, 4), np.float32)
    a[0, :2, 0] = a[0, 2, 0]  # ties
    x, _, _ = spread(a, device)
    q = np.array([0.0, 0.3, 0.5, 1.0], np.float32)
    for dim, keepdim in ((1, False), (-1, True), (None, False), (None, True)):
        ref = np.quantile(a.astype(np.float64), q.astype(np.float64), axis=dim, keepdims=keepdim,
                          method=interpolation)
        got = ct.quantile(x, dev(q, device), dim, keepdim, interpolation=interpolation)
        assert_close(got, ref, rtol=1e-5, atol=1e-6)
        got = x.quantile(0.3, dim=dim, keepdim=keepdim, interpolation=interpolation)
        assert_close(got, ref[1])
    b = a.copy()
    b[1, 3, :2] = NAN
    b[2, :, 3] = NAN
    ref = np.nanquantile(b.astype(np.float64), 0.75, axis=1, method=interpolation)
    assert_close(ct.nanquantile(dev(b, device), 0.75, 1, interpolation=interpolation), ref)


def test_quantile_against_torch(device, rng):
    torch = pytest.importorskip("torch")
    a = rng.integers(0, 6, (4, 6)).astype(np.float32)  # ties and .5 ranks
    a[1, 2] = NAN
    a[3] = NAN
    q = np.array([0.1, 0.5, 0.7, 0.9], np.float32)
    for op in ("quantile", "nanquantile"):
        for interpolation in ("nearest", "linear"):
            got = getattr(ct, op)(dev(a, device), dev(q, device), 1, interpolation=interpolation)
            want = getattr(torch, op)(torch.from_numpy(a), torch.from_numpy(q), 1,
                                      interpolation=interpolation)
            assert_close(got, want.numpy())
    x0 = ct.tensor(3.0, device=device)
    assert ct.quantile(x0, 0.5).shape == () and ct.quantile(x0, 0.5, 0, True).shape == ()
    assert ct.quantile(x0, ct.tensor([0.5, 1.0], device=device), 0, True).tolist() == [3, 3]
    assert ct.quantile(x0, ct.tensor(0.5, device=device)).shape == ()
    b = random_array(rng, (3, 5), fdtype(device))
    both(device, lambda lib, c, x: lib.quantile(x, c(np.array([0.2, 0.5], b.dtype)), 1), [b])
    both(device, lambda lib, c, x: lib.nanquantile(x, 0.6, interpolation="midpoint"), [b])
    if device.has_fp64:
        x = dev(rng.standard_normal((2, 5)), device).requires_grad_()
        assert gradcheck(lambda x: ct.quantile(x, 0.35, dim=1), [x])


def test_quantile_errors(device):
    x = ct.tensor([1.0, 2.0, 3.0], device=device)
    with pytest.raises(ValueError, match="interpolation must be one of linear, lower, higher"):
        ct.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(ValueError, match="interpolation must be one of"):
        ct.quantile(x, 0.5, interpolation="Linear")
    with pytest.raises(ValueError, match=r"q must be in \[0, 1\], got 1.5"):
        ct.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"q values must be in \[0, 1\]"):
        ct.quantile(x, ct.tensor([0.5, NAN], device=device))
    with pytest.raises(TypeError, match="q's dtype int64 must match the input's float32"):
        ct.quantile(x, ct.tensor([0], device=device))
    with pytest.raises(ValueError, match="0-d or 1-d tensor, got a 2-d"):
        ct.quantile(x, ct.tensor([[0.5]], device=device))
    with pytest.raises(TypeError, match="float32 or float64, got int64"):
        ct.quantile(x.long(), 0.5)
    with pytest.raises(ValueError, match="must be non-empty"):
        ct.nanquantile(ct.zeros(0, 3, device=device), 0.5, dim=1)


def test_sort_of_an_offset_view(device, rng):
    a = random_array(rng, 9, np.float32)  # the kernels read their rows from a buffer's start
    x = dev(a, device)[2:]
    assert_close(ct.sort(x).values, np.sort(a[2:]))
    s = ct.sort(x).values[1:]
    assert_close(ct.searchsorted(s, x), np.searchsorted(np.sort(a[2:])[1:], a[2:]))
