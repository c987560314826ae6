"""Tensors on opencl:N for N > 0, made through DLPack: torch maps DLPack's extension device type
(kDLExtDev) with id N to PrivateUse1:N, the only Python-reachable way to a tensor whose device
index is not 0. The tensor's data pointer is null and never read; its storage only labels the
device, while the device buffer hangs on the storage object as for opencl:0."""
import ctypes

import torch
from torch.utils import dlpack

EXT_DEV = 12  # DLDeviceType kDLExtDev
SPAN = 1 << 40  # elements the placeholder's storage claims, so that restride never grows it
# (DLDataTypeCode, bits) of the dtypes cltensor has
_CODES = {torch.float32: (2, 32), torch.float64: (2, 64), torch.int32: (0, 32),
          torch.int64: (0, 64), torch.bool: (6, 8), torch.float16: (2, 16),
          torch.bfloat16: (4, 16)}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", _DELETER)]
_LIVE = {}  # address -> the ctypes objects a capsule points at, until torch calls the deleter


@_DELETER
def _release(managed):
    _LIVE.pop(ctypes.addressof(managed.contents), None)


_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype = ctypes.py_object
_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def placeholder(dtype, index, address=None):
    """A 1-d tensor of dtype on opencl:<index> at a pointer never read (null by default: torch
    then sees no memory to overlap), SPAN elements long."""
    code, bits = _CODES[dtype]
    shape, strides = (ctypes.c_int64 * 1)(SPAN), (ctypes.c_int64 * 1)(1)
    managed = _Managed(_DLTensor(address, _Device(EXT_DEV, index), 1, _DataType(code, bits, 1),
                                 shape, strides, 0), None, _release)
    _LIVE[ctypes.addressof(managed)] = (managed, shape, strides)
    return dlpack.from_dlpack(_capsule(ctypes.addressof(managed), b"dltensor", None))
