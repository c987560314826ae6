"""The "opencl" PrivateUse1 device: wrapper tensors that carry a ClTensor, dtype maps, device
indices and the table of aten kernels registered for it."""
import numpy as np
import torch

from .. import device as cl_device
from ..tensor import ClTensor

NAME = "opencl"
_META = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_SET_ = torch.ops.aten.set_.source_Storage_storage_offset

TO_NUMPY = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64),
            torch.int32: np.dtype(np.int32), torch.int64: np.dtype(np.int64),
            torch.bool: np.dtype(np.bool_)}
TO_TORCH = {v: k for k, v in TO_NUMPY.items()}

# aten overload name -> the Python kernel registered for PrivateUse1
KERNELS = {}
_LIB = torch.library.Library("aten", "IMPL")


def aten(*names):
    """Register the decorated function as the "opencl" kernel of each aten overload named."""
    def register(fn):
        for name in names:
            _LIB.impl(name, fn, "PrivateUse1")
            KERNELS[name] = fn
        return fn
    return register


def np_dtype(dtype, op):
    """cltensor's dtype for a torch dtype, or a TypeError naming the op and the dtype."""
    if dtype is None:
        dtype = torch.get_default_dtype()
    try:
        return TO_NUMPY[dtype]
    except KeyError:
        names = ", ".join(str(d) for d in TO_NUMPY)
        raise TypeError(f"{op}: dtype {dtype} is not supported on the opencl device "
                        f"(supported: {names})") from None


# ---- device indices --------------------------------------------------------------------------
def ordered_devices():
    """cltensor's devices in torch's index order: the default device (CLTENSOR_DEVICE or the one
    cltensor picks) is opencl:0, the others follow in cltensor's order."""
    first = cl_device.default_device()
    return [first] + [d for d in cl_device.all_devices() if d is not first]


_current = 0


def current_index():
    return _current


def set_current_index(index):
    global _current
    _current = check_index(index)


def check_index(index):
    n = len(ordered_devices())
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
        raise RuntimeError(f"opencl: invalid device index {index!r}; {n} device(s) present")
    return index


def cl_device_for(device, op):
    """The cltensor Device for a torch device (None: the current one). torch's Python backend
    labels every tensor opencl:0, so only index 0 can hold tensors."""
    index = _current if device is None or device.index is None else device.index
    check_index(index)
    if index != 0:
        raise NotImplementedError(f"{op}: tensors can live on opencl:0 only; torch's Python "
                                  f"backend API labels every tensor with index 0")
    return ordered_devices()[index]


# ---- wrapper tensors ---------------------------------------------------------------------------
# NOTE: the device buffer hangs on torch's storage object, which torch keeps alive as long as its
# storage is: every tensor sharing it (views, autograd's saved shallow copies) finds it there.
def wrap(cl):
    """A torch tensor on "opencl" whose sizes, strides and storage offset are cl's."""
    if not isinstance(cl, ClTensor):
        raise TypeError(f"opencl: expected a ClTensor, got {type(cl).__name__}")
    return restride(torch._C._acc.create_empty_tensor(list(cl.shape), TO_TORCH[cl.dtype]), cl)


def restride(t, cl):
    """Make wrapper t (and every tensor sharing its storage) use cl's buffer; t takes cl's sizes,
    strides and offset."""
    if tuple(t.shape) != cl.shape or tuple(t.stride()) != cl.strides or t.storage_offset() != cl.offset:
        _SET_.redispatch(_META, t, t.untyped_storage(), cl.offset, list(cl.shape), list(cl.strides))
    t.untyped_storage()._cl_storage = cl.storage
    return t


def empty_wrapper(shape, dtype):
    """A zero-element opencl tensor of any dtype: torch passes such placeholders between ops
    (batch_norm's uint8 reserve); having no elements, it needs no device buffer."""
    if 0 not in tuple(shape):
        raise TypeError(f"opencl: dtype {dtype} is not supported on the opencl device")
    return torch._C._acc.create_empty_tensor(list(shape), dtype)


def unwrap(t):
    """The ClTensor view that an "opencl" torch tensor describes."""
    dtype = np_dtype(t.dtype, "opencl")  # a zero-element placeholder may have any dtype
    storage = getattr(t.untyped_storage(), "_cl_storage", None)
    if storage is None:
        raise RuntimeError(f"opencl: a tensor on {t.device} carries no device data (was it made "
                           f"outside cltensor.torch?)")
    return ClTensor(storage, tuple(t.shape), tuple(t.stride()), t.storage_offset(), dtype)


def is_opencl(t):
    return isinstance(t, torch.Tensor) and t.device.type == NAME


def meta_view(op, t, *args):
    """Run view op `op` on the wrapper's metadata with torch's own Meta kernel (its checks and its
    strides); the result shares t's storage, hence its device buffer."""
    return op.redispatch(_META, t, *args)
