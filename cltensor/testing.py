"""Helpers for testing cltensor against numpy references."""
import numpy as np

from . import autograd
from . import dtypes as dt
from .creation import from_numpy

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


def gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4, seed=0):
    """Check fn's analytical gradients against central finite differences, in float64.

    `inputs` are float64 tensors requiring grad (small: every element is perturbed twice).
    A random output gradient v is used: the analytical J^T v from backward must match the
    numerical (f(x + eps e_i) - f(x - eps e_i)) / (2 eps) . v for every element i.
    Raises AssertionError naming the input and the worst element (a NaN on either side
    counts as a mismatch); returns True otherwise.
    """
    rng = np.random.default_rng(seed)
    out = fn(*inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    vs = [rng.standard_normal(o.shape) for o in outs]
    vts = [from_numpy(v, device=o.device, dtype=o.dtype) for v, o in zip(vs, outs)]
    grads = autograd.grad(outs, inputs, vts, allow_unused=True)

    def scalar(vals):
        with autograd.no_grad():
            res = fn(*vals)
        res = res if isinstance(res, (tuple, list)) else (res,)
        return sum(float((r.numpy().astype(np.float64) * v).sum()) for r, v in zip(res, vs))

    for k, x in enumerate(inputs):
        base = x.numpy().astype(np.float64)
        num = np.zeros(base.size)
        for i in range(base.size):
            vals = list(inputs)
            for sign, slot in ((1, 0), (-1, 1)):
                pert = base.copy().ravel()
                pert[i] += sign * eps
                vals[k] = from_numpy(pert.reshape(base.shape), device=x.device, dtype=x.dtype)
                if slot == 0:
                    plus = scalar(vals)
                else:
                    minus = scalar(vals)
            num[i] = (plus - minus) / (2 * eps)
        ana = np.zeros(base.size) if grads[k] is None else grads[k].numpy().astype(np.float64).ravel()
        err = np.abs(ana - num)
        bad = ~(err <= atol + rtol * np.abs(num))  # NOTE: a NaN on either side fails too
        if bad.any():
            i = int(np.argmax(err - (atol + rtol * np.abs(num))))
            raise AssertionError(f"gradcheck: input {k}, element {i}: analytical {ana[i]!r} "
                                 f"vs numerical {num[i]!r} ({int(bad.sum())} of {base.size} differ)")
    return True
