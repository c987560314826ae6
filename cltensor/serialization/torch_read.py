"""Reading PyTorch's checkpoint format (torch.save's zip archive) without torch, safely.

data.pkl is unpickled with an allowlist in the spirit of torch.load(weights_only=True): the
tensor rebuild functions, the storage classes, collections.OrderedDict and Counter, torch.Size,
set, complex and _codecs.encode for bytes. Any other global (a class of a pickled model, a torch
dtype, os.system, ...) is refused before it is looked up, so nothing in the file runs. Tensors
of one storage become views of one device buffer.
"""
import codecs
import pickle
from collections import Counter, OrderedDict

import numpy as np

from .. import dtypes as dt
from ..creation import from_bfloat16_bits, from_numpy
from ..size import Size
from ..tensor import ClTensor
from .allowlist import allowed as _user_allowed
from .torch_write import STORAGE_OF

_DTYPE_OF = {name: dtype for dtype, name in STORAGE_OF.items()}
_UNSUPPORTED = ("ComplexFloatStorage", "ComplexDoubleStorage", "QInt8Storage", "QUInt8Storage",
                "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage")


class RefusedGlobal(ValueError):
    """The pickle names a global outside the allowlist."""


class UnsupportedDtype(TypeError):
    """A storage of a dtype cltensor has no lossless form for."""


class _StorageType:
    """Stands for torch.<name>Storage in a persistent id."""

    def __init__(self, name):
        self.name = name


def _bytes(text, encoding="latin1"):
    # NOTE: protocol 2 pickles bytes as _codecs.encode(str, "latin1"); nothing else is allowed
    if not isinstance(text, str) or codecs.lookup(encoding).name != "iso8859-1":
        raise RefusedGlobal("_codecs.encode is allowed only as protocol 2's bytes form")
    return codecs.encode(text, "latin1")


def _size(*args):
    return Size(*args)


