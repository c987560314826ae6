"""torch.load(..., map_location="opencl[:N]"): torch moves each loaded CPU storage to the device
with storage.to(device), which needs an allocator the Python backend cannot register (it
crashed). A deserializer registered with torch.serialization copies the bytes into a cltensor
buffer and returns a storage labelled opencl:N (a DLPack placeholder's, see dlpack_device) that
carries it; set_ then makes the rebuilt tensors views of that buffer."""
import math

import numpy as np
import pyopencl as cl
import torch

from ..device import Storage
from ..tensor import ClTensor
from . import dlpack_device
from ._backend import NAME, aten, cl_device_for, index_of, np_dtype, restride


_UNREAD = 64


def _to_opencl(storage, location):
    """The CPU storage `storage` on the opencl device `location` names; None for other places."""
    if not location.startswith(NAME):
        return None
    device = cl_device_for(torch.device(location), "torch.load")
    nbytes = storage.nbytes()
    buffer = Storage(device, nbytes)
    if nbytes:
        host = np.frombuffer(bytes(storage.cpu()), dtype=np.uint8)
        device.enqueue(cl.enqueue_copy, buffer.buf, host, is_blocking=False).wait()
    # NOTE: torch.load refuses a storage of null data with bytes; the address is never read
    label = dlpack_device.placeholder(torch.bool, index_of(device), _UNREAD).untyped_storage()
    label._cl_storage = buffer
    return label


torch.serialization.register_package(5, lambda obj: None, _to_opencl)


@aten("set_.source_Storage_storage_offset")
def set_storage(self, source, storage_offset, size, stride=()):
    """self becomes the view (storage_offset, size, stride; none: contiguous) of source's
    device buffer."""
    buffer = getattr(source, "_cl_storage", None)
    if buffer is None:
        raise RuntimeError("set_: the source storage carries no opencl buffer")
    dtype = np_dtype(self.dtype, "set_")
    if not stride:
        stride = [math.prod(size[i + 1:]) for i in range(len(size))]
    return restride(self, ClTensor(buffer, tuple(size), tuple(stride), storage_offset, dtype))
