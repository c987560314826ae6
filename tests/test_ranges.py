"""Ranges and index-defined tensors: arange, linspace, logspace, eye, tril/triu, diag."""
import math

import numpy as np
import pytest
from conftest import DEVICES
from hypothesis import given, settings
from hypothesis import strategies as st

import cltensor
from cltensor.testing import assert_close, random_array

# ---- arange -------------------------------------------------------------------------------------

ARANGE_CASES = [(0, 0, 1), (0, 1, 1), (3, 10, 1), (-5, 20, 3), (10, -7, -2), (0, 1009, 1),
                (7, 8, 5), (0.0, 1.0, 0.1), (1, 0, -0.25), (-2.5, 3.7, 0.3), (0, 5, 1.5),
                (1e6, 1e6 + 17, 1.0), (0.1, 0.7, 0.1)]


@pytest.mark.parametrize("start, end, step", ARANGE_CASES)
def test_arange_matches_numpy(device, start, end, step):
    x = cltensor.arange(start, end, step, device=device)
    floats = any(isinstance(v, float) for v in (start, end, step))
    assert x.dtype == (cltensor.float32 if floats else cltensor.int64)
    assert x.shape == (math.ceil((end - start) / step),)
    expected = np.arange(start, end, step, dtype=np.float64)
    assert_close(x, expected.astype(np.float32) if floats else expected.astype(np.int64))


def test_arange_forms_and_dtypes(device):
    np.testing.assert_array_equal(cltensor.arange(6, device=device).numpy(), np.arange(6))
    assert cltensor.arange(0, device=device).shape == (0,)
    x = cltensor.arange(2, 9, dtype=cltensor.int32, device=device)
    assert x.dtype == cltensor.int32
    np.testing.assert_array_equal(x.numpy(), np.arange(2, 9))
    y = cltensor.arange(4, dtype=cltensor.float32, device=device)
    assert y.dtype == cltensor.float32 and y.tolist() == [0, 1, 2, 3]
    # integer dtypes count from start and step truncated to integers, as torch does
    truncated = cltensor.arange(0.5, 3, dtype=cltensor.int64, device=device)
    np.testing.assert_array_equal(truncated.numpy(), [0, 1, 2])
    big = cltensor.arange(2**40, 2**40 + 5, device=device).numpy()
    np.testing.assert_array_equal(big, 2**40 + np.arange(5))
    assert cltensor.arange(end=3, device=device).tolist() == [0, 1, 2]


def test_arange_float64(device):
    if not device.has_fp64:
        pytest.skip("no fp64 on this device")
    x = cltensor.arange(-1, 1, 0.01, dtype=cltensor.float64, device=device)
    assert x.dtype == cltensor.float64
    assert_close(x, np.arange(-1, 1, 0.01), rtol=1e-13, atol=1e-15)


def test_arange_bad_input(device):
    with pytest.raises(ValueError, match="step must be nonzero"):
        cltensor.arange(0, 5, 0, device=device)
    with pytest.raises(ValueError, match="inconsistent with step sign"):
        cltensor.arange(0, 5, -1, device=device)
    with pytest.raises(ValueError, match="inconsistent with step sign"):
        cltensor.arange(5, 0, 0.5, device=device)
    with pytest.raises(ValueError, match="must be finite"):
        cltensor.arange(0, float("inf"), device=device)
    with pytest.raises(ValueError, match="must be finite"):
        cltensor.arange(float("nan"), device=device)
    with pytest.raises(TypeError, match="must be a real number"):
        cltensor.arange("5", device=device)
    with pytest.raises(TypeError, match="bool is not supported"):
        cltensor.arange(3, dtype=cltensor.bool, device=device)
    with pytest.raises(ValueError, match="truncates to 0"):
        cltensor.arange(0, 2, 0.5, dtype=cltensor.int64, device=device)
    with pytest.raises(ValueError, match="does not fit dtype int32"):
        cltensor.arange(2**31 - 2, 2**31 + 2, dtype=cltensor.int32, device=device)


@settings(max_examples=30, deadline=None)
@given(start=st.integers(-1000, 1000), length=st.integers(0, 300), step=st.integers(-50, 50))
def test_arange_integer_property(start, length, step):
    step = step or 1
    end = start + length * step - (1 if step > 0 else -1) * (length > 0)
    for device in DEVICES:
        x = cltensor.arange(start, end, step, device=device).numpy()
        np.testing.assert_array_equal(x, np.arange(start, end, step))


# ---- linspace / logspace ------------------------------------------------------------------------

