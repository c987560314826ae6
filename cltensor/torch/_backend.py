"""The "opencl" PrivateUse1 device: wrapper tensors that carry a ClTensor, dtype maps, device
indices and the table of aten kernels registered for it."""
import contextlib
import threading

import torch

from .. import device as cl_device
from .. import dtypes as dt
from ..tensor import ClTensor
from . import dlpack_device

NAME = "opencl"
_META = torch._C.DispatchKeySet(torch._C.DispatchKey.Meta)
_SET_ = torch.ops.aten.set_.source_Storage_storage_offset
_AS_STRIDED_ = torch.ops.aten.as_strided_.default

# torch dtype -> cltensor's (float16 and bfloat16 stored in 16 bits, computed in float32)
TO_NUMPY = {torch.float32: dt.float32, torch.float64: dt.float64, torch.int32: dt.int32,
            torch.int64: dt.int64, torch.bool: dt.bool_, torch.float16: dt.float16,
            torch.bfloat16: dt.bfloat16}
TO_TORCH = {v: k for k, v in TO_NUMPY.items()}

# aten overload name -> the Python kernel registered for PrivateUse1
KERNELS = {}
_LIB = torch.library.Library("aten", "IMPL")


def aten(*names):
    """Register the decorated function as the "opencl" kernel of each aten overload named; it
    runs with its first opencl operand's device as the current one (torch's device guard)."""
    def register(fn):
        for name in names:
            _LIB.impl(name, _guarded(fn, name), "PrivateUse1")
            KERNELS[name] = fn
        return fn
    return register


_CALLED = []  # sets of the overloads that ran, one per active traced()


@contextlib.contextmanager
def traced():
    """Within the block, the set it yields collects the overloads whose kernels ran."""
    seen = set()
    _CALLED.append(seen)
    try:
        yield seen
    finally:
        _CALLED.remove(seen)


_PENDING = []  # at most one deferred launch (lazy_relu): settled before the next kernel runs


def defer(work):
    """Hold `work` (with .holds(storage) and .settle(name, args) -> result or None) until the next
    kernel or read of the storage it writes; a previous one is settled first."""
    settle_pending()
    _PENDING.append(work)


def settle_pending(name=None, args=()):
    """Run the deferred launch before kernel `name` on args: the kernel's result when the launch
    computes it as well (a fused ReLU), else None."""
    return _PENDING.pop().settle(name, args) if _PENDING else None


def _guarded(fn, name):
    def kernel(*args, **kwargs):
        global _current
        if _CALLED:
            _CALLED[-1].add(name)
        # NOTE: with one OpenCL device every opencl tensor is on opencl:0, the current device
        index = _first_index(args) if _several_devices() else None
        previous = _current
        try:
            if index is not None:
                _current = index
            if _PENDING:
                done = settle_pending(name, args)
                if done is not None:
                    return done
            return fn(*args, **kwargs)
        except Exception as e:
            named = _naming(e, name)
            if named is e:
                raise
            raise named from e
        finally:
            _current = previous
    return kernel


_SEVERAL = []  # [whether OpenCL has more than one device], found at the first kernel


def _several_devices():
    if not _SEVERAL:
        _SEVERAL.append(len(cl_device.all_devices()) > 1)
    return _SEVERAL[0]


def _naming(error, name):
    """error, its message naming aten::name unless it already does (torch's own checks,
    raised by the Meta kernels, name what they check)."""
    if f"aten::{name.split('.')[0]}" in str(error) or "on the opencl device: " in str(error):
        return error  # named already (by torch, or by the kernel of an op this one ran)
    try:
        return type(error)(f"aten::{name} on the opencl device: {error}")
    except Exception:  # an exception type whose constructor wants other arguments
        error.add_note(f"raised in the opencl kernel of aten::{name}")
        return error


def _first_index(args):
    """The device index of the first opencl tensor among args (or in a leading list)."""
    for a in args:
        if a.__class__ is list or a.__class__ is tuple:
            if not a:
                continue
            a = a[0]
        if isinstance(a, torch.Tensor):
            device = a.device
            if device.type == NAME:
                return device.index
    return None


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
_ORDER = []  # [default device, the order it gives]


