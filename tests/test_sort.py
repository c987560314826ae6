"""sort, argsort and topk against numpy's stable sort, on both of sort.cl's paths (a row in
local memory, and the network in global memory), with ties, NaN, every dtype and any dim."""
import numpy as np
import pytest

import cltensor as ct
from cltensor import program
from cltensor.ops import sort as sort_ops
from cltensor.testing import assert_close


@pytest.fixture(params=["local", "global"])
def path(request, monkeypatch):
    """'global': every row too long for local memory, so sort_init/stage/final run."""
    if request.param == "global":
        monkeypatch.setattr(sort_ops, "LOCAL_BYTES", 0)
    return request.param


def _dtypes(device):
    return [np.float32, np.int32, np.int64, np.bool_] + ([np.float64] if device.has_fp64 else [])


def expected_order(a, axis, descending):
    """Indices of numpy's stable sort with torch's order: NaN largest, ties by position."""
    a = np.moveaxis(a, axis, -1)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        key = np.where(nan, 0, a).astype(np.float64)
        primary = (nan, key) if not descending else (~nan, -key)
    else:
        primary = (np.zeros(a.shape, bool), a.astype(np.int64) * (-1 if descending else 1))
    pos = np.broadcast_to(np.arange(a.shape[-1]), a.shape)
    order = np.lexsort((pos, primary[1], primary[0]), axis=-1)
    return np.moveaxis(order, -1, axis)


def _data(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    a = rng.integers(-4, 5, shape).astype(dtype)  # few values: many ties
    if np.dtype(dtype).kind == "f":
        a = a + rng.choice([0.0, 0.25], shape).astype(dtype)
        a.flat[rng.choice(a.size, max(1, a.size // 10), replace=False)] = np.nan
    return a


@pytest.mark.parametrize("shape", [(1,), (5,), (3, 1000), (2, 3, 37)])
def test_sort_matches_numpy(device, rng, path, shape):
    for dtype in _dtypes(device):
        a = _data(rng, shape, dtype)
        t = ct.from_numpy(a, device=device)
        for axis in range(len(shape)):
            for descending in (False, True):
                want = expected_order(a, axis, descending)
                values, indices = ct.sort(t, dim=axis, descending=descending)
                assert indices.dtype == ct.int64 and values.dtype == t.dtype
                np.testing.assert_array_equal(indices.numpy(), want, err_msg=f"{dtype} {axis}")
                np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, axis))
                np.testing.assert_array_equal(
                    t.argsort(axis - len(shape), descending=descending).numpy(), want)


def test_sort_strided_input_and_edges(device, rng, path):
    a = rng.standard_normal((6, 9)).astype(np.float32)
    t = ct.from_numpy(a, device=device).T[::2]  # (5, 6), neither dim contiguous
    want = np.sort(a.T[::2], axis=1)
    assert_close(t.sort().values, want)
    assert t.sort(stable=True).indices.is_contiguous()
    for shape in ((0,), (3, 0), (0, 4)):
        v, i = ct.sort(ct.zeros(shape, device=device), dim=-1)
        assert v.shape == i.shape == shape
    v, i = ct.sort(ct.tensor(2.5, device=device))
    assert v.item() == 2.5 and i.item() == 0 and i.shape == ()
    with pytest.raises(IndexError, match="dimension out of range"):
        ct.sort(t, dim=2)
    with pytest.raises(TypeError, match="expected a tensor"):
        ct.sort(a)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(device, rng, path, largest):
    a = _data(rng, (4, 50), np.float32)
    t = ct.from_numpy(a, device=device)
    for k in (0, 1, 5, 50):
        order = expected_order(a, 1, largest)[:, :k]
        values, indices = t.topk(k, dim=1, largest=largest)
        assert values.shape == indices.shape == (4, k)
        np.testing.assert_array_equal(indices.numpy(), order)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order, 1))
    top3 = ct.topk(t, 3, 0).indices
    np.testing.assert_array_equal(top3.numpy(), expected_order(a, 0, True)[:3])
    assert ct.topk(ct.tensor(1.5, device=device), 1).values.item() == 1.5
    assert ct.topk(ct.tensor(1.5, device=device), 0).values.shape == (0,)
    with pytest.raises(ValueError, match=r"k \(51\) out of range"):
        t.topk(51)
    with pytest.raises(TypeError, match="k must be an int"):
        t.topk(2.0)


