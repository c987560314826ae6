"""ClTensor: an N-d view (shape, strides, offset, dtype) over a device Storage."""
from __future__ import annotations

import builtins
import math
import numbers
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyopencl as cl

from . import dtypes as dt
from .device import Device, Storage, TorchDevice, get_device
from .hooks import RemovableHandle
from .operators import Scalar, TensorOperators
from .dtypes import DType
from .size import Size
# the shape helpers that ops import from here (contiguous_strides, _norm_dim, _size_args) live
# in shapes.py
from .shapes import (_contiguous_strides, _infer_shape, _is_basic_key,  # noqa: F401
                     _is_channels_last, _is_contiguous, _norm_dim, _size_args, _size_args_view,
                     _view_strides, channels_last_strides, contiguous_strides, preserved_strides)

# what the hints name: a dtype as dt.as_dtype takes it (np.dtype, "float32", torch's dtypes,
# float, ...), a device as get_device takes it ("cpu", "cuda:1", an index, a Device)
DTypeLike = Any
DeviceLike = Any

CHANNELS_LAST = "channels_last"
CONTIGUOUS_FORMAT = "contiguous_format"
# numpy() writes one byte per page of host arrays from this size on before the driver copies
# into them: PoCL's copy into a fresh (unfaulted) array ran 2.5-7x slower (docs/performance.md)
PREFAULT_MIN_BYTES = 2**26
PAGE_BYTES = 4096


def _check_callable(hook, op):
    if not callable(hook):
        raise TypeError(f"{op}: expected a callable hook, got {type(hook).__name__}")