@pytest.mark.parametrize("start, end, steps", [(0, 1, 0), (3.5, 9, 1), (0, 1, 2), (-1, 1, 7),
                                               (10, -3.3, 101), (0, 1e-3, 1009), (2, 2, 5),
                                               (-7.25, 1e4, 65537)])
def test_linspace_matches_numpy(device, start, end, steps):
    x = cltensor.linspace(start, end, steps, device=device)
    assert x.dtype == cltensor.float32 and x.shape == (steps,)
    expected = np.linspace(start, end, steps)
    scale = max(abs(start), abs(end))
    assert_close(x, expected, rtol=1e-6, atol=4e-7 * scale)
    if steps:
        got = x.numpy()
        assert got[0] == np.float32(start)
        assert got[-1] == np.float32(end if steps > 1 else start)


def test_linspace_dtypes(device, fp_dtypes):
    if cltensor.float64 in fp_dtypes:
        x = cltensor.linspace(-3, 7, 1000, dtype=cltensor.float64, device=device)
        assert_close(x, np.linspace(-3, 7, 1000), rtol=1e-14, atol=1e-14)
        assert x.numpy()[-1] == 7.0
    # integer dtypes: torch's formula (step in double, both halves, truncated)
    n, start, end = 11, -4, 25
    step = (end - start) / (n - 1)
    i = np.arange(n)
    ref = np.where(i < n // 2, start + step * i, end - step * (n - 1 - i)).astype(np.int64)
    y = cltensor.linspace(start, end, n, dtype=cltensor.int64, device=device)
    assert y.dtype == cltensor.int64
    np.testing.assert_array_equal(y.numpy(), ref)
    z = cltensor.linspace(0, 10, 4, dtype=cltensor.int32, device=device)
    assert z.dtype == cltensor.int32 and z.tolist() == [0, 3, 6, 10]


def test_logspace(device):
    assert_close(cltensor.logspace(0, 3, 4, device=device), [1, 10, 100, 1000], rtol=1e-6)
    x = cltensor.logspace(-2, 2.5, 37, base=2.0, device=device)
    assert_close(x, np.logspace(-2, 2.5, 37, base=2.0), rtol=2e-6)
    assert cltensor.logspace(1, 2, 0, device=device).shape == (0,)
    assert cltensor.logspace(1, 2, 1, device=device).tolist() == [10.0]


def test_linspace_bad_input(device):
    with pytest.raises(ValueError, match="steps must be non-negative"):
        cltensor.linspace(0, 1, -1, device=device)
    with pytest.raises(TypeError, match="steps must be an int"):
        cltensor.linspace(0, 1, 2.5, device=device)
    with pytest.raises(ValueError, match="end must be finite"):
        cltensor.linspace(0, float("inf"), 3, device=device)
    with pytest.raises(TypeError, match="bool is not supported"):
        cltensor.linspace(0, 1, 3, dtype=cltensor.bool, device=device)
    with pytest.raises(TypeError, match="base must be a real number"):
        cltensor.logspace(0, 1, 3, base="e", device=device)


# ---- eye ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, m", [(0, None), (1, None), (4, None), (3, 5), (5, 3), (0, 4),
                                  (4, 0), (37, 29)])
def test_eye(device, n, m):
    x = cltensor.eye(n, m, device=device)
    assert x.dtype == cltensor.float32
    np.testing.assert_array_equal(x.numpy(), np.eye(n, m))


def test_eye_dtypes(device):
    for dtype in (cltensor.bool, cltensor.int32, cltensor.int64):
        x = cltensor.eye(3, 4, dtype=dtype, device=device)
        assert x.dtype == dtype
        np.testing.assert_array_equal(x.numpy(), np.eye(3, 4, dtype=dtype))
    with pytest.raises(ValueError, match="n must be non-negative"):
        cltensor.eye(-1, device=device)
    with pytest.raises(ValueError, match="m must be non-negative"):
        cltensor.eye(2, -3, device=device)
    with pytest.raises(TypeError, match="n must be an int"):
        cltensor.eye(2.0, device=device)


# ---- tril / triu --------------------------------------------------------------------------------

def _swap_last(a):
    return np.swapaxes(a, -1, -2) if isinstance(a, np.ndarray) else a.transpose(-1, -2)


def _expand_row(a):
    shape = (*a.shape[:-2], 5, a.shape[-1])
    row = a[..., :1, :]
    return np.broadcast_to(row, shape) if isinstance(row, np.ndarray) else row.expand(shape)


TRI_INPUTS = {
    "contiguous": lambda a: a,
    "transposed": _swap_last,
    "step_sliced": lambda a: a[..., ::2, 1::2],
    "offset": lambda a: a[..., 1:, 2:],
    "expanded": _expand_row,
}


