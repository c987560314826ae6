"""Advanced indexing, gather/scatter, masks, nonzero and one_hot against numpy references."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor as ct
from cltensor.device import Device
from cltensor.ops import indexing
from cltensor.testing import assert_close, random_array

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
BIG = 10 ** 6  # sentinel index: reading it would raise an IndexError


# ---- helpers ------------------------------------------------------------------------------------

def torch_index(a, key):
    """numpy reference with torch's rule: ints (and 0-d integer arrays) select first and never
    count as advanced indices; numpy's advanced indexing then runs on the rest. Returns the
    view the second stage indexes and that stage's key, so setitem can use them too."""
    first, rest = [], []
    for k in key:
        if isinstance(k, np.ndarray) and k.ndim == 0:
            k = k.item()
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            first.append(k)
        elif k is None or isinstance(k, (bool, np.bool_)):
            rest.append(k)
        elif k is Ellipsis:
            first.append(k)
            rest.append(k)
        elif isinstance(k, slice):
            first.append(k)
            rest.append(slice(None))
        else:
            arr = np.asarray(k)
            first.extend([slice(None)] * (arr.ndim if arr.dtype == bool else 1))
            rest.append(k)
    view = a[tuple(first)]
    return view, _without_empty_ellipsis(view.ndim, rest)


def _without_empty_ellipsis(ndim, key):
    """torch does not count an Ellipsis that covers no dims as separating advanced indices
    (numpy does): drop it."""
    used = sum(np.asarray(k).ndim if isinstance(k, (list, np.ndarray)) and
               np.asarray(k).dtype == bool else 1 for k in key
               if k is not None and k is not Ellipsis and not isinstance(k, (bool, np.bool_)))
    return tuple(k for k in key if k is not Ellipsis) if used == ndim else tuple(key)


def ref_get(a, key):
    view, rest = torch_index(a, key)
    return view[rest]


def ref_set(a, key, value):
    view, rest = torch_index(a, key)
    view[rest] = value


def on_device(key, device):
    """numpy arrays in a key become device tensors (of their dtype); lists stay lists."""
    return tuple(ct.from_numpy(k, device=device) if isinstance(k, np.ndarray) else k for k in key)


def layouts(a, device, sentinel):
    """a as a contiguous tensor, a transposed view and a step-sliced view with an offset; the
    unused elements hold `sentinel`."""
    yield ct.from_numpy(a, device=device)
    if a.ndim >= 2:
        swapped = np.ascontiguousarray(np.swapaxes(a, 0, -1))
        yield ct.from_numpy(swapped, device=device).transpose(0, -1)
    flat = np.full(2 * a.size + 5, sentinel, dtype=a.dtype)
    flat[5::2] = a.ravel()
    yield ct.from_numpy(flat, device=device)[5::2].view(a.shape)


def poisoned(device, shape, dtype=np.float32):
    fill = np.nan if np.dtype(dtype).kind == "f" else -7
    return ct.full(shape, fill, dtype=dtype, device=device)


def other_device(device):
    """A second Device over the same OpenCL device: its own context, so tensors on it count as
    being on another device."""
    return Device(device.index + "-other", device.cl_device)


# ---- getitem -------------------------------------------------------------------------------------

