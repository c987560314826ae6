"""Creating tensors: from Python data and numpy, and filled with a value."""
from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyopencl as cl

from . import dtypes as dt
from .device import DeviceLike, get_device
from .size import Size
from .tensor import CHANNELS_LAST, CONTIGUOUS_FORMAT, ClTensor, _size_args

# a dtype as the creation functions take it: cltensor.float32 (a numpy dtype), a numpy type, the
# Python types float, int and bool, or a name such as "float64"; None picks the default
DTypeLike = dt.DType | np.dtype | type | str | None
# a shape: ints, or one sequence of ints
SizeLike = int | Sequence[int]
PRESERVE_FORMAT = "preserve_format"  # the *_like functions' default memory_format, as torch's

__all__ = ["tensor", "as_tensor", "from_numpy", "from_bfloat16_bits", "from_dlpack", "empty",
           "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"] + \
    [d.tensor_type for d in dt.DTYPES]


def factory(fn: Callable[..., ClTensor]) -> Callable[..., ClTensor]:
    """fn with torch's keyword requires_grad=False: True makes the new tensor a leaf that
    requires grad (a floating dtype only, else TypeError)."""
    @functools.wraps(fn)
    def make(*args: Any, requires_grad: bool = False, **kwargs: Any) -> ClTensor:
        out = fn(*args, **kwargs)
        return out.requires_grad_() if requires_grad else out
    return make


def _host_array(data, op):
    """data as a numpy array, with a clear error for ragged or non-numeric input."""
    if isinstance(data, np.ndarray):
        return _native(data, op)
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(f"{op}: ragged nested sequence (every row must have the same length): {e}") from None
    if arr.dtype == object or (arr.dtype.kind not in "biuf" and arr.dtype != dt.bfloat16):
        raise TypeError(f"{op}: cannot make a tensor from {type(data).__name__} "
                        f"(numpy sees dtype {arr.dtype})")
    return arr


def _default_dtype(arr, from_python):
    """torch.tensor's inference: Python floats give the default dtype, ints int64; numpy keeps
    its dtype where cltensor has it, wider unsigned integers become int64."""
    if from_python and arr.dtype.kind in "fiu":
        return dt.get_default_dtype() if arr.dtype.kind == "f" else dt.int64
    if arr.dtype.kind in "iu" and arr.dtype not in dt.DTYPES:
        return dt.int64
    return arr.dtype