def test_sort_and_topk_gradients(device, rng, path):
    a = rng.standard_normal((3, 8))
    dtype = np.float64 if device.has_fp64 else np.float32
    x = ct.from_numpy(a.astype(dtype), device=device).requires_grad_()
    g = rng.standard_normal((3, 8)).astype(dtype)
    values, indices = x.sort(dim=1, descending=True)
    (values * ct.from_numpy(g, device=device)).sum().backward()
    want = np.zeros_like(g)
    np.put_along_axis(want, indices.numpy(), g, 1)
    assert_close(x.grad, want, rtol=1e-6)
    x.grad = None
    values, indices = ct.topk(x, 3, dim=0, largest=False)
    values.sum().backward()
    want = np.zeros_like(a)
    np.put_along_axis(want, indices.numpy(), 1.0, 0)
    assert_close(x.grad, want)
    assert not indices.requires_grad


@pytest.fixture
def poisoned(monkeypatch):
    """New tensors filled with a value no test data holds, so unwritten elements show."""
    empty_on = ct.ClTensor.empty_on

    def filled(shape, dtype, device):
        t = empty_on(shape, dtype, device)
        return t.fill_(-77) if t.numel() and dtype != ct.bool_ else t
    monkeypatch.setattr(ct.ClTensor, "empty_on", staticmethod(filled))


def _selected(t, k, **kwargs):
    """t.topk(k, ...), which must run topk_select and no sort kernel."""
    with program.record() as launches:
        values, indices = t.topk(k, **kwargs)
    names = {kernel.function_name for kernel, *_ in launches}
    assert "topk_select" in names and not any(n.startswith("sort") for n in names), names
    return values, indices


def _select_dtypes(device):
    return [np.float32, np.int32, np.int64] + ([np.float64] if device.has_fp64 else [])


# (rows, row length, k): k = 1, k = the row length, rows longer than a work-group, and few long
# rows, cut into segments (a second pass merges their candidates)
SELECT_CASES = [(3, 1, 1), (4, 37, 37), (5, 700, 1), (3, 3000, 9), (2, 5000, 128), (1, 40000, 5)]


@pytest.mark.parametrize("group", [1, 64])
def test_topk_selection_matches_numpy(device, rng, monkeypatch, poisoned, group):
    """topk_select against numpy's stable order (ties by position, NaN largest), both ways,
    with one work-item per group (CPUs) or a merge of many in local memory."""
    monkeypatch.setattr(sort_ops, "SELECT_GROUP_CPU", group)
    monkeypatch.setattr(sort_ops, "SELECT_SEGMENT", 1024)  # 40000 long rows: several segments
    for dtype in _select_dtypes(device):
        for rows, n, k in SELECT_CASES:
            a = _data(rng, (rows, n), dtype)
            t = ct.from_numpy(a, device=device)
            for largest in (True, False):
                order = expected_order(a, 1, largest)[:, :k]
                values, indices = _selected(t, k, dim=1, largest=largest)
                msg = f"{dtype.__name__} {(rows, n, k)} largest={largest}"
                np.testing.assert_array_equal(indices.numpy(), order, err_msg=msg)
                np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order, 1),
                                              err_msg=msg)


def test_topk_selection_within_device_limits(device, rng, monkeypatch):
    """The group shrinks to what local memory holds (k values and positions per work-item) and
    what the kernel allows; a middle dim and a strided input select as well."""
    monkeypatch.setattr(sort_ops, "SELECT_GROUP_CPU", 256)
    monkeypatch.setattr(sort_ops, "LOCAL_BYTES", 3000)  # 64 * 12 bytes a work-item: 2 of them
    a = _data(rng, (3, 900, 2), np.float32)
    t = ct.from_numpy(a, device=device)
    for k in (64, 3):
        order = expected_order(a, 1, True)[:, :k]
        values, indices = _selected(t, k, dim=1)
        np.testing.assert_array_equal(indices.numpy(), order)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order, 1))
    b = a[:, ::3, 0]
    order = expected_order(b, 1, False)[:, :4]
    np.testing.assert_array_equal(_selected(t[:, ::3, 0], 4, largest=False)[1].numpy(), order)