class ClTensor(TensorOperators):
    """A tensor on an OpenCL device.

    Storage is a pooled device buffer shared by every view of it; `offset` and `strides` are in
    elements. Create tensors with cltensor.tensor, zeros, ones, rand, ... rather than directly.

    Its surface: the methods written here (none of which calls an op), Python's operators
    (operators.py), and every other method, declared name -> module in cltensor/methods.py
    and installed from the layer that owns it (x.sum: ops/reduce.py's TENSOR_METHODS,
    installed and wrapped by autograd in autograd/namespace.py).
    """

    __array_priority__ = 1000  # numpy scalars defer to our reflected operators
    # autograd state (cltensor/autograd); plain tensors keep these class defaults
    requires_grad = False
    grad = None
    grad_fn = None
    _output_nr = 0

    def __init__(self, storage, shape, strides, offset, dtype):
        self.storage = storage
        self.shape = shape if shape.__class__ is Size else Size(shape)
        self.strides = tuple(strides)
        self.offset = offset
        self.dtype = dtype if dtype.__class__ is DType else dt.as_dtype(dtype)

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def empty_on(cls, shape: Sequence[builtins.int], dtype: DTypeLike, device: Device,
                 memory_format: str = CONTIGUOUS_FORMAT) -> ClTensor:
        if dtype.__class__ is not dt.DType:
            dtype = dt.as_dtype(dtype)
        if dtype is dt.float64 and not device.has_fp64:
            raise TypeError(f"float64 is not supported on {device}: it lacks cl_khr_fp64")
        shape = tuple(shape)
        storage = Storage(device, math.prod(shape) * dtype.itemsize)
        if memory_format == CHANNELS_LAST:
            strides = channels_last_strides(shape)
        else:
            strides = _contiguous_strides(shape)
        return cls(storage, shape, strides, 0, dtype)

    def _new_like(self, dtype: DTypeLike = None, device: Device | None = None) -> ClTensor:
        """A new tensor of this shape in torch's preserve_format layout (these strides where
        this tensor is dense, else channels_last or contiguous as its strides suggest)."""
        dtype = dt.as_dtype(dtype) or self.dtype
        out = ClTensor.empty_on(self.shape, dtype, device or self.device)
        return ClTensor(out.storage, self.shape, preserved_strides(self.shape, self.strides), 0,
                        dtype)

    def _view(self, shape, strides, offset=None):
        return ClTensor(self.storage, shape, strides, self.offset if offset is None else offset,
                        self.dtype)

    # ---- properties ---------------------------------------------------------------------------
    @property
    def device(self) -> Device:
        return self.storage.device

    @property
    def ndim(self) -> builtins.int:
        return len(self.shape)

    def dim(self) -> builtins.int:
        return len(self.shape)

    def numel(self) -> builtins.int:
        return math.prod(self.shape)

    def size(self, dim: builtins.int | None = None) -> tuple[builtins.int, ...] | builtins.int:
        return self.shape if dim is None else self.shape[_norm_dim(dim, self.ndim, "size")]

    def stride(self, dim: builtins.int | None = None) -> tuple[builtins.int, ...] | builtins.int:
        return self.strides if dim is None else self.strides[_norm_dim(dim, self.ndim, "stride")]

    def storage_offset(self) -> builtins.int:
        return self.offset

    def element_size(self) -> builtins.int:
        return self.dtype.itemsize

    def is_floating_point(self) -> builtins.bool:
        return dt.is_floating(self.dtype)

    # cltensor's dtypes are real and its tensors dense
    is_meta = is_sparse = is_quantized = is_nested = is_xpu = is_mps = False

    @property
    def is_cpu(self) -> builtins.bool:
        """On a CPU OpenCL device (host memory): torch's "cpu"."""
        return self.storage.device.is_cpu

    @property
    def is_cuda(self) -> builtins.bool:
        """On an OpenCL GPU: torch's "cuda"."""
        return self.storage.device.is_gpu

    def is_complex(self) -> builtins.bool:
        return False

    def is_conj(self) -> builtins.bool:
        return False

    def is_neg(self) -> builtins.bool:
        return False

    def conj(self) -> ClTensor:
        """self: the conjugate of a real tensor (also conj_physical, resolve_conj, resolve_neg)."""
        return self

    conj_physical = conj_physical_ = resolve_conj = resolve_neg = conj

    @property
    def real(self) -> ClTensor:
        return self

    @property
    def imag(self) -> ClTensor:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes")

    def is_signed(self) -> builtins.bool:
        """False for bool and uint8, True for the other dtypes."""
        return self.dtype.is_signed

    def is_same_size(self, other: ClTensor) -> builtins.bool:
        return self.shape == tuple(other.shape)

    def is_nonzero(self) -> builtins.bool:
        """The truth value of a one-element tensor; more or fewer elements raise, as torch."""
        if self.numel() != 1:
            what = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous")
        return builtins.bool(self.item())

    def ndimension(self) -> builtins.int:
        return len(self.shape)

    @property
    def itemsize(self) -> builtins.int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> builtins.int:
        return self.numel() * self.dtype.itemsize

    def get_device(self) -> builtins.int:
        """torch's device ordinal: -1 on a CPU device, else the index of cltensor.device(x.device)
        ("cuda:1" gives 1)."""
        index = TorchDevice(self.device).index
        return -1 if self.device.is_cpu or index is None else index

    def is_contiguous(self, memory_format: str = CONTIGUOUS_FORMAT) -> builtins.bool:
        if memory_format == CHANNELS_LAST:
            return len(self.shape) == 4 and _is_channels_last(self.shape, self.strides)
        return _is_contiguous(self.shape, self.strides)

    def __len__(self) -> builtins.int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __hash__(self) -> builtins.int:
        return id(self)

    # ---- host transfer ------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A numpy copy of the data (waits for the queue)."""
        src = self if self.is_contiguous() else self.contiguous()
        host = np.empty(self.shape, self.dtype)
        if host.nbytes >= PREFAULT_MIN_BYTES:
            host.reshape(-1).view(np.uint8)[::PAGE_BYTES] = 0
        if host.size:
            self.device.enqueue(cl.enqueue_copy, host, src.storage.buf, is_blocking=False,
                                src_offset=src.offset * self.dtype.itemsize).wait()
        return dt.from_storage(host, self.dtype)

    def tolist(self) -> list | Scalar:
        return self.numpy().tolist()

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise ValueError(f"item(): the tensor has {self.numel()} elements, not 1")
        return self.numpy().reshape(()).item()

    def __bool__(self) -> builtins.bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is ambiguous")
        return builtins.bool(self.item())

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> builtins.int:
        return int(self.item())

    def __index__(self) -> builtins.int:
        if self.dtype.kind not in "iu":
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __array__(self, dtype: DTypeLike | None = None, copy: builtins.bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("np.asarray(tensor, copy=False): a tensor's data is on an OpenCL "
                             "device, so numpy always gets a copy")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self) -> str:
        values = self.numpy()
        if self.dtype is dt.bfloat16:  # ml_dtypes' arrays print without numpy's float style
            values = values.astype(np.float32)
        body = np.array2string(values, separator=", ", prefix="tensor(")
        plain = (dt.get_default_dtype(), dt.int64, dt.bool_)  # torch leaves these dtypes out
        extra = "" if self.dtype in plain else f", dtype={self.dtype!r}"
        return f"tensor({body}{extra}, device='cl:{self.device.index}')"

    def __iter__(self) -> Iterator[ClTensor]:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- conversion ---------------------------------------------------------------------------
    def to(self, *args: DTypeLike | DeviceLike | ClTensor, dtype: DTypeLike | None = None,
           device: DeviceLike | None = None, copy: builtins.bool = False, non_blocking: builtins.bool = False,
           memory_format: str | None = None) -> ClTensor:
        """to(dtype), to(device), to(device, dtype), to(other_tensor); a device as get_device
        takes it ("cpu", "cuda:0", cltensor.device(...), a Device). non_blocking is accepted:
        copies between devices go through the host and are done on return."""
        device, dtype = to_args(args, device, dtype)
        out = self
        if device is not None and get_device(device) is not self.device:
            out = out._move(get_device(device))
        if dtype is not None and dt.as_dtype(dtype) != out.dtype:
            out = out._cast(dt.as_dtype(dtype))
        if copy and out is self:
            out = self.clone()
        if memory_format not in (None, "preserve_format") and not out.is_contiguous(memory_format):
            out = out.contiguous(memory_format)
        return out

    def cpu(self, memory_format: str | None = None) -> ClTensor:
        """The tensor on the device "cpu" names (cltensor.device.TorchDevice): self if there."""
        return self.to("cpu", memory_format=memory_format)

    def cuda(self, device: DeviceLike | None = None, non_blocking: builtins.bool = False,
             memory_format: str | None = None) -> ClTensor:
        """The tensor on a GPU: the current one, or `device` (an index, "cuda:1", a device)."""
        target = TorchDevice("cuda", device) if isinstance(device, int) else device or "cuda"
        return self.to(target, memory_format=memory_format)

    def pin_memory(self, device: DeviceLike | None = None) -> ClTensor:
        """self: OpenCL moves data between host and device without page-locked copies."""
        return self

    def is_pinned(self, device: DeviceLike | None = None) -> builtins.bool:
        """True on a CPU device, whose buffers are host memory."""
        return self.storage.device.is_cpu

    def float(self) -> ClTensor:
        return self.to(dt.float32)

    def double(self) -> ClTensor:
        return self.to(dt.float64)

    def half(self) -> ClTensor:
        return self.to(dt.float16)

    def bfloat16(self) -> ClTensor:
        return self.to(dt.bfloat16)

    def int(self) -> ClTensor:
        return self.to(dt.int32)

    def long(self) -> ClTensor:
        return self.to(dt.int64)

    def bool(self) -> ClTensor:
        return self.to(dt.bool_)

    def byte(self) -> ClTensor:
        return self.to(dt.uint8)

    def char(self) -> ClTensor:
        return self.to(dt.int8)

    def short(self) -> ClTensor:
        return self.to(dt.int16)

    def type(self, dtype: DTypeLike | None = None) -> str | ClTensor:
        """The tensor type's name ("cltensor.FloatTensor"), or a copy converted to `dtype` (a
        dtype, a tensor type such as cltensor.LongTensor, or its name)."""
        if dtype is None:
            return f"cltensor.{self.dtype.tensor_type}"
        return self.to(dt.tensor_type_dtype(dtype))

    def contiguous(self, memory_format: str = CONTIGUOUS_FORMAT) -> ClTensor:
        if memory_format not in (CONTIGUOUS_FORMAT, CHANNELS_LAST):
            raise ValueError(f"contiguous: unknown memory_format {memory_format!r}")
        if memory_format == CHANNELS_LAST and self.ndim != 4:
            raise ValueError(f"contiguous: channels_last needs a 4-d NCHW tensor, got {self.ndim}-d")
        if self.is_contiguous(memory_format):
            return self
        return self.clone(memory_format=memory_format)

    def detach(self) -> ClTensor:
        """A view of the same data that records no gradient."""
        return self._view(self.shape, self.strides)

    @property
    def data(self) -> ClTensor:
        """The tensor's data without its autograd history (a view sharing storage)."""
        return self.detach()

    @data.setter
    def data(self, other: ClTensor) -> None:
        if not isinstance(other, ClTensor):
            raise TypeError(f"data must be a ClTensor, got {type(other).__name__}")
        self.storage, self.shape, self.strides = other.storage, other.shape, other.strides
        self.offset, self.dtype = other.offset, other.dtype

    def __deepcopy__(self, memo):
        out = self.detach().clone()
        if self.requires_grad and self.is_leaf:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    # ---- autograd -----------------------------------------------------------------------------
    @property
    def is_leaf(self) -> builtins.bool:
        return self.grad_fn is None

    def requires_grad_(self, requires_grad: builtins.bool = True) -> ClTensor:
        if self.grad_fn is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables; "
                               "use .detach() to get a leaf")
        if requires_grad and not dt.is_floating(self.dtype):
            raise TypeError(f"only tensors of floating point dtype can require gradients, "
                            f"got {self.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def retains_grad(self) -> builtins.bool:
        """Whether retain_grad() was called on this non-leaf tensor."""
        return self.grad_fn is not None and self.grad_fn.retained.get(self._output_nr) is self

    @property
    def output_nr(self) -> builtins.int:
        return self._output_nr

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in .grad after backward."""
        if self.grad_fn is None:
            if not self.requires_grad:
                raise RuntimeError("can't retain_grad on a tensor that doesn't require grad")
            return
        self.grad_fn.retained[self._output_nr] = self

    def register_hook(self, hook: Callable[[ClTensor], ClTensor | None]) -> RemovableHandle:
        """hook(grad) runs when backward computes the gradient w.r.t. this tensor (before a
        leaf's .grad takes it); a result other than None replaces the gradient. Returns a
        RemovableHandle.

        Example:
            h = w.register_hook(lambda g: g.clamp(-1, 1))   # clip w's gradient
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        _check_callable(hook, "register_hook")
        if self.grad_fn is None:
            registry = self.__dict__.setdefault("_grad_hooks", OrderedDict())
        else:
            if self.grad_fn.tensor_hooks is None:
                self.grad_fn.tensor_hooks = {}
            registry = self.grad_fn.tensor_hooks.setdefault(self._output_nr, OrderedDict())
        return RemovableHandle(registry, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[ClTensor], None]
                                           ) -> RemovableHandle:
        """hook(tensor) runs after backward has accumulated this leaf's .grad. Returns a
        RemovableHandle."""
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        _check_callable(hook, "register_post_accumulate_grad_hook")
        return RemovableHandle(self.__dict__.setdefault("_post_accumulate_hooks", OrderedDict()),
                               hook)

    def detach_(self) -> ClTensor:
        self.grad_fn = None
        self.requires_grad = False
        return self

    def zero_(self) -> ClTensor:
        return self.fill_(0)

    # ---- views --------------------------------------------------------------------------------
    def view(self, *shape: builtins.int | Sequence[builtins.int]) -> ClTensor:
        shape = _infer_shape(_size_args_view(shape), self.numel())
        strides = _view_strides(self.shape, self.strides, shape)
        if strides is None:
            raise RuntimeError(f"view size {shape} is not compatible with the tensor's shape "
                               f"{self.shape} and strides {self.strides}; use .reshape()")
        return self._view(shape, strides)

    def reshape(self, *shape: builtins.int | Sequence[builtins.int]) -> ClTensor:
        shape = _infer_shape(_size_args_view(shape), self.numel())
        strides = _view_strides(self.shape, self.strides, shape)
        if strides is None:
            return self.contiguous().view(shape)
        return self._view(shape, strides)

    def view_as(self, other: ClTensor) -> ClTensor:
        return self.view(other.shape)

    def reshape_as(self, other: ClTensor) -> ClTensor:
        return self.reshape(other.shape)

    def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> ClTensor:
        if self.ndim == 0:
            return self.reshape(1)
        s = _norm_dim(start_dim, self.ndim, "flatten")
        e = _norm_dim(end_dim, self.ndim, "flatten")
        if s > e:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def unflatten(self, dim: builtins.int, sizes: Sequence[builtins.int]) -> ClTensor:
        """Dim `dim` split into `sizes` (one of them may be -1), as torch.unflatten."""
        d = _norm_dim(dim, self.ndim, "unflatten")
        sizes = tuple(sizes)
        if not sizes:
            raise ValueError("unflatten: sizes must be non-empty")
        inner = _infer_shape(sizes, self.shape[d]) if -1 in sizes else sizes
        if math.prod(inner) != self.shape[d]:
            raise ValueError(f"unflatten: sizes {sizes} don't multiply up to the size of dim {d} "
                             f"({self.shape[d]}) in the input tensor of shape {self.shape}")
        return self.reshape(self.shape[:d] + tuple(inner) + self.shape[d + 1:])

    def permute(self, *dims: builtins.int | Sequence[builtins.int]) -> ClTensor:
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        if len(dims) != self.ndim:
            raise ValueError(f"permute: got {len(dims)} dims for a {self.ndim}-d tensor")
        dims = [_norm_dim(d, self.ndim, "permute") for d in dims]
        if len(set(dims)) != len(dims):
            raise ValueError(f"permute: repeated dim in {tuple(dims)}")
        return self._view([self.shape[d] for d in dims], [self.strides[d] for d in dims])

    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> ClTensor:
        order = list(range(self.ndim))
        a, b = _norm_dim(dim0, self.ndim, "transpose"), _norm_dim(dim1, self.ndim, "transpose")
        order[a], order[b] = order[b], order[a]
        return self.permute(order) if self.ndim else self

    def t(self) -> ClTensor:
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor with <= 2 dims, got {self.ndim}")
        return self.transpose(0, 1) if self.ndim == 2 else self

    @property
    def T(self) -> ClTensor:
        return self.permute(list(reversed(range(self.ndim))))

    @property
    def mT(self) -> ClTensor:
        return self.transpose(-2, -1)

    @property
    def mH(self) -> ClTensor:
        """The conjugate transpose of each matrix in the last two dims: mT for real tensors."""
        return self.adjoint()

    def adjoint(self) -> ClTensor:
        if self.ndim < 2:
            raise ValueError(f"adjoint: expects matrices or batches of matrices, got a "
                             f"{self.ndim}-d tensor")
        return self.transpose(-2, -1)

    @property
    def H(self) -> ClTensor:
        """The conjugate transpose of a matrix (2-d tensor): its transpose for real tensors."""
        if self.ndim not in (0, 2):
            raise ValueError(f"H: only supported on matrices (2-d tensors), got a {self.ndim}-d "
                             f"tensor; use mH for batches of matrices")
        return self.t()

    def expand(self, *shape: builtins.int | Sequence[builtins.int]) -> ClTensor:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if tuple(shape) == self.shape:
            return self._view(self.shape, self.strides)
        if len(shape) < self.ndim:
            raise ValueError(f"expand: the shape {tuple(shape)} has fewer dims than the "
                             f"tensor's {self.shape}")
        lead = len(shape) - self.ndim
        new_shape, new_strides = [], []
        for i, n in enumerate(shape):
            if i < lead:
                if n < 0:
                    raise ValueError(f"expand: -1 is not allowed in a new leading dim: {tuple(shape)}")
                new_shape.append(n)
                new_strides.append(0)
                continue
            have, st = self.shape[i - lead], self.strides[i - lead]
            n = have if n == -1 else n
            if have != n and have != 1:
                raise ValueError(f"expand: cannot expand shape {self.shape} to {tuple(shape)}")
            new_shape.append(n)
            new_strides.append(st if have == n else 0)
        return self._view(new_shape, new_strides)

    def expand_as(self, other: ClTensor) -> ClTensor:
        return self.expand(other.shape)

    def broadcast_to(self, shape: Sequence[builtins.int]) -> ClTensor:
        return self.expand(shape)

    def squeeze(self, dim: builtins.int | Sequence[builtins.int] | None = None) -> ClTensor:
        if dim is None:
            keep = [i for i, n in enumerate(self.shape) if n != 1]
        else:
            dims = dim if isinstance(dim, (tuple, list)) else (dim,)
            drop = {_norm_dim(d, self.ndim, "squeeze") for d in dims}
            keep = [i for i, n in enumerate(self.shape) if not (i in drop and n == 1)]
        return self._view([self.shape[i] for i in keep], [self.strides[i] for i in keep])

    def unsqueeze(self, dim: builtins.int) -> ClTensor:
        d = _norm_dim(dim, self.ndim + 1, "unsqueeze")
        st = self.strides[d] * self.shape[d] if d < self.ndim else 1
        return self._view(self.shape[:d] + (1,) + self.shape[d:],
                          self.strides[:d] + (st,) + self.strides[d:])

    def unfold(self, dimension: builtins.int, size: builtins.int, step: builtins.int) -> ClTensor:
        d = _norm_dim(dimension, self.ndim, "unfold")
        if size > self.shape[d] or step <= 0:
            raise ValueError(f"unfold: size {size} and step {step} do not fit dim of size {self.shape[d]}")
        n = (self.shape[d] - size) // step + 1
        return self._view(self.shape[:d] + (n,) + self.shape[d + 1:] + (size,),
                          self.strides[:d] + (self.strides[d] * step,) + self.strides[d + 1:]
                          + (self.strides[d],))

    def narrow(self, dim: builtins.int, start: builtins.int, length: builtins.int) -> ClTensor:
        d = _norm_dim(dim, self.ndim, "narrow")
        start = start + self.shape[d] if start < 0 else start
        if not (0 <= start and length >= 0 and start + length <= self.shape[d]):
            raise IndexError(f"narrow: start {start} and length {length} exceed dim {d} of "
                             f"size {self.shape[d]}")
        shape = list(self.shape)
        shape[d] = length
        return self._view(shape, self.strides, self.offset + start * self.strides[d])

    def select(self, dim: builtins.int, index: builtins.int) -> ClTensor:
        d = _norm_dim(dim, self.ndim, "select")
        n = self.shape[d]
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for dimension {d} with size {n}")
        index %= n
        return self._view(self.shape[:d] + self.shape[d + 1:], self.strides[:d] + self.strides[d + 1:],
                          self.offset + index * self.strides[d])

    def diagonal(self, offset: builtins.int = 0, dim1: builtins.int = 0, dim2: builtins.int = 1) -> ClTensor:
        """The diagonal of the matrices in dims dim1 and dim2 (offset > 0 above the main one,
        < 0 below), as a view sharing this tensor's storage: its dim comes last.

        Example:
            >>> cltensor.tensor([[1, 2], [3, 4]]).diagonal().tolist()
            [1, 4]
        """
        if not isinstance(offset, numbers.Integral) or isinstance(offset, bool):
            raise TypeError(f"diagonal: offset must be an int, got {type(offset).__name__}")
        d1, d2 = _norm_dim(dim1, self.ndim, "diagonal"), _norm_dim(dim2, self.ndim, "diagonal")
        if d1 == d2:
            raise RuntimeError(f"diagonal: diagonal dimensions cannot be identical {dim1}, {dim2}")
        (n1, n2), (s1, s2) = (self.shape[d1], self.shape[d2]), (self.strides[d1], self.strides[d2])
        offset = int(offset)
        length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
        start = (offset * s2 if offset >= 0 else -offset * s1) if length else 0
        rest = [d for d in range(self.ndim) if d not in (d1, d2)]
        return self._view(tuple(self.shape[d] for d in rest) + (length,),
                          tuple(self.strides[d] for d in rest) + (s1 + s2,), self.offset + start)

    # ---- indexing (x[key] and x[key] = v: ops/indexing/keys.py, from basic keys this view) ----
    def _basic_index(self, key):
        """Ints, slices, None and Ellipsis: a view."""
        return _basic_index(self, key)




def to_args(args, device, dtype):
    """(device, dtype) from the positional arguments of .to(): dtypes, devices, or a tensor
    giving both; the keyword values otherwise."""
    for a in args:
        if isinstance(a, ClTensor):
            device, dtype = a.device, a.dtype
        elif _is_dtype_like(a):
            dtype = a
        else:
            device = a
    return device, dtype


def _is_dtype_like(a):
    """A dtype, numpy scalar type or dtype name (supported or not: as_dtype names the
    unsupported ones), rather than a device."""
    if isinstance(a, (np.dtype, dt.DType)) or a in (builtins.float, builtins.int, builtins.bool):
        return True
    if isinstance(a, type) and issubclass(a, np.generic) or dt.is_torch_dtype(a):
        return True
    return isinstance(a, str) and (a in dt._ALIASES or (len(a) > 1 and a in np.sctypeDict))


def _basic_index(t, key):
    """Ints, slices (positive steps), None and Ellipsis: always a view."""
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis")
    if n_real > t.ndim:
        raise IndexError(f"too many indices for a tensor of dimension {t.ndim}")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (t.ndim - n_real))
        else:
            expanded.append(k)
    expanded.extend([slice(None)] * (t.ndim - sum(1 for k in expanded if k is not None)))
    shape, strides, offset, d = [], [], t.offset, 0
    for k in expanded:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        n, s = t.shape[d], t.strides[d]
        if isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("slice step must be positive")
            start, stop, step = k.indices(n)
            length = max(0, (stop - start + step - 1) // step)
            offset += start * s if length else 0
            shape.append(length)
            strides.append(s * step)
        else:
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {d} with size {n}")
            offset += (k % n) * s
        d += 1
    return ClTensor(t.storage, shape, strides, offset, t.dtype)