def ordered_devices():
    """cltensor's devices in torch's index order: the default device (CLTENSOR_DEVICE or the one
    cltensor picks) is opencl:0, the others follow in cltensor's order."""
    first = cl_device.default_device()
    if not _ORDER or _ORDER[0] is not first:
        _ORDER[:] = [first, [first] + [d for d in cl_device.all_devices() if d is not first]]
    return _ORDER[1]


def index_of(device):
    """torch's index of a cltensor Device."""
    for i, d in enumerate(ordered_devices()):
        if d is device:
            return i
    raise RuntimeError(f"opencl: {device.name} is not among the devices torch sees")


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
    """The cltensor Device for a torch device (None, or no index: the current one)."""
    index = _current if device is None or device.index is None else device.index
    return ordered_devices()[check_index(index)]


# ---- wrapper tensors ---------------------------------------------------------------------------
# NOTE: the device buffer hangs on torch's storage object, which torch keeps alive as long as its
# storage is: every tensor sharing it (views, autograd's saved shallow copies) finds it there.
def wrap(cl):
    """A torch tensor on "opencl" whose sizes, strides and storage offset are cl's."""
    if cl.__class__ is not ClTensor and not isinstance(cl, ClTensor):
        raise TypeError(f"opencl: expected a ClTensor, got {type(cl).__name__}")
    device = cl.device
    if device is cl_device.default_device() or index_of(device) == 0:  # opencl:0
        return restride(torch._C._acc.create_empty_tensor(cl.shape, TO_TORCH[cl.dtype]), cl)
    return restride(_indexed_placeholder(TO_TORCH[cl.dtype], index_of(device)), cl)


def _indexed_placeholder(dtype, index):
    """A tensor on opencl:<index>. torch's Python backend makes every tensor on index 0 and
    refuses to give it storage of another index; DLPack's extension-device tensors carry any
    index. Its data pointer is never read (kernels find the buffer on the storage object), and
    its span is large so that restride never has to grow the storage."""
    return dlpack_device.placeholder(dtype, index)


def restride(t, cl):
    """Make wrapper t (and every tensor sharing its storage) use cl's buffer; t takes cl's sizes,
    strides and offset."""
    if t.stride() != cl.strides or t.shape != cl.shape or t.storage_offset() != cl.offset:
        if t.untyped_storage().resizable():
            _SET_.redispatch(_META, t, t.untyped_storage(), cl.offset, list(cl.shape),
                             list(cl.strides))
        else:  # an indexed placeholder's storage: large enough for any geometry, and fixed
            _AS_STRIDED_.redispatch(_META, t, list(cl.shape), list(cl.strides), cl.offset)
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
    dtype = TO_NUMPY.get(t.dtype) or np_dtype(t.dtype, "opencl")  # zero-element: any dtype
    storage = getattr(t.untyped_storage(), "_cl_storage", None)
    if _PENDING and _PENDING[0].holds(storage):
        settle_pending()
    if getattr(storage, "fill_on_read", None) is not None:
        _fill(storage)
    if storage is None:
        raise RuntimeError(f"opencl: a tensor on {t.device} carries no device data (was it made "
                           f"outside cltensor.torch?)")
    return ClTensor(storage, t.shape, t.stride(), t.storage_offset(), dtype)


def fill_on_read(t, fill):
    """Leave ClTensor t's values unwritten until something reads or writes its buffer through
    unwrap, which first calls fill(storage); returns t."""
    t.storage.fill_on_read = fill
    return t


_FILL_LOCK = threading.Lock()


def _fill(storage):
    """storage's pending fill, enqueued once: another thread's unwrap waits for it, so that its
    own launches follow the fill's on the device's queue."""
    with _FILL_LOCK:
        fill = storage.fill_on_read
        if fill is not None:
            fill(storage)
            storage.fill_on_read = None


def is_opencl(t):
    return isinstance(t, torch.Tensor) and t.device.type == NAME


def meta_view(op, t, *args):
    """Run view op `op` on the wrapper's metadata with torch's own Meta kernel (its checks and its
    strides); the result shares t's storage, hence its device buffer."""
    return op.redispatch(_META, t, *args)
