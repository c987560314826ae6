"""Ranges and index-defined tensors with torch's names: arange, linspace, logspace, eye, tril,
triu, diag (kernels: cl_kernels/ranges.cl). Everything is computed on the device."""
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..creation import factory
from ..device import get_device
from ..program import ctype_of, get_kernel, launch, sizes_1d
from ..tensor import ClTensor
from . import elementwise as ew

__all__ = ["arange", "linspace", "logspace", "eye", "tril", "triu", "diag"]

KERNEL_FILE = "ranges.cl"


def _kernel(device, name, defines):
    return get_kernel(device, KERNEL_FILE, name, defines)


def _run(name, out, items, defines, *args):
    device = out.device
    launch(device, _kernel(device, name, defines), *sizes_1d(device, items), *args)
    return out


def _empty(n, dtype, device):
    return ClTensor.empty_on((n,), dtype, device)


def _float_at(device):
    """The float arithmetic type of index formulas: double where the device has it."""
    return dt.float64 if device.has_fp64 else dt.float32


# ---- argument checks --------------------------------------------------------------------------

def _real(x, name, op):
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        raise TypeError(f"{op}: {name} must be a real number, got {type(x).__name__}")
    if not math.isfinite(x):
        raise ValueError(f"{op}: {name} must be finite, got {x}")
    return x


def _count(x, name, op):
    if not isinstance(x, numbers.Integral) or isinstance(x, bool):
        raise TypeError(f"{op}: {name} must be an int, got {type(x).__name__}")
    if x < 0:
        raise ValueError(f"{op}: {name} must be non-negative, got {x}")
    return int(x)


def _numeric_dtype(dtype, default, op):
    d = dt.as_dtype(dtype) or default
    if d == dt.bool_:
        raise TypeError(f"{op}: dtype bool is not supported")
    return d


def _check_fits(values, dtype, op):
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        bad = [v for v in values if not info.min <= v <= info.max]
        if bad:
            raise ValueError(f"{op}: value {bad[0]} does not fit dtype {dtype}")


# ---- arange -----------------------------------------------------------------------------------

