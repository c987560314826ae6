"""Helpers for testing cltensor against numpy references."""
import numpy as np

from . import dtypes as dt

# Default tolerances for comparing against a float64 reference.
TOLERANCES = {dt.float32: (1e-5, 1e-6), dt.float64: (1e-12, 1e-14)}


def to_numpy(x):
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def assert_close(actual, expected, rtol=None, atol=None, dtype=None, check_dtype=True):
    """Compare a tensor with a reference: exact for integer and bool, and for floats
    |a - e| <= atol + rtol * |e| elementwise, with NaNs required in the same places.

    Shapes must match; with check_dtype the tensor's dtype must equal `dtype` (when given).
    """
    a = to_numpy(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    if check_dtype and dtype is not None:
        assert a.dtype == np.dtype(dtype), f"dtype {a.dtype} != expected {np.dtype(dtype)}"
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e)
        return
    d_rtol, d_atol = TOLERANCES.get(np.dtype(a.dtype), (1e-5, 1e-6))
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


def rel_error(actual, expected):
    """Norm-relative error ||a - e|| / ||e|| in float64."""
    a = to_numpy(actual).astype(np.float64)
    e = np.asarray(expected, dtype=np.float64)
    return float(np.linalg.norm((a - e).ravel()) / max(np.linalg.norm(e.ravel()), 1e-300))


def random_array(rng, shape, dtype=np.float32, low=-2.0, high=2.0):
    """Random data of a dtype (never all zeros): uniform floats, small ints, or random bools."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(size=shape) < 0.5
    return rng.integers(int(low) * 5 - 1, int(high) * 5 + 2, size=shape).astype(dtype)