MASK3 = np.random.default_rng(0).random((5, 6, 7)) < 0.4
KEYS = {
    "list": ([3, 0, 4],),
    "negative list": ([-1, 0, -5],),
    "repeated list": ([1, 1, 1, 4],),
    "empty list": ([],),
    "int64 tensor": (np.array([4, 1, 1, 0]),),
    "int32 tensor": (slice(None), np.array([5, -6, 0], dtype=np.int32)),
    "2-d tensor after slice": (slice(None), np.array([[0, 5], [-6, 2]])),
    "broadcast pair": (np.array([[0], [4]]), np.array([1, 2, 5])),
    "adjacent after slice": (slice(1, 4), np.array([0, 2]), np.array([6, 1])),
    "separated by slice": (np.array([0, 2]), slice(None, None, 2), np.array([6, 1])),
    "separated by None": (np.array([0, 2]), None, np.array([1, 3])),
    "None first": (None, np.array([1, 2]), slice(2, 5)),
    "ellipsis before": (Ellipsis, np.array([6, 0])),
    "ellipsis between": (np.array([1]), Ellipsis, np.array([2, 3])),
    "int then index": (2, slice(None), np.array([1, 3])),
    "index int index": (np.array([0, 1]), 3, np.array([2, 4])),
    "0-d int tensor": (np.array(3), [0, -1]),
    "all dims indexed": (np.array([0, 1]), np.array([2, 3]), np.array([4, 5])),
    "full mask": (MASK3,),
    "leading mask": (MASK3[:, :, 0],),
    "mask after slice": (slice(None), MASK3[0]),
    "bool list": ([True, False, True, False, True],),
    "mask then index": (np.array([True, False, False, True, False]), slice(None), np.array([1, 6])),
    "True": (True, slice(None), [1, 2]),
    "False": (1, False),
    "0-d bool tensor": (np.array(True),),
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem_key_kinds(device, rng, name):
    a = random_array(rng, (5, 6, 7), np.float32)
    key = KEYS[name]
    out = ct.from_numpy(a, device=device)[on_device(key, device)]
    assert_close(out, ref_get(a.astype(np.float64), key), dtype=np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_getitem_dtypes(device, rng, dtype):
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("no fp64")
    a = random_array(rng, (4, 9, 3), dtype)
    x = ct.from_numpy(a, device=device)
    for key in [([2, -1, 0],), (np.array([1, 3]), slice(None), np.array([0, 2])),
                (rng.random((4, 9)) < 0.5,), (Ellipsis, [True, False, True])]:
        assert_close(x[on_device(key, device)], ref_get(a, key), dtype=dtype)


def test_getitem_non_contiguous_data_and_indices(device, rng):
    a = random_array(rng, (6, 5, 4), np.float32)
    idx = rng.integers(-5, 5, size=(3, 2))
    mask = rng.random((6,)) < 0.5
    ref = ref_get(a.astype(np.float64), (slice(None), idx, [3, 0]))
    for x in layouts(a, device, np.nan):
        for i in layouts(idx, device, BIG):
            assert_close(x[:, i, [3, 0]], ref)
        # an index broadcast by a stride-0 view
        col = ct.from_numpy(np.array([[4], [1]]), device=device).expand(2, 3)
        assert_close(x[col, 1:4], a[np.broadcast_to([[4], [1]], (2, 3)), 1:4])
        for m in layouts(mask, device, True):
            assert_close(x[m, ::2], a[mask, ::2])


@pytest.mark.parametrize("shape, key", [
    ((4, 3), (np.zeros((0,), np.int64),)),
    ((4, 3), (np.zeros((2, 0), np.int64), slice(None))),
    ((4, 3), (np.zeros((4, 3), bool),)),
    ((0, 3), (np.zeros((0,), np.int64),)),
    ((0, 3), (slice(None), [2, 0])),
    ((4, 3), (slice(2, 2), [1, 1])),
])
def test_getitem_empty_selections(device, shape, key):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    out = ct.from_numpy(a, device=device)[on_device(key, device)]
    assert_close(out, ref_get(a, key))


def test_getitem_large_awkward_sizes(device, rng):
    a = random_array(rng, (263, 131), np.float32)
    mask = rng.random(a.shape) < 0.3
    idx = rng.integers(-263, 263, size=1009)
    x = ct.from_numpy(a, device=device)
    assert_close(x[ct.from_numpy(mask, device=device)], a[mask])
    assert_close(x[ct.from_numpy(idx, device=device), 7], a[idx, 7])


def test_getitem_errors(device, rng):
    x = ct.from_numpy(random_array(rng, (3, 4), np.float32), device=device)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        x[:, [0, 4]]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with size 3"):
        x[ct.tensor([[0], [-4]], device=device)]
    with pytest.raises(TypeError, match="int64, int32 or bool"):
        x[ct.tensor([0.0, 1.0], device=device)]
    with pytest.raises(TypeError, match="ints or bools"):
        x[[0.5, 1.0]]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[ct.tensor([True, False], device=device)]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[:, ct.ones(5, dtype=ct.bool, device=device)]
    with pytest.raises(IndexError, match="could not be broadcast together"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., [0], ...]
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        x[9, [0]]
    with pytest.raises(ValueError, match="step must be positive"):
        x[::-1, [0]]
    with pytest.raises(TypeError, match="valid indices"):
        x[[0], "a"]


def test_index_tensors_on_another_device_raise(device):
    x = ct.zeros(3, 4, device=device)
    i = ct.tensor([0, 1], device=other_device(device))
    with pytest.raises(RuntimeError, match="on .* but the tensor is on"):
        x[i]
    with pytest.raises(RuntimeError, match="same device"):
        ct.index_select(x, 0, i)
    with pytest.raises(RuntimeError, match="same device"):
        ct.masked_fill(x, ct.ones(3, 4, dtype=ct.bool, device=other_device(device)), 1.0)


# ---- setitem and index_put_ ---------------------------------------------------------------------

SET_KEYS = ["list", "negative list", "int32 tensor", "broadcast pair", "separated by slice",
            "separated by None", "int then index", "full mask", "leading mask", "mask after slice",
            "mask then index", "True", "empty list", "ellipsis between"]


@pytest.mark.parametrize("name", SET_KEYS)
def test_setitem_scalar_and_broadcast_tensor(device, rng, name):
    a = random_array(rng, (5, 6, 7), np.float32)
    key = KEYS[name]
    x = ct.from_numpy(a, device=device)
    x[on_device(key, device)] = 2.5
    ref = a.copy()
    ref_set(ref, key, 2.5)
    assert_close(x, ref)
    # a value tensor broadcast over the indexed shape's leading dims
    shape = ref_get(a, key).shape
    v = random_array(rng, shape[-1:] if shape else (), np.float32)
    x[on_device(key, device)] = ct.from_numpy(v, device=device)
    ref_set(ref, key, v)
    assert_close(x, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_setitem_dtypes_and_value_conversion(device, rng, dtype):
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("no fp64")
    a = random_array(rng, (4, 5), dtype)
    v = random_array(rng, (2, 5), dtype)
    x = ct.from_numpy(a, device=device)
    x[[3, 0]] = ct.from_numpy(v, device=device)
    x[:, [True, False, False, True, False]] = 1
    a[[3, 0]] = v
    a[:, [True, False, False, True, False]] = 1
    assert_close(x, a, dtype=dtype)
    # a value of another dtype is converted to the tensor's
    x[[1], [2]] = ct.tensor([3], dtype=ct.int32, device=device)
    a[1, 2] = 3
    assert_close(x, a, dtype=dtype)


def test_setitem_through_views_and_from_overlapping_value(device, rng):
    a = random_array(rng, (6, 8), np.float32)
    base = ct.from_numpy(a, device=device)
    view = base.t()[1:7:2]  # (3, 6) strided, non-contiguous
    view[[0, 2], [5, 1]] = ct.tensor([10.0, 20.0], device=device)
    a.T[1:7:2][[0, 2], [5, 1]] = [10.0, 20.0]
    assert_close(base, a)
    base[[0, 1, 5]] = base[2]  # the value is a view of the tensor written to
    a[[0, 1, 5]] = a[2].copy()
    assert_close(base, a)
    base[[4, 3]] = list(range(8))  # a Python list value
    a[[4, 3]] = np.arange(8)
    assert_close(base, a)


def test_setitem_errors_leave_the_tensor_unchanged(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    x = ct.from_numpy(a, device=device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[[0, 1, 3]] = 1.0
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with size 4"):
        x[[0, 1], [0, -5]] = ct.tensor([1.0, 2.0], device=device)
    with pytest.raises(ValueError, match=r"value tensor of shape \(3,\) cannot be broadcast"):
        x[[0, 1]] = ct.ones(3, device=device)
    with pytest.raises(IndexError, match="shape of the mask"):
        x[ct.ones(4, dtype=ct.bool, device=device)] = 0.0
    with pytest.raises(TypeError, match="int64, int32 or bool"):
        x[ct.tensor([0.0], device=device)] = 0.0
    assert_close(x, a)
    y = ct.zeros(3, device=device).expand(2, 3)
    with pytest.raises(RuntimeError, match="expanded view"):
        y[:, [0, 1]] = 1.0


def test_index_put_accumulate_is_sequential(device, rng):
    a = random_array(rng, (7, 5), np.float32)
    idx = rng.integers(-7, 7, size=200)
    v = random_array(rng, (200, 5), np.float32) * np.float32(1e3)
    x = ct.from_numpy(a, device=device)
    x.index_put_((ct.from_numpy(idx, device=device),), ct.from_numpy(v, device=device),
                 accumulate=True)
    ref = a.copy()
    np.add.at(ref, idx, v)  # sequential, in index order: the same float32 roundings
    np.testing.assert_array_equal(x.numpy(), ref)
    # several index tensors broadcast together, a non-adjacent layout and a broadcast value
    y = ct.from_numpy(a, device=device)
    i0, i2 = rng.integers(0, 7, size=(30, 1)), rng.integers(0, 5, size=(1, 4))
    y_key = (ct.from_numpy(i0, device=device), ct.from_numpy(i2, device=device))
    ct.index_put_(y, y_key, ct.tensor(0.5, device=device), accumulate=True)
    ref = a.copy()
    np.add.at(ref, (np.broadcast_to(i0, (30, 4)), np.broadcast_to(i2, (30, 4))), np.float32(0.5))
    np.testing.assert_array_equal(y.numpy(), ref)


def test_zero_dim_integer_tensor_keys_select(device, rng):
    a = random_array(rng, (4, 3), np.float32)
    x = ct.from_numpy(a, device=device)
    one = ct.tensor(1, device=device)
    view = x[one]
    assert view.storage is x.storage  # a 0-d integer tensor selects, as an int would
    assert_close(view, a[1])
    x[one, [0, 2]] = 5.0
    x.index_put_((ct.tensor(3, dtype=ct.int32, device=device),), ct.tensor(1.0, device=device),
                 accumulate=True)
    a[1, [0, 2]] = 5.0
    a[3] += 1.0
    assert_close(x, a)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x[ct.tensor(4, device=device)]


def test_index_put_out_of_place(device, rng):
    a = random_array(rng, (4, 3), np.int64)
    x = ct.from_numpy(a, device=device)
    idx = (ct.tensor([1, 3], device=device), ct.tensor([2, 0], device=device))
    y = ct.index_put(x, idx, ct.tensor([7, 8], device=device))
    ref = a.copy()
    ref[[1, 3], [2, 0]] = [7, 8]
    assert_close(y, ref)
    assert_close(x, a)
    with pytest.raises(TypeError, match="tuple of tensors"):
        x.index_put_(ct.tensor([0], device=device), 1)


# ---- index_select, gather, scatter --------------------------------------------------------------

def test_index_select(device, rng):
    a = random_array(rng, (5, 7, 3), np.float32)
    idx = rng.integers(0, 7, size=11).astype(np.int32)
    for x in layouts(a, device, np.nan):
        for i in layouts(idx, device, BIG):
            assert_close(ct.index_select(x, 1, i), a[:, idx])
            assert_close(x.index_select(-1, i[:4] % 3), a[..., idx[:4] % 3])
    x = ct.from_numpy(a, device=device)
    assert_close(x.index_select(0, ct.tensor(2, device=device)), a[[2]])
    assert ct.index_select(x, 0, ct.tensor([], dtype=ct.int64, device=device)).shape == (0, 7, 3)


def test_index_select_errors(device):
    x = ct.zeros(3, 4, device=device)
    with pytest.raises(IndexError, match="0-d or 1-d"):
        ct.index_select(x, 0, ct.tensor([[0]], device=device))
    with pytest.raises(IndexError, match="index -1 is out of bounds for dimension 1 with size 4"):
        ct.index_select(x, 1, ct.tensor([-1], device=device))
    with pytest.raises(TypeError, match="int64 or int32"):
        ct.index_select(x, 0, ct.tensor([0.0], device=device))
    with pytest.raises(IndexError, match="dimension out of range"):
        ct.index_select(x, 2, ct.tensor([0], device=device))


def _gather_ref(a, dim, idx):
    region = tuple(slice(0, n) if k != dim else slice(None) for k, n in enumerate(idx.shape))
    return np.take_along_axis(a[region], idx, dim)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(device, rng, dim):
    a = random_array(rng, (5, 6, 7), np.float64 if device.has_fp64 else np.float32)
    shape = [4, 5, 6]
    shape[dim] = 9
    idx = rng.integers(0, a.shape[dim], size=shape)
    ref = _gather_ref(a, dim % 3, idx)
    for x in layouts(a, device, np.nan):
        for i in layouts(idx, device, BIG):
            assert_close(ct.gather(x, dim, i), ref)
            assert_close(x.gather(dim, i.int()), ref)


def test_gather_errors(device):
    x = ct.zeros(3, 4, device=device)
    with pytest.raises(ValueError, match="index has 1 dims but the tensor has 2"):
        ct.gather(x, 0, ct.tensor([0], device=device))
    with pytest.raises(ValueError, match="size 5 exceeds the size 4 of the tensor in dimension 1"):
        ct.gather(x, 0, ct.zeros(1, 5, dtype=ct.int64, device=device))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        ct.gather(x, 0, ct.tensor([[0, 3]], device=device))
    with pytest.raises(IndexError, match="index -1 is out of bounds"):
        ct.gather(x, 1, ct.tensor([[-1]], device=device))
    with pytest.raises(TypeError, match="int64 or int32"):
        ct.gather(x, 1, ct.tensor([[True]], device=device))


def test_an_empty_index_of_any_shape_moves_nothing(device):
    """torch checks no shapes against an empty index: gather gives the index's empty shape and
    the scatters leave the tensor as it was."""
    x = ct.arange(6.0, device=device).reshape(2, 3)
    for shape in ((0,), (3, 0), (0, 4, 1)):
        index = ct.zeros(*shape, dtype=ct.int64, device=device)
        assert ct.gather(x, 0, index).shape == shape
        src = ct.zeros(*shape, device=device)
        for y in (x.scatter(1, index, src), x.scatter(0, index, 7.0), x.scatter_add(1, index, src),
                  x.scatter_reduce(0, index, src, "amax")):
            np.testing.assert_array_equal(y.numpy(), x.numpy())


def _lane_permutations(rng, shape, dim, length):
    """Index values along dim that are distinct within every lane (so scatter is deterministic)."""
    idx = np.argsort(rng.random(shape), axis=dim)
    return np.take(idx, np.arange(length), axis=dim)


def _scatter_ref(a, dim, idx, src, add):
    out = a.copy()
    coords = list(np.indices(idx.shape))
    coords[dim] = idx
    vals = src[tuple(slice(0, n) for n in idx.shape)] if isinstance(src, np.ndarray) else src
    if add:
        np.add.at(out, tuple(coords), vals)
    else:
        out[tuple(coords)] = vals
    return out


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(device, rng, dim):
    a = random_array(rng, (6, 5), np.float32)
    idx = _lane_permutations(rng, [(6, 4), (5, 5)][dim], dim, [4, 3][dim])
    src = random_array(rng, (7, 6), np.float32)
    ref = _scatter_ref(a, dim, idx, src, add=False)
    for i in layouts(idx, device, BIG):
        for s in layouts(src, device, np.nan):
            x = ct.from_numpy(a, device=device)
            assert x.scatter_(dim, i, s) is x
            assert_close(x, ref)
    x = ct.from_numpy(a, device=device)
    assert_close(ct.scatter(x, dim, ct.from_numpy(idx, device=device), value=-3.0),
                 _scatter_ref(a, dim, idx, -3.0, add=False))
    assert_close(x, a)


def test_scatter_errors_leave_the_tensor_unchanged(device, rng):
    a = random_array(rng, (3, 4), np.float32)
    x = ct.from_numpy(a, device=device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x.scatter_(0, ct.tensor([[0, 1, 3]], device=device), 1.0)
    with pytest.raises(TypeError, match="dtype int64 must match the tensor's dtype float32"):
        x.scatter_(0, ct.tensor([[0]], device=device), ct.tensor([[1]], device=device))
    with pytest.raises(ValueError, match="size 2 exceeds the size 1 of src"):
        x.scatter_(1, ct.tensor([[0, 1]], device=device), ct.ones(1, 1, device=device))
    with pytest.raises(TypeError, match="exactly one of src"):
        x.scatter_(0, ct.tensor([[0]], device=device))
    assert_close(x, a)


SCATTER_ADD_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("dtype", SCATTER_ADD_DTYPES)
@pytest.mark.parametrize("size", [3, 40])  # per-output and per-lane kernels
def test_scatter_add_is_sequential(device, rng, dtype, size):
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("no fp64")
    a = random_array(rng, (size, 7), dtype)
    idx = rng.integers(0, size, size=(300, 5))
    src = random_array(rng, (301, 6), dtype)
    x = ct.from_numpy(a, device=device)
    out = ct.scatter_add(x, 0, ct.from_numpy(idx, device=device), ct.from_numpy(src, device=device))
    np.testing.assert_array_equal(out.numpy(), _scatter_ref(a, 0, idx, src, add=True))
    assert_close(x, a)


@pytest.mark.parametrize("size", [5, 29])
def test_scatter_add_kernels_agree_on_strided_inputs(device, rng, monkeypatch, size):
    a = random_array(rng, (4, size), np.float32)
    idx = rng.integers(0, size, size=(3, 61))
    src = random_array(rng, (4, 61), np.float32) * np.float32(100)
    ref = _scatter_ref(a, 1, idx, src, add=True)
    results = []
    for max_size in (0, 64):  # 0 forces the per-lane kernel, 64 the per-output one
        monkeypatch.setattr(indexing.gather_scatter, "PER_OUTPUT_MAX_SIZE", max_size)
        for x in layouts(a, device, np.nan):
            for i in layouts(idx, device, BIG):
                for s in layouts(src, device, np.nan):
                    out = x.scatter_add(1, i, s)
                    np.testing.assert_array_equal(out.numpy(), ref)
                    results.append(out.numpy())
    assert all(np.array_equal(r, results[0]) for r in results)


@pytest.mark.parametrize("size", [3, 40])
def test_scatter_add_long_index_is_segmented_and_deterministic(device, rng, size):
    # 5000 entries in two lanes: cut into segments whose partial sums add up in a second pass
    a = random_array(rng, (2, size), np.float32)
    idx = rng.integers(0, size, size=(2, 5000))
    src = random_array(rng, (2, 5000), np.float32)
    assert indexing.gather_scatter._segments([2, 5000], 1, size) > 1
    ref = _scatter_ref(a.astype(np.float64), 1, idx, src.astype(np.float64), add=True)
    outs = [x.scatter_add(1, i, ct.from_numpy(src, device=device)).numpy()
            for x in layouts(a, device, np.nan) for i in layouts(idx, device, BIG)]
    assert_close(outs[0], ref, rtol=1e-5, atol=1e-4)
    assert all(np.array_equal(o, outs[0]) for o in outs)  # the same bits every time
    ints = random_array(rng, (2, 5000), np.int64)
    out = ct.zeros(2, size, dtype=ct.int64, device=device).scatter_add_(
        1, ct.from_numpy(idx, device=device), ct.from_numpy(ints, device=device))
    assert_close(out, _scatter_ref(np.zeros((2, size), np.int64), 1, idx, ints, add=True))


def test_scatter_add_in_place_and_empty(device, rng):
    a = random_array(rng, (4, 3), np.float32)
    x = ct.from_numpy(a, device=device)
    assert x.scatter_add_(0, ct.zeros(0, 3, dtype=ct.int64, device=device),
                          ct.ones(0, 3, device=device)) is x
    assert_close(x, a)
    x.scatter_add_(1, ct.tensor([[2, 2]], device=device), x[:1])  # src overlaps x
    ref = a.copy()
    ref[0, 2] += a[0, 0] + a[0, 1]
    assert_close(x, ref)
    with pytest.raises(TypeError, match="src must be a tensor"):
        x.scatter_add_(0, ct.tensor([[0]], device=device), 1.0)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x.scatter_add_(0, ct.tensor([[4]], device=device), ct.ones(1, 1, device=device))
    assert_close(x, ref)


# ---- masks, nonzero, one_hot ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill(device, rng, dtype):
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("no fp64")
    a = random_array(rng, (5, 6), dtype)
    mask = rng.random((1, 6)) < 0.5  # broadcast over rows
    value = 1 if dtype != np.float32 else 2.5
    ref = np.where(mask, np.asarray(value).astype(dtype), a)
    for x in layouts(a, device, 0):
        m = ct.from_numpy(mask, device=device)
        out = ct.masked_fill(x, m, value)
        assert_close(out, ref, dtype=dtype)
        assert x.masked_fill_(m, ct.tensor(value, device=device)) is x
        assert_close(x, ref, dtype=dtype)
    # out of place, the mask may broadcast x up
    x = ct.from_numpy(a[:1], device=device)
    big_mask = rng.random((3, 6)) < 0.5
    out = x.masked_fill(ct.from_numpy(big_mask, device=device), value)
    assert_close(out, np.where(big_mask, np.asarray(value).astype(dtype), a[:1]), dtype=dtype)


def test_masked_fill_errors(device):
    x = ct.zeros(2, 3, device=device)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        x.masked_fill(ct.ones(2, 3, device=device), 1.0)
    with pytest.raises(ValueError, match="does not broadcast to the tensor's shape"):
        x.masked_fill_(ct.ones(4, 2, 3, dtype=ct.bool, device=device), 1.0)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x.masked_fill(ct.ones(2, 2, dtype=ct.bool, device=device), 1.0)
    with pytest.raises(ValueError, match="0-d tensor"):
        x.masked_fill(ct.ones(3, dtype=ct.bool, device=device), ct.ones(3, device=device))


def test_masked_select(device, rng):
    a = random_array(rng, (4, 7), np.int32)
    mask = rng.random((3, 1, 7)) < 0.5
    ref = np.broadcast_to(a, (3, 4, 7))[np.broadcast_to(mask, (3, 4, 7))]
    for x in layouts(a, device, 0):
        assert_close(ct.masked_select(x, ct.from_numpy(mask, device=device)), ref)
    none = ct.zeros(4, 7, dtype=ct.bool, device=device)
    assert ct.from_numpy(a, device=device).masked_select(none).shape == (0,)


@pytest.mark.parametrize("shape", [(1,), (37,), (1009,), (6, 0), (5, 7), (3, 1, 4, 5)])
def test_nonzero(device, rng, shape):
    a = random_array(rng, shape, np.float32) * (rng.random(shape) < 0.4)
    ref = np.argwhere(a)
    for x in layouts(a, device, 1.0):
        assert_close(ct.nonzero(x), ref)
        cols = x.nonzero(as_tuple=True)
        assert len(cols) == len(shape)
        for c, r in zip(cols, np.nonzero(a)):
            assert_close(c, r, dtype=np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero_dtypes(device, rng, dtype):
    if dtype == np.float64 and not device.has_fp64:
        pytest.skip("no fp64")
    a = random_array(rng, (9, 10), dtype) * (rng.random((9, 10)) < 0.5).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a[0, :3] = [np.nan, -0.0, np.inf]  # NaN and inf count, -0.0 does not
    assert_close(ct.nonzero(ct.from_numpy(a, device=device)), np.argwhere(a))


def test_nonzero_edge_cases(device):
    assert ct.nonzero(ct.zeros(4, 5, device=device)).shape == (0, 2)
    assert ct.nonzero(ct.tensor(3.0, device=device)).shape == (1, 0)
    assert ct.nonzero(ct.tensor(0, device=device)).shape == (0, 0)
    (only,) = ct.nonzero(ct.tensor(2, device=device), as_tuple=True)
    assert_close(only, np.array([0]))


def test_one_hot(device, rng):
    labels = rng.integers(0, 6, size=(4, 5))
    for x in layouts(labels, device, BIG):
        assert_close(ct.one_hot(x), np.eye(labels.max() + 1, dtype=np.int64)[labels],
                     dtype=np.int64)
        assert_close(ct.one_hot(x.int(), 9), np.eye(9, dtype=np.int64)[labels], dtype=np.int64)
    empty = ct.one_hot(ct.zeros(0, dtype=ct.int64, device=device), 3)
    assert empty.shape == (0, 3) and empty.dtype == ct.int64


def test_one_hot_errors(device):
    with pytest.raises(ValueError, match="must be non-negative, got -1"):
        ct.one_hot(ct.tensor([0, -1], device=device))
    with pytest.raises(ValueError, match=r"smaller than num_classes \(3\), got 3"):
        ct.one_hot(ct.tensor([0, 3], device=device), 3)
    with pytest.raises(ValueError, match="empty tensor"):
        ct.one_hot(ct.zeros(0, dtype=ct.int64, device=device))
    with pytest.raises(TypeError, match="int64 or int32"):
        ct.one_hot(ct.tensor([0.0], device=device))


# ---- property tests ------------------------------------------------------------------------------

@st.composite
def keys(draw):
    """A shape and a key mixing ints, slices, None, Ellipsis, lists, int arrays and masks."""
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    length = draw(st.integers(0, 3))  # the advanced indices' common length (or 1)
    key, advanced = [], False
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "list", "array", "mask", "none"]))
        if kind == "none":
            key.append(None)
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind in ("slice", "none"):
            key.append(slice(draw(st.integers(-n - 1, n + 1)), draw(st.integers(-n - 1, n + 1)),
                             draw(st.integers(1, 3))))
        elif kind == "mask":
            key.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        else:
            size = draw(st.sampled_from([length, 1]))
            values = draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))
            key.append(values if kind == "list" else np.array(values, dtype=np.int64))
        advanced |= kind in ("list", "array", "mask")
    if not advanced:
        key.append(np.array([0]))
        shape.append(1)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(key)))
        key = key[:at] + [Ellipsis] + key[at + draw(st.integers(0, 1)):]
    return tuple(shape), tuple(key)


def _expect(fn):
    try:
        return fn(), None
    except IndexError as e:
        return None, e


@settings(max_examples=30, deadline=None)
@given(case=keys(), seed=st.integers(0, 2 ** 32 - 1))
def test_getitem_matches_numpy_property(device, case, seed):
    shape, key = case
    a = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)
    ref, err = _expect(lambda: ref_get(a, key))
    x = ct.from_numpy(a, device=device)
    if err is not None:
        with pytest.raises(IndexError):
            x[on_device(key, device)]
    else:
        assert_close(x[on_device(key, device)], ref)


@settings(max_examples=30, deadline=None)
@given(case=keys(), seed=st.integers(0, 2 ** 32 - 1))
def test_setitem_scalar_matches_numpy_property(device, case, seed):
    shape, key = case
    a = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)
    ref = a.copy()
    _, err = _expect(lambda: ref_set(ref, key, 9.0))
    x = ct.from_numpy(a, device=device)
    if err is not None:
        with pytest.raises(IndexError):
            x[on_device(key, device)] = 9.0
        assert_close(x, a)
    else:
        x[on_device(key, device)] = 9.0
        assert_close(x, ref)