@pytest.mark.parametrize("kind", sorted(TRI_INPUTS))
@pytest.mark.parametrize("shape", [(7, 9), (3, 6, 5), (2, 2, 1, 8)])
def test_tril_triu_match_numpy(device, rng, kind, shape):
    host = random_array(rng, shape)
    view = TRI_INPUTS[kind](cltensor.from_numpy(host, device=device))
    ref_in = TRI_INPUTS[kind](host)
    for k in (-2, 0, 1, 4):
        np.testing.assert_array_equal(cltensor.tril(view, k).numpy(), np.tril(ref_in, k))
        np.testing.assert_array_equal(view.triu(k).numpy(), np.triu(ref_in, k))


def test_tril_triu_dtypes_and_empty(device, rng):
    for dtype in (np.bool_, np.int32, np.int64):
        host = random_array(rng, (6, 4), dtype)
        x = cltensor.from_numpy(host, device=device)
        np.testing.assert_array_equal(cltensor.tril(x, -1).numpy(), np.tril(host, -1))
        np.testing.assert_array_equal(cltensor.triu(x, 2).numpy(), np.triu(host, 2))
    assert cltensor.tril(cltensor.zeros(0, 3, device=device)).shape == (0, 3)


def test_tril_triu_in_place_on_a_view(device, rng):
    host = random_array(rng, (8, 10))
    base = cltensor.from_numpy(host, device=device)
    view = base[1::2, ::3]
    assert view.tril_(1) is view
    expected = host.copy()
    expected[1::2, ::3] = np.tril(host[1::2, ::3], 1)
    np.testing.assert_array_equal(base.numpy(), expected)
    t = cltensor.from_numpy(host, device=device).t()
    t.triu_(-1)
    np.testing.assert_array_equal(t.numpy(), np.triu(host.T, -1))


def test_tril_triu_bad_input(device):
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        cltensor.tril(cltensor.ones(3, device=device))
    with pytest.raises(TypeError, match="diagonal must be an int"):
        cltensor.triu(cltensor.ones(3, 3, device=device), 1.0)
    with pytest.raises(RuntimeError, match="expanded view"):
        cltensor.ones(1, 3, device=device).expand(3, 3).tril_()
    with pytest.raises(TypeError, match="expected a tensor"):
        cltensor.tril(np.ones((2, 2)))


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(0, 9), cols=st.integers(0, 9), batch=st.integers(1, 3),
       k=st.integers(-10, 10), transpose=st.booleans(), lower=st.booleans())
def test_tri_property(rows, cols, batch, k, transpose, lower):
    host = np.arange(batch * rows * cols, dtype=np.float32).reshape(batch, rows, cols) + 1
    for device in DEVICES:
        x = cltensor.from_numpy(host, device=device)
        ref = host
        if transpose:
            x, ref = x.transpose(1, 2), host.transpose(0, 2, 1)
        got = (cltensor.tril if lower else cltensor.triu)(x, k).numpy()
        np.testing.assert_array_equal(got, (np.tril if lower else np.triu)(ref, k))


# ---- diag ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [-3, -1, 0, 2])
def test_diag_both_ways(device, rng, k):
    v = random_array(rng, (5,))
    np.testing.assert_array_equal(cltensor.diag(cltensor.from_numpy(v, device=device), k).numpy(),
                                  np.diag(v, k))
    m = random_array(rng, (4, 7))
    x = cltensor.from_numpy(m, device=device)
    np.testing.assert_array_equal(cltensor.diag(x, k).numpy(), np.diag(m, k))
    np.testing.assert_array_equal(x.t().diag(k).numpy(), np.diag(m.T, k))
    np.testing.assert_array_equal(x[::2, 1::2].diag(k).numpy(), np.diag(m[::2, 1::2], k))


def test_diag_edges_and_errors(device):
    assert cltensor.diag(cltensor.ones(3, 3, device=device), 5).shape == (0,)
    assert cltensor.diag(cltensor.ones(0, device=device)).shape == (0, 0)
    i = cltensor.diag(cltensor.tensor([1, 2], device=device))
    assert i.dtype == cltensor.int64 and i.tolist() == [[1, 0], [0, 2]]
    with pytest.raises(ValueError, match="1-D or 2-D"):
        cltensor.diag(cltensor.ones(2, 2, 2, device=device))
    with pytest.raises(TypeError, match="diagonal must be an int"):
        cltensor.diag(cltensor.ones(2, device=device), 0.5)