class _Call:
    """An allowed function, wrapped so that a BUILD opcode cannot set attributes on it."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh, loader):
        super().__init__(fh)
        self.loader = loader
        # NOTE: classes stay as they are (a BUILD on a class fails); functions are wrapped
        self.allowed = {
            "collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
            "builtins.set": set, "builtins.complex": complex,
            "__builtin__.set": set, "__builtin__.complex": complex,  # protocol 2's names
            **{name: _Call(fn) for name, fn in {
                "torch.Size": _size, "_codecs.encode": _bytes,
                "torch._utils._rebuild_tensor_v2": loader.rebuild_v2,
                "torch._utils._rebuild_tensor": loader.rebuild,
                "torch._utils._rebuild_parameter": loader.rebuild_parameter,
                "torch._utils._rebuild_parameter_with_state":
                    loader.rebuild_parameter_with_state}.items()},
            **_user_allowed()}  # add_safe_globals: the user's own trusted classes

    def find_class(self, module, name):
        full = f"{module}.{name}"
        if full in self.allowed:
            return self.allowed[full]
        if module in ("torch", "torch.storage") and name.endswith("Storage"):
            return _StorageType(name)
        raise RefusedGlobal(f"global {full!r}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and
                isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and
                isinstance(pid[3], str) and type(pid[4]) is int and pid[4] >= 0):
            raise ValueError(f"malformed storage reference {pid!r:.100}")
        return self.loader.storage(pid[1].name, pid[2], pid[3], pid[4])


class _Loader:
    """Storages read from the archive (one device buffer per key) and the tensors over them."""

    def __init__(self, zf, prefix, place):
        self.zf, self.prefix, self.place = zf, prefix, place
        self.names = set(zf.namelist())
        order = self._record("byteorder", b"little")
        if order not in (b"little", b"big"):
            raise ValueError(f"byteorder record is {order[:20]!r}")
        self.order = "<" if order == b"little" else ">"
        self.storages = {}  # key -> (storage type, device ClTensor over it)
        self.tensors = {}   # id -> (tensor, its attributes): no BUILD may change them

    def _record(self, name, default=None):
        full = f"{self.prefix}{name}"
        if full not in self.names:
            if default is None:
                raise ValueError(f"the record {full!r} is missing")
            return default
        return self.zf.read(full)

    def storage(self, type_name, key, location, numel):
        if key in self.storages:
            if self.storages[key][0] != type_name:
                raise ValueError(f"storage {key!r} is read as {type_name} and as "
                                 f"{self.storages[key][0]}")
            return self.storages[key][1]
        arr = self._host_array(type_name, key, numel)
        make = from_bfloat16_bits if type_name == "BFloat16Storage" else from_numpy
        base = self._remember(make(arr, device=self.place(arr, location)))
        self.storages[key] = (type_name, base)
        return base

    def _host_array(self, type_name, key, numel):
        if type_name == "BFloat16Storage":
            dtype = np.dtype(np.uint16)
        elif type_name in ("UntypedStorage", "TypedStorage"):
            dtype = np.dtype(np.uint8)
        elif type_name in _DTYPE_OF:
            dtype = _DTYPE_OF[type_name]
        elif type_name in _UNSUPPORTED:
            raise UnsupportedDtype(f"a {type_name} (cltensor has no such dtype: "
                                   f"{', '.join(str(d) for d in dt.DTYPES)})")
        else:
            raise ValueError(f"unknown storage type torch.{type_name}")
        data = self._record(f"data/{key}")
        if len(data) != numel * dtype.itemsize:
            raise ValueError(f"storage {key!r} holds {len(data)} bytes, not {numel} x "
                             f"{dtype.itemsize}")
        return np.frombuffer(data, dtype.newbyteorder(self.order)).astype(dtype, copy=False)

    def _remember(self, t):
        self.tensors[id(t)] = (t, dict(vars(t)))
        return t

    def rebuild(self, base, offset, size, stride):
        return self._remember(self._tensor(base, offset, size, stride))

    def _tensor(self, base, offset, size, stride):
        if not isinstance(base, ClTensor) or base.ndim != 1:
            raise ValueError("a tensor is rebuilt from something that is not a storage")
        shape, strides = _int_tuple(size, "size"), _int_tuple(stride, "stride")
        if type(offset) is not int or offset < 0 or len(shape) != len(strides):
            raise ValueError(f"bad tensor geometry: offset {offset!r}, size {size!r}, "
                             f"stride {stride!r}")
        if 0 not in shape and offset + sum((n - 1) * s for n, s in zip(shape, strides)) >= \
                base.shape[0]:
            raise ValueError(f"a tensor of size {shape}, stride {strides} at offset {offset} "
                             f"reaches past its storage of {base.shape[0]} elements")
        return ClTensor(base.storage, shape, strides, offset, base.dtype)

    def rebuild_v2(self, base, offset, size, stride, requires_grad, hooks, metadata=None):
        t = self._tensor(base, offset, size, stride)
        return self._remember(_with_grad(t, requires_grad, hooks, metadata))

    def rebuild_parameter(self, data, requires_grad, hooks):
        return self._remember(_with_grad(data, requires_grad, hooks))

    def rebuild_parameter_with_state(self, data, requires_grad, hooks, state):
        if state:
            raise ValueError("a parameter carries Python attributes, which cltensor does not load")
        return self._remember(_with_grad(data, requires_grad, hooks))

    def check_tensors(self):
        for t, attrs in self.tensors.values():
            now = vars(t)
            if now.keys() != attrs.keys() or any(now[k] is not v for k, v in attrs.items()):
                raise ValueError("the pickle sets attributes on a tensor (a BUILD opcode)")


def _int_tuple(values, what):
    if not isinstance(values, tuple) or \
            any(type(v) is not int or v < 0 for v in values):
        raise ValueError(f"tensor {what} {values!r:.80} is not a tuple of ints >= 0")
    return values


def _with_grad(t, requires_grad, hooks, metadata=None):
    if not isinstance(t, ClTensor) or type(requires_grad) is not bool or hooks or metadata:
        raise ValueError("a tensor is rebuilt with arguments cltensor does not load (backward "
                         "hooks, metadata or a non-tensor)")
    if requires_grad:
        if not t.is_floating_point():
            raise ValueError(f"a {t.dtype} tensor is marked as requiring grad")
        t.requires_grad_(True)
    return t


def archive_prefix(names):
    """'<folder>/' of a torch archive's data.pkl, '' at the top, None when it has none."""
    for name in names:
        if name == "data.pkl" or name.count("/") == 1 and name.endswith("/data.pkl"):
            return name[:-len("data.pkl")]
    return None


def read(zf, prefix, place):
    """The object a torch archive holds; place(array, location) gives a storage's device."""
    loader = _Loader(zf, prefix, place)
    with zf.open(f"{prefix}data.pkl") as fh:
        obj = _Unpickler(fh, loader).load()
    loader.check_tensors()
    return obj