def from_numpy(array: np.ndarray, device: DeviceLike = None, dtype: DTypeLike = None) -> ClTensor:
    """Copy a numpy array to the device (keeping its dtype unless `dtype` is given)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy array, got {type(array).__name__}")
    array = _native(array, "from_numpy")
    target = dt.as_dtype(dtype) or dt.as_dtype(_default_dtype(array, False))
    _check_fits(array, target, "from_numpy")
    host = np.asarray(dt.to_storage(array, target), order="C")
    out = ClTensor.empty_on(host.shape, target, get_device(device))
    if host.size:
        out.device.enqueue(cl.enqueue_copy, out.storage.buf, host, is_blocking=False).wait()
    return out


def from_bfloat16_bits(array: np.ndarray, device: DeviceLike = None) -> ClTensor:
    """A bfloat16 tensor from a numpy uint16 array of bfloat16 bit patterns (the upper 16 bits of
    float32 values). Without the ml_dtypes package numpy has no bfloat16: t.numpy() returns a
    float32 copy, and cltensor.dtypes.bf16_bits(t.numpy()) its bit patterns."""
    if not isinstance(array, np.ndarray) or array.dtype != np.uint16:
        raise TypeError(f"from_bfloat16_bits: expected a numpy uint16 array, got "
                        f"{getattr(array, 'dtype', type(array).__name__)}")
    host = np.asarray(array, order="C")
    out = ClTensor.empty_on(host.shape, dt.bfloat16, get_device(device))
    if host.size:
        out.device.enqueue(cl.enqueue_copy, out.storage.buf, host, is_blocking=False).wait()
    return out


def from_dlpack(ext_tensor: Any, *, device: DeviceLike = None, copy: bool | None = None) -> ClTensor:
    """A tensor from any object with __dlpack__ in host memory (a numpy array, a torch CPU
    tensor, ...), copied to `device` (default: the device "cpu" names). A ClTensor is returned
    as it is (moved if `device` differs, copied if copy=True)."""
    if isinstance(ext_tensor, ClTensor):
        return ext_tensor.to(device or ext_tensor.device, copy=bool(copy))
    if copy is False:
        raise ValueError("from_dlpack: copy=False cannot be honoured: the data is copied into "
                         "an OpenCL buffer")
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ (a numpy array, a "
                        f"torch tensor, ...), got {type(ext_tensor).__name__}")
    try:
        array = np.from_dlpack(ext_tensor)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        raise BufferError(f"from_dlpack: cannot read {type(ext_tensor).__name__} through "
                          f"DLPack on the host (cltensor reads host memory only, e.g. a CPU "
                          f"tensor): {e}") from None
    return from_numpy(array, device=get_device(device or "cpu"))


def _native(array, op):
    """array in native byte order; TypeError naming a dtype that is not bool, integer or float
    (complex, datetime, timedelta, object, strings, void)."""
    if array.dtype.kind not in "biuf" and array.dtype != dt.bfloat16:  # ml_dtypes' bfloat16
        raise TypeError(f"{op}: unsupported numpy dtype {array.dtype}; cltensor takes bool, "
                        f"integer and floating-point arrays")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _check_fits(array, target, op):
    """OverflowError when an integer or float array holds values outside the integer dtype
    `target` (numpy's cast would wrap them, e.g. uint64 2**63 to a negative int64, or give
    garbage); ValueError for NaN and infinities."""
    if array.dtype.kind not in "iuf" or target.kind not in "iu" or not array.size or \
            np.can_cast(array.dtype, target, "safe"):  # every value fits: no pass over the data
        return
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ValueError(f"{op}: NaN or infinity cannot be converted to {target}")
    info = np.iinfo(target)
    lo, hi = int(array.min()), int(array.max())
    if lo < info.min or hi > info.max:
        bad = hi if hi > info.max else lo
        raise OverflowError(f"{op}: value {bad} does not fit in {target} (range {info.min} .. "
                            f"{info.max}); convert it explicitly if wrapping is intended")


@factory
def tensor(data: Any, dtype: DTypeLike = None, device: DeviceLike = None) -> ClTensor:
    """A new tensor holding a copy of `data` (nested lists, numbers, numpy arrays or a tensor).

    As in torch, the creation functions (this one, zeros, ones, full, empty, the *_like ones,
    rand, randn, arange, linspace, eye, ...) take the keyword requires_grad (default False):
    True makes the result a leaf that requires grad; from_numpy and as_tensor do not.

    Example:
        x = cltensor.tensor([[1.0, 2.0], [3.0, 4.0]])   # float32, on the default device
        w = cltensor.tensor([0.5, -1.0], requires_grad=True)
    """
    if isinstance(data, ClTensor):
        out = data.to(device=device or data.device, dtype=dtype, copy=True)
    else:
        from_python = not isinstance(data, np.ndarray)
        arr = _host_array(data, "tensor")
        target = dt.as_dtype(dtype) or _default_dtype(arr, from_python)
        out = from_numpy(arr, device=device, dtype=target)
    return out


def as_tensor(data: Any, dtype: DTypeLike = None, device: DeviceLike = None) -> ClTensor:
    if isinstance(data, ClTensor):
        return data.to(device=device or data.device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)


@factory
def empty(*size: SizeLike, dtype: DTypeLike = None, device: DeviceLike = None,
          memory_format: str = "contiguous_format") -> ClTensor:
    return ClTensor.empty_on(_size_args(size, "empty"), dt.as_dtype(dtype) or dt.get_default_dtype(),
                            get_device(device), memory_format)


@factory
def full(size: SizeLike, fill_value: float | int | bool, dtype: DTypeLike = None,
         device: DeviceLike = None) -> ClTensor:
    if not isinstance(fill_value, (numbers.Number, np.bool_)):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    size = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    return empty(size, dtype=dtype or dt.scalar_dtype(fill_value), device=device).fill_(fill_value)


@factory
def zeros(*size: SizeLike, dtype: DTypeLike = None, device: DeviceLike = None) -> ClTensor:
    return full(_size_args(size, "zeros"), 0, dtype=dtype or dt.get_default_dtype(), device=device)


@factory
def ones(*size: SizeLike, dtype: DTypeLike = None, device: DeviceLike = None) -> ClTensor:
    return full(_size_args(size, "ones"), 1, dtype=dtype or dt.get_default_dtype(), device=device)


def _like(x, dtype, device, memory_format):
    """A new tensor of x's shape, dtype and device unless given, laid out by memory_format:
    "preserve_format" (torch's default: x's strides where x is dense, else channels_last or
    contiguous as x's strides suggest), "contiguous_format" or "channels_last"."""
    dtype, device = dt.as_dtype(dtype) or x.dtype, get_device(device or x.device)
    if memory_format not in (PRESERVE_FORMAT, CONTIGUOUS_FORMAT, CHANNELS_LAST):
        raise ValueError(f"memory_format must be 'preserve_format', 'contiguous_format' or "
                         f"'channels_last', got {memory_format!r}")
    if memory_format == CHANNELS_LAST and x.ndim != 4:
        raise ValueError(f"channels_last needs a 4-d tensor, got shape {tuple(x.shape)}")
    if memory_format != PRESERVE_FORMAT:
        return ClTensor.empty_on(x.shape, dtype, device, memory_format)
    return x._new_like(dtype, device)


@factory
def empty_like(x: ClTensor, dtype: DTypeLike = None, device: DeviceLike = None,
               memory_format: str = PRESERVE_FORMAT) -> ClTensor:
    """An uninitialized tensor of x's shape (and dtype and device unless given), as torch's.

    Args:
        memory_format: "preserve_format" (x's strides where x is dense and non-overlapping,
            else channels_last where x's strides run so, else contiguous), "contiguous_format"
            or "channels_last" (4-d). zeros_like, ones_like, full_like, rand_like, randn_like
            and randint_like take it too.

    Example:
        >>> x = cltensor.randn(2, 3, 4, 4).contiguous(memory_format=cltensor.channels_last)
        >>> cltensor.zeros_like(x).is_contiguous(cltensor.channels_last)
        True
    """
    return _like(x, dtype, device, memory_format)


@factory
def zeros_like(x: ClTensor, dtype: DTypeLike = None, device: DeviceLike = None,
               memory_format: str = PRESERVE_FORMAT) -> ClTensor:
    return _like(x, dtype, device, memory_format).fill_(0)


@factory
def ones_like(x: ClTensor, dtype: DTypeLike = None, device: DeviceLike = None,
              memory_format: str = PRESERVE_FORMAT) -> ClTensor:
    return _like(x, dtype, device, memory_format).fill_(1)


@factory
def full_like(x: ClTensor, fill_value: float | int | bool, dtype: DTypeLike = None,
              device: DeviceLike = None, memory_format: str = PRESERVE_FORMAT) -> ClTensor:
    if not isinstance(fill_value, (numbers.Number, np.bool_)):
        raise TypeError(f"full_like: fill_value must be a number, got {type(fill_value).__name__}")
    return _like(x, dtype, device, memory_format).fill_(fill_value)


class _TensorType(type):
    """torch's legacy tensor types: FloatTensor(data) or FloatTensor(*sizes) makes a tensor of
    that dtype, and isinstance(x, FloatTensor) checks a tensor's dtype."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, ClTensor) and obj.dtype is cls.dtype

    def __call__(cls, *args: Any, device: DeviceLike = None) -> ClTensor:
        if _are_sizes(args):
            return empty(*(args or (0,)), dtype=cls.dtype, device=device)
        if len(args) == 1:
            return tensor(args[0], dtype=cls.dtype, device=device)
        raise TypeError(f"{cls.__name__}: expected sizes (ints) or one sequence of data, got "
                        f"{', '.join(type(a).__name__ for a in args)}")

    def __repr__(cls):
        return f"<class 'cltensor.{cls.__name__}'>"


def _are_sizes(args):
    """FloatTensor(), FloatTensor(2, 3) and FloatTensor(x.shape) take sizes; a sequence, data."""
    if len(args) == 1 and isinstance(args[0], Size):
        return True
    return all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args)


for _d in dt.DTYPES:
    globals()[_d.tensor_type] = _TensorType(_d.tensor_type, (), {"dtype": _d, "__module__": "cltensor"})
del _d