def _arange_length(start, end, step):
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise ValueError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    if all(isinstance(v, numbers.Integral) for v in (start, end, step)):
        return -((int(start) - int(end)) // int(step))
    return math.ceil((float(end) - float(start)) / float(step))


@factory
def arange(start=0, end=None, step=1, *, dtype=None, device=None):
    """Values start, start + step, ... below end (above it for a negative step).

    Integers give int64 and any float gives float32, unless dtype says otherwise; the length is
    ceil((end - start) / step).

    Example:
        cltensor.arange(5)              # tensor([0, 1, 2, 3, 4])
        cltensor.arange(1, 0, -0.25)    # tensor([1., 0.75, 0.5, 0.25])
    """
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        _real(v, name, "arange")
    floats = any(not isinstance(v, numbers.Integral) for v in (start, end, step))
    dtype = _numeric_dtype(dtype, dt.get_default_dtype() if floats else dt.int64, "arange")
    n = _arange_length(start, end, step)
    out = _empty(n, dtype, get_device(device))
    if dtype.kind in "iu":
        return _arange_int(out, start, step)
    at = _float_at(out.device)
    return _run("arange_fill", out, n, {"OUT_T": ctype_of(dtype), "AT": ctype_of(at)},
                np.int64(n), out.storage.buf, np.int64(0), at.type(start), at.type(step))


def _arange_int(out, start, step):
    """Integer dtypes count in int64 from start and step truncated to integers (as torch)."""
    istart, istep = int(start), int(step)
    if istep == 0:
        raise ValueError(f"arange: step {step} truncates to 0 for dtype {out.dtype}")
    n = out.numel()
    _check_fits([istart, istart + (n - 1) * istep] if n else [], out.dtype, "arange")
    return _run("arange_fill", out, n, {"OUT_T": ctype_of(out.dtype), "AT": "long"},
                np.int64(n), out.storage.buf, np.int64(0), np.int64(istart), np.int64(istep))


# ---- linspace / logspace ----------------------------------------------------------------------

def _linspace_args(start, end, steps, dtype, device, op):
    """(out, defines, start, end, step, halfway) with torch's arithmetic: floating dtypes compute
    in their own type, integer dtypes from integer endpoints in double."""
    _real(start, "start", op)
    _real(end, "end", op)
    steps = _count(steps, "steps", op)
    dtype = _numeric_dtype(dtype, dt.get_default_dtype(), op)
    out = _empty(steps, dtype, get_device(device))
    if dtype.kind in "iu":
        _check_fits([int(start), int(end)], dtype, op)
        at = _float_at(out.device)
        start, end = at.type(int(start)), at.type(int(end))
    else:
        at = dt.compute_dtype(dtype)  # float16 and bfloat16: float32, as torch's CPU kernels
        start, end = at.type(start), at.type(end)
    end = end if steps > 1 else start
    step = (end - start) / at.type(max(steps - 1, 1))
    defines = {"OUT_T": ctype_of(dtype), "AT": ctype_of(at), "PT": ctype_of(_float_at(out.device))}
    return out, defines, (start, end, at.type(step), np.int64(steps // 2))


@factory
def linspace(start, end, steps, *, dtype=None, device=None):
    """`steps` values evenly spaced from start to end, both included (float32 by default).

    Example:
        cltensor.linspace(0, 1, 5)   # tensor([0., 0.25, 0.5, 0.75, 1.])
    """
    out, defines, args = _linspace_args(start, end, steps, dtype, device, "linspace")
    return _run("linspace_fill", out, steps, defines, np.int64(steps), out.storage.buf,
                np.int64(0), *args)


@factory
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None):
    """base ** linspace(start, end, steps).

    Example:
        cltensor.logspace(0, 3, 4)   # tensor([1., 10., 100., 1000.])
    """
    _real(base, "base", "logspace")
    out, defines, args = _linspace_args(start, end, steps, dtype, device, "logspace")
    pt = _float_at(out.device)
    return _run("logspace_fill", out, steps, defines, np.int64(steps), out.storage.buf,
                np.int64(0), *args, pt.type(base))


# ---- eye, tril, triu, diag --------------------------------------------------------------------

@factory
def eye(n, m=None, *, dtype=None, device=None):
    """An n x m matrix (m defaults to n) with ones on the main diagonal.

    Example:
        cltensor.eye(2, 3)   # tensor([[1., 0., 0.], [0., 1., 0.]])
    """
    n = _count(n, "n", "eye")
    m = n if m is None else _count(m, "m", "eye")
    dtype = dt.as_dtype(dtype) or dt.get_default_dtype()
    out = ClTensor.empty_on((n, m), dtype, get_device(device))
    if n * m:
        _run("eye_fill", out, n * m, {"OUT_T": ctype_of(dtype)}, np.int64(n * m),
             out.storage.buf, np.int64(m))
    return out


def _tri_args(x, diagonal, op):
    if not ew.is_tensor(x):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"{op}: input tensor must have at least 2 dimensions, got {x.ndim}")
    if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
        raise TypeError(f"{op}: diagonal must be an int, got {type(diagonal).__name__}")
    return int(diagonal)


def _tri_fill(out, x, diagonal, lower, op):
    """out = x with the elements outside the triangle zeroed (out may be x itself)."""
    n = out.numel()
    if n == 0:
        return out
    strides = [list(out.strides), ew.broadcast_strides(x, out.shape)]
    shape, (so, sx) = ew.collapse(out.shape, strides)
    if len(shape) > ew.MAX_DIMS:
        raise ValueError(f"{op}: at most {ew.MAX_DIMS} non-mergeable dims, got {len(shape)}")
    rows, cols = out.shape[-2:]
    return _run("tri_fill", out, n, {"OUT_T": ctype_of(out.dtype)}, np.int64(n),
                np.int32(len(shape)), ew.shape_arg(shape), out.storage.buf,
                ew.view_arg(out.offset, so),
                x.storage.buf, ew.view_arg(x.offset, sx), np.int64(rows), np.int64(cols),
                np.int64(diagonal), np.int32(lower))


def tril(x, diagonal=0):
    """The lower triangle of the last two dims (col - row <= diagonal kept, the rest 0).

    Example:
        cltensor.tril(cltensor.ones(3, 3))   # ones on and below the diagonal
    """
    diagonal = _tri_args(x, diagonal, "tril")
    out = ClTensor.empty_on(x.shape, x.dtype, x.device)
    return _tri_fill(out, x, diagonal, True, "tril")


def triu(x, diagonal=0):
    """The upper triangle of the last two dims (col - row >= diagonal kept, the rest 0).

    Example:
        cltensor.triu(cltensor.ones(3, 3), 1)   # ones strictly above the diagonal
    """
    diagonal = _tri_args(x, diagonal, "triu")
    out = ClTensor.empty_on(x.shape, x.dtype, x.device)
    return _tri_fill(out, x, diagonal, False, "triu")


def tril_(x, diagonal=0):
    diagonal = _tri_args(x, diagonal, "tril_")
    ew.check_writable(x, "tril_")
    return _tri_fill(x, x, diagonal, True, "tril_")


def triu_(x, diagonal=0):
    diagonal = _tri_args(x, diagonal, "triu_")
    ew.check_writable(x, "triu_")
    return _tri_fill(x, x, diagonal, False, "triu_")


def diag(x, diagonal=0):
    """A 1-D tensor gives a square matrix with it on diagonal `diagonal`; a 2-D tensor gives
    (a copy of) that diagonal.

    Example:
        cltensor.diag(cltensor.tensor([1, 2]))   # tensor([[1, 0], [0, 2]])
    """
    if not ew.is_tensor(x):
        raise TypeError(f"diag: expected a tensor, got {type(x).__name__}")
    if not isinstance(diagonal, numbers.Integral) or isinstance(diagonal, bool):
        raise TypeError(f"diag: diagonal must be an int, got {type(diagonal).__name__}")
    if x.ndim == 2:
        return x.diagonal(int(diagonal)).clone()
    if x.ndim != 1:
        raise ValueError(f"diag: expected a 1-D or 2-D tensor, got {x.ndim}-D")
    n = x.shape[0] + abs(int(diagonal))
    out = ClTensor.empty_on((n, n), x.dtype, x.device).fill_(0)
    out.diagonal(int(diagonal)).copy_(x)
    return out


TENSOR_METHODS = {"tril": tril, "triu": triu, "tril_": tril_, "triu_": triu_, "diag": diag}
